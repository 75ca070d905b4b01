"""The conversation executor's throughput against raw batched ``model.generate``, same run.

The executor (``hf-drift``'s ``generate_conversation``) renders each turn's history with the
chat template, batches turn k of every conversation through lm-eval's ``generate_until``,
and decodes the replies. The baseline feeds the very same prompts (recorded from the
executor's run) straight to ``model.generate`` at the same batch size. Both generate a
fixed number of tokens per turn (EOS suppressed), greedy, on SmolLM2-135M-Instruct.
Times are process CPU time (one torch thread); rounds alternate which goes first.

    python benchmarks/conversation_speed.py [--conversations 8] [--turns 4] [--tokens 32]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from lm_eval.api.instance import Instance

from drift_eval.conversation import ConversationSpec
from drift_eval.plugin.request_types import CONVERSATION
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.plugin.model import HFDriftLM
from drift_eval.taskdata.french import read_conversations, system_prompt
from drift_eval.files import write_json_atomic

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "conversation_speed.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    convs = read_conversations()[: args.conversations]
    system = system_prompt("en")
    specs = [ConversationSpec(system, c["user_turns"][: args.turns]) for c in convs]
    gen = {"until": [], "max_gen_toks": args.tokens, "min_new_tokens": args.tokens, "do_sample": False}
    lm = HFDriftLM(pretrained=smollm2_dir(), device="cpu", batch_size=len(specs))
    tok, model = lm.tokenizer, lm.model

    prompts_by_turn = []
    original = lm.generate_until

    def recording(reqs, disable_tqdm=False):
        prompts_by_turn.append([r.args[0] for r in reqs])
        return original(reqs, disable_tqdm=disable_tqdm)

    def run_executor():
        reqs = [Instance(CONVERSATION, {"system_prompt": system}, (s.to_json(), dict(gen)), 0) for s in specs]
        t0 = time.process_time()
        lm.generate_conversation(reqs, disable_tqdm=True)
        return time.process_time() - t0

    def run_raw():
        t0 = time.process_time()
        for prompts in prompts_by_turn[: args.turns]:
            tok.padding_side = "left"
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                model.generate(**enc, max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False,
                               pad_token_id=tok.pad_token_id)
        return time.process_time() - t0

    lm.generate_until = recording
    run_executor()  # warm-up, and records each turn's prompts
    lm.generate_until = original
    times = {"executor": [], "raw_generate": []}
    for r in range(args.rounds):
        order = ["executor", "raw_generate"] if r % 2 else ["raw_generate", "executor"]
        for name in order:
            times[name].append(run_executor() if name == "executor" else run_raw())
    tokens = len(specs) * args.turns * args.tokens
    res = {name: {"tokens_per_s": round(tokens / statistics.median(t), 2)} for name, t in times.items()}
    res["ratio_executor_vs_raw"] = round(statistics.median(
        raw / ex for raw, ex in zip(times["raw_generate"], times["executor"])), 3)
    meta = vars(args) | {"out": os.path.relpath(os.path.abspath(args.out), os.path.dirname(HERE)),  # no machine path
                         "model": "SmolLM2-135M-Instruct (float32, CPU)", "clock": "process CPU time", "threads": 1}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    write_json_atomic(args.out, {"meta": meta, "results": res}, indent=2)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
