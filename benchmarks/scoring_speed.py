"""Scoring time of one forced answer, per language: the task's whole ``process_results``,
and within it the seeded ``langdetect`` cross-check, langdetect's own reading against the
project's (``drift_eval.metrics.crosscheck``: the same verdicts, shown in tests/test_langid.py).

The answers are the committed single-turn answers of every language (docs/results/languages:
SmolLM2 and Qwen2.5-Coder, every compensation setting; 256 tokens each), the ``--answers``
longest per language, and one long answer planted from them (the eight joined by blank
lines: about 2 048 tokens, the French protocol's forced length), scored through lm-eval's
task API (``TaskManager`` -> ``process_results``). Each
round times, per language, the three passes in an order rotated from round to round,
in process CPU time; the cross-check's cache of words is emptied before each of its passes,
so that every pass starts cold. Per-answer figures are medians over rounds. "Before" is the
whole scoring time with langdetect's own reading in place of the project's: the measured
whole time, less the project's cross-check, plus langdetect's (computed, not timed whole).

    python benchmarks/scoring_speed.py [--answers 8] [--rounds 5] [--json FILE]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _timing import rotated_rounds  # noqa: E402

from drift_eval.files import write_json_atomic  # noqa: E402
from drift_eval.metrics import crosscheck  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "docs", "results", "languages")
LANGS = ["ar", "de", "es", "fr", "hi", "id", "it", "ja", "ko", "pt", "ru", "tr", "vi", "zh"]


def answers(lang: str, n: int) -> list[tuple[str, int]]:
    """(text, answer tokens) of the ``n`` longest committed single-turn answers in ``lang``."""
    found = []
    for path in glob.glob(os.path.join(ROOT, "*_single", lang, "**", f"samples_drift_{lang}_single_*.jsonl"),
                          recursive=True):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                s = json.loads(line)
                found.append((s["resps"][0][0], int(s.get("answer_tokens") or 0)))
    return sorted(found, key=lambda a: -a[1])[:n]


def stock_langdetect(text: str) -> str:
    from langdetect.detector import Detector
    from langdetect.lang_detect_exception import LangDetectException

    d = Detector(crosscheck._factory())
    d.append(text)
    try:
        return d.detect()
    except LangDetectException:
        return crosscheck.UNKNOWN


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.answers < 1 or args.rounds < 1:
        print("error: --answers and --rounds must be at least 1", file=sys.stderr)
        return 2
    from lm_eval.tasks import TaskManager, get_task_dict

    tasks = get_task_dict([f"drift_{lang}_single" for lang in LANGS], TaskManager())
    rows = []
    for lang in LANGS:
        task = tasks[f"drift_{lang}_single"]
        doc = task.eval_docs[0]
        found = answers(lang, args.answers)
        tokens = [k for _, k in found]
        texts = [t for t, _ in found]
        texts.append("\n\n".join(t for t, _ in found[:8]))  # the planted long answer
        long_tokens = sum(tokens[:8])
        assert [stock_langdetect(t) for t in texts] == [crosscheck.detect(t) for t in texts]
        task.process_results(doc, [texts[0]])  # the language model and word lists are loaded once

        row = {"language": lang, "answers": len(texts) - 1, "answer_tokens_median": statistics.median(tokens),
               "long_answer_tokens": long_tokens}
        for label, part in (("", texts[:-1]), ("long_", texts[-1:])):
            def whole(part=part):
                crosscheck.clear_cache()
                for t in part:
                    task.process_results(doc, [t])

            def ours(part=part):
                crosscheck.clear_cache()
                for t in part:
                    crosscheck.detect(t)

            def theirs(part=part):
                for t in part:
                    stock_langdetect(t)

            times = rotated_rounds([("whole", whole), ("crosscheck", ours), ("langdetect", theirs)], args.rounds)
            ms = {k: 1000 * statistics.median(v) / len(part) for k, v in times.items()}
            row.update({f"{label}after_ms": round(ms["whole"], 2),
                        f"{label}before_ms": round(ms["whole"] - ms["crosscheck"] + ms["langdetect"], 2),
                        f"{label}crosscheck_ms": round(ms["crosscheck"], 2),
                        f"{label}langdetect_ms": round(ms["langdetect"], 2)})
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {"command": f"python benchmarks/scoring_speed.py --answers {args.answers} --rounds {args.rounds}",
           "clock": "process CPU time, one process", "rows": rows}
    if args.json:
        write_json_atomic(args.json, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
