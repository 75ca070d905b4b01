"""drift-eval leaderboard: rows ranked in each headline's direction with ties marked, runs of two
task versions ranked apart, a reader that stops reading ends it quietly, and a hostile model
name stays inert in every format."""
import csv
import io
import json
import sys

import pytest

from drift_eval.cli import main
from support.checks import run_cli
from support.handmade_results import TaskRecord, write_output, write_task_run


def test_leaderboard_ranks_rows_and_marks_ties(tmp_path, capsys):
    root = tmp_path / "out"
    write_output(root, settings=("none", "log:0.25"), model="alpha")
    write_output(root, settings=("none",), model="beta", french_shift=9)
    rc, out, _ = run_cli(capsys, "leaderboard", root)
    lines = [ln for ln in out.splitlines() if ln.startswith("| ")]
    header = lines[0].split(" | ")
    assert header[:5] == ["| rank", "model", "setting", "answers", "drift_french/drift_score"]
    assert {"drift_french_single/fully_french", "drift_french_single/echo_rate", "drift_french_multiturn/last3_french",
            "French per turn (first → last)", "α median |"} <= set(header)
    assert "drift_french_multiturn/leak_per_1000" not in header  # not in these results
    ranks = [(ln.split(" | ")[0][2:], ln.split(" | ")[1].strip("`"), ln.split(" | ")[2].strip("`")) for ln in lines[1:]]
    # drift_score: alpha/log:0.25 20+4 of 24 [0.69, 0.95]; alpha/none 10/24 [0.24, 0.61]; beta/none 1/24 [0.01, 0.20]
    assert ranks == [("1", "alpha", "log:0.25"), ("2", "alpha", "none"), ("3", "beta", "none")]
    # gamma: 12 + 4 of 24 [0.47, 0.82]: below alpha/log:0.25, overlapping alpha/none: tied with it
    write_output(tmp_path / "more", settings=("const:0.25",), model="gamma")
    rc, _, _ = run_cli(capsys, "leaderboard", root, tmp_path / "more", "-o", tmp_path / "board.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "board.csv").read_text())))
    assert [(r["model"], r["setting"], r["rank"], r["tied"]) for r in rows] == [
        ("alpha", "log:0.25", "1", "False"), ("gamma", "const:0.25", "2", "True"), ("alpha", "none", "2", "True"),
        ("beta", "none", "4", "False")]
    assert float(rows[0]["drift_french/drift_score:value"]) == pytest.approx(24 / 24)
    assert float(rows[2]["french_turn_8"]) == 0.0 and rows[0]["alpha_median"] == "0.5"
    rc, _, _ = run_cli(capsys, "leaderboard", root, "-o", tmp_path / "board.json")
    assert json.loads((tmp_path / "board.json").read_text())["rows"][0]["model"] == "alpha"


def test_without_a_group_each_task_headline_ranks_in_its_direction(tmp_path, capsys):
    """``--tasks drift_french_single`` alone leaves no group in the results: the task's own
    headline (fully French) ranks the rows. A headline where lower is better (drift_ppl's
    perplexity change) ranks the lowest first."""
    root = tmp_path / "single"
    write_task_run(root, "a", [1] * 20)                # 20/20: Wilson [0.84, 1.00]
    write_task_run(root, "b", [0] * 20)                # 0/20: [0.00, 0.16]
    write_task_run(root, "c", [1] * 10 + [0] * 10)     # 10/20: [0.30, 0.70]
    rc, out, _ = run_cli(capsys, "leaderboard", root)
    lines = [ln.split(" | ") for ln in out.splitlines() if ln.startswith("| ")][1:]
    assert rc == 0 and [(ln[0][2:], ln[1].strip("`")) for ln in lines] == [("1", "a"), ("2", "c"), ("3", "b")]
    assert "Ranked by drift_french_single/fully_french (higher is better)" in out
    assert out.count("drift_french_single/fully_french |") == 1  # the headline is not shown twice
    run_cli(capsys, "leaderboard", root, "-o", tmp_path / "board.csv")
    text = (tmp_path / "board.csv").read_text()
    assert "\r" not in text and [r["model"] for r in csv.DictReader(io.StringIO(text))] == ["a", "c", "b"]
    ppl = tmp_path / "ppl"
    write_task_run(ppl, "worse", [0.5] * 10, task="drift_ppl", metric="perplexity_change")
    write_task_run(ppl, "better", [0.1] * 10, task="drift_ppl", metric="perplexity_change")
    run_cli(capsys, "leaderboard", ppl, "-o", tmp_path / "ppl.json")
    board = json.loads((tmp_path / "ppl.json").read_text())
    assert board["ranked_by"] == "drift_ppl/perplexity_change"
    assert [(r["model"], r["rank"]) for r in board["rows"]] == [("better", 1), ("worse", 2)]


def test_the_leaderboard_ranks_runs_of_two_task_versions_apart(tmp_path, capsys):
    """Three runs of drift_french_single, two at task version 3.0 and one at 2.1: the 2.1 row
    is ranked only against itself (rank 1 of its own), and the answers column names each
    row's version; at one version, as above, no version is shown."""
    root = tmp_path / "board"
    write_task_run(root, "a", [1] * 20, record=TaskRecord(version=3.0))             # 20/20: Wilson [0.84, 1.00]
    write_task_run(root, "b", [1] * 10 + [0] * 10, record=TaskRecord(version=3.0))  # 10/20: [0.30, 0.70]
    write_task_run(root, "old", [0] * 20, record=TaskRecord(version=2.1))           # would rank 3rd at one version
    run_cli(capsys, "leaderboard", root, "-o", tmp_path / "board.json")
    board = json.loads((tmp_path / "board.json").read_text())
    got = {r["model"]: (r["rank"], r["answers"]) for r in board["rows"]}
    assert got == {"a": (1, "drift_french_single version 3.0"), "b": (2, "drift_french_single version 3.0"),
                   "old": (1, "drift_french_single version 2.1")}
    rc, out, _ = run_cli(capsys, "leaderboard", root)
    assert rc == 0 and "at the same task version" in out
    same = tmp_path / "same"
    write_task_run(same, "a", [1] * 20, record=TaskRecord(version=3.0))
    write_task_run(same, "b", [0] * 20, record=TaskRecord(version=3.0))
    run_cli(capsys, "leaderboard", same, "-o", tmp_path / "same.json")
    assert [(r["model"], r["rank"], r["answers"]) for r in json.loads((tmp_path / "same.json").read_text())["rows"]] \
        == [("a", 1, "—"), ("b", 2, "—")]


def test_a_reader_that_stops_reading_ends_the_command_without_a_traceback(tmp_path, monkeypatch, capsys):
    """``drift-eval leaderboard ... | head -1``: the pipe closes while the board is written."""
    class Closed(io.StringIO):
        def __init__(self, fh):
            super().__init__()
            self.fh = fh

        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            return self.fh.fileno()

    root = write_task_run(tmp_path / "single", "a", [1, 0] * 10)
    with open(tmp_path / "stdout", "w") as fh:
        monkeypatch.setattr(sys, "stdout", Closed(fh))
        rc = main(["leaderboard", str(root)])
    assert rc == 1 and capsys.readouterr().err == ""


HOSTILE_MODEL = '=HYPERLINK("https://evil.example")\x1b]0;pwned\x07![x](https://evil.example/i.png)'


def test_a_hostile_model_name_is_inert_in_every_leaderboard_format(tmp_path, capsys):
    """A results folder whose model is named to attack: a spreadsheet formula, a terminal
    escape, Markdown image syntax. Markdown shows it as text in a code span (GitHub's
    renderer makes no link or image of it), CSV as text with the escape shown, the terminal
    without the escape; JSON keeps it as it is (as JSON's own escapes)."""
    root = tmp_path / "out"
    write_task_run(root, "m", [1, 0, 1])
    path = next(root.rglob("results_*.json"))
    doc = json.loads(path.read_text())
    doc["config"]["model_args"]["pretrained"] = HOSTILE_MODEL
    path.write_text(json.dumps(doc))
    rc, out, _ = run_cli(capsys, "leaderboard", root)
    assert rc == 0 and "\x1b" not in out and "\x07" not in out and "\\x1b]0;pwned\\x07" in out
    cmarkgfm = pytest.importorskip("cmarkgfm")
    html = cmarkgfm.github_flavored_markdown_to_html(out.replace("\\x1b", "\x1b").replace("\\x07", "\x07"))
    assert "<img" not in html and "<a " not in html and "<code>=HYPERLINK(" in html
    run_cli(capsys, "leaderboard", root, "-o", tmp_path / "board.csv")
    [row] = list(csv.DictReader(io.StringIO((tmp_path / "board.csv").read_text())))
    assert row["model"] == "'" + HOSTILE_MODEL.replace("\x1b", "\\x1b").replace("\x07", "\\x07")
    run_cli(capsys, "leaderboard", root, "-o", tmp_path / "board.json")
    assert json.loads((tmp_path / "board.json").read_text())["rows"][0]["model"] == HOSTILE_MODEL
