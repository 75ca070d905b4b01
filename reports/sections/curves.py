"""Curves: every ``series`` a task YAML declares (its points are metrics named by a prefix
and an integer: the French rate per turn, α and β per layer, ...), with 95% bands where
the points have per-sample values; one panel per model when models ran several settings."""
from __future__ import annotations

from drift_eval.reports.state import finite, number
from drift_eval.catalogue import series, series_points


def build(rep) -> dict | None:
    figures = []
    for task in rep.output.task_names():
        for spec in series(rep.cat, task):
            curves = {}
            for run in rep.output.ordered_runs():
                tr = run.tasks.get(task)
                points = [(x, m) for x, m in series_points(spec, tr.values if tr else {})
                          if finite(number(tr.values[m]))]
                if not points:
                    continue
                cells = [rep.cell("curves", run, task, m) for _, m in points]
                band = [(x, c["lower"], c["upper"]) for (x, _), c in zip(points, cells) if c["has_ci"]]
                curves[run.key] = ([(x, c["value"]) for (x, _), c in zip(points, cells)], band or None)
            if curves:
                title = f"{task}: {spec['label']} by {spec['by']}"
                figures.append({"title": title, "plots": rep.multiples(title, curves, spec["by"], spec["label"],
                                                                       y_range=spec["range"])})
    return {"figures": figures, "plots": [p for f in figures for p in f["plots"]]} if figures else None
