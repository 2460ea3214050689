"""Checks of Adam's conjugate additive GP (``tests/_additive_gp.py``, the model
of ``benchmarks/coupled_additive.py``) and, through it, of the package's KL."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from skgpstruct.gp.kl import mixture_kl

from . import _additive_gp


@pytest.fixture(scope="module")
def ca():
    return _additive_gp


@pytest.fixture(scope="module")
def data(ca):
    rng = np.random.default_rng(0)
    X, y = ca.make_data(100, rng)
    # fixed hyperparameters (s1, l1, s2, l2, sigma^2), near the fitted ones
    hyp = np.array([0.4, 0.8, 1.2, 0.6, 0.25])
    return X, y, hyp


@pytest.fixture(autouse=True)
def _one_thread():
    with threadpool_limits(limits=1):
        yield


def test_inducing_at_data_is_exact(ca, data):
    X, y, hyp = data
    exact = ca.exact_log_evidence(X, y, hyp)
    st = ca.optimal_q(X.T.copy(), X, y, hyp, coupled=True, jitter=1e-12)
    assert abs(st["collapsed"] - exact) < 1e-6
    assert abs(ca.elbo(st, X, y, hyp)[0] - exact) < 1e-6


@pytest.mark.parametrize("coupled", [True, False])
def test_elbo_below_evidence(ca, data, coupled):
    X, y, hyp = data
    exact = ca.exact_log_evidence(X, y, hyp)
    rng = np.random.default_rng(1)
    for M in (3, 10, 25):
        Z = rng.uniform(-3.5, 3.5, size=(2, M))
        st = ca.optimal_q(Z, X, y, hyp, coupled=coupled)
        value, _ = ca.elbo(st, X, y, hyp)
        assert value <= exact + 1e-9
        assert np.isclose(value, st["collapsed"], rtol=0, atol=1e-8)
    # mean-field never beats coupled at the same Z
    st_c = ca.optimal_q(Z, X, y, hyp, coupled=True)
    st_m = ca.optimal_q(Z, X, y, hyp, coupled=False)
    assert st_m["collapsed"] <= st_c["collapsed"] + 1e-9


def test_mean_field_correlation_is_zero(ca, data):
    X, y, hyp = data
    Z = np.stack([np.linspace(-3, 3, 8)] * 2)
    st = ca.optimal_q(Z, X, y, hyp, coupled=False)
    _, _, cov = ca.predict_sparse(st, Z, X[:20], hyp)
    assert np.all(cov == 0.0)
    st = ca.optimal_q(Z, X, y, hyp, coupled=True)
    _, _, cov = ca.predict_sparse(st, Z, X[:20], hyp)
    assert np.all(cov < 0)  # the coupled posterior anti-correlates f1 and f2


def test_kl_matches_numpy(ca, data):
    X, y, hyp = data
    M = 6
    Z = np.stack([np.linspace(-3, 3, M), np.linspace(-2.5, 2.5, M)])
    st = ca.optimal_q(Z, X, y, hyp, coupled=True)
    m, S = st["m_v"], st["S_v"]
    # whitened: KL(N(m, S) || N(0, I))
    direct = 0.5 * (np.trace(S) + m @ m - m.size - np.linalg.slogdet(S)[1])
    assert np.isclose(mixture_kl(m.reshape(1, 2, M), st["q_sqrt"]), direct,
                      rtol=1e-10, atol=1e-10)
    # unwhitened: the same number against the prior blockdiag(K1, K2)
    L = st["L"]
    mu, Su, Kuu = L @ m, L @ S @ L.T, L @ L.T
    Kinv = np.linalg.inv(Kuu)
    unwhitened = 0.5 * (np.trace(Kinv @ Su) + mu @ Kinv @ mu - mu.size
                        + np.linalg.slogdet(Kuu)[1] - np.linalg.slogdet(Su)[1])
    assert np.isclose(unwhitened, direct, rtol=1e-6)
    # mean-field factors: the package KL of (1, 2, M, M) equals the sum
    st = ca.optimal_q(Z, X, y, hyp, coupled=False)
    m, S = st["m_v"], st["S_v"]
    assert np.allclose(S[:M, M:], 0.0)
    direct = 0.5 * (np.trace(S) + m @ m - m.size - np.linalg.slogdet(S)[1])
    assert np.isclose(mixture_kl(m.reshape(1, 2, M), st["q_sqrt"]), direct,
                      rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("coupled", [True, False])
def test_z_gradient_matches_finite_differences(ca, data, coupled):
    X, y, hyp = data
    Z = np.stack([np.linspace(-2.8, 2.9, 5), np.linspace(-2.7, 2.6, 5)])
    st = ca.optimal_q(Z, X, y, hyp, coupled=coupled)
    g = ca.z_gradient(Z, X, y, hyp, st)
    h = 1e-5
    fd = np.zeros_like(Z)
    for idx in np.ndindex(Z.shape):
        Zp, Zm = Z.copy(), Z.copy()
        Zp[idx] += h
        Zm[idx] -= h
        fd[idx] = (ca.optimal_q(Zp, X, y, hyp, coupled)["collapsed"]
                   - ca.optimal_q(Zm, X, y, hyp, coupled)["collapsed"]) / (2 * h)
    assert np.allclose(g, fd, rtol=1e-5, atol=1e-5)


def test_exact_predictions_match_dense(ca, data):
    X, y, hyp = data
    Xs = X[:5] + 0.1
    mean, var, cov = ca.predict_exact(X, y, Xs, hyp)
    k1, k2 = ca.kernels_from(hyp)
    c = ca._col
    P = k1(c(X[:, 0])) + k2(c(X[:, 1])) + hyp[4] * np.eye(y.size)
    C = np.vstack([k1(c(Xs[:, 0]), c(X[:, 0])), k2(c(Xs[:, 1]), c(X[:, 1]))])
    post = -C @ np.linalg.solve(P, C.T)
    post[:5, :5] += k1(c(Xs[:, 0]))
    post[5:, 5:] += k2(c(Xs[:, 1]))
    assert np.allclose(mean.T.ravel(), C @ np.linalg.solve(P, y))
    assert np.allclose(var.T.ravel(), np.diag(post))
    assert np.allclose(cov, np.diag(post[:5, 5:]))


def test_best_mean_field_gap_is_the_posterior_mutual_information(ca, data):
    # With inducing points at every input the mean-field bound is the best
    # any factorised q(f1) q(f2) reaches; its gap to the exact log evidence
    # must be the posterior mutual information of f1 and f2, computed here
    # independently: I(f1; f2 | y) = I(f1, f2; y) - I(f1; y) - I(f2; y) for
    # independent priors, I(f; y) = log det(I + A K A^T / s2) / 2, i.e.
    # (log det(s2 I + K1) + log det(s2 I + K2) - log det P - n log s2) / 2
    # with P = s2 I + K1 + K2: the limit of the MF - coupled gap as the
    # inducing points cover the inputs (the coupled bound reaching the
    # evidence).
    X, y, hyp = data
    n = y.size
    k1, k2 = ca.kernels_from(hyp)
    K1, K2 = k1(X[:, :1]), k2(X[:, 1:])
    s2 = hyp[4]
    eye = np.eye(n)
    mi = 0.5 * (np.linalg.slogdet(s2 * eye + K1)[1] + np.linalg.slogdet(s2 * eye + K2)[1]
                - np.linalg.slogdet(s2 * eye + K1 + K2)[1] - n * np.log(s2))
    exact = ca.exact_log_evidence(X, y, hyp)
    st = ca.optimal_q(X.T.copy(), X, y, hyp, coupled=False, jitter=1e-12)
    assert mi > 0.1  # the test can fail: the latents are dependent a posteriori
    assert ca.posterior_mutual_information(X, hyp) == pytest.approx(mi, rel=1e-9)
    assert exact - st["collapsed"] == pytest.approx(mi, abs=1e-5)
