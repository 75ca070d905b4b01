"""Where the instruction span ends inside a rendered prompt (a character offset).

``span=system`` biases the system prompt's tokens. The system text is found in one of two
ways, in this order:

1. the task's document names it (field ``system_prompt``) and the prompt contains it: the
   span ends where that text ends (anything lm-eval prepended, such as
   ``--system_instruction``, is inside the span too);
2. the prompt starts with the tokenizer's chat-template rendering of a system turn: the
   span ends where that turn's content ends.

Otherwise there is no system span (``None``), and the caller leaves the row uncompensated.
"""
from __future__ import annotations

_MARK = "\u2063DRIFT-SYSTEM\u2063"


def _template_parts(tokenizer) -> tuple[str, str] | None:
    if not getattr(tokenizer, "chat_template", None):
        return None
    try:
        rendered = tokenizer.apply_chat_template([{"role": "system", "content": _MARK}], tokenize=False)
    except Exception:  # templates that reject a lone system turn
        return None
    if rendered.count(_MARK) != 1:
        return None
    prefix, rest = rendered.split(_MARK)
    closing = rest.strip()
    return (prefix, closing) if closing else None


def system_span_end(prompt: str, tokenizer=None, system_prompt: str | None = None) -> int | None:
    if system_prompt and system_prompt in prompt:
        return prompt.index(system_prompt) + len(system_prompt)
    parts = _template_parts(tokenizer) if tokenizer is not None else None
    if parts is not None:
        prefix, closing = parts
        if prompt.startswith(prefix):
            end = prompt.find(closing, len(prefix))
            if end > len(prefix):
                return end
    return None


def token_counts(prompt: str, end_char: int, tokenizer, **encode_kwargs) -> tuple[int, int]:
    """(tokens of ``prompt`` that start before ``end_char``, all tokens of ``prompt``)."""
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(prompt, return_offsets_mapping=True, **encode_kwargs)
        offsets = enc["offset_mapping"]
        return sum(1 for start, _ in offsets if start < end_char), len(offsets)
    total = len(tokenizer(prompt, **encode_kwargs)["input_ids"])
    return len(tokenizer(prompt[:end_char], **encode_kwargs)["input_ids"]), total


def token_count_before(prompt: str, end_char: int, tokenizer, **encode_kwargs) -> int:
    """Number of tokens of ``prompt`` that start before ``end_char``."""
    return token_counts(prompt, end_char, tokenizer, **encode_kwargs)[0]
