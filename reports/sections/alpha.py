"""The drift_alpha family's panel: why α is what it is. For the tasks run with the
direct / relay decomposition (the ``decomposition`` parts of their YAML), per run and
variant axis: α measured against α rebuilt from its terms, medians over layers, whether the
rebuild is within the published gap, and the four curves by layer."""
from __future__ import annotations

from drift_eval.reports import published
from drift_eval.reports.state import finite
from drift_eval.reports.svg import line_plot
from drift_eval.catalogue import parts

TABLE = ("measured", "predicted", "gap", "direct", "relay", "share")
CURVES = (("measured", "measured_layers"), ("predicted", "predicted_layers"), ("direct", "direct_layers"),
          ("relay", "relay_layers"))


def direct_relay(rep) -> dict | None:
    panels = []
    for run in rep.output.ordered_runs():
        rows, curves = [], {}
        for task, tr in run.tasks.items():
            p = parts(rep.cat, task, "decomposition")
            if not (p and isinstance(tr.values.get(p.get("predicted_layers")), list)):
                continue
            v = {part: tr.values.get(metric) for part, metric in p.items()}
            axis = (rep.tasks.get(task) or {}).get("dataset_kwargs", {}).get("axis") or task
            rows.append({"axis": axis, **{part: v.get(part) for part in TABLE},
                         "published_gap": published.DECOMPOSITION_GAP,
                         "within": finite(v.get("gap")) and v["gap"] <= published.DECOMPOSITION_GAP})
            for part in TABLE:
                if isinstance(v.get(part), (int, float)):
                    rep.record("direct_relay", run, task, p[part], "value", v[part])
            for name, part in CURVES:
                curves[f"{axis} {name}"] = list(enumerate(v.get(part) or []))
        if rows:
            title = f"direct / relay [{rep.name(run)}]: α by layer"
            panels.append({"label": rep.name(run), "rows": rows,
                           "plot": rep.plot(title, line_plot(curves, title, "layer", "α"))})
    return {"panels": panels} if panels else None
