"""``drift-eval demo``: drift_french_single on the bundled SmolLM2-135M-Instruct through the
real ``lm_eval`` command, once per setting, then the HTML report comparing them."""
from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import sys

from drift_eval import inert
from drift_eval.cli.shared import whole
from drift_eval.errors import DriftUsageError

NAME = "demo"
HELP = "run drift_french_single on the bundled SmolLM2-135M-Instruct"


def add_arguments(p) -> None:
    p.add_argument("--settings", default="none,log:1", help="comma-separated compensation settings (default: none,log:1)")
    p.add_argument("--task", default="drift_french_single")
    p.add_argument("--limit", type=whole(1), default=8, help="requests per setting (default 8)")
    p.add_argument("--max-gen-toks", type=whole(1), default=256, help="forced answer length in tokens (default 256)")
    p.add_argument("--batch-size", type=whole(1), default=8)
    p.add_argument("--output", help="folder for lm-eval's results and samples and the report (default: "
                   "drift-demo/<date-time>)")


def run(args) -> int:
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.files import check_output_folder, write_text_atomic
    from drift_eval.metrics import lid_model
    from drift_eval.plugin.local_models import smollm2_dir
    from drift_eval.settings import parse_settings

    configs = parse_settings(args.settings)  # every entry is checked before the first run
    if len(configs) < 2:
        raise DriftUsageError("--settings needs two settings or more: the demo compares them")
    if args.output:
        output = check_output_folder(args.output, "--output")
        if os.path.isdir(output) and os.listdir(output):
            raise DriftUsageError(f"{output} is not empty: give a new --output folder")
    else:
        output = os.path.abspath(os.path.join("drift-demo", datetime.datetime.now().strftime("%Y%m%d-%H%M%S")))
    try:  # the runs score with it: a missing or wrong file is found now, not after the first run
        lid_model.check_model_file()
    except lid_model.LanguageModelMissing as exc:
        raise DriftUsageError(str(exc)) from None
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
        print(f"drift-eval: a run failed; its output is in {inert.terminal(output, one_line=True)}", file=sys.stderr)
        return status
    # deferred, start-up: drift-eval imports every command's module to read the arguments
    from drift_eval.reports.render import write_report

    print("\nreport comparing the settings (verdict, survival curves, audit strips):")
    print(write_report(output, report), flush=True)
    return 0
