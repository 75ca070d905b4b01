"""Generation speed of vLLM's CPU build against Hugging Face transformers (lm-eval's ``hf``
backend's engine) on the same forced-length requests, in one run with alternating rounds.

SmolLM2-135M-Instruct (the bundled model's safetensors copy) in float32 on both engines,
eight chat prompts with the drift tasks' system instruction, greedy, every answer forced to
``--new-tokens`` tokens (vLLM: ``min_tokens`` with the end-of-turn ids as ``stop_token_ids``;
transformers: ``min_new_tokens``), one batch of all eight. Each round runs both engines, in
an order that alternates from round to round; the ratio is the median over rounds of
(transformers' wall time / vLLM's) within a round. The answers are compared token for token.

Run it in the vLLM environment (``./setup.sh --vllm``):

    VLLM_TARGET_DEVICE=cpu VLLM_ENABLE_V1_MULTIPROCESSING=0 OMP_NUM_THREADS=1 \\
        python benchmarks/vllm_speed.py [--new-tokens 128] [--rounds 3] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from drift_eval.files import write_json_atomic
from drift_eval.plugin.local_models import smollm2_dir
from drift_eval.taskdata.french import system_prompt

USERS = ["Explain photosynthesis.", "Tell me a long story about a cat.", "How does a bicycle work?",
         "Plan a trip to Japan.", "Describe the life cycle of a star.", "Write a letter to a neighbour.",
         "How do I bake bread at home?", "What makes a good film?"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.new_tokens < 1 or args.rounds < 1:
        print("error: --new-tokens and --rounds must be at least 1", file=sys.stderr)
        return 2

    import torch  # deferred, start-up: loads numpy, torch, tqdm
    # deferred, start-up: loads huggingface_hub, jinja2, numpy, tqdm, transformers, yaml
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm import LLM, SamplingParams, TokensPrompt  # deferred, optional dependency: vllm

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    path = smollm2_dir()
    tok = AutoTokenizer.from_pretrained(path)
    system = system_prompt("en")
    prompts = [tok.apply_chat_template([{"role": "system", "content": system}, {"role": "user", "content": u}],
                                       tokenize=False, add_generation_prompt=True) for u in USERS]
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    ends = sorted({tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")})
    n = args.new_tokens

    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok.padding_side = "left"
    batch = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    engine = LLM(model=path, dtype="float32", distributed_executor_backend="uni", max_model_len=2048, seed=0,
                 enable_prefix_caching=False)
    params = SamplingParams(temperature=0.0, min_tokens=n, max_tokens=n, stop_token_ids=ends,
                            skip_special_tokens=False)

    def run_hf():
        with torch.inference_mode():
            out = hf.generate(**batch, min_new_tokens=n, max_new_tokens=n, do_sample=False, eos_token_id=ends,
                              pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else ends[0])
        return [row[batch["input_ids"].shape[1]:].tolist() for row in out]

    def run_vllm():
        outs = engine.generate([TokensPrompt(prompt_token_ids=i) for i in ids], params, use_tqdm=False)
        return [list(o.outputs[0].token_ids) for o in outs]

    engines = {"hf": run_hf, "vllm": run_vllm}
    times: dict = {"hf": [], "vllm": []}
    tokens: dict = {}
    for r in range(args.rounds):
        for name in (("hf", "vllm") if r % 2 == 0 else ("vllm", "hf")):
            t0 = time.perf_counter()
            tokens[name] = engines[name]()
            times[name].append(time.perf_counter() - t0)
        print(f"round {r + 1}: hf {times['hf'][-1]:.1f} s, vllm {times['vllm'][-1]:.1f} s", flush=True)
    ratios = [h / v for h, v in zip(times["hf"], times["vllm"])]
    same = sum(a == b for a, b in zip(tokens["hf"], tokens["vllm"]))
    result = {
        "command": f"python benchmarks/vllm_speed.py --new-tokens {n} --rounds {args.rounds}",
        "environment": "./setup.sh --vllm; VLLM_TARGET_DEVICE=cpu VLLM_ENABLE_V1_MULTIPROCESSING=0 OMP_NUM_THREADS=1",
        "model": "SmolLM2-135M-Instruct (float32)", "requests": len(USERS), "new_tokens": n,
        "threads": torch.get_num_threads(), "rounds": args.rounds,
        "hf_seconds": times["hf"], "vllm_seconds": times["vllm"],
        "hf_over_vllm_median": statistics.median(ratios),
        "answers_forced_to_length": {k: sum(len(t) == n for t in v) for k, v in tokens.items()},
        "answers_identical": same,
    }
    print(json.dumps(result, indent=2))
    if args.out:
        write_json_atomic(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
