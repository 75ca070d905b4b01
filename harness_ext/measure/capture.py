"""One way to read activations out of a model: ``capture``.

Every measurement that looks inside a model (α's hidden-state offsets, position-bias
rollout inputs, per-head calibration, decodability) finds the decoder blocks with
``drift_eval.anatomy`` and reads them with ``capture``: forward hooks that hand each
layer's tensors to a callback as the forward pass produces them, so a measurement keeps
only what it reduces them to, and the hooks are removed however the block ends.

The value states each attention layer mixes are not a module's input or output, so
``capture(attention_values=...)`` reads them where transformers hands them to the attention
function, through ``drift_eval.compensation.bias.reading_values`` (the project's eager
wrapper, compensation included, which also passes the value states and attention weights
on). Switching a model's attention implementation (``bias.attention``) lives there too.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager

from drift_eval.anatomy import decoder_blocks
from drift_eval.compensation import bias


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
    with ExitStack() as stack:
        if attention_values is not None:
            stack.enter_context(bias.reading_values(model, attention_values))
        try:
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
