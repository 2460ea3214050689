"""Algorithms on a randomized sub-lattice (Fu, Cunningham and Lapata, 2022).

The randomized forward algorithm (:func:`randomized_log_partition`, many
draws at once in :func:`randomized_log_partition_draws`, the deterministic
baseline :func:`topk_log_partition`), its gradient by the matching backward
pass (:func:`randomized_marginals`), the randomized entropy (Alg. 3) and
Gumbel backward sampling (Alg. 4). Each draws (or reuses) index sets from
:mod:`skgpstruct.chain.randomized.proposals` and runs the numba kernels of
:mod:`skgpstruct.chain.randomized._kernels` on them.
"""

from numbers import Real

import numpy as np

from . import _kernels as _k
from ._kernels import _CHUNK
from ._types import (
    RandomizedForward,
    RandomizedGumbelSample,
    RandomizedMarginals,
    _check_count,
    _check_real,
    _check_sizes,
    _check_transitions,
    _check_unary,
    _Rng,
)
from .proposals import _check_force, _prepare_sets, _resolve_proposal, _setup

__all__ = [
    "randomized_log_partition",
    "randomized_log_partition_draws",
    "randomized_marginals",
    "randomized_entropy",
    "randomized_gumbel_sample",
    "topk_log_partition",
]



def _forward(U, lowrank, Bf, left, right, sets, undefined=None):
    """Randomized forward lattice and log Z-hat on ``sets``; raise with
    ``undefined`` (what cannot be computed) when log Z-hat is -inf."""
    alpha, log_z = _k.rdp_forward(U, sets.index, sets.log_weight, Bf, left, right,
                                  lowrank, _CHUNK)
    if undefined is not None and not np.isfinite(log_z):
        raise ValueError(f"log Z-hat is -inf on this sub-lattice: {undefined}.")
    return alpha, log_z


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
    alpha, log_z = _forward(U, lowrank, Bf, left, right, sets)
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
    alpha, log_z = _forward(U, lowrank, Bf, left, right, sets, "the gradient is undefined")
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
    alpha, log_z = _forward(U, lowrank, Bf, left, right, sets, "the entropy is undefined")
    return float(_k.rdp_entropy(U, sets.index, sets.log_weight, Bf, left, right,
                                lowrank, alpha, log_z, _CHUNK))


randomized_entropy.__doc__ = randomized_entropy.__doc__.format(params=_SHARED_PARAMS)


def randomized_gumbel_sample(U, B, n_top=None, n_sampled=None, *,
                             proposal="local+global", random_state=None, force=None,
                             index_sets=None, temperature=1.0, gumbel=None):
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
    alpha, log_z = _forward(U, lowrank, Bf, left, right, sets, "nothing to sample")
    slots, relaxed, log_prob = _k.rdp_gumbel(
        U, sets.index, sets.log_weight, Bf, left, right, lowrank, alpha, log_z,
        gumbel, float(temperature))
    sample = sets.index[np.arange(U.shape[0]), slots]
    return RandomizedGumbelSample(sample, relaxed, slots, float(log_prob), sets)


randomized_gumbel_sample.__doc__ = randomized_gumbel_sample.__doc__.format(
    params=_SHARED_PARAMS)
