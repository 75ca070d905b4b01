"""Known answers for the comparison statistics (drift_eval.metrics.stats)."""
import math

import numpy as np
import pytest
from scipy.stats import binomtest

from drift_eval.catalogue import exact_share
from drift_eval.metrics import paired, stats, survival
from drift_eval.metrics.values import is_finite, is_number
from drift_eval.tasks import metric_catalogue


def test_wilson_interval_known_values():
    # 8 of 10 at 95%: the textbook Wilson interval is [0.4902, 0.9433]
    lo, hi = stats.wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    # 0 of 5: lower bound 0, upper z²/(n+z²) = 3.8415/8.8415
    lo, hi = stats.wilson_interval(0, 5)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(3.841459 / 8.841459, abs=1e-5)
    assert all(math.isnan(v) for v in stats.wilson_interval(0, 0))


def test_mean_interval_picks_wilson_for_binary_and_bootstrap_otherwise():
    assert stats.mean_interval([1, 1, 1, 1, 0, 1, 1, 1, 0, 1]) == stats.wilson_interval(8, 10)
    assert stats.mean_interval([0.3, 0.3, 0.3]) == (0.3, 0.3)  # constant: zero width
    lo, hi = stats.mean_interval(np.linspace(0, 1, 41))
    assert lo < 0.5 < hi and hi - lo < 0.4
    assert stats.mean_interval([0.2, 0.4]) == stats.mean_interval([0.2, 0.4])  # seeded
    assert all(math.isnan(v) for v in stats.mean_interval([0.5]))
    assert all(math.isnan(v) for v in stats.mean_interval([1.0]))  # one 0/1 value: no Wilson interval


def test_exact_mcnemar_known_values():
    # b = 1, c = 9: two-sided binomial p = 2 * (1 + 10) / 2**10
    assert paired.mcnemar_exact(1, 9) == pytest.approx(22 / 1024)
    assert paired.mcnemar_exact(0, 0) == 1.0
    assert paired.mcnemar_exact(3, 3) == pytest.approx(1.0)


def test_paired_difference_binary_uses_mcnemar_on_discordant_pairs():
    base = [0] * 10 + [1] * 10
    sett = [1] * 10 + [1] * 10  # ten 0 -> 1 flips, none back
    r = paired.paired_difference(sett, base)
    assert r.difference == pytest.approx(0.5)
    assert r.test == "exact McNemar" and r.p_value == pytest.approx(2 / 1024)
    assert r.verdict == "significant" and r.n == 20
    assert r.lower <= 0.5 <= r.upper
    small = paired.paired_difference([1, 1, 0], [0, 1, 0])  # one flip: p = 1
    assert small.p_value == pytest.approx(1.0) and small.verdict == "not significant"
    same = paired.paired_difference([1, 0], [1, 0])
    assert same.verdict == "no difference" and same.difference == 0
    # as many pairs up as down: a difference of 0 has no direction to call
    tie = paired.paired_difference([1, 0, 1, 0], [0, 1, 0, 1])
    assert tie.difference == 0 and tie.p_value == pytest.approx(1.0) and tie.verdict == "no difference"
    tie_cont = paired.paired_difference([0.5, 0.1, 0.3], [0.1, 0.5, 0.3])
    assert tie_cont.verdict == "no difference"


def test_paired_difference_continuous_uses_exact_sign_flip_permutation():
    # differences 1, 2, 3: of the 8 sign patterns only all + and all - reach |mean| >= 2
    r = paired.paired_difference([1.5, 2.5, 3.5], [0.5, 0.5, 0.5])
    assert r.test == "paired permutation"
    assert r.difference == pytest.approx(2.0)
    assert r.p_value == pytest.approx(2 / 8)
    assert r.verdict == "not significant"
    big = paired.paired_difference(np.arange(12) + 1.0, np.zeros(12))
    assert big.p_value == pytest.approx(2 / 4096) and big.verdict == "significant"


def test_paired_difference_rejects_unpaired_input():
    with pytest.raises(ValueError):
        paired.paired_difference([1, 0], [1])


def test_relative_cost_and_normal_interval():
    assert stats.relative_cost(11.0, 10.0) == pytest.approx(0.1)
    assert math.isnan(stats.relative_cost(1.0, 0.0))
    lo, hi = stats.normal_interval(0.5, 0.1)
    assert lo == pytest.approx(0.5 - 0.196, abs=1e-3) and hi == pytest.approx(0.5 + 0.196, abs=1e-3)


def test_difference_from_standard_errors_known_answer():
    # diff 0.3, se sqrt(0.1^2 + 0.1^2) = 0.1414, z = 2.121, two-sided p = 0.0339
    d = paired.difference_from_errors(0.7, 0.1, 0.4, 0.1, n=20)
    assert d.difference == pytest.approx(0.3)
    assert d.p_value == pytest.approx(0.0339, abs=1e-4)
    assert d.lower == pytest.approx(0.3 - 1.959964 * 0.141421, abs=1e-5)
    assert d.verdict == "significant" and d.n == 20
    assert paired.difference_from_errors(0.45, 0.1, 0.4, 0.1).verdict == "not significant"
    assert paired.difference_from_errors(0.4, 0.0, 0.4, 0.0).verdict == "no difference"


def test_a_single_pair_is_never_significant():
    d = paired.paired_difference([0.7], [0.2])
    assert d.p_value == 1.0 and d.test == "paired permutation" and d.verdict == "not significant" and d.n == 1


def test_a_number_is_a_real_number_never_a_bool():
    nan, inf = float("nan"), float("inf")
    assert [is_number(v) for v in (0, 1, -2.5, nan, inf, True, False, None, "1", [1])] == \
        [True, True, True, True, True, False, False, False, False, False]
    assert [is_finite(v) for v in (0, -2.5, 1e308, nan, inf, -inf, True, None, "0.5")] == \
        [True, True, True, False, False, False, False, False, False]


def test_an_answer_that_never_left_is_at_risk_only_through_its_own_segments():
    """Five 3-segment answers that never left, five 8-segment ones that all left at segment 3:
    the never-left ones were seen through segment 2 only, so they are not at risk at 3."""
    onsets, lengths = [None] * 5 + [3] * 5, [3] * 5 + [8] * 5
    curve = survival.survival_curve(onsets, lengths)
    assert curve.at_risk[:4] == [10, 10, 10, 5]  # the never-left answers leave the risk set after their end
    assert curve.estimate[:4] == pytest.approx([1.0, 1.0, 1.0, 0.0])


def test_the_exact_interval_of_a_share_sum_is_clopper_pearson_on_the_sum():
    ones = [1.0] * 9 + [0.0] * 27  # 0/1 shares: exactly the Clopper-Pearson interval of 9 of 36
    ci = binomtest(9, 36).proportion_ci(method="exact")
    assert stats.share_sum_interval(ones) == pytest.approx((ci.low, ci.high))
    lo, hi = stats.share_sum_interval([0.0] * 35 + [0.5])  # a fractional sum: between 0 and 1 successes
    assert 0.0 < lo < binomtest(1, 36).proportion_ci(method="exact").low
    assert binomtest(0, 36).proportion_ci(method="exact").high < hi < binomtest(1, 36).proportion_ci(method="exact").high
    assert stats.share_sum_interval([1.0] * 8)[1] == 1.0 and stats.share_sum_interval([0.0] * 8)[0] == 0.0
    assert all(math.isnan(v) for v in stats.share_sum_interval([0.5]))
    assert stats.mean_interval([0.2, 1.0, 0.0, 1.0], share=True, exact=True) == stats.share_sum_interval([0.2, 1, 0, 1])


def test_the_exact_share_interval_covers_a_mixture_like_the_time_in_the_language():
    """Masses at 0 and 1 and shares between, as forced runs produce them: at 36 samples the
    interval holds the mean in at least 95% of 2 000 draws for each mixture."""
    rng = np.random.default_rng(5)
    for p0, p1 in ((0.6, 0.2), (0.1, 0.8), (0.45, 0.45), (0.9, 0.05)):
        mid = 1 - p0 - p1
        truth = p1 + mid * 0.5
        hits = 0
        for _ in range(2000):
            kind = rng.choice(3, size=36, p=[p0, p1, mid])
            x = np.where(kind == 0, 0.0, np.where(kind == 1, 1.0, rng.uniform(size=36)))
            lo, hi = stats.share_sum_interval(x)
            hits += lo <= truth <= hi
        assert hits / 2000 >= 0.95, (p0, p1, hits / 2000)


def test_the_time_in_the_language_gets_the_exact_interval_in_reports():
    cat = metric_catalogue()
    assert exact_share(cat, "drift_french_single", "time_in_french")
    assert exact_share(cat, "drift_ja_multiturn", "time_in_target")
    assert not exact_share(cat, "drift_french_multiturn", "last3_french")  # a share, but not the time
