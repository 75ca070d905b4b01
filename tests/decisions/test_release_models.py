"""Release gating on two real models (issue 13): the bundled SmolLM2-135M-Instruct and its
random-init twin (same config, seed 0, saved to a folder), each swept by the real
``drift-eval sweep``, then ``compare``, ``gate --policy`` with a baseline, ``leaderboard``
and ``report``; and ``drift-eval demo`` ending with its report."""
import json

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from support.commands import REAL_SWEEP_ARGS, last_line, run_drift_eval

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def twin_sweep(smollm2_dir, tmp_path_factory):
    """The random-init twin of SmolLM2 swept with the real sweep's options."""
    folder = tmp_path_factory.mktemp("twin") / "smollm2-random-init"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(smollm2_dir), dtype=torch.float32)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(smollm2_dir).save_pretrained(folder)
    out = tmp_path_factory.mktemp("twin_sweep") / "out"
    r = run_drift_eval(["sweep", "--output", out, "--model-args", f"pretrained={folder}", *REAL_SWEEP_ARGS],
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_compare_gate_leaderboard_and_report_on_two_real_models(real_sweep, twin_sweep, tmp_path):
    trained = real_sweep["dir"]
    r = run_drift_eval(["compare", twin_sweep, trained, "--format", "json"])
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    assert {(x["candidate"], x["baseline"]) for x in rows} == {("smollm2-random-init", "SmolLM2-135M-Instruct.Q4_1")}
    ff = next(x for x in rows if x["setting"] == "none" and x["metric"] == "fully_french")
    # the twin's answer 0 is a one-word loop ("spectacle spectacle ..."): not kept (degenerate), so no document
    # leaves the headline and fully_french pairs both; 2 documents detect nothing
    assert ff["n"] == 2 and ff["test"] == "exact McNemar" and ff["mde"] is None

    policy = tmp_path / "gate.yaml"
    policy.write_text(f"baseline: {trained}\nrules:\n"
                      "  - {task: drift_french_single, metric: fully_french, max_regression: 0.1}\n"
                      "  - {task: drift_french_single, metric: echo_rate, setting: all, max: 1}\n")
    r = run_drift_eval(["gate", twin_sweep, "--policy", policy, "--junit-xml", tmp_path / "gate.xml"])
    assert r.returncode == 3, r.stdout + r.stderr[-2000:]  # undetermined: too few documents to resolve 0.1
    assert "UNDERPOWERED  drift_french_single/fully_french [none] smollm2-random-init vs SmolLM2-135M-Instruct.Q4_1" \
        in r.stdout and "2 passed, 0 failed, 1 underpowered" in r.stdout

    (tmp_path / "gate-in-one.yaml").write_text(policy.read_text().split("\n", 1)[1])  # the baseline: a model
    r = run_drift_eval(["leaderboard", trained, twin_sweep, "-o", tmp_path / "board.md"])
    board = (tmp_path / "board.md").read_text()
    assert r.returncode == 0 and board.count("| `SmolLM2-135M-Instruct.Q4_1` |") == 2
    assert board.count("| `smollm2-random-init` |") == 2 and "/root/" not in board.split("\n\n")[1]

    r = run_drift_eval(["report", trained, twin_sweep, "-o", tmp_path / "report.html", "--baseline",
                        "SmolLM2-135M-Instruct.Q4_1", "--policy", tmp_path / "gate-in-one.yaml"])
    assert r.returncode == 0, r.stderr[-2000:]
    html = (tmp_path / "report.html").read_text()
    assert 'id="gate-verdict">Gate: UNDERPOWERED' in html
    assert "Candidate <code>smollm2-random-init</code> against baseline <code>SmolLM2-135M-Instruct.Q4_1</code>" in html
    assert "drift_french_single: share of answers still in French, by segment" in html
    assert html.index('id="verdict"') < html.index('id="survival"') < html.index('id="provenance"')


def test_demo_ends_with_its_report(tmp_path):
    out = tmp_path / "demo"
    r = run_drift_eval(["demo", "--limit", "2", "--max-gen-toks", "16", "--batch-size", "2", "--output", out],
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert last_line(r.stdout) == str(out / "report.html")
    assert r.stdout.index("|fully_french") < r.stdout.index(str(out / "report.html"))  # after lm-eval's tables
    html = (out / "report.html").read_text()
    assert "log:1 − none" in html and "drift_french_single: share of answers still in French, by segment" in html
    r = run_drift_eval(["demo", "--output", out])
    assert r.returncode == 2 and "is not empty: give a new --output folder" in r.stderr
