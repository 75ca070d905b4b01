"""``drift-eval``: the project's command line.

    drift-eval demo          run drift_french_single on the bundled SmolLM2-135M-Instruct
                             through the real ``lm_eval`` command, without and with
                             compensation, and print lm-eval's results tables
    drift-eval model-path    print the safetensors folder of the bundled demo model
                             (converted from its GGUF file on first use)
    drift-eval position-bias predicted (rollout) vs gradient influence profiles of a model
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from .errors import DriftUsageError


def _demo(args) -> int:
    from .local_models import smollm2_dir

    model_dir = smollm2_dir()
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    status = 0
    for setting in settings:
        mode, _, strength = setting.partition(":")
        from .compensation import CompensationConfig

        cfg = CompensationConfig.parse(mode, strength or 1.0)
        model_args = f"pretrained={model_dir},compensation={cfg.mode},strength={cfg.strength:g}"
        cmd = [
            sys.executable, "-m", "lm_eval", "--model", "hf-drift", "--model_args", model_args,
            "--tasks", args.task, "--apply_chat_template", "--limit", str(args.limit),
            "--gen_kwargs", f"max_gen_toks={args.max_gen_toks}", "--batch_size", str(args.batch_size),
            "--device", "cpu",
        ]
        if args.output:
            cmd += ["--output_path", os.path.join(args.output, cfg.label().replace(":", "_")), "--log_samples"]
        print(f"\n== compensation {cfg.label()} ==\n$ lm_eval {shlex.join(cmd[3:])}", flush=True)
        rc = subprocess.call(cmd)
        status = status or rc
    return status


def _model_path(args) -> int:
    from .local_models import smollm2_dir

    print(smollm2_dir())
    return 0


def _position_bias(args) -> int:
    import json

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .calibration import calibration_text
    from .local_models import cached_from_gguf, smollm2_dir
    from .position_bias import fixed_length_sequences, profiles

    if args.model is None:
        model_dir = smollm2_dir()
    elif args.gguf_file:
        model_dir = cached_from_gguf(args.model, args.gguf_file)
    else:
        model_dir = args.model
    if args.text:
        if not os.path.isfile(args.text):
            raise DriftUsageError(f"text file not found: {args.text}")
        with open(args.text, encoding="utf-8") as fh:
            text = fh.read()
    else:
        text = calibration_text()
    if args.threads:
        torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="drift-eval", description="Instruction-drift evaluation for lm-eval.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run drift_french_single on the bundled SmolLM2-135M-Instruct")
    d.add_argument("--settings", default="none,log:1", help="comma-separated compensation settings (default: none,log:1)")
    d.add_argument("--task", default="drift_french_single")
    d.add_argument("--limit", type=int, default=8, help="requests per setting (default 8)")
    d.add_argument("--max-gen-toks", type=int, default=256, help="forced answer length in tokens (default 256)")
    d.add_argument("--batch-size", type=int, default=8)
    d.add_argument("--output", help="also write lm-eval results and samples under this folder")
    d.set_defaults(func=_demo)
    m = sub.add_parser("model-path", help="print the bundled demo model's safetensors folder")
    m.set_defaults(func=_model_path)
    pb = sub.add_parser("position-bias", help="rollout-predicted vs gradient influence profiles")
    pb.add_argument("--model", help="model folder (default: the bundled SmolLM2-135M-Instruct)")
    pb.add_argument("--gguf-file", help="GGUF file inside --model")
    pb.add_argument("--text", help="UTF-8 text to cut into sequences (default: the shipped prose)")
    pb.add_argument("--length", type=int, default=64, help="tokens per sequence (default 64)")
    pb.add_argument("--sequences", type=int, default=8, help="number of sequences (default 8)")
    pb.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    pb.add_argument("--json", action="store_true", help="print profiles and comparisons as JSON")
    pb.set_defaults(func=_position_bias)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except DriftUsageError as exc:
        print(f"drift-eval: error: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
