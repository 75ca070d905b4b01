"""The α maths on cases with known answers (no torch, no lm-eval)."""
import numpy as np
import pytest

from drift_eval.metrics import alpha as am


def test_windows_are_octaves_labelled_by_centre():
    ws = am.octave_windows(1031)
    assert len(ws) == 7
    assert [(w.start, w.stop) for w in ws[:3]] == [(8, 24), (24, 40), (56, 72)]
    assert [w.centre for w in ws] == [15.5, 31.5, 63.5, 127.5, 255.5, 511.5, 1023.5]
    # the label is the mean of the window's positions, not its end
    for w in ws:
        assert w.centre == np.arange(w.start, w.stop).mean()
    assert am.length_for(7) == 1031
    assert len(am.octave_windows(1030)) == 6
    assert len(am.octave_windows(10_000, max_octaves=7)) == 7
    assert am.window_positions(ws[:2]).tolist() == list(range(8, 40))


def test_bad_windows_are_refused():
    with pytest.raises(ValueError):
        am.octave_windows(100, width=16, first_centre=8)


def _offsets(t, a, k, d, rng, noise=0.0, b=0.0):
    """K continuations of d-dim offsets: a common part μ t^-a plus noise t^-b."""
    mu = rng.normal(size=d)
    common = mu[None, None, :] * t[None, :, None] ** (-a)
    return common + noise * rng.normal(size=(k, len(t), d)) * t[None, :, None] ** (-b)


@pytest.mark.parametrize("a", [0.25, 0.5, 0.7, 1.0])
def test_exact_power_law_fits_its_exponent(a):
    rng = np.random.default_rng(1)
    ws = am.octave_windows(1031)
    t = am.window_positions(ws).astype(float)
    delta = _offsets(t, a, k=4, d=8, rng=rng)  # identical across continuations: no noise
    S, N = am.signal_noise(delta.sum(0), (delta ** 2).sum(0), 4, np.ones(8))
    # within a window t^-2a is not constant, so fit the per-position signal at the positions
    alpha, se, n = am.power_law_fit(t, S)
    assert alpha == pytest.approx(a, abs=1e-9) and se == pytest.approx(0, abs=1e-9) and n == len(t)
    assert np.allclose(N, 0, atol=1e-12)


def test_window_fit_recovers_exponent_and_noise_exponent():
    rng = np.random.default_rng(2)
    ws = am.octave_windows(1031)
    t = am.window_positions(ws).astype(float)
    centres = [w.centre for w in ws]
    k, d = 400, 64
    delta = _offsets(t, 0.5, k, d, rng, noise=0.3, b=0.1)
    S, N = am.signal_noise(delta.sum(0), (delta ** 2).sum(0), k, np.ones(d))
    alpha, _, _ = am.power_law_fit(centres, am.window_means(S, ws))
    beta, _, _ = am.power_law_fit(centres, am.window_means(N, ws))
    assert alpha == pytest.approx(0.5, abs=0.02)
    assert beta == pytest.approx(0.1, abs=0.02)


def test_pair_estimator_is_unbiased_where_squaring_the_mean_is_not():
    rng = np.random.default_rng(3)
    mu2, sigma, k, d, trials = 0.04, 1.0, 4, 50, 4000
    mu = np.full(d, np.sqrt(mu2))
    x = mu + sigma * rng.normal(size=(trials, k, d))
    S, _ = am.signal_noise(x.sum(1), (x ** 2).sum(1), k, np.ones(d))
    squared_mean = (x.mean(1) ** 2).mean(-1)
    assert S.mean() == pytest.approx(mu2, abs=0.004)  # standard error ~0.0011
    # squaring the mean adds sigma^2 / K = 0.25, six times the signal
    assert squared_mean.mean() == pytest.approx(mu2 + sigma ** 2 / k, abs=0.01)


def test_noise_is_the_unbiased_variance_in_sigma_units():
    rng = np.random.default_rng(4)
    sd = np.array([0.5, 2.0, 4.0])
    x = rng.normal(size=(20000, 3)) * sd * 3  # offsets with std 3 sigma
    _, N = am.signal_noise(x.sum(0), (x ** 2).sum(0), len(x), sd ** 2)
    assert N == pytest.approx(9.0, rel=0.03)


def test_non_positive_windows_are_left_out_and_too_few_give_nan():
    c = np.array([16.0, 32, 64, 128])
    v = c ** -1.2
    v[1] = -1e-3
    a, _, n = am.power_law_fit(c, v)
    assert a == pytest.approx(0.6) and n == 3
    a, se, n = am.power_law_fit(c, np.array([1.0, -1, -1, 0.5]))
    assert np.isnan(a) and np.isnan(se) and n == 2


def test_summary_and_bootstrap_over_scenes():
    rng = np.random.default_rng(5)
    centres = np.array([15.5, 31.5, 63.5, 127.5, 255.5])
    scenes, layers = 12, 3
    amp = np.exp(rng.normal(0, 0.3, size=(scenes, 1, 1)))  # scenes differ in level only
    exps = np.array([0.3, 0.6, 0.9])[None, :, None]
    S = amp * centres[None, None, :] ** (-2 * exps)
    N = amp * np.ones_like(S)
    out = am.summarise(S, N, centres, iters=200)
    assert out["alpha"] == pytest.approx([0.3, 0.6, 0.9])
    assert out["beta"] == pytest.approx([0, 0, 0], abs=1e-12)
    assert out["alpha_median"] == pytest.approx(0.6)
    # level-only differences between scenes do not move the exponent
    assert out["alpha_median_se"] == pytest.approx(0, abs=1e-9)
    # scenes with different exponents do
    S2 = S * centres[None, None, :] ** rng.normal(0, 0.2, size=(scenes, 1, 1))
    out2 = am.summarise(S2, N, centres, iters=200)
    assert 0.005 < out2["alpha_median_se"] < 0.2
    assert len(out2["alpha_se"]) == layers and all(s > 0 for s in out2["alpha_se"])


def test_layer_keys():
    assert am.layer_key("alpha", 3, 30) == "alpha_l03"
    assert am.layer_key("beta", 3, 120) == "beta_l003"
