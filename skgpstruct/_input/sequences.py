"""Internal containers for validated, label-encoded sequence data.

Estimators convert the user's list-of-sequences input once into a
:class:`SequenceData`: all tokens stacked into one matrix (CSR or dense),
``lengths`` and ``offsets`` (hmmlearn's flat layout), and integer labels.
Minibatches are views made by :meth:`SequenceData.subset`.
"""

import hashlib

import numpy as np
import scipy.sparse as sp
from numba import njit

from .validation import check_sequences, check_X_sequences, stack_sequences

__all__ = ["SequenceData", "encode_labels", "sequence_seeds"]


@njit(cache=True, nogil=True)
def _dense_rows_product(X, W, out):
    """``out[t] = sum_f X[t, f] W[f]``, features in order, row by row."""
    V = W.shape[1]
    for t in range(X.shape[0]):
        for j in range(V):
            out[t, j] = 0.0
        for f in range(X.shape[1]):
            x = X[t, f]
            if x != 0.0:
                for j in range(V):
                    out[t, j] += x * W[f, j]


def _dense_product(X, W):
    """``X @ W`` for a dense ``X``, each row summed in the same order whatever
    the other rows: BLAS's matrix product rounds a row differently with the
    number of rows (a one-row product, a two-row one and a longer batch's
    differ by ~1e-16), which made a sequence's potentials depend on its
    batch."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    W = np.ascontiguousarray(W, dtype=np.float64)
    out = np.empty((X.shape[0], W.shape[1]))
    _dense_rows_product(X, W, out)
    return out


class SequenceData:
    """Stacked tokens of a list of sequences.

    Parameters
    ----------
    X_flat : ndarray or csr_matrix of shape (n_tokens, n_features)
    lengths : ndarray of int64 of shape (n_sequences,)
    y_flat : ndarray of int64 of shape (n_tokens,), default=None
        Encoded labels, ``-1`` for an unknown one (partial labels).
    dense_rows : ndarray of bool of shape (n_tokens,), default=None
        With a CSR ``X_flat`` stacked from a batch that mixed dense and
        sparse sequences: the tokens of the dense ones (:meth:`product`
        gives them the dense product they would get in an all-dense batch).
        None otherwise.
    """

    def __init__(self, X_flat, lengths, y_flat=None, dense_rows=None):
        self.X_flat = X_flat
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        self.y_flat = y_flat
        self.dense_rows = dense_rows if dense_rows is not None and dense_rows.any() else None
        # a constraint at prediction: 0 where a label is allowed, -inf where not
        self.log_mask = None

    def product(self, W):
        """``X_flat @ W`` as a dense array, each token's row computed as its
        sequence's own representation would be alone: a sparse product for
        sparse sequences, a dense one for dense sequences (also where a
        mixed batch was stacked as CSR), so that a sequence's potentials do
        not depend on the rest of its batch."""
        if not sp.issparse(self.X_flat):
            return _dense_product(self.X_flat, W)
        out = np.asarray(self.X_flat @ W)
        if self.dense_rows is not None:
            rows = np.flatnonzero(self.dense_rows)
            out[rows] = _dense_product(self.X_flat[rows].toarray(), W)
        return out

    @property
    def n_sequences(self):
        return len(self.lengths)

    @property
    def n_tokens(self):
        return int(self.offsets[-1])

    @property
    def n_known(self):
        """Number of tokens whose label is known (code ``>= 0``)."""
        return int(np.count_nonzero(self.y_flat >= 0))

    def labels_present(self, n_classes):
        """Boolean mask over the ``n_classes`` codes: those some token has
        (unknown labels, ``-1``, left out)."""
        return np.bincount(self.y_flat[self.y_flat >= 0], minlength=n_classes) > 0

    def token_index(self, seq_idx):
        """Row indices of the tokens of the sequences ``seq_idx`` (in order)."""
        seq_idx = np.asarray(seq_idx, dtype=np.int64)
        if len(seq_idx) == 0:
            return np.zeros(0, dtype=np.int64)
        starts = self.offsets[seq_idx]
        lens = self.lengths[seq_idx]
        rel = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        return np.repeat(starts, lens) + rel

    def subset(self, seq_idx):
        """A new :class:`SequenceData` with the sequences ``seq_idx`` (in order)."""
        seq_idx = np.asarray(seq_idx, dtype=np.int64)
        if np.array_equal(seq_idx, np.arange(self.n_sequences)):
            return self
        rows = self.token_index(seq_idx)
        y = None if self.y_flat is None else self.y_flat[rows]
        dense = None if self.dense_rows is None else self.dense_rows[rows]
        out = SequenceData(self.X_flat[rows], self.lengths[seq_idx], y, dense)
        out.log_mask = None if self.log_mask is None else self.log_mask[rows]
        return out

    def split(self, A):
        """Split a token-level array into per-sequence parts."""
        return [A[self.offsets[i] : self.offsets[i + 1]] for i in range(self.n_sequences)]

    @classmethod
    def from_sequences(cls, X, y=None, *, n_features=None, label_encoder=None, unknown=False):
        """Validate ``X`` (and ``y``) and stack them.

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
        y : list of array-like of shape (T_n,), default=None
        n_features : int, default=None
            Required number of features (after fit).
        label_encoder : LabelEncoder, default=None
            Fitted encoder used to map ``y`` to integers (labels it does not
            know raise a ValueError).
        unknown : bool, default=False
            Whether ``None`` in ``y`` may mark an unknown label (kept as
            None in ``y_flat``, an object array, when there is one).

        Returns
        -------
        data : SequenceData
        """
        if y is None:
            X = check_X_sequences(X, n_features=n_features)
            y_flat = None
        else:
            X, y = check_sequences(X, y, n_features=n_features, unknown=unknown)
            y_flat = np.concatenate(y)
            if label_encoder is not None:
                y_flat = encode_labels(label_encoder, y_flat)
        X_flat, lengths = stack_sequences(X)
        dense_rows = None
        if sp.issparse(X_flat):
            X_flat = sp.csr_matrix(X_flat)
            if not np.all(X_flat.data):
                # explicitly stored zeros would count as active features
                # (a GP's "seen" features, its validation's draws): the same
                # values must give the same model whether stored or not
                X_flat = X_flat.copy()  # never the caller's arrays
                X_flat.eliminate_zeros()
            dense_rows = np.repeat([not sp.issparse(x) for x in X], lengths)
        return cls(X_flat, lengths, y_flat, dense_rows)


def encode_labels(label_encoder, y_flat):
    """Map labels to integers with a fitted encoder; unknown labels raise.

    Parameters
    ----------
    label_encoder : LabelEncoder
        Fitted encoder (``classes_`` sorted).
    y_flat : ndarray of shape (n_tokens,)

    Returns
    -------
    codes : ndarray of int64 of shape (n_tokens,)
    """
    classes = label_encoder.classes_
    try:
        unknown = ~np.isin(y_flat, classes)
    except TypeError:
        unknown = np.ones(len(y_flat), dtype=bool)
    if unknown.any():
        bad = list(dict.fromkeys(y_flat[unknown].tolist()))[:5]
        raise ValueError(
            f"y contains labels not seen in fit: {bad}; known labels are "
            f"{list(classes)[:20]}."
        )
    return label_encoder.transform(y_flat).astype(np.int64)


_SEED_MOD = 2 ** 31 - 1


def sequence_seeds(data, seed):
    """One seed per sequence, from ``seed`` and the sequence's features only.

    The features of sequence ``n`` are put in a canonical form (CSR,
    float64, sorted indices, explicit zeros dropped: dense and sparse input
    of the same values agree) and hashed (BLAKE2b) with ``seed``, so a
    sequence's seed does not depend on the other sequences of ``data``,
    their order, or how they are chunked.

    Parameters
    ----------
    data : SequenceData
        The sequences.
    seed : int
        A fitted model's ``predict_seed_``.

    Returns
    -------
    seeds : ndarray of int64 of shape (n_sequences,)
        In ``[0, 2**31 - 1)``.

    Examples
    --------
    >>> import numpy as np
    >>> a, b = np.eye(3)[:2], np.ones((3, 3))
    >>> s1 = sequence_seeds(SequenceData.from_sequences([a, b]), 7)
    >>> s2 = sequence_seeds(SequenceData.from_sequences([b]), 7)
    >>> bool(s1[1] == s2[0]), bool(s1[0] != s1[1])
    (True, True)
    """
    X = sp.csr_matrix(data.X_flat, dtype=np.float64, copy=True)
    X.sum_duplicates()  # also sorts the indices
    X.eliminate_zeros()
    head = np.array([int(seed), X.shape[1]], dtype=np.int64).tobytes()
    offsets = data.offsets
    out = np.empty(data.n_sequences, dtype=np.int64)
    for n in range(data.n_sequences):
        a, b = offsets[n], offsets[n + 1]
        lo, hi = X.indptr[a], X.indptr[b]
        h = hashlib.blake2b(head, digest_size=8)
        h.update(np.diff(X.indptr[a:b + 1]).astype(np.int64).tobytes())
        h.update(X.indices[lo:hi].astype(np.int64).tobytes())
        h.update(X.data[lo:hi].tobytes())
        out[n] = int.from_bytes(h.digest(), "little") % _SEED_MOD
    return out
