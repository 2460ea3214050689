"""The CRF under Gaussian weight noise (chain/weight_noise.py): the numba
pass against its numpy reference on the same draws, finite differences,
the draws' distribution, and independence of the batch and the threads."""

import numpy as np
import pytest
import scipy.sparse as sp
from joblib import Parallel
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct.chain import _weight_noise_kernels as K
from skgpstruct.chain._reference import weight_noise_ref
from skgpstruct.chain.weight_noise import SequenceColumns, weight_noise_pass


def _problem(seed=0, V=4, D=12, lengths=(3, 5, 1, 4, 6)):
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths)
    off = np.concatenate([[0], np.cumsum(lengths)])
    X = sp.random(off[-1], D, density=0.3, random_state=seed + 1, format="csr")
    X.data[:] = rng.normal(size=X.nnz)
    y = rng.integers(0, V, off[-1])
    W = np.concatenate([rng.normal(size=(D, V)), rng.normal(size=(D, V)) - 1.0], axis=1)
    return X, off, y, W, rng.normal(size=(V, V)), rng.normal(size=(V, V)) - 1.0


def _reference(cols, X, off, y, seqs, seeds, W, m_bin, ls_bin, S, scale, jsd):
    V = m_bin.shape[0]
    per_seq = [cols.cols[cols.col_off[n]:cols.col_off[n + 1]] for n in range(off.size - 1)]
    noise = [K.draw_noise(s, S, cols.n_shared[n], off[n + 1] - off[n], V)
             for n, s in zip(seqs, seeds)]
    return weight_noise_ref(X, off, per_seq, cols.n_shared, y, seqs, noise, W, m_bin, ls_bin,
                            scale, jsd)


def test_columns_index_each_sequences_features():
    X, off, *_ = _problem()
    cols = SequenceColumns(X, off)
    Xd = X.toarray()
    for n in range(off.size - 1):
        c = cols.cols[cols.col_off[n]:cols.col_off[n + 1]]
        used = np.flatnonzero(np.any(Xd[off[n]:off[n + 1]] != 0, axis=0))
        assert_array_equal(np.sort(c), used)
        tokens = np.count_nonzero(Xd[off[n]:off[n + 1]][:, c], axis=0)
        R = cols.n_shared[n]
        assert np.all(tokens[:R] >= 2) and np.all(tokens[R:] == 1)
        # the entries' local columns point at their features
        for t in range(off[n], off[n + 1]):
            a, b = cols.indptr[t], cols.indptr[t + 1]
            assert_array_equal(c[cols.loc[a:b]], X.indices[a:b])
    assert_array_equal(cols.counts, np.bincount(cols.cols, minlength=X.shape[1]))


@pytest.mark.parametrize("S, scale, jsd", [(1, 1.0, 0.0), (3, 0.7, 0.1)])
def test_pass_matches_the_numpy_reference(S, scale, jsd):
    X, off, y, W, m_bin, ls_bin = _problem()
    cols = SequenceColumns(X, off)
    seqs, seeds = np.array([4, 0, 3, 1, 2]), np.array([11, 12, 13, 14, 15])
    vals, rows, g_rows, counts, g_bin, g_log = weight_noise_pass(
        cols, y, seqs, seeds, W, m_bin, ls_bin, scale=scale, jitter_sd=jsd, n_samples=S)
    ref_v, ref_gW, ref_gb, ref_gl = _reference(cols, X, off, y, seqs, seeds, W, m_bin,
                                               ls_bin, S, scale, jsd)
    assert_allclose(vals, ref_v, rtol=1e-12, atol=1e-12)
    gW = np.zeros_like(W)
    gW[rows] = g_rows
    assert_allclose(gW, ref_gW, rtol=1e-10, atol=1e-12)
    assert_allclose(g_bin, ref_gb, rtol=1e-10, atol=1e-12)
    assert_allclose(g_log, ref_gl, rtol=1e-10)
    assert_array_equal(rows, np.unique(cols.cols))
    assert_array_equal(counts, cols.counts[rows])


def test_gradient_matches_finite_differences():
    X, off, y, W, m_bin, ls_bin = _problem(seed=3)
    cols = SequenceColumns(X, off)
    seqs, seeds = np.arange(5), np.arange(5) + 7
    kw = dict(scale=0.8, jitter_sd=0.05, n_samples=2)
    _, rows, g_rows, _, g_bin, g_log = weight_noise_pass(cols, y, seqs, seeds, W, m_bin,
                                                         ls_bin, **kw)

    def total(W_, mb_, lb_, scale=kw["scale"]):
        return weight_noise_pass(cols, y, seqs, seeds, W_, mb_, lb_, scale=scale,
                                 jitter_sd=kw["jitter_sd"], n_samples=2)[0].sum()

    h = 1e-6
    gW = np.zeros_like(W)
    gW[rows] = g_rows
    for i, j in [(r, c) for r in rows[::3] for c in range(W.shape[1])]:
        Wp, Wm = W.copy(), W.copy()
        Wp[i, j] += h
        Wm[i, j] -= h
        assert_allclose((total(Wp, m_bin, ls_bin) - total(Wm, m_bin, ls_bin)) / (2 * h),
                        gW[i, j], rtol=1e-5, atol=1e-7)
    for which, base in ((0, m_bin), (1, ls_bin)):
        for a, b in [(0, 1), (2, 3)]:
            P, M = base.copy(), base.copy()
            P[a, b] += h
            M[a, b] -= h
            args_p = (P, ls_bin) if which == 0 else (m_bin, P)
            args_m = (M, ls_bin) if which == 0 else (m_bin, M)
            assert_allclose((total(W, *args_p) - total(W, *args_m)) / (2 * h),
                            g_bin[which, a, b], rtol=1e-5, atol=1e-7)
    lg = np.log(kw["scale"] ** 2)
    fd = (total(W, m_bin, ls_bin, np.exp(0.5 * (lg + h)))
          - total(W, m_bin, ls_bin, np.exp(0.5 * (lg - h)))) / (2 * h)
    assert_allclose(fd, g_log, rtol=1e-5)


def test_draws_have_the_posterior_distribution():
    # the potentials of the shared / per-token draws against their exact
    # mean and covariance (every weight drawn, tokens sharing features
    # correlated): 5 standard errors of a sample mean / variance
    X, off, y, W, m_bin, ls_bin = _problem(seed=5, lengths=(6,))
    V = m_bin.shape[0]
    cols = SequenceColumns(X, off)
    c, R = cols.cols, cols.n_shared[0]
    Xd = X.toarray()[:, c]
    mu, sd = W[c, :V], np.exp(0.5 * W[c, V:])
    S = 20000
    e_w, e_t, _ = K.draw_noise(1, S, R, Xd.shape[0], V)
    q = np.sqrt((Xd[:, R:] ** 2) @ sd[R:] ** 2)
    U = Xd @ mu + np.einsum("tj,kjv->ktv", Xd[:, :R], sd[:R] * e_w) + q * e_t
    mean = Xd @ mu
    for v in range(V):
        cov = (Xd * sd[:, v] ** 2) @ Xd.T
        emp = np.cov(U[:, :, v].T)
        se = np.sqrt((cov ** 2 + np.outer(np.diag(cov), np.diag(cov))) / S)
        assert np.all(np.abs(emp - cov) < 5 * se + 1e-12)
        assert np.all(np.abs(U[:, :, v].mean(0) - mean[:, v])
                      < 5 * np.sqrt(np.diag(cov) / S) + 1e-12)


def test_result_depends_on_the_sequence_and_seed_only():
    X, off, y, W, m_bin, ls_bin = _problem(seed=2, lengths=tuple(range(1, 41)))
    cols = SequenceColumns(X, off)
    seqs = np.arange(40)
    seeds = np.arange(40) * 3 + 1
    alone = [weight_noise_pass(cols, y, seqs[i:i + 1], seeds[i:i + 1], W, m_bin, ls_bin,
                               n_samples=2)[0][0] for i in range(40)]
    together = weight_noise_pass(cols, y, seqs, seeds, W, m_bin, ls_bin, n_samples=2)
    assert_array_equal(together[0], alone)
    with Parallel(n_jobs=2, prefer="threads") as par:
        threaded = weight_noise_pass(cols, y, seqs, seeds, W, m_bin, ls_bin, n_samples=2,
                                     parallel=par)
    for a, b in zip(together, threaded):
        assert_array_equal(a, b)


def test_bad_input_is_refused():
    X, off, y, W, m_bin, ls_bin = _problem()
    cols = SequenceColumns(X, off)
    with pytest.raises(ValueError, match="shape"):
        weight_noise_pass(cols, y, [0], [1], W[:, :3], m_bin, ls_bin)
    with pytest.raises(ValueError, match="same length"):
        weight_noise_pass(cols, y, [0, 1], [1], W, m_bin, ls_bin)
    with pytest.raises(ValueError, match="offsets"):
        SequenceColumns(X, off[:-1])
