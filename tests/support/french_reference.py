"""The drift_french scores of committed real answers, as a reference that changes to the
shared scoring code must not move unless a new task version says so
(tests/tasks/test_french_unchanged.py). The committed file holds the scores of task version 4.3
("kept" means written in French: docs/metrics.md; segment rule 2.3), which are those of 4.2
but for two conversations (two runs of one Qwen conversation), whose not-kept turn is now
left for English (English grammar under fastText's French) where 4.2 called it degenerate;
4.2's were those of 4.1: rule 2.2's new loop measures reach none of these answers. It was
written again when 4.0 changed the definitions (the 3.0 scores differ from it only in the metrics 4.0
changed) and when 4.1 changed what a loop is (the 4.0 scores differ only where a segment
became a loop: French turns, the last three and all turns, time in French, the degenerate
cause, and the single answers' degenerate share).

    python tests/support/french_reference.py --write    # rewrite tests/data/french_scores_reference.json
    python tests/support/french_reference.py --write-short-run    # score drift_french_short_run.json's answers again

Inputs: the whole SmolLM2 answers of docs/results/checkpoints/smollm2_single_whole, the
conversations of docs/results/*_multiturn (committed), and ``EDGE``: French around other
scripts' marks. Written with the scoring code of the
tree it runs in."""
from __future__ import annotations

import glob
import json
import os
import sys

from drift_eval.metrics import conversation, drift
from drift_eval.tasks.drift_french import utils
from support.places import REPO

ROOT = str(REPO)
REFERENCE = os.path.join(ROOT, "tests", "data", "french_scores_reference.json")
INSTRUCTION = ("You are a helpful assistant. Answer only in French, whatever language the user writes in. "
               "Never switch to another language.")


#: French with other scripts' marks, where the shared code must not move either (the
#: documented exceptions, Han and kana or Devanagari, Arabic and Cyrillic vowel signs, aside)
EDGE = [
    "Le mot hébreu שָׁלוֹם עוֹלָם veut dire « paix au monde ». On le dit souvent pour saluer quelqu'un. "
    "Le mot hébreu שָׁלוֹם עוֹלָם revient dans beaucoup de chansons, et les enfants l'apprennent très tôt.",
    "En thaï, on dit ต่อไป pour « ensuite » et สวัสดีค่ะ pour saluer. La langue thaïe a cinq tons, "
    "et les marques de ton ่ ้ changent le sens des mots. C'est une langue très musicale.",
    "En russe, за́мок (le château) et замо́к (la serrure) ne diffèrent que par l'accent. "
    "Les dictionnaires marquent l'accent tonique, mais les textes courants ne le font pas.",
    "Le bengali écrit ড় et ঢ় avec un point souscrit, et le pendjabi ਲ਼ aussi. Ces lettres sont rares "
    "dans les textes anciens, mais elles sont courantes aujourd'hui dans la presse.",
    "Le footballeur Hakan Çalhanoğlu et la chanteuse Sezen Aksu viennent de Turquie. "
    "Mon amie Işıl habite à Istanbul, près du Bosphore, avec son frère Ilkay.",
    "שָׁלוֹם עוֹלָם",
    "Ελληνικά: ἀρχή, ᾠδή et ὕδωρ sont des mots grecs anciens avec leurs esprits et leurs accents.",
]


def inputs() -> dict:
    """``{"single": {key: text}, "conversations": {key: [reply, ...]}}``."""
    single, convs = {}, {}
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "results", "checkpoints", "smollm2_single_whole", "*.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                answer = rec["answer"]["answer"] if isinstance(rec["answer"].get("answer"), dict) else rec["answer"]
                single[f"{os.path.basename(path)}:{rec['key'][:16]}"] = answer["text"]
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "results", "*_multiturn", "*", "*", "samples_*.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                s = json.loads(line)
                msgs = json.loads(s["resps"][0][0])
                convs[f"{os.path.relpath(path, ROOT)}:{s['doc_id']}"] = [m["content"] for m in msgs
                                                                         if m["role"] == "assistant"]
    for i, text in enumerate(EDGE):
        single[f"edge:{i}"] = text
    convs["edge"] = list(EDGE)
    return {"single": single, "conversations": convs}


def scores() -> dict:
    data = inputs()
    return {"single": {k: drift.score_response(t, instruction=INSTRUCTION, lang="fr") for k, t in data["single"].items()},
            "conversations": {k: conversation.score_conversation(r, lang="fr", instruction=INSTRUCTION)
                              for k, r in data["conversations"].items()}}


SHORT_RUN = os.path.join(ROOT, "tests", "data", "drift_french_short_run.json")
#: what the backend reported about an answer (``tasks.common.answer_record``) and where the
#: model wanted to stop: kept from the logged sample, which a plain string cannot carry
BACKEND = ("forced_length", "answer_tokens", "instruction_placement", "natural_end_observed", "natural_end",
           "natural_end_share")


def short_run() -> dict:
    """The samples of tests/data/drift_french_short_run.json, their per-sample metrics scored
    again from their logged answers by the tasks' own ``process_results`` (prompts, answers
    and hashes as they were logged; the backend's reports kept)."""
    with open(SHORT_RUN, encoding="utf-8") as fh:
        run = json.load(fh)
    score = {"drift_french_single": utils.process_results, "drift_french_multiturn": utils.process_conversation}
    out = {}
    for task, samples in run.items():
        out[task] = []
        for old in samples:
            new = score[task](old["doc"], [old["resps"][0][0]])
            new.update({k: old[k] for k in BACKEND if k in new})
            keep = {k: v for k, v in old.items() if k not in old["metrics"]}
            out[task].append({**keep, **new, "metrics": list(new)})
    return out


if __name__ == "__main__":
    if sys.argv[1:] not in (["--write"], ["--write-short-run"]):
        sys.exit("usage: python tests/support/french_reference.py --write | --write-short-run")
    path, data = (REFERENCE, scores()) if sys.argv[1] == "--write" else (SHORT_RUN, short_run())
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False, sort_keys=True, indent=None if path == REFERENCE else 0)
    os.replace(path + ".tmp", path)
    print(path)
