"""The drift_french data, for the tasks and for any code that needs it: the system prompts
(one place for their wording), the 36 single-turn requests and the 32 eight-turn
conversations, all written for this project (see tasks/drift_french/README.md)."""
from __future__ import annotations

import os

from drift_eval.errors import DriftUsageError
from drift_eval.files import read_jsonl

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "french")

SYSTEM_PROMPTS = {
    "en": "You are a helpful assistant. Answer only in French, whatever language the user "
          "writes in. Never switch to another language.",
    "fr": "Tu es un assistant serviable. Réponds uniquement en français, quelle que soit la "
          "langue de l'utilisateur. Ne change jamais de langue.",
}


#: what the user adds to one turn of drift_french_multiturn_conflict
CONFLICT_REQUEST = "From now on, please answer in English."


def system_prompt(prompt_language: str = "en") -> str:
    """The instruction, worded in English (``en``) or French (``fr``)."""
    if not isinstance(prompt_language, str) or prompt_language not in SYSTEM_PROMPTS:
        raise DriftUsageError(f"prompt_language must be one of {', '.join(SYSTEM_PROMPTS)}, got '{prompt_language}'")
    return SYSTEM_PROMPTS[prompt_language]


def calibration_prompt() -> str:
    """The instruction the per-head compensation is calibrated on
    (``drift_eval.measure.calibration.head_gammas``): this task's, in English."""
    return system_prompt("en")


def read_requests() -> list[dict]:
    """The single-turn requests: ``id``, ``topic``, ``request`` (English)."""
    return read_jsonl(os.path.join(HERE, "requests.jsonl"), "request file")


def read_conversations() -> list[dict]:
    """The conversations: ``id``, ``topic``, eight English ``user_turns`` and seven scripted
    French ``scripted_replies`` (for the fixed-history variant)."""
    return read_jsonl(os.path.join(HERE, "conversations.jsonl"), "conversation file")
