"""The parts of the conversation cache (``plugin.generation.ConversationStore``, ``plugin.carry``):
the exact-prefix check, the recording sliding-window layer, which layers can be carried,
bytes per token, and the setting checked before a model loads."""
import pytest
import torch
from transformers import LlamaConfig, MistralConfig
from transformers.cache_utils import DynamicSlidingWindowLayer

from drift_eval.errors import DriftUsageError
from drift_eval.plugin.generation import (Held, RecordingSlidingLayer, bytes_per_token, carried_cache,
                                         exact_prefix, kept_states)
from drift_eval.plugin.model import HFDriftLM
from drift_eval.settings import conversation_cache_setting


def _held(tokens, prompt_len, span_end=0):
    return Held(torch.tensor(tokens), prompt_len, span_end, [])


@pytest.mark.parametrize("held, new, span_end, mode, want", [
    (_held([1, 2, 3, 4, 5], 3), [1, 2, 3, 4, 9, 9], 0, "none", (4, True)),       # up to where they part
    (_held([1, 2, 3, 4, 5], 3), [1, 2, 3, 4, 5], 0, "none", (4, True)),          # one position left to prefill
    (_held([1, 2, 3, 4, 5], 3), [1, 7, 3, 4, 5, 6], 0, "none", (0, False)),      # the earlier prompt rewritten
    (_held([1, 2, 3, 4, 5, 6, 7], 4, 3), [1, 2, 3, 4, 5, 6, 7, 8], 3, "log", (7, True)),   # same span end: all
    (_held([1, 2, 3, 4, 5, 6, 7], 4, 3), [1, 2, 3, 4, 5, 6, 7, 8], 3, "head", (7, True)),
    (_held([1, 2, 3, 4, 5, 6, 7], 4, 3), [1, 2, 3, 4, 5, 6, 7, 8], 3, "const", (3, True)),  # level moves with L
    (_held([1, 2, 3, 4, 5, 6, 7], 4, 4), [1, 2, 3, 4, 5, 6, 7, 8], 8, "log", (4, True)),    # span=prompt
    # a reasoning model's template drops the trace (50 51 52) from the history: the earlier
    # prompt is intact and carried, the rest re-encoded
    (_held([1, 2, 3, 50, 51, 52, 4, 5], 3), [1, 2, 3, 4, 5, 6], 0, "none", (3, True)),
])
def test_exact_prefix(held, new, span_end, mode, want):
    assert exact_prefix(held, torch.tensor(new), span_end, mode) == want


def test_the_recording_sliding_layer_attends_as_the_stock_one_and_keeps_everything():
    g = torch.Generator().manual_seed(0)
    steps = [(torch.randn(2, 2, n, 4, generator=g), torch.randn(2, 2, n, 4, generator=g)) for n in [5, 1, 1, 1, 1]]
    stock, layer = DynamicSlidingWindowLayer(sliding_window=4), RecordingSlidingLayer(4, capacity=9)
    for k, v in steps:
        sk, sv = stock.update(k, v)
        lk, lv = layer.update(k, v)
        assert torch.equal(lk, sk) and torch.equal(lv, sv)
        assert layer.get_mask_sizes(1) == stock.get_mask_sizes(1)
    assert torch.equal(layer.record.keys, torch.cat([k for k, _ in steps], -2))


def test_only_full_and_sliding_layers_are_carried():
    assert [type(x).__name__ for x in carried_cache(LlamaConfig(num_hidden_layers=2), 8).layers] == ["ReservedLayer"] * 2
    sliding = carried_cache(MistralConfig(num_hidden_layers=2, sliding_window=16), 8)
    assert [type(x).__name__ for x in sliding.layers] == ["RecordingSlidingLayer"] * 2
    assert kept_states(sliding) == [(None, None)] * 2


def test_bytes_per_token_from_the_layer_head_and_size_counts():
    smollm2 = LlamaConfig(num_hidden_layers=30, hidden_size=576, num_attention_heads=9, num_key_value_heads=3)
    assert bytes_per_token(smollm2, torch.float32) == 2 * 30 * 3 * 64 * 4 == 46080
    llama2_7b = LlamaConfig(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=32)
    assert bytes_per_token(llama2_7b, torch.float16) == 2 * 32 * 32 * 128 * 2 == 524288
    mistral_7b = MistralConfig(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8)
    assert bytes_per_token(mistral_7b, torch.bfloat16) == 131072


def test_the_setting_is_checked():
    assert conversation_cache_setting() == ("off", 8192)
    assert conversation_cache_setting("AUTO", "512") == ("auto", 512)
    assert conversation_cache_setting(True)[0] == "on" and conversation_cache_setting(False)[0] == "off"
    for bad in ("yes", "", None, 2):
        with pytest.raises(DriftUsageError, match="conversation_cache"):
            conversation_cache_setting(bad)
    for bad in (0, "-1", "big", 1.5, True):
        with pytest.raises(DriftUsageError, match="conversation_cache_mb"):
            conversation_cache_setting("on", bad)


def test_a_bad_setting_stops_before_the_model_loads():
    with pytest.raises(DriftUsageError, match="unknown conversation_cache 'sometimes'"):
        HFDriftLM(pretrained="/nonexistent/model", conversation_cache="sometimes")
