"""Paired comparisons: each setting against ``none`` per model (``settings``), and every
compared metric of the candidate against the baseline (``baseline``). The metrics are the
task YAMLs' (``drift_eval.decide.compare.compared_metrics``: a group's headline, then each
task's ``key`` and ``summary`` metrics)."""
from __future__ import annotations

import math

from drift_eval.catalogue import conditional_partner
from drift_eval.decide.compare import compared_metrics
from drift_eval.metrics import power
from drift_eval.reports.state import ARROWS, finite


def settings(rep) -> dict | None:
    blocks = []
    for run in rep.output.ordered_runs():
        base = rep.output.runs.get((run.model, "none"))
        if run.setting == "none" or base is None:
            continue
        rows = []
        for task, name in compared_metrics(run, base):
            change = rep.against_none(run, task, name)
            if change is None:
                continue
            d = change["d"]
            rows.append({"task": task, "metric": name, "d": d, "has_ci": finite(d.lower) and finite(d.upper),
                         "mde": _mde(change["mde"]), "arrow": ARROWS.get(rep.direction(task, name, run), ""),
                         "conditional": conditional_partner(rep.cat, task, name)})
            rep.record_change("settings", run, task, name, change)
        blocks.append({"title": f"{rep.name(run)} − none", "rows": rows})
    return {"blocks": blocks} if blocks else None


def _mde(v) -> str:
    return power.mde_text(v, 3)


def comparison_rows(rep, section: str, comparisons: list) -> list:
    """Table rows of candidate-against-baseline comparisons (recorded under ``section``)."""
    runs = {r.setting: r for r in rep.output.ordered_runs() if r.model == rep.candidate}
    out = []
    for c in comparisons:
        run, d = runs[c.setting], c.difference
        if d.verdict == "significant":
            reading = ("significant difference" if c.higher_is_better is None  # no direction: neither better nor worse
                       else "candidate worse" if c.regression[0] > 0 else "candidate better")
        elif d.verdict == "no difference":
            reading = "no difference"
        else:
            reading = "no significant difference"
        underpowered = d.verdict != "significant" and (math.isinf(c.mde) or c.mde > abs(d.difference))
        for stat in ("difference", "lower", "upper", "p_value", "p_adjusted", "n"):
            rep.record(section, run, c.task, c.metric, stat, getattr(d, stat), baseline=c.baseline)
        rep.record(section, run, c.task, c.metric, "mde", c.mde, baseline=c.baseline)
        rep.record(section, run, c.task, c.metric, "candidate value", c.candidate_value, baseline=c.baseline)
        rep.record(section, run, c.task, c.metric, "baseline value", c.baseline_value, baseline=c.baseline)
        out.append({"setting": run.setting, "task": c.task, "metric": c.metric, "c": c, "d": d, "reading": reading,
                    "significant": d.verdict == "significant", "underpowered": underpowered,
                    "conditional": c.conditional_on,
                    "has_ci": finite(d.lower) and finite(d.upper), "mde": _mde(c.mde)})
    return out


def baseline(rep) -> dict | None:
    if rep.baseline is None:
        return None
    return {"candidate": rep.candidate, "baseline": rep.baseline_model,
            "rows": comparison_rows(rep, "baseline", rep.against_baseline())}
