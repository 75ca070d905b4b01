"""Release gating: the results loader's errors, drift-eval gate (exit 0/1/2, JUnit XML) and
the pytest plugin (--drift-results, drift_results fixture), on hand-made and real results."""
import dataclasses
import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from drift_eval.cli import main
from drift_eval.decide.policy import Policy, Rule, load_policy, rule_from
from drift_eval.decide.pytest_plugin import DriftResults, UnusableResults
from drift_eval.decide.results import load_output
from support.checks import write_policy
from support.handmade_results import write_output

pytest_plugins = ["pytester"]


def _gate(capsys, *args):
    rc = main(["gate", *map(str, args)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_loader_reads_settings_intervals_and_pooled_group(handmade):
    out = load_output(handmade)
    assert out.labels == ["none", "const:0.25", "log:0.25"]
    m = out.metric("drift_french_single", "fully_french", "none")
    assert m.value == 0.5 and m.n == 20 and len(m.per_sample) == 20
    assert (m.lower, m.upper) == pytest.approx((0.2993, 0.7007), abs=1e-4)  # Wilson 10/20
    d = out.compare("drift_french_single", "fully_french", "log:0.25")
    assert d.difference == pytest.approx(0.5) and d.p_value == pytest.approx(2 / 1024) and d.verdict == "significant"
    assert out.compare("drift_french_single", "fully_french", "const:0.25").verdict == "not significant"
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
    policy = write_policy(tmp_path, "rules:\n  - {task: drift_french_single, metric: fully_french, min: 0.1}\n")
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
    ok = write_policy(tmp_path, """
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

    bad = write_policy(tmp_path, "rules:\n  - {task: drift_french_single, metric: fully_french, on: lower, min: 0.8}\n")
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
    rc, _, err = _gate(capsys, handmade, "--policy", write_policy(tmp_path, text))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


def test_a_policy_is_checked_once_into_frozen_typed_rules(tmp_path):
    (tmp_path / "release").mkdir()
    policy = load_policy(write_policy(tmp_path, """
baseline: release
candidate: tiny
rules:
  - {name: holds, task: drift_french_single, metric: fully_french, setting: log:0.25, on: lower, min: 1}
  - {task: drift_french_single, metric: echo_rate, setting: 0.25, max: 0.05}
  - {task: drift_french, metric: drift_score, max_regression: 0}
"""))
    assert policy == Policy((
        Rule("drift_french_single", "fully_french", "log:0.25", "lower", 1.0, name="holds"),
        Rule("drift_french_single", "echo_rate", "0.25", "value", max=0.05),
        Rule("drift_french", "drift_score", "none", "upper", max_regression=0.0)),  # a regression reads the upper bound
        str(tmp_path / "release"), "tiny", "fail")  # the baseline folder beside the policy file
    assert isinstance(policy.rules[0].min, float) and policy.rules[2].against_baseline
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.rules[0].min = 0.0
    assert load_policy(write_policy(tmp_path, "baseline: some-model\nrules:\n  - {task: t, metric: m, min: 0}")).baseline \
        == "some-model"  # not a folder: a model name in the results
    with pytest.raises(SystemExit, match=r"gate.yaml: rule 2: min must be a finite number, got None$"):
        load_policy(write_policy(tmp_path, "rules:\n  - {task: t, metric: m, min: 0}\n  - {task: t, metric: m, min: }"))
    with pytest.raises(SystemExit, match="max_regression needs a baseline"):
        load_policy(write_policy(tmp_path, "rules:\n  - {task: t, metric: m, max_regression: 0.1}")).with_baseline(None)


def test_the_pytest_plugin_s_rules_are_checked_as_a_policy_s(handmade, tmp_path):
    results = DriftResults(load_output(handmade))
    with pytest.raises(UnusableResults, match="^rule on drift_french_single/fully_french: 'on' must be one of value, "
                                              "lower, upper, got 'middle'$"):
        results.expect("drift_french_single", "fully_french", on="middle", min=0.5)
    with pytest.raises(UnusableResults, match="^rule on drift_french_single/fully_french: min 0.9 is above max 0.1"):
        results.expect("drift_french_single", "fully_french", min=0.9, max=0.1)
    # checked before the baseline folder is looked for
    with pytest.raises(UnusableResults, match="^'underpowered' must be fail or warn, got 'maybe'$"):
        results.compare_to(tmp_path / "nowhere", "drift_french_single", "fully_french", max_regression=0.1,
                           underpowered="maybe")
    assert results.expect("drift_french_single", "fully_french", setting="log:0.25", on="lower", min=0.8).passed


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
    policy = write_policy(tmp_path, """
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


def test_a_regression_rule_on_a_metric_without_direction_exits_2_before_any_result_is_read(tmp_path, capsys):
    policy = write_policy(tmp_path, "rules:\n  - {task: drift_french_multiturn, metric: mean_words, max_regression: 5}\n")
    rc, out, err = _gate(capsys, tmp_path / "no-results-here", "--policy", policy)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "rule 1 (drift_french_multiturn/mean_words) has no direction" in err and "use min or max" in err
    # a bound on the same metric is meaningful, and so is a regression rule on a metric with a direction
    assert rule_from({"task": "drift_french_multiturn", "metric": "mean_words", "min": 20}).min == 20.0
    assert rule_from({"task": "drift_french_single", "metric": "fully_french", "max_regression": 0.05}).against_baseline


def test_the_pytest_plugin_refuses_a_regression_rule_without_direction(handmade, tmp_path):
    results = DriftResults(load_output(handmade))
    with pytest.raises(UnusableResults, match="^rule on drift_french_single/answer_tokens has no direction"):
        results.compare_to(tmp_path / "nowhere", "drift_french_single", "answer_tokens", max_regression=10)


@pytest.mark.parametrize("where, value, needle", [
    ("results", "Infinity", "results['drift_french_single']['fully_french,none'] is inf, not a finite number"),
    ("results", "NaN", "results['drift_french_single']['fully_french,none'] is nan, not a finite number"),
    ("results", "7.0", "results['drift_french_single']['fully_french,none'] is 7.0: a share of 0/1 samples"),
    ("samples", "NaN", "has 'fully_french' nan, not a finite number"),
])
def test_a_number_that_cannot_be_its_metric_is_one_line_naming_the_file_and_field(tmp_path, capsys, where, value,
                                                                                  needle):
    """A non-finite value in a results or samples file, or a share outside [0, 1], would pass a
    rule (an infinite share is above any min): the loader refuses it instead (exit 2)."""
    root = tmp_path / "out"
    write_output(root, settings=("none",))
    policy = write_policy(tmp_path, "rules:\n  - {task: drift_french_single, metric: fully_french, min: 0.9}\n")
    if where == "results":
        [path] = root.glob("none/*/results_*.json")
        text = path.read_text()
        old = f'"fully_french,none": {json.loads(text)["results"]["drift_french_single"]["fully_french,none"]}'
        assert old in text
        path.write_text(text.replace(old, f'"fully_french,none": {value}'))
    else:
        [path] = root.glob("none/*/samples_drift_french_single_*.jsonl")
        lines = path.read_text().splitlines()
        first = json.loads(lines[0])
        lines[0] = json.dumps(first).replace(f'"fully_french": {json.dumps(first["fully_french"])}',
                                             f'"fully_french": {value}')
        assert value in lines[0]
        path.write_text("\n".join(lines) + "\n")
    rc, out, err = _gate(capsys, root, "--policy", policy)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and needle in err and str(path) in err, err


@pytest.mark.parametrize("task, metric, value, needle", [
    ("drift_french_single", "time_in_french", 1.5, "time_in_french is 1.5, but drift_french_single's time_in_french "
                                                   "is a share, in [0, 1] (its task's definition)"),
    ("drift_french_single", "not_kept_left", 0.5, "not_kept_left is 0.5, but drift_french_single's not_kept_left is a "
                                                  "cause of 'not kept', 0 or 1"),
    ("drift_french_multiturn", "mean_words", -3.0, "mean_words is -3.0, but drift_french_multiturn's mean_words is a "
                                                   "count, at least 0"),
])
def test_a_sample_outside_its_declared_kind_is_one_line_naming_the_file_doc_and_value(tmp_path, capsys, task,
                                                                                      metric, value, needle):
    """A metric's declared kind (its task YAML's ``values:``, or the ``cause`` role) gives the
    range of each sample: a value outside it is damage (one line, exit 2), not a number to
    average into a rule's verdict."""
    root = tmp_path / "out"
    write_output(root, settings=("none",))
    [path] = root.glob(f"none/*/samples_{task}_*.jsonl")
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    assert metric in first
    lines[0] = json.dumps({**first, metric: value})
    path.write_text("\n".join(lines) + "\n")
    policy = write_policy(tmp_path, "rules:\n  - {task: drift_french_single, metric: fully_french, min: 0.1}\n")
    rc, _, err = _gate(capsys, root, "--policy", policy)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and needle in err and str(path) in err, err
    assert f"doc {first['doc_id']!r}" in err


@pytest.mark.parametrize("name", ["../../outside", "drift_french_single/../x", ".hidden", "a\nb", "a b"])
def test_a_task_name_that_is_no_task_name_is_refused_before_it_is_used(tmp_path, capsys, name):
    """A task name from a results file is part of its samples file's name: one that could
    reach outside the folder, or hide, is damage (one line, exit 2), and nothing is read for it."""
    root = tmp_path / "out"
    write_output(root, settings=("none",))
    [path] = root.glob("none/*/results_*.json")
    res = json.loads(path.read_text())
    res["results"][name] = res["results"]["drift_french_single"]
    path.write_text(json.dumps(res))
    policy = write_policy(tmp_path, "rules:\n  - {task: drift_french_single, metric: fully_french, min: 0.1}\n")
    rc, _, err = _gate(capsys, root, "--policy", policy)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "not a task name" in err, err
