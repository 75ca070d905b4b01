"""The report's first screen: per task family, a table of model × setting → each task's
headline metric (the ``headline`` role in the task YAMLs; a group's aggregate) with its 95%
interval, and its change against ``none`` (and, for the candidate, against the baseline)
with the test's p-value; below it, per model, what the comparisons support, worded no
stronger than the tests (the verdicts of ``drift_eval.metrics.stats``, the minimum
detectable effects of ``drift_eval.metrics.stats`` / ``drift_eval.decide.compare``)."""
from __future__ import annotations

import math

from drift_eval.catalogue import hinted
from drift_eval.reports import text
from drift_eval.reports.sections.languages import family, target_of
from drift_eval.reports.sections.verdict import gate_outcome

SECTION = "headline"


def _columns(rep) -> list:
    """(family, [(task, metric)]): each family's tasks with a headline some run has, groups
    first, in the order the results list them."""
    names = rep.output.task_names()
    groups = {t for r in rep.output.runs.values() for t, tr in r.tasks.items() if tr.is_group}

    _, inside = family(rep.output)  # shown one row per member in the Languages section
    out: dict = {}
    for task in sorted(names, key=lambda t: (t not in groups, names.index(t))):
        if task in inside or (task not in groups and target_of(rep, task)):
            continue  # a language's own task: a row of the Languages section, not a column here
        metric = rep.headline(task)
        if metric and any(rep.has(r, task, metric) for r in rep.output.runs.values()):
            out.setdefault(rep.family(task), []).append((task, metric))
    families = sorted(out, key=lambda f: min(names.index(t) for t, _ in out[f]))
    return [(f, out[f]) for f in families]


def _baseline_change(rep, run, task, metric) -> dict | None:
    if rep.baseline is None or run.model != rep.candidate:
        return None
    for c in rep.against_baseline():
        if (c.setting, c.task, c.metric) == (run.setting, task, metric):
            return {"against": c.baseline, "d": c.difference, "mde": c.mde}
    return None


def _shown(rep, run, task, metric, change: dict) -> dict:
    d = change["d"]
    hib = rep.direction(task, metric, run)
    significant = d.verdict == "significant"
    better = (d.difference > 0) == bool(hib) if hib is not None else None
    rep.record_change(SECTION, run, task, metric, change)
    css = {True: "significant", False: "worse", None: "changed"}[better] if significant else "nodiff"
    return {**change, "significant": significant, "css": css}


def _table(rep, family: str, columns: list) -> dict:
    runs = [r for r in rep.output.ordered_runs() if any(rep.has(r, t, m) for t, m in columns)]
    rows, seen = [], set()
    for run in runs:
        cells = []
        for task, metric in columns:
            if not rep.has(run, task, metric):
                cells.append(None)
                continue
            cell = {**rep.cell(SECTION, run, task, metric), "percent": rep.percent(task, metric)}
            changes = [c for c in (rep.against_none(run, task, metric), _baseline_change(rep, run, task, metric)) if c]
            cell["changes"] = [_shown(rep, run, task, metric, c) for c in changes]
            cell["causes"] = _causes(rep, run, task)
            cells.append(cell)
        span = 0 if run.model in seen else sum(r.model == run.model for r in runs)  # the model cell's rowspan
        seen.add(run.model)
        rows.append({"model": run.model, "setting": run.setting, "cells": cells, "span": span})
    return {"family": family, "rows": rows, "readings": _readings(rep, columns),
            "columns": [{"task": t, "metric": m, "label": rep.label(t, m),
                         "arrow": {True: "↑", False: "↓"}.get(rep.direction(t, m), "")} for t, m in columns]}


def _causes(rep, run, task: str) -> list:
    """(cause, share) of the samples not kept, by first cause: the task's metrics with the
    ``cause`` role (their labels, less "not kept: "), so that a low headline says why."""
    out = []
    for metric in hinted(rep.cat, task, "cause"):
        if rep.has(run, task, metric):
            out.append((rep.label(task, metric).removeprefix("not kept: "),
                        rep.cell(SECTION, run, task, metric)["value"]))
    return out


def _verdict(c: dict) -> str:
    return {"significant": "significant (adjusted p < 0.05)", "no difference": "no difference"}.get(c["d"].verdict,
                                                                                           "not significant")


def _largest(items: list):
    return max(items, key=lambda wc: abs(wc[1]["d"].difference) if math.isfinite(wc[1]["d"].difference) else -1)


def _against_none(label: str, items: list, percent: bool) -> str:
    """What the comparisons of one headline with ``none`` support; ``items``: (setting, change)."""
    sig = [(w, c) for w, c in items if c["d"].verdict == "significant"]
    if len(items) == 1:
        who, c = items[0]
        return (f"{who} changes {label} by {text.change(c['d'], percent)} against none: {_verdict(c)}; "
                f"{text.detectable(c['mde'], percent)}.")
    if not sig:
        who, c = _largest(items)
        return (f"No setting changes {label} significantly against none; the largest change is {who}, "
                f"{text.change(c['d'], percent)}, and {text.detectable(c['mde'], percent)}.")
    said = "; ".join(f"{who} by {text.change(c['d'], percent)}" for who, c in sig)
    rest = len(items) - len(sig)
    tail = f"; the other {rest} {'change is' if rest == 1 else 'changes are'} not significant" if rest else ""
    return f"Against none, {label} changes significantly (adjusted p < 0.05) under {said}{tail}."


def _against_baseline(label: str, items: list, baseline: str, percent: bool) -> str:
    """The same for the candidate against the baseline, setting by setting."""
    sig = [(w, c) for w, c in items if c["d"].verdict == "significant"]
    if len(items) == 1:
        who, c = items[0]
        return (f"Against the baseline {baseline} under {who}, {label} differs by {text.change(c['d'], percent)}: "
                f"{_verdict(c)}; {text.detectable(c['mde'], percent)}.")
    if not sig:
        who, c = _largest(items)
        return (f"Against the baseline {baseline}, {label} differs significantly under no setting; the largest "
                f"difference is under {who}, {text.change(c['d'], percent)}, and {text.detectable(c['mde'], percent)}.")
    said = "; ".join(f"under {who} by {text.change(c['d'], percent)}" for who, c in sig)
    rest = len(items) - len(sig)
    tail = f"; the other {rest} {'difference is' if rest == 1 else 'differences are'} not significant" if rest else ""
    return f"Against the baseline {baseline}, {label} differs significantly (adjusted p < 0.05) {said}{tail}."


def _readings(rep, columns: list) -> list:
    """Per model of the table, a sentence per headline it can be compared on: the group's
    headline when the family's group ran (it pools its tasks), else each task's."""
    groups = {t for r in rep.output.runs.values() for t, tr in r.tasks.items() if tr.is_group}
    if columns[0][0] in groups:
        columns = columns[:1]
    out = []
    for model in rep.output.models:
        runs = [r for r in rep.output.ordered_runs() if r.model == model]
        if not any(rep.has(r, t, m) for r in runs for t, m in columns):
            continue
        sentences = []
        for task, metric in columns:
            label, pct = f"{rep.label(task, metric)} ({task})", rep.percent(task, metric)
            items = [(r.setting, c) for r in runs if (c := rep.against_none(r, task, metric))]
            if items:
                sentences.append(_against_none(label, items, pct))
            base = [(r.setting, c) for r in runs if (c := _baseline_change(rep, r, task, metric))]
            if base:
                sentences.append(_against_baseline(label, base, rep.baseline_model, pct))
        if not sentences:
            settings = [r.setting for r in runs if any(rep.has(r, t, m) for t, m in columns)]
            if len(settings) == 1:
                sentences = [f"Only {settings[0]} was run: nothing to compare."]
            elif "none" not in settings:
                sentences = ["No none run to compare the settings with."]
            else:
                sentences = ["The settings cannot be compared on these headlines: they have neither per-sample "
                             "values nor standard errors."]
        out.append({"model": model, "sentences": sentences})
    return out


def build(rep) -> dict | None:
    tables = [_table(rep, f, cols) for f, cols in _columns(rep)]
    gate = gate_outcome(rep)
    if not tables and gate is None:
        return None  # every headline is a language task's: the Languages section is the first screen
    return {"tables": tables, "gate": gate, "family": rep.family_size,
            "candidate": rep.candidate, "baseline_model": rep.baseline_model,
            "models": rep.output.models}
