"""Coverage of the 95% interval of the time in the language (``time_in_target``), by
simulation from the distributions that forced runs really produce.

    python benchmarks/time_coverage.py [--reps 1000] [--out benchmarks/results/time_coverage.json]

Each population is one committed run's per-answer values, scored again from its answers by
today's definition (``drift.score_response``; per conversation, ``score_conversation``):
the published language runs (docs/results/languages: both models, 14 languages, single
turn; 7 languages, eight turns) and SmolLM2's drift_french runs. A forced answer is
observed to its end, so the only "censoring" a forced run produces is the answer's own
end, where the value is a share of the answer: the populations carry it as they are, with
their point masses at 0 (never kept) and 1 (kept to the end). For each population and each
sample size n (8 conversations, 36 answers, the bank's 100 conversations and 200 requests),
``--reps`` samples of n are drawn with replacement, so the population mean is the true
mean, and four intervals are checked: the one the report, ``compare`` and the leaderboard
show (``stats.share_sum_interval``, the exact interval of the shares' sum), the percentile
bootstrap that other shares get (Wilson's bound where every value is 0 or every value is
1), Wilson's interval of the sum, and lm-eval's (the mean ± 1.96 standard errors of its
results JSON). Prints, per n, each interval's coverage over the populations (lowest,
median); writes the figures, with the share of populations below 0.95, as JSON.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import numpy as np

from drift_eval.conversation import assistant_replies
from drift_eval.metrics import conversation, drift, stats

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SIZES = {"multiturn": (8, 100), "single": (36, 200)}


def populations() -> dict:
    """``{name: (kind, values)}``: each committed run's per-sample time in the language."""
    out = {}
    patterns = [("languages", os.path.join(ROOT, "docs", "results", "languages", "*_*", "*", "none", "*",
                                           "samples_drift_*_*.jsonl")),
                ("french", os.path.join(ROOT, "docs", "results", "smollm2_drift_french", "*", "*",
                                        "samples_drift_french_*.jsonl"))]
    for _, pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            task = os.path.basename(path).split("_20")[0].removeprefix("samples_")
            kind = "multiturn" if task.endswith("multiturn") else "single" if task.endswith("single") else None
            if kind is None:
                continue
            lang = "fr" if task.startswith("drift_french") else task.split("_")[1]
            values = []
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    answer = json.loads(line)["resps"][0][0]
                    if kind == "single":
                        values.append(drift.score_response(answer, lang=lang)["time_in_french"])
                    else:
                        values.append(conversation.score_conversation(assistant_replies(answer), lang=lang)
                                      ["time_in_french"])
            out[os.path.relpath(path, ROOT)] = (kind, values)
    return out


INTERVALS = ("shown", "bootstrap", "wilson", "lm_eval")


def coverage(values, n: int, reps: int, seed: int = 0) -> dict:
    """The share of ``reps`` samples of ``n`` whose interval holds the population mean, for
    the interval shown (the exact one of the shares' sum), the percentile bootstrap that
    shares get otherwise, Wilson's on the sum, and lm-eval's ±1.96 standard errors."""
    rng = np.random.default_rng(seed)
    pop = np.asarray(values, dtype=float)
    truth = float(pop.mean())
    hits = dict.fromkeys(INTERVALS, 0)

    def holds(lo, hi):
        return lo - 1e-12 <= truth <= hi + 1e-12

    for _ in range(reps):
        x = rng.choice(pop, size=n, replace=True)
        hits["shown"] += holds(*stats.mean_interval(x, share=True, exact=True))
        hits["bootstrap"] += holds(*stats.mean_interval(x, n_resamples=1999, share=True))
        s, z = x.sum(), 1.959964
        p, d = s / n, 1 + z * z / n
        centre, half = (p + z * z / (2 * n)) / d, z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
        hits["wilson"] += holds(centre - half, centre + half)
        se = float(np.std(x, ddof=1)) / np.sqrt(n)
        hits["lm_eval"] += holds(x.mean() - 1.96 * se, x.mean() + 1.96 * se)
    return {k: v / reps for k, v in hits.items()} | {"mean": truth}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=1000)
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "time_coverage.json"))
    a = p.parse_args(argv)
    pops = populations()
    rows = []
    for name, (kind, values) in pops.items():
        if len(set(values)) < 2:
            continue  # a run whose every answer has one value: no sampling variation to cover
        for n in SIZES[kind]:
            rows.append({"population": name, "kind": kind, "n": n, **coverage(values, n, a.reps)})
    summary = {}
    for n in sorted({r["n"] for r in rows}):
        at = [r for r in rows if r["n"] == n]
        summary[n] = {k: {"lowest": min(r[k] for r in at), "median": float(np.median([r[k] for r in at])),
                          "below_0.95": sum(r[k] < 0.95 for r in at) / len(at)} for k in INTERVALS}
        summary[n]["populations"] = len(at)
        print(f"n={n:>3} ({len(at)} populations), coverage lowest / median: " + "; ".join(
            f"{k} {summary[n][k]['lowest']:.3f} / {summary[n][k]['median']:.3f}" for k in INTERVALS))
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"reps": a.reps, "summary": summary, "rows": rows}, fh, indent=1)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
