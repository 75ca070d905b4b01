"""How much of a Chinese answer's scoring is cutting its words: the planted 2 048-token Chinese
answer of ``scoring_speed.py``, scored warm through ``process_results`` of ``drift_zh_single``,
as it is (``as_is``) and with every Chinese block it holds cut beforehand (``cut_before``:
what the scoring would take with a segmenter that cost nothing).

Each round runs one fresh process per figure, in an order swapped every round. A process warms
up as ``scoring_speed.py``'s ``long_warm`` does (the language's other committed answers, the
caches emptied, the same answers again). For ``cut_before`` it then cuts the blocks the scoring
will ask ``metrics/wordcut.py`` for: each segment's text as the word-list check reads it
(cleaned, read as Simplified) and each line as LCB's line pass reads it, whole; the memory
of token starts that this fills is emptied again, so that the two figures differ by the
cutting alone.
The garbage collector is held off while the answer is timed. Figures are process CPU time,
medians over rounds, and the median of the per-round differences (``cutting_ms``);
``blocks_cut_before``: how many of the blocks the process had not cut before;
``blocks_cut_while_scoring_as_is``: how many the scoring cut itself as it is (with the blocks
cut beforehand it cuts none, which each round checks).

    python benchmarks/chinese_cut.py [--rounds 5] [--json FILE]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import scoring_speed  # beside this file: the committed answers, the planted answer, the caches it empties
from drift_eval.files import write_json_atomic
from drift_eval.metrics import drift, langid, lexicon, wordcut

FIGURES = ("as_is", "cut_before")


def _cut_beforehand(text: str) -> int:
    """Cut every Chinese block that scoring ``text`` cuts; how many of them the process had
    not cut before."""
    before = wordcut._block_words.cache_info().misses
    spans = langid.segment_spans(text, drift.SEGMENT_TOKENS, whole_tail=True)
    opened = langid.opened_at(text, [a for a, _ in spans])
    simplify = lexicon._simplify()
    for mark, (a, b) in zip(opened, spans):
        wordcut.chinese_words(simplify(langid.clean_for_lid(mark + text[a:b])))
    for line in drift.lcb_lines(text, 0, "zh"):  # every line, none cut to count its tokens
        wordcut.chinese_words(line)
    langid.token_starts.cache_clear()
    return wordcut._block_words.cache_info().misses - before


def worker(figure: str) -> dict:
    """One process: the planted answer's scoring time in ms, warm, as ``figure`` says."""
    # deferred, start-up: loads datasets, huggingface_hub, jinja2, lm_eval, numpy, pandas, requests, tqdm, yaml
    from lm_eval.tasks import TaskManager, get_task_dict

    task = get_task_dict(["drift_zh_single"], TaskManager())["drift_zh_single"]
    doc = task.eval_docs[0]
    found = scoring_speed.answers("zh")
    others = [t for t, _ in found[8:]]
    long = "\n\n".join(t for t, _ in found[:8])
    for text in others:
        task.process_results(doc, [text])
    scoring_speed._clear_caches()
    for text in others:
        task.process_results(doc, [text])
    new_blocks = _cut_beforehand(long) if figure == "cut_before" else None
    misses = wordcut._block_words.cache_info().misses
    gc.disable()
    try:
        t0 = time.process_time()
        task.process_results(doc, [long])
        ms = 1000 * (time.process_time() - t0)
    finally:
        gc.enable()
    cut_while_scoring = wordcut._block_words.cache_info().misses - misses
    if figure == "cut_before" and cut_while_scoring:
        raise SystemExit(f"the scoring still cut {cut_while_scoring} blocks that were to be cut beforehand")
    return {"ms": ms, "new_blocks": new_blocks, "cut_while_scoring": cut_while_scoring}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--worker", choices=FIGURES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rounds < 1:
        print("error: --rounds must be at least 1", file=sys.stderr)
        return 2
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        print(f"error: --json {args.json}: no such folder", file=sys.stderr)
        return 2
    if args.worker:
        print(json.dumps(worker(args.worker)))
        return 0
    times: dict = {name: [] for name in FIGURES}
    new_blocks = cut_as_is = None
    for r in range(args.rounds):
        for name in (FIGURES if r % 2 == 0 else FIGURES[::-1]):
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name],
                                  capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"a round failed:\n{done.stderr[-2000:]}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            times[name].append(got["ms"])
            new_blocks = got["new_blocks"] if name == "cut_before" else new_blocks
            cut_as_is = got["cut_while_scoring"] if name == "as_is" else cut_as_is
        print(f"round {r + 1} of {args.rounds}: " + ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in times.items()),
              file=sys.stderr, flush=True)
    out = {"command": f"python benchmarks/chinese_cut.py --rounds {args.rounds}",
           "clock": "process CPU time of process_results, one fresh process per figure and round, the garbage "
                    "collector held off",
           "rounds_ms": {k: [round(x, 2) for x in v] for k, v in times.items()},
           **{f"{k}_ms": round(statistics.median(v), 2) for k, v in times.items()},
           "blocks_cut_before": new_blocks,
           "blocks_cut_while_scoring_as_is": cut_as_is,
           "cutting_ms": round(statistics.median(a - b for a, b in zip(times["as_is"], times["cut_before"])), 2)}
    print(json.dumps(out, indent=2))
    if args.json:
        write_json_atomic(args.json, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
