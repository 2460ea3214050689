"""Initialisation of the inducing inputs and of the per-point label fractions.

GPstruct's sparse variational posterior (Galliani et al., AISTATS 2017,
supplementary 6.1) places the inducing inputs ``Z`` at k-means centres of the
training tokens and initialises the variational means at inducing point
``p`` from the fraction of ``p``'s cluster that carries each label.
:func:`init_inducing_points` returns both.
"""

from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans, MiniBatchKMeans, kmeans_plusplus
from sklearn.utils import check_array, check_random_state

from .._utils.parallel import small_blas

__all__ = ["init_inducing_points", "unique_rows"]

_MINIBATCH_THRESHOLD = 10_000


def unique_rows(X):
    """Distinct rows of a dense or CSR matrix, in order of first occurrence.

    Parameters
    ----------
    X : {ndarray, csr_matrix} of shape (n_samples, n_features)
        Matrix whose rows are compared exactly (``-0.0 == 0.0``; explicit
        zeros in a sparse matrix do not count).

    Returns
    -------
    first : ndarray of shape (n_unique,)
        Index of the first occurrence of each distinct row, increasing.
    inverse : ndarray of shape (n_samples,)
        ``inverse[i]`` is the position in ``first`` of row ``i``'s value.

    Examples
    --------
    >>> import numpy as np
    >>> first, inverse = unique_rows(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]))
    >>> first, inverse
    (array([0, 1]), array([0, 1, 0]))
    """
    n = X.shape[0]
    inverse = np.empty(n, dtype=np.intp)
    seen = {}
    first = []
    if sp.issparse(X):
        Xc = sp.csr_matrix(X, copy=True)
        Xc.sum_duplicates()
        Xc.eliminate_zeros()
        Xc.sort_indices()
        idx, data, ptr = Xc.indices.astype(np.int64), Xc.data, Xc.indptr
        keys = (
            idx[ptr[i] : ptr[i + 1]].tobytes() + data[ptr[i] : ptr[i + 1]].tobytes()
            for i in range(n)
        )
    else:
        Xd = np.ascontiguousarray(X, dtype=np.float64) + 0.0  # -0.0 -> 0.0
        keys = (Xd[i].tobytes() for i in range(n))
    for i, key in enumerate(keys):
        j = seen.setdefault(key, len(first))
        if j == len(first):
            first.append(i)
        inverse[i] = j
    return np.asarray(first, dtype=np.intp), inverse


def _check_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}.")
    return int(value)


def _take_rows(X, rows):
    return X[rows].copy() if not sp.issparse(X) else sp.csr_matrix(X[rows])


def init_inducing_points(
    X,
    y,
    n_inducing,
    n_classes,
    method="kmeans",
    random_state=None,
    *,
    projection_dim=64,
):
    """Choose inducing inputs among / around the training tokens.

    Identical token rows (frequent with sparse binary features) are merged
    first and carried as weights: k-means runs on the distinct rows with
    ``sample_weight`` equal to their counts (the same objective as on all
    tokens), and the random method never picks the same input twice (which
    would make ``Kzz`` singular).

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_tokens, n_features)
        Training tokens (all sequences stacked).
    y : array-like of int of shape (n_tokens,)
        Encoded labels in ``[0, n_classes)``.
    n_inducing : int
        Number of inducing points ``M`` (>= 1).
    n_classes : int
        Number of labels ``V``.
    method : {"kmeans", "random"}, default="kmeans"
        - "kmeans": cluster the distinct rows (weighted by their counts)
          with :class:`~sklearn.cluster.KMeans` (at most 30 Lloyd
          iterations), or :class:`~sklearn.cluster.MiniBatchKMeans` (5
          epochs of batches of 4096) beyond 10,000 distinct rows, both
          seeded once by weighted k-means++ with one trial per centre;
          ``Z`` are the exact (weighted) means of the clusters in the
          original feature space. When ``X`` is sparse or has more than
          ``projection_dim`` features, the clustering runs on a Gaussian
          random projection to ``projection_dim`` dimensions (which keeps
          squared distances up to a few tens of percent, Johnson-
          Lindenstrauss), because sklearn's k-means keeps dense
          ``(M, n_features)`` centres and takes tens of seconds on
          20,000 x 30,000 sparse tokens. Fractions are the label
          proportions of each cluster's tokens.
        - "random": ``n_inducing`` distinct rows drawn without replacement
          with probability proportional to their token counts (i.e. random
          tokens, duplicates excluded); fractions are the label proportions
          among all tokens equal to the chosen row (one-hot when the row
          occurs once).
    random_state : int, RandomState instance or None, default=None
        Seed of the projection, the k-means initialisation and the random
        subset; an int makes the result deterministic.
    projection_dim : int, default=64
        Dimension of the random projection used by "kmeans" (see above).

    Returns
    -------
    Z : {ndarray, csr_matrix} of shape (n_inducing, n_features)
        Inducing inputs, CSR when ``X`` is sparse (cluster means of sparse
        tokens are sparse: their support is the union of their members').
        Fewer than ``n_inducing`` rows can only happen in the full-model
        cases below.
    label_fractions : ndarray of shape (n_inducing, n_classes)
        Rows sum to 1.

    Notes
    -----
    Full model: if ``n_inducing >= n_tokens`` the inducing inputs are the
    tokens themselves (``Z`` is a copy of ``X``, duplicates included) with
    one-hot fractions. Otherwise, if ``n_inducing >=`` the number of
    distinct rows, ``Z`` holds each distinct row once (a GP takes the same
    value at equal inputs, so this is still the full model) with its
    tokens' label proportions, and has fewer than ``n_inducing`` rows.

    A k-means cluster left empty (possible with MiniBatchKMeans) is replaced
    by a distinct row that no other inducing point is equal to, drawn like
    "random" does.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.0, 5.1]])
    >>> Z, fractions = init_inducing_points(X, [0, 0, 1, 0], 2, 2, random_state=0)
    >>> Z[np.argsort(Z[:, 0])]
    array([[0.05, 0.  ],
           [5.  , 5.05]])
    >>> fractions[np.argsort(Z[:, 0])]
    array([[1. , 0. ],
           [0.5, 0.5]])
    """
    X, y, n_inducing, n_classes, projection_dim = _check_inputs(
        X, y, n_inducing, n_classes, method, projection_dim)
    n_tokens = X.shape[0]
    rng = check_random_state(random_state)
    if n_inducing >= n_tokens:
        Z = X.copy()
        return Z, _label_rows(y, n_classes)
    first, inverse = unique_rows(X)
    n_unique = first.size
    counts = np.zeros((n_unique, n_classes))
    np.add.at(counts, inverse, _label_rows(y, n_classes))
    weights = counts.sum(axis=1)
    U = _take_rows(X, first)
    if n_inducing >= n_unique:
        return U, counts / weights[:, None]
    if method == "random":
        rows = rng.choice(
            n_unique, size=n_inducing, replace=False, p=weights / n_tokens
        )
        return _take_rows(U, rows), counts[rows] / weights[rows, None]
    assign = _kmeans_assign(U, weights, n_inducing, projection_dim, rng)
    Z, fractions, empty = _cluster_means(U, counts, weights, assign, n_inducing)
    if empty.size:
        Z = _fill_empty(Z, fractions, empty, U, counts, weights, assign, rng)
    if sp.issparse(Z):
        Z.eliminate_zeros()
        Z.sort_indices()
    return Z, fractions


def _label_rows(y, n_classes):
    """One-hot rows of the labels ``y``; a uniform row for an unknown one
    (``-1``)."""
    rows = np.eye(n_classes)[np.maximum(y, 0)]
    rows[y < 0] = 1.0 / n_classes
    return rows


def _check_inputs(X, y, n_inducing, n_classes, method, projection_dim):
    """Validated ``(X, y, n_inducing, n_classes, projection_dim)``."""
    X = check_array(X, accept_sparse="csr", dtype=np.float64, input_name="X")
    n_tokens = X.shape[0]
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n_tokens:
        raise ValueError(
            f"y must be 1-D with one label per row of X ({n_tokens}), got shape "
            f"{y.shape}."
        )
    if not np.issubdtype(y.dtype, np.integer):
        raise TypeError(f"y must hold integer labels, got dtype {y.dtype}.")
    n_inducing = _check_int(n_inducing, "n_inducing", 1)
    n_classes = _check_int(n_classes, "n_classes", 1)
    projection_dim = _check_int(projection_dim, "projection_dim", 1)
    if y.min() < -1 or y.max() >= n_classes:
        raise ValueError(
            f"y must lie in [0, n_classes) = [0, {n_classes}) (-1: unknown), got "
            f"values in [{y.min()}, {y.max()}]."
        )
    if method not in ("kmeans", "random"):
        raise ValueError(f"method must be 'kmeans' or 'random', got {method!r}.")
    return X, y, n_inducing, n_classes, projection_dim


def _kmeans_assign(U, weights, n_inducing, projection_dim, rng):
    """Cluster of each distinct row: weighted k-means on a random projection
    (sparse or wide ``U``), seeded by one-trial k-means++."""
    n_features = U.shape[1]
    if sp.issparse(U):
        P = _sparse_projection(U, projection_dim, rng)
    elif n_features > projection_dim:
        R = rng.standard_normal((n_features, projection_dim)) / np.sqrt(projection_dim)
        P = np.asarray(U @ R)
    else:
        P = U
    seed = rng.randint(np.iinfo(np.int32).max)
    # plain (one-trial) weighted k-means++ seeding: O(n M d), where sklearn's
    # greedy default costs 2 + log(M) times more and dominates for large M
    # (its matrix-vector products are too small for threaded BLAS to pay off)
    with small_blas():
        centres, _ = kmeans_plusplus(
            P, n_inducing, sample_weight=weights, n_local_trials=1, random_state=seed
        )
    if U.shape[0] > _MINIBATCH_THRESHOLD:
        km = MiniBatchKMeans(n_clusters=n_inducing, init=centres, n_init=1,
                             batch_size=4096, max_iter=5, random_state=seed)
    else:
        km = KMeans(n_clusters=n_inducing, init=centres, n_init=1, max_iter=30,
                    random_state=seed)
    return km.fit(P, sample_weight=weights).predict(P)


#: Rows of the Gaussian projection drawn at a time by
#: :func:`_sparse_projection` (8 MiB per block at 64 dimensions).
_PROJECTION_BLOCK_ROWS = 16_384


def _sparse_projection(U, projection_dim, rng):
    """``U @ R`` for a CSR ``U`` and ``R = rng.standard_normal((n_features,
    projection_dim)) / sqrt(projection_dim)``, without the dense
    ``(n_features, projection_dim)`` matrix ``R``: it is drawn in blocks of
    rows (the same stream, leaving ``rng`` where one draw leaves it) and only
    the rows of the columns that ``U`` uses are kept. ``U``'s entries, in
    their stored order, meet the same rows of ``R`` as in ``U @ R``, so the
    result is the same, bit for bit, in ``O(nnz + n_used d)`` memory instead
    of ``O(n_features d)`` (2 GB at four million features)."""
    n_features = U.shape[1]
    used = np.zeros(n_features, dtype=bool)
    used[U.indices] = True
    cols = np.flatnonzero(used)
    scale = np.sqrt(projection_dim)
    R = np.empty((cols.size, projection_dim))
    for start in range(0, n_features, _PROJECTION_BLOCK_ROWS):
        stop = min(start + _PROJECTION_BLOCK_ROWS, n_features)
        block = rng.standard_normal((stop - start, projection_dim))
        lo, hi = np.searchsorted(cols, (start, stop))
        R[lo:hi] = block[cols[lo:hi] - start] / scale
    # each entry's column -> its row of R (entries kept in their order)
    U_used = sp.csr_matrix((U.data, np.searchsorted(cols, U.indices), U.indptr),
                           shape=(U.shape[0], cols.size))
    return np.asarray(U_used @ R)


def _cluster_means(U, counts, weights, assign, n_inducing):
    """Weighted cluster means ``Z``, their label fractions and the indices
    of the empty clusters."""
    n_unique = U.shape[0]
    member = sp.csr_matrix(
        (weights, (assign, np.arange(n_unique))), shape=(n_inducing, n_unique)
    )
    sizes = np.asarray(member.sum(axis=1)).ravel()
    empty = np.flatnonzero(sizes == 0)
    sizes[empty] = 1.0
    Z = sp.diags(1.0 / sizes) @ member @ U
    Z = sp.csr_matrix(Z) if sp.issparse(U) else np.asarray(Z)
    member.data[:] = 1.0  # indicator: counts are already per distinct row
    fractions = (member @ counts) / sizes[:, None]
    return Z, fractions, empty


def _fill_empty(Z, fractions, empty, U, counts, weights, assign, rng):
    """Replace each empty cluster by a distinct row that equals no centre
    (rows of singleton clusters are their centre, so they are excluded);
    returns ``Z`` (``fractions`` is updated in place)."""
    n_inducing = fractions.shape[0]
    n_rows = np.bincount(assign, minlength=n_inducing)
    free = np.flatnonzero(n_rows[assign] > 1)
    p = weights[free] / weights[free].sum()
    rows = free[rng.choice(free.size, size=empty.size, replace=False, p=p)]
    fractions[empty] = counts[rows] / weights[rows, None]
    if not sp.issparse(Z):
        Z[empty] = U[rows]
        return Z
    order = np.arange(n_inducing)
    order[empty] = n_inducing + np.arange(empty.size)
    return sp.vstack([Z, U[rows]], format="csr")[order]
