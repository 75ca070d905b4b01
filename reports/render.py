"""``drift-eval report OUT_DIR -o report.html`` (or ``.md``): the comparison of settings.

Jinja templates in ``templates/`` with autoescaping on (HTML and Markdown alike: generated
text can never become markup). Plots are inline SVG (``svg.py``); the page has no scripts
and no external assets.

Per setting: the headline ``drift_score``, every scalar metric with its 95% interval (Wilson
for 0/1 per-sample values, else a bootstrap, else ±1.96·stderr), the French rate per turn,
α by layer (``drift_alpha_*`` tasks, metrics ``alpha_l00``...), the perplexity cost
(``drift_ppl``: perplexity / perplexity under ``none`` − 1), echo, the positional-bias
profiles (``position_bias``: ``profile_*``), and a few escaped sample excerpts. Against
``none``: paired differences with intervals and a significance test, worded "significant"
(p < 0.05) or "trend" (see ``drift_eval.metrics.stats``).
"""
from __future__ import annotations

import datetime
import math
import os
import re

from ..metrics import stats

from .svg import line_plot

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

LAYER_METRIC = re.compile(r"^(alpha|beta)_l(\d{2,3})$")  # per-layer fits, named once the depth is known
FRENCH_TURN = re.compile(r"^french_turn_(\d+)$")
EXCERPT_CHARS = 400
EXCERPTS_PER_SETTING = 2


def _catalogue() -> dict:
    """Metric names, directions and report hints from the task YAMLs (``metric_list``)."""
    from drift_eval.tasks import metric_catalogue

    return metric_catalogue()


def _hinted(catalogue, task: str, *hints) -> list:
    return [m for m, info in catalogue.get(task, {}).items() if info["report"] in hints]


def _is_curve(catalogue, task: str, metric: str) -> bool:
    """Per-turn and per-layer metrics: drawn as curves, not listed in tables."""
    return (catalogue.get(task, {}).get(metric) or {}).get("report") == "curve" or bool(LAYER_METRIC.match(metric))


def _finite(v) -> bool:
    return isinstance(v, float) and math.isfinite(v)


def _cell(m) -> dict:
    return {"metric": m.name, "value": m.value, "stderr": m.stderr, "lower": m.lower, "upper": m.upper,
            "n": m.n, "arrow": {True: "↑", False: "↓"}.get(m.higher_is_better, ""),
            "has_ci": _finite(m.lower) and _finite(m.upper)}


def _excerpts(tr, setting: str) -> list:
    from ..measure.conversation import assistant_replies

    if not tr.samples:
        return []
    flag = next((k for k in ("fully_french", "all_turns_french", "french_last_turn") if k in tr.samples[0]), None)
    ordered = sorted(tr.samples, key=lambda s: (s.get(flag, 1) if flag else 1, s.get("doc_id", 0)))
    out = []
    for s in ordered[:EXCERPTS_PER_SETTING]:
        resp = s.get("filtered_resps") or s.get("resps") or [""]
        text = resp[0][0] if isinstance(resp[0], list) else resp[0]
        where = "answer"
        if isinstance(text, str) and text.startswith("[{"):
            try:
                replies = assistant_replies(text)
                text, where = replies[-1], f"reply {len(replies)}"
            except (ValueError, KeyError, IndexError, TypeError):
                pass
        if not isinstance(text, str) or text.lstrip().startswith("{"):
            continue  # not a generated text (e.g. position_bias's JSON measurement)
        cut = len(text) > EXCERPT_CHARS
        out.append({"task": tr.name, "doc_id": s.get("doc_id"), "where": where,
                    "flag": f"{flag}={s.get(flag)}" if flag else "", "setting": setting,
                    "text": text[:EXCERPT_CHARS] + ("…" if cut else "")})
    return out


def _indexed_series(output, task: str, pattern: re.Pattern) -> dict:
    """Per setting, the (index, value) points of ``task``'s metrics whose names match
    ``pattern`` (its group 1 is the index: turn or layer), in index order."""
    series = {}
    for lab in output.labels:
        tr = output.settings[lab].tasks.get(task)
        if not tr:
            continue
        pts = sorted((int(m.group(1)), v) for k, v in tr.values.items()
                     if (m := pattern.fullmatch(k)) and isinstance(v, (int, float)))
        if pts:
            series[lab] = pts
    return series


def _alpha_plots(output) -> list:
    plots = []
    alpha_layer = re.compile(r"^alpha_l(\d{2,3})$")
    for task in output.task_names():
        series = _indexed_series(output, task, alpha_layer)
        if series:
            plots.append({"title": f"{task}: α by layer", "svg": line_plot(series, f"{task}: α by layer", "layer", "α")})
    return plots


def _profile_plots(output) -> list:
    plots = []
    for lab in output.labels:
        tr = output.settings[lab].tasks.get("position_bias")
        if not tr:
            continue
        profiles = {k[len("profile_"):]: v for k, v in tr.values.items()
                    if k.startswith("profile_") and isinstance(v, list)}  # list-valued metrics
        if not profiles:
            continue
        title = f"position_bias [{lab}]: influence profiles"
        plots.append({"title": title, "svg": line_plot({p: list(enumerate(v)) for p, v in profiles.items()},
                                                       title, "position", "influence", markers=False)})
        rest = {}
        for p, v in profiles.items():  # position 0 (the attention sink) dwarfs the rest
            total = sum(v[1:])
            if len(v) > 1 and total > 0:
                rest[p] = [(i, x / total) for i, x in enumerate(v) if i > 0]
        if rest:
            title = f"position_bias [{lab}]: without position 0 (renormalised)"
            plots.append({"title": title, "svg": line_plot(rest, title, "position", "influence", markers=False)})
    return plots


def _comparisons(output, lab: str, catalogue: dict) -> list:
    rows = []
    base = output.settings.get("none")
    st = output.settings[lab]
    if base is None:
        return rows
    for task, tr in st.tasks.items():
        btr = base.tasks.get(task)
        if not btr:
            continue
        names = (not tr.is_group and _hinted(catalogue, task, "key", "summary")) \
            or [m for m in output.scalar_metrics(lab, task) if not _is_curve(catalogue, task, m)]
        for name in names:
            if name not in tr.values or name not in btr.values:
                continue
            d = output.compare(task, name, lab)
            if d is None:
                continue
            rows.append({"task": task, "metric": name, "d": d, "has_ci": _finite(d.lower) and _finite(d.upper),
                         "arrow": {True: "↑", False: "↓"}.get(tr.higher_is_better.get(name), "")})
    return rows


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


def study_panels(output) -> dict:
    """The decodability panel (``drift_decode_*`` tasks) and the direct / relay panel
    (``drift_alpha_*`` tasks run with ``decompose``), per setting, from the results' values:
    tables at the last t / over layers next to the published figures, and curves."""
    decode, relay = [], []
    for lab in output.labels:
        rows, curves, drows, dcurves = [], {}, [], {}
        for task, tr in output.settings[lab].tasks.items():
            v = tr.values
            if task.startswith("drift_decode_") and isinstance(v.get("hidden_accuracy_grid"), list):
                axis = task[len("drift_decode_"):]
                n, ts = v.get("trajectories"), v.get("t_centres") or []
                grid = v["hidden_accuracy_grid"]
                by_t = v.get("hidden_accuracy_by_t") or []
                lo, hi = _wilson(v.get("hidden_accuracy"), n)
                tlo, thi = _wilson(v.get("text_accuracy"), n)
                best = max(range(len(grid)), key=lambda i: grid[i][-1]) if grid else None
                cells = [[{"acc": a, "ci": _wilson(a, n)} for a in row] for row in grid]
                rows.append({"axis": axis, "t": ts[-1] if ts else None, "n": n, "hidden": v.get("hidden_accuracy"),
                             "lower": lo, "upper": hi, "best": v.get("hidden_accuracy_best"), "best_layer": best,
                             "text": v.get("text_accuracy"), "text_lower": tlo, "text_upper": thi,
                             "switches_base": v.get("switches_base"), "switches_variant": v.get("switches_variant"),
                             "of": v.get("samples_per_prompt"), "published": PUBLISHED_DECODE.get(axis, ""),
                             "ts": ts, "grid": cells})
                if ts:
                    curves[f"{axis} (hidden)"] = [(math.log2(t), a) for t, a in zip(ts, by_t)]
                    curves[f"{axis} (text)"] = [(math.log2(t), a) for t, a in zip(ts, v.get("text_accuracy_by_t") or [])]
            if task.startswith("drift_alpha_") and isinstance(v.get("alpha_predicted_layers"), list):
                axis = task[len("drift_alpha_"):]
                drows.append({"axis": axis, "alpha": v.get("alpha"), "predicted": v.get("alpha_predicted"),
                              "gap": v.get("alpha_gap"), "direct": v.get("alpha_direct"), "relay": v.get("alpha_relay"),
                              "relay_share": v.get("relay_share"), "published_gap": PUBLISHED_GAP,
                              "within": _finite(v.get("alpha_gap")) and v["alpha_gap"] <= PUBLISHED_GAP})
                for name, key in (("measured", "alpha_measured_layers"), ("predicted", "alpha_predicted_layers"),
                                  ("direct", "alpha_direct_layers"), ("relay", "alpha_relay_layers")):
                    dcurves[f"{axis} {name}"] = list(enumerate(v.get(key) or []))
        if rows:
            title = f"decodability [{lab}]: median layer and text, by t"
            decode.append({"label": lab, "rows": rows, "switches_published": PUBLISHED_SWITCHES,
                           "svg": line_plot(curves, title, "log2 t", "accuracy", y_range=(0.0, 1.0))})
        if drows:
            title = f"direct / relay [{lab}]: α by layer"
            relay.append({"label": lab, "rows": drows, "svg": line_plot(dcurves, title, "layer", "α")})
    return {"decode_panels": decode, "relay_panels": relay}


def build_context(output) -> dict:
    catalogue = _catalogue()
    summary_metrics = [(task, m) for task in catalogue for m in _hinted(catalogue, task, "summary")]
    settings = []
    ppl_none = None
    none = output.settings.get("none")
    if none and "drift_ppl" in none.tasks and isinstance(none.tasks["drift_ppl"].values.get("perplexity"), (int, float)):
        ppl_none = float(none.tasks["drift_ppl"].values["perplexity"])
    for lab in output.labels:
        st = output.settings[lab]
        tables, excerpts = [], []
        for task, tr in st.tasks.items():
            names = [m for m in output.scalar_metrics(lab, task) if not _is_curve(catalogue, task, m)]
            rows = [_cell(output.metric(task, m, lab)) for m in names]
            if rows:
                tables.append({"task": task, "is_group": tr.is_group, "rows": rows, "n": tr.n,
                               "samples": bool(tr.samples)})
            excerpts += _excerpts(tr, lab)
        head = None
        if "drift_french" in st.tasks and "drift_score" in st.tasks["drift_french"].values:
            head = _cell(output.metric("drift_french", "drift_score", lab))
        ppl = None
        if "drift_ppl" in st.tasks and isinstance(st.tasks["drift_ppl"].values.get("perplexity"), (int, float)):
            values = st.tasks["drift_ppl"].values
            p = float(values["perplexity"])
            # drift_ppl scores the same continuations without compensation in the same run
            # (perplexity_change); otherwise compare with the `none` setting's run
            within = values.get("perplexity_change")
            cost = float(within) if isinstance(within, (int, float)) and lab != "none" else (
                stats.relative_cost(p, ppl_none) if ppl_none else math.nan)
            ppl = {"perplexity": p, "cost": cost}
        summary = []
        for task, name in summary_metrics:
            if task in st.tasks and name in st.tasks[task].values:
                summary.append(_cell(output.metric(task, name, lab)) | {"task": task})
        settings.append({"label": lab, "model": st.model_args.get("pretrained", ""), "files": st.files,
                         "headline": head, "ppl": ppl, "tables": tables, "excerpts": excerpts,
                         "summary": summary, "comparisons": _comparisons(output, lab, catalogue) if lab != "none" else []})
    plots = []
    for task in output.task_names():
        if any(FRENCH_TURN.fullmatch(k) for st in output.settings.values()
               for k in (st.tasks.get(task).values if st.tasks.get(task) else {})):
            plots.append({"title": f"{task}: French rate per turn",
                          "svg": line_plot(_indexed_series(output, task, FRENCH_TURN), f"{task}: French rate per turn",
                                           "turn", "French rate", y_range=(0.0, 1.0))})
    plots += _alpha_plots(output)
    profile_plots = _profile_plots(output)
    return {"root": output.root, "settings": settings, "plots": plots, "profile_plots": profile_plots,
            "has_none": "none" in output.settings, "alpha": stats.ALPHA,
            "generated": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), **study_panels(output)}


def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["num"] = lambda v, d=4: (f"{v:.{d}f}" if isinstance(v, (int, float)) and math.isfinite(v) else "—")
    env.filters["pval"] = lambda p: "< 0.0001" if p < 1e-4 else f"{p:.4f}"
    env.filters["pct"] = lambda v: f"{v * 100:+.1f}%" if isinstance(v, float) and math.isfinite(v) else "—"
    env.filters["mdcell"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    return env


def render(output, fmt: str = "html") -> str:
    """The report as text: ``fmt`` is ``html`` or ``md``."""
    template = {"html": "report.html.j2", "md": "report.md.j2"}[fmt]
    return _env().get_template(template).render(**build_context(output))


def write_report(results_dir: str, path: str, fmt: str | None = None, allow_partial: bool = False) -> str:
    from ..decide.results import load_output
    from ..errors import DriftUsageError
    from ..files import write_text_atomic

    if fmt is None:
        ext = os.path.splitext(path)[1].lower()
        fmt = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}.get(ext)
        if fmt is None:
            raise DriftUsageError(f"cannot tell the report format from '{path}': end it in .html or .md, or pass --format")
    output = load_output(results_dir, allow_partial=allow_partial)
    text = render(output, fmt)
    return write_text_atomic(path, text)
