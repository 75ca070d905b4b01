"""What ``hf-drift`` adds to each ``model.generate`` call: a logits processor and a
key/value cache.

``Watch`` runs last in transformers' processor list, once per generated token, over the
whole batch. It

* records, per row, the *natural end*: the number of tokens generated before the first step
  at which an end-of-sequence token was the most likely token while it was suppressed. It
  looks at the scores before it suppresses anything itself, so it sees what the model
  wanted;
* forces the length: while fewer than ``min_new_tokens`` tokens are generated, it sets the
  end-of-sequence scores to ``-inf`` (what transformers' ``min_new_tokens`` does; ``hf-drift``
  takes ``min_new_tokens`` out of the generation kwargs and does it here instead, because
  transformers' own processor runs before any custom one and would hide the end);
* shows a token-level progress line (tokens done of tokens due, tokens/s, ETA) on a
  terminal, since lm-eval's bar counts whole requests and a batch of 2048-token answers
  otherwise shows nothing for minutes.

``reserved_cache`` is transformers' ``DynamicCache`` for the model's layers, with each
full-attention layer replaced by a ``ReservedLayer``: the keys and values of the whole
call (prompt + ``max_new_tokens``, known before generation starts) get one buffer, filled
in place, and the layer hands attention a view of the filled part. The stock layer
concatenates at every step: a new tensor as large as the whole cache, copied, at each
token of each layer. Over a 2048-token answer that copying is a quarter of the decode
time in a process whose allocator is warm, and because each new tensor is a little
larger than the one just freed, the C allocator maps fresh pages for it again and again
(page faults, kernel time): up to half of a batch's CPU time on CPU
(``benchmarks/README.md``). transformers' ``StaticCache``
also preallocates, but it attends over every reserved slot at every step and its key
length is no longer the number of tokens so far, which the bias's positions rely on.
"""
from __future__ import annotations

import inspect
import sys

import torch
from transformers import LogitsProcessor
from transformers.cache_utils import DynamicCache, DynamicLayer


class Watch(LogitsProcessor):
    def __init__(self, prompt_width: int, eos_ids, min_new_tokens: int = 0, max_new_tokens: int = 0,
                 progress: bool = False, desc: str = "tokens"):
        self.prompt_width = int(prompt_width)
        self.eos = torch.as_tensor(sorted({int(i) for i in eos_ids if i is not None}), dtype=torch.long)
        self.min_new = int(min_new_tokens or 0)
        self.max_new = int(max_new_tokens or 0)
        self.natural_end: list | None = None
        self._bar = None
        self._progress = progress
        self._desc = desc

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_width  # tokens generated so far
        rows = scores.shape[0]
        if self.natural_end is None:
            self.natural_end = [None] * rows
        if self.min_new and step < self.min_new and len(self.eos):
            eos = self.eos.to(scores.device)
            wants_end = torch.isin(scores.argmax(-1), eos).tolist()
            for r, w in enumerate(wants_end):
                if w and self.natural_end[r] is None:
                    self.natural_end[r] = step
            scores = scores.clone()
            scores[:, eos] = -float("inf")
        self._tick(input_ids, step, rows)
        return scores

    # ------------------------------------------------------------------ progress
    def _tick(self, input_ids, step, rows):
        if not self._progress:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=rows * self.max_new if self.max_new else None, desc=self._desc, unit="tok",
                             leave=False, position=1, file=sys.stderr, dynamic_ncols=True)
        if step > 0:  # the token chosen at the previous step is now in input_ids
            self._bar.update(rows)

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def show_progress(disable_tqdm: bool, rank: int = 0) -> bool:
    """Token progress only on a terminal, on rank 0, unless lm-eval's bars are off."""
    return not disable_tqdm and rank == 0 and sys.stderr.isatty()


def generated_tokens(out: torch.Tensor, prompt_width: int, eos_ids, pad_id) -> list[int]:
    """Per row, the tokens generated before the first end-of-sequence (or padding) token."""
    cont = out[:, prompt_width:]
    stop = torch.isin(cont, torch.as_tensor(sorted({int(i) for i in [*eos_ids, pad_id] if i is not None}),
                                            dtype=torch.long, device=cont.device))
    width = cont.shape[1]
    first = torch.where(stop.any(1), stop.float().argmax(1), torch.full((cont.shape[0],), width, device=cont.device))
    return [int(x) for x in first.tolist()]


class ReservedLayer(DynamicLayer):
    """A ``DynamicLayer`` that writes into a buffer reserved for ``capacity`` positions and
    exposes ``keys``/``values`` as views of its filled part. When a call outgrows the
    buffer it doubles (so an unknown length costs amortised O(1) per token); when another
    method replaced ``keys``/``values`` (cropping, beam reordering, batch selection) the
    next update starts a new buffer from them."""

    def __init__(self, capacity: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.capacity = int(capacity)
        self._k = self._v = None  # the buffers, (B, H, capacity, D)

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        own = (self._k is not None and self.keys is not None and self.keys.data_ptr() == self._k.data_ptr()
               and self.keys.shape[:-2] == self._k.shape[:-2])  # still a view of the buffer's filled part
        n = self.keys.shape[-2] if own or self.keys.numel() else 0
        need = n + key_states.shape[-2]
        if not own or need > self._k.shape[-2]:
            cap = max(need, self.capacity if not own else 2 * self._k.shape[-2])
            k = key_states.new_empty(*key_states.shape[:-2], cap, key_states.shape[-1])
            v = value_states.new_empty(*value_states.shape[:-2], cap, value_states.shape[-1])
            if n:
                k[..., :n, :] = self.keys
                v[..., :n, :] = self.values
            self._k, self._v = k, v
        self._k[..., n:need, :] = key_states
        self._v[..., n:need, :] = value_states
        self.keys, self.values = self._k[..., :need, :], self._v[..., :need, :]
        return self.keys, self.values

    def reset(self) -> None:
        self._k = self._v = None
        super().reset()


def reserved_cache(config, capacity: int) -> DynamicCache | None:
    """transformers' ``DynamicCache`` for ``config``'s layers, each full-attention layer a
    ``ReservedLayer`` of ``capacity`` positions (sliding-window and other layer types as
    transformers makes them). ``None`` (generate builds its own cache) for a model whose
    config transformers cannot lay out a dynamic cache for."""
    try:
        cache = DynamicCache(config=config)
    except (AttributeError, KeyError, NotImplementedError, TypeError, ValueError):
        return None
    if not cache.layers:
        return None
    cache.layers = [ReservedLayer(capacity) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def cache_kwarg(model) -> str:
    """The name under which ``model.generate`` takes a cache object: ``cache`` where the
    model's forward has that argument (recent transformers), else ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
