"""The held-out answer set for language ID: whole answers drawn from the committed runs.

    python benchmarks/answer_set.py draw     # writes tests/data/langid_answers.jsonl, unlabelled
    python benchmarks/answer_set.py score [--json benchmarks/results/langid_answers.json]
    python benchmarks/answer_set.py draw-languages   # tests/data/langid_answers_languages.jsonl
    python benchmarks/answer_set.py score-languages [--json benchmarks/results/langid_answers_languages.json]

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

``draw-languages`` draws whole answers of every target language from the committed
``drift_languages`` runs (docs/results/languages: both models' 256-token single-turn answers
and the eight-turn replies of the runs published by then, ``LANGUAGE_RUNS``), scored as those tasks score them (``langid.label_answer``, the
answer's code and quotations in view), in two strata, seeded, before any label is written:

* ``random``: ``RANDOM_PER_LANGUAGE`` answers of each language, from a shuffle of all of
  them: the per-answer accuracy of the rule;
* ``contested``: among the rest, every answer on which leaving one step of the rule out
  changes the verdict (at most ``CONTESTED_MAX``, shuffled): the only answers that can say
  whether a step helps, so the ablations are judged on them. They are chosen by the rules'
  verdicts, never by their labels, and the file holds no verdict.

An answer that holds a tuning segment (``tests/data/langid/<L>.jsonl``, split ``tune``, or
the French set) or that the French answer set holds is skipped. Each answer is labelled by
reading, segment by segment (``segment_labels``: the target, another language's code, or
``none`` where nothing in the segment has a language), and its label follows from those
(``verdict``).
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import random
import re
import sys

from drift_eval.files import read_jsonl, write_json_atomic, write_text_atomic
from drift_eval.metrics import langid, lid_model
from drift_eval.metrics.langid import segments

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
OUT_LANGUAGES = os.path.join(ROOT, "tests", "data", "langid_answers_languages.jsonl")
#: the committed drift_languages runs the set was drawn from: (folder under docs/results, kind,
#: targets); eight-turn runs published after the draw are not in it, so it draws the same again
LANGUAGE_RUNS = [("languages/smollm2_single", "single", None), ("languages/qwen_single", "single", None),
                 ("languages/smollm2_multiturn", "turn", ("ar", "fr", "hi", "ja", "ru", "zh")),
                 ("languages/qwen_multiturn", "turn", ("ar", "hi", "ja", "ru", "zh"))]
RANDOM_PER_LANGUAGE = 8
CONTESTED_MAX = 130
STEPS = ("cleaning", "target_grammar", "margin_step", "english_grammar", "loop_step")


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


def verdict(labels: list, target: str = "fr") -> tuple[str, int | None]:
    """An answer's verdict from its segments' languages: ``stays`` (every known segment in
    ``target``), ``leaves`` (starts in it, a later known segment is not; with the 1-based
    segment), ``never`` (its first known segment is not in it), or ``undetermined`` (no
    known segment). ``unknown`` (the rule) and ``none`` (a hand label) are not known."""
    known = [(i, x) for i, x in enumerate(labels, 1) if x not in ("unknown", "none")]
    if not known:
        return "undetermined", None
    if known[0][1] != target:
        return "never", None
    left = next((i for i, x in known if x != target), None)
    return ("stays", None) if left is None else ("leaves", left)


def rules() -> dict:
    """{name: SegmentRule}: the full rule and each ablation of it (one step of
    ``langid.SegmentRule``, ``STEPS``, switched off)."""
    full = langid.SegmentRule()
    return {"rule": full, **{f"without {step}": dataclasses.replace(full, **{step: False}) for step in STEPS}}


def deciders() -> dict:
    """{name: segments -> languages}: each of ``rules`` as drift_french scores a segment
    (alone), and plain fastText on the raw segment."""
    out = {name: (lambda rule: lambda segs: [x.lang for x in langid.label_segments(segs, "fr", rule)])(rule)
           for name, rule in rules().items()}
    out["plain fastText"] = lambda segs: [p.lang for p in lid_model.identify_many(segs)]
    return out


def _tuning_texts() -> list[str]:
    texts = []
    for path in [os.path.join(ROOT, "tests", "data", "langid_segments.jsonl"),
                 *sorted(glob.glob(os.path.join(ROOT, "tests", "data", "langid", "*.jsonl")))]:
        rows = read_jsonl(path, "segment file", required=("text",))
        texts += [r["text"].strip() for r in rows if r.get("split", "tune") == "tune"]
    return [t for t in texts if t]


def language_rules() -> dict:
    """{name: (text, target) -> segment languages}: each of ``rules`` as the drift_languages
    tasks score an answer (``langid.label_answer``), and plain fastText on each raw segment."""
    out = {name: (lambda rule: lambda text, target: [x.lang for x in langid.label_answer(text, target, rule)])(rule)
           for name, rule in rules().items()}
    out["plain fastText"] = lambda text, target: [p.lang for p in lid_model.identify_many(langid.segments(text, 128))]
    return out


def draw_languages() -> list[dict]:
    tuning = _tuning_texts()
    taken_fr = {r["text"].strip() for r in read_jsonl(OUT, "answer set", required=("text",))}
    seen, pool = set(taken_fr), []
    for folder, kind, targets in LANGUAGE_RUNS:
        for target in sorted(os.listdir(os.path.join(RESULTS, folder))):
            if not os.path.isdir(os.path.join(RESULTS, folder, target)) or (targets and target not in targets):
                continue
            for a in _answers(f"{folder}/{target}", kind):
                key = a["text"].strip()
                if not key or key in seen or any(t in a["text"] for t in tuning):
                    continue
                seen.add(key)
                pool.append({**a, "target": target})
    rng = random.Random(SEED)
    rng.shuffle(pool)
    picked, per, chosen = [], {}, set()
    for i, a in enumerate(pool):
        if per.get(a["target"], 0) < RANDOM_PER_LANGUAGE:
            per[a["target"]] = per.get(a["target"], 0) + 1
            picked.append({**a, "stratum": "random"})
            chosen.add(i)
    decide = language_rules()
    full = decide.pop("rule")
    decide.pop("plain fastText")
    contested = []
    for i, a in enumerate(pool):
        if i in chosen or len(contested) == CONTESTED_MAX:
            continue
        v = verdict(full(a["text"], a["target"]), a["target"])
        if any(verdict(r(a["text"], a["target"]), a["target"]) != v for r in decide.values()):
            contested.append({**a, "stratum": "contested"})
    out = []
    for a in sorted(picked, key=lambda a: a["target"]) + sorted(contested, key=lambda a: a["target"]):
        out.append({"id": f"m{len(out) + 1:03d}", "stratum": a["stratum"], "target": a["target"],
                    "source": a["source"], "doc_id": a["doc_id"], "turn": a["turn"], "text": a["text"],
                    "segments": segments(a["text"], 128), "segment_labels": None, "label": None,
                    "leaves_at": None, "note": ""})
    return out


def score_languages(rows: list) -> dict:
    """Per stratum (and both together): accuracy of the full rule, each ablation and plain
    fastText against the hand labels, by language too; the confusion of the rule; and, per
    step, the answers it gets right that its ablation gets wrong (wins) and the reverse."""
    labelled = [r for r in rows if r.get("label") in LABELS]
    named = language_rules()
    got = {name: {r["id"]: verdict(decide(r["text"], r["target"]), r["target"]) for r in labelled}
           for name, decide in named.items()}

    def right(name, r):
        v, at = got[name][r["id"]]
        return v == r["label"] and (v != "leaves" or at == r["leaves_at"])

    res = {}
    for stratum in ("random", "contested", "all"):
        part = [r for r in labelled if stratum == "all" or r["stratum"] == stratum]
        block = {"n": len(part), "accuracy": {}, "by_language": {}, "confusion": {}}
        for name in named:
            block["accuracy"][name] = sum(right(name, r) for r in part) / len(part) if part else None
        for target in sorted({r["target"] for r in part}):
            mine = [r for r in part if r["target"] == target]
            block["by_language"][target] = {"n": len(mine), "rule": sum(right("rule", r) for r in mine),
                                            "plain fastText": sum(right("plain fastText", r) for r in mine)}
        confusion = {a: dict.fromkeys(LABELS, 0) for a in LABELS}
        for r in part:
            confusion[r["label"]][got["rule"][r["id"]][0]] += 1
        block["confusion"] = confusion
        block["wrong"] = [r["id"] for r in part if not right("rule", r)]
        res[stratum] = block
    res["steps"] = {step: {"wins": [r["id"] for r in labelled if right("rule", r) and not right(f"without {step}", r)],
                           "losses": [r["id"] for r in labelled
                                      if right(f"without {step}", r) and not right("rule", r)]}
                    for step in STEPS}
    return res


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
    if argv[:1] == ["draw-languages"]:
        rows = draw_languages()
        write_text_atomic(OUT_LANGUAGES, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        print(f"{len(rows)} answers ({sum(r['stratum'] == 'random' for r in rows)} random) -> "
              f"{os.path.relpath(OUT_LANGUAGES, ROOT)}")
        return 0
    if argv[:1] == ["score-languages"]:
        res = score_languages(read_jsonl(OUT_LANGUAGES, "answer set", required=("id", "target", "text", "label")))
        for stratum in ("random", "contested", "all"):
            b = res[stratum]
            print(f"{stratum} ({b['n']} answers): " + ", ".join(f"{k} {v:.3f}" for k, v in b["accuracy"].items()))
        for step, wl in res["steps"].items():
            print(f"{step}: right where its ablation is wrong on {len(wl['wins'])} ({', '.join(wl['wins']) or '-'}), "
                  f"wrong where it is right on {len(wl['losses'])} ({', '.join(wl['losses']) or '-'})")
        if "--json" in argv:
            write_json_atomic(argv[argv.index("--json") + 1], res)
        return 0
    if argv[:1] == ["score"]:
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
