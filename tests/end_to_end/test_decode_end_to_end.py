"""drift_decode and drift_alpha's decomposition through the real ``lm_eval`` command, and
``drift-eval decode`` / ``drift-eval alpha --decompose`` (tiny sizes)."""
import json

import pytest

from support.commands import TINY_OPTIONS, last_line, results_of, run_drift_eval, run_lm_eval, samples_of

pytestmark = pytest.mark.slow


def test_drift_decode_through_lm_eval(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={tiny_model_dir}", "--tasks", "drift_decode",
                     "--metadata", json.dumps(TINY_OPTIONS["drift_decode"]), "--batch_size", "5", "--device", "cpu",
                     "--output_path", str(out), "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = results_of(out)["results"]
    for axis in ("detail", "paraphrase", "genre", "translation"):
        t = res[f"drift_decode_{axis}"]
        assert 0.0 <= t["hidden_accuracy,none"] <= 1.0 and 0.0 <= t["text_accuracy,none"] <= 1.0
        grid = t["hidden_accuracy_grid,none"]
        assert len(grid) == 2 and all(len(row) == 2 for row in grid)  # 2 layers x t = 16, 32
        assert t["hidden_accuracy_best,none"] == max(row[-1] for row in grid)
        assert 0 <= t["switches_variant,none"] <= 5
    answer = json.loads(samples_of(out, "drift_decode_translation")[0]["resps"][0][0])
    assert answer["centres"] == [16, 32] and answer["predictions"] == 10
    assert answer["settings"]["samples"] == 5 and answer["settings"]["temperature"] == 1.0
    assert answer["languages"]["variant"]["prompt"] == "fr" and len(answer["languages"]["variant"]["majority"]) == 5
    report = tmp_path / "report.md"
    r = run_drift_eval(["report", out, "-o", report])
    assert r.returncode == 0, r.stderr[-2000:]
    text = report.read_text(encoding="utf-8")
    assert "## What free generation still carries (decodability)" in text and "| `translation` | 32 |" in text


def test_drift_decode_on_another_model_names_hf_drift(tiny_model_dir):
    r = run_lm_eval(["--model", "hf", "--model_args", f"pretrained={tiny_model_dir}", "--tasks", "drift_decode_detail",
                     "--metadata", json.dumps(TINY_OPTIONS["drift_decode"]), "--device", "cpu"])
    assert r.returncode != 0
    line = last_line(r.stderr)
    assert line.startswith("error: drift_decode_detail") and "--model hf-drift" in line, r.stderr[-2000:]


def test_alpha_decomposition_through_lm_eval(tiny_model_dir, tmp_path):
    meta = {"num_scenes": 2, "n_continuations": 3, "continuation_length": 71, "bootstrap_iters": 20, "decompose": True}
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={tiny_model_dir},attention=eager",
                     "--tasks", "drift_alpha_translation", "--metadata", json.dumps(meta), "--batch_size", "4",
                     "--device", "cpu", "--output_path", str(out), "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    a = results_of(out)["results"]["drift_alpha_translation"]
    measured = a["alpha_measured_layers,none"]
    assert measured == pytest.approx([a["alpha_l00,none"], a["alpha_l01,none"]])
    gaps = [abs(p - m) for p, m in zip(a["alpha_predicted_layers,none"], measured)]
    assert a["alpha_gap,none"] == pytest.approx(max(gaps))
    assert len(a["alpha_direct_layers,none"]) == 2 and 0.0 <= a["relay_share,none"] <= 1.0
    answer = json.loads(samples_of(out, "drift_alpha_translation")[0]["resps"][0][0])
    assert answer["parts"]["names"] == ["residual", "direct", "relay", "mlp"]
    report = tmp_path / "report.html"
    r = run_drift_eval(["report", out, "-o", report])
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'id="direct-relay"' in report.read_text(encoding="utf-8")
    # without eager attention: one line saying what to pass
    r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={tiny_model_dir}",
                     "--tasks", "drift_alpha_translation", "--metadata", json.dumps(meta), "--device", "cpu"])
    assert r.returncode != 0
    assert "needs eager attention" in last_line(r.stderr) and "attention=eager" in last_line(r.stderr)


def test_decode_cli_resumes_from_its_output(tiny_model_dir, tmp_path):
    out = tmp_path / "decode.json"
    args = ["decode", "--model", tiny_model_dir, "--axes", "detail,translation", "--samples", "5", "--length", "16",
            "--threads", "1", "--output", out]
    r = run_drift_eval([*args, "--scenes", "1"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "axis translation (1 scene(s), 10 trajectories per cell)" in r.stdout
    first = json.loads(out.read_text(encoding="utf-8"))
    assert list(first["scenes"]) == ["scene_01"] and first["settings"]["samples"] == 5
    r = run_drift_eval([*args, "--scenes", "2", "--json"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "1 scene(s)" not in r.stderr  # scene_01 was not sampled again
    summary = json.loads(r.stdout)
    assert summary["detail"]["scenes"] == 2 and summary["detail"]["predictions"] == 20
    both = json.loads(out.read_text(encoding="utf-8"))
    assert both["scenes"]["scene_01"] == first["scenes"]["scene_01"]
    r = run_drift_eval([*args, "--scenes", "2", "--temperature", "0.7"])
    assert r.returncode == 2
    assert last_line(r.stderr) == f"drift-eval: error: {out} holds a run with other settings; give another " \
                                  "--output or remove it"


@pytest.mark.parametrize("args, needle", [
    (["--samples", "3"], "samples must be at least folds (5)"),
    (["--axes", "colour"], "--axes takes names from"),
    (["--scenes", "0"], "argument --scenes: must be a whole number >= 1, got 0"),
    (["--scenes", "21"], "--scenes must be between 1 and 20"),
    (["--temperature", "0"], "argument --temperature: must be a number > 0, got '0'"),
    (["--compensation", "loud"], "unknown compensation 'loud'"),
])
def test_decode_cli_bad_input_is_one_line(tiny_model_dir, args, needle):
    r = run_drift_eval(["decode", "--model", tiny_model_dir, *args])
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("drift-eval: error: ") and needle in lines[0], r.stderr


def test_alpha_cli_decomposition(tiny_model_dir):
    r = run_drift_eval(["alpha", "--model", tiny_model_dir, "--scenes", "2", "--axes", "detail", "--n-continuations", 3,
                        "--octaves", 3, "--bootstrap-iters", 20, "--threads", 1, "--decompose"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "direct / relay decomposition (max |predicted - measured| =" in r.stdout
    assert "layer  direct   relay   resid    mlp    predicted  measured" in r.stdout
