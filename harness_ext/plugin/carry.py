"""The conversation cache (``conversation_cache=off|on|auto``) of a Hugging Face model of
lm-eval: each conversation of a ``generate_conversation`` call keeps its keys and values
between turns, so that a turn prefills only what follows the part of its prompt already
computed.

One place for both models that carry conversations:

* ``hf-drift`` (``drift_eval.plugin.model``) takes the setting from its ``--model_args``;
  the stand-in of each of its ``generate_until`` calls (``model.Generation``), given the
  call's store as an argument, calls ``begin``/``end`` around each batch in its
  ``_model_generate``, with the compensation span of each row;
* lm-eval's own ``hf`` model takes it from ``--metadata`` (its ``--model_args`` go to
  ``from_pretrained``): ``StockCarry`` sends one ``generate_conversation`` call's turns
  through ``CarryingHF``, a stand-in for the model whose ``tok_batch_encode`` and
  ``_model_generate`` are its own (``backends.StandIn``); neither the model object nor
  lm-eval's class is changed, and its ``generate_until`` batches, pads and stops as ever.

``carrying`` sizes the call's conversations against the cap (``conversation_cache_mb``):
past it, ``on`` stops with one line and ``auto`` re-encodes (one warning line). What is
carried, and how the prefix is checked, is ``drift_eval.plugin.generation``.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from drift_eval.errors import DriftUsageError
from drift_eval.logs import log
from drift_eval.plugin.backends import StandIn
from drift_eval.plugin.generation import (ConversationStore, bytes_per_token, cache_kwarg, carried_cache,
                                         generated_tokens, seed)


def can_carry(lm) -> bool:
    """Whether the cache of ``lm``'s model (an lm-eval ``HFLM``) can be carried between turns."""
    return carried_cache(lm.model.config, 1) is not None


def end_ids(lm, generation_kwargs) -> list[int]:
    """The ids that end an answer of ``lm`` in one ``generate`` call: the model's
    end-of-sequence ids, its tokenizer's, and those the call adds (``eos_token_id``, which a
    forced length sets to the chat template's end-of-turn tokens)."""
    ids = []
    for given in (getattr(lm.model.generation_config, "eos_token_id", None), lm.tokenizer.eos_token_id,
                  generation_kwargs.get("eos_token_id")):
        ids += list(given) if isinstance(given, (list, tuple)) else [] if given is None else [given]
    return sorted({int(i) for i in ids})


def conversation_bytes(lm, specs, gen_kwargs) -> int:
    """About how many bytes the conversations ``specs`` keep by their last turn on ``lm``:
    their system prompt, user messages and scripted replies, 8 tokens of markup per message,
    and ``max_gen_toks`` per generated turn, times ``generation.bytes_per_token``."""
    tokens = 0
    for spec, gen in zip(specs, gen_kwargs):
        turns = range(1, len(spec.user_turns) + 1)
        text = "\n".join([spec.system_prompt, *(spec.user_message(t) for t in turns), *spec.scripted_replies])
        limit = int((gen or {}).get("max_gen_toks", lm.max_gen_toks) or lm.max_gen_toks)
        tokens += len(lm.tokenizer.encode(text, add_special_tokens=False)) + 8 * (1 + 2 * len(turns))
        tokens += limit * sum(1 for t in turns if spec.generated(t))
    return tokens * bytes_per_token(lm.model.config, lm.model.dtype)


@contextmanager
def carrying(lm, setting: str, cap_mb: int, mode: str, specs, gen_kwargs):
    """The ``ConversationStore`` of one ``generate_conversation`` call of ``specs`` on
    ``lm`` (``mode``: the compensation shape whose bias the carried states got, ``none``
    without), or None where each turn is re-encoded: the setting is ``off``, the model's
    cache cannot be carried, or (``auto``) the conversations need more than the cap."""
    store = None
    if setting != "off" and can_carry(lm):
        need, cap = conversation_bytes(lm, specs, gen_kwargs), cap_mb * 2**20
        if need <= cap:
            store = ConversationStore(mode, cap, log.warning)
        elif setting == "on":
            raise DriftUsageError(f"conversation_cache=on: {len(specs)} conversations would keep about "
                                  f"{need / 2**20:.0f} MiB of keys and values, over conversation_cache_mb={cap_mb}: "
                                  f"raise it, or use conversation_cache=auto or off")
        else:
            log.warning(f"conversation_cache=auto: {len(specs)} conversations would keep about {need / 2**20:.0f} "
                        f"MiB of keys and values, over conversation_cache_mb={cap_mb}, so each turn is re-encoded")
    yield store


@dataclass
class Turn:
    """One batch of a turn that starts from the carried states."""
    keys: list
    cache: object
    mask: object
    span_ends: list


def brings_cache(generation_kwargs: dict) -> bool:
    """Whether a ``generate`` call's kwargs bring a cache of their own (which is then left be)."""
    return bool({"cache", "past_key_values"} & set(generation_kwargs) or generation_kwargs.get("cache_implementation"))


def begin(store, lm, contexts, context, max_length: int, generation_kwargs: dict, span_ends) -> Turn | None:
    """Before one batch's ``generate`` (``context``: its left-padded prompt ids, from the
    strings ``contexts``): a carried cache under the model's cache kwarg in
    ``generation_kwargs``, seeded with the columns every row's conversation already holds.
    None (nothing changed) outside a carried conversation, or where the call brings its own
    cache."""
    mask = generation_kwargs.get("attention_mask")
    if store is None or mask is None or brings_cache(generation_kwargs):
        return None
    cache = carried_cache(lm.model.config, max_length)
    if cache is None:
        return None
    keys = store.keys_for(contexts)
    held, states = store.prefix(keys, context, mask, span_ends)
    if held:
        seed(cache, states)
    generation_kwargs[cache_kwarg(lm.model)] = cache
    return Turn(keys, cache, mask, list(span_ends))


def end(store, turn: Turn, out, width: int, generated) -> None:
    """After the batch: each conversation keeps its row's tokens and states."""
    store.keep(turn.keys, out, turn.cache, width, turn.mask, generated, turn.span_ends)


def stock_hf(model) -> bool:
    """Whether ``model`` is lm-eval's own ``HFLM`` (not a subclass, whose generation may
    differ)."""
    cls = type(model)
    return cls.__name__ == "HFLM" and cls.__module__ == "lm_eval.models.huggingface"


class StockCarry:
    """``carried_conversations`` for lm-eval's ``hf`` model (``setting``, ``cap_mb``: the
    run's ``--metadata`` ``conversation_cache`` and ``conversation_cache_mb``): the store it
    yields names the model the turns go through (``ConversationStore.target``), a
    ``CarryingHF`` stand-in for the model."""

    def __init__(self, lm, setting: str, cap_mb: int):
        self.lm, self.setting, self.cap_mb = lm, setting, cap_mb

    @contextmanager
    def __call__(self, specs, gen_kwargs):
        with carrying(self.lm, self.setting, self.cap_mb, "none", specs, gen_kwargs) as store:
            if store is not None:
                store.target = CarryingHF(self.lm, store)
            yield store


class CarryingHF(StandIn):
    """A stand-in (``backends.StandIn``) for lm-eval's ``hf`` model during the turns of one
    ``generate_conversation`` call: lm-eval's ``generate_until`` batches, pads and stops as
    ever; ``tok_batch_encode`` notes each batch's prompts, and ``_model_generate`` starts
    each row from the keys and values its conversation already holds (``begin``) and keeps
    them after the batch (``end``)."""

    def __init__(self, model, store):
        super().__init__(model)
        self.store, self.seen = store, []

    def tok_batch_encode(self, strings, *args, **kwargs):
        self.seen[:] = [list(strings)]
        return self.stands_for.tok_batch_encode(strings, *args, **kwargs)

    def _model_generate(self, context, max_length, stop, **generation_kwargs):
        lm = self.stands_for
        rows = self.seen[0] if self.seen else [None] * context.shape[0]
        turn = begin(self.store, lm, rows, context, max_length, generation_kwargs, [0] * context.shape[0])
        out = lm._model_generate(context, max_length, stop, **generation_kwargs)
        if turn is not None:
            width = context.shape[1]
            end(self.store, turn, out, width,
                generated_tokens(out, width, end_ids(lm, generation_kwargs), lm.tokenizer.pad_token_id))
        return out
