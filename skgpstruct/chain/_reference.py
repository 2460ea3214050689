"""Plain-numpy references for the linear-chain kernels, and brute force.

Two layers of oracles for the jitted kernels of :mod:`skgpstruct.chain.exact`
and :mod:`skgpstruct.chain.pseudo`:

* ``*_ref`` functions: the same dynamic programmes written with numpy,
  vectorised over the labels at each time step. They take the same
  arguments and return the same things as their numba counterparts (3-D
  batched ``U`` is handled by a Python loop over samples), so they also serve
  as the ``"numpy"`` backend and as the baseline the benchmarks compare numba
  against.
* ``brute_force_*`` functions and :func:`pseudo_log_likelihood_by_definition`:
  definitions evaluated literally, by enumerating all ``n_labels ** n_steps``
  label paths or every factor's local conditional. Only for tiny chains;
  they take unbatched input.

Conventions (see :mod:`skgpstruct.chain`): ``U`` (T, V), ``B`` (V, V) with
``B[i, j]`` the score of label ``i`` at ``t - 1`` followed by ``j`` at ``t``;
``start`` / ``end`` are folded into ``U[0]`` / ``U[T - 1]``.
"""

import itertools

import numpy as np

from .._input.arrays import check_labels, check_potentials

__all__ = [
    "forward_log_ref",
    "backward_log_ref",
    "log_partition_ref",
    "marginals_ref",
    "log_likelihood_ref",
    "log_likelihood_grad_ref",
    "viterbi_ref",
    "pseudo_log_likelihood_ref",
    "pseudo_log_likelihood_grad_ref",
    "brute_force_log_partition",
    "brute_force_marginals",
    "brute_force_viterbi",
    "brute_force_log_likelihood",
    "brute_force_partial_log_likelihood",
    "pseudo_log_likelihood_by_definition",
]


# ---------------------------------------------------------------- helpers
def _logsumexp(a, axis):
    """log(sum(exp(a))) along ``axis`` with max subtraction; ``-inf``-safe."""
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # an all -inf slice gives exp(-inf) = 0
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)


def _softmax(a, axis):
    """Normalised exp(a) along ``axis``; an all ``-inf`` slice gives zeros."""
    lse = np.expand_dims(_logsumexp(a, axis), axis)
    return np.exp(a - np.where(np.isfinite(lse), lse, 0.0))


def _folded(U, start, end):
    """Unary potentials with ``start`` / ``end`` added to the first / last row."""
    Uf = U.copy()
    Uf[0] += start
    Uf[-1] += end
    return Uf


def _prepare(U, B, start, end):
    """Validate and split into per-sample (Uf, B) pairs."""
    U3, B3, st, en, batched = check_potentials(U, B, start, end)
    items = []
    for s in range(U3.shape[0]):
        pick = lambda arr: arr[s if arr.shape[0] > 1 else 0]  # noqa: E731
        items.append((_folded(U3[s], pick(st), pick(en)), pick(B3)))
    return items, batched


def _stack(results, batched):
    """Stack per-sample results (tuples stacked field-wise) or unwrap one."""
    if not batched:
        return results[0]
    if isinstance(results[0], tuple):
        return tuple(np.stack(field) for field in zip(*results))
    return np.asarray(results)


def _forward(Uf, B):
    T = Uf.shape[0]
    fwd = np.empty_like(Uf)
    fwd[0] = Uf[0]
    for t in range(1, T):
        fwd[t] = Uf[t] + _logsumexp(fwd[t - 1][:, None] + B, axis=0)
    return fwd


def _backward(Uf, B):
    T = Uf.shape[0]
    bwd = np.empty_like(Uf)
    bwd[T - 1] = 0.0
    for t in range(T - 2, -1, -1):
        bwd[t] = _logsumexp(B + (Uf[t + 1] + bwd[t + 1])[None, :], axis=1)
    return bwd


def _marginals(Uf, B):
    fwd = _forward(Uf, B)
    bwd = _backward(Uf, B)
    log_z = _logsumexp(fwd[-1], axis=0)
    # log Z = -inf means every path is forbidden; then fwd + bwd = -inf too and
    # subtracting 0 instead of -inf gives the required zero marginals.
    shift = log_z if np.isfinite(log_z) else 0.0
    unary = np.exp(fwd + bwd - shift)
    if Uf.shape[0] > 1:
        log_pair = (
            fwd[:-1, :, None] + B[None, :, :] + (Uf[1:] + bwd[1:])[:, None, :] - shift
        )
        pairwise = np.exp(log_pair).sum(axis=0)
    else:
        pairwise = np.zeros_like(B)
    return float(log_z), unary, pairwise


def _path_score(Uf, B, y):
    return float(Uf[np.arange(len(y)), y].sum() + B[y[:-1], y[1:]].sum())


def _log_likelihood(Uf, B, y):
    score = _path_score(Uf, B, y)
    if score == -np.inf:
        return -np.inf
    return score - float(_logsumexp(_forward(Uf, B)[-1], axis=0))


# ------------------------------------------------------- numpy references
def forward_log_ref(U, B, start=None, end=None):
    """Forward lattice, numpy version of :func:`skgpstruct.chain.forward_log`."""
    items, batched = _prepare(U, B, start, end)
    return _stack([_forward(Uf, Bs) for Uf, Bs in items], batched)


def backward_log_ref(U, B, start=None, end=None):
    """Backward lattice, numpy version of :func:`skgpstruct.chain.backward_log`."""
    items, batched = _prepare(U, B, start, end)
    return _stack([_backward(Uf, Bs) for Uf, Bs in items], batched)


def log_partition_ref(U, B, start=None, end=None):
    """log Z, numpy version of :func:`skgpstruct.chain.log_partition`."""
    items, batched = _prepare(U, B, start, end)
    out = [float(_logsumexp(_forward(Uf, Bs)[-1], axis=0)) for Uf, Bs in items]
    return _stack(out, batched)


def marginals_ref(U, B, start=None, end=None):
    """Unary and summed pairwise marginals, numpy version of
    :func:`skgpstruct.chain.marginals`."""
    items, batched = _prepare(U, B, start, end)
    return _stack([_marginals(Uf, Bs)[1:] for Uf, Bs in items], batched)


def log_likelihood_ref(U, B, y, start=None, end=None):
    """log p(y | U, B), numpy version of :func:`skgpstruct.chain.log_likelihood`."""
    items, batched = _prepare(U, B, start, end)
    y = check_labels(y, items[0][0].shape[0], items[0][0].shape[1])
    return _stack([_log_likelihood(Uf, Bs, y) for Uf, Bs in items], batched)


def log_likelihood_grad_ref(U, B, y, start=None, end=None):
    """Value and gradients, numpy version of
    :func:`skgpstruct.chain.log_likelihood_grad`."""
    items, batched = _prepare(U, B, start, end)
    T, V = items[0][0].shape
    y = check_labels(y, T, V)
    onehot = np.zeros((T, V))
    onehot[np.arange(T), y] = 1.0
    counts = np.zeros((V, V))
    np.add.at(counts, (y[:-1], y[1:]), 1.0)
    results = []
    for Uf, Bs in items:
        _, unary, pairwise = _marginals(Uf, Bs)
        results.append((_log_likelihood(Uf, Bs, y), onehot - unary, counts - pairwise))
    if not batched:
        return results[0]
    values, gU, gB = zip(*results)
    return np.asarray(values), np.stack(gU), np.stack(gB)


def _viterbi(Uf, B):
    T, V = Uf.shape
    delta = Uf[0].copy()
    back = np.zeros((T, V), dtype=np.int64)
    for t in range(1, T):
        cand = delta[:, None] + B
        back[t] = np.argmax(cand, axis=0)  # first maximum: lowest label index
        delta = Uf[t] + cand[back[t], np.arange(V)]
    path = np.zeros(T, dtype=np.int64)
    if delta.max() == -np.inf:  # every path forbidden: the path is all zeros
        return path, -np.inf
    path[-1] = np.argmax(delta)
    for t in range(T - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path, float(delta[path[-1]])


def viterbi_ref(U, B, start=None, end=None):
    """Best path and its score, numpy version of :func:`skgpstruct.chain.viterbi`."""
    items, batched = _prepare(U, B, start, end)
    return _stack([_viterbi(Uf, Bs) for Uf, Bs in items], batched)


def _pseudo(Uf, B, y, grad):
    T, V = Uf.shape
    rows = B[y[:-1]]  # (T-1, V): B[y_{t-1}, :], conditional of y_t
    cols = B[:, y[1:]].T  # (T-1, V): B[:, y_t], conditional of y_{t-1}
    pair = B[y[:-1], y[1:]]
    obs = np.concatenate([Uf[np.arange(T), y], pair, pair])
    lse = np.concatenate(
        [_logsumexp(Uf, axis=1), _logsumexp(rows, axis=1), _logsumexp(cols, axis=1)]
    )
    # a term whose observed potential is -inf is -inf (its normaliser may be too)
    terms = np.where(obs == -np.inf, -np.inf, obs - np.where(np.isfinite(lse), lse, 0.0))
    value = float(terms.sum())
    if not grad:
        return value
    gU = -_softmax(Uf, axis=1)
    gU[np.arange(T), y] += 1.0
    gB = np.zeros((V, V))
    if T > 1:
        np.add.at(gB, y[:-1], -_softmax(rows, axis=1))
        np.add.at(gB.T, y[1:], -_softmax(cols, axis=1))
        np.add.at(gB, (y[:-1], y[1:]), 2.0)
    return value, gU, gB


def pseudo_log_likelihood_ref(U, B, y, start=None, end=None):
    """Piecewise pseudo-log-likelihood, numpy version of
    :func:`skgpstruct.chain.pseudo_log_likelihood`."""
    items, batched = _prepare(U, B, start, end)
    y = check_labels(y, items[0][0].shape[0], items[0][0].shape[1])
    return _stack([_pseudo(Uf, Bs, y, False) for Uf, Bs in items], batched)


def pseudo_log_likelihood_grad_ref(U, B, y, start=None, end=None):
    """Value and gradients, numpy version of
    :func:`skgpstruct.chain.pseudo_log_likelihood_grad`."""
    items, batched = _prepare(U, B, start, end)
    y = check_labels(y, items[0][0].shape[0], items[0][0].shape[1])
    return _stack([_pseudo(Uf, Bs, y, True) for Uf, Bs in items], batched)


# ------------------------------------------------------------ brute force
def _unbatched(U, B, start, end):
    U3, B3, st, en, batched = check_potentials(U, B, start, end)
    if batched:
        raise ValueError("brute-force references take one sequence (2-D U).")
    T, V = U3.shape[1:]
    if V**T > 10**6:
        raise ValueError(f"{V}**{T} paths are too many to enumerate.")
    return _folded(U3[0], st[0], en[0]), B3[0]


def _all_paths(Uf, B):
    """Every label path (n_paths, T) and its unnormalised score."""
    T, V = Uf.shape
    paths = np.array(list(itertools.product(range(V), repeat=T)), dtype=np.int64)
    scores = Uf[np.arange(T), paths].sum(axis=1)
    if T > 1:
        scores = scores + B[paths[:, :-1], paths[:, 1:]].sum(axis=1)
    return paths, scores


def brute_force_log_partition(U, B, start=None, end=None):
    """log Z by summing exp(score) over all ``n_labels ** n_steps`` paths.

    Parameters
    ----------
    U : array-like of shape (n_steps, n_labels)
    B : array-like of shape (n_labels, n_labels)
    start, end : array-like of shape (n_labels,), default=None

    Returns
    -------
    log_z : float
    """
    Uf, Bs = _unbatched(U, B, start, end)
    return float(_logsumexp(_all_paths(Uf, Bs)[1], axis=0))


def brute_force_marginals(U, B, start=None, end=None):
    """Unary and summed pairwise marginals by enumeration of all paths.

    Returns
    -------
    unary : ndarray of shape (n_steps, n_labels)
    pairwise : ndarray of shape (n_labels, n_labels)
        Sum over ``t >= 1`` of p(y_{t-1} = i, y_t = j).
    """
    Uf, Bs = _unbatched(U, B, start, end)
    T, V = Uf.shape
    paths, scores = _all_paths(Uf, Bs)
    log_z = _logsumexp(scores, axis=0)
    probs = np.exp(scores - log_z) if np.isfinite(log_z) else np.zeros_like(scores)
    unary = np.zeros((T, V))
    pairwise = np.zeros((V, V))
    for path, p in zip(paths, probs):
        unary[np.arange(T), path] += p
        for t in range(1, T):
            pairwise[path[t - 1], path[t]] += p
    return unary, pairwise


def brute_force_viterbi(U, B, start=None, end=None):
    """Best path by enumeration; ties go to the path whose labels, read from
    the last position backwards, are lexicographically smallest (the order
    the DP's lowest-index tie-breaking produces).

    Returns
    -------
    path : ndarray of int64 of shape (n_steps,)
    score : float
    """
    Uf, Bs = _unbatched(U, B, start, end)
    paths, scores = _all_paths(Uf, Bs)
    best = scores.max()
    tied = [tuple(p[::-1]) for p, s in zip(paths, scores) if s == best]
    return np.array(min(tied)[::-1], dtype=np.int64), float(best)


def brute_force_log_likelihood(U, B, y, start=None, end=None):
    """log p(y | U, B) = score(y) - log Z with log Z by enumeration.

    Returns
    -------
    log_likelihood : float
    """
    Uf, Bs = _unbatched(U, B, start, end)
    y = check_labels(y, *Uf.shape)
    paths, scores = _all_paths(Uf, Bs)
    score = _path_score(Uf, Bs, y)
    if score == -np.inf:
        return -np.inf
    return score - float(_logsumexp(scores, axis=0))


def pseudo_log_likelihood_by_definition(U, B, y, start=None, end=None):
    """Piecewise pseudo-log-likelihood evaluated factor by factor.

    The chain is written as a generic factor graph (one unary factor per
    position holding ``U[t]`` plus ``start`` / ``end``, one pairwise factor
    per edge holding ``B``); for every factor ``a`` and every variable ``s``
    in it, the local conditional ``psi_a(y_s, y_{a \\ s}) / sum_v psi_a(v,
    y_{a \\ s})`` is computed by looping over the values ``v`` of ``y_s``.

    Returns
    -------
    value : float
    """
    Uf, Bs = _unbatched(U, B, start, end)
    T, V = Uf.shape
    y = check_labels(y, T, V)
    factors = [((t,), Uf[t]) for t in range(T)]
    factors += [((t - 1, t), Bs) for t in range(1, T)]
    total = 0.0
    for scope, table in factors:
        assignment = [int(y[s]) for s in scope]
        for k in range(len(scope)):
            alternatives = []
            for v in range(V):
                alt = list(assignment)
                alt[k] = v
                alternatives.append(table[tuple(alt)])
            observed = table[tuple(assignment)]
            if observed == -np.inf:
                return -np.inf
            total += observed - np.logaddexp.reduce(alternatives)
    return float(total)


def weight_noise_ref(X, offsets, cols, n_shared, y, seqs, noise, W, m_bin, log_var_bin,
                     scale, jitter_sd):
    """Plain-numpy :func:`skgpstruct.chain.weight_noise.weight_noise_pass`
    given its draws: ``noise[i] = (e_w, e_t, e_b)`` of sequence ``seqs[i]``
    (``cols[n]``: its distinct features, the ``n_shared[n]`` shared ones
    first). Returns the values (n_batch,), the gradient w.r.t. all of ``W``
    (dense), w.r.t. ``(m_bin, log_var_bin)`` (2, V, V) and w.r.t. ``log
    scale^2``."""
    V = m_bin.shape[0]
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
    sd_bin = np.exp(0.5 * log_var_bin)
    values = np.zeros(len(seqs))
    gW, g_bin, g_log = np.zeros_like(W), np.zeros((2, V, V)), 0.0
    for i, n in enumerate(seqs):
        e_w, e_t, e_b = noise[i]
        S, R, c = e_t.shape[0], n_shared[n], cols[n]
        Xn, yn = X[offsets[n]:offsets[n + 1]][:, c], y[offsets[n]:offsets[n + 1]]
        mu, sd = W[c, :V], np.exp(0.5 * W[c, V:])
        q = np.sqrt(jitter_sd ** 2 + (Xn[:, R:] ** 2) @ sd[R:] ** 2)
        for k in range(S):
            U = scale * (Xn @ mu + Xn[:, :R] @ (sd[:R] * e_w[k]) + q * e_t[k])
            B = m_bin + sd_bin * e_b[k]
            ll, gU, gB = log_likelihood_grad_ref(U, B, yn)
            values[i] += ll / S
            gW[c, :V] += scale * Xn.T @ gU / S
            gW[c[:R], V:] += 0.5 * sd[:R] * e_w[k] * (scale * Xn[:, :R].T @ gU) / S
            # q = 0 only at tokens without features of their own
            ratio = np.divide(scale * gU * e_t[k], q, out=np.zeros_like(q), where=q > 0)
            gW[c[R:], V:] += 0.5 * sd[R:] ** 2 * ((Xn[:, R:] ** 2).T @ ratio) / S
            g_bin[0] += gB / S
            g_bin[1] += 0.5 * sd_bin * e_b[k] * gB / S
            g_log += 0.5 * float(np.sum(gU * U)) / S
    return values, gW, g_bin, g_log


def brute_force_partial_log_likelihood(U, B, y, start=None, end=None):
    """log p(known labels of y | U, B) by enumeration: log of the summed
    probabilities of the paths that agree with every known label (``y[t] >=
    0``; ``-1``: unknown), and its gradients in ``U`` and ``B`` (the
    marginals given the known labels minus the marginals).

    Returns
    -------
    log_likelihood : float
    grad_U : ndarray of shape (n_steps, n_labels)
    grad_B : ndarray of shape (n_labels, n_labels)
    """
    Uf, Bs = _unbatched(U, B, start, end)
    T, V = Uf.shape
    y = check_labels(y, T, V, unknown=True)
    paths, scores = _all_paths(Uf, Bs)
    agree = np.all((paths == y) | (y < 0), axis=1)
    log_z = _logsumexp(scores, axis=0)
    log_zc = _logsumexp(np.where(agree, scores, -np.inf), axis=0)
    grads = []
    for log_norm, keep in ((log_zc, agree), (log_z, np.ones_like(agree))):
        probs = np.where(keep, np.exp(scores - log_norm), 0.0) if np.isfinite(log_norm) \
            else np.zeros_like(scores)
        unary, pairwise = np.zeros((T, V)), np.zeros((V, V))
        for path, p in zip(paths, probs):
            unary[np.arange(T), path] += p
            np.add.at(pairwise, (path[:-1], path[1:]), p)
        grads.append((unary, pairwise))
    value = -np.inf if log_zc == -np.inf else float(log_zc - log_z)
    return value, grads[0][0] - grads[1][0], grads[0][1] - grads[1][1]
