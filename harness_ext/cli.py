"""``drift-eval``: the project's command line.

    drift-eval demo          run drift_french_single on the bundled SmolLM2-135M-Instruct
                             through the real ``lm_eval`` command, without and with
                             compensation, and print lm-eval's results tables
    drift-eval model-path    print the safetensors folder of the bundled demo model
                             (converted from its GGUF file on first use)
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
