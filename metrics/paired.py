"""Paired tests between two runs of the same documents (a setting against its baseline,
a candidate against a release), pure maths on per-sample values (numpy and scipy only):

* ``paired_difference``: setting minus baseline on the same samples, with a 95% interval
  and a two-sided p-value.

  - 0/1 values: the exact McNemar test (``binomtest`` on the discordant pairs) and Tango's
    score interval for a difference of paired proportions with a continuity correction
    (``paired_proportion_interval``). Both see the pairs only through ``n`` and the two
    discordant counts.
  - other values: a paired sign-flip permutation test of the mean difference
    (``scipy.stats.permutation_test``, ``permutation_type="samples"``) on the nonzero
    differences (a zero keeps its value under both signs, so dropping it changes neither
    the statistic's ordering nor its null distribution): exact whenever their ``k`` sign
    patterns are few enough (``2**k`` at most ``max(n_resamples, EXACT_PATTERNS)``), else
    ``n_resamples`` seeded random patterns. The interval is that test's own: the shifts it
    keeps (``sign_flip_interval``).
* ``verdict``: ``"significant"`` when p < ``ALPHA`` (0.05); ``"no difference"`` when the
  difference is 0 (every pair equal, or as many pairs up as down); else ``"not
  significant"``, which a reader takes with its interval: the data are compatible with
  no change and with any change the interval holds.
* ``adjust_family``: the p-values of a family of comparisons adjusted together
  (Benjamini–Hochberg, ``scipy.stats.false_discovery_control``), each difference keeping
  its raw p and carrying the adjusted one, its verdict read from the adjusted p. Why BH: a
  report or ``drift-eval compare`` shows many exploratory comparisons (the report about
  85) measured on the same answers, so their tests are correlated, mostly positively
  (several metrics of one answer move together). BH controls the expected share of false
  discoveries among the differences called significant, and it does so under that
  positive dependence (Benjamini & Yekutieli 2001, PRDS); Holm controls the chance of any
  false call under any dependence, but over 85 comparisons it asks the smallest p to be
  below 0.05/85 ≈ 0.0006 and hides most real effects of a 32- to 68-document run, which is
  the wrong trade for a table one reads to find what to look at. A release gate is not a
  family: its rules are written before the run, each is its own decision, and each is
  judged at its own level (``drift_eval.decide.compare.judge``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from drift_eval.metrics.stats import ALPHA, CONFIDENCE, N_RESAMPLES, SEED, is_binary, treat_as_binary


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts ``b`` (baseline 0,
    setting 1) and ``c`` (baseline 1, setting 0): a binomial test of b in b + c at 1/2."""
    from scipy.stats import binomtest  # deferred, start-up: loads scipy

    if b + c == 0:
        return 1.0
    return float(binomtest(int(b), int(b + c), 0.5).pvalue)


EXACT_PATTERNS = 2 ** 18  # sign patterns enumerated at most (about a second with scipy's permutation_test)


def permutation_p(differences, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> float:
    """Two-sided sign-flip permutation p-value of the mean of paired differences.

    Only the ``k`` nonzero differences take part: a zero is the same under both signs, so
    the mean over all pairs is the mean over the nonzero ones times ``k / n`` for every
    sign pattern, and the p-value is the same. Their ``2**k`` patterns are enumerated (an
    exact p, ``scipy.stats.permutation_test`` does so when ``n_resamples >= 2**k``) when
    ``2**k <= max(n_resamples, EXACT_PATTERNS)``; beyond, ``n_resamples`` seeded random
    patterns (the p-value then has the floor ``1 / (n_resamples + 1)`` per tail)."""
    from scipy.stats import permutation_test  # deferred, start-up: loads scipy

    d = np.asarray(differences, dtype=float)
    d = d[d != 0]
    if d.size < 2:  # no pair, or one: both signs give the same |mean|, p = 1
        return 1.0
    patterns = 2 ** d.size
    exact = patterns <= max(n_resamples, EXACT_PATTERNS)
    res = permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                           alternative="two-sided", n_resamples=patterns if exact else n_resamples,
                           vectorized=True, random_state=np.random.default_rng(seed))
    return float(res.pvalue)


#: grid points from each far end to the mean where ``sign_flip_interval`` looks for the first kept shift
GRID = 200


def _sign_patterns(n: int, n_resamples: int, seed: int) -> tuple[np.ndarray, bool]:
    """(patterns, exact): every ``±1`` sign pattern of ``n`` values when ``2**n`` is at most
    ``max(n_resamples, EXACT_PATTERNS)``, else ``n_resamples`` seeded random ones."""
    if 2 ** n <= max(n_resamples, EXACT_PATTERNS):
        codes = np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]
        return 1.0 - 2.0 * (codes & 1), True
    return np.random.default_rng(seed).choice([-1.0, 1.0], size=(n_resamples, n)), False


def sign_flip_interval(differences, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                       seed: int = SEED) -> tuple[float, float]:
    """The interval of the mean paired difference that the sign-flip test holds: every
    shift ``δ`` at which the test of ``differences − δ`` (symmetric about 0 under the null)
    does not reject at ``1 − confidence``, as the hull of those shifts: on each side of the
    mean, the first kept shift on a grid from far outside (``GRID`` steps), refined by
    bisection.

    It answers to the test it is shown with: where a few pairs change and every other
    difference is 0, ``δ = 0`` is kept exactly when the test's p is at least the level
    (``δ`` just below 0 makes every difference positive, which the test rejects), so the
    interval never excludes 0 next to a p of 0.125, as a bootstrap of four equal changes
    among 32 pairs does. One set of sign patterns serves every ``δ`` (all of them when
    ``2**n`` is small, else ``n_resamples`` seeded ones; the p-value per ``δ`` is then
    ``(1 + #{|pattern sum| ≥ |sum|}) / (1 + n_resamples)``, as scipy's
    ``permutation_test`` counts), so the bounds are a deterministic function of the data.
    ``scipy.stats.permutation_test`` computes one p-value per call; inverting it by
    bisection through it costs about 60 calls per comparison, so the inversion is written
    here on the same definition. A bound no shift reaches (fewer than 6 pairs: the test
    cannot reject at 0.05 whatever the data) is infinite; fewer than 2 pairs: NaNs."""
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return (math.nan, math.nan)
    if np.all(d == d[0]):
        return (float(d[0]), float(d[0]))
    alpha = 1.0 - confidence
    signs, exact = _sign_patterns(d.size, n_resamples, seed)
    scale = float(np.max(np.abs(d)))
    tol = 1e-9 * scale * d.size

    def kept(deltas) -> np.ndarray:
        x = d[None, :] - np.asarray(deltas, dtype=float)[:, None]
        hits = np.sum(np.abs(x @ signs.T) >= np.abs(x.sum(axis=1))[:, None] - tol, axis=1)
        p = hits / len(signs) if exact else (hits + 1) / (len(signs) + 1)
        return p >= alpha

    mean, spread = float(d.mean()), float(d.max() - d.min())
    bounds = []
    for far in (mean - 2 * spread, mean + 2 * spread):
        # the hull of the kept shifts: the first kept one on a grid from far to the mean (the
        # kept set need not be an interval: tied differences make p a step function of δ),
        # then bisection between it and the rejected grid point before it
        grid = np.linspace(far, mean, GRID + 1)
        keep = kept(grid)
        if keep[0]:
            bounds.append(-math.inf if far < mean else math.inf)
            continue
        first = int(np.argmax(keep))  # the mean itself is kept: p = 1
        outside, inside = float(grid[first - 1]), float(grid[first])
        for _ in range(40):
            mid = (inside + outside) / 2
            inside, outside = (mid, outside) if kept([mid])[0] else (inside, mid)
            if abs(outside - inside) <= 1e-6 * spread:
                break
        # a shift equal to a data value zeroes those differences, and p jumps there: the bound
        # is that value itself when it lies in the last bracket and is kept
        ties = [v for v in np.unique(d) if min(inside, outside) <= v <= max(inside, outside) and kept([v])[0]]
        if ties:
            inside = min(ties, key=lambda v: abs(v - outside))
        near = [v for v in np.unique(d) if abs(v - inside) <= 1e-9 * spread]  # a tie met within rounding
        bounds.append(float(near[0] if near else inside))
    return (float(bounds[0]), float(bounds[1]))


def paired_proportion_interval(b, c, n, confidence: float = CONFIDENCE, correction: float = 1.0):
    """Tango's score interval for ``p10 − p01``, the difference of two paired proportions,
    from the discordant counts ``b`` (n10: setting 1, baseline 0) and ``c`` (n01) of ``n``
    pairs (Tango 1998, Statistics in Medicine 17:891; scalars or numpy arrays of one shape).

    The interval holds every ``δ`` whose score statistic
    ``(b − c − nδ) / sqrt(n(2 p̃01 + δ(1 − δ)))`` lies within ``±z``, ``p̃01`` being the
    maximum-likelihood ``p01`` under ``p10 − p01 = δ`` (the root of a quadratic).
    ``correction`` shrinks ``|b − c − nδ|`` by that many counts (1 by default), so that at
    ``δ = 0`` the statistic is the continuity-corrected McNemar statistic
    ``(|b − c| − 1) / sqrt(b + c)`` (Edwards 1948): the interval then excludes 0 only where
    the exact McNemar test of ``paired_difference`` gives p < 0.05 (checked by enumeration
    up to 400 discordant pairs: in 18 cases, all with exact p between 0.0487 and 0.05, it
    keeps 0 while the test rejects; never the other way). Uncorrected (``correction=0``)
    its bound at 0 is the uncorrected McNemar test, and four discordant pairs all one way
    (exact p 0.125) would exclude 0.

    Why this interval: it is a function of ``n`` and the discordant counts alone, like the
    exact test beside it, so an interval never depends on how many documents both runs
    got right; with no background disagreement (all discordant pairs one way) its far
    bound is the Wilson bound of a proportion, whose one-sided coverage holds, where
    Newcombe's hybrid score interval (1998, method 10) uses the correlation of the two
    margins and undercovers one side there (its bound missed 3–5.5% of the time, not 2.5%,
    at n = 36–800 with a one-way difference of 0.05–0.2 and a baseline rate of 0.8,
    simulated), the side a release gate reads; both uncorrected intervals exclude 0 at
    four discordant pairs all one way. The continuity correction makes the
    interval conservative at small counts (``tests/maths/test_stats.py`` checks the coverage by
    simulation and by enumeration). Hand-written: neither scipy nor numpy has an interval
    for paired proportions."""
    from scipy.stats import norm  # deferred, start-up: loads scipy

    z = float(norm.ppf(0.5 + confidence / 2))
    scalar = all(np.ndim(v) == 0 for v in (b, c, n))
    b, c, n = np.broadcast_arrays(np.asarray(b, dtype=float), np.asarray(c, dtype=float), np.asarray(n, dtype=float))

    def score(delta, b=b, c=c, n=n):
        qa, qb, qc = 2 * n, -b - c + (2 * n - b + c) * delta, -c * delta * (1 - delta)
        p01 = (-qb + np.sqrt(np.maximum(qb * qb - 4 * qa * qc, 0.0))) / (2 * qa)
        num = b - c - n * delta
        num = np.sign(num) * np.maximum(np.abs(num) - correction, 0.0)
        var = n * (2 * p01 + delta * (1 - delta))
        return np.where(num == 0, 0.0, num / np.sqrt(np.maximum(var, 1e-300)))

    est = (b - c) / n
    if scalar:  # one pair of counts: Brent's method on each side (the statistic falls as δ grows)
        from scipy.optimize import brentq  # deferred, start-up: loads scipy

        e, edge = float(est), 1 - 1e-15

        def side(target, a, z_end):
            f = lambda d: float(score(d)) - target  # noqa: E731
            return z_end if f(z_end) * f(a) > 0 else brentq(f, min(a, z_end), max(a, z_end), xtol=1e-13)

        return (side(z, e, -edge), side(-z, e, edge))
    # arrays: bisection on every element at once (2**-52 of the range after 52 halvings)
    lo, hi = np.full(est.shape, -1.0), est.copy()
    for _ in range(52):
        mid = (lo + hi) / 2
        above = score(mid) > z
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    lower = hi
    lo, hi = est.copy(), np.ones(est.shape)
    for _ in range(52):
        mid = (lo + hi) / 2
        inside = score(mid) >= -z
        lo, hi = np.where(inside, mid, lo), np.where(inside, hi, mid)
    return (lower, lo)


NOT_SIGNIFICANT = "not significant"


def verdict(p_value: float, difference_is_zero: bool = False, alpha: float = ALPHA) -> str:
    """``significant`` (p < alpha), ``no difference`` (the difference is 0: no direction to
    read), else ``not significant`` (read it with the interval)."""
    if difference_is_zero:
        return "no difference"
    return "significant" if p_value < alpha else NOT_SIGNIFICANT


@dataclass(frozen=True)
class PairedDifference:
    """``setting − baseline`` over ``n`` paired samples. ``p_value`` is the test's own;
    after ``adjust_family``, ``p_adjusted`` is its adjusted p over a family of ``family``
    comparisons and ``verdict`` is read from it (before: NaN, 0, and the raw p's verdict)."""
    difference: float
    lower: float
    upper: float
    p_value: float
    test: str
    n: int
    verdict: str
    p_adjusted: float = math.nan
    family: int = 0

    @property
    def adjusted(self) -> bool:
        return self.family > 0

    @property
    def p_read(self) -> float:
        """The p the verdict is read from: the adjusted one when there is one."""
        return self.p_adjusted if self.adjusted else self.p_value


ADJUSTMENT = "Benjamini–Hochberg"


def adjust_family(differences, alpha: float = ALPHA) -> list:
    """The differences of one family of comparisons, each with its Benjamini–Hochberg
    adjusted p-value (``scipy.stats.false_discovery_control``, method ``bh``) and the
    verdict read from it: a difference is significant only when its adjusted p is below
    ``alpha`` (an expected share of false discoveries of at most ``alpha`` among those
    called significant). Raw p-values, intervals and differences are kept as they are; a
    ``no difference`` stays one. Why BH and not Holm: the module's docstring."""
    from scipy.stats import false_discovery_control  # deferred, start-up: loads scipy

    diffs = list(differences)
    if not diffs:
        return []
    # a p that is not a number counts as 1 (nothing shown), never as 0 (max(0.0, nan) is 0.0)
    raw = [min(1.0, max(0.0, float(d.p_value))) if math.isfinite(float(d.p_value)) else 1.0 for d in diffs]
    adjusted = false_discovery_control(raw, method="bh")
    out = []
    for d, q in zip(diffs, adjusted):
        zero = d.verdict == "no difference"
        out.append(replace(d, p_adjusted=float(q), family=len(diffs),
                                       verdict=verdict(float(q), zero, alpha)))
    return out


def paired_difference(setting, baseline, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                      seed: int = SEED, alpha: float = ALPHA, binary: bool | None = None) -> PairedDifference:
    """Compare per-sample values of a setting with the baseline's on the same samples (same
    order). ``binary``: whether the values are 0/1 outcomes (None: when every value of both
    is 0 or 1). Raises ValueError for unequal or empty inputs, and for ``binary=True`` with
    values other than 0 and 1."""
    x = np.asarray(setting, dtype=float)
    y = np.asarray(baseline, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"paired values need two equal-length non-empty lists, got {x.shape} and {y.shape}")
    if binary and not (is_binary(x) and is_binary(y)):
        raise ValueError("binary=True needs values that are all 0 or 1")
    d = x - y
    diff = float(d.mean())
    if treat_as_binary(binary, x, y):
        b = int(np.sum((y == 0) & (x == 1)))
        c = int(np.sum((y == 1) & (x == 0)))
        p, test = mcnemar_exact(b, c), "exact McNemar"
        lo, hi = paired_proportion_interval(b, c, d.size, confidence) if d.size > 1 else (math.nan, math.nan)
    else:
        p, test = permutation_p(d, n_resamples, seed), "paired permutation"
        lo, hi = sign_flip_interval(d, confidence, n_resamples, seed)
        if p >= 1.0 - confidence and not lo <= 0.0 <= hi:  # a shift the reported test keeps
            lo, hi = min(lo, 0.0), max(hi, 0.0)
    zero = math.isclose(diff, 0.0, abs_tol=1e-12)
    return PairedDifference(diff, lo, hi, p, test, int(d.size), verdict(p, zero, alpha))


def difference_from_errors(value: float, stderr: float, base_value: float, base_stderr: float, n: int = 0,
                           confidence: float = CONFIDENCE, alpha: float = ALPHA) -> PairedDifference:
    """``value − base_value`` for fitted metrics that have a standard error but no
    per-sample values (e.g. α with its bootstrap error): a two-sided z test with
    ``sqrt(se² + se_base²)``. Treating the two errors as independent is conservative when
    both runs share their inputs (positively correlated estimates)."""
    from scipy.stats import norm  # deferred, start-up: loads scipy

    diff = float(value) - float(base_value)
    se = math.sqrt(float(stderr) ** 2 + float(base_stderr) ** 2)
    z = float(norm.ppf(0.5 + confidence / 2))
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
    else:
        p = float(2 * norm.sf(abs(diff) / se))
    return PairedDifference(diff, diff - z * se, diff + z * se, p, "z test (independent errors)", int(n),
                            verdict(p, diff == 0, alpha))
