"""Per-backend request mapping, instruction placement and data-parallel glue
(``drift_eval.plugin.backends``, ``chat``, ``wrapper``), checked against each backend's own
request schema."""
import json
import multiprocessing
import os
import time
from types import SimpleNamespace

import pytest
from llama_cpp.server.types import CreateChatCompletionRequest
from lm_eval.api.instance import Instance
from lm_eval.api.model import LM
from lm_eval.models.utils import normalize_gen_kwargs

from support.places import REPO

from drift_eval.conversation import ConversationSpec
from drift_eval.files import build_lock, write_text_atomic
from drift_eval.plugin import backends as b, conversations
from drift_eval.plugin import chat, run_check, wrapper
from drift_eval.plugin.answers import Answer
from drift_eval.plugin.request_types import CONVERSATION

# What ForcedLengthTask sends (drift_french_single.yaml, with --gen_kwargs max_gen_toks=64).
FORCED = {"until": [], "max_gen_toks": 64, "do_sample": False, "temperature": 0.0, "min_new_tokens": 64}

# vLLM's documented SamplingParams fields (vllm.SamplingParams, docs.vllm.ai "Sampling
# Parameters", v0.8.3 signature; the same names are in vllm/sampling_params.py today).
VLLM_SAMPLING_PARAMS = {
    "n", "best_of", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p",
    "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "min_tokens", "logprobs",
    "prompt_logprobs", "detokenize", "skip_special_tokens", "spaces_between_special_tokens",
    "logits_processors", "include_stop_str_in_output", "truncate_prompt_tokens", "output_kind",
    "guided_decoding", "logit_bias", "allowed_token_ids", "extra_args", "bad_words",
}
# SGLang's runtime sampling params (python/sglang/srt/sampling/sampling_params.py, API fields).
SGLANG_SAMPLING_PARAMS = {
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema",
    "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens",
    "no_stop_trim", "custom_params", "stream_interval", "logit_bias", "sampling_seed",
}
# The OpenAI service's chat-completions request body (API reference, "Create chat completion").
OPENAI_CHAT_FIELDS = {
    "messages", "model", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "reasoning_effort", "response_format", "safety_identifier", "seed",
    "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
    "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
}


def _cls(name):
    return type(name, (), {})


@pytest.mark.parametrize("cls_name, kwarg", [
    ("HFLM", "min_new_tokens"), ("HFDriftLM", "min_new_tokens"), ("VLLM", "min_tokens"),
    ("SGLangLM", "min_new_tokens"), ("LocalChatCompletion", "min_tokens"), ("LocalCompletionsAPI", "min_tokens"),
    ("OpenAIChatCompletion", None), ("OpenAICompletionsAPI", None), ("SomeOtherLM", None),
])
def test_forced_length_goes_to_each_backend_under_its_own_name(cls_name, kwarg):
    sent, asked = b.backend_kwargs(FORCED, b.backend_of(_cls(cls_name)))
    assert asked == 64
    assert "min_new_tokens" not in sent or kwarg == "min_new_tokens"
    forcing = {k: v for k, v in sent.items() if k in ("min_new_tokens", "min_tokens")}
    assert forcing == ({kwarg: 64} if kwarg else {})
    assert FORCED["min_new_tokens"] == 64  # the task's kwargs are not changed


def test_backend_is_found_along_the_class_hierarchy():
    hflm = _cls("HFLM")
    sub = type("MyLM", (hflm,), {})
    azure = type("AzureOpenaiChatCompletionsLM", (_cls("OpenAIChatCompletion"),), {})
    assert b.backend_of(sub).length_kwarg == "min_new_tokens"
    assert b.backend_of(azure).length_kwarg is None and b.backend_of(azure).chat_api


def test_forced_length_is_capped_at_max_gen_toks_and_zero_means_not_forced():
    sent, asked = b.backend_kwargs(dict(FORCED, min_new_tokens=500), b.BACKENDS["VLLM"])
    assert sent["min_tokens"] == asked == 64
    sent, asked = b.backend_kwargs(dict(FORCED, min_new_tokens=0), b.BACKENDS["VLLM"])
    assert asked == 0 and "min_tokens" not in sent and "min_new_tokens" not in sent


def test_vllm_sampling_params_get_only_documented_fields():
    """lm-eval's VLLM builds ``SamplingParams(max_tokens=..., stop=..., **kwargs)`` from the
    kwargs that ``normalize_gen_kwargs`` leaves (vllm cannot be installed here)."""
    sent, _ = b.backend_kwargs(FORCED, b.BACKENDS["VLLM"])
    kwargs = normalize_gen_kwargs(sent, default_max_gen_toks=256)
    max_tokens = kwargs.pop("max_gen_toks")
    kwargs.pop("until"), kwargs.pop("do_sample", None)  # VLLM.modify_gen_kwargs: stop=, and dropped
    assert set(kwargs) <= VLLM_SAMPLING_PARAMS, set(kwargs) - VLLM_SAMPLING_PARAMS
    assert kwargs["min_tokens"] == max_tokens == 64


def test_sglang_sampling_params_get_only_documented_fields():
    sent, _ = b.backend_kwargs(FORCED, b.BACKENDS["SGLangLM"])
    kwargs = {k: v for k, v in sent.items() if k not in ("until", "max_gen_toks", "do_sample")}
    assert set(kwargs) | {"max_new_tokens", "stop"} <= SGLANG_SAMPLING_PARAMS
    assert kwargs["min_new_tokens"] == 64


@pytest.fixture
def api_models(monkeypatch):
    pytest.importorskip("tenacity")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    # deferred, start-up: loads aiohttp
    from lm_eval.models.openai_completions import LocalChatCompletion, OpenAIChatCompletion

    return (LocalChatCompletion(base_url="http://127.0.0.1:9/v1/chat/completions", model="m"),
            OpenAIChatCompletion(model="gpt-4o-mini"))


def test_chat_servers_get_min_tokens_only_where_their_schema_has_it(api_models):
    local, openai = api_models
    messages = [{"role": "user", "content": "hi"}]
    sent, _ = b.backend_kwargs(FORCED, b.backend_of(local))
    payload = local._create_payload(messages, generate=True, gen_kwargs=dict(sent))

    assert set(payload) <= set(CreateChatCompletionRequest.model_fields), set(payload)
    assert payload["min_tokens"] == payload["max_tokens"] == 64
    sent, _ = b.backend_kwargs(FORCED, b.backend_of(openai))
    payload = openai._create_payload(messages, generate=True, gen_kwargs=dict(sent))
    assert set(payload) <= OPENAI_CHAT_FIELDS, set(payload) - OPENAI_CHAT_FIELDS
    assert payload["max_completion_tokens"] == 64


def test_a_llama_cpp_server_is_forced_by_a_bias_on_every_end_token_instead_of_min_tokens(api_models):
    """llama-cpp-python's server holds back one end token with ``min_tokens`` (and drops
    every logits processor when ``min_tokens`` comes with a logit bias): the plugin sends a
    bias of -100 on each end-of-turn token the server named, and max_tokens, alone."""
    local, _ = api_models
    sent, asked = b.backend_kwargs(FORCED, b.backend_of(local), end_ids=[2, 0])
    payload = local._create_payload([{"role": "user", "content": "hi"}], generate=True, gen_kwargs=dict(sent))

    assert set(payload) <= set(CreateChatCompletionRequest.model_fields), set(payload)
    assert payload["logit_bias"] == {"0": -100.0, "2": -100.0} and "min_tokens" not in payload
    assert payload["max_tokens"] == asked == 64
    user = b.backend_kwargs(dict(FORCED, logit_bias={"2": 5.0}), b.backend_of(local), end_ids=[2, 0])[0]
    assert user["logit_bias"] == {"0": -100.0, "2": 5.0}  # a bias the user set is kept as it is


@pytest.mark.parametrize("cls_name, kwarg, want", [
    ("HFLM", "eos_token_id", [0, 2, 7]), ("HFDriftLM", "eos_token_id", [0, 2, 7]), ("VLLM", "stop_token_ids", [0, 2, 7]),
    ("SGLangLM", "stop_token_ids", [0, 2, 7]),
])
def test_the_end_of_turn_tokens_go_with_a_forced_length_under_each_backends_name(cls_name, kwarg, want):
    backend = b.backend_of(_cls(cls_name))
    sent, _ = b.backend_kwargs(dict(FORCED, **{kwarg: 7}), backend, end_ids=[2, 0])
    assert sent[kwarg] == want and "logit_bias" not in sent  # added to what was there
    assert kwarg not in b.backend_kwargs(dict(FORCED, min_new_tokens=0), backend, end_ids=[2, 0])[0]  # unforced
    assert b.backend_kwargs(FORCED, b.backend_of(_cls("OpenAIChatCompletion")), end_ids=[2, 0])[0].keys() == \
        {k for k in FORCED if k != "min_new_tokens"}  # a backend that cannot force gets nothing


def test_chat_responses_carry_the_servers_token_count_through_the_drift_calls_stand_in_only(api_models):
    local, _ = api_models
    resp = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Bonjour"}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3}}
    before, state = dict(vars(type(local))), dict(vars(local))
    [text] = b.ServerCounts(local).parse_generations(outputs=[resp])
    assert text == "Bonjour" and text.meta == {"tokens": 3}
    [plain] = local.parse_generations(outputs=[resp])  # the model's own: lm-eval's, untouched
    assert type(plain) is str and vars(local) == state and dict(vars(type(local))) == before


def test_a_servers_reasoning_is_the_trace_and_its_count_comes_off_the_answers(api_models):
    local, _ = api_models
    parsed = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Bonjour à tous",
                                                    "reasoning_content": " The user wants French. "}}],
              "usage": {"completion_tokens": 30, "completion_tokens_details": {"reasoning_tokens": 26}}}
    [text] = b.ServerCounts(local).parse_generations(outputs=[parsed])
    assert text == "Bonjour à tous" and text.meta == {"tokens": 4, "trace": "The user wants French.",
                                                       "trace_tokens": 26}
    usage = b.backend_of(local)
    assert b.answer(local, usage, text, 4, "system").meta["forced_length"] is True
    assert b.answer(local, usage, text, 30, "system").meta["forced_length"] is False  # the trace took the rest
    # one count for trace and answer, and no tokenizer to count the answer: not called forced
    del parsed["usage"]["completion_tokens_details"]
    [text] = b.with_server_counts(["Bonjour à tous"], [parsed], local)
    assert text.meta["tokens"] is None and text.meta["trace"] == "The user wants French."
    assert b.answer(local, usage, text, 4, "system").meta["forced_length"] is False
    # no reasoning parser on the server: lm-eval cut the content at think_end_token
    model = SimpleNamespace(think_end_token="</think>", tokenizer=SimpleNamespace(
        encode=lambda text, add_special_tokens=False: text.split()))
    raw = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "<think>Plan it</think>Bonjour"}}],
           "usage": {"completion_tokens": 12}}
    [text] = b.with_server_counts(["Bonjour"], [raw], model)
    assert text.meta == {"tokens": 1, "trace": "Plan it", "trace_raw": "<think>Plan it</think>"}


def test_answers_record_forced_length_tokens_and_placement():
    usage = b.BACKENDS["LocalChatCompletion"]
    assert b.answer(None, usage, Answer("x", tokens=64), 64, "system").meta == {
        "tokens": 64, "forced_length": True, "instruction_placement": "system"}
    # a server that reported fewer tokens than asked did not force the length
    assert b.answer(None, usage, Answer("x", tokens=12), 64, "user").meta["forced_length"] is False
    assert b.answer(None, b.BACKENDS["OpenAIChatCompletion"], Answer("x", tokens=64), 64, None).meta == {
        "tokens": 64, "forced_length": False}
    # what the model itself reported stays (hf-drift's own forced length and natural end)
    own = Answer("x", tokens=64, forced_length=True, natural_end=20)
    assert b.answer(None, b.BACKENDS["HFDriftLM"], own, 64, "system").meta["natural_end"] == 20
    assert b.answer(None, b.BACKENDS["HFLM"], "plain text", 0, "plain").meta == {
        "tokens": None, "instruction_placement": "plain"}


def test_the_instruction_moves_into_the_first_user_message_only_without_a_system_role():
    msgs = [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Salut"}, {"role": "user", "content": "More"}]
    assert chat.keep_instruction(msgs, True) is msgs
    folded = chat.keep_instruction(msgs, False)
    assert folded == [{"role": "user", "content": "Answer in French.\n\nHi"},
                      {"role": "assistant", "content": "Salut"}, {"role": "user", "content": "More"}]
    assert msgs[1]["content"] == "Hi"  # the caller's history is not changed
    assert chat.keep_instruction([{"role": "system", "content": "S"}], False) == [{"role": "user", "content": "S"}]
    assert chat.keep_instruction(msgs[1:], False) == msgs[1:]


def test_placement_is_read_from_chat_messages():
    from lm_eval.models.api_models import JsonChatStr  # deferred, start-up: loads aiohttp

    def msgs(*pairs):
        return JsonChatStr(json.dumps([{"role": r, "content": c} for r, c in pairs]))

    fr = "Réponds en français."
    assert b.placement(msgs(("system", fr), ("user", "Hi")), fr, chat=True, system_role=True) == "system"
    assert b.placement(msgs(("user", f"{fr}\n\nHi")), fr, chat=True, system_role=False) == "user"
    assert b.placement(msgs(("user", "Hi")), fr, chat=True, system_role=True) is None
    # a rendered string: the template's system role says which turn holds it
    assert b.placement(f"<s>{fr}</s><u>Hi</u>", fr, chat=True, system_role=True) == "system"
    assert b.placement(f"<u>{fr}\n\nHi</u>", fr, chat=True, system_role=False) == "user"
    assert b.placement(f"{fr}\n\nHi", fr, chat=False, system_role=True) == "plain"


def test_answer_placement_survives_the_json_round_trip_and_is_validated():
    a = Answer("x", tokens=3, instruction_placement="user")
    assert Answer.from_json(a.to_json()).meta == a.meta
    with pytest.raises(ValueError):
        Answer.from_json({"text": "x", "instruction_placement": "nowhere"})


def test_gathered_metrics_of_a_rank_without_documents_get_every_key():
    rank0 = {"position_bias": {("wasserstein", "none"): [0.1]}, "drift_french_single": {("fully_french", "none"): [1.0]}}
    rank1 = {"position_bias": {}, "drift_french_single": {("fully_french", "none"): [0.0]}}
    out = b.fill_gathered_metrics([rank0, rank1])
    assert out[1]["position_bias"] == {("wasserstein", "none"): []}
    assert out[0]["drift_french_single"] == {("fully_french", "none"): [1.0]}
    samples = [{"t": [{"doc_id": 0}]}, {"t": []}]
    assert b.fill_gathered_metrics(samples) is samples  # logged samples pass through as they are


def test_every_drift_task_builds_requests_on_a_rank_without_documents(task_manager):
    """Each task on rank 1 of 2 with one document: rank 1 builds the first document's
    requests (so that it runs the same request types as rank 0) but scores none."""
    tasks = run_check.tasks_of(task_manager.load(["drift_french_single", "drift_french_multiturn", "position_bias",
                                                  "accessibility", "drift_ppl", "drift_alpha_detail"]))
    assert len(tasks) == 6
    for name, task in tasks.items():
        task.build_all_requests(limit=1, rank=1, world_size=2)
        assert task.instances and {i.doc_id for i in task.instances} == {0}, name
        assert list(task.doc_iterator(rank=1, limit=1, world_size=2)) == [], name


def test_request_types_are_read_from_the_tasks(task_manager):
    tasks = run_check.tasks_of(task_manager.load(["drift_french_single", "drift_french_multiturn", "position_bias"]))
    assert {n: run_check.request_types(t, n) for n, t in tasks.items()} == {
        "drift_french_single": {"generate_until"}, "drift_french_multiturn": {"generate_conversation"},
        "position_bias": {"position_profile"}}


def test_readme_backends_table_matches_the_mapping():
    """Every row of the README's "Backends" table says what BACKENDS and the request
    fallbacks do (the end-to-end tests prove hf, hf-drift and local-chat-completions)."""
    root = str(REPO)
    with open(os.path.join(root, "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text.split("## Backends", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| `")]
    by_model = {backend.model: backend for backend in b.BACKENDS.values()}
    seen = set()
    for backend_cell, single, conversations, forced, compensation, internals in rows:
        names = [n.strip("` ") for n in backend_cell.split(",")]
        for name in names:
            backend = by_model[name]
            seen.add(name)
            assert single.startswith("yes") and conversations.startswith("yes"), name
            if backend.length_kwarg:
                assert forced.startswith("yes") and f"`{backend.length_kwarg}`" in forced, name
                assert f"`{backend.end_kwarg}`" in forced, name  # and how the end-of-turn tokens go with it
            else:
                assert forced.startswith("no"), name
            assert compensation.startswith("yes" if name == "hf-drift" else "no"), name
            assert internals.startswith("yes" if name == "hf-drift" else "no"), name
    assert {"hf-drift", "hf", "vllm", "sglang", "local-chat-completions", "openai-chat-completions"} <= seen


def _build_once(path, log):
    """One process's attempt to build ``path`` (what the GGUF and calibration caches do)."""
    with build_lock(path):
        if not os.path.isfile(path):
            with open(log, "a") as fh:
                fh.write("built\n")
            time.sleep(0.5)  # the other process arrives meanwhile and waits for the lock
            write_text_atomic(path, "done")
    with open(path) as fh:
        return fh.read()


@pytest.mark.slow
def test_a_cache_wanted_by_two_processes_at_once_is_built_once(tmp_path):
    target, log = str(tmp_path / "cache" / "file.json"), str(tmp_path / "log")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        assert pool.starmap(_build_once, [(target, log), (target, log)]) == ["done", "done"]
    with open(log) as fh:
        assert fh.read() == "built\n"
    assert sorted(os.listdir(tmp_path / "cache")) == ["file.json", "file.json.lock"]  # no temporary file left


def test_the_conversation_bar_shows_every_turn_also_when_turns_end_at_once(capsys):
    """Turns replayed from an answer cache end within microseconds; the bar still counts each."""
    class Instant(LM):
        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

        def apply_chat_template(self, chat_history, add_generation_prompt=True):
            return "\n".join(f"{m['role']}: {m['content']}" for m in chat_history)

        def generate_until(self, requests, disable_tqdm=False):
            return ["réponse" for _ in requests]

    spec = ConversationSpec("Answer only in French.", ["u1", "u2", "u3"])
    req = Instance(CONVERSATION.name, {}, (spec.to_json(), {"until": [], "max_gen_toks": 8}), 0)
    [history] = conversations.serve(wrapper.DriftLM(Instant(), set()), [req])
    assert json.loads(history)[-1] == {"role": "assistant", "content": "réponse"}
    shown = capsys.readouterr().err
    assert all(f"{k}/3" in shown for k in (1, 2, 3)), shown
