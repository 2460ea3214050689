"""Tests of skgpstruct.gp.elbo: marginals, sampling, expected log-likelihood,
ELBO and its gradients (pathwise and score-function)."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.polynomial.hermite_e import hermegauss
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from threadpoolctl import threadpool_limits

from skgpstruct.chain import log_likelihood
from skgpstruct.gp import (
    ELBOObjective,
    GPTerms,
    JitterWarning,
    LinearKernel,
    RBFKernel,
    VariationalLayout,
    VariationalParams,
    compute_gp_terms,
    draw_normals,
    expected_log_likelihood,
    inducing_cholesky,
    kernel_matrix_grads_to_theta,
    mean_field_to_coupled,
    sequence_marginals,
    split_kernel_scale,
    stable_jitter,
)
from skgpstruct.likelihoods import CRFLikelihood, Likelihood, get_likelihood

# Central differences with step H on a smooth, well-conditioned objective
# (values O(10), Cholesky factors of covariances with eigenvalues >= 1e-4 ...
# O(1)): truncation ~H^2 |f'''| and round-off ~1e-16 |f| / H are both ~1e-10,
# far below the tolerance rtol=1e-5 (with an absolute floor of 1e-6 for
# entries that are ~0; the gradients are O(0.1 - 10)).
H = 1e-5
RTOL, ATOL = 1e-5, 1e-6
CRF = CRFLikelihood()


# --------------------------------------------------------------------------
# references


def _brute_log_prob(F, B, y):
    """log p(y | F, B) of a linear-chain CRF by enumerating all label paths.

    F (P, T, V), B (P, V, V) -> (P,)."""
    P, T, V = F.shape
    paths = np.array(list(itertools.product(range(V), repeat=T)))
    scores = np.zeros((P, len(paths)))
    for t in range(T):
        scores += F[:, t, paths[:, t]]
        if t:
            scores += B[:, paths[:, t - 1], paths[:, t]]
    gold = np.flatnonzero((paths == np.asarray(y)).all(axis=1))[0]
    return scores[:, gold] - logsumexp(scores, axis=1)


def _dense_moments(kernel, X, Z, jitter, q_mu, q_sqrt):
    """Moments of the latent values at all tokens from the full dense GP.

    The inducing values are ``u_j = Lzz v_j`` with ``q(v_j) = N(m, L L^T)``;
    ``f | u ~ N(Kxz Kzz^-1 u, Kxx - Kxz Kzz^-1 Kzx)`` (jitter on both
    diagonals). Returns the means (K, N, V) and the covariance of the
    stacked label-major vector ``[f_0; ...; f_{V-1}]`` (K, V N, V N).
    """
    N, M = X.shape[0], Z.shape[0]
    Kxx = kernel(X) + jitter * np.eye(N)
    Kxz = kernel(X, Z)
    Kzz = kernel(Z) + jitter * np.eye(M)
    Lzz = np.linalg.cholesky(Kzz)
    P = np.linalg.solve(Kzz, Kxz.T).T  # Kxz Kzz^-1
    cond = Kxx - P @ Kxz.T
    K, V, _ = q_mu.shape
    L = q_sqrt if q_sqrt.ndim == 3 else mean_field_to_coupled(q_sqrt)
    PL = np.kron(np.eye(V), P @ Lzz)  # (V N, V M)
    mean = np.einsum("nm,kjm->knj", P @ Lzz, q_mu)
    cov = np.array([np.kron(np.eye(V), cond) + PL @ Lk @ Lk.T @ PL.T for Lk in L])
    return mean, cov


def _problem(seed=0, lengths=(1, 3, 4), D=5, V=2, M=4, Z_is_X=False):
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths)
    N = int(lengths.sum())
    X = rng.standard_normal((N, D))
    Z = X.copy() if Z_is_X else rng.standard_normal((M, D))
    y = rng.integers(0, V, N)
    return X, Z, y, lengths


def _random_params(K, V, M, seed, coupled=False, scale=0.4):
    layout = VariationalLayout(K, V, M, coupled=coupled, learn_weights=K > 1)
    x = np.random.default_rng(seed).standard_normal(layout.size) * scale
    return layout, x, layout.unpack(x)


# --------------------------------------------------------------------------
# GP terms and marginals


@pytest.mark.parametrize("coupled", [False, True])
@pytest.mark.parametrize("Z_is_X", [True, False])
def test_marginals_match_dense_gp(coupled, Z_is_X):
    X, Z, y, lengths = _problem(1, Z_is_X=Z_is_X)
    kernel = RBFKernel(length_scale=1.5, variance=0.8)
    jitter = 1e-3
    K, V, M = 2, 2, Z.shape[0]
    _, _, p = _random_params(K, V, M, seed=2, coupled=coupled)
    terms = compute_gp_terms(kernel, X, lengths, Z, jitter=jitter)
    b, Sigma = sequence_marginals(terms, p.q_mu, p.q_sqrt)
    mean, cov = _dense_moments(kernel, X, Z, jitter, p.q_mu, p.q_sqrt)
    assert_allclose(b, mean, rtol=1e-9, atol=1e-10)
    N = X.shape[0]
    for n in range(lengths.size):
        s, e = terms.offsets[n], terms.offsets[n + 1]
        idx = np.concatenate([j * N + np.arange(s, e) for j in range(V)])
        ref = cov[:, idx][:, :, idx]  # (K, V T, V T), label-major
        if coupled:
            assert Sigma[n].shape == (K, V * (e - s), V * (e - s))
            assert_allclose(Sigma[n], ref, rtol=1e-9, atol=1e-10)
        else:
            T = e - s
            assert Sigma[n].shape == (K, V, T, T)
            for j in range(V):
                blk = ref[:, j * T : (j + 1) * T, j * T : (j + 1) * T]
                assert_allclose(Sigma[n][:, j], blk, rtol=1e-9, atol=1e-10)
    if Z_is_X:
        # the full model: the conditional covariance is only jitter-sized
        for Kt in terms.Ktilde:
            assert np.linalg.eigvalsh(Kt).max() <= 2 * jitter


def test_gp_terms_sparse_dense_and_subset():
    X, Z, y, lengths = _problem(3, lengths=(2, 5, 1, 3), D=6, M=3)
    X[X < 0.3] = 0.0  # make the sparse matrix actually sparse
    kernel = LinearKernel(variance=1.3)
    dense = compute_gp_terms(kernel, X, lengths, Z)
    sparse = compute_gp_terms(kernel, sp.csr_matrix(X), lengths, sp.csr_matrix(Z))
    assert_allclose(sparse.A, dense.A, rtol=1e-12)
    for a, b in zip(sparse.Ktilde, dense.Ktilde):
        assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    idx = np.array([3, 0, 3])
    sub = dense.subset(idx)
    off = dense.offsets
    rows = np.concatenate([np.arange(off[i], off[i + 1]) for i in idx])
    direct = compute_gp_terms(kernel, X[rows], lengths[idx], Z)
    assert_array_equal(sub.offsets, direct.offsets)
    assert_allclose(sub.A, direct.A, rtol=1e-12)
    assert_allclose(sub.Knz, direct.Knz, rtol=1e-12)
    for a, b in zip(sub.Ktilde, direct.Ktilde):
        assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert_array_equal(sub.lengths, lengths[idx])


def test_inducing_cholesky_not_positive_definite():
    Z = np.array([[1.0, 0.0], [1.0, 0.0]])  # duplicate inducing points
    # retried with more jitter (from 1e-10 x the mean diagonal when 0), warned
    with pytest.warns(JitterWarning, match="factorised with 1e-09"):
        L, used = inducing_cholesky(LinearKernel(), Z, jitter=0.0, return_jitter=True)
    assert used == 1e-9
    assert_allclose(L @ L.T, LinearKernel()(Z) + 1e-9 * np.eye(2), rtol=0, atol=1e-15)
    L = inducing_cholesky(LinearKernel(), Z, jitter=1e-4)
    assert_allclose(L @ L.T, LinearKernel()(Z) + 1e-4 * np.eye(2))
    # no jitter up to 1e-4 * 10**JITTER_TRIES = 100 makes -1000 I positive definite
    with pytest.raises(ValueError, match="not positive definite even with 100 on"):
        inducing_cholesky(lambda Z: -1e3 * np.eye(len(Z)), Z, jitter=1e-4)
    with pytest.raises(ValueError, match="non-finite"):
        inducing_cholesky(lambda Z: np.full((2, 2), np.inf), Z, jitter=1e-4)


def test_stable_jitter_grows_until_every_covariance_factorises():
    """A rank-1 kernel with duplicate tokens: ``Ktilde_n`` is 0 + jitter in
    exact arithmetic; with a negative 'kernel residual' injected the jitter
    must grow, and the terms come back computed with it."""
    X = np.array([[1.0], [1.0], [2.0]])
    Z = X[:2]
    used, terms = stable_jitter(LinearKernel(), X, [1, 2], Z, jitter=1e-4)
    assert used == 1e-4  # fine as asked: no warning (warnings are errors here)
    assert all(np.all(np.linalg.eigvalsh(Kt) > 0) for Kt in terms.Ktilde)

    class Shifted(LinearKernel):
        """k(x, x) lowered on the diagonal of the token blocks only: Ktilde
        has eigenvalue -0.005 + jitter."""

        def __call__(self, X, Y=None, eval_gradient=False):
            K = super().__call__(X, Y)
            if Y is None and len(X) != 2:
                K = K - 0.005 * np.eye(len(X))
            return K

    with pytest.warns(JitterWarning, match="using 0.01"):
        used, terms = stable_jitter(Shifted(), X, [3], Z[:1], jitter=1e-4)
    assert used == pytest.approx(1e-2)
    assert np.all(np.linalg.eigvalsh(terms.Ktilde[0]) > 0)


# --------------------------------------------------------------------------
# sampling


def test_draws_depend_only_on_per_sequence_seeds():
    lengths = np.array([3, 1, 4, 3])
    seeds = np.array([11, -5, 2**40, 11])
    eps, eps_bin = draw_normals(lengths, 2, 3, 5, seeds)
    idx = [2, 0]
    eps_s, eps_bin_s = draw_normals(lengths[idx], 2, 3, 5, seeds[idx])
    for a, i in enumerate(idx):
        assert_array_equal(eps_s[a], eps[i])
        assert_array_equal(eps_bin_s[a], eps_bin[i])
    # equal seeds and lengths give equal draws, different seeds do not
    assert_array_equal(eps[3], eps[0])
    assert not np.allclose(eps[2][..., :3], eps[0])
    assert eps[1].shape == (2, 5, 3, 1) and eps_bin[1].shape == (2, 5, 3, 3)
    # negative seeds are taken modulo 2**64
    assert_array_equal(draw_normals([1], 2, 3, 5, [2**64 - 5])[0][0], eps[1])


def test_ell_values_invariant_to_chunking():
    X, Z, y, lengths = _problem(4, lengths=(2, 3, 2, 1, 4))
    kernel = RBFKernel(1.2, 1.0)
    terms = compute_gp_terms(kernel, X, lengths, Z)
    _, _, p = _random_params(2, 2, Z.shape[0], seed=5)
    eps, eps_bin = draw_normals(lengths, 2, 2, 6, np.arange(5) + 40)
    full = expected_log_likelihood(CRF, terms, y, p, eps, eps_bin, return_grad=False)
    for idx in ([4, 1], [0, 2, 3]):
        sub = terms.subset(idx)
        off = terms.offsets
        rows = np.concatenate([np.arange(off[i], off[i + 1]) for i in idx])
        e_sub, eb_sub = draw_normals(lengths[idx], 2, 2, 6, np.asarray(idx) + 40)
        part = expected_log_likelihood(
            CRF, sub, y[rows], p, e_sub, eb_sub, return_grad=False
        )
        assert_allclose(part, full[idx], rtol=1e-12)


def test_draw_normals_rejects_bad_input():
    with pytest.raises(ValueError, match="one per sequence"):
        draw_normals([2, 3], 1, 2, 3, seeds=[1])
    with pytest.raises(ValueError, match="n_samples"):
        draw_normals([2, 3], 1, 2, 0, seeds=[1, 2])
    with pytest.raises(ValueError, match="positive"):
        draw_normals([2, 0], 1, 2, 3, seeds=[1, 2])


# --------------------------------------------------------------------------
# expected log-likelihood against references


def test_ell_matches_brute_force_monte_carlo(seed):
    """Ours (S samples per component) vs an independent estimator: joint
    draws from the dense GP moments, log p by enumerating label paths."""
    X, Z, y, lengths = _problem(6, lengths=(1, 3, 4), V=2)
    kernel = RBFKernel(1.5, 1.0)
    K, V, M, S = 2, 2, Z.shape[0], 4000
    _, _, p = _random_params(K, V, M, seed=7)
    p.weights = np.array([0.3, 0.7])
    terms = compute_gp_terms(kernel, X, lengths, Z, jitter=1e-4)
    seeds = np.random.default_rng(seed).integers(0, 2**31, lengths.size)
    eps, eps_bin = draw_normals(lengths, K, V, S, seeds)
    ours = expected_log_likelihood(CRF, terms, y, p, eps, eps_bin, return_grad=False)

    mean, cov = _dense_moments(kernel, X, Z, 1e-4, p.q_mu, p.q_sqrt)
    rng = np.random.default_rng(seed + 1000)
    N = X.shape[0]
    for n in range(lengths.size):
        s, e = terms.offsets[n], terms.offsets[n + 1]
        T = e - s
        idx = np.concatenate([j * N + np.arange(s, e) for j in range(V)])
        est, var = 0.0, 0.0
        for k in range(K):
            f = rng.multivariate_normal(
                mean[k, s:e].T.ravel(), cov[k][np.ix_(idx, idx)], S
            )
            F = f.reshape(S, V, T).transpose(0, 2, 1)
            B = p.m_bin + np.sqrt(p.s_bin) * rng.standard_normal((S, V, V))
            lp = _brute_log_prob(F, B, y[s:e])
            est += p.weights[k] * lp.mean()
            var += p.weights[k] ** 2 * lp.var(ddof=1) / S
        # both estimators average S i.i.d. draws per component of the same
        # distribution, so each has variance ~var; k = 5 standard errors of the
        # difference: a false failure has probability < 1e-6 per sequence.
        assert abs(ours[n] - est) <= 5 * np.sqrt(2 * var)


def test_ell_zero_variance_equals_crf_at_mean():
    # Z = X with a tiny jitter and tiny q_sqrt: f has variance <= ~2e-8, so
    # the ELL is log p at the mean up to first-order MC noise of size
    # sigma * |d log p / df| * sqrt(T V) / sqrt(S) ~ 1e-4 * 1 * 3 / 10 ~ 3e-5
    # (CRF gradients lie in [-1, 1]); tolerance 1e-3. A unit posterior
    # variance moves the value by O(0.1 - 1) (checked at the end).
    X, Z, y, lengths = _problem(8, lengths=(2, 4, 3), Z_is_X=True)
    kernel = RBFKernel(1.0, 1.0)
    K, V, M = 1, 2, Z.shape[0]
    rng = np.random.default_rng(9)
    p = VariationalParams(
        q_mu=rng.standard_normal((K, V, M)),
        q_sqrt=np.tile(1e-6 * np.eye(M), (K, V, 1, 1)),
        weights=np.ones(1),
        m_bin=rng.standard_normal((V, V)),
        s_bin=np.full((V, V), 1e-12),
    )
    terms = compute_gp_terms(kernel, X, lengths, Z, jitter=1e-8)
    eps, eps_bin = draw_normals(lengths, K, V, 100, [1, 2, 3])
    values = expected_log_likelihood(
        CRF, terms, y, p, eps, eps_bin, return_grad=False
    )
    b, _ = sequence_marginals(terms, p.q_mu, p.q_sqrt)
    for n in range(lengths.size):
        s, e = terms.offsets[n], terms.offsets[n + 1]
        exact = log_likelihood(b[0, s:e], p.m_bin, y[s:e])
        assert abs(values[n] - exact) <= 1e-3
    wide = VariationalParams(p.q_mu, np.tile(np.eye(M), (K, V, 1, 1)), p.weights,
                             p.m_bin, np.ones((V, V)))
    values_wide = expected_log_likelihood(
        CRF, terms, y, wide, eps, eps_bin, return_grad=False
    )
    assert np.abs(values_wide - values).max() > 0.05


def _gauss_hermite_ell(b, C, m_bin, s_bin, y, n_nodes=5):
    """E[log p(y | f, B)] for f_j = b_j + C_j z, B = m + sqrt(s) z' by a
    tensor Gauss-Hermite rule (exact for polynomials of degree <= 9 per
    dimension; ~3e-5 absolute error here)."""
    T, V = b.shape
    d = T * V + V * V
    x, w = hermegauss(n_nodes)
    w = w / np.sqrt(2 * np.pi)
    nodes = np.stack([g.ravel() for g in np.meshgrid(*([x] * d), indexing="ij")], 1)
    weights = np.prod(np.meshgrid(*([w] * d), indexing="ij"), axis=0).ravel()
    zf = nodes[:, : T * V].reshape(-1, V, T)
    F = b[None] + np.einsum("jts,pjs->ptj", C, zf)
    B = m_bin + np.sqrt(s_bin) * nodes[:, T * V :].reshape(-1, V, V)
    return weights @ _brute_log_prob(F, B, y)


def test_ell_estimator_is_unbiased(seed):
    X, Z, y, lengths = _problem(10, lengths=(2, 1), V=2, M=3)
    kernel = RBFKernel(1.3, 1.0)
    K, V, M = 1, 2, Z.shape[0]
    _, _, p = _random_params(K, V, M, seed=11, scale=0.6)
    terms = compute_gp_terms(kernel, X, lengths, Z)
    b, Sigma = sequence_marginals(terms, p.q_mu, p.q_sqrt)
    ref = []
    for n in range(lengths.size):
        s, e = terms.offsets[n], terms.offsets[n + 1]
        C = np.linalg.cholesky(Sigma[n][0])
        ref.append(_gauss_hermite_ell(b[0, s:e], C, p.m_bin, p.s_bin, y[s:e]))
    R, S = 400, 2
    rng = np.random.default_rng(seed)
    draws = np.array(
        [
            expected_log_likelihood(
                CRF, terms, y, p,
                *draw_normals(lengths, K, V, S, rng.integers(0, 2**62, 2)),
                return_grad=False,
            )
            for _ in range(R)
        ]
    )
    se = draws.std(axis=0, ddof=1) / np.sqrt(R)
    # k = 5: with R = 400 the mean is close to normal, so a false failure
    # has probability < 1e-6 per sequence (the quadrature error, ~3e-5, is
    # ~1e-3 standard errors).
    assert np.all(np.abs(draws.mean(axis=0) - ref) <= 5 * se)


class _QuadraticProbe(Likelihood):
    """A smooth stand-in likelihood whose expectation is known exactly.

    ``log p = sum_t (F[t, y_t] - F[t] . F[t] / 2) + sum(B - B * B / 2)``,
    so ``E[log p] = sum_t (b[t, y_t] - (|b_t|^2 + tr Sigma_t) / 2) +
    sum(m - (m^2 + s) / 2)`` (``tr Sigma_t`` the sum over labels of the
    marginal variances): a check of the sampling's means *and* variances.
    """

    has_gradient = True

    def _log_prob(self, F, B, y):
        T = F.shape[1]
        own = F[:, np.arange(T), y].sum(axis=1)
        return own - 0.5 * (F * F).sum(axis=(1, 2)) + (B - 0.5 * B * B).sum(axis=(1, 2))

    def _log_prob_grad(self, F, B, y):
        gF = -F.copy()
        gF[:, np.arange(F.shape[1]), y] += 1.0
        return self._log_prob(F, B, y), gF, 1.0 - B


def _probe_expectation(kernel, X, Z, lengths, y, jitter, p):
    """Exact ``sum_n E[log p]`` of the probe from the dense GP moments."""
    mean, cov = _dense_moments(kernel, X, Z, jitter, p.q_mu, p.q_sqrt)
    K, N, V = mean.shape
    var = np.diagonal(cov, axis1=1, axis2=2).reshape(K, V, N).transpose(0, 2, 1)
    own = mean[:, np.arange(N), y].sum(axis=1)
    unary = own - 0.5 * (mean * mean + var).sum(axis=(1, 2))
    trans = (p.m_bin - 0.5 * (p.m_bin**2 + p.s_bin)).sum() * lengths.size
    return float(np.dot(p.weights, unary + trans))


@pytest.mark.parametrize("coupled", [False, True], ids=["mean_field", "coupled"])
def test_ell_unbiased_exact_probe(coupled, seed):
    X, Z, y, lengths = _problem(28, lengths=(2, 4, 1), V=2, M=3)
    kernel = RBFKernel(1.3, 1.0)
    K, V, M = 2, 2, Z.shape[0]
    _, _, p = _random_params(K, V, M, seed=29, coupled=coupled, scale=0.8)
    p.weights = np.array([0.35, 0.65])
    terms = compute_gp_terms(kernel, X, lengths, Z)
    exact = _probe_expectation(kernel, X, Z, lengths, y, 1e-4, p)
    rng = np.random.default_rng(seed)
    R, S = 300, 3
    draws = np.array([
        expected_log_likelihood(
            _QuadraticProbe(), terms, y, p,
            *draw_normals(lengths, K, V, S, rng.integers(0, 2**62, 3)),
            return_grad=False,
        ).sum()
        for _ in range(R)
    ])
    se = draws.std(ddof=1) / np.sqrt(R)
    # k = 5: the mean of 300 draws is close to normal; P(false failure) < 1e-6.
    # A 5 % error in the sample scale shifts the mean by ~0.1 * sum(var) ~ 20 SE.
    assert abs(draws.mean() - exact) <= 5 * se


def _raw_fd_grad(f, p):
    """Central differences of ``f(params)`` w.r.t. every raw entry
    (lower triangle of q_sqrt only)."""
    out = {}
    for key in _VAR_KEYS:
        base = np.asarray(getattr(p, key), dtype=float)
        g = np.zeros_like(base)
        mask = np.tril(np.ones(base.shape[-2:], bool)) if key == "q_sqrt" else None
        for i in np.ndindex(base.shape):
            if mask is not None and not mask[i[-2:]]:
                continue
            vals = []
            for sgn in (1, -1):
                q = VariationalParams(
                    *(np.array(getattr(p, k2), dtype=float) for k2 in _VAR_KEYS)
                )
                getattr(q, key)[i] += sgn * H
                vals.append(f(q))
            g[i] = (vals[0] - vals[1]) / (2 * H)
        out[key] = g
    return out


@pytest.mark.parametrize(
    "gradient, R, S", [("pathwise", 200, 20), ("score", 200, 20)]
)
def test_gradient_estimators_unbiased_exact_probe(gradient, R, S, seed):
    """Mean of many independent gradient estimates vs the exact gradient of
    the probe's closed-form expectation (finite differences of it)."""
    X, Z, y, lengths = _problem(30, lengths=(2, 3), V=2, M=3)
    kernel = RBFKernel(1.2, 1.0)
    K, V, M = 2, 2, Z.shape[0]
    _, _, p = _random_params(K, V, M, seed=31, scale=0.6)
    p.weights = np.array([0.4, 0.6])
    terms = compute_gp_terms(kernel, X, lengths, Z)
    exact = _raw_fd_grad(
        lambda q: _probe_expectation(kernel, X, Z, lengths, y, 1e-4, q), p
    )
    ref = np.concatenate([exact[k].ravel() for k in _VAR_KEYS])
    rng = np.random.default_rng(seed)
    est = []
    for _ in range(R):
        eps, eps_bin = draw_normals(lengths, K, V, S, rng.integers(0, 2**62, 2))
        _, g = expected_log_likelihood(
            _QuadraticProbe(), terms, y, p, eps, eps_bin,
            gradient=gradient,
        )
        est.append(np.concatenate([g[k].ravel() for k in _VAR_KEYS]))
    est = np.array(est)
    mean, se = est.mean(0), est.std(0, ddof=1) / np.sqrt(R)
    live = se > 0
    assert live.sum() >= 40
    # coordinates without noise (the upper triangle of q_sqrt) must be exact
    assert_allclose(mean[~live], ref[~live], atol=1e-12)
    # k = 6 over ~46 coordinates, each a mean of >= 50 draws (near-normal):
    # P(false failure) < 1e-5 per seed.
    assert np.all(np.abs(mean[live] - ref[live]) <= 6 * se[live])


def test_score_helpers_match_explicit_reference():
    from skgpstruct.gp import _elbo_grads as g

    rng = np.random.default_rng(32)
    S, d = 7, 4
    U = rng.standard_normal((3, d, S))
    lp = rng.standard_normal((3, S)) - 2.0
    Q = rng.standard_normal((3, d, d))
    P = Q @ Q.swapaxes(-1, -2) + np.eye(d)

    def coef(gs, hs):  # explicit per-coordinate Cov(g, h) / Var(h) over axis 0
        return ((gs - gs.mean(0)) * (hs - hs.mean(0))).mean(0) / hs.var(0)

    def cv(gs, hs):  # cross-fitted over the two halves
        h1, h2 = slice(0, S // 2), slice(S // 2, S)
        a1, a2 = coef(gs[h1], hs[h1]), coef(gs[h2], hs[h2])
        return np.concatenate([gs[h1] - a2 * hs[h1], gs[h2] - a1 * hs[h2]]).mean(0)

    for i in range(3):
        u = U[i].T  # (S, d)
        assert_allclose(g.score_mean_grad(U, lp)[i], cv(lp[i][:, None] * u, u),
                        rtol=1e-10)
        h = 0.5 * (u[:, :, None] * u[:, None, :] - P[i])  # (S, d, d)
        ref = cv(lp[i][:, None, None] * h, h)
        assert_allclose(g.score_cov_grad(U, P, lp)[i], 0.5 * (ref + ref.T), rtol=1e-9)
    # the control variate removes a constant baseline exactly (up to the
    # round-off of the expanded moments, whose terms are ~|lp| P^2 ~ 1e3)
    const = np.full((3, S), -5.0)
    assert_allclose(g.score_mean_grad(U, const), 0.0, atol=1e-12)
    assert_allclose(g.score_cov_grad(U, P, const), 0.0, atol=1e-8)
    # without a control variate (the plain score mean, computed here) the
    # baseline would stay
    h = 0.5 * (U[0].T[:, :, None] * U[0].T[:, None, :] - P[0])
    assert np.abs((const[0][:, None, None] * h).mean(0)).max() > 0.1


# --------------------------------------------------------------------------
# gradients: finite differences of the objective fit minimises


_VAR_KEYS = ("q_mu", "q_sqrt", "weights", "m_bin", "s_bin")


def _objective(likelihood, kernel, X, Z, y, lengths, K, V, *, coupled=False,
               hyperparameters="none", n_samples=3, **kw):
    n_hyper = {"none": 0, "all": kernel.n_dims, "scale": 1}[hyperparameters]
    layout = VariationalLayout(K, V, Z.shape[0], coupled=coupled,
                               learn_weights=K > 1, n_hyperparameters=n_hyper)
    return ELBOObjective(get_likelihood(likelihood), kernel, Z, X, lengths, y, layout,
                         hyperparameters=hyperparameters, n_samples=n_samples, **kw)


def _start(objective, seed, scale=0.4):
    """A random point of the objective's flat vector (hyperparameters at
    the kernel's own values)."""
    layout = objective.layout
    x = np.random.default_rng(seed).standard_normal(layout.size) * scale
    x[layout.slices["hyperparameters"]] = objective.initial_hyperparameters()
    return x


@pytest.mark.parametrize("likelihood", ["crf", "pseudo"])
@pytest.mark.parametrize(
    "kernel",
    [LinearKernel(variance=0.7), RBFKernel(length_scale=1.3, variance=0.8)],
    ids=["linear", "rbf"],
)
@pytest.mark.parametrize("coupled", [False, True], ids=["mean_field", "coupled"])
@pytest.mark.parametrize("hyperparameters", ["none", "all", "scale"])
def test_objective_gradient_matches_finite_differences(
    likelihood, kernel, coupled, hyperparameters, assert_grad_fd
):
    X, Z, y, lengths = _problem(12, lengths=(1, 3, 4), V=2, M=4)
    if hyperparameters == "scale":
        kernel = ConstantKernel(1.3) * kernel
    f = _objective(likelihood, kernel, X, Z, y, lengths, 2, 2, coupled=coupled,
                   hyperparameters=hyperparameters)
    x0 = _start(f, seed=13)
    idx, seeds = np.arange(3), np.array([1, 2, 3])
    value, grad = f(x0, idx, seeds, scale=1.7)
    assert value == f(x0, idx, seeds, scale=1.7)[0]
    assert_grad_fd(lambda x: f(x, idx, seeds, scale=1.7)[0], x0, grad,
                   h=H, rtol=RTOL, atol=ATOL)
    # the gradient is not trivially small (the check can fail)
    assert np.abs(grad[f.layout.slices["q_sqrt"]]).max() > 0.1
    if hyperparameters != "none":
        assert np.abs(grad[f.layout.slices["hyperparameters"]]).max() > 1e-3


def test_objective_theta_gradient_sklearn_kernel_and_sparse_inputs(assert_grad_fd):
    # sklearn's kernels go through kernel_gradient_contract's fallback; the
    # linear kernel on sparse X must give the dense result.
    X, Z, y, lengths = _problem(14, lengths=(2, 3), V=3, M=3)
    idx, seeds = np.arange(2), np.array([5, 6])
    f = _objective("crf", ConstantKernel(0.9) * RBF(1.4), X, Z, y, lengths, 1, 3,
                   hyperparameters="all", n_samples=4)
    x0 = _start(f, seed=15)
    _, grad = f(x0, idx, seeds)
    assert_grad_fd(lambda x: f(x, idx, seeds)[0], x0, grad, h=H, rtol=RTOL, atol=ATOL)

    Xs = X.copy()
    Xs[np.abs(Xs) < 0.5] = 0.0
    lin = LinearKernel(variance=0.5)
    dense = _objective("crf", lin, Xs, Z, y, lengths, 1, 3, hyperparameters="all",
                       n_samples=4)
    sparse = _objective("crf", lin, sp.csr_matrix(Xs), sp.csr_matrix(Z), y, lengths,
                        1, 3, hyperparameters="all", n_samples=4)
    x1 = _start(dense, seed=15)
    (vd, gd), (vs, gs) = dense(x1, idx, seeds), sparse(x1, idx, seeds)
    assert vs == pytest.approx(vd, rel=1e-12)
    assert_allclose(gs, gd, rtol=1e-10, atol=1e-12)


def test_kernel_matrix_gradients_by_finite_differences():
    """The gradients w.r.t. Knz / Knn / Kzz themselves (perturbing the
    matrices fed to the whitening), through kernel_matrix_grads_to_theta's
    contract: sum <dF/dK, dK/dtheta> equals dF/dtheta (checked above); here
    one entry of each matrix is perturbed directly."""
    X, Z, y, lengths = _problem(16, lengths=(2, 3), V=2, M=3)
    kernel = RBFKernel(1.1, 0.9)
    K, V, M = 1, 2, Z.shape[0]
    _, _, p = _random_params(K, V, M, seed=17)
    eps, eps_bin = draw_normals(lengths, K, V, 3, [8, 9])
    jitter = 1e-4
    offsets = np.r_[0, np.cumsum(lengths)]
    Knz0 = kernel(X, Z)
    Knn0 = [kernel(X[offsets[n] : offsets[n + 1]]) for n in range(2)]
    Kzz0 = kernel(Z)

    def value(Knz, Knn, Kzz):
        Lzz = np.linalg.cholesky(Kzz + jitter * np.eye(M))
        A = np.linalg.solve(Lzz, Knz.T).T
        Kt = [Knn[n] + jitter * np.eye(lengths[n]) - A[offsets[n] : offsets[n + 1]]
              @ A[offsets[n] : offsets[n + 1]].T for n in range(2)]
        terms = GPTerms(A=A, Ktilde=Kt, offsets=offsets, Knz=Knz, Lzz=Lzz)
        return expected_log_likelihood(CRF, terms, y, p, eps, eps_bin,
                                       return_grad=False).sum()

    terms = compute_gp_terms(kernel, X, lengths, Z, jitter=jitter)
    _, g = expected_log_likelihood(
        CRF, terms, y, p, eps, eps_bin, hyperparameters=True
    )
    E = np.zeros_like(Knz0)
    E[3, 1] = H
    fd = (value(Knz0 + E, Knn0, Kzz0) - value(Knz0 - E, Knn0, Kzz0)) / (2 * H)
    assert g["Knz"][3, 1] == pytest.approx(fd, rel=RTOL, abs=ATOL)
    # symmetric perturbations of the symmetric matrices: <G, E + E^T>
    E = np.zeros((3, 3))
    E[2, 0] = E[0, 2] = H
    fd = (value(Knz0, [Knn0[0], Knn0[1] + E], Kzz0)
          - value(Knz0, [Knn0[0], Knn0[1] - E], Kzz0)) / (2 * H)
    assert 2 * g["Knn"][1][2, 0] == pytest.approx(fd, rel=RTOL, abs=ATOL)
    fd = (value(Knz0, Knn0, Kzz0 + E) - value(Knz0, Knn0, Kzz0 - E)) / (2 * H)
    assert 2 * g["Kzz"][2, 0] == pytest.approx(fd, rel=RTOL, abs=ATOL)
    assert_allclose(g["Kzz"], g["Kzz"].T)
    theta = kernel_matrix_grads_to_theta(kernel, X, lengths, Z, g)
    assert theta.shape == (2,)


def test_coupled_reduces_to_mean_field():
    X, Z, y, lengths = _problem(18, lengths=(3, 2), V=3, M=3)
    kernel = RBFKernel(1.2, 1.0)
    K, V, M = 2, 3, Z.shape[0]
    _, _, p = _random_params(K, V, M, seed=19)
    pc = VariationalParams(p.q_mu, mean_field_to_coupled(p.q_sqrt), p.weights,
                           p.m_bin, p.s_bin)
    eps, eps_bin = draw_normals(lengths, K, V, 5, [3, 4])
    terms = compute_gp_terms(kernel, X, lengths, Z)
    for gradient in ("pathwise", "score"):
        v, g = expected_log_likelihood(CRF, terms, y, p, eps, eps_bin,
                                       gradient=gradient, hyperparameters=True)
        vc, gc = expected_log_likelihood(CRF, terms, y, pc, eps, eps_bin,
                                         gradient=gradient, hyperparameters=True)
        assert_allclose(vc, v, rtol=1e-12)
        for gr in (g, gc):
            gr["theta"] = kernel_matrix_grads_to_theta(kernel, X, lengths, Z, gr)
        for key in ("q_mu", "weights", "m_bin", "s_bin", "theta"):
            assert_allclose(gc[key], g[key], rtol=1e-9, atol=1e-12, err_msg=key)
        for j in range(V):
            blk = gc["q_sqrt"][:, j * M : (j + 1) * M, j * M : (j + 1) * M]
            assert_allclose(blk, g["q_sqrt"][:, j], rtol=1e-9, atol=1e-12)
    # the cross-label blocks of the coupled gradient are not zero: coupling
    # would move away from mean-field
    assert np.abs(gc["q_sqrt"][:, M:, :M]).max() > 1e-3


# --------------------------------------------------------------------------
# score-function estimator


class _ValuesOnlyCRF(Likelihood):
    """A gray-box likelihood: log p values only."""

    def _log_prob(self, F, B, y):
        return log_likelihood(F, B, y)


def test_score_and_pathwise_gradients_agree(seed):
    X, Z, y, lengths = _problem(20, lengths=(1, 2, 3), D=3, V=2, M=3)
    kernel = RBFKernel(1.0, 1.0)
    K, V, M = 2, 2, Z.shape[0]
    _, _, p = _random_params(K, V, M, seed=21)
    terms = compute_gp_terms(kernel, X, lengths, Z)
    R, S = 20, 2000
    rng = np.random.default_rng(seed)
    est = {"pathwise": [], "score": []}
    for _ in range(R):
        eps, eps_bin = draw_normals(lengths, K, V, S, rng.integers(0, 2**62, 3))
        for gradient, lik in (("pathwise", CRF), ("score", _ValuesOnlyCRF())):
            _, g = expected_log_likelihood(lik, terms, y, p, eps, eps_bin,
                                           gradient=gradient)
            est[gradient].append(np.concatenate([g[key].ravel() for key in _VAR_KEYS]))
    a, b = np.array(est["pathwise"]), np.array(est["score"])
    diff = a.mean(0) - b.mean(0)
    se = np.sqrt(a.var(0, ddof=1) / R + b.var(0, ddof=1) / R)
    live = se > 0  # the upper triangle of q_sqrt has zero gradient in both
    assert live.sum() > 40
    # k = 6: the difference over its standard error is ~t-distributed with
    # ~20 degrees of freedom; P(|t| > 6) ~ 1e-5, so over ~46 coordinates a
    # false failure has probability < 1e-3 per seed. The bias of the
    # control-variate coefficient estimated from the same samples is
    # O(1 / S), ~0.1 standard errors here.
    assert np.all(np.abs(diff[live]) <= 6 * se[live])
    # the score estimator is the noisier one (so the test has power)
    assert np.median(b.std(0)[live] / np.maximum(a.std(0)[live], 1e-300)) > 1.5


def test_score_gradient_single_sample_is_plain_score():
    # S = 1: no control variate (a = 0); the estimate is log p * grad log q.
    X, Z, y, lengths = _problem(22, lengths=(2,), V=2, M=2)
    kernel = RBFKernel(1.0, 1.0)
    _, _, p = _random_params(1, 2, 2, seed=23)
    terms = compute_gp_terms(kernel, X, lengths, Z)
    eps, eps_bin = draw_normals(lengths, 1, 2, 1, [7])
    values, g = expected_log_likelihood(
        CRF, terms, y, p, eps, eps_bin, gradient="score"
    )
    ref = values[0] * eps_bin[0][0, 0] / np.sqrt(p.s_bin)
    assert_allclose(g["m_bin"], ref, rtol=1e-12)


# --------------------------------------------------------------------------
# API behaviour and input validation


def test_objective_terms_scale_kl_and_chunks():
    X, Z, y, lengths = _problem(24, lengths=(2, 3), V=2, M=3)
    kernel = LinearKernel()
    terms = compute_gp_terms(kernel, X, lengths, Z)
    f = _objective("crf", kernel, X, Z, y, lengths, 1, 2, terms=terms)
    g = _objective("crf", kernel, X, Z, y, lengths, 1, 2)
    x0 = _start(f, seed=25)
    idx, seeds = np.arange(2), np.array([1, 2])
    v1, g1 = f(x0, idx, seeds, scale=2.0)
    v2, g2 = g(x0, idx, seeds, scale=2.0)
    assert v1 == v2
    assert_array_equal(g1, g2)
    p = f.layout.unpack(x0)
    eps, eps_bin = draw_normals(lengths, 1, 2, 3, seeds)
    values = expected_log_likelihood(CRF, terms, y, p, eps, eps_bin, return_grad=False)
    v0, _ = f(x0, idx, seeds, scale=0.0)
    assert v1 == pytest.approx(-2.0 * values.sum() + v0, rel=1e-12)
    assert v0 > 0  # two KL terms of a non-prior posterior
    # the sum over sequences does not depend on the order of the chunks'
    # contents beyond round-off, and a subset is the ELL of that subset
    v_one, _ = f(x0, idx[:1], seeds[:1], scale=1.0)
    assert v_one == pytest.approx(-values[0] + v0, rel=1e-12)
    params, k = f.unpack(x0)
    assert k is kernel and np.array_equal(params.q_mu, p.q_mu)
    assert f.hyperparameter_bounds() is None
    low, high = f.layout.box(f.transition_prior_var)
    assert f.bounds() == [(None if np.isinf(a) else a, None if np.isinf(b) else b)
                          for a, b in zip(low, high)]


def test_layout_box_bounds_what_exp_and_cholesky_see():
    """The box bounds exactly the entries that go through ``exp`` or into
    a covariance: diagonals (log) and off-diagonals of ``q_sqrt``, mixture
    logits, ``log s_bin``; the means and ``m_bin`` stay free."""
    from skgpstruct.gp.variational import (
        LOG_S_BIN_BOUNDS,
        LOG_SQRT_DIAG_BOUNDS,
        LOGIT_BOUND,
        SQRT_OFFDIAG_BOUND,
        init_variational_params,
    )
    for coupled in (False, True):
        layout = VariationalLayout(2, 2, 3, coupled=coupled, learn_weights=True,
                                   n_hyperparameters=1)
        low, high = layout.box(transition_prior_var=10.0)
        sl = layout.slices
        # which entries are diagonals: pack a q_sqrt of 2 on the diagonal, 0 off
        params = init_variational_params(np.full((3, 2), 0.5), 2, whiten=False,
                                         coupled=coupled, sqrt_scale=2.0)
        tri = layout.pack(params, [0.0])[sl["q_sqrt"]]
        diag = tri != 0
        assert diag.sum() == (12 if coupled else 12)
        assert np.all(low[sl["q_sqrt"]][diag] == LOG_SQRT_DIAG_BOUNDS[0])
        assert np.all(high[sl["q_sqrt"]][diag] == LOG_SQRT_DIAG_BOUNDS[1])
        assert np.all(high[sl["q_sqrt"]][~diag] == SQRT_OFFDIAG_BOUND)
        assert np.all(low[sl["q_sqrt"]][~diag] == -SQRT_OFFDIAG_BOUND)
        assert np.all(high[sl["weights"]] == LOGIT_BOUND)
        assert_allclose(low[sl["s_bin"]], np.log(10.0) + LOG_S_BIN_BOUNDS[0])
        assert_allclose(high[sl["s_bin"]], np.log(10.0) + LOG_S_BIN_BOUNDS[1])
        for name in ("q_mu", "m_bin", "hyperparameters"):
            assert np.all(np.isinf(low[sl[name]])) and np.all(np.isinf(high[sl[name]]))
        # the starting point of a fit lies inside
        x = layout.pack(init_variational_params(np.full((3, 2), 0.5), 2, whiten=False,
                                                coupled=coupled), [0.0])
        assert np.all((low <= x) & (x <= high))


def test_inducing_form_fits_low_rank_data():
    """Issue 11, first row: the inducing-point form on 4 dense features
    (a rank-4 linear kernel, so ``Kzz`` is singular up to the jitter) failed
    with 'Sigma_n not positive definite' for most seeds: the whitened
    initial means were ~100 (``Lzz^-1 u``), the first line search stepped
    ``q_sqrt`` and ``s_bin`` out to exp(34) and the covariances broke. The
    ridge-regularised start and the box make every fit go through without
    any extra jitter (JitterWarning is an error in the test suite)."""
    from skgpstruct import GPStructTagger
    from skgpstruct.datasets import make_chain_data

    for n, seed, variance in ((10, 0, 0.3), (20, 1, 1.0), (30, 0, 100.0)):
        X, y = make_chain_data(n_sequences=n, n_features=4, random_state=seed)[:2]
        est = GPStructTagger(approximation="inducing", kernel_variance=variance,
                             n_samples=10, n_predict_samples=8, max_iter=30,
                             random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(X, y)
        assert est.jitter_ == est.jitter
        assert np.all(np.isfinite(est.elbo_history_))
        assert est.score(X, y) > 0.5


def test_objective_scale_and_theta_bounds_and_unpack():
    X, Z, y, lengths = _problem(24, lengths=(2, 3), V=2, M=3)
    base = LinearKernel(variance=0.7)
    kernel = ConstantKernel(2.0, constant_value_bounds=(0.5, 8.0)) * base
    f = _objective("crf", kernel, X, Z, y, lengths, 1, 2, hyperparameters="scale")
    assert_allclose(f.initial_hyperparameters(), [np.log(2.0)])
    assert_allclose(f.hyperparameter_bounds(), np.log([[0.5, 8.0]]))
    bounds = f.bounds()
    assert len(bounds) == f.layout.size and bounds[0] == (None, None)
    x = _start(f, seed=3)
    x[f.layout.slices["hyperparameters"]] = np.log(3.0)
    _, k = f.unpack(x)
    assert split_kernel_scale(k) == (base, pytest.approx(3.0))
    assert k.k1.constant_value_bounds == (0.5, 8.0)
    # the scaled terms of the base kernel are those of the scaled kernel
    # with the jitter scaled too
    scaled = compute_gp_terms(LinearKernel(variance=0.7 * 3.0), X, lengths, Z,
                              jitter=3e-4)
    assert_allclose(f.terms.scaled(3.0).A, scaled.A, rtol=1e-10)
    g = _objective("crf", base, X, Z, y, lengths, 1, 2, hyperparameters="all")
    assert_allclose(g.initial_hyperparameters(), base.theta)
    with pytest.raises(ValueError, match="ConstantKernel"):
        _objective("crf", base, X, Z, y, lengths, 1, 2, hyperparameters="scale")
    # a fixed constant has no bounds: the box used to come out one entry short
    fixed = ConstantKernel(2.0, constant_value_bounds="fixed") * base
    with pytest.raises(ValueError, match="'fixed'"):
        _objective("crf", fixed, X, Z, y, lengths, 1, 2, hyperparameters="scale")
    layout = VariationalLayout(1, 2, 3)
    with pytest.raises(ValueError, match="hyperparameters must be"):
        ELBOObjective(CRF, base, Z, X, lengths, y, layout, hyperparameters="some")
    with pytest.raises(ValueError, match="needs 1"):
        ELBOObjective(CRF, base, Z, X, lengths, y, layout, hyperparameters="all")


def test_expected_log_likelihood_rejects_bad_input():
    X, Z, y, lengths = _problem(26, lengths=(2, 3), V=2, M=3)
    terms = compute_gp_terms(LinearKernel(), X, lengths, Z)
    _, _, p = _random_params(1, 2, 3, seed=27)
    eps, eps_bin = draw_normals(lengths, 1, 2, 3, [1, 2])
    call = expected_log_likelihood
    with pytest.raises(ValueError, match="eps\\[1\\]"):
        call(CRF, terms, y, p, [eps[0], eps[0]], eps_bin)
    with pytest.raises(ValueError, match="y_flat"):
        call(CRF, terms, y[:-1], p, eps, eps_bin)
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        call(CRF, terms, y + 2, p, eps, eps_bin)
    with pytest.raises(ValueError, match="gradient must be"):
        call(CRF, terms, y, p, eps, eps_bin, gradient="reinforce")
    with pytest.raises(ValueError, match="use gradient='score'"):
        call(_ValuesOnlyCRF(), terms, y, p, eps, eps_bin)
    upper = VariationalParams(p.q_mu, p.q_sqrt.swapaxes(-1, -2).copy(), p.weights,
                              p.m_bin, p.s_bin)
    with pytest.raises(ValueError, match="lower-triangular"):
        call(CRF, terms, y, upper, eps, eps_bin)
    wrong_m = VariationalParams(p.q_mu[:, :, :2], p.q_sqrt, p.weights, p.m_bin, p.s_bin)
    with pytest.raises(ValueError, match="M = 3"):
        call(CRF, terms, y, wrong_m, eps, eps_bin)
    neg = VariationalParams(p.q_mu, p.q_sqrt, p.weights, p.m_bin, -p.s_bin)
    with pytest.raises(ValueError, match="s_bin must be positive"):
        call(CRF, terms, y, neg, eps, eps_bin)
    with pytest.raises(TypeError, match="get_likelihood"):
        call("crf", terms, y, p, eps, eps_bin)
    # values only: a values-only likelihood is fine
    values = call(_ValuesOnlyCRF(), terms, y, p, eps, eps_bin, return_grad=False)
    assert_allclose(values, call(CRF, terms, y, p, eps, eps_bin, return_grad=False))


def test_small_blas_limit_is_restored_under_threads():
    # Concurrent callers (joblib threads, fits side by side in threads) must
    # not leave BLAS limited to one thread: the limiter is reference-counted,
    # and it applies from worker threads too (threadpoolctl >= 3.6 lets only
    # the thread that last set OpenBLAS's count set it, until released: the
    # limits used to do nothing in worker threads, and nested
    # threadpool_limits on two threads left BLAS at 1 for the process).
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    from skgpstruct._utils import parallel as par

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        with par.small_blas():
            assert set(blas_threads()) == {1}
            with par.small_blas():  # re-entrant
                assert set(blas_threads()) == {1}
            assert set(blas_threads()) == {1}
        assert blas_threads() == before

        def work(_):
            with par.small_blas():
                with par.small_blas():
                    np.linalg.cholesky(np.eye(3))
                    return set(blas_threads())

        with ThreadPoolExecutor(4) as ex:
            assert all(inside == {1} for inside in ex.map(work, range(64)))
        assert blas_threads() == before
        assert par._SMALL_BLAS._depth == 0


def test_small_blas_scans_the_libraries_once(monkeypatch):
    # A ThreadpoolController scans every loaded library (milliseconds of
    # system time), and the ELBO's gradient enters the limit several times per
    # evaluation: one made per entry tripled the test suite's time. The
    # limiter makes one, at its first use, and still limits and restores.
    from threadpoolctl import ThreadpoolController, threadpool_info

    from skgpstruct._utils import parallel as par

    made = []

    class Counting(ThreadpoolController):
        def __init__(self):
            made.append(1)
            super().__init__()

    monkeypatch.setattr(par, "ThreadpoolController", Counting)
    limiter = par._SmallBlas()

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        for _ in range(5):
            with limiter:
                assert set(blas_threads()) == {1}
            assert blas_threads() == before
    assert len(made) == 1


# --------------------------------------------------------------------------
# learned kernel scale on fixed terms (optimize_hyperparameters="scale")


@pytest.mark.parametrize("gradient", ["pathwise", "score"])
@pytest.mark.parametrize("coupled", [False, True], ids=["mean_field", "coupled"])
def test_log_scale_matches_scaled_kernel_and_finite_differences(
    gradient, coupled, assert_grad_fd
):
    """``log_scale`` on the terms of k equals the terms of exp(log_scale) k
    (jitter scaled with it); its gradient, and the pathwise gradients of the
    variational parameters under it, match finite differences."""
    X, Z, y, lengths = _problem(21, lengths=(1, 3, 4), V=2, M=4)
    K, V, M, S = 2, 2, Z.shape[0], 3
    layout, x0, p = _random_params(K, V, M, seed=22, coupled=coupled)
    eps, eps_bin = draw_normals(lengths, K, V, S, [4, 5, 6])
    kernel, rho, jitter = LinearKernel(variance=0.7), 0.9, 1e-4
    terms = compute_gp_terms(kernel, X, lengths, Z, jitter=jitter)
    scaled = compute_gp_terms(LinearKernel(variance=0.7 * np.exp(rho)), X, lengths, Z,
                              jitter=jitter * np.exp(rho))

    def ell(x, r):
        return expected_log_likelihood(CRF, terms, y, layout.unpack(x), eps, eps_bin,
                                       return_grad=False, log_scale=r).sum()

    values, grad = expected_log_likelihood(CRF, terms, y, p, eps, eps_bin,
                                           gradient=gradient, log_scale=rho)
    ref = expected_log_likelihood(CRF, scaled, y, p, eps, eps_bin, return_grad=False)
    assert_allclose(values, ref, rtol=1e-10)
    g_fd = (ell(x0, rho + H) - ell(x0, rho - H)) / (2 * H)
    assert abs(g_fd) > 0.1  # the check can fail
    assert grad["log_scale"] == pytest.approx(g_fd, rel=RTOL, abs=ATOL)
    if gradient == "pathwise":
        g_flat = layout.pack_gradient(p, {key: grad[key] for key in _VAR_KEYS})
        assert_grad_fd(lambda x: ell(x, rho), x0, g_flat, h=H, rtol=RTOL, atol=ATOL)
    with pytest.raises(ValueError, match="hyperparameters=True"):
        expected_log_likelihood(CRF, terms, y, p, eps, eps_bin, log_scale=rho,
                                hyperparameters=True)
    with pytest.raises(ValueError, match="finite"):
        expected_log_likelihood(CRF, terms, y, p, eps, eps_bin, log_scale=np.inf)
