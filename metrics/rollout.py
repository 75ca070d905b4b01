"""Residual-aware attention rollout and influence-profile comparison (positional bias).

Pure NumPy/SciPy maths for the positional-bias metric:

* ``transition(A, lam) = (1 - lam) I + lam A`` for a row-stochastic causal kernel ``A``;
* ``rollout(kernels, lambdas) = R_T ... R_1`` (``R_1`` applied first);
* ``influence_profile(P)``: the last row of ``P``, renormalised to sum 1;
* ``attention_only`` (every ``lam = 1``) and ``abnar_zuidema`` (every ``lam = 0.5``, the
  ``0.5 I + 0.5 A`` rollout) as the two reference rollouts;
* ``alibi_kernel``: the head-averaged causal kernel ``softmax_j(-slope * (i - j))`` that an
  architecture-only ALiBi model has before content (used for published reference figures);
* ``compare``: Wasserstein distance between two profiles over positions, divided by
  ``n - 1`` so that it lies in [0, 1], and Spearman correlation; with or without
  position 0.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def uniform_causal_kernel(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]


def alibi_kernel(n: int, slopes: Sequence[float]) -> np.ndarray:
    """Head-averaged causal ALiBi kernel with no content term."""
    dist = np.subtract.outer(np.arange(n), np.arange(n)).astype(float)  # i - j
    causal = dist >= 0
    total = np.zeros((n, n))
    for s in slopes:
        logits = np.where(causal, -s * dist, -np.inf)
        w = np.exp(logits - logits.max(axis=1, keepdims=True))
        total += w / w.sum(axis=1, keepdims=True)
    return total / len(slopes)


def transition(kernel: np.ndarray, lam: float) -> np.ndarray:
    return (1.0 - lam) * np.eye(kernel.shape[0]) + lam * kernel


def rollout(kernels, lambdas: Sequence[float]) -> np.ndarray:
    """``P = R_T ... R_1``; ``kernels`` is one (n, n) kernel shared by all layers or a
    sequence of per-layer kernels."""
    lambdas = list(lambdas)
    per_layer = isinstance(kernels, (list, tuple)) or np.ndim(kernels) == 3
    n = (kernels[0] if per_layer else kernels).shape[0]
    P = np.eye(n)
    for t, lam in enumerate(lambdas):
        P = transition(kernels[t] if per_layer else kernels, lam) @ P
    return P


def attention_only(kernels, depth: int) -> np.ndarray:
    return rollout(kernels, [1.0] * depth)


def abnar_zuidema(kernels, depth: int) -> np.ndarray:
    """Abnar & Zuidema's rollout: the product of ``0.5 I + 0.5 A`` over layers."""
    per_layer = isinstance(kernels, (list, tuple)) or np.ndim(kernels) == 3
    n = (kernels[0] if per_layer else kernels).shape[0]
    P = np.eye(n)
    for t in range(depth):
        A = kernels[t] if per_layer else kernels
        P = (0.5 * np.eye(n) + 0.5 * A) @ P
    return P


def influence_profile(P: np.ndarray) -> np.ndarray:
    row = np.asarray(P)[-1].astype(float)
    return row / row.sum()


def compare(p: np.ndarray, q: np.ndarray, skip_first: bool = False) -> dict:
    """Wasserstein distance / (n - 1) and Spearman correlation of two profiles."""
    from scipy.stats import spearmanr, wasserstein_distance  # deferred, start-up: loads scipy

    p, q = np.asarray(p, float), np.asarray(q, float)
    if skip_first:
        p, q = p[1:], q[1:]
    p, q = p / p.sum(), q / q.sum()
    n = len(p)
    pos = np.arange(n)
    w = wasserstein_distance(pos, pos, p, q) / (n - 1) if n > 1 else 0.0
    rho = spearmanr(p, q).statistic if n > 2 else float("nan")
    return {"wasserstein": float(w), "spearman": float(rho)}
