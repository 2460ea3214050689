"""The randomized training pass on the GPU (numba.cuda; imported on demand).

:func:`rdp_loss_grad_ragged` is the device side of
:meth:`skgpstruct.chain.backend.CUDABackend.randomized_loss_grad_ragged`:
given the arguments :func:`skgpstruct.chain.randomized._pass.prepare`
builds, it runs :func:`rdp_select` and :func:`rdp_fb` of
:mod:`skgpstruct.chain._cuda_kernels` and gives the losses and gradients of
the CPU kernel :func:`skgpstruct.chain.randomized._batch_kernels.rdp_loss_grad_ragged` to
rounding (a uniform falling within rounding of a boundary of the proposal's
cumulative sum may pick the neighbouring state).
"""

import math

import numpy as np

from .. import _cuda_device as _dev
from . import _pass
from ._cuda_kernels import rdp_kernels

__all__ = ["loss_grad_ragged", "rdp_loss_grad_ragged"]


def loss_grad_ragged(U, lengths, chains, transitions, n_top, n_sampled, *, proposal, seeds):
    """:func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged` on the
    GPU (float32 ``U`` computes in float32); ``chains`` holds the batch's
    lengths and labels on the device (a :class:`~skgpstruct.chain.cuda.DeviceChains`)."""
    d_U, _, n_tokens, N = _dev._check_U(U)
    p = _pass.prepare((n_tokens, N), lengths, transitions, n_top, n_sampled, proposal, seeds)
    out = rdp_loss_grad_ragged(d_U, chains, None, p.B, p.left, p.right, p.lowrank, p.code,
                               p.q_global, p.k1, p.uniforms)
    return _pass.finish(p.lowrank, *out)


def rdp_loss_grad_ragged(U, lengths, y, B, left, right, lowrank, code, q_global, k1,
                         uniforms, *, to_host=True):
    """Randomized negative log-likelihood of stacked sequences + gradient.

    Parameters
    ----------
    U : array-like or device array of shape (n_tokens, N)
        Unary potentials of all sequences stacked (float32 or float64).
    lengths : array-like of int of shape (n_sequences,) or DeviceChains
        Sequence lengths.
    y : array-like of int of shape (n_tokens,), device array or None
        Gold labels (forced onto the sub-lattice); None takes those of a
        :class:`~skgpstruct.chain.cuda.DeviceChains` ``lengths``.
    B : array-like of shape (N, N) or (0, 0)
        Dense transitions (unused, may be empty, when ``lowrank``).
    left, right : array-like of shape (N, r) or (0, 0)
        Low-rank transitions ``B = left @ right.T`` (used when ``lowrank``).
    lowrank : bool
    code : int
        Proposal kind, see :func:`skgpstruct.chain.randomized._batch_kernels.proposal_code`.
    q_global : array-like of shape (N,)
        The global proposal vector (unused for codes 0 and 1).
    k1 : int
        Deterministic states per position, gold included, in ``[1, N]``.
    uniforms : array-like or device array of shape (n_tokens, K2)
        Uniform draws of the sampled slots, stacked like ``U``.
    to_host : bool, default=True
        Return numpy arrays; False leaves them on the device.

    Returns
    -------
    loss : ndarray of shape (n_sequences,)
        ``log Z-hat_n - score_n(y_n)``; ``+inf`` (and no gradient) for a
        sequence whose sub-lattice carries no path.
    grad_U : ndarray of shape (n_tokens, N)
    grad_B : ndarray of shape (N, N), or (0, 0) when ``lowrank``
    grad_left, grad_right : ndarray of shape (N, r), or (0, 0) when dense
        Gradients of ``loss.sum()``.
    """
    d_U, dtype, n_tokens, N = _dev._check_U(U)
    chains = _dev._chains(lengths, n_tokens)
    d_y = chains.labels(y, N)
    code, k1 = int(code), int(k1)
    if code not in (0, 1, 2, 3):
        raise ValueError(f"code must be a proposal code in 0..3, got {code}.")
    if not 1 <= k1 <= N:
        raise ValueError(f"k1 must be in [1, {N}], got {k1}.")
    k = rdp_kernels(dtype)
    d_B, d_left, d_right, d_gB, d_gL, d_gR = _transitions(B, left, right, bool(lowrank), N,
                                                          dtype, k)
    d_gU = _dev._zeros((n_tokens, N), dtype, k)
    d_q = _dev._dummy(dtype, 1)
    if code >= 2:
        d_q = _dev._real_input(q_global, "q_global", dtype)
        if tuple(d_q.shape) != (N,):
            raise ValueError(f"q_global must have shape ({N},), got {tuple(d_q.shape)}.")
    d_unif, k2 = _uniforms(uniforms, n_tokens, dtype)
    K = k1 + k2
    Q = _dev._empty((n_tokens, N), dtype)
    idx = _dev._empty((n_tokens, K), np.int64)
    logw = _dev._empty((n_tokens, K), dtype)
    sc = dtype.type
    _dev._launch(k.rdp_select, *_dev._flat(n_tokens), 0, d_U, d_y, code, d_q,
                 sc(1.0 / N), sc(N), k1, k2, d_unif, sc(math.log(max(k2, 1))), Q, idx, logw)
    alpha = _dev._empty((n_tokens, K), dtype)
    beta = _dev._empty((n_tokens, K), dtype)
    loss = _dev._empty((chains.n_chains,), dtype)
    nt = _dev._threads(K)
    stage = (K + nt + K * K) * dtype.itemsize <= _dev._SMEM_BUDGET
    Eg = _dev._dummy(dtype) if stage else _dev._empty((chains.n_chains, K * K), dtype)
    shared = (K + nt + (K * K if stage else 0)) * dtype.itemsize
    _dev._launch(k.rdp_fb, chains.n_chains, nt, shared, d_U, chains.d_offsets, d_y, d_B,
                 d_left, d_right, bool(lowrank), idx, logw, alpha, beta, Eg, loss, d_gU, d_gB,
                 d_gL, d_gR, bool(stage))
    empty = np.zeros((0, 0), dtype)
    used = (True, True, not lowrank, bool(lowrank), bool(lowrank))
    return tuple(_dev._fetch(d, to_host) if u else empty
                 for d, u in zip((loss, d_gU, d_gB, d_gL, d_gR), used))


def _transitions(B, left, right, lowrank, N, dtype, k):
    """Device transitions and zeroed gradients: ``(B, left, right, gB, gL, gR)``
    (one-element dummies for the layout not in use)."""
    dummy = _dev._dummy(dtype)
    if lowrank:
        d_left = _dev._real_input(left, "left", dtype)
        d_right = _dev._real_input(right, "right", dtype)
        if len(d_left.shape) != 2 or d_left.shape[0] != N or d_right.shape != d_left.shape:
            raise ValueError(
                f"left and right must have the same shape (N, r) with N = {N}, got "
                f"{tuple(d_left.shape)} and {tuple(d_right.shape)}."
            )
        shape = tuple(d_left.shape)
        return (dummy, d_left, d_right, dummy, _dev._zeros(shape, dtype, k),
                _dev._zeros(shape, dtype, k))
    d_B = _dev._real_input(B, "B", dtype)
    if tuple(d_B.shape) != (N, N):
        raise ValueError(f"B must have shape ({N}, {N}), got {tuple(d_B.shape)}.")
    return d_B, dummy, dummy, _dev._zeros((N, N), dtype, k), dummy, dummy


def _uniforms(uniforms, n_tokens, dtype):
    """Device uniforms (checked in [0, 1) when on the host) and ``K2``."""
    if _dev._is_device(uniforms):
        d = _dev._device_view(uniforms, "uniforms")
        if d.dtype != dtype:
            raise TypeError(f"uniforms on the device must have the dtype of U ({dtype.name}).")
        shape = tuple(d.shape)
    else:
        h = np.ascontiguousarray(uniforms, dtype=dtype)
        shape = h.shape
    if len(shape) != 2 or shape[0] != n_tokens:
        raise ValueError(f"uniforms must have shape ({n_tokens}, K2), got {shape}.")
    k2 = shape[1]
    if not _dev._is_device(uniforms):
        if k2 and (np.any(h < 0) or np.any(h >= 1)):
            raise ValueError("uniforms must lie in [0, 1).")
        d = _dev._to_device(h) if k2 else _dev._dummy(dtype)
    return d, k2
