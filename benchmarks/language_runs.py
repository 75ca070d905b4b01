"""The drift_languages evidence runs: one table row per model and language.

    python benchmarks/language_runs.py docs/results/languages

reads every published run folder ``<model>_<single|multiturn>/<L>/`` under the folder and
prints, per model and language, the single-turn headline (``fully_target``) and LCB's line
pass (``lcb_lpr``) with their 95% intervals, the restricted mean time in the language over
the answer (metric tokens) and, where the eight-turn run exists, ``all_turns_target`` and
``last3_target``; and each run's wall-clock (lm-eval's ``total_evaluation_time_seconds``).
"""
from __future__ import annotations

import glob
import json
import os
import sys

from drift_eval.decide.results import load_output
from drift_eval.metrics import drift, stats


def _cell(out, task, metric):
    m = out.metric(task, metric, "none")
    if not isinstance(m.value, float):
        return "—"
    return f"{m.value:.2f} [{m.lower:.2f}, {m.upper:.2f}]"


def _rmst(out, task, lang):
    samples = out.run("none").tasks[task].samples or []
    times = drift.answer_times(((s.get("language_timeline"), s["resps"][0][0]) for s in samples), lang)
    if times is None:
        return "—"
    r = stats.restricted_mean(*times)
    return f"{r.estimate:.0f} [{r.lower:.0f}, {r.upper:.0f}] of {r.horizon}"


def _seconds(folder):
    """The run's wall-clock: ``wall_clock_s`` in ``run.json`` beside it (the run that made the
    answers; a folder scored again from its answer cache has its own, shorter, time in the
    results file), else the results file's ``total_evaluation_time_seconds``."""
    note = os.path.join(folder, "run.json")
    if os.path.isfile(note):
        with open(note, encoding="utf-8") as fh:
            return float(json.load(fh)["wall_clock_s"])
    [path] = glob.glob(os.path.join(folder, "none", "*", "results_*.json"))
    with open(path, encoding="utf-8") as fh:
        return float(json.load(fh)["total_evaluation_time_seconds"])


def main(root: str) -> int:
    rows = []
    for single in sorted(glob.glob(os.path.join(root, "*_single", "*"))):
        model = os.path.basename(os.path.dirname(single)).rsplit("_", 1)[0]
        lang = os.path.basename(single)
        out = load_output(single)
        task = f"drift_{lang}_single"
        multi = os.path.join(root, f"{model}_multiturn", lang)
        m_cells = ["—", "—", "—"]
        if os.path.isdir(multi):
            mo = load_output(multi)
            mt = f"drift_{lang}_multiturn"
            m_cells = [_cell(mo, mt, "all_turns_target"), _cell(mo, mt, "last3_target"), f"{_seconds(multi):.0f}"]
        rows.append((model, lang, _cell(out, task, "fully_target"), _cell(out, task, "lcb_lpr"),
                     _rmst(out, task, lang), f"{_seconds(single):.0f}", *m_cells))
    print("| model | language | fully in L (36 × 256 tokens) | LCB line pass | time in L (tokens, RMST) | "
          "wall-clock (s) | all 8 turns in L (8 conversations) | last 3 turns in L | wall-clock (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docs/results/languages"))
