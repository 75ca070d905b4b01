"""``drift-eval accessibility``: cramming capacity, n50 against soft-prompt size m, and the bound."""
from __future__ import annotations

import sys

from drift_eval.cli.shared import load_model, model_options, positive, read_text, threads_option, whole
from drift_eval.errors import DriftUsageError

NAME = "accessibility"
HELP = "cramming capacity: n50 against soft-prompt size m, and the bound"


def add_arguments(p) -> None:
    model_options(p)
    p.add_argument("--ms", default="1,2,4", help="soft-vector counts m, comma-separated (default 1,2,4)")
    p.add_argument("--lengths", default="2,4,8,16", help="target lengths n in tokens, comma-separated (default 2,4,8,16)")
    p.add_argument("--strings", type=whole(1), default=4, help="target strings per length (default 4)")
    p.add_argument("--max-steps", type=whole(1), default=100, help="optimiser step cap per batch (default 100)")
    p.add_argument("--patience", type=whole(1), default=30, help="steps without improvement before a row stops (default 30)")
    p.add_argument("--seed", type=whole(0), default=0)
    p.add_argument("--targets", default="text", help="text (passages of --text or the shipped prose) or random tokens")
    p.add_argument("--text", help="UTF-8 text for --targets text (default: the shipped prose)")
    p.add_argument("--eps-ratio", type=positive, default=2048.0, help="precision eps = r / this (default 2048)")
    p.add_argument("--eps", type=positive, help="absolute precision eps instead of r / --eps-ratio")
    p.add_argument("--radius-sequences", type=whole(1), default=8, help="random-token sequences measuring r (default 8)")
    p.add_argument("--radius-length", type=whole(1), default=64, help="their length in tokens (default 64)")
    p.add_argument("--anchor", default="bos", help="bos: the tokenizer's BOS (else EOS) token before the "
                   "soft vectors; none: the vectors come first (default bos)")
    threads_option(p)
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval import inert

    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.measure.cramming import Settings, run as cram

    settings = Settings.from_options(ms=args.ms, lengths=args.lengths, strings=args.strings,
                                     max_steps=args.max_steps, patience=args.patience, seed=args.seed,
                                     targets=args.targets, eps_ratio=args.eps_ratio, eps=args.eps,
                                     radius_sequences=args.radius_sequences, radius_length=args.radius_length,
                                     anchor=args.anchor)
    text = read_text(args.text, "text file") if args.text else None
    if text is not None and settings.targets != "text":
        raise DriftUsageError("--text needs --targets text")
    model, tok = load_model(args)
    print(f"cramming {settings.strings} strings of {settings.lengths} tokens with m = {settings.ms} "
          f"(at most {settings.max_steps} steps)...", file=sys.stderr, flush=True)

    def progress(res):
        print(f"  m={res.m} n={res.length}: {sum(res.success)}/{len(res.success)} reconstructed, "
              f"steps {min(res.steps)}-{max(res.steps)}", file=sys.stderr, flush=True)

    res = cram(model, tok, settings, text=text, progress=progress)
    if args.json:
        print(inert.json_text(res, indent=2))
        return 0
    lengths = [str(n) for n in settings.lengths]
    print("accessibility (share of strings reconstructed exactly)")
    print("m \\ n  " + "".join(f"{n:>7s}" for n in lengths) + "      n50")
    for m, by_n in res["accessibility"].items():
        fit = res["n50"][m]
        n50 = f"{fit['n50']:8.2f}" if fit["n50"] is not None else f"  {fit['status'].replace('_', ' ')}"
        print(f"{m:>6s}  " + "".join(f"{by_n[n]:7.3f}" for n in lengths) + " " + n50)
    line, b = res["line"], res["bound"]
    if line["slope"] is not None:
        print(f"n50 = {line['slope']:.3f} * m + {line['intercept']:.3f}  (R2 {line['r2']:.4f}, {line['points']} points)")
    else:
        print("n50 against m: needs two m whose accessibility crosses 50% over the lengths tried")
    print(f"bound C = d ln(1 + 2r/eps) / ln|V| = {b['C']:.2f}  (d {b['d']}, |V| {b['vocab']}, "
          f"r {b['r']:.4g}, {b['eps_rule']})")
    if res["slope_ratio"] is not None:
        print(f"theory / empirical slope = {res['slope_ratio']:.2f}")
    return 0
