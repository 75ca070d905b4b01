"""The report's context: every section's data (``drift_eval.reports.sections.SECTIONS``)
built on one ``Report`` state, with the plots and records they made."""
from __future__ import annotations

import datetime

from drift_eval.metrics import stats
from drift_eval.reports.sections import SECTIONS
from drift_eval.reports.sections.verdict import gate_outcome
from drift_eval.reports.state import Report


def build_context(output, policy: str | None = None, baseline: str | None = None) -> dict:
    rep = Report(output, policy, baseline)
    sections = []
    for sid, title, builder in SECTIONS:
        data = builder(rep)
        if data is not None:
            sections.append({"id": sid, "title": title, **data})
    return {"root": output.root, "roots": output.roots, "sections": sections, "plots": rep.plots,
            "records": rep.records, "runs": [rep.name(r) for r in output.ordered_runs()], "models": output.models,
            "gate": gate_outcome(rep), "level": stats.ALPHA, "family": rep.family_size,
            "generated": datetime.datetime.now().strftime("%Y-%m-%d %H:%M")}
