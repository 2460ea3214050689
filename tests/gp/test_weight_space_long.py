"""Tests of the weight-space sampling of long sequences
(skgpstruct.gp._weight_space_long): the switching rule, the draws, the same
Gaussian as the Cholesky path (moments, expected log-likelihood, marginals),
exact gradients of the fixed-sample objective, the score-function
estimator, caching / chunking / determinism, and a 10,000-token sequence.

Most tests force moderate sequences onto the long path by lowering
``LONG_MIN_LENGTH`` (the cost model then picks weight space for the
sparse features used here; the tests check that it did)."""

import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import norm

from skgpstruct import GPStructTagger
from skgpstruct._gpstruct.predict import sequence_moments
from skgpstruct.datasets import make_chain_data
from skgpstruct.gp import _weight_space_long as long_mod
from skgpstruct.gp import weight_space as ws
from skgpstruct.gp._weight_space_long import (
    WeightSpaceCovariance,
    use_weight_space_sampling,
)
from skgpstruct.gp.sampling import draw_normals
from skgpstruct.gp.weight_space import (
    FeatureParams,
    WeightSpaceObjective,
    _Blocks,
    _blocks_ell,
    feature_moments,
)
from skgpstruct.likelihoods import CRFLikelihood, PseudoLikelihood

# ----------------------------------------------------------------- helpers


def _tokens(n_tokens, n_features, rng, density=0.3):
    """Sparse tokens: a feature shared by most tokens plus random ones."""
    A = rng.random((n_tokens, n_features)) < density
    A[:, 0] = rng.random(n_tokens) < 0.8
    vals = np.where(A, rng.choice([-2.0, 0.5, 1.0, 1.5], size=A.shape), 0.0)
    return sp.csr_matrix(vals)


def _problem(seed, lengths, D=6, V=3):
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths)
    N = int(lengths.sum())
    return _tokens(N, D, rng), lengths, rng.integers(0, V, N)


def _random_params(D, V, seed, *, log_var=np.log(2.0), log_tau=np.log(0.7)):
    rng = np.random.default_rng(seed)
    return FeatureParams(
        0.5 * rng.standard_normal((D, V)), np.exp(0.5 * rng.standard_normal((D, V))),
        0.5 * rng.standard_normal((V, V)), np.exp(0.5 * rng.standard_normal((V, V))),
        np.exp(log_var), np.exp(log_tau))


def _long_seqs(obj, n):
    """Positions (in the one chunk of ``n`` sequences) sampled in weight space."""
    blocks, _ = obj._chunk_blocks(np.arange(n))
    return sorted(ls.seq for ls in blocks.long)


def _ell(obj, x, idx, seeds, kl=None):
    """The sampled part of the objective: value(scale=0) - value(scale=1)
    (``value(scale=0)``, the KL terms, does not depend on the draws)."""
    if kl is None:
        kl = obj(x, idx, seeds, 0.0)[0]
    return kl - obj(x, idx, seeds, 1.0)[0]


# -------------------------------------------------------------------- rule


def test_rule_threshold_and_cost_model(monkeypatch):
    S = 100
    # never at or below the threshold, whatever the costs
    assert not use_weight_space_sampling(long_mod.LONG_MIN_LENGTH, 1, 1, S)
    # sparse features of a long sequence: weight space
    assert use_weight_space_sampling(long_mod.LONG_MIN_LENGTH + 1, 20 * 257, 500, S)
    assert use_weight_space_sampling(10_000, 40_000, 50, S)
    # dense, high-dimensional features of a barely long sequence: the
    # Cholesky path is cheaper (T^3 / 3 + S T^2 / 2 = 12.2e6 against
    # S (nnz + D + T) = 100 * (257 * 600 + 857))
    assert not use_weight_space_sampling(257, 257 * 600, 600, S)
    # the constant is read at call time (the tests below lower it)
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 10)
    assert use_weight_space_sampling(40, 120, 6, S)


def test_short_data_never_finds_long_sequences():
    X, lengths, _ = _problem(0, (3, 256, 5))
    blocks = _Blocks(X, np.r_[0, np.cumsum(lengths)], n_samples=100)
    assert blocks.long == [] and blocks.n_weights is None
    # the buckets are those of the code before the weight-space path
    ref = ws._g.make_buckets(np.r_[0, np.cumsum(lengths)])[0]
    assert len(blocks.buckets) == len(ref)
    for a, b in zip(blocks.buckets, ref):
        assert a.T == b.T and a.start == b.start and a.stop == b.stop
        assert_array_equal(a.seqs, b.seqs)
        assert_array_equal(a.rows, b.rows)


# ------------------------------------------------------------------- draws


def test_weight_draws_extend_the_stream():
    lengths, seeds = [4, 2, 7], [11, 12, 13]
    eps, eps_bin = draw_normals(lengths, 1, 3, 5, seeds)
    eps2, eps_bin2, eps_w = draw_normals(lengths, 1, 3, 5, seeds, n_weights=[0, 3, 2])
    for a, b in zip(eps + eps_bin, eps2 + eps_bin2):
        assert_array_equal(a, b)  # the Cholesky path's draws are unchanged
    assert [e.shape for e in eps_w] == [(1, 5, 3, 0), (1, 5, 3, 3), (1, 5, 3, 2)]
    # a sequence's weight draws come from its own seed only
    _, _, alone = draw_normals([2], 1, 3, 5, [12], n_weights=[3])
    assert_array_equal(alone[0], eps_w[1])
    with pytest.raises(ValueError, match="n_weights"):
        draw_normals(lengths, 1, 3, 5, seeds, n_weights=[1, 2])
    with pytest.raises(ValueError, match="n_weights"):
        draw_normals(lengths, 1, 3, 5, seeds, n_weights=[1, -2, 0])


# ------------------------------------------------- same Gaussian: moments


def test_factored_covariance_matches_dense(monkeypatch):
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 10)
    X, lengths, _ = _problem(1, (4, 40, 7, 25), D=8)
    rng = np.random.default_rng(2)
    m, s = rng.standard_normal((8, 3)), rng.random((8, 3)) + 0.05
    b, Sig = feature_moments(X, lengths, m, s, 2.5, 1e-3, n_samples=100)
    b_ref, Sig_ref = feature_moments(X, lengths, m, s, 2.5, 1e-3)  # all dense
    assert_array_equal(b, b_ref)
    assert [type(S) is WeightSpaceCovariance for S in Sig] == [False, True, False, True]
    for S, R in zip(Sig, Sig_ref):
        assert S.shape == R.shape
        dense = S.toarray() if isinstance(S, WeightSpaceCovariance) else S
        assert_allclose(dense, R, rtol=1e-12, atol=1e-14)


def test_sampled_potentials_have_the_marginal_moments(monkeypatch):
    """Mean and covariance of the weight-space samples against ``(b,
    Sigma)``: every entry within a Bonferroni-corrected normal quantile of
    its Monte Carlo standard error (family-wise false-alarm rate 1e-3)."""
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 10)
    T, D, V, S = 40, 8, 2, 20_000
    X, lengths, _ = _problem(3, (T,), D=D, V=V)
    rng = np.random.default_rng(4)
    m, s = rng.standard_normal((D, V)), rng.random((D, V)) + 0.05
    sigma2, jitter = 1.7, 0.05
    b, (cov,) = feature_moments(X, lengths, m, s, sigma2, jitter, n_samples=S)
    assert isinstance(cov, WeightSpaceCovariance)
    F, B = cov.sample_potentials(b, np.zeros((V, V)), np.ones((V, V)), S, seed=5)
    assert F.shape == (1, 1, S, T, V) and B.shape == (1, 1, S, V, V)
    Sigma = cov.toarray()[0]  # (V, T, T)
    n_tests = V * T + V * T * (T + 1) // 2
    z = norm.isf(1e-3 / (2 * n_tests))
    for v in range(V):
        f = F[0, 0, :, :, v]  # (S, T)
        sd = np.sqrt(np.diag(Sigma[v]))
        mean_err = np.abs(f.mean(axis=0) - b[0, :, v]) / (sd / np.sqrt(S))
        assert mean_err.max() < z, mean_err.max()
        c = f - b[0, :, v]  # centred at the true mean: Var(c_i c_j) exact
        emp = c.T @ c / S
        se = np.sqrt((np.outer(sd ** 2, sd ** 2) + Sigma[v] ** 2) / S)
        cov_err = np.abs(emp - Sigma[v]) / se
        assert cov_err.max() < z, cov_err.max()
        # teeth: a covariance off by 10 % (or missing the jitter) is seen
        assert (np.abs(emp - 1.1 * Sigma[v]) / se).max() > z
        assert (np.abs(emp - Sigma[v] + jitter * sigma2 * np.eye(T)) / se).max() > z


# ------------------------------------ same Gaussian: ELL and marginals


def test_long_and_cholesky_paths_give_the_same_ell(monkeypatch):
    """The expected log-likelihood of one 40-token sequence, estimated on
    both paths with independent draws: the difference within 4 standard
    errors of the difference (R replicate estimates each)."""
    T, V, S, R = 40, 3, 100, 200
    X, lengths, y = _problem(6, (T,), D=6, V=V)
    params = _random_params(6, V, 7)
    x_args = dict(jitter=1e-2, n_samples=S)
    chol = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, V, **x_args)
    assert _long_seqs(chol, 1) == []  # its chunk's blocks are kept from here
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 10)
    wsp = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, V, **x_args)
    assert _long_seqs(wsp, 1) == [0] and _long_seqs(chol, 1) == []
    x = chol.layout.pack(params)
    idx = np.arange(1)
    kl = chol(x, idx, [0], 0.0)[0]
    est_c = np.array([_ell(chol, x, idx, [100 + r], kl) for r in range(R)])
    est_w = np.array([_ell(wsp, x, idx, [5000 + r], kl) for r in range(R)])
    se = np.hypot(est_c.std(ddof=1), est_w.std(ddof=1)) / np.sqrt(R)
    diff = est_w.mean() - est_c.mean()
    assert abs(diff) < 4 * se, (diff, se)
    # teeth: a 10 % larger prior variance (sampled on the long path) is
    # told apart from the Cholesky path's estimate
    x_big = x.copy()
    x_big[chol.layout.slices["hyperparameters"].start] += np.log(1.1)
    kl_big = wsp(x_big, idx, [0], 0.0)[0]
    est_big = np.array([_ell(wsp, x_big, idx, [5000 + r], kl_big) for r in range(R)])
    assert abs(est_big.mean() - est_c.mean()) > 4 * se


def _fit_small(**kw):
    X, y = make_chain_data(n_sequences=6, n_classes=3, n_features=4, length=(20, 40),
                           random_state=1)
    est = GPStructTagger(kernel_variance=2.0, max_iter=15, n_samples=20,
                         random_state=0, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return est, X, y


def test_long_and_cholesky_paths_give_the_same_marginals(monkeypatch):
    """predict_marginals of a 40-token sequence on both paths: every entry
    within a Bonferroni-corrected quantile of the standard error of the
    difference (from the per-draw standard deviations, ``marginal_std``)."""
    est, _, _ = _fit_small(n_predict_samples=2000)
    X, _ = make_chain_data(n_sequences=1, n_classes=3, n_features=4, length=(40, 40),
                           random_state=9)
    S = est.n_predict_samples
    (p_c,), (sd_c,) = est.predict_marginals(X), est.predict_uncertainty(
        X, kind="marginal_std")
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 10)
    _, Sig = sequence_moments(est._predictive(), est._check_X(X))
    assert isinstance(Sig[0], WeightSpaceCovariance)
    (p_w,), (sd_w,) = est.predict_marginals(X), est.predict_uncertainty(
        X, kind="marginal_std")
    assert_allclose(p_w.sum(axis=1), 1.0, rtol=1e-12)
    se = np.sqrt((sd_c ** 2 + sd_w ** 2) / S)
    z = norm.isf(1e-3 / (2 * p_c.size))
    err = np.abs(p_w - p_c)
    assert np.all(err < z * se + 1e-12), (err / se).max()
    assert (sd_c > 0.01).any()  # the posterior is not degenerate here
    # and elbo() takes the long path too: finite, close to the dense one
    y = est.predict(X)
    monkeypatch.undo()
    e_c = est.elbo(X, y)
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 10)
    e_w = est.elbo(X, y)
    assert np.isfinite(e_w) and abs(e_w - e_c) < 0.05 * abs(e_c)


# ------------------------------------------------------------- gradients

# Central differences of the fixed-sample objective (draws fixed by the
# seeds): on the long path F is linear in m and sqrt(s), so the objective is
# smooth; the suite's check (conftest: h = 1e-6, rtol 1e-5, atol 1e-6).
@pytest.mark.parametrize("lik", [CRFLikelihood(), PseudoLikelihood()],
                         ids=["crf", "pseudo"])
@pytest.mark.parametrize("learn", [(True, True), (False, False), (True, False)])
def test_long_path_gradient_matches_finite_differences(lik, learn, check_weight_space_grad,
                                                       monkeypatch):
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 8)
    X, lengths, y = _problem(8, (3, 12, 5, 10, 9), D=6, V=3)
    obj = WeightSpaceObjective(lik, X, lengths, y, 3, learn_variance=learn[0],
                               learn_transition_var=learn[1], jitter=1e-2,
                               n_samples=5)
    n = lengths.size
    assert _long_seqs(obj, n) == [1, 3, 4]  # mixed with two short sequences
    x = obj.layout.pack(_random_params(6, 3, 9))
    idx, seeds = np.arange(n), np.arange(200, 200 + n)
    check_weight_space_grad(obj, x, idx, seeds, 1.3, learn)


def test_long_path_gradient_only_long(assert_grad_fd, monkeypatch):
    """One long sequence alone in its chunk (no buckets at all)."""
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 8)
    X, lengths, y = _problem(10, (15,), D=5, V=2)
    obj = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, 2, jitter=1e-2,
                               n_samples=4)
    assert _long_seqs(obj, 1) == [0]
    x = obj.layout.pack(_random_params(5, 2, 11))
    value, grad = obj(x, [0], [3])
    assert_grad_fd(lambda z: obj(z, [0], [3])[0], x, grad)


def test_score_gradient_on_long_path_is_unbiased(monkeypatch):
    """gradient="score" on the long path (weight-space score function with
    control variates): its mean over replicate draws equals that of the
    pathwise gradient, entry by entry within a Bonferroni-corrected
    quantile of the standard error of the difference."""
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 8)
    X, lengths, y = _problem(12, (14, 11), D=4, V=2)
    kw = dict(jitter=1e-2, n_samples=40)
    score = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, 2, gradient="score",
                                 **kw)
    path = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, 2, **kw)
    assert _long_seqs(score, 2) == [0, 1]
    x = score.layout.pack(_random_params(4, 2, 13, log_var=0.0))
    sl = score.layout.slices
    keep = np.r_[np.arange(sl["m"].start, sl["s"].stop),
                 np.arange(sl["m_bin"].start, sl["s_bin"].stop)]
    R, idx = 300, np.arange(2)
    g_s = np.array([score(x, idx, [10 * r, 10 * r + 1])[1][keep] for r in range(R)])
    g_p = np.array([path(x, idx, [10 * r + 5, 10 * r + 6])[1][keep] for r in range(R)])
    se = np.sqrt((g_s.var(axis=0, ddof=1) + g_p.var(axis=0, ddof=1)) / R)
    z = norm.isf(1e-3 / (2 * keep.size))
    diff = np.abs(g_s.mean(axis=0) - g_p.mean(axis=0))
    assert np.all(diff < z * se), (diff / se).max()
    # teeth: the gradient is resolved (most entries many SEs from zero), so a
    # sign error or a missing factor would fail
    assert np.mean(np.abs(g_p.mean(axis=0)) > 2 * z * se) > 0.5
    # the value is the pathwise objective's value on the same draws
    assert score(x, idx, [1, 2])[0] == path(x, idx, [1, 2])[0]


# ------------------------------- short sequences, caching, determinism


def test_short_sequences_keep_their_numbers_beside_long_ones(monkeypatch):
    """The short sequences of a chunk with long ones get bit-identical
    expected log-likelihoods to those of a chunk without them."""
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 8)
    X, lengths, y = _problem(14, (3, 12, 5, 2, 10, 5), D=6, V=3)
    offsets = np.r_[0, np.cumsum(lengths)]
    params = _random_params(6, 3, 15)
    seeds = np.arange(30, 30 + lengths.size)
    blocks = _Blocks(X, offsets, n_samples=6)
    long = [ls.seq for ls in blocks.long]
    assert long == [1, 4]
    noise = draw_normals(lengths, 1, 3, 6, seeds, n_weights=blocks.n_weights)
    values = _blocks_ell(CRFLikelihood(), blocks, y, params, noise, 1e-2,
                        return_grad=False)
    short = np.setdiff1d(np.arange(lengths.size), long)
    rows = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in short])
    sub_off = np.r_[0, np.cumsum(lengths[short])]
    sub = _Blocks(X[rows], sub_off, n_samples=6)
    assert sub.long == []
    ref = _blocks_ell(CRFLikelihood(), sub, y[rows], params,
                     draw_normals(lengths[short], 1, 3, 6, seeds[short]), 1e-2,
                     return_grad=False)
    assert_array_equal(values[short], ref)


def test_long_path_independent_of_threads_chunks_and_cache(monkeypatch, check_chunk_invariance):
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 8)
    X, lengths, y = _problem(16, (3, 12, 5, 10, 2, 14, 4, 9), D=6, V=3)
    obj = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, 3, jitter=1e-2,
                               n_samples=6)
    monkeypatch.setattr(ws, "NOISE_CACHE_BYTES", 0)
    fresh = WeightSpaceObjective(CRFLikelihood(), X, lengths, y, 3, jitter=1e-2,
                                 n_samples=6)
    monkeypatch.setattr(ws, "NOISE_CACHE_BYTES", 256 * 2 ** 20)
    x = obj.layout.pack(_random_params(6, 3, 17))
    n = lengths.size
    idx = np.arange(n)
    rng = np.random.default_rng(1)
    for seeds in (rng.integers(0, 2 ** 31, n), rng.integers(0, 2 ** 31, n)):
        for _ in range(2):  # the second call reads the cache
            v_c, g_c = obj(x, idx, seeds)
            v_f, g_f = fresh(x, idx, seeds)
            assert v_c == v_f
            assert_array_equal(g_c, g_f)
    assert obj._noise and not fresh._noise
    # the cache keeps the weight draws and counts their bytes
    (entry,) = obj._noise.values()
    assert len(entry[1]) == 3 and entry[2] == sum(
        a.nbytes for part in entry[1] for a in part)
    assert obj._noise_bytes == entry[2]
    # chunks on threads: bit-identical; other chunks: a few ulps
    check_chunk_invariance(obj, x, idx, seeds, v_c, g_c)
    # a subset's ELL is the sum of its sequences' (per-sequence draws)
    total = sum(_ell(obj, x, np.array([i]), seeds[[i]]) for i in range(n))
    assert_allclose(_ell(obj, x, idx, seeds), total, rtol=1e-12)


def test_long_predictions_do_not_depend_on_batch_jobs_or_sparsity(monkeypatch):
    est, X, _ = _fit_small(n_predict_samples=16)
    monkeypatch.setattr(long_mod, "LONG_MIN_LENGTH", 25)
    X_new, _ = make_chain_data(n_sequences=4, n_classes=3, n_features=4,
                               length=(10, 45), random_state=3)
    _, Sig = sequence_moments(est._predictive(), est._check_X(X_new))
    assert any(isinstance(S, WeightSpaceCovariance) for S in Sig)
    assert not all(isinstance(S, WeightSpaceCovariance) for S in Sig)
    batch = est.predict_marginals(X_new)
    for i, x in enumerate(X_new):
        assert_array_equal(est.predict_marginals([x])[0], batch[i])
    sparse = est.predict_marginals([sp.csr_matrix(x) for x in X_new])
    assert_array_equal(np.concatenate(sparse), np.concatenate(batch))
    est.set_params(n_jobs=2)
    assert_array_equal(np.concatenate(est.predict_marginals(X_new[::-1])),
                       np.concatenate(batch[::-1]))
    for kind in ("entropy", "mutual_information", "marginal_std"):
        u = est.predict_uncertainty(X_new, kind=kind)
        assert all(np.all(np.isfinite(a)) for a in u)
    for kind in ("entropy", "mutual_information"):  # long ones sampled in weight space
        u = est.predict_uncertainty(X_new, kind=kind, per="path")
        assert u.shape == (4,) and np.all(np.isfinite(u)) and np.all(u >= 0)
        assert_array_equal(u[::-1], est.predict_uncertainty(X_new[::-1], kind=kind,
                                                            per="path"))
    assert_array_equal(np.concatenate(est.predict(X_new)),
                       np.concatenate(est.predict(X_new)))


def test_score_gradient_fit_with_a_long_sequence():
    X, y = make_chain_data(n_sequences=3, n_classes=3, n_features=4,
                           length=(300, 400), random_state=2)
    est = GPStructTagger(kernel_variance=2.0, gradient="score", optimizer="adam",
                         learning_rate=0.05, max_iter=3, n_samples=8,
                         n_predict_samples=16, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    _, Sig = sequence_moments(est._predictive(), est._check_X(X))
    assert all(isinstance(S, WeightSpaceCovariance) for S in Sig)
    assert np.all(np.isfinite(est.coef_)) and np.all(np.isfinite(est.elbo_history_))
    (marg,) = est.predict_marginals(X[:1])
    assert_allclose(marg.sum(axis=1), 1.0, rtol=1e-12)


# ------------------------------------------------------- 10,000 tokens


def test_ten_thousand_token_sequence():
    """Fit and predict one 10,000-token sequence, in seconds (the Cholesky
    path would factorise a 10,000 x 10,000 covariance per label)."""
    X, y = make_chain_data(n_sequences=1, n_classes=3, n_features=3,
                           length=(10_000, 10_000), random_state=0)
    est = GPStructTagger(kernel_variance="elbo", max_iter=5, random_state=0)
    times = {}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    times["fit"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    (marg,) = est.predict_marginals(X)
    times["predict_marginals"] = time.perf_counter() - t0
    assert marg.shape == (10_000, 3) and np.all(np.isfinite(marg))
    assert_allclose(marg.sum(axis=1), 1.0, rtol=1e-12)
    t0 = time.perf_counter()
    (pred,) = est.predict(X)
    times["predict"] = time.perf_counter() - t0
    assert_array_equal(pred, est.classes_[marg.argmax(axis=1)])
    assert np.mean(pred == y[0]) > 0.5
    est.set_params(decode="viterbi")
    t0 = time.perf_counter()
    (path,) = est.predict(X)
    times["predict viterbi"] = time.perf_counter() - t0
    assert path.shape == (10_000,) and np.mean(path == y[0]) > 0.5
    assert np.isfinite(est.elbo(X, y))
    print("10,000 tokens: " + ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
