"""drift_languages tasks: ``drift_<L>_single`` (forced length), ``drift_<L>_single_native``
(the instruction worded in L) and ``drift_<L>_multiturn`` (eight turns, the model's own
history) for every target language L of ``drift_eval.metrics.languages.TARGETS``, on the
shared item bank. Metric names are language-neutral (``fully_target``, ``target_turn_3``):
``drift.neutral_names``.

lm-eval loads this file by path from the task YAML (``!function utils.NAME``); the maths
lives in ``drift_eval.metrics``.
"""
from __future__ import annotations

import functools

import datasets

from drift_eval.conversation import ConversationSpec, assistant_replies
from drift_eval.errors import DriftUsageError
from drift_eval.metrics import conversation, drift
from drift_eval.plugin.answers import meta_of
from drift_eval.settings import int_option
from drift_eval.tasks import common
# the shared aggregations, by the names the YAML files give them
from drift_eval.tasks.common import (answer_record, conversation_placement, conversation_trace_record,  # noqa: F401
                                     defined_mean, headline, left_languages, placements, share_lower, share_upper,
                                     time_interval, trace_record)
from drift_eval.taskdata.languages import check_target, read_conversations, read_requests, system_prompt

mean_language_score = drift.mean_language_score


def _first(items: list, count, what: str) -> list:
    """The first ``count`` items of the bank (all of them when ``count`` is None)."""
    if count is None:
        return items
    return items[:int_option(what, count, 1, len(items))]


def load_single_turn(target_language: str = "fr", prompt_wording: str = "en", num_requests=None, **_metadata):
    """``custom_dataset``: one doc per request of the bank (all 200, or the first
    ``num_requests`` given with ``--metadata``), with the target's instruction."""
    system = system_prompt(check_target(target_language), prompt_wording)
    docs = [dict(r, system_prompt=system, target_language=target_language, prompt_wording=prompt_wording)
            for r in _first(read_requests(), num_requests, "num_requests")]
    return {"test": datasets.Dataset.from_list(docs)}


def load_conversations(target_language: str = "fr", prompt_wording: str = "en", num_conversations=None,
                       **_metadata):
    """``custom_dataset``: one doc per conversation of the bank (all 100, or the first
    ``num_conversations``), replayed live: each turn sees the model's own earlier replies."""
    system = system_prompt(check_target(target_language), prompt_wording)
    docs = []
    for c in _first(read_conversations(), num_conversations, "num_conversations"):
        spec = ConversationSpec(system, list(c["user_turns"]), "live", 0, [])
        docs.append(dict(id=c["id"], topic=c["topic"], system_prompt=spec.system_prompt, spec=spec.to_json(),
                         target_language=target_language, prompt_wording=prompt_wording))
    return {"test": datasets.Dataset.from_list(docs)}


def process_results(doc, results):
    lang = doc["target_language"]
    scores = drift.neutral_names(drift.score_response(results[0], instruction=doc["system_prompt"], lang=lang,
                                                      meta=meta_of(results[0])))
    headline(scores, scores["fully_target"])
    time_interval(scores)
    scores.update(answer_record(results[0]))
    scores.update(trace_record(results[0], lang))
    return scores


def process_conversation(doc, results):
    replies = assistant_replies(results[0])
    scores = drift.neutral_names(conversation.score_conversation(
        replies, lang=doc["target_language"], instruction=doc.get("system_prompt", "")))
    headline(scores, scores["all_turns_target"])
    time_interval(scores)
    scores["instruction_placement"] = conversation_placement(results[0])
    scores.update(conversation_trace_record(results[0], doc["target_language"]))
    return scores


def target_survival(timelines, target: str):
    """lm-eval aggregation of ``language_timeline``: the share of answers still in the
    task's target language at each segment (the task binds ``target``)."""
    return drift.french_survival(timelines, target)


target_survival.needs_target = True


class _Target:
    """A drift_languages task: it knows its target language (``dataset_kwargs``), checks it
    and what scoring it needs before any generation, records it in the task's metadata, and
    binds it into the aggregations that need it."""

    def __init__(self, config=None):
        kwargs = dict((config or {}).get("dataset_kwargs") or {})
        clash = sorted(set((config or {}).get("metadata") or {}) & {"target_language", "prompt_wording"})
        if clash:
            raise DriftUsageError(f"{clash[0]} comes from the task's name (drift_ja_single, drift_ja_single_native, "
                                  f"...), not from --metadata: run the task of the language and wording you want")
        target = check_target(kwargs.get("target_language"))
        problem = drift.segmenter_problem(target)
        if problem:
            raise DriftUsageError(problem)
        super().__init__(config=config)
        self.target_language = target
        # after the data is loaded: lm-eval hands the metadata to the loader too
        self.config.metadata = {**(self.config.metadata or {}), "target_language": target}

    def aggregation(self) -> dict:
        return {k: functools.partial(f, target=self.target_language) if getattr(f, "needs_target", False) else f
                for k, f in super().aggregation().items()}


class ForcedLengthTask(_Target, common.ForcedLengthTask):
    """``drift_<L>_single``: ``common.ForcedLengthTask`` for target L."""


class ConversationTask(_Target, common.ConversationTask):
    """``drift_<L>_multiturn``: ``common.ConversationTask`` for target L."""

