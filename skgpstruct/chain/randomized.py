"""Randomized dynamic programming (RDP) for linear chains with many states.

Fu, Cunningham and Lapata (2022) scale the forward algorithm to tens of
thousands of states by running it on a small random *sub-lattice*: at every
position ``t`` an index set Omega_t holds the ``K1`` states with the highest
proposal probability ``q_t`` (summed exactly) plus ``K2`` states drawn
i.i.d. from ``q_t`` restricted to the remaining states and renormalised
(``q~_t``), each drawn state weighted by ``1 / (K2 q~_t)``. The forward
recursion then costs O(T K^2) time and O(T K) memory (``K = K1 + K2``)
instead of O(T N^2), and the estimate ``Z-hat`` of the partition function is
unbiased in linear space (paper Appendix A: each position's weighted sum is
an unbiased estimate of the sum over all states, the positions are drawn
independently and ``Z`` is multilinear in them), so that
``E[log Z-hat] <= log Z`` by Jensen's inequality.

Conventions (as in :mod:`skgpstruct.chain`): unary potentials ``U`` of shape
(T, N) and log p(y) = sum_t U[t, y_t] + sum_{t>=1} B[y_{t-1}, y_t] - log Z.
Transitions are given either

* full, as an array ``B`` of shape (N, N), ``B[i, j]`` the score of state
  ``i`` at ``t - 1`` followed by ``j`` at ``t``; or
* low rank, as :class:`LowRankTransitions` ``(left, right)`` (or a plain
  2-tuple) with ``B = left @ right.T``, ``left`` and ``right`` of shape
  (N, r): state ``i``'s "from" and "to" embeddings. ``B = E @ E.T`` is
  ``LowRankTransitions(E, E)``. No N x N matrix is ever formed: edge scores
  of the sub-lattice are computed from the embeddings in blocks.

Public functions: :func:`make_proposal`, :func:`sample_index_sets`,
:func:`randomized_log_partition` (Alg. 1), :func:`randomized_log_partition_draws`
(many estimates in one jitted loop), :func:`randomized_marginals` (the
gradient, by the matching backward pass), :func:`randomized_entropy`
(Alg. 3), :func:`randomized_gumbel_sample` (Alg. 4) and
:func:`topk_log_partition` (the deterministic top-K baseline).

References
----------
.. [1] Y. Fu, J. P. Cunningham and M. Lapata, "Scaling Structured Inference
   with Randomization", ICML 2022, arXiv:2112.03638.
"""

from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from . import _randomized_kernels as _k
from ._utils import check_labels

__all__ = [
    "LowRankTransitions",
    "IndexSets",
    "RandomizedForward",
    "RandomizedMarginals",
    "RandomizedGumbelSample",
    "PROPOSALS",
    "make_proposal",
    "sample_index_sets",
    "randomized_log_partition",
    "randomized_log_partition_draws",
    "randomized_marginals",
    "randomized_entropy",
    "randomized_gumbel_sample",
    "topk_log_partition",
]

PROPOSALS = ("uniform", "local", "global", "local+global")

# Slots per block when edge scores are built: memory O(_CHUNK * K) per step.
_CHUNK = 256
# Relative floor of the "global" proposal so that no state has q = 0 (a state
# with zero proposal mass could never be sampled, which would bias Z-hat).
_GLOBAL_FLOOR = 1e-12
_EMPTY2 = np.zeros((0, 0))


# ---------------------------------------------------------------- containers
class LowRankTransitions(NamedTuple):
    """Low-rank transition scores ``B = left @ right.T``.

    Parameters
    ----------
    left : ndarray of shape (n_states, rank)
        "From" embeddings: row ``i`` scores state ``i`` at ``t - 1``.
    right : ndarray of shape (n_states, rank)
        "To" embeddings: row ``j`` scores state ``j`` at ``t``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import LowRankTransitions
    >>> E = np.array([[1.0, 0.0], [0.5, 2.0]])
    >>> LowRankTransitions(E, E).full()
    array([[1.  , 0.5 ],
           [0.5 , 4.25]])
    """

    left: np.ndarray
    right: np.ndarray

    def full(self):
        """The dense (n_states, n_states) matrix ``left @ right.T``."""
        return np.asarray(self.left) @ np.asarray(self.right).T


class IndexSets(NamedTuple):
    """The sub-lattice of one randomized estimate.

    Attributes
    ----------
    index : ndarray of int64 of shape (n_steps, n_slots)
        ``index[t, k]``: the state in slot ``k`` at position ``t``. The first
        ``n_deterministic`` slots hold the deterministic (top / forced)
        states, the others the sampled ones (repeats possible).
    log_weight : ndarray of shape (n_steps, n_slots)
        0 for deterministic slots, ``-log(n_sampled * q~_t)`` for sampled
        ones, ``-inf`` for a sampled slot when no state outside the
        deterministic set has positive proposal mass.
    n_deterministic : int
        Number of deterministic slots per position.
    """

    index: np.ndarray
    log_weight: np.ndarray
    n_deterministic: int


class RandomizedForward(NamedTuple):
    """Result of :func:`randomized_log_partition`.

    Attributes
    ----------
    log_partition : float
        The estimate ``log Z-hat``.
    index_sets : IndexSets
        The sub-lattice it was computed on (pass it back to reuse it).
    fwdlattice : ndarray of shape (n_steps, n_slots)
        Log forward variables on the sub-lattice, each slot's own node score
        and log-weight included; ``log_partition = logsumexp(fwdlattice[-1])``.
    """

    log_partition: float
    index_sets: IndexSets
    fwdlattice: np.ndarray


class RandomizedMarginals(NamedTuple):
    """Result of :func:`randomized_marginals`: log Z-hat and its gradient.

    Attributes
    ----------
    log_partition : float
        The estimate ``log Z-hat``.
    unary : ndarray of shape (n_steps, n_states)
        ``d log Z-hat / d U``: estimated unary marginals (zero off the
        sub-lattice).
    pairwise : ndarray of shape (n_states, n_states) or None
        ``d log Z-hat / d B`` (estimated pairwise marginals summed over
        positions) when ``B`` was given full; None for low-rank transitions.
    grad_left, grad_right : ndarray of shape (n_states, rank) or None
        ``d log Z-hat / d left`` and ``d log Z-hat / d right`` for low-rank
        transitions; None when ``B`` was given full.
    slot_marginals : ndarray of shape (n_steps, n_slots)
        Marginals of the sub-lattice slots (sum to 1 at every position).
    slot_pairwise : ndarray of shape (n_steps - 1, n_slots, n_slots) or None
        ``slot_pairwise[t - 1, k, l]``: marginal of the edge from slot ``k``
        at ``t - 1`` to slot ``l`` at ``t`` (sparse pairwise marginals over
        the sub-lattice), when requested.
    index_sets : IndexSets
        The sub-lattice.
    """

    log_partition: float
    unary: np.ndarray
    pairwise: object
    grad_left: object
    grad_right: object
    slot_marginals: np.ndarray
    slot_pairwise: object
    index_sets: IndexSets


class RandomizedGumbelSample(NamedTuple):
    """Result of :func:`randomized_gumbel_sample`.

    Attributes
    ----------
    sample : ndarray of int64 of shape (n_steps,)
        The hard sample (states).
    relaxed : ndarray of shape (n_steps, n_slots)
        Gumbel-softmax relaxed one-hot vectors over the slots of the
        sub-lattice; :meth:`relaxed_states` maps them onto the states.
    slots : ndarray of int64 of shape (n_steps,)
        Slot of the hard sample at each position.
    log_prob : float
        Log-probability of the hard slot path under the (weighted)
        sub-lattice distribution.
    index_sets : IndexSets
        The sub-lattice.
    """

    sample: np.ndarray
    relaxed: np.ndarray
    slots: np.ndarray
    log_prob: float
    index_sets: IndexSets

    def relaxed_states(self, n_states):
        """Relaxed sample on the states: slots added onto their states.

        Parameters
        ----------
        n_states : int
            Number of states N.

        Returns
        -------
        relaxed : ndarray of shape (n_steps, n_states)
        """
        T = self.relaxed.shape[0]
        out = np.zeros((T, n_states))
        rows = np.repeat(np.arange(T), self.relaxed.shape[1])
        np.add.at(out, (rows, self.index_sets.index.ravel()), self.relaxed.ravel())
        return out


# ---------------------------------------------------------------- validation
def _check_unary(U):
    if U is None:
        raise TypeError("U must be an array-like of shape (n_steps, n_states), got None.")
    arr = np.asarray(U)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"U must contain real numbers, got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(f"U must be 2-D of shape (n_steps, n_states), got shape {arr.shape}.")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"U must have n_steps >= 1 and n_states >= 1, got shape {arr.shape}.")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError("U contains NaN or +inf; potentials must be finite or -inf.")
    return arr


def _check_real(x, name, ndim, allow_neg_inf):
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must contain real numbers, got dtype {arr.dtype}.")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}.")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    bad = np.isnan(arr) | np.isposinf(arr)
    if not allow_neg_inf:
        bad |= np.isneginf(arr)
    if bad.any():
        what = "finite or -inf" if allow_neg_inf else "finite"
        raise ValueError(f"{name} contains non-finite values; it must be {what}.")
    return arr


def _check_transitions(B, n_states):
    """Return ``(lowrank, B, left, right)`` in the kernels' layout."""
    if B is None:
        raise TypeError("B must be an (n_states, n_states) array or LowRankTransitions, got None.")
    if isinstance(B, tuple):
        if len(B) != 2:
            raise ValueError(
                "Low-rank transitions must be a pair (left, right) with "
                f"B = left @ right.T, got a tuple of length {len(B)}."
            )
        left = _check_real(B[0], "left", 2, allow_neg_inf=False)
        right = _check_real(B[1], "right", 2, allow_neg_inf=False)
        if left.shape != right.shape or left.shape[0] != n_states or left.shape[1] == 0:
            raise ValueError(
                "left and right must both have shape (n_states, rank) with "
                f"n_states = {n_states} (from U) and rank >= 1, got "
                f"{left.shape} and {right.shape}."
            )
        return True, _EMPTY2, left, right
    Bf = _check_real(B, "B", 2, allow_neg_inf=True)
    if Bf.shape != (n_states, n_states):
        raise ValueError(
            f"B must have shape (n_states, n_states) = ({n_states}, {n_states}) "
            f"(n_states from U), got {Bf.shape}."
        )
    return False, Bf, _EMPTY2, _EMPTY2


def _check_count(x, name):
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, Integral):
        raise TypeError(f"{name} must be an integer, got {x!r}.")
    if x < 0:
        raise ValueError(f"{name} must be >= 0, got {x}.")
    return int(x)


def _check_sizes(n_states, n_top, n_sampled, forced):
    """Effective (K1, K2) from the requested sizes.

    Forcing puts the forced state in the deterministic set, which then has
    ``max(n_top, 1)`` states. When the deterministic and sampled slots
    together would cover every state, summing all states exactly costs no
    more and has no variance, so ``(N, 0)`` is returned.
    """
    n_top = _check_count(n_top, "n_top")
    n_sampled = _check_count(n_sampled, "n_sampled")
    if n_top + n_sampled <= 0:
        raise ValueError(
            "n_top + n_sampled must be positive (the sub-lattice needs at least "
            f"one state per position), got n_top={n_top}, n_sampled={n_sampled}."
        )
    k1 = max(n_top, 1) if forced else n_top
    if k1 + n_sampled >= n_states:
        return n_states, 0
    return k1, n_sampled


class _Rng:
    """Uniform and Gumbel draws from a RandomState or a Generator."""

    def __init__(self, random_state):
        if isinstance(random_state, _Rng):
            self._gen = random_state._gen
            self.uniform = random_state.uniform
        elif isinstance(random_state, np.random.Generator):
            self._gen = random_state
            self.uniform = lambda size: random_state.random(size)
        else:
            self._gen = check_random_state(random_state)
            self.uniform = lambda size: self._gen.random_sample(size)

    def gumbel(self, size):
        return self._gen.gumbel(size=size)


# ---------------------------------------------------------------- proposals
def _softmax_rows(U):
    m = U.max(axis=1, keepdims=True)
    dead = ~np.isfinite(m[:, 0])
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(U - m)
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
        - ``"local"``: softmax of the unary scores, ``q_t ∝ exp(U[t])``.
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
        return _softmax_rows(U)
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


# ---------------------------------------------------------------- estimators
_SHARED_PARAMS = """U : array-like of shape (n_steps, n_states)
        Unary potentials (finite or -inf).
    B : array-like of shape (n_states, n_states) or LowRankTransitions
        Transition potentials: full (finite or -inf), or low rank as
        ``(left, right)`` with ``B = left @ right.T``.
    n_top : int, default=None
        ``K1``, states of highest proposal probability summed exactly at
        each position. Required unless ``index_sets`` is given.
    n_sampled : int, default=None
        ``K2``, states sampled i.i.d. per position from the restricted,
        renormalised proposal. Required unless ``index_sets`` is given.
    proposal : {"uniform", "local", "global", "local+global"} or array-like \
of shape (n_steps, n_states), default="local+global"
        Proposal distributions, see :func:`make_proposal`.
    random_state : int, RandomState instance, Generator or None, default=None
        Source of the draws.
    force : array-like of int of shape (n_steps,), default=None
        States forced onto the sub-lattice, see :func:`sample_index_sets`.
    index_sets : IndexSets, default=None
        Reuse this sub-lattice and its weights instead of drawing one (then
        leave ``n_top``, ``n_sampled`` and ``force`` as None)."""


def randomized_log_partition(U, B, n_top=None, n_sampled=None, *,
                             proposal="local+global", random_state=None,
                             force=None, index_sets=None):
    """Randomized forward algorithm: an estimate of log Z (paper Alg. 1).

    Parameters
    ----------
    {params}

    Returns
    -------
    result : RandomizedForward
        ``result.log_partition`` is ``log Z-hat``; the index sets and the
        forward lattice are kept for reuse.

    Notes
    -----
    ``Z-hat`` is unbiased in linear space; ``log Z-hat`` is biased low
    (``E[log Z-hat] <= log Z``). Cost O(T K^2 (1 + r)) time for rank ``r``
    (``r = 0`` for full ``B``) and O(T K) memory, ``K = n_top + n_sampled``.
    With ``n_top >= n_states`` it is the exact forward algorithm.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import randomized_log_partition
    >>> rng = np.random.default_rng(0)
    >>> U, B = rng.normal(size=(5, 50)), rng.normal(size=(50, 50))
    >>> est = randomized_log_partition(U, B, n_top=5, n_sampled=5, random_state=0)
    >>> est.index_sets.index.shape
    (5, 10)
    >>> exact = randomized_log_partition(U, B, n_top=50, n_sampled=0)
    >>> bool(est.log_partition < exact.log_partition + 5)
    True
    """
    U, lowrank, Bf, left, right, sets = _setup(
        U, B, n_top, n_sampled, proposal, random_state, force, index_sets)
    alpha, log_z = _k.rdp_forward(U, sets.index, sets.log_weight, Bf, left, right,
                                  lowrank, _CHUNK)
    return RandomizedForward(float(log_z), sets, alpha)


randomized_log_partition.__doc__ = randomized_log_partition.__doc__.format(
    params=_SHARED_PARAMS)


def randomized_log_partition_draws(U, B, n_top, n_sampled, n_draws, *,
                                   proposal="local+global", random_state=None,
                                   force=None):
    """Many independent randomized estimates of log Z in one jitted loop.

    Parameters
    ----------
    U : array-like of shape (n_steps, n_states)
        Unary potentials.
    B : array-like of shape (n_states, n_states) or LowRankTransitions
        Transition potentials.
    n_top : int
        ``K1``, states summed exactly at each position.
    n_sampled : int
        ``K2``, states sampled per position.
    n_draws : int
        Number of independent estimates.
    proposal : str or array-like of shape (n_steps, n_states), default="local+global"
        See :func:`make_proposal`.
    random_state : int, RandomState instance, Generator or None, default=None
        Source of the draws.
    force : array-like of int of shape (n_steps,), default=None
        States forced onto every sub-lattice.

    Returns
    -------
    log_z : ndarray of shape (n_draws,)
        The estimates ``log Z-hat``; draw ``d`` equals
        :func:`randomized_log_partition` on index sets built from the same
        uniforms.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import randomized_log_partition_draws
    >>> rng = np.random.default_rng(0)
    >>> U, B = rng.normal(size=(4, 20)), rng.normal(size=(20, 20))
    >>> randomized_log_partition_draws(U, B, 2, 3, n_draws=1000, random_state=0).shape
    (1000,)
    """
    U = _check_unary(U)
    T, N = U.shape
    lowrank, Bf, left, right = _check_transitions(B, N)
    n_draws = _check_count(n_draws, "n_draws")
    force = _check_force(force, T, N)
    k1, k2 = _check_sizes(N, n_top, n_sampled, force is not None)
    q = _resolve_proposal(U, (left, right) if lowrank else Bf, proposal, exact=k1 == N)
    det, q_rest, cdf, last_pos = _prepare_sets(q, k1, force)
    uniforms = np.ascontiguousarray(_Rng(random_state).uniform((n_draws, T, k2)))
    return _k.rdp_log_partition_draws(U, det, q_rest, cdf, last_pos, uniforms,
                                      np.log(max(k2, 1)), Bf, left, right, lowrank,
                                      _CHUNK)


def topk_log_partition(U, B, n_top, *, proposal="local+global", force=None):
    """Deterministic top-K baseline: forward on the ``n_top`` best states.

    The randomized forward with ``n_sampled = 0``: a lower bound of log Z
    (it drops every path leaving the top sets).

    Parameters
    ----------
    U : array-like of shape (n_steps, n_states)
        Unary potentials.
    B : array-like of shape (n_states, n_states) or LowRankTransitions
        Transition potentials.
    n_top : int
        States kept per position (highest proposal probability).
    proposal : str or array-like of shape (n_steps, n_states), default="local+global"
        Ranks the states, see :func:`make_proposal`.
    force : array-like of int of shape (n_steps,), default=None
        States always kept.

    Returns
    -------
    log_z : float
        ``log`` of the sum over paths through the top sets.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import topk_log_partition
    >>> U, B = np.zeros((3, 4)), np.zeros((4, 4))
    >>> bool(np.isclose(topk_log_partition(U, B, 2), 3 * np.log(2)))
    True
    """
    return randomized_log_partition(U, B, n_top, 0, proposal=proposal,
                                    force=force).log_partition


def randomized_marginals(U, B, n_top=None, n_sampled=None, *,
                         proposal="local+global", random_state=None, force=None,
                         index_sets=None, return_slot_pairwise=False):
    """log Z-hat and its gradient by the matching backward pass.

    The gradient of the randomized estimate with the index sets and the
    weights held fixed (they are treated as constants, so no gradient flows
    through the proposal): the marginals of the weighted sub-lattice,
    mapped back onto the states.

    Parameters
    ----------
    {params}
    return_slot_pairwise : bool, default=False
        Also return the (n_steps - 1, n_slots, n_slots) edge marginals of the
        sub-lattice (O(T K^2) memory).

    Returns
    -------
    result : RandomizedMarginals
        ``unary`` is ``d log Z-hat / d U``; ``pairwise`` is
        ``d log Z-hat / d B`` for a full ``B``, ``grad_left`` /
        ``grad_right`` the gradients wrt the embeddings for low-rank
        transitions (no N x N array is formed then).

    Raises
    ------
    ValueError
        If the sub-lattice carries no path of positive weight
        (``log Z-hat = -inf``), so the gradient is undefined.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import randomized_marginals
    >>> rng = np.random.default_rng(0)
    >>> U, B = rng.normal(size=(4, 30)), rng.normal(size=(30, 30))
    >>> res = randomized_marginals(U, B, n_top=3, n_sampled=3, random_state=0)
    >>> np.allclose(res.slot_marginals.sum(axis=1), 1.0)
    True
    """
    U, lowrank, Bf, left, right, sets = _setup(
        U, B, n_top, n_sampled, proposal, random_state, force, index_sets)
    alpha, log_z = _k.rdp_forward(U, sets.index, sets.log_weight, Bf, left, right,
                                  lowrank, _CHUNK)
    if not np.isfinite(log_z):
        raise ValueError("log Z-hat is -inf on this sub-lattice: the gradient is undefined.")
    _, node, gU, gB, gL, gR, pw = _k.rdp_backward(
        U, sets.index, sets.log_weight, Bf, left, right, lowrank, alpha, log_z,
        _CHUNK, U.shape[1], bool(return_slot_pairwise))
    return RandomizedMarginals(
        float(log_z), gU,
        None if lowrank else gB,
        gL if lowrank else None,
        gR if lowrank else None,
        node,
        pw if return_slot_pairwise else None,
        sets)


randomized_marginals.__doc__ = randomized_marginals.__doc__.format(params=_SHARED_PARAMS)


def randomized_entropy(U, B, n_top=None, n_sampled=None, *,
                       proposal="local+global", random_state=None, force=None,
                       index_sets=None):
    """Randomized estimate of the chain's entropy (paper Alg. 3).

    The backward entropy recursion (entropy of the states before ``t``
    given the state at ``t``) with every sum over states replaced by the
    weighted sum over the sub-lattice, reusing the randomized forward
    variables for the conditional probabilities.

    Parameters
    ----------
    {params}

    Returns
    -------
    entropy : float
        Estimate of ``H = -sum_y p(y) log p(y)`` in nats; exact when
        ``n_top >= n_states``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import randomized_entropy
    >>> U, B = np.zeros((3, 4)), np.zeros((4, 4))
    >>> bool(np.isclose(randomized_entropy(U, B, n_top=4, n_sampled=0), 3 * np.log(4)))
    True
    """
    U, lowrank, Bf, left, right, sets = _setup(
        U, B, n_top, n_sampled, proposal, random_state, force, index_sets)
    alpha, log_z = _k.rdp_forward(U, sets.index, sets.log_weight, Bf, left, right,
                                  lowrank, _CHUNK)
    if not np.isfinite(log_z):
        raise ValueError("log Z-hat is -inf on this sub-lattice: the entropy is undefined.")
    return float(_k.rdp_entropy(U, sets.index, sets.log_weight, Bf, left, right,
                                lowrank, alpha, log_z, _CHUNK))


randomized_entropy.__doc__ = randomized_entropy.__doc__.format(params=_SHARED_PARAMS)


def randomized_gumbel_sample(U, B, n_top=None, n_sampled=None, *, temperature=1.0,
                             proposal="local+global", random_state=None, force=None,
                             index_sets=None, gumbel=None):
    """Randomized Gumbel backward sampling (paper Alg. 4).

    Forward filtering on the weighted sub-lattice, then backward sampling
    with the Gumbel-max trick: at ``T`` and then at every earlier position
    the state is ``argmax(log p^ + g)`` over the slots, and the relaxed
    sample is ``softmax((log p^ + g) / temperature)`` with the same Gumbel
    noise ``g`` (the next backward step conditions on the hard sample).

    Parameters
    ----------
    {params}
    temperature : float, default=1.0
        Temperature of the relaxed (Gumbel-softmax) sample, > 0.
    gumbel : array-like of shape (n_steps, n_slots), default=None
        Standard Gumbel noise per slot; drawn from ``random_state`` (after
        the index sets) when None.

    Returns
    -------
    result : RandomizedGumbelSample

    Notes
    -----
    With ``n_top >= n_states`` the hard sample is an exact draw from the
    chain's posterior p(y).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import randomized_gumbel_sample
    >>> rng = np.random.default_rng(0)
    >>> U, B = rng.normal(size=(4, 30)), rng.normal(size=(30, 30))
    >>> s = randomized_gumbel_sample(U, B, 3, 3, temperature=0.5, random_state=0)
    >>> s.sample.shape, s.relaxed_states(30).shape
    ((4,), (4, 30))
    """
    if isinstance(temperature, bool) or not isinstance(temperature, Real) or not temperature > 0:
        raise ValueError(f"temperature must be a positive number, got {temperature!r}.")
    rng = _Rng(random_state)
    U, lowrank, Bf, left, right, sets = _setup(
        U, B, n_top, n_sampled, proposal, rng if index_sets is None else None,
        force, index_sets)
    if gumbel is None:
        gumbel = rng.gumbel(sets.index.shape)
    gumbel = _check_real(gumbel, "gumbel", 2, allow_neg_inf=False)
    if gumbel.shape != sets.index.shape:
        raise ValueError(
            f"gumbel must have shape (n_steps, n_slots) = {sets.index.shape}, got {gumbel.shape}.")
    alpha, log_z = _k.rdp_forward(U, sets.index, sets.log_weight, Bf, left, right,
                                  lowrank, _CHUNK)
    if not np.isfinite(log_z):
        raise ValueError("log Z-hat is -inf on this sub-lattice: nothing to sample.")
    slots, relaxed, log_prob = _k.rdp_gumbel(
        U, sets.index, sets.log_weight, Bf, left, right, lowrank, alpha, log_z,
        gumbel, float(temperature))
    sample = sets.index[np.arange(U.shape[0]), slots]
    return RandomizedGumbelSample(sample, relaxed, slots, float(log_prob), sets)


randomized_gumbel_sample.__doc__ = randomized_gumbel_sample.__doc__.format(
    params=_SHARED_PARAMS)
