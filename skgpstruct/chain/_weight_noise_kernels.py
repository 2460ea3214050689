"""Numba kernels of :mod:`skgpstruct.chain.weight_noise`: the linear-chain
CRF's log-likelihood under Gaussian noise on its unary weights and
transitions, and its pathwise gradients, one sequence at a time.

A sequence ``n`` has tokens ``t0 <= t < t1`` (rows of a CSR matrix whose
column indices are *local*: positions in the sequence's own sorted list of
distinct features ``cols[c0:c1]``). Each of its ``S`` draws takes

* ``w[j, v] = mean[d, v] + sd[d, v] * e_w[j, v]`` for its distinct features
  ``d = cols[c0 + j]``, with ``mean = W[:, :V]`` and ``sd = exp(W[:, V:] /
  2)`` read from the parameter block ``W`` (n_features, 2V) (the weights of a feature shared by two tokens are
  one draw: the tokens' potentials are correlated as in the posterior),
* ``U[t, v] = scale * (sum_j x_tj w[j, v] + jitter_sd * e_t[t, v])``,
* ``B = m_bin + sd_bin * e_b``,

drawn in an equivalent form that takes fewer draws: the features that two
tokens of the sequence or more share (the first ``R_n = n_shared[n]`` of its
``cols``) get a draw of their weights each, ``w[j, v] = mu[j, v] + sd[j, v]
e_w[j, v]``; the sum of a token's other features' noise and its jitter is
one Gaussian per token and label, independent of every other draw, so

``U[t, v] = scale * (sum_j x_tj mu[j, v] + sum_{j < R_n} x_tj sd[j, v]
e_w[j, v] + q[t, v] e_t[t, v])``, ``q[t, v]^2 = jitter_sd^2 + sum_{j >= R_n}
x_tj^2 sd[j, v]^2``

has exactly the distribution of the potentials of a draw of every weight
(``(R_n + T) V`` normals instead of ``(D_n + T) V``: on CoNLL-2000's tutorial
features ``R_n`` is a few dozen, ``D_n`` a few hundred). The kernel then runs
the forward-backward of :mod:`skgpstruct.chain._linear_space_kernels`
(log space where that is unsafe) on ``(U, B)`` and the gold labels, and
backpropagates ``d log p / dU`` and ``d log p / dB`` to the means and to the
log variances of the draw (``d w / d log s = sd e_w / 2`` for a shared
feature, ``d q / d log s_j = x_tj^2 sd_j^2 / (2 q)`` for the others). The draws come
from numba's generator seeded per sequence (:func:`draw_noise`), so a
sequence's result depends on its own inputs and seed only, whatever thread
or batch computes it.
"""

import math

import numpy as np
from numba import njit

from ._linear_space_kernels import _fb_kernel


@njit(cache=True, nogil=True)
def draw_noise(seed, n_samples, n_shared, n_tokens, V):
    """The standard normal draws of one sequence: ``(e_w, e_t, e_b)`` of
    shapes (S, R_n, V), (S, T, V) and (S, V, V), drawn in that order per
    sample from numba's generator seeded by ``seed``."""
    np.random.seed(seed)
    e_w = np.empty((n_samples, n_shared, V))
    e_t = np.empty((n_samples, n_tokens, V))
    e_b = np.empty((n_samples, V, V))
    for k in range(n_samples):
        for j in range(n_shared):
            for v in range(V):
                e_w[k, j, v] = np.random.standard_normal()
        for t in range(n_tokens):
            for v in range(V):
                e_t[k, t, v] = np.random.standard_normal()
        for a in range(V):
            for b in range(V):
                e_b[k, a, b] = np.random.standard_normal()
    return e_w, e_t, e_b


@njit(cache=True, nogil=True)
def _local(c0, c1, cols, W, mu, sd):
    """The means and standard deviations of a sequence's distinct features
    (rows ``cols[c0:c1]`` of the block ``W``) into ``mu`` and ``sd``."""
    V = mu.shape[1]
    for j in range(c1 - c0):
        d = cols[c0 + j]
        for v in range(V):
            mu[j, v] = W[d, v]
            sd[j, v] = math.exp(0.5 * W[d, V + v])


@njit(cache=True, nogil=True)
def _token_sd(t0, indptr, loc, val, R, sd, jitter_sd, q):
    """``q[t, v]``: the standard deviation of token t's independent noise
    (its jitter and its features of one token)."""
    T, V = q.shape
    for t in range(T):
        for v in range(V):
            q[t, v] = jitter_sd * jitter_sd
        for p in range(indptr[t0 + t], indptr[t0 + t + 1]):
            j = loc[p]
            if j >= R:
                x2 = val[p] * val[p]
                for v in range(V):
                    q[t, v] += x2 * sd[j, v] * sd[j, v]
        for v in range(V):
            q[t, v] = math.sqrt(q[t, v])


@njit(cache=True, nogil=True)
def _potentials(t0, indptr, loc, val, mu, sd, q, m_bin, sd_bin, scale, e_w, e_t, e_b, U, B):
    """The potentials ``U`` (S, T, V) and ``B`` (S, V, V) of every draw
    (``mu``, ``sd``: the sequence's distinct features' of :func:`_local`;
    ``q``: :func:`_token_sd`)."""
    S, T, V = U.shape
    R = e_w.shape[1]
    for k in range(S):
        for t in range(T):
            for v in range(V):
                U[k, t, v] = q[t, v] * e_t[k, t, v]
            for p in range(indptr[t0 + t], indptr[t0 + t + 1]):
                j = loc[p]
                x = val[p]
                if j < R:
                    for v in range(V):
                        U[k, t, v] += x * (mu[j, v] + sd[j, v] * e_w[k, j, v])
                else:
                    for v in range(V):
                        U[k, t, v] += x * mu[j, v]
            for v in range(V):
                U[k, t, v] *= scale
        for a in range(V):
            for b in range(V):
                B[k, a, b] = m_bin[a, b] + sd_bin[a, b] * e_b[k, a, b]


@njit(cache=True, nogil=True)
def _backprop(t0, indptr, loc, val, sd, q, sd_bin, scale, e_w, e_t, e_b, U, gU, gB, g_cols,
              g_bin):
    """Gradients of the draws' mean log-likelihood w.r.t. the means and log
    variances of the sequence's distinct features (``g_cols`` (D_n, 2V):
    means then log variances) and of the transitions (``g_bin`` (2, V, V));
    returns its gradient w.r.t. ``log scale^2`` (``U`` is linear in
    ``scale``: ``0.5 sum gU * U``)."""
    S, T, V = U.shape
    R = e_w.shape[1]
    inv = 1.0 / S
    g_log = 0.0
    for k in range(S):
        for t in range(T):
            for v in range(V):
                g_log += gU[k, t, v] * U[k, t, v]
            for p in range(indptr[t0 + t], indptr[t0 + t + 1]):
                j = loc[p]
                x = scale * val[p] * inv
                if j < R:
                    for v in range(V):
                        g = x * gU[k, t, v]
                        g_cols[j, v] += g
                        g_cols[j, V + v] += 0.5 * sd[j, v] * e_w[k, j, v] * g
                else:
                    x2 = val[p] * x
                    for v in range(V):
                        g_cols[j, v] += x * gU[k, t, v]
                        # d q / d log s_j = x^2 s_j / (2 q)
                        g_cols[j, V + v] += (0.5 * x2 * sd[j, v] * sd[j, v] / q[t, v]
                                             * e_t[k, t, v] * gU[k, t, v])
        for a in range(V):
            for b in range(V):
                g = inv * gB[k, a, b]
                g_bin[0, a, b] += g
                g_bin[1, a, b] += 0.5 * sd_bin[a, b] * e_b[k, a, b] * g
    return 0.5 * inv * g_log


@njit(cache=True, nogil=True)
def batch_pass(seqs, seeds, tok_off, indptr, loc, val, col_off, n_shared, cols, y, W, m_bin,
               sd_bin, scale, jitter_sd, n_samples, out_off, g_cols, g_bin, values, g_log):
    """:func:`draw_noise`, the potentials, forward-backward and
    :func:`_backprop` of each sequence ``seqs[i]`` (seeded by ``seeds[i]``):
    its mean log-likelihood over the draws into ``values[i]``, the gradients
    of its distinct features into rows ``out_off[i]:out_off[i + 1]`` of
    ``g_cols`` (zeroed here), of the transitions into ``g_bin[i]`` and of
    ``log scale^2`` into ``g_log[i]``."""
    V = m_bin.shape[0]
    start = np.zeros((1, V))
    end = np.zeros((1, V))
    S = n_samples
    for i in range(seqs.shape[0]):
        n = seqs[i]
        t0, t1 = tok_off[n], tok_off[n + 1]
        c0, c1 = col_off[n], col_off[n + 1]
        T = t1 - t0
        e_w, e_t, e_b = draw_noise(seeds[i], S, n_shared[n], T, V)
        mu = np.empty((c1 - c0, V))
        sd = np.empty((c1 - c0, V))
        _local(c0, c1, cols, W, mu, sd)
        q = np.empty((T, V))
        _token_sd(t0, indptr, loc, val, n_shared[n], sd, jitter_sd, q)
        U = np.empty((S, T, V))
        B = np.empty((S, V, V))
        _potentials(t0, indptr, loc, val, mu, sd, q, m_bin, sd_bin, scale, e_w, e_t, e_b,
                    U, B)
        gU = np.empty((S, T, V))
        gB = np.empty((S, V, V))
        fell = np.empty(S, dtype=np.int8)
        ll = _fb_kernel(U, B, start, end, y[t0:t1], gU, gB, fell)
        total = 0.0
        for k in range(S):
            total += ll[k]
        values[i] = total / S
        rows = g_cols[out_off[i]:out_off[i + 1]]
        rows[:, :] = 0.0
        g_bin[i] = 0.0
        g_log[i] = _backprop(t0, indptr, loc, val, sd, q, sd_bin, scale, e_w, e_t, e_b, U,
                             gU, gB, rows, g_bin[i])


@njit(cache=True, nogil=True)
def scatter_rows(g_cols, positions, n_rows, out, counts):
    """``out[positions[r]] += g_cols[r]`` in row order (the same sums for
    any split of the work that produced ``g_cols``), and ``counts[q]`` the
    number of rows added into ``out[q]``; ``out`` and ``counts`` zeroed
    here (``n_rows`` of them used)."""
    W = g_cols.shape[1]
    for q in range(n_rows):
        counts[q] = 0
        for c in range(W):
            out[q, c] = 0.0
    for r in range(g_cols.shape[0]):
        q = positions[r]
        counts[q] += 1
        for c in range(W):
            out[q, c] += g_cols[r, c]
