"""The smallest difference the paired tests of ``drift_eval.metrics.stats`` find at 80%
power (``minimum_detectable_effect``), and the power of the exact McNemar test. For 0/1
values (``mde_binary``) the observed disagreement is taken as two-way background and an
effect adds one-way flips on top of it (not the best case in which every disagreeing pair
moves the effect's way); for other values, the t approximation of the paired permutation
test (``mde_mean``). Pure maths (numpy and scipy only)."""
from __future__ import annotations

import functools
import math

import numpy as np

from drift_eval.metrics.stats import ALPHA, treat_as_binary

POWER = 0.8


@functools.lru_cache(maxsize=256)
def _mcnemar_rejection(n: int, alpha: float) -> np.ndarray:
    """For m = 0..n discordant pairs, the largest count b one way with P(Bin(m, 1/2) <= b) <
    alpha/2 (-1: none): the exact McNemar test rejects at b <= lo(m) or b >= m - lo(m)."""
    from scipy.stats import binom  # deferred, start-up: loads scipy

    m = np.arange(n + 1)
    lo = binom.ppf(alpha / 2, m, 0.5) - 1
    lo = np.where(binom.cdf(lo + 1, m, 0.5) < alpha / 2, lo + 1, lo)  # guard against ppf rounding
    lo.setflags(write=False)
    return lo


def mcnemar_power(n: int, discordance: float, effect: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided exact McNemar test on ``n`` pairs whose share of discordant
    pairs is ``discordance`` and whose difference of proportions is ``effect`` (a
    discordant pair goes the effect's way with probability ``(1 + effect/discordance)/2``).
    With ``m`` discordant pairs the test rejects when the count ``b`` one way has
    ``2·P(Bin(m, 1/2) <= min(b, m-b)) < alpha``, i.e. ``b <= lo(m)`` or ``b >= m - lo(m)``."""
    from scipy.stats import binom  # deferred, start-up: loads scipy

    if n <= 0 or discordance <= 0 or effect <= 0:
        return 0.0
    q = min(1.0, (1.0 + effect / discordance) / 2.0)
    m = np.arange(n + 1)
    lo = _mcnemar_rejection(int(n), float(alpha))
    reject = np.where(lo >= 0, binom.cdf(lo, m, q) + binom.sf(m - lo - 1, m, q), 0.0)
    return float(np.sum(binom.pmf(m, n, min(1.0, discordance)) * reject))


def mde_binary(n: int, discordance: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest difference of proportions that the exact McNemar test detects with
    probability ``power`` on ``n`` paired 0/1 values whose share of discordant pairs is
    ``discordance``.

    The observed disagreement is taken as two-way background (runs that disagree on a
    document as often one way as the other), and an effect ``d`` adds ``d`` of one-way
    flips on top of it: discordant share ``b + d``, of which a pair goes the effect's way
    with probability ``(b/2 + d) / (b + d)`` (``b`` = ``discordance``; the difference of
    proportions is then ``d``). With no disagreement observed this is the one-way case (an
    effect needs ``d`` of the pairs discordant, all its way). ``inf`` when no effect up to
    ``1 − b`` reaches that power (``b + d`` cannot exceed 1). Not the best case of taking
    ``max(b, d)`` discordant pairs all one way, which assumes the background disagreement
    itself moves the effect's way and understates the MDE (n = 36: 0.21 where two-way
    backgrounds of 0.1 and 0.2 give 0.29 and 0.35)."""
    b = min(max(float(discordance), 0.0), 1.0)

    def pw(d):
        return mcnemar_power(n, min(1.0, b + d), d, alpha)

    top = 1.0 - b
    if top <= 0 or pw(top) < power:
        return math.inf
    lo, hi = 0.0, top
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if pw(mid) >= power else (mid, hi)
    return hi


def mde_mean(n: int, sd: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest mean paired difference that a two-sided one-sample t test (the
    permutation test's large-sample equivalent) detects with probability ``power`` on ``n``
    differences of standard deviation ``sd`` (noncentral t)."""
    from scipy.optimize import brentq  # deferred, start-up: loads scipy
    from scipy.stats import nct, t  # deferred, start-up: loads scipy

    if n < 2 or not sd > 0:
        return math.inf if n < 2 else 0.0
    if not math.isfinite(sd):  # a spread too wide for floats: no difference is detectable
        return math.inf
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


def minimum_detectable_effect(setting, baseline, alpha: float = ALPHA, power: float = POWER,
                              binary: bool | None = None) -> float:
    """The minimum detectable effect at ``power`` for these paired values, with the test
    ``paired_difference`` uses: exact McNemar for 0/1 values (``mde_binary``: the observed
    discordance as two-way background, the effect's flips one way on top),
    else the t approximation of the paired permutation test (at the observed standard
    deviation of the differences; when every difference is 0, at the baseline values'
    standard deviation, as if the pairs were correlated 0.5; NaN when those vary neither:
    every value is the same in both runs, so the approximation has no spread to scale by and
    the size of a detectable change is not estimable). ``binary`` as in
    ``paired_difference``."""
    x = np.asarray(setting, dtype=float)
    y = np.asarray(baseline, dtype=float)
    n = int(x.size)
    if treat_as_binary(binary, x, y):
        return mde_binary(n, float(np.mean(x != y)) if n else 0.0, alpha, power)
    d = x - y
    sd = float(np.std(d, ddof=1)) if n > 1 else 0.0
    if sd == 0 and n > 1:
        sd = float(np.std(y, ddof=1))
    if sd == 0 and n > 1:
        return math.nan
    return mde_mean(n, sd, alpha, power)


def mde_text(mde: float, digits: int = 4, infinite: str = "none up to 1") -> str:
    """A minimum detectable effect as text: ``infinite`` when no effect reaches the power,
    ``not estimable (no spread)`` when it is NaN (``minimum_detectable_effect``), else the number."""
    if math.isnan(mde):
        return "not estimable (no spread)"
    return infinite if math.isinf(mde) else f"{mde:.{digits}f}"


def mde_from_errors(stderr: float, base_stderr: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable effect of the z test on two independent standard errors."""
    from scipy.stats import norm  # deferred, start-up: loads scipy

    se = math.sqrt(float(stderr) ** 2 + float(base_stderr) ** 2)
    return float((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * se)
