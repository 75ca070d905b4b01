"""``drift-eval``: the project's command line.

    drift-eval demo          run drift_french_single on the bundled SmolLM2-135M-Instruct
                             through the real ``lm_eval`` command, without and with
                             compensation, print lm-eval's results tables, and write the
                             HTML report comparing them (its path is printed last)
    drift-eval model-path    print the safetensors folder of the bundled demo model
                             (converted from its GGUF file on first use)
    drift-eval position-bias predicted (rollout) vs gradient influence profiles of a model
    drift-eval sweep         lm-eval tasks under several compensation settings, model loaded once
    drift-eval report        comparison report (HTML / Markdown / JSON / CSV) of a results folder
    drift-eval gate          release rules on a results folder (exit 0 pass, 1 fail, 2 unusable)
    drift-eval compare       a candidate model against a baseline: paired tests, detectable effects
    drift-eval leaderboard   one ranked row per (model, setting) from lm-eval results
    drift-eval alpha         hidden-state prompt-forgetting exponents per layer
    drift-eval decode        what free generations still carry of the prompt: probe and
                             text decodability per layer and t, language switches
    drift-eval accessibility cramming capacity: n50 against soft-prompt size m, and the bound
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from drift_eval.errors import USAGE_EXIT, DriftUsageError


class _Parser(argparse.ArgumentParser):
    """argparse with the project's error contract: one line, exit status 2."""

    def error(self, message):
        raise DriftUsageError(f"{message} (see '{self.prog} --help')")


def _whole(minimum: int, maximum: int | None = None):
    """An argparse type: a whole number in ``[minimum, maximum]``."""
    def parse(text):
        from drift_eval.settings import int_option

        try:
            return int_option("", text, minimum, maximum)
        except DriftUsageError as exc:
            raise argparse.ArgumentTypeError(exc.message.strip()) from None

    parse.__name__ = "whole number"
    return parse


def _positive(text):
    """An argparse type: a finite number > 0."""
    import math

    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return v


def _model_options(p, random_init: bool = False) -> None:
    """The options naming the model a measurement loads (one place for every subcommand)."""
    p.add_argument("--model", help="model folder (default: the bundled SmolLM2-135M-Instruct)")
    p.add_argument("--gguf-file", help="GGUF file inside --model")
    if random_init:
        p.add_argument("--random-init", action="store_true", help="measure the untrained twin (same config, seed 0)")


def _scene_options(p) -> None:
    """The bundled scene set's options (alpha, decode)."""
    p.add_argument("--scenes", type=_whole(1), default=20, help="bundled scenes to use (default 20)")
    p.add_argument("--axes", default="detail,paraphrase,genre,translation", help="bundled variant axes (default: all four)")


def _demo(args) -> int:
    import datetime

    from drift_eval.files import write_text_atomic
    from drift_eval.plugin.local_models import smollm2_dir
    from drift_eval.settings import parse_settings

    configs = parse_settings(args.settings)  # every entry is checked before the first run
    if len(configs) < 2:
        raise DriftUsageError("--settings needs two settings or more: the demo compares them")
    if args.output:
        output = os.path.abspath(args.output)
        if os.path.isdir(output) and os.listdir(output):
            raise DriftUsageError(f"{output} is not empty: give a new --output folder")
    else:
        output = os.path.abspath(os.path.join("drift-demo", datetime.datetime.now().strftime("%Y%m%d-%H%M%S")))
    report = os.path.join(output, "report.html")
    write_text_atomic(report, "")  # the folder is writable: found out before the first run
    os.remove(report)
    model_dir = smollm2_dir()
    status = 0
    for cfg in configs:
        model_args = f"pretrained={model_dir},compensation={cfg.mode},strength={cfg.strength:g},span={cfg.span}"
        cmd = [
            sys.executable, "-m", "lm_eval", "--model", "hf-drift", "--model_args", model_args,
            "--tasks", args.task, "--apply_chat_template", "--limit", str(args.limit),
            "--gen_kwargs", f"max_gen_toks={args.max_gen_toks}", "--batch_size", str(args.batch_size),
            "--device", "cpu", "--output_path", os.path.join(output, cfg.folder()), "--log_samples",
        ]
        print(f"\n== compensation {cfg.label()} ==\n$ lm_eval {shlex.join(cmd[3:])}", flush=True)
        rc = subprocess.call(cmd)
        status = status or (1 if rc else 0)  # exit 2 is kept for unusable input to drift-eval itself
    if status:
        print(f"drift-eval: a run failed; its output is in {output}", file=sys.stderr)
        return status
    from drift_eval.reports.render import write_report

    print("\nreport comparing the settings (verdict, survival curves, audit strips):")
    print(write_report(output, report), flush=True)
    return 0


def _model_path(args) -> int:
    from drift_eval.plugin.local_models import smollm2_dir

    print(smollm2_dir())
    return 0


def _model_dir(args) -> str:
    """``--model`` (with ``--gguf-file``), or the bundled SmolLM2-135M-Instruct."""
    from drift_eval.plugin.local_models import cached_from_gguf, smollm2_dir

    if args.model is None:
        return smollm2_dir()
    if args.gguf_file:
        return cached_from_gguf(args.model, args.gguf_file)
    return args.model


def _load_model(args, random_init: bool = False):
    """(model, tokenizer) in float32 for the measuring commands; ``random_init`` builds the
    untrained twin (same config, freshly initialised weights, seed 0)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from drift_eval.plugin.local_models import untrained_twin

    if getattr(args, "threads", 0):
        torch.set_num_threads(args.threads)
    model_dir = _model_dir(args)
    tok = AutoTokenizer.from_pretrained(model_dir)
    if random_init:
        model = untrained_twin(model_dir)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return model.eval(), tok


def _read_text(path: str, what: str) -> str:
    from drift_eval.files import read_text

    return read_text(path, what).strip()


def _position_bias(args) -> int:
    import json

    from drift_eval.files import prose_text
    from drift_eval.measure.position_bias import fixed_length_sequences, profiles

    text = _read_text(args.text, "text file") if args.text else prose_text()
    model, tok = _load_model(args)
    ids = fixed_length_sequences(tok, text, args.length, args.sequences)
    print(f"measuring {args.sequences} sequences of {args.length} tokens...", file=sys.stderr, flush=True)
    res = profiles(model, ids)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print("rollout          W/(n-1)  Spearman   W/(n-1) w/o pos 0  Spearman w/o pos 0")
    for name, c in res["comparison"].items():
        a, b = c["with_position_0"], c["without_position_0"]
        print(f"{name:15s}  {a['wasserstein']:.4f}   {a['spearman']:+.3f}     {b['wasserstein']:.4f}             {b['spearman']:+.3f}")
    print("mixing coefficients per layer:", " ".join(f"{x:.3f}" for x in res["lambdas"]))
    return 0


def _alpha(args) -> int:
    import json

    from drift_eval.compensation import bias as comp
    from drift_eval.measure import alpha
    from drift_eval.metrics.alpha import length_for
    from drift_eval.settings import CompensationConfig

    cfg = CompensationConfig.from_label(args.compensation)  # α always biases the whole prompt
    if (args.prompt_a is None) != (args.prompt_b is None):
        raise DriftUsageError("give both --prompt-a and --prompt-b, or neither (then the bundled scenes are used)")
    if args.prompt_a:
        scenes = [{"base": _read_text(args.prompt_a, "--prompt-a file"),
                   args.axis: _read_text(args.prompt_b, "--prompt-b file")}]
    else:
        from drift_eval.tasks.drift_alpha.data import read_scenes

        all_scenes = read_scenes()
        if not 1 <= args.scenes <= len(all_scenes):
            raise DriftUsageError(f"--scenes must be between 1 and {len(all_scenes)}")
        axes = [a.strip() for a in args.axes.split(",") if a.strip()]
        bad = [a for a in axes if a not in alpha.AXES]
        if bad or not axes:
            raise DriftUsageError(f"--axes takes names from {', '.join(alpha.AXES)}")
        scenes = [{"base": s["base"], **{a: s[a] for a in axes}} for s in all_scenes[:args.scenes]]
    continuations = alpha.read_continuations(args.continuations, args.n_continuations)
    model, tok = _load_model(args, random_init=args.random_init)
    state = comp.install(model, cfg, base="eager" if args.decompose else None)  # the decomposition reads weights
    if cfg.mode == "head":
        from drift_eval.measure.calibration import head_gammas

        state.head_gammas = head_gammas(model, tok)
    length = args.length or length_for(args.octaves)
    print(f"teacher-forcing {len(scenes)} prompt pair(s) x {len(continuations)} continuations x {length} tokens "
          f"({cfg.label()}{', random init' if args.random_init else ''})...", file=sys.stderr, flush=True)
    from tqdm import tqdm

    rows = sum(len(continuations) * len(s) for s in scenes)  # base + variants, per continuation
    with tqdm(total=rows, desc="rows", unit="row", file=sys.stderr) as bar:
        res = alpha.measure(model, tok, scenes, continuations, length, state, args.batch_size,
                            max_octaves=args.octaves, bootstrap_iters=args.bootstrap_iters, progress=bar.update,
                            decompose=args.decompose)
    res["random_init"] = bool(args.random_init)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"windows centred at t = {', '.join(f'{w[2]:g}' for w in res['windows'])}; compensation {res['compensation']}")
    for axis, r in res["axes"].items():
        print(f"\naxis {axis} ({r['scenes']} pair(s)): alpha = {r['alpha_median']:.3f} "
              f"(median over layers; bootstrap se {r['alpha_median_se']:.3f}), beta = {r['beta_median']:.3f}")
        print("layer   alpha   ±fit-se   beta    ±fit-se")
        for i, (a, ase, b, bse) in enumerate(zip(r["alpha"], r["alpha_fit_se"], r["beta"], r["beta_fit_se"])):
            f = lambda v: "   nan" if v is None else f"{v:6.3f}"
            print(f"{i:5d}  {f(a)}   {f(ase)}   {f(b)}   {f(bse)}")
        if "decomposition" in r:
            _print_decomposition(r["decomposition"])
    return 0


def _print_decomposition(dec) -> None:
    f = lambda v: "   nan" if v is None else f"{v:6.3f}"
    print(f"\ndirect / relay decomposition (max |predicted - measured| = {f(dec['max_abs_difference']).strip()}):")
    print("layer  direct   relay   resid    mlp    predicted  measured  diff   ±se    relay share")
    a = dec["alpha"]
    for i in range(len(dec["alpha_measured"])):
        print(f"{i:5d}  {f(a['direct'][i])}  {f(a['relay'][i])}  {f(a['residual'][i])}  {f(a['mlp'][i])}  "
              f"{f(dec['alpha_predicted'][i])}     {f(dec['alpha_measured'][i])}    {f(dec['difference'][i])} "
              f"{f(dec['difference_se'][i])}  {f(dec['relay_share'][i])}")


def _decode(args) -> int:
    import json

    from drift_eval.compensation import bias as comp
    from drift_eval.measure import decode
    from drift_eval.settings import CompensationConfig
    from drift_eval.tasks.drift_alpha.data import AXES, read_scenes

    settings = decode.Settings.from_options(samples=args.samples, generation_length=args.length, temperature=args.temperature,
                                            seed=args.seed, folds=args.folds, text_window=args.text_window)
    cfg = CompensationConfig.from_label(args.compensation)  # the span is the whole prompt
    all_scenes = read_scenes()
    if not 1 <= args.scenes <= len(all_scenes):
        raise DriftUsageError(f"--scenes must be between 1 and {len(all_scenes)}")
    axes = [a.strip() for a in args.axes.split(",") if a.strip()]
    if not axes or any(a not in AXES for a in axes):
        raise DriftUsageError(f"--axes takes names from {', '.join(AXES)}")
    if args.output and os.path.isdir(args.output):
        raise DriftUsageError(f"--output {args.output} is a folder: give a .json file")
    model, tok = _load_model(args, random_init=args.random_init)
    state = comp.install(model, cfg)
    if cfg.mode == "head":
        from drift_eval.measure.calibration import head_gammas

        state.head_gammas = head_gammas(model, tok)
    scenes = all_scenes[:args.scenes]
    label = {"model": os.path.basename(os.path.normpath(_model_dir(args))), "random_init": bool(args.random_init)}
    print(f"sampling {len(scenes)} scene(s) x {1 + len(axes)} prompts x {settings.samples} trajectories x "
          f"{settings.generation_length} tokens (temperature {settings.temperature:g}, seed {settings.seed}, {cfg.label()}"
          f"{', random init' if args.random_init else ''})...", file=sys.stderr, flush=True)
    from tqdm import tqdm

    def log(scene_id, summary):
        line = ", ".join(f"{a} {r['hidden_accuracy']:.2f}/{r['text_accuracy']:.2f}" for a, r in summary.items())
        bar.write(f"{scene_id} done; hidden/text accuracy at t={settings.generation_length} so far: {line}",
                  file=sys.stderr)

    with tqdm(total=len(scenes) * (1 + len(axes)) * settings.samples, desc="trajectories", unit="traj",
              file=sys.stderr) as bar:
        res = decode.run(model, tok, scenes, axes, settings, state, args.batch_size, args.output, label,
                         progress=bar.update, log=log)
    if args.json:
        print(json.dumps(res["summary"], indent=2))
        return 0
    _print_decode(res["summary"])
    return 0


def _print_decode(summary) -> None:
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


def _sweep(args) -> int:
    from drift_eval.plugin.sweep import run_sweep

    run_sweep(args.output, args.settings, args.tasks, model_args=args.model_args, limit=args.limit,
              gen_kwargs=args.gen_kwargs, batch_size=args.batch_size, device=args.device, span=args.span,
              apply_chat_template=not args.no_chat_template, metadata=args.metadata, use_cache=not args.no_cache,
              log=lambda line: print(line, flush=True))
    return 0


def _report(args) -> int:
    from drift_eval.reports.render import write_report

    out = args.output or os.path.join(args.results[0], "report.html")
    print(write_report(args.results, out, fmt=args.format, allow_partial=args.partial, policy=args.policy,
                       baseline=args.baseline))
    return 0


def _gate(args) -> int:
    from drift_eval.decide.gate import run_gate

    return run_gate(args.results, args.policy, junit_xml=args.junit_xml, baseline=args.baseline)


def _compare(args) -> int:
    import json

    from drift_eval.decide.compare import compare_models
    from drift_eval.decide.gate import resolve_baseline
    from drift_eval.decide.results import load_output

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
    if args.format == "json":
        print(json.dumps([{"setting": c.setting, "task": c.task, "metric": c.metric, "candidate": c.candidate,
                           "baseline": c.baseline, "candidate_value": c.candidate_value,
                           "baseline_value": c.baseline_value, "difference": c.difference.difference,
                           "lower": c.difference.lower, "upper": c.difference.upper, "p_value": c.difference.p_value,
                           "test": c.difference.test, "n": c.n, "verdict": c.difference.verdict,
                           "mde": None if c.mde == float("inf") else c.mde, "higher_is_better": c.higher_is_better}
                          for c in rows], indent=2))
        return 0
    print(f"candidate {cand_model} against baseline {base_model} (difference = candidate − baseline; "
          f"MDE: the smallest difference detectable at 80% power)")
    print(f"{'setting':<12} {'task/metric':<42} {'cand':>7} {'base':>7} {'diff':>8} {'95% CI':>19} {'p':>8} "
          f"{'n':>4} {'MDE':>6}  reading")
    for c in rows:
        d = c.difference
        ci = "—" if d.lower != d.lower else f"[{d.lower:+.3f}, {d.upper:+.3f}]"
        mde = "∞" if c.mde == float("inf") else f"{c.mde:.3f}"
        print(f"{c.setting:<12} {c.task + '/' + c.metric:<42} {c.candidate_value:7.3f} {c.baseline_value:7.3f} "
              f"{d.difference:+8.3f} {ci:>19} {d.p_value:8.4f} {d.n:4d} {mde:>6}  {d.verdict} ({d.test})")
    return 0


def _leaderboard(args) -> int:
    from drift_eval.reports.leaderboard import write_leaderboard

    text = write_leaderboard(args.results, args.output, args.format)
    print(args.output if args.output else text)
    return 0


def _accessibility(args) -> int:
    import json

    from drift_eval.measure.cramming import Settings, run

    settings = Settings.from_options(ms=args.ms, lengths=args.lengths, strings=args.strings,
                                     max_steps=args.max_steps, patience=args.patience, seed=args.seed,
                                     targets=args.targets, eps_ratio=args.eps_ratio, eps=args.eps,
                                     radius_sequences=args.radius_sequences, radius_length=args.radius_length,
                                     anchor=args.anchor)
    text = _read_text(args.text, "text file") if args.text else None
    if text is not None and settings.targets != "text":
        raise DriftUsageError("--text needs --targets text")
    model, tok = _load_model(args)
    print(f"cramming {settings.strings} strings of {settings.lengths} tokens with m = {settings.ms} "
          f"(at most {settings.max_steps} steps)...", file=sys.stderr, flush=True)

    def progress(res):
        print(f"  m={res.m} n={res.length}: {sum(res.success)}/{len(res.success)} reconstructed, "
              f"steps {min(res.steps)}-{max(res.steps)}", file=sys.stderr, flush=True)

    res = run(model, tok, settings, text=text, progress=progress)
    if args.json:
        print(json.dumps(res, indent=2))
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


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="drift-eval", description="Instruction-drift evaluation for lm-eval.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run drift_french_single on the bundled SmolLM2-135M-Instruct")
    d.add_argument("--settings", default="none,log:1", help="comma-separated compensation settings (default: none,log:1)")
    d.add_argument("--task", default="drift_french_single")
    d.add_argument("--limit", type=_whole(1), default=8, help="requests per setting (default 8)")
    d.add_argument("--max-gen-toks", type=_whole(1), default=256, help="forced answer length in tokens (default 256)")
    d.add_argument("--batch-size", type=_whole(1), default=8)
    d.add_argument("--output", help="folder for lm-eval's results and samples and the report (default: "
                   "drift-demo/<date-time>)")
    d.set_defaults(func=_demo)
    m = sub.add_parser("model-path", help="print the bundled demo model's safetensors folder")
    m.set_defaults(func=_model_path)
    pb = sub.add_parser("position-bias", help="rollout-predicted vs gradient influence profiles")
    _model_options(pb)
    pb.add_argument("--text", help="UTF-8 text to cut into sequences (default: the shipped prose)")
    pb.add_argument("--length", type=_whole(2), default=64, help="tokens per sequence (default 64)")
    pb.add_argument("--sequences", type=_whole(1), default=8, help="number of sequences (default 8)")
    pb.add_argument("--threads", type=_whole(0), default=0, help="torch threads (default: torch's choice)")
    pb.add_argument("--json", action="store_true", help="print profiles and comparisons as JSON")
    pb.set_defaults(func=_position_bias)
    ac = sub.add_parser("accessibility", help="cramming capacity: n50 against soft-prompt size m, and the bound")
    _model_options(ac)
    ac.add_argument("--ms", default="1,2,4", help="soft-vector counts m, comma-separated (default 1,2,4)")
    ac.add_argument("--lengths", default="2,4,8,16", help="target lengths n in tokens, comma-separated (default 2,4,8,16)")
    ac.add_argument("--strings", type=_whole(1), default=4, help="target strings per length (default 4)")
    ac.add_argument("--max-steps", type=_whole(1), default=100, help="optimiser step cap per batch (default 100)")
    ac.add_argument("--patience", type=_whole(1), default=30, help="steps without improvement before a row stops (default 30)")
    ac.add_argument("--seed", type=_whole(0), default=0)
    ac.add_argument("--targets", default="text", help="text (passages of --text or the shipped prose) or random tokens")
    ac.add_argument("--text", help="UTF-8 text for --targets text (default: the shipped prose)")
    ac.add_argument("--eps-ratio", type=_positive, default=2048.0, help="precision eps = r / this (default 2048)")
    ac.add_argument("--eps", type=_positive, help="absolute precision eps instead of r / --eps-ratio")
    ac.add_argument("--radius-sequences", type=_whole(1), default=8, help="random-token sequences measuring r (default 8)")
    ac.add_argument("--radius-length", type=_whole(1), default=64, help="their length in tokens (default 64)")
    ac.add_argument("--anchor", default="bos", help="bos: the tokenizer's BOS (else EOS) token before the "
                    "soft vectors; none: the vectors come first (default bos)")
    ac.add_argument("--threads", type=_whole(0), default=0, help="torch threads (default: torch's choice)")
    ac.add_argument("--json", action="store_true", help="print the whole result as JSON")
    ac.set_defaults(func=_accessibility)
    sw = sub.add_parser("sweep", help="run lm-eval tasks under several compensation settings (model loaded once)")
    sw.add_argument("--output", required=True, help="output folder: one subfolder of lm-eval results per setting")
    sw.add_argument("--settings", default="none,log:0.1,log:0.25,const:0.25",
                    help="comma-separated settings MODE[:STRENGTH] (default: none,log:0.1,log:0.25,const:0.25)")
    sw.add_argument("--tasks", default="drift_french", help="lm-eval tasks or groups, comma-separated (default drift_french)")
    sw.add_argument("--model-args", default="", help="hf-drift model_args without compensation, e.g. "
                    "pretrained=DIR,dtype=float32 (default: the bundled SmolLM2-135M-Instruct)")
    sw.add_argument("--span", default="system", help="compensation span for every setting: system or prompt")
    sw.add_argument("--limit", type=_positive, default=None, help="lm-eval --limit: samples per task")
    sw.add_argument("--gen-kwargs", default="", help="lm-eval --gen_kwargs, e.g. max_gen_toks=256")
    sw.add_argument("--batch-size", type=_whole(1), default=8, help="lm-eval batch size (default 8)")
    sw.add_argument("--device", default="cpu", help="torch device (default cpu)")
    sw.add_argument("--metadata", default="", help="lm-eval --metadata JSON, e.g. '{\"num_conversations\": 4}'")
    sw.add_argument("--no-chat-template", action="store_true", help="do not pass --apply_chat_template (base models)")
    sw.add_argument("--no-cache", action="store_true", help="do not cache answers (an interrupted setting restarts)")
    sw.set_defaults(func=_sweep)
    rp = sub.add_parser("report", help="render the comparison of a results folder (HTML, Markdown, JSON, CSV)")
    rp.add_argument("results", nargs="+", help="results folders (drift-eval sweep --output, or lm_eval --output_path)")
    rp.add_argument("-o", "--output", help="report file, .html, .md, .json or .csv (default: report.html in the "
                    "first folder)")
    rp.add_argument("--format", choices=("html", "md", "json", "csv"), help="override the format implied by the file name")
    rp.add_argument("--partial", action="store_true", help="render an unfinished sweep with the settings it has")
    rp.add_argument("--policy", help="gate policy: its outcome opens the report")
    rp.add_argument("--baseline", help="baseline results folder, or a model name in RESULTS, to compare against")
    rp.set_defaults(func=_report)
    gt = sub.add_parser("gate", help="check release rules on a results folder: exit 0 pass, 1 fail, 2 unusable input")
    gt.add_argument("results", help="results folder (drift-eval sweep --output, or lm_eval --output_path)")
    gt.add_argument("--policy", required=True, help="YAML policy: rules of task, metric, setting, on, min/max or "
                    "max_regression")
    gt.add_argument("--baseline", help="baseline results folder, or a model name in RESULTS (overrides the policy's)")
    gt.add_argument("--junit-xml", help="also write the outcome as JUnit XML to this file")
    gt.set_defaults(func=_gate)
    cm = sub.add_parser("compare", help="candidate against baseline: paired tests, intervals, detectable effects")
    cm.add_argument("candidate", help="candidate results folder (or, with --in, a model name)")
    cm.add_argument("baseline", help="baseline results folder (or, with --in, a model name)")
    cm.add_argument("--in", dest="within", metavar="DIR", help="one results folder holding both models")
    cm.add_argument("--format", choices=("text", "json"), default="text")
    cm.set_defaults(func=_compare)
    lb = sub.add_parser("leaderboard", help="one row per (model, setting), ranked, ties marked")
    lb.add_argument("results", nargs="+", help="results folders (sweeps or lm_eval --output_path folders)")
    lb.add_argument("-o", "--output", help="board.md, board.csv or board.json (default: Markdown to stdout)")
    lb.add_argument("--format", choices=("md", "csv", "json"), help="override the format implied by the file name")
    lb.set_defaults(func=_leaderboard)
    al = sub.add_parser("alpha", help="hidden-state prompt-forgetting exponents (alpha, beta) per layer")
    _model_options(al, random_init=True)
    al.add_argument("--prompt-a", help="file with the base prompt x (with --prompt-b; default: the bundled scenes)")
    al.add_argument("--prompt-b", help="file with the variant prompt x'")
    al.add_argument("--axis", default="detail", help="label for the --prompt-a/--prompt-b pair (default detail)")
    _scene_options(al)
    al.add_argument("--continuations", default="bundled",
                    help="bundled, wikitext (needs the network) or a .jsonl/.txt file (default bundled)")
    al.add_argument("--n-continuations", type=_whole(2), default=16, help="continuations to use (default 16)")
    al.add_argument("--octaves", type=_whole(2, 12), default=7, help="octave windows to fit (default 7: t up to 1024)")
    al.add_argument("--length", type=_whole(0), default=0,
                    help="continuation tokens (default: what --octaves needs, 1031 for 7)")
    al.add_argument("--compensation", default="none", help="none, log:S, const:S or head:S (default none)")
    al.add_argument("--batch-size", type=_whole(1), default=8)
    al.add_argument("--bootstrap-iters", type=_whole(0), default=1000, help="bootstrap resamples over scenes (default 1000)")
    al.add_argument("--threads", type=_whole(0), default=0, help="torch threads (default: torch's choice)")
    al.add_argument("--decompose", action="store_true",
                    help="also split each layer's offset into direct (prompt keys) and relay (continuation keys) "
                         "attention paths, residual and MLP, and rebuild alpha from them (eager attention)")
    al.add_argument("--json", action="store_true", help="print everything (curves included) as JSON")
    al.set_defaults(func=_alpha)
    dc = sub.add_parser("decode", help="what free generations still carry of the prompt (probe, text, language)")
    _model_options(dc, random_init=True)
    _scene_options(dc)
    dc.add_argument("--samples", type=int, default=32, help="trajectories per prompt (default 32)")
    dc.add_argument("--length", type=int, default=512, help="generated tokens per trajectory (default 512)")
    dc.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    dc.add_argument("--seed", type=_whole(0), default=0)
    dc.add_argument("--folds", type=int, default=5, help="cross-validation folds of the probes (default 5)")
    dc.add_argument("--text-window", type=int, default=64,
                    help="generated tokens up to t in the bag of tokens; 0: all of them (default 64)")
    dc.add_argument("--compensation", default="none", help="none, log:S, const:S or head:S (default none)")
    dc.add_argument("--batch-size", type=_whole(1), default=32, help="trajectories sampled at once (default 32)")
    dc.add_argument("--threads", type=_whole(0), default=0, help="torch threads (default: torch's choice)")
    dc.add_argument("--output", help="JSON file: every finished scene is written at once and a rerun skips them")
    dc.add_argument("--json", action="store_true", help="print the summaries as JSON")
    dc.set_defaults(func=_decode)
    return p


def main(argv=None) -> int:
    command = None
    try:
        args = build_parser().parse_args(argv)
        command = args.command
        return args.func(args)
    except DriftUsageError as exc:
        print(f"drift-eval: error: {exc.message}", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt:
        pass
    import gc

    gc.collect()  # progress bars held by the interrupted frames close now, before the last line
    from drift_eval.plugin.sweep import RESUME

    print(f"drift-eval: interrupted{': ' + RESUME if command == 'sweep' else ''}", file=sys.stderr)
    return 130


if __name__ == "__main__":
    sys.exit(main())
