"""A reasoning model's trace: where lm-eval's ``think_end_token`` splits a generation into
the reasoning and the visible answer, on each backend. Pure Python.

lm-eval hands on only the text after the last end-of-reasoning marker. The plugin keeps
the rest (``answers.Answer``'s ``trace`` fields): from the generated token ids where the
engine returns them (``visible_split``, ``reasoning_of``; ``backends.EngineOutputs`` and
``hf-drift``), from a chat server's message (``server_reasoning``), and for a reasoning the
model opened and never ended (``unfinished_reasoning``). docs/backends.md, "Reasoning
models", says how each backend's answers are forced and labelled.
"""
from __future__ import annotations

from drift_eval.plugin.answers import count_tokens, is_count


def visible_split(model, ids: list, text: str, marker: list) -> tuple[int, int, str | None, str | None]:
    """(the visible answer's tokens, the trace's tokens, the trace's text, the trace as
    generated with its end marker) among the
    generated ``ids`` whose visible part lm-eval returned as ``text``. Where the marker's ids
    are not found although lm-eval cut the text at it (the model wrote the marker string
    inside other tokens), the answer is counted from its text and the trace is the rest;
    where the model never ended its reasoning, lm-eval returns all of it, as the answer, and
    there is no trace."""
    decode = getattr(getattr(model, "tokenizer", None), "decode", None)
    split = _after_reasoning(ids, marker, decode, text)
    if split is not None:
        trace = decode(ids[:split - len(marker)]) if split and callable(decode) else None
        raw = decode(ids[:split]) if split and callable(decode) else None
        return len(ids) - split, split, _trace_text(model, trace), raw
    end = getattr(model, "think_end_token", None)
    raw = decode(ids) if callable(decode) else ""
    if not (isinstance(end, str) and end in raw):
        return len(ids), 0, None, None
    visible = count_tokens(model, text)
    visible = len(ids) if visible is None else min(visible, len(ids))
    before = raw.rsplit(end, 1)[0]
    return visible, max(1, len(ids) - visible), _trace_text(model, before), before + end


def _trace_text(model, trace: str | None) -> str | None:
    """The reasoning as text: without the opening tag that pairs with a ``</tag>`` end marker
    (``<think>``), which the chat template may have written into the prompt instead."""
    if trace is None:
        return None
    opening = _opening(getattr(model, "think_end_token", None))
    if opening:
        trace = trace.lstrip()
        trace = trace[len(opening):] if trace.startswith(opening) else trace
    return trace.strip()


def _opening(end) -> str | None:
    """The opening tag that pairs with a ``</tag>`` end marker (``<think>``), or None."""
    return "<" + end[2:] if isinstance(end, str) and end.startswith("</") else None


def marker_text(model) -> str | None:
    """lm-eval's ``think_end_token`` of ``model`` as text (a token id decoded), or None."""
    end = getattr(model, "think_end_token", None)
    if isinstance(end, str) and end:
        return end
    decode = getattr(getattr(model, "tokenizer", None), "decode", None)
    if isinstance(end, int) and not isinstance(end, bool) and callable(decode):
        return decode([end])
    return None


def reasoning_of(model, ids: list) -> dict:
    """The reasoning of a generation ``ids``: what lm-eval leaves out of the answer, up to
    and with the last end-of-reasoning marker, as answer fields (``answers.Answer``):
    ``trace_raw`` (the generated tokens decoded: what the visible answer's own request
    continues from, and what a conversation's next prompt gives the chat template), ``trace`` and
    ``trace_tokens``. Empty where there is none (no marker asked, or none written)."""
    marker = reasoning_marker(model)
    decode = getattr(getattr(model, "tokenizer", None), "decode", None)
    end = marker_text(model)
    if not marker or not callable(decode) or not end:
        return {}
    start = _last_at(ids, marker)
    if start is not None:
        split = start + len(marker)
        return _trace_fields(model, decode(ids[:split]), end, split)
    text = decode(ids)
    if end in text:  # the marker written inside other tokens
        raw = text[:text.rindex(end) + len(end)]
        return _trace_fields(model, raw, end, count_tokens(model, raw))
    return {}


def unfinished_reasoning(model, prompt: str, text: str) -> dict:
    """The answer fields of a reasoning that never ended: the model opened it (the end
    marker's opening tag, ``<think>``, ends the prompt or starts the generation ``text``)
    and wrote no end marker within the tokens allowed. The whole generation is then the
    trace, with the marker added after it (``trace_raw``). Empty otherwise."""
    end = marker_text(model)
    opening = _opening(end)
    if not opening or end in text:
        return {}
    if not (prompt.rstrip().endswith(opening) or text.lstrip().startswith(opening)):
        return {}
    return _trace_fields(model, f"{text.rstrip()}\n{end}", end, count_tokens(model, text))


def _trace_fields(model, raw: str, end: str, tokens) -> dict:
    fields = {"trace_raw": raw, "trace": _trace_text(model, raw[:-len(end)])}
    if isinstance(tokens, int):
        fields["trace_tokens"] = tokens
    return fields


def reasoning_marker(model) -> list[int]:
    """The token ids of lm-eval's ``think_end_token`` of ``model`` (an id, or a string its
    tokenizer encodes), or [] where it has none: lm-eval then returns only the text after
    the last such marker, the visible answer."""
    end = getattr(model, "think_end_token", None)
    if isinstance(end, int) and not isinstance(end, bool):
        return [end]
    if not isinstance(end, str) or not end:
        return []
    tok = getattr(model, "tokenizer", None)
    if callable(getattr(tok, "encode", None)):
        return list(tok.encode(end, add_special_tokens=False))
    return list(model.tok_encode(end))


def _after_reasoning(ids: list, marker: list, decode, text: str) -> int | None:
    """Where the visible answer ``text`` starts in the generated ``ids``: after the last
    ``marker`` (0 with no marker asked); None where the marker's ids are not among them, or
    where what follows them (``decode``d, where the tokenizer can) is not the text lm-eval
    returned (a marker string that the model wrote inside other tokens: lm-eval splits the
    decoded text at its last occurrence)."""
    if not marker:
        return 0
    start = _last_at(ids, marker)
    if start is None:
        return None
    split = start + len(marker)
    if callable(decode):
        tail = decode(ids[split:]).lstrip()
        if not (tail.startswith(text) or text.startswith(tail)):
            return None
    return split


def _last_at(ids: list, marker: list) -> int | None:
    """Where the last occurrence of the ids ``marker`` starts in ``ids`` (None: nowhere)."""
    n = len(marker)
    for start in range(len(ids) - n, -1, -1):
        if ids[start:start + n] == marker:
            return start
    return None


def server_reasoning(model, resp: dict, text: str) -> dict:
    """A reasoning model's trace in a chat-completion response, as answer fields: the
    message's ``reasoning_content`` (or ``reasoning``: a server run with a reasoning parser,
    such as vLLM's and SGLang's ``--reasoning-parser``), with the server's
    ``usage.completion_tokens_details.reasoning_tokens`` where it gives them; else, where
    lm-eval cut the content at ``think_end_token``, the text before it (``trace_raw`` with
    the marker, for the next turn's history). Empty without a trace."""
    try:
        message = resp["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return {}
    if not isinstance(message, dict):
        return {}
    fields: dict = {}
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    content = message.get("content")
    end = marker_text(model) if model is not None else None
    if isinstance(reasoning, str) and reasoning.strip():
        fields["trace"] = reasoning.strip()
        details = (resp.get("usage") or {}).get("completion_tokens_details")
        n = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if is_count(n) and n > 0:
            fields["trace_tokens"] = n
    elif end and isinstance(content, str) and end in content:
        before = content.rsplit(end, 1)[0]
        fields.update(trace=_trace_text(model, before), trace_raw=before + end)
    return fields
