"""Numba kernels of randomized dynamic programming on a sub-lattice.

The public wrappers live in :mod:`skgpstruct.chain.randomized`; this module
holds only the jitted loops. They all work on a *sub-lattice*: at every
position ``t`` a fixed number ``K`` of slots, slot ``k`` standing for the state
``idx[t, k]`` and carrying a log-weight ``logw[t, k]`` (``0`` for a state
summed exactly, ``-log(K2 q~)`` for a sampled one, ``-inf`` for a slot that
must contribute nothing). The node score of slot ``(t, k)`` is
``U[t, idx[t, k]] + logw[t, k]`` and the edge score between ``(t - 1, k)`` and
``(t, l)`` is ``B[idx[t - 1, k], idx[t, l]]``.

Transitions come in two layouts, chosen by the ``lowrank`` flag so that each
kernel is compiled once:

* dense: ``B`` of shape (N, N); ``left`` and ``right`` are unused (pass
  empty (0, 0) arrays);
* low rank: ``B[i, j] = left[i] @ right[j]`` with ``left``, ``right`` of shape
  (N, r); ``B`` is unused (pass an empty (0, 0) array).

Edge scores are never stored for the whole chain: each step builds them in
blocks of ``chunk`` slots (``chunk x K`` floats), so memory is O(T K + chunk K)
whatever N, and ``K = N`` runs the exact forward algorithm of a low-rank chain
without an N x N matrix. All kernels are serial, ``nogil`` and cached; the
plain-numpy references they are tested against are in
``tests/chain/test_randomized.py``.
"""

import math

import numpy as np
from numba import njit

from .._exact_kernels import _NEG_INF as NEG_INF

# Slots per block when edge scores are built: memory O(_CHUNK * K) per step.
_CHUNK = 256

__all__ = [
    "sample_slots",
    "rdp_forward",
    "rdp_backward",
    "rdp_entropy",
    "rdp_gumbel",
    "rdp_log_partition_draws",
]



@njit(cache=True, nogil=True)
def _edge_block(B, left, right, lowrank, Lp, prev, cur, l0, l1, out):
    """``out[l - l0, k] = B[prev[k], cur[l]]`` for ``l`` in ``[l0, l1)``.

    ``Lp`` is ``left[prev]`` (gathered once per step) in the low-rank case.
    The backward pass's blocks ``out[k - k0, l] = B[prev[k], cur[l]]`` are
    this on the transposed chain: ``B.T``, ``right`` and ``left`` swapped,
    ``Lp = right[cur]``, ``prev`` and ``cur`` swapped.
    """
    n_prev = prev.shape[0]
    if lowrank:
        Rc = np.empty((l1 - l0, right.shape[1]))
        for l in range(l0, l1):
            Rc[l - l0] = right[cur[l]]
        out[: l1 - l0] = np.dot(Rc, Lp.T)
    else:
        for l in range(l0, l1):
            j = cur[l]
            for k in range(n_prev):
                out[l - l0, k] = B[prev[k], j]


@njit(cache=True, nogil=True)
def _gather_rows(E, rows):
    out = np.empty((rows.shape[0], E.shape[1]))
    for k in range(rows.shape[0]):
        out[k] = E[rows[k]]
    return out


@njit(cache=True, nogil=True)
def _left_rows(left, lowrank, rows):
    """``left[rows]`` for low-rank transitions, an empty array otherwise."""
    if lowrank:
        return _gather_rows(left, rows)
    return np.empty((0, 0))


@njit(cache=True, nogil=True)
def _lse(x):
    """log(sum(exp(x))), ``-inf`` when every entry is ``-inf``."""
    m = NEG_INF
    for v in x:
        if v > m:
            m = v
    if m == NEG_INF:
        return NEG_INF
    s = 0.0
    for v in x:
        s += math.exp(v - m)
    return m + math.log(s)


@njit(cache=True, nogil=True)
def sample_slots(det_idx, q_rest, cdf, last_pos, uniforms, log_k2, idx, logw):
    """Fill one draw of index sets from pre-drawn uniforms.

    Parameters
    ----------
    det_idx : int64 (T, K1)
        Deterministic states (first ``K1`` slots, log-weight 0).
    q_rest : float64 (T, N)
        Proposal restricted to the other states (zero on ``det_idx``), not
        renormalised.
    cdf : float64 (T, N)
        ``cumsum(q_rest, axis=1)``; ``cdf[t, -1]`` is the restricted mass.
    last_pos : int64 (T,)
        Largest state with ``q_rest[t] > 0`` (unused when the mass is 0).
    uniforms : float64 (T, K2)
        Uniform draws in [0, 1), one per sampled slot.
    log_k2 : float
        ``log(K2)``.
    idx, logw : int64 / float64 (T, K1 + K2)
        Output slots and log-weights.
    """
    T, K1 = det_idx.shape
    K2 = uniforms.shape[1]
    N = q_rest.shape[1]
    for t in range(T):
        for k in range(K1):
            idx[t, k] = det_idx[t, k]
            logw[t, k] = 0.0
        total = cdf[t, N - 1]
        for s in range(K2):
            if total <= 0.0:
                # Nothing left with positive proposal mass: the slot carries no
                # weight (the states outside the deterministic set have q = 0).
                idx[t, K1 + s] = det_idx[t, 0] if K1 > 0 else 0
                logw[t, K1 + s] = NEG_INF
                continue
            x = uniforms[t, s] * total
            j = np.searchsorted(cdf[t], x, side="right")
            if j > last_pos[t]:
                j = last_pos[t]
            idx[t, K1 + s] = j
            # weight 1 / (K2 * q~_j) with q~ = q_rest / total
            logw[t, K1 + s] = math.log(total) - log_k2 - math.log(q_rest[t, j])


@njit(cache=True, nogil=True)
def rdp_forward(U, idx, logw, B, left, right, lowrank, chunk):
    """Randomized forward (paper Alg. 1) on the sub-lattice, log space.

    Returns
    -------
    alpha : float64 (T, K)
        ``alpha[t, l]`` = log of the weighted sum over sub-lattice paths ending
        in slot ``(t, l)``, its own node score and log-weight included.
    log_z : float
        ``logsumexp(alpha[T - 1])``.
    """
    T, K = idx.shape
    alpha = np.empty((T, K))
    for k in range(K):
        alpha[0, k] = U[0, idx[0, k]] + logw[0, k]
    c = min(chunk, K)
    blk = np.empty((c, K))
    for t in range(1, T):
        prev, cur = idx[t - 1], idx[t]
        Lp = _left_rows(left, lowrank, prev)
        for l0 in range(0, K, c):
            l1 = min(K, l0 + c)
            _edge_block(B, left, right, lowrank, Lp, prev, cur, l0, l1, blk)
            for l in range(l0, l1):
                node = U[t, cur[l]] + logw[t, l]
                if node == NEG_INF:
                    alpha[t, l] = NEG_INF
                    continue
                m = NEG_INF
                for k in range(K):
                    v = alpha[t - 1, k] + blk[l - l0, k]
                    if v > m:
                        m = v
                if m == NEG_INF:
                    alpha[t, l] = NEG_INF
                    continue
                s = 0.0
                for k in range(K):
                    s += math.exp(alpha[t - 1, k] + blk[l - l0, k] - m)
                alpha[t, l] = node + m + math.log(s)
    return alpha, _lse(alpha[T - 1])


@njit(cache=True, nogil=True)
def rdp_backward_into(U, idx, logw, B, left, right, lowrank, alpha, log_z, chunk,
                      beta, grad_U, grad_B, grad_left, grad_right, node, pairwise,
                      want_pairwise):
    """Backward pass matching :func:`rdp_forward`, added into given arrays.

    Fills ``beta`` (T, K) (must start at 0), adds the slot marginals onto
    their states in ``grad_U`` (T, N) and the pairwise ones into ``grad_B``
    (N, N), or the embedding gradients into ``grad_left`` / ``grad_right``
    (N, r) for low-rank transitions; writes the slot marginals into ``node``
    when it has shape (T, K) (pass a (0, 0) array to skip) and the edge
    marginals into ``pairwise`` when ``want_pairwise``. The one backward loop
    of :func:`rdp_backward` and of the batched training pass.
    """
    T, K = idx.shape
    r = left.shape[1] if lowrank else 0
    c = min(chunk, K)
    blk = np.empty((c, K))
    xi = np.empty((c, K))
    cnode = np.empty(K)
    Rc = np.empty((0, 0))
    Lp = np.empty((0, 0))
    gR_sub = np.zeros((K, r))
    for t in range(T - 1, 0, -1):
        prev = idx[t - 1]
        cur = idx[t]
        for l in range(K):
            cnode[l] = U[t, cur[l]] + logw[t, l] + beta[t, l]
        if lowrank:
            Rc = _gather_rows(right, cur)
            Lp = _gather_rows(left, prev)
            gR_sub[:] = 0.0
        for k0 in range(0, K, c):
            k1 = min(K, k0 + c)
            _edge_block(B.T, right, left, lowrank, Rc, cur, prev, k0, k1, blk)
            for k in range(k0, k1):
                row = k - k0
                m = NEG_INF
                for l in range(K):
                    v = blk[row, l] + cnode[l]
                    if v > m:
                        m = v
                if m == NEG_INF:
                    beta[t - 1, k] = NEG_INF
                else:
                    s = 0.0
                    for l in range(K):
                        s += math.exp(blk[row, l] + cnode[l] - m)
                    beta[t - 1, k] = m + math.log(s)
                a = alpha[t - 1, k] - log_z
                for l in range(K):
                    if a == NEG_INF:
                        e = 0.0
                    else:
                        e = math.exp(a + blk[row, l] + cnode[l])
                    xi[row, l] = e
                    if not lowrank:
                        grad_B[prev[k], cur[l]] += e
                    if want_pairwise:
                        pairwise[t - 1, k, l] = e
            if lowrank:
                n = k1 - k0
                gL = np.dot(xi[:n], Rc)
                for k in range(k0, k1):
                    grad_left[prev[k]] += gL[k - k0]
                gR_sub += np.dot(xi[:n].T, Lp[k0:k1])
        if lowrank:
            for l in range(K):
                grad_right[cur[l]] += gR_sub[l]
    keep_node = node.shape[0] == T
    for t in range(T):
        for k in range(K):
            v = alpha[t, k] + beta[t, k] - log_z
            if v != NEG_INF:
                p = math.exp(v)
                if keep_node:
                    node[t, k] = p
                grad_U[t, idx[t, k]] += p


@njit(cache=True, nogil=True)
def rdp_backward(U, idx, logw, B, left, right, lowrank, alpha, log_z, chunk,
                 n_states, want_pairwise):
    """Backward pass matching :func:`rdp_forward`: marginals and gradients.

    Returns
    -------
    beta : float64 (T, K)
        Backward lattice (0 at the last position, node scores of later
        positions included, not the own one).
    node : float64 (T, K)
        Slot marginals ``exp(alpha + beta - log_z)``.
    grad_U : float64 (T, n_states)
        d log Z-hat / d U: slot marginals added onto their states.
    grad_B : float64 (N, N) or (0, 0)
        d log Z-hat / d B (dense transitions only): pairwise slot marginals
        added onto their state pairs.
    grad_left, grad_right : float64 (N, r) or (0, 0)
        d log Z-hat / d left and / d right (low-rank transitions only).
    pairwise : float64 (T - 1, K, K) or (0, 0, 0)
        ``pairwise[t - 1, k, l]`` = marginal of the edge between slots
        ``(t - 1, k)`` and ``(t, l)`` when ``want_pairwise``.
    """
    T, K = idx.shape
    beta = np.zeros((T, K))
    if lowrank:
        r = left.shape[1]
        grad_left = np.zeros((n_states, r))
        grad_right = np.zeros((n_states, r))
        grad_B = np.zeros((0, 0))
    else:
        grad_left = np.zeros((0, 0))
        grad_right = np.zeros((0, 0))
        grad_B = np.zeros((n_states, n_states))
    if want_pairwise:
        pairwise = np.zeros((max(T - 1, 0), K, K))
    else:
        pairwise = np.zeros((0, 0, 0))
    node = np.zeros((T, K))
    grad_U = np.zeros((T, n_states))
    rdp_backward_into(U, idx, logw, B, left, right, lowrank, alpha, log_z, chunk,
                      beta, grad_U, grad_B, grad_left, grad_right, node, pairwise,
                      want_pairwise)
    return beta, node, grad_U, grad_B, grad_left, grad_right, pairwise


@njit(cache=True, nogil=True)
def rdp_entropy(U, idx, logw, B, left, right, lowrank, alpha, log_z, chunk):
    """Randomized backward entropy (paper Alg. 3).

    The exact recursion ``H_t(l) = sum_k p(k | l) [H_{t-1}(k) - log p(k | l)]``
    over the state ``k`` at ``t - 1`` given ``l`` at ``t``, and the final
    ``H = sum_l p(l) [H_T(l) - log p(l)]``, with every sum over states replaced
    by the weighted sum over the slots. ``p(k | l)`` is estimated from the
    randomized forward variables without the slot's own weight
    (``p~ = p^ / w``); the weight multiplies the summand only.

    Returns
    -------
    entropy : float
    """
    T, K = idx.shape
    H_prev = np.zeros(K)
    H_cur = np.zeros(K)
    c = min(chunk, K)
    blk = np.empty((c, K))
    v = np.empty(K)
    for t in range(1, T):
        Lp = _left_rows(left, lowrank, idx[t - 1])
        for l0 in range(0, K, c):
            _edge_block(B, left, right, lowrank, Lp, idx[t - 1], idx[t], l0, min(K, l0 + c), blk)
            for l in range(l0, min(K, l0 + c)):
                for k in range(K):
                    v[k] = alpha[t - 1, k] + blk[l - l0, k]
                lse = _lse(v)
                h = 0.0
                if lse != NEG_INF:
                    for k in range(K):
                        lp_hat = v[k] - lse  # log of w_k p~(k | l)
                        if lp_hat != NEG_INF:
                            h += math.exp(lp_hat) * (H_prev[k] - (lp_hat - logw[t - 1, k]))
                H_cur[l] = h
        for l in range(K):
            H_prev[l] = H_cur[l]
    out = 0.0
    for l in range(K):
        lp_hat = alpha[T - 1, l] - log_z
        if lp_hat != NEG_INF:
            out += math.exp(lp_hat) * (H_prev[l] - (lp_hat - logw[T - 1, l]))
    return out


@njit(cache=True, nogil=True)
def _gumbel_pick(logits, g, tau, relaxed_row):
    """Gumbel-max pick and Gumbel-softmax relaxation of one categorical.

    ``argmax(logits + g)`` over the slots with finite logits, and
    ``softmax((logits + g) / tau)`` written into ``relaxed_row``.
    """
    K = logits.shape[0]
    best = -1
    best_v = NEG_INF
    for k in range(K):
        if logits[k] == NEG_INF:
            continue
        z = logits[k] + g[k]
        if best == -1 or z > best_v:
            best = k
            best_v = z
    m = best_v / tau
    for k in range(K):
        if logits[k] != NEG_INF and (logits[k] + g[k]) / tau > m:
            m = (logits[k] + g[k]) / tau
    s = 0.0
    for k in range(K):
        if logits[k] == NEG_INF:
            e = 0.0
        else:
            e = math.exp((logits[k] + g[k]) / tau - m)
        relaxed_row[k] = e
        s += e
    for k in range(K):
        relaxed_row[k] /= s
    return best


@njit(cache=True, nogil=True)
def rdp_gumbel(U, idx, logw, B, left, right, lowrank, alpha, log_z, gumbel, tau):
    """Randomized Gumbel backward sampling (paper Alg. 4).

    Forward-filtering backward-sampling on the weighted sub-lattice with the
    categorical draws made by Gumbel-max (hard) and Gumbel-softmax at
    temperature ``tau`` (relaxed); the backward step conditions on the hard
    sample. ``gumbel`` (T, K) holds one standard Gumbel draw per slot.

    Returns
    -------
    slots : int64 (T,)
        Sampled slot per position (the state is ``idx[t, slots[t]]``).
    relaxed : float64 (T, K)
        Relaxed one-hot vectors over the slots.
    log_prob : float
        Log-probability of the hard slot path under the sub-lattice
        distribution.
    """
    T, K = idx.shape
    slots = np.empty(T, dtype=np.int64)
    relaxed = np.empty((T, K))
    logits = np.empty(K)
    for k in range(K):
        logits[k] = alpha[T - 1, k] - log_z
    s = _gumbel_pick(logits, gumbel[T - 1], tau, relaxed[T - 1])
    slots[T - 1] = s
    log_prob = logits[s]
    for t in range(T - 2, -1, -1):
        j = idx[t + 1, slots[t + 1]]
        for k in range(K):
            i = idx[t, k]
            if lowrank:
                b = 0.0
                for d in range(left.shape[1]):
                    b += left[i, d] * right[j, d]
            else:
                b = B[i, j]
            logits[k] = alpha[t, k] + b
        lse = _lse(logits)
        for k in range(K):
            logits[k] -= lse
        s = _gumbel_pick(logits, gumbel[t], tau, relaxed[t])
        slots[t] = s
        log_prob += logits[s]
    return slots, relaxed, log_prob


@njit(cache=True, nogil=True)
def rdp_log_partition_draws(U, det_idx, q_rest, cdf, last_pos, uniforms, log_k2,
                            B, left, right, lowrank, chunk):
    """Many independent randomized log-partition estimates in one call.

    ``uniforms`` has shape (n_draws, T, K2); draw ``d`` builds its index sets
    with :func:`sample_slots` from ``uniforms[d]`` and runs
    :func:`rdp_forward`, so it equals a single call fed the same uniforms.

    Returns
    -------
    log_z : float64 (n_draws,)
    """
    n_draws = uniforms.shape[0]
    T, K1 = det_idx.shape
    K = K1 + uniforms.shape[2]
    out = np.empty(n_draws)
    idx = np.empty((T, K), dtype=np.int64)
    logw = np.empty((T, K))
    for d in range(n_draws):
        sample_slots(det_idx, q_rest, cdf, last_pos, uniforms[d], log_k2, idx, logw)
        out[d] = rdp_forward(U, idx, logw, B, left, right, lowrank, chunk)[1]
    return out
