"""numba.cuda kernels of :mod:`skgpstruct.chain.cuda` (imported lazily).

The kernels are built per floating-point type by :func:`kernels` (float32 or
float64: every constant and accumulator has the type of the potentials, so a
float32 kernel does no double-precision arithmetic). Layouts follow the CPU
ragged kernels: unary potentials of all chains stacked in ``U`` of shape
``(n_tokens, V)``, chain ``n`` in rows ``offsets[n]:offsets[n + 1]``;
transitions ``B`` of shape ``(nB, V, V)`` with ``nB = 1`` (shared) or
``n_chains`` (one per chain), and ``start`` / ``end`` of shape ``(1 or
n_chains, V)`` added to the first / last position (folded into the unary
potentials, in the same order of additions as ``_exact_kernels._fold``).

Exact dynamic programmes use one thread block per chain and the threads of
the block over the labels. Each step of the forward (backward) recursion is
the scaled linear-space product of ``_exact_kernels._forward_core``
(``_backward_core``): ``exp(B - column max)`` (``exp(B - row max)``,
transposed) is computed once per transition matrix by :func:`prep_exp`, kept
in shared memory when it fits (``stage``), and an entry whose scaled sum falls
below ``TINY`` is recomputed by the exact two-pass log-sum-exp, so the
results agree with the CPU kernels to rounding. Lattices and other per-token
scratch live in global memory; the per-step label vector and the block
reductions in dynamic shared memory. Reductions assume a power-of-two block.

The randomized training pass (:func:`rdp_select` then :func:`rdp_fb`)
mirrors :func:`skgpstruct.chain._rdp_batch.rdp_loss_grad_ragged`: one thread
per token builds the proposal, the deterministic states and the sampled
slots from the same uniforms; then one block per sequence runs the
forward-backward on the sub-lattice in log space (the CPU's scaled pass with
its log-space fallback computes the same quantities) and adds the gradient
into the caller's arrays. Transition gradients of the randomized pass are
accumulated with atomic additions, so on a GPU their last bits may vary from
run to run; every other output is written by one thread in a fixed order.
"""

import functools
import math
from types import SimpleNamespace

import numpy as np
from numba import cuda, from_dtype

__all__ = ["kernels"]


@functools.lru_cache(maxsize=None)
def kernels(dtype):
    """The CUDA kernels for potentials of floating type ``dtype``.

    Parameters
    ----------
    dtype : {numpy.float32, numpy.float64}

    Returns
    -------
    namespace : types.SimpleNamespace
        The kernels (``prep_exp``, ``fb``, ``marginals``, ``sum_chains``,
        ``viterbi``, ``rdp_select``, ``rdp_fb``) and the device functions
        they call.
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"CUDA kernels exist for float32 and float64, not {dtype}.")
    return _build(from_dtype(dtype), dtype.type)


def _build(nb, sc):
    # Constants of the kernel's type (numba freezes closure values as typed
    # constants; a bare 0.0 literal would be float64).
    NEG = sc(-np.inf)
    INF = sc(np.inf)
    ZERO = sc(0.0)
    ONE = sc(1.0)
    HALF = sc(0.5)
    MARK = sc(-1.0)  # proposals are >= 0: marks selected states / big terms
    f64 = sc is np.float64
    # Scaled sums below TINY may have lost terms to underflow (see
    # _exact_kernels._TINY); exponents above LOG_HUGE would overflow.
    TINY = sc(1e-280 if f64 else 1e-30)
    LOG_HUGE = sc(math.log(1e300) if f64 else 80.0)

    # ------------------------------------------------------ device helpers
    @cuda.jit(device=True)
    def block_max(red, v):
        """Maximum of ``v`` over the block (every thread gets it)."""
        tid = cuda.threadIdx.x
        red[tid] = v
        cuda.syncthreads()
        s = cuda.blockDim.x // 2
        while s > 0:
            if tid < s and red[tid + s] > red[tid]:
                red[tid] = red[tid + s]
            cuda.syncthreads()
            s //= 2
        out = red[0]
        cuda.syncthreads()
        return out

    @cuda.jit(device=True)
    def block_sum(red, v):
        """Sum of ``v`` over the block (every thread gets it)."""
        tid = cuda.threadIdx.x
        red[tid] = v
        cuda.syncthreads()
        s = cuda.blockDim.x // 2
        while s > 0:
            if tid < s:
                red[tid] = red[tid] + red[tid + s]
            cuda.syncthreads()
            s //= 2
        out = red[0]
        cuda.syncthreads()
        return out

    @cuda.jit(device=True)
    def block_lse_row(red, arr, row, n):
        """``logsumexp(arr[row, :n])`` over the block (every thread gets it)."""
        tid, nt = cuda.threadIdx.x, cuda.blockDim.x
        p = NEG
        for j in range(tid, n, nt):
            if arr[row, j] > p:
                p = arr[row, j]
        m = block_max(red, p)
        lz = NEG
        if m != NEG:
            s = ZERO
            for j in range(tid, n, nt):
                s += math.exp(arr[row, j] - m)
            s = block_sum(red, s)
            lz = m + math.log(s)
        return lz

    @cuda.jit(device=True)
    def unary(U, start, end, a, T, t, j, si, ei):
        """U[a + t, j] with start / end folded in (as ``_fold``)."""
        v = U[a + t, j]
        if t == 0:
            v += start[si, j]
        if t == T - 1:
            v += end[ei, j]
        return v

    @cuda.jit(device=True)
    def lse_into(fwd, row, B, b, j, V):
        """log sum_i exp(fwd[row, i] + B[b, i, j]) (exact two-pass)."""
        m = NEG
        for i in range(V):
            v = fwd[row, i] + B[b, i, j]
            if v > m:
                m = v
        if m == NEG:
            return NEG
        s = ZERO
        for i in range(V):
            s += math.exp(fwd[row, i] + B[b, i, j] - m)
        return m + math.log(s)

    @cuda.jit(device=True)
    def lse_from(U, start, end, bwd, a, T, t, B, b, i, V, si, ei):
        """log sum_j exp(Uf[t + 1, j] + bwd[a + t + 1, j] + B[b, i, j])."""
        m = NEG
        for j in range(V):
            v = unary(U, start, end, a, T, t + 1, j, si, ei) + bwd[a + t + 1, j] + B[b, i, j]
            if v > m:
                m = v
        if m == NEG:
            return NEG
        s = ZERO
        for j in range(V):
            v = unary(U, start, end, a, T, t + 1, j, si, ei) + bwd[a + t + 1, j] + B[b, i, j]
            s += math.exp(v - m)
        return m + math.log(s)

    @cuda.jit(device=True)
    def chain_rows(n, offsets, B, start, end):
        """Chain n's first row and length, and its rows of ``B``, ``start``
        and ``end`` (row 0 when one is shared by all chains)."""
        a = offsets[n]
        return (a, offsets[n + 1] - a, n if B.shape[0] > 1 else 0,
                n if start.shape[0] > 1 else 0, n if end.shape[0] > 1 else 0)

    @cuda.jit(device=True)
    def edge(Bd, left, right, lowrank, i, j):
        """Transition score B[i, j], dense or ``left[i] @ right[j]``."""
        if lowrank:
            s = ZERO
            for d in range(left.shape[1]):
                s += left[i, d] * right[j, d]
            return s
        return Bd[i, j]

    # ------------------------------------------------------------ kernels
    @cuda.jit
    def prep_exp(B, E, bmax, F, rmax):
        """Per transition matrix b and label j (one thread each):
        ``bmax[b, j]`` = column max, ``E[b, i * V + j] = exp(B[b, i, j] -
        bmax[b, j])``; ``rmax[b, j]`` = row max, ``F[b, k * V + j] =
        exp(B[b, j, k] - rmax[b, j])`` (``_scaled_exp`` of B and of B.T)."""
        g = cuda.grid(1)
        nB = B.shape[0]
        V = B.shape[1]
        if g < nB * V:
            b = g // V
            j = g % V
            m = NEG
            for i in range(V):
                if B[b, i, j] > m:
                    m = B[b, i, j]
            bmax[b, j] = m
            for i in range(V):
                E[b, i * V + j] = ZERO if m == NEG else math.exp(B[b, i, j] - m)
            m = NEG
            for k in range(V):
                if B[b, j, k] > m:
                    m = B[b, j, k]
            rmax[b, j] = m
            for k in range(V):
                F[b, k * V + j] = ZERO if m == NEG else math.exp(B[b, j, k] - m)

    @cuda.jit
    def fb(U, offsets, B, E, bmax, F, rmax, start, end, fwd, bwd, logz, do_bwd, stage):
        """Forward (and backward) lattices and log Z, one block per chain.

        Shared memory: ``V`` (label vector) + ``blockDim`` (reductions)
        [+ ``V * V`` when ``stage``: E, then F, copied from global memory].
        """
        n = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        V = U.shape[1]
        a, T, b, si, ei = chain_rows(n, offsets, B, start, end)
        sm = cuda.shared.array(0, dtype=nb)
        vec = sm[:V]
        red = sm[V : V + nt]
        Es = sm[V + nt : V + nt + V * V]
        if stage:
            for k in range(tid, V * V, nt):
                Es[k] = E[b, k]
        M = Es if stage else E[b]
        for j in range(tid, V, nt):
            fwd[a, j] = unary(U, start, end, a, T, 0, j, si, ei)
        cuda.syncthreads()
        for t in range(1, T):
            p = NEG
            for i in range(tid, V, nt):
                if fwd[a + t - 1, i] > p:
                    p = fwd[a + t - 1, i]
            m = block_max(red, p)
            if m == NEG:
                for j in range(tid, V, nt):
                    fwd[a + t, j] = NEG
            else:
                for i in range(tid, V, nt):
                    vec[i] = math.exp(fwd[a + t - 1, i] - m)
                cuda.syncthreads()
                for j in range(tid, V, nt):
                    acc = ZERO
                    for i in range(V):
                        acc += vec[i] * M[i * V + j]
                    u = unary(U, start, end, a, T, t, j, si, ei)
                    bm = bmax[b, j]
                    if u == NEG or bm == NEG:
                        out = NEG
                    elif acc > TINY:
                        out = u + m + bm + math.log(acc)
                    else:
                        out = u + lse_into(fwd, a + t - 1, B, b, j, V)
                    fwd[a + t, j] = out
            cuda.syncthreads()
        # log Z = logsumexp of the last row
        lz = block_lse_row(red, fwd, a + T - 1, V)
        if tid == 0:
            logz[n] = lz
        if do_bwd:
            if stage:
                for k in range(tid, V * V, nt):
                    Es[k] = F[b, k]
            MF = Es if stage else F[b]
            for j in range(tid, V, nt):
                bwd[a + T - 1, j] = ZERO
            cuda.syncthreads()
            for t in range(T - 2, -1, -1):
                p = NEG
                for j in range(tid, V, nt):
                    x = unary(U, start, end, a, T, t + 1, j, si, ei) + bwd[a + t + 1, j]
                    if x > p:
                        p = x
                m = block_max(red, p)
                if m == NEG:
                    for i in range(tid, V, nt):
                        bwd[a + t, i] = NEG
                else:
                    for j in range(tid, V, nt):
                        x = unary(U, start, end, a, T, t + 1, j, si, ei) + bwd[a + t + 1, j]
                        vec[j] = math.exp(x - m)
                    cuda.syncthreads()
                    for i in range(tid, V, nt):
                        acc = ZERO
                        for j in range(V):
                            acc += vec[j] * MF[j * V + i]
                        rm = rmax[b, i]
                        if rm == NEG:
                            out = NEG
                        elif acc > TINY:
                            out = rm + m + math.log(acc)
                        else:
                            out = lse_from(U, start, end, bwd, a, T, t, B, b, i, V, si, ei)
                        bwd[a + t, i] = out
                cuda.syncthreads()

    @cuda.jit
    def marginals(U, offsets, B, E, bmax, start, end, fwd, bwd, logz, A, G, y,
                  out_unary, pair, values, want_grad):
        """Unary and summed pairwise marginals (or the log-likelihood
        gradients when ``want_grad``), one block per chain.

        ``pair[n, i * V + j]`` is chain n's ``sum_t p(y_{t-1} = i, y_t = j)``
        (``pair counts of y - that`` when ``want_grad``), computed as
        ``E[i, j] * sum_t A[t - 1, i] G[t, j]`` with ``A = exp(fwd - m_t)``
        and ``G = exp(m_t + bmax + Uf + bwd - log Z)`` stored in the scratch
        arrays ``A``, ``G``; where G would overflow it is marked and the term
        is computed exactly, as in ``_marginals_core``. Shared memory:
        ``blockDim`` (reductions).
        """
        n = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        V = U.shape[1]
        a, T, b, si, ei = chain_rows(n, offsets, B, start, end)
        sm = cuda.shared.array(0, dtype=nb)
        red = sm[:nt]
        lz = logz[n]
        if lz == NEG:  # every path forbidden: marginals 0
            for k in range(tid, T * V, nt):
                t = k // V
                j = k % V
                if want_grad:
                    g = -ZERO
                    if y[a + t] == j:
                        g += ONE
                    out_unary[a + t, j] = g
                else:
                    out_unary[a + t, j] = ZERO
            for k in range(tid, V * V, nt):
                pair[n, k] = -ZERO if want_grad else ZERO
        else:
            for k in range(tid, T * V, nt):
                t = k // V
                j = k % V
                u = math.exp(fwd[a + t, j] + bwd[a + t, j] - lz)
                if want_grad:
                    g = -u
                    if y[a + t] == j:
                        g += ONE
                    out_unary[a + t, j] = g
                else:
                    out_unary[a + t, j] = u
            for t in range(1, T):
                p = NEG
                for i in range(tid, V, nt):
                    if fwd[a + t - 1, i] > p:
                        p = fwd[a + t - 1, i]
                m = block_max(red, p)
                for i in range(tid, V, nt):
                    A[a + t - 1, i] = ZERO if m == NEG else math.exp(fwd[a + t - 1, i] - m)
                for j in range(tid, V, nt):
                    c = unary(U, start, end, a, T, t, j, si, ei) + bwd[a + t, j]
                    bm = bmax[b, j]
                    g = ZERO
                    if m != NEG and c != NEG and bm != NEG:
                        h = m + bm + c - lz
                        g = math.exp(h) if h < LOG_HUGE else MARK
                    G[a + t, j] = g
            cuda.syncthreads()
            for k in range(tid, V * V, nt):
                i = k // V
                j = k % V
                acc = ZERO
                acc2 = ZERO
                for t in range(1, T):
                    g = G[a + t, j]
                    if g >= ZERO:
                        acc += A[a + t - 1, i] * g
                    elif fwd[a + t - 1, i] != NEG:
                        c = unary(U, start, end, a, T, t, j, si, ei) + bwd[a + t, j]
                        acc2 += math.exp(fwd[a + t - 1, i] + B[b, i, j] + c - lz)
                pv = E[b, k] * acc + acc2
                pair[n, k] = -pv if want_grad else pv
        if want_grad:
            cuda.syncthreads()
            if tid == 0:
                for t in range(1, T):
                    k = y[a + t - 1] * V + y[a + t]
                    pair[n, k] = pair[n, k] + ONE
                score = unary(U, start, end, a, T, 0, y[a], si, ei)
                for t in range(1, T):
                    score += B[b, y[a + t - 1], y[a + t]] + unary(U, start, end, a, T, t,
                                                                  y[a + t], si, ei)
                values[n] = NEG if score == NEG else score - lz

    @cuda.jit
    def sum_chains(P, out):
        """out[k] = sum_n P[n, k], in the order of n (one thread per k)."""
        k = cuda.grid(1)
        if k < out.shape[0]:
            acc = ZERO
            for n in range(P.shape[0]):
                acc += P[n, k]
            out[k] = acc

    @cuda.jit
    def viterbi(U, offsets, B, start, end, delta, back, paths, scores, stage):
        """Best paths, one block per chain; ``B`` flat (nB, V * V).

        Ties go to the lowest label index, as ``_viterbi_core``. Shared
        memory: ``V`` (previous row) [+ ``V * V``: B, when ``stage``].
        """
        n = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        V = U.shape[1]
        a, T, b, si, ei = chain_rows(n, offsets, B, start, end)
        sm = cuda.shared.array(0, dtype=nb)
        vec = sm[:V]
        Bs = sm[V : V + V * V]
        if stage:
            for k in range(tid, V * V, nt):
                Bs[k] = B[b, k]
        M = Bs if stage else B[b]
        for j in range(tid, V, nt):
            delta[a, j] = unary(U, start, end, a, T, 0, j, si, ei)
        cuda.syncthreads()
        for t in range(1, T):
            for i in range(tid, V, nt):
                vec[i] = delta[a + t - 1, i]
            cuda.syncthreads()
            for j in range(tid, V, nt):
                best = NEG
                arg = 0
                for i in range(V):
                    v = vec[i] + M[i * V + j]
                    if v > best:
                        best = v
                        arg = i
                back[a + t, j] = arg
                delta[a + t, j] = unary(U, start, end, a, T, t, j, si, ei) + best
            cuda.syncthreads()
        if tid == 0:
            last = 0
            for j in range(1, V):
                if delta[a + T - 1, j] > delta[a + T - 1, last]:
                    last = j
            paths[a + T - 1] = last
            for t in range(T - 1, 0, -1):
                paths[a + t - 1] = back[a + t, paths[a + t]]
            scores[n] = delta[a + T - 1, last]

    @cuda.jit
    def rdp_select(U, y, code, q_global, q_uniform, n_float, k1, n_sampled, uniforms,
                   log_k2, Q, idx, logw):
        """Sub-lattice slots of every token (one thread per token).

        The proposal row (``_rdp_batch._proposal_row``), the gold label then
        the ``k1 - 1`` states of largest proposal, ties to the lower state
        (``_deterministic_states``), and ``n_sampled`` states drawn from the
        rest with the given uniforms (``sample_slots``: the cumulative sum is
        accumulated in the same order, so the same uniform picks the same
        state). ``Q`` (n_tokens, N) is scratch.
        """
        r = cuda.grid(1)
        N = U.shape[1]
        if r < U.shape[0]:
            if code == 0:
                for j in range(N):
                    Q[r, j] = q_uniform
            elif code == 2:
                for j in range(N):
                    Q[r, j] = q_global[j]
            else:
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
                        Q[r, j] = e
                        s += e
                for j in range(N):
                    Q[r, j] = Q[r, j] / s
                if code == 3:
                    for j in range(N):
                        Q[r, j] = HALF * (Q[r, j] + q_global[j])
            gold = y[r]
            idx[r, 0] = gold
            logw[r, 0] = ZERO
            Q[r, gold] = MARK
            for i in range(1, k1):
                best = MARK
                arg = 0
                for j in range(N):
                    if Q[r, j] > best:
                        best = Q[r, j]
                        arg = j
                idx[r, i] = arg
                logw[r, i] = ZERO
                Q[r, arg] = MARK
            total = ZERO
            last = 0
            for j in range(N):
                q = Q[r, j]
                if q < ZERO:
                    q = ZERO
                    Q[r, j] = ZERO
                total += q
                if q > ZERO:
                    last = j
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
        n = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        K = idx.shape[1]
        a = offsets[n]
        T = offsets[n + 1] - a
        sm = cuda.shared.array(0, dtype=nb)
        vec = sm[:K]
        red = sm[K : K + nt]
        Ess = sm[K + nt : K + nt + K * K]
        Es = Ess if stage else Eg[n]
        for l in range(tid, K, nt):
            alpha[a, l] = U[a, idx[a, l]] + logw[a, l]
        cuda.syncthreads()
        for t in range(1, T):
            for kl in range(tid, K * K, nt):
                Es[kl] = edge(Bd, left, right, lowrank, idx[a + t - 1, kl // K],
                              idx[a + t, kl % K])
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
        lz = block_lse_row(red, alpha, a + T - 1, K)
        if lz == NEG:
            # no path on the sub-lattice: infinite loss, no gradient
            if tid == 0:
                loss[n] = INF
        else:
            for l in range(tid, K, nt):
                beta[a + T - 1, l] = ZERO
            cuda.syncthreads()
            for t in range(T - 1, 0, -1):
                for kl in range(tid, K * K, nt):
                    Es[kl] = edge(Bd, left, right, lowrank, idx[a + t - 1, kl // K],
                                  idx[a + t, kl % K])
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
                if lowrank:
                    cuda.syncthreads()
                    R = left.shape[1]
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
                cuda.syncthreads()
            # slot marginals onto their states, then the gold one-hot
            for t in range(tid, T, nt):
                r = a + t
                for k in range(K):
                    v = alpha[r, k] + beta[r, k] - lz
                    if v != NEG:
                        gU[r, idx[r, k]] += math.exp(v)
                gU[r, y[r]] -= ONE
            if tid == 0:
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
                loss[n] = lz - gold

    return SimpleNamespace(
        block_max=block_max, block_sum=block_sum, unary=unary, lse_into=lse_into,
        lse_from=lse_from, edge=edge, prep_exp=prep_exp, fb=fb,
        marginals=marginals, sum_chains=sum_chains, viterbi=viterbi,
        rdp_select=rdp_select, rdp_fb=rdp_fb,
    )
