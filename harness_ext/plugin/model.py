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

from contextlib import contextmanager

from lm_eval.models.huggingface import HFLM
from lm_eval.models.utils import has_bos_prefix

from drift_eval.compensation import bias as comp
from drift_eval.compensation.spans import system_span_end, token_counts
from drift_eval.errors import DriftUsageError
from drift_eval.logs import log
from drift_eval.plugin import carry, reasoning
from drift_eval.plugin.answers import Answer, count_tokens
from drift_eval.plugin.generation import (ConversationStore, Watch, cache_kwarg, generated_tokens, reserved_cache,
                                         show_progress)
from drift_eval.plugin.local_models import cached_from_gguf
from drift_eval.plugin.request_types import CONVERSATION, TYPES
from drift_eval.plugin.serving import SERVERS
from drift_eval.plugin.wrapper import DriftLM
from drift_eval.settings import CONVERSATION_CACHE_MB, CompensationConfig, conversation_cache_setting


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
        self._docs_by_context: dict = {}
        # drift_ppl's scores without compensation, shared by every setting of this model
        # (drift_eval.measure.alpha_serving.serve_nll)
        self.uncompensated_nll: dict = {}
        self._pending_rows = None
        self._warned_no_span = False
        self._batch_contexts: list = []
        self._answer_meta: dict = {}  # context -> what generation measured (tokens, natural end)
        self._token_progress = False  # show token progress for the batches of this generate_until call
        self._conversation_bars = False  # inside generate_conversation with lm-eval's bars on
        self._carry: ConversationStore | None = None  # the conversation caches of the current call
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
            from drift_eval.measure.calibration import head_gammas
            from drift_eval.tasks.drift_french.data import calibration_prompt

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

    def _span_rows(self, strings, attn_mask):
        """(span end P, prompt length L) per row, in kept tokens (after left truncation)."""
        kept = attn_mask.sum(1).tolist()
        if self.compensation.span == "prompt":
            return kept, kept
        kwargs = self._encode_kwargs(strings)
        ends = []
        for s, n_kept in zip(strings, kept):
            doc = self._docs_by_context.get(s)
            sp = doc.get("system_prompt") if isinstance(doc, dict) else None
            end_char = system_span_end(s, self.tokenizer, sp if isinstance(sp, str) else None)
            if end_char is None:
                if not self._warned_no_span:
                    log.warning("span=system: a prompt has no system message, so it is not compensated "
                                "(pass --apply_chat_template, or use span=prompt)")
                    self._warned_no_span = True
                ends.append(0)
                continue
            before, n_full = token_counts(s, end_char, self.tokenizer, **kwargs)
            P = before - (n_full - n_kept)
            ends.append(P if P > 1 else 0)
        return ends, kept

    # ------------------------------------------------------------------ lm-eval hooks
    def tok_batch_encode(self, strings, padding_side="left", left_truncate_len=None, truncation=False):
        ids, mask = super().tok_batch_encode(strings, padding_side=padding_side,
                                             left_truncate_len=left_truncate_len, truncation=truncation)
        self._batch_contexts = list(strings)
        if self.compensation.active:
            self._pending_rows = self._span_rows(strings, mask)
        return ids, mask

    def _model_generate(self, context, max_length, stop, **generation_kwargs):
        """One batch: EOS held back until ``min_new_tokens`` by ``generation.Watch``, which
        also records where the model wanted to end; keys and values go to a cache reserved
        for the whole call (``generation.reserved_cache``); the batch's measurements are
        kept per context for ``generate_until``."""
        from transformers import LogitsProcessorList

        rows, self._pending_rows = self._pending_rows, None
        width = context.shape[1]
        min_new = int(generation_kwargs.pop("min_new_tokens", 0) or 0)
        eos = carry.end_ids(self, generation_kwargs)  # the chat template's end-of-turn tokens too, when forced
        watch = Watch(width, eos, min_new, max_length - width, progress=self._token_progress,
                      desc=f"generating {context.shape[0]} x {max_length - width} tokens")
        span_ends = list(rows[0]) if rows is not None else [0] * context.shape[0]
        # a conversation turn starts from what each row's conversation holds (drift_eval.plugin.carry)
        turn = carry.begin(self._carry, self, self._batch_contexts, context, max_length, generation_kwargs, span_ends)
        if turn is None and not carry.brings_cache(generation_kwargs):
            cache = reserved_cache(self.model.config, max_length)
            if cache is not None:
                generation_kwargs[cache_kwarg(self.model)] = cache
        processors = LogitsProcessorList(generation_kwargs.pop("logits_processor", None) or [])
        processors.append(watch)
        if rows is not None:
            span_end, prompt_len = rows
            self.drift_state.set_rows(span_end, prompt_len, max_length - width)
        try:
            out = super()._model_generate(context, max_length, stop, logits_processor=processors, **generation_kwargs)
        finally:
            self.drift_state.clear_rows()
            watch.close()
        tokens = generated_tokens(out, width, eos, self.tokenizer.pad_token_id)
        if turn is not None:
            carry.end(self._carry, turn, out, width, tokens)
        ends = watch.natural_end or [None] * len(tokens)
        reasons = bool(reasoning.reasoning_marker(self))
        for row, (ctx, n, end) in enumerate(zip(self._batch_contexts, tokens, ends)):
            meta = {"tokens": n}
            if reasons:  # a reasoning model: its reasoning, which lm-eval leaves out of the answer
                meta.update(reasoning.reasoning_of(self, out[row, width:width + n].tolist()))
            if min_new:
                chars = None if end is None else len(self.tok_decode(out[row, width:width + end].tolist()))
                meta.update(forced_length=True, natural_end=end, natural_end_chars=chars)
            self._answer_meta[ctx] = meta
        return out

    def generate_until(self, requests, disable_tqdm: bool = False):
        """lm-eval's batched generation; each answer comes back as an ``Answer`` carrying its
        token count (and, for forced-length requests, where the model wanted to end), also
        in what lm-eval's answer cache stores."""
        self._docs_by_context = {r.args[0]: r.doc for r in requests}
        self._answer_meta = {}
        self._token_progress = show_progress(disable_tqdm and not self._conversation_bars, self.rank)
        hook, self.cache_hook = self.cache_hook, _AnswerHook(self.cache_hook, self._answer_meta)
        try:
            out = super().generate_until(requests, disable_tqdm=disable_tqdm)
            answers = []
            for s, r in zip(out, requests):
                meta = dict(self._answer_meta.get(r.args[0], {}))
                if "trace_tokens" in meta:  # lm-eval returned the text after the reasoning: count that
                    meta["tokens"] = count_tokens(self, s)
                answers.append(Answer(s, **meta))
            return answers
        finally:
            self.cache_hook = hook
            self._docs_by_context = {}
            self._pending_rows = None
            self._token_progress = False

    @contextmanager
    def carried_conversations(self, specs, gen_kwargs):
        """Inside the ``with`` body (one ``generate_conversation`` call of the
        conversations ``specs``, each turn with its ``gen_kwargs``), every conversation keeps
        its keys and values between turns (``conversation_cache``): yields the
        ``generation.ConversationStore``, or None where each turn is re-encoded."""
        mode = self.compensation.mode if self.compensation.active else "none"
        with carry.carrying(self, self.conversation_cache, self.conversation_cache_mb, mode, specs,
                            gen_kwargs) as store:
            self._carry = store
            try:
                yield store
            finally:
                self._carry = None

    def conversation_bytes(self, specs, gen_kwargs) -> int:
        """``carry.conversation_bytes`` of this model."""
        return carry.conversation_bytes(self, specs, gen_kwargs)

    @contextmanager
    def turn_progress(self, on: bool):
        """Inside a conversation (``drift_eval.plugin.conversations``), whose turns run with
        lm-eval's bars off: ``on`` shows each turn's token progress all the same."""
        self._conversation_bars = bool(on)
        try:
            yield
        finally:
            self._conversation_bars = False


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
