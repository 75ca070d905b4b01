"""Confidence intervals and paired tests for comparing compensation settings.

Pure maths on per-sample metric values (numpy and scipy only):

* ``mean_interval``: the interval of a mean. Binary values (every value 0 or 1) get the
  Wilson score interval (``scipy.stats.binomtest(...).proportion_ci(method="wilson")``);
  other values a seeded percentile bootstrap of the mean (``scipy.stats.bootstrap``).
* ``paired_difference``: setting minus baseline on the same samples. The difference of means
  with a seeded paired bootstrap interval (resampling samples, i.e. the per-sample
  differences), and a two-sided p-value: the exact McNemar test for binary values
  (``binomtest`` on the discordant pairs), else a paired sign-flip permutation test of the
  mean difference (``scipy.stats.permutation_test``, ``permutation_type="samples"``; exact
  when 2**n is at most ``n_resamples``).
* ``verdict``: ``"significant"`` when p < ``ALPHA`` (0.05), ``"no difference"`` when the
  difference is 0 (every pair equal, or as many pairs up as down: no direction to call a
  trend), else ``"trend"``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05
CONFIDENCE = 0.95
N_RESAMPLES = 9999
SEED = 0


def is_binary(values) -> bool:
    a = np.asarray(values, dtype=float)
    return a.size > 0 and bool(np.all((a == 0) | (a == 1)))


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n`` (NaNs when n = 0)."""
    from scipy.stats import binomtest

    if n <= 0:
        return (math.nan, math.nan)
    ci = binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


def _bootstrap_mean(values: np.ndarray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    from scipy.stats import bootstrap

    if values.size < 2:
        return (math.nan, math.nan)
    if np.all(values == values[0]):
        return (float(values[0]), float(values[0]))
    res = bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                    method="percentile", random_state=np.random.default_rng(seed), vectorized=True)
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def mean_interval(values, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                  seed: int = SEED) -> tuple[float, float]:
    """Interval of the mean of per-sample values: Wilson for 0/1 values, else a percentile
    bootstrap (a constant sample gives a zero-width interval); fewer than 2 values: NaNs."""
    a = np.asarray(values, dtype=float)
    if a.size < 2:  # one sample (e.g. a one-doc task's fitted value) says nothing about its spread
        return (math.nan, math.nan)
    if is_binary(a):
        return wilson_interval(int(a.sum()), a.size, confidence)
    return _bootstrap_mean(a, confidence, n_resamples, seed)


def normal_interval(value: float, stderr: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """``value ± z · stderr`` when only a standard error is known."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    return (value - z * stderr, value + z * stderr)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts ``b`` (baseline 0,
    setting 1) and ``c`` (baseline 1, setting 0): a binomial test of b in b + c at 1/2."""
    from scipy.stats import binomtest

    if b + c == 0:
        return 1.0
    return float(binomtest(int(b), int(b + c), 0.5).pvalue)


def permutation_p(differences, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> float:
    """Two-sided sign-flip permutation p-value of the mean of paired differences."""
    from scipy.stats import permutation_test

    d = np.asarray(differences, dtype=float)
    if d.size < 2 or np.all(d == 0):  # one pair: both signs give the same |mean|, p = 1
        return 1.0
    res = permutation_test((d, np.zeros_like(d)), lambda x, y, axis: np.mean(x - y, axis=axis),
                           permutation_type="samples", alternative="two-sided", n_resamples=n_resamples,
                           vectorized=True, random_state=np.random.default_rng(seed))
    return float(res.pvalue)


def verdict(p_value: float, difference_is_zero: bool = False, alpha: float = ALPHA) -> str:
    if difference_is_zero:
        return "no difference"
    return "significant" if p_value < alpha else "trend"


@dataclass(frozen=True)
class PairedDifference:
    """``setting − baseline`` over ``n`` paired samples."""
    difference: float
    lower: float
    upper: float
    p_value: float
    test: str
    n: int
    verdict: str


def paired_difference(setting, baseline, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                      seed: int = SEED, alpha: float = ALPHA) -> PairedDifference:
    """Compare per-sample values of a setting with the baseline's on the same samples (same
    order). Raises ValueError for unequal or empty inputs."""
    x = np.asarray(setting, dtype=float)
    y = np.asarray(baseline, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"paired values need two equal-length non-empty lists, got {x.shape} and {y.shape}")
    d = x - y
    diff = float(d.mean())
    lo, hi = _bootstrap_mean(d, confidence, n_resamples, seed) if d.size > 1 else (math.nan, math.nan)
    if is_binary(x) and is_binary(y):
        b = int(np.sum((y == 0) & (x == 1)))
        c = int(np.sum((y == 1) & (x == 0)))
        p, test = mcnemar_exact(b, c), "exact McNemar"
    else:
        p, test = permutation_p(d, n_resamples, seed), "paired permutation"
    zero = math.isclose(diff, 0.0, abs_tol=1e-12)
    return PairedDifference(diff, lo, hi, p, test, int(d.size), verdict(p, zero, alpha))


def difference_from_errors(value: float, stderr: float, base_value: float, base_stderr: float, n: int = 0,
                           confidence: float = CONFIDENCE, alpha: float = ALPHA) -> PairedDifference:
    """``value − base_value`` for fitted metrics that have a standard error but no
    per-sample values (e.g. α with its bootstrap error): a two-sided z test with
    ``sqrt(se² + se_base²)``. Treating the two errors as independent is conservative when
    both runs share their inputs (positively correlated estimates)."""
    from scipy.stats import norm

    diff = float(value) - float(base_value)
    se = math.sqrt(float(stderr) ** 2 + float(base_stderr) ** 2)
    z = float(norm.ppf(0.5 + confidence / 2))
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
    else:
        p = float(2 * norm.sf(abs(diff) / se))
    return PairedDifference(diff, diff - z * se, diff + z * se, p, "z test (independent errors)", int(n),
                            verdict(p, diff == 0, alpha))


def precision_recall(predicted, truth) -> dict:
    """Counts, precision and recall of boolean predictions against boolean truths
    (precision 1 when nothing is predicted positive, recall 1 when nothing is positive)."""
    pairs = list(zip(map(bool, predicted), map(bool, truth)))
    tp = sum(p and t for p, t in pairs)
    fp = sum(p and not t for p, t in pairs)
    fn = sum(t and not p for p, t in pairs)
    return {"n": len(pairs), "tp": tp, "fp": fp, "fn": fn, "tn": len(pairs) - tp - fp - fn,
            "precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0}


def relative_cost(value: float, baseline: float) -> float:
    """``value / baseline − 1``: e.g. the perplexity cost of a setting against ``none``."""
    if baseline == 0 or not math.isfinite(baseline):
        return math.nan
    return value / baseline - 1.0


# ---------------------------------------------------------------------------- power
POWER = 0.8


def mcnemar_power(n: int, discordance: float, effect: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided exact McNemar test on ``n`` pairs whose share of discordant
    pairs is ``discordance`` and whose difference of proportions is ``effect`` (a
    discordant pair goes the effect's way with probability ``(1 + effect/discordance)/2``).
    With ``m`` discordant pairs the test rejects when the count ``b`` one way has
    ``2·P(Bin(m, 1/2) <= min(b, m-b)) < alpha``, i.e. ``b <= lo(m)`` or ``b >= m - lo(m)``."""
    from scipy.stats import binom

    if n <= 0 or discordance <= 0 or effect <= 0:
        return 0.0
    q = min(1.0, (1.0 + effect / discordance) / 2.0)
    m = np.arange(n + 1)
    lo = binom.ppf(alpha / 2, m, 0.5) - 1  # the largest b with P(Bin(m, 1/2) <= b) < alpha/2 (-1: none)
    lo = np.where(binom.cdf(lo + 1, m, 0.5) < alpha / 2, lo + 1, lo)  # guard against ppf rounding
    reject = np.where(lo >= 0, binom.cdf(lo, m, q) + binom.sf(m - lo - 1, m, q), 0.0)
    return float(np.sum(binom.pmf(m, n, min(1.0, discordance)) * reject))


def mde_binary(n: int, discordance: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest difference of proportions that the exact McNemar test detects with
    probability ``power`` on ``n`` paired 0/1 values, for the observed share of discordant
    pairs (an effect of size d needs at least d of them discordant, so the share used is
    ``max(discordance, d)``). ``inf`` when no effect up to 1 reaches that power."""
    def pw(d):
        return mcnemar_power(n, max(discordance, d), d, alpha)

    if pw(1.0) < power:
        return math.inf
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if pw(mid) >= power else (mid, hi)
    return hi


def mde_mean(n: int, sd: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean paired difference that a two-sided one-sample t test (the
    permutation test's large-sample equivalent) detects with probability ``power`` on ``n``
    differences of standard deviation ``sd`` (noncentral t)."""
    from scipy.optimize import brentq
    from scipy.stats import nct, t

    if n < 2 or not sd > 0:
        return math.inf if n < 2 else 0.0
    df = n - 1
    crit = float(t.ppf(1 - alpha / 2, df))

    def shortfall(d):
        nc = d * math.sqrt(n) / sd
        far = float(nct.cdf(-crit, df, nc))  # the wrong-sign rejections: negligible, NaN in scipy's far tail
        return float(nct.sf(crit, df, nc)) + (far if math.isfinite(far) else 0.0) - power

    hi = sd
    while shortfall(hi) < 0:
        hi *= 2
    return float(brentq(shortfall, 0.0, hi, xtol=1e-6 * sd))


def minimum_detectable_effect(setting, baseline, alpha: float = ALPHA, power: float = POWER) -> float:
    """The minimum detectable effect at ``power`` for these paired values, with the test
    ``paired_difference`` uses: exact McNemar for 0/1 values (at the observed discordance),
    else the t approximation of the paired permutation test (at the observed standard
    deviation of the differences; when every difference is 0, at the baseline values'
    standard deviation, as if the pairs were correlated 0.5)."""
    x = np.asarray(setting, dtype=float)
    y = np.asarray(baseline, dtype=float)
    n = int(x.size)
    if is_binary(x) and is_binary(y):
        return mde_binary(n, float(np.mean(x != y)) if n else 0.0, alpha, power)
    d = x - y
    sd = float(np.std(d, ddof=1)) if n > 1 else 0.0
    if sd == 0 and n > 1:
        sd = float(np.std(y, ddof=1))
    return mde_mean(n, sd, alpha, power)


def mde_from_errors(stderr: float, base_stderr: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable effect of the z test on two independent standard errors."""
    from scipy.stats import norm

    se = math.sqrt(float(stderr) ** 2 + float(base_stderr) ** 2)
    return float((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * se)


# ---------------------------------------------------------------------------- survival
@dataclass(frozen=True)
class Survival:
    """Share of answers still in the language at each segment (0-based), with a 95% band."""
    estimate: list
    lower: list
    upper: list
    at_risk: list


def survival_curve(onsets, lengths, confidence: float = CONFIDENCE) -> Survival:
    """Kaplan-Meier estimate of P(first foreign segment > k) for k = 0..max(lengths)-1.

    ``onsets[i]``: index of answer i's first segment in another language, or None when it
    never left (then it is censored after ``lengths[i]`` segments, its length). Without
    censoring up to k, the estimate is a plain proportion and its band the Wilson interval;
    otherwise scipy's Kaplan-Meier (``scipy.stats.ecdf``) with the log-log band."""
    from scipy.stats import CensoredData, ecdf

    onsets = list(onsets)
    lengths = [int(n) for n in lengths]
    horizon = max(lengths, default=0)
    if not onsets or horizon == 0:
        return Survival([], [], [], [])
    events = [float(o) for o in onsets if o is not None]
    censored = [float(n - 1) for o, n in zip(onsets, lengths) if o is None]
    ks = np.arange(horizon)
    if events:
        res = ecdf(CensoredData(uncensored=events, right=censored))
        est = res.sf.evaluate(ks)
        band = res.sf.confidence_interval(confidence, method="log-log")
        lo, hi = band.low.evaluate(ks), band.high.evaluate(ks)
    else:
        est, lo, hi = np.ones(horizon), np.full(horizon, np.nan), np.full(horizon, np.nan)
    estimate, lower, upper, at_risk = [], [], [], []
    for k in ks:
        risk = sum(1 for o, n in zip(onsets, lengths) if (o >= k if o is not None else n > k))
        alive = sum(1 for o, n in zip(onsets, lengths) if o is None or o > k)
        uncensored_so_far = all(o is not None and o <= k or n > k for o, n in zip(onsets, lengths))
        if uncensored_so_far:  # every answer observed through segment k: a proportion
            total = len(onsets)
            lw, up = wilson_interval(alive, total, confidence)
            estimate.append(alive / total)
        else:
            estimate.append(float(est[k]))
            lw, up = float(lo[k]), float(hi[k])
        lower.append(lw)
        upper.append(up)
        at_risk.append(risk)
    return Survival(estimate, lower, upper, at_risk)
