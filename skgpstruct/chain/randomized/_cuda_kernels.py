"""numba.cuda kernels of the randomized training pass (imported lazily).

Built per floating type by :func:`rdp_kernels` on top of the exact kernels of
:func:`skgpstruct.chain._cuda_kernels.kernels` (which documents the layouts
and constants). :func:`rdp_select_kernel`
builds every token's sub-lattice slots as
:func:`skgpstruct.chain.randomized._batch_kernels.rdp_loss_grad_ragged` does, and
:func:`rdp_fb_kernel` runs the log-space forward-backward on each
sequence's sub-lattice and adds the gradient into the caller's arrays
(transition gradients with atomic additions, so on a GPU their last bits
may vary from run to run).
"""

import functools
import math
from types import SimpleNamespace

import numpy as np
from numba import cuda, from_dtype

from .._cuda_kernels import constants, kernels

__all__ = [
    "rdp_kernels",
    "rdp_select_parts",
    "rdp_select_kernel",
    "rdp_forward_steps",
    "rdp_backward_steps",
    "rdp_fb_kernel",
]


def rdp_select_parts(c, h):
    """Device functions of ``rdp_select``: proposal row, deterministic states."""
    NEG, ZERO, ONE, HALF, MARK, FLOOR = c.NEG, c.ZERO, c.ONE, c.HALF, c.MARK, c.FLOOR

    @cuda.jit(device=True)
    def proposal_row(U, r, code, q_global, q_uniform, n_float, Q):
        """Proposal of token r into ``Q[r]`` (``_rdp_batch._proposal_row``)."""
        N = U.shape[1]
        if code == 0 or code == 2:
            for j in range(N):
                Q[r, j] = q_uniform if code == 0 else q_global[j]
            return
        m = NEG
        for j in range(N):
            if U[r, j] > m:
                m = U[r, j]
        s = ZERO
        if m == NEG:  # every state at -inf: uniform
            for j in range(N):
                Q[r, j] = ONE
            s = n_float
        else:
            for j in range(N):
                e = math.exp(U[r, j] - m)
                if code == 1 and U[r, j] > NEG and e < FLOOR:
                    e = FLOOR  # as make_proposal's "local"
                Q[r, j] = e
                s += e
        for j in range(N):
            Q[r, j] = Q[r, j] / s
        if code == 3:
            for j in range(N):
                Q[r, j] = HALF * (Q[r, j] + q_global[j])

    @cuda.jit(device=True)
    def deterministic(r, gold, k1, Q, idx, logw):
        """Gold, then the ``k1 - 1`` states of largest proposal (ties to the
        lower state), marked in ``Q``; returns (rest mass, last state with mass)."""
        idx[r, 0] = gold
        logw[r, 0] = ZERO
        Q[r, gold] = MARK
        for i in range(1, k1):
            best = MARK
            arg = 0
            for j in range(Q.shape[1]):
                if Q[r, j] > best:
                    best = Q[r, j]
                    arg = j
            idx[r, i] = arg
            logw[r, i] = ZERO
            Q[r, arg] = MARK
        total = ZERO
        last = 0
        for j in range(Q.shape[1]):
            q = Q[r, j]
            if q < ZERO:
                q = ZERO
                Q[r, j] = ZERO
            total += q
            if q > ZERO:
                last = j
        return total, last

    return dict(proposal_row=proposal_row, deterministic=deterministic)


def rdp_select_kernel(c, h):
    """Sub-lattice slots of every token: the ``rdp_select`` kernel."""
    NEG, ZERO = c.NEG, c.ZERO
    proposal_row, deterministic = h["proposal_row"], h["deterministic"]

    @cuda.jit
    def rdp_select(U, y, code, q_global, q_uniform, n_float, k1, n_sampled, uniforms,
                   log_k2, Q, idx, logw):
        """Sub-lattice slots of every token (one thread per token).

        The proposal row, the deterministic states, and ``n_sampled`` states
        drawn from the rest with the given uniforms (``sample_slots``: the
        cumulative sum is accumulated in the same order, so the same uniform
        picks the same state). ``Q`` (n_tokens, N) is scratch.
        """
        r = cuda.grid(1)
        N = U.shape[1]
        if r < U.shape[0]:
            proposal_row(U, r, code, q_global, q_uniform, n_float, Q)
            gold = y[r]
            total, last = deterministic(r, gold, k1, Q, idx, logw)
            for s2 in range(n_sampled):
                slot = k1 + s2
                if total <= ZERO:
                    idx[r, slot] = gold
                    logw[r, slot] = NEG
                else:
                    x = uniforms[r, s2] * total
                    acc = ZERO
                    pick = N
                    for j in range(N):
                        acc += Q[r, j]
                        if acc > x:
                            pick = j
                            break
                    if pick > last:
                        pick = last
                    idx[r, slot] = pick
                    logw[r, slot] = math.log(total) - log_k2 - math.log(Q[r, pick])

    return dict(rdp_select=rdp_select)


def rdp_fb_kernel(c, h):
    """Forward-backward on the sub-lattices: the ``rdp_fb`` kernel."""
    nb, NEG, INF, ZERO, ONE = c.nb, c.NEG, c.INF, c.ZERO, c.ONE
    block_lse_row, rdp_alpha = h["block_lse_row"], h["rdp_alpha"]
    rdp_beta_edges, rdp_lowrank_grad = h["rdp_beta_edges"], h["rdp_lowrank_grad"]

    @cuda.jit(device=True)
    def gold_terms(U, a, T, y, Bd, left, right, lowrank, gB, gL, gR):
        """Score of the gold path; its pair counts subtracted from the
        transition gradients."""
        gold = ZERO
        for t in range(T):
            gold += U[a + t, y[a + t]]
        for t in range(1, T):
            i = y[a + t - 1]
            j = y[a + t]
            if lowrank:
                for d in range(left.shape[1]):
                    gold += left[i, d] * right[j, d]
                    cuda.atomic.add(gL, (i, d), -right[j, d])
                    cuda.atomic.add(gR, (j, d), -left[i, d])
            else:
                gold += Bd[i, j]
                cuda.atomic.add(gB, (i, j), -ONE)
        return gold

    @cuda.jit
    def rdp_fb(U, offsets, y, Bd, left, right, lowrank, idx, logw, alpha, beta, Eg,
               loss, gU, gB, gL, gR, stage):
        """Log-space forward-backward on each sequence's sub-lattice (one
        block per sequence, threads over the K slots); adds the gradient of
        ``log Z-hat - score(y)`` into ``gU`` and ``gB`` (or ``gL``, ``gR``).

        Edge scores of a step are built in ``Es`` (K * K: shared memory when
        ``stage``, else the sequence's row of ``Eg``). Shared memory: ``K`` +
        ``blockDim`` [+ ``K * K``].
        """
        n, tid, nt, K = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x, idx.shape[1]
        a = offsets[n]
        T = offsets[n + 1] - a
        sm = cuda.shared.array(0, dtype=nb)
        vec, red = sm[:K], sm[K : K + nt]
        Es = sm[K + nt : K + nt + K * K] if stage else Eg[n]
        rdp_alpha(U, a, T, Bd, left, right, lowrank, idx, logw, alpha, Es, vec)
        lz = block_lse_row(red, alpha, a + T - 1, K)
        if lz == NEG:  # no path on the sub-lattice: infinite loss, no gradient
            if tid == 0:
                loss[n] = INF
            return
        for l in range(tid, K, nt):
            beta[a + T - 1, l] = ZERO
        cuda.syncthreads()
        for t in range(T - 1, 0, -1):
            rdp_beta_edges(U, a, t, lz, Bd, left, right, lowrank, idx, logw, alpha, beta,
                           Es, vec, gB)
            if lowrank:
                cuda.syncthreads()
                rdp_lowrank_grad(a, t, left, right, idx, Es, gL, gR)
            cuda.syncthreads()
        for t in range(tid, T, nt):  # slot marginals onto their states, minus gold
            r = a + t
            for k in range(K):
                v = alpha[r, k] + beta[r, k] - lz
                if v != NEG:
                    gU[r, idx[r, k]] += math.exp(v)
            gU[r, y[r]] -= ONE
        if tid == 0:
            loss[n] = lz - gold_terms(U, a, T, y, Bd, left, right, lowrank, gB, gL, gR)

    return dict(rdp_fb=rdp_fb)


def rdp_forward_steps(c, h):
    """Device functions of ``rdp_fb``: edge scores and the forward recursion."""
    NEG, ZERO = c.NEG, c.ZERO
    edge = h["edge"]

    @cuda.jit(device=True)
    def build_edges(a, t, Bd, left, right, lowrank, idx, Es):
        """Edge scores of step t into ``Es[k * K + l]``."""
        tid, nt, K = cuda.threadIdx.x, cuda.blockDim.x, idx.shape[1]
        for kl in range(tid, K * K, nt):
            Es[kl] = edge(Bd, left, right, lowrank, idx[a + t - 1, kl // K],
                          idx[a + t, kl % K])

    @cuda.jit(device=True)
    def rdp_alpha(U, a, T, Bd, left, right, lowrank, idx, logw, alpha, Es, vec):
        """Log-space forward recursion on the sub-lattice."""
        tid, nt, K = cuda.threadIdx.x, cuda.blockDim.x, idx.shape[1]
        for l in range(tid, K, nt):
            alpha[a, l] = U[a, idx[a, l]] + logw[a, l]
        cuda.syncthreads()
        for t in range(1, T):
            build_edges(a, t, Bd, left, right, lowrank, idx, Es)
            for k in range(tid, K, nt):
                vec[k] = alpha[a + t - 1, k]
            cuda.syncthreads()
            for l in range(tid, K, nt):
                node = U[a + t, idx[a + t, l]] + logw[a + t, l]
                out = NEG
                if node != NEG:
                    m = NEG
                    for k in range(K):
                        v = vec[k] + Es[k * K + l]
                        if v > m:
                            m = v
                    if m != NEG:
                        s = ZERO
                        for k in range(K):
                            s += math.exp(vec[k] + Es[k * K + l] - m)
                        out = node + m + math.log(s)
                alpha[a + t, l] = out
            cuda.syncthreads()

    return dict(build_edges=build_edges, rdp_alpha=rdp_alpha)


def rdp_backward_steps(c, h):
    """Device functions of ``rdp_fb``: one backward step and its gradients."""
    NEG, ZERO, build_edges = c.NEG, c.ZERO, h["build_edges"]

    @cuda.jit(device=True)
    def rdp_beta_edges(U, a, t, lz, Bd, left, right, lowrank, idx, logw, alpha, beta, Es,
                       vec, gB):
        """beta at ``t - 1`` and the edge marginals of step t: added into
        ``gB`` (dense) or left in ``Es`` (low rank)."""
        tid, nt, K = cuda.threadIdx.x, cuda.blockDim.x, idx.shape[1]
        build_edges(a, t, Bd, left, right, lowrank, idx, Es)
        for l in range(tid, K, nt):
            vec[l] = U[a + t, idx[a + t, l]] + logw[a + t, l] + beta[a + t, l]
        cuda.syncthreads()
        for k in range(tid, K, nt):
            m = NEG
            for l in range(K):
                v = Es[k * K + l] + vec[l]
                if v > m:
                    m = v
            bt = NEG
            if m != NEG:
                s = ZERO
                for l in range(K):
                    s += math.exp(Es[k * K + l] + vec[l] - m)
                bt = m + math.log(s)
            beta[a + t - 1, k] = bt
            aa = alpha[a + t - 1, k] - lz
            row = idx[a + t - 1, k]
            for l in range(K):
                e = ZERO
                if aa != NEG:
                    e = math.exp(aa + Es[k * K + l] + vec[l])
                if lowrank:
                    Es[k * K + l] = e  # the edge marginal xi[k, l]
                elif e != ZERO:
                    cuda.atomic.add(gB, (row, idx[a + t, l]), e)

    @cuda.jit(device=True)
    def rdp_lowrank_grad(a, t, left, right, idx, Es, gL, gR):
        """Edge marginals of step t (in ``Es``) onto the embedding gradients."""
        tid, nt, K, R = cuda.threadIdx.x, cuda.blockDim.x, idx.shape[1], left.shape[1]
        for k in range(tid, K, nt):
            row = idx[a + t - 1, k]
            for d in range(R):
                acc = ZERO
                for l in range(K):
                    acc += Es[k * K + l] * right[idx[a + t, l], d]
                cuda.atomic.add(gL, (row, d), acc)
        for l in range(tid, K, nt):
            col = idx[a + t, l]
            for d in range(R):
                acc = ZERO
                for k in range(K):
                    acc += Es[k * K + l] * left[idx[a + t - 1, k], d]
                cuda.atomic.add(gR, (col, d), acc)

    return dict(rdp_beta_edges=rdp_beta_edges, rdp_lowrank_grad=rdp_lowrank_grad)


@functools.lru_cache(maxsize=None)
def rdp_kernels(dtype):
    """The CUDA kernels of the randomized pass for potentials of type ``dtype``.

    Parameters
    ----------
    dtype : {numpy.float32, numpy.float64}

    Returns
    -------
    namespace : types.SimpleNamespace
        The exact kernels and device functions of
        :func:`skgpstruct.chain._cuda_kernels.kernels` (the same objects, so
        nothing compiles twice) plus ``rdp_select``, ``rdp_fb`` and the
        device functions they call.
    """
    base = kernels(dtype)
    dtype = np.dtype(dtype)
    c = constants(dtype.type)
    c.nb = from_dtype(dtype)
    h = dict(vars(base))
    for helpers in (rdp_select_parts, rdp_forward_steps, rdp_backward_steps):
        h.update(helpers(c, h))
    out = dict(h)
    for family in (rdp_select_kernel, rdp_fb_kernel):
        out.update(family(c, h))
    return SimpleNamespace(**out)
