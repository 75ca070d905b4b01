"""Release gating: the results loader's errors, drift-eval gate (exit 0/1/2, JUnit XML) and
the pytest plugin (--drift-results, drift_results fixture), on hand-made and real results."""
import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from handmade_results import write_output

pytest_plugins = ["pytester"]


@pytest.fixture
def handmade(tmp_path):
    return write_output(tmp_path / "out")


def _gate(capsys, *args):
    from drift_eval.cli import main

    rc = main(["gate", *map(str, args)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _policy(tmp_path, text):
    p = tmp_path / "gate.yaml"
    p.write_text(text)
    return p


def test_loader_reads_settings_intervals_and_pooled_group(handmade):
    from drift_eval.decide.results import load_output

    out = load_output(handmade)
    assert out.labels == ["none", "const:0.25", "log:0.25"]
    m = out.metric("drift_french_single", "fully_french", "none")
    assert m.value == 0.5 and m.n == 20 and len(m.per_sample) == 20
    assert (m.lower, m.upper) == pytest.approx((0.2993, 0.7007), abs=1e-4)  # Wilson 10/20
    d = out.compare("drift_french_single", "fully_french", "log:0.25")
    assert d.difference == pytest.approx(0.5) and d.p_value == pytest.approx(2 / 1024) and d.verdict == "significant"
    assert out.compare("drift_french_single", "fully_french", "const:0.25").verdict == "trend"
    g = out.metric("drift_french", "drift_score", "none")  # pooled from both tasks' samples
    assert len(g.per_sample) == 24 and g.value == pytest.approx(sum(g.per_sample.values()) / 24)
    assert "drift_french_single/fully_french under none: 0.5000" in repr(m)


@pytest.mark.parametrize("damage, needle", [
    ("missing", "results folder not found"),
    ("empty", "no lm-eval results in"),
    ("bad_json", "is not valid JSON"),
    ("not_results", "is not an lm-eval results file"),
    ("partial", "holds a partial sweep (no results for log:0.25)"),
])
def test_malformed_or_partial_folder_is_one_clear_error(tmp_path, capsys, damage, needle):
    root = tmp_path / "out"
    policy = _policy(tmp_path, "rules:\n  - {task: drift_french_single, metric: fully_french, min: 0.1}\n")
    if damage != "missing":
        root.mkdir()
    if damage in ("bad_json", "not_results", "partial"):
        write_output(root, settings=("none",))
        [res] = root.glob("none/*/results_*.json")
        if damage == "bad_json":
            res.write_text(res.read_text()[:100])
        elif damage == "not_results":
            res.write_text(json.dumps({"hello": 1}))
        else:
            (root / "sweep.json").write_text(json.dumps({"settings": ["none", "log:0.25"], "tasks": []}))
    rc, out, err = _gate(capsys, root, "--policy", policy)
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("drift-eval: error: ") and needle in err, err


def test_gate_passes_fails_and_writes_junit(handmade, tmp_path, capsys):
    ok = _policy(tmp_path, """
rules:
  - name: French holds under log compensation
    task: drift_french_single
    metric: fully_french
    setting: log:0.25
    on: lower
    min: 0.8
  - {task: drift_french_single, metric: echo_rate, setting: all, max: 0.1}
""")
    rc, out, _ = _gate(capsys, handmade, "--policy", ok, "--junit-xml", tmp_path / "ok.xml")
    assert rc == 0, out
    assert "PASS  French holds under log compensation: drift_french_single/fully_french under log:0.25: " \
           "lower 95% bound 0.8389 >= 0.8" in out
    assert "4 passed, 0 failed" in out
    suite = ET.parse(tmp_path / "ok.xml").getroot()
    assert suite.get("tests") == "4" and suite.get("failures") == "0"

    bad = _policy(tmp_path, "rules:\n  - {task: drift_french_single, metric: fully_french, on: lower, min: 0.8}\n")
    rc, out, _ = _gate(capsys, handmade, "--policy", bad, "--junit-xml", tmp_path / "bad.xml")
    assert rc == 1
    assert ("FAIL  drift_french_single/fully_french [none] lower 95% bound >= 0.8: drift_french_single/fully_french "
            "under none: lower 95% bound 0.2993 < min 0.8 (value 0.5000, 95% CI [0.2993, 0.7007], n=20)") in out
    fail = ET.parse(tmp_path / "bad.xml").getroot().find("testcase/failure")
    assert "lower 95% bound 0.2993 < min 0.8" in fail.get("message")


@pytest.mark.parametrize("text, needle", [
    ("rules: [", "is not valid YAML at line"),
    ("rules: []", "needs a non-empty 'rules' list"),
    ("rules:\n  - {task: drift_french_single, min: 1}", "rule 1 needs 'task' and 'metric'"),
    ("rules:\n  - {task: drift_french_single, metric: fully_french}", "needs min or max"),
    ("rules:\n  - {task: drift_french_single, metric: fully_french, min: 1, at: 2}", "unknown key(s) at"),
    ("rules:\n  - {task: drift_french_single, metric: nope, min: 1}", "has no metric 'nope'"),
    ("rules:\n  - {task: drift_french_single, metric: fully_french, on: middle, min: 1}", "'on' must be one of"),
    ("rules:\n  - {task: drift_french_single, metric: fully_french, setting: log:9, min: 1}",
     "no results for setting 'log:9'"),
])
def test_bad_policy_exits_2_with_one_line(handmade, tmp_path, capsys, text, needle):
    rc, _, err = _gate(capsys, handmade, "--policy", _policy(tmp_path, text))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


GATE_TESTS = '''
def test_french_lower_bound_under_log(drift_results):
    drift_results.expect("drift_french_single", "fully_french", setting="log:0.25", on="lower", min=0.8)

def test_french_lower_bound_without_compensation(drift_results):
    drift_results.expect("drift_french_single", "fully_french", setting="none", on="lower", min=0.8)

def test_log_helps_significantly(drift_results):
    d = drift_results.compare("drift_french_single", "fully_french", "log:0.25")
    assert d.verdict == "significant" and d.difference > 0

def test_plain_assert_reads_well(drift_results):
    m = drift_results.metric("drift_french_single", "fully_french", "const:0.25")
    assert m.lower >= 0.8, m

def test_missing_metric(drift_results):
    drift_results.value("drift_french_single", "nope")
'''


def test_pytest_plugin_gates_as_ordinary_tests(handmade, pytester):
    pytester.makepyfile(test_release=GATE_TESTS)
    r = pytester.runpytest("--drift-results", handmade, "-p", "no:cacheprovider")
    r.assert_outcomes(passed=2, failed=2, errors=1)  # a metric that is not there is unusable input: an error
    assert r.ret == 2
    text = r.stdout.str()
    assert ("drift_french_single/fully_french under none: lower 95% bound 0.2993 < min 0.8 "
            "(value 0.5000, 95% CI [0.2993, 0.7007], n=20)") in text
    assert "drift_french_single/fully_french under const:0.25: 0.6000 ± 0.1124 (stderr), 95% CI [0.3866, 0.7812], n=20" in text
    assert "drift_french_single under none has no metric 'nope'" in text
    assert "drift-eval results: " in text  # report header

    r = pytester.runpytest("-p", "no:cacheprovider")  # option missing: the gates error, they do not pass
    r.assert_outcomes(errors=5)
    assert "needs --drift-results OUT_DIR" in r.stdout.str() and r.ret == 2

    pytester.makepyfile(test_release=GATE_TESTS.split("def test_missing_metric")[0])
    r = pytester.runpytest("--drift-results", handmade, "-p", "no:cacheprovider")
    r.assert_outcomes(passed=2, failed=2)
    assert r.ret == 1  # failures alone: exit 1, as drift-eval gate


@pytest.mark.slow
def test_gate_and_report_on_real_sweep(real_sweep, tmp_path, capsys):
    out = real_sweep["dir"]
    policy = _policy(tmp_path, """
rules:
  - {task: drift_french_single, metric: echo_rate, setting: all, max: 1.0}
  - {task: position_bias, metric: wasserstein_residual_aware, max: 1.0}
  - {task: drift_french_single, metric: fully_french, setting: log:1, min: 1.01}
""")
    rc, text, _ = _gate(capsys, out, "--policy", policy, "--junit-xml", tmp_path / "gate.xml")
    assert rc == 1 and "3 passed, 1 failed" in text and "FAIL  drift_french_single/fully_french [log:1]" in text
    # a sweep interrupted before its second setting is a partial folder: unusable, exit 2
    cut = tmp_path / "cut"
    shutil.copytree(out, cut)
    shutil.rmtree(cut / "log_1")
    rc, _, err = _gate(capsys, cut, "--policy", policy)
    assert rc == 2 and "partial sweep (no results for log:1)" in err
