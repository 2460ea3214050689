"""GPStructTagger's stochastic variational inference (optimizer="svi") and
its validation at scale (_gpstruct/svi.py, _gpstruct/split_cv.py)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_array_equal

from skgpstruct import GPStructTagger
from skgpstruct._gpstruct.fitting import LBFGS_MAX_WORK, resolve_fit_params
from skgpstruct._gpstruct.split_cv import split_posterior
from skgpstruct._gpstruct.svi import StochasticFeatureELBO
from skgpstruct._input.sequences import SequenceData
from skgpstruct._gpstruct.prior_variance_cv import PRIOR_VARIANCE_GRID
from skgpstruct.gp.weight_space import FeatureParams, WeightSpaceObjective
from skgpstruct.likelihoods import CRFLikelihood
from sklearn.exceptions import ConvergenceWarning as MaxIterWarning

from .test_gp_features import _model_data


def _tiny(seed=0, n=20, D=15, V=3):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 7, n)
    X = sp.random(lengths.sum(), D, density=0.25, random_state=seed, format="csr")
    X.data[:] = 1.0
    X = X[:, np.flatnonzero(np.diff(X.tocsc().indptr))]  # every feature used
    y = rng.integers(0, V, lengths.sum())
    D = X.shape[1]
    params = FeatureParams(0.5 * rng.standard_normal((D, V)),
                           np.exp(rng.uniform(-2, 0, (D, V))),
                           0.5 * rng.standard_normal((V, V)),
                           np.exp(rng.uniform(-2, 0, (V, V))), 0.7, 1.3)
    return X, lengths, y, params


def test_minibatch_gradient_is_unbiased():
    # E[(N / B) grad of a minibatch] against the full-batch gradient of the
    # same cold ELBO (the T x T-covariance objective, pathwise, many draws):
    # every coordinate within 5 standard errors of the difference
    X, lengths, y, params = _tiny()
    N, V, T = lengths.size, 3, 0.5
    svi = StochasticFeatureELBO(X, lengths, y, V, temperature=T, jitter=1e-2, n_samples=1,
                                learn=(True, True))
    x = svi.pack(params)
    rng = np.random.default_rng(1)
    B, R = 5, 4000
    draws = np.empty((R, x.size))
    for r in range(R):
        idx = rng.choice(N, B, replace=False)
        _, g = svi.batch(x, idx, rng.integers(2 ** 31, size=B))
        full = np.zeros(x.size)
        W = full[:svi.n_block].reshape(-1, 2 * V)
        W[g.rows] = g.grad_rows
        full[svi.n_block:] = g.grad_rest
        draws[r] = (N / B) * full
    wso = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, V, jitter=1e-2,
                               n_samples=500, temperature=T)
    ref = []
    for k in range(16):
        _, g = wso(wso.layout.pack(params), np.arange(N), np.arange(N) + 1000 * k)
        p = wso.layout.unpack(g)  # the same slots, read as arrays
        D = params.m.shape[0]
        sl = wso.layout.slices
        m, ls = g[sl["m"]].reshape(D, V), g[sl["s"]].reshape(D, V)
        ref.append(np.concatenate([np.concatenate([m, ls], axis=1).ravel(),
                                   g[sl["m_bin"]], g[sl["s_bin"]],
                                   g[sl["hyperparameters"]]]))
        del p
    ref = np.array(ref)
    # the transition prior variance's gradient is exact in both: compare
    diff = draws.mean(axis=0) - ref.mean(axis=0)
    se = np.sqrt(draws.var(axis=0) / R + ref.var(axis=0) / ref.shape[0])
    z = np.abs(diff) / np.maximum(se, 1e-12)
    assert np.all(z < 5.0), (z.max(), np.argmax(z))
    # and the test can fail: a KL term left out is many standard errors off
    scale = np.abs(ref.mean(axis=0)).max()
    assert scale > 10 * se.max()


def test_minibatch_values_sum_to_the_elbo_estimate():
    # the per-sequence values over all sequences: minus the cold ELBO, the
    # KL terms exact (zero noise: every weight at its mean, no jitter)
    X, lengths, y, params = _tiny(seed=2)
    N, V = lengths.size, 3
    params.s[:] = np.exp(-25.0)
    params.s_bin[:] = np.exp(-25.0)
    svi = StochasticFeatureELBO(X, lengths, y, V, temperature=1.0, jitter=0.0, n_samples=1)
    values, _ = svi.batch(svi.pack(params), np.arange(N), np.arange(N))
    wso = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, V, jitter=1e-14, n_samples=1,
                               learn_variance=False, learn_transition_var=False)
    value, _ = wso(wso.layout.pack(params), np.arange(N), np.arange(N))
    assert np.isclose(values.sum(), value, rtol=1e-6)


def _chain_data(n, seed=0):
    X, y = _model_data(1.0, seed=seed, n_sequences=n, n_features=60, n_classes=3, length=6)
    return X, y


def test_svi_fit_is_deterministic_whatever_n_jobs():
    X, y = _chain_data(150)
    kw = dict(optimizer="svi", kernel_variance=1.0, temperature=0.5, max_iter=3,
              random_state=0, n_predict_samples=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MaxIterWarning)
        a = GPStructTagger(n_jobs=1, **kw).fit(X, y)
        b = GPStructTagger(n_jobs=2, **kw).fit(X, y)
    assert a.optimizer_ == "svi"
    assert_array_equal(a.coef_, b.coef_)
    assert_array_equal(a.coef_var_, b.coef_var_)
    assert_array_equal(a.transition_mean_, b.transition_mean_)
    assert len(a.loss_curve_) == a.n_iter_
    for p, q in zip(a.predict_marginals(X[:5]), b.predict_marginals(X[:5])):
        assert_array_equal(p, q)


def test_svi_stops_by_its_rule_and_warns_at_max_iter():
    X, y = _chain_data(150, seed=1)
    kw = dict(optimizer="svi", kernel_variance=1.0, temperature=0.5, random_state=0)
    gp = GPStructTagger(max_iter=100, **kw).fit(X, y)
    assert gp.n_iter_ < 100  # the paired rule ended it
    with pytest.warns(MaxIterWarning):
        GPStructTagger(max_iter=1, **kw).fit(X, y)


def test_svi_is_as_accurate_as_lbfgs_on_model_data():
    # the same model fitted both ways: held-out token error within 1.5
    # points (binomial noise of 600 tokens is ~1.2 points at 15 %)
    X, y = _chain_data(300, seed=2)
    kw = dict(kernel_variance=1.0, temperature=1.0, random_state=0, n_predict_samples=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = GPStructTagger(optimizer="svi", **kw).fit(X[:200], y[:200])
        lb = GPStructTagger(optimizer="lbfgs", max_iter=100, **kw).fit(X[:200], y[:200])
    es, el = (1.0 - m.score(X[200:], y[200:]) for m in (s, lb))
    assert abs(es - el) < 0.015, (es, el)


def test_auto_picks_svi_by_the_cost_rule():
    X, y = _chain_data(40)
    data = SequenceData.from_sequences(X, y, n_features=X[0].shape[1])
    params = GPStructTagger().get_params()
    assert resolve_fit_params(params, data, 3)["optimizer"] == "lbfgs"
    many = 100 * data.n_tokens * 3 ** 2
    assert many <= LBFGS_MAX_WORK
    # the same data with as many labels as make an evaluation cost more
    V = int(np.ceil(np.sqrt(LBFGS_MAX_WORK / (100 * data.n_tokens)))) + 1
    resolved = resolve_fit_params(params, data, V)
    assert (resolved["optimizer"], resolved["n_samples"]) == ("svi", 1)
    assert resolve_fit_params(dict(params, gradient="score"), data, V)["optimizer"] == "adam"
    assert resolve_fit_params(dict(params, approximation="inducing"), data,
                              V)["optimizer"] == "lbfgs"


@pytest.mark.parametrize("sigma2", [0.3, 10.0])
def test_split_validation_recovers_the_prior_variance(sigma2):
    # data drawn from the model: the held-out split's choice within one
    # step of the grid's 1-2-5 series (0.3: 0.2 or 0.5; 10: 5, 10 or 20)
    # (the posterior-mode CRF's rule, as test_cv_recovers_the_prior_variance
    # checks the K-fold one)
    X, y = _model_data(sigma2, seed=4, n_sequences=2000)
    data = SequenceData.from_sequences(X, y, n_features=X[0].shape[1])
    variance, _, vres, _, _ = split_posterior(data, 4, random_state=0,
                                              choose_temperature=False)
    grid = np.array(PRIOR_VARIANCE_GRID)
    k = int(np.searchsorted(grid, sigma2))
    near = grid[max(k - 1, 0):k + 2]
    assert variance in near, (sigma2, variance, vres)
    # with the temperature: its candidates no less accurate than the best mode
    variance, temperature, vres, tres, (crf, c) = split_posterior(data, 4, random_state=0)
    i = list(tres["variance"]).index(variance)
    j = list(tres["temperature"]).index(temperature)
    rate = vres["error"].min()
    assert tres["error"][i, j] <= rate + np.sqrt(rate * (1 - rate) / (0.1 * data.n_tokens)) + 1e-9
    assert c >= 1.0


def test_split_validation_runs_from_its_size_on():
    from skgpstruct._gpstruct import split_cv

    X, y = _model_data(1.0, seed=5, n_sequences=120, n_features=40, n_classes=3, length=5)
    old = split_cv.SPLIT_MIN_SEQUENCES
    try:
        import skgpstruct._gpstruct.weight_space_form as wsf

        wsf.SPLIT_MIN_SEQUENCES = 100
        gp = GPStructTagger(optimizer="svi", random_state=0, n_predict_samples=16).fit(X, y)
    finally:
        wsf.SPLIT_MIN_SEQUENCES = old
    # one path on one split: a tenth of the tokens held out, no folds
    assert "error" in gp.temperature_cv_results_
    assert gp.kernel_.variance in gp.variance_cv_results_["variance"]
    assert gp.n_iter_ >= 1


def test_temperature_keeps_the_accuracy_of_the_mode():
    # cv_posterior's accuracy condition: an impossible bar (error 0) leaves
    # no pair, and the coldest temperature is taken; no bar (error 1) is
    # the rule without the condition
    from skgpstruct._gpstruct.posterior_cv import TEMPERATURE_GRID, cv_posterior

    X, y = _model_data(1.0, seed=6, n_sequences=120, n_features=40, n_classes=3, length=5)
    data = SequenceData.from_sequences(X, y, n_features=X[0].shape[1])
    free = cv_posterior(data, 3, [0.5, 1.0], random_state=0)
    loose = cv_posterior(data, 3, [0.5, 1.0], random_state=0, mode_error=1.0)
    strict = cv_posterior(data, 3, [0.5, 1.0], random_state=0, mode_error=0.0)
    assert loose[:2] == free[:2]
    assert strict[1] == min(TEMPERATURE_GRID)
