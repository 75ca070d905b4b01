"""The tables of the published runs (docs/results) in the README, docs/results/README.md
and docs/results/languages/README.md, made from the committed results by code, so that no
figure there can go stale:

    python benchmarks/results_tables.py --write     # rewrite the tables in place
    python benchmarks/results_tables.py --check     # exit 1 when a committed table differs

A table sits between ``<!-- table: NAME -->`` and ``<!-- end table -->`` in a Markdown file;
``TABLES`` names the function that writes each. Every figure is a metric of the published
results with its 95% interval (``decide.results.Output.metric``), or a paired difference on
the documents both runs share (exact McNemar for 0/1 outcomes, the sign-flip test
otherwise) with its p and the p adjusted (Benjamini–Hochberg) over the comparisons of the
table that are one family. Pure Python over the results: no model is loaded."""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys

from drift_eval.decide.results import load_output
from drift_eval.files import read_text, write_text_atomic
from drift_eval.metrics.drift import CAUSES
from drift_eval.reports.text import estimate, interval, pvalue, short

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
MARK = re.compile(r"(<!-- table: (?P<name>[a-z_]+) -->\n)(?P<body>.*?)(<!-- end table -->)", re.S)
SMOLLM2, QWEN = "SmolLM2-135M-Instruct", "Qwen2.5-Coder-0.5B-Instruct"
LANGUAGE_ORDER = ("fr", "de", "es", "pt", "it", "tr", "id", "vi", "ja", "zh", "ko", "ar", "hi", "ru")
README_LANGUAGES = ("fr", "zh", "ja", "hi", "ar", "ru")


def _results(root: str) -> str:
    return os.path.join(root, "docs", "results")


def _load(*parts):
    return load_output(os.path.join(*parts))


def _est(m) -> str:
    return estimate(m.value, m.lower, m.upper)


def _p(d) -> str:
    raw = pvalue(d.p_value)
    return f"p {raw} ({pvalue(d.p_adjusted)})" if getattr(d, "adjusted", False) else f"p {raw}"


def _change(d) -> str:
    """A paired difference with its interval (sharing decimals) and its p: ``+0.14 [+0.00, +0.25], p 0.062 (0.31)``."""
    scale = max((abs(x) for x in (d.difference, d.lower, d.upper) if math.isfinite(x)), default=None)
    ci = f" [{short(d.lower, True, scale)}, {short(d.upper, True, scale)}]" if math.isfinite(d.lower) else ""
    return f"{short(d.difference, True, scale)}{ci}, {_p(d)}"


def _causes(out, task: str, setting: str = "none") -> str:
    return " / ".join(short(out.metric(task, f"not_kept_{c}", setting).value) for c in CAUSES)


def drift_french(root: str) -> str:
    """drift_french at task 4.0: SmolLM2's five settings, the re-injection control and Qwen's
    two runs; each setting against ``none`` on the same documents, adjusted over those 10."""
    from drift_eval.metrics import paired  # deferred, start-up: loads numpy

    res = _results(root)
    smol, qs, qm = (_load(res, "smollm2_drift_french"), _load(res, "qwen_single_v3"),
                    _load(res, "qwen_multiturn_v3"))
    reinject = _load(res, "smollm2_multiturn_reinject")
    single, multi = "drift_french_single", "drift_french_multiturn"
    rows = [(SMOLLM2, s, smol, smol, s, s) for s in ("none", "log:0.1", "log:0.25", "log:1", "const:0.25")]
    rows += [(QWEN, "none", qs, qm, "none", "none"), (QWEN, "log:1 (single turn), log:0.25 (turns)", qs, qm, "log:1",
                                                      "log:0.25")]
    diffs = []
    for _, _, so, mo, ss, ms in rows:
        diffs.append(so.compare(single, "fully_french", ss) if ss != "none" else None)
        diffs.append(mo.compare(multi, "last3_french", ms) if ms != "none" else None)
    shown = [d for d in diffs if d is not None]
    adjusted = iter(paired.adjust_family(shown))
    diffs = [next(adjusted) if d is not None else None for d in diffs]
    lines = ["| model, setting | fully French | not kept: left / degenerate / unreadable | Δ, p (adjusted) | "
             "French, last three turns | time in French (turns) | Δ, p (adjusted) |",
             "|---|---|---|---|---|---|---|"]
    for i, (model, label, so, mo, ss, ms) in enumerate(rows):
        d1, d2 = diffs[2 * i], diffs[2 * i + 1]
        name = f"{model}, `{label}`" if label == "none" else f"`{label}`"
        lines.append(f"| {name} | {_est(so.metric(single, 'fully_french', ss))} | {_causes(so, single, ss)} | "
                     f"{_change(d1) if d1 else '—'} | {_est(mo.metric(multi, 'last3_french', ms))} | "
                     f"{_est(mo.metric(multi, 'time_in_french', ms))} | {_change(d2) if d2 else '—'} |")
    r = reinject.metric("drift_french_multiturn_reinject", "last3_french")
    d = _control(reinject, "drift_french_multiturn_reinject", smol, "last3_french")
    lines.append(f"| {SMOLLM2}, `none`, instruction restated every 2 turns (a control) | | | | {_est(r)} | "
                 f"{_est(reinject.metric('drift_french_multiturn_reinject', 'time_in_french'))} | {_change(d)} |")
    return "\n".join(lines) + "\n"


def _control(control, task: str, plain, metric: str):
    """A control task against the plain eight-turn task, ``none`` of both, paired by document."""
    from drift_eval.decide.compare import shared_documents  # deferred, start-up: loads numpy
    from drift_eval.metrics import paired  # deferred, start-up: loads numpy

    a = control.metric(task, metric, "none")
    b = plain.metric("drift_french_multiturn", metric, "none")
    docs = shared_documents(a, b, same_hash=False)
    return paired.paired_difference([a.per_sample[k] for k in docs], [b.per_sample[k] for k in docs], binary=a.binary)


def controls(root: str) -> str:
    """The three eight-turn controls of SmolLM2 against the plain task (raw p: a family of
    their own, apart from the settings)."""
    res = _results(root)
    plain = _load(res, "smollm2_drift_french")
    lines = ["| control | its headline | French, last three turns | Δ against the plain task, p |", "|---|---|---|---|"]
    for folder, task, head, label in [
            ("smollm2_multiturn_reinject", "drift_french_multiturn_reinject", "all_turns_french",
             "instruction restated every 2 turns; French in every turn"),
            ("smollm2_multiturn_conflict", "drift_french_multiturn_conflict", "french_after_request",
             "the user asks for English from turn 5; French after the request"),
            ("smollm2_multiturn_fixed", "drift_french_multiturn_fixed", "french_last_turn",
             "scripted French history, turn 8 generated; French in turn 8")]:
        out = _load(res, folder)
        if task == "drift_french_multiturn_fixed":
            lines.append(f"| {label} | {_est(out.metric(task, head))} | — | — |")
            continue
        d = _control(out, task, plain, "last3_french")
        lines.append(f"| {label} | {_est(out.metric(task, head))} | {_est(out.metric(task, 'last3_french'))} | "
                     f"{_change(d)} |")
    return "\n".join(lines) + "\n"


def _language_runs(root: str) -> dict:
    """``{(model, kind, language): Output}`` of the published drift_languages runs."""
    base = os.path.join(_results(root), "languages")
    out = {}
    for model, name in (("smollm2", SMOLLM2), ("qwen", QWEN)):
        for kind in ("single", "multiturn"):
            for lang in LANGUAGE_ORDER:
                folder = os.path.join(base, f"{model}_{kind}", lang)
                if os.path.isdir(folder):
                    out[(name, kind, lang)] = _load(folder)
    return out


def languages_headline(root: str, languages=README_LANGUAGES) -> str:
    """Answers fully kept in L (drift_L_single), per model and language."""
    runs = _language_runs(root)
    lines = ["| model | " + " | ".join(languages) + " |", "|---|" + "---|" * len(languages)]
    for model in (SMOLLM2, QWEN):
        cells = [_est(runs[(model, "single", lang)].metric(f"drift_{lang}_single", "fully_target"))
                 if (model, "single", lang) in runs else "—" for lang in languages]
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def languages_readme_headline(root: str) -> str:
    return languages_headline(root, README_LANGUAGES)


def languages_runs(root: str) -> str:
    """Every published language run: single turn (fully kept, time in L, the split of not
    kept, LCB's line pass) and eight turns (all turns kept, the last three)."""
    runs = _language_runs(root)
    lines = ["| model | language | fully in L | time in L (share of the answer) | not kept: left / degenerate / "
             "unreadable | LCB line pass | all 8 turns in L | last 3 turns in L |", "|---|---|---|---|---|---|---|---|"]
    for model in (SMOLLM2, QWEN):
        for lang in LANGUAGE_ORDER:
            single, multi = runs.get((model, "single", lang)), runs.get((model, "multiturn", lang))
            if single is None:
                continue
            t = f"drift_{lang}_single"
            cells = [_est(single.metric(t, "fully_target")), _est(single.metric(t, "time_in_target")),
                     _causes(single, t), _est(single.metric(t, "lcb_lpr"))]
            m = f"drift_{lang}_multiturn"
            cells += [_est(multi.metric(m, "all_turns_target")), _est(multi.metric(m, "last3_target"))] \
                if multi is not None else ["—", "—"]
            lines.append(f"| {model} | {lang} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def languages_pairs(root: str) -> str:
    """Qwen against SmolLM2 per language on the same requests: answers fully kept, paired
    (exact McNemar), adjusted over the 14 languages."""
    from drift_eval.decide.compare import shared_documents  # deferred, start-up: loads numpy
    from drift_eval.metrics import paired  # deferred, start-up: loads numpy

    runs = _language_runs(root)
    diffs = []
    for lang in LANGUAGE_ORDER:
        t = f"drift_{lang}_single"
        a = runs[(QWEN, "single", lang)].metric(t, "fully_target")
        b = runs[(SMOLLM2, "single", lang)].metric(t, "fully_target")
        docs = shared_documents(a, b)
        diffs.append(paired.paired_difference([a.per_sample[k] for k in docs], [b.per_sample[k] for k in docs],
                                              binary=a.binary))
    diffs = paired.adjust_family(diffs)
    lines = ["| | " + " | ".join(LANGUAGE_ORDER) + " |", "|---|" + "---|" * len(LANGUAGE_ORDER),
             "| Δ | " + " | ".join(short(d.difference, signed=True) for d in diffs) + " |",
             "| 95% interval | " + " | ".join(interval(d.lower, d.upper, True) for d in diffs) + " |",
             "| p (adjusted) | " + " | ".join(f"{pvalue(d.p_value)} ({pvalue(d.p_adjusted)})" for d in diffs) + " |"]
    return "\n".join(lines) + "\n"


#: the folders of docs/results whose runs the rule of "kept" scores, and the metrics of them
#: that ``figures`` keeps (those a task has)
SCORED_FOLDERS = ("smollm2_drift_french", "smollm2_multiturn_reinject", "smollm2_multiturn_conflict",
                  "smollm2_multiturn_fixed", "qwen_single_v3", "qwen_multiturn_v3")
HEADLINE_METRICS = ("fully_french", "fully_target", "time_in_french", "time_in_target", "not_kept_left",
                    "not_kept_degenerate", "not_kept_unreadable", "last3_french", "last3_target", "all_turns_french",
                    "all_turns_target", "french_after_request", "french_last_turn")
BEFORE = os.path.join("docs", "results", "before_2.3.json")


def figures(root: str) -> dict:
    """``{folder: {setting: {task: {"version": v, metric: value}}}}``: the headline metrics
    (``HEADLINE_METRICS``) of every published run that the rule of "kept" scores, rounded to
    four places; ``before_2.3.json`` holds them as they were under rule 2.2."""
    res = _results(root)
    folders = list(SCORED_FOLDERS) + [os.path.join("languages", f"{m}_{k}", lang) for m in ("smollm2", "qwen")
                                      for k in ("single", "multiturn") for lang in LANGUAGE_ORDER]
    out: dict = {}
    for folder in folders:
        if not os.path.isdir(os.path.join(res, folder)):
            continue
        output = _load(res, folder)
        for run in output.ordered_runs():
            setting = run.setting
            for task, tr in sorted(run.tasks.items()):
                if tr.is_group:
                    continue
                kept = {m: round(float(tr.values[m]), 4) for m in HEADLINE_METRICS if m in tr.values}
                if kept:
                    out.setdefault(folder.replace(os.sep, "/"), {}).setdefault(setting, {})[task] = {
                        "version": tr.version, **kept}
    return out


def _before(root: str) -> dict:
    return json.loads(read_text(os.path.join(root, BEFORE), "figures file"))["runs"]


def _moved(old, new) -> str:
    """``0.33 → 0.25``, or the one figure when it did not move."""
    return short(new) if old is None or short(old) == short(new) else f"{short(old)} → {short(new)}"


def french_change(root: str) -> str:
    """Each published drift_french run under rule 2.2 (``before_2.3.json``) and now: the
    headline, and what is degenerate."""
    before, now = _before(root), figures(root)
    heads = {"drift_french_single": "fully_french", "drift_french_multiturn": "last3_french",
             "drift_french_multiturn_reinject": "all_turns_french",
             "drift_french_multiturn_conflict": "french_after_request",
             "drift_french_multiturn_fixed": "french_last_turn"}
    lines = ["| run | setting | task | headline | 4.2 → 4.3 (conflict 3.2 → 3.3) | not kept as degenerate |",
             "|---|---|---|---|---|---|"]
    for folder in SCORED_FOLDERS:
        for setting, tasks in (now.get(folder) or {}).items():
            for task, new in tasks.items():
                old = ((before.get(folder) or {}).get(setting) or {}).get(task) or {}
                head = heads.get(task)
                if head is None or head not in new:
                    continue
                lines.append(f"| `{folder}` | `{setting}` | {task} | {head} | {_moved(old.get(head), new[head])} | "
                             + (_moved(old.get('not_kept_degenerate'), new['not_kept_degenerate'])
                                if 'not_kept_degenerate' in new else "—") + " |")
    return "\n".join(lines) + "\n"


def languages_change(root: str) -> str:
    """Each language run before task 2.0 (``before_2.0.json``: its results at 1.1, the
    eight-turn ones at 1.0), at 2.2 (``before_2.3.json``: segment rule 2.2) and now: what
    moved, and by which cause."""
    first = json.loads(read_text(os.path.join(_results(root), "languages", "before_2.0.json"), "figures file"))["runs"]
    second, now = _before(root), figures(root)
    lines = ["| model | language | fully in L at 1.1 (undetermined left out) | fully kept: 2.2 → 2.3 | "
             "not kept at 2.3: left / degenerate / unreadable | degenerate: 2.2 → 2.3 | "
             "all 8 turns in L: 1.0 → 2.2 → 2.3 |", "|---|---|---|---|---|---|---|"]
    for key, model in (("smollm2", SMOLLM2), ("qwen", QWEN)):
        for lang in LANGUAGE_ORDER:
            t, m = f"drift_{lang}_single", f"drift_{lang}_multiturn"
            new = (now.get(f"languages/{key}_single/{lang}") or {}).get("none", {}).get(t)
            old = (second.get(f"languages/{key}_single/{lang}") or {}).get("none", {}).get(t) or {}
            oldest = ((first.get(key) or {}).get("single") or {}).get(lang)
            if new is None or oldest is None:
                continue
            turns = "—"
            new_m = (now.get(f"languages/{key}_multiturn/{lang}") or {}).get("none", {}).get(m)
            oldest_m = ((first.get(key) or {}).get("multiturn") or {}).get(lang)
            if new_m is not None and oldest_m:
                old_m = (second.get(f"languages/{key}_multiturn/{lang}") or {}).get("none", {}).get(m) or {}
                turns = (f"{short(oldest_m['all_turns_target'])} → {short(old_m.get('all_turns_target'))} → "
                         f"{short(new_m['all_turns_target'])}")
            causes = " / ".join(short(new[f"not_kept_{c}"]) for c in ("left", "degenerate", "unreadable"))
            lines.append(f"| {model} | {lang} | {short(oldest['fully_target'])} | "
                         f"{_moved(old.get('fully_target'), new['fully_target'])} | {causes} | "
                         f"{_moved(old.get('not_kept_degenerate'), new['not_kept_degenerate'])} | {turns} |")
    return "\n".join(lines) + "\n"


def languages_by_kind(root: str) -> str:
    """The single-turn answers of all 14 languages pooled by the kind of request (the bank's
    ``kind``: explain, list, code, story, compare, steps, table, names), per model: answers
    fully kept in L (Wilson) and the time in L (the exact interval of the shares' sum)."""
    from drift_eval.metrics import stats  # deferred, start-up: loads numpy

    runs = _language_runs(root)
    kinds: dict = {}
    for (model, kind, lang), out in runs.items():
        if kind != "single":
            continue
        for s in out.run("none").tasks[f"drift_{lang}_single"].samples or []:
            entry = kinds.setdefault(s["doc"]["kind"], {}).setdefault(model, ([], []))
            entry[0].append(s["fully_target"])
            entry[1].append(s["time_in_target"])
    lines = ["| kind of request | answers | " + " | ".join(f"{m}: fully in L | {m}: time in L" for m in (SMOLLM2, QWEN))
             + " |", "|---|---|" + "---|---|" * 2]
    for kind in sorted(kinds, key=lambda k: -len(kinds[k][QWEN][0])):
        cells = []
        for model in (SMOLLM2, QWEN):
            kept, time = kinds[kind][model]
            cells += [estimate(sum(kept) / len(kept), *stats.wilson_interval(int(sum(kept)), len(kept))),
                      estimate(sum(time) / len(time), *stats.share_sum_interval(time))]
        lines.append(f"| {kind} | {len(kinds[kind][QWEN][0])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


TABLES = {"drift_french": drift_french, "controls": controls, "languages_headline": languages_readme_headline,
          "languages_runs": languages_runs, "languages_pairs": languages_pairs,
          "languages_change": languages_change, "languages_by_kind": languages_by_kind,
          "french_change": french_change}
FILES = ("README.md", os.path.join("docs", "results", "README.md"),
         os.path.join("docs", "results", "languages", "README.md"))


def regenerate(text: str, root: str, cache: dict) -> str:
    """``text`` with every marked table written again from the results."""
    def fill(m):
        name = m.group("name")
        if name not in TABLES:
            raise KeyError(f"no table named {name!r}; the tables are {', '.join(TABLES)}")
        if name not in cache:
            cache[name] = TABLES[name](root)
        return m.group(1) + cache[name] + m.group(4)

    return MARK.sub(fill, text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/results_tables.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=ROOT, help="the repository (default: this checkout)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    a = p.parse_args(argv)
    cache: dict = {}
    stale = []
    for rel in FILES:
        path = os.path.join(a.root, rel)
        text = read_text(path, "Markdown file")
        new = regenerate(text, a.root, cache)
        if new != text:
            stale.append(rel)
            if a.write:
                write_text_atomic(path, new)
    print(("rewrote: " if a.write else "differs from the results: ") + ", ".join(stale) if stale else "all tables current")
    return 1 if stale and a.check else 0


if __name__ == "__main__":
    sys.exit(main())
