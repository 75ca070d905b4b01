"""``hf-drift``: lm-eval's ``HFLM`` with dilution compensation.

model_args (besides everything ``hf`` accepts):

* ``compensation=none|log|const|head`` (default ``none``)
* ``strength=S`` (float >= 0, default 1.0)
* ``span=system|prompt`` (default ``system``): which keys receive the bias
* ``gguf_file=F``: as for ``hf``, but the de-quantised weights are cached as safetensors
  after the first load (``DRIFT_CACHE_DIR``)
* ``attention=sdpa|eager`` (default ``sdpa``): the stock attention that the bias wraps
* ``conversation_cache=off|on|auto`` (default ``off``): whether each conversation of a
  ``generate_conversation`` call keeps its keys and values between turns, so that a turn
  prefills only what follows the part of its prompt already computed
  (``drift_eval.plugin.carry``); ``auto`` re-encodes instead where the model's cache
  cannot be carried or the run's conversations would need more than the cap, ``on`` stops
  with one line there. ``conversation_cache_mb=M`` (default 8192) is that cap.

See ``drift_eval.compensation`` for the bias itself and how the span is found. lm-eval
finds ``hf-drift`` through the package's ``lm_eval.models`` entry point, registered lazily
(``drift_eval.plugin.registration.register_models``): its one registration path.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager

from lm_eval.models.huggingface import HFLM
from lm_eval.models.utils import has_bos_prefix
from transformers import LogitsProcessorList

from drift_eval.compensation import bias as comp
from drift_eval.compensation.spans import system_span_end, token_counts
from drift_eval.errors import DriftUsageError
from drift_eval.logs import log
from drift_eval.plugin import carry, reasoning
from drift_eval.plugin.answers import Answer, count_tokens
from drift_eval.plugin.backends import StandIn
from drift_eval.plugin.generation import (ConversationStore, Watch, cache_kwarg, generated_tokens, reserved_cache,
                                         show_progress)
from drift_eval.measure.calibration import head_gammas
from drift_eval.plugin.local_models import cached_from_gguf
from drift_eval.plugin.request_types import CONVERSATION, TYPES
from drift_eval.plugin.serving import SERVERS
from drift_eval.plugin.wrapper import DriftLM
from drift_eval.settings import CONVERSATION_CACHE_MB, CompensationConfig, conversation_cache_setting
from drift_eval.taskdata.french import calibration_prompt


class HFDriftLM(HFLM):
    def __init__(self, pretrained, compensation="none", strength=1.0, span="system",
                 gguf_file=None, attention="sdpa", conversation_cache="off",
                 conversation_cache_mb=CONVERSATION_CACHE_MB, **kwargs):
        self.compensation = CompensationConfig.parse(compensation, strength, span)
        if attention not in comp.IMPLEMENTATIONS:
            raise DriftUsageError(f"unknown attention '{attention}': use sdpa or eager")
        self.conversation_cache, self.conversation_cache_mb = conversation_cache_setting(
            conversation_cache, conversation_cache_mb)
        if gguf_file and isinstance(pretrained, str):
            pretrained = cached_from_gguf(pretrained, gguf_file, log=log.warning)
        super().__init__(pretrained=pretrained, **kwargs)
        # drift_ppl's scores without compensation, shared by every setting of this model
        # (drift_eval.measure.alpha_serving.serve_nll)
        self.uncompensated_nll: dict = {}
        self.drift_state = comp.install(self.model, self.compensation, base=attention)
        self.set_compensation(self.compensation)
        if self.conversation_cache == "on" and not carry.can_carry(self):
            raise DriftUsageError(f"conversation_cache=on: the key/value cache of {type(self.model).__name__} cannot "
                                  f"be carried between turns (only full-attention and sliding-window layers can): "
                                  f"use conversation_cache=auto or off")

    # ------------------------------------------------------------------ settings
    def set_compensation(self, config: CompensationConfig) -> None:
        """Switch compensation between runs without reloading the model."""
        self.compensation = config
        self.drift_state.config = config
        if config.mode == "head" and config.active and self.drift_state.head_gammas is None:
            self.drift_state.head_gammas = head_gammas(self.model, self.tokenizer, calibration_prompt())

    # ------------------------------------------------------------------ spans
    def _encode_kwargs(self, strings):
        """The special-token choice ``HFLM.tok_batch_encode`` makes (lm-eval does not expose
        it), so that span offsets are counted on the same tokens."""
        if has_bos_prefix(strings[0], getattr(self.tokenizer, "bos_token", None)):
            return {"add_special_tokens": False}
        if self.add_bos_token is not None:
            return {"add_special_tokens": self.add_bos_token}
        return {}

    def span_rows(self, strings, attn_mask, docs: dict) -> tuple[list, list]:
        """(span end P, prompt length L) per row of one batch (its prompts ``strings``, its
        ``attn_mask``, ``docs``: each prompt's document), in kept tokens (after left
        truncation)."""
        kept = attn_mask.sum(1).tolist()
        if self.compensation.span == "prompt":
            return kept, kept
        kwargs = self._encode_kwargs(strings)
        ends = []
        for s, n_kept in zip(strings, kept):
            doc = docs.get(s)
            sp = doc.get("system_prompt") if isinstance(doc, dict) else None
            end_char = system_span_end(s, self.tokenizer, sp if isinstance(sp, str) else None)
            if end_char is None:
                _no_span_warning()
                ends.append(0)
                continue
            before, n_full = token_counts(s, end_char, self.tokenizer, **kwargs)
            P = before - (n_full - n_kept)
            ends.append(P if P > 1 else 0)
        return ends, kept

    # ------------------------------------------------------------------ lm-eval's generation
    def generate_until(self, requests, disable_tqdm: bool = False, *, carry: ConversationStore | None = None,
                       show_tokens: bool = False):
        """lm-eval's batched generation, run on a ``Generation`` stand-in for this one call;
        each answer comes back as an ``Answer`` carrying its token count (and, for
        forced-length requests, where the model wanted to end), also in what lm-eval's
        answer cache stores. ``carry``: the ``ConversationStore`` of the conversation call
        whose turn this is; ``show_tokens``: show token progress although lm-eval's bars are
        off (a conversation's turns, a call served batch by batch)."""
        call = Generation(self, {r.args[0]: r.doc for r in requests}, carry,
                          show_progress(disable_tqdm and not show_tokens, self.rank))
        out = HFLM.generate_until(call, requests, disable_tqdm=disable_tqdm)
        answers = []
        for s, r in zip(out, requests):
            meta = dict(call.meta.get(r.args[0], {}))
            if "trace_tokens" in meta:  # lm-eval returned the text after the reasoning: count that
                meta["tokens"] = count_tokens(self, s)
            answers.append(Answer(s, **meta))
        return answers

    def for_call(self, carry: ConversationStore | None = None, show_tokens: bool = False) -> "Call":
        """This model for the plugin's calls of one ``generate_conversation`` call (``carry``:
        its conversations' store) or of one call served batch by batch: a ``Call`` stand-in,
        whose ``generate_until`` passes ``carry`` and ``show_tokens`` to this model's."""
        return Call(self, carry, show_tokens)

    @contextmanager
    def carried_conversations(self, specs, gen_kwargs):
        """Inside the ``with`` body (one ``generate_conversation`` call of the
        conversations ``specs``, each turn with its ``gen_kwargs``), every conversation keeps
        its keys and values between turns (``conversation_cache``): yields the
        ``generation.ConversationStore``, or None where each turn is re-encoded."""
        mode = self.compensation.mode if self.compensation.active else "none"
        with carry.carrying(self, self.conversation_cache, self.conversation_cache_mb, mode, specs,
                            gen_kwargs) as store:
            yield store

    def conversation_bytes(self, specs, gen_kwargs) -> int:
        """``carry.conversation_bytes`` of this model."""
        return carry.conversation_bytes(self, specs, gen_kwargs)


def _serving(rt):
    function = SERVERS[rt.name]

    def serve(self, requests, disable_tqdm: bool = False):
        lm = self
        if rt is CONVERSATION:  # conversations run through the drift wrapper: hf-drift called alone makes one
            lm = DriftLM(self, {getattr(r, "task_name", None) for r in requests})
        return function(lm, requests, disable_tqdm=disable_tqdm)

    serve.__name__ = rt.name
    serve.__doc__ = f"Serve ``{rt.name}`` requests (``{function.__module__}.{function.__qualname__}``)."
    return serve


# every drift request type is a method of hf-drift (drift_eval.plugin.request_types)
for _rt in TYPES.values():
    setattr(HFDriftLM, _rt.name, _serving(_rt))


class _AnswerHook:
    """lm-eval's cache hook, storing each answer with what generation measured about it."""

    def __init__(self, hook, meta: dict):
        self.hook, self.meta = hook, meta

    def add_partial(self, attr, req, res):
        if attr == "generate_until" and isinstance(res, str):
            res = Answer(res, **self.meta.get(req[0], {}))
        self.hook.add_partial(attr, req, res)


class Call(StandIn):
    """``hf-drift`` for the plugin's calls of one ``generate_conversation`` call, or of one
    call served batch by batch (``HFDriftLM.for_call``): a stand-in (``backends.StandIn``)
    whose ``generate_until`` is the model's with the call's ``carry`` and ``show_tokens``."""

    def __init__(self, model, carry, show_tokens: bool):
        super().__init__(model)
        self.carry, self.show_tokens = carry, show_tokens

    def generate_until(self, requests, disable_tqdm: bool = False):
        return self.stands_for.generate_until(requests, disable_tqdm, carry=self.carry, show_tokens=self.show_tokens)


class Generation(StandIn):
    """``hf-drift`` during one ``generate_until`` call (``HFDriftLM.generate_until``): a
    stand-in (``backends.StandIn``) on which lm-eval's own ``generate_until`` runs, and
    which holds what the call's batches pass on: ``tok_batch_encode`` notes each batch's
    prompts and compensation rows, ``_model_generate`` generates the batch with them and
    keeps what it measured per prompt (``meta``), and ``cache_hook`` stores each answer
    with it. Nothing is written on the model."""

    def __init__(self, model, docs: dict, carry, token_progress: bool):
        super().__init__(model)
        self.docs, self.carry, self.token_progress = docs, carry, token_progress
        self.meta: dict = {}  # prompt -> what generation measured (tokens, natural end)
        self.batch: tuple = ((), None)  # the batch's prompts, its (span ends, prompt lengths) or None
        self.cache_hook = _AnswerHook(model.cache_hook, self.meta)

    def tok_batch_encode(self, strings, padding_side="left", left_truncate_len=None, truncation=False):
        model = self.stands_for
        ids, mask = model.tok_batch_encode(strings, padding_side=padding_side, left_truncate_len=left_truncate_len,
                                           truncation=truncation)
        self.batch = (list(strings), model.span_rows(strings, mask, self.docs) if model.compensation.active else None)
        return ids, mask

    def _model_generate(self, context, max_length, stop, **generation_kwargs):
        """One batch: EOS held back until ``min_new_tokens`` by ``generation.Watch``, which
        also records where the model wanted to end; keys and values go to a cache reserved
        for the whole call (``generation.reserved_cache``), or start from what each row's
        conversation holds (``drift_eval.plugin.carry``); the batch's measurements are kept
        per prompt."""
        model = self.stands_for
        (contexts, rows), self.batch = self.batch, ((), None)
        width = context.shape[1]
        min_new = int(generation_kwargs.pop("min_new_tokens", 0) or 0)
        eos = carry.end_ids(model, generation_kwargs)  # the chat template's end-of-turn tokens too, when forced
        watch = Watch(width, eos, min_new, max_length - width, progress=self.token_progress,
                      desc=f"generating {context.shape[0]} x {max_length - width} tokens")
        span_ends = list(rows[0]) if rows is not None else [0] * context.shape[0]
        turn = carry.begin(self.carry, model, contexts, context, max_length, generation_kwargs, span_ends)
        if turn is None and not carry.brings_cache(generation_kwargs):
            cache = reserved_cache(model.model.config, max_length)
            if cache is not None:
                generation_kwargs[cache_kwarg(model.model)] = cache
        processors = LogitsProcessorList(generation_kwargs.pop("logits_processor", None) or [])
        processors.append(watch)
        if rows is not None:
            span_end, prompt_len = rows
            model.drift_state.set_rows(span_end, prompt_len, max_length - width)
        try:
            out = model._model_generate(context, max_length, stop, logits_processor=processors, **generation_kwargs)
        finally:
            model.drift_state.clear_rows()
            watch.close()
        tokens = generated_tokens(out, width, eos, model.tokenizer.pad_token_id)
        if turn is not None:
            carry.end(self.carry, turn, out, width, tokens)
        ends = watch.natural_end or [None] * len(tokens)
        reasons = bool(reasoning.reasoning_marker(model))
        for row, (ctx, n, end) in enumerate(zip(contexts, tokens, ends)):
            meta = {"tokens": n}
            if reasons:  # a reasoning model: its reasoning, which lm-eval leaves out of the answer
                meta.update(reasoning.reasoning_of(model, out[row, width:width + n].tolist()))
            if min_new:
                chars = None if end is None else len(model.tok_decode(out[row, width:width + end].tolist()))
                meta.update(forced_length=True, natural_end=end, natural_end_chars=chars)
            self.meta[ctx] = meta
        return out


@functools.cache
def _no_span_warning() -> None:
    """Once in a process: a prompt without a system message is not compensated."""
    log.warning("span=system: a prompt has no system message, so it is not compensated "
                "(pass --apply_chat_template, or use span=prompt)")
