"""GPStructTagger's cold posterior: ``temperature`` and its validation."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

from skgpstruct import GPStructTagger
from skgpstruct._input.sequences import SequenceData
from skgpstruct._gpstruct.posterior_cv import TEMPERATURE_GRID, cv_temperature
from skgpstruct.datasets import load_benchmark, make_chain_data

from .test_gp_features import _model_data

FAST = dict(n_samples=8, n_predict_samples=16, max_iter=60, random_state=0)


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=40, n_classes=3, n_features=8, sparse=True,
                           length=(3, 8), random_state=1)
    return X[:30], y[:30], X[30:], y[30:]


def test_auto_is_validated_with_the_prior_variance(data):
    X, y, X_te, _ = data
    gp = GPStructTagger(**FAST).fit(X, y)
    res, band = gp.temperature_cv_results_, gp.variance_cv_results_["band"]
    assert gp.temperature_ in TEMPERATURE_GRID
    assert_allclose(res["temperature"], sorted(TEMPERATURE_GRID, reverse=True))
    # the variances are the error band of the posterior mode's validation
    assert_allclose(res["variance"], gp.variance_cv_results_["variance"][band])
    shape = (res["variance"].size, res["temperature"].size)
    for key in ("log_loss", "log_loss_se", "calibration_error", "calibration_error_se",
                "mean_scale"):
        assert res[key].shape == shape and np.all(np.isfinite(res[key])), key
    assert np.all(res["mean_scale"] >= 1.0)
    # the chosen pair: within one standard error of the lowest log loss, and
    # there within one standard error of the lowest calibration error; of
    # those the warmest, at it the lowest calibration error
    loss, ece = res["log_loss"], res["calibration_error"]
    low = np.unravel_index(np.argmin(loss), shape)
    close = loss <= loss[low] + res["log_loss_se"][low]
    low = np.unravel_index(np.argmin(np.where(close, ece, np.inf)), shape)
    close &= ece <= ece[low] + res["calibration_error_se"][low]
    i = np.flatnonzero(res["variance"] == gp.kernel_.variance)[0]
    j = np.flatnonzero(res["temperature"] == gp.temperature_)[0]
    assert close[i, j] and not close[:, :j].any()
    assert ece[i, j] == ece[close[:, j], j].min()
    assert np.all(np.diff(res["temperature"]) < 0)  # from the warmest down
    # a fixed prior variance: not validated, the Bayesian posterior
    fixed = GPStructTagger(kernel_variance=3.0, **FAST).fit(X, y)
    assert fixed.temperature_ == 1.0 and fixed.temperature_cv_results_ is None


def test_cold_posterior_keeps_the_prior_and_narrows_the_spread(data):
    X, y, _, _ = data
    fits = {T: GPStructTagger(kernel_variance=3.0, temperature=T, **FAST).fit(X, y)
            for T in (1.0, 0.25, 0.1)}
    for T, gp in fits.items():
        # the model's prior, as given (0.1 * 3.0 / 0.1 is not 3.0), not the
        # cold posterior's scaled one
        assert gp.kernel_.variance == 3.0 and gp.transition_prior_var_ == 3.0
        assert gp.temperature_ == T and gp.temperature_cv_results_ is None
    warm, cold = fits[1.0], fits[0.25]
    active = warm.coef_var_ > 0
    # mean-field optimum: 1 / s = (curvature + 1 / sigma^2) / T, so the
    # variances scale by about T (the curvature moves with the means)
    ratio = np.median(cold.coef_var_[active] / warm.coef_var_[active])
    assert 0.15 < ratio < 0.4, ratio
    assert np.median(cold.transition_var_ / warm.transition_var_) < 0.4


def test_temperature_needs_the_weight_space_form(data):
    X, y, _, _ = data
    gp = GPStructTagger(approximation="inducing", n_inducing=10, temperature=0.5, **FAST)
    with pytest.raises(ValueError, match="weight-space form"):
        gp.fit(X, y)
    auto = GPStructTagger(approximation="inducing", n_inducing=10, **FAST).fit(X, y)
    assert auto.temperature_ == 1.0


@pytest.mark.parametrize("temperature", [0.0, 1.5, "cold"])
def test_temperature_is_validated(data, temperature):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="temperature"):
        GPStructTagger(temperature=temperature, **FAST).fit(X, y)


def test_warm_start_keeps_the_validated_temperature(data):
    X, y, _, _ = data
    gp = GPStructTagger(warm_start=True, **FAST).fit(X, y)
    T, results = gp.temperature_, gp.temperature_cv_results_
    gp.fit(X, y)
    assert gp.temperature_ == T and gp.temperature_cv_results_ is results


def test_cold_elbo_is_the_models():
    # elbo() scores the fitted q under the model's prior (temperature 1):
    # the cold posterior is a narrower q for the same model, so its bound is
    # lower than the Bayesian posterior's
    X, y = make_chain_data(n_sequences=40, n_classes=3, n_features=8, sparse=True,
                           length=(3, 8), random_state=2)
    kw = dict(kernel_variance=3.0, n_samples=32, n_predict_samples=64, max_iter=200,
              random_state=0)
    warm = GPStructTagger(temperature=1.0, **kw).fit(X, y)
    cold = GPStructTagger(temperature=0.1, **kw).fit(X, y)
    assert cold.elbo(X, y) < warm.elbo(X, y)


# ------------------------------------------------ what validation picks


def _cv(X, y):
    """``(variance, temperature)`` as GPStructTagger's defaults choose them."""
    data = SequenceData.from_sequences(X, y, n_features=X[0].shape[1])
    n_classes = int(max(v.max() for v in y)) + 1
    from skgpstruct._gpstruct.posterior_cv import cv_posterior
    from skgpstruct._gpstruct.prior_variance_cv import cv_prior_variance

    res = cv_prior_variance(data, n_classes, random_state=0)[1]
    return cv_posterior(data, n_classes, res["variance"][res["band"]], random_state=0)[:2]


@pytest.mark.parametrize("sigma2", [0.3, 10.0])
def test_validation_keeps_the_bayesian_posterior_where_the_model_holds(sigma2):
    # labels drawn from the model (weights from N(0, sigma^2)): at the true
    # variance the held-out log losses of every T are within one standard
    # error of each other (sigma^2 = 0.3: 1.1572 to 1.1582, SE 0.015), and
    # so are the calibration errors (1.3 % to 2.9 %, SE 1.2 %): the rule
    # keeps the Bayesian posterior; at sigma^2 = 10 the Bayesian posterior
    # has the lowest log loss itself (0.536, against 0.572 at T = 0.01)
    X, y = _model_data(sigma2, seed=4)
    data = SequenceData.from_sequences(X, y, n_features=X[0].shape[1])
    T, res = cv_temperature(data, 4, sigma2, random_state=0)
    assert T == 1.0
    if sigma2 == 0.3:  # the bands, not the minimum, decide
        assert np.argmin(res["log_loss"]) != 0
    else:
        assert np.argmin(res["log_loss"]) == 0
    # chosen with the variance: a warm posterior (sigma^2 = 0.3: 0.2 and
    # T = 0.5; sigma^2 = 10: 5 and T = 1)
    variance, T = _cv(X, y)
    assert T >= 0.5 and abs(np.log10(variance / sigma2)) <= np.log10(5.0) + 1e-12


def test_validation_cools_the_posterior_on_rare_binary_features(shared_dir):
    # chunking, papers' features, fold 0: thousands of rare binary features
    # under one prior variance, the spread is too wide (held-out log loss
    # 1.4 at T = 1, 0.5 at T = 0.1)
    b = load_benchmark("chunking", features="gpstruct")
    train = b.folds[0][0]
    X = [b.X[i] for i in train]
    classes = np.unique(np.concatenate([b.y[i] for i in train]))
    y = [np.searchsorted(classes, b.y[i]) for i in train]
    X = [sp.csr_matrix(x) for x in X]
    assert _cv(X, y)[1] <= 0.25


# ------------------------------------- the cold posterior's mean (c_T)


def _map(sigma2, n_sequences=80):
    from skgpstruct import RandomizedCRFTagger
    from skgpstruct._gpstruct.posterior_cv import _laplace_variances

    X, y = _model_data(sigma2, seed=4, n_sequences=n_sequences)
    # the fitted parameters, columns the label codes 0..3 of ``data``
    crf = RandomizedCRFTagger(c2=0.5 / sigma2, max_iter=1000, tol=1e-10).fit(X, y)._params()
    data = SequenceData.from_sequences(X, y)
    return X, y, crf, data, _laplace_variances(crf, data, sigma2)


def test_mean_scale_is_the_optimum_along_the_mode():
    from skgpstruct._gpstruct.posterior_cv import _mean_scales, _ray_objective, _spread_draws

    _, _, crf, data, (s_w, s_b) = _map(10.0)
    draws = _spread_draws(s_w, s_b, data, np.random.default_rng(0))
    scales = []
    for T in (1e-8, 0.1, 0.3, 1.0):
        (c,) = _mean_scales(crf, s_w, s_b, data, [T], 10.0, np.random.default_rng(0))
        f = _ray_objective(crf, data, draws, T, 10.0)
        # the derivative against central differences, at c and at 1.5
        for at in (c, 1.5):
            h = 1e-5
            fd = (f(at + h)[0] - f(at - h)[0]) / (2 * h)
            assert_allclose(f(at)[1], fd, rtol=1e-5, atol=1e-6)
        # a minimum of the ray's objective (the same draws as the search) on
        # [1, 20], to the search's tolerance
        assert f(c)[0] <= f(1.01 * c)[0], (T, c)
        if c / 1.01 >= 1.0:
            assert f(c)[0] <= f(c / 1.01)[0], (T, c)
        scales.append(c)
    # no spread: the mode itself (the CRF objective's stationarity along
    # its own ray; the CRF is fitted to tol 1e-10)
    assert abs(scales[0] - 1.0) < 1e-3
    # the mean moves out as the spread grows
    assert np.all(np.diff(scales) > 0.02), scales


def test_mean_scales_bracketed_from_colder_match_each_alone():
    # the roots solved from the coldest temperature up, each bracketed from
    # the one below, are the roots solved alone on [1, 20] with the same
    # draws (to the 1e-3 of the search); c_T grows with T
    from scipy.optimize import brentq

    from skgpstruct._gpstruct.posterior_cv import _mean_scales, _ray_objective, _spread_draws

    _, _, crf, data, (s_w, s_b) = _map(10.0)
    grid = (1.0, 0.5, 0.25, 0.1, 0.05, 0.025, 0.01)
    scales = _mean_scales(crf, s_w, s_b, data, grid, 10.0, np.random.default_rng(3))
    draws = _spread_draws(s_w, s_b, data, np.random.default_rng(3))
    for T, c in zip(grid, scales):
        f = _ray_objective(crf, data, draws, T, 10.0)
        alone = brentq(lambda x: f(x)[1], 1.0, 20.0, xtol=1e-6)
        assert abs(c - alone) < 2e-3, (T, c, alone)
    assert np.all(np.diff(scales) < 0), scales  # grid from 1 down
    assert scales[0] > 1.3 and scales[-1] < 1.05, scales


@pytest.mark.parametrize("sigma2, T", [(10.0, 1.0), (3.0, 0.3)])
def test_mean_scale_predicts_the_variational_mean(sigma2, T):
    # the fitted cold posterior's means are c_T times the mode along the
    # ray, for the unary weights and the transitions alike (measured: 10 /
    # 1.0: c 1.647, fitted 1.744 and 1.647; 3 / 0.3: c 1.120, fitted 1.124
    # and 1.099); without c_T the Laplace stand-in is too flat
    from skgpstruct._gpstruct.posterior_cv import _mean_scales

    X, y, crf, data, (s_w, s_b) = _map(sigma2)
    (c,) = _mean_scales(crf, s_w, s_b, data, [T], sigma2, np.random.default_rng(0))
    gp = GPStructTagger(kernel_variance=sigma2, temperature=T, random_state=0,
                        n_samples=32).fit(X, y)
    unary = np.linalg.norm(gp.coef_) / np.linalg.norm(crf.coef)
    transitions = np.linalg.norm(gp.transition_mean_) / np.linalg.norm(crf.transition)
    assert c > 1.1
    assert abs(unary - c) < 0.1 * c and abs(transitions - c) < 0.1 * c, (c, unary,
                                                                          transitions)


def test_cv_posterior_same_numbers_whatever_n_jobs():
    # the folds run in threads: every table entry bit for bit
    from skgpstruct._gpstruct.posterior_cv import cv_posterior

    X, y = _model_data(3.0, seed=2, n_sequences=60)
    data = SequenceData.from_sequences(X, y, n_features=X[0].shape[1])
    one = cv_posterior(data, 4, [1.0, 3.0, 10.0], random_state=1)
    two = cv_posterior(data, 4, [1.0, 3.0, 10.0], random_state=1, n_jobs=2)
    assert one[:2] == two[:2]
    for key in one[2]:
        np.testing.assert_array_equal(one[2][key], two[2][key], err_msg=key)


def test_cv_posterior_holds_one_crf_at_a_time(monkeypatch):
    # each fold's CRFs along the variances are scored as they are fitted:
    # (n_features x n_labels) weights once, not once per (fold, variance)
    import weakref

    from skgpstruct._gpstruct import posterior_cv as _posterior_cv

    scored = weakref.WeakSet()  # the CRFs scored so far that are still alive
    live = []
    score = _posterior_cv._posterior_scores

    def counting(crf, *args):
        scored.add(crf)
        live.append(len(scored))
        return score(crf, *args)

    monkeypatch.setattr(_posterior_cv, "_posterior_scores", counting)
    X, y = _model_data(3.0, seed=2, n_sequences=30)
    data = SequenceData.from_sequences(X, y, n_features=X[0].shape[1])
    _posterior_cv.cv_posterior(data, 4, [1.0, 3.0, 10.0], random_state=1)
    assert len(live) == 9  # 3 folds x 3 variances
    assert max(live) == 1
