"""Paired comparisons that hold up (issue 29): the minimum detectable effect with two-way
background disagreement, the interval of a difference of paired proportions and its
coverage, exact sign-flip p-values, the family adjustment and the verdict words. Every
simulation is seeded and vectorised."""
import itertools
import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binom, binomtest, multinomial, norm

from drift_eval.metrics import paired, power, stats

Z = norm.ppf(0.975)


def _exact_mcnemar_p(up, down):
    """Two-sided exact McNemar p of arrays of discordant counts (as ``binomtest`` gives it)."""
    m = up + down
    return np.where(m > 0, np.minimum(1.0, 2 * binom.cdf(np.minimum(up, down), m, 0.5)), 1.0)


def _counts(rng, n, p_up, p_down, reps):
    """Discordant counts (up: setting 1 and baseline 0; down: the other way) of ``reps``
    simulated paired runs of ``n`` documents."""
    up, down, _ = rng.multinomial(n, [p_up, p_down, 1 - p_up - p_down], size=reps).T
    return up, down


# ---------------------------------------------------------------- minimum detectable effect
def test_mde_of_the_issue_two_way_background_at_36_documents():
    assert round(power.mde_binary(36, 0.1), 2) == 0.29
    assert round(power.mde_binary(36, 0.2), 2) == 0.35
    # the old best case (every disagreeing pair the effect's way) gave 0.21 for both
    best_case = brentq(lambda d: power.mcnemar_power(36, max(0.1, d), d) - 0.8, 0.05, 0.5)
    assert round(best_case, 2) == 0.21 < power.mde_binary(36, 0.1)
    # no disagreement observed: the one-way case, unchanged
    assert power.mde_binary(36, 0.0) == pytest.approx(brentq(lambda d: binom.sf(5, 36, d) - 0.8, 1e-6, 1), abs=1e-6)
    assert power.mde_binary(36, 1.0) == math.inf  # every pair disagrees already: no room for an effect
    assert power.minimum_detectable_effect([1, 1, 1, 0] + [0] * 32, [0, 0, 0, 1] + [0] * 32) == \
        power.mde_binary(36, 4 / 36)


@pytest.mark.parametrize("n, background", [(36, 0.1), (36, 0.2), (68, 0.1), (200, 0.05)])
def test_mde_has_80_percent_power_in_simulated_paired_runs(n, background):
    """Runs that disagree on a share ``background`` of documents, as often one way as the
    other, plus a one-way effect of the size the MDE gives: the exact McNemar test rejects
    in 80% of them (simulated, 20000 runs: standard error 0.003). At the old best-case MDE
    it rejects far less often."""
    rng = np.random.default_rng(29)
    mde = power.mde_binary(n, background)
    up, down = _counts(rng, n, background / 2 + mde, background / 2, 20000)
    assert paired.mcnemar_exact(int(up[0]), int(down[0])) == pytest.approx(_exact_mcnemar_p(up[:1], down[:1])[0])
    rejected = np.mean(_exact_mcnemar_p(up, down) < 0.05)
    assert rejected == pytest.approx(0.8, abs=0.015)
    best = brentq(lambda d: power.mcnemar_power(n, max(background, d), d) - 0.8, 1e-3, 0.9)
    up, down = _counts(rng, n, background / 2 + best, background / 2, 20000)
    assert np.mean(_exact_mcnemar_p(up, down) < 0.05) < 0.7


# ---------------------------------------------------------------- interval of paired proportions
def _score(b, c, n, delta, correction):
    """Tango's score statistic, written out once more for a scalar root finder."""
    qa, qb, qc = 2 * n, -b - c + (2 * n - b + c) * delta, -c * delta * (1 - delta)
    p01 = (-qb + math.sqrt(qb * qb - 4 * qa * qc)) / (2 * qa)
    num = b - c - n * delta
    num = math.copysign(max(abs(num) - correction, 0.0), num)
    return num / math.sqrt(n * (2 * p01 + delta * (1 - delta)))


def test_paired_proportion_interval_known_answers():
    # no discordant pair, uncorrected: the score bound solves n·δ / (1 − δ) = z², δ = z² / (n + z²)
    lo, hi = paired.paired_proportion_interval(0, 0, 50, correction=0)
    assert (lo, hi) == pytest.approx((-Z * Z / (50 + Z * Z), Z * Z / (50 + Z * Z)), abs=1e-12)
    # corrected: (nδ − 1)² = z² nδ (1 − δ), the root of (n² + z²n) δ² − (2n + z²n) δ + 1 = 0 above 1/n
    n = 50
    roots = np.roots([n * n + Z * Z * n, -(2 * n + Z * Z * n), 1])
    assert paired.paired_proportion_interval(0, 0, n)[1] == pytest.approx(max(roots), abs=1e-12)
    # all discordant pairs one way, uncorrected: the far bound is the Wilson bound of b / n
    for b, n in [(4, 32), (10, 68), (37, 200)]:
        assert paired.paired_proportion_interval(b, 0, n, correction=0)[1] == \
            pytest.approx(stats.wilson_interval(b, n)[1], abs=1e-10)
    # every bound is a root of the score statistic (found here by brentq), both corrections
    for b, c, n in [(4, 0, 32), (7, 2, 36), (1, 9, 20), (30, 12, 68), (0, 3, 200)]:
        for corr in (0.0, 1.0):
            lo, hi = paired.paired_proportion_interval(b, c, n, correction=corr)
            est = (b - c) / n
            assert lo == pytest.approx(brentq(lambda d: _score(b, c, n, d, corr) - Z, -1 + 1e-9, est), abs=1e-9)
            assert hi == pytest.approx(brentq(lambda d: _score(b, c, n, d, corr) + Z, est, 1 - 1e-9), abs=1e-9)
    # vectorised: arrays give the scalars' bounds
    lo, hi = paired.paired_proportion_interval(np.array([4, 7]), np.array([0, 2]), np.array([32, 36]))
    assert (lo[1], hi[1]) == pytest.approx(paired.paired_proportion_interval(7, 2, 36))


def test_four_conversations_all_one_way_of_32_keep_zero_in_the_interval():
    """The Qwen case: 4 of 32 conversations change, all one way; exact McNemar p = 0.125, so
    the interval must not exclude 0 (the percentile bootstrap did, and an uncorrected score
    interval would too: its statistic at 0 is 4 / sqrt(4) = 2 > 1.96)."""
    base = [0] * 4 + [1] * 20 + [0] * 8
    sett = [1] * 4 + [1] * 20 + [0] * 8
    d = paired.paired_difference(sett, base)
    assert d.p_value == pytest.approx(0.125) and d.verdict == "not significant"
    assert d.difference == pytest.approx(4 / 32) and d.lower < 0 < d.difference < d.upper
    assert paired.paired_proportion_interval(4, 0, 32, correction=0)[0] > 0
    # it depends on the discordant counts only, not on how the concordant pairs split
    other = paired.paired_difference([1] * 4 + [0] * 28, [0] * 32)
    assert (other.lower, other.upper, other.p_value) == (d.lower, d.upper, d.p_value)


def test_the_interval_excludes_zero_only_where_the_exact_test_rejects():
    """Enumerated over every split of up to 200 discordant pairs: a corrected interval that
    excludes 0 always has exact McNemar p < 0.05; it keeps 0 with p < 0.05 only in the few
    splits at the test's edge (p above 0.0487)."""
    m = np.concatenate([np.full(k + 1, k) for k in range(1, 201)])
    b = np.concatenate([np.arange(k + 1) for k in range(1, 201)])
    c = m - b
    lo, hi = paired.paired_proportion_interval(b, c, 400)
    p = _exact_mcnemar_p(b, c)
    excludes = (lo > 0) | (hi < 0)
    assert not np.any(excludes & (p >= 0.05))
    kept = ~excludes & (p < 0.05)
    assert np.all(p[kept] > 0.0487) and kept.sum() <= 12


CELLS = [  # (n, p_up, p_down): small discordance, one way and two way
    (20, 0.05, 0.0), (32, 0.0, 0.0), (32, 0.03, 0.03), (32, 0.1, 0.0), (36, 0.05, 0.05), (68, 0.02, 0.0),
    (68, 0.1, 0.03), (100, 0.01, 0.01), (200, 0.02, 0.0), (200, 0.05, 0.05), (400, 0.01, 0.0),
]


def test_the_interval_covers_95_percent_at_small_discordance():
    """Simulated coverage of the true difference ``p_up − p_down`` (4000 seeded runs per
    cell, standard error 0.0034): never below 93%, and (one-sided, the side a gate reads)
    the bound misses on each side at most 3% of the time."""
    rng = np.random.default_rng(1998)
    for n, pu, pd in CELLS:
        up, down = _counts(rng, n, pu, pd, 4000)
        lo, hi = paired.paired_proportion_interval(up, down, n)
        true = pu - pd
        assert np.mean((lo <= true) & (true <= hi)) >= 0.93, (n, pu, pd)
        assert np.mean(hi < true) <= 0.03 and np.mean(lo > true) <= 0.03, (n, pu, pd)


def test_exact_coverage_by_enumeration_at_32_documents():
    """Every outcome of 32 pairs weighed by its probability (no simulation): coverage at
    least 95% wherever the discordant pairs are few (both shares up to 0.15)."""
    n = 32
    up, down = np.array([(i, j) for i in range(n + 1) for j in range(n + 1 - i)]).T
    lo, hi = paired.paired_proportion_interval(up, down, n)

    worst = 1.0
    for pu, pd in itertools.product([0.0, 0.01, 0.03, 0.05, 0.1, 0.15], repeat=2):
        pmf = multinomial.pmf(np.stack([up, down, n - up - down], axis=1), n, [pu, pd, 1 - pu - pd])
        true = pu - pd
        worst = min(worst, float(np.sum(pmf[(lo <= true + 1e-12) & (true - 1e-12 <= hi)])))
    assert worst >= 0.95


# ---------------------------------------------------------------- exact sign-flip permutation
def _enumerated_p(d):
    """Two-sided sign-flip p by explicit enumeration of every sign pattern of all values."""
    d = np.asarray(d, dtype=float)
    obs = abs(d.mean())
    means = [abs(np.dot(signs, d)) / d.size for signs in itertools.product((1, -1), repeat=d.size)]
    return np.mean([m >= obs * (1 - 1e-12) for m in means])


@pytest.mark.parametrize("d", [
    [0, 0, 1.5, -0.5, 2, 0, 3, -1],
    [0.25, 0, 0, 0, 0.25, 0.5, 0, -0.25, 0, 0, 0.75],
    [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0],
    [-0.2, 0.1, 0.3, 0.0, 0.4, -0.1, 0.6, 0.2, 0.0, 0.5],
])
def test_permutation_p_is_the_enumerated_exact_p(d):
    assert paired.permutation_p(d) == pytest.approx(_enumerated_p(d), rel=1e-12)
    nonzero = [v for v in d if v != 0]
    assert _enumerated_p(nonzero) == pytest.approx(_enumerated_p(d))  # zeros change nothing


def test_exact_values_below_the_resampling_floor():
    """32 conversations: the Qwen-like case (4 change, all one way) is exactly 2/16 = 0.125;
    the re-injection-like case (18 change, all one way, 14 unchanged) is exactly 2/2^18 =
    7.6e-6, below the 2/10000 = 0.0002 that 9,999 random sign patterns can reach; beyond
    2^18 patterns the p-value is Monte Carlo again, with its floor."""
    qwen = [0.25, 0.125, 0.5, 0.25] + [0.0] * 28
    assert paired.permutation_p(qwen) == pytest.approx(0.125, rel=1e-12)
    reinject = list(np.linspace(0.1, 0.9, 18)) + [0.0] * 14
    p = paired.permutation_p(reinject)
    assert p == pytest.approx(2 / 2 ** 18, rel=1e-9) and p < 2 / (stats.N_RESAMPLES + 1)
    assert paired.paired_difference(np.array(qwen) + 0.1, [0.1] * 32).p_value == pytest.approx(0.125)
    many = [0.5] * 19 + [0.0] * 13  # 2^19 patterns: sampled, floored at 1/(9999 + 1) per tail
    assert paired.permutation_p(many) == pytest.approx(2 / (stats.N_RESAMPLES + 1))


# ---------------------------------------------------------------- the interval of other paired values
def test_the_sign_flip_interval_keeps_zero_where_four_of_32_change_all_one_way():
    """Qwen's last three turns under log:0.25: four conversations gain, 28 are unchanged. The
    test's exact p is 0.125, so 0 is in the interval; a shift just below 0 makes every
    difference positive, which the test rejects: the lower bound is 0 itself."""
    gains = [1 / 3, 1 / 3, 2 / 3, 1 / 3]
    d = paired.paired_difference(np.array(gains + [0.5] * 28), [0.0] * 4 + [0.5] * 28)
    assert d.p_value == pytest.approx(0.125) and d.verdict == "not significant"
    assert d.lower == 0.0 and d.upper > d.difference
    assert stats._bootstrap_mean(np.array(gains + [0.0] * 28), 0.95, 9999, 0)[0] > 0  # what the bootstrap said


@pytest.mark.parametrize("d", [[0.5, 1.0, -0.25, 2.0, 1.5, 0.75, 1.25], [3.0, -1.0, 2.0, 0.5, 4.0, 1.0, 2.5, -0.5]])
def test_the_sign_flip_interval_is_the_set_of_shifts_the_enumerated_test_keeps(d):
    """Few pairs: every sign pattern is enumerated, so each bound is where the exact p of
    ``d − δ`` crosses 0.05: kept just inside, rejected just outside."""
    lo, hi = paired.sign_flip_interval(d)
    eps = 1e-4 * (max(d) - min(d))
    shifted = lambda delta: _enumerated_p([v - delta for v in d])  # noqa: E731
    assert shifted(lo + eps) >= 0.05 > shifted(lo - eps)
    assert shifted(hi - eps) >= 0.05 > shifted(hi + eps)
    assert lo < float(np.mean(d)) < hi


@pytest.mark.slow  # 1,200 simulated runs of 999 resamples
def test_the_sign_flip_interval_covers_95_percent_at_small_discordance():
    """Per-conversation rates of three turns: most pairs unchanged, the rest changing a turn
    or two either way (symmetric, true mean difference 0) or shifted by a known amount.
    Coverage of 95% intervals over seeded simulated runs is at least 93%, each tail missed at
    most 4% of the time (400 runs a case: a binomial 95% band of about ±2.1 points)."""
    rng = np.random.default_rng(29)
    values = np.array([0.0, 1 / 3, -1 / 3, 2 / 3, -2 / 3])
    for probs, n in (([0.8, 0.07, 0.07, 0.03, 0.03], 32), ([0.6, 0.15, 0.15, 0.05, 0.05], 68),
                     ([0.9, 0.04, 0.04, 0.01, 0.01], 100)):
        low = high = 0
        for _ in range(400):
            d = rng.choice(values, size=n, p=probs)
            lo, hi = paired.sign_flip_interval(d, n_resamples=999)
            low += lo > 0
            high += hi < 0
        assert (low + high) / 400 <= 0.07 and low / 400 <= 0.04 and high / 400 <= 0.04, (probs, n, low, high)


# ---------------------------------------------------------------- family adjustment and verdicts
def _difference(p, diff=0.1):
    return paired.PairedDifference(diff, diff - 0.1, diff + 0.1, p, "exact McNemar", 36,
                                  paired.verdict(p, diff == 0))


def test_adjust_family_is_benjamini_hochberg_by_hand():
    # ranks of 0.005, 0.01, 0.03, 0.04, 0.5: p·5/rank = 0.025, 0.025, 0.05, 0.05, 0.5, then the
    # running minimum from the largest p down: 0.025, 0.025, 0.05, 0.05, 0.5
    raw = [0.01, 0.04, 0.03, 0.005, 0.5]
    out = paired.adjust_family([_difference(p) for p in raw])
    assert [d.p_adjusted for d in out] == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.5])
    assert [d.p_value for d in out] == raw and all(d.family == 5 and d.adjusted for d in out)
    assert [d.verdict for d in out] == ["significant", "not significant", "not significant", "significant",
                                        "not significant"]
    assert [_difference(p).verdict for p in raw] == ["significant"] * 4 + ["not significant"]  # unadjusted
    assert out[1].p_read == 0.05 and _difference(0.04).p_read == 0.04
    # a difference of 0 keeps its reading, and takes its place in the family
    zero = paired.adjust_family([_difference(1.0, diff=0.0), _difference(0.001)])
    assert [d.verdict for d in zero] == ["no difference", "significant"]
    assert zero[1].p_adjusted == pytest.approx(0.002)
    assert paired.adjust_family([]) == []


def test_a_p_value_that_is_not_a_number_is_never_significant_after_adjustment():
    [nan, real] = paired.adjust_family([_difference(math.nan), _difference(0.01)])
    assert nan.p_adjusted == 1.0 and nan.verdict == "not significant"
    assert real.p_adjusted == pytest.approx(0.02) and real.verdict == "significant"  # 0.01 * 2 / 1


def test_verdict_words():
    assert paired.verdict(0.01) == "significant"
    assert paired.verdict(0.05) == paired.verdict(1.0) == "not significant"  # p = 1 promises no direction
    assert paired.verdict(1.0, difference_is_zero=True) == "no difference"


@pytest.mark.parametrize("n", [36, 68, 200])
def test_a_regression_at_the_tolerance_is_passed_at_most_2_5_percent_of_the_time(n):
    """A gate rule ``on: upper`` passes when the regression's upper 95% bound is within the
    tolerance. With the true regression equal to the tolerance, that happens with
    probability at most 2.5% (every outcome enumerated, no simulation), with and without
    two-way background disagreement; the percentile bootstrap passed 6.7% at n = 200."""
    worse, better = np.array([(i, j) for i in range(n + 1) for j in range(n + 1 - i)]).T  # down, up
    lo, _ = paired.paired_proportion_interval(better, worse, n)
    for tol in (0.05, 0.1, 0.15, 0.2):
        for background in (0.0, 0.1, 0.2):
            p = [background / 2 + tol, background / 2, 1 - background - tol]
            pmf = multinomial.pmf(np.stack([worse, better, n - worse - better], axis=1), n, p)
            assert float(np.sum(pmf[-lo <= tol])) <= 0.025, (tol, background)


# ---------------------------------------------------------------- rates that happen to be 0 or 1
def test_a_rate_whose_values_happen_to_be_0_or_1_is_not_tested_as_outcomes():
    """Leaked words per 1 000 of 32 conversations, 0 in 30 and 1 in 2 under the setting, 0
    everywhere under the baseline: as outcomes that would be an exact McNemar test and a
    Wilson interval of a proportion; as the rate it is, the sign-flip test (2 non-zero
    differences: 4 sign patterns, exact p 2/4 = 0.5) and a bootstrap of the mean."""
    x, y = [1.0, 1.0] + [0.0] * 30, [0.0] * 32
    as_outcomes = paired.paired_difference(x, y)
    assert as_outcomes.test == "exact McNemar" and as_outcomes.p_value == pytest.approx(0.5)
    d = paired.paired_difference(x, y, binary=False)
    assert d.test == "paired permutation" and d.p_value == pytest.approx(0.5)
    assert d.difference == pytest.approx(2 / 32)
    # the rate's interval: resampled means of 32 values, two of them 1, never the Wilson bound
    lo, hi = stats.mean_interval(x, binary=False)
    assert (lo, hi) != stats.wilson_interval(2, 32) and 0.0 <= lo <= 2 / 32 <= hi <= 6 / 32
    assert stats.mean_interval(x) == stats.wilson_interval(2, 32)
    with pytest.raises(ValueError, match="binary=True"):
        paired.paired_difference([0.5, 1.0], [0.0, 0.0], binary=True)


def test_the_detectable_effect_of_a_rate_that_never_varies_is_not_estimable():
    """Every value 0 in both runs: no spread for the t approximation to scale by, so no size
    is claimed (NaN, shown as 'not estimable'); as 0/1 outcomes the exact test's MDE stands."""
    zeros = [0.0] * 32
    mde = power.minimum_detectable_effect(zeros, zeros, binary=False)
    assert math.isnan(mde) and power.mde_text(mde) == "not estimable (no spread)"
    assert power.minimum_detectable_effect(zeros, zeros) == power.mde_binary(32, 0.0)
    assert power.mde_text(math.inf) == "none up to 1" and power.mde_text(0.25, 2) == "0.25"


def test_a_share_that_is_1_in_every_conversation_gets_a_proportions_bound_not_a_point():
    """French in the last three turns of 32 conversations, all 1: a bootstrap of the mean
    is the point [1, 1]; a share of mean m is 1 with probability at most m, so 32 ones are
    at most as likely as 32 successes of a proportion m, and Wilson's bound for 32 of 32
    applies. A rate that is 0 everywhere (not a share) keeps the bootstrap's point."""
    ones = [1.0] * 32
    assert stats.mean_interval(ones, binary=False) == (1.0, 1.0)
    lo, hi = stats.mean_interval(ones, binary=False, share=True)
    assert (lo, hi) == stats.wilson_interval(32, 32) and hi == pytest.approx(1.0) and round(lo, 2) == 0.89
    assert stats.mean_interval([0.0] * 32, binary=False, share=True) == stats.wilson_interval(0, 32)
    assert stats.mean_interval([0.0] * 32, binary=False) == (0.0, 0.0)
    mixed = [1.0] * 30 + [2 / 3, 1 / 3]  # not constant: the bootstrap, as for any share
    assert stats.mean_interval(mixed, binary=False, share=True) == stats.mean_interval(mixed, binary=False)
    # the bound's premise, by enumeration: a share in {0, 1/3, 2/3, 1} with mean m is 1 with probability <= m
    for p in itertools.product(np.linspace(0, 1, 6), repeat=3):
        probs = np.array([*p, max(0.0, 1 - sum(p))])
        if abs(probs.sum() - 1) < 1e-9:
            m = float(np.dot(probs, [0, 1 / 3, 2 / 3, 1]))
            assert probs[3] <= m + 1e-12


# ---------------------------------------------------------------- the power of McNemar's test
def test_mcnemar_power_matches_enumeration():
    def brute(n, psi, d):
        q, total = (1 + d / psi) / 2, 0.0
        for m in range(n + 1):
            for b in range(m + 1):
                if m and binomtest(b, m, 0.5).pvalue < 0.05:
                    total += binom.pmf(m, n, psi) * binom.pmf(b, m, q)
        return total

    for n, psi, d in [(10, 0.5, 0.3), (20, 0.3, 0.2), (36, 0.1, 0.1), (8, 0.9, 0.5)]:
        assert power.mcnemar_power(n, psi, d) == pytest.approx(brute(n, psi, d), rel=1e-9)


def test_minimum_detectable_effects_have_their_known_values():
    # no discordance observed: an effect d needs d of the pairs discordant, all one way, and
    # the exact test rejects m one-way pairs from m = 6 (2 / 2^6 < 0.05): P(Bin(n, d) >= 6) = 0.8
    for n in (36, 100):
        expected = brentq(lambda d: binom.sf(5, n, d) - 0.8, 1e-6, 1)
        assert power.mde_binary(n, 0.0) == pytest.approx(expected, abs=1e-6)
    assert power.mde_binary(5, 0.5) == float("inf")  # five pairs can never be significant
    assert power.mde_binary(8, 1 / 8) > 0.5 > power.mde_binary(400, 0.01)
    # a mean: the noncentral t, which tends to (z_0.975 + z_0.8) sd / sqrt(n)
    z = norm.ppf(0.975) + norm.ppf(0.8)
    assert power.mde_mean(4000, 2.0) == pytest.approx(z * 2.0 / 4000 ** 0.5, rel=2e-3)
    assert power.mde_mean(10, 1.0) > z / 10 ** 0.5
    assert power.mde_from_errors(0.03, 0.04) == pytest.approx(z * 0.05)
    assert power.minimum_detectable_effect([1, 0, 1, 1], [1, 1, 1, 1]) == power.mde_binary(4, 0.25)
