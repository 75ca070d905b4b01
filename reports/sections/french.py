"""The drift_french family's pictures, for every task whose YAML gives a per-sample
``timeline`` of segment languages (and its ``confidence``):

* **survival**: the share of answers still French at each 128-token segment with its 95%
  band (``drift_eval.metrics.drift.survival``: Wilson while every answer is observed,
  Kaplan–Meier once answers end early), one panel per model, its settings as lines;
* **audit**: per run, one strip per answer, a cell per segment coloured by language
  (fastText's probability on hover), rows sorted by where the answer first left French,
  with the text of that segment."""
from __future__ import annotations

from drift_eval.catalogue import hinted
from drift_eval.metrics import drift, langid
from drift_eval.metrics.languages import known, language
from drift_eval.reports.sections.runs import text_of
from drift_eval.reports.svg import strip, strips

AUDIT_ROWS = 60


def timeline_tasks(rep) -> list:
    """(task, timeline metric, confidence metric or None) for tasks with logged timelines."""
    out = []
    for task in rep.output.task_names():
        tl = hinted(rep.cat, task, "timeline")
        if tl and any(r.tasks.get(task) and r.tasks[task].samples for r in rep.output.runs.values()):
            conf = hinted(rep.cat, task, "confidence")
            out.append((task, tl[0], conf[0] if conf else None))
    return out


def target(rep, task: str) -> str:
    """The language a task's answers were told to stay in: its YAML's ``target_language``,
    French for the drift_french tasks (which name none)."""
    return ((rep.tasks.get(task) or {}).get("dataset_kwargs") or {}).get("target_language") or "fr"


def language_name(code: str) -> str:
    return language(code).name if known(code) else code


def survival(rep) -> dict | None:
    figures = []
    for task, tl, _ in timeline_tasks(rep):
        lang = target(rep, task)
        curves = {}
        for run in rep.output.ordered_runs():
            tr = run.tasks.get(task)
            timelines = [s[tl] for s in (tr.samples or []) if isinstance(s.get(tl), list)] if tr else []
            if not timelines:
                continue
            sv = drift.survival(timelines, lang)
            curves[run.key] = ([(k + 1, v) for k, v in enumerate(sv.estimate)],
                           [(k + 1, lo, hi) for k, (lo, hi) in enumerate(zip(sv.lower, sv.upper))])
            for k, (v, lo, hi, risk) in enumerate(zip(sv.estimate, sv.lower, sv.upper, sv.at_risk), 1):
                for stat, x in (("value", v), ("lower", lo), ("upper", hi), ("at risk", risk)):
                    rep.record("survival", run, task, tl, stat, x, segment=k)
        if curves:
            name = language_name(lang)
            title = f"{task}: share of answers still in {name}, by segment"
            figures.append({"title": title, "plots": rep.multiples(
                title, curves, f"segment of {drift.SEGMENT_TOKENS} tokens", f"still in {name}", y_range=(0.0, 1.0))})
    return {"figures": figures, "plots": [p for f in figures for p in f["plots"]]} if figures else None


def audit(rep) -> dict | None:
    blocks = []
    for task, tl, conf in timeline_tasks(rep):
        lang = target(rep, task)
        for run in rep.output.ordered_runs():
            tr = run.tasks.get(task)
            if not tr or not tr.samples:
                continue
            rows = []
            for s in tr.samples:
                timeline = s.get(tl)
                if not isinstance(timeline, list):
                    continue
                scores = s.get(conf) if conf and isinstance(s.get(conf), list) else [None] * len(timeline)
                onset = drift.first_foreign(timeline, lang)
                text = text_of(s) or ""
                excerpt = _segment_text(text, onset, drift.SEGMENT_TOKENS) if onset is not None else ""
                rows.append({"doc_id": s.get("doc_id"), "onset": onset, "timeline": timeline,
                             "undetermined": not drift.determined(timeline),  # no segment of known language
                             "cells": list(zip(timeline, scores)), "excerpt": excerpt})
            rows.sort(key=lambda r: (r["undetermined"], r["onset"] is None, r["onset"] or 0, r["doc_id"]))
            shown = rows[:AUDIT_ROWS]
            for r in shown:
                r["svg"] = strip(r["cells"], lang)
                rep.record("audit", run, task, tl, "first foreign segment", r["onset"], doc_id=r["doc_id"])
            title = f"{task} [{rep.name(run)}]: segment languages"
            left = sum(r["onset"] is not None for r in rows)
            blocks.append({"title": title, "language": language_name(lang), "rows": shown, "hidden": len(rows) - len(shown), "answers": len(rows),
                           "left": left, "undetermined": sum(r["undetermined"] for r in rows), "plot": rep.plot(title, strips([(f"doc {r['doc_id']}", r["cells"])
                                                                         for r in shown], title, lang))})
    return {"blocks": blocks} if blocks else None


def _segment_text(text: str, k: int, size: int, chars: int = 200) -> str:
    """The original text of segment ``k`` (``size`` metric tokens, as the timeline was cut)."""
    spans = [m.span() for m in langid.TOKEN_RE.finditer(text or "")][k * size:(k + 1) * size]
    if not spans:
        return ""
    piece = text[spans[0][0]:spans[-1][1]]
    return piece[:chars] + ("…" if len(piece) > chars else "")
