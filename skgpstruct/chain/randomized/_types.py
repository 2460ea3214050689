"""Result types and input checks of randomized dynamic programming.

The containers returned by :mod:`skgpstruct.chain.randomized` and the
validation shared by its proposals, index sets and algorithms.
"""

from numbers import Integral
from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

__all__ = [
    "LowRankTransitions",
    "IndexSets",
    "RandomizedForward",
    "RandomizedMarginals",
    "RandomizedGumbelSample",
]

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
        """The dense transition matrix.

        Returns
        -------
        B : ndarray of shape (n_states, n_states)
            ``left @ right.T``.
        """
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
