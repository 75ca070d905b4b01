"""Dilution compensation: an additive attention-logit bias toward the instruction.

For a query at absolute (0-based, padding excluded) position ``q`` and a key at position
``k`` of the same row, with ``P`` the position just after the span (the system prompt, or
the whole prompt), the bias is

* ``none``:  0
* ``log``:   ``S * log((q + 1) / P)`` if ``q >= P`` and ``1 <= k < P``, else 0
* ``const``: ``S * c`` on the same (q, k) pairs, with ``c`` the mean of
  ``log((q + 1) / P)`` over the generated positions ``q = L .. L + G - 1`` (``L`` the prompt
  length, ``G`` the generation length):
  ``c = (lgamma(L + G + 1) - lgamma(L + 1) - G * log P) / G``
* ``head``:  ``S * gamma[layer, head] * log((q + 1) / P)``, where ``gamma`` is each head's
  own measured dilution exponent (see ``calibration.py``).

The setting itself (``CompensationConfig``: shape, strength, span, label) is parsed in
``drift_eval.settings``, which needs no torch.

Token 0 (the attention sink) never receives a bias. The bias enters through transformers'
``AttentionInterface`` as registered implementations, ``drift_sdpa`` and ``drift_eager``,
that wrap the stock ones; positions come from the 2-D attention mask that every forward
call receives, so the bias is exact under the KV cache and with left padding. A third,
``drift_eager_values``, is ``drift_eager`` that also hands each layer's value states and
attention weights to a callback (``reading_values``, what ``drift_eval.measure.capture``
uses). Every registration and every switch of a model's implementation is in this module.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from drift_eval.anatomy import attention_modules, decoder_blocks, require_eager
from drift_eval.settings import CompensationConfig

IMPLEMENTATIONS = {"sdpa": "drift_sdpa", "eager": "drift_eager"}
VALUES_IMPLEMENTATION = "drift_eager_values"


def const_level(span_end, prompt_len, gen_len):
    """Mean of ``log((q+1)/P)`` over ``q = L .. L+G-1`` (tensors or numbers, elementwise)."""
    P = torch.as_tensor(span_end, dtype=torch.float64)
    L = torch.as_tensor(prompt_len, dtype=torch.float64)
    G = torch.as_tensor(gen_len, dtype=torch.float64).clamp(min=1)
    return (torch.lgamma(L + G + 1) - torch.lgamma(L + 1) - G * torch.log(P.clamp(min=1))) / G


@dataclass
class DriftState:
    """What the attention wrappers need; one per model, shared by all its layers."""

    config: CompensationConfig
    head_gammas: torch.Tensor | None = None  # (layers, heads), for mode "head"
    span_end: torch.Tensor | None = None  # (B,) P per row; None: no compensation
    const: torch.Tensor | None = None  # (B,) c per row, for mode "const"
    positions: torch.Tensor | None = None  # (B, T) logical positions, -1 on padding
    _masks: dict = field(default_factory=dict, repr=False)  # per-forward cache

    def set_rows(self, span_end, prompt_len=None, gen_len=None):
        self.span_end = torch.as_tensor(span_end, dtype=torch.long)
        if self.config.mode == "const":
            if prompt_len is None or gen_len is None:
                raise ValueError("const compensation needs the prompt and generation lengths")
            self.const = const_level(self.span_end, prompt_len, gen_len)
        else:
            self.const = None

    def clear_rows(self):
        self.span_end = self.const = None
        self._masks.clear()

    def begin_forward(self, attention_mask_2d) -> None:
        """Called before every model forward with its 2-D attention mask (or None). Nothing
        is computed when nothing will be biased (stock attention pays only this call)."""
        self._masks.clear()
        ok = attention_mask_2d is not None and attention_mask_2d.ndim == 2
        biased = self.config.active and self.span_end is not None
        self.positions = logical_positions(attention_mask_2d) if ok and biased else None

    def mask_for(self, layer_idx: int, attention_mask, query, key):
        """The layer's attention mask with the bias folded in (or unchanged).

        Every layer of one forward shares the bias (up to the per-head scale), so it is
        built once per (mask, query length, key length) and reused."""
        if not self.config.active or self.span_end is None:
            return attention_mask
        q_len, k_len = query.shape[2], key.shape[2]
        slot = (id(attention_mask), q_len, k_len)
        hit = self._masks.get(slot)
        if hit is None:
            bias = bias_for(self, q_len, k_len, query.dtype, query.device)
            merged = None
            if bias is not None:
                # head mode: the mask without bias; each layer adds its own scaled bias
                merged = _merge_mask(attention_mask, torch.zeros_like(bias) if self.config.mode == "head" else bias,
                                     query, key)
            hit = self._masks[slot] = (attention_mask, bias, merged)  # keeps the id alive
        _, bias, merged = hit
        if bias is None:
            return attention_mask
        if self.config.mode != "head":
            return merged
        if self.head_gammas is None:
            raise RuntimeError("head compensation needs calibrated per-head strengths")
        g = self.head_gammas[layer_idx].to(device=bias.device, dtype=bias.dtype)
        # span pairs are never masked (a span key precedes every biased query), so adding
        # the bias to the merged mask cannot lift a masked entry
        return torch.addcmul(merged, bias, g[None, :, None, None])

    def folded(self, layer_idx: int, query, key, value, scaling: float):
        """``query``, ``key``, ``value`` with one more channel that carries the bias: the
        query's is ``bias[q] / scaling``, the key's 1 on span keys (0 elsewhere), the
        value's 0, so that ``scaling * q'.k'`` is the logit plus the bias and the output's
        extra channel is 0. This keeps a causal call without a mask on sdpa's fast causal
        path (a float mask would make it compute the whole square). ``None`` when nothing
        is biased."""
        slot = ("folded", query.shape[2], key.shape[2])
        if slot not in self._masks:
            self._masks[slot] = bias_factors(self, query.shape[2], key.shape[2], query.device)
        f = self._masks[slot]
        if f is None:
            return None
        per_query, span = f
        b = per_query[:, None, :, None]  # (B, 1, Q, 1)
        if self.config.mode == "head":
            if self.head_gammas is None:
                raise RuntimeError("head compensation needs calibrated per-head strengths")
            b = b * self.head_gammas[layer_idx].to(b.device)[None, :, None, None]
        B, H, Q, _ = query.shape
        extra_q = (b / scaling).to(query.dtype).expand(B, H, Q, 1)
        extra_k = span[:, None, :, None].to(key.dtype).expand(B, key.shape[1], key.shape[2], 1)
        return (torch.cat([query, extra_q], -1), torch.cat([key, extra_k], -1),
                torch.cat([value, value.new_zeros(*value.shape[:-1], 1)], -1))


def logical_positions(attention_mask_2d: torch.Tensor) -> torch.Tensor:
    """0-based positions of real tokens, -1 on (left or right) padding."""
    m = attention_mask_2d.to(torch.long)
    return torch.where(m.bool(), m.cumsum(-1) - 1, torch.full_like(m, -1))


def bias_factors(state: DriftState, q_len: int, k_len: int, device):
    """The bias as ``(per-query value (B, Q), span keys (B, K))``, before any per-head scale:
    the bias of query q on key k is ``value[q] * span[k]``. ``None`` when nothing is biased
    in this call. Queries and keys are the last ``q_len`` / ``k_len`` columns of the
    forward's positions (a sliding-window cache keeps only the last keys)."""
    cfg = state.config
    if not cfg.active or state.span_end is None:
        return None
    rows = state.span_end.shape[0]
    pos = state.positions
    if pos is None or pos.shape[1] < k_len:
        pos = torch.arange(k_len, device=device).expand(rows, k_len)
    pos = pos.to(device)
    T = pos.shape[1]
    qpos = pos[:, T - q_len :]
    kpos = pos[:, T - k_len :]
    P = state.span_end.to(device)[:, None]
    active = (qpos >= P) & (P > 1)
    in_span = (kpos >= 1) & (kpos < P)
    if not bool((active.any(1) & in_span.any(1)).any()):
        return None
    if cfg.mode == "const":
        val = state.const.to(device=device, dtype=torch.float32)[:, None].expand(qpos.shape)
    else:
        val = torch.log((qpos.clamp(min=0).float() + 1) / P.clamp(min=1).float())
    return torch.where(active, val, torch.zeros((), device=device)) * cfg.strength, in_span.float()


def bias_for(state: DriftState, q_len: int, k_len: int, dtype: torch.dtype, device) -> torch.Tensor | None:
    """Additive logits (B, 1, Q, K) before any per-head scale, or None when nothing is
    biased in this call."""
    f = bias_factors(state, q_len, k_len, device)
    if f is None:
        return None
    value, span = f
    return (value[:, None, :, None] * span[:, None, None, :]).to(dtype)


def _merge_mask(attention_mask, bias, query, key):
    """Float mask = existing mask (bool or additive, or causal if None) + bias."""
    if attention_mask is None:
        q_len, k_len = query.shape[2], key.shape[2]
        qi = torch.arange(q_len, device=key.device)[:, None] + (k_len - q_len)
        allowed = qi >= torch.arange(k_len, device=key.device)[None, :]
        attention_mask = allowed[None, None]
    if attention_mask.dtype == torch.bool:
        neg = torch.finfo(bias.dtype).min
        return torch.where(attention_mask, bias, torch.full((), neg, dtype=bias.dtype, device=bias.device))
    return attention_mask + bias


def drift_sdpa(module, query, key, value, attention_mask, **kwargs):
    """sdpa with the bias: a causal call without a mask (a prefill with no padding) gets the
    bias through an extra channel (``DriftState.folded``) and keeps sdpa's causal fast
    path; every other call gets it folded into the mask."""
    # deferred, start-up: loads huggingface_hub, jinja2, transformers, yaml
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    state = getattr(module, "_drift_state", None)
    if state is not None:
        if attention_mask is None and query.shape[2] > 1:
            scaling = kwargs.pop("scaling", None) or module.scaling
            folded = state.folded(module.layer_idx, query, key, value, scaling)
            if folded is not None:
                out, weights = sdpa_attention_forward(module, *folded, None, scaling=scaling, **kwargs)
                return out[..., : value.shape[-1]], weights
            kwargs["scaling"] = scaling
        attention_mask = state.mask_for(module.layer_idx, attention_mask, query, key)
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def drift_eager(module, query, key, value, attention_mask, **kwargs):
    eager = sys.modules[type(module).__module__].eager_attention_forward
    state = getattr(module, "_drift_state", None)
    if state is not None:
        attention_mask = state.mask_for(module.layer_idx, attention_mask, query, key)
    return eager(module, query, key, value, attention_mask, **kwargs)


def _eager_with_values(module, query, key, value, attention_mask, **kwargs):
    """``drift_eager`` (stock eager attention plus the model's compensation), then the
    module's value callback (``reading_values``) with the value states and the weights."""
    out, weights = drift_eager(module, query, key, value, attention_mask, **kwargs)
    callback = getattr(module, "_drift_values", None)
    if callback is not None:
        callback(value, weights)
    return out, weights


_registered = False


def register_attention() -> None:
    """Register ``drift_sdpa``, ``drift_eager`` and ``drift_eager_values`` (and their mask
    builders) once."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface  # deferred, start-up: loads huggingface_hub, jinja2, transformers, yaml
    # deferred, start-up: loads huggingface_hub, jinja2, transformers, yaml
    from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

    AttentionInterface.register("drift_sdpa", drift_sdpa)
    AttentionInterface.register("drift_eager", drift_eager)
    AttentionInterface.register(VALUES_IMPLEMENTATION, _eager_with_values)
    AttentionMaskInterface.register("drift_sdpa", sdpa_mask)
    AttentionMaskInterface.register("drift_eager", eager_mask)
    AttentionMaskInterface.register(VALUES_IMPLEMENTATION, eager_mask)
    _registered = True


def set_implementation(model, impl: str) -> None:
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:  # pragma: no cover - older transformers
        model.config._attn_implementation = impl


@contextmanager
def _switched(model, impl: str):
    """``model`` runs the attention implementation ``impl`` inside the ``with`` body, and
    the one it had after."""
    previous = model.config._attn_implementation
    set_implementation(model, impl)
    try:
        yield
    finally:
        set_implementation(model, previous)


@contextmanager
def attention(model, base: str):
    """Run ``model``'s attention on the stock ``base`` implementation (``eager`` or
    ``sdpa``) inside the ``with`` body, through the drift wrappers (so that the model's
    compensation setting still applies), and restore the previous implementation after."""
    previous = model.config._attn_implementation
    install(model)  # keeps the model's compensation setting
    set_implementation(model, IMPLEMENTATIONS[base])
    try:
        yield
    finally:
        set_implementation(model, previous)


@contextmanager
def reading_values(model, callback):
    """Inside the ``with`` body every attention layer hands ``callback(layer, values,
    weights)`` the value states it mixes (``(batch, key/value heads, keys, head size)``,
    before any repetition over query heads) and its attention weights. Needs eager
    attention (``eager`` or ``drift_eager``); anything else stops with one line."""
    require_eager(model, "reading attention value states")
    register_attention()
    blocks = decoder_blocks(model)
    for b in blocks:
        b.attention._drift_values = lambda v, w, i=b.index: callback(i, v, w)
    try:
        with _switched(model, VALUES_IMPLEMENTATION):
            yield
    finally:
        for b in blocks:
            b.attention.__dict__.pop("_drift_values", None)


def install(model, config: CompensationConfig | None = None, base: str | None = None) -> DriftState:
    """Route ``model``'s attention through the drift wrappers; returns the shared state.

    ``config`` replaces the model's compensation setting; ``None`` keeps the one it has
    (``none`` on a model not installed yet), so that measurements that only need the
    wrappers (calibration, rollout inputs) leave a user's setting alone.

    ``base`` is the stock implementation to wrap (``sdpa`` or ``eager``); by default the
    model's current one (eager if it was neither).
    """
    register_attention()
    current = model.config._attn_implementation
    if base is None:
        base = {"drift_sdpa": "sdpa", "drift_eager": "eager"}.get(current, current)
    if base not in IMPLEMENTATIONS:
        base = "eager"
    state = getattr(model, "_drift_state", None)
    if state is None:
        state = DriftState(config or CompensationConfig("none"))

        def _begin_forward(mod, args, kwargs):
            state.begin_forward(kwargs.get("attention_mask"))

        model.register_forward_pre_hook(_begin_forward, with_kwargs=True)
        model._drift_state = state
    if config is not None:
        state.config = config
    for m in attention_modules(model):
        m._drift_state = state
    set_implementation(model, IMPLEMENTATIONS[base])
    return state


def set_base(model, base: str) -> None:
    """Switch the wrapped stock implementation (``sdpa`` or ``eager``)."""
    set_implementation(model, IMPLEMENTATIONS[base])
