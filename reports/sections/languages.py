"""The language families' page: for tasks whose YAML names a ``target_language`` (the
``drift_languages`` family), one row per language and one column per run:

* **headline**: each language group's headline (``drift_score``) with its 95% interval,
  and a heat map of the same cells;
* **time in the language**: the restricted mean survival time (``stats.restricted_mean``)
  over the answer (in metric tokens, from the per-answer segment timelines the survival
  curves use) and over the conversation (in turns, from the per-turn rate series), each
  with its 95% interval: a headline with no ceiling, that still ranks two models that are
  both fully in the language at the runs' length by where the first one starts to leave.

It reads the tasks' ``dataset_kwargs`` and roles from the YAMLs, never a task's name."""
from __future__ import annotations

import re

from drift_eval.reports.state import finite, number

SECTION = "languages"


def family(output) -> tuple[list, set]:
    """The language family of ``output``: (its groups of groups whose every task names a
    ``target_language`` in its YAML, such as ``drift_languages``; every task and group under
    them). The headline table and the leaderboard show such a family by its top group, and
    this section one row per member. Any other group of groups is shown as usual."""
    from drift_eval.tasks import task_info

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


def _answer_times(rep, run, task: str, metric: str, lang: str):
    """(onsets, lengths) over the answer in metric tokens: an answer stayed ``onset × 128``
    tokens when it left at segment ``onset``, and is censored at its own length when it
    never left; undetermined answers are left out. None without timelines."""
    from drift_eval.metrics import drift
    from drift_eval.reports.sections.runs import text_of

    tr = run.tasks.get(task)
    return drift.answer_times(((s.get(metric), text_of(s)) for s in tr.samples or []), lang) if tr else None


def _turn_times(rep, run, task: str, prefix: str):
    """(onsets, lengths) over the conversation in turns: the first turn not in the language
    ends it (an undetermined turn is passed over, as an unknown segment is); a conversation
    with no determined turn is left out. None without samples."""
    tr = run.tasks.get(task)
    if not tr or not tr.samples:
        return None
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)$")
    onsets, lengths = [], []
    for s in tr.samples:
        turns = sorted((int(m.group(1)), s[k]) for k in s if (m := pattern.match(k)))
        known = [v for _, v in turns if finite(number(v))]
        if not known:
            continue  # an undetermined conversation
        first = next((i for i, (_, v) in enumerate(turns) if finite(number(v)) and float(v) < 1.0), None)
        onsets.append(first)
        lengths.append(len(turns))
    return (onsets, lengths) if onsets else None


def _rmst_row(times: list) -> list:
    """One RMST cell per run, all up to the same horizon: the shortest of the runs' longest
    answers (or conversations), so that the cells of a row compare."""
    from drift_eval.metrics import stats

    horizons = [max(t[1]) for t in times if t]
    if not horizons:
        return [None] * len(times)
    horizon = min(horizons)
    out = []
    for t in times:
        if not t:
            out.append(None)
            continue
        r = stats.restricted_mean(t[0], t[1], horizon=horizon)
        out.append({"value": r.estimate, "lower": r.lower, "upper": r.upper, "horizon": r.horizon, "n": r.n})
    return out


def build(rep) -> dict | None:
    from drift_eval.metrics.languages import known, language
    from drift_eval.reports.svg import heat_map

    langs = _language_tasks(rep)
    if not langs:
        return None
    runs = [r for r in rep.output.ordered_runs() if any(t in r.tasks for v in langs.values()
                                                         for t in [v["group"], *v["tasks"]])]
    name = {code: (language(code).name if known(code) else code) for code in langs}
    headline_rows, rmst_rows = [], []
    for code, entry in langs.items():
        first = True
        for task in [t for t in [entry["group"], *entry["tasks"]] if t]:
            metric = rep.headline(task)
            if not metric or not any(rep.has(r, task, metric) for r in runs):
                continue
            cells = [{**rep.cell(SECTION, run, task, metric), "percent": False} if rep.has(run, task, metric) else None
                     for run in runs]
            headline_rows.append({"code": code, "name": name[code], "task": task, "metric": metric, "cells": cells,
                                  "first": first, "label": rep.label(task, metric)})
            first = False
        answer = _rmst_row([next((x for t, m in entry["timeline"] if (x := _answer_times(rep, run, t, m, code))), None)
                            for run in runs])
        turns = _rmst_row([next((x for t, p in entry["turns"] if (x := _turn_times(rep, run, t, p))), None)
                           for run in runs])
        for run, a, c in zip(runs, answer, turns):
            for kind, v in (("tokens in the language", a), ("turns in the language", c)):
                if v:
                    for stat in ("value", "lower", "upper", "horizon", "n"):
                        rep.record(SECTION, run, entry["group"] or code, f"rmst ({kind})", stat, v[stat],
                                   language=code)
        rmst_rows.append({"code": code, "name": name[code], "answer": answer, "turns": turns})
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
    return {"columns": columns, "headline": headline_rows, "rmst": rmst_rows, "plots": plots,
            "figures": [{"title": plots[0]["title"], "plots": plots}] if plots else [],
            "has_answer": any(a for r in rmst_rows for a in r["answer"]),
            "has_turns": any(c for r in rmst_rows for c in r["turns"])}
