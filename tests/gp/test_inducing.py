"""Tests of skgpstruct.gp.inducing."""

import time

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct.gp import inducing
from skgpstruct.gp.inducing import init_inducing_points, unique_rows


def _blobs(seed=0, n_per=40, dense=True):
    """Three separated blobs; blob b's tokens have label mix ``mixes[b]``."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 0.0]])
    X = np.concatenate([c + 0.1 * rng.standard_normal((n_per, 3)) for c in centres])
    # blob 0: all label 0; blob 1: half 1 / half 2; blob 2: 3/4 label 2
    y = np.concatenate(
        [
            np.zeros(n_per, int),
            np.repeat([1, 2], n_per // 2),
            np.r_[np.full(n_per // 4, 0), np.full(n_per - n_per // 4, 2)],
        ]
    )
    return (X if dense else sp.csr_matrix(X)), y, centres


def _binary_tokens(n, d, nnz, seed, n_distinct=None):
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), nnz)
    cols = rng.integers(0, d, n * nnz)
    X = sp.csr_matrix((np.ones(n * nnz), (rows, cols)), shape=(n, d))
    X.data[:] = 1.0
    if n_distinct is not None:  # many duplicate tokens, as with real features
        X = X[rng.integers(0, n_distinct, n)]
    return X


@pytest.mark.parametrize("dense", [True, False])
def test_kmeans_recovers_blobs_and_label_fractions(dense):
    X, y, centres = _blobs(dense=dense)
    Z, F = init_inducing_points(X, y, 3, 3, random_state=0)
    assert sp.issparse(Z) != dense
    Zd = Z if dense else Z.toarray()
    order = [np.argmin(np.linalg.norm(Zd - c, axis=1)) for c in centres]
    assert sorted(order) == [0, 1, 2]
    assert_allclose(Zd[order], centres, atol=0.1)
    # the centres are the exact means of the blobs
    for b, i in enumerate(order):
        Xd = X if dense else X.toarray()
        assert_allclose(Zd[i], Xd[40 * b : 40 * (b + 1)].mean(axis=0), rtol=1e-12)
    assert_allclose(F[order], [[1, 0, 0], [0, 0.5, 0.5], [0.25, 0, 0.75]])


@pytest.mark.parametrize("method", ["kmeans", "random"])
@pytest.mark.parametrize("dense", [True, False])
def test_shapes_fractions_and_determinism(method, dense):
    X = _binary_tokens(300, 40, 4, seed=1, n_distinct=120)
    X = X.toarray() if dense else X
    y = np.random.default_rng(2).integers(0, 4, 300)
    Z, F = init_inducing_points(X, y, 25, 5, method=method, random_state=3)
    Z2, F2 = init_inducing_points(X, y, 25, 5, method=method, random_state=3)
    assert Z.shape == (25, 40) and F.shape == (25, 5)
    assert sp.issparse(Z) != dense
    assert_allclose(F.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(F >= 0) and np.all(F[:, 4] == 0)  # label 4 never occurs
    Zd, Z2d = (Z, Z2) if dense else (Z.toarray(), Z2.toarray())
    assert_array_equal(Zd, Z2d)
    assert_array_equal(F, F2)
    assert np.unique(Zd, axis=0).shape[0] == 25  # no repeated inducing input
    Z3, _ = init_inducing_points(X, y, 25, 5, method=method, random_state=4)
    assert not np.array_equal(Zd, Z3 if dense else Z3.toarray())


def test_random_picks_distinct_tokens_with_their_label_mix():
    X = _binary_tokens(200, 30, 3, seed=5, n_distinct=50)
    y = np.random.default_rng(6).integers(0, 3, 200)
    Z, F = init_inducing_points(X, y, 10, 3, method="random", random_state=0)
    Xd, Zd = X.toarray(), Z.toarray()
    for z, f in zip(Zd, F):
        same = np.all(Xd == z, axis=1)
        assert same.any()
        assert_allclose(f, np.bincount(y[same], minlength=3) / same.sum())


def test_full_model_when_n_inducing_reaches_n_tokens():
    X = _binary_tokens(30, 10, 2, seed=7, n_distinct=12)
    y = np.arange(30) % 3
    for method in ("kmeans", "random"):
        Z, F = init_inducing_points(X, y, 30, 3, method=method)
        assert_array_equal(Z.toarray(), X.toarray())
        assert_array_equal(F, np.eye(3)[y])
    Z, F = init_inducing_points(X.toarray(), y, 31, 3)
    assert_array_equal(Z, X.toarray())


def test_distinct_rows_when_n_inducing_reaches_n_unique():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    y = np.array([0, 1, 1, 1, 1])
    Z, F = init_inducing_points(X, y, 3, 2, random_state=0)
    assert_array_equal(Z, [[1.0, 0.0], [0.0, 1.0]])
    assert_allclose(F, [[1 / 3, 2 / 3], [0.0, 1.0]])


def test_unique_rows():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, (60, 4)).astype(float)
    first, inverse = unique_rows(X)
    assert_array_equal(X[first][inverse], X)
    assert np.unique(X, axis=0).shape[0] == first.size
    assert np.all(np.diff(first) > 0)
    assert_array_equal(unique_rows(sp.csr_matrix(X))[1], inverse)
    # non-canonical CSR: unsorted indices, duplicates, explicit zeros, -0.0
    A = sp.csr_matrix(
        (
            np.array([1.0, 0.0, 2.0, 0.5, 0.5, -0.0]),
            np.array([2, 0, 1, 1, 2, 0]),
            np.array([0, 3, 6]),
        ),
        shape=(2, 3),
    )
    B = np.array([[0.0, 2.0, 1.0], [-0.0, 0.5, 0.5]])
    f, inv = unique_rows(sp.vstack([A, sp.csr_matrix(B)]).tocsr())
    assert_array_equal(f, [0, 1]) and assert_array_equal(inv, [0, 1, 0, 1])
    assert_array_equal(unique_rows(np.vstack([A.toarray(), B]))[1], [0, 1, 0, 1])


def test_empty_clusters_are_replaced(monkeypatch):
    class _OneEmptyCluster:
        """Stand-in for KMeans that leaves the last cluster empty."""

        def __init__(self, n_clusters, **kwargs):
            self.n_clusters = n_clusters

        def fit(self, P, sample_weight=None):
            return self

        def predict(self, P):
            return np.arange(P.shape[0]) % (self.n_clusters - 1)

    monkeypatch.setattr(inducing, "KMeans", _OneEmptyCluster)
    X = _binary_tokens(40, 20, 3, seed=8)
    y = np.arange(40) % 2
    for Xin in (X, X.toarray()):
        Z, F = init_inducing_points(Xin, y, 5, 2, random_state=0)
        Zd = Z.toarray() if sp.issparse(Z) else Z
        assert np.any(np.all(Zd[4] == X.toarray(), axis=1))  # a real token
        assert np.all(Zd[:4].sum(axis=1) > 0) and np.unique(Zd, axis=0).shape[0] == 5
        assert_allclose(F.sum(axis=1), 1.0)


def test_input_errors():
    X, y, _ = _blobs()
    with pytest.raises(ValueError, match="n_inducing must be >= 1"):
        init_inducing_points(X, y, 0, 3)
    with pytest.raises(TypeError, match="n_inducing must be an integer"):
        init_inducing_points(X, y, 2.0, 3)
    with pytest.raises(ValueError, match=r"\[0, n_classes\)"):
        init_inducing_points(X, y, 2, 2)
    with pytest.raises(ValueError, match=r"\[0, n_classes\)"):
        init_inducing_points(X, y - 2, 2, 3)  # -1 is an unknown label; -2 is not
    # unknown labels (-1) spread their count uniformly over the classes
    Z, F = init_inducing_points(X, np.where(np.arange(y.size) % 3 == 0, -1, y), 200, 3)
    assert_allclose(F[::3], 1.0 / 3)
    with pytest.raises(TypeError, match="integer labels"):
        init_inducing_points(X, y.astype(float), 2, 3)
    with pytest.raises(ValueError, match="one label per row"):
        init_inducing_points(X, y[:-1], 2, 3)
    with pytest.raises(ValueError, match="method"):
        init_inducing_points(X, y, 2, 3, method="kmedoids")
    with pytest.raises(ValueError, match="NaN|infinity"):
        init_inducing_points(np.full((3, 2), np.nan), [0, 1, 0], 2, 2)


def test_speed_on_large_sparse_tokens():
    # 20,000 tokens x 30,000 binary features (the chunking task's scale):
    # MiniBatchKMeans path on the random projection. It takes ~1 s on an idle
    # core; the bound leaves room for a shared CI machine.
    X = _binary_tokens(20_000, 30_000, 20, seed=9)
    y = np.random.default_rng(10).integers(0, 20, 20_000)
    start = time.perf_counter()
    Z, F = init_inducing_points(X, y, 200, 20, random_state=0)
    elapsed = time.perf_counter() - start
    assert Z.shape == (200, 30_000) and sp.issparse(Z)
    assert_allclose(F.sum(axis=1), 1.0, rtol=1e-12)
    assert elapsed < 15.0, f"init_inducing_points took {elapsed:.1f} s"


def test_sparse_projection_memory_does_not_grow_with_unused_features():
    # A wide sparse vocabulary (two million columns, five active per token)
    # is projected for k-means without the dense (n_features, d) Gaussian
    # matrix, 128 MB here at d = 8 and 2 GB at four million columns and the
    # default d = 64; the projection is still the one that matrix gives.
    import tracemalloc

    D, d = 2_000_000, 8
    X = _binary_tokens(500, D, 5, seed=11)
    y = np.random.default_rng(12).integers(0, 3, 500)
    tracemalloc.start()
    try:
        Z, F = init_inducing_points(X, y, 20, 3, random_state=0, projection_dim=d)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert Z.shape == (20, D) and sp.issparse(Z)
    assert peak < 32e6, f"init_inducing_points peaked at {peak / 1e6:.0f} MB"
    # the same projection as the dense matrix's, and the same state after it
    U = X[:300]
    a, b = np.random.RandomState(3), np.random.RandomState(3)
    dense_R = b.standard_normal((D, d)) / np.sqrt(d)
    assert_array_equal(inducing._sparse_projection(U, d, a), np.asarray(U @ dense_R))
    assert a.randint(2**31 - 1) == b.randint(2**31 - 1)
