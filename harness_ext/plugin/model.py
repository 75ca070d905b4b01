"""``hf-drift``: lm-eval's ``HFLM`` with dilution compensation.

model_args (besides everything ``hf`` accepts):

* ``compensation=none|log|const|head`` (default ``none``)
* ``strength=S`` (float >= 0, default 1.0)
* ``span=system|prompt`` (default ``system``): which keys receive the bias
* ``gguf_file=F``: as for ``hf``, but the de-quantised weights are cached as safetensors
  after the first load (``DRIFT_CACHE_DIR``)
* ``attention=sdpa|eager`` (default ``sdpa``): the stock attention that the bias wraps

See ``drift_eval.compensation`` for the bias itself and how the span is found.
"""
from __future__ import annotations

import logging

from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM
from lm_eval.models.utils import has_bos_prefix

from ..compensation import bias as comp
from ..compensation.spans import system_span_end, token_counts
from ..errors import DriftUsageError
from ..settings import CompensationConfig
from .local_models import cached_from_gguf

log = logging.getLogger("lm_eval_drift")


@register_model("hf-drift")
class HFDriftLM(HFLM):
    def __init__(self, pretrained, compensation="none", strength=1.0, span="system",
                 gguf_file=None, attention="sdpa", **kwargs):
        self.compensation = CompensationConfig.parse(compensation, strength, span)
        if attention not in comp.IMPLEMENTATIONS:
            raise DriftUsageError(f"unknown attention '{attention}': use sdpa or eager")
        if gguf_file and isinstance(pretrained, str):
            pretrained = cached_from_gguf(pretrained, gguf_file, log=log.warning)
        super().__init__(pretrained=pretrained, **kwargs)
        self._docs_by_context: dict = {}
        self._pending_rows = None
        self._warned_no_span = False
        self.drift_state = comp.install(self.model, self.compensation, base=attention)
        self.set_compensation(self.compensation)

    # ------------------------------------------------------------------ settings
    def set_compensation(self, config: CompensationConfig) -> None:
        """Switch compensation between runs without reloading the model."""
        self.compensation = config
        self.drift_state.config = config
        if config.mode == "head" and config.active and self.drift_state.head_gammas is None:
            from ..compensation.calibration import head_gammas

            self.drift_state.head_gammas = head_gammas(self.model, self.tokenizer)

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
        if self.compensation.active:
            self._pending_rows = self._span_rows(strings, mask)
        return ids, mask

    def _model_generate(self, context, max_length, stop, **generation_kwargs):
        rows, self._pending_rows = self._pending_rows, None
        if rows is not None:
            span_end, prompt_len = rows
            self.drift_state.set_rows(span_end, prompt_len, max_length - context.shape[1])
        try:
            return super()._model_generate(context, max_length, stop, **generation_kwargs)
        finally:
            self.drift_state.clear_rows()

    def generate_until(self, requests, disable_tqdm: bool = False):
        self._docs_by_context = {r.args[0]: r.doc for r in requests}
        try:
            return super().generate_until(requests, disable_tqdm=disable_tqdm)
        finally:
            self._docs_by_context = {}
            self._pending_rows = None

    # ------------------------------------------------------------------ conversations
    def generate_conversation(self, requests, disable_tqdm: bool = False):
        """Serve multi-turn conversation requests (see ``drift_eval.measure.conversation``)."""
        from tqdm import tqdm

        from ..measure.conversation import ConversationSpec, dump_messages, run_conversations

        n_turns = max((len(ConversationSpec.from_json(r.args[0]).user_turns) for r in requests), default=0)
        bar = tqdm(total=n_turns, desc=f"Running {len(requests)} conversations, turn by turn",
                   disable=disable_tqdm or self.rank != 0)
        try:
            histories = run_conversations(self, requests, progress=lambda turn, n: bar.update(1))
            return [dump_messages(h) for h in histories]
        finally:
            bar.close()

    # ------------------------------------------------------------------ prompt forgetting
    def prompt_offsets(self, requests, disable_tqdm: bool = False):
        """Serve teacher-forced prompt-pair requests for α (see ``drift_eval.measure.alpha``)."""
        from ..measure.alpha import serve_offsets

        return serve_offsets(self, requests)

    def free_generation(self, requests, disable_tqdm: bool = False):
        """Serve free-generation decodability requests (see ``drift_eval.measure.decode``)."""
        from ..measure.decode import serve

        return serve(self, requests)

    def continuation_nll(self, requests, disable_tqdm: bool = False):
        """Serve continuation-perplexity requests for drift_ppl (see ``drift_eval.measure.alpha``)."""
        from ..measure.alpha import serve_nll

        return serve_nll(self, requests)

    # ------------------------------------------------------------------ positional bias
    def position_profile(self, requests, disable_tqdm: bool = False):
        """Serve positional-bias requests (see ``drift_eval.measure.position_bias``)."""
        from ..measure.position_bias import serve

        return serve(self, requests)

    # ------------------------------------------------------------------ output accessibility
    def accessibility(self, requests, disable_tqdm: bool = False):
        """Serve cramming (output accessibility) requests (see ``drift_eval.measure.cramming``)."""
        from ..measure.cramming import serve

        return serve(self, requests)
