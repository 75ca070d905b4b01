"""α measurement throughput against a bare batched forward, and peak memory against the
number of continuations.

Throughput: the same rows (one scene's base prompt and two variants, each followed by the
same continuations, left-padded in the same batches) go through (a) a bare forward with
``output_hidden_states=True`` (logits at every position, as a plain call computes them),
(a') the same with ``logits_to_keep=1`` (what the α code asks for), and (b)
``drift_eval.measure.alpha.scene_offsets`` (tokenising, hooks, window capture, streamed sums,
signal and noise). The order is rotated from round to round; times are process CPU time
with one torch thread; a ratio is the median over rounds of baseline time / α time (goal
>= 0.8).

Memory: each number of continuations K runs in a fresh process; its resident memory is
sampled while one scene (base + one variant) is measured, and the peak above the memory
just before is recorded, with glibc's default allocator and with large blocks returned to
the system at once. Streaming keeps the sums at a fixed size, so the growth should not
depend on K.

    python benchmarks/alpha_throughput.py [--length 263] [--rounds 5] [--conts 8]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import torch
from _timing import rotated_rounds

from _memory import peak_growth
from drift_eval.measure import alpha, continuations
from drift_eval.metrics import alpha as am
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.taskdata.alpha import read_scenes

HERE = os.path.dirname(os.path.abspath(__file__))


def _setup(length, n_conts):
    # deferred, start-up: loads huggingface_hub, jinja2, transformers, yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    scene = read_scenes()[0]
    conts = continuations.read_continuations("bundled", n_conts)
    cont_ids, T = continuations.continuation_ids(tok, conts, length)
    windows = am.octave_windows(T)
    return model, tok, scene, cont_ids, windows


def throughput(args):
    torch.set_num_threads(args.threads)
    model, tok, scene, cont_ids, windows = _setup(args.length, args.conts)
    variants = {"detail": scene["detail"], "translation": scene["translation"]}
    prompts = [continuations.prompt_ids(tok, scene["base"])] + [continuations.prompt_ids(tok, v) for v in variants.values()]
    rows = [p + c for c in cont_ids for p in prompts]
    pad = alpha._pad_id(tok)

    def bare(**extra):
        with torch.no_grad():
            for b0 in range(0, len(rows), args.batch_size):
                ids, mask, pos = alpha._padded(rows[b0:b0 + args.batch_size], pad, "cpu")
                model(input_ids=ids, attention_mask=mask, position_ids=pos, output_hidden_states=True, use_cache=False,
                      **extra)

    def bare_last_logits():
        bare(logits_to_keep=1)

    def measured():
        alpha.scene_offsets(model, tok, scene["base"], variants, cont_ids, windows,
                            alpha.Settings(batch_size=args.batch_size))

    bare()  # warm-up
    def report(r, got):
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in got.items())
              + f"; ratios {got['bare'] / got['alpha']:.3f} / {got['bare_last_logits'] / got['alpha']:.3f}", flush=True)

    times = rotated_rounds([("bare", bare), ("bare_last_logits", bare_last_logits), ("alpha", measured)], args.rounds,
                           report)
    ratios = {b: [x / a for x, a in zip(times[b], times["alpha"])] for b in ("bare", "bare_last_logits")}
    return {"rows": len(rows), "length": args.length, "batch_size": args.batch_size, "threads": args.threads,
            "rounds": args.rounds, "cpu_s": times,
            "throughput_ratio_median": statistics.median(ratios["bare"]),
            "throughput_ratio_vs_last_logits_median": statistics.median(ratios["bare_last_logits"]),
            "throughput_ratios": ratios}


def peak_memory_child(args):
    """Resident memory while one scene is measured (``_memory.peak_growth``)."""
    torch.set_num_threads(args.threads)
    model, tok, scene, cont_ids, windows = _setup(args.length, args.conts)
    grew = peak_growth(lambda: alpha.scene_offsets(model, tok, scene["base"], {"detail": scene["detail"]}, cont_ids,
                                                   windows, alpha.Settings(batch_size=args.batch_size)))
    print(json.dumps({"continuations": args.conts, **grew}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--length", type=int, default=263)
    p.add_argument("--conts", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=6)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--memory-conts", default="2,4,8,16")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--memory-only", action="store_true", help="skip the throughput rounds")
    args = p.parse_args()
    if args.child:
        return peak_memory_child(args)
    path = os.path.join(HERE, "results", "alpha_throughput.json")
    result = {"throughput": throughput(args), "memory": []} if not args.memory_only else \
        dict(json.load(open(path)), memory=[])
    # glibc keeps freed heap memory for reuse, and batches of different padded widths leave
    # it fragmented, so resident memory creeps up with the number of batches whatever the
    # program holds; with large blocks mapped and unmapped directly (MALLOC_MMAP_THRESHOLD_)
    # the resident peak shows what the measurement itself holds.
    for allocator, extra in (("glibc default", {}), ("mmap above 64 KiB", {"MALLOC_MMAP_THRESHOLD_": "65536"})):
        for k in [int(x) for x in args.memory_conts.split(",")]:
            out = subprocess.check_output([sys.executable, __file__, "--child", "--conts", str(k), "--length",
                                           str(args.length), "--batch-size", str(args.batch_size)], text=True,
                                          env=dict(os.environ, **extra))
            result["memory"].append(dict(json.loads(out.strip().splitlines()[-1]), allocator=allocator))
            print(result["memory"][-1], flush=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(result, fh, indent=2)
    print(json.dumps({"throughput_ratio_median": result["throughput"]["throughput_ratio_median"],
                      "vs_last_logits": result["throughput"]["throughput_ratio_vs_last_logits_median"],
                      "growth_mib": [m["growth_mib"] for m in result["memory"]]}))


if __name__ == "__main__":
    main()
