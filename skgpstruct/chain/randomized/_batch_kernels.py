"""Randomized-DP training loss over many sequences in one jitted call.

:class:`~skgpstruct.RandomizedCRFTagger` needs, for every training sequence
``n``, the randomized estimate ``log Z-hat_n`` on a sub-lattice that keeps the
gold labels, the gold score, and the gradient of
``sum_n (log Z-hat_n - score_n(y_n))`` with respect to the unary potentials
and the (shared) transitions. Calling
:func:`skgpstruct.chain.randomized.randomized_marginals` once per sequence
costs far more than the O(T K^2) dynamic programme at large label counts:
Python overhead per call, an O(N^2) "global" proposal per call, and a fresh
(N, N) transition gradient per call. :func:`rdp_loss_grad_ragged` does the
same maths for a stack of sequences in one serial, ``nogil`` numba call that

* builds each position's proposal from the unary row and a global vector
  computed once by the caller (:func:`proposal_code` names the kinds),
* selects the deterministic states (gold first, then the top of the
  proposal; ties to the lower state, as
  :func:`~skgpstruct.chain.randomized.sample_index_sets`) and samples the
  rest with :func:`~skgpstruct.chain.randomized._kernels.sample_slots` from
  pre-drawn uniforms,
* runs forward-backward on the sub-lattice in scaled linear space
  (:func:`_scaled_pass`: per-position normalisers instead of log-sum-exp,
  and, for a dense ``B``, edge weights gathered from ``exp(B - max B)``
  computed once per call, so an edge costs a multiply-add instead of
  exponentials), accumulating the gradient straight into the caller's
  arrays; a sequence on which a term of those sums falls below ``_TINY``
  (possible only with potentials spanning hundreds of nats: see
  :func:`_scaled_forward`), or whose normalisers under- or overflow, goes
  through the log-space kernels
  :func:`~skgpstruct.chain.randomized._kernels.rdp_forward` and
  :func:`_backward_accumulate` (the arithmetic of
  :func:`~skgpstruct.chain.randomized._kernels.rdp_backward`) instead.

Given the same uniforms it reproduces, sequence by sequence,
``randomized_marginals(U_n, B, n_top, n_sampled, force=y_n)`` (to rounding);
the plain-numpy side of that comparison, in ``tests/test_randomized_crf.py``,
calls that function once per sequence.
"""

import math

import numpy as np
from numba import njit

from .._exact_kernels import _NEG_INF as NEG_INF, _TINY
from ._kernels import (_CHUNK,
    _gather_rows,
    rdp_backward_into,
    rdp_forward,
    sample_slots,
)

__all__ = ["proposal_code", "rdp_loss_grad_ragged", "seeded_uniforms"]

_PROPOSAL_CODES = {"uniform": 0, "local": 1, "global": 2, "local+global": 3}
LOCAL_FLOOR = 1e-12  # the "local" proposal's floor (proposals._GLOBAL_FLOOR)
# The scaled pass runs only while every nonzero product of its forward sums
# (forward variable x edge weight x node weight) is at least _TINY, so that
# no term underflows and loses its relative precision (_exact_kernels._TINY).
_LOG_TINY = math.log(_TINY)
# exp(x) of an x above this is a normal float64 (> 2.2e-308), never 0.
_LOG_NORMAL = -700.0


def proposal_code(kind):
    """Integer code of a proposal name for :func:`rdp_loss_grad_ragged`.

    Parameters
    ----------
    kind : {"uniform", "local", "global", "local+global"}

    Returns
    -------
    code : int
    """
    try:
        return _PROPOSAL_CODES[kind]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown proposal {kind!r}; expected one of {tuple(_PROPOSAL_CODES)}."
        ) from None


@njit(cache=True, nogil=True)
def seeded_uniforms(offsets, seeds, out):
    """Fill rows ``offsets[n]:offsets[n + 1]`` of ``out`` (row-major) with
    ``RandomState(seeds[n]).random_sample``'s numbers.

    numba's ``np.random`` is the same Mersenne Twister, seeded by an integer
    the same way and turning two 32-bit words into a double the same way, so
    the draws equal numpy's bit for bit (tested), without building a
    ``RandomState`` per sequence (tens of microseconds each). The state is
    numba's, one per thread, and is reseeded here for every sequence, so
    the result does not depend on the thread. ``seeds`` must be in
    ``[0, 2**32)``. The calling thread's numba generator is left seeded by
    the last sequence (numba's ``np.random`` in other jitted code of that
    thread shares it; numpy's own generators are untouched).
    """
    k = out.shape[1]
    for n in range(offsets.shape[0] - 1):
        np.random.seed(seeds[n])
        for t in range(offsets[n], offsets[n + 1]):
            for j in range(k):
                out[t, j] = np.random.random()


@njit(cache=True, nogil=True)
def _proposal_row(u, code, q_global, out):
    """Proposal of one position, as ``chain.randomized.make_proposal``."""
    N = u.shape[0]
    if code == 0:
        for j in range(N):
            out[j] = 1.0 / N
        return
    if code == 2:
        for j in range(N):
            out[j] = q_global[j]
        return
    m = NEG_INF
    for j in range(N):
        if u[j] > m:
            m = u[j]
    s = 0.0
    if m == NEG_INF:  # every state at -inf: uniform, as _softmax_rows
        for j in range(N):
            out[j] = 1.0
        s = float(N)
    else:
        for j in range(N):
            out[j] = math.exp(u[j] - m)
            if code == 1 and u[j] > NEG_INF and out[j] < LOCAL_FLOOR:
                out[j] = LOCAL_FLOOR  # as make_proposal's "local"
            s += out[j]
    for j in range(N):
        out[j] = out[j] / s
    if code == 3:
        for j in range(N):
            out[j] = 0.5 * (out[j] + q_global[j])


@njit(cache=True, nogil=True)
def _deterministic_states(q, gold, k1, det_row):
    """``det_row[0] = gold``, then the ``k1 - 1`` other states of largest
    ``q`` in decreasing order, ties to the lower state (a stable sort of
    ``-q``, as ``chain.randomized.proposals._prepare_sets``).

    One scan in increasing state order keeps the best so far sorted in
    ``det_row[1:]``: a state enters when it beats the last kept one
    strictly (a tie loses to the lower state already kept) and is inserted
    after every kept state of larger or equal ``q``. No allocation; O(N)
    comparisons plus O(k1) per insertion (few after the first ``k1``
    states, unless ``q`` increases along the states)."""
    N = q.shape[0]
    det_row[0] = gold
    need = k1 - 1
    if need <= 0:
        return
    filled = 0
    for j in range(N):
        if j == gold:
            continue
        v = q[j]
        if filled == need:
            if not v > q[det_row[need]]:
                continue
            pos = need  # drop the last
        else:
            filled += 1
            pos = filled
        while pos > 1 and q[det_row[pos - 1]] < v:
            det_row[pos] = det_row[pos - 1]
            pos -= 1
        det_row[pos] = j


@njit(cache=True, nogil=True)
def _backward_accumulate(U, idx, logw, B, left, right, lowrank, alpha, log_z,
                         chunk, gU, gB, gL, gR):
    """Backward pass of ``rdp_backward``, added (with sign +1) into
    ``gU`` (T, N) and ``gB`` (N, N) or ``gL`` / ``gR`` (N, r): the gradient
    of ``log Z-hat`` with respect to ``U`` and the transitions."""
    T, K = idx.shape
    rdp_backward_into(U, idx, logw, B, left, right, lowrank, alpha, log_z, chunk,
                      np.zeros((T, K)), gU, gB, gL, gR, np.zeros((0, 0)),
                      np.zeros((0, 0, 0)), False)


@njit(cache=True, nogil=True)
def _edges_scaled(expB, left, right, lowrank, prev, cur, out):
    """``out[k, l] = exp(B[prev[k], cur[l]] - shift)``; returns ``(shift,
    log_emin)``, ``log_emin`` the log of the smallest edge weight of the block
    (low rank; 0 for dense transitions, whose bound the caller has).

    Dense transitions: a gather from ``expB = exp(B - max B)`` (the shift is
    applied by the caller). Low rank: the block ``left[prev] @ right[cur].T``
    exponentiated after subtracting its own maximum.
    """
    K = prev.shape[0]
    if not lowrank:
        for k in range(K):
            row = prev[k]
            for l in range(K):
                out[k, l] = expB[row, cur[l]]
        return 0.0, 0.0
    Lp = _gather_rows(left, prev)
    Rc = _gather_rows(right, cur)
    out[:] = np.dot(Lp, Rc.T)
    m = NEG_INF
    low = np.inf
    for k in range(K):
        for l in range(K):
            if out[k, l] > m:
                m = out[k, l]
            if out[k, l] < low:
                low = out[k, l]
    for k in range(K):
        for l in range(K):
            out[k, l] = math.exp(out[k, l] - m)
    return m, low - m


@njit(cache=True, nogil=True)
def _terms_above_tiny(a_prev, E, w):
    """Whether every nonzero ``a_prev[k] * E[k, l] * w[l]`` is at least
    ``_TINY`` (the exact form of the bound tested by :func:`_scaled_forward`)."""
    K = w.shape[0]
    for l in range(K):
        wl = w[l]
        if wl != 0.0:
            for k in range(K):
                ak = a_prev[k]
                if ak != 0.0 and E[k, l] != 0.0 and ak * E[k, l] * wl < _TINY:
                    return False
    return True


@njit(cache=True, nogil=True)
def _scaled_forward(U, idx, logw, expB, shift_B, left, right, lowrank, a, wn, norm, Es,
                    store, log_emin):
    """Scaled forward sweep of :func:`_scaled_pass`: fills ``a`` (normalised
    forward variables), ``wn`` (node weights over their row maximum) and
    ``norm``, and the edge weights ``Es[t]`` when ``store``. Returns
    ``(ok, log_z)``.

    ``ok`` is also False when a term ``a[t - 1, k] * E[k, l] * wn[t, l]``
    of the sums (nonzero factors; ``wn[0, l]`` at ``t = 0``) is below
    ``_TINY``. The cheap bound, the smallest nonzero ``a[t - 1]`` times the
    smallest edge weight (``exp(log_emin)`` for dense transitions, the
    block's for low rank) times the smallest nonzero node weight, settles
    it for ordinary potentials; when it is below ``_TINY``, the terms are
    tested one by one (:func:`_terms_above_tiny`), provided no finite edge
    or node weight can have underflowed to an exact 0 (else ``ok`` is
    False). When ``ok``, no term underflows, every nonzero forward variable
    keeps its relative precision, a zero one is an exact zero (a ``-inf``
    potential), and every ``tmp[l]`` of a reachable state is at least
    ``_TINY``, which bounds the backward variables of :func:`_scaled_pass`
    (no overflow).
    """
    T, K = idx.shape
    E = np.empty((K, K))
    tmp = np.empty(K)
    log_z = 0.0
    log_amin = 0.0  # log of the smallest nonzero a[t - 1]
    for t in range(T):
        mn = NEG_INF
        vmin = np.inf
        for l in range(K):
            v = U[t, idx[t, l]] + logw[t, l]
            wn[t, l] = v
            if v > mn:
                mn = v
            if v > NEG_INF and v < vmin:
                vmin = v
        if mn == NEG_INF:
            return False, NEG_INF
        for l in range(K):
            wn[t, l] = math.exp(wn[t, l] - mn)
        shift = 0.0
        if t == 0:
            if vmin - mn < _LOG_TINY:
                return False, NEG_INF
            for l in range(K):
                tmp[l] = 1.0
        else:
            Et = Es[t] if store else E
            shift, log_e = _edges_scaled(expB, left, right, lowrank, idx[t - 1], idx[t], Et)
            if lowrank and shift == NEG_INF:
                return False, NEG_INF
            if not lowrank:
                log_e = log_emin
            if log_amin + log_e + (vmin - mn) < _LOG_TINY and (
                    log_e < _LOG_NORMAL or vmin - mn < _LOG_NORMAL
                    or not _terms_above_tiny(a[t - 1], Et, wn[t])):
                return False, NEG_INF
            for l in range(K):
                tmp[l] = 0.0
            for k in range(K):
                ak = a[t - 1, k]
                if ak != 0.0:
                    for l in range(K):
                        tmp[l] += ak * Et[k, l]
        s = 0.0
        for l in range(K):
            a[t, l] = tmp[l] * wn[t, l]
            s += a[t, l]
        if not (s > 0.0 and s < np.inf):
            return False, NEG_INF
        amin = np.inf
        for l in range(K):
            a[t, l] /= s
            if a[t, l] != 0.0 and a[t, l] < amin:
                amin = a[t, l]
        log_amin = math.log(amin)
        norm[t] = s
        log_z += math.log(s) + mn + (shift_B if (t > 0 and not lowrank) else shift)
    if not (log_z > NEG_INF and log_z < np.inf):
        return False, NEG_INF
    return True, log_z


@njit(cache=True, nogil=True)
def _add_edge_marginals(xi, prev, cur, left, right, lowrank, gB, gL, gR):
    """Edge marginals ``xi`` (K, K) of one step onto the transition gradients."""
    K = prev.shape[0]
    if lowrank:
        Lp = _gather_rows(left, prev)
        Rc = _gather_rows(right, cur)
        gl = np.dot(xi, Rc)
        gr = np.dot(xi.T, Lp)
        for k in range(K):
            gL[prev[k]] += gl[k]
            gR[cur[k]] += gr[k]
    else:
        for k in range(K):
            row = prev[k]
            for l in range(K):
                gB[row, cur[l]] += xi[k, l]


@njit(cache=True, nogil=True)
def _scaled_pass(U, idx, logw, expB, shift_B, left, right, lowrank, store, gU, gB,
                 gL, gR, log_emin=NEG_INF):
    """Forward-backward on the sub-lattice in scaled linear space.

    The same quantities as ``rdp_forward`` + ``rdp_backward`` (log Z-hat and
    its gradient, added into ``gU``, ``gB`` / ``gL``, ``gR``), computed with
    per-position normalisation (Rabiner's scaling) instead of log-sum-exp:
    about two exponentials per sub-lattice edge fewer. Returns
    ``(ok, log_z)``; ``ok`` is False, and nothing has been added to the
    gradients, when a term of the forward sums falls below ``_TINY`` (see
    :func:`_scaled_forward`: potentials spanning hundreds of nats) or a
    forward normaliser under- or overflowed, and the caller then uses the
    log-space kernels. ``log_emin`` is, for dense transitions, a lower bound
    on ``log`` of the smallest nonzero entry of ``exp(B - shift_B)``
    (``min(finite B) - shift_B``); the default ``-inf`` (unknown) sends any
    dense sequence longer than 1 to the log-space kernels.
    """
    T, K = idx.shape
    a = np.empty((T, K))
    wn = np.empty((T, K))
    norm = np.empty(T)
    Es = np.empty((T, K, K)) if store else np.empty((1, K, K))
    ok, log_z = _scaled_forward(U, idx, logw, expB, shift_B, left, right, lowrank, a, wn,
                                norm, Es, store, log_emin)
    if not ok:
        return False, NEG_INF
    # backward: b[t] scaled so that a[t] * b[t] are the marginals. The
    # states with a[t, l] = 0 (unreachable: exact zeros, see _scaled_forward)
    # have marginal 0 and get v[l] = 0: their b, unbounded, could overflow
    # (inf * 0 = NaN) and changes nothing else.
    E = np.empty((K, K))
    b = np.ones(K)
    b_prev = np.empty(K)
    v = np.empty(K)
    for t in range(T - 1, 0, -1):
        if store:
            Et = Es[t]
        else:
            _edges_scaled(expB, left, right, lowrank, idx[t - 1], idx[t], E)
            Et = E
        for l in range(K):
            v[l] = wn[t, l] * b[l] / norm[t] if a[t, l] != 0.0 else 0.0
            gU[t, idx[t, l]] += a[t, l] * b[l]
        for k in range(K):
            acc = 0.0
            ak = a[t - 1, k]
            for l in range(K):
                e = Et[k, l] * v[l]
                acc += e
                Et[k, l] = ak * e  # the edge marginal xi[k, l]
            b_prev[k] = acc
        _add_edge_marginals(Et, idx[t - 1], idx[t], left, right, lowrank, gB, gL, gR)
        for k in range(K):
            b[k] = b_prev[k]
    for l in range(K):
        gU[0, idx[0, l]] += a[0, l] * b[l]
    return True, log_z


@njit(cache=True, nogil=True)
def rdp_loss_grad_ragged(U, offsets, y, B, left, right, lowrank, code, q_global,
                         k1, uniforms, expB, shift_B, store_budget, gU, gB, gL, gR):
    """Randomized negative log-likelihood of stacked sequences + gradient.

    Parameters
    ----------
    U : float64 (n_tokens, N)
        Unary potentials of all sequences stacked.
    offsets : int64 (n_sequences + 1,)
        Sequence ``n`` is rows ``offsets[n]:offsets[n + 1]``.
    y : int64 (n_tokens,)
        Gold labels; they are forced onto the sub-lattice.
    B, left, right, lowrank
        Transitions, in the layout of ``_randomized_kernels``.
    code : int
        Proposal kind, see :func:`proposal_code`.
    q_global : float64 (N,)
        The global proposal vector (unused for codes 0 and 1).
    k1 : int
        Deterministic states per position, gold included (``>= 1``).
    uniforms : float64 (n_tokens, K2)
        Uniform draws of the sampled slots, stacked like ``U``.
    expB : float64 (N, N) or (0, 0)
        Dense transitions only: ``exp(B - shift_B)`` (``shift_B`` the largest
        finite entry of ``B``), shared by all sequences. The smallest finite
        entry of ``B`` (read once per call) bounds its smallest nonzero
        weight for the underflow test of :func:`_scaled_forward`.
    shift_B : float
        See ``expB``.
    store_budget : int
        Keep a sequence's (T, K, K) edge weights between the forward and the
        backward pass when ``T K^2`` is at most this (else recompute them).
    gU : float64 (n_tokens, N)
        Output, added to: gradient of the loss with respect to ``U``.
    gB : float64 (N, N) or (0, 0)
        Output, added to (dense transitions).
    gL, gR : float64 (N, r) or (0, 0)
        Output, added to (low-rank transitions).

    Returns
    -------
    loss : float64 (n_sequences,)
        ``log Z-hat_n - score_n(y_n)`` per sequence: ``+inf`` if the gold
        path has score ``-inf``, in particular if the sub-lattice carried
        no path (nothing is then added to the gradients for the sequence).
    """
    n_seq = offsets.shape[0] - 1
    N = U.shape[1]
    K2 = uniforms.shape[1]
    K = k1 + K2
    log_k2 = math.log(max(K2, 1))
    log_emin = 0.0  # log of the smallest nonzero entry of expB (dense)
    if not lowrank:
        low = np.inf
        for i in range(B.shape[0]):
            for j in range(B.shape[1]):
                if B[i, j] > NEG_INF and B[i, j] < low:
                    low = B[i, j]
        if low < np.inf:
            log_emin = low - shift_B
    loss = np.empty(n_seq)
    for n in range(n_seq):
        s = offsets[n]
        e = offsets[n + 1]
        T = e - s
        Un = U[s:e]
        yn = y[s:e]
        q = np.empty(N)
        det = np.empty((T, k1), dtype=np.int64)
        q_rest = np.empty((T, N))
        cdf = np.empty((T, N))
        last_pos = np.zeros(T, dtype=np.int64)
        for t in range(T):
            _proposal_row(Un[t], code, q_global, q)
            _deterministic_states(q, yn[t], k1, det[t])
            for j in range(N):
                q_rest[t, j] = q[j]
            for i in range(k1):
                q_rest[t, det[t, i]] = 0.0
            acc = 0.0
            for j in range(N):
                acc += q_rest[t, j]
                cdf[t, j] = acc
                if q_rest[t, j] > 0.0:
                    last_pos[t] = j
        idx = np.empty((T, K), dtype=np.int64)
        logw = np.empty((T, K))
        sample_slots(det, q_rest, cdf, last_pos, uniforms[s:e], log_k2, idx, logw)
        ok, log_z = _scaled_pass(Un, idx, logw, expB, shift_B, left, right, lowrank,
                                 T * K * K <= store_budget, gU[s:e], gB, gL, gR, log_emin)
        if not ok:
            # Potentials spanning too many nats for linear space: log space.
            alpha, log_z = rdp_forward(Un, idx, logw, B, left, right, lowrank, _CHUNK)
            if not log_z > NEG_INF:
                loss[n] = np.inf
                continue
            _backward_accumulate(Un, idx, logw, B, left, right, lowrank, alpha, log_z,
                                 _CHUNK, gU[s:e], gB, gL, gR)
        gold = 0.0
        for t in range(T):
            gold += Un[t, yn[t]]
            gU[s + t, yn[t]] -= 1.0
        for t in range(1, T):
            i = yn[t - 1]
            j = yn[t]
            if lowrank:
                for d in range(left.shape[1]):
                    gold += left[i, d] * right[j, d]
                    gL[i, d] -= right[j, d]
                    gR[j, d] -= left[i, d]
            else:
                gold += B[i, j]
                gB[i, j] -= 1.0
        loss[n] = log_z - gold
    return loss
