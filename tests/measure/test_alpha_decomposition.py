"""The direct / relay decomposition of α: the exact identity on tiny models, the streamed
cross signals, the rebuild maths on known power laws, and its errors."""
import numpy as np
import pytest
import torch

from drift_eval.anatomy import decoder_blocks, output_projection
from drift_eval.errors import DriftUsageError
from drift_eval.measure import alpha, continuations
from drift_eval.measure.capture import capture
from drift_eval.metrics import alpha as am

from drift_eval.tasks.drift_alpha import utils
from support.models import CONTS, SCENE, TOK


def _terms_of_one_forward(model, ids, T):
    """The decomposition terms of every layer at every continuation position, with the
    attention and MLP module outputs captured independently."""
    blocks = decoder_blocks(model)
    parts = alpha._Parts(blocks)
    width = ids.shape[1]
    parts.cols = torch.arange(width - T, width)
    parts.first_key = width - T
    outs, mlps, attn = [None] * len(blocks), [None] * len(blocks), [None] * len(blocks)
    hooks = [b.module.mlp.register_forward_hook(lambda m, a, o, i=b.index: mlps.__setitem__(i, o[:, -T:]))
             for b in blocks]

    def attention_output(i, out, w):
        attn[i] = out[:, -T:]
        parts.attention_output(i, out, w)

    with capture(model, block_output=lambda i, h: outs.__setitem__(i, h[:, -T:]), block_input=parts.block_input,
                 attention_output=attention_output, attention_values=parts.attention_values), torch.no_grad():
        model(input_ids=ids)
    for h in hooks:
        h.remove()
    out = torch.stack(outs, 1)
    return parts.terms(out.float()), out, torch.stack(attn, 1), torch.stack(mlps, 1), blocks


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt_neox"])
def test_direct_relay_residual_and_mlp_add_up_to_the_offset(tiny_model, family):
    """Per layer and continuation position: direct + relay + the output projection's bias
    is the attention output; the rest term is the MLP's output (families whose block adds
    both into the residual stream); and for the offset between two prompts,
    Δresidual + Δdirect + Δrelay + Δmlp = Δ(block output). The model runs in float64 and the
    parts are computed in float32, so each check allows float32 rounding of a sum over the
    keys and the hidden size at the magnitude of what it compares
    (``alpha.identity_tolerance``), and no more."""
    model = tiny_model(family, attn="eager", layers=3).double()
    cont = continuations.continuation_ids(TOK, CONTS[:1], 40)[0][0]
    T = len(cont)
    d = model.config.hidden_size
    got = {}
    for name in ("base", "detail"):
        ids = torch.tensor([continuations.prompt_ids(TOK, SCENE[name]) + cont])
        n = ids.shape[1] + d  # the keys, then the hidden size, each summed over
        terms, out, attn, mlp, blocks = _terms_of_one_forward(model, ids, T)
        terms = terms.double()
        bias = torch.stack([output_projection(b.attention).bias if output_projection(b.attention).bias is not None
                            else torch.zeros(d, dtype=torch.float64) for b in blocks])
        rebuilt = terms[:, :, 1] + terms[:, :, 2] + bias[None, :, None]
        tol = alpha.identity_tolerance(torch.float32, n, float(attn.abs().max()))
        assert (rebuilt - attn.double()).abs().max() <= tol
        assert (terms[:, :, 3] - mlp.double()).abs().max() <= alpha.identity_tolerance(
            torch.float32, n, float(max(out.abs().max(), mlp.abs().max())))
        got[name] = (terms, out, n)
    d_terms = got["detail"][0] - got["base"][0]
    d_out = (got["detail"][1] - got["base"][1]).double()
    assert d_out.abs().max() > 1e-3  # the prompts do differ
    scale = float(max(got[k][1].abs().max() for k in got))  # each side's rounding is at the outputs' magnitude
    assert (d_terms.sum(2) - d_out).abs().max() <= 2 * alpha.identity_tolerance(torch.float32, got["base"][2], scale)
    # the first block's input is the same token embedding in both runs: no residual offset
    assert d_terms[0, 0, 0].abs().max() == 0


def test_a_block_of_another_structure_stops_the_decomposition_with_one_line(tiny_model):
    """An attention module whose output is not its output projection's (here: scaled after
    it, as a family with a gate or a norm there would be): the first batch's check names
    the family and the gap instead of streaming wrong parts."""
    model = tiny_model("llama", attn="eager", layers=2)
    handle = decoder_blocks(model)[1].attention.register_forward_hook(
        lambda mod, args, out: (out[0] * 1.5, *out[1:]))
    cont_ids, T = continuations.continuation_ids(TOK, CONTS, 40)
    try:
        with pytest.raises(DriftUsageError, match=r"does not add up for the model family 'llama': at layer 1 the "
                                                  r"parts differ from the attention output by [0-9.e-]+, where "
                                                  r"float32 rounding allows"):
            alpha.scene_offsets(model, TOK, SCENE["base"], {"detail": SCENE["detail"]}, cont_ids,
                                am.octave_windows(T), alpha.Settings(decompose=True))
    finally:
        handle.remove()
    assert model.config._attn_implementation == "eager"  # capture switched it back after the stop


def test_the_identity_tolerance_follows_the_coarser_of_the_dtypes():
    eps32 = torch.finfo(torch.float32).eps
    assert alpha.identity_tolerance(torch.float64, 100, 2.0) == pytest.approx(eps32 * 200)  # parts are float32
    assert alpha.identity_tolerance(torch.bfloat16, 100, 2.0) == pytest.approx(torch.finfo(torch.bfloat16).eps * 200)


def test_streamed_cross_signals_add_up_to_the_measured_signal(tiny_model):
    model = tiny_model("llama", attn="eager", layers=3)
    cont_ids, T = continuations.continuation_ids(TOK, CONTS, 71)
    windows = am.octave_windows(T)
    variants = {"detail": SCENE["detail"], "translation": SCENE["translation"]}
    got = alpha.scene_offsets(model, TOK, SCENE["base"], variants, cont_ids, windows,
                              alpha.Settings(batch_size=4, decompose=True))
    plain = alpha.scene_offsets(model, TOK, SCENE["base"], variants, cont_ids, windows, alpha.Settings(batch_size=4))
    for axis in variants:
        assert got[axis]["signal"] == plain[axis]["signal"]  # α itself is unchanged
        parts = np.array(got[axis]["parts"]["signal"])  # (4, 4, layers, windows)
        assert parts.shape == (4, 4, 3, 3) and np.allclose(parts, parts.transpose(1, 0, 2, 3))
        S = np.array(got[axis]["signal"])
        assert np.allclose(parts.sum((0, 1)), S, rtol=1e-4, atol=1e-6 * np.abs(S).max())
    assert model.config._attn_implementation == "eager"  # capture switched it back


def test_rebuild_is_exact_for_power_law_terms_at_fixed_angles():
    centres = [15.5, 31.5, 63.5, 127.5, 255.5]
    t = np.array(centres)
    # signals amplitude · t^(−2α): α = 0.4, 0.7, 0.1, 0.5
    amp = {"residual": 2.0 * t ** -0.8, "direct": 0.5 * t ** -1.4, "relay": 0.3 * t ** -0.2, "mlp": 1.0 * t ** -1.0}
    names = list(amp)
    cos = np.array([[1, 0.3, 0.1, -0.4], [0.3, 1, 0.0, 0.2], [0.1, 0.0, 1, 0.05], [-0.4, 0.2, 0.05, 1]])
    P, L = len(names), 2
    parts = np.zeros((P, P, L, len(t)))
    for p in range(P):
        for q in range(P):
            parts[p, q] = cos[p, q] * np.sqrt(amp[names[p]] * amp[names[q]])
    S = parts.sum((0, 1))
    scenes = np.stack([parts, parts * 1.05, parts * 0.95])
    res = am.decomposition(scenes, scenes.sum((1, 2)), centres, names, iters=50)
    assert res["alpha"]["direct"] == pytest.approx([0.7, 0.7]) and res["alpha"]["relay"] == pytest.approx([0.1, 0.1])
    assert res["cosines"]["residual,mlp"] == pytest.approx([-0.4, -0.4])
    assert res["difference"] == pytest.approx([0.0, 0.0], abs=1e-9)
    assert res["alpha_measured"][0] == pytest.approx(am.power_law_fit(centres, S)[0][0])
    assert res["closure"] < 1e-12
    share = (0.3 * t ** -0.2) / (0.3 * t ** -0.2 + 0.5 * t ** -1.4)
    assert res["relay_share"][0] == pytest.approx(share.mean())
    assert res["medians"]["alpha_direct"] == pytest.approx(0.7)
    # a term whose signal is never positive has no fit and drops out of the rebuild
    parts[2, 2] = -1e-9
    res = am.decomposition(parts[None], parts.sum((0, 1))[None], centres, names, iters=0)
    assert res["alpha"]["relay"] == [None, None] and res["difference"][0] is not None


def test_power_law_curve_reproduces_an_exact_power_law():
    centres = [16, 32, 64, 128]
    v = 3.0 * np.array(centres, dtype=float) ** -1.2
    assert np.allclose(am.power_law_curve(centres, v), v)
    assert np.isnan(am.power_law_curve(centres, [1.0, -1.0, -1.0, 1.0])).all()


def test_the_decomposition_needs_eager_attention(tiny_model):
    model = tiny_model("llama", attn="sdpa")
    cont_ids, T = continuations.continuation_ids(TOK, CONTS, 71)
    with pytest.raises(DriftUsageError, match="needs eager attention.*attention=eager") as e:
        alpha.scene_offsets(model, TOK, SCENE["base"], {"detail": SCENE["detail"]}, cont_ids,
                            am.octave_windows(T), alpha.Settings(decompose=True))
    assert "\n" not in str(e.value)
    with pytest.raises(DriftUsageError, match="needs eager attention"):
        with capture(model, attention_values=lambda i, v, w: None):
            pass
    assert model.config._attn_implementation == "sdpa"


def test_output_projection_is_found_or_named(tiny_model):
    class Attention(torch.nn.Module):
        pass

    with pytest.raises(DriftUsageError, match="output projection of Attention"):
        output_projection(Attention())
    for family in ("llama", "gpt_neox", "gemma3_text"):
        blocks = decoder_blocks(tiny_model(family))
        assert output_projection(blocks[0].attention).out_features == 32


def test_the_task_option_is_checked():
    with pytest.raises(DriftUsageError, match="decompose must be true or false"):
        utils.load_axis("detail", num_scenes=2, decompose="maybe")
    assert len(utils.load_axis("detail", num_scenes=2, decompose="true")["test"]) == 2
