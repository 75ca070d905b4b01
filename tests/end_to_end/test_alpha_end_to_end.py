"""drift_alpha / drift_ppl through the real ``lm_eval`` command, and ``drift-eval alpha``."""
import json
import statistics
import subprocess
import sys

import pytest

from drift_eval.cli import main
from support.commands import LM_EVAL, TINY_OPTIONS, results_of, run_lm_eval, samples_of

pytestmark = pytest.mark.slow


@pytest.mark.skipif(LM_EVAL is None, reason="the lm_eval console script is not installed")
def test_alpha_and_perplexity_tasks_through_lm_eval(smollm2_dir, tmp_path):
    out = tmp_path / "out"
    r = run_lm_eval(["--model", "hf-drift", "--model_args", f"pretrained={smollm2_dir},compensation=log,strength=1",
              "--tasks", "drift_alpha_detail,drift_ppl", "--metadata", json.dumps(TINY_OPTIONS["drift_alpha"]),
              "--batch_size", "4",
              "--device", "cpu", "--output_path", str(out), "--log_samples"])
    assert r.returncode == 0, r.stderr[-3000:]
    res = results_of(out)["results"]
    a = res["drift_alpha_detail"]
    layers = [a[f"alpha_l{i:02d},none"] for i in range(30)]
    assert all(isinstance(v, float) for v in layers) and "alpha_l30,none" not in a
    assert a["alpha,none"] == pytest.approx(statistics.median(layers))  # the documented headline
    assert all(f"beta_l{i:02d},none" in a for i in range(30))
    assert a["alpha_se,none"] >= 0
    samples = samples_of(out, "drift_alpha_detail")
    assert len(samples) == 2
    answer = json.loads(samples[0]["resps"][0][0])
    assert answer["compensation"] == "log:1" and answer["centres"] == [15.5, 31.5, 63.5]
    assert len(answer["signal"]) == 30 and len(answer["signal"][0]) == 3  # window curves for plots
    p = res["drift_ppl"]
    assert p["perplexity,none"] > 1 and p["perplexity_none,none"] > 1
    assert p["perplexity_change,none"] == pytest.approx(p["perplexity,none"] / p["perplexity_none,none"] - 1)
    assert p["perplexity_change,none"] != 0  # the bias toward the prompt changes the likelihood
    assert "nll_per_token_stderr,none" in p


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "drift_eval.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def test_alpha_cli_on_two_prompt_files(tiny_model_dir, tmp_path, capsys):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("The red boat left the harbour at dawn.", encoding="utf-8")
    b.write_text("Le bateau rouge a quitté le port à l'aube.", encoding="utf-8")
    r = _cli("alpha", "--model", tiny_model_dir, "--prompt-a", a, "--prompt-b", b, "--axis", "translation",
             "--n-continuations", 3, "--octaves", 3, "--compensation", "const:0.5", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["length"] == 71 and res["compensation"] == "const:0.5"
    ax = res["axes"]["translation"]
    assert len(ax["alpha"]) == 2 and len(ax["beta_fit_se"]) == 2 and ax["scenes"] == 1

    assert main(["alpha", "--model", str(tiny_model_dir), "--scenes", "2", "--axes", "detail",
                 "--n-continuations", "2", "--octaves", "3", "--bootstrap-iters", "20", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "axis detail (2 pair(s)): alpha =" in out and "layer   alpha" in out


@pytest.mark.parametrize("args, needle", [
    (["--prompt-a", "a.txt"], "give both --prompt-a and --prompt-b"),
    (["--axes", "colour"], "--axes takes names from"),
    (["--compensation", "loud"], "unknown compensation 'loud'"),
    (["--continuations", "missing.jsonl"], "neither bundled, wikitext nor an existing file"),
])
def test_alpha_cli_bad_input_is_one_line(tiny_model_dir, args, needle, capsys):
    assert main(["alpha", "--model", str(tiny_model_dir), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("drift-eval: error: ") and needle in err[0]
