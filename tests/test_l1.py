"""L1 regularisation (``c1``): OWL-QN against known L1 optima, the KKT
conditions of the CRF objective, proximal AdaGrad's soft-thresholding (lazy
against dense) and RandomizedCRFTagger's ``c1`` surface."""

import warnings

import numpy as np
import pytest
import sklearn
from scipy.special import expit
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.fixes import parse_version

from skgpstruct import RandomizedCRFTagger
from skgpstruct._tagging import base as _base
from skgpstruct.optim.owlqn import minimize_owlqn, pseudo_gradient
from skgpstruct._input.sequences import SequenceData
from skgpstruct.optim.proximal import ProximalAdaGrad, RowSparseGradient
from skgpstruct.datasets import make_chain_data

from .test_sparse_optim import _sparse_problem


# ---------------------------------------------------------------- OWL-QN
def _logistic_problem(seed=0, n=200, d=30, intercept=False):
    """Logistic loss (summed) on random data whose labels depend on 5 of
    the ``d`` features; with ``intercept`` a last column of ones."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w_true = np.zeros(d)
    w_true[:5] = 2 * rng.normal(size=5)
    offset = 1.5 if intercept else 0.0
    y = (rng.random(n) < expit(X @ w_true + offset)).astype(float)
    if intercept:
        X = np.hstack([X, np.ones((n, 1))])
    sign = 2 * y - 1

    def fun(w):
        margin = sign * (X @ w)
        return float(np.logaddexp(0, -margin).sum()), -X.T @ (sign * expit(-margin))

    return X, y, fun


def _assert_kkt(x, grad, l1, atol):
    """Subgradient optimality of ``f + sum l1_i |x_i|``: ``grad_i = -l1_i
    sign(x_i)`` off zero, ``|grad_i| <= l1_i`` at zero."""
    nz = x != 0
    np.testing.assert_allclose(grad[nz], -(l1 * np.sign(x))[nz], rtol=0, atol=atol)
    assert np.all(np.abs(grad[~nz]) <= l1[~nz] + atol)


@pytest.mark.parametrize("c1", [0.5, 5.0, 20.0])
def test_owlqn_reaches_the_l1_logistic_regression_optimum(c1):
    X, y, fun = _logistic_problem()
    x, n_iter, history = minimize_owlqn(fun, np.zeros(30), c1, max_iter=500, tol=1e-12)
    l1 = np.full(30, c1)
    _assert_kkt(x, fun(x)[1], l1, atol=1e-4)
    assert history[-1] == pytest.approx(fun(x)[0] + c1 * np.abs(x).sum(), rel=1e-14)
    assert np.all(np.diff(history) <= 0)  # every accepted step lowers F
    # liblinear minimises ||w||_1 + C sum(log-loss): C = 1 / c1
    kwargs = ({"l1_ratio": 1.0} if parse_version(sklearn.__version__) >= parse_version("1.8")
              else {"penalty": "l1"})
    # liblinear's coordinate order comes from random_state (numpy's global
    # generator when None, which other tests move): fixed here
    ref = LogisticRegression(C=1.0 / c1, solver="liblinear", fit_intercept=False, tol=1e-10,
                             max_iter=10000, random_state=0, **kwargs).fit(X, y).coef_[0]
    np.testing.assert_array_equal(x == 0, ref == 0)
    np.testing.assert_allclose(x, ref, atol=1e-4)
    assert (x == 0).sum() >= 3  # a sparse optimum (the test can fail)


def test_owlqn_leaves_zero_weight_coordinates_unpenalised():
    # An intercept with l1 = 0 may take any sign and is never clipped; the
    # others satisfy the KKT conditions.
    X, y, fun = _logistic_problem(seed=1, intercept=True)
    l1 = np.full(31, 8.0)
    l1[-1] = 0.0
    x, _, _ = minimize_owlqn(fun, np.zeros(31), l1, max_iter=500, tol=1e-12)
    assert x[-1] > 0.5
    _assert_kkt(x, fun(x)[1], l1, atol=1e-4)
    assert (x[:-1] == 0).sum() >= 10


def test_owlqn_without_penalty_is_lbfgs_and_warns_at_max_iter():
    target = np.arange(5.0)

    def fun(x):
        return 0.5 * float((x - target) @ (x - target)), x - target

    x, n_iter, _ = minimize_owlqn(fun, np.zeros(5), 0.0, tol=1e-12)
    np.testing.assert_allclose(x, target, atol=1e-8)
    _, _, fun_log = _logistic_problem()
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        _, n_iter, history = minimize_owlqn(fun_log, np.zeros(30), 0.5, max_iter=2)
    assert n_iter == len(history) == 2
    with pytest.raises(ValueError, match="non-negative"):
        minimize_owlqn(fun, np.zeros(5), -1.0)


def test_pseudo_gradient_is_the_minimum_norm_subgradient():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200) * (rng.random(200) < 0.5)
    g = rng.normal(size=200)
    c = rng.random(200)
    pg = pseudo_gradient(x, g, c)
    for xi, gi, ci, p in zip(x, g, c, pg):
        lo, hi = (gi + ci * np.sign(xi),) * 2 if xi != 0 else (gi - ci, gi + ci)
        assert p == pytest.approx(min(max(0.0, lo), hi))


# ---------------------------------------------------------- CRF objective
@pytest.fixture(scope="module")
def chain():
    X, y = make_chain_data(n_sequences=120, n_classes=4, n_features=8, random_state=1)
    return X[:80], y[:80], X[80:], y[80:]


def _objective_gradient(est, X, y):
    """The fitted CRF's full-batch smooth objective (summed negative
    log-likelihood + c2 term) and its gradient, with the package's exact
    loss, at the fitted parameters (flat, as the estimator packs them)."""
    data = SequenceData.from_sequences(X, [np.searchsorted(est.classes_, t) for t in y])
    theta = est._pack()
    n = data.n_sequences
    loss, grad = est._loss_grad(theta, data, np.arange(n), np.zeros(n, dtype=np.int64), None)
    pen, gpen = est._penalty(theta)
    return theta, loss + pen, grad + gpen


@pytest.mark.parametrize("transitions", ["full", "low_rank"])
def test_owlqn_crf_fit_satisfies_the_kkt_conditions(chain, transitions):
    X, y, _, _ = chain
    c1 = 1.0
    # low-rank transitions make the problem non-convex: OWL-QN as libLBFGS
    # runs it takes about 1,030 iterations there (540 with full ones)
    est = RandomizedCRFTagger(c1=c1, c2=0.01, transitions=transitions, rank=2, tol=1e-10,
                              max_iter=4000, random_state=0, fit_intercept=True).fit(X, y)
    theta, smooth, grad = _objective_gradient(est, X, y)
    cuts = est._layout()
    l1 = np.full_like(theta, c1)
    l1[cuts[1] : cuts[2]] = 0.0  # the bias, unpenalised as under c2
    # the gradient is ~1e3 at the start; the optimality conditions hold to
    # ~1e-3 of c1
    _assert_kkt(theta, grad, l1, atol=5e-3)
    assert np.abs(pseudo_gradient(theta, grad, l1)).max() < 5e-3
    zero = theta == 0
    assert zero[: cuts[1]].any()  # the penalty zeroes weights...
    assert not zero[cuts[1] : cuts[2]].any()  # ...but never the bias
    # the reported objective adds c1 ||w||_1 (bias excluded) to the rest
    penalty = c1 * (np.abs(theta).sum() - np.abs(theta[cuts[1] : cuts[2]]).sum())
    assert est.loss_history_[-1] == pytest.approx(smooth + penalty, rel=1e-12)


def test_the_l1_penalty_is_applied(chain):
    # Without the L1 term in the objective no weight is exactly 0, and the
    # c1-less optimum would score better on the c1 objective.
    X, y, _, _ = chain
    with_l1 = RandomizedCRFTagger(c1=3.0, c2=0.01, tol=1e-8, max_iter=500).fit(X, y)
    without = RandomizedCRFTagger(c2=0.01, tol=1e-8, max_iter=500).fit(X, y)
    assert (without.coef_ != 0).all() and (without.transition_ != 0).all()
    assert (with_l1.coef_ == 0).sum() + (with_l1.transition_ == 0).sum() >= 5

    def l1_objective(est):
        _, smooth, _ = _objective_gradient(est, X, y)
        w = np.concatenate([est.coef_.ravel(), est.transition_.ravel()])
        return smooth + 3.0 * np.abs(w).sum()

    assert l1_objective(with_l1) < l1_objective(without) - 1.0


def test_larger_c1_gives_more_zero_weights(chain):
    X, y, X_te, y_te = chain
    zeros = []
    for c1 in [0.0, 0.3, 1.0, 3.0, 10.0, 30.0]:
        est = RandomizedCRFTagger(c1=c1, c2=0.01, tol=1e-8, max_iter=500).fit(X, y)
        zeros.append(int((est.coef_ == 0).sum() + (est.transition_ == 0).sum()))
        if c1 == 1.0:
            assert est.score(X_te, y_te) > 0.8
    assert zeros == sorted(zeros) and zeros[0] == 0 and zeros[-1] > zeros[1]


def test_c1_zero_is_the_c1_less_fit_bit_for_bit(chain, monkeypatch):
    X, y, _, _ = chain
    ref = RandomizedCRFTagger(c2=0.05).fit(X, y)
    # c1 = 0 runs plain L-BFGS (minimize_owlqn with nothing penalised, as
    # libLBFGS with orthantwise_c = 0)
    plain = _base.minimize_owlqn

    def no_l1(fun, x0, l1, **kwargs):
        if np.any(np.asarray(l1) > 0):
            pytest.fail("an L1 term with c1 = 0")
        return plain(fun, x0, l1, **kwargs)

    monkeypatch.setattr(_base, "minimize_owlqn", no_l1)
    est = RandomizedCRFTagger(c1=0.0, c2=0.05).fit(X, y)
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.intercept_, ref.intercept_)
    np.testing.assert_array_equal(est.transition_, ref.transition_)
    assert est.loss_history_ == ref.loss_history_


def test_c1_parameter_surface(chain):
    X, y, _, _ = chain
    est = RandomizedCRFTagger(c1=0.5)
    assert est.get_params()["c1"] == 0.5 and RandomizedCRFTagger().get_params()["c1"] == 0.0
    assert clone(est).c1 == 0.5
    with pytest.raises(InvalidParameterError, match="c1"):
        RandomizedCRFTagger(c1=-1.0).fit(X, y)
    for optimizer in ("adam", "sgd"):
        with pytest.raises(ValueError, match="use optimizer='lbfgs'|Use optimizer='lbfgs'"):
            RandomizedCRFTagger(c1=0.5, optimizer=optimizer).fit(X, y)
    # "auto" with the randomized loss picks AdaGrad when c1 > 0
    kwargs = dict(c1=2.0, n_top=2, n_sampled=1, learning_rate=0.5, max_iter=3,
                  random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        auto = RandomizedCRFTagger(**kwargs).fit(X, y)
        ada = RandomizedCRFTagger(optimizer="adagrad", **kwargs).fit(X, y)
    np.testing.assert_array_equal(auto.coef_, ada.coef_)


# --------------------------------------------------------- proximal AdaGrad
def _reference_steps(x, grads, lr, decay, l1, lo, hi, eps=1e-8):
    """Dense proximal AdaGrad with L1 and L2, in numpy from its definition:
    the prox of ``l1 |x| + decay / 2 x^2`` with step ``lr / h``."""
    x = x.copy()
    G = np.zeros_like(x)
    d = np.full_like(x, decay)
    c = np.full_like(x, l1)
    d[lo:hi] = c[lo:hi] = 0.0
    for g in grads:
        G += g * g
        h = eps + np.sqrt(G)
        v = x - lr * g / h
        step = np.sign(v) * np.maximum(np.abs(v) - lr * c / h, 0.0) / (1.0 + lr * d / h)
        x = np.where(G > 0, step, x)  # no gradient yet (G = 0): no step size, kept
    return x


@pytest.mark.parametrize("decay", [0.0, 0.3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lazy_l1_steps_equal_the_dense_algorithm(decay, seed):
    # rows skipped for long runs (so that skipped steps shrink some of them
    # to exactly 0), some never touched, one touched once
    x0, grads, touched = _sparse_problem(seed, n_rows=12, n_steps=60)
    lo, hi = 37, 39
    kwargs = dict(n_rows=12, n_cols=3, weight_decay=decay, l1=0.02, undecayed=(lo, hi))
    dense, lazy = ProximalAdaGrad(0.6, **kwargs), ProximalAdaGrad(0.6, **kwargs)
    x_dense, x_lazy = x0.copy(), x0.copy()
    for g, (rows, block, rest) in zip(grads, touched):
        dense.step(x_dense, g)
        lazy.step(x_lazy, RowSparseGradient(rows, block, rest))
    lazy.synchronize(x_lazy)
    expected = _reference_steps(x0, grads, 0.6, decay, 0.02, lo, hi)
    np.testing.assert_allclose(x_dense, expected, rtol=1e-12, atol=1e-14)
    # the lazy closed form of k skipped steps (clipped at 0) is the dense
    # iterate, its exact zeros included
    np.testing.assert_array_equal(x_lazy == 0, x_dense == 0)
    np.testing.assert_allclose(x_lazy, x_dense, rtol=1e-10, atol=1e-14)
    block_zero = (x_dense[:36] == 0).sum()
    assert 0 < block_zero < 33  # some rows shrunk to 0, not all (the test can fail)
    assert (x_dense[lo:hi] != 0).all()  # the unpenalised slice is never thresholded


def test_lazy_catch_up_reaches_zero_between_touches():
    # One row skipped for 50 steps: |x| = 1 shrinks by a = lr l1 / h per
    # step (and the L2 division), reaching 0 part-way; a row touched at
    # every step follows the dense map.
    x0 = np.array([1.0, -1.0, 0.3, 2.0])
    g_first = np.array([1.0, 1.0, 1.0, 1.0])
    for decay in (0.0, 0.05):
        opt = ProximalAdaGrad(0.1, n_rows=2, n_cols=2, weight_decay=decay, l1=0.3)
        dense = ProximalAdaGrad(0.1, n_rows=2, n_cols=2, weight_decay=decay, l1=0.3)
        x, xd = x0.copy(), x0.copy()
        opt.step(x, g_first)
        dense.step(xd, g_first)
        for k in range(50):
            opt.step(x, RowSparseGradient(np.array([1]), np.zeros((1, 2)), np.zeros(0)))
            dense.step(xd, np.zeros(4))
            if k in (5, 20):
                opt.catch_up(x, np.array([0]))
                np.testing.assert_allclose(x[:2], xd[:2], rtol=1e-12, atol=1e-15)
        opt.synchronize(x)
        np.testing.assert_allclose(x, xd, rtol=1e-12, atol=1e-15)
        assert (x[:2] == 0).all() and (xd[:2] == 0).all()


def test_adagrad_crf_fit_with_c1_has_exact_zeros(chain):
    X, y, X_te, y_te = chain
    kwargs = dict(optimizer="adagrad", learning_rate=0.5, max_iter=20, random_state=0,
                  c2=0.01, fit_intercept=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        none = RandomizedCRFTagger(**kwargs).fit(X, y)
        # (stochastic gradients jitter around 0 and soft-thresholding by
        # lr c1 / (n h) per step catches fewer of them than OWL-QN does)
        some = RandomizedCRFTagger(c1=10.0, **kwargs).fit(X, y)
        many = RandomizedCRFTagger(c1=30.0, **kwargs).fit(X, y)
        two = RandomizedCRFTagger(c1=10.0, n_jobs=2, **kwargs).fit(X, y)

    def zeros(e):
        return int((e.coef_ == 0).sum() + (e.transition_ == 0).sum())

    assert zeros(none) == 0 < zeros(some) < zeros(many)
    assert (some.intercept_ != 0).all()
    assert some.score(X_te, y_te) > 0.8
    np.testing.assert_array_equal(some.coef_, two.coef_)
    # the epoch value includes the L1 term: at the end it is the objective
    cuts = some._layout()
    theta = some._pack()
    l1 = 10.0 * (np.abs(theta).sum() - np.abs(theta[cuts[1] : cuts[2]]).sum())
    l2 = 0.01 * (theta @ theta - theta[cuts[1] : cuts[2]] @ theta[cuts[1] : cuts[2]])
    assert some._penalty_value(theta, cuts) == pytest.approx(l1 + l2, rel=1e-12)
