"""Proposals and index sets of randomized dynamic programming.

:func:`make_proposal` gives the per-position proposal distributions ``q_t``
(paper eq. 34); :func:`sample_index_sets` draws the sub-lattice: the ``K1``
states of highest proposal (summed exactly, forced states first) and ``K2``
states sampled from the rest, with their importance weights. The algorithms
of :mod:`skgpstruct.chain.randomized.algorithms` run on these sub-lattices.
"""

import numpy as np

from . import _kernels as _k
from ..._input.arrays import check_labels
from ._types import (
    IndexSets,
    _check_real,
    _check_sizes,
    _check_transitions,
    _check_unary,
    _Rng,
)

__all__ = ["PROPOSALS", "make_proposal", "sample_index_sets"]

PROPOSALS = ("uniform", "local", "global", "local+global")

# Relative floor of the "global" and "local" proposals so that no state with
# a finite potential has q = 0 (a state with zero proposal mass could never be
# sampled, which would bias Z-hat). "local+global" takes it from its global
# half.
_GLOBAL_FLOOR = 1e-12


# ---------------------------------------------------------------- proposals
def _softmax_rows(U, floor=False):
    m = U.max(axis=1, keepdims=True)
    dead = ~np.isfinite(m[:, 0])
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(U - m)
    if floor:  # relative to the row's largest term, exp(0) = 1
        e = np.where(np.isneginf(U), 0.0, np.maximum(e, _GLOBAL_FLOOR))
    e[dead] = 1.0  # a position with every state at -inf: fall back to uniform
    return e / e.sum(axis=1, keepdims=True)


def _global_scores(lowrank, Bf, left, right):
    if lowrank:
        # softmax of the mean L1 norm of the state's embeddings
        norm = 0.5 * (np.abs(left).sum(axis=1) + np.abs(right).sum(axis=1))
        mass = np.exp(norm - norm.max())
    else:
        finite = np.isfinite(Bf)
        if not finite.any():
            return np.full(Bf.shape[0], 1.0 / Bf.shape[0])
        E = np.exp(Bf - Bf[finite].max())
        mass = E.sum(axis=0) + E.sum(axis=1)  # transition mass into + out of j
    top = mass.max()
    if not top > 0:
        return np.full(mass.shape[0], 1.0 / mass.shape[0])
    mass = mass + _GLOBAL_FLOOR * top
    return mass / mass.sum()


def make_proposal(U, B, kind="local+global"):
    """Per-position proposal distributions over the states.

    Parameters
    ----------
    U : array-like of shape (n_steps, n_states)
        Unary potentials.
    B : array-like of shape (n_states, n_states) or LowRankTransitions
        Transition potentials, full or as ``(left, right)`` embeddings.
    kind : {"uniform", "local", "global", "local+global"}, default="local+global"
        - ``"uniform"``: ``q_t(i) = 1 / N``.
        - ``"local"``: softmax of the unary scores, ``q_t ∝ exp(U[t])``,
          each state with a finite score floored at 1e-12 times the row's
          largest term (so that a state whose unary score is far below the
          best, but which its transitions make likely, can be drawn).
        - ``"global"``: the same distribution at every position, from the
          transitions: for low-rank transitions a softmax of the states'
          embedding norms, ``q(i) ∝ exp((|left_i|_1 + |right_i|_1) / 2)``
          (``exp(|e_i|_1)`` for ``B = E E^T``, as in the authors' code);
          for a full ``B`` the transition mass into and out of the state,
          ``q(j) ∝ sum_i exp(B[i, j]) + sum_k exp(B[j, k])``. A floor of
          1e-12 times the largest mass keeps every state reachable.
        - ``"local+global"``: the average of the two (paper eq. 34).

    Returns
    -------
    q : ndarray of shape (n_steps, n_states)
        Rows sum to one.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import make_proposal
    >>> U = np.log([[0.5, 0.25, 0.25]])
    >>> make_proposal(U, np.zeros((3, 3)), "local")
    array([[0.5 , 0.25, 0.25]])
    >>> make_proposal(U, np.zeros((3, 3)), "local+global").round(4)
    array([[0.4167, 0.2917, 0.2917]])
    """
    U = _check_unary(U)
    T, N = U.shape
    lowrank, Bf, left, right = _check_transitions(B, N)
    if not isinstance(kind, str) or kind not in PROPOSALS:
        raise ValueError(f"Unknown proposal {kind!r}; expected one of {PROPOSALS}.")
    if kind == "uniform":
        return np.full((T, N), 1.0 / N)
    if kind == "local":
        return _softmax_rows(U, floor=True)
    g = np.broadcast_to(_global_scores(lowrank, Bf, left, right), (T, N))
    if kind == "global":
        return np.array(g)
    return 0.5 * (_softmax_rows(U) + g)


def _check_proposal_array(q, T, N):
    q = _check_real(q, "proposal", 2, allow_neg_inf=False)
    if q.shape != (T, N):
        raise ValueError(f"proposal must have shape (n_steps, n_states) = {(T, N)}, got {q.shape}.")
    if (q < 0).any():
        raise ValueError("proposal must be non-negative.")
    s = q.sum(axis=1, keepdims=True)
    if (s <= 0).any():
        raise ValueError("every row of proposal needs positive mass.")
    return q / s


# ---------------------------------------------------------------- index sets
def _prepare_sets(q, k1, force):
    """Deterministic states and the restricted proposal the draws use."""
    T, N = q.shape
    order = np.argsort(-q, axis=1, kind="stable")
    if force is None:
        det = order[:, :k1]
    else:
        det = np.empty((T, k1), dtype=np.int64)
        det[:, 0] = force
        for t in range(T):
            others = order[t][order[t] != force[t]]
            det[t, 1:] = others[: k1 - 1]
    det = np.ascontiguousarray(det, dtype=np.int64)
    q_rest = q.copy()
    np.put_along_axis(q_rest, det, 0.0, axis=1)
    cdf = np.cumsum(q_rest, axis=1)
    pos = q_rest > 0
    last_pos = np.where(pos.any(axis=1), N - 1 - np.argmax(pos[:, ::-1], axis=1), 0)
    return det, q_rest, cdf, np.ascontiguousarray(last_pos, dtype=np.int64)


def _resolve_proposal(U, B, proposal, exact=False):
    T, N = U.shape
    if isinstance(proposal, str):
        if exact and proposal in PROPOSALS:
            # every state is summed: the ranking is irrelevant, skip its cost
            return np.full((T, N), 1.0 / N)
        return make_proposal(U, B, proposal)
    if proposal is None:
        raise ValueError(f"proposal must be one of {PROPOSALS} or an array, got None.")
    return _check_proposal_array(proposal, T, N)


def _check_force(force, T, N):
    if force is None:
        return None
    return check_labels(force, T, N, name="force")


def sample_index_sets(q, n_top, n_sampled, *, random_state=None, force=None):
    """Draw the index sets Omega_t and their importance weights.

    Parameters
    ----------
    q : array-like of shape (n_steps, n_states)
        Proposal distributions (rows are renormalised), e.g. from
        :func:`make_proposal`.
    n_top : int
        ``K1``: states with the highest ``q_t`` summed exactly at each
        position (ties broken by the lower state index).
    n_sampled : int
        ``K2``: states drawn i.i.d. from ``q_t`` restricted to the other
        states and renormalised (``q~_t``), each weighted ``1 / (K2 q~_t)``.
    random_state : int, RandomState instance, Generator or None, default=None
        Source of the draws.
    force : array-like of int of shape (n_steps,), default=None
        States that must be on the sub-lattice (the gold labels during
        training). ``force[t]`` takes the first deterministic slot and the
        remaining ``max(n_top, 1) - 1`` deterministic slots go to the
        highest-``q_t`` other states; sampling is restricted to the states
        outside this set. The set is a deterministic function of ``q`` and
        ``force``, so ``Z-hat`` stays unbiased.

    Returns
    -------
    index_sets : IndexSets

    Notes
    -----
    If the deterministic and sampled slots together would be at least
    ``n_states``, every state is summed exactly instead (no sampled slot):
    the cost is no larger and the estimate has no variance.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import sample_index_sets
    >>> q = np.array([[0.5, 0.3, 0.1, 0.1]])
    >>> sets = sample_index_sets(q, n_top=1, n_sampled=1, random_state=0)
    >>> sets.index.tolist(), float(sets.log_weight[0, 0])
    ([[0, 1]], 0.0)
    """
    q = _check_real(q, "q", 2, allow_neg_inf=False)
    T, N = q.shape
    q = _check_proposal_array(q, T, N)
    force = _check_force(force, T, N)
    k1, k2 = _check_sizes(N, n_top, n_sampled, force is not None)
    return _draw_sets(q, k1, k2, force, _Rng(random_state))


def _draw_sets(q, k1, k2, force, rng):
    T, N = q.shape
    det, q_rest, cdf, last_pos = _prepare_sets(q, k1, force)
    uniforms = np.ascontiguousarray(rng.uniform((T, k2)))
    idx = np.empty((T, k1 + k2), dtype=np.int64)
    logw = np.empty((T, k1 + k2))
    _k.sample_slots(det, q_rest, cdf, last_pos, uniforms, np.log(max(k2, 1)), idx, logw)
    return IndexSets(idx, logw, k1)


def _check_index_sets(index_sets, T, N):
    if not isinstance(index_sets, IndexSets):
        raise TypeError(f"index_sets must be an IndexSets, got {type(index_sets).__name__}.")
    idx = np.asarray(index_sets.index)
    if idx.dtype.kind not in "iu" or idx.ndim != 2 or idx.shape[0] != T or idx.shape[1] == 0:
        raise ValueError(
            f"index_sets.index must be an integer array of shape (n_steps={T}, n_slots), "
            f"got dtype {idx.dtype} and shape {idx.shape}."
        )
    if idx.min() < 0 or idx.max() >= N:
        raise ValueError(f"index_sets.index has states outside [0, {N}).")
    logw = _check_real(index_sets.log_weight, "index_sets.log_weight", 2, allow_neg_inf=True)
    if logw.shape != idx.shape:
        raise ValueError("index_sets.log_weight must have the shape of index_sets.index.")
    return IndexSets(np.ascontiguousarray(idx, dtype=np.int64), logw,
                     int(index_sets.n_deterministic))


def _setup(U, B, n_top, n_sampled, proposal, random_state, force, index_sets):
    """Validate everything and return ``(U, lowrank, B, left, right, sets)``."""
    U = _check_unary(U)
    T, N = U.shape
    lowrank, Bf, left, right = _check_transitions(B, N)
    if index_sets is not None:
        if n_top is not None or n_sampled is not None or force is not None:
            raise ValueError(
                "Pass either index_sets (to reuse a sub-lattice) or n_top / "
                "n_sampled / force (to draw one), not both."
            )
        return U, lowrank, Bf, left, right, _check_index_sets(index_sets, T, N)
    if n_top is None or n_sampled is None:
        raise ValueError("n_top and n_sampled are required when index_sets is not given.")
    force = _check_force(force, T, N)
    k1, k2 = _check_sizes(N, n_top, n_sampled, force is not None)
    q = _resolve_proposal(U, (left, right) if lowrank else Bf, proposal, exact=k1 == N)
    sets = _draw_sets(q, k1, k2, force, _Rng(random_state))
    return U, lowrank, Bf, left, right, sets
