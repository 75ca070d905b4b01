"""Rollout maths on cases with known answers, and the published BLOOM figures."""
import json
import os

import numpy as np
import pytest

from support.places import DATA

from drift_eval.metrics import rollout as ro

DATA = os.path.join(DATA, "rollout_bloom_no_content.json")


def _random_kernels(n, depth, seed=0):
    rng = np.random.default_rng(seed)
    ks = []
    for _ in range(depth):
        a = np.tril(rng.random((n, n)))
        ks.append(a / a.sum(axis=1, keepdims=True))
    return ks


def test_half_lambda_is_abnar_zuidema_exactly():
    ks = _random_kernels(12, 6)
    assert np.array_equal(ro.rollout(ks, [0.5] * 6), ro.abnar_zuidema(ks, 6))


def test_rows_of_the_rollout_sum_to_one():
    ks = _random_kernels(20, 8, seed=1)
    P = ro.rollout(ks, np.linspace(0.1, 0.9, 8))
    assert np.abs(P.sum(axis=1) - 1).max() < 1e-10


def test_attention_only_rollout_of_uniform_kernel_collapses_to_the_first_token():
    A = ro.uniform_causal_kernel(64)
    p = ro.influence_profile(ro.attention_only(A, 16))
    assert p[0] >= 0.999


def test_published_bloom_architecture_only_profile():
    cfg = json.load(open(DATA))
    n = cfg["sequence_length"]
    A = ro.alibi_kernel(n, cfg["alibi_slopes"])
    assert np.allclose(A.sum(axis=1), 1) and np.allclose(np.triu(A, 1), 0)
    p = ro.influence_profile(ro.rollout(A, cfg["lambdas"]))
    assert p[0] == pytest.approx(0.0203, abs=1e-4)
    assert p[n - 1] == pytest.approx(0.0252, abs=1e-4)
    assert int(np.argmin(p)) == 61
    assert p.min() == pytest.approx(0.00253, abs=1e-5)
    attn_only = ro.influence_profile(ro.attention_only(A, cfg["num_layers"]))
    assert attn_only[0] == pytest.approx(1.0, abs=5e-4)


def test_profile_comparison_known_answers():
    p = np.array([1.0, 0, 0, 0, 0])
    q = np.array([0, 0, 0, 0, 1.0])
    assert ro.compare(p, q)["wasserstein"] == pytest.approx(1.0)
    assert ro.compare(p, p)["wasserstein"] == 0.0
    r = np.array([0.1, 0.2, 0.3, 0.4])
    assert ro.compare(r, r * 2)["spearman"] == pytest.approx(1.0)
    assert ro.compare(r, r[::-1])["spearman"] == pytest.approx(-1.0)
    s = ro.compare(np.array([0.9, 0.05, 0.05]), np.array([0.1, 0.45, 0.45]), skip_first=True)
    assert s["wasserstein"] == pytest.approx(0.0)
