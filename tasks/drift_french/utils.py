"""drift_french tasks: docs, requests and scoring.

``drift_french_single`` is the forced-length single-turn test; ``drift_french_multiturn``
(and its re-injection and fixed-history variants) the eight-turn conversation test.

lm-eval loads this file by path from the task YAML (``!function utils.NAME``); the maths
lives in ``drift_eval.metrics``.
"""
from __future__ import annotations

import json
from copy import deepcopy

from drift_eval.errors import DriftUsageError
from drift_eval.conversation import ConversationSpec, assistant_replies
from drift_eval.metrics import conversation, drift, langid
from drift_eval.plugin.answers import meta_of
from drift_eval.plugin.request_types import CONVERSATION
from drift_eval.plugin.task_base import YamlTask
from drift_eval.settings import int_option
from drift_eval.tasks.drift_french.data import CONFLICT_REQUEST, read_conversations, read_requests, system_prompt


def load_single_turn(prompt_language: str = "en", **_metadata):
    """``custom_dataset`` for lm-eval: one doc per user request, with its system prompt."""
    import datasets

    docs = [dict(r, system_prompt=system_prompt(prompt_language), prompt_language=prompt_language)
            for r in read_requests()]
    return {"test": datasets.Dataset.from_list(docs)}


def process_results(doc, results):
    scores = drift.score_response(results[0], instruction=doc["system_prompt"], lang="fr", meta=meta_of(results[0]))
    _headline(scores, scores["fully_french"])
    scores.update(answer_record(results[0]))
    return scores


def _headline(scores: dict, value) -> None:
    """The drift_french group's headline ``drift_score``. An undetermined sample gets no
    ``drift_score`` at all (rather than None): lm-eval then takes its own ``mean`` and
    standard error over the determined samples, and its group pools the tasks' means,
    weighted by their document counts (docs/metrics.md, "The group headline")."""
    if value is not None:
        scores["drift_score"] = value


def answer_record(answer) -> dict:
    """What the backend reported about an answer (``drift_eval.plugin.backends``): whether
    its length was forced, its length in tokens (None: the backend cannot count), and where
    the instruction sat (``system``/``user``/``plain``; None: not known)."""
    meta = meta_of(answer)
    tokens = meta.get("tokens")
    return {"forced_length": float(meta.get("forced_length") is True),
            "answer_tokens": float(tokens) if isinstance(tokens, int) else None,
            "instruction_placement": meta.get("instruction_placement"),
            # 1 where the backend watched for the natural end of a forced answer (hf-drift);
            # 0 where it cannot (other backends): natural_end is then not known, not absent
            "natural_end_observed": float("natural_end" in meta) if meta.get("forced_length") else None}


def placements(values) -> str:
    """lm-eval aggregation of ``instruction_placement``: the one placement of the run, or
    every placement seen, joined by '+'."""
    return "+".join(sorted({str(v) for v in values})) or "none"


french_survival = drift.french_survival
mean_language_score = drift.mean_language_score


def defined_mean(values):
    """Aggregation for metrics that are not defined for every sample (``None`` there): the
    mean over the samples where they are, ``None`` when there are none."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _check_language_model():
    try:
        langid.identify("Ceci est une phrase en français.")
    except langid.LanguageModelMissing as exc:
        raise DriftUsageError(str(exc)) from None


class DriftTask(YamlTask):
    """Base of the drift tasks: it checks the language-ID model before any generation
    starts, so that a missing file cannot waste a run."""

    def __init__(self, config=None):
        _check_language_model()
        super().__init__(config=config)


class ForcedLengthTask(DriftTask):
    """A generation task whose answers run to ``max_gen_toks``: the end-of-sequence token is
    suppressed until then (``min_new_tokens = max_gen_toks`` unless the user sets
    ``min_new_tokens`` in ``--gen_kwargs``; ``min_new_tokens=0`` runs it unforced on
    purpose). The task's metadata in the results says which (``answer_length``: ``forced``
    or ``unforced``), and so do the report, the leaderboard and the gate, which never
    compare the two as one test."""

    def build_all_requests(self, **kwargs):
        gen = self.config.generation_kwargs or {}
        forced = int(gen.get("min_new_tokens", gen.get("max_gen_toks", 256)) or 0) > 0
        self.config.metadata = {**(self.config.metadata or {}), "answer_length": "forced" if forced else "unforced"}
        super().build_all_requests(**kwargs)

    def construct_requests(self, doc, ctx, **kwargs):
        inst = super().construct_requests(doc, ctx, **kwargs)
        for i in inst if isinstance(inst, list) else [inst]:
            gen = i.arguments[1]
            if "min_new_tokens" not in gen:
                gen["min_new_tokens"] = gen.get("max_gen_toks", 256)
        return inst


# ---------------------------------------------------------------------- conversations
def load_conversations(prompt_language: str = "en", mode: str = "live", reinject_every: int = 0,
                       num_conversations: int | None = None, conflict_turn: int = 0, **_metadata):
    """``custom_dataset``: one doc per conversation (32 by default; ``--metadata``
    ``{"num_conversations": N, "reinject_every": K, "conflict_turn": T}`` changes them).
    ``conflict_turn`` T > 0 appends the user's request to switch to English
    (``data.CONFLICT_REQUEST``) to the user message of turn T."""
    import datasets

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


class ConversationTask(DriftTask):
    """One ``generate_conversation`` request per doc, served by every chat model."""

    def construct_requests(self, doc, ctx, **kwargs):
        return self.request(doc, CONVERSATION, doc["spec"], deepcopy(self.config.generation_kwargs), **kwargs)


def process_conversation(doc, results):
    replies = assistant_replies(results[0])
    scores = conversation.score_conversation(replies, lang="fr", instruction=doc.get("system_prompt", ""))
    _headline(scores, scores["all_turns_french"])
    scores["instruction_placement"] = conversation_placement(results[0])
    return scores


def conversation_placement(messages) -> str:
    """Where the instruction sat in a logged conversation: its own system turn, or the top
    of the first user message (a chat template without a system role)."""
    if isinstance(messages, str):
        messages = json.loads(messages)
    return "system" if messages and messages[0].get("role") == "system" else "user"


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
    return {"french_last_turn": s["french_turn_1"], "undetermined_share": s["undetermined_share"],
            "leak_last_turn": s["leak_turn_1"], "words_last_turn": s["words_turn_1"], "repetition": s["repetition"]}
