"""Numba kernels of the vector work of :func:`skgpstruct.optim.owlqn.minimize_owlqn`.

Each is one pass (or, for the two-loop recursion, ``4 m`` passes) over
vectors of the problem's size, fused where one pass can do several
things, with no temporary arrays: on a CRF of a million weights the
optimiser's own step was, with numpy expressions, about as long as one
evaluation of the objective. The numpy references are in
``tests/test_owlqn.py``.
"""

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def pseudo_gradient_into(x, g, l1, pg):
    """``pg`` = the pseudo-gradient of ``f + sum_i l1_i |x_i|`` (see
    :func:`skgpstruct.optim.owlqn.pseudo_gradient`); return ``(pg . pg, x . x)``."""
    pp = 0.0
    xx = 0.0
    for i in range(x.shape[0]):
        xi, gi, ci = x[i], g[i], l1[i]
        if xi > 0:
            p = gi + ci
        elif xi < 0:
            p = gi - ci
        elif gi + ci < 0:
            p = gi + ci
        elif gi - ci > 0:
            p = gi - ci
        else:
            p = 0.0
        pg[i] = p
        pp += p * p
        xx += xi * xi
    return pp, xx


@njit(cache=True, nogil=True)
def trial_point(xp, d, step, pg, l1, out):
    """``out = xp + step d``, each penalised coordinate (``l1_i > 0``) that
    leaves the orthant of ``xp`` (``sign(xp_i)``, or ``sign(-pg_i)`` at 0)
    set to 0; return ``(pg . (out - xp), sum_i l1_i |out_i|)``."""
    dg = 0.0
    norm1 = 0.0
    for i in range(xp.shape[0]):
        v = xp[i] + step * d[i]
        ci = l1[i]
        if ci > 0:
            o = xp[i] if xp[i] != 0 else -pg[i]
            if v * o <= 0:
                v = 0.0
            norm1 += ci * abs(v)
        out[i] = v
        dg += pg[i] * (v - xp[i])
    return dg, norm1


@njit(cache=True, nogil=True)
def store_pair(x, xp, g, gp, s, y):
    """``s = x - xp``, ``y = g - gp`` (stored in ``s`` and ``y``'s dtype);
    return ``(y . s, y . y)`` of the stored values."""
    ys = 0.0
    yy = 0.0
    for i in range(x.shape[0]):
        s[i] = x[i] - xp[i]
        y[i] = g[i] - gp[i]
        si = np.float64(s[i])
        yi = np.float64(y[i])
        ys += yi * si
        yy += yi * yi
    return ys, yy


@njit(cache=True, nogil=True)
def _dot(a, b):
    total = 0.0
    for i in range(a.shape[0]):
        total += np.float64(a[i]) * b[i]
    return total


@njit(cache=True, nogil=True)
def _axpy(d, a, alpha):
    for i in range(d.shape[0]):
        d[i] += alpha * np.float64(a[i])


@njit(cache=True, nogil=True)
def two_loop(pg, S, Y, ys, order, gamma, d):
    """``d = -H pg``: the L-BFGS two-loop recursion over the stored pairs
    ``(S[j], Y[j])`` with ``ys[j] = Y[j] . S[j]``, ``order`` their rows from
    the oldest to the newest, the initial matrix ``gamma I``."""
    m = order.shape[0]
    alpha = np.empty(m)
    for i in range(d.shape[0]):
        d[i] = -pg[i]
    for r in range(m - 1, -1, -1):
        j = order[r]
        alpha[r] = _dot(S[j], d) / ys[j]
        _axpy(d, Y[j], -alpha[r])
    for i in range(d.shape[0]):
        d[i] *= gamma
    for r in range(m):
        j = order[r]
        beta = _dot(Y[j], d) / ys[j]
        _axpy(d, S[j], alpha[r] - beta)


@njit(cache=True, nogil=True)
def constrain_direction(d, pg, l1):
    """Zero each penalised ``d_i`` whose sign is not that of ``-pg_i``
    (``d_i pg_i >= 0``); return ``pg . d``."""
    total = 0.0
    for i in range(d.shape[0]):
        if l1[i] > 0 and d[i] * pg[i] >= 0:
            d[i] = 0.0
        total += pg[i] * d[i]
    return total


@njit(cache=True, nogil=True)
def directional(g, d):
    """``g . d``."""
    return _dot(g, d)
