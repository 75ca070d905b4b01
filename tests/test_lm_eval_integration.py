"""The real ``lm_eval`` console script, in subprocesses, as a user runs it."""
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

def _console_script(name):
    """The script installed beside this interpreter (its venv), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.isfile(here) else shutil.which(name)


LM_EVAL = _console_script("lm_eval")
pytestmark = pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")


def _run(args, env_extra=None, timeout=900):
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    env.update(env_extra or {})
    return subprocess.run([LM_EVAL, *args], capture_output=True, text=True, env=env, timeout=timeout)


def _results(out):
    [res_file] = glob.glob(str(out / "*" / "results_*.json"))
    return json.load(open(res_file))


def _samples(out, task):
    [samples_file] = glob.glob(str(out / "*" / f"samples_{task}_*.jsonl"))
    return [json.loads(line) for line in open(samples_file)]


def _last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def test_hf_drift_end_to_end_writes_results_and_samples(smollm2_dir, tmp_path):
    out = tmp_path / "out"
    r = _run(["--model", "hf-drift", "--model_args",
              f"pretrained={smollm2_dir},compensation=const,strength=0.5,span=system",
              "--tasks", "drift_french_single", "--apply_chat_template", "--limit", "2",
              "--gen_kwargs", "max_gen_toks=32", "--batch_size", "2", "--device", "cpu",
              "--output_path", str(out), "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = _results(out)
    task = res["results"]["drift_french_single"]
    for metric in ("fully_french", "french_fraction", "second_half_french", "echo_rate",
                   "line_pass_rate", "langdetect_french", "language_timeline"):
        assert 0.0 <= task[f"{metric},none"] <= 1.0
    assert "fully_french_stderr,none" in task
    assert res["config"]["model_args"]["compensation"] == "const"
    samples = _samples(out, "drift_french_single")
    assert len(samples) == 2
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    for s in samples:
        assert isinstance(s["language_timeline"], list) and s["language_timeline"]
        gen = s["arguments"]["gen_args_0"]["arg_1"]
        assert gen["min_new_tokens"] == gen["max_gen_toks"] == 32  # forced length
        assert s["arguments"]["gen_args_0"]["arg_0"].startswith("<|im_start|>system\n")
        n = len(tok(s["resps"][0][0], add_special_tokens=False)["input_ids"])
        assert 28 <= n <= 34, n  # ran to max_gen_toks (re-tokenising may shift a little)


def test_stock_hf_model_runs_the_task(smollm2_dir, tmp_path):
    r = _run(["--model", "hf", "--model_args", f"pretrained={smollm2_dir}", "--tasks", "drift_french_single",
              "--limit", "1", "--gen_kwargs", "max_gen_toks=16", "--device", "cpu",
              "--output_path", str(tmp_path)])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "fully_french" in r.stdout


@pytest.mark.parametrize("model_args, env, needle", [
    ("pretrained={d},compensation=bogus", {}, "error: unknown compensation 'bogus'"),
    ("pretrained={d},strength=-1", {}, "error: strength must be"),
    ("pretrained={d},gguf_file=missing.gguf", {}, "error: GGUF file not found"),
    ("pretrained={d}", {"DRIFT_LID_MODEL": "/nonexistent/lid.176.ftz"}, "error: fastText language model file not found"),
])
def test_bad_input_is_one_clear_line(smollm2_dir, model_args, env, needle):
    r = _run(["--model", "hf-drift", "--model_args", model_args.format(d=smollm2_dir),
              "--tasks", "drift_french_single", "--limit", "1", "--device", "cpu"], env)
    assert r.returncode != 0
    assert _last_line(r.stderr).startswith(needle), r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_drift_french_group_end_to_end_with_conversations(smollm2_dir, tmp_path):
    out = tmp_path / "out"
    r = _run(["--model", "hf-drift", "--model_args", f"pretrained={smollm2_dir},compensation=log,strength=0.25",
              "--tasks", "drift_french", "--apply_chat_template", "--limit", "2",
              "--gen_kwargs", "max_gen_toks=12", "--batch_size", "2", "--device", "cpu",
              "--output_path", str(out), "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = _results(out)
    group = res["results"]["drift_french"]
    assert 0.0 <= group["drift_score,none"] <= 1.0 and "drift_score_stderr,none" in group
    multi = res["results"]["drift_french_multiturn"]
    for t in range(1, 9):
        assert 0.0 <= multi[f"french_turn_{t},none"] <= 1.0
    for sample in _samples(out, "drift_french_multiturn"):
        messages = json.loads(sample["resps"][0][0])  # the whole conversation
        assert [m["role"] for m in messages].count("assistant") == 8
        assert messages[0]["role"] == "system"


def test_conversation_task_on_another_model_names_hf_drift(smollm2_dir):
    r = _run(["--model", "hf", "--model_args", f"pretrained={smollm2_dir}", "--tasks", "drift_french_multiturn",
              "--limit", "1", "--device", "cpu"])
    assert r.returncode != 0
    line = _last_line(r.stderr)
    assert line.startswith("error: drift_french_multiturn") and "--model hf-drift" in line, r.stderr[-2000:]


def test_task_listing_and_validation():
    r = _run(["ls", "tasks"])
    assert r.returncode == 0
    for name in ("drift_french_single ", "drift_french_single_fr", "drift_french_multiturn ",
                 "drift_french_multiturn_reinject", "drift_french_multiturn_fixed", "drift_french ",
                 "position_bias ", "drift_alpha ", "drift_alpha_detail", "drift_alpha_paraphrase",
                 "drift_alpha_genre", "drift_alpha_translation", "drift_ppl", "accessibility "):
        assert name in r.stdout, name
    r = _run(["validate", "--tasks", "drift_french,drift_french_single_fr,drift_french_multiturn_reinject,"
              "drift_french_multiturn_fixed,position_bias,drift_alpha,drift_ppl,accessibility"])
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


def test_entry_points_are_declared():
    from importlib.metadata import entry_points

    from drift_eval.registration import task_folders

    assert any(ep.value == "drift_eval.tasks" for ep in entry_points(group="lm_eval.tasks"))
    assert any(ep.name == "hf-drift" for ep in entry_points(group="lm_eval.models"))
    assert any(os.path.isfile(os.path.join(f, "drift_french", "drift_french_single.yaml")) for f in task_folders())


def test_position_bias_task_through_lm_eval(smollm2_dir, tmp_path):
    r = _run(["--model", "hf-drift", "--model_args", f"pretrained={smollm2_dir}", "--tasks", "position_bias",
              "--metadata", '{"length": 24, "sequences": 2}', "--device", "cpu",
              "--output_path", str(tmp_path), "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = _results(tmp_path)["results"]["position_bias"]
    for name in ("residual_aware", "attention_only", "abnar_zuidema"):
        assert 0.0 <= res[f"wasserstein_{name},none"] <= 1.0
    [sample] = _samples(tmp_path, "position_bias")
    profiles = json.loads(sample["resps"][0][0])["profiles"]
    assert len(profiles["residual_aware"]) == 24
    r = _run(["--model", "hf", "--model_args", f"pretrained={smollm2_dir}", "--tasks", "position_bias",
              "--device", "cpu"])
    assert r.returncode != 0
    assert _last_line(r.stderr).startswith("error: position_bias reads attention weights"), r.stderr[-2000:]
