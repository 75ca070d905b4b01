"""``drift-eval leaderboard DIR... -o board.md|.csv|.json``: one row per (model, setting).

Standard lm-eval results are the only input (any folders the results loader reads). The
columns come from the runs' metric definitions (``Output.catalogue``): each group's
aggregate metric (the headline, ``drift_score``), every metric hinted ``report: summary``
(single-turn fully French and echo, multi-turn last-3 and all-turns French, leaks per 1000
words), the per-turn French rate (first and last turn), and α (the median over the
``drift_alpha_*`` axes present). Each value has its 95% interval (as in the report).

A family with a group of groups (``drift_languages``) is ranked by that group's pooled
headline, with each member group's headline (one per language) as a column of its own.
Where no group ran (``--tasks drift_french_single``), each task's own headline (its YAML's
``headline`` role) is a column, and the first of them with a direction ranks the rows; the
Markdown note and the JSON's ``ranked_by`` name the column that ranks.

Rows are ranked by the headline, in its direction: a row's rank is 1 + the number of rows
whose interval lies entirely on the better side of its own, so rows whose intervals overlap
share a rank and are marked tied. Rows without the headline come last, unranked. A run whose forced-length tasks were
not forced (unforced on purpose, or a backend that forced only some answers) did not run
the same test: its ``answers`` column says so, and rows are ranked only against rows whose
answers were made alike. So are runs of different versions of the ranking task (a new task
version defines its metrics differently): where the rows' versions differ, the ``answers``
column names each row's version.

Names and labels from results files are inert in every format (``drift_eval.inert``).
"""
from __future__ import annotations

import csv
import io
import math
import os
import statistics

from drift_eval import inert
from drift_eval.catalogue import headline, hinted, series, series_points
from drift_eval.decide.results import load_output
from drift_eval.errors import DriftUsageError
from drift_eval.files import write_text_atomic


def columns(output) -> list:
    """(task, metric, is_headline) of the leaderboard, present in ``output``, in order."""
    cat = output.catalogue
    present = {(t, m) for r in output.runs.values() for t, tr in r.tasks.items() for m in tr.values}
    from drift_eval.reports.sections.languages import family  # deferred, start-up: loads numpy

    tops, inside = family(output)
    # a group of groups (drift_languages) first: its pooled headline ranks the rows, and its
    # member groups (one per language) are the next columns; their tasks' own metrics are left out
    order = tops + [t for t in cat if t not in tops]
    heads = [(t, m, True) for t in order for m in cat.get(t, {}) if (t, m) in present and _is_group(output, t)]
    if not heads:  # no group ran: each task's own headline
        heads = [(t, m, True) for t in cat if t not in inside for m in [headline(cat, t)] if (t, m) in present]
    shown = {(t, m) for t, m, _ in heads}
    summary = [(t, m, False) for t in cat if t not in inside for m in hinted(cat, t, "summary")
               if (t, m) in present and (t, m) not in shown]
    return heads + summary


def ranked_by(output, cols: list) -> tuple[str, bool] | None:
    """The column that ranks the rows (the first headline with a direction) and whether
    higher is better; None when no headline has one."""
    cat = output.catalogue
    for t, m, is_head in cols:
        hib = cat.get(t, {}).get(m, {}).get("higher_is_better")
        if is_head and hib is not None:
            return f"{t}/{m}", bool(hib)
    return None


def _is_group(output, task) -> bool:
    return any(r.tasks[task].is_group for r in output.runs.values() if task in r.tasks)


def _cell(output, run, task, metric) -> dict | None:
    if task not in run.tasks or metric not in run.tasks[task].values:
        return None
    m = output.metric(task, metric, run.setting, run.model)
    return {"value": m.value, "lower": m.lower, "upper": m.upper, "n": m.n, "version": m.version} \
        if isinstance(m.value, float) else None


def _per_turn(run, cat: dict, skip: set = frozenset()) -> dict | None:
    """The first curve by turn of the run's tasks (their YAMLs' ``series``: French per
    turn), the language family's tasks left out (``skip``: which language would it be?)."""
    for task, tr in run.tasks.items():
        if task in skip:
            continue
        for spec in (s for s in series(cat, task) if s["by"] == "turn"):
            turns = [(x, tr.values[m]) for x, m in series_points(spec, tr.values)
                     if isinstance(tr.values[m], (int, float))]
            if not turns:
                continue
            return {"task": task, "first": float(turns[0][1]), "last": float(turns[-1][1]),
                    "turns": [float(v) for _, v in turns]}
    return None


def _alpha(run) -> float | None:
    values = [float(tr.values["alpha"]) for t, tr in run.tasks.items()
              if t.startswith("drift_alpha_") and isinstance(tr.values.get("alpha"), (int, float))]
    return statistics.median(values) if values else None


def _answers(run) -> tuple[tuple, str]:
    """(how the run's forced-length tasks' answers were made, as a key; the same in words:
    ``forced``, or each task that was not, with how; ``—`` without such tasks)."""
    made = sorted((t, tr.length) for t, tr in run.tasks.items()
                  if tr.length is not None and (tr.length.kind != "unforced" or tr.length.on_purpose))
    key = tuple((t, length.kind) for t, length in made)
    if not made:
        return key, "—"
    if all(length.kind == "forced" for _, length in made):
        return key, "forced"
    return key, "; ".join(f"{t}: {length}" for t, length in made if length.kind != "forced")


def rows(output) -> tuple[list, list]:
    """(columns, rows): rows ranked, each with ``rank`` and ``tied``, against the rows whose
    answers were made alike."""
    from drift_eval.reports.sections.languages import family  # deferred, start-up: loads numpy

    cols = columns(output)
    cat = output.catalogue
    _, inside = family(output)
    out = []
    for run in output.ordered_runs():
        cells = {f"{t}/{m}": _cell(output, run, t, m) for t, m, _ in cols}
        key, answers = _answers(run)
        out.append({"model": run.model, "setting": run.setting, "answers": answers, "answers_key": key,
                    "cells": cells, "per_turn": _per_turn(run, cat, inside), "alpha_median": _alpha(run)})
    head, higher = ranked_by(output, cols) or (None, True)
    sign = 1 if higher else -1
    # runs of different versions of the ranking task define its metric differently: never ranked together
    versions = [r["cells"][head]["version"] if head and r["cells"].get(head) else None for r in out]
    if len(set(versions) - {None}) > 1:
        for row, v in zip(out, versions):
            row["answers_key"] = (*row["answers_key"], ("version", v))
            if v is not None:
                said = f"{head.split('/')[0]} version {v}" if " " not in v else f"task versions {v}"
                row["answers"] = said if row["answers"] == "—" else f"{row['answers']}; {said}"

    def bounds(row):
        """The row's interval of the ranking column, oriented so that higher is better."""
        c = row["cells"].get(head) if head else None
        if c is None:
            return None
        lo, hi = c["lower"], c["upper"]
        lo, hi = (c["value"], c["value"]) if math.isnan(lo) or math.isnan(hi) else (lo, hi)
        return (lo, hi) if higher else (-hi, -lo)

    for row in out:
        b = bounds(row)
        alike = [o for o in out if o["answers_key"] == row["answers_key"]]
        row["rank"] = None if b is None else 1 + sum(1 for o in alike if bounds(o) and bounds(o)[0] > b[1])
    for row in out:
        row["tied"] = row["rank"] is not None and sum(
            o["rank"] == row["rank"] and o["answers_key"] == row["answers_key"] for o in out) > 1
    keys = list(dict.fromkeys(r["answers_key"] for r in out))
    out.sort(key=lambda r: (keys.index(r["answers_key"]), r["rank"] is None, r["rank"] or 0,
                            -sign * (r["cells"][head]["value"] if head and r["cells"].get(head) else 0)))
    return cols, out


def _fmt(c, d=3) -> str:
    if c is None:
        return "—"
    ci = "" if math.isnan(c["lower"]) else f" [{c['lower']:.{d}f}, {c['upper']:.{d}f}]"
    return f"{c['value']:.{d}f}{ci}"


def markdown(output) -> str:
    cols, rs = rows(output)
    head = ["rank", "model", "setting", "answers", *[f"{t}/{m}" for t, m, _ in cols],
            "French per turn (first → last)", "α median"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rs:
        rank = "—" if r["rank"] is None else f"{r['rank']}{'=' if r['tied'] else ''}"
        turn = "—" if r["per_turn"] is None else f"{r['per_turn']['first']:.3f} → {r['per_turn']['last']:.3f}"
        alpha = "—" if r["alpha_median"] is None else f"{r['alpha_median']:.3f}"
        cells = [_fmt(r["cells"][f"{t}/{m}"]) for t, m, _ in cols]
        named = [inert.markdown(x, cell=True) for x in (r["model"], r["setting"], r["answers"])]
        lines.append("| " + " | ".join([rank, *named, *cells, turn, alpha]) + " |")
    by = ranked_by(output, cols)
    ranking = (f"Ranked by {by[0]} ({'higher' if by[1] else 'lower'} is better), by its 95% interval: rows that "
               f"share a rank (marked =) overlap and are tied. Rows are ranked only against rows whose answers were "
               f"made alike, at the same task version (the answers column). " if by else "No headline metric with a direction: rows are unranked. ")
    note = (ranking +
            "Intervals: Wilson for 0/1 per-sample values, the exact interval of the shares' sum for the time in "
            "the language, a bootstrap of the mean otherwise, ±1.96·stderr without logged samples.")
    return "\n".join(["# Drift leaderboard", "", *lines, "", note, ""])


def records(output) -> list:
    """Flat rows (one per leaderboard row) for CSV and JSON."""
    cols, rs = rows(output)
    out = []
    for r in rs:
        rec = {"rank": r["rank"], "tied": r["tied"], "model": r["model"], "setting": r["setting"],
               "answers": r["answers"]}
        for t, m, _ in cols:
            c = r["cells"][f"{t}/{m}"] or {}
            for k in ("value", "lower", "upper", "n"):
                v = c.get(k)
                rec[f"{t}/{m}:{k}"] = None if isinstance(v, float) and math.isnan(v) else v
        turns = (r["per_turn"] or {}).get("turns") or []
        for i, v in enumerate(turns, 1):
            rec[f"french_turn_{i}"] = v
        rec["alpha_median"] = r["alpha_median"]
        out.append(rec)
    return out


def write_leaderboard(roots: list, path: str | None, fmt: str | None = None) -> str:
    """The leaderboard of ``roots`` as Markdown, CSV or JSON (``path``'s extension, or
    ``fmt``); returns the text (and writes it when ``path`` is given)."""
    if fmt is None:
        ext = os.path.splitext(path or "board.md")[1].lower()
        fmt = {".md": "md", ".markdown": "md", ".csv": "csv", ".json": "json"}.get(ext)
        if fmt is None:
            raise DriftUsageError(f"cannot tell the leaderboard format from '{path}': end it in .md, .csv or .json, "
                                  f"or pass --format")
    output = load_output(*roots)
    if fmt == "md":
        text = markdown(output)
    else:
        recs = records(output)
        if fmt == "json":
            by = ranked_by(output, columns(output))
            text = inert.json_text({"ranked_by": by[0] if by else None, "rows": recs}, indent=2, ensure_ascii=False)
        else:
            buf = io.StringIO()
            fields = list(dict.fromkeys(k for r in recs for k in r))
            # lines end in \n: CSV readers take either ending, and a \r on a terminal is escaped
            writer = csv.DictWriter(buf, fieldnames=[inert.csv_cell(f) for f in fields], lineterminator="\n")
            writer.writeheader()
            writer.writerows([{inert.csv_cell(k): inert.csv_cell(v) for k, v in r.items()} for r in recs])
            text = buf.getvalue()
    if path:
        write_text_atomic(path, text)
    return text
