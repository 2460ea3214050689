"""Validation of sequence inputs.

Sequence data in skgpstruct follows sklearn-crfsuite: ``X`` is a list of
sequences, sequence ``n`` a 2-D array-like or scipy.sparse matrix of shape
``(T_n, n_features)`` (one row per token), and ``y`` a list of 1-D array-likes
of labels of length ``T_n``. The outer axis is the one that cross-validation
splits. Internally the estimators also use hmmlearn's flat form: all tokens
stacked into one matrix plus ``lengths``.

Containers: ``X`` and ``y`` are lists (or tuples, or 1-D object arrays, or
other sized, indexable sequences such as a pandas Series) of sequences. A
generator or iterator is refused: estimators index the data (cross-validation
splits the outer axis) and may read it more than once, and a single 2-D
array is refused because it is ambiguous (one sequence, or one token per
sequence?).

Feature scale: every token's features must have an L1 norm
``sum_d |x_td|`` of at most :data:`MAX_TOKEN_L1_NORM` (1e15). The
potentials are linear in the features, ``U_t = x_t W``, and
``|x_t W| <= ||x_t||_1 max|W|``; both taggers start from weights of order
one (the CRF from zero with an L-BFGS first step of unit length or Adam
steps of ``learning_rate``, the GP from its ``N(0, sigma^2)`` prior). A
float64 potential above ``1 / eps = 4.5e15`` carries a rounding error of
more than one nat, so the exponentials of forward-backward (which only see
differences of potentials) become noise, and near ``1e154`` the kernels'
squared norms overflow (features scaled by 1e300 used to fail deep inside
with "U contains NaN"). Measured on make_chain_data with its features
scaled by a factor: the Adam-trained CRF degrades from 1e16 and gets NaN
potentials from 1e20, the randomized one non-finite marginals from 1e20.
(Smaller factors can still defeat an optimiser: the L-BFGS-trained CRF
stops at its starting point from 1e12, the GP's covariances lose positive
definiteness from 1e6; the limit only refuses what no fit can represent.)
Scale such features first (sklearn's MaxAbsScaler or StandardScaler on the
stacked tokens).
"""

from collections.abc import Iterator, Mapping

import numpy as np
import scipy.sparse as sp

__all__ = [
    "check_X_sequences",
    "check_y_sequences",
    "check_sequences",
    "stack_sequences",
    "MAX_TOKEN_L1_NORM",
]

#: Largest accepted ``sum_d |x_td|`` of a token (see the module docstring):
#: bounds the potentials of unit weights well below ``1 / eps ~ 4.5e15``.
MAX_TOKEN_L1_NORM = 1e15


def _is_sequence_container(obj):
    return isinstance(obj, (list, tuple)) or (
        isinstance(obj, np.ndarray) and obj.dtype == object and obj.ndim == 1
    )


def _as_sequence_list(obj, name, what):
    """``obj`` as a list-like of sequences; refuses iterators and unordered
    or unsized containers with a TypeError that says to pass a list."""
    if _is_sequence_container(obj):
        return obj
    if isinstance(obj, Iterator):
        raise TypeError(
            f"{name} must be a list of {what}, got a {type(obj).__name__} (an "
            "iterator): estimators index the sequences (cross-validation splits "
            "them) and may read them more than once, which an iterator does not "
            f"allow; pass a list, e.g. list({name})."
        )
    if (isinstance(obj, (str, bytes, Mapping)) or not hasattr(obj, "__len__")
            or not hasattr(obj, "__getitem__")):
        raise TypeError(
            f"{name} must be a list of {what}, got {type(obj).__name__}; pass "
            "a list (or tuple) with one entry per sequence."
        )
    return list(obj)


def _too_large_message(i, norms):
    t = int(np.argmax(np.where(np.isnan(norms), -np.inf, norms)))
    size = ("overflows float64" if not np.isfinite(norms[t])
            else f"= {norms[t]:.3g}")
    return (
        f"Sequence {i} of X has features too large for the potentials: token {t} "
        f"has sum(|x|) {size}, above the limit of {MAX_TOKEN_L1_NORM:.0e}. The "
        "potentials are linear in the features (x @ W), and at this scale they "
        "overflow or lose all precision in the exponentials of forward-backward. "
        "Scale the features first, e.g. fit sklearn.preprocessing.MaxAbsScaler "
        "(keeps sparsity) or StandardScaler on the stacked tokens "
        "(np.vstack(X) or scipy.sparse.vstack(X)) and transform each sequence."
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
        inconsistent numbers of features, complex, NaN or infinite values,
        or a token whose features sum to more than
        :data:`MAX_TOKEN_L1_NORM` in absolute value (too large for the
        potentials: scale them); the message names the offending sequence.
    TypeError
        If ``X`` is not a list of sequences (a single array or sparse
        matrix, a generator or iterator), or a sparse sequence is given
        while ``accept_sparse`` is False.
    """
    if sp.issparse(X) or (isinstance(X, np.ndarray) and X.dtype != object):
        hint = ("pass list(X) for a 3-D array of equal-length sequences"
                if getattr(X, "ndim", 2) == 3 else "wrap a single sequence as [X]")
        raise TypeError(
            "X must be a list of sequences (one 2-D array or sparse matrix of "
            "shape (n_tokens, n_features) per sequence), got a single "
            f"{type(X).__name__}; {hint}."
        )
    X = _as_sequence_list(X, "X", "sequences (2-D arrays or sparse matrices)")
    if len(X) == 0:
        raise ValueError("X is empty: at least one sequence is required.")
    out = []
    for i, seq in enumerate(X):
        if getattr(getattr(seq, "dtype", None), "kind", None) == "c":
            raise ValueError(
                f"Sequence {i} of X has complex values; features must be real "
                "(converting would silently drop the imaginary parts)."
            )
        if sp.issparse(seq):
            if not accept_sparse:
                raise TypeError(
                    f"Sequence {i} is a sparse matrix but this method needs "
                    "dense input; convert it with .toarray()."
                )
            seq = sp.csr_matrix(seq, dtype=dtype)  # shares the caller's arrays
            if not seq.has_canonical_format:
                # sum_duplicates works in place: never on the caller's
                # (possibly read-only) arrays
                seq = seq.copy()
                seq.sum_duplicates()
            values = seq.data
        else:
            try:
                seq = np.asarray(seq, dtype=dtype)
            except (TypeError, ValueError) as exc:
                _raise_if_token_descriptions(seq, i)
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
        # sum_d |x_td|: NaN / inf for NaN or infinite entries, inf also when
        # finite entries overflow; one pass checks both
        with np.errstate(over="ignore"):
            norms = np.asarray(abs(seq).sum(axis=1), dtype=np.float64).ravel()
        if not norms.max() <= MAX_TOKEN_L1_NORM:
            if not np.all(np.isfinite(values)):
                raise ValueError(
                    f"Sequence {i} of X contains NaN or infinite values."
                )
            raise ValueError(_too_large_message(i, norms))
        if n_features is None:
            n_features = seq.shape[1]
        elif seq.shape[1] != n_features:
            raise ValueError(
                f"Sequence {i} of X has {seq.shape[1]} features, expected "
                f"{n_features}."
            )
        out.append(seq)
    return out


def _raise_if_token_descriptions(seq, i):
    """TypeError naming the transformer to use when sequence ``i`` of X holds
    token descriptions (sklearn-crfsuite's feature dicts or feature-name
    lists, words, CRF++ columns) rather than numbers."""
    try:
        token = next(iter(seq))
    except (TypeError, StopIteration):
        return
    if isinstance(token, Mapping):
        what = "feature dicts (sklearn-crfsuite's format)"
    elif isinstance(token, (str, bytes)):
        what = "strings"
    elif isinstance(token, (list, tuple)) and token and all(
            isinstance(v, (str, bytes)) for v in token):
        what = "lists of strings (feature names or CRF++ columns)"
    else:
        return
    raise TypeError(
        f"Sequence {i} of X holds {what}, not numeric features: put a "
        "transformer first, e.g. make_pipeline(skgpstruct.features."
        "SequenceVectorizer(), tagger) for feature dicts or names, "
        "WordFeatures() for words, CRFppTemplate(template) for CRF++ columns."
    )


def _label_kind(seq):
    """``"str"``, ``"number"``, ``"mixed"`` or ``"none"`` (every label None):
    the type of a sequence's labels, None (unknown) left out."""
    if isinstance(seq, np.ndarray) and seq.dtype != object:
        return "str" if seq.dtype.kind in "US" else "number"
    values = [v for v in np.ravel(np.asarray(seq, dtype=object)) if v is not None]
    if not values:
        return "none"
    is_str = [isinstance(v, (str, bytes)) for v in values]
    if all(is_str):
        return "str"
    return "mixed" if any(is_str) else "number"


def known_labels(y_flat):
    """Which labels of the stacked ``y_flat`` are known (not None)."""
    if y_flat.dtype != object:
        return np.ones(y_flat.shape, dtype=bool)
    return np.array([v is not None for v in y_flat], dtype=bool)


def _missing_mask(seq):
    """Which labels of the 1-D array ``seq`` are missing: float NaN or None."""
    if seq.dtype.kind in "fc":
        return np.isnan(seq)
    if seq.dtype == object:
        return np.array([v is None or (isinstance(v, (float, np.floating)) and v != v)
                         for v in seq], dtype=bool)
    return np.zeros(seq.shape, dtype=bool)


def check_y_sequences(y, lengths=None, *, unknown=False):
    """Validate a list of label sequences.

    Parameters
    ----------
    y : list of array-like of shape (T_n,)
        Labels (str or int) of each sequence.
    lengths : array-like of int of shape (n_sequences,), default=None
        Expected length of every sequence (those of ``X``).
    unknown : bool, default=False
        Whether ``None`` may mark an unknown label (partial labels); a NaN
        label is refused either way.

    Returns
    -------
    y_checked : list of ndarray of shape (T_n,)

    Raises
    ------
    TypeError
        If ``y`` is not a list of label sequences (a single array, a
        generator or iterator).
    ValueError
        On an empty list, a label sequence that is not 1-D or is empty,
        mismatched numbers of sequences or tokens, a NaN or None label, or
        labels of mixed types (str and numbers, within or across sequences).
    """
    if isinstance(y, np.ndarray) and y.dtype != object:
        raise TypeError(
            "y must be a list of label sequences (one 1-D array-like per "
            "sequence), got a single ndarray."
        )
    y = _as_sequence_list(y, "y", "label sequences")
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
        missing = _missing_mask(seq)
        if unknown and seq.dtype == object:
            missing &= np.array([v is not None for v in seq], dtype=bool)
        if missing.any():
            t = int(np.flatnonzero(missing)[0])
            raise ValueError(
                f"Sequence {i} of y has a missing label ({seq[t]!r}, token {t}): "
                "a missing label is not a class; drop or fill that token's label"
                + (" (None marks an unknown label)." if unknown else
                   " (fit takes None for an unknown label).")
            )
        if lengths is not None and seq.shape[0] != lengths[i]:
            raise ValueError(
                f"Sequence {i} has {lengths[i]} tokens in X but "
                f"{seq.shape[0]} labels in y."
            )
        if kind == "none":
            out.append(seq)
            continue
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


def check_sequences(X, y, *, unknown=False, **kwargs):
    """Validate paired sequence inputs ``X`` and labels ``y``.

    Parameters
    ----------
    X : list of array-like or sparse matrix of shape (T_n, n_features)
    y : list of array-like of shape (T_n,)
    unknown : bool, default=False
        Whether ``None`` may mark an unknown label.
    **kwargs
        Passed to :func:`check_X_sequences`.

    Returns
    -------
    X_checked : list
    y_checked : list of ndarray
    """
    X = check_X_sequences(X, **kwargs)
    y = check_y_sequences(y, lengths=[x.shape[0] for x in X], unknown=unknown)
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

