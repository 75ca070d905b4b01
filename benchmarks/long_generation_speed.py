"""Compensation's cost at the protocol's size, and the sweep's cost over raw generation.

Part ``generation``: greedy, forced-length generation of ``--new-tokens`` (1024) tokens
after a chat prompt of at least ``--prompt-tokens`` (600) tokens (the drift_french system
prompt, then a user message quoting the shipped prose), at batch 1 and 32. One model
instance runs every setting: ``stock`` is transformers' own sdpa, the others are
``drift_sdpa`` with the bias, so weights and memory layout are the same for all. Each round
runs every setting once, the order rotated between rounds; the clock is the process's CPU
time (one torch thread); a setting's ratio is the median over rounds of (stock time / its
time). Goal: >= 0.97.

Part ``profile``: where a decode step's time goes, at the middle of such a generation
(``prompt + new/2`` keys), batch 1 and 32, many short rotated rounds: one whole stock decode
step of the model; the bias's own work per step (``begin_forward`` and every layer's
``mask_for``); one sdpa call with no mask, with a float mask and with a bool mask. The
share ``bias work / step`` is the cost compensation adds beyond the attention kernel.

Part ``sweep``: ``--requests`` requests of drift_french_single at ``--sweep-tokens``
forced tokens through ``drift-eval sweep`` itself (into a fresh folder, without the answer
cache: model load, lm-eval, scoring and files included) against a process that loads the
model with transformers and calls ``model.generate`` on the same rendered prompts with the
same batch size (its own DynamicCache), alternating. Every run is a fresh child process,
timed by its CPU time, user plus kernel: a process that has already generated long answers
has its C allocator warmed up for large tensors, which a real run does not (see
``benchmarks/README.md``). Goal: >= 0.8.

Part ``cache``: the same raw ``model.generate`` processes with transformers' DynamicCache and
with hf-drift's reserved cache (``drift_eval.plugin.generation.reserved_cache``).

Part ``path``: hf-drift's ``generate_until`` against raw ``model.generate`` on the same
prompts and batches at ``--path-tokens`` (160) forced tokens, in one process: the sweep's
per-step generation path alone, without model load or scoring.

    python benchmarks/long_generation_speed.py --part profile
    python benchmarks/long_generation_speed.py --part generation --batch-sizes 1 --rounds 5
    python benchmarks/long_generation_speed.py --part generation --batch-sizes 32 --rounds 2
    python benchmarks/long_generation_speed.py --part sweep --rounds 2
    python benchmarks/long_generation_speed.py --part cache --rounds 2
    python benchmarks/long_generation_speed.py --part path --rounds 2

Each invocation updates its part's entry (per batch size for ``generation``) in
``results/long_generation_speed.json``, with the command that produced it.
"""
from __future__ import annotations

import argparse
import itertools
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile

import torch
from _timing import rotated_rounds
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from drift_eval.anatomy import attention_modules
from drift_eval.compensation import bias as comp
from drift_eval.compensation.spans import system_span_end, token_count_before
from drift_eval.files import prose_text, read_json, write_json_atomic
from drift_eval.plugin.generation import cache_kwarg, reserved_cache
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.settings import CompensationConfig
from drift_eval.taskdata.french import read_requests, system_prompt

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


def _encoded(tok, bs: int, prompt_tokens: int):
    prompts = chat_prompts(tok, bs, prompt_tokens)
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    spans = [token_count_before(p, system_span_end(p, tok, system_prompt("en")), tok, add_special_tokens=False)
             for p in prompts]
    return enc, spans, enc["attention_mask"].sum(1)


def _use(model, state, setting: str, spans, lens, new_tokens: int) -> None:
    """``stock``: transformers' sdpa; anything else: drift_sdpa with that bias."""
    state.clear_rows()
    if setting == "stock":
        comp.set_implementation(model, "sdpa")
        return
    comp.set_base(model, "sdpa")
    state.config = CompensationConfig.from_label(setting)
    state.set_rows(spans, lens, new_tokens)


def _load():
    d = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="sdpa").eval()
    return tok, model, comp.install(model, CompensationConfig("none"), base="sdpa")


def part_generation(args) -> dict:
    tok, model, state = _load()
    settings = ["stock", *args.settings.split(",")]
    res = {}
    for bs in map(int, args.batch_sizes.split(",")):
        enc, spans, lens = _encoded(tok, bs, args.prompt_tokens)

        def gen(s):
            def run():
                _use(model, state, s, spans, lens, args.new_tokens)
                with torch.no_grad():
                    out = model.generate(**enc, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                                         do_sample=False, pad_token_id=tok.pad_token_id)
                assert out.shape[1] - enc["input_ids"].shape[1] == args.new_tokens
            return run

        times = rotated_rounds([(s, gen(s)) for s in settings], args.rounds, _print_round(f"batch {bs} "))
        state.clear_rows()
        res[f"batch{bs}"] = {"prompt_tokens": int(lens.min()), "new_tokens": args.new_tokens, "rounds": args.rounds,
                             **{s: {"tokens_per_cpu_s": round(bs * args.new_tokens / statistics.median(t), 2),
                                    "ratio_vs_stock": round(statistics.median(a / b for a, b in zip(times["stock"], t)), 3),
                                    "ratio_per_round": [round(a / b, 3) for a, b in zip(times["stock"], t)],
                                    "cpu_s": [round(x, 1) for x in t]} for s, t in times.items()}}
    return res


def part_profile(args) -> dict:
    tok, model, state = _load()
    attn = attention_modules(model)
    a0 = attn[0]
    cfg = model.config
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    dim = cfg.hidden_size // heads
    res = {}
    for bs in map(int, args.batch_sizes.split(",")):
        enc, spans, lens = _encoded(tok, bs, args.prompt_tokens)
        keys = enc["input_ids"].shape[1] + args.new_tokens // 2
        # a cache of `keys - 1` positions; each timed decode step adds one and the next drops it
        ids = torch.randint(100, 20000, (bs, keys - 1))
        am = torch.cat([enc["attention_mask"], torch.ones(bs, keys - 1 - enc["attention_mask"].shape[1],
                                                          dtype=torch.long)], 1)
        _use(model, state, "stock", spans, lens, args.new_tokens)
        with torch.no_grad():
            cache = DynamicCache(config=cfg)
            model(input_ids=ids, attention_mask=am, past_key_values=cache, use_cache=True)
        step_mask = torch.cat([am, torch.ones(bs, 1, dtype=torch.long)], 1)
        nxt = torch.randint(100, 20000, (bs, 1))

        def step():
            if cache.get_seq_length() >= keys:
                cache.crop(-1)
            with torch.no_grad():
                model(input_ids=nxt, attention_mask=step_mask, past_key_values=cache, use_cache=True)

        q = torch.randn(bs, heads, 1, dim)
        k = torch.randn(bs, kv_heads, keys, dim)
        v = torch.randn(bs, kv_heads, keys, dim)
        # the mask a decode layer receives: none at batch 1 (no padding), else sdpa's bool mask
        layer_mask = None if bool(step_mask.all()) else step_mask.bool()[:, None, None, :]
        masks = {"no mask": None, "float mask": torch.zeros(bs, 1, 1, keys), "bool mask": torch.ones(bs, 1, 1, keys, dtype=torch.bool)}

        def bias_work(setting):
            """A state of its own per setting (not the model's): begin_forward, then every
            layer's mask_for, as one decode forward does."""
            st = comp.DriftState(CompensationConfig.from_label(setting))
            st.set_rows(spans, lens, args.new_tokens)

            def run():
                st.begin_forward(step_mask)
                for m in attn:
                    st.mask_for(m.layer_idx, layer_mask, q, k)
            return run

        calls = 5 if bs > 1 else 20
        fns = [("stock decode step", step)]
        fns += [(f"sdpa call, {name}", (lambda m=m: sdpa_attention_forward(a0, q, k, v, m, scaling=a0.scaling)))
                for name, m in masks.items()]
        fns += [(f"bias work per step, {s}", bias_work(s)) for s in args.settings.split(",")]
        times = rotated_rounds([(n, (lambda f=f: [f() for _ in range(calls)])) for n, f in fns], args.rounds)
        per = {n: statistics.median(t) / calls * 1e3 for n, t in times.items()}
        step_ms = per["stock decode step"]
        res[f"batch{bs}"] = {"keys": keys, "layers": len(attn), "ms": {n: round(x, 3) for n, x in per.items()},
                             "bias work / stock step": {s: round(per[f"bias work per step, {s}"] / step_ms, 4)
                                                        for s in args.settings.split(",")},
                             "sdpa float mask / no mask": round(per["sdpa call, float mask"] / per["sdpa call, no mask"], 3)}
        print(res[f"batch{bs}"], flush=True)
        state.clear_rows()
    return res


def _request_prompts(args):
    """hf-drift on the bundled model, and the first ``--requests`` drift_french_single
    requests rendered with its chat template."""
    from drift_eval.plugin.model import HFDriftLM  # deferred, start-up: loads lm_eval, requests

    lm = HFDriftLM(pretrained=smollm2_dir(), device="cpu", batch_size=args.batch_size)
    docs = read_requests()[: args.requests]
    prompts = [lm.apply_chat_template([{"role": "system", "content": system_prompt("en")},
                                       {"role": "user", "content": d["request"]}]) for d in docs]
    return lm, docs, prompts


def _raw_generate(model, tok, prompts, batch_size: int, tokens: int, cache=None):
    """Raw batched ``model.generate`` of exactly ``tokens`` tokens per prompt, padded on the
    left as lm-eval pads (a decoder-only model generates wrongly after right padding).
    ``cache``: None (transformers' own DynamicCache) or a function of the call's total
    length that returns the cache object to pass."""
    def run():
        for b in range(0, len(prompts), batch_size):
            enc = tok(prompts[b:b + batch_size], return_tensors="pt", padding=True, padding_side="left",
                      add_special_tokens=False)
            kw = {} if cache is None else {cache_kwarg(model): cache(enc["input_ids"].shape[1] + tokens)}
            with torch.no_grad():
                model.generate(**enc, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                               pad_token_id=tok.pad_token_id, **kw)
    return run


def _print_round(prefix: str = "", kernel: dict | None = None):
    """``rotated_rounds``' report: one line per round with each function's CPU time (and
    its kernel part, from ``kernel``: {name: [seconds per run]})."""
    def line(k, v):
        return f"{k} {v:.1f} s CPU" + (f" ({kernel[k][-1]:.1f} s kernel)" if kernel else "")
    return lambda r, got: print(f"{prefix}round {r}: " + ", ".join(line(k, v) for k, v in got.items()), flush=True)


def _against_raw(times: dict, name: str, ratio_key: str, requests: int, tokens: int, batch_size: int) -> dict:
    """Tokens per CPU second of each function, and the median over rounds of
    ``raw_generate``'s time / ``name``'s time."""
    total = requests * tokens
    return {"requests": requests, "tokens_per_request": tokens, "batch_size": batch_size,
            **{k: {"tokens_per_cpu_s": round(total / statistics.median(v), 2), "cpu_s": [round(x, 1) for x in v]}
               for k, v in times.items()},
            ratio_key: round(statistics.median(a / b for a, b in zip(times["raw_generate"], times[name])), 3)}


def child_raw(args) -> None:
    """``--child raw``: load the bundled model with transformers alone, render the first
    ``--requests`` drift_french_single requests with its chat template, and generate
    ``--sweep-tokens`` tokens for each in batches of ``--batch-size`` (``--cache``: whose
    key/value cache)."""
    d = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    prompts = [tok.apply_chat_template([{"role": "system", "content": system_prompt("en")},
                                        {"role": "user", "content": r["request"]}], tokenize=False,
                                       add_generation_prompt=True) for r in read_requests()[: args.requests]]
    cache = None if args.cache == "stock" else (lambda n: reserved_cache(model.config, n))
    _raw_generate(model, tok, prompts, args.batch_size, args.sweep_tokens, cache)()


def _children(fns: dict, args) -> tuple[dict, dict]:
    """Each of ``fns`` (name -> command, or a function that returns it) run to completion
    in a fresh process, in rotated rounds; the clock is the children's CPU time (user +
    system, from ``getrusage``), so that every run starts with the allocator state of a
    new process, as a real run does. Returns ({name: [CPU s]}, {name: [kernel CPU s]})
    and prints each round with its kernel part."""
    kernel = {name: [] for name in fns}

    def child(name, cmd):
        def run():
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_stime
            subprocess.run(cmd() if callable(cmd) else cmd, check=True, stdout=subprocess.DEVNULL,
                           env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
            kernel[name].append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_stime - before)
        return run

    def clock():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    times = rotated_rounds([(name, child(name, cmd)) for name, cmd in fns.items()], args.rounds,
                           _print_round(kernel=kernel), clock=clock)
    return times, {k: [round(x, 1) for x in v] for k, v in kernel.items()}


def _raw_child(args, cache: str) -> list:
    """The command of one ``--child raw`` run with ``args``' sizes and the given cache."""
    return [sys.executable, os.path.abspath(__file__), "--child", "raw", "--cache", cache,
            "--threads", str(args.threads), "--requests", str(args.requests),
            "--sweep-tokens", str(args.sweep_tokens), "--batch-size", str(args.batch_size)]


def part_sweep(args) -> dict:
    """``drift-eval sweep`` (a fresh output folder each round, no answer cache: model load,
    lm-eval, scoring and files) against a process that loads the model with
    transformers and calls ``model.generate`` on the same prompts and batches."""
    with tempfile.TemporaryDirectory() as tmp:
        sweep = [sys.executable, "-m", "drift_eval.cli", "sweep", "--settings", "none", "--tasks", "drift_french_single",
                 "--limit", str(args.requests), "--gen-kwargs", f"max_gen_toks={args.sweep_tokens}",
                 "--batch-size", str(args.batch_size), "--no-cache"]
        runs = itertools.count()  # a fresh output folder for every sweep run
        fns = {"sweep": lambda: [*sweep, "--output", os.path.join(tmp, f"out{next(runs)}")],
               "raw_generate": _raw_child(args, "stock")}
        times, kernel = _children(fns, args)
    res = _against_raw(times, "sweep", "ratio_sweep_vs_raw", args.requests, args.sweep_tokens, args.batch_size)
    res["kernel_cpu_s"] = kernel
    return res


def part_cache(args) -> dict:
    """Raw ``model.generate`` with transformers' DynamicCache against the same with
    hf-drift's reserved cache, each in a fresh process, same prompts and batches."""
    times, kernel = _children({"raw_generate": _raw_child(args, "stock"),
                               "raw_generate_reserved_cache": _raw_child(args, "reserved")}, args)
    res = _against_raw(times, "raw_generate_reserved_cache", "ratio_reserved_vs_stock_cache", args.requests,
                       args.sweep_tokens, args.batch_size)
    res["kernel_cpu_s"] = kernel
    return res


def part_path(args) -> dict:
    """hf-drift's own ``generate_until`` (its Watch processor, lm-eval's stop criteria and
    batching, the drift wrappers) against raw ``model.generate`` on the same rendered prompts
    and batch, at ``--path-tokens`` forced tokens: the per-step cost of the sweep's
    generation path, without model load or scoring."""
    from lm_eval.api.instance import Instance  # deferred, start-up: loads lm_eval

    lm, docs, prompts = _request_prompts(args)
    n = args.path_tokens
    reqs = [Instance("generate_until", d, (p, {"max_gen_toks": n, "min_new_tokens": n, "until": [lm.tokenizer.eos_token],
                                               "do_sample": False}), i) for i, (d, p) in enumerate(zip(docs, prompts))]
    times = rotated_rounds([("hf_drift_generate_until", lambda: lm.generate_until(reqs, disable_tqdm=True)),
                            ("raw_generate", _raw_generate(lm.model, lm.tokenizer, prompts, args.batch_size, n))],
                           args.rounds, _print_round())
    return _against_raw(times, "hf_drift_generate_until", "ratio_generate_until_vs_raw", len(prompts), n, args.batch_size)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("generation", "profile", "sweep", "cache", "path"))
    ap.add_argument("--child", choices=("raw",), help=argparse.SUPPRESS)  # one raw-generate run (sweep, cache)
    ap.add_argument("--cache", choices=("stock", "reserved"), default="stock", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--settings", default="log:1,const:1", help="compensation settings against stock (generation)")
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--prompt-tokens", type=int, default=600)
    ap.add_argument("--new-tokens", type=int, default=1024)
    ap.add_argument("--requests", type=int, default=12, help="drift_french_single requests (sweep)")
    ap.add_argument("--sweep-tokens", type=int, default=2048)
    ap.add_argument("--path-tokens", type=int, default=160, help="forced tokens (path)")
    ap.add_argument("--batch-size", type=int, default=12, help="batch size (sweep)")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    if not args.part and not args.child:
        ap.error("--part is required")
    torch.set_num_threads(args.threads)
    if args.child:
        child_raw(args)
        return
    result = {"generation": part_generation, "profile": part_profile, "sweep": part_sweep, "cache": part_cache,
              "path": part_path}[args.part](args)
    old = read_json(args.out) if os.path.isfile(args.out) else {}
    children = args.part in ("sweep", "cache")
    entry = {"command": "python benchmarks/long_generation_speed.py " + shlex.join(sys.argv[1:]),
             "threads": args.threads, "torch": torch.__version__, "model": "SmolLM2-135M-Instruct (float32, CPU)",
             "clock": "CPU time (user + kernel) of a fresh child process per run" if children else "process CPU time"}
    if args.part in ("sweep", "cache", "path"):
        old[args.part] = {**entry, "results": result}
    else:  # one entry per batch size, each with its own command
        part = old.get(args.part, {})
        part = part if "results" not in part else {}  # an older layout: one command for all
        for key, val in result.items():
            part[key] = {**entry, "results": val}
        old[args.part] = part
    write_json_atomic(args.out, old, indent=2)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
