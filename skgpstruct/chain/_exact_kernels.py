"""Numba kernels of :mod:`skgpstruct.chain.exact`.

Single-sequence cores work on slices of preallocated buffers; the batched
kernels loop over samples and the ragged kernels over sequences stacked in
one array, all inside numba (``njit(cache=True, nogil=True)``, float64, no
fastmath). The public wrappers with their validation and documentation are
in :mod:`skgpstruct.chain.exact`; the numpy references in
:mod:`skgpstruct.chain._reference`. Forward-backward of ``exact`` runs in
linear space (:mod:`skgpstruct.chain._linear_space_kernels`), which calls the
single-sequence cores here for the sequences it cannot compute safely;
``_fb_kernel`` and ``_fb_ragged_kernel`` are kept as the log-space
baseline of the tests and ``benchmarks/chain_kernels.py``.
"""

import numpy as np
from numba import njit

_NEG_INF = -np.inf

# ------------------------------------------------------ single-sequence cores
@njit(cache=True, nogil=True)
def _fold(U, start, end, out):
    """out = U with start added to row 0 and end to row T - 1."""
    T, V = U.shape
    for t in range(T):
        for j in range(V):
            out[t, j] = U[t, j]
    for j in range(V):
        out[0, j] += start[j]
        out[T - 1, j] += end[j]


@njit(cache=True, nogil=True)
def _lse(x):
    """log(sum(exp(x))) of a 1-D array, ``-inf`` when all entries are ``-inf``."""
    m = _NEG_INF
    for k in range(x.shape[0]):
        if x[k] > m:
            m = x[k]
    if m == _NEG_INF:
        return _NEG_INF
    s = 0.0
    for k in range(x.shape[0]):
        s += np.exp(x[k] - m)
    return m + np.log(s)


# The recursions need log sum_i exp(x_i + B[i, j]). Instead of V exps per
# (t, j) they use B's column (or row) maxima: exp(B - max) is computed once per
# sequence, exp(x - max x) once per step, and the sum becomes a dot product in
# linear space (every factor <= 1, so nothing overflows). If such a sum falls
# below _TINY, terms may have underflowed (potentials of magnitude ~1e3 can do
# this) and that entry is recomputed by the exact two-pass log-sum-exp.
_TINY = 1e-280


@njit(cache=True, nogil=True)
def _scaled_exp(B, bmax, E):
    """bmax = column maxima of B, E = exp(B - bmax) (column j is 0 if
    bmax[j] = -inf). Called with B.T for row maxima, giving E transposed."""
    V = B.shape[0]
    for j in range(V):
        m = _NEG_INF
        for i in range(V):
            if B[i, j] > m:
                m = B[i, j]
        bmax[j] = m
    for i in range(V):
        for j in range(V):
            E[i, j] = 0.0 if bmax[j] == _NEG_INF else np.exp(B[i, j] - bmax[j])


@njit(cache=True, nogil=True)
def _lse_sum(x, b):
    """log sum_k exp(x[k] + b[k]), exact two-pass version."""
    m = _NEG_INF
    for k in range(x.shape[0]):
        if x[k] + b[k] > m:
            m = x[k] + b[k]
    if m == _NEG_INF:
        return _NEG_INF
    s = 0.0
    for k in range(x.shape[0]):
        s += np.exp(x[k] + b[k] - m)
    return m + np.log(s)


@njit(cache=True, nogil=True)
def _max_exp(x, out):
    """out = exp(x - max x); return max x (out untouched if it is -inf)."""
    m = _NEG_INF
    for k in range(x.shape[0]):
        if x[k] > m:
            m = x[k]
    if m != _NEG_INF:
        for k in range(x.shape[0]):
            out[k] = np.exp(x[k] - m)
    return m


@njit(cache=True, nogil=True, inline="always")
def _lse_step(x, B, bmax, E, a, acc, out, u, use_u):
    """One step of the scaled recursion, shared by the forward and backward
    cores: ``out[j] = log sum_i exp(x[i] + B[i, j])`` (plus ``u[j]`` when
    ``use_u``), with ``bmax`` and ``E`` from :func:`_scaled_exp` of ``B``;
    ``a`` and ``acc`` are scratch."""
    V = out.shape[0]
    m = _max_exp(x, a)
    if m == _NEG_INF:
        out[:] = _NEG_INF
        return
    acc[:] = 0.0
    for i in range(V):
        if a[i] != 0.0:
            for j in range(V):
                acc[j] += a[i] * E[i, j]
    for j in range(V):
        if bmax[j] == _NEG_INF or (use_u and u[j] == _NEG_INF):
            out[j] = _NEG_INF
        elif not use_u:
            out[j] = m + bmax[j] + np.log(acc[j]) if acc[j] > _TINY else _lse_sum(x, B[:, j])
        elif acc[j] > _TINY:
            out[j] = u[j] + m + bmax[j] + np.log(acc[j])
        else:
            out[j] = u[j] + _lse_sum(x, B[:, j])


@njit(cache=True, nogil=True)
def _forward_core(Uf, B, fwd):
    """Fill fwd[t, j] = log sum of prefix scores ending in j at t; return log Z."""
    T, V = Uf.shape
    bmax, a, acc, E = np.empty(V), np.empty(V), np.empty(V), np.empty((V, V))
    _scaled_exp(B, bmax, E)
    fwd[0, :] = Uf[0]
    for t in range(1, T):
        _lse_step(fwd[t - 1], B, bmax, E, a, acc, fwd[t], Uf[t], True)
    return _lse(fwd[T - 1])


@njit(cache=True, nogil=True)
def _backward_core(Uf, B, bwd, tmp):
    """Fill bwd[t, i] = log sum of suffix scores after (t, i); bwd[T-1] = 0.

    The forward step on ``B.T``: ``bmax`` holds the row maxima of B and
    ``F[j, i] = exp(B[i, j] - bmax[i])``, without a unary term.
    """
    T, V = Uf.shape
    bmax, e, acc, F = np.empty(V), np.empty(V), np.empty(V), np.empty((V, V))
    BT = B.T
    _scaled_exp(BT, bmax, F)
    bwd[T - 1, :] = 0.0
    for t in range(T - 2, -1, -1):
        for j in range(V):
            tmp[j] = Uf[t + 1, j] + bwd[t + 1, j]
        _lse_step(tmp, BT, bmax, F, e, acc, bwd[t], tmp, False)


@njit(cache=True, nogil=True)
def _marginals_core(Uf, B, fwd, bwd, log_z, unary, pairwise):
    """Unary marginals into ``unary`` (T, V); add summed pairwise marginals
    into ``pairwise`` (V, V). All zeros when log Z = -inf."""
    T, V = Uf.shape
    if log_z == _NEG_INF:
        unary[:, :] = 0.0
        return
    for t in range(T):
        for j in range(V):
            unary[t, j] = np.exp(fwd[t, j] + bwd[t, j] - log_z)
    bmax, a, g, E = np.empty(V), np.empty(V), np.empty(V), np.empty((V, V))
    big = np.empty(V, dtype=np.bool_)
    _scaled_exp(B, bmax, E)
    for t in range(1, T):
        # p(i, j) = exp(fwd[t-1, i] - m) * E[i, j] * g_j with
        # g_j = exp(m + bmax[j] + Uf[t, j] + bwd[t, j] - log Z); the first two
        # factors are <= 1; a huge g_j (cancellation) takes the exact path.
        m = _max_exp(fwd[t - 1], a)
        if m == _NEG_INF:  # cannot happen with a finite log Z; kept as a guard
            continue
        n_big = 0
        for j in range(V):
            c = Uf[t, j] + bwd[t, j]
            g[j] = 0.0
            big[j] = False
            if c != _NEG_INF and bmax[j] != _NEG_INF:
                g[j] = np.exp(m + bmax[j] + c - log_z)
                if not g[j] < 1e300:
                    g[j] = 0.0
                    big[j] = True
                    n_big += 1
        for i in range(V):
            if a[i] != 0.0:
                for j in range(V):
                    pairwise[i, j] += a[i] * E[i, j] * g[j]
        if n_big:
            for j in range(V):
                if big[j]:
                    c = Uf[t, j] + bwd[t, j]
                    for i in range(V):
                        if fwd[t - 1, i] != _NEG_INF:
                            pairwise[i, j] += np.exp(fwd[t - 1, i] + B[i, j] + c - log_z)


@njit(cache=True, nogil=True)
def _fb_core(Uf, B, fwd, bwd, tmp, unary, pairwise):
    """Forward-backward of one sequence: the lattices, its unary marginals
    and (overwritten) summed pairwise marginals; return log Z."""
    log_z = _forward_core(Uf, B, fwd)
    _backward_core(Uf, B, bwd, tmp)
    pairwise[:, :] = 0.0
    _marginals_core(Uf, B, fwd, bwd, log_z, unary, pairwise)
    return log_z


@njit(cache=True, nogil=True)
def _path_score(Uf, B, y):
    T = Uf.shape[0]
    score = Uf[0, y[0]]
    for t in range(1, T):
        score += B[y[t - 1], y[t]] + Uf[t, y[t]]
    return score


@njit(cache=True, nogil=True)
def _is_partial(y):
    """Whether the labels ``y`` hold an unknown one (a negative code)."""
    for t in range(y.shape[0]):
        if y[t] < 0:
            return True
    return False


@njit(cache=True, nogil=True)
def _constrain(Uf, y, out):
    """out = Uf with ``-inf`` at every label other than ``y[t]`` where the
    label is known (``y[t] >= 0``); rows of unknown labels unchanged."""
    T, V = Uf.shape
    for t in range(T):
        k = y[t]
        for j in range(V):
            out[t, j] = Uf[t, j] if (k < 0 or j == k) else _NEG_INF


@njit(cache=True, nogil=True)
def _constrained_log_z(Uf, B, y, fwd):
    """log of the summed scores of the paths that agree with the known
    labels of ``y`` (log Z of :func:`_constrain`'s potentials)."""
    Uc = np.empty(Uf.shape)
    _constrain(Uf, y, Uc)
    return _forward_core(Uc, B, fwd)


@njit(cache=True, nogil=True)
def _ll_grad_partial(Uf, B, y, fwd, bwd, tmp, gU, gB):
    """:func:`_ll_grad_core` for labels with unknown entries (negative codes):
    log p(known labels) = log Z_c - log Z, with Z_c the sum over the paths
    that agree with the known labels; gU and gB the constrained marginals
    minus the unconstrained ones (Tsuboi et al. 2008)."""
    T, V = Uf.shape
    log_z = _fb_core(Uf, B, fwd, bwd, tmp, gU, gB)
    Uc = np.empty((T, V))
    _constrain(Uf, y, Uc)
    unary_c, pair_c = np.empty((T, V)), np.empty((V, V))
    log_zc = _fb_core(Uc, B, fwd, bwd, tmp, unary_c, pair_c)
    for t in range(T):
        for j in range(V):
            gU[t, j] = unary_c[t, j] - gU[t, j]
    for i in range(V):
        for j in range(V):
            gB[i, j] = pair_c[i, j] - gB[i, j]
    if log_zc == _NEG_INF:
        return _NEG_INF
    return log_zc - log_z


@njit(cache=True, nogil=True)
def _ll_grad_core(Uf, B, y, fwd, bwd, tmp, gU, gB):
    """log p(y) of one sequence; writes gU = onehot(y) - unary marginals and
    gB = pair counts(y) - summed pairwise marginals. Labels with unknown
    entries (negative codes) take :func:`_ll_grad_partial`."""
    if _is_partial(y):
        return _ll_grad_partial(Uf, B, y, fwd, bwd, tmp, gU, gB)
    T, V = Uf.shape
    log_z = _fb_core(Uf, B, fwd, bwd, tmp, gU, gB)
    for t in range(T):
        for j in range(V):
            gU[t, j] = -gU[t, j]
        gU[t, y[t]] += 1.0
    for i in range(V):
        for j in range(V):
            gB[i, j] = -gB[i, j]
    for t in range(1, T):
        gB[y[t - 1], y[t]] += 1.0
    score = _path_score(Uf, B, y)
    if score == _NEG_INF:
        return _NEG_INF
    return score - log_z


@njit(cache=True, nogil=True)
def _viterbi_core(Uf, B, delta, back, path):
    """Best path into ``path``; return its score. Ties: lowest label index.
    If every path is forbidden (score ``-inf``) the path is all zeros."""
    T, V = Uf.shape
    for j in range(V):
        delta[0, j] = Uf[0, j]
    for t in range(1, T):
        for j in range(V):
            best = _NEG_INF
            arg = 0
            for i in range(V):
                v = delta[t - 1, i] + B[i, j]
                if v > best:
                    best = v
                    arg = i
            back[t, j] = arg
            delta[t, j] = Uf[t, j] + best
    last = 0
    for j in range(1, V):
        if delta[T - 1, j] > delta[T - 1, last]:
            last = j
    if delta[T - 1, last] == _NEG_INF:  # no allowed path: documented all zeros
        path[:] = 0
        return _NEG_INF
    path[T - 1] = last
    for t in range(T - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return delta[T - 1, last]


# ------------------------------------------------------------ batched kernels
@njit(cache=True, nogil=True)
def _load(U, B, start, end, s, Uf):
    """Fold sample s's start / end into Uf; return sample s's transitions
    (arrays with a leading axis of length 1 are shared by all samples)."""
    _fold(U[s], start[s if start.shape[0] > 1 else 0], end[s if end.shape[0] > 1 else 0], Uf)
    return B[s if B.shape[0] > 1 else 0]


@njit(cache=True, nogil=True)
def _scratch(T, V):
    """Buffers of the cores for sequences up to length T: Uf, fwd, bwd, tmp."""
    return np.empty((T, V)), np.empty((T, V)), np.empty((T, V)), np.empty(V)


@njit(cache=True, nogil=True)
def _viterbi_scratch(T, V):
    """Buffers of :func:`_viterbi_core` for sequences up to length T: Uf,
    delta, back."""
    return np.empty((T, V)), np.empty((T, V)), np.zeros((T, V), dtype=np.int64)


@njit(cache=True, nogil=True)
def _max_length(offsets):
    T_max = 0
    for n in range(offsets.shape[0] - 1):
        T_max = max(T_max, offsets[n + 1] - offsets[n])
    return T_max


@njit(cache=True, nogil=True)
def _forward_kernel(U, B, start, end, fwd):
    """Forward lattices per sample; return log Z."""
    S, T, V = U.shape
    out = np.empty(S)
    Uf = np.empty((T, V))
    for s in range(S):
        out[s] = _forward_core(Uf, _load(U, B, start, end, s, Uf), fwd[s])
    return out


@njit(cache=True, nogil=True)
def _backward_kernel(U, B, start, end, bwd):
    S, T, V = U.shape
    Uf = np.empty((T, V))
    tmp = np.empty(V)
    for s in range(S):
        _backward_core(Uf, _load(U, B, start, end, s, Uf), bwd[s], tmp)


@njit(cache=True, nogil=True)
def _fb_kernel(U, B, start, end, y, unary, pairwise):
    """Forward-backward per sample: log Z, unary and summed pairwise
    marginals when ``y`` is empty; otherwise log p(y) and its gradients
    (``onehot(y) -`` the unary marginals, pair counts ``-`` the pairwise)."""
    S, T, V = U.shape
    out = np.empty(S)
    Uf, fwd, bwd, tmp = _scratch(T, V)
    for s in range(S):
        Bs = _load(U, B, start, end, s, Uf)
        if y.shape[0] == 0:
            out[s] = _fb_core(Uf, Bs, fwd, bwd, tmp, unary[s], pairwise[s])
        else:
            out[s] = _ll_grad_core(Uf, Bs, y, fwd, bwd, tmp, unary[s], pairwise[s])
    return out


@njit(cache=True, nogil=True)
def _viterbi_kernel(U, B, start, end, paths):
    S, T, V = U.shape
    scores = np.empty(S)
    Uf, delta, back = _viterbi_scratch(T, V)
    for s in range(S):
        scores[s] = _viterbi_core(Uf, _load(U, B, start, end, s, Uf), delta, back, paths[s])
    return scores


# ------------------------------------------------------------- ragged kernels
@njit(cache=True, nogil=True)
def _fb_ragged_kernel(U, offsets, B, start, end, y, unary, pairwise):
    """:func:`_fb_kernel` for sequences stacked in U (n_tokens, V), sequence
    n in rows offsets[n]:offsets[n+1], with ``unary`` and ``y`` stacked alike;
    B of shape (1, V, V) or (n_sequences, V, V). ``pairwise`` is per sequence
    (n_sequences, V, V), or (1, V, V) summed over the sequences."""
    N = offsets.shape[0] - 1
    V = U.shape[1]
    out = np.empty(N)
    Uf, fwd, bwd, tmp = _scratch(_max_length(offsets), V)
    pw = np.empty((V, V))
    pairwise[:, :, :] = 0.0
    for n in range(N):
        a, b = offsets[n], offsets[n + 1]
        T = b - a
        Bn = B[n if B.shape[0] > 1 else 0]
        _fold(U[a:b], start, end, Uf[:T])
        if y.shape[0] == 0:
            out[n] = _fb_core(Uf[:T], Bn, fwd[:T], bwd[:T], tmp, unary[a:b], pw)
        else:
            out[n] = _ll_grad_core(Uf[:T], Bn, y[a:b], fwd[:T], bwd[:T], tmp, unary[a:b], pw)
        pairwise[n if pairwise.shape[0] > 1 else 0] += pw
    return out


@njit(cache=True, nogil=True)
def _viterbi_ragged_kernel(U, offsets, B, start, end, paths):
    """Viterbi for sequences stacked in U; paths stacked like U's rows;
    B of shape (1, V, V) or (n_sequences, V, V)."""
    N = offsets.shape[0] - 1
    V = U.shape[1]
    shared = B.shape[0] == 1
    scores = np.empty(N)
    Uf, delta, back = _viterbi_scratch(_max_length(offsets), V)
    for n in range(N):
        a, b = offsets[n], offsets[n + 1]
        T = b - a
        _fold(U[a:b], start, end, Uf[:T])
        scores[n] = _viterbi_core(Uf[:T], B[0 if shared else n], delta[:T], back[:T],
                                  paths[a:b])
    return scores
