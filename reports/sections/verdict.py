"""The verdict, when there is one to give: the gate's outcome (``--policy``: PASS / FAIL /
UNDERPOWERED, one row per rule with its reason) and the candidate against the baseline on
the headline metrics (``--baseline``, or the policy's). Without either the section is left
out: the headline section answers the question."""
from __future__ import annotations

from drift_eval.decide.gate import LABEL, UNDETERMINED, exit_status
from drift_eval.reports.sections.comparisons import comparison_rows


def gate_outcome(rep) -> dict | None:
    """The gate's status and its rules' outcomes, or None without a policy."""
    if rep.outcomes is None:
        return None
    status = exit_status(rep.outcomes)
    outcomes = [{"label": LABEL[o.status], "name": o.name, "message": o.message} for o in rep.outcomes]
    counts = {}
    for o in outcomes:
        counts[o["label"]] = counts.get(o["label"], 0) + 1
    return {"status": {0: "PASS", 1: "FAIL", UNDETERMINED: "UNDERPOWERED"}[status], "exit": status, "outcomes": outcomes,
            "counts": counts}


def build(rep) -> dict | None:
    gate = gate_outcome(rep)
    if gate is None and rep.baseline is None:
        return None
    if gate is not None:
        rep.record("verdict", statistic="gate exit status", value=gate["exit"])
    headline = comparison_rows(rep, "verdict", rep.against_baseline(headline_only=True))
    return {"gate": gate, "headline": headline, "candidate": rep.candidate, "baseline_model": rep.baseline_model}
