"""Operating characteristics of a ``max_regression`` rule (the default ``on: upper``) on a
paired 0/1 metric: how often the gate passes a candidate that regressed by the tolerance or
more (a false pass), how often it passes one that did not regress, and how often it says
the sample is too small ("underpowered"), by the number of documents, the tolerance and the
background disagreement between the two runs.

Each simulated run pairs ``n`` documents: the two runs disagree on a share ``background`` of
them as often one way as the other, and the candidate loses a further share ``regression``
(baseline right, candidate wrong). From the run's 0/1 values the gate's own code makes the
decision: ``drift_eval.metrics.paired.paired_difference`` and ``power.minimum_detectable_effect``
into a ``drift_eval.decide.compare.Comparison``, judged by ``drift_eval.decide.compare.judge``
(``underpowered: fail``). Both statistics see 0/1 pairs only through ``n`` and the two
discordant counts (``tests/maths/test_paired_statistics.py``), so each distinct count is computed
once, from the first run that has it, and reused.

    python benchmarks/gate_operating.py                 # 4000 runs per cell
    python benchmarks/gate_operating.py --runs 200      # a quicker look

Seeded (one seed per cell, so a cell's figures do not depend on the others), resumable
(finished cells are kept in the results file and skipped), figures in
``benchmarks/results/gate_operating.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from drift_eval.decide.compare import Comparison, judge
from drift_eval.metrics import paired, power, stats

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "gate_operating.json")
SIZES = (36, 68, 100, 200, 400, 800)
TOLERANCES = (0.05, 0.10, 0.15, 0.20)
BACKGROUNDS = (0.0, 0.1, 0.2)
BEYOND = 1.5          # a regression "beyond" the tolerance: 1.5 times it
BASE_RATE = 0.8       # the baseline's share of 1s (the decision does not depend on it)
NOMINAL = 0.025       # a 95% two-sided bound read on one side


class Gate:
    """The gate's decision on simulated paired runs, with the statistics of each distinct
    (n, up, down) computed once by the gate's own functions."""

    def __init__(self):
        self.differences, self.mdes = {}, {}

    def comparison(self, x, y):
        n = int(x.size)
        up, down = int(np.sum((x == 1) & (y == 0))), int(np.sum((x == 0) & (y == 1)))
        key = (n, up, down)
        if key not in self.differences:
            self.differences[key] = paired.paired_difference(x, y)
        if (n, up + down) not in self.mdes:
            self.mdes[(n, up + down)] = power.minimum_detectable_effect(x, y)
        return Comparison("drift_french", "drift_score", "none", "candidate", "baseline", float(x.mean()),
                          float(y.mean()), self.differences[key], self.mdes[(n, up + down)], True)

    def statuses(self, runs, tolerance):
        out = {"pass": 0, "fail": 0, "underpowered": 0}
        for x, y in runs:
            out[judge(self.comparison(x, y), tolerance, "upper", "fail").status] += 1
        return out


def simulate(rng, n, background, regression, runs):
    """``runs`` paired 0/1 runs of ``n`` documents: (candidate, baseline) arrays."""
    down, up = background / 2 + regression, background / 2
    both = BASE_RATE - down
    cells = rng.multinomial(n, [both, up, down, 1 - both - up - down], size=runs)
    kinds = np.array([(1, 1), (1, 0), (0, 1), (0, 0)])  # (candidate, baseline)
    out = []
    for counts in cells:
        pairs = np.repeat(kinds, counts, axis=0)
        out.append((pairs[:, 0].astype(float), pairs[:, 1].astype(float)))
    return out


def documents_needed(tolerance, background, top=5000):
    """The fewest documents whose MDE at this background disagreement is within the
    tolerance (so that a candidate without regression is not underpowered), by bisection."""
    if power.mde_binary(top, background) > tolerance:
        return None
    lo, hi = 1, top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power.mde_binary(mid, background) <= tolerance else (mid, hi)
    return hi


def wilson_upper(k, n):
    return stats.wilson_interval(k, n)[1]


def cell(gate, n, background, runs, seed):
    """Every tolerance's rates for one (n, background): no regression, at the tolerance, beyond."""
    rng = np.random.default_rng(seed)
    none = simulate(rng, n, background, 0.0, runs)
    rows = []
    for tol in TOLERANCES:
        at = simulate(rng, n, background, tol, runs)
        beyond = simulate(rng, n, background, BEYOND * tol, runs)
        s0, s1, s2 = (gate.statuses(r, tol) for r in (none, at, beyond))
        rows.append({"n": n, "background": background, "tolerance": tol, "runs": runs,
                     "no_regression": s0, "at_tolerance": s1, "beyond": s2,
                     "pass_rate_no_regression": s0["pass"] / runs,
                     "underpowered_no_regression": s0["underpowered"] / runs,
                     "false_pass_at_tolerance": s1["pass"] / runs,
                     "false_pass_at_tolerance_upper95": wilson_upper(s1["pass"], runs),
                     "false_pass_beyond": s2["pass"] / runs,
                     "underpowered_at_tolerance": s1["underpowered"] / runs})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=4000, help="simulated paired runs per cell")
    ap.add_argument("--out", default=RESULTS)
    args = ap.parse_args()
    command = "python benchmarks/gate_operating.py" + ("" if args.runs == 4000 else f" --runs {args.runs}")
    print("$", command, flush=True)
    done = {}
    if os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as fh:
            old = json.load(fh)
        if old.get("runs") == args.runs:
            done = {(r["n"], r["background"]): r for r in old["cells"]}
    gate, cells, seconds = Gate(), [], 0.0
    t0 = time.perf_counter()
    needed = [{"tolerance": t, "background": b, "documents": documents_needed(t, b)}
              for t in TOLERANCES for b in BACKGROUNDS]
    seconds += time.perf_counter() - t0
    for i, n in enumerate(SIZES):
        for j, bg in enumerate(BACKGROUNDS):
            if (n, bg) in done:
                cells.append(done[(n, bg)])
                seconds += done[(n, bg)]["seconds"]
                continue
            t0 = time.perf_counter()
            rows = cell(gate, n, bg, args.runs, seed=29_000 + 10 * i + j)
            took = time.perf_counter() - t0
            seconds += took
            cells.append({"n": n, "background": bg, "seconds": round(took, 1), "rows": rows})
            for r in rows:
                print(f"n={n:4d} background={bg:.1f} tolerance={r['tolerance']:.2f}: pass without regression "
                      f"{r['pass_rate_no_regression']:.3f}, underpowered {r['underpowered_no_regression']:.3f}; "
                      f"false pass at the tolerance {r['false_pass_at_tolerance']:.3f}, beyond "
                      f"{r['false_pass_beyond']:.3f}", flush=True)
            write(args.out, args.runs, command, cells, seconds, needed)
    rows = [r for c in cells for r in c["rows"]]
    worst = max(rows, key=lambda r: r["false_pass_at_tolerance"])
    print(f"worst false pass at the tolerance: {worst['false_pass_at_tolerance']:.3f} (n={worst['n']}, "
          f"background {worst['background']}, tolerance {worst['tolerance']}); {seconds:.0f} s in all")
    write(args.out, args.runs, command, cells, seconds, needed)


def write(path, runs, command, cells, seconds, needed):
    doc = {"command": command, "runs": runs, "rule": "max_regression, on: upper, underpowered: fail",
           "model": {"background": "two-way: each way with probability background/2",
                     "regression": "one way (baseline 1, candidate 0) with probability regression",
                     "beyond": f"{BEYOND} x tolerance", "baseline_rate": BASE_RATE, "nominal_false_pass": NOMINAL},
           "seconds": round(seconds, 1), "documents_needed": needed,
           "cells": sorted(cells, key=lambda c: (c["n"], c["background"]))}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
