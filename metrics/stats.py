"""Confidence intervals of a metric, and the constants the statistics share.

Pure maths on per-sample metric values (numpy and scipy only):

* ``mean_interval``: the interval of a mean. Binary values (every value 0 or 1, unless the
  caller says with ``binary=False`` that the metric is a share, a rate or a count) get the
  Wilson score interval (``scipy.stats.binomtest(...).proportion_ci(method="wilson")``);
  other values a seeded percentile bootstrap of the mean (``scipy.stats.bootstrap``).
* ``share_sum_interval``, ``normal_interval``: the exact interval of a sum of shares, and
  ±z·stderr where no samples were logged.

The paired tests between two runs are ``drift_eval.metrics.paired``'s. The smallest difference these tests find at 80% power is ``drift_eval.metrics.power``'s;
the survival curve of time in the language, ``drift_eval.metrics.survival``'s.
"""
from __future__ import annotations

import math

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
    from scipy.stats import binomtest  # deferred, start-up: loads scipy

    if n <= 0:
        return (math.nan, math.nan)
    ci = binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


def _bootstrap_mean(values: np.ndarray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    from scipy.stats import bootstrap  # deferred, start-up: loads scipy

    if values.size < 2:
        return (math.nan, math.nan)
    if np.all(values == values[0]):
        return (float(values[0]), float(values[0]))
    res = bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                    method="percentile", random_state=np.random.default_rng(seed), vectorized=True)
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def treat_as_binary(binary: bool | None, *arrays) -> bool:
    """Whether to treat values as 0/1 outcomes: as ``binary`` says, else (None) when every
    value is 0 or 1. ``binary=False`` is for a metric that is a share, a rate or a count,
    whose values can all be 0 or 1 in one run without being outcomes."""
    return all(is_binary(a) for a in arrays) if binary is None else bool(binary)


def share_sum_interval(values, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval of the mean of shares between 0 and 1, their sum
    read as a count of successes among ``n`` (a fractional count: the beta quantiles take
    it as it is). A share of mean m varies at most as much as a 0/1 outcome of mean m, so its
    sum is less spread than that binomial count, and the bounds, exact for the count, are
    conservative for the sum in practice: by simulation from the committed runs' time in the
    language their coverage is at least 0.95 at 8 to 200 samples, where the percentile
    bootstrap's falls to 0.78 (8 samples) and 0.85 (36) and Wilson's to 0.91
    (``benchmarks/time_coverage.py``). NaNs for fewer than 2 values."""
    from scipy.stats import beta  # deferred, start-up: loads scipy

    a = np.clip(np.asarray(values, dtype=float), 0.0, 1.0)
    if a.size < 2:
        return (math.nan, math.nan)
    n, s, tail = a.size, float(a.sum()), (1 - confidence) / 2
    lo = 0.0 if s <= 0 else float(beta.ppf(tail, s, n - s + 1))
    hi = 1.0 if s >= n else float(beta.ppf(1 - tail, s + 1, n - s))
    return (lo, hi)


def mean_interval(values, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES,
                  seed: int = SEED, binary: bool | None = None, share: bool = False,
                  exact: bool = False) -> tuple[float, float]:
    """Interval of the mean of per-sample values: Wilson for 0/1 values, else a percentile
    bootstrap (a constant sample gives a zero-width interval); fewer than 2 values: NaNs.
    ``binary``: whether the values are 0/1 outcomes (None: when every value is 0 or 1).
    ``share``: the values are shares between 0 and 1; when every one is 0 (or every one 1),
    the interval is Wilson's for 0 (n) successes of n, not a point: a share of mean m is 1
    with probability at most m (and 0 with probability at most 1 − m), so n ones are at most
    as likely as n successes of a proportion m, and at these outcomes the bound misses a
    share's mean no more often than a proportion's. ``exact``: the shares' exact interval
    (``share_sum_interval``), for a share that is mostly 0 or 1 per sample (the time in the
    language), where the bootstrap's coverage falls short."""
    a = np.asarray(values, dtype=float)
    if a.size < 2:  # one sample (e.g. a one-doc task's fitted value) says nothing about its spread
        return (math.nan, math.nan)
    if exact:
        return share_sum_interval(a, confidence)
    if treat_as_binary(binary, a) or (share and (np.all(a == 0) or np.all(a == 1))):
        return wilson_interval(int(a.sum()), a.size, confidence)
    return _bootstrap_mean(a, confidence, n_resamples, seed)


def normal_interval(value: float, stderr: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """``value ± z · stderr`` when only a standard error is known."""
    from scipy.stats import norm  # deferred, start-up: loads scipy

    z = float(norm.ppf(0.5 + confidence / 2))
    return (value - z * stderr, value + z * stderr)


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
