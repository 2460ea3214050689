"""Kernels of :mod:`skgpstruct.chain.averaged`: token marginals summed over
many draws of a chain's potentials, each draw run by the linear-space
core of :mod:`skgpstruct.chain._linear_space_kernels` where safe, else by
the log-space core.

:func:`_averaged_kernel` takes the draws of the unary potentials as an
array; :func:`_sampled_kernel` makes them itself from a Gaussian's mean,
Cholesky factors and standard normals, one draw at a time, so that a
prediction never holds (or checks, or copies) the ``(S, T, V)`` array of
its draws.
"""

import math

import numpy as np
from numba import njit

from ._exact_kernels import _fb_core
from ._linear_space_kernels import (_SAFE_RANGE, _exp_B, _exp_U, _lin_backward,
                                    _lin_forward, _scratch)


@njit(cache=True, nogil=True)
def _prepare_kernel(B, E, ET, c, rB):
    """:func:`_exp_B` of every sample's transitions ``B[k]``."""
    for k in range(B.shape[0]):
        c[k], rB[k] = _exp_B(B[k], E[k], ET[k])


@njit(cache=True, nogil=True)
def _draw_marginals(k, B, E, ET, c, rB, Uf, X, alpha, fwd, bwd, m, s, vec, M, pw, unary):
    """Unary marginals into ``unary`` of the draw whose unary potentials
    are in ``Uf`` (T, V) and whose transitions are draw ``k`` of the
    prepared ones: linear space where safe (without the pairwise sums a
    prediction does not need), else the log-space core, as
    :func:`~skgpstruct.chain._linear_space_kernels._seq` decides."""
    T = unary.shape[0]
    if rB[k] <= _SAFE_RANGE and _exp_U(Uf, rB[k], X[:T], m) and \
            _lin_forward(X[:T], E[k], alpha[:T], s, vec[2]):
        _lin_backward(X[:T], ET[k], alpha[:T], s, vec[0], vec[1], vec[2], unary, M, False)
    else:
        _fb_core(Uf, B[k], fwd[:T], bwd[:T], vec[2], unary, pw)


@njit(cache=True, nogil=True)
def _accumulate(unary, stats, total, square, entropy):
    """``total += unary``; with ``stats`` also ``square += unary^2`` and
    ``entropy += H(unary)`` per token (nats, ``0 log 0 = 0``)."""
    T, V = unary.shape
    if not stats:
        for t in range(T):
            for j in range(V):
                total[t, j] += unary[t, j]
        return
    for t in range(T):
        h = 0.0
        for j in range(V):
            p = unary[t, j]
            total[t, j] += p
            square[t, j] += p * p
            if p > 0.0:
                h -= p * math.log(p)
        entropy[t] += h


@njit(cache=True, nogil=True)
def _averaged_kernel(U, B, E, ET, c, rB, stats, total, square, entropy):
    """Add the unary marginals ``p_k`` of the draws ``(U[k], B[k])``
    (transitions prepared by :func:`_prepare_kernel`) to running sums:
    ``total += sum_k p_k``, and with ``stats`` ``square += sum_k p_k^2``
    and ``entropy += sum_k H(p_k)`` per token (nats, ``0 log 0 = 0``)."""
    S, T, V = U.shape
    _, _, Uf, X, alpha, fwd, bwd, m, s, vec, M, pw, _, _ = _scratch(T, V, B[:1])
    unary = np.empty((T, V))
    for k in range(S):
        for t in range(T):
            for j in range(V):
                Uf[t, j] = U[k, t, j]
        _draw_marginals(k, B, E, ET, c, rB, Uf, X, alpha, fwd, bwd, m, s, vec, M, pw, unary)
        _accumulate(unary, stats, total, square, entropy)


@njit(cache=True, nogil=True)
def _sampled_kernel(b, C, e, scale, B, E, ET, c, rB, stats, total, square, entropy):
    """:func:`_averaged_kernel` of the ``S = B.shape[0]`` antithetic draws
    ``U_k = scale * (b + sign_k L e_i)``, made here one at a time.

    ``b`` (T, V) is the mean of the unary potentials; ``L`` is the block
    diagonal matrix of the lower Cholesky factors ``C`` (nb, d, d), ``nb d
    = V T``, acting on the potentials flattened label-major (entry ``j T +
    t`` is token ``t``, label ``j``: ``nb = V, d = T`` for mean-field blocks,
    ``nb = 1, d = V T`` for a joint covariance); ``e`` (S - S // 2, V T)
    holds the standard normals, flattened the same way. With ``P = S // 2``,
    draw ``k < P`` is ``+e[k]``, draw ``P + k`` is ``-e[k]`` and, for an
    odd ``S``, the last draw is ``+e[P]``; draw ``k`` runs with the prepared
    transitions ``k``."""
    S = B.shape[0]
    T, V = b.shape
    P = S // 2
    nb, d = C.shape[0], C.shape[1]
    _, _, Uf, X, alpha, fwd, bwd, m, s, vec, M, pw, _, _ = _scratch(T, V, B[:1])
    unary = np.empty((T, V))
    w = np.empty(V * T)
    for i in range(S - P):
        for blk in range(nb):
            o = blk * d
            for r in range(d):
                acc = 0.0
                for q in range(r + 1):
                    acc += C[blk, r, q] * e[i, o + q]
                w[o + r] = acc
        for half in range(2 if i < P else 1):
            # a pair: +e[i] as draw i, -e[i] as draw P + i; the odd last: +e[P]
            k = i if (half == 0 and i < P) else P + i
            sign = -1.0 if half == 1 else 1.0
            for t in range(T):
                for j in range(V):
                    Uf[t, j] = scale * (b[t, j] + sign * w[j * T + t])
            _draw_marginals(k, B, E, ET, c, rB, Uf, X, alpha, fwd, bwd, m, s, vec, M, pw,
                            unary)
            _accumulate(unary, stats, total, square, entropy)
