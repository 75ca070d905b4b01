"""Where a model's layers are, and one way to read activations out of them.

Every measurement that looks inside a model (α's hidden-state offsets, position-bias
rollout inputs, per-head calibration, decodability) finds the decoder blocks with
``decoder_blocks`` and reads them with ``capture``: forward hooks that hand each layer's
tensors to a callback as the forward pass produces them, so a measurement keeps only what
it reduces them to, and the hooks are removed however the block ends. ``attention``
switches the stock attention a model runs (eager returns attention weights, sdpa does not)
and always switches it back.

The value states each attention layer mixes are not a module's input or output, so
``capture(attention_values=...)`` reads them where transformers hands them to the attention
function (``AttentionInterface``): for the ``with`` body the model runs
``drift_eager_values``, the project's eager wrapper (compensation included) that also
passes the value states and attention weights to the callback.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..errors import DriftUsageError


@dataclass(frozen=True)
class Block:
    """Decoder block ``index``, its module and its self-attention module."""
    index: int
    module: torch.nn.Module
    attention: torch.nn.Module


def decoder_blocks(model) -> list[Block]:
    """The decoder blocks in layer order, each with its self-attention module.

    The self-attention modules are the modules with a ``layer_idx`` whose class name ends in
    ``Attention`` (every transformers decoder family); a block is the attention module's
    parent."""
    names = {m: n for n, m in model.named_modules()}
    attns = sorted((m for m in names if hasattr(m, "layer_idx") and hasattr(m, "config")
                    and type(m).__name__.endswith("Attention")), key=lambda m: m.layer_idx)
    if not attns:
        raise DriftUsageError(f"cannot find the attention layers of {type(model).__name__} "
                              "(no module with a layer_idx whose class name ends in 'Attention')")
    by_name = dict(model.named_modules())
    return [Block(i, by_name[names[a].rsplit(".", 1)[0]], a) for i, a in enumerate(attns)]


def attention_modules(model) -> list:
    """The self-attention modules, in layer order."""
    return [b.attention for b in decoder_blocks(model)]


def output_projection(attention_module) -> torch.nn.Linear:
    """The attention module's output projection (``o_proj``, ``dense``, ``out_proj`` or
    ``c_proj``), which maps the concatenated heads back to the residual stream."""
    for name in ("o_proj", "dense", "out_proj", "c_proj"):
        m = getattr(attention_module, name, None)
        if isinstance(m, torch.nn.Linear):
            return m
    raise DriftUsageError(f"cannot find the output projection of {type(attention_module).__name__} "
                          "(none of o_proj, dense, out_proj, c_proj is a Linear layer)")


VALUES_IMPLEMENTATION = "drift_eager_values"
EAGER = ("eager", "drift_eager")


def require_eager(model, purpose: str) -> None:
    """One line unless ``model`` runs eager attention (the only one that hands out its
    weights), naming ``purpose``."""
    impl = model.config._attn_implementation
    if impl not in EAGER:
        raise DriftUsageError(f"{purpose} needs eager attention (it reads the attention weights and value states), "
                              f"but the model runs '{impl}': load it with attn_implementation='eager' "
                              "(hf-drift: --model_args ...,attention=eager)")


def _eager_with_values(module, query, key, value, attention_mask, **kwargs):
    """``drift_eager`` (stock eager attention plus the model's compensation), then the
    capture callback with the value states and the attention weights."""
    from ..compensation.bias import drift_eager

    out, weights = drift_eager(module, query, key, value, attention_mask, **kwargs)
    callback = getattr(module, "_drift_values", None)
    if callback is not None:
        callback(value, weights)
    return out, weights


def _register_values_implementation() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(VALUES_IMPLEMENTATION, _eager_with_values)
    AttentionMaskInterface.register(VALUES_IMPLEMENTATION, eager_mask)


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


@contextmanager
def capture(model, *, block_input=None, block_output=None, attention_output=None, attention_values=None):
    """Hooks on every decoder block while the ``with`` body runs. Each callback given is
    called as ``fn(layer, ...)`` during the forward pass:

    * ``block_input(layer, x)``: the block's input hidden states (before its norm);
    * ``block_output(layer, h)``: the block's output (the residual stream after it);
    * ``attention_output(layer, out, weights)``: the attention module's output after its
      output projection, and its attention weights (``None`` unless the attention
      implementation returns them, e.g. eager);
    * ``attention_values(layer, values, weights)``: the value states the attention mixes,
      ``(batch, key/value heads, keys, head size)`` as the model computed them (before any
      repetition over query heads), and the attention weights ``(batch, heads, queries,
      keys)``. Needs eager attention (the model's implementation ``eager`` or
      ``drift_eager``); anything else stops with one line.

    Yields the blocks."""
    blocks = decoder_blocks(model)
    handles = []
    previous = None
    if attention_values is not None:
        require_eager(model, "reading attention value states")
        previous = model.config._attn_implementation
        _register_values_implementation()
        from ..compensation import bias
    try:
        if attention_values is not None:
            for b in blocks:
                b.attention._drift_values = lambda v, w, i=b.index: attention_values(i, v, w)
            bias.set_implementation(model, VALUES_IMPLEMENTATION)
        for b in blocks:
            if block_input is not None:
                handles.append(b.module.register_forward_pre_hook(
                    lambda mod, args, kwargs, i=b.index: block_input(i, args[0] if args else kwargs["hidden_states"]),
                    with_kwargs=True))
            if block_output is not None:
                handles.append(b.module.register_forward_hook(
                    lambda mod, args, out, i=b.index: block_output(i, _first(out))))
            if attention_output is not None:
                handles.append(b.attention.register_forward_hook(
                    lambda mod, args, out, i=b.index: attention_output(
                        i, _first(out), out[1] if isinstance(out, (tuple, list)) and len(out) > 1 else None)))
        yield blocks
    finally:
        for h in handles:
            h.remove()
        if previous is not None:
            bias.set_implementation(model, previous)
            for b in blocks:
                b.attention.__dict__.pop("_drift_values", None)


@contextmanager
def attention(model, base: str):
    """Run ``model``'s attention on the stock ``base`` implementation (``eager`` or
    ``sdpa``) inside the ``with`` body, through the drift wrappers (so that the model's
    compensation setting still applies), and restore the previous implementation after."""
    from ..compensation import bias

    previous = model.config._attn_implementation
    bias.install(model)  # keeps the model's compensation setting
    bias.set_base(model, base)
    try:
        yield
    finally:
        bias.set_implementation(model, previous)
