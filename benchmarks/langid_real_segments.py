"""Held-out segments of real answers for the per-language language-ID sets.

    python benchmarks/langid_real_segments.py draw > candidates.jsonl   # unlabelled

The tuning part of ``tests/data/langid/L.jsonl`` holds segments of SmolLM2's answers; the
held-out part held written segments only. ``draw`` takes segments of the other model's
answers (Qwen2.5-Coder-0.5B-Instruct, ``drift_L_single``, docs/results/languages/qwen_single),
which no step of the rule was chosen on, for the non-Latin targets that model ran (zh ja hi
ar ru). Each answer is cut into the scorer's 128-token segments
(``drift_eval.metrics.langid.segments``); segments shorter than 40 metric tokens, exact
duplicates and texts already in the language's set are skipped; the rest are shuffled with a
fixed seed and taken in that order, ``PER_CALL`` that the rule (alone on the segment) calls
"left L" and ``PER_CALL`` it calls "in L", so that both kinds of error can show. Each record
comes out with ``left_target: null``; the label is added by reading the text, and the record
then joins the language's held-out part (category ``real_output``).
"""
from __future__ import annotations

import glob
import json
import os
import random
import sys

from drift_eval.metrics import langid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(ROOT, "docs", "results", "languages", "qwen_single")
SETS = os.path.join(ROOT, "tests", "data", "langid")
LANGS = ("zh", "ja", "hi", "ar", "ru")
PER_CALL = 4
MIN_TOKENS = 40
SEED = 30


def _answers(lang: str):
    for path in sorted(glob.glob(os.path.join(RUNS, lang, "none", "*", f"samples_drift_{lang}_single_*.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                yield row["doc_id"], row["resps"][0][0]


def draw(lang: str) -> list[dict]:
    with open(os.path.join(SETS, f"{lang}.jsonl"), encoding="utf-8") as fh:
        known = {json.loads(line)["text"] for line in fh if line.strip()}
    pool, seen = [], set()
    for doc, text in _answers(lang):
        for k, seg in enumerate(langid.segments(text)):
            if len(langid.tokens(seg)) < MIN_TOKENS or seg in seen or seg in known:
                continue
            seen.add(seg)
            pool.append((doc, k, seg))
    random.Random(f"{SEED}-{lang}").shuffle(pool)
    taken = {True: [], False: []}
    for doc, k, seg in pool:
        call = langid.left_language(seg, lang)
        if len(taken[call]) < PER_CALL:
            taken[call].append((doc, k, seg))
    out = []
    for n, (doc, k, seg) in enumerate(sorted(taken[True] + taken[False]), 1):
        out.append({"id": f"{lang}-r{n:03d}", "lang": lang, "split": "heldout", "category": "real_output",
                    "left_target": None, "text": seg,
                    "note": f"Qwen2.5-Coder-0.5B-Instruct, drift_{lang}_single doc {doc}, segment {k + 1}"})
    return out


def main(argv: list[str]) -> int:
    if argv[:1] != ["draw"]:
        print("usage: python benchmarks/langid_real_segments.py draw", file=sys.stderr)
        return 2
    for lang in LANGS:
        for rec in draw(lang):
            print(json.dumps(rec, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
