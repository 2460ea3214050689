"""OWL-QN's numba kernels (optim/_owlqn_kernels.py) against numpy references,
and minimize_owlqn's libLBFGS steps and CRFsuite stopping rule."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skgpstruct.optim._owlqn_kernels import (
    constrain_direction,
    pseudo_gradient_into,
    store_pair,
    trial_point,
    two_loop,
)
from skgpstruct.optim.owlqn import minimize_owlqn, pseudo_gradient


def _vectors(n=200, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    x[rng.random(n) < 0.4] = 0.0
    g = rng.standard_normal(n)
    l1 = np.where(rng.random(n) < 0.2, 0.0, 0.7)
    return rng, x, g, l1


def test_pseudo_gradient_kernel_matches_the_numpy_one():
    _, x, g, l1 = _vectors()
    pg = np.empty_like(x)
    pp, xx = pseudo_gradient_into(x, g, l1, pg)
    expected = pseudo_gradient(x, g, l1)
    np.testing.assert_array_equal(pg, expected)
    assert pp == pytest.approx(expected @ expected) and xx == pytest.approx(x @ x)


def test_trial_point_projects_on_the_orthant():
    rng, x, g, l1 = _vectors()
    pg = pseudo_gradient(x, g, l1)
    d = rng.standard_normal(x.shape[0])
    out = np.empty_like(x)
    dg, norm1 = trial_point(x, d, 0.8, pg, l1, out)
    orthant = np.where(x != 0, np.sign(x), -np.sign(pg))
    expected = x + 0.8 * d
    expected[(l1 > 0) & (expected * orthant <= 0)] = 0.0
    np.testing.assert_array_equal(out, expected)
    assert dg == pytest.approx(pg @ (expected - x))
    assert norm1 == pytest.approx(l1 @ np.abs(expected))


def test_two_loop_matches_the_textbook_recursion():
    rng = np.random.default_rng(1)
    n, m = 50, 4
    A = rng.standard_normal((n, n))
    H = A @ A.T + n * np.eye(n)
    S = rng.standard_normal((m, n))
    Y = S @ H
    ys = np.einsum("ij,ij->i", Y, S)
    order = np.array([2, 3, 0, 1])  # oldest to newest rows of a ring buffer
    pg = rng.standard_normal(n)
    gamma = ys[1] / (Y[1] @ Y[1])
    d = np.empty(n)
    two_loop(pg, S, Y, ys, order, gamma, d)
    q, alphas = pg.copy(), []
    for j in order[::-1]:
        a = (S[j] @ q) / ys[j]
        q -= a * Y[j]
        alphas.append(a)
    q *= gamma
    for j, a in zip(order, alphas[::-1]):
        q += (a - (Y[j] @ q) / ys[j]) * S[j]
    np.testing.assert_allclose(d, -q, rtol=1e-12, atol=1e-12)


def test_store_pair_and_constrain_direction():
    rng, x, g, l1 = _vectors()
    xp, gp = rng.standard_normal(x.shape[0]), rng.standard_normal(x.shape[0])
    s, y = np.empty_like(x), np.empty_like(x)
    ys, yy = store_pair(x, xp, g, gp, s, y)
    np.testing.assert_array_equal(s, x - xp)
    np.testing.assert_array_equal(y, g - gp)
    assert ys == pytest.approx(y @ s) and yy == pytest.approx(y @ y)
    d, pg = rng.standard_normal(x.shape[0]), pseudo_gradient(x, g, l1)
    expected = np.where((l1 > 0) & (d * pg >= 0), 0.0, d)
    assert constrain_direction(d, pg, l1) == pytest.approx(pg @ expected)
    np.testing.assert_array_equal(d, expected)


def test_stops_by_crfsuite_delta_over_period():
    # A badly conditioned quadratic: the decrease over the last `period`
    # iterations decides when it stops, as libLBFGS's `past` / `delta`.
    rng = np.random.default_rng(0)
    scales = np.logspace(0, 4, 60)
    target = rng.standard_normal(60)

    def fun(x):
        r = x - target
        return 0.5 * float(scales @ r ** 2) + 10.0, scales * r

    for period in (3, 10):
        x, n_iter, history = minimize_owlqn(fun, np.zeros(60), 0.0, tol=1e-4,
                                            max_iter=500, period=period)
        F = [fun(np.zeros(60))[0]] + history
        stopped = [k for k in range(period, len(F))
                   if F[k - period] - F[k] <= 1e-4 * abs(F[k])]
        assert stopped and stopped[0] == n_iter  # the first iteration it holds


def test_max_iter_is_crfsuite_iterations():
    rng = np.random.default_rng(0)
    target = rng.standard_normal(30)

    def fun(x):
        r = x - target
        return float(np.cosh(r).sum()), np.sinh(r)

    with pytest.warns(ConvergenceWarning, match="max_iter=7"):
        _, n_iter, history = minimize_owlqn(fun, np.zeros(30), 0.1, tol=0.0, max_iter=7)
    assert n_iter == len(history) == 7
    assert np.all(np.diff(history) < 0)


def test_rejects_bad_memory_and_period():
    with pytest.raises(ValueError, match="memory and period"):
        minimize_owlqn(lambda x: (0.0, x), np.zeros(2), 0.0, memory=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, _, _ = minimize_owlqn(lambda x: (float(x @ x), 2 * x), np.ones(2), 0.0,
                                 tol=1e-8)
    np.testing.assert_allclose(x, 0.0, atol=1e-6)
