"""Output accessibility: how many tokens ``m`` soft-prompt vectors can make a model produce.

Pure NumPy/SciPy maths for the cramming measurement (the optimisation itself is in
``drift_eval.measure.cramming``):

* ``capacity_bound``: the theoretical slope ``C = d * ln(1 + 2r/eps) / ln|V|`` of the
  accessible length against ``m`` (``n* ~ C * m``), from the hidden size ``d``, the
  vocabulary size ``|V|``, the radius ``r`` (largest L-infinity norm of last-layer hidden
  states) and the precision ``eps``. ``eps`` defaults to ``r / 2048``; the record says which
  precision was assumed. With a relative precision ``eps = r / k``, ``C`` does not depend
  on ``r`` at all. ``(1 + 2r/eps) ** (d * m)`` bounds the number of accessible sequences.
* ``fit_n50``: ``n50`` (the length at which accessibility falls to 50%) from a decreasing
  sigmoid ``a(n) = 1 / (1 + exp((n - n50) / w))`` fitted to accessibility over ``n``;
  when the data never cross 50% the result says on which side ``n50`` lies instead.
* ``fit_line``: slope, intercept and R² of ``n50`` against ``m``.
* ``summarise``: all of it for an accessibility table ``{m: {n: share}}``, with the
  theory/empirical slope ratio ``C / slope``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_EPS_RATIO = 2048.0
"""The seed's precision: ``eps = r / 2048``."""


@dataclass(frozen=True)
class Bound:
    C: float  # theoretical slope of n* against m
    d: int
    vocab: int
    r_over_eps: float
    r: float | None
    eps: float | None
    eps_rule: str  # how eps was chosen, e.g. "eps = r/2048" or "eps = 0.001 (given)"

    def log_sequences(self, m: int) -> float:
        """ln of the bound ``(1 + 2r/eps) ** (d * m)`` on the number of accessible sequences."""
        return self.d * m * math.log1p(2.0 * self.r_over_eps)

    def as_dict(self) -> dict:
        return asdict(self)


def capacity_bound(d: int, vocab: int, r: float | None = None, eps: float | None = None,
                   eps_ratio: float = DEFAULT_EPS_RATIO) -> Bound:
    """``C = d * ln(1 + 2r/eps) / ln(vocab)``. Give ``eps`` (absolute, needs ``r``) or leave
    it to ``eps = r / eps_ratio`` (the default ``r / 2048``; ``r`` may then be omitted)."""
    if d < 1 or vocab < 2:
        raise ValueError(f"need d >= 1 and vocab >= 2, got d={d}, vocab={vocab}")
    if eps is not None:
        if r is None or r <= 0 or eps <= 0:
            raise ValueError("an absolute eps needs a positive radius r and a positive eps")
        r_over_eps, rule = r / eps, f"eps = {eps:g} (given)"
    else:
        if eps_ratio <= 0:
            raise ValueError(f"eps_ratio must be positive, got {eps_ratio}")
        r_over_eps, rule = float(eps_ratio), f"eps = r/{eps_ratio:g}"
        eps = None if r is None else r / eps_ratio
    C = d * math.log1p(2.0 * r_over_eps) / math.log(vocab)
    return Bound(C=C, d=int(d), vocab=int(vocab), r_over_eps=r_over_eps, r=r, eps=eps, eps_rule=rule)


def sigmoid(n, n50, width):
    """Decreasing logistic: 1 at short lengths, 0.5 at ``n50``, 0 at long lengths."""
    z = np.clip((np.asarray(n, dtype=float) - n50) / width, -500.0, 500.0)
    return 1.0 / (1.0 + np.exp(z))


def _crossing(n: np.ndarray, a: np.ndarray) -> float:
    """Linear interpolation of the first fall through 0.5 (``a`` bracketing 0.5)."""
    for i in range(len(n) - 1):
        if a[i] >= 0.5 > a[i + 1] or a[i] > 0.5 >= a[i + 1]:
            return float(n[i] + (a[i] - 0.5) / (a[i] - a[i + 1]) * (n[i + 1] - n[i]))
    # rises through 0.5 only (an unusual table): take the first rise
    for i in range(len(n) - 1):
        if (a[i] - 0.5) * (a[i + 1] - 0.5) <= 0 and a[i] != a[i + 1]:
            return float(n[i] + (0.5 - a[i]) / (a[i + 1] - a[i]) * (n[i + 1] - n[i]))
    return float(n[int(np.argmin(np.abs(a - 0.5)))])


def fit_n50(lengths: Sequence[float], accessibility: Sequence[float]) -> dict:
    """Fit the sigmoid over ``n``. Returns ``{"status", "n50", "width", "interpolated"}``:

    * ``status="fit"``: ``n50`` is the fitted midpoint (``interpolated`` the linear
      interpolation of the 50% crossing, a cross-check);
    * ``status="interpolated"``: ``n50`` is that linear interpolation, because there are
      fewer than 3 lengths, or the fit failed, or the best sigmoid has its midpoint at an
      end of the lengths tried or is flat over them (a table that does not fall);
    * ``status="above_range"``: every accessibility is above 0.5, so ``n50`` exceeds the
      longest length tried (``n50`` is None; try longer lengths);
    * ``status="below_range"``: every accessibility is below 0.5, so ``n50`` is shorter than
      the shortest length tried (``n50`` is None; try shorter lengths).
    """
    n = np.asarray(lengths, dtype=float)
    a = np.asarray(accessibility, dtype=float)
    if n.shape != a.shape or n.size == 0:
        raise ValueError("lengths and accessibility must be non-empty and of the same size")
    order = np.argsort(n)
    n, a = n[order], a[order]
    if np.all(a > 0.5):
        return {"status": "above_range", "n50": None, "width": None, "interpolated": None}
    if np.all(a < 0.5):
        return {"status": "below_range", "n50": None, "width": None, "interpolated": None}
    guess = _crossing(n, a)
    if n.size < 3:
        return {"status": "interpolated", "n50": guess, "width": None, "interpolated": guess}
    from scipy.optimize import curve_fit  # deferred, start-up: loads scipy

    span = max(float(n[-1] - n[0]), 1.0)
    step = span / (n.size - 1)
    try:
        (n50, width), _ = curve_fit(sigmoid, n, a, p0=(guess, max(step / 2, 1e-2)),
                                    bounds=([n[0], 1e-3], [n[-1], 10 * span]), maxfev=20000)
    except (RuntimeError, ValueError):
        return {"status": "interpolated", "n50": guess, "width": None, "interpolated": guess}
    if not n[0] < n50 < n[-1] or width >= span:
        # the best decreasing sigmoid is pinned to an end or flat over the lengths tried (the
        # table is not a falling curve, e.g. noise from few strings): keep the crossing
        return {"status": "interpolated", "n50": guess, "width": None, "interpolated": guess}
    return {"status": "fit", "n50": float(n50), "width": float(width), "interpolated": guess}


def fit_line(x: Sequence[float], y: Sequence[float]) -> dict:
    """Least-squares line ``y = slope * x + intercept`` and its R² (None with < 2 points;
    with exactly 2 points R² is 1 by construction)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size < 2 or np.ptp(x) == 0:
        return {"slope": None, "intercept": None, "r2": None, "points": int(x.size)}
    from scipy.stats import linregress  # deferred, start-up: loads scipy

    res = linregress(x, y)
    r2 = 1.0 if np.ptp(y) == 0 and res.slope == 0 else float(res.rvalue ** 2)
    return {"slope": float(res.slope), "intercept": float(res.intercept), "r2": r2, "points": int(x.size)}


MIN_SLOPE = 1e-6
"""Measured slopes below this (tokens per vector) count as flat: no ratio."""


def slope_ratio(C: float, slope: float | None) -> float | None:
    """Theory / empirical slope; None when the measured slope is missing or not positive
    (below ``MIN_SLOPE``: equal n50s for every m give a slope of rounding size)."""
    if slope is None or slope < MIN_SLOPE:
        return None
    return float(C / slope)


def summarise(table: Mapping[int, Mapping[int, float]], bound: Bound | None = None) -> dict:
    """``table[m][n]`` = share of length-``n`` strings reconstructed with ``m`` vectors ->
    n50 per ``m`` (with its status), the line of n50 against ``m`` over the ``m`` whose n50
    was bracketed, and, given a ``bound``, the theory/empirical slope ratio."""
    n50 = {}
    for m in sorted(table):
        lengths = sorted(table[m])
        n50[int(m)] = fit_n50(lengths, [table[m][n] for n in lengths])
    fitted = [m for m in n50 if n50[m]["n50"] is not None]
    line = fit_line(fitted, [n50[m]["n50"] for m in fitted])
    out = {"n50": n50, "line": line, "fitted_m": fitted}
    if bound is not None:
        out["bound"] = bound.as_dict()
        out["slope_ratio"] = slope_ratio(bound.C, line["slope"])
    return out
