"""The language families' page: for tasks whose YAML names a ``target_language`` (the
``drift_languages`` family), one row per language and one column per run:

* **headline**: each language group's headline (``drift_score``) with its 95% interval,
  and a heat map of the same cells;
* **time in the language**: each task's ``time`` metric from the results, with its 95%
  interval: the share of the answer (or of the conversation's turns) kept before the first
  part that is not, measured in each answer's own length so that no script or loop ends it
  early. It has a ceiling, like the headline: two runs kept to the end both read 1;
* **why not kept**: each task's ``cause`` metrics, the split of the samples not kept by
  their first cause (left the language, degenerate, unreadable), so that a low headline
  says which.

It reads the tasks' ``dataset_kwargs`` and roles from the YAMLs, never a task's name."""
from __future__ import annotations

from drift_eval.catalogue import hinted
from drift_eval.metrics import stats
from drift_eval.metrics.languages import known, language
from drift_eval.reports.svg import heat_map
from drift_eval.tasks import task_info

SECTION = "languages"


def family(output) -> tuple[list, set]:
    """The language family of ``output``: (its groups of groups whose every task names a
    ``target_language`` in its YAML, such as ``drift_languages``; every task and group under
    them). The headline table and the leaderboard show such a family by its top group, and
    this section one row per member. Any other group of groups is shown as usual."""
    info = task_info()

    def named(task) -> bool:
        return bool(((info.get(task) or {}).get("dataset_kwargs") or {}).get("target_language"))

    return output.nested_groups(keep=lambda leaves: bool(leaves) and all(named(t) for t in leaves))


def target_of(rep, task: str) -> str | None:
    """The task's target language (its YAML ``dataset_kwargs``), or for a group the one
    target all its tasks share; None otherwise."""
    kwargs = (rep.tasks.get(task) or {}).get("dataset_kwargs") or {}
    if kwargs.get("target_language"):
        return kwargs["target_language"]
    subs = {s for run in rep.output.runs.values() if task in run.tasks for s in run.tasks[task].subtasks}
    targets = {target_of(rep, s) for s in subs}
    return targets.pop() if len(targets) == 1 and None not in targets else None


def _language_tasks(rep) -> dict:
    """``{language: {"group": task, "tasks": [task], "timeline": [(task, metric)],
    "turns": [(task, prefix)]}}``."""
    out: dict = {}
    for task in rep.output.task_names():
        lang = target_of(rep, task)
        if lang is None:
            continue
        entry = out.setdefault(lang, {"group": None, "tasks": [], "timeline": [], "turns": []})
        is_group = any(task in r.tasks and r.tasks[task].is_group for r in rep.output.runs.values())
        if is_group:
            entry["group"] = entry["group"] or task
            continue
        entry["tasks"].append(task)
        for metric, info in rep.cat.get(task, {}).items():
            if "timeline" in info.get("roles", ()):
                entry["timeline"].append((task, metric))
            series = (info.get("parts") or {}).get("series")
            if isinstance(series, dict) and series.get("by") == "turn" and info.get("higher_is_better") is True:
                entry["turns"].append((task, series["prefix"]))
    return {k: v for k, v in out.items() if v["group"] or v["timeline"] or v["turns"]}


def _metric_cells(rep, runs, task: str, metric: str) -> list:
    return [{**rep.cell(SECTION, run, task, metric), "percent": False} if rep.has(run, task, metric) else None
            for run in runs]


def _pooled(rep, runs: list, rows: list) -> list:
    """Per headline metric of the languages' own tasks (not their groups), the family pooled:
    every sample of every language in one mean, with its interval (as the family's group
    would pool them, weighted by each task's samples)."""
    out = []
    by_metric: dict = {}
    for r in rows:
        if not any(run.tasks.get(r["task"]) is not None and run.tasks[r["task"]].is_group for run in runs):
            by_metric.setdefault(r["metric"], []).append(r["task"])
    for metric, tasks in by_metric.items():
        if len(tasks) < 2:
            continue
        cells = []
        for run in runs:
            values, binary = [], None
            for task in tasks:
                if rep.has(run, task, metric):
                    m = rep.output.metric(task, metric, run.setting, run.model)
                    values += list((m.per_sample or {}).values())
                    binary = m.binary
            if len(values) < 2:
                cells.append(None)
                continue
            lo, hi = stats.mean_interval(values, binary=binary)
            value = sum(values) / len(values)
            rep.record(SECTION, run, "pooled", metric, "value", value, languages=len(tasks))
            cells.append({"value": value, "lower": lo, "upper": hi, "n": len(values), "has_ci": True,
                          "percent": False, "arrow": ""})
        out.append({"metric": metric, "label": rep.label(tasks[0], metric), "languages": len(tasks), "cells": cells})
    return out


def _between_models(rep, runs: list, rows: list) -> dict | None:
    """Where the report holds two models, each row's headline of the second against the
    first (``Report.between``: ``none`` of both, the documents both answered, adjusted with
    the report's other comparisons): the two models compared language by language."""
    if not rep.between:
        return None
    first, second = rep.output.models
    cells = []
    for r in rows:
        c = rep.between.get((r["task"], r["metric"]))
        cells.append({"d": c.difference, "mde": c.mde} if c else None)
        if c:
            rep.record_change(SECTION, next(run for run in runs if run.model == second), r["task"], r["metric"],
                              {"d": c.difference, "mde": c.mde, "against": first})
    return {"first": first, "second": second, "cells": cells, "family": rep.family_size}


def build(rep) -> dict | None:
    langs = _language_tasks(rep)
    if not langs:
        return None
    runs = [r for r in rep.output.ordered_runs() if any(t in r.tasks for v in langs.values()
                                                         for t in [v["group"], *v["tasks"]])]
    name = {code: (language(code).name if known(code) else code) for code in langs}
    headline_rows, time_rows, split_rows = [], [], []
    for code, entry in langs.items():
        first = True
        for task in [t for t in [entry["group"], *entry["tasks"]] if t]:
            metric = rep.headline(task)
            if not metric or not any(rep.has(r, task, metric) for r in runs):
                continue
            cells = _metric_cells(rep, runs, task, metric)
            headline_rows.append({"code": code, "name": name[code], "task": task, "metric": metric, "cells": cells,
                                  "first": first, "label": rep.label(task, metric)})
            first = False
        for task in entry["tasks"]:
            for metric in hinted(rep.cat, task, "time"):
                cells = _metric_cells(rep, runs, task, metric)
                if any(cells):
                    time_rows.append({"code": code, "name": name[code], "task": task, "label": rep.label(task, metric),
                                      "cells": cells})
            causes = hinted(rep.cat, task, "cause")
            if causes and any(rep.has(r, task, m) for r in runs for m in causes):
                split_rows.append({"code": code, "name": name[code], "task": task,
                                   "causes": [rep.label(task, m) for m in causes], "cells": [
                                       [rep.cell(SECTION, run, task, m)["value"] for m in causes]
                                       if all(rep.has(run, task, m) for m in causes) else None for run in runs]})
    pooled = _pooled(rep, runs, headline_rows)
    between = _between_models(rep, runs, headline_rows)
    columns = [rep.name(r) for r in runs]
    plots = []
    shown = [r for r in headline_rows if r["first"]]  # each language's first row: its group, or its first task
    values = [[c["value"] if c else None for c in row["cells"]] for row in shown]
    if any(v is not None for row in values for v in row):
        metrics = {r["metric"] for r in shown}
        title = f"{metrics.pop() if len(metrics) == 1 else 'headline'} by language and run"
        several = len({x["metric"] for x in shown}) > 1
        labels = [f"{r['name']} ({r['code']})" + (f" {r['metric']}" if several else "") for r in shown]
        plots.append(rep.plot(title, heat_map(labels, columns, values, title, lower=0.0, upper=1.0)))
    return {"columns": columns, "headline": headline_rows, "pooled": pooled, "between": between,
            "time": time_rows, "split": split_rows, "plots": plots,
            "figures": [{"title": plots[0]["title"], "plots": plots}] if plots else []}
