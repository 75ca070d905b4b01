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
* ``verdict``: ``"significant"`` when p < ``ALPHA`` (0.05), ``"no difference"`` when every
  paired difference is 0, else ``"trend"``.
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
    if d.size == 0 or np.all(d == 0):
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
    zero = bool(np.all(d == 0))
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
