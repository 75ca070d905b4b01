"""Measured rollout inputs and gradient attribution on the real SmolLM2-135M-Instruct."""
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from support.models import rounding

from drift_eval.files import prose_text
from drift_eval.measure.position_bias import measure
from drift_eval.metrics import rollout as ro


@pytest.fixture(scope="module")
def measured(smollm2_dir):
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    ids = tok(prose_text(), return_tensors="pt")["input_ids"][0]
    seqs = torch.stack([ids[i * 64 : (i + 1) * 64] for i in range(8)])
    out = measure(model, seqs)
    out["attn_impl_after"] = model.config._attn_implementation
    return out


@pytest.mark.slow
def test_measured_inputs_are_well_formed(measured):
    lam, A = measured["lambdas"], measured["kernels"]
    assert A.shape == (30, 64, 64) and lam.shape == (30,)
    assert np.all((lam > 0) & (lam < 1))
    assert np.allclose(A.sum(axis=-1), 1, atol=1e-4) and np.allclose(np.triu(A, 1), 0, atol=1e-6)
    g = measured["gradient_profile"]  # norms over their sum, in their dtype (float32): two sums over the positions
    assert abs(float(g.sum()) - 1) <= rounding(g.dtype, 2 * len(g), 1.0)
    assert measured["attn_impl_after"] != "drift_eager"  # restored


@pytest.mark.slow
def test_residual_aware_rollout_is_closer_to_gradients_than_attention_only(measured):
    ks, lam, g = list(measured["kernels"]), measured["lambdas"], measured["gradient_profile"]
    residual = ro.influence_profile(ro.rollout(ks, lam))
    attn_only = ro.influence_profile(ro.attention_only(ks, len(lam)))
    for skip in (False, True):
        assert ro.compare(residual, g, skip)["wasserstein"] < ro.compare(attn_only, g, skip)["wasserstein"]


def test_works_on_other_families(tiny_model):
    for family in ("qwen2", "gpt_neox"):
        out = measure(tiny_model(family), torch.randint(3, 128, (2, 12)))
        assert out["kernels"].shape == (2, 12, 12) and out["lambdas"].shape == (2,)


@pytest.mark.slow
def test_cli_prints_json_profiles_and_rejects_short_text(tmp_path):
    cli = [sys.executable, "-m", "drift_eval.cli", "position-bias"]
    r = subprocess.run(cli + ["--length", "32", "--sequences", "2", "--threads", "1", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert set(res["profiles"]) == {"residual_aware", "attention_only", "abnar_zuidema"}
    assert len(res["gradient"]) == 32 and len(res["profiles"]["residual_aware"]) == 32
    short = tmp_path / "short.txt"
    short.write_text("Only a few words here.")
    r = subprocess.run(cli + ["--text", str(short)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("drift-eval: error: the text has")
