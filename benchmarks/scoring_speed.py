"""Scoring time of one answer, per language, through lm-eval's task API (``process_results``
of ``drift_L_single``): this tree against a baseline install of the package, in alternating
rounds.

The answers are the committed single-turn answers of every language (docs/results/languages:
SmolLM2 and Qwen2.5-Coder, every compensation setting; 256 tokens each): the ``--answers``
longest per language, and one long answer planted from the eight longest (joined by blank
lines: about 2 048 tokens, the French protocol's forced length). Three figures per language,
in process CPU time:

* ``short``: one of the 256-token answers, in a warm process (see ``warm``);
* ``long_cold``: the planted long answer with every cache of the scoring emptied before it
  (the cross-check's words, the Chinese word blocks): the first answer a process scores;
* ``long_warm``: the planted long answer after the language's other committed answers (not
  the eight it is made of) went through the same process, as earlier answers of a run do.

The garbage collector is held off while an answer is timed. With the word lists and
langdetect's profiles loaded, one full collection takes about 60 ms, and the allocations
before it decide where it falls, so it would land in the same timed answer every round and a
median would keep it. A collection that an answer brings on runs after it instead, and every
collection of the process is timed apart: ``collections_ms_per_answer`` is their time over
the answers the process scored, timed and untimed (what collecting adds to each answer of a
run, on average).

Each round runs one fresh process per package (this tree, then the baseline, the order
swapped every round); each process warms up on answers it does not time, then times every
language once. Figures are medians over rounds; the ratio is the median of the per-round
ratios. ``--baseline DIR``: a folder holding another ``drift_eval`` (``pip install --no-deps
--target DIR .`` at an earlier commit); without it only this tree is timed.

    python benchmarks/scoring_speed.py [--answers 8] [--rounds 3] [--baseline DIR] [--json FILE]
"""
from __future__ import annotations

import argparse
import gc
import glob
import importlib
import json
import os
import statistics
import subprocess
import sys
import time

from drift_eval.files import write_json_atomic
from drift_eval.metrics import crosscheck

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "results", "languages")
LANGS = ["ar", "de", "es", "fr", "hi", "id", "it", "ja", "ko", "pt", "ru", "tr", "vi", "zh"]
FIGURES = ("short", "long_cold", "long_warm")
COLLECTIONS = "collections_ms_per_answer"


def answers(lang: str) -> list[tuple[str, int]]:
    """(text, answer tokens) of every committed single-turn answer in ``lang``, longest first."""
    found = []
    for path in glob.glob(os.path.join(ROOT, "*_single", lang, "**", f"samples_drift_{lang}_single_*.jsonl"),
                          recursive=True):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                s = json.loads(line)
                found.append((s["resps"][0][0], int(s.get("answer_tokens") or 0)))
    return sorted(found, key=lambda a: -a[1])


def _clear_caches() -> None:
    """Empty every cache the scoring keeps between answers (those a package has)."""
    crosscheck.clear_cache()
    for name in ("text.fold", "text.word_tokens", "langid.token_starts", "langid._script_counts", "lexicon._checked",
                 "lexicon._numeral", "lexicon._han_count"):
        module, function = name.split(".")
        cached = getattr(importlib.import_module(f"drift_eval.metrics.{module}"), function, None)
        if hasattr(cached, "cache_clear"):  # a package from before they were remembered has none
            cached.cache_clear()
    try:  # deferred, optional: a package from before the Chinese word blocks has no wordcut
        from drift_eval.metrics import wordcut
    except ImportError:  # a baseline from before the Chinese word blocks were kept
        return
    wordcut.clear_cache()


def worker(n_answers: int) -> dict:
    """One round in this process: {language: {figure: milliseconds}}."""
    # deferred, start-up: loads datasets, huggingface_hub, jinja2, lm_eval, numpy, pandas, requests, tqdm, yaml
    from lm_eval.tasks import TaskManager, get_task_dict

    tasks = get_task_dict([f"drift_{lang}_single" for lang in LANGS], TaskManager())
    out: dict = {}
    scored, collecting = [0], [0.0, 0.0]  # answers scored; collection time, and when the one under way began

    def collection(phase, _info):
        if phase == "start":
            collecting[1] = time.process_time()
        else:
            collecting[0] += time.process_time() - collecting[1]

    gc.callbacks.append(collection)
    for lang in LANGS:
        task = tasks[f"drift_{lang}_single"]
        doc = task.eval_docs[0]
        found = answers(lang)
        timed, others = [t for t, _ in found[:n_answers]], [t for t, _ in found[max(n_answers, 8):]]
        long = "\n\n".join(t for t, _ in found[:8])

        def score(text):
            scored[0] += 1
            gc.disable()  # a collection that this answer's allocations bring on runs after it
            try:
                t0 = time.process_time()
                task.process_results(doc, [text])
                return time.process_time() - t0
            finally:
                gc.enable()

        for text in others:  # loads the language model and every word list these answers need
            score(text)
        _clear_caches()
        long_cold = score(long)
        _clear_caches()
        for text in others:
            score(text)
        long_warm = score(long)
        _clear_caches()
        for text in others:
            score(text)
        short = statistics.median(score(t) for t in timed)
        out[lang] = {"short": 1000 * short, "long_cold": 1000 * long_cold, "long_warm": 1000 * long_warm,
                     "long_tokens": sum(k for _, k in found[:8]), "warm_answers": len(others)}
    gc.callbacks.remove(collection)
    out[COLLECTIONS] = 1000 * collecting[0] / scored[0]
    return out


def _round(n_answers: int, baseline: str | None) -> dict:
    env = dict(os.environ)
    if baseline:
        env["PYTHONPATH"] = os.pathsep.join([baseline, *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--answers", str(n_answers)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"a scoring round failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="a folder holding the drift_eval package to compare with")
    ap.add_argument("--json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.answers < 1 or args.rounds < 1:
        print("error: --answers and --rounds must be at least 1", file=sys.stderr)
        return 2
    if args.baseline and not os.path.isdir(os.path.join(args.baseline, "drift_eval")):
        print(f"error: --baseline {args.baseline} holds no drift_eval package", file=sys.stderr)
        return 2
    if args.worker:
        print(json.dumps(worker(args.answers)))
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

    packages = [("after", None)] + ([("before", args.baseline)] if args.baseline else [])
    rounds: dict = {name: [] for name, _ in packages}
    for r in range(args.rounds):
        for name, folder in packages[r % len(packages):] + packages[:r % len(packages)]:
            rounds[name].append(_round(args.answers, folder))
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    rows = []
    for lang in LANGS:
        row = {"language": lang, "long_tokens": rounds["after"][0][lang]["long_tokens"],
               "warm_answers": rounds["after"][0][lang]["warm_answers"]}
        for name in rounds:
            for fig in FIGURES:
                row[f"{fig}_{name}_ms"] = round(statistics.median(x[lang][fig] for x in rounds[name]), 2)
        if args.baseline:
            for fig in FIGURES:
                row[f"{fig}_ratio"] = round(statistics.median(
                    a[lang][fig] / b[lang][fig] for a, b in zip(rounds["after"], rounds["before"])), 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    collections = {name: round(statistics.median(x[COLLECTIONS] for x in rounds[name]), 3) for name in rounds}
    print(json.dumps({COLLECTIONS: collections}), flush=True)
    command = f"python benchmarks/scoring_speed.py --answers {args.answers} --rounds {args.rounds}"
    out = {"command": command + (" --baseline DIR" if args.baseline else ""),
           "clock": "process CPU time, one fresh process per package and round; the garbage collector is held "
                    "off while an answer is timed, and its collections are timed apart",
           COLLECTIONS: collections, "rows": rows}
    if args.json:
        write_json_atomic(args.json, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
