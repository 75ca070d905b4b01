"""The per-language held-out sets of the segment rule (tests/data/langid_heldout/README.md):
draw them, seeded, from fresh answers and written segments, for labelling by reading. The
sets of rule 2.3 are drawn from ``docs/results/heldout_2.3/``; the sets of rules 2.0, 2.1
and 2.2, drawn the same way from ``docs/results/heldout/``, ``heldout_2.1/`` and
``heldout_2.2/``, are now tuning sets (``TUNING``).

    python benchmarks/heldout_draw.py publish RUNS [_more]  # fresh runs into docs/results/heldout_2.3
    python benchmarks/heldout_draw.py draw [L ...]     # tests/data/langid_heldout/L.jsonl, draw.json
    python benchmarks/heldout_draw.py replies L ...    # eight-turn replies of later runs added
    python benchmarks/heldout_draw.py read OUT K [L ...]     # reading K (1, 2, 3) of the items, blind
    python benchmarks/heldout_draw.py collect OUT K [L ...]  # its labels into readings.json and the sets
    python benchmarks/heldout_draw.py topup [L ...]    # a labelled set short of MIN_COUNTS: more items
    python benchmarks/heldout_draw.py score            # the labelled sets scored: docs/metrics.md's table

``publish``: the output of ``benchmarks/heldout_runs.py`` (``RUNS/<model>/<kind>/<L>/``)
into ``docs/results/heldout_2.3/<model>_<kind>/<L>/``, paths made portable (``_more``:
``<model>_<kind>_more``).

``draw``: per language, the units the rule scores (each single-turn answer cut into its
segments with the last short piece joined, ``langid.segment_spans(whole_tail=True)``; each
eight-turn reply whole), every unit called by the frozen rule (kept, left, degenerate or
unreadable; code is neither and is not drawn), then, with ``random.Random(f"{SEED}-{L}")``:

* ``REAL`` units of each call, at random (fewer where the answers hold fewer), at most
  ``PER_ANSWER`` of one answer or conversation in all (rule 2.3's draw: a conversation's
  replies err together, so one conversation must not weigh as eight independent items);
* written segments (``written/L.jsonl``), for "stayed in L", up to ``STAYED`` with the real
  kept ones;
* where the answers hold fewer than ``REAL["left"]`` left units: units of other
  languages' answers that the rule keeps in their own language (``transplant``: real text
  in another language under this target);
* where they hold fewer than ``MIN_DEGENERATE`` degenerate ones: made-up words and loops
  made from written segments (``synthetic``: the letters of each word shuffled, one
  sentence repeated, or the characters of the segment shuffled for Chinese and Japanese).

Items are written in random order, without the rule's call (``draw.json`` keeps it, with
where each real unit lies in its run, and the rule's version and fingerprint), and with
``label: null`` for reading. A unit of an answer is scored as the task scores it (a segment
with its whole answer in view, a reply alone); a written, synthetic or transplanted one
alone (``unit: alone``). Nothing in the draw reads a label.

``replies``: the languages whose draw held no eight-turn reply of Qwen (its eight-turn runs
were made for five languages before the draw) get ``REPLIES`` replies of each call from
eight-turn runs made after the draw (``LATER_RUNS``: four conversations, 9-12, of each
model), seeded, unlabelled.

``read OUT K``: the items of reading K, for a reader, into ``OUT/L.jsonl``: every item without
its label, note or source for readings 1 and 2, and for reading 3 the items whose first two
readings differ. The reader writes ``OUT/L.labels.jsonl`` (``{"id", "label", "note"}`` a line);
``collect OUT K`` adds them to ``readings.json`` and sets each item's label: the label both
readings give, or the third reading's where they differ (``adjudicated``).

``topup``: a labelled set whose labels fall short of a minimum (``MIN_COUNTS``: too few items
read as kept, left or degenerate) gets more of the draw's items for that label, unlabelled,
chosen from the counts alone (``topup``)."""
from __future__ import annotations

import datetime
import glob
import json
import os
import random
import re
import sys

from heldout_sets import (LABELS, MIN_COUNTS, ROOT, RUNS, SETS, collect, read_set, score, table, to_read,
                          write_documented, write_jsonl, write_manifest, write_set)
from drift_eval.conversation import assistant_replies
from drift_eval.files import read_jsonl, write_text_atomic
from drift_eval.metrics import drift, langid
from drift_eval.metrics.languages import TARGETS
from drift_eval.metrics.text import WORD_RE
from protocol_runs import publish as publish_run

SEED = "43-2.3"
#: rule 2.3's sets are larger than the earlier rules' (211 items): with about 125 items not
#: kept, the bar (a lower bound of 0.93) allows three errors, so a rule whose true recall is
#: 0.985 in every language fails it somewhere in the 14 with a probability of 0.83; with
#: 250 it allows nine, and that probability is 0.07 (0.35 at a true recall of 0.98)
REAL = {"kept": 60, "left": 170, "degenerate": 80}
STAYED = 100
MIN_DEGENERATE = 80
#: at most this many units of one answer or conversation in a set (rule 2.3's draw)
PER_ANSWER = 3
CALLS = ("kept", "left", "degenerate")
#: the fresh runs of rule 2.3's draw: requests 181-200 and conversations 20-21
DRAW_RUNS = ("smollm2_single", "qwen_single", "smollm2_multiturn", "qwen_multiturn")
# eight-turn runs made after the draw, for the languages whose draw held none of Qwen's replies
LATER_RUNS = ("smollm2_multiturn_more", "qwen_multiturn_more")
REPLIES = {"kept": 8, "left": 8, "degenerate": 4}


def publish(runs: str, suffix: str = "") -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

    for folder in sorted(glob.glob(os.path.join(runs, "*", "*", "*"))):
        model, kind, lang = os.path.relpath(folder, runs).split(os.sep)
        publish_run(folder, os.path.join(RUNS, f"{model}_{kind}{suffix}", lang))


def _call(label) -> str | None:
    """The rule's call on a unit: kept, left, degenerate (a loop, made-up words, or
    unreadable: not kept, and not left), or None for code (neither kept nor lost)."""
    return {langid.KEPT: "kept", langid.LEFT: "left", langid.DEGENERATE: "degenerate",
            langid.UNREADABLE: "degenerate"}.get(label.status)


def units(lang: str, runs: tuple[str, ...] = DRAW_RUNS) -> list[dict]:
    """Every unit of the fresh answers of ``lang`` in ``runs``: {source, unit, context, text, call}."""
    out, seen = [], set()
    for path in sorted(glob.glob(os.path.join(RUNS, "*", lang, "*", "samples_*.jsonl"))):
        run = os.path.relpath(path, RUNS).split(os.sep)[0]
        if run not in runs:
            continue
        with open(path, encoding="utf-8") as fh:
            samples = [json.loads(line) for line in fh if line.strip()]
        for s in samples:
            answer = s["resps"][0][0]
            if "_multiturn" in run:
                for t, reply in enumerate(assistant_replies(answer), 1):
                    label = langid.label_segments([reply], lang)[0]
                    out.append({"source": f"{run} doc {s['doc_id']} turn {t}", "unit": "reply", "context": "",
                                "text": reply, "call": "degenerate" if label.status == langid.CODE else _call(label),
                                "where": {"run": run, "doc": s["doc_id"], "turn": t}})
                continue
            spans = langid.segment_spans(answer, drift.SEGMENT_TOKENS, whole_tail=True)
            for k, ((a, b), label) in enumerate(zip(spans, drift.timeline_labels(answer, lang)), 1):
                out.append({"source": f"{run} doc {s['doc_id']} segment {k}", "unit": "segment",
                            "context": answer[:a], "text": answer[a:b], "call": _call(label),
                            "where": {"run": run, "doc": s["doc_id"], "segment": k}})
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
        out.append({"source": f"synthetic: {w['id']}, {how}", "unit": "alone", "context": "", "text": made,
                    "call": "degenerate", "where": None})
    return out


def _as_written(w: dict) -> dict:
    return {"source": f"written: {w['id']} ({w['kind']})", "unit": "alone", "context": "", "text": w["text"],
            "call": "kept", "origin": "written", "where": None}


def _transplants(lang: str, all_units: dict, have: set = frozenset()) -> list[dict]:
    """Units of other languages' answers that the rule keeps in their own language, as
    items under ``lang`` (real text that left it), alone."""
    return [dict(u, source=f"transplant from {other}: {u['source']}", origin="transplant", call="left",
                 unit="alone", context="", where=None)
            for other in sorted(all_units) if other != lang for u in all_units[other]
            if u["call"] == "kept" and u["text"] not in have]


def _numbered(lang: str, chosen: list[dict], first: int, **marks) -> tuple[list[dict], dict]:
    """The chosen units as unlabelled items ``L-hNNN`` from ``first`` on, and their strata for
    draw.json (the rule's call, the origin, where a real unit lies, and ``marks``)."""
    items, strata = [], {}
    for n, u in enumerate(chosen, first):
        item_id = f"{lang}-h{n:03d}"
        strata[item_id] = {"call": u["call"], "origin": u["origin"], "where": u["where"], **marks}
        items.append({"id": item_id, "lang": lang, "source": u["source"], "unit": u["unit"],
                      "context": u["context"], "text": u["text"], "label": None, "note": ""})
    return items, strata


def draw(lang: str, all_units: dict) -> tuple[list[dict], dict]:
    rng = random.Random(f"{SEED}-{lang}")
    mine = all_units[lang]
    chosen, per_answer = [], {}
    for call in CALLS:
        pool = [u for u in mine if u["call"] == call]
        rng.shuffle(pool)
        taken = 0
        for u in pool:
            if taken == REAL[call]:
                break
            answer = (u["where"]["run"], u["where"]["doc"])
            if per_answer.get(answer, 0) < PER_ANSWER:
                per_answer[answer] = per_answer.get(answer, 0) + 1
                chosen.append(dict(u, origin="real"))
                taken += 1
    count = {c: sum(u["call"] == c for u in chosen) for c in CALLS}
    written = _written(lang)
    rng.shuffle(written)
    chosen += [_as_written(w) for w in written[:max(0, STAYED - count["kept"])]]
    if count["left"] < REAL["left"]:
        others = _transplants(lang, all_units)
        rng.shuffle(others)
        chosen += others[:REAL["left"] - count["left"]]
    if count["degenerate"] < MIN_DEGENERATE:
        chosen += [dict(u, origin="synthetic") for u in
                   _synthetic(lang, _written(lang), rng, MIN_DEGENERATE - count["degenerate"])]
    rng.shuffle(chosen)
    return _numbered(lang, chosen, 1)


def replies(lang: str, items: list[dict] | None = None) -> tuple[list[dict], dict]:
    """Eight-turn replies of the later runs (``LATER_RUNS``) added to ``lang``'s set (``items``,
    by default as committed): ``REPLIES`` of each of the rule's calls at random (fewer where the
    runs hold fewer), none already in the set, seeded with
    ``random.Random(f"{SEED}-{lang}-replies")``; unlabelled."""
    items = read_set(lang)[0] if items is None else items
    have = {i["text"] for i in items}
    rng = random.Random(f"{SEED}-{lang}-replies")
    pool = [dict(u, origin="real") for u in units(lang, LATER_RUNS) if u["text"] not in have]
    chosen = []
    for call in CALLS:
        mine = [u for u in pool if u["call"] == call]
        rng.shuffle(mine)
        chosen += mine[:REPLIES[call]]
    rng.shuffle(chosen)
    new, strata = _numbered(lang, chosen, len(items) + 1, later=True)
    return items + new, strata


TOPUP_MARGIN = 2


def topup(lang: str, all_units: dict, items: list[dict] | None = None) -> tuple[list[dict], dict]:
    """Items added to a labelled set whose labels fall short of ``MIN_COUNTS``: for each
    label short by k, k + ``TOPUP_MARGIN`` more items of the draw's own source for it (kept:
    written segments; left: transplants; degenerate: synthetic ones), none already in the set,
    seeded with ``random.Random(f"{SEED}-{lang}-topup")``. It reads the labels' counts only,
    never the rule's calls on the labelled items; the items come unlabelled, for reading.
    ``items``: the set, by default as committed."""
    items = read_set(lang)[0] if items is None else items
    if any(i["label"] not in LABELS for i in items):
        raise SystemExit(f"heldout_draw: {lang}.jsonl is not fully labelled: top up a labelled set only")
    short = {k: MIN_COUNTS[k] - sum(i["label"] == k for i in items) for k in MIN_COUNTS}
    rng = random.Random(f"{SEED}-{lang}-topup")
    have = {i["text"] for i in items}
    added = []
    if short["kept"] > 0:
        written = [w for w in _written(lang) if w["text"] not in have]
        rng.shuffle(written)
        added += [_as_written(w) for w in written[:short["kept"] + TOPUP_MARGIN]]
    if short["left"] > 0:
        others = _transplants(lang, all_units, have)
        rng.shuffle(others)
        added += others[:short["left"] + TOPUP_MARGIN]
    if short["degenerate"] > 0:
        added += [dict(u, origin="synthetic") for u in
                  _synthetic(lang, _written(lang), rng, short["degenerate"] + TOPUP_MARGIN)]
    rng.shuffle(added)
    new, strata = _numbered(lang, added, len(items) + 1, topup=True)
    return items + new, strata


def redraw(lang: str, all_units: dict) -> tuple[list[str], dict]:
    """``lang``'s set as the seeded script makes it, for checking the committed one: the
    draw, then each later addition in the order the set holds them (replies, top-ups), each
    made from the committed set as it stood then, labels included. (The items' texts in
    order, their strata.)"""
    committed, manifest = read_set(lang)
    made, strata = draw(lang, all_units)
    while len(made) < len(committed):
        before = committed[:len(made)]
        later = manifest["languages"][lang]["items"].get(committed[len(made)]["id"], {}).get("later")
        grown, more = replies(lang, before) if later else topup(lang, all_units, before)
        if not more:
            break
        made, strata = made + grown[len(before):], {**strata, **more}
    return [i["text"] for i in made], strata


def _origins(strata: dict) -> str:
    origins = [s["origin"] for s in strata.values()]
    return ", ".join(f"{o} {origins.count(o)}" for o in sorted(set(origins)))


def main(argv: list[str]) -> int:
    if argv[:1] == ["publish"] and len(argv) in (2, 3):
        if len(argv) == 3 and argv[2] != "_more":
            print("heldout_draw: publish RUNS [_more] (the later eight-turn runs)", file=sys.stderr)
            return 2
        publish(*argv[1:])
        return 0
    if argv[:1] == ["score"]:
        answers: dict = {}
        results = {lang: score(lang, answers) for lang in TARGETS}
        write_text_atomic(os.path.join(ROOT, "benchmarks", "results", "langid_heldout.json"),
                          json.dumps(results, indent=1, sort_keys=True) + "\n")
        write_documented("langid_heldout", table(results))
        print(table(results))
        return 0
    if argv[:1] in (["read"], ["collect"]) and len(argv) >= 3 and argv[2] in ("1", "2", "3"):
        out, k = argv[1], int(argv[2])
        for lang in argv[3:] or list(TARGETS):
            if argv[0] == "read":
                os.makedirs(out, exist_ok=True)
                due = to_read(lang, k)
                write_jsonl(os.path.join(out, f"{lang}.jsonl"), due)
                print(f"{lang}: {len(due)} items for reading {k}")
                continue

            rows = read_jsonl(os.path.join(out, f"{lang}.labels.jsonl"), "labels")
            print(f"{lang}: reading {k} of {collect(lang, k, {r['id']: r for r in rows})} items collected")
        return 0
    if argv[:1] in (["topup"], ["replies"]):
        all_units = {lang: units(lang) for lang in TARGETS} if argv[0] == "topup" else {}
        langs = argv[1:] or list(TARGETS)
        done = [lang for lang in langs if argv[0] == "replies" and any(
            s.get("later") for s in read_set(lang)[1]["languages"][lang]["items"].values())]
        if done:
            print(f"heldout_draw: {', '.join(done)} had later replies already: nothing added", file=sys.stderr)
            return 2
        for lang in langs:
            _, manifest = read_set(lang)
            items, strata = topup(lang, all_units) if argv[0] == "topup" else replies(lang)
            if not strata:
                continue
            write_set(lang, items)
            manifest["languages"][lang]["items"].update(strata)
            write_manifest(manifest)
            print(f"{lang}: {len(strata)} items added ({_origins(strata)})")
        return 0
    if argv[:1] != ["draw"]:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    langs = argv[1:] or list(TARGETS)
    all_units = {lang: units(lang) for lang in TARGETS}
    manifest_path = os.path.join(SETS, "draw.json")
    manifest = {"rule_version": langid.RULE_VERSION, "rule_fingerprint": langid.rule_fingerprint(), "seed": SEED,
                "drawn": datetime.date.today().isoformat(), "real": REAL, "stayed": STAYED,
                "min_degenerate": MIN_DEGENERATE, "per_answer": PER_ANSWER, "runs": list(DRAW_RUNS),
                "languages": {}}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as fh:
            manifest["languages"] = json.load(fh).get("languages", {})
    for lang in langs:
        items, strata = draw(lang, all_units)
        write_set(lang, items)
        manifest["languages"][lang] = {"items": strata,
                                       "units": {c: sum(u["call"] == c for u in all_units[lang]) for c in CALLS}}
        print(f"{lang}: {len(items)} items ({_origins(strata)})")
    write_manifest(manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
