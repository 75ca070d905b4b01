"""Cramming capacity (output accessibility) figures for the README.

1. The bound check: ``C = d ln(1 + 2r/eps) / ln|V|`` for d = 2048, |V| = 50304, eps = r/2048
   (the seed's figure, 1573.6).
2. A random-init model with a wider initialisation: the tests' 2-layer llama (hidden 32,
   vocab 128) with every weight matrix re-drawn from N(0, 0.3^2) (``widen_init``); random
   token targets; n50 against m with R², the bound and the theory/empirical slope ratio.
3. With ``--smollm2``: the bundled SmolLM2-135M-Instruct on passages of the shipped prose,
   with settings sized for a CPU (``--smollm2-*`` options).

    python benchmarks/cramming_capacity.py [--smollm2] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from drift_eval.measure import cramming as cr
from drift_eval.metrics.accessibility import capacity_bound
from drift_eval.plugin.local_models import smollm2_dir

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from support.models import tiny_model  # noqa: E402


def _log(res):
    print(f"  m={res.m} n={res.length}: {sum(res.success)}/{len(res.success)} exact, "
          f"steps {min(res.steps)}-{max(res.steps)}", flush=True)


def _brief(res: dict, seconds: float) -> dict:
    keep = ("settings", "first_token", "accessibility", "n50", "line", "fitted_m", "bound", "slope_ratio")
    return {**{k: res[k] for k in keep}, "seconds": round(seconds, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny-ms", default="1,2,4,8")
    ap.add_argument("--tiny-lengths", default="1,2,3,4,6,8,12,16,24")
    ap.add_argument("--tiny-strings", type=int, default=16)
    ap.add_argument("--tiny-steps", type=int, default=400)
    ap.add_argument("--smollm2", action="store_true", help="also measure the bundled SmolLM2-135M-Instruct")
    ap.add_argument("--smollm2-ms", default="1,2")
    ap.add_argument("--smollm2-lengths", default="1,2,4")
    ap.add_argument("--smollm2-strings", type=int, default=2)
    ap.add_argument("--smollm2-steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "cramming_capacity.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out = {"bound_check": capacity_bound(2048, 50304).as_dict()}
    print(f"bound check: C = {out['bound_check']['C']:.1f} (d 2048, |V| 50304, eps = r/2048)")

    model = cr.widen_init(tiny_model("llama", seed=0, layers=2), std=0.3, seed=0)
    settings = cr.Settings.from_options(ms=args.tiny_ms, lengths=args.tiny_lengths, strings=args.tiny_strings,
                                        max_steps=args.tiny_steps, patience=args.tiny_steps, targets="random")
    print("random-init llama (2 layers, hidden 32, vocab 128, weights N(0, 0.3^2)), random targets")
    t0 = time.process_time()
    res = cr.run(model, None, settings, progress=_log)
    out["tiny_wide_init"] = {"model": "llama, 2 layers, hidden 32, 4 heads / 2 kv heads, vocab 128, "
                                      "every weight matrix N(0, 0.3^2), seed 0", **_brief(res, time.process_time() - t0)}
    print(json.dumps({k: out["tiny_wide_init"][k] for k in ("line", "slope_ratio")}))

    if args.smollm2:
        # deferred, start-up: loads huggingface_hub, jinja2, transformers, yaml
        from transformers import AutoModelForCausalLM, AutoTokenizer

        d = smollm2_dir()
        tok = AutoTokenizer.from_pretrained(d)
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
        settings = cr.Settings.from_options(ms=args.smollm2_ms, lengths=args.smollm2_lengths,
                                            strings=args.smollm2_strings, max_steps=args.smollm2_steps,
                                            patience=args.smollm2_steps)
        print("SmolLM2-135M-Instruct, passages of the shipped prose")
        t0 = time.process_time()
        res = cr.run(model, tok, settings, progress=_log)
        out["smollm2_135m_cpu"] = {"model": "SmolLM2-135M-Instruct (bundled, float32)",
                                   **_brief(res, time.process_time() - t0)}
        print(json.dumps({k: out["smollm2_135m_cpu"][k] for k in ("accessibility", "line", "slope_ratio")}))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=2)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
