"""A second, blind reading of the held-out items where loops are a matter of degree, to
tell how far the rule's misses are the rule's and how far the labels' (docs/metrics.md,
"Two readers").

    python benchmarks/heldout_second_reading.py prepare OUT   # OUT/L.jsonl: the items, unlabelled
    python benchmarks/heldout_second_reading.py collect OUT   # OUT's labels into second_reading.json
    python benchmarks/heldout_second_reading.py score         # benchmarks/results/langid_second_reading.json

The items read twice (``select``): every item of a real model answer that the first reading
labelled degenerate, and every one it labelled kept that repeats itself at all: a repeated
share of at least 0.1 (the rule's own measure, ``text.repeated_shares``) or at least 0.3 of
its words inside a word 4-gram said twice in the answer so far (``covered``). They are
shuffled with ``random.Random(SEED)`` and given new ids (``L-b001``...), without the first
reading's label or note, so that the second reader sees neither, nor the rule's call.
``second_reading.json`` holds, per language, each new id's item and the second label."""
from __future__ import annotations

import json
import os
import random
import sys
from collections import Counter

from drift_eval.conversation import assistant_replies
from drift_eval.files import read_json, read_jsonl, write_text_atomic
from drift_eval.metrics import drift, langid
from drift_eval.metrics.languages import TARGETS
from drift_eval.metrics.text import ngrams, repeated_shares, words

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heldout_sets as H  # noqa: E402

SEED = 4343
PATH = os.path.join(H.TUNING_SETS, "second_reading.json")
RESULTS = os.path.join(H.ROOT, "benchmarks", "results", "langid_second_reading.json")


def pieces(item: dict, where: dict | None, lang: str, answers: dict) -> tuple[list[str], int]:
    """The pieces of the answer an item belongs to, as the rule scores them, and its index."""
    if where is None:
        return [item["text"]], 0
    answer = H.answer_of(where, lang, answers, H.TUNING_RUNS)
    if "turn" in where:
        return [assistant_replies(answer)[where["turn"] - 1]], 0
    spans = langid.segment_spans(answer, drift.SEGMENT_TOKENS, whole_tail=True)
    return [answer[a:b] for a, b in spans], where["segment"] - 1


def covered(parts: list[str], idx: int, n: int = 4) -> float:
    """The share of piece ``idx``'s words inside a word ``n``-gram that occurs at least twice
    in the text up to the end of that piece (the first occurrence counts too)."""
    before = [w for p in parts[:idx] for w in words(p)]
    ws = before + words(parts[idx])
    grams = ngrams(ws, n)
    counts = Counter(grams)
    inside = [False] * len(ws)
    for i, g in enumerate(grams):
        if counts[g] >= 2:
            inside[i:i + n] = [True] * n
    own = inside[len(before):]
    return sum(own) / len(own) if own else 0.0


def select(lang: str, answers: dict) -> list[dict]:
    """The items of ``lang``'s set read twice, in the set's order."""
    items, manifest = H.read_set(lang, H.TUNING_SETS)
    strata = manifest["languages"][lang]["items"]
    out = []
    for item in items:
        if strata[item["id"]]["origin"] != "real" or item["label"] not in ("kept", "degenerate"):
            continue
        if item["label"] == "kept":
            parts, idx = pieces(item, strata[item["id"]]["where"], lang, answers)
            if repeated_shares(parts)[idx] < 0.1 and covered(parts, idx) < 0.3:
                continue
        out.append(item)
    return out


def blind() -> dict:
    """``{lang: [(new id, item without label or note)]}``, shuffled and renamed."""
    rng, answers, out = random.Random(SEED), {}, {}
    for lang in TARGETS:
        chosen = [dict(i, label=None, note=None) for i in select(lang, answers)]
        rng.shuffle(chosen)
        out[lang] = [(f"{lang}-b{k:03d}", i) for k, i in enumerate(chosen, 1)]
    return out


def read() -> dict:
    return read_json(PATH, "second reading", expect=dict)


def score(tuning: dict | None = None) -> dict:
    """Per language: the items read twice, the disagreements, the second reader scored against
    the first as the rule is scored (on the whole set, taking the first reading's label for
    the items read once), and the rule against the labels both readers give. ``tuning``:
    ``heldout_sets.score(tuning="2.0")`` of every language, where it is at hand (the rule's
    calls follow from its ``wrong`` items)."""
    second, answers, out = read(), {}, {}
    for lang in TARGETS:
        items, _ = H.read_set(lang, H.TUNING_SETS)
        wrong = set((tuning[lang] if tuning else H.score(lang, answers, tuning="2.0"))["wrong"])
        by_first = {v["of"]: v["label"] for v in second[lang].values()}
        first = [i["label"] != "kept" for i in items]
        other = [by_first.get(i["id"], i["label"]) != "kept" for i in items]
        rule = [(i["label"] != "kept") != (i["id"] in wrong) for i in items]
        twice = [k for k, i in enumerate(items) if i["id"] in by_first]

        def bounds(truth, called):
            return {k: v for k, v in H.agreement(truth, called).items() if k not in ("precision", "recall")}

        both_not_kept = [k for k in twice if first[k] and other[k]]
        out[lang] = {"read_twice": len(twice),
                     "first_not_kept_second_kept": sum(first[k] and not other[k] for k in twice),
                     "first_kept_second_not_kept": sum(other[k] and not first[k] for k in twice),
                     "second_vs_first": bounds(first, other), "rule_vs_first": bounds(first, rule),
                     "both_not_kept": len(both_not_kept),
                     "rule_keeps_of_both_not_kept": sum(not rule[k] for k in both_not_kept)}
    return out


TABLE = "langid_second_reading"  # its name among docs/metrics.md's tables


def table(results: dict) -> str:
    lines = ["| language | read twice | first not kept, second kept | first kept, second not kept | second reader: "
             "precision, recall (lower bounds) | rule: precision, recall (lower bounds) | both say not kept: "
             "the rule keeps |", "|---|---|---|---|---|---|---|"]
    for lang, r in results.items():
        s, u = r["second_vs_first"], r["rule_vs_first"]
        lines.append(f"| {lang} | {r['read_twice']} | {r['first_not_kept_second_kept']} | "
                     f"{r['first_kept_second_not_kept']} | {s['precision_lower']:.3f}, {s['recall_lower']:.3f} | "
                     f"{u['precision_lower']:.3f}, {u['recall_lower']:.3f} | "
                     f"{r['rule_keeps_of_both_not_kept']} of {r['both_not_kept']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["prepare"] and len(argv) == 2:
        if not os.path.isdir(argv[1]):
            print(f"heldout_second_reading: {argv[1]!r} is not a folder", file=sys.stderr)
            return 2
        for lang, chosen in blind().items():
            write_text_atomic(os.path.join(argv[1], f"{lang}.jsonl"), "".join(
                json.dumps(dict(i, id=new), ensure_ascii=False) + "\n" for new, i in chosen))
        return 0
    if argv[:1] == ["collect"] and len(argv) == 2:
        out = {}
        for lang, chosen in blind().items():
            path = os.path.join(argv[1], f"{lang}.jsonl")
            read_back = {r["id"]: r for r in read_jsonl(path, "second reading")} if os.path.isfile(path) else {}
            bad = [new for new, _ in chosen if read_back.get(new, {}).get("label") not in H.LABELS]
            if bad or len(read_back) != len(chosen):
                print(f"heldout_second_reading: {path}: {len(bad)} items without a label, or not the items "
                      f"prepare wrote", file=sys.stderr)
                return 2
            out[lang] = {new: {"of": i["id"], "label": read_back[new]["label"], "note": read_back[new].get("note") or ""}
                         for new, i in chosen}
        write_text_atomic(PATH, json.dumps(out, ensure_ascii=False, indent=1, sort_keys=True) + "\n")
        return 0
    if argv == ["score"]:
        results = score()
        write_text_atomic(RESULTS, json.dumps(results, indent=1, sort_keys=True) + "\n")
        H.write_documented(TABLE, table(results))
        print(table(results))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
