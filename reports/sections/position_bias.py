"""The position_bias family: per run, the influence profiles over positions (the metrics
with the ``profile`` role, named by their label), and the same without position 0 (the
attention sink, which dwarfs the rest), renormalised."""
from __future__ import annotations

from drift_eval.reports.svg import Style, line_plot
from drift_eval.catalogue import hinted


def profiles(rep) -> dict | None:
    plots = []
    for task in rep.output.task_names():
        names = hinted(rep.cat, task, "profile")
        for run in rep.output.ordered_runs():
            tr = run.tasks.get(task)
            if not tr:
                continue
            found = {m: tr.values[m] for m in names if isinstance(tr.values.get(m), list)}  # list-valued metrics
            if not found:
                continue
            shown = {rep.label(task, m): v for m, v in found.items()}
            title = f"{task} [{rep.name(run)}]: influence profiles"
            plots.append(rep.plot(title, line_plot({p: list(enumerate(v)) for p, v in shown.items()},
                                                   title, "position", "influence", style=Style(markers=False))))
            rest = {}
            for p, v in shown.items():
                total = sum(v[1:])
                if len(v) > 1 and total > 0:
                    rest[p] = [(i, x / total) for i, x in enumerate(v) if i > 0]
            if rest:
                title = f"{task} [{rep.name(run)}]: without position 0 (renormalised)"
                plots.append(rep.plot(title, line_plot(rest, title, "position", "influence",
                                                             style=Style(markers=False))))
            for m, v in found.items():
                for i, x in enumerate(v):
                    rep.record("profiles", run, task, m, "value", x, position=i)
    return {"plots": plots} if plots else None
