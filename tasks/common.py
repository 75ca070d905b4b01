"""What every language-persistence task shares: its task classes (forced length, eight-turn
conversations), the headline rule, what the backend reported about an answer, and the
aggregations of values that are not defined for every sample. The drift_french and
drift_languages task folders build on it; lm-eval reaches it through their ``utils.py``."""
from __future__ import annotations

import json
import math
from copy import deepcopy

from drift_eval.errors import DriftUsageError
from drift_eval.metrics import drift, lexicon, lid_model, stats
from drift_eval.plugin.answers import Answer, meta_of
from drift_eval.plugin.request_types import CONVERSATION
from drift_eval.plugin.task_base import YamlTask


def headline(scores: dict, value: float) -> None:
    """The group's headline ``drift_score``: 1 for a sample kept throughout, 0 otherwise,
    for every sample (docs/metrics.md, "The group headline"): lm-eval takes its ``mean``
    and standard error over all of them, and the group pools the tasks' means, weighted by
    their document counts."""
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


def trace_record(answer, lang: str) -> dict:
    """A reasoning model's trace (lm-eval's ``think_end_token``; ``drift_eval.plugin.backends``),
    scored on its own and never in the headline: ``trace_kept`` 1 where the trace is kept in
    ``lang`` throughout, by the same rule as an answer; ``trace_left`` 1 where it is not kept
    because it left ``lang`` (not for a loop or unreadable text); ``trace_tokens`` its length;
    ``trace_ended`` 1 where the model ended its reasoning itself, 0 where it ran out of
    tokens and the plugin ended it (``reasoning.reasoning_of``; None where the answer took one
    request). All are None for an answer without a trace; the first two also where its
    length is known but not its text."""
    meta = meta_of(answer)
    tokens = meta.get("trace_tokens")
    ended = meta.get("trace_ended")
    record = {"trace_tokens": float(tokens) if isinstance(tokens, int) else None, "trace_kept": None,
              "trace_left": None, "trace_ended": float(ended) if isinstance(ended, bool) else None}
    trace = meta.get("trace")
    if isinstance(trace, str):
        timeline = [x.entry for x in drift.timeline_labels(trace, lang)]
        record["trace_kept"] = float(drift.kept(timeline, lang))
        record["trace_left"] = drift.cause_scores(timeline, lang)["not_kept_left"]
    return record


def conversation_trace_record(messages, lang: str) -> dict:
    """A reasoning model's traces over a logged conversation (each generated turn's
    ``trace`` and ``trace_tokens``, ``drift_eval.plugin.conversations``), scored on their own
    and never in the headline: ``trace_kept`` 1 where every turn's trace is kept in ``lang``
    throughout, ``trace_left`` 1 where some turn's trace left it, ``trace_tokens`` the mean
    trace length per turn that has one. All None in a conversation without traces; the
    first two also where a turn's trace length is known but not its text; ``trace_ended`` 1
    where the model ended every turn's reasoning itself (``trace_record``)."""
    if isinstance(messages, str):
        messages = json.loads(messages)
    turns = [m for m in messages if m.get("role") == "assistant" and ("trace" in m or "trace_tokens" in m)]
    record = {"trace_tokens": None, "trace_kept": None, "trace_left": None, "trace_ended": None}
    if not turns:
        return record
    counts = [m["trace_tokens"] for m in turns if isinstance(m.get("trace_tokens"), int)]
    record["trace_tokens"] = float(sum(counts) / len(counts)) if counts else None
    ended = [m["trace_ended"] for m in turns if isinstance(m.get("trace_ended"), bool)]
    record["trace_ended"] = float(all(ended)) if ended else None
    if all(isinstance(m.get("trace"), str) for m in turns):
        each = [trace_record(Answer("", trace=m["trace"]), lang) for m in turns]
        record["trace_kept"] = float(all(r["trace_kept"] == 1.0 for r in each))
        record["trace_left"] = float(any(r["trace_left"] == 1.0 for r in each))
    return record


#: lm-eval aggregation of ``left_for``
left_languages = drift.left_languages


def time_interval(scores: dict) -> None:
    """The time in the language's interval, into the results JSON beside it: the sample's
    ``time_in_*`` again as ``time_in_*_lower`` and ``time_in_*_upper``, which aggregate to
    the bounds of its 95% interval (``share_lower``, ``share_upper``)."""
    for name in [k for k in scores if k.startswith("time_in_")]:
        scores[f"{name}_lower"] = scores[f"{name}_upper"] = scores[name]


def _bound(values, side: int):
    bound = stats.share_sum_interval(values)[side]
    return bound if math.isfinite(bound) else None  # one sample: no interval (null, never NaN)


def share_lower(values):
    """lm-eval aggregation: the lower bound of the 95% interval of the mean of shares
    (``stats.share_sum_interval``, exact, as the report gives it); null below two samples."""
    return _bound(values, 0)


def share_upper(values):
    """lm-eval aggregation: the upper bound (``share_lower``)."""
    return _bound(values, 1)


def placements(values) -> str:
    """lm-eval aggregation of ``instruction_placement``: the one placement of the run, or
    every placement seen, joined by '+'."""
    return "+".join(sorted({str(v) for v in values})) or "none"


def defined_mean(values):
    """Aggregation for metrics that are not defined for every sample (``None`` there): the
    mean over the samples where they are, ``None`` when there are none."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def check_language_model():
    """The language-ID model and the word lists are there (one line otherwise), before any
    generation starts."""
    try:
        lid_model.identify("Ceci est une phrase en français.")
        lexicon.available()
    except (lid_model.LanguageModelMissing, lexicon.WordListMissing) as exc:
        raise DriftUsageError(str(exc)) from None


class DriftTask(YamlTask):
    """Base of the drift tasks: it checks the language-ID model before any generation
    starts, so that a missing file cannot waste a run."""

    def __init__(self, config=None):
        check_language_model()
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


class ConversationTask(DriftTask):
    """One ``generate_conversation`` request per doc, served by every chat model."""

    def construct_requests(self, doc, ctx, **kwargs):
        return self.request(doc, CONVERSATION, doc["spec"], deepcopy(self.config.generation_kwargs), **kwargs)


def conversation_placement(messages) -> str:
    """Where the instruction sat in a logged conversation: its own system turn, or the top
    of the first user message (a chat template without a system role)."""
    if isinstance(messages, str):
        messages = json.loads(messages)
    return "system" if messages and messages[0].get("role") == "system" else "user"
