"""The summary: per task, each run's group headline or metrics with the ``summary`` role,
with 95% intervals, and the cost of a setting where the task has a ``cost`` panel (its
in-run change, else the value against the ``none`` run's − 1: ``drift_ppl``'s perplexity)."""
from __future__ import annotations

import math

from drift_eval.metrics import stats
from drift_eval.reports.state import ARROWS, finite, number
from drift_eval.catalogue import hinted, parts


def _cost(rep, run, task: str, p: dict) -> dict | None:
    """The cost of ``run``'s setting on ``task``: ``p`` names the task's ``value`` (and
    ``change``, measured within the run) metrics."""
    tr = run.tasks.get(task)
    value = number(tr.values.get(p.get("value"))) if tr else math.nan
    if not finite(value):
        return None
    within = number(tr.values.get(p.get("change")))
    none = rep.output.runs.get((run.model, "none"))
    base = number(none.tasks[task].values.get(p["value"])) if none and task in none.tasks else math.nan
    cost = within if finite(within) and run.setting != "none" else (
        stats.relative_cost(value, base) if finite(base) else math.nan)
    rep.record("summary", run, task, p["value"], "value", value)
    rep.record("summary", run, task, f"{p['value']} cost", "value", cost)
    return {"value": value, "cost": cost}


def build(rep) -> dict | None:
    """One small table per task: the runs that ran it, its group headline or ``summary``
    metrics, and its cost column."""
    runs = rep.output.ordered_runs()
    names = rep.output.task_names()
    groups = {t for r in runs for t, tr in r.tasks.items() if tr.is_group}
    tables = []
    for task in sorted(names, key=lambda t: (t not in groups, names.index(t))):
        ran = [r for r in runs if task in r.tasks]
        metrics = (list(rep.cat.get(task, {})) if task in groups else hinted(rep.cat, task, "summary"))
        metrics = [m for m in metrics if any(m in r.tasks[task].values for r in ran)]
        cost = parts(rep.cat, task, "cost")
        if "value" not in cost:
            cost = None
        if not metrics and cost is None:
            continue
        rows = []
        for run in ran:
            values = run.tasks[task].values
            rows.append({"run": rep.name(run), "cost": _cost(rep, run, task, cost) if cost else None,
                         "cells": [rep.cell("summary", run, task, m) if m in values else None for m in metrics]})
        tables.append({"task": task, "is_group": task in groups, "rows": rows,
                       "cost": f"{rep.label(task, cost['value'])} cost" if cost else None,
                       "columns": [f"{m} {ARROWS.get(rep.direction(task, m), '')}".strip() for m in metrics]})
    return {"tables": tables} if tables else None
