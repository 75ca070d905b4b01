"""Reliability: unusable input is one line and exit status 2 before any work, nothing is
ever deserialised as code, and no damaged or partial file is read as a result (issue 14).

Every case checks the exit status, that the message is one line, and that no good file
was changed. Sweeps with a real model are in ``test_reliability_sweep.py``."""
import hashlib
import json
import os
import pickle
import sqlite3
import threading
import xml.etree.ElementTree as ET

import pytest

from checks import Planted, benchmark, one_line_error, run_cli
from handmade_results import write_output

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


# ---------------------------------------------------------------------- no code from data
def test_a_planted_pickle_in_the_answer_cache_never_runs(tmp_path):
    from drift_eval.plugin.answer_cache import AnswerCache

    marker = tmp_path / "PWNED"
    warnings = []
    cache = AnswerCache(str(tmp_path / "cache"), warn=warnings.append)
    cache.put([("k1", "generate_until", "Bonjour")])
    with sqlite3.connect(cache.path) as db:  # a pickle where JSON belongs, as lm-eval's cache held
        db.execute("INSERT INTO answers VALUES (?, ?, ?)", ("k2", "generate_until", pickle.dumps(Planted(marker))))
    assert cache.get("k1", "generate_until") == "Bonjour"
    assert cache.get("k2", "generate_until") is None and cache.invalid == 1
    assert not marker.exists() and not warnings


@pytest.mark.parametrize("content", [b"", b"this is not a database" * 100, b"SQLite format 3\x00" + b"\x00" * 50])
def test_a_damaged_cache_file_is_rebuilt_with_a_warning(tmp_path, content):
    from drift_eval.plugin.answer_cache import AnswerCache

    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "answers.sqlite").write_bytes(content)
    warnings = []
    cache = AnswerCache(str(folder), warn=warnings.append)
    cache.put([("k", "generate_until", "Salut")])
    assert cache.get("k", "generate_until") == "Salut"
    if content:
        assert len(warnings) == 1 and "moved aside to answers.sqlite.damaged" in warnings[0]
        assert (folder / "answers.sqlite.damaged").read_bytes() == content
    else:
        assert not warnings  # an empty file is an empty database


def test_a_cache_with_foreign_tables_is_set_aside(tmp_path):
    from drift_eval.plugin.answer_cache import AnswerCache

    folder = tmp_path / "cache"
    folder.mkdir()
    with sqlite3.connect(folder / "answers.sqlite") as db:
        db.execute("CREATE TABLE unnamed (key TEXT PRIMARY KEY, value BLOB)")  # SqliteDict's layout
    warnings = []
    AnswerCache(str(folder), warn=warnings.append).close()
    assert "holds other tables than an answer cache" in warnings[0]


@pytest.mark.parametrize("rtype, value", [
    ("generate_until", "Bonjour"),
    ("loglikelihood", (-1.5, True)),
    ("loglikelihood", (float("-inf"), False)),
    ("loglikelihood_rolling", -12.25),
    ("generate_conversation", json.dumps([{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}])),
    ("continuation_nll", json.dumps({"nll": [1.0], "tokens": 4, "compensation": "none"})),
])
def test_cached_answers_round_trip_and_are_type_checked(rtype, value):
    from drift_eval.plugin import answer_cache as ac

    assert ac.decode(rtype, ac.encode(rtype, value)) == value
    for other in ("generate_until", "loglikelihood", "generate_conversation", "position_profile"):
        if other != rtype and not (other == "generate_until" and isinstance(value, str)):
            with pytest.raises(ValueError):
                ac.decode(other, ac.encode(rtype, value))


def test_answers_keep_their_metadata_through_the_cache(tmp_path):
    from drift_eval.plugin.answer_cache import AnswerCache
    from drift_eval.plugin.answers import Answer

    a = Answer("Bonjour tout le monde", tokens=7, forced_length=True, natural_end=3)
    cache = AnswerCache(str(tmp_path))
    cache.put([("k", "generate_until", a)])
    cache.close()
    b = AnswerCache(str(tmp_path)).get("k", "generate_until")
    assert isinstance(b, Answer) and b == a and b.meta == a.meta
    with sqlite3.connect(tmp_path / "answers.sqlite") as db:  # an answer record with a field it does not know
        db.execute("UPDATE answers SET value = ?", (json.dumps({"answer": {"text": "x", "evil": 1}}),))
    assert AnswerCache(str(tmp_path)).get("k", "generate_until") is None


def test_a_run_checkpoint_carries_every_answer_and_is_checked_before_anything_is_stored(tmp_path, capsys):
    """A sweep's answer caches leave as JSON lines and come back answer for answer; a
    damaged checkpoint is named with its row and stores nothing, not even its good files."""
    import subprocess
    import sys

    from drift_eval.plugin.answer_cache import AnswerCache
    from drift_eval.errors import DamagedFile, DriftUsageError
    from drift_eval.plugin.answers import Answer

    runs = benchmark("protocol_runs")
    conversation = json.dumps([{"role": "user", "content": "Salut"}, {"role": "assistant", "content": "Bonjour"}])
    stored = {"none": [("a", "generate_until", Answer("Bonjour à tous", tokens=5, forced_length=True, natural_end=2)),
                       ("b", "loglikelihood", (float("-inf"), False)),
                       ("c", "generate_conversation", conversation)],
              "log_0.25": [("d", "generate_until", "Au revoir")]}
    for setting, items in stored.items():
        cache = AnswerCache(str(tmp_path / "run" / setting / "cache"))
        cache.put(items)
        cache.close()
    runs.checkpoint(str(tmp_path / "run"), str(tmp_path / "ckpt"))
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["log_0.25.jsonl", "none.jsonl"]
    runs.restore(str(tmp_path / "ckpt"), str(tmp_path / "again"))
    for setting, items in stored.items():
        cache = AnswerCache(str(tmp_path / "again" / setting / "cache"))
        assert len(cache) == len(items)
        for key, rtype, answer in items:
            back = cache.get(key, rtype)
            assert back == answer and type(back) is type(answer)
            if isinstance(answer, Answer):
                assert back.meta == answer.meta

    lines = (tmp_path / "ckpt" / "none.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    row["type"] = "generate_until"  # a log-likelihood pair is not an answer text
    (tmp_path / "ckpt" / "none.jsonl").write_text("\n".join([lines[0], json.dumps(row), lines[2]]) + "\n")
    with pytest.raises(DamagedFile, match=r"none\.jsonl row 2 is not a cached answer"):
        runs.restore(str(tmp_path / "ckpt"), str(tmp_path / "third"))
    assert not (tmp_path / "third").exists()  # log_0.25.jsonl, read first and good, was not stored either
    with pytest.raises(DriftUsageError, match="holds no answer cache"):
        runs.checkpoint(str(tmp_path / "ckpt"), str(tmp_path / "ckpt2"))
    r = subprocess.run([sys.executable, runs.__file__, "restore", str(tmp_path / "ckpt"), str(tmp_path / "third")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "row 2" in r.stderr


class _Backend:
    """A backend that answers like HFLM: each generated answer goes through its cache hook
    as it is produced (here an Answer with metadata), and conversations call back into
    ``generate_until`` for their turns."""

    def __init__(self):
        from lm_eval.api.model import CacheHook

        self.cache_hook = CacheHook(None)
        self.calls = []

    def set_cache_hook(self, hook):
        self.cache_hook = hook

    def generate_until(self, requests, disable_tqdm=False):
        from drift_eval.plugin.answers import Answer

        out = []
        for r in requests:
            a = Answer(f"réponse à {r.args[0]}", tokens=len(r.args[0]), forced_length=True, natural_end=None)
            self.cache_hook.add_partial("generate_until", r.args, a)
            out.append(a)
        self.calls.append(("generate_until", len(requests)))
        return out

    def generate_conversation(self, requests, disable_tqdm=False, turns=None):
        """``turns``: what serves the turns (the drift wrapper's road to the model)."""
        from drift_eval.conversation import dump_messages

        turns = (turns or self.generate_until)([_Request((r.args[0] + " turn", {})) for r in requests])
        self.calls.append(("generate_conversation", len(requests)))
        return [dump_messages([{"role": "user", "content": r.args[0]}, {"role": "assistant", "content": t}])
                for r, t in zip(requests, turns)]


class _Request:
    def __init__(self, args):
        self.args = args


def test_the_sweep_serves_cached_answers_with_their_metadata(tmp_path):
    from functools import partial

    from drift_eval.plugin.answer_cache import AnswerCache
    from drift_eval.plugin.cached_serving import CachedServing

    def run(backend):
        cache = AnswerCache(str(tmp_path))
        answers = CachedServing(cache, chunk=2)
        backend.set_cache_hook(answers)
        try:
            single = answers.serve("generate_until", backend.generate_until,
                                   [_Request((f"q{i}", {"max_gen_toks": 8})) for i in range(3)]
                                   + [_Request(("s", {"do_sample": True}))])
            turns = partial(answers.serve, "generate_until", backend.generate_until)
            convs = answers.serve("generate_conversation", partial(backend.generate_conversation, turns=turns),
                                  [_Request((f"c{i}", {})) for i in range(3)])
        finally:
            cache.close()
        return single, convs, answers

    first, convs, a1 = run(_Backend())
    backend = _Backend()
    again, convs2, a2 = run(backend)
    assert [x.meta for x in again] == [x.meta for x in first] and again == first and convs2 == convs
    assert (a1.generated, a1.cached) == (7, 0)
    assert (a2.generated, a2.cached) == (1, 6)  # only the sampled answer runs again
    assert backend.calls == [("generate_until", 1)]  # the conversations' turns were not cached on their own


# ---------------------------------------------------------------------- concurrent writers
def test_concurrent_atomic_writers_never_show_half_a_file(tmp_path):
    from drift_eval.files import read_json, write_json_atomic

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
    from drift_eval.errors import DriftUsageError
    from drift_eval.files import folder_lock

    with folder_lock(str(tmp_path), "drift-eval sweep"):
        with pytest.raises(DriftUsageError, match="is in use by another drift-eval sweep"):
            with folder_lock(str(tmp_path), "drift-eval sweep"):
                pass
    with folder_lock(str(tmp_path), "drift-eval sweep"):  # released when the first one ends
        pass


def test_concurrent_cache_writers_keep_every_answer(tmp_path):
    from drift_eval.plugin.answer_cache import AnswerCache

    def writer(k):
        cache = AnswerCache(str(tmp_path))
        for i in range(40):
            cache.put([(f"{k}-{i}", "generate_until", f"answer {k} {i}")])
        cache.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cache = AnswerCache(str(tmp_path))
    assert len(cache) == 120 and cache.get("2-39", "generate_until") == "answer 2 39"


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
    from drift_eval.errors import DriftUsageError
    from drift_eval.tasks.drift_alpha import utils as alpha
    from drift_eval.tasks.drift_french import utils as french
    from drift_eval.tasks.position_bias import utils as position

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
    from drift_eval.errors import DriftUsageError
    from drift_eval.plugin.task_base import check_generation_kwargs

    with pytest.raises(DriftUsageError, match=needle.replace("(", r"\(")):
        check_generation_kwargs(dict(gen))
    assert check_generation_kwargs({"max_gen_toks": "16", "until": []})["max_gen_toks"] == 16


# ---------------------------------------------------------------------- the language-ID model
@pytest.mark.parametrize("content, needle", [
    (b"", "is empty"),
    (b"\x00" * 938013, "is damaged (its checksum is not lid.176's)"),
])
def test_unusable_language_model_files_are_one_line(tmp_path, content, needle):
    from drift_eval.metrics import langid

    path = tmp_path / "lid.bin"
    path.write_bytes(content)
    with pytest.raises(langid.LanguageModelMissing, match=needle.replace("(", r"\(").replace(")", r"\)")):
        langid.check_model_file(str(path))


def test_a_lid_176_ftz_of_another_size_is_damaged(tmp_path):
    from drift_eval.metrics import langid

    real = langid.default_model_path()
    cut = tmp_path / "lid.176.ftz"
    cut.write_bytes(open(real, "rb").read()[:400_000])
    with pytest.raises(langid.LanguageModelMissing, match="is 400000 bytes, not lid.176.ftz's 938013"):
        langid.check_model_file(str(cut))
    assert langid.check_model_file(real) == real


def test_pair_compares_two_tasks_document_by_document(tmp_path):
    """A control task against the plain task on the same documents: the paired difference
    and its exact McNemar p (6 discordant pairs, all one way: p = 2 / 64)."""
    from handmade_results import write_task_run

    from drift_eval.errors import DriftUsageError

    runs = benchmark("protocol_runs")
    plain = [1, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    control = [1, 1, 1, 1, 1, 1, 1, 1, 1, 0]
    write_task_run(str(tmp_path / "plain"), "m", plain, task="plain_task", metric="french_turn_8")
    write_task_run(str(tmp_path / "control"), "m", control, task="control_task", metric="french_last_turn")
    table = runs.pair(str(tmp_path / "control"), "control_task", str(tmp_path / "plain"), "plain_task",
                      ["french_last_turn=french_turn_8"])
    row = table.splitlines()[2]
    assert row.startswith("| french_last_turn=french_turn_8 | 0.900 ") and "| 0.300 " in row
    assert "+0.600 [" in row and "p 0.031 (exact McNemar, 10)" in row
    with pytest.raises(DriftUsageError, match="control has 0 runs of control_task under log:0.25"):
        runs.pair(str(tmp_path / "control"), "control_task", str(tmp_path / "plain"), "plain_task",
                  ["french_turn_8"], setting="log:0.25")


def test_publish_keeps_generated_answers_whole_and_cuts_teacher_forced_continuations(tmp_path):
    """A published run can be scored again: every answer and every conversation turn is
    copied whole; only the bundled continuations of teacher-forced requests are cut."""
    runs = benchmark("protocol_runs")
    answer = "Bonjour. " * 400
    turns = json.dumps([{"role": "system", "content": "Réponds en français."}, {"role": "user", "content": "Hi"},
                        {"role": "assistant", "content": "Salut ! " * 300}], ensure_ascii=False)
    forced = {"gen_args_0": {"arg_0": json.dumps({"continuations": ["mot " * 500]}), "arg_1": {}}}
    src = tmp_path / "run" / "none" / "m"
    src.mkdir(parents=True)
    rows = [{"doc_id": 0, "resps": [[answer]], "filtered_resps": [answer], "arguments": {}},
            {"doc_id": 1, "resps": [[turns]], "filtered_resps": [turns], "arguments": forced}]
    (src / "samples_t_2026-01-01T00-00-00.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs.publish(str(tmp_path / "run"), str(tmp_path / "pub"))
    out = [json.loads(x) for x in (tmp_path / "pub" / "none" / "m" / "samples_t_2026-01-01T00-00-00.jsonl").open()]
    assert out[0]["resps"] == [[answer]] and out[0]["filtered_resps"] == [answer]
    assert out[1]["resps"] == [[turns]] and out[1]["filtered_resps"] == [turns]
    kept = json.loads(out[1]["arguments"]["gen_args_0"]["arg_0"])["continuations"][0]
    assert kept.startswith("mot mot") and kept.endswith("[... 1400 more characters]") and len(kept) < 700
