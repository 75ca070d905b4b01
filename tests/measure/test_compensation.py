import math

import pytest
import torch

from support.models import FAMILIES, forward_sums, rounding

from drift_eval.compensation import bias as comp
from drift_eval.settings import CompensationConfig
from drift_eval.errors import DriftUsageError


def _state(mode, strength, span_end, positions, prompt_len=None, gen_len=None):
    st = comp.DriftState(CompensationConfig(mode, strength))
    st.set_rows(span_end, prompt_len, gen_len)
    st.begin_forward(positions)
    return st


def test_log_bias_values_for_known_positions():
    # one row, no padding, 12 tokens, span end P = 4, queries 0..11 against keys 0..11
    st = _state("log", 0.5, [4], torch.ones(1, 12, dtype=torch.long))
    b = comp.bias_for(st, 12, 12, torch.float64, "cpu")[0, 0]
    for q in range(12):
        for k in range(12):
            want = 0.5 * math.log((q + 1) / 4) if (q >= 4 and 1 <= k < 4) else 0.0
            assert b[q, k].item() == pytest.approx(want, abs=1e-6), (q, k)  # float32 maths
    assert b[4, 1].item() == pytest.approx(0.5 * math.log(5 / 4))
    assert b[:, 0].abs().max() == 0  # token 0 (the sink) is exempt


def test_positions_are_computed_only_when_something_is_biased():
    mask = torch.tensor([[0, 1, 1, 1]])
    assert _state("none", 0.0, [2], mask).positions is None  # stock attention pays nothing
    idle = comp.DriftState(CompensationConfig("log", 1.0))
    idle.begin_forward(mask)  # installed, but no rows set
    assert idle.positions is None
    assert _state("log", 1.0, [2], mask).positions.tolist() == [[-1, 0, 1, 2]]


def test_bias_follows_logical_positions_under_left_padding_and_cache():
    # row 0 has 3 pads; a decode step: 1 query, 10 keys; logical q = 9 - 3 = 6
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1, 1], [1] * 10])
    st = _state("log", 1.0, [3, 3], mask)
    b = comp.bias_for(st, 1, 10, torch.float64, "cpu")[:, 0, 0]
    assert b[0, :4].abs().max() == 0  # pads and the sink
    assert b[0, 4:6].tolist() == pytest.approx([math.log(7 / 3)] * 2)
    assert b[0, 6:].abs().max() == 0
    assert b[1, 1:3].tolist() == pytest.approx([math.log(10 / 3)] * 2)


def test_const_level_equals_mean_of_log_bias_over_generation():
    P, L, G = 37, 120, 2048
    brute = sum(math.log((q + 1) / P) for q in range(L, L + G)) / G
    assert comp.const_level(P, L, G).item() == pytest.approx(brute, rel=1e-10)
    st = _state("const", 0.25, [P], torch.ones(1, L + 5, dtype=torch.long), [L], [G])
    b = comp.bias_for(st, 1, L + 5, torch.float64, "cpu")[0, 0, 0]
    assert b[1].item() == pytest.approx(0.25 * brute)
    assert b[P].item() == 0.0


def test_head_mode_scales_each_head(tiny_model):
    model = tiny_model("llama")
    state = comp.install(model, CompensationConfig("head", 2.0))
    state.head_gammas = torch.tensor([[0.0, 0.5, 1.0, 1.5], [1.0, 1.0, 1.0, 1.0]])
    state.set_rows([3])
    state.begin_forward(torch.ones(1, 8, dtype=torch.long))
    q = torch.zeros(1, 4, 1, 8)
    k = torch.zeros(1, 4, 8, 8)
    m = state.mask_for(0, None, q, k)[0, :, 0]  # (heads, keys) for query 7
    want = 2.0 * math.log(8 / 3)
    assert m[:, 1].tolist() == pytest.approx([0.0, 0.5 * want, want, 1.5 * want])


@pytest.mark.parametrize("bad", [
    dict(mode="bogus"), dict(strength=-1), dict(strength="x"), dict(strength=float("nan")), dict(span="user"),
])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(DriftUsageError) as err:
        CompensationConfig.parse(**bad)
    assert "\n" not in str(err.value) and str(err.value)


def _batch():
    ids = torch.randint(3, 128, (2, 20), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, :5] = 0  # left padding
    return ids, mask


@pytest.mark.parametrize("family", FAMILIES)
def test_strength_zero_equals_stock_attention(tiny_model, family):
    ids, mask = _batch()
    model = tiny_model(family)
    with torch.no_grad():
        stock = model(input_ids=ids, attention_mask=mask).logits
    state = comp.install(model, CompensationConfig("log", 0.0))
    state.set_rows([6, 6])
    with torch.no_grad():
        zero = model(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    # an inactive setting hands the stock attention call its own inputs: the same logits, bit for bit
    assert torch.equal(zero[real], stock[real])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("mode", ["log", "const", "head"])
def test_cached_generation_equals_full_recompute(tiny_model, family, mode):
    ids, mask = _batch()
    model = tiny_model(family, layers=2)
    state = comp.install(model, CompensationConfig(mode, 1.0))
    state.head_gammas = torch.linspace(0.2, 1.8, 8).reshape(2, 4)
    prompt_len = mask.sum(1)
    state.set_rows([6, 6], prompt_len, 16)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=16, min_new_tokens=16,
                             do_sample=False, output_logits=True, return_dict_in_generate=True,
                             pad_token_id=0)
    cached = torch.stack(out.logits, 1)  # (B, 16, V)
    full_mask = torch.cat([mask, torch.ones(2, 16, dtype=torch.long)], 1)
    with torch.no_grad():
        full = model(input_ids=out.sequences, attention_mask=full_mask).logits[:, 19:-1]
    # float32 rounding of a forward over the 36 keys, at the logits' magnitude, and no more
    tol = rounding(torch.float32, forward_sums(model, out.sequences.shape[1]), full.abs().max().item())
    assert (cached - full).abs().max().item() <= tol
    # and the bias did something: more than rounding could
    state.config = CompensationConfig("none")
    with torch.no_grad():
        plain = model(input_ids=out.sequences, attention_mask=full_mask).logits[:, 19:-1]
    assert (plain - full).abs().max().item() > tol


@pytest.mark.parametrize("family", FAMILIES)
def test_eager_and_sdpa_agree_under_bias(tiny_model, family):
    ids, mask = _batch()
    results = []
    for attn in ("sdpa", "eager"):
        model = tiny_model(family, attn=attn)
        state = comp.install(model, CompensationConfig("log", 1.0), base=attn)
        state.set_rows([6, 6])
        with torch.no_grad():
            results.append(model(input_ids=ids, attention_mask=mask).logits)
    real = mask.bool()
    tol = rounding(torch.float32, forward_sums(model, ids.shape[1]), results[1][real].abs().max().item())
    assert (results[0] - results[1])[real].abs().max().item() <= tol  # float32 rounding of the forward


def test_first_layer_weights_are_reweighted_by_exp_bias(tiny_model):
    """Independent check on real attention weights: in layer 0 queries and keys do not
    depend on the bias, so biased / stock weights must be exp(bias) up to a row constant,
    within float32 rounding: each entry reads four weights (biased and stock, at the key and
    at the sink), each a softmax over the keys of logits summed over the hidden size, at the
    log-weights' magnitude."""
    ids = torch.randint(3, 128, (1, 16), generator=torch.Generator().manual_seed(2))
    model = tiny_model("llama", attn="eager")
    with torch.no_grad():
        stock = model(input_ids=ids, output_attentions=True).attentions[0][0]
    state = comp.install(model, CompensationConfig("log", 1.5), base="eager")
    state.set_rows([5])
    with torch.no_grad():
        biased = model(input_ids=ids, output_attentions=True).attentions[0][0]
    q = 12
    ratio = (biased[:, q, : q + 1] / stock[:, q, : q + 1]).log()  # (heads, keys)
    rel = ratio - ratio[:, :1]  # relative to the sink
    want = torch.zeros(q + 1)
    want[1:5] = 1.5 * math.log((q + 1) / 5)
    tol = rounding(torch.float32, 4 * (q + 1 + model.config.hidden_size), stock[:, q, : q + 1].log().abs().max().item())
    assert (rel - want).abs().max().item() <= tol
