"""α per layer on SmolLM2-135M-Instruct and its random-init twin, with and without `log`
compensation, and the perplexity cost of compensation (CPU-sized).

Settings: none / log:0.5 / log:1 on both models (``--only`` reruns some). The bundled scenes
(first ``--scenes``) on the detail and translation axes, the first ``--conts`` bundled
continuations, ``--octaves`` octave windows. Writes ``results/alpha_smollm2.json``.

    python benchmarks/alpha_smollm2.py [--scenes 8] [--conts 8] [--octaves 5] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np
import torch

from drift_eval.compensation import bias as comp
from drift_eval.measure import alpha, continuations
from drift_eval.metrics.alpha import length_for
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.settings import CompensationConfig
from drift_eval.taskdata.alpha import read_scenes

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    # deferred, start-up: loads huggingface_hub, jinja2, transformers, yaml
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    p = argparse.ArgumentParser()
    p.add_argument("--scenes", type=int, default=8)
    p.add_argument("--conts", type=int, default=8)
    p.add_argument("--octaves", type=int, default=5)
    p.add_argument("--axes", default="detail,translation")
    p.add_argument("--batch-size", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", help="run only these, e.g. 'random_init:log:0.5' (comma-separated); other runs "
                                  "already in the results file are kept")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    d = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d)
    axes = args.axes.split(",")
    scenes = [{"base": s["base"], **{a: s[a] for a in axes}} for s in read_scenes()[:args.scenes]]
    conts = continuations.read_continuations("bundled", args.conts)
    length = length_for(args.octaves)
    cont_ids, _ = continuations.continuation_ids(tok, conts, length)
    path = os.path.join(HERE, "results", "alpha_smollm2.json")
    out = {"scenes": args.scenes, "continuations": args.conts, "length": length, "axes": axes, "runs": {}}
    if args.only and os.path.isfile(path):
        with open(path) as fh:
            old = json.load(fh)
        if {k: old.get(k) for k in ("scenes", "continuations", "length", "axes")} == \
                {k: out[k] for k in ("scenes", "continuations", "length", "axes")}:
            out["runs"] = old["runs"]
    models = {"trained": lambda: AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32),
              "random_init": lambda: (torch.manual_seed(0),
                                      AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(d),
                                                                       dtype=torch.float32))[1]}
    plan = {"trained": ["none", "log:0.5", "log:1"], "random_init": ["none", "log:0.5", "log:1"]}
    if args.only:
        wanted = [w.strip().split(":", 1) for w in args.only.split(",")]
        plan = {name: [lab for m, lab in wanted if m == name] for name in plan}
        plan = {name: labs for name, labs in plan.items() if labs}
    for name, build in models.items():
        if name not in plan:
            continue
        model = build().eval()
        state = comp.install(model, CompensationConfig("none"))
        nll_none = None
        for label in plan[name]:
            state.config = CompensationConfig.from_label(label)  # α biases the whole prompt
            t0 = time.time()
            res = alpha.measure(model, tok, scenes, conts, length,
                                alpha.Settings(state, args.batch_size, max_octaves=args.octaves))
            nll = alpha.continuation_nll(model, tok, [s["base"] for s in scenes], cont_ids, state, 4)
            total = float(np.sum(nll))
            if label == "none":
                nll_none = total
            elif nll_none is None and f"{name} none" in out["runs"]:
                run_none = out["runs"][f"{name} none"]
                nll_none = math.log(run_none["perplexity"]) * len(scenes) * len(conts) * length
            ppl = math.exp(total / (len(scenes) * len(conts) * length))
            run = {"seconds": round(time.time() - t0, 1), "perplexity": ppl,
                   "perplexity_change": (math.exp((total - nll_none) / (len(scenes) * len(conts) * length)) - 1)
                   if nll_none is not None else None,
                   "axes": {a: {k: r[k] for k in ("alpha_median", "alpha_median_se", "beta_median", "alpha", "alpha_se",
                                                  "beta", "alpha_fit_se")}
                            for a, r in res["axes"].items()}}
            out["runs"][f"{name} {label}"] = run
            print(f"{name} {label}: " + ", ".join(f"{a} alpha {r['alpha_median']:.3f} ± {r['alpha_median_se']:.3f}"
                                                  f" beta {r['beta_median']:.3f}" for a, r in res["axes"].items())
                  + f"; ppl {ppl:.2f} ({run['seconds']} s)", flush=True)
            os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
            with open(path, "w") as fh:
                json.dump(out, fh, indent=1)
        del model


if __name__ == "__main__":
    main()
