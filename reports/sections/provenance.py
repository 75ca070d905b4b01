"""Provenance, compact and folded: what every run shares on one line (versions, seeds,
generation options ...), then one short row per run with what differs (its model path,
code version, dates, answer lengths, task versions). A run whose results files were written at several
times shows its first and last date (all of them on hover)."""
from __future__ import annotations

#: (key in the results loader's provenance, label), in the order they are shown
FIELDS = (("model", "model"), ("pretrained", "pretrained"), ("revision", "revision"), ("model_sha", "sha"),
          ("lm_eval_version", "lm-eval"), ("lm_eval_drift_version", "lm-eval-drift"),
          ("transformers_version", "transformers"), ("git_hash", "git"), ("date", "date"),
          ("gen_kwargs", "gen kwargs"), ("limit", "limit"), ("seed", "seeds (python/numpy/torch/fewshot)"),
          ("chat_template", "chat template"), ("length", "answer length"), ("task_versions", "task versions"))


def _dates(value: str) -> dict:
    stamps = value.split(" / ")
    if len(stamps) == 1:
        return {"text": value, "full": value}
    return {"text": f"{stamps[0]} … {stamps[-1]} ({len(stamps)} results files)", "full": value}


def build(rep) -> dict:
    runs = rep.output.ordered_runs()
    values = {k: [r.provenance.get(k) for r in runs] for k, _ in FIELDS}
    # the model's name is the run's; a field every run has alike goes on the common line
    common = [(label, vals[0]) for (k, label), vals in zip(FIELDS, values.values())
              if vals[0] is not None and len(set(vals)) == 1]
    varying = [(k, label) for k, label in FIELDS if k != "model" and len(set(values[k])) > 1]
    rows = []
    for run in runs:
        cells = []
        for k, _ in varying:
            v = run.provenance.get(k)
            cells.append(_dates(v) if k == "date" and v else {"text": v or "—", "full": v or "—"})
        rows.append({"run": rep.name(run), "cells": cells})
    return {"common": common, "columns": [label for _, label in varying], "rows": rows, "count": len(runs),
            "roots": rep.output.roots}
