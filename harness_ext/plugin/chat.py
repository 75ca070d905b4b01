"""The instruction in a chat template that may have no system role. Pure Python.

lm-eval's HF and vLLM models silently drop the system message when a chat template
rejects it. For the drift tasks the system message is the instruction under test, so a
template without a system role (one that raises on a system turn, or renders none) gets
the instruction at the top of the first user message instead, as the template authors of
Gemma- and Mistral-style models recommend (``instruction_placement: user``).

This applies to the drift tasks' own prompts only: ``YamlTask`` renders its documents
through ``InstructionKeeping`` (``drift_eval.plugin.task_base``) and the conversation
executor renders every turn through it; every other task of a run renders exactly as
lm-eval does.
"""
from __future__ import annotations

import json
import weakref
from dataclasses import dataclass

from drift_eval.logs import log


PROBE = "\u2063DRIFT-INSTRUCTION\u2063"
END_PROBE = "\u2063DRIFT-REPLY\u2063"


def text_of(rendered) -> str:
    """The text of what a chat template returned (a string, or lm-eval's ``JsonChatStr``)."""
    if isinstance(rendered, str):
        return rendered
    prompt = getattr(rendered, "prompt", None)  # lm-eval's JsonChatStr
    return prompt if isinstance(prompt, str) else json.dumps(rendered, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Probe:
    """What one rendering of ``[system: PROBE, user: ?]`` showed about a chat template:
    whether it renders a system turn, and why it cannot render a chat with the instruction
    kept (``None``: it can)."""
    system_role: bool
    problem: str | None = None


_probes: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def probe(render, who: str = "the model") -> Probe:
    """Render a probe chat with ``render`` (a model's ``apply_chat_template``), with and
    without a system turn. A template that fails both ways counts as having a system role
    (the real call then reports its own error) and as a problem for the drift tasks. A
    model's template is probed once (by the model ``render`` is a method of)."""
    owner = getattr(render, "__self__", None)
    try:
        known = _probes.get(owner) if owner is not None else None
    except TypeError:  # not weakly referenceable
        owner = known = None
    if known is None:
        known = _probe(render, who)
        if owner is not None:
            _probes[owner] = known
        if not known.system_role and known.problem is None:
            log.warning("lm-eval-drift: the chat template has no system role: the drift tasks' instruction goes "
                        "at the top of the first user message (instruction_placement: user)")
    return known


def _probe(render, who: str) -> Probe:
    try:
        if PROBE in text_of(render([{"role": "system", "content": PROBE}, {"role": "user", "content": "?"}])):
            return Probe(True)
    except Exception:  # noqa: BLE001 (a template may raise anything)
        pass
    try:
        folded = render([{"role": "user", "content": f"{PROBE}\n\n?"}])
    except Exception as exc:  # noqa: BLE001 (lm-eval and templates raise many kinds)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return Probe(True, f"{who} has none ({first})")
    if PROBE not in text_of(folded):
        return Probe(False, f"the chat template of {who} drops the instruction even in the first user message")
    return Probe(False)


def keep_instruction(messages: list[dict], system_ok: bool) -> list[dict]:
    """The messages a template without a system role renders with the instruction kept: the
    system text at the top of the first user message (the caller's list is not changed)."""
    system = [m for m in messages if m.get("role") == "system"]
    if system_ok or not system:
        return messages
    text = "\n\n".join(str(m.get("content", "")) for m in system)
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    for m in rest:
        if m.get("role") == "user":
            m["content"] = f"{text}\n\n{m.get('content', '')}"
            break
    else:
        rest.insert(0, {"role": "user", "content": text})
    return rest


class InstructionKeeping:
    """A chat renderer (``render(messages, **kwargs)``, a model's ``apply_chat_template``)
    that keeps the system message where the template has no system role. The template is
    probed on first use (``probe``)."""

    def __init__(self, render, who: str = "the model"):
        self.render, self.who = render, who
        self._probe: Probe | None = None

    @property
    def system_role(self) -> bool:
        if self._probe is None:
            self._probe = probe(self.render, self.who)
        return self._probe.system_role

    def __call__(self, messages, *args, **kwargs):
        return self.render(keep_instruction(list(messages), self.system_role), *args, **kwargs)


def end_of_turn_ids(render, tokenizer) -> list[int]:
    """The special token a chat template writes right after an assistant's message (its
    end-of-turn token: ``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>``, ``</s>``...), as
    ``tokenizer`` (a Hugging Face tokenizer) encodes it; ``[]`` where the template writes
    none or cannot be rendered. The chat rendered is [user, assistant, user] so that the
    assistant's turn is closed as the template closes any finished turn."""
    try:
        text = text_of(render([{"role": "user", "content": "?"}, {"role": "assistant", "content": END_PROBE},
                               {"role": "user", "content": "?"}]))
        if END_PROBE not in text:
            return []
        ids = tokenizer(text.split(END_PROBE, 1)[1], add_special_tokens=False)["input_ids"]
        special = set(getattr(tokenizer, "all_special_ids", None) or []) | {
            i for i, t in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items() if getattr(t, "special", False)}
    except Exception:  # noqa: BLE001 (templates and tokenizers raise many kinds)
        return []
    for i in ids:
        if i in special:
            return [int(i)]
        if tokenizer.decode([i]).strip():
            return []  # text before any special token: the template ends turns without one
    return []
