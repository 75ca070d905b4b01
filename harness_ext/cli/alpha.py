"""``drift-eval alpha``: hidden-state prompt-forgetting exponents (alpha, beta) per layer, from
teacher-forced prompt pairs (``drift_eval.measure.alpha``)."""
from __future__ import annotations

import sys

from drift_eval.cli.shared import (bundled_scenes, compensation_option, install_compensation, load_model,
                                   model_options, read_text, scene_options, threads_option, whole)
from drift_eval.errors import DriftUsageError
from drift_eval.taskdata.alpha import AXES
from drift_eval.taskdata.alpha import read_continuations as bundled_continuations

NAME = "alpha"
HELP = "hidden-state prompt-forgetting exponents (alpha, beta) per layer"


def add_arguments(p) -> None:
    model_options(p, random_init=True)
    p.add_argument("--prompt-a", help="file with the base prompt x (with --prompt-b; default: the bundled scenes)")
    p.add_argument("--prompt-b", help="file with the variant prompt x'")
    p.add_argument("--axis", default="detail", help="label for the --prompt-a/--prompt-b pair (default detail)")
    scene_options(p)
    p.add_argument("--continuations", default="bundled",
                   help="bundled, wikitext (needs the network) or a .jsonl/.txt file (default bundled)")
    p.add_argument("--n-continuations", type=whole(2), default=16, help="continuations to use (default 16)")
    p.add_argument("--octaves", type=whole(2, 12), default=7, help="octave windows to fit (default 7: t up to 1024)")
    p.add_argument("--length", type=whole(0), default=0,
                   help="continuation tokens (default: what --octaves needs, 1031 for 7)")
    compensation_option(p)
    p.add_argument("--batch-size", type=whole(1), default=8)
    p.add_argument("--bootstrap-iters", type=whole(0), default=1000, help="bootstrap resamples over scenes (default 1000)")
    threads_option(p)
    p.add_argument("--decompose", action="store_true",
                   help="also split each layer's offset into direct (prompt keys) and relay (continuation keys) "
                        "attention paths, residual and MLP, and rebuild alpha from them (eager attention)")
    p.add_argument("--json", action="store_true", help="print everything (curves included) as JSON")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval import inert

    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.metrics.alpha import length_for
    from drift_eval.settings import CompensationConfig

    cfg = CompensationConfig.from_label(args.compensation)  # α always biases the whole prompt
    if (args.prompt_a is None) != (args.prompt_b is None):
        raise DriftUsageError("give both --prompt-a and --prompt-b, or neither (then the bundled scenes are used)")
    if args.prompt_a:
        scenes = [{"base": read_text(args.prompt_a, "--prompt-a file"),
                   args.axis: read_text(args.prompt_b, "--prompt-b file")}]
    else:
        bundled, axes = bundled_scenes(args)
        scenes = [{"base": s["base"], **{a: s[a] for a in AXES if a in axes}} for s in bundled]
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.measure import alpha
    from drift_eval.measure.continuations import read_continuations

    continuations = read_continuations(args.continuations, args.n_continuations, bundled=bundled_continuations)
    model, tok = load_model(args, random_init=args.random_init)
    state = install_compensation(model, tok, cfg, base="eager" if args.decompose else None)  # the decomposition reads weights
    length = args.length or length_for(args.octaves)
    print(f"teacher-forcing {len(scenes)} prompt pair(s) x {len(continuations)} continuations x {length} tokens "
          f"({cfg.label()}{', random init' if args.random_init else ''})...", file=sys.stderr, flush=True)
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from tqdm import tqdm

    rows = sum(len(continuations) * len(s) for s in scenes)  # base + variants, per continuation
    with tqdm(total=rows, desc="rows", unit="row", file=sys.stderr) as bar:
        res = alpha.measure(model, tok, scenes, continuations, length, alpha.Settings(
            state, args.batch_size, max_octaves=args.octaves, bootstrap_iters=args.bootstrap_iters,
            decompose=args.decompose, progress=bar.update))
    res["random_init"] = bool(args.random_init)
    if args.json:
        print(inert.json_text(res, indent=2))
        return 0
    print(f"windows centred at t = {', '.join(f'{w[2]:g}' for w in res['windows'])}; compensation {res['compensation']}")
    for axis, r in res["axes"].items():
        print(f"\naxis {axis} ({r['scenes']} pair(s)): alpha = {r['alpha_median']:.3f} "
              f"(median over layers; bootstrap se {r['alpha_median_se']:.3f}), beta = {r['beta_median']:.3f}")
        print("layer   alpha   ±fit-se   beta    ±fit-se")
        for i, (a, ase, b, bse) in enumerate(zip(r["alpha"], r["alpha_fit_se"], r["beta"], r["beta_fit_se"])):
            print(f"{i:5d}  {_cell(a)}   {_cell(ase)}   {_cell(b)}   {_cell(bse)}")
        if "decomposition" in r:
            _print_decomposition(r["decomposition"])
    return 0


def _cell(v) -> str:
    return "   nan" if v is None else f"{v:6.3f}"


def _print_decomposition(dec) -> None:
    f = _cell
    print(f"\ndirect / relay decomposition (max |predicted - measured| = {f(dec['max_abs_difference']).strip()}):")
    print("layer  direct   relay   resid    mlp    predicted  measured  diff   ±se    relay share")
    a = dec["alpha"]
    for i in range(len(dec["alpha_measured"])):
        print(f"{i:5d}  {f(a['direct'][i])}  {f(a['relay'][i])}  {f(a['residual'][i])}  {f(a['mlp'][i])}  "
              f"{f(dec['alpha_predicted'][i])}     {f(dec['alpha_measured'][i])}    {f(dec['difference'][i])} "
              f"{f(dec['difference_se'][i])}  {f(dec['relay_share'][i])}")
