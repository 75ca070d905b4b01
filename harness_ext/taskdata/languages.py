"""The drift_languages data, for the tasks and for any code that needs it: the instruction
for each target language (one place for its wording), the shared item bank of English
single-turn requests and eight-turn conversations (written for this project; see
tasks/drift_languages/README.md), and the first-k cut of the bank."""
from __future__ import annotations

import json
import os

from drift_eval.errors import DriftUsageError
from drift_eval.files import read_jsonl
from drift_eval.metrics.languages import TARGETS, language

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "languages")

#: the English instruction, LCB's cross-lingual setting: the language is named, the user writes in English
ENGLISH_PROMPT = ("You are a helpful assistant. Answer only in {name}, whatever language the user writes in. "
                  "Never switch to another language.")
#: the wordings of the instruction
WORDINGS = ("en", "native")


def check_target(code) -> str:
    if not isinstance(code, str) or code not in TARGETS:
        raise DriftUsageError(f"target_language must be one of {', '.join(TARGETS)}, got {code!r}")
    return code


def native_prompts() -> dict:
    """``{code: {"prompt": ..., "checked": bool, "note": ...}}``: the instruction worded in
    each target language (``prompts.json``; ``checked`` false marks a wording that wants a
    native speaker's review)."""
    path = os.path.join(HERE, "prompts.json")
    try:
        with open(path, encoding="utf-8") as fh:
            table = json.load(fh)
    except (OSError, ValueError) as exc:
        raise DriftUsageError(f"{path} cannot be read ({exc})") from None
    if not isinstance(table, dict) or any(not isinstance(table.get(c), dict) or not table[c].get("prompt")
                                          for c in TARGETS):
        raise DriftUsageError(f"{path} must give a prompt for each of {', '.join(TARGETS)}")
    return table


def system_prompt(target: str, wording: str = "en") -> str:
    """The instruction for ``target``, in English (``en``, the language named) or in the
    target language itself (``native``)."""
    check_target(target)
    if wording == "en":
        return ENGLISH_PROMPT.format(name=language(target).name)
    if wording == "native":
        return native_prompts()[target]["prompt"]
    raise DriftUsageError(f"prompt_wording must be one of {', '.join(WORDINGS)}, got {wording!r}")


def read_requests() -> list[dict]:
    """The bank's single-turn requests: ``id``, ``topic``, ``kind``, ``request`` (English)."""
    return read_jsonl(os.path.join(HERE, "requests.jsonl"), "request file", required=("id", "topic", "kind", "request"))


def read_conversations() -> list[dict]:
    """The bank's conversations: ``id``, ``topic`` and eight English ``user_turns``."""
    return read_jsonl(os.path.join(HERE, "conversations.jsonl"), "conversation file",
                      required=("id", "topic", "user_turns"))
