"""``drift-eval position-bias``: predicted (rollout) vs gradient influence profiles of a model."""
from __future__ import annotations

import sys

from drift_eval.cli.shared import load_model, model_options, read_text, threads_option, whole

NAME = "position-bias"
HELP = "rollout-predicted vs gradient influence profiles"


def add_arguments(p) -> None:
    model_options(p)
    p.add_argument("--text", help="UTF-8 text to cut into sequences (default: the shipped prose)")
    p.add_argument("--length", type=whole(2), default=64, help="tokens per sequence (default 64)")
    p.add_argument("--sequences", type=whole(1), default=8, help="number of sequences (default 8)")
    threads_option(p)
    p.add_argument("--json", action="store_true", help="print profiles and comparisons as JSON")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval import inert

    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.files import prose_text
    from drift_eval.measure.position_bias import fixed_length_sequences, profiles

    text = read_text(args.text, "text file") if args.text else prose_text()
    model, tok = load_model(args)
    ids = fixed_length_sequences(tok, text, args.length, args.sequences)
    print(f"measuring {args.sequences} sequences of {args.length} tokens...", file=sys.stderr, flush=True)
    res = profiles(model, ids)
    if args.json:
        print(inert.json_text(res, indent=2))
        return 0
    print("rollout          W/(n-1)  Spearman   W/(n-1) w/o pos 0  Spearman w/o pos 0")
    for name, c in res["comparison"].items():
        a, b = c["with_position_0"], c["without_position_0"]
        print(f"{name:15s}  {a['wasserstein']:.4f}   {a['spearman']:+.3f}     {b['wasserstein']:.4f}             {b['spearman']:+.3f}")
    print("mixing coefficients per layer:", " ".join(f"{x:.3f}" for x in res["lambdas"]))
    return 0
