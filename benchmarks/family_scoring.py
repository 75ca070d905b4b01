"""Scoring a whole ``drift_languages`` family, at full size, on this machine's cores: lm-eval's
path (every answer scored in the main process, one document after another) against the
scoring processes of ``drift_eval.plugin.scoring`` (every answer handed to the pool, then
read back through the task's ``process_results``, as a run does).

Full size, per language (14): 200 forced single-turn answers of about 2 048 tokens for
``drift_L_single`` and as many for ``drift_L_single_native``, and 100 eight-turn
conversations for ``drift_L_multiturn``: 5 600 answers and 1 400 conversations (11 200
turns). The answers are planted from the committed ones (docs/results/languages): each
single-turn answer joins eight committed single-turn answers of its language (256 tokens
each), a different rotation for each document; each conversation's eight replies join two
such answers each (about 512 tokens, the conversations' length), its user turns those of
its document. ``--scale`` takes a share of every count. Rounds alternate the two paths (wall
clock: the pool's work is in other processes; one answer per task is scored before, so
that loading the language-ID model and word lists is not timed), and every round checks
that both give the same values for every document.

    python benchmarks/family_scoring.py [--scale 1.0] [--rounds 2] [--workers auto] [--json FILE]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time

from drift_eval.conversation import ConversationSpec, dump_messages
from drift_eval.errors import DriftUsageError
from drift_eval.files import write_json_atomic
from drift_eval.plugin import scoring
from drift_eval.plugin.answers import Answer

sys.path.insert(0, os.path.dirname(__file__))
from _timing import rotated_rounds  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "docs", "results", "languages")
LANGS = ["ar", "de", "es", "fr", "hi", "id", "it", "ja", "ko", "pt", "ru", "tr", "vi", "zh"]
SINGLE, CONVERSATIONS = 200, 100  # per language and task, at full size


def _samples(pattern: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True)):
        with open(path, encoding="utf-8") as fh:
            found.extend(json.loads(line) for line in fh)
    return found


def planted(lang: str, scale: float, conversation_docs: list):
    """(single-turn answers, conversations) of ``lang``: planted as the docstring says."""
    texts = [s["resps"][0][0] for s in _samples(f"*_single/{lang}/**/samples_drift_{lang}_single_*.jsonl")]
    if len(texts) < 16:
        raise SystemExit(f"error: too few committed answers of {lang} under {ROOT}")
    single = []
    for i in range(max(1, round(SINGLE * scale))):
        pick = [texts[(i + 7 * k) % len(texts)] for k in range(8)]
        single.append(Answer("\n\n".join(pick), tokens=2048, forced_length=True, instruction_placement="system"))
    convs = []
    for i in range(max(1, round(CONVERSATIONS * scale))):
        spec = ConversationSpec.from_json(conversation_docs[i % len(conversation_docs)]["spec"])
        messages = [{"role": "system", "content": spec.system_prompt}]
        for t in range(1, len(spec.user_turns) + 1):
            reply = "\n\n".join(texts[(3 * i + 2 * t + k) % len(texts)] for k in range(2))
            messages += [{"role": "user", "content": spec.user_message(t)}, {"role": "assistant", "content": reply}]
        convs.append(dump_messages(messages))
    return single, convs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", default="auto")
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    try:
        workers = scoring.workers_setting(args.workers)
    except DriftUsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not 0 < args.scale <= 1 or args.rounds < 1 or workers < 1:
        print("error: --scale must be in (0, 1], --rounds and --workers at least 1", file=sys.stderr)
        return 2
    # deferred, start-up: loads datasets, huggingface_hub, jinja2, lm_eval, numpy, pandas, requests, tqdm, yaml
    from lm_eval.tasks import TaskManager

    names = [f"drift_{lang}_{kind}" for lang in LANGS for kind in ("single", "single_native", "multiturn")]
    tasks = TaskManager().load(names)["tasks"]
    items = []  # (task, doc, answer)
    for lang in LANGS:
        single, convs = planted(lang, args.scale, list(tasks[f"drift_{lang}_multiturn"].eval_docs))
        for kind in ("single", "single_native"):
            task = tasks[f"drift_{lang}_{kind}"]
            docs = list(task.eval_docs)
            items += [(task, docs[i % len(docs)], a) for i, a in enumerate(single)]
        task = tasks[f"drift_{lang}_multiturn"]
        docs = list(task.eval_docs)
        items += [(task, docs[i % len(docs)], c) for i, c in enumerate(convs)]
    print(f"{len(items)} answers and conversations of {len(LANGS)} languages; {workers} scoring processes",
          flush=True)
    values: dict = {}
    for task in {id(t): t for t, _, _ in items}.values():  # loads the language-ID model and word lists once
        doc = next(d for t, d, _ in items if t is task)
        task.process_results(doc, [next(a for t, _, a in items if t is task)])

    def main_process():
        values["main"] = [task.process_results(doc, [a]) for task, doc, a in items]

    def pool():
        sent = scoring.POOL.submit(workers, items)
        assert sent == len(items), (sent, len(items))
        values["pool"] = [task.process_results(doc, [a]) for task, doc, a in items]

    def report(r, got):
        assert values["main"] == values["pool"], "the two paths gave different values"
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:.1f} s" for k, v in got.items()), flush=True)

    times = rotated_rounds([("main", main_process), ("pool", pool)], args.rounds, report, clock=time.perf_counter)
    main_s, pool_s = statistics.median(times["main"]), statistics.median(times["pool"])
    print(f"median wall clock: main process {main_s:.1f} s, {workers} scoring processes {pool_s:.1f} s "
          f"({main_s / pool_s:.2f}x); the same values for all {len(items)}")
    if args.json:
        write_json_atomic(args.json, {"scale": args.scale, "answers": len(items), "workers": workers,
                                      "cores": os.cpu_count(), "rounds": times, "main_s": main_s, "pool_s": pool_s})
    return 0


if __name__ == "__main__":
    sys.exit(main())
