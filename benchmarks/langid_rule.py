"""Precision and recall of the language-ID rule for "this segment left French" on the
hand-labelled set (tests/data/langid_segments.jsonl), against plain fastText.

    python benchmarks/langid_rule.py [--json benchmarks/results/langid_rule.json]

Each text is scored whole, as one segment. "Left French" = a known label other than fr.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import asdict

from drift_eval.files import read_jsonl, write_json_atomic
from drift_eval.metrics import langid
from drift_eval.metrics.stats import precision_recall

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "langid_segments.jsonl")
DECIDERS = {
    "rule": langid.left_language,
    "plain_fasttext": lambda text: (lambda p: p.known and p.lang != "fr")(langid.identify(text)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    rows = read_jsonl(args.data, "labelled segment file", required=("text", "left_french", "category"))
    out = {"rule_settings": asdict(langid.SegmentRule())}
    for name, decide in DECIDERS.items():
        pred = [decide(r["text"]) for r in rows]
        res = precision_recall(pred, [r["left_french"] for r in rows])
        res["errors"] = [{"id": r["id"], "category": r["category"], "predicted_left_french": p}
                         for r, p in zip(rows, pred) if p != r["left_french"]]
        out[name] = res
        print(f"{name:15s} precision {res['precision']:.3f} recall {res['recall']:.3f} "
              f"(tp {res['tp']}, fp {res['fp']}, fn {res['fn']}, tn {res['tn']}; {res['n']} segments)")
        for e in res["errors"]:
            print(f"    {e['id']} ({e['category']}): predicted left_french={e['predicted_left_french']}")
    if args.json:
        write_json_atomic(args.json, out, indent=2)


if __name__ == "__main__":
    main()
