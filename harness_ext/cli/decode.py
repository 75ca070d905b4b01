"""``drift-eval decode``: what free generations still carry of the prompt, probe and text
decodability per layer and t, and language switches (``drift_eval.measure.decode``)."""
from __future__ import annotations

import os
import sys

from drift_eval.cli.shared import (bundled_scenes, compensation_option, install_compensation, load_model,
                                   model_dir, model_options, positive, scene_options, threads_option, whole)

NAME = "decode"
HELP = "what free generations still carry of the prompt (probe, text, language)"


def add_arguments(p) -> None:
    model_options(p, random_init=True)
    scene_options(p)
    p.add_argument("--samples", type=whole(1), default=32, help="trajectories per prompt (default 32)")
    p.add_argument("--length", type=whole(1), default=512, help="generated tokens per trajectory (default 512)")
    p.add_argument("--temperature", type=positive, default=1.0, help="sampling temperature (default 1.0)")
    p.add_argument("--seed", type=whole(0), default=0)
    p.add_argument("--folds", type=whole(2), default=5, help="cross-validation folds of the probes (default 5)")
    p.add_argument("--text-window", type=whole(0), default=64,
                   help="generated tokens up to t in the bag of tokens; 0: all of them (default 64)")
    compensation_option(p)
    p.add_argument("--batch-size", type=whole(1), default=32, help="trajectories sampled at once (default 32)")
    threads_option(p)
    p.add_argument("--output", help="JSON file: every finished scene is written at once and a rerun skips them")
    p.add_argument("--json", action="store_true", help="print the summaries as JSON")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval import inert

    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.measure import decode
    from drift_eval.settings import CompensationConfig

    settings = decode.Settings.from_options(samples=args.samples, generation_length=args.length, temperature=args.temperature,
                                            seed=args.seed, folds=args.folds, text_window=args.text_window)
    cfg = CompensationConfig.from_label(args.compensation)  # the span is the whole prompt
    scenes, axes = bundled_scenes(args)
    if args.output:
        # deferred, start-up: drift-eval imports every command's module to read the arguments
        from drift_eval.files import check_output_file

        check_output_file(args.output, "--output")
    model, tok = load_model(args, random_init=args.random_init)
    state = install_compensation(model, tok, cfg)
    label = {"model": os.path.basename(os.path.normpath(model_dir(args))), "random_init": bool(args.random_init)}
    print(f"sampling {len(scenes)} scene(s) x {1 + len(axes)} prompts x {settings.samples} trajectories x "
          f"{settings.generation_length} tokens (temperature {settings.temperature:g}, seed {settings.seed}, {cfg.label()}"
          f"{', random init' if args.random_init else ''})...", file=sys.stderr, flush=True)
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from tqdm import tqdm

    def log(scene_id, summary):
        line = ", ".join(f"{a} {r['hidden_accuracy']:.2f}/{r['text_accuracy']:.2f}" for a, r in summary.items())
        bar.write(f"{scene_id} done; hidden/text accuracy at t={settings.generation_length} so far: {line}",
                  file=sys.stderr)

    with tqdm(total=len(scenes) * (1 + len(axes)) * settings.samples, desc="trajectories", unit="traj",
              file=sys.stderr) as bar:
        res = decode.run(model, tok, scenes, axes, settings, decode.Runtime(state, args.batch_size, bar.update),
                         decode.Record(args.output, label, log))
    if args.json:
        print(inert.json_text(res["summary"], indent=2))
        return 0
    _print_summary(res["summary"])
    return 0


def _print_summary(summary) -> None:
    for axis, r in summary.items():
        cs = r["centres"]
        print(f"\naxis {axis} ({r['scenes']} scene(s), {r['predictions']} trajectories per cell): accuracy "
              f"[95% Wilson interval] telling base from variant")
        print("t        " + "".join(f"{t:>8d}" for t in cs))
        print("text     " + "".join(f"{v:8.3f}" for v in r["text"]["accuracy"]))
        print("median L " + "".join(f"{v:8.3f}" for v in r["hidden_accuracy_by_t"]))
        for layer, row in enumerate(r["hidden"]["accuracy"]):
            print(f"layer {layer:2d} " + "".join(f"{v:8.3f}" for v in row))
        print(f"at t = {cs[-1]}: hidden {r['hidden_accuracy']:.3f} [{r['hidden_accuracy_lower']:.3f}, "
              f"{r['hidden_accuracy_upper']:.3f}] (median layer {r['median_layer']}; best layer {r['best_layer']}: "
              f"{r['hidden_accuracy_best']:.3f}), text {r['text_accuracy']:.3f} [{r['text_accuracy_lower']:.3f}, "
              f"{r['text_accuracy_upper']:.3f}]")
        for who in ("base", "variant"):
            sw = r[f"switches_{who}"]
            to = ", ".join(f"{k} {v}" for k, v in sw["to"].items()) or "none"
            print(f"language switches, {who} prompt ({'/'.join(sw['prompt_languages'])}): {sw['mean']:.1f} of "
                  f"{sw['of']} per scene (range {sw['min']}-{sw['max']}); to: {to}")
