"""A generated answer and what the backend measured while producing it. Pure Python.

lm-eval hands a model's answers to the tasks as strings. ``Answer`` is a ``str`` (every
lm-eval code path treats it as the text) that also carries ``meta``, a dict of what the
backend knows about it:

* ``tokens``: the number of generated tokens (``None`` when the backend cannot tell);
* ``forced_length``: ``True`` when end-of-sequence was suppressed until ``max_gen_toks``
  (``min_new_tokens`` / ``min_tokens``), ``False`` when the task asked for a forced length
  but the backend could not force it, absent when none was asked;
* ``natural_end``: the number of tokens generated before the first step at which
  end-of-sequence was the most likely token while it was suppressed (``None``: it never was,
  or nobody watched); see ``drift_eval.plugin.generation``;
* ``natural_end_chars``: the length of the text those tokens decode to, where the answer
  would have ended;
* ``prompt_tokens`` and ``cached_prompt_tokens``: the prompt's length in tokens, and how
  many of them the engine took from its prefix cache instead of computing them (vLLM's
  ``RequestOutput.num_cached_tokens``); absent where the backend does not report them;
* ``trace_tokens`` and ``trace``: a reasoning model's tokens before the end of its reasoning
  (lm-eval's ``think_end_token``), which ``tokens`` leaves out, and their text (the
  reasoning itself); absent elsewhere;
* ``trace_raw`` and ``trace_ended``: that reasoning exactly as generated, through its end
  marker (what the visible answer's own request continues from, and what a conversation's
  next prompt gives the chat template with the reply), and whether the model ended it
  itself (false: it ran out of tokens and the marker was added after it); see
  ``drift_eval.plugin.reasoning.reasoning_of``;
* ``instruction_placement``: where the task's system prompt sat in the prompt: ``system``
  (the system turn), ``user`` (the top of the first user message, for a chat template
  without a system role) or ``plain`` (a prompt rendered without a chat template); see
  ``drift_eval.plugin.backends``.

``process_results`` functions read ``meta_of(results[0])``. Caches store ``to_json()`` and
rebuild with ``from_json`` (JSON only: nothing is unpickled).
"""
from __future__ import annotations

FIELDS = ("tokens", "forced_length", "natural_end", "natural_end_chars", "prompt_tokens", "cached_prompt_tokens",
          "trace_tokens", "trace", "trace_raw", "trace_ended", "instruction_placement")
COUNTS = ("tokens", "natural_end", "natural_end_chars", "prompt_tokens", "cached_prompt_tokens", "trace_tokens")
PLACEMENTS = ("system", "user", "plain")


class Answer(str):
    meta: dict

    def __new__(cls, text: str, **meta):
        unknown = set(meta) - set(FIELDS)
        if unknown:
            raise TypeError(f"unknown answer field(s): {', '.join(sorted(unknown))}")
        obj = super().__new__(cls, text)
        obj.meta = dict(meta)
        return obj

    def __reduce__(self):  # copies and pickles (lm-eval's own cache) keep the metadata
        return (_rebuild, (str(self), self.meta))

    def to_json(self) -> dict:
        return {"text": str(self), **self.meta}

    @classmethod
    def from_json(cls, obj) -> "Answer":
        """From ``to_json()``'s dict; raises ``ValueError`` for anything else."""
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or set(obj) - {"text", *FIELDS}:
            raise ValueError("not an answer record")
        meta = {k: obj[k] for k in FIELDS if k in obj}
        for k in COUNTS:
            if meta.get(k) is not None and (isinstance(meta[k], bool) or not isinstance(meta[k], int)):
                raise ValueError(f"answer field {k} must be an integer or null")
        for k in ("forced_length", "trace_ended"):
            if k in meta and not isinstance(meta[k], bool):
                raise ValueError(f"answer field {k} must be true or false")
        for k in ("trace", "trace_raw"):
            if k in meta and not isinstance(meta[k], str):
                raise ValueError(f"answer field {k} must be text")
        if "instruction_placement" in meta and meta["instruction_placement"] not in PLACEMENTS:
            raise ValueError(f"answer field instruction_placement must be one of {', '.join(PLACEMENTS)}")
        return cls(obj["text"], **meta)


def _rebuild(text, meta):
    return Answer(text, **meta)


def is_count(n) -> bool:
    """Whether ``n`` is a count a backend reported: a whole number >= 0 (not a boolean)."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def count_tokens(lm, text: str) -> int | None:
    """Tokens of ``text`` under the model's tokenizer, or None where it has none."""
    tok = getattr(lm, "tokenizer", None)
    encode = getattr(tok, "encode", None)
    if not callable(encode):
        return None
    try:
        return len(encode(str(text), add_special_tokens=False))
    except TypeError:
        return len(encode(str(text)))


def meta_of(answer) -> dict:
    """The metadata of an answer (empty for a plain string)."""
    return dict(getattr(answer, "meta", None) or {})
