"""Tests of skgpstruct.gp.weight_space: pair matrices, moments, the
weight-space ELBO (gradients, chunking, Monte Carlo, KL)."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import norm

from skgpstruct import chain
from skgpstruct.gp import _elbo_grads
from skgpstruct.gp import weight_space as ws
from skgpstruct.gp.kl import gauss_kl, transition_kl
from skgpstruct.gp.weight_space import (
    LOG_S_BOUNDS,
    FeatureLayout,
    FeatureParams,
    WeightSpaceObjective,
    _Blocks,
    feature_moments,
    pair_matrix,
)
from skgpstruct.likelihoods import CRFLikelihood, PseudoLikelihood

# ----------------------------------------------------------------- helpers


def _sparse_tokens(n_tokens, n_features, rng, density=0.4, n_dup=0):
    """Random sparse tokens with integer-ish values; ``n_dup`` extra entries
    repeat existing (row, column) pairs, left uncanonical (duplicates
    stored twice, as a CSR built from raw arrays may have them)."""
    A = rng.random((n_tokens, n_features)) < density
    A[:, 0] = rng.random(n_tokens) < 0.8  # a feature shared by most tokens
    vals = np.where(A, rng.choice([-2.0, 0.5, 1.0, 3.0], size=A.shape), 0.0)
    C = sp.coo_matrix(vals)
    rows, cols, data = C.row, C.col, C.data
    if n_dup and data.size:
        pick = rng.integers(0, data.size, n_dup)
        rows = np.r_[rows, rows[pick]]
        cols = np.r_[cols, cols[pick]]
        data = np.r_[data, rng.standard_normal(n_dup)]
    order = np.argsort(rows, kind="stable")
    rows, cols, data = rows[order], cols[order], data[order]
    indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=n_tokens))]
    X = sp.csr_matrix((data, cols, indptr), shape=(n_tokens, n_features))
    return X


def _dense_pairs(X, T):
    """``P[(a T + t) T + t', d] = x_td x_t'd`` by loops."""
    Xd = X.toarray()  # sums duplicates, the value the matrix represents
    n_g = Xd.shape[0] // T
    P = np.zeros((n_g * T * T, Xd.shape[1]))
    for a in range(n_g):
        for t in range(T):
            for u in range(T):
                for d in range(Xd.shape[1]):
                    P[(a * T + t) * T + u, d] = Xd[a * T + t, d] * Xd[a * T + u, d]
    return P


def _problem(seed=0, lengths=(1, 3, 2, 4, 3), D=6, V=3, density=0.5):
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths)
    N = int(lengths.sum())
    X = _sparse_tokens(N, D, rng, density=density)
    y = rng.integers(0, V, N)
    return X, lengths, y


def _random_x(layout, seed, *, log_var=np.log(2.0), log_tau=np.log(0.7)):
    rng = np.random.default_rng(seed)
    D, V = layout.n_features, layout.n_classes
    params = FeatureParams(
        0.5 * rng.standard_normal((D, V)), np.exp(0.5 * rng.standard_normal((D, V))),
        0.5 * rng.standard_normal((V, V)), np.exp(0.5 * rng.standard_normal((V, V))),
        np.exp(log_var), np.exp(log_tau))
    return layout.pack(params)


# --------------------------------------------------------------- pair_matrix


@pytest.mark.parametrize("T", [1, 2, 3, 5])
@pytest.mark.parametrize("n_dup", [0, 4])
def test_pair_matrix_matches_loops(T, n_dup):
    rng = np.random.default_rng(10 * T + n_dup)
    n_g, D = 4, 5
    X = _sparse_tokens(n_g * T, D, rng, n_dup=n_dup)
    P = pair_matrix(X, T)
    assert P.shape == (n_g * T * T, D)
    # products of a few small numbers: exact in float64 up to the summation
    # of duplicates, a few ulps
    assert_allclose(P.toarray(), _dense_pairs(X, T), rtol=1e-13, atol=1e-13)


def test_pair_matrix_empty_and_all_zero_rows():
    X = sp.csr_matrix((6, 4))
    P = pair_matrix(X, 3)
    assert P.shape == (18, 4) and P.nnz == 0
    X = sp.csr_matrix(np.array([[0.0, 2.0], [0.0, 0.0], [1.0, 3.0], [0.0, 0.0]]))
    assert_allclose(pair_matrix(X, 2).toarray(), _dense_pairs(X, 2))


def test_pair_matrix_gives_covariances():
    rng = np.random.default_rng(1)
    T, n_g, D, V = 4, 3, 6, 2
    X = _sparse_tokens(n_g * T, D, rng, n_dup=3)
    s = rng.random((D, V)) + 0.1
    S = (pair_matrix(X, T) @ s).reshape(n_g, T, T, V)
    Xd = X.toarray()
    for a in range(n_g):
        Xa = Xd[a * T:(a + 1) * T]
        for v in range(V):
            assert_allclose(S[a, :, :, v], Xa @ np.diag(s[:, v]) @ Xa.T, rtol=1e-12)


# ------------------------------------------------------------------ moments


@pytest.mark.parametrize("bucket_tokens", [512, 4])
def test_feature_moments_match_dense(bucket_tokens, monkeypatch):
    # bucket_tokens=4 splits sequences of one length over several buckets
    monkeypatch.setattr(_elbo_grads, "_BUCKET_TOKENS", bucket_tokens)
    rng = np.random.default_rng(2)
    lengths = np.array([3, 1, 3, 2, 3, 4, 2, 3])
    D, V, sigma2, jitter = 7, 3, 2.5, 1e-3
    X = _sparse_tokens(int(lengths.sum()), D, rng, n_dup=5)
    m = rng.standard_normal((D, V))
    s = rng.random((D, V)) + 0.05
    b, Sig = feature_moments(X, lengths, m, s, sigma2, jitter)
    Xd = X.toarray()
    assert_allclose(b[0], np.sqrt(sigma2) * Xd @ m, rtol=1e-12)
    offsets = np.r_[0, np.cumsum(lengths)]
    assert len(Sig) == lengths.size
    for n in range(lengths.size):
        Xn = Xd[offsets[n]:offsets[n + 1]]
        T = lengths[n]
        assert Sig[n].shape == (1, V, T, T)
        for v in range(V):
            dense = sigma2 * (Xn @ np.diag(s[:, v]) @ Xn.T + jitter * np.eye(T))
            assert_allclose(Sig[n][0, v], dense, rtol=1e-12, atol=1e-14)


def test_blocks_backward_is_adjoint_of_moments(monkeypatch):
    # moments are linear in (m, s) (plus the jitter): backward must be the
    # adjoint, <backward(db, Sbar), (dm, ds)> = <db, b(dm)> + <Sbar, Sig(ds)>
    monkeypatch.setattr(_elbo_grads, "_BUCKET_TOKENS", 6)
    rng = np.random.default_rng(3)
    lengths = np.array([2, 3, 1, 3, 2, 2])
    D, V = 5, 2
    X = _sparse_tokens(int(lengths.sum()), D, rng, n_dup=2)
    check_adjoint(_Blocks(X, np.r_[0, np.cumsum(lengths)]), D, V, rng)


def check_adjoint(blocks, D, V, rng):
    """``<backward(db, Sbar), (dm, ds)> = <db, b(dm)> + <Sbar, Sig(ds)>`` at
    random ``(dm, ds, db, Sbar)`` (jitter 0)."""
    dm, ds = rng.standard_normal((D, V)), rng.standard_normal((D, V))
    b, Sig = blocks.moments(dm, ds, 0.0)
    db = rng.standard_normal(b.shape)
    Sbar = [rng.standard_normal(S.shape) for S in Sig]  # not symmetric on purpose
    gm, gs = blocks.backward(db, Sbar, V)
    lhs = np.sum(gm * dm) + np.sum(gs * ds)
    rhs = np.sum(db * b) + sum(np.sum(Sb * S) for Sb, S in zip(Sbar, Sig))
    assert_allclose(lhs, rhs, rtol=1e-12)


# -------------------------------------------------------------- objective


def _objective(lik, learn=(True, True), jitter=1e-2, n_samples=5, seed=0, **kw):
    X, lengths, y = _problem(seed, **kw)
    V = int(kw.get("V", 3))
    return WeightSpaceObjective(lik, X, lengths, y, V, learn_variance=learn[0],
                                learn_transition_var=learn[1], jitter=jitter,
                                n_samples=n_samples)


# Central differences with H = 1e-6 on a ~10-nat objective: round-off
# ~1e-16 * 10 / 1e-6 = 1e-9, truncation ~H^2 |f'''|, |f'''| bounded by the
# conditioning of the per-sequence covariances (eigenvalues >= jitter =
# 1e-2: derivatives of the Cholesky factor grow like jitter^-1.5 = 1e3), so
# ~1e-9. rtol 1e-5 with atol 1e-6 is the suite's check (conftest).
@pytest.mark.parametrize("lik", [CRFLikelihood(), PseudoLikelihood()],
                         ids=["crf", "pseudo"])
@pytest.mark.parametrize("learn", [(True, True), (False, False), (True, False)])
def test_objective_gradient_matches_finite_differences(lik, learn, check_weight_space_grad):
    obj = _objective(lik, learn)
    x = _random_x(obj.layout, 5)
    n = obj.lengths.size
    idx, seeds = np.arange(n), np.arange(100, 100 + n)
    scale = 1.7  # the minibatch scale multiplies the likelihood part only
    # every block of the flat vector, learned hyperparameters included
    check_weight_space_grad(obj, x, idx, seeds, scale, learn)


@pytest.mark.parametrize("learn", [(True, True), (False, False)])
def test_cold_objective_gradient_matches_finite_differences(learn, check_weight_space_grad):
    obj = _objective(CRFLikelihood(), learn)
    obj.temperature = 0.3
    x = _random_x(obj.layout, 6)
    n = obj.lengths.size
    check_weight_space_grad(obj, x, np.arange(n), np.arange(100, 100 + n), 1.7, learn)


def test_temperature_weighs_the_likelihood_only():
    # -obj_T = ell / T - KL, where -obj_1 = ell - KL: on the same draws the
    # KL is what the two share
    warm, cold = (_objective(CRFLikelihood()) for _ in range(2))
    cold.temperature = 0.25
    x = _random_x(warm.layout, 2)
    n = warm.lengths.size
    idx, seeds = np.arange(n), np.arange(n)
    params = warm.layout.unpack(x)
    kl = ws.feature_kl(params.m, params.s) + transition_kl(
        params.m_bin, params.s_bin, params.transition_var)
    ell = -warm(x, idx, seeds, 1.0)[0] + kl
    assert_allclose(-cold(x, idx, seeds, 1.0)[0], ell / 0.25 - kl, rtol=1e-12)
    # the minibatch scale and the temperature multiply
    assert_allclose(-cold(x, idx, seeds, 2.0)[0], 2.0 * ell / 0.25 - kl, rtol=1e-12)


@pytest.mark.parametrize("temperature", [0.0, -1.0, 1.5])
def test_temperature_out_of_range(temperature):
    X, lengths, y = _problem(0)
    with pytest.raises(ValueError, match="temperature must be in"):
        WeightSpaceObjective(CRFLikelihood(), X, lengths, y, 3, temperature=temperature)


def test_objective_pickles_and_evaluates_the_same():
    # process-based joblib backends (dask) ship the objective with the
    # chunk work: it must pickle (its cache lock is dropped and remade)
    import pickle

    obj = _objective(CRFLikelihood())
    x = _random_x(obj.layout, 3)
    n = obj.lengths.size
    idx, seeds = np.arange(n), np.arange(n)
    value, grad = obj(x, idx, seeds, 1.0)  # fills the noise cache
    copy = pickle.loads(pickle.dumps(obj))
    assert copy._noise == {} and copy._noise_lock is not obj._noise_lock
    value2, grad2 = copy(x, idx, seeds, 1.0)
    assert value2 == value
    assert_array_equal(grad2, grad)


def test_fixed_variances_are_fixed_by_the_bounds():
    obj = _objective(CRFLikelihood(), (False, True))
    x = _random_x(obj.layout, 1)
    box = obj.bounds(x)
    start = obj.layout.slices["hyperparameters"].start
    assert box[start] == (x[start], x[start])
    assert box[start + 1] == ws.LOG_VAR_BOUNDS
    sl = obj.layout.slices["s"]
    assert all(b == LOG_S_BOUNDS for b in box[sl])
    assert box[0] == (None, None)


def test_layout_round_trip():
    layout = FeatureLayout(4, 3)
    x = _random_x(layout, 2)
    assert_allclose(layout.pack(layout.unpack(x)), x, rtol=1e-15)
    assert layout.size == 2 * 12 + 2 * 9 + 2


def test_objective_independent_of_threads_and_chunks(monkeypatch, check_chunk_invariance):
    obj = _objective(CRFLikelihood(), n_samples=7,
                     lengths=(1, 3, 2, 4, 3, 2, 2, 5, 1, 3, 3))
    x = _random_x(obj.layout, 3)
    n = obj.lengths.size
    idx, seeds = np.arange(n), np.random.default_rng(0).integers(0, 2**31, n)
    v_one, g_one = obj(x, idx, seeds)
    # four chunks, on threads: bit-identical to serial; a few ulps from one chunk
    check_chunk_invariance(obj, x, idx, seeds, v_one, g_one)
    # per-sequence draws: a subset's value is its sequences' values summed
    # (scale 0 -> KL only, so the ELL part is value(scale=1) - value(scale=0))
    def ell(ids):
        return -(obj(x, ids, seeds[ids], 1.0)[0] - obj(x, ids, seeds[ids], 0.0)[0])
    total = sum(ell(np.array([i])) for i in range(n))
    assert_allclose(ell(idx), total, rtol=1e-12)


def test_noise_cache_is_invisible(monkeypatch):
    """Cached draws give the objective of fresh draws; new seeds are redrawn."""
    lengths = (1, 3, 2, 4, 3, 2, 2, 5, 1, 3, 3)
    cached = _objective(CRFLikelihood(), n_samples=7, lengths=lengths)
    monkeypatch.setattr(ws, "NOISE_CACHE_BYTES", 0)
    fresh = _objective(CRFLikelihood(), n_samples=7, lengths=lengths)
    monkeypatch.undo()
    x = _random_x(cached.layout, 3)
    n = cached.lengths.size
    idx = np.arange(n)
    rng = np.random.default_rng(0)
    for seeds in (rng.integers(0, 2**31, n), rng.integers(0, 2**31, n)):
        for _ in range(2):  # second call: from the cache
            v_c, g_c = cached(x, idx, seeds)
            v_f, g_f = fresh(x, idx, seeds)
            assert v_c == v_f
            assert_array_equal(g_c, g_f)
    assert cached._noise and not fresh._noise
    assert cached._noise_bytes == sum(a.nbytes for _, noise, _ in cached._noise.values()
                                      for part in noise for a in part)


# ------------------------------------------------------------ Monte Carlo


def _ell_estimate(obj, x, idx, seeds):
    """The sampled part of the objective: -(value) + KL = -(value(1) - value(0))."""
    return -(obj(x, idx, seeds, 1.0)[0] - obj(x, idx, seeds, 0.0)[0])


def test_ell_is_unbiased_against_independent_sampler():
    # tiny chain: 2 sequences, 2 labels; the reference draws the potentials
    # with numpy from their Gaussians (no code shared with the objective but
    # the exact chain log-likelihood)
    lengths, V, D = (2, 3), 2, 4
    X, lengths, y = _problem(4, lengths=lengths, D=D, V=V, density=0.6)
    jitter, S = 1e-3, 20
    obj = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, V, jitter=jitter,
                               n_samples=S)
    x = _random_x(obj.layout, 7, log_var=np.log(1.5), log_tau=0.0)
    p = obj.layout.unpack(x)
    idx = np.arange(lengths.size)
    R = 150
    est = np.array([_ell_estimate(obj, x, idx, 1000 + 2 * r + idx) for r in range(R)])
    mean, se = est.mean(), est.std(ddof=1) / np.sqrt(R)

    rng = np.random.default_rng(123)
    n_ref = 100_000
    Xd = X.toarray()
    offsets = np.r_[0, np.cumsum(lengths)]
    ref = np.zeros(n_ref)
    for n, T in enumerate(lengths):
        Xn = Xd[offsets[n]:offsets[n + 1]]
        F = np.empty((n_ref, T, V))
        for v in range(V):
            cov = p.variance * (Xn @ np.diag(p.s[:, v]) @ Xn.T + jitter * np.eye(T))
            F[:, :, v] = rng.multivariate_normal(np.sqrt(p.variance) * Xn @ p.m[:, v],
                                                 cov, size=n_ref, method="cholesky")
        B = p.m_bin + np.sqrt(p.s_bin) * rng.standard_normal((n_ref, V, V))
        ref += chain.log_likelihood(F, B, y[offsets[n]:offsets[n + 1]])
    ref_mean, ref_se = ref.mean(), ref.std(ddof=1) / np.sqrt(n_ref)
    tol = 4.0 * np.hypot(se, ref_se)
    assert abs(mean - ref_mean) < tol, (mean, ref_mean, se, ref_se)
    # and the test has teeth: the tolerance is small against the spread of
    # the log-likelihood (a wrong variance or mean would shift it by more)
    assert tol < 0.1 * ref.std()


def test_ell_at_vanishing_variance_is_loglik_at_the_mean():
    X, lengths, y = _problem(6, lengths=(3, 1, 4), D=5, V=3)
    jitter = 1e-12
    obj = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, 3, jitter=jitter,
                               n_samples=10)
    x = _random_x(obj.layout, 8, log_var=np.log(3.0))
    sl = obj.layout.slices
    x[sl["s"]] = LOG_S_BOUNDS[0]
    x[sl["s_bin"]] = LOG_S_BOUNDS[0]
    p = obj.layout.unpack(x)
    idx = np.arange(lengths.size)
    ell = _ell_estimate(obj, x, idx, idx + 5)
    Xd = X.toarray()
    offsets = np.r_[0, np.cumsum(lengths)]
    exact = sum(
        chain.log_likelihood(np.sqrt(p.variance) * Xd[a:b] @ p.m, p.m_bin, y[a:b])
        for a, b in zip(offsets[:-1], offsets[1:]))
    # |ELL - ll(mean)| <= sum |d ll / d potential| |noise|: the gradients of a
    # token's unary row and of the summed transitions have l1 norm <= 2 each,
    # the noise sd is at most sigma * sqrt(sum_d x_d^2 s + jitter) (unary) or
    # sqrt(s_bin); 8 sd bounds every one of these few hundred draws.
    s_min = np.exp(LOG_S_BOUNDS[0])
    sd = max(np.sqrt(p.variance * ((Xd ** 2).sum(1).max() * s_min + jitter)),
             np.sqrt(s_min))
    tol = sum(2 * (2 * T - 1) for T in lengths) * 8 * sd
    assert tol < 1e-2  # against O(1) for a wrong mean or scale
    assert abs(ell - exact) < tol, (ell, exact)


# --------------------------------------------------------------------- KL


def _kl(obj, x):
    """scale=0 leaves the KL terms only."""
    n = obj.lengths.size
    return obj(x, np.arange(n), np.arange(n), 0.0)[0]


def test_kl_is_zero_at_the_prior():
    obj = _objective(CRFLikelihood())
    D, V = obj.layout.n_features, obj.layout.n_classes
    tau2 = 0.3
    params = FeatureParams(np.zeros((D, V)), np.ones((D, V)), np.zeros((V, V)),
                           np.full((V, V), tau2), 2.0, tau2)
    x = obj.layout.pack(params)
    value, grad = obj(x, np.arange(obj.lengths.size), np.arange(obj.lengths.size), 0.0)
    assert value == 0.0
    assert_array_equal(grad, 0.0)  # the prior is the KL's minimum


def test_kl_matches_gauss_kl_and_monte_carlo():
    obj = _objective(CRFLikelihood())
    x = _random_x(obj.layout, 9, log_tau=np.log(0.6))
    p = obj.layout.unpack(x)
    kl = _kl(obj, x)
    # independent closed form: gauss_kl of the (diagonal) Cholesky factors,
    # the transitions whitened by the prior's sd
    tau = np.sqrt(p.transition_var)
    expected = gauss_kl(p.m.T, np.stack([np.diag(np.sqrt(c)) for c in p.s.T]))
    expected += gauss_kl((p.m_bin / tau).reshape(1, -1),
                         np.diag(np.sqrt(p.s_bin.ravel()) / tau)[None])
    assert_allclose(kl, expected, rtol=1e-12)
    # Monte Carlo: E_q[log q - log p], 4 standard errors
    rng = np.random.default_rng(11)
    n = 20_000
    mean = np.r_[p.m.ravel(), p.m_bin.ravel()]
    sd_q = np.sqrt(np.r_[p.s.ravel(), p.s_bin.ravel()])
    sd_p = np.r_[np.ones(p.m.size), np.full(p.m_bin.size, tau)]
    w = mean + sd_q * rng.standard_normal((n, mean.size))
    terms = (norm.logpdf(w, mean, sd_q) - norm.logpdf(w, 0.0, sd_p)).sum(axis=1)
    assert abs(terms.mean() - kl) < 4 * terms.std(ddof=1) / np.sqrt(n)
