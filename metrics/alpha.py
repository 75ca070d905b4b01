"""Prompt forgetting: the hidden-state exponent α (pure maths, numpy only).

Two prompts x, x' are each followed by the same continuation c. At layer l and
continuation position t (t = 1 is the first continuation token) the offset is
``Δ_l(t; c) = h_l(x'∘c, t) − h_l(x∘c, t)``. Over K continuations, with every coordinate j
divided by its scale σ_{l,j} (from the runs of x):

* signal ``S_l(t)``: the squared mean offset, by the unbiased pair estimator
  ``mean over c ≠ c' of <Δ(c), Δ(c')>`` = ``(|Σ_c Δ|² − Σ_c |Δ|²) / (K (K − 1))``;
* noise ``N_l(t)``: the (unbiased) variance of the offset across continuations.

Both are reported per coordinate (the sum over j divided by the width d) and averaged
over 16-token windows at octave spacing, each labelled by its centre. Fitting
``S ∝ t^(−2α)`` and ``N ∝ t^(−2β)`` by least squares in log-log gives α and β.

The sufficient statistics are ``Σ_c Δ`` and ``Σ_c Δ²`` per coordinate, so memory does not
grow with the number of continuations.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Window:
    start: int  # first t (1-based), inclusive
    stop: int  # last t + 1
    centre: float  # mean of the t in the window

    def as_list(self):
        return [self.start, self.stop, self.centre]


def octave_windows(length: int, width: int = 16, first_centre: int = 16, max_octaves: int = 7) -> list[Window]:
    """Windows ``[c − width/2, c + width/2)`` around ``c = first_centre · 2^k`` that fit in
    continuation positions ``1..length``, at most ``max_octaves`` of them. Each is labelled by
    the mean of its positions (``c − 0.5`` for even widths), not by its end."""
    if width < 1 or first_centre <= width // 2 or max_octaves < 1:
        raise ValueError(f"need width >= 1, first_centre > width/2 and max_octaves >= 1 "
                         f"(got {width}, {first_centre}, {max_octaves})")
    out = []
    c = first_centre
    while len(out) < max_octaves:
        start, stop = c - width // 2, c - width // 2 + width
        if stop - 1 > length:
            break
        out.append(Window(start, stop, (start + stop - 1) / 2))
        c *= 2
    return out


def length_for(n_octaves: int, width: int = 16, first_centre: int = 16) -> int:
    """The continuation length that ``n_octaves`` windows need."""
    c = first_centre * 2 ** (n_octaves - 1)
    return c - width // 2 + width - 1


def window_positions(windows: list[Window]) -> np.ndarray:
    """All positions t covered by ``windows``, in order (1-based)."""
    return np.concatenate([np.arange(w.start, w.stop) for w in windows]) if windows else np.zeros(0, int)


def signal_noise(sum_d: np.ndarray, sumsq_d: np.ndarray, k: int, var: np.ndarray):
    """Signal and noise from the sufficient statistics of K ≥ 2 offsets.

    ``sum_d`` and ``sumsq_d``: (..., d) sums of Δ and Δ² over continuations; ``var``: (d,) or
    broadcastable coordinate variances σ². Returns (S, N) with shape (...), per coordinate.
    """
    if k < 2:
        raise ValueError("signal and noise need at least two continuations")
    sum_d = np.asarray(sum_d, dtype=np.float64)
    sumsq_d = np.asarray(sumsq_d, dtype=np.float64)
    inv = 1.0 / np.maximum(np.asarray(var, dtype=np.float64), 1e-30)
    pair = (sum_d ** 2 - sumsq_d) / (k * (k - 1))  # mean over c != c' of Δ(c)Δ(c')
    noise = (sumsq_d - sum_d ** 2 / k) / (k - 1)  # unbiased variance
    d = sum_d.shape[-1]
    return (pair * inv).sum(-1) / d, (noise * inv).sum(-1) / d


def window_means(values: np.ndarray, windows: list[Window]) -> np.ndarray:
    """(..., positions) values at ``window_positions(windows)`` -> (..., n_windows) means."""
    values = np.asarray(values, dtype=np.float64)
    out, i = [], 0
    for w in windows:
        n = w.stop - w.start
        out.append(values[..., i:i + n].mean(-1))
        i += n
    return np.stack(out, -1)


def power_law_fit(centres, values):
    """Least squares of ``log value = a − 2·e·log t`` for every leading index of ``values``
    (shape (..., n_windows)). Windows whose value is not positive are left out (the
    unbiased signal can dip below zero where it is lost in noise). Returns
    ``(exponent e, standard error, points used)``, NaN where fewer than 3 points remain."""
    x = np.log(np.asarray(centres, dtype=np.float64))
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) & (v > 0)
    y = np.where(ok, np.log(np.where(ok, v, 1.0)), 0.0)
    w = ok.astype(np.float64)
    n = w.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        xm = (w * x).sum(-1) / n
        ym = (w * y).sum(-1) / n
        dx = (x - xm[..., None]) * w
        sxx = (dx * (x - xm[..., None])).sum(-1)
        slope = (dx * (y - ym[..., None])).sum(-1) / sxx
        resid = (y - ym[..., None] - slope[..., None] * (x - xm[..., None])) * w
        s2 = (resid ** 2).sum(-1) / (n - 2)
        se = np.sqrt(s2 / sxx)
    bad = n < 3
    exponent = np.where(bad, np.nan, -slope / 2)
    return exponent, np.where(bad, np.nan, se / 2), n.astype(int)


def pool(curves: np.ndarray) -> np.ndarray:
    """Mean over the first axis (scenes or pairs)."""
    return np.asarray(curves, dtype=np.float64).mean(0)


def bootstrap(S: np.ndarray, N: np.ndarray, centres, iters: int = 1000, seed: int = 0):
    """Resample scenes (first axis of S, N: (scenes, layers, windows)) with replacement and
    refit. Returns standard errors of α_l, β_l per layer and of their medians over layers,
    or NaNs with fewer than two scenes."""
    S = np.asarray(S, dtype=np.float64)
    N = np.asarray(N, dtype=np.float64)
    n, layers = S.shape[0], S.shape[1]
    nan = np.full(layers, np.nan)
    if n < 2 or iters < 2:
        return {"alpha_se": nan, "beta_se": nan, "alpha_median_se": float("nan"), "beta_median_se": float("nan")}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(iters, n))
    a, _, _ = power_law_fit(centres, S[idx].mean(1))  # (iters, layers)
    b, _, _ = power_law_fit(centres, N[idx].mean(1))
    with np.errstate(invalid="ignore"):
        return {
            "alpha_se": np.nanstd(a, 0, ddof=1),
            "beta_se": np.nanstd(b, 0, ddof=1),
            "alpha_median_se": float(np.nanstd(np.nanmedian(a, 1), ddof=1)),
            "beta_median_se": float(np.nanstd(np.nanmedian(b, 1), ddof=1)),
        }


def summarise(S: np.ndarray, N: np.ndarray, centres, iters: int = 1000, seed: int = 0) -> dict:
    """Fits on the scene-pooled curves plus the bootstrap over scenes.

    ``S``, ``N``: (scenes, layers, windows). Returns plain lists/floats (JSON-ready):
    per layer ``alpha``, ``alpha_fit_se`` (regression), ``alpha_se`` (bootstrap), same for
    ``beta``; the headline ``alpha_median`` / ``beta_median`` (median over layers) with
    bootstrap standard errors; the pooled curves and window centres."""
    S = np.asarray(S, dtype=np.float64)
    N = np.asarray(N, dtype=np.float64)
    if S.ndim != 3 or S.shape != N.shape or S.shape[-1] != len(centres):
        raise ValueError(f"S and N must be (scenes, layers, windows) with {len(centres)} windows, "
                         f"got {S.shape} and {N.shape}")
    Sp, Np = pool(S), pool(N)
    a, a_se, a_n = power_law_fit(centres, Sp)
    b, b_se, _ = power_law_fit(centres, Np)
    boot = bootstrap(S, N, centres, iters, seed)

    def fl(x):
        return [None if not np.isfinite(v) else float(v) for v in np.asarray(x, dtype=np.float64)]

    def med(x):
        x = np.asarray(x, dtype=np.float64)
        return float(np.nanmedian(x)) if np.isfinite(x).any() else float("nan")

    return {
        "scenes": int(S.shape[0]),
        "centres": [float(c) for c in centres],
        "alpha": fl(a), "alpha_fit_se": fl(a_se), "alpha_se": fl(boot["alpha_se"]), "fit_points": [int(v) for v in a_n],
        "beta": fl(b), "beta_fit_se": fl(b_se), "beta_se": fl(boot["beta_se"]),
        "alpha_median": med(a), "alpha_median_se": boot["alpha_median_se"],
        "beta_median": med(b), "beta_median_se": boot["beta_median_se"],
        "signal": Sp.tolist(), "noise": Np.tolist(),
    }


def layer_key(prefix: str, layer: int, n_layers: int) -> str:
    """``alpha_l07``: the layer index zero-padded to two digits (three from 100 layers)."""
    return f"{prefix}_l{layer:0{3 if n_layers >= 100 else 2}d}"
