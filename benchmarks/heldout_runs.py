"""Fresh answers for the held-out language-ID sets: both bundled models on requests and
conversations of the drift_languages bank that no committed run used, so that no segment of
the held-out sets was seen while the rule was chosen (docs/metrics.md, "Held out per
language"). The committed language runs (docs/results/languages) used the bank's first 36
requests and first 8 conversations; by default these runs use requests 37-108 and
conversations 9-16 (rule 2.0's draw); rule 2.1's draw used requests 109-132 and
conversations 17-18, rule 2.2's requests 133-156 and conversation 19 (and requests 157-180
for hi, tr, ko, id and ar); rule 2.3's requests 181-200 and conversations 20-21.
``--kinds single_native``: single-turn runs with the instruction worded in L.

    python benchmarks/heldout_runs.py OUT [--models smollm2,qwen=DIR] [--languages fr,de,...]
        [--kinds single,single_native,multiturn] [--workers 2] [--requests 37-108]
        [--conversation-range 9-16] [--conversations N]

Each (model, language, kind) is one real ``lm_eval`` run (``--samples`` picks the documents)
into ``OUT/<model>/<kind>/<L>/``; a run whose samples file is there is skipped, so an
interrupted job resumes where it stopped. Single turn: answers forced to 256 tokens
(``max_gen_toks=256``); eight turns: up to 128 tokens a turn, the conversation cache on. Each
run has one thread (two runs share the two cores). ``qwen=DIR``: the folder of
Qwen2.5-Coder-0.5B-Instruct's GGUF file (``../shared/models/fetch-qwen-coder-0.5b``)."""
from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from drift_eval.metrics.languages import TARGETS
from drift_eval.plugin.local_models import smollm2_dir

SINGLE = "37-108"         # requests of the bank (1-based, inclusive) for the rule 2.0 draw
CONVERSATIONS = "9-16"    # conversations of the bank for the rule 2.0 draw
QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def _model_args(model: str, spec: str | None) -> str:
    if model == "smollm2":
        return f"pretrained={smollm2_dir()}"
    if not spec or not os.path.isfile(os.path.join(spec, QWEN_FILE)):
        sys.exit(f"heldout_runs: qwen needs qwen=DIR, the folder of {QWEN_FILE}")
    return f"pretrained={spec},gguf_file={QWEN_FILE}"


def _span(text: str, most: int) -> list[int]:
    """'A-B' (1-based, inclusive, within the bank's MOST items) -> document indices."""
    try:
        first, last = (int(x) for x in text.split("-"))
    except ValueError:
        first = last = 0
    if not 1 <= first <= last <= most:
        raise argparse.ArgumentTypeError(f"{text!r} is not A-B with 1 <= A <= B <= {most}")
    return list(range(first - 1, last))


def _run(out: str, model: str, args: str, lang: str, kind: str, single: list[int],
         conversations: list[int]) -> str:
    folder = os.path.join(out, model, kind, lang)
    if glob.glob(os.path.join(folder, "**", "samples_*.jsonl"), recursive=True):
        return f"{model} {kind} {lang}: done before"
    task = f"drift_{lang}_{kind}"
    docs = conversations if kind == "multiturn" else single
    extra = ["--gen_kwargs", "max_gen_toks=256", "--batch_size", "36"] if kind != "multiturn" else \
        ["--gen_kwargs", "max_gen_toks=128", "--batch_size", str(len(docs))]
    model_args = args + (",conversation_cache=on" if kind == "multiturn" else "")
    cmd = ["lm_eval", "--model", "hf-drift", "--model_args", model_args, "--tasks", task,
           "--samples", json.dumps({task: docs}), "--apply_chat_template", "--device", "cpu",
           "--output_path", folder + ".partial", "--log_samples", *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    shutil.rmtree(folder + ".partial", ignore_errors=True)  # an interrupted run's files
    start = time.time()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return f"{model} {kind} {lang}: FAILED ({done.stderr[-400:]})"
    os.replace(folder + ".partial", folder)
    return f"{model} {kind} {lang}: {time.time() - start:.0f} s"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--models", default="smollm2", help="smollm2 and/or qwen=DIR, comma-separated")
    p.add_argument("--languages", default=",".join(TARGETS))
    p.add_argument("--kinds", default="single,multiturn",
                   help="single, single_native (the instruction worded in L) and/or multiturn")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--requests", default=SINGLE, type=lambda t: _span(t, 200), metavar="A-B",
                   help=f"single-turn runs: requests A-B of the bank (default {SINGLE})")
    p.add_argument("--conversation-range", default=CONVERSATIONS, type=lambda t: _span(t, 100),
                   metavar="A-B", help=f"eight-turn runs: conversations A-B (default {CONVERSATIONS})")
    p.add_argument("--conversations", type=int, default=None, metavar="N",
                   help="eight-turn runs: only the first N of that range")
    a = p.parse_args(argv)
    if a.conversations is not None and not 1 <= a.conversations <= len(a.conversation_range):
        p.error(f"--conversations must be 1-{len(a.conversation_range)}")
    if not set(a.kinds.split(",")) <= {"single", "single_native", "multiturn"}:
        p.error(f"--kinds: {a.kinds!r} is not a comma-separated list of single, single_native, multiturn")
    convs = a.conversation_range[:a.conversations]
    models = {m.split("=")[0]: _model_args(m.split("=")[0], m.split("=", 1)[1] if "=" in m else None)
              for m in a.models.split(",")}
    jobs = [(m, args, lang, kind) for kind in a.kinds.split(",") for lang in a.languages.split(",")
            for m, args in models.items()]
    with concurrent.futures.ThreadPoolExecutor(a.workers) as pool:
        for line in pool.map(lambda j: _run(a.out, *j, a.requests, convs), jobs):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
