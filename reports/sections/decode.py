"""The drift_decode family's panel (the metrics with ``decodability`` parts): per run and
variant axis, the probe's accuracy at the last t (median layer, and the best layer) and the
text's, with Wilson intervals, the language switches, the published figures beside them,
the accuracy per layer and t, and curves by t (docs/alpha.md)."""
from __future__ import annotations

import math

from drift_eval.metrics import stats
from drift_eval.reports import published
from drift_eval.reports.state import finite
from drift_eval.reports.svg import Style, line_plot
from drift_eval.catalogue import parts

#: the numbers of a row recorded as they are (with the Wilson bounds of the two accuracies)
RECORDED = ("hidden", "text", "base_switches", "variant_switches")


def _wilson(acc, n):
    if not (finite(acc) and isinstance(n, (int, float)) and n > 0):
        return (math.nan, math.nan)
    return stats.wilson_interval(round(acc * n), int(n))


def decodability(rep) -> dict | None:
    panels = []
    for run in rep.output.ordered_runs():
        rows, curves = [], {}
        for task, tr in run.tasks.items():
            p = parts(rep.cat, task, "decodability")
            v = {part: tr.values.get(metric) for part, metric in p.items()}
            if not isinstance(v.get("grid"), list):
                continue
            axis = (rep.tasks.get(task) or {}).get("dataset_kwargs", {}).get("axis") or task
            n, ts, grid = v.get("n"), v.get("t") or [], v["grid"]
            lo, hi = _wilson(v.get("hidden"), n)
            tlo, thi = _wilson(v.get("text"), n)
            best = max(range(len(grid)), key=lambda i: grid[i][-1]) if grid else None
            cells = [[{"acc": acc, "ci": _wilson(acc, n)} for acc in row] for row in grid]
            for part in RECORDED:
                if isinstance(v.get(part), (int, float)):
                    rep.record("decodability", run, task, p[part], "value", v[part])
            for part, bounds in (("hidden", (lo, hi)), ("text", (tlo, thi))):
                if part in p:
                    for stat, x in zip(("lower", "upper"), bounds):
                        if finite(x):
                            rep.record("decodability", run, task, f"{p[part]}_{stat}", "value", x)
            for layer, row in enumerate(grid):
                for t, acc in zip(ts, row):
                    rep.record("decodability", run, task, p.get("hidden", "hidden"), f"layer {layer}, t={t}", acc)
            rows.append({"axis": axis, "t": ts[-1] if ts else None, "n": n, "hidden": v.get("hidden"),
                         "lower": lo, "upper": hi, "best": v.get("best"), "best_layer": best,
                         "text": v.get("text"), "text_lower": tlo, "text_upper": thi,
                         "base_switches": v.get("base_switches"), "variant_switches": v.get("variant_switches"),
                         "of": v.get("of"), "published": published.DECODABLE_FROM_TEXT.get(axis, ""),
                         "ts": ts, "grid": cells})
            if ts:
                curves[f"{axis} (hidden)"] = [(math.log2(t), acc) for t, acc in zip(ts, v.get("hidden_by_t") or [])]
                curves[f"{axis} (text)"] = [(math.log2(t), acc) for t, acc in zip(ts, v.get("text_by_t") or [])]
        if rows:
            title = f"decodability [{rep.name(run)}]: median layer and text, by t"
            panels.append({"label": rep.name(run), "rows": rows, "switches_published": published.LANGUAGE_SWITCHES,
                           "plot": rep.plot(title, line_plot(curves, title, "log2 t", "accuracy",
                                                                  style=Style(y_range=(0.0, 1.0))))})
    return {"panels": panels} if panels else None
