"""Precision and recall of the language-ID rule for "this segment left French" on the
hand-labelled set (tests/data/langid_segments.jsonl), against plain fastText.

    python benchmarks/langid_rule.py [--json benchmarks/results/langid_rule.json] [--runs DIR ...]

Each text is scored whole, as one segment. "Left French" = a known label other than fr.
``--runs`` also shows the rule's effect on real runs: every ``drift_french_single`` answer
logged under DIR (lm-eval or ``drift-eval sweep`` output) is segmented as the task does and
scored twice, with the rule and with plain fastText labels, and the answers whose
``fully_french`` or ``starts_french`` differ are counted and listed.
"""
from __future__ import annotations

import argparse
import glob
import os
from dataclasses import asdict

from drift_eval.files import read_jsonl, write_json_atomic
from drift_eval.metrics import drift, langid, lid_model
from drift_eval.metrics.stats import precision_recall

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "langid_segments.jsonl")
DECIDERS = {
    "rule": langid.left_language,
    "plain_fasttext": lambda text: (lambda p: p.known and p.lang != "fr")(lid_model.identify(text)),
}


def _answers(folder: str):
    """(run file, doc_id, answer text) of every drift_french_single sample under ``folder``."""
    for path in sorted(glob.glob(os.path.join(folder, "**", "samples_drift_french_single_*.jsonl"), recursive=True)):
        for s in read_jsonl(path, "samples file", required=("doc_id", "resps")):
            text = s["resps"][0][0] if isinstance(s["resps"][0], list) else s["resps"][0]
            yield os.path.relpath(path, folder), s["doc_id"], text


def effect_on_runs(folders) -> dict:
    """Per-answer ``fully_french`` / ``starts_french`` with the rule and with plain fastText."""
    out = {}
    for folder in folders:
        rows = []
        for path, doc, text in _answers(folder):
            pieces = langid.segments(text, drift.SEGMENT_TOKENS)
            rule = [x.lang for x in langid.label_segments(pieces, "fr")]
            plain = [p.lang for p in lid_model.identify_many(pieces)]
            score = {name: {"fully_french": drift.all_in(labels), "starts_french": drift.starts_in(labels)}
                     for name, labels in (("rule", rule), ("plain_fasttext", plain))}
            rows.append({"file": path, "doc_id": doc, **score,
                         "differs": score["rule"] != score["plain_fasttext"]})
        n = len(rows)
        summary = {name: {m: sum(r[name][m] for r in rows) for m in ("fully_french", "starts_french")}
                   for name in ("rule", "plain_fasttext")}
        out[folder] = {"answers": n, **summary, "differ": [r for r in rows if r["differs"]]}
        print(f"{folder}: {n} answers; fully_french rule {summary['rule']['fully_french']} / plain "
              f"{summary['plain_fasttext']['fully_french']}; starts_french rule {summary['rule']['starts_french']} "
              f"/ plain {summary['plain_fasttext']['starts_french']}; {len(out[folder]['differ'])} answers differ")
        for r in out[folder]["differ"]:
            print(f"    {r['file']} doc {r['doc_id']}: rule {r['rule']}, plain {r['plain_fasttext']}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--runs", nargs="*", default=[], help="results folders whose single-turn answers to rescore")
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
    if args.runs:
        out["runs"] = effect_on_runs(args.runs)
    if args.json:
        write_json_atomic(args.json, out, indent=2)


if __name__ == "__main__":
    main()
