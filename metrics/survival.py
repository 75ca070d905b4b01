"""Time in the language as a survival curve: the share of answers still in the language at
each segment, Kaplan-Meier where answers end before others (``survival_curve``). Pure maths
(numpy and scipy only)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from drift_eval.metrics.stats import CONFIDENCE, wilson_interval

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
    from scipy.stats import CensoredData, ecdf  # deferred, start-up: loads scipy

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
        with warnings.catch_warnings():  # the log-log band is undefined where the estimate is 0 or 1: NaN there
            warnings.filterwarnings("ignore", message="The confidence interval is undefined", category=RuntimeWarning)
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
