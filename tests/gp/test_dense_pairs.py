"""Tests of skgpstruct.gp._dense_pairs: the weight-space form's covariances
of sequences of dense features, without their pair matrices."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct.gp import _dense_pairs
from skgpstruct.gp import _elbo_grads
from skgpstruct.gp._dense_pairs import dense_columns
from skgpstruct.gp.weight_space import (
    WeightSpaceObjective,
    _Blocks,
    feature_moments,
)
from skgpstruct.likelihoods import CRFLikelihood

from .test_weight_space import _random_x, check_adjoint


def _mixed_tokens(lengths, D, n_dense_cols, rng, dense_seqs):
    """Tokens of sequences of ``lengths``: those in ``dense_seqs`` with
    ``n_dense_cols`` dense columns (every token, an embedding's) beside one
    one-hot column a token, the others one-hot columns only (sentence
    features), values in a few magnitudes."""
    blocks = []
    for n, T in enumerate(lengths):
        A = np.zeros((T, D))
        A[np.arange(T), rng.integers(n_dense_cols, D, T)] = rng.choice([1.0, 2.0], T)
        if n in dense_seqs:
            A[:, :n_dense_cols] = rng.standard_normal((T, n_dense_cols))
        blocks.append(A)
    return sp.csr_matrix(np.vstack(blocks))


def _rule_by_loops(X, T):
    """``dense_columns`` from its definition, by loops over the dense
    matrix (stored entries counted: the test inputs store no zeros)."""
    Xd = X.toarray()
    out = []
    for a in range(Xd.shape[0] // T):
        c = np.count_nonzero(Xd[a * T:(a + 1) * T], axis=0).astype(float)
        dense = [d for d in range(c.size) if T >= 2 and c[d] >= T]
        held = sum(c[d] ** 2 for d in dense)
        out.append(dense if held > 0.5 * np.sum(c ** 2) else [])
    return out


def _pair_path_only(monkeypatch):
    """Keep every sequence on the pair matrix alone (the code before the
    dense path)."""
    monkeypatch.setattr(_dense_pairs, "dense_columns",
                        lambda X, T: [np.zeros(0, int)] * (X.shape[0] // T))


def _has_dense(blocks):
    return any(dense is not None for _, dense in blocks.pairs)


@pytest.mark.parametrize("T", [1, 2, 3, 8, 20, 60])
def test_rule_matches_its_definition(T):
    rng = np.random.default_rng(T)
    lengths = [T] * 6
    X = _mixed_tokens(lengths, 200, 10, rng, dense_seqs={0, 2, 3})
    expected = _rule_by_loops(X, T)
    assert [c.tolist() for c in dense_columns(X, T)] == expected
    if T == 1:  # a one-token sequence holds as many pairs as entries
        assert not any(expected)
    if T >= 3:  # ten dense columns beside one one-hot column a token
        assert [len(c) for c in expected] == [10, 0, 10, 10, 0, 0]


def test_rule_sends_dense_sequences_dense_and_one_hot_ones_not():
    rng = np.random.default_rng(0)
    dense = sp.csr_matrix(rng.standard_normal((30, 50)))
    assert [c.size for c in dense_columns(dense, 30)] == [50]
    assert all(c.size == 50 for c in dense_columns(dense, 3))
    assert not any(c.size for c in dense_columns(dense, 1))
    one_hot = sp.csr_matrix(np.eye(30, 50))
    assert not any(c.size for c in dense_columns(one_hot, 30))
    # 300 embedding columns beside 20 one-hot features a token, 40 tokens:
    # the embedding's columns are dense, the one-hot ones stay sparse
    A = np.zeros((40, 1100))
    A[:, :300] = rng.standard_normal((40, 300))
    A[np.repeat(np.arange(40), 20), 300 + rng.permutation(800)] = 1.0
    assert_array_equal(dense_columns(sp.csr_matrix(A), 40)[0], np.arange(300))


def test_rule_keeps_sparse_sentence_features_on_the_pair_matrix():
    # sparse sentence features with a bias column: every sequence keeps its
    # pair matrix alone (numbers bit for bit) up to sentences of 12 tokens
    rng = np.random.default_rng(1)
    for T in (1, 2, 5, 12):
        A = (rng.random((10 * T, 500)) < 0.04).astype(float)
        A[:, 0] = 1.0
        assert not any(c.size for c in dense_columns(sp.csr_matrix(A), T))


def _check_moments(X, lengths, m, s, jitter):
    b, Sig = feature_moments(X, lengths, m, s, 1.5, jitter)
    Xd, offsets = X.toarray(), np.r_[0, np.cumsum(lengths)]
    assert_allclose(b[0], np.sqrt(1.5) * Xd @ m, rtol=1e-12)
    for n, T in enumerate(lengths):
        Xn = Xd[offsets[n]:offsets[n + 1]]
        for v in range(m.shape[1]):
            ref = 1.5 * (Xn @ np.diag(s[:, v]) @ Xn.T + jitter * np.eye(T))
            assert_allclose(Sig[n][0, v], ref, rtol=1e-12, atol=1e-13)
    return Sig


@pytest.mark.parametrize("bucket_tokens", [512, 7])
def test_moments_match_plain_numpy(bucket_tokens, monkeypatch):
    monkeypatch.setattr(_elbo_grads, "_BUCKET_TOKENS", bucket_tokens)
    rng = np.random.default_rng(2)
    lengths = [4, 1, 4, 3, 4, 2, 3, 4]
    X = _mixed_tokens(lengths, 12, 5, rng, dense_seqs={0, 1, 2, 4, 6})
    # a duplicate entry, as a CSR built from raw arrays may hold
    X = sp.csr_matrix((np.r_[X.data, 0.5], np.r_[X.indices, X.indices[0]],
                       np.r_[X.indptr[:1], X.indptr[1:] + 1]), shape=X.shape)
    offsets = np.r_[0, np.cumsum(lengths)]
    blocks = _Blocks(X, offsets)
    assert _has_dense(blocks)  # the dense path runs
    D, V = X.shape[1], 3
    _check_moments(X, lengths, rng.standard_normal((D, V)), rng.random((D, V)) + 0.05,
                   1e-3)


def test_backward_is_adjoint_of_moments():
    # moments are linear in (m, s) (jitter 0): backward must be the adjoint
    rng = np.random.default_rng(3)
    lengths = [3, 3, 2, 3, 1]
    X = _mixed_tokens(lengths, 9, 4, rng, dense_seqs={0, 2, 3})
    blocks = _Blocks(X, np.r_[0, np.cumsum(lengths)])
    assert _has_dense(blocks)
    check_adjoint(blocks, X.shape[1], 2, rng)


def test_backward_matches_the_pair_matrix_path(monkeypatch):
    rng = np.random.default_rng(4)
    lengths = [5, 5, 5, 2, 5]
    X = _mixed_tokens(lengths, 15, 6, rng, dense_seqs={0, 1, 3, 4})
    offsets = np.r_[0, np.cumsum(lengths)]
    D, V = X.shape[1], 3
    s = rng.random((D, V)) + 0.1
    db = rng.standard_normal((1, X.shape[0], V))
    new = _Blocks(X, offsets)
    Sbar = [rng.standard_normal(S.shape) for S in new.moments(s, s, 0.0)[1]]
    dm_new, ds_new = new.backward(db, Sbar, V)
    _pair_path_only(monkeypatch)
    old = _Blocks(X, offsets)
    assert not _has_dense(old) and _has_dense(new)
    dm_old, ds_old = old.backward(db, Sbar, V)
    assert_array_equal(dm_new, dm_old)
    assert_allclose(ds_new, ds_old, rtol=1e-12, atol=1e-12)


def test_a_sequence_gets_the_same_covariances_whatever_its_batch():
    # bit for bit, on both paths: alone or beside other sequences of its
    # length (one bucket) on either path
    rng = np.random.default_rng(5)
    lengths = [4] * 6
    X = _mixed_tokens(lengths, 14, 5, rng, dense_seqs={1, 2, 5})
    offsets = np.r_[0, np.cumsum(lengths)]
    D, V = X.shape[1], 3
    m, s = rng.standard_normal((D, V)), rng.random((D, V)) + 0.1
    _, together = feature_moments(X, lengths, m, s, 1.0, 1e-4)
    for n in range(len(lengths)):
        Xn = X[offsets[n]:offsets[n + 1]]
        _, alone = feature_moments(Xn, [4], m, s, 1.0, 1e-4)
        assert_array_equal(alone[0], together[n])


def test_sparse_features_keep_their_numbers_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(6)
    lengths = [6, 3, 6, 1, 9]
    X = _mixed_tokens(lengths, 60, 1, rng, dense_seqs=set())
    D, V = X.shape[1], 2
    m, s = rng.standard_normal((D, V)), rng.random((D, V)) + 0.1
    b, Sig = feature_moments(X, lengths, m, s, 2.0, 1e-3)
    _pair_path_only(monkeypatch)
    b_old, Sig_old = feature_moments(X, lengths, m, s, 2.0, 1e-3)
    assert_array_equal(b, b_old)
    for new, old in zip(Sig, Sig_old):
        assert_array_equal(new, old)


def _dense_objective(n_samples=4):
    rng = np.random.default_rng(7)
    lengths = np.array([4, 2, 4, 3, 1])
    X = _mixed_tokens(lengths, 10, 4, rng, dense_seqs={0, 1, 2, 3})
    y = rng.integers(0, 3, int(lengths.sum()))
    return WeightSpaceObjective(CRFLikelihood(), X, lengths, y, 3, jitter=1e-2,
                                n_samples=n_samples)


def test_objective_gradient_on_dense_features_matches_finite_differences(
        check_weight_space_grad):
    obj = _dense_objective()
    blocks, _ = obj._chunk_blocks(np.arange(obj.lengths.size))
    assert _has_dense(blocks)
    x = _random_x(obj.layout, 8)
    n = obj.lengths.size
    check_weight_space_grad(obj, x, np.arange(n), np.arange(100, 100 + n), 1.3,
                            (True, True))


def test_objective_on_dense_features_matches_the_pair_matrix_path(monkeypatch):
    x = _random_x(_dense_objective().layout, 9)
    idx, seeds = np.arange(5), np.arange(200, 205)
    v_new, g_new = _dense_objective()(x, idx, seeds)
    _pair_path_only(monkeypatch)
    v_old, g_old = _dense_objective()(x, idx, seeds)
    assert_allclose(v_new, v_old, rtol=1e-12)
    assert_allclose(g_new, g_old, rtol=1e-10, atol=1e-12)


def test_dense_features_do_not_hold_pair_matrices(monkeypatch):
    # 16 sequences of 24 tokens with 60 dense features: the pair matrices
    # hold T^2 D = 34,560 entries a sequence (6.6 MB in all), the dense
    # features T D = 1,440 (0.2 MB)
    rng = np.random.default_rng(10)
    lengths = [24] * 16
    X = sp.csr_matrix(rng.standard_normal((sum(lengths), 60)))
    offsets = np.r_[0, np.cumsum(lengths)]

    def peak():
        tracemalloc.start()
        try:
            blocks = _Blocks(X, offsets)
            return tracemalloc.get_traced_memory()[1], blocks
        finally:
            tracemalloc.stop()

    new, _ = peak()
    _pair_path_only(monkeypatch)
    old, _ = peak()
    assert old > 6e6  # the pair matrices really are that large
    assert new < old / 10
