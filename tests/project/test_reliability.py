"""Reliability: unusable input is one line and exit status 2 before any work, nothing is
ever deserialised as code, and no damaged or partial file is read as a result (issue 14).

Every case checks the exit status, that the message is one line, and that no good file
was changed. Sweeps with a real model are in ``test_reliability_sweep.py``."""
import hashlib
import json
import os
import threading
import xml.etree.ElementTree as ET

import pytest

from drift_eval.errors import DriftUsageError
from drift_eval.files import folder_lock, read_json, write_json_atomic
from drift_eval.plugin.task_base import check_generation_kwargs
from drift_eval.tasks.drift_alpha import utils as alpha
from drift_eval.tasks.drift_french import utils as french
from drift_eval.tasks.position_bias import utils as position
from support.checks import one_line_error, run_cli
from support.handmade_results import write_output

POLICY = "rules:\n  - {task: drift_french_single, metric: fully_french, min: 0.1}\n"


def _fingerprint(root):
    """Path -> SHA-256 of every file under ``root``."""
    out = {}
    for base, _, names in os.walk(root):
        for n in names:
            p = os.path.join(base, n)
            with open(p, "rb") as fh:
                out[p] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out"


@pytest.fixture
def policy(tmp_path):
    p = tmp_path / "gate.yaml"
    p.write_text(POLICY)
    return p


def _samples(root, setting="none", task="drift_french_single"):
    [p] = (root / setting.replace(":", "_")).glob(f"*/samples_{task}_*.jsonl")
    return p


def _results(root, setting="none"):
    [p] = (root / setting.replace(":", "_")).glob("*/results_*.json")
    return p


def _check_report_and_gate(capsys, root, policy, tmp_path, needle):
    """Report and gate both refuse the folder with the same one line; nothing changes."""
    before = _fingerprint(root)
    rc, _, err = run_cli(capsys, "report", root, "-o", tmp_path / "r.html")
    line = one_line_error(rc, err, needle)
    rc, _, err = run_cli(capsys, "gate", root, "--policy", policy)
    assert one_line_error(rc, err, needle) == line
    assert not (tmp_path / "r.html").exists() and _fingerprint(root) == before


# ---------------------------------------------------------------------- cut files
def test_samples_cut_at_a_line_boundary_are_not_results(capsys, out, policy, tmp_path):
    write_output(out)
    p = _samples(out)
    lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
    p.write_text("".join(lines[:3]), encoding="utf-8")  # 3 of 20 lines, each complete
    _check_report_and_gate(capsys, out, policy, tmp_path,
                           f"{p}: 3 sample line(s), but the results file counts 20 (n-samples.effective)")


def test_samples_cut_mid_line_are_damaged(capsys, out, policy, tmp_path):
    write_output(out)
    p = _samples(out)
    data = p.read_bytes()
    p.write_bytes(data[: data.index(b"\n", 2000) - 7])
    _check_report_and_gate(capsys, out, policy, tmp_path, "is not valid JSON: the samples file is damaged or was "
                                                           "cut short")


def test_samples_cut_just_before_the_last_line_end_are_damaged(capsys, out, policy, tmp_path):
    write_output(out, settings=("none",))
    p = _samples(out, task="drift_french_multiturn")
    p.write_bytes(p.read_bytes()[:-1])  # every line is JSON, the last one has no end: cut short
    _check_report_and_gate(capsys, out, policy, tmp_path, "has no line end: the samples file was cut short")


def test_files_cut_inside_a_character_are_named(capsys, out, policy, tmp_path):
    write_output(out)
    p = _samples(out)
    data = p.read_bytes()
    cut = data.index("ç".encode()) + 1  # inside the two bytes of ç
    p.write_bytes(data[:cut])
    _check_report_and_gate(capsys, out, policy, tmp_path, f"{p} is not UTF-8 text or was cut inside a character")
    write_output(out)
    r = _results(out, "log:0.25")
    r.write_bytes(r.read_bytes()[:-40] + "é".encode()[:1])
    _check_report_and_gate(capsys, out, policy, tmp_path, f"{r} is not UTF-8 text or was cut inside a character")


def test_results_cut_short_or_not_utf8(capsys, out, policy, tmp_path):
    write_output(out)
    r = _results(out)
    good = r.read_bytes()
    r.write_bytes(good[: len(good) // 2])
    _check_report_and_gate(capsys, out, policy, tmp_path, f"{r} is not valid JSON")
    r.write_bytes(good.replace(b'"alias"', b'"\xff\xfe"', 1))
    _check_report_and_gate(capsys, out, policy, tmp_path, f"{r} is not UTF-8 text (byte")


def test_a_run_that_logged_only_some_samples_was_cut_short(capsys, out, policy, tmp_path):
    write_output(out)
    p = _samples(out, "log:0.25", "drift_french_multiturn")
    p.unlink()
    _check_report_and_gate(capsys, out, policy, tmp_path, f"{p} is missing")


# ---------------------------------------------------------------------- wrong JSON types
@pytest.mark.parametrize("change, needle", [
    (lambda r: r.update({"n-samples": [1, 2]}), "'n-samples' is a JSON list, not an object"),
    (lambda r: r["n-samples"].update({"drift_french_single": 20}), "n-samples['drift_french_single'] is a JSON number"),
    (lambda r: r["n-samples"]["drift_french_single"].update({"effective": "20"}), "is '20', not a count"),
    (lambda r: r["results"].update({"drift_french_single": [0.5]}), "results['drift_french_single'] is a JSON list"),
    (lambda r: r["config"].update({"model_args": 7}), "config.model_args is a JSON number"),
    (lambda r: r["config"].update({"model_args": {"compensation": "sideways"}}), "unknown compensation 'sideways'"),
    (lambda r: r.update({"group_subtasks": {"drift_french": "drift_french_single"}}), "not a list of task names"),
])
def test_results_of_the_wrong_shape(capsys, out, policy, tmp_path, change, needle):
    write_output(out)
    r = _results(out)
    doc = json.loads(r.read_text())
    change(doc)
    r.write_text(json.dumps(doc))
    _check_report_and_gate(capsys, out, policy, tmp_path, needle)


def test_results_file_that_is_a_json_list(capsys, out, policy, tmp_path):
    write_output(out)
    r = _results(out)
    r.write_text("[1, 2, 3]")
    _check_report_and_gate(capsys, out, policy, tmp_path, "holds a JSON list, not the JSON object of a results file")


@pytest.mark.parametrize("change, needle", [
    (lambda lines: lines.__setitem__(4, "[1, 2, 3]\n"), "line 5: every line of the samples file must be a JSON object"),
    (lambda lines: lines.__setitem__(4, '"text"\n'), "line 5: every line of the samples file must be a JSON object"),
    (lambda lines: lines.__setitem__(4, lines[3]), "line 5 repeats doc_id 3"),
    (lambda lines: lines.__setitem__(4, json.dumps({**json.loads(lines[4]), "doc_id": "4"}) + "\n"),
     "line 5 has doc_id '4', not a document number"),
    (lambda lines: lines.__setitem__(4, json.dumps({**json.loads(lines[4]), "doc_id": 99}) + "\n"),
     "doc_id 99 is beyond the task's 36 documents"),
    (lambda lines: lines.__setitem__(6, json.dumps({**json.loads(lines[6]), "fully_french": "yes"}) + "\n"),
     "line 7 has 'fully_french' as text, line 1 as number"),
])
def test_sample_lines_of_the_wrong_shape(capsys, out, policy, tmp_path, change, needle):
    write_output(out)
    p = _samples(out)
    lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
    change(lines)
    p.write_text("".join(lines), encoding="utf-8")
    _check_report_and_gate(capsys, out, policy, tmp_path, needle)


def test_folders_in_place_of_files(capsys, out, policy, tmp_path):
    write_output(out)
    fake = out / "none" / "__models__tiny" / "results_2027-01-01T00-00-00.json"
    fake.mkdir()
    _check_report_and_gate(capsys, out, policy, tmp_path, f"{fake} is a folder where a results file should be")
    fake.rmdir()
    p = _samples(out)
    p.unlink()
    p.mkdir()
    _check_report_and_gate(capsys, out, policy, tmp_path, f"{p} is a folder where a samples file should be")
    rc, _, err = run_cli(capsys, "gate", tmp_path / "empty", "--policy", tmp_path)
    one_line_error(rc, err, "is a folder where a policy file should be")


def test_a_damaged_sweep_manifest_is_named(capsys, out, policy, tmp_path):
    write_output(out)
    (out / "sweep.json").write_text('{"settings": "none"}')
    _check_report_and_gate(capsys, out, policy, tmp_path, "sweep.json is not a sweep manifest")


# ---------------------------------------------------------------------- policies
@pytest.mark.parametrize("text, needle", [
    ("rules:\n  - {task: drift_french_single, metric: fully_french, min: .nan}", "min must be a finite number, got nan"),
    ("rules:\n  - {task: drift_french_single, metric: fully_french, max: .inf}", "max must be a finite number, got inf"),
    ("rules:\n  - {task: drift_french_single, metric: fully_french, min: 0.9, max: 0.1}",
     "min 0.9 is above max 0.1, so no value could pass"),
    ("rules:\n  - {task: drift_french_single, metric: fully_french, min: '0.5'}", "min must be a finite number"),
    ("rules:\n  - {task: [1], metric: fully_french, min: 0.5}", "rule 1 needs 'task' and 'metric' (names)"),
    ("rules:\n  - {task: drift_french_single, metric: fully_french, min: 0.5, setting: [none]}",
     "'setting' must be text"),
    # hostile YAML: a tag that would run code under an unsafe loader, and an alias bomb
    ("rules: !!python/object/apply:os.system ['touch {marker}']", "is not valid YAML"),
    pytest.param("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                 "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                 "rules: [*d, *d, *d, *d, *d, *d, *d, *d, *d]", "has unknown key(s) a, b, c, d", id="alias-bomb"),
    pytest.param("rules: " + "[" * 5000 + "]" * 5000, "nests too deep to be a policy", id="nested-5000-deep"),
])
def test_bad_policies_are_unusable_input(capsys, out, tmp_path, text, needle):
    write_output(out)
    marker = tmp_path / "PWNED"
    p = tmp_path / "gate.yaml"
    p.write_text(text.replace("{marker}", str(marker)))
    before = _fingerprint(out)
    rc, _, err = run_cli(capsys, "gate", out, "--policy", p)
    one_line_error(rc, err, needle)
    assert not marker.exists() and _fingerprint(out) == before


def test_policy_that_is_not_text(capsys, out, tmp_path):
    write_output(out)
    p = tmp_path / "gate.yaml"
    p.write_bytes(bytes(range(256)) * 4)
    rc, _, err = run_cli(capsys, "gate", out, "--policy", p)
    one_line_error(rc, err, f"{p} is not UTF-8 text")
    p.write_bytes(b"rules: []\n" + b"#" * 2_000_000)
    rc, _, err = run_cli(capsys, "gate", out, "--policy", p)
    one_line_error(rc, err, "is larger than 1000000 bytes: not a policy file")


def test_a_gate_that_cannot_finish_leaves_no_passing_junit(capsys, out, policy, tmp_path):
    write_output(out)
    junit = tmp_path / "gate.xml"
    rc, _, _ = run_cli(capsys, "gate", out, "--policy", policy, "--junit-xml", junit)
    assert rc == 0 and ET.parse(junit).getroot().get("failures") == "0"
    _results(out, "const:0.25").write_text("{")  # the folder is damaged after that passing run
    rc, _, err = run_cli(capsys, "gate", out, "--policy", policy, "--junit-xml", junit)
    line = one_line_error(rc, err, "is not valid JSON")
    suite = ET.parse(junit).getroot()
    assert suite.get("errors") == "1" and suite.find("testcase/error").get("message") in line
    assert suite.find("testcase/system-out") is None  # the old passing case is gone


# ---------------------------------------------------------------------- unwritable outputs
def test_unwritable_outputs_are_one_line(capsys, out, policy, tmp_path):
    write_output(out)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    before = _fingerprint(out)
    rc, _, err = run_cli(capsys, "report", out, "-o", blocker / "report.html")
    one_line_error(rc, err, f"-o {blocker / 'report.html'}: {blocker} is a file, not a folder")
    (tmp_path / "dir.html").mkdir()
    rc, _, err = run_cli(capsys, "report", out, "-o", tmp_path / "dir.html")
    one_line_error(rc, err, "is a folder: give a file")
    rc, _, err = run_cli(capsys, "gate", out, "--policy", policy, "--junit-xml", blocker / "gate.xml")
    one_line_error(rc, err, f"--junit-xml {blocker / 'gate.xml'}: {blocker} is a file, not a folder")
    rc, _, err = run_cli(capsys, "sweep", "--output", blocker, "--settings", "none")
    one_line_error(rc, err, "is a file: give a folder")
    assert _fingerprint(out) == before and blocker.read_text() == "x"


# ---------------------------------------------------------------------- concurrent writers
def test_concurrent_atomic_writers_never_show_half_a_file(tmp_path):
    path = str(tmp_path / "shared.json")
    write_json_atomic(path, {"writer": -1, "payload": "x" * 100_000})
    seen, stop = [], threading.Event()

    def writer(k):
        for i in range(30):
            write_json_atomic(path, {"writer": k, "i": i, "payload": str(k) * 100_000})

    def reader():
        while not stop.is_set():
            doc = read_json(path)
            seen.append(len(doc["payload"]) == 100_000 and set(doc["payload"]) == {str(doc["writer"])[-1]}
                        if doc["writer"] >= 0 else True)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert seen and all(seen)
    assert sorted(os.listdir(tmp_path)) == ["shared.json"]  # no temporary file left behind
    assert oct(os.stat(path).st_mode & 0o777) != "0o600"  # readable as a plain write would leave it


def test_a_second_sweep_on_a_folder_in_use_is_refused(tmp_path):
    with folder_lock(str(tmp_path), "drift-eval sweep"):
        with pytest.raises(DriftUsageError, match="is in use by another drift-eval sweep"):
            with folder_lock(str(tmp_path), "drift-eval sweep"):
                pass
    with folder_lock(str(tmp_path), "drift-eval sweep"):  # released when the first one ends
        pass


# ---------------------------------------------------------------------- options checked before work
@pytest.mark.parametrize("args, needle", [
    (["alpha", "--octaves", "0"], "argument --octaves: must be a whole number between 2 and 12, got 0"),
    (["position-bias", "--length", "0"], "argument --length: must be a whole number >= 2"),
    (["position-bias", "--sequences", "0"], "argument --sequences: must be a whole number >= 1"),
    (["accessibility", "--eps-ratio", "nan"], "argument --eps-ratio: must be a number > 0"),
    (["sweep", "--output", "x", "--limit", "-1"], "argument --limit: must be a number > 0"),
    (["demo", "--max-gen-toks", "0"], "argument --max-gen-toks: must be a whole number >= 1"),
    (["demo", "--settings", "none,log:x"], "strength must be a number >= 0, got 'x'"),  # the second entry
    (["demo", "--settings", "log:1,sideways"], "unknown compensation 'sideways'"),
    (["sweep", "--output", "x", "--gen-kwargs", "max_gen_toks=0"], "--gen-kwargs max_gen_toks must be a whole number >= 1"),
    (["sweep", "--output", "x", "--metadata", "[1]"], "--metadata must be a JSON object"),
    (["report"], "the following arguments are required: results"),
])
def test_cli_ranges_fail_before_any_work(capsys, tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, *args)
    one_line_error(rc, err, needle)
    assert out == "" and os.listdir(tmp_path) == []


def test_text_files_that_are_not_utf8_fail_before_the_model_loads(capsys, tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Le café est chaud.".encode("latin-1"))
    for cmd in ("position-bias", "accessibility"):
        rc, out, err = run_cli(capsys, cmd, "--text", bad)
        one_line_error(rc, err, f"{bad} is not UTF-8 text")
        assert out == ""


@pytest.mark.parametrize("call, needle", [
    (lambda u: u["french"].load_conversations(num_conversations="x"), "num_conversations must be a whole number "
                                                                      "between 1 and 32, got 'x'"),
    (lambda u: u["french"].load_conversations(reinject_every="x"), "reinject_every must be a whole number >= 0"),
    (lambda u: u["french"].load_conversations(reinject_every=1.5), "got 1.5"),
    (lambda u: u["french"].load_conversations(prompt_language=["en"]), "prompt_language must be one of"),
    (lambda u: u["position"].load_settings(length="x"), "position_bias length must be a whole number >= 2"),
    (lambda u: u["position"].load_settings(sequences=True), "position_bias sequences must be a whole number"),
    (lambda u: u["alpha"].load_axis("detail", num_scenes="x"), "num_scenes must be a whole number between 2 and 20"),
    (lambda u: u["alpha"].load_axis("detail", bootstrap_iters=-1), "bootstrap_iters must be a whole number >= 0"),
])
def test_task_metadata_of_the_wrong_type_is_one_line(call, needle):
    with pytest.raises(DriftUsageError) as exc:
        call({"french": french, "position": position, "alpha": alpha})
    assert needle in exc.value.message and "\n" not in exc.value.message


@pytest.mark.parametrize("gen, needle", [
    ({"max_gen_toks": 0}, "max_gen_toks must be a whole number >= 1, got 0"),
    ({"max_gen_toks": -5}, "got -5"),
    ({"max_gen_toks": "many"}, "got 'many'"),
    ({"min_new_tokens": -1}, "min_new_tokens must be a whole number >= 0"),
    ({"temperature": float("nan")}, "temperature must be a number >= 0"),
    ({"until": [1]}, "until must be text or a list of texts"),
])
def test_generation_kwargs_are_checked(gen, needle):
    with pytest.raises(DriftUsageError, match=needle.replace("(", r"\(")):
        check_generation_kwargs(dict(gen))
    assert check_generation_kwargs({"max_gen_toks": "16", "until": []})["max_gen_toks"] == 16
