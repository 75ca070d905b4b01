"""French persistence of a real chat model under several compensation settings.

Runs the real ``lm_eval`` command once per setting and task and prints a Markdown table of
the headline metrics with their standard errors. Meant for benchmarks/README.md's figures, e.g. with
Qwen2.5-Coder-0.5B-Instruct (GGUF) on a CPU:

    python benchmarks/french_behaviour.py --pretrained DIR --gguf-file F.gguf \\
        --settings none,log:1,const:1 --single-limit 16 --single-tokens 256 \\
        --multi-limit 8 --multi-tokens 96 --out benchmarks/results/french_qwen
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys

from drift_eval.settings import CompensationConfig

METRICS = {
    "drift_french_single": ["fully_french", "french_fraction", "second_half_french", "echo_rate", "langdetect_french"],
    "drift_french_multiturn": ["french_turn_1", "last3_french", "all_turns_french", "leak_per_1000", "mean_words"],
}


def run(args, setting, task, limit, tokens):
    cfg = CompensationConfig.from_label(setting)
    out = os.path.join(args.out, cfg.folder(), task)
    if not glob.glob(os.path.join(out, "*", "results_*.json")):
        margs = f"pretrained={args.pretrained},compensation={cfg.mode},strength={cfg.strength:g}"
        if args.gguf_file:
            margs += f",gguf_file={args.gguf_file}"
        cmd = [sys.executable, "-m", "lm_eval", "--model", "hf-drift", "--model_args", margs, "--tasks", task,
               "--apply_chat_template", "--limit", str(limit), "--gen_kwargs", f"max_gen_toks={tokens}",
               "--batch_size", str(args.batch_size), "--device", args.device, "--output_path", out, "--log_samples"]
        print("$", " ".join(cmd[2:]), flush=True)
        subprocess.run(cmd, check=True)
    [res] = glob.glob(os.path.join(out, "*", "results_*.json"))
    return json.load(open(res))["results"][task]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pretrained", required=True)
    ap.add_argument("--gguf-file")
    ap.add_argument("--settings", default="none,log:1,const:1")
    ap.add_argument("--single-limit", type=int, default=16)
    ap.add_argument("--single-tokens", type=int, default=256)
    ap.add_argument("--multi-limit", type=int, default=8)
    ap.add_argument("--multi-tokens", type=int, default=96)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="benchmarks/results/french_behaviour")
    args = ap.parse_args()
    rows = {}
    for setting in args.settings.split(","):
        rows[setting] = {}
        for task, limit, tokens in (("drift_french_single", args.single_limit, args.single_tokens),
                                    ("drift_french_multiturn", args.multi_limit, args.multi_tokens)):
            if limit > 0:
                rows[setting][task] = run(args, setting, task, limit, tokens)
    for task, metrics in METRICS.items():
        if not any(task in r for r in rows.values()):
            continue
        print(f"\n{task}\n\n| setting | " + " | ".join(metrics) + " |\n|---|" + "---|" * len(metrics))
        for setting, r in rows.items():
            res = r[task]
            cells = [f"{res[f'{m},none']:.3f} ± {res[f'{m}_stderr,none']:.3f}" for m in metrics]
            print(f"| {setting} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
