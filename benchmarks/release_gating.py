"""Release decisions on two real models: the bundled SmolLM2-135M-Instruct (the baseline)
and its random-init twin (same config, seed 0: the "candidate"), each swept by the real
``drift-eval sweep``, then ``drift-eval compare``, ``gate`` against the baseline,
``leaderboard`` and ``report``. Prints each command; the figures go to
``benchmarks/results/release_gating.json``, with the output folder written as ``OUT``.

    python benchmarks/release_gating.py --limit 36 --tokens 128 --out OUT

Resumable: a rerun skips finished sweeps (the sweep's own resume).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from drift_eval.plugin.local_models import smollm2_dir

HERE = os.path.dirname(os.path.abspath(__file__))
DRIFT_EVAL = os.path.join(os.path.dirname(sys.executable), "drift-eval")


def run(args, check=True):
    print("$ drift-eval", " ".join(map(str, args)), flush=True)
    r = subprocess.run([DRIFT_EVAL, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode not in (0, 1, 2):
        raise SystemExit(r.stderr[-3000:])
    return r


def twin(folder: str) -> str:
    """The random-init twin of the bundled model, saved once."""
    if os.path.isfile(os.path.join(folder, "config.json")):
        return folder
    import torch  # deferred, start-up: loads numpy, torch, tqdm
    # deferred, start-up: loads huggingface_hub, jinja2, numpy, tqdm, transformers, yaml
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(smollm2_dir()), dtype=torch.float32)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(smollm2_dir()).save_pretrained(folder)
    return folder


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=36)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=12)
    ap.add_argument("--out", required=True, help="a folder for the sweeps, the policy and the report")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    models = {"baseline": smollm2_dir(), "candidate": twin(os.path.join(args.out, "smollm2-random-init"))}
    for role, model in models.items():
        r = run(["sweep", "--output", os.path.join(args.out, role), "--model-args", f"pretrained={model}",
                 "--settings", "none", "--tasks", "drift_french_single", "--limit", args.limit,
                 "--gen-kwargs", f"max_gen_toks={args.tokens}", "--batch-size", args.batch_size])
        if r.returncode:
            raise SystemExit(r.stderr[-3000:])
    base, cand = (os.path.join(args.out, role) for role in ("baseline", "candidate"))
    compare = json.loads(run(["compare", cand, base, "--format", "json"]).stdout)
    policy = os.path.join(args.out, "gate.yaml")
    with open(policy, "w", encoding="utf-8") as fh:
        fh.write(f"baseline: {base}\nrules:\n"
                 "  - {task: drift_french_single, metric: fully_french, max_regression: 0.15, on: upper}\n")
    gate = run(["gate", cand, "--policy", policy])
    gate_self = run(["gate", base, "--policy", policy])  # the baseline against itself
    run(["leaderboard", base, cand, "-o", os.path.join(args.out, "board.json")])
    report = run(["report", base, cand, "--baseline", "SmolLM2-135M-Instruct.Q4_1", "--policy", policy,
                  "-o", os.path.join(args.out, "report.html")])
    def portable(text):  # the figures name no folder of this machine
        return text.replace(os.path.abspath(args.out), "OUT").replace(args.out, "OUT")

    out = {"limit": args.limit, "tokens": args.tokens, "compare": compare,
           "gate": {"exit": gate.returncode, "lines": portable(gate.stdout.strip()).splitlines()},
           "gate_baseline_against_itself": {"exit": gate_self.returncode,
                                            "lines": portable(gate_self.stdout.strip()).splitlines()},
           "leaderboard": json.load(open(os.path.join(args.out, "board.json")))["rows"],
           "report": portable(report.stdout.strip())}
    path = os.path.join(HERE, "results", "release_gating.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=2)
    for c in compare:
        mde = "inf" if c["mde"] is None else f"{c['mde']:.3f}"
        print(f"{c['task']}/{c['metric']}: candidate {c['candidate_value']:.3f} vs baseline {c['baseline_value']:.3f}, "
              f"difference {c['difference']:+.3f} [{c['lower']:+.3f}, {c['upper']:+.3f}], p {c['p_value']:.3g} "
              f"({c['test']}), n {c['n']}, MDE {mde}")
    print(f"gate exit {gate.returncode}; baseline against itself: exit {gate_self.returncode}; written {path}")


if __name__ == "__main__":
    main()
