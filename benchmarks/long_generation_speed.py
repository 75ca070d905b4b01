"""Compensation's cost at the protocol's size, and the sweep's cost over raw generation.

Part ``generation``: greedy, forced-length generation of ``--new-tokens`` (1024) tokens
after a chat prompt of at least ``--prompt-tokens`` (600) tokens (the drift_french system
prompt, then a user message quoting the shipped prose), at batch 1 and 32, each setting
against an untouched copy of the model with stock sdpa. Each round runs every setting once,
the order rotated between rounds; the clock is the process's CPU time (one torch thread),
which other processes do not inflate; a setting's ratio is the median over rounds of
(stock time / its time). Goal: >= 0.97.

Part ``sweep``: ``--requests`` requests of drift_french_single at ``--sweep-tokens``
forced tokens through ``drift-eval sweep`` itself (``run_sweep`` into a fresh folder: model
load, lm-eval, the answer cache, scoring and files included) against raw batched
``model.generate`` on the same rendered prompts with the same batch size, alternating.
Goal: >= 0.8.

    python benchmarks/long_generation_speed.py --part generation --rounds 3
    python benchmarks/long_generation_speed.py --part sweep --rounds 2
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
from _timing import rotated_rounds
from transformers import AutoModelForCausalLM, AutoTokenizer

from drift_eval.compensation import bias as comp
from drift_eval.compensation.spans import system_span_end, token_count_before
from drift_eval.files import prose_text, read_json, write_json_atomic
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.settings import CompensationConfig
from drift_eval.tasks.drift_french.data import read_requests, system_prompt

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results", "long_generation_speed.json")


def chat_prompts(tok, n: int, prompt_tokens: int) -> list[str]:
    """``n`` chat prompts of at least ``prompt_tokens`` tokens: the system prompt, then a
    user message that quotes the shipped prose and asks one of the task's requests."""
    words = prose_text().split()
    requests = [r["request"] for r in read_requests()]
    out = []
    for i in range(n):
        k = 200
        while True:
            user = f"Here are my notes:\n\n{' '.join(words[:k])}\n\n{requests[i % len(requests)]}"
            p = tok.apply_chat_template([{"role": "system", "content": system_prompt("en")},
                                         {"role": "user", "content": user}], tokenize=False, add_generation_prompt=True)
            if len(tok(p, add_special_tokens=False)["input_ids"]) >= prompt_tokens or k >= len(words):
                break
            k += 50
        out.append(p)
    return out


def part_generation(args) -> dict:
    d = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d)
    tok.padding_side = "left"
    stock = AutoModelForCausalLM.from_pretrained(d, attn_implementation="sdpa").eval()
    drift = AutoModelForCausalLM.from_pretrained(d, attn_implementation="sdpa").eval()
    state = comp.install(drift, CompensationConfig("none"))
    settings = ["stock", *args.settings.split(",")]
    res = {}
    for bs in map(int, args.batch_sizes.split(",")):
        prompts = chat_prompts(tok, bs, args.prompt_tokens)
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        spans = [token_count_before(p, system_span_end(p, tok, system_prompt("en")), tok, add_special_tokens=False)
                 for p in prompts]
        lens = enc["attention_mask"].sum(1)
        times = {s: [] for s in settings}
        for r in range(args.rounds):
            for s in settings[r % len(settings):] + settings[:r % len(settings)]:
                model = stock if s == "stock" else drift
                if s != "stock":
                    state.config = CompensationConfig.from_label(s)
                    state.set_rows(spans, lens, args.new_tokens)
                t0 = time.process_time()
                with torch.no_grad():
                    out = model.generate(**enc, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                                         do_sample=False, pad_token_id=tok.pad_token_id)
                times[s].append(time.process_time() - t0)
                state.clear_rows()
                assert out.shape[1] - enc["input_ids"].shape[1] == args.new_tokens
                print(f"batch {bs} round {r} {s}: {times[s][-1]:.1f} s CPU", flush=True)
        res[f"batch{bs}"] = {"prompt_tokens": int(lens.min()), "new_tokens": args.new_tokens,
                             **{s: {"tokens_per_cpu_s": round(bs * args.new_tokens / statistics.median(t), 2),
                                    "ratio_vs_stock": round(statistics.median(a / b for a, b in zip(times["stock"], t)), 3),
                                    "cpu_s": [round(x, 1) for x in t]} for s, t in times.items()}}
    return res


def part_sweep(args) -> dict:
    from drift_eval.decide.sweep import run_sweep
    from drift_eval.plugin.model import HFDriftLM

    lm = HFDriftLM(pretrained=smollm2_dir(), device="cpu", batch_size=args.batch_size)
    docs = read_requests()[: args.requests]
    prompts = [lm.apply_chat_template([{"role": "system", "content": system_prompt("en")},
                                       {"role": "user", "content": d["request"]}]) for d in docs]
    tok = lm.tokenizer
    def sweep():
        with tempfile.TemporaryDirectory() as tmp:  # a fresh folder: every answer generated, model load included
            run_sweep(os.path.join(tmp, "out"), "none", "drift_french_single", limit=args.requests,
                      gen_kwargs=f"max_gen_toks={args.sweep_tokens}", batch_size=args.batch_size)

    def raw_generate():
        for b in range(0, len(prompts), args.batch_size):
            enc = tok(prompts[b:b + args.batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                lm.model.generate(**enc, max_new_tokens=args.sweep_tokens, min_new_tokens=args.sweep_tokens,
                                  do_sample=False, pad_token_id=tok.pad_token_id)

    times = rotated_rounds([("sweep", sweep), ("raw_generate", raw_generate)], args.rounds,
                           lambda r, got: print(f"round {r}: " + ", ".join(f"{k} {v:.1f} s CPU" for k, v in got.items()),
                                                flush=True))
    tokens = len(prompts) * args.sweep_tokens
    return {"requests": len(prompts), "tokens_per_request": args.sweep_tokens, "batch_size": args.batch_size,
            **{k: {"tokens_per_cpu_s": round(tokens / statistics.median(v), 2), "cpu_s": [round(x, 1) for x in v]}
               for k, v in times.items()},
            "ratio_sweep_vs_raw": round(statistics.median(a / b for a, b in zip(times["raw_generate"], times["sweep"])), 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("generation", "sweep"), required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--settings", default="log:1,const:1", help="compensation settings against stock (generation)")
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--prompt-tokens", type=int, default=600)
    ap.add_argument("--new-tokens", type=int, default=1024)
    ap.add_argument("--requests", type=int, default=12, help="drift_french_single requests (sweep)")
    ap.add_argument("--sweep-tokens", type=int, default=2048)
    ap.add_argument("--batch-size", type=int, default=12, help="batch size (sweep)")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    result = part_generation(args) if args.part == "generation" else part_sweep(args)
    old = read_json(args.out) if os.path.isfile(args.out) else {}
    import shlex
    import sys

    old[args.part] = {"command": "python benchmarks/long_generation_speed.py " + shlex.join(sys.argv[1:]),
                      "threads": args.threads, "clock": "process CPU time", "torch": torch.__version__,
                      "model": "SmolLM2-135M-Instruct (float32, CPU)", "results": result}
    write_json_atomic(args.out, old, indent=2)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
