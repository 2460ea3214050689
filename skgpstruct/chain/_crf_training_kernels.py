"""Fused numba kernels of the exact linear-chain CRF's training pass over
CSR features: the unary potentials, the chain's loss and gradients, and the
weights' gradient, with no scipy product and no full-size copy per
evaluation (:class:`skgpstruct._tagging.exact_objective.ExactCRFObjective`
calls them; the numpy references are in ``tests/test_crf_training_kernels.py``).

- :func:`csr_unary`: ``U[t] = b + sum_k X[t, k] W[k]`` for a range of
  tokens, in the order of the CSR row, ``-inf`` where a per-token
  ``allowed`` mask forbids a label (empty mask: all labels allowed).
- :func:`chunks_loss_grad`: for a range of fixed chunks of sequences, the
  unaries of each chunk, then the forward-backward of
  :func:`skgpstruct.chain._linear_space_kernels._ll_grad_ragged_blas` on
  them: the chunk's negative log-likelihood, its gradient in the unaries
  (``onehot(y) - marginals``, so *minus* the loss's), its summed pairwise
  gradient and its bias gradient, each chunk into rows of its own.
- :func:`scatter_weights`: for a range of features, the loss's gradient in
  their weight rows, ``2 c2 W[f] - sum_t X[t, f] gU[t]``, summed over the
  tokens in increasing order (a scan of the CSR of ``X`` that reads ``gU``
  in order: gathering its rows by the CSR of ``X.T`` instead waits on
  memory, 3-4x slower at 200,000 tokens).

Every output element is written by one call, in an order fixed by the data
alone, so splitting the chunks or the features among threads (``nogil``)
gives the same bits whatever their number.
"""

import numpy as np
from numba import njit

from ._exact_kernels import _NEG_INF
from ._linear_space_kernels import _BLAS_MIN_LABELS, _fb_ragged_kernel, _ll_grad_ragged_blas


@njit(cache=True, nogil=True)
def csr_unary(indptr, indices, values, W, b, allowed, t0, t1, U):
    """``U[t - t0] = b + X[t] @ W`` for the tokens ``t0 <= t < t1`` of the CSR
    ``(indptr, indices, values)``; ``-inf`` where ``allowed[t]`` is False
    (``allowed`` of shape (0, V): no mask)."""
    V = W.shape[1]
    masked = allowed.shape[0] > 0
    for t in range(t0, t1):
        r = t - t0
        for j in range(V):
            U[r, j] = b[j]
        for k in range(indptr[t], indptr[t + 1]):
            v = values[k]
            f = indices[k]
            for j in range(V):
                U[r, j] += v * W[f, j]
        if masked:
            for j in range(V):
                if not allowed[t, j]:
                    U[r, j] = _NEG_INF


@njit(cache=True, nogil=True)
def chunks_loss_grad(indptr, indices, values, W, b, allowed, offsets, y, B3, bounds,
                     c0, c1, gU, gB, gb, losses, fell):
    """The chunks ``c0 <= c < c1`` (sequences ``bounds[c]`` to
    ``bounds[c + 1]``): ``losses[c]`` (negative log-likelihood), ``gU`` rows of
    their tokens (log-likelihood gradient in the unaries), ``gB[c]``
    (log-likelihood gradient in the transitions ``B3[0]``), ``gb[c]`` (the
    loss's gradient in the bias) and ``fell`` of their sequences (1: the
    log-space fallback ran)."""
    V = W.shape[1]
    zeros = np.zeros(V)
    for c in range(c0, c1):
        s0, s1 = bounds[c], bounds[c + 1]
        a, e = offsets[s0], offsets[s1]
        U = np.empty((e - a, V))
        csr_unary(indptr, indices, values, W, b, allowed, a, e, U)
        local = offsets[s0:s1 + 1] - a
        if V >= _BLAS_MIN_LABELS:
            vals = _ll_grad_ragged_blas(U, local, B3, zeros, zeros, y[a:e], gU[a:e],
                                        gB[c:c + 1], fell[s0:s1])
        else:
            vals = _fb_ragged_kernel(U, local, B3, zeros, zeros, y[a:e], gU[a:e],
                                     gB[c:c + 1], fell[s0:s1])
        total = 0.0
        for n in range(s1 - s0):
            total -= vals[n]
        losses[c] = total
        for j in range(V):
            gb[c, j] = 0.0
        for t in range(a, e):
            for j in range(V):
                gb[c, j] -= gU[t, j]


@njit(cache=True, nogil=True)
def scatter_weights(indptr, indices, values, gU, W, two_c2, f0, f1, out):
    """``out[f] = two_c2 W[f] - sum_t X[t, f] gU[t]`` for the features
    ``f0 <= f < f1``, the tokens ``t`` in increasing order: a scan of the CSR
    rows of ``X`` that skips the other features (each thread of a split
    reads all of ``X`` and ``gU`` in order, and writes its own rows)."""
    V = gU.shape[1]
    for f in range(f0, f1):
        for j in range(V):
            out[f, j] = 0.0
    for t in range(indptr.shape[0] - 1):
        for k in range(indptr[t], indptr[t + 1]):
            f = indices[k]
            if f < f0 or f >= f1:
                continue
            v = values[k]
            for j in range(V):
                out[f, j] -= v * gU[t, j]
    for f in range(f0, f1):
        for j in range(V):
            out[f, j] += two_c2 * W[f, j]
