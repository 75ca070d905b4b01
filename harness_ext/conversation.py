"""A multi-turn conversation request, as the tasks write it and the reports read it. Pure
Python.

lm-eval never feeds a model's reply back into a later turn. A conversation task sends one
request per conversation (request type ``generate_conversation``; ``arguments[0]`` is the
JSON of a ``ConversationSpec``, ``arguments[1]`` the generation kwargs of every turn). The
answer is the whole conversation as the model saw it: its messages as JSON text
(``dump_messages``). ``drift_eval.plugin.conversations`` serves the requests on any chat
model.

Variants: ``reinject_every = k`` restates the system prompt at the top of the user message
of turns k+1, 2k+1, ...; ``mode = "fixed"`` replays scripted assistant replies for every
turn but the last, which alone is generated.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from drift_eval.errors import DriftUsageError

MODES = ("live", "fixed")


@dataclass
class ConversationSpec:
    system_prompt: str
    user_turns: list[str]
    mode: str = "live"
    reinject_every: int = 0
    scripted_replies: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.mode not in MODES:
            raise DriftUsageError(f"conversation mode must be one of {', '.join(MODES)}, got '{self.mode}'")
        if int(self.reinject_every) < 0:
            raise DriftUsageError(f"reinject_every must be >= 0, got {self.reinject_every}")
        self.reinject_every = int(self.reinject_every)
        if self.mode == "fixed" and len(self.scripted_replies) < len(self.user_turns) - 1:
            raise DriftUsageError("fixed-history conversations need a scripted reply for every turn but the last")

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "ConversationSpec":
        return cls(**json.loads(text))

    def reinjected(self, turn: int) -> bool:
        """Whether 1-based ``turn`` restates the instruction."""
        k = self.reinject_every
        return k > 0 and turn > 1 and (turn - 1) % k == 0

    def user_message(self, turn: int) -> str:
        text = self.user_turns[turn - 1]
        return f"{self.system_prompt}\n\n{text}" if self.reinjected(turn) else text

    def generated(self, turn: int) -> bool:
        return self.mode == "live" or turn == len(self.user_turns)


def dump_messages(messages: list[dict]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def assistant_replies(messages) -> list[str]:
    """The assistant turns of a message list, or of its JSON text."""
    if isinstance(messages, str):
        messages = json.loads(messages)
    return [m["content"] for m in messages if m["role"] == "assistant"]
