"""Tests of skgpstruct.gp.kl and skgpstruct.gp.variational: KL terms, gradients, parameter layout."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.linalg import block_diag
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from skgpstruct.gp.kernels import LinearKernel, RBFKernel, kernel_gradient_contract
from skgpstruct.gp.kl import gauss_kl, mixture_entropy_bound, mixture_kl, transition_kl
from skgpstruct.gp.variational import VariationalLayout, VariationalParams
from skgpstruct.gp.variational import init_variational_params, mean_field_to_coupled

# Central differences with step H: truncation ~H^2 |f'''| ~ 1e-10 and
# round-off ~eps |f| / H ~ 1e-10 at these well-conditioned points (prior
# covariance with eigenvalues >= 1, Cholesky diagonals near 1), so rtol=1e-6
# holds with an absolute floor of 1e-8 for entries that are ~0.
H = 1e-5
RTOL, ATOL = 1e-6, 1e-8
FD = dict(h=H, rtol=RTOL, atol=ATOL)


def _assert_tril_grad_fd(assert_grad_fd, f, q_sqrt, grad_sqrt):
    """Central differences of ``f(L)`` over the lower triangles of the
    Cholesky factors ``q_sqrt`` (the parameters) against ``grad_sqrt``."""
    rows, cols = np.tril_indices(q_sqrt.shape[-1])

    def f_tril(t):
        L = np.zeros_like(q_sqrt)
        L[..., rows, cols] = t.reshape(L.shape[:-2] + (-1,))
        return f(L)

    assert_grad_fd(f_tril, q_sqrt[..., rows, cols].ravel(), grad_sqrt[..., rows, cols],
                   **FD)


def _spd(M, seed):
    A = np.random.default_rng(seed).standard_normal((M, M))
    return A @ A.T / M + np.eye(M)


def _random_params(layout, seed, scale=0.4):
    x = np.random.default_rng(seed).standard_normal(layout.size) * scale
    return layout.unpack(x), x


def _dense_gaussians(params):
    """Full means (K, VM) and covariances (K, VM, VM), label-major."""
    K = params.q_mu.shape[0]
    L = (
        params.q_sqrt
        if params.q_sqrt.ndim == 3
        else mean_field_to_coupled(params.q_sqrt)
    )
    return params.q_mu.reshape(K, -1), L @ L.transpose(0, 2, 1)


def _ref_gauss_kl(m, S, P):
    """KL(N(m, S) || N(0, P)) from the textbook formula."""
    Pinv = np.linalg.inv(P)
    return 0.5 * (
        np.trace(Pinv @ S)
        + m @ Pinv @ m
        - m.size
        + np.linalg.slogdet(P)[1]
        - np.linalg.slogdet(S)[1]
    )


def _ref_mixture_kl(params, Kzz):
    """Dense reference: exact cross-entropies, Jensen entropy bound via scipy."""
    means, covs = _dense_gaussians(params)
    w = params.weights
    K, d = means.shape
    V = params.q_mu.shape[1]
    P = np.eye(d) if Kzz is None else block_diag(*([Kzz] * V))
    ce = [
        _ref_gauss_kl(means[k], covs[k], P)
        + multivariate_normal(means[k], covs[k]).entropy()
        for k in range(K)
    ]
    if K == 1:
        H_ = multivariate_normal(means[0], covs[0]).entropy()
    else:
        logn = np.array(
            [
                [
                    multivariate_normal(means[l], covs[k] + covs[l]).logpdf(means[k])
                    for l in range(K)
                ]
                for k in range(K)
            ]
        )
        H_ = -np.dot(w, logsumexp(np.log(w)[None, :] + logn, axis=1))
    return np.dot(w, ce) - H_, H_


# ---------------------------------------------------------------- gauss_kl


@pytest.mark.parametrize("whiten", [True, False])
def test_gauss_kl_matches_dense_formula(whiten):
    rng = np.random.default_rng(0)
    B, M = 3, 4
    q_mu = rng.standard_normal((B, M))
    q_sqrt = np.tril(rng.standard_normal((B, M, M)), -1) + np.eye(M) * rng.uniform(
        0.5, 1.5, (B, 1, M)
    )
    P = np.eye(M) if whiten else _spd(M, 1)
    expected = sum(_ref_gauss_kl(q_mu[b], q_sqrt[b] @ q_sqrt[b].T, P) for b in range(B))
    got = gauss_kl(q_mu, q_sqrt, None if whiten else P)
    assert got == pytest.approx(expected, rel=1e-12)
    if not whiten:
        assert gauss_kl(
            q_mu, q_sqrt, K_cholesky=np.linalg.cholesky(P)
        ) == pytest.approx(expected, rel=1e-12)
    assert gauss_kl(q_mu[0], q_sqrt[0], None if whiten else P) == pytest.approx(
        _ref_gauss_kl(q_mu[0], q_sqrt[0] @ q_sqrt[0].T, P), rel=1e-12
    )
    # KL of a distribution from itself is zero
    Lp = np.linalg.cholesky(P)
    assert gauss_kl(np.zeros(M), Lp, None if whiten else P) == pytest.approx(
        0.0, abs=1e-12
    )


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("single", [True, False])
def test_gauss_kl_gradients(whiten, single, assert_grad_fd):
    rng = np.random.default_rng(2)
    B, M = 2, 3
    q_mu = rng.standard_normal((B, M))
    q_sqrt = np.tril(rng.standard_normal((B, M, M)) * 0.3, -1) + np.eye(M)
    if single:
        q_mu, q_sqrt = q_mu[0], q_sqrt[0]
    P = None if whiten else _spd(M, 3)
    _, grad = gauss_kl(q_mu, q_sqrt, P, return_grad=True)
    assert grad["q_mu"].shape == q_mu.shape and grad["q_sqrt"].shape == q_sqrt.shape
    assert_grad_fd(lambda m: gauss_kl(m.reshape(q_mu.shape), q_sqrt, P), q_mu.ravel(),
                   grad["q_mu"], **FD)
    _assert_tril_grad_fd(assert_grad_fd, lambda L: gauss_kl(q_mu, L, P), q_sqrt,
                         grad["q_sqrt"])
    assert np.all(np.triu(grad["q_sqrt"].reshape(-1, M, M), 1) == 0)
    assert ("K" in grad) == (not whiten)
    if not whiten:
        D = rng.standard_normal((M, M))
        D = D + D.T  # symmetric direction
        fd_dir = (
            gauss_kl(q_mu, q_sqrt, P + H * D) - gauss_kl(q_mu, q_sqrt, P - H * D)
        ) / (2 * H)
        assert np.vdot(grad["K"], D) == pytest.approx(fd_dir, rel=RTOL)
        assert_allclose(grad["K"], grad["K"].T)


@pytest.mark.parametrize(
    "kernel", [LinearKernel(variance=1.3), RBFKernel(0.7, 1.2)], ids=repr
)
def test_kernel_hyperparameter_gradient_through_prior(kernel, assert_grad_fd):
    # d KL / d theta = <dKL/dKzz, dKzz/dtheta>, with Kzz = k(Z, Z) + jitter I
    rng = np.random.default_rng(4)
    M, V = 4, 2
    Z = rng.random((M, 3))
    q_mu = rng.standard_normal((1, V, M))
    q_sqrt = np.tile(np.eye(M) * 0.5, (1, V, 1, 1))

    def kl(theta):
        k = kernel.clone_with_theta(theta)
        return mixture_kl(q_mu, q_sqrt, K=k(Z) + 0.1 * np.eye(M))

    _, grad = mixture_kl(q_mu, q_sqrt, K=kernel(Z) + 0.1 * np.eye(M), return_grad=True)
    got = kernel_gradient_contract(kernel, Z, None, grad["K"])
    assert_grad_fd(kl, kernel.theta, got, **FD)


# ---------------------------------------------------------- mixture terms


def _layout_cases():
    for coupled in (False, True):
        for K in (1, 2, 3):
            yield pytest.param(coupled, K, id=f"{'coupled' if coupled else 'mf'}-K{K}")


@pytest.mark.parametrize("coupled,K", list(_layout_cases()))
@pytest.mark.parametrize("whiten", [True, False])
def test_mixture_kl_matches_dense_reference(coupled, K, whiten):
    V, M = 2, 3
    layout = VariationalLayout(K, V, M, coupled=coupled, learn_weights=True)
    params, _ = _random_params(layout, seed=10 + K)
    Kzz = None if whiten else _spd(M, 5)
    expected, H_ref = _ref_mixture_kl(params, Kzz)
    got = mixture_kl(params.q_mu, params.q_sqrt, params.weights, Kzz)
    assert got == pytest.approx(expected, rel=1e-10)
    H_got = mixture_entropy_bound(params.q_mu, params.q_sqrt, params.weights)
    assert H_got == pytest.approx(H_ref, rel=1e-10)


def test_k1_is_exact_gaussian_kl():
    V, M = 3, 4
    params, _ = _random_params(VariationalLayout(1, V, M), seed=20)
    Kzz = _spd(M, 6)
    expected = sum(
        _ref_gauss_kl(
            params.q_mu[0, j], params.q_sqrt[0, j] @ params.q_sqrt[0, j].T, Kzz
        )
        for j in range(V)
    )
    assert mixture_kl(params.q_mu, params.q_sqrt, K=Kzz) == pytest.approx(
        expected, rel=1e-12
    )
    assert mixture_kl(params.q_mu, params.q_sqrt, K=Kzz) == pytest.approx(
        gauss_kl(params.q_mu[0], params.q_sqrt[0], Kzz), rel=1e-12
    )
    # whitened KL equals the non-whitened KL of the mapped distribution
    Lzz = np.linalg.cholesky(Kzz)
    u_mu, u_sqrt = params.q_mu @ Lzz.T, Lzz @ params.q_sqrt
    assert mixture_kl(params.q_mu, params.q_sqrt) == pytest.approx(
        mixture_kl(u_mu, u_sqrt, K=Kzz), rel=1e-10
    )


def test_entropy_bound_of_identical_components():
    # A mixture of identical Gaussians is that Gaussian; the Jensen bound is
    # then log-density at the mean under 2S: H - d/2 (1 - log 2), exactly.
    V, M = 2, 3
    params, _ = _random_params(VariationalLayout(1, V, M), seed=21)
    q_mu = np.repeat(params.q_mu, 3, axis=0)
    q_sqrt = np.repeat(params.q_sqrt, 3, axis=0)
    exact = mixture_entropy_bound(params.q_mu, params.q_sqrt)
    bound = mixture_entropy_bound(q_mu, q_sqrt, [0.2, 0.3, 0.5])
    assert bound == pytest.approx(exact - 0.5 * V * M * (1 - np.log(2)), rel=1e-12)


@pytest.mark.parametrize("coupled", [False, True])
def test_jensen_bound_against_monte_carlo(coupled):
    # The bound is a lower bound on the mixture entropy, hence the KL an
    # upper bound on the true KL. Monte Carlo with N fixed-seed draws; k = 5
    # standard errors keeps a false failure below 1e-6 for any seed while the
    # gap between bound and truth (~0.1-0.5 nats here) is far larger than
    # 5 SE (~0.02), so the check that the gap is positive can fail.
    K, V, M, N = 3, 2, 2, 40_000
    layout = VariationalLayout(K, V, M, coupled=coupled, learn_weights=True)
    params, _ = _random_params(layout, seed=30, scale=0.8)
    means, covs = _dense_gaussians(params)
    w = params.weights
    rng = np.random.default_rng(31)
    comp = rng.choice(K, size=N, p=w)
    samples = np.empty((N, means.shape[1]))
    for k in range(K):
        idx = comp == k
        samples[idx] = rng.multivariate_normal(means[k], covs[k], size=idx.sum())
    log_q = logsumexp(
        [
            np.log(w[k]) + multivariate_normal(means[k], covs[k]).logpdf(samples)
            for k in range(K)
        ],
        axis=0,
    )
    Kzz = _spd(M, 7)
    P = block_diag(*([Kzz] * V))
    log_p = multivariate_normal(np.zeros(V * M), P).logpdf(samples)
    H_mc, H_se = -log_q.mean(), log_q.std(ddof=1) / np.sqrt(N)
    kl_mc, kl_se = (log_q - log_p).mean(), (log_q - log_p).std(ddof=1) / np.sqrt(N)
    bound = mixture_entropy_bound(params.q_mu, params.q_sqrt, w)
    kl_bound = mixture_kl(params.q_mu, params.q_sqrt, w, Kzz)
    assert bound <= H_mc + 5 * H_se
    assert kl_bound >= kl_mc - 5 * kl_se
    # and the cross-entropy part is exact: KL_bound - KL_true = H - bound
    assert (kl_bound - kl_mc) == pytest.approx(H_mc - bound, abs=5 * (H_se + kl_se))
    assert H_mc - bound > 5 * H_se


@pytest.mark.parametrize("coupled,K", list(_layout_cases()))
@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("learn_weights", [True, False])
def test_flat_gradient_matches_finite_differences(
    coupled, K, whiten, learn_weights, assert_grad_fd
):
    V, M = 2, 3
    layout = VariationalLayout(K, V, M, coupled=coupled, learn_weights=learn_weights)
    _, x = _random_params(layout, seed=40 + K)
    Kzz = None if whiten else _spd(M, 8)

    def objective(x):
        p = layout.unpack(x)
        return mixture_kl(p.q_mu, p.q_sqrt, p.weights, Kzz) + transition_kl(
            p.m_bin, p.s_bin, 2.0
        )

    p = layout.unpack(x)
    _, g_u = mixture_kl(p.q_mu, p.q_sqrt, p.weights, Kzz, return_grad=True)
    _, g_b = transition_kl(p.m_bin, p.s_bin, 2.0, return_grad=True)
    got = layout.pack_gradient(p, g_u) + layout.pack_gradient(p, g_b)
    assert_grad_fd(objective, x, got, **FD)


@pytest.mark.parametrize("K", [1, 2])
def test_mixture_gradient_wrt_prior_covariance(K):
    V, M = 2, 3
    params, _ = _random_params(VariationalLayout(K, V, M, coupled=True), seed=50)
    Kzz = _spd(M, 9)
    _, g = mixture_kl(params.q_mu, params.q_sqrt, None, Kzz, return_grad=True)
    D = np.random.default_rng(51).standard_normal((M, M))
    D = D + D.T
    fd = (
        mixture_kl(params.q_mu, params.q_sqrt, None, Kzz + H * D)
        - mixture_kl(params.q_mu, params.q_sqrt, None, Kzz - H * D)
    ) / (2 * H)
    assert np.vdot(g["K"], D) == pytest.approx(fd, rel=RTOL)


@pytest.mark.parametrize("K", [1, 2])
@pytest.mark.parametrize("whiten", [True, False])
def test_coupled_reduces_to_mean_field(K, whiten):
    V, M = 3, 2
    params, _ = _random_params(VariationalLayout(K, V, M, learn_weights=True), seed=60)
    Kzz = None if whiten else _spd(M, 10)
    coupled_sqrt = mean_field_to_coupled(params.q_sqrt)
    kl_mf, g_mf = mixture_kl(
        params.q_mu, params.q_sqrt, params.weights, Kzz, return_grad=True
    )
    kl_c, g_c = mixture_kl(
        params.q_mu, coupled_sqrt, params.weights, Kzz, return_grad=True
    )
    assert kl_c == pytest.approx(kl_mf, rel=1e-12)
    assert_allclose(g_c["q_mu"], g_mf["q_mu"], rtol=1e-10, atol=1e-14)
    assert_allclose(g_c["weights"], g_mf["weights"], rtol=1e-10, atol=1e-14)
    # the diagonal blocks carry the mean-field gradients
    blocks = g_c["q_sqrt"].reshape(K, V, M, V, M)[:, np.arange(V), :, np.arange(V), :]
    assert_allclose(
        blocks.transpose(1, 0, 2, 3), g_mf["q_sqrt"], rtol=1e-10, atol=1e-14
    )
    if K == 1:
        # and the rest is zero: a single Gaussian's KL is stationary in the
        # cross-label factors at 0 (not so for K > 1: the entropy bound's
        # alpha alpha^T term couples the labels)
        assert_allclose(
            g_c["q_sqrt"], mean_field_to_coupled(g_mf["q_sqrt"]), rtol=1e-10, atol=1e-14
        )
    if not whiten:
        assert_allclose(g_c["K"], g_mf["K"], rtol=1e-10, atol=1e-14)
    # a non-zero cross-label block changes the KL
    coupled_sqrt[:, M, 0] += 0.5
    assert mixture_kl(params.q_mu, coupled_sqrt, params.weights, Kzz) != pytest.approx(
        kl_mf
    )


def test_transition_kl(assert_grad_fd):
    rng = np.random.default_rng(70)
    m, s = rng.standard_normal((3, 3)), rng.uniform(0.2, 2.0, (3, 3))
    expected = gauss_kl(m.ravel(), np.diag(np.sqrt(s.ravel())), 1.7 * np.eye(9))
    assert transition_kl(m, s, 1.7) == pytest.approx(expected, rel=1e-12)
    _, g = transition_kl(m, s, 1.7, return_grad=True)
    assert_grad_fd(lambda t: transition_kl(t.reshape(3, 3), s, 1.7), m.ravel(),
                   g["m_bin"], **FD)
    assert_grad_fd(lambda t: transition_kl(m, t.reshape(3, 3), 1.7), s.ravel(),
                   g["s_bin"], **FD)
    with pytest.raises(ValueError, match="s_bin must be positive"):
        transition_kl(m, -s)
    with pytest.raises(ValueError, match="prior_var"):
        transition_kl(m, s, 0.0)


# ------------------------------------------------------ layout and init


@pytest.mark.parametrize("coupled,K", list(_layout_cases()))
@pytest.mark.parametrize("learn_weights", [True, False])
def test_pack_unpack_round_trip(coupled, K, learn_weights):
    V, M = 2, 3
    layout = VariationalLayout(K, V, M, coupled=coupled, learn_weights=learn_weights)
    d = V * M if coupled else M
    n_tri = d * (d + 1) // 2 * (K if coupled else K * V)
    assert layout.size == K * V * M + n_tri + (K - 1) * learn_weights + 2 * V * V
    params, x = _random_params(layout, seed=80)
    x2 = layout.pack(params)
    # the documented layout: q_mu, tril(q_sqrt) row by row with log diagonals,
    # K - 1 weight logits, m_bin, log s_bin
    sl = layout.slices
    assert_array_equal(x2[sl["q_mu"]], params.q_mu.ravel())
    L0 = params.q_sqrt.reshape(-1, d, d)[0]
    assert_allclose(
        x2[sl["q_sqrt"]][:3], [np.log(L0[0, 0]), L0[1, 0], np.log(L0[1, 1])]
    )
    assert_array_equal(x2[sl["m_bin"]], params.m_bin.ravel())
    assert_allclose(x2[sl["s_bin"]], np.log(params.s_bin.ravel()))
    if learn_weights:
        assert_allclose(
            np.exp(x2[sl["weights"]]), params.weights[:-1] / params.weights[-1]
        )
    exact = np.ones(layout.size, bool)  # entries that involve no exp / log
    exact[sl["weights"]] = exact[sl["s_bin"]] = False
    rows, cols = np.tril_indices(d)
    n_blocks = (sl["q_sqrt"].stop - sl["q_sqrt"].start) // rows.size
    exact[sl["q_sqrt"]] = ~np.tile(rows == cols, n_blocks)
    # bit-exact where no exp/log is involved, one rounding otherwise
    assert_array_equal(x2[exact], x[exact])
    assert_allclose(x2, x, rtol=1e-14, atol=1e-15)
    p2 = layout.unpack(x2)
    for name in ("q_mu", "q_sqrt", "weights", "m_bin", "s_bin"):
        assert_allclose(getattr(p2, name), getattr(params, name), rtol=1e-14, atol=0)
    assert_array_equal(p2.q_mu, params.q_mu)
    assert_allclose(params.weights.sum(), 1.0)
    if not learn_weights:
        assert_array_equal(params.weights, np.full(K, 1.0 / K))


def test_layout_errors():
    layout = VariationalLayout(2, 2, 3)
    params, x = _random_params(layout, seed=90)
    with pytest.raises(ValueError, match="x must have shape"):
        layout.unpack(x[:-1])
    bad = VariationalParams(
        params.q_mu, params.q_sqrt, np.array([0.3, 0.7]), params.m_bin, params.s_bin
    )
    with pytest.raises(ValueError, match="fixed uniform"):
        layout.pack(bad)
    bad = VariationalParams(
        params.q_mu[:, :1], params.q_sqrt, params.weights, params.m_bin, params.s_bin
    )
    with pytest.raises(ValueError, match="params.q_mu has shape"):
        layout.pack(bad)
    with pytest.raises(ValueError, match="Unknown gradient keys"):
        layout.pack_gradient(params, {"qmu": params.q_mu})
    with pytest.raises(ValueError, match="n_inducing"):
        VariationalLayout(1, 2, 0)
    assert_array_equal(layout.pack_gradient(params, {}), np.zeros(layout.size))


def test_init_variational_params():
    rng = np.random.default_rng(100)
    M, V = 4, 3
    F = rng.dirichlet(np.ones(V), size=M)
    Kzz = _spd(M, 11)
    Lzz = np.linalg.cholesky(Kzz)
    p = init_variational_params(F, whiten=True, kzz_cholesky=Lzz, init_ridge=0.0)
    # whitened means map back onto the centred fractions: u = Lzz v
    assert_allclose(p.q_mu[0] @ Lzz.T, (F - 1.0 / V).T, rtol=1e-12, atol=1e-14)
    # with a ridge: the posterior mean given u observed with noise lam
    lam = 0.3 * np.trace(Kzz) / M
    p = init_variational_params(F, whiten=True, kzz_cholesky=Lzz, init_ridge=0.3)
    expected = Lzz.T @ np.linalg.solve(Kzz + lam * np.eye(M), (F - 1.0 / V))
    assert_allclose(p.q_mu[0], expected.T, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="init_ridge"):
        init_variational_params(F, whiten=True, kzz_cholesky=Lzz, init_ridge=-1.0)
    assert_array_equal(p.q_sqrt, np.tile(np.eye(M), (1, V, 1, 1)))
    assert_array_equal(p.m_bin, 0.0) and assert_array_equal(p.s_bin, 1.0)
    raw = init_variational_params(F, whiten=False, mean_scale=2.0, sqrt_scale=0.5)
    assert_allclose(raw.q_mu[0], 2.0 * (F - 1.0 / V).T)
    assert_allclose(raw.q_sqrt[0, 1], 0.5 * np.eye(M))
    a = init_variational_params(F, 3, whiten=False, coupled=True, random_state=0)
    b = init_variational_params(F, 3, whiten=False, coupled=True, random_state=0)
    assert a.q_sqrt.shape == (3, V * M, V * M)
    assert_array_equal(a.q_mu, b.q_mu)
    assert not np.allclose(a.q_mu[0], a.q_mu[1])  # components are separated
    assert_allclose(a.weights, 1 / 3)
    layout = VariationalLayout(3, V, M, coupled=True)
    assert_array_equal(layout.unpack(layout.pack(a)).q_sqrt, a.q_sqrt)
    with pytest.raises(ValueError, match="kzz_cholesky"):
        init_variational_params(F, whiten=True)


def test_posterior_input_errors():
    q_mu = np.zeros((1, 2, 3))
    L = np.tile(np.eye(3), (1, 2, 1, 1))
    with pytest.raises(ValueError, match="q_sqrt must have shape"):
        mixture_kl(q_mu, L[:, :, :2, :2])
    upper = L.copy()
    upper[0, 0, 0, 2] = 1.0
    with pytest.raises(ValueError, match="lower-triangular"):
        mixture_kl(q_mu, upper)
    with pytest.raises(ValueError, match="positive diagonal"):
        mixture_kl(q_mu, -L)
    with pytest.raises(ValueError, match="sum to 1"):
        mixture_kl(q_mu, L, [0.5])
    with pytest.raises(ValueError, match="not positive definite"):
        mixture_kl(q_mu, L, K=-np.eye(3))
    with pytest.raises(ValueError, match="K must have shape"):
        mixture_kl(q_mu, L, K=np.eye(2))
    with pytest.raises(ValueError, match="NaN"):
        mixture_kl(q_mu * np.nan, L)
    with pytest.raises(ValueError, match="q_mu must have shape"):
        gauss_kl(np.zeros((2, 3)), np.eye(3))


def test_pair_logpdf_guarded_against_a_singular_sum():
    """Issue 11: the mixture entropy's pair term factorised ``Lk Lk^T +
    Ll Ll^T`` unguarded; when it rounds to a singular matrix it is retried
    with jitter (JitterWarning) instead of a raw LinAlgError."""
    from skgpstruct.gp.kl import _pair_logpdf
    from skgpstruct.gp.terms import JitterWarning

    L = np.diag([1.0, 1e-170])  # 1e-340 underflows to 0 in L L^T
    with pytest.warns(JitterWarning, match="mixture components"):
        value, _ = _pair_logpdf(np.zeros(2), L, L, False)
    assert np.isfinite(value)


@pytest.mark.parametrize("coupled", [False, True])
@pytest.mark.parametrize("K", [1, 2])
def test_entropy_bound_gradients(coupled, K, assert_grad_fd):
    """The Jensen entropy bound's own gradients (mixture_kl's FD test sees
    them only through the KL, with the other sign): the means, the lower
    triangles of the Cholesky factors, and the weights along directions
    that stay on the simplex."""
    rng = np.random.default_rng(7 + 2 * K + coupled)
    V, M = 2, 3
    q_mu = rng.standard_normal((K, V, M))
    n = V * M if coupled else M
    shape = (K, n, n) if coupled else (K, V, M, M)
    q_sqrt = np.tril(rng.standard_normal(shape) * 0.3, -1) + np.eye(n)
    w = np.full(K, 1.0 / K) if K == 1 else np.array([0.35, 0.65])
    _, grad = mixture_entropy_bound(q_mu, q_sqrt, w, return_grad=True)
    assert_grad_fd(lambda m: mixture_entropy_bound(m.reshape(q_mu.shape), q_sqrt, w),
                   q_mu.ravel(), grad["q_mu"], **FD)
    _assert_tril_grad_fd(assert_grad_fd, lambda L: mixture_entropy_bound(q_mu, L, w),
                         q_sqrt, grad["q_sqrt"])
    if K > 1:
        d = np.array([1.0, -1.0])
        fd_dir = (mixture_entropy_bound(q_mu, q_sqrt, w + H * d)
                  - mixture_entropy_bound(q_mu, q_sqrt, w - H * d)) / (2 * H)
        assert grad["weights"] @ d == pytest.approx(fd_dir, rel=RTOL, abs=ATOL)
