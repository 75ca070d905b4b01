"""Where a transformers decoder keeps its parts: blocks, attention modules, output
projections, and which attention implementation hands out its weights.

Everything that looks inside a model (the compensation bias, activation capture, α's
offsets and their decomposition, per-head calibration) finds the model's parts here, so
that a new model family is taught to the project in one place.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from drift_eval.errors import DriftUsageError

#: the attention implementations that return attention weights (the stock one and the
#: project's wrapper of it, ``drift_eval.compensation.bias``)
EAGER = ("eager", "drift_eager")


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


def require_eager(model, purpose: str) -> None:
    """One line unless ``model`` runs eager attention (the only one that hands out its
    weights), naming ``purpose``."""
    impl = model.config._attn_implementation
    if impl not in EAGER:
        raise DriftUsageError(f"{purpose} needs eager attention (it reads the attention weights and value states), "
                              f"but the model runs '{impl}': load it with attn_implementation='eager' "
                              "(hf-drift: --model_args ...,attention=eager)")
