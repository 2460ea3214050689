"""Viterbi restricted to the top states of each position (beam decoding).

For label sets in the thousands the exact Viterbi recursion costs
O(T N^2). Restricting position ``t`` to the ``beam_size`` states with the
highest unary score gives an O(T K^2) approximation that is exact whenever
the best path stays inside the beams (always when ``beam_size >= N``).
"""

from numbers import Integral

import numpy as np

from .._input.arrays import check_potentials
from .randomized._types import _check_transitions, _check_unary

__all__ = ["beam_states", "beam_viterbi"]


def _transition_block(B, rows, cols):
    """``B[rows][:, cols]`` for a full matrix or ``(left, right)`` embeddings."""
    if isinstance(B, tuple):
        left, right = B
        return np.asarray(left)[rows] @ np.asarray(right)[cols].T
    return B[np.ix_(rows, cols)]


def beam_states(U, beam_size):
    """Indices of the ``beam_size`` highest-scoring states at each position.

    Parameters
    ----------
    U : ndarray of shape (T, N)
        Unary potentials.
    beam_size : int
        States kept per position (clipped to N).

    Returns
    -------
    states : ndarray of int64 of shape (T, min(beam_size, N))
        Sorted by decreasing score; ties toward the lowest index.
    """
    U = np.asarray(U, dtype=np.float64)
    if isinstance(beam_size, (bool, np.bool_)) or not isinstance(beam_size, Integral):
        raise TypeError(f"beam_size must be an integer, got {beam_size!r}.")
    K = min(int(beam_size), U.shape[1])
    if K < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}.")
    order = np.argsort(-U, axis=1, kind="stable")
    return order[:, :K].astype(np.int64)


def beam_viterbi(U, B, beam_size):
    """Best path when position ``t`` is restricted to its top unary states.

    Parameters
    ----------
    U : array-like of shape (T, N)
        Unary potentials of one sequence.
    B : array-like of shape (N, N) or tuple (left, right)
        Transitions ``B[i, j]`` (state ``i`` then ``j``), or low-rank
        embeddings with ``B = left @ right.T`` (never formed).
    beam_size : int
        States kept per position.

    Returns
    -------
    path : ndarray of int64 of shape (T,)
    score : float
        Unnormalised score of ``path``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import viterbi
    >>> rng = np.random.default_rng(0)
    >>> U, B = rng.normal(size=(6, 4)), rng.normal(size=(4, 4))
    >>> bool(np.array_equal(beam_viterbi(U, B, 4)[0], viterbi(U, B)[0]))
    True
    """
    if isinstance(B, tuple):
        # the checks of the dense branch: finite or -inf U, finite embeddings
        U = _check_unary(U)
        _, _, left, right = _check_transitions(B, U.shape[1])
        Bm = (left, right)
    else:
        U3, B3, _, _, batched = check_potentials(U, B, None, None)
        if batched:
            raise ValueError("beam_viterbi takes one sequence: U of shape (T, N).")
        U, Bm = U3[0], B3[0]
    T = U.shape[0]
    states = beam_states(U, beam_size)
    delta = U[0, states[0]].copy()
    back = np.zeros((T, states.shape[1]), dtype=np.int64)
    for t in range(1, T):
        scores = delta[:, None] + _transition_block(Bm, states[t - 1], states[t])
        back[t] = np.argmax(scores, axis=0)
        delta = scores[back[t], np.arange(states.shape[1])] + U[t, states[t]]
    k = int(np.argmax(delta))
    score = float(delta[k])
    slots = np.empty(T, dtype=np.int64)
    slots[T - 1] = k
    for t in range(T - 1, 0, -1):
        slots[t - 1] = back[t, slots[t]]
    return states[np.arange(T), slots], score
