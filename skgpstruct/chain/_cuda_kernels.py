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
mirrors :func:`skgpstruct.chain.randomized._batch_kernels.rdp_loss_grad_ragged`: one thread
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
        The kernels (``prep_exp``, ``sum_chains``, ``fill``, ``fb``,
        ``marginals``, ``viterbi``) and the device functions they call. The
        randomized pass's kernels extend them in
        :func:`skgpstruct.chain.randomized._cuda_kernels.rdp_kernels`.
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"CUDA kernels exist for float32 and float64, not {dtype}.")
    c = constants(dtype.type)
    c.nb = from_dtype(dtype)
    h = {}
    for helpers in (block_helpers, chain_helpers, fb_steps, marginals_parts):
        h.update(helpers(c, h))
    out = dict(h)
    for family in (flat_kernels, fb_kernel, marginals_kernel, viterbi_kernel):
        out.update(family(c, h))
    return SimpleNamespace(**out)


def constants(sc):
    """Constants of the kernels' type ``sc`` (numba freezes closure values as
    typed constants; a bare 0.0 literal would be float64)."""
    f64 = sc is np.float64
    return SimpleNamespace(
        NEG=sc(-np.inf), INF=sc(np.inf), ZERO=sc(0.0), ONE=sc(1.0), HALF=sc(0.5),
        MARK=sc(-1.0),  # proposals are >= 0: marks selected states / big terms
        FLOOR=sc(1e-12),  # the "local" proposal's floor (proposals._GLOBAL_FLOOR)
        # Scaled sums below TINY may have lost terms to underflow (see
        # _exact_kernels._TINY); exponents above LOG_HUGE would overflow.
        TINY=sc(1e-280 if f64 else 1e-30),
        LOG_HUGE=sc(math.log(1e300) if f64 else 80.0),
    )


def block_helpers(c, h):
    """Block reductions (every thread gets the result; power-of-two blocks)."""
    NEG, ZERO = c.NEG, c.ZERO

    @cuda.jit(device=True)
    def block_reduce(red, v, take_max):
        """Maximum (``take_max``) or sum of ``v`` over the block."""
        tid = cuda.threadIdx.x
        red[tid] = v
        cuda.syncthreads()
        s = cuda.blockDim.x // 2
        while s > 0:
            if tid < s:
                if not take_max:
                    red[tid] = red[tid] + red[tid + s]
                elif red[tid + s] > red[tid]:
                    red[tid] = red[tid + s]
            cuda.syncthreads()
            s //= 2
        out = red[0]
        cuda.syncthreads()
        return out

    @cuda.jit(device=True)
    def block_row_max(red, arr, row, n):
        """``max(arr[row, :n])`` over the block (every thread gets it)."""
        tid, nt = cuda.threadIdx.x, cuda.blockDim.x
        p = NEG
        for i in range(tid, n, nt):
            if arr[row, i] > p:
                p = arr[row, i]
        return block_reduce(red, p, True)

    @cuda.jit(device=True)
    def block_lse_row(red, arr, row, n):
        """``logsumexp(arr[row, :n])`` over the block (every thread gets it)."""
        tid, nt = cuda.threadIdx.x, cuda.blockDim.x
        m = block_row_max(red, arr, row, n)
        lz = NEG
        if m != NEG:
            s = ZERO
            for j in range(tid, n, nt):
                s += math.exp(arr[row, j] - m)
            s = block_reduce(red, s, False)
            lz = m + math.log(s)
        return lz

    return dict(block_reduce=block_reduce, block_lse_row=block_lse_row,
                block_row_max=block_row_max)


def chain_helpers(c, h):
    """Per-chain device functions: folded unary potentials, exact log-sum-exp
    fallbacks, a chain's rows, sub-lattice edge scores."""
    NEG, ZERO = c.NEG, c.ZERO

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
    def lse_term(U, start, end, a, T, x, t, B, b, fixed, k, si, ei, backward):
        """Term k of :func:`lse_step`: ``x[a + t, k] + B[b, k, fixed]``, or
        ``Uf[t, k] + x[a + t, k] + B[b, fixed, k]`` when ``backward``."""
        if backward:
            return unary(U, start, end, a, T, t, k, si, ei) + x[a + t, k] + B[b, fixed, k]
        return x[a + t, k] + B[b, k, fixed]

    @cuda.jit(device=True)
    def lse_step(U, start, end, a, T, x, t, B, b, fixed, si, ei, backward):
        """Exact two-pass log-sum-exp over k of :func:`lse_term`: the forward
        step ``log sum_i exp(fwd[a + t, i] + B[b, i, j])`` (``fixed = j``) or
        the backward one ``log sum_j exp(Uf[t, j] + bwd[a + t, j] + B[b, i,
        j])`` (``fixed = i``)."""
        m = NEG
        for k in range(U.shape[1]):
            v = lse_term(U, start, end, a, T, x, t, B, b, fixed, k, si, ei, backward)
            if v > m:
                m = v
        if m == NEG:
            return NEG
        s = ZERO
        for k in range(U.shape[1]):
            s += math.exp(lse_term(U, start, end, a, T, x, t, B, b, fixed, k, si, ei, backward) - m)
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

    return dict(unary=unary, lse_step=lse_step, chain_rows=chain_rows, edge=edge)


def flat_kernels(c, h):
    """One-thread-per-item kernels: ``prep_exp``, ``sum_chains``, ``fill``."""
    NEG, ZERO = c.NEG, c.ZERO

    @cuda.jit(device=True)
    def scaled_exp(B, b, j, V, out, rows):
        """Max of column j (of row j when ``rows``) of B[b], and ``exp(B -
        max)`` of it into ``out[b, k * V + j]`` (``_scaled_exp``)."""
        m = NEG
        for k in range(V):
            x = B[b, j, k] if rows else B[b, k, j]
            if x > m:
                m = x
        for k in range(V):
            x = B[b, j, k] if rows else B[b, k, j]
            out[b, k * V + j] = ZERO if m == NEG else math.exp(x - m)
        return m

    @cuda.jit
    def prep_exp(B, E, bmax, F, rmax):
        """Per transition matrix b and label j (one thread each):
        ``bmax[b, j]`` = column max, ``E[b, i * V + j] = exp(B[b, i, j] -
        bmax[b, j])``; ``rmax[b, j]`` = row max, ``F[b, k * V + j] =
        exp(B[b, j, k] - rmax[b, j])`` (``_scaled_exp`` of B and of B.T)."""
        g = cuda.grid(1)
        V = B.shape[1]
        if g < B.shape[0] * V:
            b = g // V
            j = g % V
            bmax[b, j] = scaled_exp(B, b, j, V, E, False)
            rmax[b, j] = scaled_exp(B, b, j, V, F, True)

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
    def fill(x, value):
        """x[i] = value (one thread per item of the 1-D ``x``)."""
        i = cuda.grid(1)
        if i < x.shape[0]:
            x[i] = value

    return dict(scaled_exp=scaled_exp, prep_exp=prep_exp, sum_chains=sum_chains, fill=fill)


def fb_steps(c, h):
    """Device functions of ``fb``: the scaled forward and backward recursions."""
    NEG, ZERO, TINY = c.NEG, c.ZERO, c.TINY
    block_reduce, block_row_max = h["block_reduce"], h["block_row_max"]
    unary, lse_step = h["unary"], h["lse_step"]

    @cuda.jit(device=True)
    def forward(U, start, end, a, T, b, si, ei, B, M, bmax, fwd, vec, red):
        """Scaled forward recursion (``_forward_core``), ``M = exp(B - bmax)``."""
        tid, nt, V = cuda.threadIdx.x, cuda.blockDim.x, U.shape[1]
        for j in range(tid, V, nt):
            fwd[a, j] = unary(U, start, end, a, T, 0, j, si, ei)
        cuda.syncthreads()
        for t in range(1, T):
            m = block_row_max(red, fwd, a + t - 1, V)
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
                        out = u + lse_step(U, start, end, a, T, fwd, t - 1, B, b, j, si, ei,
                                           False)
                    fwd[a + t, j] = out
            cuda.syncthreads()

    @cuda.jit(device=True)
    def backward(U, start, end, a, T, b, si, ei, B, MF, rmax, bwd, vec, red):
        """Scaled backward recursion (``_backward_core``), ``MF`` = F."""
        tid, nt, V = cuda.threadIdx.x, cuda.blockDim.x, U.shape[1]
        for j in range(tid, V, nt):
            bwd[a + T - 1, j] = ZERO
        cuda.syncthreads()
        for t in range(T - 2, -1, -1):
            p = NEG
            for j in range(tid, V, nt):
                x = unary(U, start, end, a, T, t + 1, j, si, ei) + bwd[a + t + 1, j]
                if x > p:
                    p = x
            m = block_reduce(red, p, True)
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
                        out = lse_step(U, start, end, a, T, bwd, t + 1, B, b, i, si, ei, True)
                    bwd[a + t, i] = out
            cuda.syncthreads()

    return dict(fb_forward=forward, fb_backward=backward)


def fb_kernel(c, h):
    """Forward-backward lattices and log Z: the ``fb`` kernel."""
    nb, block_lse_row, chain_rows = c.nb, h["block_lse_row"], h["chain_rows"]
    forward, backward = h["fb_forward"], h["fb_backward"]

    @cuda.jit
    def fb(U, offsets, B, E, bmax, F, rmax, start, end, fwd, bwd, logz, do_bwd, stage):
        """Forward (and backward) lattices and log Z, one block per chain.

        Shared memory: ``V`` (label vector) + ``blockDim`` (reductions)
        [+ ``V * V`` when ``stage``: E, then F, copied from global memory].
        """
        n, tid, nt, V = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x, U.shape[1]
        a, T, b, si, ei = chain_rows(n, offsets, B, start, end)
        sm = cuda.shared.array(0, dtype=nb)
        vec, red, Es = sm[:V], sm[V : V + nt], sm[V + nt : V + nt + V * V]
        if stage:
            for k in range(tid, V * V, nt):
                Es[k] = E[b, k]
        forward(U, start, end, a, T, b, si, ei, B, Es if stage else E[b], bmax, fwd, vec, red)
        lz = block_lse_row(red, fwd, a + T - 1, V)  # log Z = logsumexp of the last row
        if tid == 0:
            logz[n] = lz
        if do_bwd:
            if stage:
                for k in range(tid, V * V, nt):
                    Es[k] = F[b, k]
            backward(U, start, end, a, T, b, si, ei, B, Es if stage else F[b], rmax, bwd,
                     vec, red)

    return dict(fb=fb)


def marginals_parts(c, h):
    """Device functions of ``marginals``."""
    NEG, ZERO, ONE, MARK, LOG_HUGE = c.NEG, c.ZERO, c.ONE, c.MARK, c.LOG_HUGE
    block_row_max, unary = h["block_row_max"], h["unary"]

    @cuda.jit(device=True)
    def unary_out(U, y, a, T, fwd, bwd, lz, out_unary, want_grad):
        """Unary marginals (``onehot(y) -`` them when ``want_grad``); 0 when
        ``lz = -inf`` (every path forbidden)."""
        tid, nt, V = cuda.threadIdx.x, cuda.blockDim.x, U.shape[1]
        for k in range(tid, T * V, nt):
            t = k // V
            j = k % V
            u = ZERO if lz == NEG else math.exp(fwd[a + t, j] + bwd[a + t, j] - lz)
            if want_grad:
                g = -u
                if y[a + t] == j:
                    g += ONE
                out_unary[a + t, j] = g
            else:
                out_unary[a + t, j] = u

    @cuda.jit(device=True)
    def pair_factors(U, start, end, a, T, b, si, ei, bmax, fwd, bwd, lz, A, G, red):
        """``A = exp(fwd - m_t)`` and ``G = exp(m_t + bmax + Uf + bwd - log Z)``
        (MARK where G would overflow), as ``_marginals_core``."""
        tid, nt, V = cuda.threadIdx.x, cuda.blockDim.x, U.shape[1]
        for t in range(1, T):
            m = block_row_max(red, fwd, a + t - 1, V)
            for i in range(tid, V, nt):
                A[a + t - 1, i] = ZERO if m == NEG else math.exp(fwd[a + t - 1, i] - m)
            for j in range(tid, V, nt):
                cc = unary(U, start, end, a, T, t, j, si, ei) + bwd[a + t, j]
                bm = bmax[b, j]
                g = ZERO
                if m != NEG and cc != NEG and bm != NEG:
                    x = m + bm + cc - lz
                    g = math.exp(x) if x < LOG_HUGE else MARK
                G[a + t, j] = g

    @cuda.jit(device=True)
    def pair_sum(U, start, end, a, T, b, si, ei, B, E, fwd, bwd, lz, A, G, k):
        """Chain's ``sum_t p(y_{t-1} = i, y_t = j)`` for ``k = i * V + j``."""
        V = U.shape[1]
        i = k // V
        j = k % V
        acc = ZERO
        acc2 = ZERO
        for t in range(1, T):
            g = G[a + t, j]
            if g >= ZERO:
                acc += A[a + t - 1, i] * g
            elif fwd[a + t - 1, i] != NEG:
                cc = unary(U, start, end, a, T, t, j, si, ei) + bwd[a + t, j]
                acc2 += math.exp(fwd[a + t - 1, i] + B[b, i, j] + cc - lz)
        return E[b, k] * acc + acc2

    @cuda.jit(device=True)
    def gold_terms(U, start, end, a, T, b, si, ei, B, y, n, lz, pair, values):
        """Pair counts of y added into ``pair[n]``; ``values[n] = log p(y)``."""
        V = U.shape[1]
        for t in range(1, T):
            k = y[a + t - 1] * V + y[a + t]
            pair[n, k] = pair[n, k] + ONE
        score = unary(U, start, end, a, T, 0, y[a], si, ei)
        for t in range(1, T):
            score += B[b, y[a + t - 1], y[a + t]] + unary(U, start, end, a, T, t, y[a + t],
                                                          si, ei)
        values[n] = NEG if score == NEG else score - lz

    return dict(unary_out=unary_out, pair_factors=pair_factors, pair_sum=pair_sum,
                gold_terms=gold_terms)


def marginals_kernel(c, h):
    """Marginals or log-likelihood gradients: the ``marginals`` kernel."""
    nb, NEG, ZERO, chain_rows = c.nb, c.NEG, c.ZERO, h["chain_rows"]
    unary_out, pair_factors, pair_sum, gold_terms = (
        h["unary_out"], h["pair_factors"], h["pair_sum"], h["gold_terms"])

    @cuda.jit
    def marginals(U, offsets, B, E, bmax, start, end, fwd, bwd, logz, A, G, y,
                  out_unary, pair, values, want_grad):
        """Unary and summed pairwise marginals (or the log-likelihood
        gradients when ``want_grad``), one block per chain.

        ``pair[n, i * V + j]`` is chain n's ``sum_t p(y_{t-1} = i, y_t = j)``
        (``pair counts of y - that`` when ``want_grad``), computed as
        ``E[i, j] * sum_t A[t - 1, i] G[t, j]`` from the scratch arrays
        ``A``, ``G`` (:func:`pair_factors`); where G would overflow the term
        is computed exactly, as in ``_marginals_core``. Shared memory:
        ``blockDim`` (reductions).
        """
        n, tid, nt, V = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x, U.shape[1]
        a, T, b, si, ei = chain_rows(n, offsets, B, start, end)
        red = cuda.shared.array(0, dtype=nb)[:nt]
        lz = logz[n]
        unary_out(U, y, a, T, fwd, bwd, lz, out_unary, want_grad)
        if lz != NEG:
            pair_factors(U, start, end, a, T, b, si, ei, bmax, fwd, bwd, lz, A, G, red)
            cuda.syncthreads()
        for k in range(tid, V * V, nt):
            pv = ZERO
            if lz != NEG:
                pv = pair_sum(U, start, end, a, T, b, si, ei, B, E, fwd, bwd, lz, A, G, k)
            pair[n, k] = -pv if want_grad else pv
        if want_grad:
            cuda.syncthreads()
            if tid == 0:
                gold_terms(U, start, end, a, T, b, si, ei, B, y, n, lz, pair, values)

    return dict(marginals=marginals)


def viterbi_kernel(c, h):
    """Best paths: the ``viterbi`` kernel."""
    nb, NEG = c.nb, c.NEG
    unary, chain_rows = h["unary"], h["chain_rows"]

    @cuda.jit(device=True)
    def backtrack(a, T, V, delta, back, paths):
        """Best last label (ties to the lowest) and the path back from it;
        all zeros if every path is forbidden (score ``-inf``)."""
        last = 0
        for j in range(1, V):
            if delta[a + T - 1, j] > delta[a + T - 1, last]:
                last = j
        if delta[a + T - 1, last] == NEG:
            for t in range(T):
                paths[a + t] = 0
            return NEG
        paths[a + T - 1] = last
        for t in range(T - 1, 0, -1):
            paths[a + t - 1] = back[a + t, paths[a + t]]
        return delta[a + T - 1, last]

    @cuda.jit
    def viterbi(U, offsets, B, start, end, delta, back, paths, scores, stage):
        """Best paths, one block per chain; ``B`` flat (nB, V * V).

        Ties go to the lowest label index, as ``_viterbi_core``. Shared
        memory: ``V`` (previous row) [+ ``V * V``: B, when ``stage``].
        """
        n, tid, nt, V = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x, U.shape[1]
        a, T, b, si, ei = chain_rows(n, offsets, B, start, end)
        sm = cuda.shared.array(0, dtype=nb)
        vec, Bs = sm[:V], sm[V : V + V * V]
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
            scores[n] = backtrack(a, T, V, delta, back, paths)

    return dict(viterbi=viterbi)
