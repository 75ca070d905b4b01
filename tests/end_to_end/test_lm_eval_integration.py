"""The real ``lm_eval`` console script, in subprocesses, as a user runs it."""
import json
import os
import re
import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from transformers import AutoTokenizer

from drift_eval.plugin.registration import task_folders
from support.commands import LM_EVAL, TINY_OPTIONS, last_line, results_of, run_lm_eval, samples_of

pytestmark = [pytest.mark.slow, pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")]


def test_hf_drift_end_to_end_writes_results_and_samples(smollm2_dir, tmp_path):
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "hf-drift", "--model_args",
              f"pretrained={smollm2_dir},compensation=const,strength=0.5,span=system",
              "--tasks", "drift_french_single", "--apply_chat_template", "--limit", "2",
              "--gen_kwargs", "max_gen_toks=32", "--batch_size", "2", "--device", "cpu",
              "--output_path", str(out), "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = results_of(out)
    task = res["results"]["drift_french_single"]
    for metric in ("fully_french", "french_fraction", "second_half_french", "echo_rate",
                   "line_pass_rate", "langdetect_french", "time_in_french", "language_scores"):
        assert 0.0 <= task[f"{metric},none"] <= 1.0
    assert "fully_french_stderr,none" in task and "time_in_french_stderr,none" in task
    survival = task["language_timeline,none"]  # the share of answers still French, per segment
    assert survival and all(1.0 >= a >= b >= 0.0 for a, b in zip(survival, survival[1:] + [0.0]))
    assert re.search(r"\|language_timeline +\|", r.stdout) and "segments," in r.stdout  # one short cell in the table
    assert res["config"]["model_args"]["compensation"] == "const"
    samples = samples_of(out, "drift_french_single")
    assert len(samples) == 2

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    for s in samples:
        assert isinstance(s["language_timeline"], list) and s["language_timeline"]
        assert len(s["language_scores"]) == len(s["language_timeline"]) and 0.0 <= s["time_in_french"] <= 1.0
        gen = s["arguments"]["gen_args_0"]["arg_1"]
        assert gen["min_new_tokens"] == gen["max_gen_toks"] == 32  # forced length
        assert s["arguments"]["gen_args_0"]["arg_0"].startswith("<|im_start|>system\n")
        n = len(tok(s["resps"][0][0], add_special_tokens=False)["input_ids"])
        assert 28 <= n <= 34, n  # ran to max_gen_toks (re-tokenising may shift a little)


@pytest.mark.parametrize("model_args, env, needle", [
    ("pretrained={d},compensation=bogus", {}, "error: unknown compensation 'bogus'"),
    ("pretrained={d},strength=-1", {}, "error: strength must be"),
    ("pretrained={d},gguf_file=missing.gguf", {}, "error: GGUF file not found"),
    ("pretrained={d}", {"DRIFT_LID_MODEL": "/nonexistent/lid.176.ftz"}, "error: fastText language model file not found"),
])
def test_bad_input_is_one_clear_line(smollm2_dir, model_args, env, needle):
    r = run_lm_eval(["--model", "hf-drift", "--model_args", model_args.format(d=smollm2_dir),
              "--tasks", "drift_french_single", "--limit", "1", "--device", "cpu"], env)
    assert r.returncode != 0
    assert last_line(r.stderr).startswith(needle), r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_drift_french_group_end_to_end_with_conversations(smollm2_dir, tmp_path):
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={smollm2_dir},compensation=log,strength=0.25",
              "--tasks", "drift_french", "--apply_chat_template", "--limit", "2",
              "--gen_kwargs", "max_gen_toks=12", "--batch_size", "2", "--device", "cpu",
              "--output_path", str(out), "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = results_of(out)
    group = res["results"]["drift_french"]
    assert 0.0 <= group["drift_score,none"] <= 1.0 and "drift_score_stderr,none" in group
    multi = res["results"]["drift_french_multiturn"]
    for t in range(1, 9):
        assert 0.0 <= multi[f"french_turn_{t},none"] <= 1.0
    for sample in samples_of(out, "drift_french_multiturn"):
        messages = json.loads(sample["resps"][0][0])  # the whole conversation
        assert [m["role"] for m in messages].count("assistant") == 8
        assert messages[0]["role"] == "system"


def test_task_listing_and_validation():
    r = run_lm_eval(["ls", "tasks"])
    assert r.returncode == 0
    for name in ("drift_french_single ", "drift_french_single_fr", "drift_french_multiturn ",
                 "drift_french_multiturn_reinject", "drift_french_multiturn_fixed", "drift_french ",
                 "position_bias ", "drift_alpha ", "drift_alpha_detail", "drift_alpha_paraphrase",
                 "drift_alpha_genre", "drift_alpha_translation", "drift_ppl", "accessibility ", "drift_decode ",
                 "drift_decode_detail", "drift_decode_translation"):
        assert name in r.stdout, name
    r = run_lm_eval(["validate", "--tasks", "drift_french,drift_french_single_fr,drift_french_multiturn_reinject,"
              "drift_french_multiturn_fixed,position_bias,drift_alpha,drift_ppl,accessibility,drift_decode"])
    assert r.returncode == 0, r.stdout + r.stderr


def test_startup_hook_is_installed_and_imports_nothing_heavy():
    code = ("import sys; import drift_eval._startup as s; "
            "print(any(type(f).__name__ == '_Finder' for f in sys.meta_path), "
            "'lm_eval' in sys.modules, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.split() == ["True", "False", "False"]
    # the finder was put there by the .pth file at start-up, before any import of ours
    r = subprocess.run([sys.executable, "-c", "import sys; print('drift_eval._startup' in sys.modules)"],
                       capture_output=True, text=True)
    assert r.stdout.strip() == "True"


def test_autoload_off_switch_leaves_lm_eval_alone():
    code = ("import sys, lm_eval.models, lm_eval.evaluator as e, lm_eval.tasks as t; "
            "from lm_eval.api.registry import model_registry; "
            "print('hf-drift' in model_registry, getattr(t.TaskManager, '_drift_entry_points', False) "
            "and getattr(e.evaluate, '_drift_wrapped', False), "
            "any(type(f).__name__ == '_Finder' for f in sys.meta_path))")
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, LM_EVAL_DRIFT_AUTOLOAD="0"))
    assert on.stdout.split() == ["True", "True", "True"], on.stderr[-2000:]
    assert off.stdout.split() == ["False", "False", "False"], off.stderr[-2000:]


def test_entry_points_are_declared():
    assert any(ep.value == "drift_eval.tasks" for ep in entry_points(group="lm_eval.tasks"))
    assert any(ep.name == "hf-drift" for ep in entry_points(group="lm_eval.models"))
    assert any(os.path.isfile(os.path.join(f, "drift_french", "drift_french_single.yaml")) for f in task_folders())


def test_position_bias_task_through_lm_eval(smollm2_dir, tmp_path):
    r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={smollm2_dir}", "--tasks", "position_bias",
              "--metadata", json.dumps(TINY_OPTIONS["position_bias"]), "--device", "cpu",
              "--output_path", str(tmp_path), "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = results_of(tmp_path)["results"]["position_bias"]
    for name in ("residual_aware", "attention_only", "abnar_zuidema"):
        assert 0.0 <= res[f"wasserstein_{name},none"] <= 1.0
    [sample] = samples_of(tmp_path, "position_bias")
    profiles = json.loads(sample["resps"][0][0])["profiles"]
    assert len(profiles["residual_aware"]) == 24
    r = run_lm_eval(["--model", "hf", "--model_args", f"pretrained={smollm2_dir}", "--tasks", "position_bias",
              "--device", "cpu"])
    assert r.returncode != 0
    assert last_line(r.stderr).startswith("error: position_bias reads attention weights"), r.stderr[-2000:]
