"""Token marginals averaged over many draws of a chain's potentials, the
draws' transitions prepared once.

A Bayesian tagger's predictive marginals are ``E_q[p(y_t | U, B)]``,
estimated by averaging the forward-backward marginals of ``S`` posterior
draws. When the draws of the transitions are shared by many sequences (a
posterior's ``S`` draws of the transitions, used for every sequence),
their exponentials need computing once, not once per sequence:
:func:`prepare_transitions` does that, and :func:`averaged_marginals` runs
the draws of one sequence's unary potentials against them (linear space
where safe, :mod:`skgpstruct.chain._linear_space_kernels`), returning only
the averages (no ``(S, T, V)`` array of marginals).
"""

from typing import NamedTuple

import numpy as np

from . import _averaged_kernels as _avg
from .._input.arrays import check_potentials

__all__ = ["MarginalSums", "PreparedTransitions", "add_draws", "add_sampled_draws",
           "averaged_marginals", "prepare_transitions"]


class PreparedTransitions(NamedTuple):
    """``S`` draws of the transitions and their exponentials."""

    B: np.ndarray  #: (S, V, V) the draws
    E: np.ndarray  #: (S, V, V) ``exp(B - c)``
    ET: np.ndarray  #: (S, V, V) its transposes
    c: np.ndarray  #: (S,) ``max B``
    rB: np.ndarray  #: (S,) ``max B - min B`` (inf with ``-inf`` entries)


def prepare_transitions(B):
    """The :class:`PreparedTransitions` of the draws ``B`` (S, V, V).

    Examples
    --------
    >>> import numpy as np
    >>> prep = prepare_transitions(np.zeros((2, 3, 3)))
    >>> prep.E.shape, prep.c.tolist()
    ((2, 3, 3), [0.0, 0.0])
    """
    B = np.ascontiguousarray(B, dtype=np.float64)
    if B.ndim != 3 or B.shape[1] != B.shape[2] or B.shape[0] < 1:
        raise ValueError(f"B must have shape (S, V, V) with S >= 1, got {B.shape}.")
    S, V, _ = B.shape
    E, ET = np.empty((S, V, V)), np.empty((S, V, V))
    c, rB = np.empty(S), np.empty(S)
    _avg._prepare_kernel(B, E, ET, c, rB)
    return PreparedTransitions(B, E, ET, c, rB)


class MarginalSums:
    """Running sums of the unary marginals of a sequence's draws, added to
    by :func:`add_draws`.

    Attributes
    ----------
    n_draws : int
        Draws added.
    total, square : ndarray of shape (T, V)
        Sums over the draws of the marginals and of their squares.
    entropy : ndarray of shape (T,)
        Sum over the draws of the token entropies (nats).
    """

    def __init__(self, T, V):
        self.n_draws = 0
        self.total, self.square = np.zeros((T, V)), np.zeros((T, V))
        self.entropy = np.zeros(T)

    @property
    def mean(self):
        """The averaged marginals."""
        return self.total / self.n_draws


def add_draws(sums, U, prepared, stats=True):
    """Add the marginals of the draws ``U`` (S, T, V) to ``sums`` (a
    :class:`MarginalSums`; returned), draw ``k`` with the transitions of
    ``prepared`` (a :class:`PreparedTransitions` of ``S`` draws); without
    ``stats`` only ``total`` (and ``n_draws``), not the squares and
    entropies."""
    U3, _, _, _, _ = check_potentials(U, prepared.B[0])
    if np.ndim(U) != 3 or U3.shape[0] != prepared.B.shape[0]:
        raise ValueError(f"U must have shape (S, T, V) with S = {prepared.B.shape[0]} "
                         f"draws, got {np.shape(U)}.")
    if U3.shape[1:] != sums.total.shape:
        raise ValueError(f"U has (T, V) = {U3.shape[1:]}, the sums {sums.total.shape}.")
    _avg._averaged_kernel(np.ascontiguousarray(U3), prepared.B, prepared.E, prepared.ET,
                          prepared.c, prepared.rB, bool(stats), sums.total, sums.square,
                          sums.entropy)
    sums.n_draws += U3.shape[0]
    return sums


def add_sampled_draws(sums, b, C, e, prepared, scale=1.0, stats=True):
    """:func:`add_draws` of the antithetic Gaussian draws ``U_k = scale *
    (b + sign_k L e_i)`` of one sequence's unary potentials, made one at a
    time inside the kernel (no ``(S, T, V)`` array of draws).

    Parameters
    ----------
    sums : MarginalSums
        Added to and returned.
    b : ndarray of shape (T, V)
        The mean of the unary potentials.
    C : ndarray of shape (nb, d, d)
        Lower Cholesky factors of the covariance of the potentials
        flattened label-major (entry ``j T + t`` is token ``t``, label
        ``j``), block diagonal with ``nb`` blocks, ``nb d = V T``: ``(V, T,
        T)`` for independent labels, ``(1, V T, V T)`` for a joint one. Only
        the lower triangles are read.
    e : ndarray of shape (S - S // 2, V, T)
        Standard normals. With ``P = S // 2`` draw ``k < P`` is ``+e[k]``,
        draw ``P + k`` is ``-e[k]``, and for an odd ``S`` the last is
        ``+e[P]``: the draws of ``concatenate([e[:P], -e[:P], e[P:]])``.
    prepared : PreparedTransitions
        ``S`` draws of the transitions (draw ``k`` with ``U_k``), already
        scaled.
    scale : float, default=1.0
        Factor on every unary draw.
    stats : bool, default=True
        As in :func:`add_draws`.

    Returns
    -------
    sums : MarginalSums

    Examples
    --------
    >>> import numpy as np
    >>> prep = prepare_transitions(np.zeros((4, 2, 2)))
    >>> C = np.eye(3)[None].repeat(2, axis=0)  # (V, T, T), unit variances
    >>> e = np.random.default_rng(0).standard_normal((2, 2, 3))
    >>> sums = add_sampled_draws(MarginalSums(3, 2), np.zeros((3, 2)), C, e, prep)
    >>> sums.n_draws, np.allclose(sums.mean.sum(axis=1), 1.0)
    (4, True)
    """
    S = prepared.B.shape[0]
    b = np.ascontiguousarray(b, dtype=np.float64)
    C = np.ascontiguousarray(C, dtype=np.float64)
    e = np.ascontiguousarray(e, dtype=np.float64)
    if b.ndim != 2 or b.shape != sums.total.shape:
        raise ValueError(f"b must have shape {sums.total.shape} (the sums'), got {b.shape}.")
    T, V = b.shape
    if C.ndim != 3 or C.shape[1] != C.shape[2] or C.shape[0] * C.shape[1] != V * T:
        raise ValueError(f"C must have shape (nb, d, d) with nb d = V T = {V * T}, "
                         f"got {C.shape}.")
    if e.shape != (S - S // 2, V, T):
        raise ValueError(f"e must have shape {(S - S // 2, V, T)} for S = {S} draws, "
                         f"got {e.shape}.")
    scale = float(scale)
    if not (np.isfinite(scale) and np.isfinite(b).all() and np.isfinite(C).all()
            and np.isfinite(e).all()):
        raise ValueError("b, C, e and scale must be finite.")
    _avg._sampled_kernel(b, C, e.reshape(S - S // 2, V * T), scale, prepared.B, prepared.E,
                         prepared.ET, prepared.c, prepared.rB, bool(stats), sums.total,
                         sums.square, sums.entropy)
    sums.n_draws += S
    return sums


def averaged_marginals(U, prepared, stats=False):
    """Unary marginals of ``S`` draws averaged over the draws.

    Parameters
    ----------
    U : ndarray of shape (S, T, V)
        The draws of one sequence's unary potentials.
    prepared : PreparedTransitions
        The draws' transitions (``S`` of them, draw ``k`` with ``U[k]``).
    stats : bool, default=False
        Also return the mean over draws of the squared marginals and of the
        token entropies.

    Returns
    -------
    mean : ndarray of shape (T, V)
    second : ndarray of shape (T, V)
        Only with ``stats``.
    mean_entropy : ndarray of shape (T,)
        Only with ``stats`` (nats, ``0 log 0 = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> prep = prepare_transitions(np.zeros((4, 2, 2)))
    >>> averaged_marginals(np.zeros((4, 3, 2)), prep)
    array([[0.5, 0.5],
           [0.5, 0.5],
           [0.5, 0.5]])
    """
    shape = np.shape(U)
    sums = add_draws(MarginalSums(*shape[-2:]), U, prepared, stats)
    mean = sums.mean
    if not stats:
        return mean
    return mean, sums.square / sums.n_draws, sums.entropy / sums.n_draws
