"""``drift_french`` on lm-eval's stock ``hf`` model, a chat template without a system role,
and the one-line errors for incompatible task/model pairs: the real ``lm_eval`` command."""
import json

import pytest
from transformers import AutoTokenizer

from support.commands import LM_EVAL, last_line, results_of, run_lm_eval, samples_of
from support.models import model_with_template

from drift_eval.plugin.answers import Answer
from drift_eval.plugin.chat import InstructionKeeping
from drift_eval.plugin.conversations import for_template
from drift_eval.plugin.model import HFDriftLM
from drift_eval.taskdata.french import system_prompt

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")]


@pytest.fixture(scope="module")
def no_template_dir(smollm2_dir, tmp_path_factory):
    return model_with_template(smollm2_dir, tmp_path_factory.mktemp("no_template") / "model", None)


def _system_prompt():
    return system_prompt("en")


def test_stock_hf_model_runs_the_drift_french_group(smollm2_dir, tmp_path):
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "hf", "--model_args", f"pretrained={smollm2_dir}", "--tasks", "drift_french",
                     "--apply_chat_template", "--limit", "2", "--gen_kwargs", "max_gen_toks=8", "--batch_size", "2",
                     "--device", "cpu", "--output_path", out, "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = results_of(out)["results"]
    assert 0.0 <= res["drift_french"]["drift_score,none"] <= 1.0 and "drift_score_stderr,none" in res["drift_french"]
    single = res["drift_french_single"]
    assert single["forced_length,none"] == 1.0 and single["instruction_placement,none"] == "system"
    for s in samples_of(out, "drift_french_single"):
        assert s["forced_length"] == 1.0 and s["instruction_placement"] == "system"
        assert 6 <= s["answer_tokens"] <= 9, s["answer_tokens"]  # 8 tokens, counted again from the text
    for s in samples_of(out, "drift_french_multiturn"):
        messages = json.loads(s["resps"][0][0])
        assert messages[0] == {"role": "system", "content": _system_prompt()}
        assert [m["role"] for m in messages].count("assistant") == 8 and s["instruction_placement"] == "system"


def test_template_without_system_role_gets_the_instruction_in_the_first_user_message(no_system_dir, tmp_path):
    with pytest.raises(Exception, match="System role not supported"):  # the template really rejects it
        AutoTokenizer.from_pretrained(no_system_dir).apply_chat_template(
            [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], tokenize=False)
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "hf", "--model_args", f"pretrained={no_system_dir}", "--tasks", "drift_french",
                     "--apply_chat_template", "--limit", "1", "--gen_kwargs", "max_gen_toks=6", "--batch_size", "1",
                     "--device", "cpu", "--output_path", out, "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = results_of(out)["results"]
    assert "drift_score,none" in res["drift_french"]
    assert res["drift_french_single"]["instruction_placement,none"] == "user"
    assert res["drift_french_multiturn"]["instruction_placement,none"] == "user"
    system = _system_prompt()
    [single] = samples_of(out, "drift_french_single")
    prompt = single["arguments"]["gen_args_0"]["arg_0"]
    assert prompt.startswith(f"<start_of_turn>user\n{system}") and single["instruction_placement"] == "user"
    [conv] = samples_of(out, "drift_french_multiturn")
    messages = json.loads(conv["resps"][0][0])  # the conversation as the model saw it
    assert "system" not in [m["role"] for m in messages]
    assert messages[0]["role"] == "user" and messages[0]["content"].startswith(system)
    assert sum(system in m["content"] for m in messages) == 1


def test_compensation_span_follows_the_instruction_into_the_user_message(no_system_dir):
    lm = HFDriftLM(pretrained=no_system_dir, compensation="log", span="system", device="cpu", batch_size=1)
    render = InstructionKeeping(lm.apply_chat_template)  # what the drift tasks render with
    system = _system_prompt()
    ctx = render([{"role": "system", "content": system}, {"role": "user", "content": "Hello there"}])
    assert ctx.startswith(f"<start_of_turn>user\n{system}\n\nHello there")
    ids, mask = lm.tok_batch_encode([ctx])
    (end,), (length,) = lm.span_rows([ctx], mask, {ctx: {"system_prompt": system}})
    span = lm.tokenizer.decode(ids[0, :end])
    assert span.endswith(system) or span.rstrip().endswith(system.rstrip()), span
    assert "Hello" not in span and 1 < end < length


@pytest.mark.parametrize("args, needle", [
    (["--model", "hf", "--model_args", "pretrained={no_template}", "--tasks", "drift_french_multiturn"],
     "error: drift_french_multiturn feeds the model's replies back as conversation history, which needs a chat "
     "template: hf has none"),
    (["--model", "hf", "--model_args", "pretrained={no_template}", "--tasks", "drift_french_single",
      "--apply_chat_template"],
     "error: drift_french_single --apply_chat_template needs a chat template: hf has none"),
    (["--model", "local-chat-completions", "--model_args", "model=m,base_url=http://127.0.0.1:9/v1/chat/completions",
      "--tasks", "position_bias,drift_french_single", "--apply_chat_template"],
     "error: position_bias reads attention weights and gradients inside the model, which only the 'hf-drift' "
     "model serves: run it with --model hf-drift"),
    (["--model", "local-chat-completions", "--model_args", "model=m,base_url=http://127.0.0.1:9/v1/chat/completions",
      "--tasks", "drift_french"],
     "error: drift_french_single on local-chat-completions needs --apply_chat_template"),
])
def test_incompatible_pairs_stop_with_one_line_before_any_work(no_template_dir, args, needle):
    r = run_lm_eval([a.format(no_template=no_template_dir) for a in args] + ["--limit", "1", "--device", "cpu"])
    assert r.returncode == 1, r.stderr[-2000:]
    assert last_line(r.stderr).startswith(needle), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert "Building contexts" not in r.stderr and "Running generate_until" not in r.stderr  # before any work


def test_a_reasoning_models_visible_answer_is_forced_and_its_trace_scored_beside_it(reasoning_dir, tmp_path):
    """lm-eval's ``think_end_token`` and ``enable_thinking`` on ``hf`` and ``hf-drift``, with a
    model whose tokenizer and chat template have reasoning markers (conftest
    ``reasoning_dir``): each forced answer takes two requests (docs/backends.md), so the
    visible answer itself runs to the length; the headline scores it alone, and the trace
    is scored beside it, in single turns and in every turn of a conversation."""
    runs = {}
    for model in ("hf", "hf-drift"):
        out = tmp_path / model
        tasks = "drift_french_single,drift_french_multiturn" if model == "hf" else "drift_french_single"
        r = run_lm_eval(["--model", model, "--model_args",
                         f"pretrained={reasoning_dir},think_end_token=</think>,enable_thinking=True",
                         "--tasks", tasks, "--apply_chat_template", "--limit", "2", "--gen_kwargs", "max_gen_toks=32",
                         "--batch_size", "2", "--device", "cpu", "--output_path", out, "--log_samples"])
        assert r.returncode == 0, r.stderr[-3000:]
        runs[model] = out
        samples = samples_of(out, "drift_french_single")
        for s in samples:
            answer = s["resps"][0][0]
            assert s["forced_length"] == 1.0 and abs(s["answer_tokens"] - 32) <= 1, (s["answer_tokens"], answer)
            assert "</think>" not in answer and s["trace_tokens"] > 0, s
            assert s["trace_kept"] in (0.0, 1.0) and s["trace_left"] in (0.0, 1.0)
            assert s["drift_score"] == s["fully_french"]  # the visible answer alone
        # one reasoning the model ended (at its first comma), one it never ended within the
        # 32 tokens, which the plugin ended by writing the marker after it
        assert sorted(s["trace_ended"] for s in samples) == [0.0, 1.0], [s["resps"] for s in samples]
    by_doc = {s["doc_id"]: s["resps"] for s in samples_of(runs["hf"], "drift_french_single")}
    assert {s["doc_id"]: s["resps"] for s in samples_of(runs["hf-drift"], "drift_french_single")} == by_doc
    for s in samples_of(runs["hf"], "drift_french_multiturn"):
        replies = [m for m in json.loads(s["resps"][0][0]) if m["role"] == "assistant"]
        traced = [m for m in replies if "trace" in m]
        assert traced and all(m["trace_tokens"] > 0 and "</think>" not in m["content"] for m in traced), replies
        assert s["trace_kept"] in (0.0, 1.0) and s["trace_tokens"] > 0


def test_the_history_gives_the_template_each_reply_as_the_model_wrote_it(smollm2_dir, reasoning_dir):
    """A conversation's next prompt renders each earlier reply with its reasoning before it
    (``conversations.for_template``): a template that strips reasoning (``reasoning_dir``'s,
    like Qwen3's) renders the history as if there were none; one that keeps content as it
    is (the bundled model's own) keeps it."""
    reply = Answer("Bonjour à vous.", trace="Plan it", trace_raw="Plan it</think>")
    history = [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hello"},
               {"role": "assistant", "content": reply}, {"role": "user", "content": "And now?"}]
    plain = [dict(m, content=str(m["content"])) for m in history]
    strips = AutoTokenizer.from_pretrained(reasoning_dir)
    keeps = AutoTokenizer.from_pretrained(smollm2_dir)
    render = lambda tok, messages: tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert render(strips, for_template(history)) == render(strips, plain)
    assert "Plan it</think>Bonjour à vous." in render(keeps, for_template(history))
    assert for_template(history)[:2] == history[:2] and history[2]["content"] is reply  # the caller's list unchanged
