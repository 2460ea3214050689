"""N-best decoding of a linear chain: the ``n`` highest-scoring label paths.

:func:`nbest_viterbi` is the list Viterbi algorithm: at every position ``t``
and label ``j`` it keeps the ``n`` best label prefixes ending in ``j``
(their scores and back-pointers to a label and a rank at ``t - 1``), merging
the ``V`` sorted lists of position ``t - 1``. The cost is ``O(T V^2 n)``
time and ``O(T V n)`` memory, for a chain of ``T`` positions and ``V``
labels.

The conventions are those of :mod:`skgpstruct.chain.exact`: unary
potentials ``U`` of shape ``(T, V)``, transitions ``B`` of shape ``(V, V)``
with ``B[i, j]`` the score of label ``i`` at ``t - 1`` followed by label
``j`` at ``t``, optional ``start`` / ``end`` of shape ``(V,)`` folded into
``U[0]`` / ``U[T - 1]``, and ``-inf`` for a forbidden label or transition.
The probability of a path is ``exp(score - log_partition(U, B, start,
end))`` (:func:`skgpstruct.chain.log_partition`).

The kernel is a numba ``njit(cache=True, nogil=True)`` function; a
plain-numpy reference and a brute-force enumeration check it in the tests.
"""

import numpy as np
from numba import njit

from .._input.arrays import check_potentials

__all__ = ["nbest_viterbi"]


@njit(cache=True, nogil=True)
def _best_head(delta, count, head, shift):
    """One step of the merge of ``V`` sorted lists: the list ``i`` whose
    next entry ``delta[i, head[i]]`` plus ``shift[i]`` is the highest (ties:
    the lowest ``i``) and that value; ``-1`` when every list is used up
    (``head[i] == count[i]``)."""
    best = -np.inf
    arg = -1
    for i in range(delta.shape[0]):
        if head[i] < count[i]:
            v = delta[i, head[i]] + shift[i]
            if v > best:
                best = v
                arg = i
    return arg, best


@njit(cache=True, nogil=True)
def _nbest_kernel(Uf, B, n, paths, scores):
    """The ``n`` best paths of the chain with folded unaries ``Uf`` (T, V).

    Writes them into ``paths`` (n, T) and their scores into ``scores`` (n,)
    and returns how many there are (paths of score ``-inf`` are not counted).
    The order is: score descending, then the labels read from the last
    position backwards in increasing lexicographic order.
    """
    T, V = Uf.shape
    delta = np.full((T, V, n), -np.inf)
    back_label = np.zeros((T, V, n), dtype=np.int64)
    back_rank = np.zeros((T, V, n), dtype=np.int64)
    count = np.zeros((T, V), dtype=np.int64)
    for j in range(V):
        if Uf[0, j] > -np.inf:
            delta[0, j, 0] = Uf[0, j]
            count[0, j] = 1
    head = np.zeros(V, dtype=np.int64)
    for t in range(1, T):
        for j in range(V):
            if Uf[t, j] == -np.inf:
                continue
            # merge the V lists of t - 1 shifted by B[:, j]: best head first,
            # ties to the lowest label, then the lower rank (list order)
            head[:] = 0
            m = 0
            while m < n:
                arg, best = _best_head(delta[t - 1], count[t - 1], head, B[:, j])
                if arg < 0:
                    break
                delta[t, j, m] = best + Uf[t, j]
                back_label[t, j, m] = arg
                back_rank[t, j, m] = head[arg]
                head[arg] += 1
                m += 1
            count[t, j] = m
    # the same merge over the lists of the last position
    head[:] = 0
    no_shift = np.zeros(V)
    found = 0
    while found < n:
        arg, best = _best_head(delta[T - 1], count[T - 1], head, no_shift)
        if arg < 0:
            break
        scores[found] = best
        label = arg
        rank = head[arg]
        for t in range(T - 1, -1, -1):
            paths[found, t] = label
            if t > 0:
                label, rank = back_label[t, label, rank], back_rank[t, label, rank]
        head[arg] += 1
        found += 1
    return found


def nbest_viterbi(U, B, n, start=None, end=None):
    """The ``n`` highest-scoring label paths of a linear chain.

    Parameters
    ----------
    U : array-like of shape (n_steps, n_labels)
        Unary potentials of one sequence.
    B : array-like of shape (n_labels, n_labels)
        Transition potentials, ``B[i, j]`` for label ``i`` followed by ``j``.
    n : int
        Number of paths wanted, at least 1.
    start, end : array-like of shape (n_labels,), default=None
        Potentials added to the first / last position.

    Returns
    -------
    paths : ndarray of int64 of shape (n_paths, n_steps)
        The best paths, best first; ``n_paths = min(n, number of paths of
        finite score)``, 0 when every path is forbidden.
    scores : ndarray of shape (n_paths,)
        Their unnormalised scores (``start`` and ``end`` included), in
        non-increasing order. The probability of a path is ``exp(score -
        log_partition(U, B, start, end))``.

    Raises
    ------
    ValueError
        For ``n < 1``, batched (3-D) ``U`` or malformed potentials (as
        :func:`skgpstruct.chain.viterbi`).
    TypeError
        If ``n`` is not an integer.

    Notes
    -----
    Ties are broken as in :func:`skgpstruct.chain.viterbi`: among paths of
    equal score, the one whose labels read from the last position backwards
    are lexicographically smallest comes first. Hence ``paths[0]`` is the
    path of :func:`~skgpstruct.chain.viterbi` whenever some path has a
    finite score, and the list is the first ``n`` paths of the enumeration
    of all paths of finite score sorted by (score descending, reversed path
    ascending).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.nbest import nbest_viterbi
    >>> U = np.array([[1.0, 0.0], [0.0, 2.0]])
    >>> paths, scores = nbest_viterbi(U, np.zeros((2, 2)), 3)
    >>> paths
    array([[0, 1],
           [1, 1],
           [0, 0]])
    >>> scores
    array([3., 2., 1.])
    """
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an int, got {type(n).__name__}.")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}.")
    U3, B3, st, en, batched = check_potentials(U, B, start, end)
    if batched:
        raise ValueError(
            "nbest_viterbi takes one sequence: U of shape (n_steps, n_labels), "
            f"got an array of shape {np.shape(U)}."
        )
    Uf = U3[0].copy()
    Uf[0] += st[0]
    Uf[-1] += en[0]
    T, V = Uf.shape
    # never more paths than exist (V ** T, computed without overflow)
    n_max = 1
    for _ in range(T):
        n_max *= V
        if n_max >= n:
            break
    n = int(min(n, n_max))
    paths = np.zeros((n, T), dtype=np.int64)
    scores = np.empty(n)
    found = _nbest_kernel(Uf, B3[0], n, paths, scores)
    return paths[:found], scores[:found]
