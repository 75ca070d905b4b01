"""Forced length that really forces, on a model that ends its turn on a token other than its
EOS (the bundled SmolLM2, its end of text moved to ``<|endoftext|>`` while its chat template
still ends turns with ``<|im_end|>``): lm-eval's ``hf``, ``hf-drift``, and llama-cpp-python's
server on a copy of the GGUF file with the same change. Every check asks for more tokens
than the model writes unforced, on a prompt with a short natural answer; the check before a
run stops a backend that does not force."""
import json
import os

import pytest
import requests
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM

from drift_eval.errors import DriftUsageError
from drift_eval.plugin import backends, forcing, wrapper
from drift_eval.plugin.chat import end_of_turn_ids
from drift_eval.plugin.forcing import FORCING_TOKENS
from drift_eval.plugin.local_models import smollm2_gguf
from drift_eval.plugin.model import HFDriftLM
from drift_eval.taskdata.french import read_requests, system_prompt
from support.commands import LM_EVAL, results_of, run_lm_eval, samples_of
from support.models import gguf_with_eos, model_with_eos
from support.servers import LlamaServer

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")]

IM_END, ENDOFTEXT = "<|im_end|>", "<|endoftext|>"
SHORT_DOCS = (4, 3, 1)  # drift_french_single requests this model answers in a few dozen tokens on the server


@pytest.fixture(scope="module")
def eos_moved_dir(smollm2_dir, tmp_path_factory):
    return model_with_eos(smollm2_dir, tmp_path_factory.mktemp("eos_moved") / "model", ENDOFTEXT)


@pytest.fixture(scope="module")
def eos_moved_server(tmp_path_factory):
    folder, name = smollm2_gguf()
    tmp = tmp_path_factory.mktemp("eos_moved_gguf")
    gguf = gguf_with_eos(os.path.join(folder, name), tmp / "smollm2-eos-endoftext.gguf", 0)
    with LlamaServer(gguf, tmp / "server.log") as srv:
        yield srv


def _probe(model, chat=True):
    """The check's request (its natural answer is one word) forced to the check's length,
    through the wrapper a drift run's model gets."""
    drift = wrapper.DriftLM(model, {"forcing"}, chat)
    messages = [{"role": "system", "content": forcing.FORCING_SYSTEM}, {"role": "user", "content": forcing.FORCING_PROMPT}]
    gen = {"until": [], "max_gen_toks": forcing.FORCING_TOKENS, "min_new_tokens": forcing.FORCING_TOKENS,
           "do_sample": False}
    req = Instance("generate_until", {"system_prompt": forcing.FORCING_SYSTEM},
                   (drift.render(messages, add_generation_prompt=True), gen), 0, metadata=("forcing", 0, 1))
    return drift, req


def test_hf_holds_back_the_templates_end_of_turn_token_as_well_as_its_eos(eos_moved_dir):
    hf = HFLM(pretrained=eos_moved_dir, device="cpu", batch_size=1)
    tok = hf.tokenizer
    im_end, endoftext = tok.convert_tokens_to_ids(IM_END), tok.convert_tokens_to_ids(ENDOFTEXT)
    assert tok.eos_token_id == endoftext and hf.model.generation_config.eos_token_id == endoftext
    assert end_of_turn_ids(hf.apply_chat_template, tok) == [im_end]
    drift, req = _probe(hf)
    assert drift.end_ids == sorted({im_end, endoftext})
    sent, asked = backends.backend_kwargs(req.args[1], drift.backend, drift.end_ids)
    ids = torch.tensor([tok(req.args[0], add_special_tokens=False)["input_ids"]])

    def generated(eos):
        out = hf.model.generate(ids, max_new_tokens=asked, min_new_tokens=asked, eos_token_id=eos, do_sample=False,
                                pad_token_id=tok.pad_token_id)
        return out[0, ids.shape[1]:].tolist()

    unforced = hf.model.generate(ids, max_new_tokens=asked, do_sample=False, eos_token_id=[im_end, endoftext],
                                 pad_token_id=tok.pad_token_id)[0, ids.shape[1]:].tolist()
    assert len(unforced) < asked  # the model would end its answer early: forcing is tested
    assert im_end in generated([endoftext])  # holding back the EOS alone: the turn ends inside the answer
    forced = generated(sent["eos_token_id"])
    assert len(forced) == asked and not {im_end, endoftext} & set(forced)
    [answer] = drift.generate_drift([req], disable_tqdm=True)
    assert answer.meta["forced_length"] is True and answer.meta["tokens"] >= 0.9 * asked


def test_hf_drift_watches_every_end_token_for_the_natural_end(eos_moved_dir):
    drift, req = _probe(HFDriftLM(pretrained=eos_moved_dir, device="cpu", batch_size=1))
    [answer] = drift.generate_drift([req], disable_tqdm=True)
    assert answer.meta["tokens"] == FORCING_TOKENS and answer.meta["forced_length"] is True
    assert isinstance(answer.meta["natural_end"], int) and answer.meta["natural_end"] < FORCING_TOKENS


def test_the_server_is_forced_by_the_bias_where_min_tokens_alone_would_not(eos_moved_server, tmp_path):
    """llama-cpp-python's min_tokens holds back the model's EOS only: this model ends its
    turn early all the same. drift_french_single runs to the forced length on it, on a
    request that min_tokens alone lets end early.

    The server reuses the longest cached prefix of each prompt, which changes its floating
    point sums, and this model's greedy answers are long or short by a hair: so the request
    is found by asking, among the requests it answers shortly, not fixed in advance."""
    chat, asked, bank = eos_moved_server.url, 256, read_requests()

    def min_tokens_alone(doc):
        messages = [{"role": "system", "content": system_prompt("en")},
                    {"role": "user", "content": bank[doc]["request"]}]
        r = requests.post(chat, json={"messages": messages, "max_tokens": asked, "min_tokens": asked,
                                      "temperature": 0}, timeout=300).json()
        return r["usage"]["completion_tokens"], r["choices"][0]["finish_reason"]

    tried = {doc: min_tokens_alone(doc) for doc in SHORT_DOCS}
    ended = [doc for doc, (tokens, finish) in tried.items() if finish == "stop" and tokens < asked]
    assert ended, f"min_tokens={asked} forced every request it was tried on: {tried}"
    doc = ended[0]  # min_tokens alone: the turn ended on <|im_end|>, short of the length asked for
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "local-chat-completions",
                     "--model_args", f"model={eos_moved_server.alias},base_url={chat},num_concurrent=1,max_retries=1",
                     "--tasks", "drift_french_single", "--apply_chat_template", "--samples",
                     json.dumps({"drift_french_single": [doc]}), "--gen_kwargs", f"max_gen_toks={asked}",
                     "--output_path", out, "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:] + eos_moved_server.tail()
    [s] = samples_of(out, "drift_french_single")
    assert s["answer_tokens"] == float(asked) and s["forced_length"] == 1.0 and s["natural_end_observed"] == 0.0
    assert results_of(out)["configs"]["drift_french_single"]["metadata"]["answer_length"] == "forced"


def test_the_check_before_a_run_stops_a_server_that_does_not_force(eos_moved_server):
    """The same server, its end tokens unknown to the plugin (as on a server without a
    tokenize endpoint): min_tokens alone, and the check says so in one line."""
    from lm_eval.models.openai_completions import LocalChatCompletion  # deferred, start-up: loads aiohttp

    model = LocalChatCompletion(base_url=eos_moved_server.url, model=eos_moved_server.alias, max_retries=1)
    drift = wrapper.DriftLM(model, {"drift_french_single"})
    drift.__dict__["end_ids"] = []  # what the plugin knows of a server that names no end token
    with pytest.raises(DriftUsageError) as exc:
        forcing.check_forcing(drift, ["drift_french_single"])
    line = str(exc.value)
    assert line.startswith("drift_french_single force answers to a length, but local-chat-completions did not force "
                           "it: asked to reply to 'Reply with the single word: yes' with at least 64 tokens"), line
    assert '"min_tokens": 64' in line and "named none of its end-of-turn tokens" in line
    assert line.endswith("or run them unforced on purpose with --gen_kwargs min_new_tokens=0 (the results then say "
                         "unforced)") and "\n" not in line
