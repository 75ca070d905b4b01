"""Precision and recall of the language-ID rule for "this segment left the target language",
per target language, on the tuning and held-out parts of the hand-labelled sets
(tests/data/langid/<L>.jsonl; French: the held-out part only, its tuning set is
tests/data/langid_segments.jsonl), against plain fastText (its top label on the raw text).
The held-out part is shown in two: the written segments (``heldout``) and the segments of
another model's real answers (``heldout_real``, category ``real_output``: zh ja hi ar ru,
drawn and labelled before they were scored, ``benchmarks/langid_real_segments.py``).

    python benchmarks/langid_languages.py [--json benchmarks/results/langid_languages.json]

Each text is scored whole, as one segment. "Left" = a known label other than the target.
"""
from __future__ import annotations

import argparse
import os

from drift_eval.files import read_jsonl, write_json_atomic
from drift_eval.metrics import langid, lid_model
from drift_eval.metrics.languages import TARGETS
from drift_eval.metrics.stats import precision_recall

#: the parts shown, by split and category
PARTS = {"tune": lambda r: r["split"] == "tune",
         "heldout": lambda r: r["split"] == "heldout" and r["category"] != "real_output",
         "heldout_real": lambda r: r["split"] == "heldout" and r["category"] == "real_output"}
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "langid")


def deciders(lang: str) -> dict:
    return {"rule": lambda text: langid.left_language(text, lang),
            "plain_fasttext": lambda text: (lambda p: p.known and p.lang != lang)(lid_model.identify(text))}


def measure() -> dict:
    out = {}
    for lang in TARGETS:
        rows = read_jsonl(os.path.join(DATA, f"{lang}.jsonl"), "segment file",
                          required=("id", "split", "category", "left_target", "text"))
        out[lang] = {}
        for split in PARTS:
            part = [r for r in rows if PARTS[split](r)]
            if not part:
                continue
            truth = [r["left_target"] for r in part]
            out[lang][split] = {}
            for name, decide in deciders(lang).items():
                pred = [decide(r["text"]) for r in part]
                res = precision_recall(pred, truth)
                res["wrong"] = [r["id"] for r, p in zip(part, pred) if p != r["left_target"]]
                out[lang][split][name] = res
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    res = measure()
    print("| language | split | n | rule P | rule R | plain fastText P | plain fastText R | rule errors |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for lang, splits in res.items():
        for split, by in splits.items():
            r, p = by["rule"], by["plain_fasttext"]
            n = r["tp"] + r["fp"] + r["fn"] + r["tn"]
            print(f"| {lang} | {split} | {n} | {r['precision']:.3f} | {r['recall']:.3f} | {p['precision']:.3f} | "
                  f"{p['recall']:.3f} | {', '.join(r['wrong']) or '-'} |")
    if args.json:
        write_json_atomic(args.json, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
