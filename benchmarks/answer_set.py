"""The held-out answer set for language ID: whole answers drawn from the committed runs.

    python benchmarks/answer_set.py draw     # writes tests/data/langid_answers.jsonl, unlabelled
    python benchmarks/answer_set.py score [--json benchmarks/results/langid_answers.json]

``draw`` is seeded and made before anything labels the answers: each stratum is shuffled
with its own seed and answers are taken in that order, skipping exact duplicate texts and
every answer that contains a segment of the French tuning set
(``tests/data/langid_segments.jsonl``), so no text used to choose the rule is scored here.
Only whole answers are drawn: SmolLM2's whole 2048-token single-turn answers
(docs/results/checkpoints/smollm2_single_whole), both models' 256-token answers to
``drift_fr_single`` (docs/results/languages), and whole replies of the eight-turn runs (one
turn's reply is one answer; the replies that the older published runs keep only as an
excerpt, and the older single-turn samples, which are excerpts, are not used). Each record carries the answer cut into the scorer's
128-token segments (``drift_eval.metrics.langid.segments``), which a label's ``leaves_at``
counts (1 = the first segment).

``score`` gives each answer the verdict of the full rule and of every ablation of it (one
step left out) and of plain fastText, and prints per-answer accuracy and the confusion
table against the hand labels (docs/metrics.md, "Validation on whole answers").
"""
from __future__ import annotations

import glob
import json
import os
import random
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "results")
OUT = os.path.join(ROOT, "tests", "data", "langid_answers.jsonl")
#: (source, kind, how many): whole answers of both models (the first stratum has fewer left once
#: answers holding a tuning segment are skipped: SmolLM2's single-turn answers gave 22 of them)
STRATA = [("checkpoints/smollm2_single_whole", "cache", 30), ("languages/smollm2_single/fr", "single", 20),
          ("languages/qwen_single/fr", "single", 24), ("smollm2_multiturn", "turn", 25), ("qwen_multiturn", "turn", 25),
          ("languages/smollm2_multiturn/fr", "turn", 24)]
#: how the published eight-turn runs of before whole answers were kept mark a cut reply
CUT = re.compile(r"\[\.\.\. \d+ more characters\]$")
SEED = 29
LABELS = ("stays", "leaves", "never", "undetermined")


def _answers(folder: str, kind: str):
    if kind == "cache":
        for path in sorted(glob.glob(os.path.join(RESULTS, folder, "*.jsonl"))):
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    rec = json.loads(line)
                    ans = rec["answer"]["answer"] if isinstance(rec["answer"].get("answer"), dict) else rec["answer"]
                    yield {"source": f"{folder}/{os.path.basename(path)}", "doc_id": rec["key"][:16], "turn": None,
                           "text": ans["text"]}
        return
    for path in sorted(glob.glob(os.path.join(RESULTS, folder, "*", "*", "samples_*.jsonl"))):
        setting = os.path.relpath(path, os.path.join(RESULTS, folder)).split(os.sep)[0]
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                if kind == "single":
                    yield {"source": f"{folder}/{setting}", "doc_id": row["doc_id"], "turn": None,
                           "text": row["resps"][0][0]}
                    continue
                turns = [m["content"] for m in json.loads(row["resps"][0][0]) if m["role"] == "assistant"]
                for k, text in enumerate(turns, 1):
                    if not CUT.search(text):  # a reply published as an excerpt is not a whole answer
                        yield {"source": f"{folder}/{setting}", "doc_id": row["doc_id"], "turn": k, "text": text}


def draw() -> list[dict]:
    from drift_eval.metrics.langid import segments

    with open(os.path.join(ROOT, "tests", "data", "langid_segments.jsonl"), encoding="utf-8") as fh:
        tuning = [json.loads(line)["text"] for line in fh if line.strip()]
    seen, out = set(), []
    for i, (folder, kind, count) in enumerate(STRATA):
        pool = list(_answers(folder, kind))
        random.Random(SEED + i).shuffle(pool)
        taken = 0
        for a in pool:
            key = a["text"].strip()
            if taken == count:
                break
            if not key or key in seen or any(t.strip() in a["text"] for t in tuning):
                continue
            seen.add(key)
            taken += 1
            out.append({"id": f"a{len(out) + 1:03d}", **a, "segments": segments(a["text"], 128),
                        "label": None, "leaves_at": None, "note": ""})
    return out


def verdict(labels: list) -> tuple[str, int | None]:
    """An answer's verdict from its segments' languages (French target): ``stays`` (every
    known segment French), ``leaves`` (starts French, a later known segment is not; with
    the 1-based segment), ``never`` (its first known segment is not French), or
    ``undetermined`` (no known segment)."""
    known = [(i, x) for i, x in enumerate(labels, 1) if x != "unknown"]
    if not known:
        return "undetermined", None
    if known[0][1] != "fr":
        return "never", None
    left = next((i for i, x in known if x != "fr"), None)
    return ("stays", None) if left is None else ("leaves", left)


def deciders() -> dict:
    """{name: segments -> languages}: the full rule, each ablation (one step of
    ``langid.SegmentRule`` switched off), and plain fastText on the raw segment."""
    import dataclasses

    from drift_eval.metrics import langid

    full = langid.SegmentRule()
    rules = {"rule": full}
    for step in ("cleaning", "target_grammar", "margin_step", "english_grammar", "loop_step"):
        rules[f"without {step}"] = dataclasses.replace(full, **{step: False})
    out = {name: (lambda rule: lambda segs: [x.lang for x in langid.label_segments(segs, "fr", rule)])(rule)
           for name, rule in rules.items()}
    out["plain fastText"] = lambda segs: [p.lang for p in langid.identify_many(segs)]
    return out


def score(rows: list) -> dict:
    labelled = [r for r in rows if r.get("label") in LABELS]
    res = {}
    for name, decide in deciders().items():
        confusion = {a: dict.fromkeys(LABELS, 0) for a in LABELS}
        right = 0
        wrong = []
        for r in labelled:
            v, at = verdict(decide(r["segments"]))
            confusion[r["label"]][v] += 1
            ok = v == r["label"] and (v != "leaves" or at == r["leaves_at"])
            right += ok
            if not ok:
                wrong.append(r["id"])
        res[name] = {"accuracy": right / len(labelled) if labelled else float("nan"), "n": len(labelled),
                     "confusion": confusion, "wrong": wrong}
    return res


def main(argv: list[str]) -> int:
    if argv[:1] == ["draw"]:
        rows = draw()
        tmp = OUT + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(tmp, OUT)
        print(f"{len(rows)} answers -> {os.path.relpath(OUT, ROOT)}")
        return 0
    if argv[:1] == ["score"]:
        from drift_eval.files import read_jsonl, write_json_atomic

        res = score(read_jsonl(OUT, "answer set", required=("id", "segments", "label")))
        for name, r in res.items():
            print(f"{name}: {r['accuracy']:.3f} of {r['n']} answers; wrong: {', '.join(r['wrong']) or '-'}")
        print("confusion of the rule (rows: hand label; columns: verdict):")
        for lab, row in res["rule"]["confusion"].items():
            print(f"  {lab:>12}: " + "  ".join(f"{k} {v}" for k, v in row.items()))
        if "--json" in argv:
            write_json_atomic(argv[argv.index("--json") + 1], res)
        return 0
    print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
