"""What the segment rule says on every text its sets hold, recorded once and checked later:
the guard that lets the rule's code be rewritten (made faster, split into files) without
becoming another rule.

The held-out sets test a decision rule, and were drawn for its code as it was frozen
(``langid.rule_fingerprint``). Code that gives every output of the frozen code on the same
texts is the same rule on them, so its held-out figures are the frozen rule's, and it needs
no fresh draw; code that gives one output otherwise is a new rule. ``record`` runs the rule
in use on every text below and writes, per text, a digest of every field of every segment
label it gives (language, fastText's label and probability, loop share, reason, status,
share of known words); ``check`` runs it again and names the texts whose outputs differ;
``revise`` does the same and, when none differs, lists the code in use (its fingerprint) as
a revision of the frozen rule, which tests/maths/test_langid_heldout.py then accepts.

The texts (``units``; 21 000 or so, every target language):

* the items of the held-out sets (rule 2.3) and of the three tuning sets (rules 2.0-2.2),
  each labelled alone, as ``heldout_sets.not_kept`` labels a text without its answer;
* every answer of the fresh runs those sets were drawn from (docs/results/heldout*): a
  single-turn answer segment by segment, as the task scores it (``drift.timeline_labels``),
  each reply of a conversation alone;
* the hand-labelled sets of tests/data: ``langid/`` (the tuning parts of every target),
  ``langid_segments.jsonl`` (French) and the two sets of labelled answers (whole answers).

Every committed answer of the task runs is checked as well, at the metric level, by
tests/tasks/test_rescoring.py.

    python benchmarks/rule_outputs.py record    # writes tests/data/langid_heldout/rule_outputs.json
    python benchmarks/rule_outputs.py check     # exits 1 and names the texts that differ
    python benchmarks/rule_outputs.py revise    # check, then list the code in use as a revision
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import sys

from drift_eval.conversation import assistant_replies
from drift_eval.files import read_json, read_jsonl, write_json_atomic
from drift_eval.metrics import drift, langid
from drift_eval.metrics.languages import TARGETS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
RECORD = os.path.join(DATA, "langid_heldout", "rule_outputs.json")
SETS = ("langid_heldout", "langid_tuning", "langid_tuning_2.1", "langid_tuning_2.2")
RUNS = ("heldout", "heldout_2.1", "heldout_2.2", "heldout_2.3")
_TASK = re.compile(r"samples_drift_([a-z]{2})_(single|multiturn)_")
#: hex digits kept of each text's digest (48 bits: a chance change goes unseen with odds of 1 in 2**48)
DIGEST_HEX = 12


def _digest(labels: list) -> str:
    fields = [[lab.lang, lab.score, lab.fasttext, lab.degenerate, lab.reason, lab.status, lab.known_words]
              for lab in labels]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:DIGEST_HEX]


def units():
    """(source, language, how, text) of every text the record covers, in a fixed order;
    ``how``: ``alone`` (one segment) or ``answer`` (segment by segment)."""
    for name in SETS:
        for lang in TARGETS:
            for item in read_jsonl(os.path.join(DATA, name, f"{lang}.jsonl"), "labelled set"):
                yield f"{name}/{lang}.jsonl", lang, "alone", item["text"]
    for run in RUNS:
        for path in sorted(glob.glob(os.path.join(ROOT, "docs", "results", run, "**", "samples_*.jsonl"),
                                     recursive=True)):
            found = _TASK.search(os.path.basename(path))
            if found is None:
                continue
            lang, kind = found.groups()
            source = os.path.relpath(path, ROOT).replace(os.sep, "/")
            for sample in read_jsonl(path, "samples file"):
                answer = sample["resps"][0][0]
                if kind == "single":
                    yield source, lang, "answer", answer
                else:
                    for reply in assistant_replies(answer):
                        yield source, lang, "alone", reply
    for lang in TARGETS:
        for item in read_jsonl(os.path.join(DATA, "langid", f"{lang}.jsonl"), "labelled set"):
            yield f"langid/{lang}.jsonl", lang, "alone", item["text"]
    for item in read_jsonl(os.path.join(DATA, "langid_segments.jsonl"), "labelled set"):
        yield "langid_segments.jsonl", "fr", "alone", item["text"]
    for item in read_jsonl(os.path.join(DATA, "langid_answers.jsonl"), "labelled set"):
        yield "langid_answers.jsonl", "fr", "answer", item["text"]
    for item in read_jsonl(os.path.join(DATA, "langid_answers_languages.jsonl"), "labelled set"):
        yield "langid_answers_languages.jsonl", item["target"], "answer", item["text"]


def outputs() -> dict:
    """``{source: [digest of each of its texts, in order]}`` under the rule in use."""
    out: dict = {}
    for source, lang, how, text in units():
        labels = drift.timeline_labels(text, lang) if how == "answer" else langid.label_segments([text], lang)
        out.setdefault(source, []).append(_digest(labels))
    return out


def differences(record: dict, now: dict) -> list[str]:
    """``source #k`` of every text whose outputs differ from the record (or a source that one
    side lacks)."""
    out = []
    for source in sorted(set(record) | set(now)):
        a, b = record.get(source), now.get(source)
        if a is None or b is None or len(a) != len(b):
            out.append(f"{source} (texts: {len(a or [])} recorded, {len(b or [])} now)")
            continue
        out += [f"{source} #{k}" for k, (x, y) in enumerate(zip(a, b)) if x != y]
    return out


def read_record(path: str = RECORD) -> dict:
    return read_json(path, "segment rule's recorded outputs", expect=dict)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("record", "check", "revise"))
    args = ap.parse_args(argv)
    now = outputs()
    texts = sum(map(len, now.values()))
    if args.action == "record":
        write_json_atomic(RECORD, {"rule_version": langid.RULE_VERSION, "rule_fingerprint": langid.rule_fingerprint(),
                                   "texts": texts, "revisions": [], "outputs": now})
        print(f"recorded the outputs of rule {langid.RULE_VERSION} on {texts} texts: {RECORD}")
        return 0
    record = read_record()
    differ = differences(record["outputs"], now)
    for line in differ[:50]:
        print(line)
    print(f"{len(differ)} of {texts} texts give other outputs than the recorded rule")
    if differ:
        return 1
    fingerprint = langid.rule_fingerprint()
    known = [record["rule_fingerprint"], *(r["fingerprint"] for r in record["revisions"])]
    if args.action == "revise" and fingerprint not in known:
        record["revisions"].append({"fingerprint": fingerprint, "follows": known[-1], "texts": texts})
        write_json_atomic(RECORD, record)
        print(f"listed the code in use as revision {len(record['revisions'])} of rule {record['rule_version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
