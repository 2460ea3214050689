"""Scaled linear-space forward-backward kernels of :mod:`skgpstruct.chain.exact`.

The log-space cores of :mod:`skgpstruct.chain._exact_kernels` take V logs and
V exps per step and exponentiate the transitions again in every pass of
every sequence. Here a sequence is exponentiated once,

* ``X[t] = exp(Uf[t] - m[t])`` with ``m[t]`` the row maximum of the folded
  unary potentials (T V exps), and
* ``E = exp(B - c)`` with ``c = max B`` (V^2 exps, once per kernel call when
  B is shared),

and the recursions run in linear space with per-step normalisation:
``alpha[t] = (alpha[t - 1] @ E) * X[t] / s[t]`` with ``s[t]`` its sum (and
``alpha[0] = X[0] / s[0]``), so that ``log Z = sum_t m[t] + (T - 1) c +
sum_t log s[t]``; the backward vectors use the same scales,
``beta[t] = E @ w[t + 1]`` with ``w[t] = X[t] * beta[t] / s[t]`` and
``beta[T - 1] = 1``. The unary marginals are ``alpha[t] * beta[t]`` and the
summed pairwise marginals ``E * sum_t outer(alpha[t - 1], w[t])``.

When it is safe. With ``R_B`` the range of B and ``R_U`` the largest range
of the finite entries of a row of the folded unaries, every entry of E lies
in ``[exp(-R_B), 1]``, so (with ``sum alpha[t - 1] = 1``) every allowed
entry of ``alpha[t]`` is at least ``exp(-R_B - R_U) / V``, every scale
``s[t]`` lies in ``[exp(-R_B), V]``, ``alpha[t] . beta[t] = 1`` bounds
every ``beta[t][i]`` by ``V exp(2 R_B + R_U)`` and below by ``exp(-R_B)``,
and ``w[t][j] <= exp(R_B)``. With ``R_B + R_U <= _SAFE_RANGE = 300`` these
are all normal floats far from under- or overflow (the smallest nonzero
forward entry is above ``exp(-300) / V ~ 5e-131 / V``, the largest backward
entry below ``V exp(600) ~ 4e260 V``), so every sum is of nonnegative
normal numbers and keeps full relative precision; only products that are
negligible in every output (below ~1e-260 of it) can underflow. A sequence
is instead computed by the log-space core (the exact results of
``_exact_kernels``) when ``R_B + R_U > _SAFE_RANGE``, when B contains
``-inf`` (forbidden transitions break the lower bound on E), when a row of
the unaries is all ``-inf`` (log Z = -inf), or, as a guard that the bounds
make unreachable, when a scale is not a positive finite number. ``-inf``
unaries (forbidden labels, start or end states) are fine: their X is 0.

Each sequence's result depends only on its own inputs in the batched and
ragged kernels (prediction paths must not depend on the rest of a batch).
Only :func:`_ll_grad_ragged_blas`, the training pass with a shared B, runs
the sequences of one call together, position by position, as matrix-matrix
products (BLAS through ``np.dot``).

Labels with unknown entries (negative codes, partial labels) take two
linear-space passes (:func:`_partial_seq`): the chain with the known labels
clamped, then the unconstrained one; their pair counts are the clamped
pass's pairwise marginals.

Every kernel writes ``fell[n] = 1`` for a sequence computed by the log-space
core and 0 otherwise.
"""

import math

import numpy as np
from numba import njit

from ._exact_kernels import (
    _NEG_INF,
    _constrain,
    _constrained_log_z,
    _fb_core,
    _fold,
    _forward_core,
    _is_partial,
    _ll_grad_core,
    _load,
    _max_length,
    _path_score,
)

_SAFE_RANGE = 300.0
# Fewest labels for which a training pass runs its sequences together as
# matrix products (:func:`_ll_grad_ragged_blas`); below it one at a time.
_BLAS_MIN_LABELS = 8


# ------------------------------------------------------------- preparation
@njit(cache=True, nogil=True)
def _exp_B(B, E, ET):
    """E = exp(B - max B) and ET = E.T (contiguous); return (max B, range of
    B), the range being inf (and E, ET untouched) if B holds -inf."""
    V = B.shape[0]
    c = _NEG_INF
    lo = np.inf
    for i in range(V):
        for j in range(V):
            b = B[i, j]
            if b > c:
                c = b
            if b < lo:
                lo = b
    if lo == _NEG_INF:
        return c, np.inf
    for i in range(V):
        for j in range(V):
            e = math.exp(B[i, j] - c)
            E[i, j] = e
            ET[j, i] = e
    return c, c - lo


@njit(cache=True, nogil=True)
def _exp_U(Uf, rB, X, m):
    """If rB plus the largest range of the finite entries of a row of Uf is at
    most _SAFE_RANGE, fill X[t] = exp(Uf[t] - m[t]), m[t] = max Uf[t], and
    return True; otherwise (a row all -inf included) return False."""
    T, V = Uf.shape
    for t in range(T):
        mx = _NEG_INF
        lo = np.inf
        for j in range(V):
            u = Uf[t, j]
            if u > mx:
                mx = u
            if u != _NEG_INF and u < lo:
                lo = u
        if mx == _NEG_INF or rB + (mx - lo) > _SAFE_RANGE:
            return False
        m[t] = mx
    for t in range(T):
        for j in range(V):
            X[t, j] = math.exp(Uf[t, j] - m[t])
    return True


@njit(cache=True, nogil=True)
def _log_z(m, c, s, T):
    """log Z = sum_t m[t] + (T - 1) c + sum_t log s[t] (first T entries)."""
    z = 0.0
    for t in range(T):
        z += m[t]
    z += (T - 1) * c
    for t in range(T):
        z += math.log(s[t])
    return z


# ------------------------------------------------------ single-sequence core
@njit(cache=True, nogil=True)
def _lin_forward(X, E, alpha, s, acc):
    """Normalised forward vectors into alpha, scales into s; return False if a
    scale is not a positive finite number (unreachable when _exp_U passed)."""
    T, V = X.shape
    tot = 0.0
    for j in range(V):
        tot += X[0, j]
    if not (tot > 0.0 and tot < np.inf):
        return False
    s[0] = tot
    inv = 1.0 / tot
    for j in range(V):
        alpha[0, j] = X[0, j] * inv
    for t in range(1, T):
        acc[:] = 0.0
        for i in range(V):  # no test for zeros: a branch costs more than it saves
            a = alpha[t - 1, i]
            for j in range(V):
                acc[j] += a * E[i, j]
        tot = 0.0
        for j in range(V):
            v = acc[j] * X[t, j]
            alpha[t, j] = v
            tot += v
        if not (tot > 0.0 and tot < np.inf):
            return False
        s[t] = tot
        inv = 1.0 / tot
        for j in range(V):
            alpha[t, j] *= inv
    return True


@njit(cache=True, nogil=True)
def _lin_backward(X, ET, alpha, s, b, w, acc, unary, M, pairs=True):
    """Backward sweep with the forward scales: unary marginals into
    ``unary``; with ``pairs``, ``M += sum_t outer(alpha[t - 1], w[t])`` (the summed pairwise
    marginals are ``E * M``). ``b``, ``w``, ``acc`` are scratch (V,)."""
    T, V = X.shape
    b[:] = 1.0
    for j in range(V):
        unary[T - 1, j] = alpha[T - 1, j]
    for t in range(T - 2, -1, -1):
        inv = 1.0 / s[t + 1]
        for j in range(V):
            w[j] = X[t + 1, j] * b[j] * inv
        if pairs:
            for i in range(V):
                a = alpha[t, i]
                for j in range(V):
                    M[i, j] += a * w[j]
        acc[:] = 0.0
        for j in range(V):
            wj = w[j]
            for i in range(V):
                acc[i] += wj * ET[j, i]
        for i in range(V):
            b[i] = acc[i]
            unary[t, i] = alpha[t, i] * acc[i]


@njit(cache=True, nogil=True)
def _partial_seq(Uf, y, E, ET, c, rB, X, m, alpha, s, fwd, bwd, vec, unary, M, pw):
    """:func:`_seq` of labels with unknown entries in linear space: the pass
    given the known labels (their potentials clamped, :func:`_constrain`),
    then the unconstrained one. ``unary`` = constrained minus unconstrained
    marginals, ``M += sum outer(alpha, w)`` of the unconstrained pass minus
    the constrained one's (so that ``-E * M`` is the pairwise gradient),
    ``pw`` overwritten (scratch); return ``(log Z_c - log Z, True)``, or
    ``(0, False)`` without touching ``unary`` or ``M`` when a pass is not
    safe (the caller falls back to log space)."""
    T, V = Uf.shape
    b, w, acc = vec[0], vec[1], vec[2]
    Uc = fwd[:T]
    _constrain(Uf, y, Uc)
    if not (_exp_U(Uc, rB, X[:T], m) and _lin_forward(X[:T], E, alpha[:T], s, acc)):
        return 0.0, False
    log_zc = _log_z(m, c, s, T)
    pw[:, :] = 0.0
    _lin_backward(X[:T], ET, alpha[:T], s, b, w, acc, bwd[:T], pw)
    if not (_exp_U(Uf, rB, X[:T], m) and _lin_forward(X[:T], E, alpha[:T], s, acc)):
        return 0.0, False
    log_z = _log_z(m, c, s, T)
    _lin_backward(X[:T], ET, alpha[:T], s, b, w, acc, unary, M)
    for i in range(V):
        for j in range(V):
            M[i, j] -= pw[i, j]
    for t in range(T):
        for j in range(V):
            unary[t, j] = bwd[t, j] - unary[t, j]
    return log_zc - log_z, True


@njit(cache=True, nogil=True)
def _seq(Uf, B, y, E, ET, c, rB, X, m, alpha, s, fwd, bwd, vec, unary, M, pw):
    """Forward-backward of one sequence (folded unaries Uf, transitions B with
    E, ET, c, rB from :func:`_exp_B`). Linear space: unary marginals (or
    ``onehot(y) -`` them) into ``unary``, ``M += sum_t outer(alpha, w)``,
    ``pw`` untouched. Log-space fallback: ``pw`` overwritten with the summed
    pairwise marginals (or pair counts minus them), M untouched. Return
    (log Z or log p(y), fell back)."""
    T, V = Uf.shape
    b, w, acc = vec[0], vec[1], vec[2]
    partial = y.shape[0] > 0 and _is_partial(y)  # unknown labels
    if partial and rB <= _SAFE_RANGE:
        value, done = _partial_seq(Uf, y, E, ET, c, rB, X, m, alpha, s, fwd, bwd, vec,
                                   unary, M, pw)
        if done:
            return value, False
    if not partial and rB <= _SAFE_RANGE and _exp_U(Uf, rB, X[:T], m) and \
            _lin_forward(X[:T], E, alpha[:T], s, acc):
        log_z = _log_z(m, c, s, T)
        _lin_backward(X[:T], ET, alpha[:T], s, b, w, acc, unary, M)
        if y.shape[0] == 0:
            return log_z, False
        for t in range(T):
            for j in range(V):
                unary[t, j] = -unary[t, j]
            unary[t, y[t]] += 1.0
        score = _path_score(Uf, B, y)
        return (_NEG_INF if score == _NEG_INF else score - log_z), False
    if y.shape[0] == 0:
        return _fb_core(Uf, B, fwd[:T], bwd[:T], acc, unary, pw), True
    return _ll_grad_core(Uf, B, y, fwd[:T], bwd[:T], acc, unary, pw), True


@njit(cache=True, nogil=True)
def _add_counts(y, P, sign):
    """P[y[t - 1], y[t]] += sign for every t >= 1; nothing for labels with an
    unknown entry (negative codes: their pair term is the constrained
    marginals, which the pass computes)."""
    if _is_partial(y):
        return
    for t in range(1, y.shape[0]):
        P[y[t - 1], y[t]] += sign


@njit(cache=True, nogil=True)
def _finish_pair(E, M, out, y_given, accumulate):
    """out (+)= -E * M if y was given (gradient) else E * M."""
    V = E.shape[0]
    sign = -1.0 if y_given else 1.0
    for i in range(V):
        for j in range(V):
            v = sign * (E[i, j] * M[i, j])
            if accumulate:
                out[i, j] += v
            else:
                out[i, j] = v


@njit(cache=True, nogil=True)
def _scratch(T, V, B):
    """E, ET, Uf, X, alpha, fwd, bwd, m, s, vec (3, V), M, pw, c, rB: with a
    shared B (leading axis 1) E, ET, c, rB are :func:`_exp_B`'s of B[0];
    with per-sample (per-sequence) transitions c, rB = 0, inf, E and ET unset."""
    E, ET = np.empty((V, V)), np.empty((V, V))
    c, rB = _exp_B(B[0], E, ET) if B.shape[0] == 1 else (0.0, np.inf)
    return (E, ET, np.empty((T, V)), np.empty((T, V)),
            np.empty((T, V)), np.empty((T, V)), np.empty((T, V)), np.empty(T), np.empty(T),
            np.empty((3, V)), np.empty((V, V)), np.empty((V, V)), c, rB)


@njit(cache=True, nogil=True)
def _load_exp(U, B, start, end, k, Uf, E, ET, c, rB):
    """:func:`_load` of sample k into Uf; return (B_k, c, rB), B_k's own
    :func:`_exp_B` into E, ET with per-sample transitions, else the shared
    B's c, rB as passed."""
    Bk = _load(U, B, start, end, k, Uf)
    if B.shape[0] != 1:
        c, rB = _exp_B(Bk, E, ET)
    return Bk, c, rB


# ------------------------------------------------------------ batched kernels
@njit(cache=True, nogil=True)
def _fb_kernel(U, B, start, end, y, unary, pairwise, fell):
    """As ``_exact_kernels._fb_kernel`` (marginals, or log p(y) and its
    gradients when ``y`` is not empty), in linear space where safe."""
    S, T, V = U.shape
    out = np.empty(S)
    E, ET, Uf, X, alpha, fwd, bwd, m, s, vec, M, pw, c, rB = _scratch(T, V, B)
    for k in range(S):
        Bk, c, rB = _load_exp(U, B, start, end, k, Uf, E, ET, c, rB)
        M[:, :] = 0.0
        v, f = _seq(Uf, Bk, y, E, ET, c, rB, X, m, alpha, s, fwd, bwd, vec,
                    unary[k], M, pairwise[k])
        out[k] = v
        fell[k] = 1 if f else 0
        if not f:
            _finish_pair(E, M, pairwise[k], y.shape[0] > 0, False)
            if y.shape[0] > 0:
                _add_counts(y, pairwise[k], 1.0)
    return out


@njit(cache=True, nogil=True)
def _forward_kernel(U, B, start, end, y, fell):
    """log Z per sample, or log p(y) if ``y`` is not empty, with the same
    arithmetic as :func:`_fb_kernel` (so the values agree bit for bit)."""
    S, T, V = U.shape
    out = np.empty(S)
    E, ET, Uf, X, alpha, fwd, bwd, m, s, vec, M, pw, c, rB = _scratch(T, V, B)
    for k in range(S):
        Bk, c, rB = _load_exp(U, B, start, end, k, Uf, E, ET, c, rB)
        if rB <= _SAFE_RANGE and _exp_U(Uf, rB, X, m) and _lin_forward(X, E, alpha, s, vec[0]):
            out[k] = _log_z(m, c, s, T)
            fell[k] = 0
        else:
            out[k] = _forward_core(Uf, Bk, fwd)
            fell[k] = 1
        if y.shape[0] > 0:
            if _is_partial(y):
                score = _constrained_log_z(Uf, Bk, y, fwd)
            else:
                score = _path_score(Uf, Bk, y)
            out[k] = _NEG_INF if score == _NEG_INF else score - out[k]
    return out


# ------------------------------------------------------------- ragged kernels
@njit(cache=True, nogil=True)
def _fb_ragged_kernel(U, offsets, B, start, end, y, unary, pairwise, fell):
    """As ``_exact_kernels._fb_ragged_kernel``, one sequence at a time in
    linear space where safe. With a shared B summed into ``pairwise`` (1, V,
    V), the linear-space sequences share one M and E * M is taken once."""
    N = offsets.shape[0] - 1
    V = U.shape[1]
    out = np.empty(N)
    E, ET, Uf, X, alpha, fwd, bwd, m, s, vec, M, pw, c, rB = _scratch(_max_length(offsets), V, B)
    shared = B.shape[0] == 1
    summed = pairwise.shape[0] == 1 and N > 1 and shared
    has_y = y.shape[0] > 0
    pairwise[:, :, :] = 0.0
    M[:, :] = 0.0
    any_linear = False
    for n in range(N):
        a, b = offsets[n], offsets[n + 1]
        T = b - a
        Bn = B[0 if shared else n]
        if not shared:
            c, rB = _exp_B(Bn, E, ET)
        _fold(U[a:b], start, end, Uf[:T])
        yn = y[a:b] if has_y else y
        P = pairwise[0 if summed else n]
        v, f = _seq(Uf[:T], Bn, yn, E, ET, c, rB, X, m, alpha, s, fwd, bwd, vec,
                    unary[a:b], M, pw)
        out[n] = v
        fell[n] = 1 if f else 0
        if f:
            P += pw
        else:
            any_linear = True
            if has_y:
                _add_counts(yn, P, 1.0)
            if not summed:
                _finish_pair(E, M, P, has_y, True)
                M[:, :] = 0.0
    if summed and any_linear:
        _finish_pair(E, M, pairwise[0], has_y, True)
    return out


# ------------------------------------------------- batched training pass (BLAS)
@njit(cache=True, nogil=True)
def _ll_grad_ragged_blas(U, offsets, B, start, end, y, gU, gB, fell):
    """``_fb_ragged_kernel`` with labels and a shared B summed into gB (1, V,
    V), the linear-space sequences run together: sorted by decreasing length,
    the sequences still running at position t are a prefix, stored as one
    block of rows, so that each step of the forward and backward sweeps is
    one matrix-matrix product with E and the pairwise sums one product over
    all positions. The results of a sequence depend (by rounding) on the
    other sequences of the call: only for training, which sums over them."""
    N = offsets.shape[0] - 1
    V = U.shape[1]
    out = np.empty(N)
    E, ET, Uf, X, alpha, fwd, bwd, m, s, vec, M, pw, c, rB = _scratch(_max_length(offsets), V, B)
    G = gB[0]
    G[:, :] = 0.0
    # sequences that are safe: X, m of each into its own rows of Xs / ms
    lengths = np.empty(N, dtype=np.int64)
    safe = np.zeros(N, dtype=np.bool_)
    Xs = np.empty((U.shape[0], V))
    ms = np.empty(U.shape[0])
    for n in range(N):
        a, b = offsets[n], offsets[n + 1]
        T = b - a
        lengths[n] = T
        _fold(U[a:b], start, end, Uf[:T])
        yn = y[a:b]
        _add_counts(yn, G, 1.0)
        if rB <= _SAFE_RANGE and not _is_partial(yn) and _exp_U(Uf[:T], rB, Xs[a:b], ms[a:b]):
            safe[n] = True
            fell[n] = 0
            score = _path_score(Uf[:T], B[0], yn)
            out[n] = score  # log Z subtracted below
        else:
            M[:, :] = 0.0
            v, f = _seq(Uf[:T], B[0], yn, E, ET, c, rB, X, m, alpha, s, fwd, bwd, vec,
                        gU[a:b], M, pw)
            out[n] = v
            fell[n] = 1 if f else 0
            if f:
                _add_counts(yn, pw, -1.0)  # G holds the counts of every sequence
                G += pw
            else:  # unknown labels, in linear space: M holds the pair sums
                _finish_pair(E, M, G, True, True)
    order_all = np.argsort(-lengths, kind="mergesort")
    K = 0
    for n in range(N):
        K += safe[n]
    if K == 0:
        return out
    order = np.empty(K, dtype=np.int64)
    r = 0
    for q in range(N):
        if safe[order_all[q]]:
            order[r] = order_all[q]
            r += 1
    T_max = lengths[order[0]]
    # k[t]: sequences still running at t; rows of position t: base[t] + r
    k = np.zeros(T_max, dtype=np.int64)
    for r in range(K):
        for t in range(lengths[order[r]]):
            k[t] += 1
    base = np.zeros(T_max + 1, dtype=np.int64)
    for t in range(T_max):
        base[t + 1] = base[t] + k[t]
    n_rows = base[T_max]
    Xb = np.empty((n_rows, V))
    A = np.empty((n_rows, V))
    sc = np.empty(n_rows)
    for r in range(K):
        a = offsets[order[r]]
        for t in range(lengths[order[r]]):
            Xb[base[t] + r] = Xs[a + t]
    # forward: A[t] = (A[t - 1, :k[t]] @ E) * X[t], rows normalised
    for r in range(k[0]):
        tot = 0.0
        for j in range(V):
            tot += Xb[r, j]
        sc[r] = tot
        for j in range(V):
            A[r, j] = Xb[r, j] / tot
    for t in range(1, T_max):
        P = np.dot(A[base[t - 1]:base[t - 1] + k[t]], E)
        for r in range(k[t]):
            q = base[t] + r
            tot = 0.0
            for j in range(V):
                v = P[r, j] * Xb[q, j]
                A[q, j] = v
                tot += v
            if not (tot > 0.0 and tot < np.inf):  # unreachable guard: redo one by one
                return _fb_ragged_kernel(U, offsets, B, start, end, y, gU, gB, fell)
            sc[q] = tot
            inv = 1.0 / tot
            for j in range(V):
                A[q, j] *= inv
    # backward: beta[t, :k[t + 1]] = W[t + 1] @ E.T with W = X * beta / s;
    # the pairs (alpha[t], W[t + 1]) are gathered for one product M = Ap.T @ Wp
    n_pairs = n_rows - k[0]
    Ap = np.empty((n_pairs, V))
    Wp = np.empty((n_pairs, V))
    beta = np.ones((K, V))
    for t in range(T_max - 2, -1, -1):
        kt = k[t + 1]
        p0 = base[t + 1] - k[0]
        for r in range(kt):
            q = base[t + 1] + r
            inv = 1.0 / sc[q]
            for j in range(V):
                Wp[p0 + r, j] = Xb[q, j] * beta[r, j] * inv
            Ap[p0 + r] = A[base[t] + r]
        # unary marginals of position t + 1 before beta moves to t
        for r in range(kt):
            q = base[t + 1] + r
            a = offsets[order[r]] + t + 1
            for j in range(V):
                gU[a, j] = -(A[q, j] * beta[r, j])
        beta[:kt] = np.dot(Wp[p0:p0 + kt], ET)
        for r in range(kt, k[t]):  # sequences ending at t: beta = 1
            beta[r] = 1.0
    for r in range(k[0]):
        a = offsets[order[r]]
        for j in range(V):
            gU[a, j] = -(A[r, j] * beta[r, j])
    if T_max > 1:
        M = np.dot(Ap.T, Wp)
        for i in range(V):
            for j in range(V):
                G[i, j] -= E[i, j] * M[i, j]
    # log Z per sequence (as _log_z), values and one-hot of the gradient
    for r in range(K):
        n = order[r]
        a = offsets[n]
        T = lengths[n]
        z = 0.0
        for t in range(T):
            z += ms[a + t]
        z += (T - 1) * c
        for t in range(T):
            z += math.log(sc[base[t] + r])
        out[n] = _NEG_INF if out[n] == _NEG_INF else out[n] - z
        for t in range(T):
            gU[a + t, y[a + t]] += 1.0
    return out
