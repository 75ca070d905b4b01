"""``drift-eval report DIR -o report.html`` (or ``.md``, ``--format json|csv``).

The page is a list of sections (``SECTIONS``: a builder here and a template per format in
``templates/html/`` and ``templates/md/``), in this order:

1. **verdict**: the gate's outcome (``--policy``), the candidate against the baseline
   (``--baseline``: a folder or a model name) and a one-line provenance per run;
2. **survival**: per task that logs language timelines, the share of answers still French
   at each 128-token segment, one curve per run with its 95% band;
3. **provenance** (models, revisions, versions, git hash, date, generation options, seeds,
   forced or natural length), **summary** (headline and ``report: summary`` metrics),
   **curves** (French rate per turn with bands, α by layer), **settings** (each setting
   against ``none``, per model), **baseline** (every key metric, candidate vs baseline),
   **runs** (every scalar metric with its interval, sample excerpts), **audit** (each
   answer's segment languages, with the fastText probability on hover, sorted by drift
   onset, with the text where it left French), **profiles** (position bias).

Metric names, directions and hints come from the task YAMLs
(``drift_eval.tasks.metric_catalogue``): ``summary``, ``key``, ``curve``, ``timeline`` (a
per-sample list of segment languages) and ``confidence`` (the per-sample list of their
probabilities). Jinja autoescaping is on in every format (generated text never becomes
markup); plots are SVG (``svg.py``), inline in HTML, separate files beside a Markdown
report; no scripts, no external assets. Every number a page shows is also a record of the
JSON and CSV exports.
"""
from __future__ import annotations

import datetime
import math
import os
import re

from drift_eval.metrics import stats
from drift_eval.tasks import FRENCH_TURN, hinted as _hinted, is_curve as _is_curve, metric_catalogue
from drift_eval.reports.svg import line_plot, strip

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

EXCERPT_CHARS = 400
EXCERPTS_PER_RUN = 2
AUDIT_ROWS = 60
FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".json": "json", ".csv": "csv"}


def _finite(v) -> bool:
    return isinstance(v, float) and math.isfinite(v)


def _clean(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


class Report:
    """What the sections share: the results, the catalogue, the optional policy outcome and
    baseline, and the records of every number shown."""

    def __init__(self, output, policy: str | None = None, baseline: str | None = None):
        from drift_eval.decide.gate import gate, resolve_baseline

        self.output = output
        self.cat = metric_catalogue()
        self.records = []
        self.plots = []
        self.several = len(output.models) > 1
        self.outcomes = None
        base = baseline
        candidate = None
        if policy:
            self.outcomes, pol = gate(output, policy, baseline)
            base, candidate = baseline or pol.baseline, pol.candidate
        self.baseline, self.baseline_model, self.candidate = resolve_baseline(output, base, candidate)

    def name(self, run) -> str:
        return run.label if self.several else run.setting

    def record(self, section, run=None, task="", metric="", statistic="value", value=None, **extra):
        self.records.append({"section": section, "model": run.model if run else "", "setting": run.setting if run else "",
                             "task": task, "metric": metric, "statistic": statistic, "value": _clean(value), **extra})

    def cell(self, section, run, task, metric) -> dict:
        m = self.output.metric(task, metric, run.setting, run.model)
        for stat in ("value", "lower", "upper", "stderr", "n"):
            v = getattr(m, stat)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.record(section, run, task, metric, stat, v)
        return {"metric": m.name, "value": m.value, "stderr": m.stderr, "lower": m.lower, "upper": m.upper,
                "n": m.n, "arrow": {True: "↑", False: "↓"}.get(m.higher_is_better, ""),
                "has_ci": _finite(m.lower) and _finite(m.upper)}

    def plot(self, title: str, svg) -> dict:
        p = {"title": title, "svg": svg, "slug": f"{len(self.plots) + 1:02d}-{_slug(title)}"}
        self.plots.append(p)
        return p

    def timeline_tasks(self) -> list:
        """(task, timeline metric, confidence metric or None) for tasks with logged timelines."""
        out = []
        for task in self.output.task_names():
            tl = _hinted(self.cat, task, "timeline")
            if tl and any(r.tasks.get(task) and r.tasks[task].samples for r in self.output.runs.values()):
                conf = _hinted(self.cat, task, "confidence")
                out.append((task, tl[0], conf[0] if conf else None))
        return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "plot"


# ------------------------------------------------------------------------------ sections
def _verdict(rep: Report) -> dict:
    from drift_eval.decide.gate import LABEL, exit_status

    gate = None
    if rep.outcomes is not None:
        status = exit_status(rep.outcomes)
        gate = {"status": {0: "PASS", 1: "FAIL", 2: "UNDERPOWERED"}[status],
                "outcomes": [{"label": LABEL[o.status], "name": o.name, "message": o.message} for o in rep.outcomes]}
        rep.record("verdict", statistic="gate exit status", value=status)
    headline = _baseline_rows(rep, headline_only=True) if rep.baseline is not None else []
    return {"gate": gate, "headline": headline, "candidate": rep.candidate, "baseline_model": rep.baseline_model,
            "models": rep.output.models, "one_line": [(rep.name(r), _provenance_line(r.provenance))
                                           for r in rep.output.ordered_runs()]}


def _provenance_line(p: dict) -> str:
    parts = [p.get("model", "")]
    if p.get("revision"):
        parts.append(f"revision {p['revision']}")
    for key, label in (("lm_eval_version", "lm-eval"), ("lm_eval_drift_version", "lm-eval-drift"),
                       ("git_hash", "git")):
        if p.get(key):
            parts.append(f"{label} {p[key]}")
    for key in ("date", "length"):
        if p.get(key):
            parts.append(p[key])
    return "; ".join(parts)


def _survival(rep: Report) -> dict | None:
    from drift_eval.metrics import drift

    plots = []
    for task, tl, _ in rep.timeline_tasks():
        series, bands = {}, {}
        for run in rep.output.ordered_runs():
            tr = run.tasks.get(task)
            if not tr or not tr.samples:
                continue
            timelines = [s[tl] for s in tr.samples if isinstance(s.get(tl), list)]
            if not timelines:
                continue
            sv = drift.survival(timelines)
            name = rep.name(run)
            series[name] = [(k + 1, v) for k, v in enumerate(sv.estimate)]
            bands[name] = [(k + 1, lo, hi) for k, (lo, hi) in enumerate(zip(sv.lower, sv.upper))]
            for k, (v, lo, hi, risk) in enumerate(zip(sv.estimate, sv.lower, sv.upper, sv.at_risk), 1):
                for stat, x in (("value", v), ("lower", lo), ("upper", hi), ("at risk", risk)):
                    rep.record("survival", run, task, tl, stat, x, segment=k)
        if series:
            title = f"{task}: share of answers still French, by segment"
            plots.append(rep.plot(title, line_plot(series, title, f"segment of {drift.SEGMENT_TOKENS} tokens",
                                                   "still French", y_range=(0.0, 1.0), bands=bands)))
    return {"plots": plots} if plots else None


def _provenance(rep: Report) -> dict:
    keys = [("model", "model"), ("pretrained", "pretrained"), ("revision", "revision"), ("model_sha", "sha"),
            ("lm_eval_version", "lm-eval"), ("lm_eval_drift_version", "lm-eval-drift"),
            ("transformers_version", "transformers"), ("git_hash", "git"), ("date", "date"),
            ("gen_kwargs", "gen kwargs"), ("limit", "limit"), ("seed", "seeds (python/numpy/torch/fewshot)"),
            ("chat_template", "chat template"), ("length", "answer length")]
    rows = []
    for run in rep.output.ordered_runs():
        p = run.provenance
        rows.append({"run": rep.name(run), "cells": [p.get(k, "—") for k, _ in keys]})
    return {"columns": [label for _, label in keys], "rows": rows}


def _summary(rep: Report) -> dict:
    summary_metrics = [(t, m) for t in rep.cat for m in _hinted(rep.cat, t, "summary")]
    groups = [(t, m) for t in rep.cat for m in rep.cat[t] if any(
        r.tasks.get(t) is not None and r.tasks[t].is_group and m in r.tasks[t].values for r in rep.output.runs.values())]
    present = [(t, m) for t, m in summary_metrics if any(
        t in r.tasks and m in r.tasks[t].values for r in rep.output.runs.values())]
    rows = []
    for run in rep.output.ordered_runs():
        cells = []
        for t, m in groups + present:
            cells.append(rep.cell("summary", run, t, m) if t in run.tasks and m in run.tasks[t].values else None)
        rows.append({"run": rep.name(run), "cells": cells, "ppl": _ppl(rep, run)})
    return {"columns": [f"{t}/{m}" for t, m in groups + present], "rows": rows}


def _ppl(rep: Report, run) -> dict | None:
    tr = run.tasks.get("drift_ppl")
    if not tr or not isinstance(tr.values.get("perplexity"), (int, float)):
        return None
    p = float(tr.values["perplexity"])
    # drift_ppl scores the same continuations without compensation in the same run
    # (perplexity_change); otherwise compare with the `none` setting's run
    within = tr.values.get("perplexity_change")
    none = rep.output.runs.get((run.model, "none"))
    base = none.tasks.get("drift_ppl") if none else None
    base_ppl = float(base.values["perplexity"]) if base and isinstance(base.values.get("perplexity"), (int, float)) \
        else None
    cost = float(within) if isinstance(within, (int, float)) and run.setting != "none" else (
        stats.relative_cost(p, base_ppl) if base_ppl else math.nan)
    rep.record("summary", run, "drift_ppl", "perplexity", "value", p)
    rep.record("summary", run, "drift_ppl", "perplexity cost", "value", cost)
    return {"perplexity": p, "cost": cost}


def _curves(rep: Report) -> dict | None:
    plots = []
    for task in rep.output.task_names():
        series, bands = {}, {}
        for run in rep.output.ordered_runs():
            tr = run.tasks.get(task)
            turns = sorted(int(m.group(1)) for k in (tr.values if tr else {}) if (m := FRENCH_TURN.fullmatch(k)))
            if not turns:
                continue
            cells = [rep.cell("curves", run, task, f"french_turn_{t}") for t in turns]
            series[rep.name(run)] = [(t, c["value"]) for t, c in zip(turns, cells)]
            bands[rep.name(run)] = [(t, c["lower"], c["upper"]) for t, c in zip(turns, cells)]
        if series:
            title = f"{task}: French rate per turn"
            plots.append(rep.plot(title, line_plot(series, title, "turn", "French rate", y_range=(0.0, 1.0),
                                                   bands=bands)))
    alpha_layer = re.compile(r"^alpha_l(\d{2,3})$")
    for task in rep.output.task_names():
        series = {}
        for run in rep.output.ordered_runs():
            tr = run.tasks.get(task)
            pts = sorted((int(m.group(1)), float(v)) for k, v in (tr.values if tr else {}).items()
                         if (m := alpha_layer.fullmatch(k)) and isinstance(v, (int, float)))
            if pts:
                series[rep.name(run)] = pts
                for layer, v in pts:
                    rep.record("curves", run, task, f"alpha_l{layer:02d}", "value", v)
        if series:
            title = f"{task}: α by layer"
            plots.append(rep.plot(title, line_plot(series, title, "layer", "α")))
    return {"plots": plots} if plots else None


def _settings(rep: Report) -> dict | None:
    from drift_eval.decide.compare import compared_metrics

    blocks = []
    for run in rep.output.ordered_runs():
        base = rep.output.runs.get((run.model, "none"))
        if run.setting == "none" or base is None:
            continue
        rows = []
        for task, name in compared_metrics(run, base):
            d = rep.output.compare(task, name, run.setting, "none", run.model)
            if d is None:
                continue
            rows.append({"task": task, "metric": name, "d": d, "has_ci": _finite(d.lower) and _finite(d.upper),
                         "arrow": {True: "↑", False: "↓"}.get(run.tasks[task].higher_is_better.get(name), "")})
            for stat in ("difference", "lower", "upper", "p_value", "n"):
                rep.record("settings", run, task, name, stat, getattr(d, stat), against="none")
        blocks.append({"title": f"{rep.name(run)} − none", "rows": rows})
    return {"blocks": blocks} if blocks else None


def _baseline_rows(rep: Report, headline_only: bool = False) -> list:
    from drift_eval.decide.compare import compare_models

    runs = {r.setting: r for r in rep.output.ordered_runs() if r.model == rep.candidate}
    return [_comparison_row(rep, runs[c.setting], c, "verdict" if headline_only else "baseline")
            for c in compare_models(rep.output, rep.baseline, rep.candidate, rep.baseline_model, headline_only)]


def _num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _comparison_row(rep: Report, run, c, section: str) -> dict:
    d = c.difference
    worse = c.regression[0] > 0
    if d.verdict == "significant":
        reading = "candidate worse" if worse else "candidate better"
    elif d.verdict == "no difference":
        reading = "no difference"
    else:
        reading = "no significant difference"
    underpowered = d.verdict != "significant" and (math.isinf(c.mde) or c.mde > abs(d.difference))
    for stat in ("difference", "lower", "upper", "p_value", "n"):
        rep.record(section, run, c.task, c.metric, stat, getattr(d, stat), baseline=c.baseline)
    rep.record(section, run, c.task, c.metric, "mde", c.mde, baseline=c.baseline)
    rep.record(section, run, c.task, c.metric, "candidate value", c.candidate_value, baseline=c.baseline)
    rep.record(section, run, c.task, c.metric, "baseline value", c.baseline_value, baseline=c.baseline)
    return {"setting": run.setting, "task": c.task, "metric": c.metric, "c": c, "d": d, "reading": reading,
            "significant": d.verdict == "significant", "underpowered": underpowered,
            "has_ci": _finite(d.lower) and _finite(d.upper),
            "mde": "none up to 1" if math.isinf(c.mde) else f"{c.mde:.3f}"}


def _baseline(rep: Report) -> dict | None:
    if rep.baseline is None:
        return None
    return {"candidate": rep.candidate, "baseline": rep.baseline_model, "rows": _baseline_rows(rep)}


def _runs(rep: Report) -> dict:
    blocks = []
    for run in rep.output.ordered_runs():
        tables, excerpts = [], []
        for task, tr in run.tasks.items():
            names = [m for m in rep.output.scalar_metrics(run.setting, task, run.model)
                     if not _is_curve(rep.cat, task, m)]
            rows = [rep.cell("runs", run, task, m) for m in names]
            if rows:
                tables.append({"task": task, "is_group": tr.is_group, "rows": rows, "n": tr.n,
                               "samples": bool(tr.samples)})
            excerpts += _excerpts(tr)
        blocks.append({"title": rep.name(run), "model": run.model,  # the readable name; the path is in Provenance
                       "tables": tables, "excerpts": excerpts})
    return {"blocks": blocks}


def _text_of(sample) -> str | None:
    resp = sample.get("filtered_resps") or sample.get("resps") or [""]
    text = resp[0][0] if isinstance(resp[0], list) and resp[0] else resp[0]
    return text if isinstance(text, str) else None


def _excerpts(tr) -> list:
    from drift_eval.conversation import assistant_replies

    if not tr.samples:
        return []
    flag = next((k for k in ("fully_french", "all_turns_french", "french_last_turn") if k in tr.samples[0]), None)
    ordered = sorted(tr.samples, key=lambda s: (_num(s.get(flag, 1)) if flag else 1, s.get("doc_id", 0)))
    out = []
    for s in ordered[:EXCERPTS_PER_RUN]:
        text, where = _text_of(s), "answer"
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


def _audit(rep: Report) -> dict | None:
    from drift_eval.metrics import drift

    blocks = []
    for task, tl, conf in rep.timeline_tasks():
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
                onset = drift.first_foreign(timeline)
                text = _text_of(s) or ""
                excerpt = _segment_text(text, onset, drift.SEGMENT_TOKENS) if onset is not None else ""
                rows.append({"doc_id": s.get("doc_id"), "onset": onset, "timeline": timeline,
                             "cells": list(zip(timeline, scores)), "excerpt": excerpt})
            rows.sort(key=lambda r: (r["onset"] is None, r["onset"] or 0, r["doc_id"]))
            shown = rows[:AUDIT_ROWS]
            for r in shown:
                r["svg"] = strip(r["cells"])
                rep.record("audit", run, task, tl, "first foreign segment", r["onset"], doc_id=r["doc_id"])
            title = f"{task} [{rep.name(run)}]: segment languages"
            blocks.append({"title": title, "rows": shown, "hidden": len(rows) - len(shown),
                           "plot": rep.plot(title, strip_table(shown, title))})
    return {"blocks": blocks} if blocks else None


def _segment_text(text: str, k: int, size: int, chars: int = 200) -> str:
    """The original text of segment ``k`` (``size`` metric tokens, as the timeline was cut)."""
    from drift_eval.metrics import langid

    spans = [m.span() for m in langid.TOKEN_RE.finditer(text or "")][k * size:(k + 1) * size]
    if not spans:
        return ""
    piece = text[spans[0][0]:spans[-1][1]]
    return piece[:chars] + ("…" if len(piece) > chars else "")


def strip_table(rows: list, title: str):
    """The audit strips of one run as one SVG (for the Markdown report)."""
    from drift_eval.reports.svg import strips

    return strips([(f"doc {r['doc_id']}", r["cells"]) for r in rows], title)


def _profiles(rep: Report) -> dict | None:
    plots = []
    for run in rep.output.ordered_runs():
        tr = run.tasks.get("position_bias")
        if not tr:
            continue
        profiles = {k[len("profile_"):]: v for k, v in tr.values.items()
                    if k.startswith("profile_") and isinstance(v, list)}  # list-valued metrics
        if not profiles:
            continue
        title = f"position_bias [{rep.name(run)}]: influence profiles"
        plots.append(rep.plot(title, line_plot({p: list(enumerate(v)) for p, v in profiles.items()},
                                               title, "position", "influence", markers=False)))
        rest = {}
        for p, v in profiles.items():  # position 0 (the attention sink) dwarfs the rest
            total = sum(v[1:])
            if len(v) > 1 and total > 0:
                rest[p] = [(i, x / total) for i, x in enumerate(v) if i > 0]
        if rest:
            title = f"position_bias [{rep.name(run)}]: without position 0 (renormalised)"
            plots.append(rep.plot(title, line_plot(rest, title, "position", "influence", markers=False)))
        for p, v in profiles.items():
            for i, x in enumerate(v):
                rep.record("profiles", run, "position_bias", f"profile_{p}", "value", x, position=i)
    return {"plots": plots} if plots else None


# ---------------------------------------------------------------------------- study panels
#: the prompt-forgetting study's published figures the panels are read against (PROTOCOL.md, A)
PUBLISHED_DECODE = {"detail": "not decodable from the text", "paraphrase": "not decodable from the text",
                    "genre": "not decodable from the text",
                    "translation": "decodable: 0.81 (Qwen2.5-0.5B), 0.84 (Pythia-160m)"}
PUBLISHED_SWITCHES = "Qwen2.5-0.5B: 4–11 of 32 per scene, mostly into Chinese"
PUBLISHED_GAP = 0.06


def _wilson(acc, n):
    if not (_finite(acc) and isinstance(n, (int, float)) and n > 0):
        return (math.nan, math.nan)
    return stats.wilson_interval(round(acc * n), int(n))


def _decodability(rep: Report) -> dict | None:
    """The decodability panel (``drift_decode_*`` tasks), per run: the median layer and the
    text at the last t with Wilson intervals next to the published figures, the accuracy
    per layer and t, and curves by t."""
    panels = []
    for run in rep.output.ordered_runs():
        rows, curves = [], {}
        for task, tr in run.tasks.items():
            v = tr.values
            if not (task.startswith("drift_decode_") and isinstance(v.get("hidden_accuracy_grid"), list)):
                continue
            axis = task[len("drift_decode_"):]
            n, ts = v.get("trajectories"), v.get("t_centres") or []
            grid = v["hidden_accuracy_grid"]
            lo, hi = _wilson(v.get("hidden_accuracy"), n)
            tlo, thi = _wilson(v.get("text_accuracy"), n)
            best = max(range(len(grid)), key=lambda i: grid[i][-1]) if grid else None
            cells = [[{"acc": acc, "ci": _wilson(acc, n)} for acc in row] for row in grid]
            for name, value in (("hidden_accuracy", v.get("hidden_accuracy")), ("hidden_accuracy_lower", lo),
                                ("hidden_accuracy_upper", hi), ("text_accuracy", v.get("text_accuracy")),
                                ("text_accuracy_lower", tlo), ("text_accuracy_upper", thi),
                                ("switches_base", v.get("switches_base")), ("switches_variant", v.get("switches_variant"))):
                if isinstance(value, (int, float)):
                    rep.record("decodability", run, task, name, "value", value)
            for layer, row in enumerate(grid):
                for t, acc in zip(ts, row):
                    rep.record("decodability", run, task, "hidden_accuracy", f"layer {layer}, t={t}", acc)
            rows.append({"axis": axis, "t": ts[-1] if ts else None, "n": n, "hidden": v.get("hidden_accuracy"),
                         "lower": lo, "upper": hi, "best": v.get("hidden_accuracy_best"), "best_layer": best,
                         "text": v.get("text_accuracy"), "text_lower": tlo, "text_upper": thi,
                         "switches_base": v.get("switches_base"), "switches_variant": v.get("switches_variant"),
                         "of": v.get("samples_per_prompt"), "published": PUBLISHED_DECODE.get(axis, ""),
                         "ts": ts, "grid": cells})
            if ts:
                curves[f"{axis} (hidden)"] = [(math.log2(t), acc) for t, acc in zip(ts, v.get("hidden_accuracy_by_t") or [])]
                curves[f"{axis} (text)"] = [(math.log2(t), acc) for t, acc in zip(ts, v.get("text_accuracy_by_t") or [])]
        if rows:
            title = f"decodability [{rep.name(run)}]: median layer and text, by t"
            panels.append({"label": rep.name(run), "rows": rows, "switches_published": PUBLISHED_SWITCHES,
                           "plot": rep.plot(title, line_plot(curves, title, "log2 t", "accuracy", y_range=(0.0, 1.0)))})
    return {"panels": panels} if panels else None


def _direct_relay(rep: Report) -> dict | None:
    """The direct / relay panel (``drift_alpha_*`` tasks run with ``decompose``), per run:
    α measured against α rebuilt from its terms, medians over layers, curves by layer."""
    panels = []
    for run in rep.output.ordered_runs():
        rows, curves = [], {}
        for task, tr in run.tasks.items():
            v = tr.values
            if not (task.startswith("drift_alpha_") and isinstance(v.get("alpha_predicted_layers"), list)):
                continue
            axis = task[len("drift_alpha_"):]
            row = {"axis": axis, "alpha": v.get("alpha"), "predicted": v.get("alpha_predicted"),
                   "gap": v.get("alpha_gap"), "direct": v.get("alpha_direct"), "relay": v.get("alpha_relay"),
                   "relay_share": v.get("relay_share"), "published_gap": PUBLISHED_GAP,
                   "within": _finite(v.get("alpha_gap")) and v["alpha_gap"] <= PUBLISHED_GAP}
            for name in ("alpha", "alpha_predicted", "alpha_gap", "alpha_direct", "alpha_relay", "relay_share"):
                if isinstance(v.get(name), (int, float)):
                    rep.record("direct_relay", run, task, name, "value", v[name])
            rows.append(row)
            for name, key in (("measured", "alpha_measured_layers"), ("predicted", "alpha_predicted_layers"),
                              ("direct", "alpha_direct_layers"), ("relay", "alpha_relay_layers")):
                curves[f"{axis} {name}"] = list(enumerate(v.get(key) or []))
        if rows:
            title = f"direct / relay [{rep.name(run)}]: α by layer"
            panels.append({"label": rep.name(run), "rows": rows, "plot": rep.plot(title, line_plot(curves, title, "layer", "α"))})
    return {"panels": panels} if panels else None


#: (id, title, builder): the page's sections in order; a builder returns None to leave its section out
SECTIONS = (
    ("verdict", "Verdict", _verdict),
    ("survival", "French over the answer", _survival),
    ("provenance", "Provenance", _provenance),
    ("summary", "Summary", _summary),
    ("curves", "Curves", _curves),
    ("settings", "Against no compensation", _settings),
    ("baseline", "Candidate against baseline", _baseline),
    ("runs", "Runs", _runs),
    ("audit", "Audit: segment languages per answer", _audit),
    ("profiles", "Positional-bias influence profiles", _profiles),
    ("decodability", "What free generation still carries (decodability)", _decodability),
    ("direct-relay", "Why α is what it is (direct vs relay)", _direct_relay),
)


def build_context(output, policy: str | None = None, baseline: str | None = None) -> dict:
    rep = Report(output, policy, baseline)
    sections = []
    for sid, title, builder in SECTIONS:
        data = builder(rep)
        if data is not None:
            sections.append({"id": sid, "title": title, **data})
    return {"root": output.root, "sections": sections, "plots": rep.plots, "records": rep.records,
            "runs": [rep.name(r) for r in output.ordered_runs()], "models": output.models,
            "alpha": stats.ALPHA, "generated": datetime.datetime.now().strftime("%Y-%m-%d %H:%M")}


def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["num"] = lambda v, d=4: (f"{v:.{d}f}" if isinstance(v, (int, float)) and math.isfinite(v) else "—")
    env.filters["pval"] = lambda p: "< 0.0001" if p < 1e-4 else f"{p:.4f}"
    env.filters["pct"] = lambda v: f"{v * 100:+.1f}%" if isinstance(v, float) and math.isfinite(v) else "—"
    env.filters["mdcell"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    env.filters["mdalt"] = lambda s: re.sub(r"([\[\]|\\])", r"\\\1", str(s)).replace("\n", " ")
    return env


def render(output, fmt: str = "html", policy: str | None = None, baseline: str | None = None,
           plot_dir: str | None = None) -> str:
    """The report as text: ``fmt`` is ``html``, ``md``, ``json`` or ``csv``. For Markdown,
    ``plot_dir`` is the folder name (relative to the report) its SVG files are linked from."""
    ctx = build_context(output, policy, baseline)
    return _render(ctx, fmt, plot_dir)


def _render(ctx: dict, fmt: str, plot_dir: str | None) -> str:
    if fmt == "json":
        import json

        keep = {k: ctx[k] for k in ("root", "generated", "runs", "models", "records")}
        verdict = next((s for s in ctx["sections"] if s["id"] == "verdict"), {})
        keep["gate"] = verdict.get("gate")
        return json.dumps(keep, indent=2, ensure_ascii=False, default=str)
    if fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        fields = list(dict.fromkeys(k for r in ctx["records"] for k in r))
        writer = csv.DictWriter(buf, fieldnames=fields)
        writer.writeheader()
        writer.writerows(ctx["records"])
        return buf.getvalue()
    for p in ctx["plots"]:
        p["file"] = f"{plot_dir or 'plots'}/{p['slug']}.svg"
    template = {"html": "report.html.j2", "md": "report.md.j2"}[fmt]
    return _env().get_template(template).render(**ctx)


def write_report(results, path: str, fmt: str | None = None, allow_partial: bool = False,
                 policy: str | None = None, baseline: str | None = None) -> str:
    """Write the report of one results folder or a list of them (a Markdown report's plots
    go to ``<name>-plots/`` beside it)."""
    from drift_eval.decide.results import load_output
    from drift_eval.errors import DriftUsageError
    from drift_eval.files import write_text_atomic

    if fmt is None:
        fmt = FORMATS.get(os.path.splitext(path)[1].lower())
        if fmt is None:
            raise DriftUsageError(f"cannot tell the report format from '{path}': end it in .html, .md, .json or .csv, "
                                  f"or pass --format")
    roots = [results] if isinstance(results, (str, os.PathLike)) else list(results)
    output = load_output(*roots, allow_partial=allow_partial)
    ctx = build_context(output, policy, baseline)
    plot_dir = os.path.splitext(os.path.basename(path))[0] + "-plots"
    text = _render(ctx, fmt, plot_dir)
    if fmt == "md":
        folder = os.path.join(os.path.dirname(os.path.abspath(path)), plot_dir)
        written = {write_text_atomic(os.path.join(folder, f"{p['slug']}.svg"), str(p["svg"])) for p in ctx["plots"]}
        for stale in (os.listdir(folder) if os.path.isdir(folder) else []):
            if stale.endswith(".svg") and os.path.join(folder, stale) not in written:
                os.remove(os.path.join(folder, stale))
    return write_text_atomic(path, text)
