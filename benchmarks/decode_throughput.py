"""Decodability throughput against the bare batched sampling it needs, and resident memory
against the number of trajectories per prompt.

Throughput: one scene's base prompt and one variant, ``--samples`` trajectories each of
``--length`` tokens, in batches of ``--batch-size``: (a) bare ``model.generate`` with the
same sampling settings, seeds and batches (what the measurement cannot do without), and (b)
``drift_eval.measure.decode.scene`` (the same sampling plus the hidden-state capture at the
window centres, the temporary store, the probes per layer and t, the text probes and the
fastText languages). The order alternates from round to round; times are process CPU time
with one torch thread; the ratio is the median over rounds of bare time / decode time (goal
>= 0.8).

Memory: each number of trajectories N runs in a fresh process; after one bare sampling
batch (whose first call keeps memory of its own), its resident memory is sampled while one
scene (base + one variant, batches of ``--memory-batch-size``) is measured, and the peak
above the memory just before is recorded. The hidden states go to a temporary file, so the
growth should not depend on N.

    python benchmarks/decode_throughput.py [--samples 16] [--length 256] [--rounds 3]
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
from drift_eval.files import read_json, write_json_atomic
from drift_eval.measure import decode
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.taskdata.alpha import read_scenes

HERE = os.path.dirname(os.path.abspath(__file__))


def _setup(samples, length):
    # deferred, start-up: loads huggingface_hub, jinja2, transformers, yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    scene = read_scenes()[0]
    settings = decode.Settings.from_options(samples=samples, generation_length=length)
    return model, tok, scene, settings


def throughput(args):
    from transformers import GenerationConfig  # deferred, start-up: loads huggingface_hub, jinja2, transformers, yaml

    torch.set_num_threads(args.threads)
    model, tok, scene, settings = _setup(args.samples, args.length)
    prompts = {"base": scene["base"], "translation": scene["translation"]}
    gen = GenerationConfig(do_sample=True, temperature=settings.temperature, top_k=0, top_p=1.0,
                           max_new_tokens=settings.generation_length + 1, min_new_tokens=settings.generation_length + 1,
                           eos_token_id=model.generation_config.eos_token_id, pad_token_id=tok.eos_token_id)

    def bare():
        with torch.no_grad():
            for name, text in prompts.items():
                ids = decode.prompt_ids(tok, text) + tok(decode.SEPARATOR, add_special_tokens=False)["input_ids"]
                for b, k0 in enumerate(range(0, settings.samples, args.batch_size)):
                    rows = torch.tensor([ids] * min(args.batch_size, settings.samples - k0))
                    with torch.random.fork_rng(devices=[]):
                        torch.manual_seed(decode._seed(settings.seed, scene["id"], name, b))
                        model.generate(rows, attention_mask=torch.ones_like(rows), generation_config=gen)

    def measured():
        decode.scene(model, tok, scene["id"], scene["base"], {"translation": scene["translation"]}, settings,
                     decode.Runtime(batch_size=args.batch_size))

    def report(r, got):
        print(f"round {r + 1}: bare {got['bare']:.1f} s, decode {got['decode']:.1f} s; ratio "
              f"{got['bare'] / got['decode']:.3f}", flush=True)

    times = rotated_rounds([("bare", bare), ("decode", measured)], args.rounds, report)
    ratios = [b / d for b, d in zip(times["bare"], times["decode"])]
    return {"samples": args.samples, "length": args.length, "prompts": 2, "batch_size": args.batch_size,
            "threads": args.threads, "rounds": args.rounds, "cpu_s": times, "ratios": ratios,
            "throughput_ratio_median": statistics.median(ratios)}


def peak_memory_child(args):
    """Resident memory while one scene is measured (``_memory.peak_growth``), after one bare
    sampling batch of the same size has run (the first ``generate`` call keeps about 0.5 GiB
    of its own, whatever measures it)."""
    torch.set_num_threads(args.threads)
    model, tok, scene, settings = _setup(args.samples, args.length)
    rows = torch.tensor([decode.prompt_ids(tok, scene["base"])] * args.batch_size)
    with torch.no_grad():
        warm = peak_growth(lambda: model.generate(rows, attention_mask=torch.ones_like(rows), do_sample=True, top_k=0,
                                                  max_new_tokens=settings.generation_length + 1,
                                                  min_new_tokens=settings.generation_length + 1))
    grew = peak_growth(lambda: decode.scene(model, tok, scene["id"], scene["base"],
                                            {"translation": scene["translation"]}, settings,
                                            decode.Runtime(batch_size=args.batch_size)))
    print(json.dumps({"samples": args.samples, "first_generate_growth_mib": warm["growth_mib"], **grew}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--length", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--memory-samples", default="8,16,32,64")
    p.add_argument("--memory-length", type=int, default=32)
    p.add_argument("--memory-batch-size", type=int, default=8)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--memory-only", action="store_true", help="keep the recorded throughput, measure memory again")
    args = p.parse_args()
    if args.child:
        return peak_memory_child(args)

    path = os.path.join(HERE, "results", "decode_throughput.json")
    print(f"$ python benchmarks/decode_throughput.py --samples {args.samples} --length {args.length} "
          f"--rounds {args.rounds} --batch-size {args.batch_size}{' --memory-only' if args.memory_only else ''}",
          flush=True)
    result = {"throughput": read_json(path, "decode throughput results")["throughput"] if args.memory_only
              else throughput(args), "memory": []}
    # large blocks mapped and unmapped directly, so that resident memory shows what the
    # measurement holds rather than freed heap that glibc keeps (see alpha_throughput.py)
    for n in [int(x) for x in args.memory_samples.split(",")]:
        out = subprocess.check_output([sys.executable, __file__, "--child", "--samples", str(n), "--length",
                                       str(args.memory_length), "--batch-size", str(args.memory_batch_size)],
                                      text=True, env=dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536"))
        result["memory"].append(json.loads(out.strip().splitlines()[-1]))
        print(result["memory"][-1], flush=True)
    result["memory_settings"] = {"length": args.memory_length, "batch_size": args.memory_batch_size,
                                 "allocator": "MALLOC_MMAP_THRESHOLD_=65536"}
    write_json_atomic(path, result, indent=2)
    print(json.dumps({"throughput_ratio_median": result["throughput"]["throughput_ratio_median"],
                      "growth_mib": [m["growth_mib"] for m in result["memory"]]}))


if __name__ == "__main__":
    main()
