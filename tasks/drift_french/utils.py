"""drift_french tasks: docs, requests and scoring.

``drift_french_single`` is the forced-length single-turn test; ``drift_french_multiturn``
(and its re-injection and fixed-history variants) the eight-turn conversation test.

lm-eval loads this file by path from the task YAML (``!function utils.NAME``); the maths
lives in ``drift_eval.metrics``.
"""
from __future__ import annotations

import datasets

from drift_eval.conversation import ConversationSpec, assistant_replies
from drift_eval.errors import DriftUsageError
from drift_eval.metrics import conversation, drift
from drift_eval.plugin.answers import meta_of
from drift_eval.settings import int_option
# the shared task classes and aggregations, by the names the YAML files give them
from drift_eval.tasks.common import (ConversationTask, ForcedLengthTask, answer_record,  # noqa: F401
                                     conversation_placement, conversation_trace_record, defined_mean, headline,
                                     left_languages, placements, share_lower, share_upper, time_interval, trace_record)
from drift_eval.taskdata.french import CONFLICT_REQUEST, read_conversations, read_requests, system_prompt


def load_single_turn(prompt_language: str = "en", **_metadata):
    """``custom_dataset`` for lm-eval: one doc per user request, with its system prompt."""
    docs = [dict(r, system_prompt=system_prompt(prompt_language), prompt_language=prompt_language)
            for r in read_requests()]
    return {"test": datasets.Dataset.from_list(docs)}


def process_results(doc, results):
    scores = drift.score_response(results[0], instruction=doc["system_prompt"], lang="fr", meta=meta_of(results[0]))
    headline(scores, scores["fully_french"])
    time_interval(scores)
    scores.update(answer_record(results[0]))
    scores.update(trace_record(results[0], "fr"))
    return scores


french_survival = drift.french_survival
mean_language_score = drift.mean_language_score


# ---------------------------------------------------------------------- conversations
def load_conversations(prompt_language: str = "en", mode: str = "live", reinject_every: int = 0,
                       num_conversations: int | None = None, conflict_turn: int = 0, **_metadata):
    """``custom_dataset``: one doc per conversation (32 by default; ``--metadata``
    ``{"num_conversations": N, "reinject_every": K, "conflict_turn": T}`` changes them).
    ``conflict_turn`` T > 0 appends the user's request to switch to English
    (``data.CONFLICT_REQUEST``) to the user message of turn T."""
    system = system_prompt(prompt_language)
    convs = read_conversations()
    reinject_every = int_option("reinject_every", reinject_every, 0)
    if num_conversations is not None:
        convs = convs[:int_option("num_conversations", num_conversations, 1, len(convs))]
    conflict_turn = int_option("conflict_turn", conflict_turn, 0)
    if conflict_turn and not 1 <= conflict_turn <= min(len(c["user_turns"]) for c in convs):
        raise DriftUsageError(f"conflict_turn must be a turn of the conversations (1-8), got {conflict_turn}")
    docs = []
    for c in convs:
        turns = list(c["user_turns"])
        if conflict_turn:
            turns[conflict_turn - 1] = f"{turns[conflict_turn - 1]} {CONFLICT_REQUEST}"
        spec = ConversationSpec(system, turns, mode, int(reinject_every), c["scripted_replies"])
        docs.append(dict(id=c["id"], topic=c["topic"], system_prompt=spec.system_prompt, spec=spec.to_json(),
                         mode=mode, reinject_every=int(reinject_every), conflict_turn=conflict_turn))
    return {"test": datasets.Dataset.from_list(docs)}


def process_conversation(doc, results):
    replies = assistant_replies(results[0])
    scores = conversation.score_conversation(replies, lang="fr", instruction=doc.get("system_prompt", ""))
    headline(scores, scores["all_turns_french"])
    time_interval(scores)
    scores["instruction_placement"] = conversation_placement(results[0])
    scores.update(conversation_trace_record(results[0], "fr"))
    return scores


def process_conflict(doc, results):
    """``process_conversation`` plus French before and after the user's request to switch."""
    scores = process_conversation(doc, results)
    t = int(doc["conflict_turn"])
    turns = sorted(int(k.rsplit("_", 1)[1]) for k in scores if k.startswith("french_turn_"))
    before = [scores[f"french_turn_{k}"] for k in turns if k < t]
    after = [scores[f"french_turn_{k}"] for k in turns if k >= t]
    scores["french_before_request"] = defined_mean(before)
    scores["french_after_request"] = defined_mean(after)
    return scores


def process_fixed_history(doc, results):
    last = assistant_replies(results[0])[-1:]
    s = conversation.score_conversation(last, lang="fr", first_turn=1, instruction=doc.get("system_prompt", ""))
    return {"french_last_turn": s["french_turn_1"], **{f"not_kept_{c}": s[f"not_kept_{c}"] for c in drift.CAUSES},
            "left_for": s["left_for"], "leak_last_turn": s["leak_turn_1"], "words_last_turn": s["words_turn_1"],
            "repetition": s["repetition"]}
