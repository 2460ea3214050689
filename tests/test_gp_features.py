"""GPStructTagger's weight-space form (approximation="features"): choice of
the form, fitted attributes, hyperparameter rules, and the prior variance
recovered on data drawn from the model."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp
from sklearn.base import clone

from skgpstruct import GPStructTagger, chain
from skgpstruct._input.sequences import SequenceData
from skgpstruct._gpstruct.prior_variance_cv import PRIOR_VARIANCE_GRID, cv_prior_variance
from skgpstruct.datasets import make_chain_data
from skgpstruct.gp import weight_space
from skgpstruct.gp.kernels import LinearKernel, RBFKernel

FAST = dict(n_samples=8, n_predict_samples=16, max_iter=40, random_state=0)


@pytest.fixture(scope="module")
def data():
    """30 short sparse sequences, 8 features + one never active in training."""
    X, y = make_chain_data(n_sequences=36, n_classes=3, n_features=8, sparse=True,
                           length=(3, 8), random_state=0)
    X = [sp.hstack([x, sp.csr_matrix((x.shape[0], 1))], format="csr") for x in X]
    return X[:30], y[:30], X[30:], y[30:]


@pytest.fixture(scope="module")
def fitted(data):
    X, y, _, _ = data
    return GPStructTagger(kernel_variance=3.0, **FAST).fit(X, y)


# ------------------------------------------------------------ which form


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kw, form", [
    (dict(), "features"),
    (dict(kernel=LinearKernel(variance=2.0)), "features"),
    (dict(kernel=RBFKernel()), "inducing"),
    (dict(n_components=2), "inducing"),
    (dict(posterior="coupled"), "inducing"),
])
def test_auto_picks_the_form(data, kw, form):
    X, y, _, _ = data
    params = dict(FAST, max_iter=3, n_inducing=8, kernel_variance=1.0)
    gp = GPStructTagger(**params, **kw).fit(X, y)
    assert gp.approximation_ == form
    assert hasattr(gp, "coef_") == (form == "features")


@pytest.mark.parametrize("kw, match", [
    (dict(kernel=RBFKernel()), "linear kernel"),
    (dict(posterior="coupled"), "mean-field"),
    (dict(n_components=2), "mean-field"),
])
def test_features_form_rejects_what_it_cannot_fit(data, kw, match):
    X, y, _, _ = data
    gp = GPStructTagger(approximation="features", kernel_variance=1.0, **FAST, **kw)
    with pytest.raises(ValueError, match=match):
        gp.fit(X, y)


# ------------------------------------------------------- fitted attributes


def test_coef_shapes_and_unseen_features(fitted, data):
    X, _, _, _ = data
    D = X[0].shape[1]
    assert fitted.coef_.shape == fitted.coef_var_.shape == (3, D)
    # the last feature is never active in training: not part of the model
    assert_array_equal(fitted.coef_var_[:, -1], 0.0)
    assert_array_equal(fitted.coef_[:, -1], 0.0)
    seen = np.flatnonzero(np.diff(sp.vstack(X).tocsc().indptr))
    assert seen.size == D - 1
    assert np.all(fitted.coef_var_[:, seen] > 0)
    # learned from data: the posterior variances shrink below the prior's
    assert np.all(fitted.coef_var_[:, seen] < fitted.kernel_.variance)
    assert fitted.transition_mean_.shape == fitted.transition_var_.shape == (3, 3)


def test_predictions_are_distributions(fitted, data):
    _, _, X_te, y_te = data
    marg = fitted.predict_marginals(X_te)
    assert [m.shape for m in marg] == [(len(t), 3) for t in y_te]
    for m in marg:
        assert np.all(m >= 0)
        assert_allclose(m.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    pred = fitted.predict(X_te)
    assert all(np.isin(p, fitted.classes_).all() for p in pred)
    assert fitted.score(X_te, y_te) > 0.5  # 3 labels: chance is about 1/3


def test_elbo_is_finite_with_unseen_features(fitted, data):
    # regression: coef_var_ is 0 on unseen features, whose log entered the KL
    X, y, _, _ = data
    value = fitted.elbo(X, y)
    assert np.isfinite(value)
    # fresh samples: close to, and on average not above, the fitted bound
    assert abs(value - fitted.elbo_history_[-1]) < 0.1 * abs(fitted.elbo_history_[-1])


def test_clone_and_get_params(fitted):
    params = fitted.get_params()
    assert params["approximation"] == "auto" and params["kernel_variance"] == 3.0
    c = clone(fitted)
    assert not hasattr(c, "coef_")
    assert c.get_params() == params
    gp = GPStructTagger(kernel=LinearKernel(variance=2.0, bias=0.5))
    assert clone(gp).get_params()["kernel__bias"] == 0.5


# ---------------------------------------------------------- hyperparameters


def test_fixed_kernel_variance_is_used(fitted):
    assert fitted.kernel_.variance == 3.0
    assert fitted.kernel_.bias == 0.0


def test_cv_variance_picks_the_argmin_of_its_table(data):
    X, y, _, _ = data
    gp = GPStructTagger(**FAST).fit(X, y)  # kernel_variance="cv", the default
    res = gp.variance_cv_results_
    assert_array_equal(res["variance"], np.sort(PRIOR_VARIANCE_GRID))
    assert res["error"].shape == res["log_loss"].shape == (len(PRIOR_VARIANCE_GRID),)
    assert np.all((res["error"] >= 0) & (res["error"] <= 1))
    best = min(range(len(res["variance"])),
               key=lambda j: (res["error"][j], res["log_loss"][j]))
    assert gp.kernel_.variance == res["variance"][best]
    fixed = GPStructTagger(kernel_variance=3.0, **FAST).fit(X, y)
    assert not hasattr(fixed, "variance_cv_results_")


def test_elbo_variance_is_learned(data):
    X, y, _, _ = data
    gp = GPStructTagger(kernel_variance="elbo", **FAST).fit(X, y)
    assert gp.kernel_.variance != 1.0  # the starting value
    lo, hi = np.exp(weight_space.LOG_VAR_BOUNDS)
    assert lo <= gp.kernel_.variance <= hi


def test_transition_prior_variance(data, fitted):
    X, y, _, _ = data
    # "auto" (the default): the weights' prior variance, one prior over all
    # the CRF's weights as c2
    assert fitted.transition_prior_var_ == fitted.kernel_.variance == 3.0
    # "elbo": learned, at the variational-EM fixed point
    # tau^2 = mean(m_bin^2 + s_bin) up to the L-BFGS tolerance
    learned = GPStructTagger(kernel_variance=3.0, transition_prior_var="elbo",
                             **FAST).fit(X, y)
    tau2 = learned.transition_prior_var_
    assert tau2 != 1.0
    second = np.mean(learned.transition_mean_ ** 2 + learned.transition_var_)
    assert_allclose(tau2, second, rtol=0.05)
    gp = GPStructTagger(kernel_variance=3.0, transition_prior_var=0.5, **FAST).fit(X, y)
    assert gp.transition_prior_var_ == 0.5


def test_warm_start_continues_from_the_posterior(data):
    X, y, _, _ = data
    gp = GPStructTagger(kernel_variance="elbo", **FAST).fit(X, y)
    cold_iter, cold_elbo = gp.n_iter_, gp.elbo_history_[-1]
    gp.set_params(warm_start=True).fit(X, y)
    assert gp.n_iter_ < cold_iter
    # same samples (same random_state): starts at the optimum it reached
    assert gp.elbo_history_[0] >= cold_elbo - 1e-6 * abs(cold_elbo)


def test_warm_start_takes_in_features_first_active_in_the_new_data(data):
    X, y, _, _ = data
    gp = GPStructTagger(kernel_variance=3.0, **FAST).fit(X, y)
    last = X[0].shape[1] - 1
    assert np.all(gp.coef_var_[:, last] == 0)  # never active in the first fit
    # the second fit's data use the last feature wherever a label is class 0
    X2 = [x.tolil() for x in X]
    for x, labels in zip(X2, y):
        x[np.flatnonzero(np.asarray(labels) == gp.classes_[0]), last] = 1.0
    X2 = [x.tocsr() for x in X2]
    gp.set_params(warm_start=True).fit(X2, y)
    cold = GPStructTagger(kernel_variance=3.0, **FAST).fit(X2, y)
    assert_array_equal(gp._active_features_, cold._active_features_)
    assert np.all(gp.coef_var_[:, last] > 0)
    # the new feature marks class 0, in the warm fit as in the cold one
    assert np.argmax(gp.coef_[:, last]) == np.argmax(cold.coef_[:, last]) == 0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_explicitly_stored_zeros_are_not_features(data):
    """The same values give the same model whether a sparse matrix stores
    its zeros or not (a column of stored zeros used to count as a seen
    feature: a prior-sized coef_var_, and other validation draws, which
    changed the chosen temperature)."""
    X, y, _, _ = data
    D = X[0].shape[1]

    def stored_zeros(x):  # the last column (never active) stored as zeros
        x = x.tocoo()
        n = x.shape[0]
        return sp.csr_matrix((np.r_[x.data, np.zeros(n)],
                              (np.r_[x.row, np.arange(n)], np.r_[x.col, np.full(n, D - 1)])),
                             shape=x.shape)

    Xz = [stored_zeros(x) for x in X]
    assert all((a != b).nnz == 0 for a, b in zip(X, Xz)) and Xz[0].nnz > X[0].nnz
    kw = dict(n_samples=4, n_predict_samples=16, max_iter=10, random_state=0)
    a, b = GPStructTagger(**kw).fit(X, y), GPStructTagger(**kw).fit(Xz, y)
    assert a.temperature_ == b.temperature_
    assert_array_equal(a.coef_, b.coef_)
    assert_array_equal(a.coef_var_, b.coef_var_)
    assert np.all(b.coef_var_[:, D - 1] == 0)
    assert Xz[0].nnz > X[0].nnz  # the caller's matrices are left as they were


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_warm_start_uses_a_changed_transition_prior_variance(data):
    X, y, _, _ = data
    gp = GPStructTagger(kernel_variance=3.0, transition_prior_var=0.01, warm_start=True,
                        **FAST).fit(X, y)
    assert gp.transition_var_.max() < 0.02
    gp.set_params(transition_prior_var=100.0).fit(X, y)
    cold = GPStructTagger(kernel_variance=3.0, transition_prior_var=100.0, **FAST).fit(X, y)
    assert gp.transition_prior_var_ == 100.0
    # the prior of the warm fit is the new one: its posterior variances are
    # the cold fit's, not held near the old prior's 0.01
    assert_allclose(gp.transition_var_, cold.transition_var_, rtol=0.05)


def test_n_jobs_does_not_change_the_fit(data, monkeypatch):
    X, y, _, _ = data
    monkeypatch.setattr(weight_space, "CHUNK_SEQUENCES", 7)  # several chunks
    a = GPStructTagger(kernel_variance="elbo", n_jobs=1, **FAST).fit(X, y)
    b = GPStructTagger(kernel_variance="elbo", n_jobs=2, **FAST).fit(X, y)
    assert_array_equal(a.coef_, b.coef_)
    assert_array_equal(a.coef_var_, b.coef_var_)
    assert a.kernel_.variance == b.kernel_.variance


def test_linear_kernel_bias_adds_a_column(data):
    X, y, X_te, _ = data
    D = X[0].shape[1]
    var, bias = 2.0, 0.5
    gp = GPStructTagger(kernel=LinearKernel(variance=var, bias=bias), decode="viterbi",
                        **FAST).fit(X, y)
    assert gp.coef_.shape == gp.coef_var_.shape == (3, D + 1)
    assert np.all(gp.coef_var_[:, D] > 0)  # active on every token
    assert_allclose(gp.kernel_.bias, bias, rtol=1e-15)
    # what the code does: the extra column is the weight of a constant
    # feature of value sqrt(bias / variance), not 1
    c = np.sqrt(bias / var)
    for x, pred in zip(X_te, gp.predict(X_te)):
        U = x @ gp.coef_[:, :D].T + c * gp.coef_[:, D]
        assert_array_equal(pred, gp.classes_[chain.viterbi(U, gp.transition_mean_)[0]])


# ------------------------------------------------ data drawn from the model


def _ffbs(U, B, rng):
    """One exact draw of the labels of a linear-chain CRF (forward
    filtering, backward sampling)."""
    alpha = chain.forward_log(U, B)
    T, V = U.shape
    y = np.empty(T, dtype=np.int64)
    y[-1] = rng.choice(V, p=np.exp(alpha[-1] - logsumexp(alpha[-1])))
    for t in range(T - 2, -1, -1):
        lp = alpha[t] + B[:, y[t + 1]]
        y[t] = rng.choice(V, p=np.exp(lp - logsumexp(lp)))
    return y


def test_ffbs_draws_from_the_chain():
    # the sampler of the next test, against the exact marginals: 4 sd of a
    # binomial proportion
    rng = np.random.default_rng(0)
    U, B = rng.standard_normal((3, 2)), rng.standard_normal((2, 2))
    n = 4000
    draws = np.array([_ffbs(U, B, rng) for _ in range(n)])
    p = chain.marginals(U, B)[0]
    freq = np.stack([(draws == v).mean(axis=0) for v in range(2)], axis=1)
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / n))


def _model_data(sigma2, seed, n_sequences=200, n_features=100, n_classes=4,
                length=8, n_active=4):
    """Sequences of a linear-chain CRF with unary weights and transitions
    ~ N(0, sigma2) on random binary features (n_active per token)."""
    rng = np.random.default_rng(seed)
    W = np.sqrt(sigma2) * rng.standard_normal((n_features, n_classes))
    B = np.sqrt(sigma2) * rng.standard_normal((n_classes, n_classes))
    X, y = [], []
    for _ in range(n_sequences):
        cols = np.concatenate([rng.choice(n_features, n_active, replace=False)
                               for _ in range(length)])
        rows = np.repeat(np.arange(length), n_active)
        x = sp.csr_matrix((np.ones(cols.size), (rows, cols)),
                          shape=(length, n_features))
        X.append(x)
        y.append(_ffbs(np.asarray(x @ W), B, rng))
    return X, y


@pytest.fixture(scope="module")
def model_data():
    return {s2: _model_data(s2, seed=4) for s2 in (0.3, 10.0)}


@pytest.mark.parametrize("sigma2", [0.3, 10.0])
def test_cv_recovers_the_prior_variance(model_data, sigma2):
    # 1600 tokens for 400 unary weights: the prior matters, and validation
    # of the MAP CRF should pick the variance the weights were drawn with,
    # within a factor of 5 (0.3 is not on the grid's 1-2-5 series: 0.2 or
    # 0.5; at sigma^2 = 10 the posterior mode's held-out log loss is lowest
    # at 2 to 5, below the true variance: the mode of a weak prior is
    # over-confident, and a stronger prior makes up for it)
    X, y = model_data[sigma2]
    data = SequenceData.from_sequences(X, y, n_features=X[0].shape[1])
    variance, res = cv_prior_variance(data, 4, random_state=0)
    assert variance in PRIOR_VARIANCE_GRID
    assert abs(np.log10(variance / sigma2)) <= np.log10(5.0) + 1e-12, (sigma2, variance, res)


def test_elbo_variance_grows_with_the_prior_variance(model_data):
    learned = {
        s2: GPStructTagger(kernel_variance="elbo", transition_prior_var="elbo",
                           n_samples=8, max_iter=100, random_state=0)
        .fit(*model_data[s2]).kernel_.variance
        for s2 in (0.3, 10.0)
    }
    print("learned variances", learned)
    assert learned[0.3] < learned[10.0], learned


def test_cv_prior_variance_scoring(model_data):
    X, y = model_data[0.3]
    data = SequenceData.from_sequences(X, y, n_features=X[0].shape[1])
    by_1se, res = cv_prior_variance(data, 4, random_state=0)
    by_error, res1 = cv_prior_variance(data, 4, random_state=0, scoring="error")
    by_loss, res2 = cv_prior_variance(data, 4, random_state=0, scoring="log_loss")
    # the same validation fits, only the criterion differs
    for other in (res1, res2):
        np.testing.assert_array_equal(res["log_loss"], other["log_loss"])
        np.testing.assert_array_equal(res["error"], other["error"])
    grid, err, loss = list(res["variance"]), res["error"], res["log_loss"]
    assert by_loss == grid[np.argmin(loss)]
    assert err[grid.index(by_error)] == err.min()
    # error_1se: the lowest log loss among the errors within one binomial
    # standard error of the lowest (n held-out tokens: every training token)
    n = sum(len(t) for t in y)
    close = err <= err.min() + np.sqrt(err.min() * (1 - err.min()) / n) + 1e-12
    assert by_1se == grid[int(np.argmin(np.where(close, loss, np.inf)))]
    with pytest.raises(ValueError, match="scoring"):
        cv_prior_variance(data, 4, scoring="brier")


def test_cv_prior_variance_1se_breaks_flat_error_by_log_loss():
    # a flat error curve: every variance within the band, the log loss decides;
    # a sharp one: the band holds the lowest error only
    from skgpstruct._gpstruct import prior_variance_cv as _variance_cv

    grid = np.array([0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0])

    def pick(errors, losses, n=1000):
        j = _variance_cv._select(np.asarray(errors) * n, np.asarray(losses) * n, n,
                                 "error_1se")
        return grid[j]

    losses = [0.5, 0.4, 0.3, 0.35, 0.4, 0.45, 0.5]
    assert pick([0.10] * 7, losses) == 1.0
    assert pick([0.20, 0.20, 0.20, 0.20, 0.10, 0.20, 0.20], losses) == 10.0
