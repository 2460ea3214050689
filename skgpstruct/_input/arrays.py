"""Input checking shared by the chain kernels.

The public functions of :mod:`skgpstruct.chain` accept array-likes and call
:func:`check_potentials` (and :func:`check_labels` when a labelling ``y`` is
given) before handing plain, C-contiguous float64 / int64 arrays to the
jitted kernels. Keeping a single canonical layout means each numba kernel is
compiled for one signature only.
"""

import numpy as np

__all__ = ["check_potentials", "check_labels", "check_lengths"]


def _as_real_array(x, name, dtype=np.float64):
    """Convert ``x`` to a C-contiguous ``dtype`` array, rejecting NaN / +inf
    and finite values too large for ``dtype``."""
    if x is None:
        raise TypeError(f"{name} must be an array-like of real numbers, got None.")
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged nested lists, odd objects
        raise ValueError(
            f"{name} could not be converted to a numeric array: {exc}"
        ) from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must contain real numbers, got an array of dtype {arr.dtype}."
        )
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; potentials must be real or -inf.")
    if np.isposinf(arr).any():
        raise ValueError(
            f"{name} contains +inf; potentials must be finite or -inf "
            "(-inf marks a forbidden label or transition)."
        )
    if arr.size and np.dtype(dtype).itemsize < arr.dtype.itemsize:
        finite = arr[np.isfinite(arr)]
        if finite.size and np.abs(finite).max() > np.finfo(dtype).max:
            raise ValueError(f"{name} has values too large for {np.dtype(dtype).name}.")
    return np.ascontiguousarray(arr, dtype=dtype)


def check_potentials(U, B, start=None, end=None):
    """Validate linear-chain potentials and bring them to the kernels' layout.

    Parameters
    ----------
    U : array-like of shape (n_steps, n_labels) or (n_samples, n_steps, n_labels)
        Unary potentials of one sequence, or of ``n_samples`` draws of them.
    B : array-like of shape (n_labels, n_labels) or (n_samples, n_labels, n_labels)
        Transition potentials, ``B[i, j]`` scoring label ``i`` followed by
        ``j``. The 3-D form is allowed only with 3-D ``U``.
    start, end : array-like of shape (n_labels,) or (n_samples, n_labels), default=None
        Optional potentials added to the first / last position. The 2-D form
        is allowed only with 3-D ``U``.

    Returns
    -------
    U3 : ndarray of shape (n_samples, n_steps, n_labels)
        Float64, C-contiguous (``n_samples = 1`` for unbatched input).
    B3 : ndarray of shape (1 or n_samples, n_labels, n_labels)
    start2, end2 : ndarray of shape (1 or n_samples, n_labels)
        Zeros when the argument is None.
    batched : bool
        Whether ``U`` was 3-D.

    Raises
    ------
    ValueError
        On a wrong number of dimensions, an empty axis, mismatched shapes,
        NaN or +inf entries.
    TypeError
        On non-numeric input.
    """
    U = _as_real_array(U, "U")
    if U.ndim not in (2, 3):
        raise ValueError(
            "U must be 2-D of shape (n_steps, n_labels) or 3-D of shape "
            f"(n_samples, n_steps, n_labels), got an array of shape {U.shape}."
        )
    batched = U.ndim == 3
    U3 = U if batched else U[np.newaxis]
    S, T, V = U3.shape
    if S == 0:
        raise ValueError("U has n_samples = 0; at least one sample is required.")
    if T == 0:
        raise ValueError("U has n_steps = 0; a chain needs at least one position.")
    if V == 0:
        raise ValueError("U has n_labels = 0; at least one label is required.")

    B = _as_real_array(B, "B")
    if B.ndim == 2:
        B3 = B[np.newaxis]
    elif B.ndim == 3 and batched:
        B3 = B
    else:
        allowed = (
            "(n_labels, n_labels) or (n_samples, n_labels, n_labels)"
            if batched
            else "(n_labels, n_labels)"
        )
        raise ValueError(f"B must have shape {allowed}, got {B.shape}.")
    if B3.shape[1:] != (V, V):
        raise ValueError(
            f"B must be square with n_labels = {V} (from U), got shape {B.shape}."
        )
    if B3.shape[0] not in (1, S):
        raise ValueError(
            f"B has {B3.shape[0]} samples but U has n_samples = {S}; pass one "
            "transition matrix per sample or a single shared (n_labels, n_labels)."
        )

    vecs = []
    for name, vec in (("start", start), ("end", end)):
        if vec is None:
            vecs.append(np.zeros((1, V)))
            continue
        vec = _as_real_array(vec, name)
        if vec.ndim == 1:
            vec2 = vec[np.newaxis]
        elif vec.ndim == 2 and batched:
            vec2 = vec
        else:
            allowed = "(n_labels,) or (n_samples, n_labels)" if batched else "(n_labels,)"
            raise ValueError(f"{name} must have shape {allowed}, got {vec.shape}.")
        if vec2.shape[1] != V or vec2.shape[0] not in (1, S):
            raise ValueError(
                f"{name} has shape {vec.shape}, incompatible with U of shape "
                f"{U.shape} (n_labels = {V}, n_samples = {S})."
            )
        vecs.append(vec2)
    return U3, B3, vecs[0], vecs[1], batched


def check_labels(y, n_steps, n_labels, name="y", *, unknown=False):
    """Validate a label sequence for a chain of ``n_steps`` positions.

    Parameters
    ----------
    y : array-like of int of shape (n_steps,)
        Labels in ``[0, n_labels)``.
    n_steps : int
        Required length.
    n_labels : int
        Number of labels.
    name : str, default="y"
        Name used in error messages.
    unknown : bool, default=False
        Whether ``-1`` (an unknown label) is allowed.

    Returns
    -------
    y : ndarray of int64 of shape (n_steps,)

    Raises
    ------
    TypeError
        If ``y`` is not integer-valued.
    ValueError
        On a wrong shape or labels out of range.
    """
    arr = np.asarray(y)
    if arr.dtype.kind == "f":
        if not (np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr))):
            raise TypeError(f"{name} must contain integer labels, got non-integer values.")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an array of integer labels, got dtype {arr.dtype}.")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D of shape (n_steps,), got shape {arr.shape}.")
    if arr.shape[0] != n_steps:
        raise ValueError(
            f"{name} has length {arr.shape[0]} but the potentials have "
            f"n_steps = {n_steps}."
        )
    low = -1 if unknown else 0
    if arr.size and (arr.min() < low or arr.max() >= n_labels):
        raise ValueError(
            f"{name} contains labels outside [0, {n_labels})"
            f"{' (-1: unknown)' if unknown else ''}: min {arr.min()}, max {arr.max()}."
        )
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_lengths(lengths, n_tokens):
    """Validate sequence lengths of a flat, ragged batch.

    Parameters
    ----------
    lengths : array-like of int of shape (n_sequences,)
        Positive lengths summing to ``n_tokens``.
    n_tokens : int
        Number of rows of the stacked unary potentials.

    Returns
    -------
    offsets : ndarray of int64 of shape (n_sequences + 1,)
        Sequence ``n`` occupies rows ``offsets[n]:offsets[n + 1]``.

    Raises
    ------
    ValueError
        On non-positive lengths, a wrong sum, or a non-1-D input.
    """
    arr = np.asarray(lengths)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"lengths must be integers, got dtype {arr.dtype}.")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"lengths must be a non-empty 1-D array, got shape {arr.shape}."
        )
    if arr.min() <= 0:
        raise ValueError("lengths must be positive (a chain needs a position).")
    if int(arr.sum()) != n_tokens:
        raise ValueError(
            f"lengths sum to {int(arr.sum())} but U has {n_tokens} rows."
        )
    offsets = np.zeros(arr.size + 1, dtype=np.int64)
    np.cumsum(arr, out=offsets[1:])
    return offsets
