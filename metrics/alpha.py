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

import warnings
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


def cross_signal(sum_x: np.ndarray, sum_y: np.ndarray, sum_xy: np.ndarray, k: int, var: np.ndarray):
    """The unbiased pair estimator of ``<mean X, mean Y>`` over K ≥ 2 continuations,
    ``mean over c ≠ c' of <X(c), Y(c')>`` = ``(<Σ_c X, Σ_c Y> − Σ_c <X(c), Y(c)>) / (K(K − 1))``,
    per coordinate in σ units. ``sum_x``, ``sum_y``, ``sum_xy``: (..., d) sums over
    continuations of X, Y and the coordinate products X·Y; ``var``: σ², broadcastable.
    With X = Y = Δ it is the signal S."""
    if k < 2:
        raise ValueError("signal and noise need at least two continuations")
    inv = 1.0 / np.maximum(np.asarray(var, dtype=np.float64), 1e-30)
    sum_x = np.asarray(sum_x, dtype=np.float64)
    pair = (sum_x * np.asarray(sum_y, dtype=np.float64) - np.asarray(sum_xy, dtype=np.float64)) / (k * (k - 1))
    return (pair * inv).sum(-1) / sum_x.shape[-1]


def signal_noise(sum_d: np.ndarray, sumsq_d: np.ndarray, k: int, var: np.ndarray):
    """Signal and noise from the sufficient statistics of K ≥ 2 offsets.

    ``sum_d`` and ``sumsq_d``: (..., d) sums of Δ and Δ² over continuations; ``var``: (d,) or
    broadcastable coordinate variances σ². Returns (S, N) with shape (...), per coordinate.
    """
    signal = cross_signal(sum_d, sum_d, sumsq_d, k, var)  # mean over c != c' of <Δ(c), Δ(c')>
    sum_d = np.asarray(sum_d, dtype=np.float64)
    noise = (np.asarray(sumsq_d, dtype=np.float64) - sum_d ** 2 / k) / (k - 1)  # unbiased variance
    inv = 1.0 / np.maximum(np.asarray(var, dtype=np.float64), 1e-30)
    return signal, (noise * inv).sum(-1) / sum_d.shape[-1]


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
    exponent, se, _, n = _log_log_fit(centres, values)
    return exponent, se, n


def power_law_curve(centres, values) -> np.ndarray:
    """The fitted ``exp(a) · t^(−2e)`` of ``power_law_fit`` at ``centres`` (..., n_windows);
    NaN where there is no fit."""
    exponent, _, intercept, _ = _log_log_fit(centres, values)
    x = np.log(np.asarray(centres, dtype=np.float64))
    return np.exp(intercept[..., None] - 2 * exponent[..., None] * x)


def _log_log_fit(centres, values):
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
    intercept = np.where(bad, np.nan, ym - slope * xm)
    return exponent, np.where(bad, np.nan, se / 2), intercept, n.astype(int)


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


def _floats(x) -> list:
    """Per-layer values as JSON: floats, None where a value is not finite (no fit)."""
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(x, dtype=np.float64)]


def _median(x, missing=float("nan")):
    """The median over layers of the values that are not NaN; ``missing`` when no value is
    finite."""
    x = np.asarray(x, dtype=np.float64)
    return float(np.nanmedian(x)) if np.isfinite(x).any() else missing


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

    return {
        "scenes": int(S.shape[0]),
        "centres": [float(c) for c in centres],
        "alpha": _floats(a), "alpha_fit_se": _floats(a_se), "alpha_se": _floats(boot["alpha_se"]),
        "fit_points": [int(v) for v in a_n],
        "beta": _floats(b), "beta_fit_se": _floats(b_se), "beta_se": _floats(boot["beta_se"]),
        "alpha_median": _median(a), "alpha_median_se": boot["alpha_median_se"],
        "beta_median": _median(b), "beta_median_se": boot["beta_median_se"],
        "signal": Sp.tolist(), "noise": Np.tolist(),
    }


# ---------------------------------------------------------------------------- decomposition
def _rebuild(parts: np.ndarray, centres):
    """From cross signals ``parts`` (..., P, P, L, W) (their sum over p, q is the layer's
    signal): each term's exponent (..., P, L), the mean cosine of every pair of terms over
    the windows (..., P, P, L), and the rebuilt signal (..., L, W)
    ``Σ_p Ŝ_p + Σ_{p≠q} cos_pq √(Ŝ_p Ŝ_q)`` with ``Ŝ_p`` the power-law fit of term p's own
    signal (0 where it has no fit)."""
    P = parts.shape[-4]
    diag = np.stack([parts[..., p, p, :, :] for p in range(P)], -3)  # (..., P, L, W)
    exps, _, _ = power_law_fit(centres, diag)
    fitted = power_law_curve(centres, diag)
    fitted = np.where(np.isfinite(fitted), fitted, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        norm = np.sqrt(diag[..., :, None, :, :] * diag[..., None, :, :, :])  # (..., P, P, L, W)
        ok = (diag[..., :, None, :, :] > 0) & (diag[..., None, :, :, :] > 0)
        cos = np.where(ok, np.clip(parts / np.where(ok, norm, 1.0), -1.0, 1.0), 0.0)
        cos = cos.sum(-1) / ok.sum(-1)  # mean over the windows where both terms have a signal
    cos = np.where(np.isfinite(cos), cos, 0.0)
    eye = np.eye(P, dtype=bool)[:, :, None]
    cos = np.where(eye, 1.0, cos)
    root = np.sqrt(fitted)
    rebuilt = np.einsum("...pql,...plw,...qlw->...lw", cos, root, root)
    return exps, cos, rebuilt


def decomposition(parts, S, centres, names, iters: int = 1000, seed: int = 0) -> dict:
    """α rebuilt from the terms of each layer's offset (see ``tasks/drift_alpha/README.md``).

    ``parts``: (scenes, P, P, layers, windows) cross signals of the P terms (residual
    stream received, direct, relay, MLP), whose sum over the two term axes is the layer's
    signal; ``S``: (scenes, layers, windows) the measured signal. On the scene-pooled curves:
    per term and layer its exponent ``α_p`` (fit of its own signal), the pair cosines, the
    rebuilt signal (``_rebuild``: power-law terms at fixed angles) and its exponent
    ``α_predicted`` against ``α_measured``; the relay's share of the attention signal
    ``S_relay / (S_direct + S_relay)`` (mean over windows); bootstrap-over-scenes standard
    errors. ``closure`` is max |Σ_pq S_pq − S| / max |S|: 0 up to float error."""
    parts = np.asarray(parts, dtype=np.float64)
    S = np.asarray(S, dtype=np.float64)
    names = list(names)
    n, P, _, L, W = parts.shape
    if parts.shape[1] != len(names) or S.shape != (n, L, W) or W != len(centres):
        raise ValueError(f"parts must be (scenes, {len(names)}, {len(names)}, layers, {len(centres)}) and S "
                         f"(scenes, layers, windows), got {parts.shape} and {S.shape}")
    pp, Sp = parts.mean(0), S.mean(0)
    exps, cos, rebuilt = _rebuild(pp, centres)
    pred, _, _ = power_law_fit(centres, rebuilt)
    meas, _, _ = power_law_fit(centres, Sp)
    ix = {name: i for i, name in enumerate(names)}
    d, r = ix.get("direct"), ix.get("relay")

    def share(pooled):
        if d is None or r is None:
            return np.full(pooled.shape[:-4] + (L,), np.nan)
        sd, sr = pooled[..., d, d, :, :], pooled[..., r, r, :, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = (sd > 0) & (sr > 0)
            return np.where(ok, sr / np.where(ok, sd + sr, 1.0), 0.0).sum(-1) / ok.sum(-1)

    nan = np.full(L, np.nan)
    se = {"difference": nan, "alpha_predicted": nan, **{name: nan for name in names}}
    if n >= 2 and iters >= 2:
        rng = np.random.default_rng(seed)
        counts = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(iters)]) / n
        bp = (counts @ parts.reshape(n, -1)).reshape(iters, P, P, L, W)
        bS = (counts @ S.reshape(n, -1)).reshape(iters, L, W)
        b_exps, _, b_rebuilt = _rebuild(bp, centres)
        b_pred, _, _ = power_law_fit(centres, b_rebuilt)
        b_meas, _, _ = power_law_fit(centres, bS)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # layers with no fit in any resample: NaN
            se = {"difference": np.nanstd(b_pred - b_meas, 0, ddof=1), "alpha_predicted": np.nanstd(b_pred, 0, ddof=1),
                  **{name: np.nanstd(b_exps[:, i], 0, ddof=1) for i, name in enumerate(names)}}

    diff = pred - meas
    scale = np.abs(Sp).max()
    return {
        "names": names,
        "alpha": {name: _floats(exps[i]) for i, name in enumerate(names)},
        "alpha_se": {name: _floats(se[name]) for name in names},
        "alpha_predicted": _floats(pred), "alpha_predicted_se": _floats(se["alpha_predicted"]),
        "alpha_measured": _floats(meas),
        "difference": _floats(diff), "difference_se": _floats(se["difference"]),
        "max_abs_difference": float(np.nanmax(np.abs(diff))) if np.isfinite(diff).any() else None,
        "cosines": {f"{names[p]},{names[q]}": _floats(cos[p, q]) for p in range(P) for q in range(p + 1, P)},
        "relay_share": _floats(share(pp)),
        "signal": {name: pp[i, i].tolist() for i, name in enumerate(names)},
        "rebuilt_signal": rebuilt.tolist(),
        "closure": float(np.abs(pp.sum((0, 1)) - Sp).max() / scale) if scale > 0 else 0.0,
        "medians": {"alpha_direct": _median(exps[d], None) if d is not None else None,
                    "alpha_relay": _median(exps[r], None) if r is not None else None,
                    "alpha_predicted": _median(pred, None), "relay_share": _median(share(pp), None)},
    }


def layer_key(prefix: str, layer: int, n_layers: int) -> str:
    """``alpha_l07``: the layer index zero-padded to two digits (three from 100 layers)."""
    return f"{prefix}_l{layer:0{3 if n_layers >= 100 else 2}d}"
