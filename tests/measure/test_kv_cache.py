"""hf-drift's reserved key/value cache against transformers' own DynamicLayer: the same
tensors at every step, written into one buffer instead of a new one per token."""
import torch
from transformers import LlamaConfig, MistralConfig
from transformers.cache_utils import DynamicLayer

from drift_eval.plugin.generation import ReservedLayer, reserved_cache


def _steps(seed=0, batch=2, heads=3, dim=4, prefill=5, decode=9):
    g = torch.Generator().manual_seed(seed)
    sizes = [prefill] + [1] * decode
    return [(torch.randn(batch, heads, n, dim, generator=g), torch.randn(batch, heads, n, dim, generator=g))
            for n in sizes]


def _feed(layer, steps):
    return [tuple(t.clone() for t in layer.update(k, v)) for k, v in steps]


def test_same_keys_and_values_as_the_stock_layer_in_one_buffer():
    steps = _steps()
    stock = _feed(DynamicLayer(), steps)
    layer = ReservedLayer(capacity=14)
    ptrs = set()
    for (k, v), (sk, sv) in zip(steps, stock):
        keys, values = layer.update(k, v)
        assert torch.equal(keys, sk) and torch.equal(values, sv)
        ptrs.add(keys.data_ptr())
    assert len(ptrs) == 1  # filled in place: no tensor allocated after the prefill
    assert layer.get_seq_length() == 14 and layer._k.shape[-2] == 14


def test_outgrowing_the_reservation_doubles_the_buffer():
    steps = _steps(prefill=3, decode=10)
    stock = _feed(DynamicLayer(), steps)
    layer = ReservedLayer(capacity=4)
    caps = []
    for (k, v), (sk, _) in zip(steps, stock):
        keys, _ = layer.update(k, v)
        assert torch.equal(keys, sk)
        caps.append(layer._k.shape[-2])
    assert caps == [4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16]


def test_cropping_then_writing_matches_the_stock_layer():
    steps = _steps()
    stock, layer = DynamicLayer(), ReservedLayer(capacity=20)
    for k, v in steps[:6]:
        stock.update(k, v)
        layer.update(k, v)
    stock.crop(-3)
    layer.crop(-3)
    for k, v in steps[6:]:
        sk, sv = stock.update(k, v)
        keys, values = layer.update(k, v)
        assert torch.equal(keys, sk) and torch.equal(values, sv)


def test_a_reordered_batch_starts_a_new_buffer_from_the_reordered_states():
    steps = _steps(batch=3)
    stock, layer = DynamicLayer(), ReservedLayer(capacity=20)
    for k, v in steps[:4]:
        stock.update(k, v)
        layer.update(k, v)
    order = torch.tensor([2, 0, 1])
    stock.reorder_cache(order)
    layer.reorder_cache(order)
    old = layer._k
    for k, v in steps[4:]:
        sk, sv = stock.update(k, v)
        keys, values = layer.update(k, v)
        assert torch.equal(keys, sk) and torch.equal(values, sv)
    assert layer._k is not old and layer._k.shape[-2] == 20


def test_reserved_cache_replaces_only_full_attention_layers():
    full = reserved_cache(LlamaConfig(num_hidden_layers=3), 64)
    assert [type(x).__name__ for x in full.layers] == ["ReservedLayer"] * 3
    sliding = reserved_cache(MistralConfig(num_hidden_layers=2, sliding_window=16), 64)
    assert [type(x).__name__ for x in sliding.layers] == ["DynamicSlidingWindowLayer"] * 2


def test_a_batch_sliced_to_fewer_rows_is_not_taken_for_the_buffer():
    """A view that starts at the buffer but holds fewer rows (same data pointer) must not be
    written through the full buffer: the next update starts a new one from it."""
    steps = _steps(batch=3)
    stock, layer = DynamicLayer(), ReservedLayer(capacity=20)
    for k, v in steps[:4]:
        stock.update(k, v)
        layer.update(k, v)
    stock.keys, stock.values = stock.keys[:2], stock.values[:2]
    layer.keys, layer.values = layer.keys[:2], layer.values[:2]
    for k, v in steps[4:]:
        sk, sv = stock.update(k[:2], v[:2])
        keys, values = layer.update(k[:2], v[:2])
        assert torch.equal(keys, sk) and torch.equal(values, sv)
    assert layer._k.shape[0] == 2
