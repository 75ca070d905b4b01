"""The request types the drift tasks send beyond lm-eval's own: one record each. Pure Python.

A record says everything the project needs to know about a request type:

* ``name``: what the task's ``Instance.request_type`` is, and the method lm-eval calls;
* ``needs``: what it needs from the model, for the one-line error on a model that cannot
  serve it;
* ``answer``: the shape of its answer (JSON text: a list of chat messages, or an object
  with at least ``keys``), which a cache checks before it hands a stored answer back;
* ``any_chat_model``: served on every lm-eval model with a chat template (conversations),
  rather than only by models that implement it (``hf-drift``).

The function that serves each type is in ``drift_eval.plugin.serving`` (by reference: it
imports the measurements, and so torch, which this table does not). Everything else is
derived from ``TYPES``: ``hf-drift``'s methods
(``drift_eval.plugin.model``), how the wrapper a drift run gets dispatches them and the
check before a run (``drift_eval.plugin.wrapper``), the answer cache's type check
(``drift_eval.plugin.answer_cache``) and the request types a sweep caches
(``drift_eval.plugin.sweep``). A new request type is one new record here and its serving
function's entry in ``serving.SERVERS``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

MESSAGES = "messages"   # the answer is a JSON list of {role, content} messages
OBJECT = "object"       # the answer is a JSON object with (at least) the record's keys


@dataclass(frozen=True)
class RequestType:
    name: str
    needs: str
    answer: str = OBJECT
    keys: tuple = ()
    any_chat_model: bool = False

    def check(self, text) -> None:
        """Raise ``ValueError`` unless ``text`` has the documented shape of an answer."""
        if not isinstance(text, str):
            raise ValueError(f"a {self.name} answer is text, not {type(text).__name__}")
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            raise ValueError(f"a {self.name} answer is JSON text") from None
        if self.answer == MESSAGES:
            if not isinstance(obj, list) or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                    for m in obj):
                raise ValueError(f"a {self.name} answer is a list of {{role, content}} messages")
        elif not isinstance(obj, dict) or any(k not in obj for k in self.keys):
            raise ValueError(f"a {self.name} answer is an object with {', '.join(self.keys)}")


CONVERSATION = RequestType(
    "generate_conversation", "feeds the model's replies back as conversation history",
    answer=MESSAGES, any_chat_model=True)
POSITION_PROFILE = RequestType(
    "position_profile", "reads attention weights and gradients inside the model",
    keys=("lambdas", "gradient", "profiles", "comparison"))
PROMPT_OFFSETS = RequestType(
    "prompt_offsets", "reads hidden states of teacher-forced prompt pairs",
    keys=("axis", "centres", "signal", "noise"))
CONTINUATION_NLL = RequestType(
    "continuation_nll", "scores continuations under the compensation bias toward the prompt",
    keys=("nll", "tokens"))
ACCESSIBILITY = RequestType(
    "accessibility", "optimises soft-prompt input vectors against the frozen model",
    keys=("accessibility", "n50", "line", "bound"))
FREE_GENERATION = RequestType(
    "free_generation", "samples free generations and reads their hidden states at the window centres",
    keys=("scene", "axis", "centres", "hidden_correct", "text_correct"))

TYPES = {rt.name: rt for rt in (CONVERSATION, POSITION_PROFILE, PROMPT_OFFSETS, CONTINUATION_NLL, ACCESSIBILITY,
                                FREE_GENERATION)}


def check_answer(request_type: str, text) -> None:
    """Raise ``ValueError`` unless ``text`` is a valid answer of the drift request type
    ``request_type`` (or the type is unknown)."""
    rt = TYPES.get(request_type)
    if rt is None:
        raise ValueError(f"unknown request type {request_type}")
    rt.check(text)
