"""``drift_french`` on lm-eval's stock ``hf`` model, a chat template without a system role,
and the one-line errors for incompatible task/model pairs: the real ``lm_eval`` command."""
import json

import pytest

from helpers import LM_EVAL, last_line, model_with_template, results_of, run_lm_eval, samples_of

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")]


@pytest.fixture(scope="module")
def no_template_dir(smollm2_dir, tmp_path_factory):
    return model_with_template(smollm2_dir, tmp_path_factory.mktemp("no_template") / "model", None)


def _system_prompt():
    from drift_eval.tasks.drift_french.data import system_prompt

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
    from transformers import AutoTokenizer

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
    from drift_eval.plugin.chat import InstructionKeeping
    from drift_eval.plugin.model import HFDriftLM

    lm = HFDriftLM(pretrained=no_system_dir, compensation="log", span="system", device="cpu", batch_size=1)
    render = InstructionKeeping(lm.apply_chat_template)  # what the drift tasks render with
    system = _system_prompt()
    ctx = render([{"role": "system", "content": system}, {"role": "user", "content": "Hello there"}])
    assert ctx.startswith(f"<start_of_turn>user\n{system}\n\nHello there")
    lm._docs_by_context = {ctx: {"system_prompt": system}}
    ids, mask = lm.tok_batch_encode([ctx])
    (end,), (length,) = lm._span_rows([ctx], mask)
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


def test_a_reasoning_models_answer_cut_short_by_its_trace_is_not_called_forced(smollm2_dir, tmp_path):
    """lm-eval's ``think_end_token`` on ``hf``: lm-eval scores only what follows the last
    end-of-reasoning marker, while the forced minimum held back trace and answer together.
    The bundled model has no reasoning markers, so the comma stands in for one: each answer
    is then the text after its last comma, and one that lost tokens to its "trace" must say
    it was not forced to the length."""
    from transformers import AutoTokenizer

    comma = AutoTokenizer.from_pretrained(smollm2_dir).convert_tokens_to_ids(",")
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "hf", "--model_args", f"pretrained={smollm2_dir},think_end_token={comma}",
                     "--tasks", "drift_french_single", "--apply_chat_template", "--limit", "2",
                     "--gen_kwargs", "max_gen_toks=48", "--batch_size", "2", "--device", "cpu",
                     "--output_path", out, "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]  # the check before the run counts the trace with the answer
    samples = samples_of(out, "drift_french_single")
    cut = [s for s in samples if s["answer_tokens"] < 40]
    assert cut, [s["resps"] for s in samples]  # 48 tokens of prose hold a comma
    for s in samples:
        assert s["forced_length"] == (0.0 if s in cut else 1.0), (s["answer_tokens"], s["resps"])
        if s in cut:  # the "trace" is scored on its own: its length, and whether it kept to French
            assert s["trace_tokens"] > 0 and abs(s["trace_tokens"] + s["answer_tokens"] - 48) <= 2, s
            assert s["trace_kept"] in (0.0, 1.0) and s["trace_left"] in (0.0, 1.0)
        else:
            assert s["trace_tokens"] is None and s["trace_kept"] is None
    # the headline scores the visible answer only
    assert all(s["drift_score"] == s["fully_french"] for s in samples)
