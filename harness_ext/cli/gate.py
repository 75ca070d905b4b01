"""``drift-eval gate``: release rules on a results folder (exit 0 pass, 1 fail, 2 unusable
input, 3 undetermined: a rule is underpowered and none fails)."""
from __future__ import annotations

NAME = "gate"
HELP = "check release rules on a results folder: exit 0 pass, 1 fail, 2 unusable input, 3 undetermined"


def add_arguments(p) -> None:
    p.add_argument("results", help="results folder (drift-eval sweep --output, or lm_eval --output_path)")
    p.add_argument("--policy", required=True, help="YAML policy: rules of task, metric, setting, on, min/max or "
                   "max_regression")
    p.add_argument("--baseline", help="baseline results folder, or a model name in RESULTS (overrides the policy's)")
    p.add_argument("--junit-xml", help="also write the outcome as JUnit XML to this file")
    p.add_argument("--summary", help="also write a short Markdown summary (verdict, rules, smallest detectable "
                   "regressions) to this file; without it, one is appended to $GITHUB_STEP_SUMMARY when that is set")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.decide.gate import run_gate

    if args.junit_xml:
        # deferred, start-up: drift-eval imports every command's module to read the arguments
        from drift_eval.files import check_output_file

        check_output_file(args.junit_xml, "--junit-xml")
    return run_gate(args.results, args.policy, junit_xml=args.junit_xml, baseline=args.baseline,
                    summary=args.summary)
