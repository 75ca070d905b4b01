"""Release decisions against a baseline model (issue 13): runs keyed by (model, setting),
readable model names, candidate vs baseline with paired tests and the minimum detectable
effect (its maths: tests/maths/test_paired_statistics.py), max_regression rules (planted
regressions), the compare command and the pytest plugin's compare_to (the leaderboard:
test_leaderboard.py)."""
import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from drift_eval.catalogue import binary, share
from drift_eval.decide.compare import compare_metric
from drift_eval.decide.results import load_output
from drift_eval.metrics import paired, stats
from drift_eval.resultfiles.names import model_name
from drift_eval.settings import parse_model_args, setting_label
from drift_eval.tasks import metric_catalogue
from support.checks import run_cli, write_policy
from support.handmade_results import TaskRecord, write_output, write_task_run

pytest_plugins = ["pytester"]


# ---------------------------------------------------------------------- runs by (model, setting)
def test_runs_are_keyed_by_model_and_setting(tmp_path):
    root = tmp_path / "out"
    write_output(root, settings=("none", "log:0.25"), model="alpha")
    write_output(root, settings=("none",), model="beta", french_shift=3)
    out = load_output(root)
    assert out.models == ["alpha", "beta"] and out.labels == ["none", "log:0.25"]
    assert out.settings_of("beta") == ["none"]
    a, b = (out.metric("drift_french_single", "fully_french", "none", m) for m in ("alpha", "beta"))
    assert (a.value, b.value) == (0.5, 0.35)
    assert repr(b).startswith("drift_french_single/fully_french under none for beta: 0.3500")
    with pytest.raises(SystemExit, match="holds results of 2 models \\(alpha, beta\\): name the one you mean"):
        out.metric("drift_french_single", "fully_french", "none")
    with pytest.raises(SystemExit, match="no results for setting 'log:0.25' of beta"):
        out.metric("drift_french_single", "fully_french", "log:0.25", "beta")


def test_model_args_as_lm_eval_s_string_read_like_the_dict(tmp_path):
    assert parse_model_args("pretrained=a/b,compensation=log,strength=0.25,note=x=y,flag") == \
        {"pretrained": "a/b", "compensation": "log", "strength": "0.25", "note": "x=y"}
    assert parse_model_args({"pretrained": "a/b"}) == {"pretrained": "a/b"} and parse_model_args(None) == {}
    assert setting_label("pretrained=a/b,compensation=const,strength=0.5,span=prompt") == "const:0.5@prompt"
    folder = write_task_run(tmp_path / "out", "new", [1, 0, 1])
    [res] = (tmp_path / "out" / "new").glob("results_*.json")
    doc = json.loads(res.read_text())
    doc["config"]["model_args"] = "pretrained=/models/new,compensation=log,strength=0.25,dtype=bfloat16"
    res.write_text(json.dumps(doc))
    out = load_output(folder)
    assert out.models == ["new"] and out.labels == ["log:0.25"]
    assert out.run("log:0.25").model_args["dtype"] == "bfloat16"


def test_two_runs_of_one_key_are_an_error_naming_both_files(tmp_path, capsys):
    root = tmp_path / "out"
    write_output(root, settings=("none",), date="2026-01-01T00-00-00.000000")
    first = next(root.glob("none/*/results_*.json"))
    write_output(root / "again", settings=("none",), date="2026-03-01T00-00-00.000000")  # the same run, rerun
    second = next((root / "again").glob("none/*/results_*.json"))
    rc, _, err = run_cli(capsys, "report", root, "-o", tmp_path / "r.html")
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert f"two results for tiny under none, task drift_french_single: {first} and {second}; move one" in err


@pytest.mark.parametrize("model_args, res, name", [
    ({"pretrained": "/root/.cache/lm-eval-drift/gguf/SmolLM2-135M-Instruct.Q4_1-0932cb8f3d829473"}, {},
     "SmolLM2-135M-Instruct.Q4_1"),
    ({"pretrained": "/models/gguf-dir", "gguf_file": "Qwen2.5-0.5B-Instruct-Q8_0.gguf"}, {},
     "Qwen2.5-0.5B-Instruct-Q8_0"),
    ({"pretrained": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "main"}, {}, "Qwen/Qwen2.5-0.5B-Instruct"),
    ({"pretrained": "/data/models/smollm2-random-init/"}, {}, "smollm2-random-init"),
    ({}, {"model_name": "EleutherAI/pythia-160m"}, "EleutherAI/pythia-160m"),
])
def test_models_get_readable_names(model_args, res, name):
    assert model_name(model_args, {"config": {}, **res}) == name


# ---------------------------------------------------------------------- planted regressions
RULE = "rules:\n  - {task: drift_french_single, metric: fully_french, max_regression: 0.05, on: upper}\n"


def test_the_gate_catches_a_planted_regression(tmp_path, capsys):
    """36 documents: the baseline French on all, the candidate on 6 (30 flipped)."""
    base = write_task_run(tmp_path / "release", "shipped", [1] * 36)
    cand = write_task_run(tmp_path / "candidate", "new", [1] * 6 + [0] * 30)
    policy = write_policy(tmp_path, f"baseline: {base}\n" + RULE)
    rc, out, err = run_cli(capsys, "gate", cand, "--policy", policy, "--junit-xml", tmp_path / "gate.xml")
    assert rc == 1, err
    line = next(ln for ln in out.splitlines() if ln.startswith("FAIL"))
    assert ("drift_french_single/fully_french under none, new vs shipped: worse beyond the tolerance 0.05: "
            "regression +0.8333") in line and "exact McNemar" in line
    case = ET.parse(tmp_path / "gate.xml").getroot().find("testcase")
    props = {p.get("name"): p.get("value") for p in case.find("properties")}
    six_digits = dict(rel=5e-6, abs=0)  # the XML keeps 6 significant digits: half a unit of the 6th
    assert props["candidate"] == "new" and props["baseline"] == "shipped"
    assert float(props["difference"]) == pytest.approx(-30 / 36, **six_digits)
    assert float(props["p_value"]) == pytest.approx(2 * 0.5 ** 30, **six_digits) and props["n"] == "36"
    assert line.endswith(case.find("failure").get("message"))
    rc, out, _ = run_cli(capsys, "compare", cand, base)
    assert rc == 0 and "drift_french_single/fully_french" in out and "significant (exact McNemar)" in out


FORCED = {"generation_kwargs": {"max_gen_toks": 2048}, "metadata": {"answer_length": "forced"}}
UNFORCED = {"generation_kwargs": {"max_gen_toks": 2048, "min_new_tokens": 0}, "metadata": {"answer_length": "unforced"}}


def _refused_by_compare_gate_and_report(tmp_path, capsys, cand, base, want):
    """``compare``, the gate and the report of ``cand`` against ``base`` each exit 2 with
    ``want`` as their last line."""
    for args in (("compare", cand, base), ("gate", cand, "--policy", write_policy(tmp_path, f"baseline: {base}\n" + RULE)),
                 ("report", cand, "--baseline", base, "-o", tmp_path / "r.html")):
        rc, out, err = run_cli(capsys, *args)
        assert rc == 2 and err.strip().splitlines()[-1] == want, (args[0], err)


def test_a_forced_run_is_never_compared_with_an_unforced_one(tmp_path, capsys):
    """The same documents and values, one run's answers forced and the other's not: compare,
    the gate and the report refuse with one line (exit 2) instead of calling it one test."""
    base = write_task_run(tmp_path / "release", "shipped", [1] * 36, record=TaskRecord(config=FORCED))
    cand = write_task_run(tmp_path / "candidate", "new", [1] * 36, record=TaskRecord(config=UNFORCED))
    want = ("drift-eval: error: drift_french_single/fully_french under none has answers unforced and "
            "drift_french_single/fully_french under none answers forced: not the same test, so they are not "
            "compared; compare runs whose answers were made alike")
    _refused_by_compare_gate_and_report(tmp_path, capsys, cand, base, want)
    same = write_task_run(tmp_path / "again", "again", [1] * 36, record=TaskRecord(config=FORCED))
    rc, out, err = run_cli(capsys, "compare", same, base)
    assert rc == 0, err  # two forced runs are compared as before

    assert load_output(cand).run("none").provenance["length"] == \
        "drift_french_single: unforced on purpose, at most 2048 tokens"


def test_runs_of_two_versions_of_a_task_are_never_compared(tmp_path, capsys):
    """The same documents and values, the baseline scored by task version 2.1 and the
    candidate by 3.0 (whose metrics are defined differently): compare, the gate and the
    report refuse with one line (exit 2); two runs at one version are compared as before."""
    base = write_task_run(tmp_path / "release", "shipped", [1] * 36, record=TaskRecord(version=2.1))
    cand = write_task_run(tmp_path / "candidate", "new", [1] * 36, record=TaskRecord(version=3.0))
    want = ("drift-eval: error: drift_french_single/fully_french under none ran at task version 3.0 and "
            "drift_french_single/fully_french under none at 2.1: the metrics are defined differently, so they are "
            "not compared; rerun the older run on this version of the task and compare again")
    _refused_by_compare_gate_and_report(tmp_path, capsys, cand, base, want)
    # lm-eval writes a number or a string
    same = write_task_run(tmp_path / "again", "again", [1] * 36, record=TaskRecord(version="3"))
    rc, out, err = run_cli(capsys, "compare", same, cand)
    assert rc == 0 and "drift_french_single/fully_french" in out, err

    assert load_output(cand).run("none").provenance["task_versions"] == "drift_french_single 3.0"
    unversioned = write_task_run(tmp_path / "older", "older", [1] * 36)  # results that record no version
    rc, out, err = run_cli(capsys, "compare", cand, unversioned)
    assert rc == 0, err


def test_a_tiny_regression_on_eight_documents_is_underpowered(tmp_path, capsys):
    base = write_task_run(tmp_path / "release", "shipped", [1] * 8)
    cand = write_task_run(tmp_path / "candidate", "new", [1] * 7 + [0])
    policy = write_policy(tmp_path, f"baseline: {base}\n" + RULE)
    rc, out, _ = run_cli(capsys, "gate", cand, "--policy", policy, "--junit-xml", tmp_path / "gate.xml")
    assert rc == 3  # undetermined: neither a pass, nor a failure, nor unusable input (2)
    line = next(ln for ln in out.splitlines() if ln.startswith("UNDERPOWERED"))
    # one of 8 documents disagrees: taken as two-way background, no regression up to 1 reaches 80% power
    assert "underpowered: the smallest regression this sample detects at 80% power is above 1" in line
    assert "so a pass would not mean no regression" in line and "0 passed, 0 failed, 1 underpowered" in out
    assert ET.parse(tmp_path / "gate.xml").getroot().find("testcase/error").get("type") == "underpowered"
    # underpowered: warn judges the rule anyway: the upper bound is far above 0.05
    policy = write_policy(tmp_path, f"baseline: {base}\nunderpowered: warn\n" + RULE)
    rc, out, _ = run_cli(capsys, "gate", cand, "--policy", policy)
    assert rc == 1 and "[warning: underpowered" in out


def test_a_large_sample_without_regression_passes(tmp_path, capsys):
    values = [1] * 380 + [0] * 20
    swapped = values[:]
    swapped[0], swapped[-1] = 0, 1  # one document better, one worse: no regression
    base = write_task_run(tmp_path / "release", "shipped", values)
    cand = write_task_run(tmp_path / "candidate", "new", swapped)
    rc, out, _ = run_cli(capsys, "gate", cand, "--policy", write_policy(tmp_path, f"baseline: {base}\n" + RULE))

    # Tango's score interval (continuity-corrected) for one pair up and one down of 400
    lo, hi = paired.paired_proportion_interval(1, 1, 400)
    assert lo == pytest.approx(-hi) and f"{hi:.4f}" == "0.0157"
    assert rc == 0 and "upper 95% bound +0.0157 <= tolerance 0.05: regression +0.0000" in out, out


def test_baseline_as_a_model_in_the_same_folder(tmp_path, capsys):
    root = tmp_path / "board"
    write_task_run(root, "shipped", [1] * 36)
    write_task_run(root, "new", [1] * 6 + [0] * 30)
    rc, out, _ = run_cli(capsys, "gate", root, "--policy", write_policy(tmp_path, RULE), "--baseline", "shipped")
    assert rc == 1 and "new vs shipped" in out
    rc, out, _ = run_cli(capsys, "compare", "new", "shipped", "--in", root, "--format", "json")
    [row] = json.loads(out)
    assert row["difference"] == pytest.approx(-30 / 36) and row["verdict"] == "significant" and row["n"] == 36
    rc, _, err = run_cli(capsys, "gate", root, "--policy", write_policy(tmp_path, RULE))
    assert rc == 2 and "max_regression needs a baseline" in err


@pytest.mark.parametrize("text, needle", [
    ("baseline: x\nrules:\n  - {task: t, metric: m, max_regression: -0.1}", "max_regression must be >= 0"),
    ("rules:\n  - {task: t, metric: m, max_regression: 0.1, min: 0.5}", "needs min or max, or max_regression"),
    ("underpowered: maybe\nrules:\n  - {task: t, metric: m, max_regression: 0.1}", "'underpowered' must be fail or warn"),
    ("baseline: [a]\nrules:\n  - {task: t, metric: m, max_regression: 0.1}", "'baseline' must be a folder or a model"),
    ("rules:\n  - {task: t, metric: m, min: 0.1}\nthreshold: 2", "has unknown key(s) threshold"),
])
def test_bad_baseline_policies_are_unusable(tmp_path, capsys, text, needle):
    root = write_task_run(tmp_path / "c", "new", [1] * 8)
    rc, _, err = run_cli(capsys, "gate", root, "--policy", write_policy(tmp_path, text))
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_documents_pair_only_when_they_are_the_same(tmp_path):
    base = write_task_run(tmp_path / "release", "shipped", [1] * 10)
    cand = write_task_run(tmp_path / "candidate", "new", [0] * 10)
    [samples] = (tmp_path / "candidate" / "new").glob("samples_*.jsonl")
    lines = [json.loads(x) for x in samples.read_text().splitlines()]
    for s in lines[:4]:
        s["doc_hash"] = "another document"
    samples.write_text("".join(json.dumps(s) + "\n" for s in lines))
    c = compare_metric(load_output(cand), load_output(base), "drift_french_single", "fully_french")
    assert c.n == 6 and c.difference.difference == -1.0


# ---------------------------------------------------------------------- pytest plugin
GATES = '''
import os

BASE = os.environ["BASELINE_DIR"]

def test_no_large_regression(drift_results):
    drift_results.compare_to(BASE, "drift_french_single", "fully_french", max_regression=0.05)

def test_comparison_reads_well(drift_results):
    c = drift_results.compare_to(BASE, "drift_french_single", "fully_french")
    assert c.difference.difference >= 0, c
'''


def test_pytest_plugin_compares_to_a_baseline(tmp_path, pytester, monkeypatch):
    base = write_task_run(tmp_path / "release", "shipped", [1] * 36)
    monkeypatch.setenv("BASELINE_DIR", str(base))
    pytester.makepyfile(test_release=GATES)
    bad = write_task_run(tmp_path / "bad", "new", [1] * 6 + [0] * 30)
    r = pytester.runpytest("--drift-results", bad, "-p", "no:cacheprovider")
    r.assert_outcomes(failed=2)
    assert "worse beyond the tolerance 0.05" in r.stdout.str() and r.ret == 1
    assert "drift_french_single/fully_french under none, new vs shipped: 0.1667 vs 1.0000, difference -0.8333" \
        in r.stdout.str()
    small = write_task_run(tmp_path / "small", "new", [1] * 35 + [0])
    shutil.rmtree(tmp_path / "release")
    write_task_run(tmp_path / "release", "shipped", [1] * 36)
    r = pytester.runpytest("--drift-results", small, "-p", "no:cacheprovider")
    r.assert_outcomes(failed=1, errors=1)  # underpowered is an error (undetermined); the plain comparison a failure
    assert "undetermined drift gate: drift_french_single/fully_french under none, new vs shipped: underpowered" \
        in r.stdout.str() and "UNDETERMINED" in r.stdout.str()
    assert r.ret == 1  # pytest's status for errors: only unusable input exits 2


def test_a_rate_is_compared_as_a_rate_even_where_its_values_are_0_or_1(tmp_path, capsys):
    """``leak_per_1000`` (its YAML hint: ``values: rate``) with per-conversation values
    that happen to be 0 or 1: compare uses the sign-flip test and the rate's interval, not
    McNemar and Wilson; ``fully_french`` (0/1 outcomes) keeps the exact McNemar test."""
    cat = metric_catalogue()
    assert binary(cat, "drift_french_multiturn", "leak_per_1000") is False
    assert binary(cat, "drift_de_multiturn", "last3_target") is False
    assert binary(cat, "drift_french_single", "fully_french") is None
    assert binary(cat, "drift_french_multiturn_fixed", "not_kept_left") is None  # one turn: 0 or 1
    assert share(cat, "drift_french_multiturn", "last3_french") and not share(cat, "drift_french_multiturn",
                                                                              "leak_per_1000")
    base = write_task_run(tmp_path / "release", "shipped", [0] * 32, task="drift_french_multiturn",
                          metric="leak_per_1000")
    cand = write_task_run(tmp_path / "candidate", "new", [1] * 8 + [0] * 24, task="drift_french_multiturn",
                          metric="leak_per_1000")
    m = load_output(cand).metric("drift_french_multiturn", "leak_per_1000")
    assert m.binary is False and (m.lower, m.upper) != stats.wilson_interval(8, 32)
    rc, out, err = run_cli(capsys, "compare", cand, base)
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if "leak_per_1000" in ln)
    # 8 non-zero differences, all one way: exact p 2 / 2^8
    assert "paired permutation" in line and f"{2 / 256:8.4f}" in line, line
    single = write_task_run(tmp_path / "single", "new", [1] * 8 + [0] * 24)
    again = write_task_run(tmp_path / "single0", "shipped", [0] * 32)
    rc, out, err = run_cli(capsys, "compare", single, again)
    assert rc == 0 and "exact McNemar" in out, err


def test_the_gate_writes_a_markdown_summary_for_the_ci_page(tmp_path, capsys, monkeypatch):
    """``--summary FILE`` gets the verdict, one row per rule and each comparison's smallest
    detectable regression; without it the summary is appended to ``$GITHUB_STEP_SUMMARY``;
    names from the results are code spans; unusable input is summarised too (exit 2)."""
    base = write_task_run(tmp_path / "release", "shipped", [1] * 36)
    cand = write_task_run(tmp_path / "candidate", "new <b>*x*|y", [1] * 6 + [0] * 30)
    policy = write_policy(tmp_path, f"baseline: {base}\n" + RULE)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    rc, out, err = run_cli(capsys, "gate", cand, "--policy", policy, "--summary", tmp_path / "summary.md")
    assert rc == 1, err
    text = (tmp_path / "summary.md").read_text()
    assert text.startswith("## drift-eval gate: FAIL\n") and "0 passed, 1 failed, 0 underpowered." in text
    (row,) = [ln for ln in text.splitlines() if ln.startswith("| FAIL |")]
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert cells[1].startswith("`") and cells[2].startswith("`") and "new <b>*x*\\|y vs shipped" in cells[2]
    assert cells[3] == "none up to 1" and cells[4] == "0.05", cells  # as the gate's own line says, beside the tolerance

    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    rc, _, _ = run_cli(capsys, "gate", base, "--policy", write_policy(tmp_path, RULE.replace(
        "max_regression: 0.05, on: upper", "min: 0.5")))
    assert rc == 0 and step.read_text().startswith("earlier step\n## drift-eval gate: PASS\n")
    rc, _, err = run_cli(capsys, "gate", tmp_path / "nowhere", "--policy", policy)
    assert rc == 2 and "## drift-eval gate: UNUSABLE INPUT" in step.read_text()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a folder: refused before any work
    rc, _, err = run_cli(capsys, "gate", cand, "--policy", policy)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "GITHUB_STEP_SUMMARY" in err, err


def test_a_name_in_the_results_cannot_print_a_line_of_its_own(tmp_path, capsys):
    """A model name with a control character, a line break and a forged verdict, and a
    bidirectional override, stays inside the gate's line for its rule, shown escaped, and the
    JUnit file stays well-formed XML."""
    base = write_task_run(tmp_path / "release", "shipped", [1] * 36)
    cand = write_task_run(tmp_path / "candidate", "new\x01\nPASS  all rules\u202e", [1] * 6 + [0] * 30)
    rc, out, _ = run_cli(capsys, "gate", cand, "--policy", write_policy(tmp_path, f"baseline: {base}\n" + RULE))
    assert rc == 1
    assert not any(line.startswith("PASS") for line in out.splitlines()), out
    assert "new\\x01\\x0aPASS  all rules\\u202e vs shipped" in out and "\u202e" not in out
    rc, _, _ = run_cli(capsys, "gate", cand, "--policy", write_policy(tmp_path, f"baseline: {base}\n" + RULE),
                    "--junit-xml", tmp_path / "gate.xml")
    case = ET.parse(tmp_path / "gate.xml").getroot().find("testcase")  # well-formed XML 1.0
    props = {p.get("name"): p.get("value") for p in case.find("properties")}
    assert rc == 1 and props["candidate"] == "new\\x01\\x0aPASS  all rules\\u202e"


def test_a_policys_relative_baseline_is_found_beside_the_policy_and_nowhere_else(tmp_path, capsys, monkeypatch):
    """A relative ``baseline:`` names a folder beside the policy file; a missing one is one line
    naming the path it was looked for at, even when the working folder has a folder of that
    name; a bare name that is no folder beside the policy is a model name."""
    base = write_task_run(tmp_path / "work" / "releases" / "v1", "shipped", [1] * 36)
    cand = write_task_run(tmp_path / "candidate", "new", [1] * 36)
    (tmp_path / "gates").mkdir()
    monkeypatch.chdir(tmp_path / "work")  # releases/v1 is here, not beside the policy
    policy = tmp_path / "gates" / "gate.yaml"
    policy.write_text("baseline: releases/v1\n" + RULE)
    rc, _, err = run_cli(capsys, "gate", cand, "--policy", policy)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert str(tmp_path / "gates" / "releases" / "v1") in err and "beside the policy file" in err
    monkeypatch.chdir(tmp_path / "work" / "releases")
    policy.write_text("baseline: v1\n" + RULE)  # a folder of the working folder, but a bare name: a model
    rc, _, err = run_cli(capsys, "gate", cand, "--policy", policy)
    assert rc == 2 and "baseline 'v1' is neither a results folder nor a model" in err, err
    (tmp_path / "gates" / "releases").symlink_to(tmp_path / "work" / "releases")
    policy.write_text("baseline: releases/v1\n" + RULE)  # beside the policy: found
    rc, out, err = run_cli(capsys, "gate", cand, "--policy", policy)
    assert rc in (0, 3) and "new vs shipped" in out and base, err
