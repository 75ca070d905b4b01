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

``ConversationStore`` carries a conversation's keys and values from one turn to the next
(``conversation_cache``): ``carried_cache`` is the reserved cache with every layer keeping
every position (a sliding-window layer records what leaves its window), ``keep`` holds
each row's tokens and states after its turn, and ``prefix`` lays them out for the next
turn's batch at the columns re-encoding would give them, after checking the tokens
(``exact_prefix``); ``seed`` fills the new cache with them.
"""
from __future__ import annotations

import inspect
import sys

import torch
from tqdm import tqdm
from transformers import LogitsProcessor
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer


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


def _dynamic_cache(config) -> DynamicCache | None:
    """transformers' ``DynamicCache`` laid out for ``config``'s layers; ``None`` where it
    cannot lay one out (or lays out no layer)."""
    try:
        cache = DynamicCache(config=config)
    except (AttributeError, KeyError, NotImplementedError, TypeError, ValueError):
        return None
    return cache if cache.layers else None


def reserved_cache(config, capacity: int) -> DynamicCache | None:
    """transformers' ``DynamicCache`` for ``config``'s layers, each full-attention layer a
    ``ReservedLayer`` of ``capacity`` positions (sliding-window and other layer types as
    transformers makes them). ``None`` (generate builds its own cache) for a model whose
    config transformers cannot lay out a dynamic cache for."""
    cache = _dynamic_cache(config)
    if cache is None:
        return None
    cache.layers = [ReservedLayer(capacity) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def cache_kwarg(model) -> str:
    """The name under which ``model.generate`` takes a cache object: ``cache`` where the
    model's forward has that argument (recent transformers), else ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


# ---------------------------------------------------------------------------- conversations
class RecordingSlidingLayer(DynamicSlidingWindowLayer):
    """transformers' sliding-window layer, unchanged for attention (it keeps and hands back
    what the stock layer does), that also records every key and value it is given in a
    ``ReservedLayer``: the states a later turn of the same conversation starts from, which
    the stock layer drops once they leave the window."""

    def __init__(self, sliding_window: int, capacity: int = 0, **kwargs):
        super().__init__(sliding_window=sliding_window, **kwargs)
        self.record = ReservedLayer(capacity)

    def update(self, key_states, value_states, *args, **kwargs):
        self.record.update(key_states, value_states)
        return super().update(key_states, value_states, *args, **kwargs)

    def reset(self) -> None:
        self.record.reset()
        super().reset()


def carried_cache(config, capacity: int) -> DynamicCache | None:
    """``reserved_cache`` whose every layer keeps the states of every position (full
    attention: ``ReservedLayer``; sliding window: ``RecordingSlidingLayer``), so that a
    conversation's next turn can start from them. ``None`` for a model with any other kind
    of layer (linear attention, chunked or shared caches): its conversations are re-encoded."""
    cache = _dynamic_cache(config)
    if cache is None:
        return None
    layers = []
    for layer in cache.layers:
        if type(layer) is DynamicLayer:
            layers.append(ReservedLayer(capacity))
        elif type(layer) is DynamicSlidingWindowLayer:
            layers.append(RecordingSlidingLayer(layer.sliding_window, capacity))
        else:
            return None
    cache.layers = layers
    return cache


def kept_states(cache: DynamicCache) -> list:
    """Per layer of a ``carried_cache``, the keys and values of every position it was given,
    ``(batch, key/value heads, positions, head size)`` each."""
    out = []
    for layer in cache.layers:
        layer = layer.record if isinstance(layer, RecordingSlidingLayer) else layer
        out.append((layer.keys, layer.values))
    return out


def bytes_per_token(config, dtype) -> int:
    """Bytes of keys and values one position holds in a ``carried_cache`` of ``config``'s
    model in ``dtype``: every layer's key and value heads times their size."""
    c = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(getattr(c, "num_attention_heads"))
    kv = int(getattr(c, "num_key_value_heads", None) or heads)
    dim = int(getattr(c, "head_dim", None) or c.hidden_size // heads)
    return 2 * int(c.num_hidden_layers) * kv * dim * torch.empty((), dtype=dtype).element_size()


class Held:
    """What one conversation keeps between turns: the tokens it was given and generated
    (``tokens``, one row, padding excluded), how many of them were the prompt (which the
    next prompt must start with), the compensation span end of that call (0: none), and
    each layer's keys and values at those positions ((heads, positions, size) each)."""

    __slots__ = ("tokens", "prompt_len", "span_end", "states")

    def __init__(self, tokens, prompt_len, span_end, states):
        self.tokens, self.prompt_len, self.span_end, self.states = tokens, int(prompt_len), int(span_end), states

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.states)


def common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    """The number of leading tokens ``a`` and ``b`` (1-D) share."""
    n = min(a.shape[0], b.shape[0])
    differ = (a[:n] != b[:n].to(a.device)).nonzero()
    return int(differ[0, 0]) if differ.numel() else n


def exact_prefix(held: Held, tokens: torch.Tensor, span_end: int, mode: str) -> tuple[int, bool]:
    """(how many leading positions of ``tokens``, the new prompt, can take ``held``'s keys
    and values exactly as re-encoding would compute them; whether the earlier prompt is
    intact).

    The tokens are compared, never assumed: reuse stops where the new prompt departs from
    the held tokens (a reply re-tokenised differently, text cut at a stop sequence, the
    padding after an early end), and a new prompt that does not start with the whole earlier
    prompt (a chat template that rewrote earlier turns, a truncated prompt) reuses nothing.
    A position's states also depend on the bias its query received: ``log`` and ``head``
    bias a query by its position and the span end alone, so with the same span end every
    shared position is exact; ``const`` (whose level depends on the prompt length) or a
    span end that moved (``span=prompt``) leaves only the positions before the span end,
    whose queries are never biased. One position is always left to prefill, whose logits
    start the answer."""
    n = common_prefix(held.tokens, tokens)
    if n < held.prompt_len:
        return 0, False
    biased = [p for p in (int(span_end), held.span_end) if p > 1]
    if biased and not (mode in ("log", "head") and int(span_end) == held.span_end):
        n = min(n, *biased)
    return max(0, min(n, int(tokens.shape[0]) - 1)), True


class ConversationStore:
    """The carried caches of one ``generate_conversation`` call, one per conversation
    (``drift_eval.plugin.conversations`` names the conversation of each prompt with
    ``expect``). ``limit`` (bytes, or None) caps what is held: past it every cache is
    dropped and the rest of the call re-encodes. ``warn`` gets one line, once per call: the
    first time a conversation's earlier prompt is not a prefix of its next one, and when
    the cap is reached."""

    def __init__(self, mode: str = "none", limit: int | None = None, warn=None):
        self.mode = mode
        self.limit = limit
        self.warn = warn
        self.held: dict = {}
        self.reused: dict = {}  # conversation -> True/False for its last generated turn (absent: nothing held)
        self.stopped = False
        self._expected: dict = {}
        self._warned = set()
        self.positions = self.carried = 0  # prompt positions over the call, and those taken from held states
        self.target = None  # the model object the turns go through (None: the model itself)

    def _say(self, what: str, line: str) -> None:
        if what not in self._warned and self.warn is not None:
            self._warned.add(what)
            self.warn(line)

    def expect(self, pairs) -> None:
        """The (prompt, conversation) pairs of the next ``generate_until`` call."""
        self._expected = {}
        for context, key in pairs:
            self._expected.setdefault(context, []).append(key)

    def keys_for(self, contexts) -> list:
        """The conversation of each row of a batch (None: not one of the expected prompts)."""
        return [self._expected[c].pop(0) if self._expected.get(c) else None for c in contexts]

    def prefix(self, keys, context: torch.Tensor, mask: torch.Tensor, span_ends) -> tuple[int, list | None]:
        """(X, the layers' keys and values of the first X columns of the batch, (batch,
        heads, X, size) each): the columns every row already holds, in the very layout of
        the re-encoding path (left padding first, each row's tokens at the same columns),
        so that positions, the 2-D attention mask and the bias are those of that path. A
        padding column holds zeros (it is masked). (0, None) when nothing can be carried."""
        B, W = context.shape
        lengths = [int(x) for x in mask.sum(1).tolist()]
        if not all(bool(mask[i, W - n:].all()) for i, n in enumerate(lengths)):  # not left padding only
            return 0, None
        reach, rows = [], []
        for i, key in enumerate(keys):
            held = None if self.stopped or key is None else self.held.get(key)
            n = 0
            if held is not None:
                n, intact = exact_prefix(held, context[i, W - lengths[i]:], span_ends[i], self.mode)
                self.reused[key] = intact
                if not intact:
                    self._say("prefix", "conversation cache: a chat template rewrote earlier turns of a conversation "
                                        "(its earlier prompt is not a prefix of the next one), so that conversation's "
                                        "turn is re-encoded (cache_reused: false in its sample)")
            reach.append(W - lengths[i] + n)
            rows.append(held)
        X = min(reach) if reach else 0
        if X <= 0:
            return 0, None
        ref = next(h for h, r in zip(rows, reach) if h is not None and r > 0)
        out = []
        for layer, (k0, v0) in enumerate(ref.states):
            k = k0.new_zeros(B, k0.shape[0], X, k0.shape[-1])
            v = v0.new_zeros(B, v0.shape[0], X, v0.shape[-1])
            for i, held in enumerate(rows):
                start = W - lengths[i]
                if X > start:
                    hk, hv = held.states[layer]
                    k[i, :, start:X] = hk[:, : X - start]
                    v[i, :, start:X] = hv[:, : X - start]
            out.append((k, v))
        self.carried += sum(max(0, X - (W - n)) for n in lengths)
        return X, out

    def keep(self, keys, out: torch.Tensor, cache: DynamicCache, width: int, mask: torch.Tensor, generated,
             span_ends) -> None:
        """After a batch: each conversation's row (its prompt, the tokens generated up to and
        including its end, as far as the model computed them) and its states, held for its
        next turn in place of what it held before."""
        lengths = [int(x) for x in mask.sum(1).tolist()]
        self.positions += sum(lengths)
        if self.stopped:
            return
        states = kept_states(cache)
        if any(k is None or v is None for k, v in states):  # a layer the model never wrote (shared states)
            self._say("layers", "conversation cache: this model leaves some cache layers empty, so its "
                                "conversations are re-encoded each turn")
            self.held.clear()
            self.stopped = True
            return
        T = states[0][0].shape[-2]
        for i, key in enumerate(keys):
            if key is None:
                continue
            start = width - lengths[i]
            n = min(T - start, lengths[i] + int(generated[i]) + 1)
            self.held[key] = Held(out[i, start:start + n].clone(), lengths[i], span_ends[i],
                                  [(k[i, :, start:start + n].clone(), v[i, :, start:start + n].clone())
                                   for k, v in states])
        if self.limit is not None and sum(h.nbytes for h in self.held.values()) > self.limit:
            self._say("limit", f"conversation cache: the carried caches outgrew conversation_cache_mb="
                               f"{self.limit // 2**20}, so the rest of this run re-encodes each turn")
            self.held.clear()
            self.stopped = True


def seed(cache: DynamicCache, states) -> None:
    """Fill an empty ``carried_cache`` with ``states`` (per layer (batch, heads, X, size)),
    as a prefill of those X columns would have left it."""
    for layer, (k, v) in zip(cache.layers, states):
        layer.update(k, v)
