"""Direct / relay decomposition of α per layer on SmolLM2-135M-Instruct and its random-init
twin (same config, fresh weights, seed 0), eager attention, no compensation.

The teacher-forced runs of ``drift_eval.measure.alpha.scene_offsets(decompose=True)``, one
scene at a time; each finished scene's curves (signal, noise and the terms' cross signals)
are written to the results file at once, and a restart skips the scenes already there, so
the run can be stopped and resumed. The summary (α, the decomposition, bootstrap over
scenes) is recomputed from the stored curves at the end of every scene.

    python benchmarks/alpha_decomposition.py [--scenes 20] [--conts 16] [--octaves 7]
        [--axes detail,translation] [--models trained,random_init] [--threads 2]

Writes ``results/alpha_decomposition.json``.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from drift_eval.files import read_json, write_json_atomic
from drift_eval.metrics import alpha as am
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.settings import CompensationConfig
from drift_eval.taskdata.alpha import read_scenes

HERE = os.path.dirname(os.path.abspath(__file__))


def build(name: str, model_dir: str):
    import torch  # deferred, start-up: loads torch, tqdm
    # deferred, start-up: loads huggingface_hub, jinja2, tqdm, transformers, yaml
    from transformers import AutoConfig, AutoModelForCausalLM

    if name == "trained":
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    else:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch.float32)
    return model.eval()


def summarise(run: dict, centres, iters: int) -> dict:
    out = {}
    for axis in run["axes"]:
        cs = [run["scenes"][s][axis] for s in run["scene_order"] if s in run["scenes"]]
        if len(cs) < 1:
            continue
        S = np.array([c["signal"] for c in cs])
        N = np.array([c["noise"] for c in cs])
        fit = am.summarise(S, N, centres, iters=iters)
        dec = am.decomposition([c["parts"]["signal"] for c in cs], S, centres, cs[0]["parts"]["names"], iters=iters)
        out[axis] = {"scenes": len(cs), "alpha_median": fit["alpha_median"], "alpha_median_se": fit["alpha_median_se"],
                     "alpha": fit["alpha"], "alpha_se": fit["alpha_se"], "beta_median": fit["beta_median"],
                     "decomposition": {k: v for k, v in dec.items() if k not in ("signal", "rebuilt_signal")}}
    return out


def main():
    import torch  # deferred, start-up: loads torch, tqdm
    # deferred, start-up: loads huggingface_hub, jinja2, tqdm, transformers, yaml
    from transformers import AutoTokenizer

    from drift_eval.compensation import bias as comp  # deferred, start-up: loads torch, tqdm
    from drift_eval.measure import alpha, continuations  # deferred, start-up: loads torch, tqdm

    p = argparse.ArgumentParser()
    p.add_argument("--scenes", type=int, default=20)
    p.add_argument("--conts", type=int, default=16)
    p.add_argument("--octaves", type=int, default=7)
    p.add_argument("--axes", default="detail,paraphrase,genre,translation")
    p.add_argument("--models", default="trained,random_init")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bootstrap-iters", type=int, default=1000)
    p.add_argument("--out", default=os.path.join(HERE, "results", "alpha_decomposition.json"))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    d = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d)
    axes = args.axes.split(",")
    scenes = read_scenes()[:args.scenes]
    conts = continuations.read_continuations("bundled", args.conts)
    length = am.length_for(args.octaves)
    cont_ids, T = continuations.continuation_ids(tok, conts, length)
    windows = am.octave_windows(T, max_octaves=args.octaves)
    centres = [w.centre for w in windows]
    plan = {"continuations": args.conts, "length": T, "axes": axes, "centres": centres, "attention": "eager",
            "compensation": "none", "batch_size": args.batch_size}
    out = read_json(args.out, "results file") if os.path.isfile(args.out) else {"plan": plan, "runs": {}}
    if out.get("plan") != plan:
        raise SystemExit(f"{args.out} holds a run with other settings ({out.get('plan')}); move it away first")
    print(f"$ python benchmarks/alpha_decomposition.py --scenes {args.scenes} --conts {args.conts} "
          f"--octaves {args.octaves} --axes {args.axes} --models {args.models}", flush=True)
    for name in args.models.split(","):
        run = out["runs"].setdefault(name, {"axes": axes, "scenes": {}, "seconds": {}})
        run["scene_order"] = [s["id"] for s in scenes]
        todo = [s for s in scenes if s["id"] not in run["scenes"]]
        if not todo:
            continue
        model = build(name, d)
        comp.install(model, CompensationConfig("none"), base="eager")
        for s in todo:
            t0 = time.time()
            curves = alpha.scene_offsets(model, tok, s["base"], {a: s[a] for a in axes}, cont_ids, windows,
                                         alpha.Settings(batch_size=args.batch_size, decompose=True))
            run["scenes"][s["id"]] = curves
            run["seconds"][s["id"]] = round(time.time() - t0, 1)
            run["summary"] = summarise(run, centres, args.bootstrap_iters)
            write_json_atomic(args.out, out)
            line = ", ".join(f"{a}: alpha {r['alpha_median']:.3f}, gap {r['decomposition']['max_abs_difference']:.3f}"
                             for a, r in run["summary"].items())
            print(f"{name} {s['id']} ({run['seconds'][s['id']]} s): {line}", flush=True)
        del model


if __name__ == "__main__":
    main()
