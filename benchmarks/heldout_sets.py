"""The per-language held-out sets of the segment rule once drawn (``heldout_draw.py`` draws
them; tests/data/langid_heldout/README.md): where they and the runs they were drawn from lie,
reading a set, the blind readings and their adjudication, the sets scored against the rule
(``score``, the table in docs/metrics.md), and writing sets and the draw's manifest."""
from __future__ import annotations

import glob
import json
import os

from drift_eval.conversation import assistant_replies
from drift_eval.files import read_json, read_jsonl, write_text_atomic
from drift_eval.metrics import drift, langid
from drift_eval.metrics.languages import TARGETS
from drift_eval.reports.text import short
from results_tables import MARK

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


RUNS = os.path.join(ROOT, "docs", "results", "heldout_2.3")


SETS = os.path.join(ROOT, "tests", "data", "langid_heldout")


#: the held-out sets of earlier rules, each with the fresh runs it was drawn from: used to
#: choose a later rule, they are its tuning sets (in-sample). Rule 2.0's chose rule 2.1;
#: both chose rule 2.2; all three chose rule 2.3.
TUNING = {"2.0": (os.path.join(ROOT, "docs", "results", "heldout"), os.path.join(ROOT, "tests", "data", "langid_tuning")),
          "2.1": (os.path.join(ROOT, "docs", "results", "heldout_2.1"),
                  os.path.join(ROOT, "tests", "data", "langid_tuning_2.1")),
          "2.2": (os.path.join(ROOT, "docs", "results", "heldout_2.2"),
                  os.path.join(ROOT, "tests", "data", "langid_tuning_2.2"))}


TUNING_RUNS, TUNING_SETS = TUNING["2.0"]  # the sets read a second time (heldout_second_reading)


LABELS = ("kept", "left", "degenerate", "unreadable")


MIN_COUNTS = {"kept": 80, "left": 80, "degenerate": 30}


BOUND = 0.93


def read_set(lang: str, sets: str = SETS) -> tuple[list, dict]:
    """(the labelled items of ``lang``, ``draw.json``), of the held-out sets or, with
    ``sets=TUNING_SETS``, of the tuning sets."""
    manifest = read_json(os.path.join(sets, "draw.json"), "held-out manifest", expect=dict)
    return read_jsonl(os.path.join(sets, f"{lang}.jsonl"), "held-out set"), manifest


def _answers(run: str, lang: str, runs: str = RUNS) -> dict:
    """``{doc_id: answer}`` of one published fresh run."""
    out = {}
    for path in glob.glob(os.path.join(runs, run, lang, "*", "samples_*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                s = json.loads(line)
                out[s["doc_id"]] = s["resps"][0][0]
    return out


def answer_of(where: dict, lang: str, answers: dict, runs: str = RUNS) -> str:
    """The whole answer a real item lies in (``where``: its run and document, in ``runs``),
    read once per run into ``answers``."""
    key = (runs, where["run"], lang)
    if key not in answers:
        answers[key] = _answers(where["run"], lang, runs)
    return answers[key][where["doc"]]


def not_kept(item: dict, where: dict | None, lang: str, answers: dict, runs: str = RUNS) -> bool:
    """The rule's call on a held-out item, scored as the task scores it: a segment with its
    whole answer in view, a reply alone, a written, synthetic or transplanted text alone; True
    when it is not kept (left, degenerate or unreadable; code is neither, so not "not kept")."""
    if where is None:
        label = langid.label_segments([item["text"]], lang)[0]
    else:
        answer = answer_of(where, lang, answers, runs)
        if "turn" in where:
            reply = assistant_replies(answer)[where["turn"] - 1]
            assert reply == item["text"], item["id"]
            label = langid.label_segments([reply], lang)[0]
            return label.status != langid.KEPT  # a reply of code only is no reply: unreadable
        spans = langid.segment_spans(answer, drift.SEGMENT_TOKENS, whole_tail=True)
        a, b = spans[where["segment"] - 1]
        assert answer[a:b] == item["text"], item["id"]
        label = drift.timeline_labels(answer, lang)[where["segment"] - 1]
    return label.status not in (langid.KEPT, langid.CODE)


def score(lang: str, answers: dict | None = None, tuning: str | None = None) -> dict:
    """Precision and recall of "not kept" on ``lang``'s labelled set (the held-out one, or
    with ``tuning`` the tuning set of that rule, ``TUNING``), with their Wilson 95% lower
    bounds, the counts by label and origin, and the items the rule gets wrong."""
    runs, sets = TUNING[tuning] if tuning else (RUNS, SETS)
    items, manifest = read_set(lang, sets)
    strata = manifest["languages"][lang]["items"]
    answers = {} if answers is None else answers
    truth = [i["label"] != "kept" for i in items]
    called = [not_kept(i, strata[i["id"]]["where"], lang, answers, runs) for i in items]
    origins = [strata[i["id"]]["origin"] for i in items]
    return {"n": len(items), "labels": {k: sum(i["label"] == k for i in items) for k in LABELS},
            "real": sum(o in ("real", "transplant") for o in origins) / len(items), **agreement(truth, called),
            "wrong": [i["id"] for i, t, c in zip(items, truth, called) if t != c]}


def agreement(truth: list, called: list) -> dict:
    """How far ``called`` finds the "not kept" items of ``truth`` (True: not kept): precision
    and recall with their Wilson 95% lower bounds, and the false alarms and misses."""
    from drift_eval.metrics import stats  # deferred, start-up: loads numpy

    tp = sum(t and c for t, c in zip(truth, called))
    fp = sum(c and not t for t, c in zip(truth, called))
    fn = sum(t and not c for t, c in zip(truth, called))
    return {"precision": tp / (tp + fp) if tp + fp else float("nan"), "recall": tp / (tp + fn) if tp + fn else float("nan"),
            "precision_lower": stats.wilson_interval(tp, tp + fp)[0], "recall_lower": stats.wilson_interval(tp, tp + fn)[0],
            "fp": fp, "fn": fn}


METRICS_DOC = os.path.join(ROOT, "docs", "metrics.md")


def table(results: dict) -> str:
    """The per-language figures as docs/metrics.md gives them."""
    lines = ["| language | items | kept / left / degenerate / unreadable (labels) | real answers | precision (lower bound) "
             "| recall (lower bound) | wrong |", "|---|---|---|---|---|---|---|"]
    for lang, r in results.items():
        labels = " / ".join(str(r["labels"][k]) for k in LABELS)
        lines.append(f"| {lang} | {r['n']} | {labels} | {short(r['real'])} | {r['precision']:.3f} "
                     f"({r['precision_lower']:.3f}) | {r['recall']:.3f} ({r['recall_lower']:.3f}) | "
                     f"{', '.join(r['wrong']) or '—'} |")
    return "\n".join(lines) + "\n"


def documented(name: str = "langid_heldout") -> str | None:
    """The table ``name`` as docs/metrics.md holds it between the markers the published
    tables use (``results_tables.MARK``); None without them."""
    with open(METRICS_DOC, encoding="utf-8") as fh:
        return next((m.group("body") for m in MARK.finditer(fh.read()) if m.group("name") == name), None)


def write_documented(name: str, body: str) -> None:
    """docs/metrics.md with the table ``name`` replaced by ``body``."""
    with open(METRICS_DOC, encoding="utf-8") as fh:
        doc = fh.read()
    write_text_atomic(METRICS_DOC, MARK.sub(lambda m: m.group(1) + body + m.group(4)
                                            if m.group("name") == name else m.group(0), doc))


READINGS = "readings.json"  # beside the sets


def read_readings(sets: str = SETS) -> dict:
    """``{lang: {item id: [first, second] or [first, second, third]}}``: every reading of the
    held-out sets, or of the tuning sets ``sets`` (rule 2.2's: ``TUNING["2.2"][1]``)."""
    path = os.path.join(sets, READINGS)
    return read_json(path, "held-out readings", expect=dict) if os.path.exists(path) else {}


def labels_not_from_readings(sets: str = SETS) -> list:
    """``(lang, item id, readings)`` of every item of ``sets`` whose label does not follow
    from its readings: two that agree, or two that differ and a third that decides
    (``adjudicated``). Empty when every label does."""
    readings, wrong = read_readings(sets), []
    for lang in TARGETS:
        for item in read_set(lang, sets)[0]:
            read = readings.get(lang, {}).get(item["id"], [])
            if len(read) != (2 if read[:1] == read[1:2] else 3) or item["label"] != adjudicated(read):
                wrong.append((lang, item["id"], read))
    return wrong


def adjudicated(readings: list[str]) -> str | None:
    """An item's label from its readings: the label the first two give, or the third
    reading's where they differ (None while that is still to be read)."""
    if len(readings) < 2:
        return None
    if readings[0] == readings[1]:
        return readings[0]
    return readings[2] if len(readings) > 2 else None


def _due(items: list[dict], done: dict, k: int) -> list[dict]:
    """The items due for reading ``k`` (``done``: the readings so far, by id): for readings 1
    and 2 those with fewer than ``k`` readings (so both can be read at once), for reading 3
    those whose first two readings differ."""
    if k == 3:
        return [i for i in items if len(done.get(i["id"], [])) == 2 and adjudicated(done[i["id"]]) is None]
    return [i for i in items if len(done.get(i["id"], [])) < k]


def to_read(lang: str, k: int) -> list[dict]:
    """The items of ``lang``'s set due for reading ``k`` (``_due``), without label, note or
    source (rule 2.3's draw on: a source names a synthetic item's making, "letters
    shuffled", which would tell the reader its label)."""
    items, _ = read_set(lang)
    return [{key: v for key, v in i.items() if key not in ("label", "note", "source")}
            for i in _due(items, read_readings().get(lang, {}), k)]


def collect(lang: str, k: int, labels: dict) -> int:
    """Reading ``k`` of ``lang`` (``{id: {"label", "note"}}``) into ``readings.json`` and the
    set's labels (``adjudicated``; the first reading's note, or the third's where it
    decides). Every item due for reading ``k`` must be in it, with a known label."""
    items, _ = read_set(lang)
    everything = read_readings()
    mine = everything.setdefault(lang, {})
    due = {i["id"] for i in _due(items, mine, k)}
    if k == 2 and set(mine) != due:
        raise SystemExit(f"heldout_draw: collect reading 1 of {lang} before reading 2")
    if set(labels) != due or any(v.get("label") not in LABELS for v in labels.values()):
        raise SystemExit(f"heldout_draw: reading {k} of {lang} must label exactly its {len(due)} items "
                         f"with one of {', '.join(LABELS)}")
    for item_id, v in labels.items():
        mine.setdefault(item_id, []).append(v["label"])
    for item in items:
        if item["id"] in labels:
            item["label"] = adjudicated(mine[item["id"]])
            if k != 2:  # the first reading's note, or the deciding third one's
                item["note"] = labels[item["id"]].get("note") or ""
    write_text_atomic(os.path.join(SETS, READINGS),
                      json.dumps(everything, ensure_ascii=False, indent=1, sort_keys=True) + "\n")
    write_set(lang, items)
    return len(labels)


def write_jsonl(path: str, items: list[dict]) -> None:
    write_text_atomic(path, "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items))


def write_set(lang: str, items: list[dict]) -> None:
    write_jsonl(os.path.join(SETS, f"{lang}.jsonl"), items)


def write_manifest(manifest: dict) -> None:
    write_text_atomic(os.path.join(SETS, "draw.json"),
                      json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True) + "\n")
