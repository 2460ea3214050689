"""Covariances of the weight-space form for sequences of dense features.

The weight-space form (:mod:`skgpstruct.gp.weight_space`) builds the
covariances ``X_n diag(s_v) X_n^T`` of a sequence's unary potentials from
its pair matrix (:func:`~skgpstruct.gp.weight_space.pair_matrix`), which
holds ``sum_d c_d^2`` entries, ``c_d`` the tokens of the sequence that
have feature ``d``. On sparse sentence features ``c_d`` is 1 or 2 and the
pair matrix is about as small as ``X_n`` itself. On dense features (word
embeddings, say) every ``c_d`` is ``T`` and it holds ``T^2 D`` entries: a
fit on 256 sentences of 40 tokens with 300 dense features held 1.5 GB of
pair matrices (12 bytes an entry), where the features take 25 MB.

For such a sequence the products of its dense columns come instead from
its feature matrix restricted to them, held dense (``T x D_n``): one
matrix product per sequence, ``X_n (s_v * X_n^T)`` for every label at
once, and for the gradient w.r.t. ``s`` the diagonal of ``X_n^T Sbar_v
X_n``; its other columns stay in the pair matrix, whose products are added
(:func:`dense_columns`). A column is dense where every token of the
sequence has it (``c_d = T``, two tokens or more): its ``T^2`` products
are then exactly its pair-matrix entries, so the dense product does the
same multiply-adds from ``T`` numbers instead of ``T^2``, and BLAS runs
them 1.6 to 5.1 times faster than the pair matrix's sparse product
(``python benchmarks/dense_features.py``). A sequence
takes the dense path when its dense columns hold most of its pairs, so
that the path is taken where it removes most of a pair matrix: embeddings,
alone or beside sparse features. Sparse sentence features keep the pair
matrix and their numbers bit for bit: on the six task and feature paths of
the benchmarks no sequence's dense columns hold more than 26 % of its
pairs. The choice is the sequence's own, so its moments do not depend on
the other sequences of its batch on either path.
"""

import numpy as np
import scipy.sparse as sp

__all__ = ["DenseColumns", "dense_columns"]


def _entry_rows(X):
    """The row of each stored entry of the CSR matrix ``X``."""
    return np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))


def dense_columns(X, T):
    """The columns of each sequence of a bucket that take the dense path.

    Parameters
    ----------
    X : csr_matrix of shape (n_g * T, n_features)
        Tokens of ``n_g`` sequences of length ``T``, stacked.
    T : int
        The sequence length.

    Returns
    -------
    columns : list of ndarray of int
        Per sequence, its dense columns (ascending), empty where the
        sequence keeps the pair matrix alone. With ``c_d`` the stored
        entries of column ``d`` in the sequence (as the pair matrix counts
        them), a column is dense where ``c_d >= T >= 2`` (every token has
        it); a sequence keeps them only where they hold more than half its
        pairs ``sum_d c_d^2``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> dense = np.ones((3, 4))                       # every token, every feature
    >>> sparse = np.eye(3, 4)                         # one feature a token
    >>> mixed = np.c_[np.ones((3, 1)), np.eye(3)]     # one shared column
    >>> X = sp.csr_matrix(np.vstack([dense, sparse, mixed]))
    >>> [c.tolist() for c in dense_columns(X, 3)]
    [[0, 1, 2, 3], [], [0]]
    """
    X = sp.csr_matrix(X)
    n_g = X.shape[0] // T if T else 0
    # c_d per sequence: stored entries per (sequence, column)
    seq = _entry_rows(X) // T
    counts = sp.csr_matrix((np.ones(X.nnz), (seq, X.indices)), shape=(n_g, X.shape[1]))
    c2 = counts.data ** 2
    is_dense = (counts.data >= T) & (T >= 2)
    out = []
    for a in range(n_g):
        part = slice(counts.indptr[a], counts.indptr[a + 1])
        dense_pairs = c2[part][is_dense[part]].sum()
        if dense_pairs > 0.5 * c2[part].sum():
            out.append(counts.indices[part][is_dense[part]])
        else:
            out.append(np.zeros(0, dtype=counts.indices.dtype))
    return out


class DenseColumns:
    """The dense columns of the sequences of one bucket, held dense, and the
    bucket's tokens without them.

    Parameters
    ----------
    X : csr_matrix of shape (n_g * T, n_features)
        The bucket's tokens, stacked.
    T : int
        The sequence length.
    columns : list of ndarray of int
        Per sequence, its dense columns (:func:`dense_columns`).

    Attributes
    ----------
    rest : csr_matrix of shape (n_g * T, n_features)
        ``X`` without the stored entries of the dense columns (the other
        entries in their order: a sequence without dense columns has the
        same rows, hence the same pair matrix rows).
    """

    def __init__(self, X, T, columns):
        X = sp.csr_matrix(X)
        self.positions = [a for a, cols in enumerate(columns) if cols.size]
        self.cols = [columns[a] for a in self.positions]
        self.X = [X[a * T:(a + 1) * T][:, cols].toarray()
                  for a, cols in zip(self.positions, self.cols)]
        row = _entry_rows(X)
        n_features = X.shape[1]
        dropped = np.concatenate([a * n_features + cols.astype(np.int64)
                                  for a, cols in zip(self.positions, self.cols)])
        keep = ~np.isin((row // T) * n_features + X.indices, dropped)
        indptr = np.r_[0, np.cumsum(np.bincount(row[keep], minlength=X.shape[0]))]
        self.rest = sp.csr_matrix((X.data[keep], X.indices[keep], indptr), shape=X.shape)

    def add_covariances(self, s, out):
        """Add ``X_a diag(s_v) X_a^T`` over the dense columns (V, T, T) of
        each sequence ``a`` to ``out[a]`` (``out`` of shape (n_g, V, T, T))."""
        for a, cols, Xa in zip(self.positions, self.cols, self.X):
            out[a] += Xa @ (Xa.T[None] * s[cols].T[:, :, None])

    def backward(self, Sbar, ds):
        """Add the gradient w.r.t. ``s`` (n_features, V) of the dense
        columns' part of the covariances to ``ds``, from ``Sbar`` (n_g, V,
        T, T), the gradient w.r.t. them: ``ds[d, v] += sum_{t, t'} Sbar[a,
        v, t, t'] x_td x_t'd``."""
        for a, cols, Xa in zip(self.positions, self.cols, self.X):
            G = Sbar[a] @ Xa  # (V, T, D_a)
            ds[cols] += np.einsum("vtd,td->dv", G, Xa)
