"""Multi-turn conversations inside lm-eval: the ``generate_conversation`` request type.

lm-eval never feeds a model's reply back into a later turn. A conversation task sends one
request per conversation (request type ``generate_conversation``; ``arguments[0]`` is the
JSON of a ``ConversationSpec``, ``arguments[1]`` the generation kwargs of every turn).
Every lm-eval chat model serves it with ``run_conversations``
(``drift_eval.plugin.backends.serve_conversations``): turn k of every conversation is
generated in one batched ``generate_until`` call (same batching, padding, stop sequences
and, on ``hf-drift``, compensation as single-turn tasks), each reply is appended as an
assistant turn with the model's chat template, and the next turn is built on that history.
The system prompt is the compensation span in every turn, so the bias follows it as
history grows.

Variants: ``reinject_every = k`` restates the system prompt at the top of the user message
of turns k+1, 2k+1, ...; ``mode = "fixed"`` replays scripted assistant replies for every
turn but the last, which alone is generated.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..errors import DriftUsageError

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


def run_conversations(lm, requests, progress=None) -> list[list[dict]]:
    """Serve ``generate_conversation`` requests with ``lm`` (any lm-eval model with
    ``apply_chat_template`` and ``generate_until``); returns each conversation's full message
    list (system, user and assistant turns). ``serve_conversations`` hands lm-eval each list
    as JSON text (``dump_messages``), so that logged samples keep the whole conversation."""
    from lm_eval.api.instance import Instance

    specs = [ConversationSpec.from_json(r.args[0]) for r in requests]
    gen_kwargs = [r.args[1] for r in requests]
    histories = [[{"role": "system", "content": s.system_prompt}] for s in specs]
    n_turns = max(len(s.user_turns) for s in specs)
    for turn in range(1, n_turns + 1):
        batch, owners = [], []
        for i, spec in enumerate(specs):
            if turn > len(spec.user_turns):
                continue
            histories[i].append({"role": "user", "content": spec.user_message(turn)})
            if not spec.generated(turn):
                histories[i].append({"role": "assistant", "content": spec.scripted_replies[turn - 1]})
                continue
            try:
                ctx = lm.apply_chat_template(histories[i], add_generation_prompt=True)
            except Exception as exc:
                raise DriftUsageError(f"conversation tasks need a model with a chat template ({exc})") from None
            batch.append(Instance("generate_until", {"system_prompt": spec.system_prompt}, (ctx, gen_kwargs[i]), i))
            owners.append(i)
        if batch:
            for i, reply in zip(owners, lm.generate_until(batch, disable_tqdm=True)):
                histories[i].append({"role": "assistant", "content": reply})
        if progress is not None:
            progress(turn, n_turns)
    return histories


def dump_messages(messages: list[dict]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def assistant_replies(messages) -> list[str]:
    """The assistant turns of a message list, or of its JSON text."""
    if isinstance(messages, str):
        messages = json.loads(messages)
    return [m["content"] for m in messages if m["role"] == "assistant"]
