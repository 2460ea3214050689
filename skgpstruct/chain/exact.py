"""Exact inference on linear chains: log-space forward-backward and Viterbi.

All functions take unary potentials ``U`` of shape ``(T, V)`` (one sequence)
or ``(S, T, V)`` (``S`` samples of the potentials of the same sequence) and
transitions ``B`` of shape ``(V, V)`` (shared) or ``(S, V, V)``, with
``B[i, j]`` the score of label ``i`` at position ``t - 1`` followed by label
``j`` at ``t``. Optional ``start`` / ``end`` of shape ``(V,)`` or ``(S, V)``
are added to ``U[0]`` / ``U[T - 1]``: everywhere below, including the
lattices, they are *folded into the unary potentials* of the first and last
position, so the gradient with respect to ``start`` is ``grad_U[..., 0, :]``
and with respect to ``end`` is ``grad_U[..., -1, :]``.

The model is

.. math::

    \\log p(y \\mid U, B) = \\sum_t U_{t, y_t} + \\sum_{t \\geq 1} B_{y_{t-1}, y_t}
    + \\mathrm{start}_{y_0} + \\mathrm{end}_{y_{T-1}} - \\log Z(U, B).

``-inf`` potentials mark forbidden labels or transitions and never produce
NaN: ``log Z = -inf`` when every path is forbidden, and the marginals of
impossible states (all states, in that case) are 0. NaN and ``+inf`` are
rejected with a ValueError.

The kernels are numba ``njit(cache=True, nogil=True)`` functions.
Forward-backward (``marginals``, ``log_likelihood(_grad)``,
``log_partition`` and the ragged forms) runs in scaled linear space
(:mod:`skgpstruct.chain._linear_space_kernels`: the potentials exponentiated once,
the forward vectors normalised at every step) wherever the ranges of the
potentials bound every quantity away from under- and overflow, and
otherwise, per sequence, by the log-space kernels of
:mod:`skgpstruct.chain._exact_kernels`, whose lattices (``forward_log``,
``backward_log``) keep each step's log-sum-exp as a scaled product falling
back to the exact two-pass log-sum-exp wherever that could underflow (see
``_TINY``). Batched kernels loop over samples inside numba; the
single-sequence cores work on slices, which the ragged kernels use for
sequences of different lengths stacked in one array. A sequence's results
never depend on the other sequences of a call, except in
``log_likelihood_grad_ragged`` with a shared B, which runs the sequences of
a call together as matrix-matrix products (its per-sequence values and
gradients then agree with those of single calls to rounding). Plain-numpy
references live in :mod:`skgpstruct.chain._reference`.
"""

import numpy as np

from . import _linear_space_kernels as _lin
from ._exact_kernels import (
    _backward_kernel,
    _forward_kernel,
    _viterbi_kernel,
    _viterbi_ragged_kernel,
)
from .._input.arrays import _as_real_array, check_labels, check_lengths, check_potentials

__all__ = [
    "forward_log",
    "backward_log",
    "log_partition",
    "log_likelihood",
    "log_likelihood_grad",
    "marginals",
    "viterbi",
    "log_likelihood_grad_ragged",
    "viterbi_ragged",
    "marginals_ragged",
]

# Passed as ``y`` to the forward(-backward) kernels: log Z / marginals, no labels.
_NO_LABELS = np.empty(0, dtype=np.int64)

# log_likelihood_grad_ragged with a shared B runs the sequences of a call
# together as matrix-matrix products (BLAS) from _lin._BLAS_MIN_LABELS labels
# on; below it, one sequence at a time (measured: the BLAS pass is ~1.4x
# faster from V = 14 on, 1.7x at V = 444, for 32 sequences of length 12-32),
# by blocks of at most this many sequences.
_BLAS_BLOCK = 256


# -------------------------------------------- linear-space kernels (see _lin)
def _fb_linear(U3, B3, st, en, y, unary, pairwise):
    """Forward-backward per sample, in linear space where safe."""
    return _lin._fb_kernel(U3, B3, st, en, y, unary, pairwise,
                           np.empty(U3.shape[0], dtype=np.int8))


def _log_z_linear(U3, B3, st, en, y):
    """log Z (or log p(y)) per sample, the same arithmetic as :func:`_fb_linear`."""
    return _lin._forward_kernel(U3, B3, st, en, y, np.empty(U3.shape[0], dtype=np.int8))


def _ragged_fb(U2, offsets, B3, st, en, y, unary, pairwise, fell):
    """Ragged forward-backward: the BLAS training pass where it applies (by
    blocks of at most _BLAS_BLOCK sequences, which bounds its scratch memory
    to a few times that block's unaries), else one sequence at a time."""
    if not (y.shape[0] > 0 and B3.shape[0] == 1 and pairwise.shape[0] == 1
            and U2.shape[1] >= _lin._BLAS_MIN_LABELS):
        return _lin._fb_ragged_kernel(U2, offsets, B3, st, en, y, unary, pairwise, fell)
    n = offsets.shape[0] - 1
    values = np.empty(n)
    pairwise[0] = 0.0
    gB = np.empty_like(pairwise)
    for n0 in range(0, n, _BLAS_BLOCK):
        n1 = min(n, n0 + _BLAS_BLOCK)
        a, b = offsets[n0], offsets[n1]
        values[n0:n1] = _lin._ll_grad_ragged_blas(
            U2[a:b], offsets[n0:n1 + 1] - a, B3, st, en, y[a:b], unary[a:b], gB, fell[n0:n1])
        pairwise[0] += gB[0]
    return values


def _fallbacks(U, B, start=None, end=None, y=None):
    """Which samples of ``U`` (batched or not) the forward-backward kernel of
    :func:`marginals` / :func:`log_likelihood_grad` computes in log space
    (bool per sample), as the kernel itself reports it."""
    U3, B3, st, en, _ = check_potentials(U, B, start, end)
    S, T, V = U3.shape
    labels = _NO_LABELS if y is None else check_labels(y, T, V, unknown=True)
    fell = np.empty(S, dtype=np.int8)
    _lin._fb_kernel(U3, B3, st, en, labels, np.empty((S, T, V)), np.empty((S, V, V)), fell)
    return fell.astype(bool)


def _ragged_fallbacks(U, lengths, B, y=None, start=None, end=None):
    """Which sequences the ragged kernel of :func:`log_likelihood_grad_ragged`
    (``y`` given) or :func:`marginals_ragged` computes in log space."""
    U2, offsets, B3, st, en, per_chain = _check_ragged(U, lengths, B, start, end)
    n = offsets.shape[0] - 1
    fell = np.empty(n, dtype=np.int8)
    if y is None:
        _ragged_fb(U2, offsets, B3, st, en, _NO_LABELS, np.empty_like(U2),
                   np.empty((n,) + B3.shape[1:]), fell)
    else:
        y = check_labels(y, U2.shape[0], U2.shape[1], unknown=True)
        _ragged_fb(U2, offsets, B3, st, en, y, np.empty_like(U2), np.empty_like(B3), fell)
    return fell.astype(bool)


# ------------------------------------------------------------ public wrappers
def _batched_call(kernel, outputs, U, B, start, end, y=None):
    """Check the potentials (and labels ``y``), allocate ``outputs`` (each
    "lattice" (S, T, V), "pair" (S, V, V) or "path" (S, T)), run ``kernel``
    on them; return its result followed by the outputs, without the sample
    axis for unbatched ``U`` (per-sample scalars become floats)."""
    U3, B3, st, en, batched = check_potentials(U, B, start, end)
    S, T, V = U3.shape
    shapes = {"lattice": (S, T, V), "pair": (S, V, V), "path": (S, T)}
    arrays = [np.empty(shapes[o], dtype=np.int64 if o == "path" else float) for o in outputs]
    labels = () if y is None else (y if y is _NO_LABELS else check_labels(y, T, V, unknown=True),)
    results = (kernel(U3, B3, st, en, *labels, *arrays), *arrays)
    if batched:
        return results
    return tuple(None if x is None else float(x[0]) if x.ndim == 1 else x[0] for x in results)


def forward_log(U, B, start=None, end=None):
    """Forward lattice of a linear chain in log space.

    Parameters
    ----------
    U : array-like of shape (n_steps, n_labels) or (n_samples, n_steps, n_labels)
        Unary potentials.
    B : array-like of shape (n_labels, n_labels) or (n_samples, n_labels, n_labels)
        Transition potentials, ``B[i, j]`` for label ``i`` followed by ``j``.
    start, end : array-like of shape (n_labels,) or (n_samples, n_labels), default=None
        Potentials added to the first / last position.

    Returns
    -------
    fwdlattice : ndarray of the shape of ``U``
        ``fwdlattice[..., t, j]`` is the log of the summed exp-scores of all
        label prefixes ``y_0..y_t`` with ``y_t = j``, including ``start``
        (and ``end`` at ``t = n_steps - 1``), so that
        ``log Z = logsumexp(fwdlattice[..., -1, :])``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import forward_log
    >>> forward_log(np.zeros((2, 2)), np.zeros((2, 2)))
    array([[0.        , 0.        ],
           [0.69314718, 0.69314718]])
    """
    return _batched_call(_forward_kernel, ["lattice"], U, B, start, end)[1]


def backward_log(U, B, start=None, end=None):
    """Backward lattice of a linear chain in log space.

    Parameters
    ----------
    U, B, start, end
        As in :func:`forward_log`.

    Returns
    -------
    bwdlattice : ndarray of the shape of ``U``
        ``bwdlattice[..., t, i]`` is the log of the summed exp-scores of all
        label suffixes ``y_{t+1}..y_{T-1}`` following ``y_t = i``, with
        ``end`` counted in the last position's unary potential; hence
        ``bwdlattice[..., T - 1, :] = 0`` and ``fwdlattice + bwdlattice -
        log Z`` is the log of the unary marginals.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import backward_log
    >>> backward_log(np.zeros((2, 2)), np.zeros((2, 2)))
    array([[0.69314718, 0.69314718],
           [0.        , 0.        ]])
    """
    return _batched_call(_backward_kernel, ["lattice"], U, B, start, end)[1]


def log_partition(U, B, start=None, end=None):
    """Log partition function log Z of a linear chain.

    Parameters
    ----------
    U, B, start, end
        As in :func:`forward_log`.

    Returns
    -------
    log_z : float or ndarray of shape (n_samples,)
        ``-inf`` when every label path contains a ``-inf`` potential.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import log_partition
    >>> round(log_partition(np.zeros((3, 2)), np.zeros((2, 2))), 6)  # log 2**3
    2.079442
    """
    return _batched_call(_log_z_linear, [], U, B, start, end, _NO_LABELS)[0]


def marginals(U, B, start=None, end=None):
    """Unary marginals and summed pairwise marginals by forward-backward.

    Parameters
    ----------
    U, B, start, end
        As in :func:`forward_log`.

    Returns
    -------
    unary : ndarray of the shape of ``U``
        ``unary[..., t, j] = p(y_t = j)``; each row sums to 1 (all zeros if
        every path is forbidden).
    pairwise : ndarray of shape (n_labels, n_labels) or (n_samples, n_labels, n_labels)
        ``sum_{t >= 1} p(y_{t-1} = i, y_t = j)``; zeros when ``n_steps = 1``.
        It is the gradient of log Z with respect to ``B``, as ``unary`` is
        with respect to ``U``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import marginals
    >>> unary, pairwise = marginals(np.zeros((2, 2)), np.zeros((2, 2)))
    >>> unary
    array([[0.5, 0.5],
           [0.5, 0.5]])
    >>> pairwise
    array([[0.25, 0.25],
           [0.25, 0.25]])
    """
    return _batched_call(_fb_linear, ["lattice", "pair"], U, B, start, end, _NO_LABELS)[1:]


def log_likelihood(U, B, y, start=None, end=None):
    """Log-likelihood log p(y | U, B) of a labelling under a linear-chain CRF.

    Parameters
    ----------
    U, B
        As in :func:`forward_log`.
    y : array-like of int of shape (n_steps,)
        Labels in ``[0, n_labels)``, or ``-1`` for an unknown label: the
        likelihood of the known labels is then the sum over the paths that
        agree with them, ``log Z_c - log Z`` (Tsuboi et al. 2008); with
        batched ``U`` the same ``y`` is scored under every sample.
    start, end
        As in :func:`forward_log`.

    Returns
    -------
    log_likelihood : float or ndarray of shape (n_samples,)
        ``-inf`` when ``y`` uses a forbidden (``-inf``) potential.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import log_likelihood
    >>> round(log_likelihood(np.zeros((3, 2)), np.zeros((2, 2)), [0, 1, 1]), 6)
    -2.079442
    """
    return _batched_call(_log_z_linear, [], U, B, start, end, y)[0]


def log_likelihood_grad(U, B, y, start=None, end=None):
    """Log-likelihood and its gradients with respect to the potentials.

    Parameters
    ----------
    U, B, y, start, end
        As in :func:`log_likelihood`.

    Returns
    -------
    value : float or ndarray of shape (n_samples,)
        log p(y | U, B), as :func:`log_likelihood`.
    grad_U : ndarray of the shape of ``U``
        ``onehot(y) - unary marginals`` (with unknown labels: the marginals
        given the known labels minus the unary marginals). The gradient with respect to
        ``start`` is ``grad_U[..., 0, :]`` and with respect to ``end`` is
        ``grad_U[..., -1, :]`` (they are folded into the unary potentials).
    grad_B : ndarray of shape (n_labels, n_labels) or (n_samples, n_labels, n_labels)
        ``pair counts of y - summed pairwise marginals``. For batched ``U``
        it is always per sample, shape ``(n_samples, n_labels, n_labels)``,
        even when ``B`` is shared (sum over axis 0 for the shared gradient).

    Notes
    -----
    Where the value is ``-inf`` the returned gradients are still given by
    the formulas above (finite); when every path is forbidden the marginals
    are taken as 0.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import log_likelihood_grad
    >>> U, B = np.zeros((2, 2)), np.zeros((2, 2))
    >>> value, grad_U, grad_B = log_likelihood_grad(U, B, [0, 1])
    >>> grad_U
    array([[ 0.5, -0.5],
           [-0.5,  0.5]])
    >>> grad_B
    array([[-0.25,  0.75],
           [-0.25, -0.25]])
    """
    return _batched_call(_fb_linear, ["lattice", "pair"], U, B, start, end, y)


def viterbi(U, B, start=None, end=None):
    """Most probable label path (MAP decoding) of a linear chain.

    Parameters
    ----------
    U, B, start, end
        As in :func:`forward_log`.

    Returns
    -------
    path : ndarray of int64 of shape (n_steps,) or (n_samples, n_steps)
    score : float or ndarray of shape (n_samples,)
        Unnormalised score of the path (``start`` and ``end`` included);
        ``-inf`` if every path is forbidden (the path is then all zeros).

    Notes
    -----
    Ties are broken toward the lowest label index: at the last position and
    in every back-pointer. Among equally scored paths this returns the one
    whose labels read from the last position backwards are lexicographically
    smallest.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import viterbi
    >>> U = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    >>> viterbi(U, np.zeros((2, 2)))
    (array([0, 1, 0]), 3.0)
    """
    scores, paths = _batched_call(_viterbi_kernel, ["path"], U, B, start, end)
    return paths, scores


def _check_ragged(U, lengths, B, start, end):
    """Validate ragged input; ``B`` is shared ``(V, V)`` or per chain ``(n, V, V)``."""
    B_arr = np.asarray(B)
    per_chain = B_arr.ndim == 3
    U3, B3, st, en, batched = check_potentials(U, B_arr[0] if per_chain else B, start, end)
    if batched or B3.shape[0] != 1:
        raise ValueError(
            "ragged functions take stacked 2-D U of shape (n_tokens, n_labels) "
            "and B of shape (n_labels, n_labels) (shared) or (n_sequences, "
            "n_labels, n_labels) (one per sequence)."
        )
    offsets = check_lengths(lengths, U3.shape[1])
    if per_chain:
        n, V = offsets.shape[0] - 1, U3.shape[2]
        if B_arr.shape != (n, V, V):
            raise ValueError(
                f"per-sequence B must have shape (n_sequences, n_labels, n_labels) "
                f"= {(n, V, V)}, got {B_arr.shape}."
            )
        B3 = _as_real_array(B_arr, "B")
    return U3[0], offsets, B3, st[0], en[0], per_chain


def log_likelihood_grad_ragged(U, lengths, B, y, start=None, end=None):
    """:func:`log_likelihood_grad` for many sequences stacked in one array.

    Parameters
    ----------
    U : array-like of shape (n_tokens, n_labels)
        Unary potentials of all sequences stacked (hmmlearn's layout).
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths, summing to ``n_tokens``.
    B : array-like of shape (n_labels, n_labels) or (n_sequences, n_labels, n_labels)
        Transitions shared by all sequences, or one matrix per sequence (how
        samples x sequences are batched: every sample of a sequence is a
        chain of its own).
    y : array-like of int of shape (n_tokens,)
        Stacked labels, ``-1`` for an unknown label (as in
        :func:`log_likelihood`).
    start, end : array-like of shape (n_labels,), default=None
        Added to the first / last position of every sequence.

    Returns
    -------
    values : ndarray of shape (n_sequences,)
        log p(y_n | U_n, B) per sequence (of its known labels).
    grad_U : ndarray of shape (n_tokens, n_labels)
        Per-token gradients, as :func:`log_likelihood_grad`.
    grad_B : ndarray of shape (n_labels, n_labels) or (n_sequences, n_labels, n_labels)
        Gradient of ``values.sum()`` with respect to ``B``: summed over the
        sequences for a shared ``B``, one per sequence otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import log_likelihood_grad_ragged
    >>> U, B = np.zeros((3, 2)), np.zeros((2, 2))
    >>> values, gU, gB = log_likelihood_grad_ragged(U, [1, 2], B, [0, 1, 1])
    >>> np.round(values, 6)
    array([-0.693147, -1.386294])
    """
    U2, offsets, B3, st, en, per_chain = _check_ragged(U, lengths, B, start, end)
    y = check_labels(y, U2.shape[0], U2.shape[1], unknown=True)
    gU = np.empty_like(U2)
    gB = np.empty_like(B3)
    fell = np.empty(offsets.shape[0] - 1, dtype=np.int8)
    values = _ragged_fb(U2, offsets, B3, st, en, y, gU, gB, fell)
    return values, gU, (gB if per_chain else gB[0])


def viterbi_ragged(U, lengths, B, start=None, end=None):
    """:func:`viterbi` for many sequences stacked in one array.

    Parameters
    ----------
    U : array-like of shape (n_tokens, n_labels)
        Unary potentials of all sequences stacked.
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths, summing to ``n_tokens``.
    B : array-like of shape (n_labels, n_labels) or (n_sequences, n_labels, n_labels)
        Transitions shared by all sequences, or one matrix per sequence.
    start, end : array-like of shape (n_labels,), default=None
        Added to the first / last position of every sequence.

    Returns
    -------
    paths : ndarray of int64 of shape (n_tokens,)
        Best paths, stacked like the rows of ``U``.
    scores : ndarray of shape (n_sequences,)
        Their unnormalised scores; ``-inf`` for a sequence whose every path
        is forbidden (its path is then all zeros).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import viterbi_ragged
    >>> U = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    >>> viterbi_ragged(U, [1, 2], np.zeros((2, 2)))
    (array([0, 1, 0]), array([1., 2.]))
    """
    U2, offsets, B3, st, en, _ = _check_ragged(U, lengths, B, start, end)
    paths = np.empty(U2.shape[0], dtype=np.int64)
    scores = _viterbi_ragged_kernel(U2, offsets, B3, st, en, paths)
    return paths, scores


def marginals_ragged(U, lengths, B, start=None, end=None):
    """:func:`marginals` for many sequences stacked in one array.

    Parameters
    ----------
    U, lengths, B, start, end
        The stacked potentials, the sequence lengths and the transitions,
        as in :func:`viterbi_ragged`.

    Returns
    -------
    unary : ndarray of shape (n_tokens, n_labels)
        Per-token marginals, stacked like the rows of ``U``.
    pairwise : ndarray of shape (n_sequences, n_labels, n_labels)
        Pairwise marginals of each sequence, summed over its positions.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import marginals_ragged
    >>> unary, pairwise = marginals_ragged(np.zeros((3, 2)), [1, 2], np.zeros((2, 2)))
    >>> unary
    array([[0.5, 0.5],
           [0.5, 0.5],
           [0.5, 0.5]])
    >>> pairwise.sum(axis=(1, 2))
    array([0., 1.])
    """
    U2, offsets, B3, st, en, _ = _check_ragged(U, lengths, B, start, end)
    unary = np.empty_like(U2)
    pairwise = np.empty((offsets.shape[0] - 1,) + B3.shape[1:])
    fell = np.empty(offsets.shape[0] - 1, dtype=np.int8)
    _ragged_fb(U2, offsets, B3, st, en, _NO_LABELS, unary, pairwise, fell)
    return unary, pairwise
