"""``drift-eval compare``: a candidate model against a baseline, paired tests, intervals and the
smallest detectable effects. The comparisons shown are one family: each row gives its raw p
and its Benjamini–Hochberg adjusted p over all the rows, and is called significant only when
the adjusted p is below 0.05 (``drift_eval.decide.compare.adjust_comparisons``)."""
from __future__ import annotations

import math
import os

from drift_eval.errors import DriftUsageError

NAME = "compare"
HELP = "candidate against baseline: paired tests, intervals, detectable effects"


def add_arguments(p) -> None:
    p.add_argument("candidate", help="candidate results folder (or, with --in, a model name)")
    p.add_argument("baseline", help="baseline results folder (or, with --in, a model name)")
    p.add_argument("--in", dest="within", metavar="DIR", help="one results folder holding both models")
    p.add_argument("--format", choices=("text", "json"), default="text")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval import inert

    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.decide.compare import adjust_comparisons, compare_models
    from drift_eval.decide.gate import resolve_baseline
    from drift_eval.decide.results import load_output
    from drift_eval.metrics.paired import ADJUSTMENT

    if args.within:
        output = load_output(args.within)
        base, base_model, cand_model = resolve_baseline(output, args.baseline, args.candidate)
    else:
        for path in (args.candidate, args.baseline):
            if not os.path.isdir(path):
                raise DriftUsageError(f"results folder not found: {path} (to compare two models of one folder, "
                                      f"pass it with --in)")
        output, base = load_output(args.candidate), load_output(args.baseline)
        cand_model, base_model = output.model(None), base.model(None)
    rows = compare_models(output, base, cand_model, base_model)
    if not rows:
        raise DriftUsageError(f"{cand_model} and {base_model} share no setting, task and metric to compare")
    rows = adjust_comparisons(rows)
    if args.format == "json":
        print(inert.json_text([{"setting": c.setting, "task": c.task, "metric": c.metric, "candidate": c.candidate,
                           "baseline": c.baseline, "candidate_value": c.candidate_value,
                           "baseline_value": c.baseline_value, "difference": c.difference.difference,
                           "lower": c.difference.lower, "upper": c.difference.upper, "p_value": c.difference.p_value,
                           "p_adjusted": c.difference.p_adjusted, "family": c.difference.family,
                           "adjustment": ADJUSTMENT, "test": c.difference.test, "n": c.n,
                           "verdict": c.difference.verdict,
                           "mde": c.mde if math.isfinite(c.mde) else None, "higher_is_better": c.higher_is_better,
                           "conditional_on": c.conditional_on}
                          for c in rows], indent=2))
        return 0
    print(f"candidate {cand_model} against baseline {base_model} (difference = candidate − baseline; "
          f"MDE: the smallest difference detectable at 80% power, 'none' where no difference is detectable "
          f"at this n; p adj: {ADJUSTMENT} over the {len(rows)} "
          f"comparisons shown, significant when below 0.05)")
    print(f"{'setting':<12} {'task/metric':<42} {'cand':>7} {'base':>7} {'diff':>8} {'95% CI':>19} {'p':>8} "
          f"{'p adj':>8} {'n':>4} {'MDE':>6}  reading")
    for c in rows:
        d = c.difference
        ci = "—" if d.lower != d.lower else f"[{d.lower:+.3f}, {d.upper:+.3f}]"
        mde = "—" if math.isnan(c.mde) else "none" if math.isinf(c.mde) else f"{c.mde:.3f}"
        print(f"{c.setting:<12} {c.task + '/' + c.metric:<42} {c.candidate_value:7.3f} {c.baseline_value:7.3f} "
              f"{d.difference:+8.3f} {ci:>19} {d.p_value:8.4f} {d.p_adjusted:8.4f} {d.n:4d} {mde:>6}  "
              f"{d.verdict} ({d.test})" + (f"; conditional, on every document: {c.conditional_on}"
                                           if c.conditional_on else ""))
    return 0
