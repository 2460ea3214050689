"""Validation of sequence inputs.

Sequence data in skgpstruct follows sklearn-crfsuite: ``X`` is a list of
sequences, sequence ``n`` a 2-D array-like or scipy.sparse matrix of shape
``(T_n, n_features)`` (one row per token), and ``y`` a list of 1-D array-likes
of labels of length ``T_n``. The outer axis is the one that cross-validation
splits. Internally the estimators also use hmmlearn's flat form: all tokens
stacked into one matrix plus ``lengths``.
"""


import numpy as np
import scipy.sparse as sp

__all__ = [
    "check_X_sequences",
    "check_y_sequences",
    "check_sequences",
    "stack_sequences",
]


def _is_sequence_container(obj):
    return isinstance(obj, (list, tuple)) or (
        isinstance(obj, np.ndarray) and obj.dtype == object and obj.ndim == 1
    )


def check_X_sequences(X, *, n_features=None, accept_sparse=True, dtype=np.float64):
    """Validate a list of token-feature sequences.

    Parameters
    ----------
    X : list of array-like or sparse matrix of shape (T_n, n_features)
        One entry per sequence, one row per token.
    n_features : int, default=None
        If given, every sequence must have exactly this many columns (used
        after ``fit`` to check test data against the training data).
    accept_sparse : bool, default=True
        Whether scipy.sparse matrices are allowed (converted to CSR).
    dtype : dtype, default=np.float64
        Dtype of the returned arrays.

    Returns
    -------
    X_checked : list of ndarray or csr_matrix of shape (T_n, n_features)
        C-contiguous float arrays (or canonical CSR matrices).

    Raises
    ------
    ValueError
        On an empty list, an empty sequence, a sequence that is not 2-D,
        inconsistent numbers of features, or NaN / infinite values; the
        message names the offending sequence.
    TypeError
        If ``X`` is not a list of sequences, or a sparse sequence is given
        while ``accept_sparse`` is False.
    """
    if sp.issparse(X) or (isinstance(X, np.ndarray) and X.dtype != object):
        raise TypeError(
            "X must be a list of sequences (one 2-D array or sparse matrix of "
            "shape (n_tokens, n_features) per sequence), got a single "
            f"{type(X).__name__}; wrap a single sequence as [X]."
        )
    if not _is_sequence_container(X):
        try:
            X = list(X)
        except TypeError:
            raise TypeError(
                "X must be a list of sequences, got " f"{type(X).__name__}."
            ) from None
    if len(X) == 0:
        raise ValueError("X is empty: at least one sequence is required.")
    out = []
    for i, seq in enumerate(X):
        if sp.issparse(seq):
            if not accept_sparse:
                raise TypeError(
                    f"Sequence {i} is a sparse matrix but this method needs "
                    "dense input; convert it with .toarray()."
                )
            seq = sp.csr_matrix(seq, dtype=dtype)
            seq.sum_duplicates()
            values = seq.data
        else:
            try:
                seq = np.asarray(seq, dtype=dtype)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"Sequence {i} of X could not be converted to a numeric "
                    f"array: {exc}"
                ) from None
            if seq.ndim != 2:
                raise ValueError(
                    f"Sequence {i} of X must be 2-D (n_tokens, n_features), "
                    f"got an array with {seq.ndim} dimension(s) and shape "
                    f"{seq.shape}."
                )
            seq = np.ascontiguousarray(seq)
            values = seq
        if seq.shape[0] == 0:
            raise ValueError(f"Sequence {i} of X is empty (0 tokens).")
        if seq.shape[1] == 0:
            raise ValueError(f"Sequence {i} of X has 0 features.")
        if not np.all(np.isfinite(values)):
            raise ValueError(
                f"Sequence {i} of X contains NaN or infinite values."
            )
        if n_features is None:
            n_features = seq.shape[1]
        elif seq.shape[1] != n_features:
            raise ValueError(
                f"Sequence {i} of X has {seq.shape[1]} features, expected "
                f"{n_features}."
            )
        out.append(seq)
    return out


def _label_kind(seq):
    """``"str"``, ``"number"`` or ``"mixed"``: the type of a sequence's labels."""
    if isinstance(seq, np.ndarray) and seq.dtype != object:
        return "str" if seq.dtype.kind in "US" else "number"
    is_str = [isinstance(v, (str, bytes)) for v in np.ravel(np.asarray(seq, dtype=object))]
    if all(is_str):
        return "str"
    return "mixed" if any(is_str) else "number"


def check_y_sequences(y, lengths=None):
    """Validate a list of label sequences.

    Parameters
    ----------
    y : list of array-like of shape (T_n,)
        Labels (str or int) of each sequence.
    lengths : array-like of int of shape (n_sequences,), default=None
        Expected length of every sequence (those of ``X``).

    Returns
    -------
    y_checked : list of ndarray of shape (T_n,)

    Raises
    ------
    ValueError
        On an empty list, a label sequence that is not 1-D or is empty,
        mismatched numbers of sequences or tokens, or labels of mixed types
        (str and numbers, within or across sequences).
    """
    if isinstance(y, np.ndarray) and y.dtype != object:
        raise TypeError(
            "y must be a list of label sequences (one 1-D array-like per "
            "sequence), got a single ndarray."
        )
    if not _is_sequence_container(y):
        try:
            y = list(y)
        except TypeError:
            raise TypeError(
                f"y must be a list of label sequences, got {type(y).__name__}."
            ) from None
    if len(y) == 0:
        raise ValueError("y is empty: at least one sequence is required.")
    if lengths is not None and len(lengths) != len(y):
        raise ValueError(
            f"X has {len(lengths)} sequences but y has {len(y)}."
        )
    out, first_kind = [], None
    for i, seq in enumerate(y):
        if isinstance(seq, str):
            raise ValueError(
                f"Sequence {i} of y is a string; each sequence of y must be a "
                "list of labels, one per token."
            )
        kind = _label_kind(seq)
        seq = np.asarray(seq)
        if seq.ndim != 1:
            raise ValueError(
                f"Sequence {i} of y must be 1-D, got shape {seq.shape}."
            )
        if seq.shape[0] == 0:
            raise ValueError(f"Sequence {i} of y is empty (0 labels).")
        if lengths is not None and seq.shape[0] != lengths[i]:
            raise ValueError(
                f"Sequence {i} has {lengths[i]} tokens in X but "
                f"{seq.shape[0]} labels in y."
            )
        if first_kind is None:
            first_kind = (i, kind)
        if kind == "mixed" or kind != first_kind[1]:
            where = (f"sequence {i} mixes str and non-str labels" if kind == "mixed"
                     else f"sequence {first_kind[0]} has {first_kind[1]} labels, "
                     f"sequence {i} {kind} labels")
            raise ValueError(
                f"y mixes label types ({where}); use one type (all str or all "
                "numbers) for every label, so that they are not silently converted."
            )
        out.append(seq)
    return out


def check_sequences(X, y, **kwargs):
    """Validate paired sequence inputs ``X`` and labels ``y``.

    Parameters
    ----------
    X : list of array-like or sparse matrix of shape (T_n, n_features)
    y : list of array-like of shape (T_n,)
    **kwargs
        Passed to :func:`check_X_sequences`.

    Returns
    -------
    X_checked : list
    y_checked : list of ndarray
    """
    X = check_X_sequences(X, **kwargs)
    y = check_y_sequences(y, lengths=[x.shape[0] for x in X])
    return X, y


def stack_sequences(X):
    """Stack sequences into one token matrix plus their lengths.

    Parameters
    ----------
    X : list of ndarray or sparse matrix of shape (T_n, n_features)
        Validated sequences (see :func:`check_X_sequences`).

    Returns
    -------
    X_flat : ndarray or csr_matrix of shape (n_tokens, n_features)
    lengths : ndarray of int64 of shape (n_sequences,)
    """
    lengths = np.array([x.shape[0] for x in X], dtype=np.int64)
    if any(sp.issparse(x) for x in X):
        X_flat = sp.vstack([sp.csr_matrix(x) for x in X], format="csr")
    else:
        X_flat = np.concatenate(X, axis=0)
    return X_flat, lengths

