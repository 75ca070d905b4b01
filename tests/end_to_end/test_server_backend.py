"""``drift_french`` against a real OpenAI-compatible server: llama-cpp-python's, serving
the bundled SmolLM2-135M-Instruct GGUF on 127.0.0.1, through lm-eval's
``local-chat-completions`` (which forces the length with ``min_tokens``) and
``openai-chat-completions`` (which cannot, and says so)."""
import dataclasses
import json
import re
import urllib.request

import pytest
from lm_eval.api.model import CachingLM
from lm_eval.tasks import TaskManager

from drift_eval.decide.results import load_output
from drift_eval.plugin.backends import FORCE_KWARG
from drift_eval.plugin.wrapper import DriftLM
from support.commands import LM_EVAL, last_line, results_of, run_lm_eval, same_as_without_the_plugin, samples_of

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")]


def _model_args(server) -> str:
    return f"model={server.alias},base_url={server.url},num_concurrent=1,max_retries=1"


def test_local_chat_completions_runs_the_drift_french_group_with_forced_length(llama_server, tmp_path):
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "local-chat-completions",
                     "--model_args", _model_args(llama_server),
                     "--tasks", "drift_french", "--apply_chat_template", "--limit", "2",
                     "--gen_kwargs", "max_gen_toks=16", "--output_path", out, "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:] + llama_server.tail()
    res = results_of(out)["results"]
    assert 0.0 <= res["drift_french"]["drift_score,none"] <= 1.0 and "drift_score_stderr,none" in res["drift_french"]
    single = res["drift_french_single"]
    assert single["forced_length,none"] == 1.0 and single["answer_tokens,none"] == 16.0
    for s in samples_of(out, "drift_french_single"):
        assert s["forced_length"] == 1.0 and s["answer_tokens"] == 16.0 and s["instruction_placement"] == "system"
        assert s["arguments"]["gen_args_0"]["arg_1"]["min_new_tokens"] == 16  # the task's own request
    for s in samples_of(out, "drift_french_multiturn"):
        messages = json.loads(s["resps"][0][0])
        assert messages[0]["role"] == "system" and [m["role"] for m in messages].count("assistant") == 8


def test_openai_chat_completions_cannot_force_the_length_and_stops_before_the_first_document(llama_server, tmp_path):
    """The OpenAI API has no minimum length: the run stops before any document with one
    line saying what to do; run unforced on purpose, it is labelled unforced."""
    args = ["--model", "openai-chat-completions",
            "--model_args", _model_args(llama_server),
            "--tasks", "drift_french_single", "--apply_chat_template", "--limit", "1"]
    key = {"OPENAI_API_KEY": "unused-by-a-local-server"}
    r = run_lm_eval([*args, "--gen_kwargs", "max_gen_toks=16"], env_extra=key)
    assert r.returncode != 0
    assert last_line(r.stderr) == (
        "error: drift_french_single force answers to a length, but openai-chat-completions cannot force a minimum "
        "length (its requests have no such field): use a backend that can (docs/backends.md); or run them unforced "
        "on purpose with --gen_kwargs min_new_tokens=0 (the results then say unforced)"), r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "Requesting API" not in r.stderr  # before any document
    out = tmp_path / "out"
    r = run_lm_eval([*args, "--gen_kwargs", "max_gen_toks=16,min_new_tokens=0", "--output_path", out, "--log_samples"],
                    env_extra=key)
    assert r.returncode == 0, r.stderr[-3000:] + llama_server.tail()
    res = results_of(out)
    assert res["results"]["drift_french_single"]["forced_length,none"] == 0.0
    assert res["configs"]["drift_french_single"]["metadata"]["answer_length"] == "unforced"
    [s] = samples_of(out, "drift_french_single")
    assert s["forced_length"] == 0.0 and isinstance(s["answer_tokens"], float) and s["answer_tokens"] >= 1
    assert "fully_french" in s and s["instruction_placement"] == "system"

    run = load_output(out).run("none")
    assert run.provenance["length"] == "drift_french_single: unforced on purpose, at most 16 tokens"


def test_a_non_drift_task_scores_the_same_with_and_without_the_plugin(llama_server, tmp_path):
    """The plain task alone with the plugin off and on, and beside drift_french_single in
    one run, against the same server: the same prompts, answers and scores."""
    want = same_as_without_the_plugin(
        tmp_path, "local-chat-completions", _model_args(llama_server),
        "Always answer in French.")
    for sample in want:  # the chat messages lm-eval sent (its JsonChatStr, logged as [prompt]), system first
        [prompt] = sample["arguments"]["gen_args_0"]["arg_0"]
        assert json.loads(prompt)[0] == {"role": "system", "content": "Always answer in French."}, prompt


def test_the_server_reuses_a_conversation_prefix_and_says_whether_it_reports_cached_tokens(llama_server,
                                                                                         record_property):
    """A conversation's second turn against its first: llama-cpp-python keeps the last
    prompt of its one slot and evaluates only what follows the shared prefix. Its usage
    block (0.3.16) carries no count of cached prompt tokens (OpenAI's
    ``prompt_tokens_details.cached_tokens``, which vLLM and SGLang return): the count is in
    its log instead. Both are recorded (docs/backends.md, "Conversations on servers")."""
    def ask(messages):
        body = json.dumps({"model": llama_server.alias, "messages": messages, "max_tokens": 8,
                           "temperature": 0}).encode()
        req = urllib.request.Request(llama_server.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.load(r)

    first = [{"role": "system", "content": "Answer only in French."},
             {"role": "user", "content": "Tell me about Paris in detail: its history, its food and its museums."}]
    one = ask(first)
    second = first + [{"role": "assistant", "content": one["choices"][0]["message"]["content"]},
                      {"role": "user", "content": "And what about Lyon?"}]
    before = len(llama_server.tail(10 ** 9))
    two = ask(second)
    reported = (two["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
    hits = [int(n) for n in re.findall(r"(\d+) prefix-match hit", llama_server.tail(10 ** 9)[before:])]
    record_property("cached_tokens_reported", reported)
    record_property("prefix_match_hits", hits)
    assert reported is None  # 0.3.16 reports none; a newer server that does should update docs/backends.md
    assert hits and max(hits) >= one["usage"]["prompt_tokens"] - 1  # the first turn's prompt was reused
    assert two["usage"]["prompt_tokens"] > one["usage"]["prompt_tokens"]


@pytest.mark.parametrize("concurrent", [1, 2])
def test_the_servers_counts_reach_the_answers_with_the_model_unchanged_also_through_lm_evals_cache(llama_server,
                                                                                                 tmp_path, concurrent):
    """A drift call on a chat-completions server gives each answer the server's own token
    count (``backends.ServerCounts``: a stand-in for the call), on lm-eval's synchronous
    and concurrent paths and through its ``CachingLM`` (``--use_cache``); the model object
    and its class gain or change no attribute. Without the count an answer of a model with
    no tokenizer could not be called forced."""
    from lm_eval.models.openai_completions import LocalChatCompletion  # deferred, start-up: loads aiohttp

    model = LocalChatCompletion(base_url=llama_server.url, model=llama_server.alias, num_concurrent=concurrent,
                                max_retries=1)
    task = TaskManager().load(["drift_french_single"])["tasks"]["drift_french_single"]
    task.build_all_requests(limit=2, rank=0, world_size=1, apply_chat_template=True,
                            chat_template=model.apply_chat_template)
    requests = [dataclasses.replace(i, arguments=(i.args[0], {**i.args[1], "max_gen_toks": 8, FORCE_KWARG: 8}))
                for i in task.instances]
    # the model's own first call sets what lm-eval caches on it (its header, its end string)
    model.generate_until([dataclasses.replace(requests[0], arguments=(requests[0].args[0], {"max_gen_toks": 2}))])
    for lm in (model, CachingLM(model, str(tmp_path / "cache.db"))):
        state, cls_state = dict(vars(model)), dict(vars(type(model)))
        answers = DriftLM(lm, {"drift_french_single"}).generate_until(requests)
        assert [a.meta.get("tokens") for a in answers] == [8, 8], [a.meta for a in answers]
        assert all(a.meta["forced_length"] is True for a in answers)
        assert vars(model) == state and dict(vars(type(model))) == cls_state
