"""Every run: per task, every float metric (unknown tasks too) with its value, 95% interval
and stderr (curve points left to the curves), and two escaped sample excerpts, the least
compliant first (by the task's headline)."""
from __future__ import annotations

from drift_eval.catalogue import is_curve
from drift_eval.conversation import assistant_replies
from drift_eval.reports.state import number

EXCERPT_CHARS = 400
EXCERPTS_PER_RUN = 2


def build(rep) -> dict:
    blocks = []
    for run in rep.output.ordered_runs():
        tables, excerpts = [], []
        for task, tr in run.tasks.items():
            names = [m for m in rep.output.scalar_metrics(run.setting, task, run.model)
                     if not is_curve(rep.cat, task, m)]
            rows = [rep.cell("runs", run, task, m) for m in names]
            if rows:
                tables.append({"task": task, "is_group": tr.is_group, "rows": rows, "n": tr.n,
                               "samples": bool(tr.samples)})
            excerpts += _excerpts(tr, rep.headline(task))
        blocks.append({"title": rep.name(run), "model": run.model,  # the readable name; the path is in Provenance
                       "tables": tables, "excerpts": excerpts})
    return {"blocks": blocks}


def text_of(sample) -> str | None:
    """The generated text of a logged sample."""
    resp = sample.get("filtered_resps") or sample.get("resps") or [""]
    text = resp[0][0] if isinstance(resp[0], list) and resp[0] else resp[0]
    return text if isinstance(text, str) else None


def _excerpts(tr, flag: str | None) -> list:
    if not tr.samples:
        return []
    flag = flag if flag and flag in tr.samples[0] else None
    ordered = sorted(tr.samples, key=lambda s: (number(s.get(flag, 1)) if flag else 1, s.get("doc_id", 0)))
    out = []
    for s in ordered[:EXCERPTS_PER_RUN]:
        text, where = text_of(s), "answer"
        if text and text.startswith("[{"):
            try:
                replies = assistant_replies(text)
                text, where = replies[-1], f"reply {len(replies)}"
            except (ValueError, KeyError, IndexError, TypeError):
                pass
        if not isinstance(text, str) or text.lstrip().startswith("{"):
            continue  # not a generated text (e.g. position_bias's JSON measurement)
        cut = len(text) > EXCERPT_CHARS
        out.append({"task": tr.name, "doc_id": s.get("doc_id"), "where": where,
                    "flag": f"{flag}={s.get(flag)}" if flag else "", "text": text[:EXCERPT_CHARS] + ("…" if cut else "")})
    return out
