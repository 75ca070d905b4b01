"""Generation throughput with each compensation setting against stock sdpa, same run.

Two copies of SmolLM2-135M-Instruct with the same weights: one untouched (stock sdpa), one
routed through hf-drift's attention wrappers. Each round runs every setting once, in an order rotated from round to round,
so slow phases of a shared machine hit all settings alike; times are the process's CPU time
(one torch thread), which other processes on a shared machine do not inflate. The ratio of
a setting is the median over rounds of (stock time / setting time) within the same round.
Greedy, forced length (EOS suppressed), a chat prompt with a system instruction.

    python benchmarks/generation_speed.py [--new-tokens 48] [--rounds 7] [--threads 1]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from drift_eval.compensation import bias as comp
from drift_eval.settings import CompensationConfig
from drift_eval.measure.calibration import head_gammas
from drift_eval.taskdata.french import calibration_prompt
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.compensation.spans import system_span_end, token_count_before
from drift_eval.taskdata.french import system_prompt

SYSTEM = system_prompt("en")
USERS = ["Explain photosynthesis.", "Tell me a long story about a cat.", "How does a bicycle work?",
         "Plan a trip to Japan.", "Describe the life cycle of a star.", "Write a letter to a neighbour.",
         "How do I bake bread at home?", "What makes a good film?"]
SETTINGS = ["stock", "none", "log:1", "const:1", "head:1"]


def instrumented_share(model, state, tok, new_tokens):
    """Share of generation time spent in the drift code itself (bias building and mask
    merging in ``mask_for``, positions in ``begin_forward``), timed around those calls.
    Unlike end-to-end ratios it does not drown in the noise of a shared machine."""
    prompts = [tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": u}],
                                       tokenize=False, add_generation_prompt=True) for u in USERS]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    spent = [0.0]

    def timed(fn):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t0
        return wrapper

    out = {}
    for setting in ("log:1", "const:1", "head:1"):
        mode, _, s = setting.partition(":")
        state.config = CompensationConfig(mode, float(s))
        for bs in (1, 8):
            e = {k: v[:bs] for k, v in enc.items()}
            state.set_rows([20] * bs, e["attention_mask"].sum(1), new_tokens)
            state.mask_for, state.begin_forward = timed(type(state).mask_for.__get__(state)), \
                timed(type(state).begin_forward.__get__(state))
            spent[0] = 0.0
            t0 = time.perf_counter()
            with torch.no_grad():
                model.generate(**e, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                               pad_token_id=tok.pad_token_id)
            total = time.perf_counter() - t0
            del state.mask_for, state.begin_forward
            state.clear_rows()
            out[f"{setting} batch{bs}"] = round(spent[0] / total, 4)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-sizes", default="1,8")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "generation_speed.json"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    d = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d)
    tok.padding_side = "left"
    stock = AutoModelForCausalLM.from_pretrained(d, attn_implementation="sdpa").eval()
    drift = AutoModelForCausalLM.from_pretrained(d, attn_implementation="sdpa").eval()
    state = comp.install(drift, CompensationConfig("none"))
    state.head_gammas = head_gammas(drift, tok, calibration_prompt())

    results = {}
    for bs in [int(b) for b in args.batch_sizes.split(",")]:
        prompts = [tok.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": u}],
                                           tokenize=False, add_generation_prompt=True) for u in USERS[:bs]]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        spans = [token_count_before(p, system_span_end(p, tok, SYSTEM), tok, add_special_tokens=False) for p in prompts]
        lens = enc["attention_mask"].sum(1)
        times = {s: [] for s in SETTINGS}
        for r in range(args.rounds + 1):  # round 0 warms up
            for setting in SETTINGS[r % len(SETTINGS):] + SETTINGS[:r % len(SETTINGS)]:  # rotate the order
                model = stock if setting == "stock" else drift
                if setting != "stock":
                    mode, _, s = setting.partition(":")
                    state.config = CompensationConfig(mode, float(s or 1))
                    state.set_rows(spans, lens, args.new_tokens)
                t0 = time.process_time()
                with torch.no_grad():
                    out = model.generate(**enc, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                                         do_sample=False, pad_token_id=tok.pad_token_id)
                dt = time.process_time() - t0
                state.clear_rows()
                assert out.shape[1] - enc["input_ids"].shape[1] == args.new_tokens
                if r:
                    times[setting].append(dt)
        results[f"batch{bs}"] = {
            s: {"tokens_per_s": round(bs * args.new_tokens / statistics.median(t), 2),
                "ratio_vs_stock": round(statistics.median(b / x for b, x in zip(times["stock"], t)), 3)}
            for s, t in times.items()}
    results["time_in_drift_code"] = instrumented_share(drift, state, tok, args.new_tokens)
    meta = {"model": "SmolLM2-135M-Instruct (float32, CPU)", "clock": "process CPU time", "new_tokens": args.new_tokens,
            "rounds": args.rounds, "threads": args.threads, "torch": torch.__version__}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "results": results}, fh, indent=2)
    print("| batch | setting | tokens/s | ratio vs stock sdpa |\n|---|---|---|---|")
    for b, rows in results.items():
        if b.startswith("batch"):
            for s, v in rows.items():
                print(f"| {b[5:]} | {s} | {v['tokens_per_s']} | {v['ratio_vs_stock']} |")
    print("\nshare of generation time spent in drift code:")
    for k, v in results["time_in_drift_code"].items():
        print(f"  {k}: {v:.2%}")


if __name__ == "__main__":
    main()
