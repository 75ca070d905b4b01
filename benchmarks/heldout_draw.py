"""The per-language held-out sets of the segment rule (tests/data/langid_heldout/README.md):
draw them, seeded, from fresh answers and written segments, for labelling by reading.

    python benchmarks/heldout_draw.py publish RUNS     # the fresh runs into docs/results/heldout
    python benchmarks/heldout_draw.py draw [L ...]     # tests/data/langid_heldout/L.jsonl, draw.json

``publish``: the output of ``benchmarks/heldout_runs.py`` (``RUNS/<model>/<kind>/<L>/``)
into ``docs/results/heldout/<model>_<kind>/<L>/``, paths made portable.

``draw``: per language, the units the rule scores (each single-turn answer cut into its
segments with the last short piece joined, ``langid.segment_spans(whole_tail=True)``; each
eight-turn reply whole), every unit called by the frozen rule (kept, left, degenerate or
unreadable; code is neither and is not drawn), then, with ``random.Random(f"{SEED}-{L}")``:

* ``REAL`` units of each call, at random (fewer where the answers hold fewer);
* written segments (``written/L.jsonl``), for "stayed in L", up to ``STAYED`` with the real
  kept ones;
* where the answers hold fewer than ``REAL["left"]`` left units: units of other
  languages' answers that the rule keeps in their own language (``transplant``: real text
  in another language under this target);
* where they hold fewer than ``MIN_DEGENERATE`` degenerate ones: made-up words and loops
  made from written segments (``synthetic``: the letters of each word shuffled, one
  sentence repeated, or the characters of the segment shuffled for Chinese and Japanese).

Items are written in random order, without the rule's call (``draw.json`` keeps it, with
the rule's version and fingerprint), and with ``label: null`` for reading. Nothing here
reads a label."""
from __future__ import annotations

import datetime
import glob
import json
import os
import random
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(ROOT, "docs", "results", "heldout")
SETS = os.path.join(ROOT, "tests", "data", "langid_heldout")
SEED = 43
REAL = {"kept": 50, "left": 85, "degenerate": 26}
STAYED = 90
MIN_DEGENERATE = 36
CALLS = ("kept", "left", "degenerate")


def publish(runs: str) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from protocol_runs import publish as publish_run

    for folder in sorted(glob.glob(os.path.join(runs, "*", "*", "*"))):
        model, kind, lang = os.path.relpath(folder, runs).split(os.sep)
        publish_run(folder, os.path.join(RUNS, f"{model}_{kind}", lang))


def _call(label) -> str | None:
    """The rule's call on a unit: kept, left, degenerate (a loop, made-up words, or
    unreadable: not kept, and not left), or None for code (neither kept nor lost)."""
    from drift_eval.metrics import langid

    return {langid.KEPT: "kept", langid.LEFT: "left", langid.DEGENERATE: "degenerate",
            langid.UNREADABLE: "degenerate"}.get(label.status)


def units(lang: str) -> list[dict]:
    """Every unit of the fresh answers of ``lang``: {source, unit, context, text, call}."""
    from drift_eval.conversation import assistant_replies
    from drift_eval.metrics import drift, langid

    out, seen = [], set()
    for path in sorted(glob.glob(os.path.join(RUNS, "*", lang, "*", "samples_*.jsonl"))):
        run = os.path.relpath(path, RUNS).split(os.sep)[0]
        with open(path, encoding="utf-8") as fh:
            samples = [json.loads(line) for line in fh if line.strip()]
        for s in samples:
            answer = s["resps"][0][0]
            if run.endswith("_multiturn"):
                for t, reply in enumerate(assistant_replies(answer), 1):
                    label = langid.label_segments([reply], lang)[0]
                    out.append({"source": f"{run} doc {s['doc_id']} turn {t}", "unit": "reply", "context": "",
                                "text": reply, "call": "degenerate" if label.status == langid.CODE else _call(label)})
                continue
            spans = langid.segment_spans(answer, drift.SEGMENT_TOKENS, whole_tail=True)
            for k, ((a, b), label) in enumerate(zip(spans, drift.timeline_labels(answer, lang)), 1):
                out.append({"source": f"{run} doc {s['doc_id']} segment {k}", "unit": "segment",
                            "context": answer[:a], "text": answer[a:b], "call": _call(label)})
    kept = []
    for u in out:
        if u["call"] is None or u["text"] in seen or not u["text"].strip():
            continue
        seen.add(u["text"])
        kept.append(u)
    return kept


def _written(lang: str) -> list[dict]:
    path = os.path.join(SETS, "written", f"{lang}.jsonl")
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]")


def _synthetic(lang: str, written: list[dict], rng: random.Random, n: int) -> list[dict]:
    """``n`` degenerate segments made from written ones: made-up words (each word's letters
    shuffled; for Chinese and Japanese the characters of the whole segment), or a loop (one
    of its sentences repeated to the segment's length)."""
    from drift_eval.metrics.text import WORD_RE

    out = []
    pool = [w for w in written if w["kind"] == "prose"] or written
    for i in range(n):
        w = pool[rng.randrange(len(pool))]
        text = w["text"]
        if i % 2 == 0:
            if lang in ("zh", "ja"):
                chars = list(text)
                rng.shuffle(chars)
                made, how = "".join(chars), "its characters shuffled"
            else:
                def shuffle(m):
                    letters = list(m.group())
                    rng.shuffle(letters)
                    return "".join(letters)

                made, how = WORD_RE.sub(shuffle, text), "each word's letters shuffled"
        else:
            sentences = _SENTENCE.findall(text) or [text]
            one = sentences[rng.randrange(len(sentences))].strip()
            made, how = " ".join([one] * max(2, len(text) // max(len(one), 1) + 1)), "one sentence repeated"
        out.append({"source": f"synthetic: {w['id']}, {how}", "unit": "segment", "context": "", "text": made,
                    "call": "degenerate"})
    return out


def draw(lang: str, all_units: dict) -> tuple[list[dict], dict]:
    rng = random.Random(f"{SEED}-{lang}")
    mine = all_units[lang]
    chosen = []
    for call in CALLS:
        pool = [u for u in mine if u["call"] == call]
        rng.shuffle(pool)
        chosen += [dict(u, origin="real") for u in pool[:REAL[call]]]
    count = {c: sum(u["call"] == c for u in chosen) for c in CALLS}
    written = _written(lang)
    rng.shuffle(written)
    for w in written[:max(0, STAYED - count["kept"])]:
        chosen.append({"source": f"written: {w['id']} ({w['kind']})", "unit": "segment", "context": "",
                       "text": w["text"], "call": "kept", "origin": "written"})
    if count["left"] < REAL["left"]:
        others = [dict(u, source=f"transplant from {other}: {u['source']}", origin="transplant", call="left",
                       unit="reply" if u["unit"] == "reply" else "segment", context="")
                  for other in sorted(all_units) if other != lang for u in all_units[other] if u["call"] == "kept"]
        rng.shuffle(others)
        chosen += others[:REAL["left"] - count["left"]]
    if count["degenerate"] < MIN_DEGENERATE:
        chosen += [dict(u, origin="synthetic") for u in
                   _synthetic(lang, _written(lang), rng, MIN_DEGENERATE - count["degenerate"])]
    rng.shuffle(chosen)
    items, strata = [], {}
    for n, u in enumerate(chosen, 1):
        item_id = f"{lang}-h{n:03d}"
        strata[item_id] = {"call": u["call"], "origin": u["origin"]}
        items.append({"id": item_id, "lang": lang, "source": u["source"], "unit": u["unit"],
                      "context": u["context"], "text": u["text"], "label": None, "note": ""})
    return items, strata


def main(argv: list[str]) -> int:
    from drift_eval.files import write_text_atomic
    from drift_eval.metrics import langid
    from drift_eval.metrics.languages import TARGETS

    if argv[:1] == ["publish"] and len(argv) == 2:
        publish(argv[1])
        return 0
    if argv[:1] != ["draw"]:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    langs = argv[1:] or list(TARGETS)
    all_units = {lang: units(lang) for lang in TARGETS}
    manifest_path = os.path.join(SETS, "draw.json")
    manifest = {"rule_version": langid.RULE_VERSION, "rule_fingerprint": langid.rule_fingerprint(), "seed": SEED,
                "drawn": datetime.date.today().isoformat(), "real": REAL, "stayed": STAYED,
                "min_degenerate": MIN_DEGENERATE, "languages": {}}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as fh:
            manifest["languages"] = json.load(fh).get("languages", {})
    for lang in langs:
        items, strata = draw(lang, all_units)
        write_text_atomic(os.path.join(SETS, f"{lang}.jsonl"),
                          "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items))
        manifest["languages"][lang] = {"items": strata,
                                       "units": {c: sum(u["call"] == c for u in all_units[lang]) for c in CALLS}}
        origins = [s["origin"] for s in strata.values()]
        print(f"{lang}: {len(items)} items ({', '.join(f'{o} {origins.count(o)}' for o in sorted(set(origins)))})")
    write_text_atomic(manifest_path, json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
