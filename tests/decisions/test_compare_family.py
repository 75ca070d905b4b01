"""drift-eval compare reads its rows as one family: raw and Benjamini–Hochberg adjusted p,
significant only what survives the adjustment over the comparisons shown."""
import json
import re

import pytest
from scipy.stats import false_discovery_control

from drift_eval.decide.compare import adjust_comparisons, compare_models
from drift_eval.decide.results import load_output
from support.checks import run_cli
from support.handmade_results import write_task_run


def _board(root):
    """Two models, two settings: under none the candidate loses 6 of 36 documents (exact
    McNemar p = 2/64 = 0.03125), under log:0.25 it matches the baseline (p = 1)."""
    write_task_run(root, "shipped", [1] * 36, date="2026-02-01T00-00-00.000000")
    write_task_run(root, "new", [1] * 30 + [0] * 6, date="2026-02-01T00-00-00.000000")
    write_task_run(root / "log", "shipped", [1] * 36, setting="log:0.25", date="2026-02-02T00-00-00.000000")
    write_task_run(root / "log", "new", [1] * 36, setting="log:0.25", date="2026-02-02T00-00-00.000000")
    return root


def test_compare_shows_raw_and_adjusted_p_and_reads_the_adjusted_one(tmp_path, capsys):
    root = _board(tmp_path / "board")
    rc, out, _ = run_cli(capsys, "compare", "new", "shipped", "--in", root, "--format", "json")
    assert rc == 0
    rows = {r["setting"]: r for r in json.loads(out)}
    assert set(rows) == {"none", "log:0.25"}
    # by hand: ranks 1 and 2 of (0.03125, 1): 0.03125 · 2 / 1 = 0.0625, 1 · 2 / 2 = 1
    assert rows["none"]["p_value"] == pytest.approx(2 / 64) and rows["none"]["p_adjusted"] == pytest.approx(0.0625)
    assert rows["none"]["verdict"] == "not significant"  # p < 0.05 alone, not over the two comparisons
    assert rows["log:0.25"]["verdict"] == "no difference" and rows["log:0.25"]["p_adjusted"] == 1.0
    assert all(r["family"] == 2 and r["adjustment"] == "Benjamini–Hochberg" for r in rows.values())
    ps = [r["p_value"] for r in rows.values()]
    assert [r["p_adjusted"] for r in rows.values()] == pytest.approx(list(false_discovery_control(ps)))
    rc, text, _ = run_cli(capsys, "compare", "new", "shipped", "--in", root)
    assert rc == 0 and "p adj: Benjamini–Hochberg over the 2 comparisons shown" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("none"))
    assert "0.0312   0.0625" in line and line.endswith("not significant (exact McNemar)")


def test_one_comparison_is_a_family_of_one(tmp_path, capsys):
    root = tmp_path / "board"
    write_task_run(root, "shipped", [1] * 36)
    write_task_run(root, "new", [1] * 30 + [0] * 6)
    rc, out, _ = run_cli(capsys, "compare", "new", "shipped", "--in", root, "--format", "json")
    [row] = json.loads(out)
    assert row["p_adjusted"] == pytest.approx(row["p_value"]) and row["verdict"] == "significant"


def test_adjusted_comparisons_say_so_in_their_line(tmp_path):
    out = load_output(_board(tmp_path / "board"))
    rows = compare_models(out, out, "new", "shipped")
    plain = {c.setting: c for c in rows}
    assert plain["none"].difference.verdict == "significant" and not plain["none"].difference.adjusted
    adjusted = {c.setting: c for c in adjust_comparisons(rows)}
    line = adjusted["none"].describe()
    assert "p 0.03125 (exact McNemar, n=36), Benjamini–Hochberg-adjusted p 0.0625 over 2, not significant" in line
    assert adjusted["none"].mde == plain["none"].mde and adjusted["none"].difference.lower == \
        plain["none"].difference.lower


def test_a_sample_too_small_to_detect_any_difference_says_none(tmp_path, capsys):
    """Three paired 0/1 documents: even a difference of 1 (all three flip) has exact
    McNemar p = 0.25, so no difference is detectable at 80% power: the table says 'none'
    and the JSON gives null."""
    root = tmp_path / "board"
    write_task_run(root, "shipped", [1] * 3)
    write_task_run(root, "new", [0] * 3)
    rc, out, _ = run_cli(capsys, "compare", "new", "shipped", "--in", root, "--format", "json")
    [row] = json.loads(out)
    assert rc == 0 and row["mde"] is None and row["n"] == 3
    rc, text, _ = run_cli(capsys, "compare", "new", "shipped", "--in", root)
    assert "'none' where no difference is detectable at this n" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("none "))
    assert re.search(r" 3 +none  not significant \(exact McNemar\)$", line), line  # n, then the MDE column
