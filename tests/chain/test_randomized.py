"""Tests of randomized dynamic programming (skgpstruct.chain.randomized).

Three layers:

* every numba kernel of ``_randomized_kernels`` against a plain-numpy
  reference written below (sub-lattice forward, brute-force enumeration of
  the sub-lattice paths for the backward pass, the entropy recursion and
  Gumbel backward sampling in matrix form, index-set sampling);
* the limit case ``n_top >= n_states``, where every randomized function must
  reproduce its exact counterpart (``chain._reference`` and brute force) to
  1e-10, and low-rank transitions, which must match the equivalent full
  matrix;
* the statistics: Z-hat unbiased in linear space, log Z-hat biased low, and
  the gradient equal to finite differences of the estimate with the index
  sets held fixed.
"""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct.chain.randomized import _kernels as K
from skgpstruct.chain._reference import (
    brute_force_log_partition,
    brute_force_marginals,
    log_partition_ref,
    marginals_ref,
)
from skgpstruct.chain.randomized import (
    PROPOSALS,
    IndexSets,
    LowRankTransitions,
    make_proposal,
    randomized_entropy,
    randomized_gumbel_sample,
    randomized_log_partition,
    randomized_log_partition_draws,
    randomized_marginals,
    sample_index_sets,
    topk_log_partition,
)

EMPTY = np.zeros((0, 0))


# ---------------------------------------------------------------- helpers
def _lse(a, axis=None):
    a = np.asarray(a, dtype=float)
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else float(out.squeeze())


def _problem(rng, T, N, r=3, scale_u=1.0, scale_b=0.5):
    U = scale_u * rng.normal(size=(T, N))
    left = np.sqrt(scale_b) * rng.normal(size=(N, r))
    right = np.sqrt(scale_b) * rng.normal(size=(N, r))
    return U, LowRankTransitions(left, right), left @ right.T


def _random_sets(rng, T, N, Kslots, n_det):
    """Arbitrary sub-lattice with repeats and a -inf weighted slot."""
    idx = rng.integers(0, N, size=(T, Kslots)).astype(np.int64)
    logw = np.zeros((T, Kslots))
    logw[:, n_det:] = rng.normal(size=(T, Kslots - n_det))
    if Kslots - n_det > 1:
        logw[T // 2, -1] = -np.inf
    return idx, logw


def _sub_potentials(U, idx, logw, Bfull):
    """Node scores (T, K) and edge scores (T - 1, K, K) of a sub-lattice."""
    T = idx.shape[0]
    node = U[np.arange(T)[:, None], idx] + logw
    edges = np.stack([Bfull[np.ix_(idx[t - 1], idx[t])] for t in range(1, T)]) if T > 1 \
        else np.zeros((0, idx.shape[1], idx.shape[1]))
    return node, edges


def _sub_forward_ref(U, idx, logw, Bfull):
    node, edges = _sub_potentials(U, idx, logw, Bfull)
    alpha = np.empty_like(node)
    alpha[0] = node[0]
    for t in range(1, len(node)):
        alpha[t] = node[t] + _lse(alpha[t - 1][:, None] + edges[t - 1], axis=0)
    return alpha, _lse(alpha[-1])


def _slot_paths(U, idx, logw, Bfull):
    """All slot paths of a sub-lattice and their (weighted) scores."""
    node, edges = _sub_potentials(U, idx, logw, Bfull)
    T, Ks = node.shape
    paths = np.array(list(itertools.product(range(Ks), repeat=T)), dtype=np.int64)
    scores = node[np.arange(T), paths].sum(axis=1)
    for t in range(1, T):
        scores = scores + edges[t - 1][paths[:, t - 1], paths[:, t]]
    return paths, scores


def _sub_marginals_brute(U, idx, logw, Bfull):
    """Slot marginals, edge marginals and state gradients by enumeration."""
    T, N = U.shape
    Ks = idx.shape[1]
    paths, scores = _slot_paths(U, idx, logw, Bfull)
    log_z = _lse(scores)
    p = np.exp(scores - log_z)
    node = np.zeros((T, Ks))
    pair = np.zeros((max(T - 1, 0), Ks, Ks))
    gU = np.zeros((T, N))
    gB = np.zeros((N, N))
    for path, pp in zip(paths, p):
        node[np.arange(T), path] += pp
        for t in range(1, T):
            pair[t - 1, path[t - 1], path[t]] += pp
    for t in range(T):
        np.add.at(gU[t], idx[t], node[t])
    for t in range(1, T):
        np.add.at(gB, (idx[t - 1][:, None], idx[t][None, :]), pair[t - 1])
    return log_z, node, pair, gU, gB


def _sub_entropy_ref(U, idx, logw, Bfull):
    """Alg. 3 in matrix form: weighted sums over slots of the exact recursion."""
    alpha, log_z = _sub_forward_ref(U, idx, logw, Bfull)
    _, edges = _sub_potentials(U, idx, logw, Bfull)
    T = idx.shape[0]
    H = np.zeros(idx.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        for t in range(1, T):
            v = alpha[t - 1][:, None] + edges[t - 1]          # (k, l)
            lp_hat = v - _lse(v, axis=0)[None, :]             # log w_k p~(k|l)
            lp_tilde = lp_hat - logw[t - 1][:, None]
            term = np.where(np.isfinite(lp_hat), np.exp(lp_hat) * (H[:, None] - lp_tilde), 0.0)
            H = term.sum(axis=0)
        lp_hat = alpha[-1] - log_z
        term = np.where(np.isfinite(lp_hat), np.exp(lp_hat) * (H - (lp_hat - logw[-1])), 0.0)
    return term.sum()


def _sub_gumbel_ref(U, idx, logw, Bfull, G, tau):
    alpha, log_z = _sub_forward_ref(U, idx, logw, Bfull)
    T, Ks = idx.shape
    slots = np.empty(T, dtype=np.int64)
    relaxed = np.empty((T, Ks))
    log_prob = 0.0
    logits = alpha[-1] - log_z
    for t in range(T - 1, -1, -1):
        if t < T - 1:
            v = alpha[t] + Bfull[idx[t], idx[t + 1, slots[t + 1]]]
            logits = v - _lse(v)
        z = logits + G[t]
        slots[t] = np.argmax(np.where(np.isfinite(logits), z, -np.inf))
        e = np.exp((z - np.max(z)) / tau)
        relaxed[t] = e / e.sum()
        log_prob += logits[slots[t]]
    return slots, relaxed, log_prob


def _brute_entropy(U, Bfull):
    T, N = U.shape
    paths = np.array(list(itertools.product(range(N), repeat=T)))
    s = U[np.arange(T), paths].sum(axis=1)
    for t in range(1, T):
        s = s + Bfull[paths[:, t - 1], paths[:, t]]
    lp = s - _lse(s)
    ok = np.isfinite(lp)
    return -np.sum(np.exp(lp[ok]) * lp[ok])


def _exact_ffbs_gumbel(U, Bfull, G):
    """Exact posterior sample by forward filtering, Gumbel-max backward sampling."""
    T, N = U.shape
    alpha = np.empty((T, N))
    alpha[0] = U[0]
    for t in range(1, T):
        alpha[t] = U[t] + _lse(alpha[t - 1][:, None] + Bfull, axis=0)
    y = np.empty(T, dtype=np.int64)
    y[-1] = np.argmax(alpha[-1] + G[-1])
    for t in range(T - 2, -1, -1):
        y[t] = np.argmax(alpha[t] + Bfull[:, y[t + 1]] + G[t])
    return y


def _kernel_args(lowrank, tr, Bfull):
    if lowrank:
        return EMPTY, np.ascontiguousarray(tr.left), np.ascontiguousarray(tr.right)
    return Bfull, EMPTY, EMPTY


def _forward_on_random_sets(seed, T, N, Ks, lowrank, chunk):
    """A random problem (``_problem``), a random sub-lattice with two
    deterministic slots (``_random_sets``), the kernel's transition arguments
    and the forward kernel's lattice on it; ``rng`` is the generator, ready
    for further draws."""
    rng = np.random.default_rng(seed)
    U, tr, Bfull = _problem(rng, T, N)
    idx, logw = _random_sets(rng, T, N, Ks, n_det=2)
    args = _kernel_args(lowrank, tr, Bfull)
    alpha, log_z = K.rdp_forward(U, idx, logw, *args, lowrank, chunk)
    return SimpleNamespace(rng=rng, U=U, tr=tr, Bfull=Bfull, idx=idx, logw=logw, args=args,
                           alpha=alpha, log_z=log_z)


# ---------------------------------------------------------------- kernels vs numpy
@pytest.mark.parametrize("lowrank", [False, True])
@pytest.mark.parametrize("chunk", [2, 256])
def test_forward_kernel_matches_numpy(lowrank, chunk):
    rng = np.random.default_rng(1)
    T, N, Ks = 5, 9, 5
    U, tr, Bfull = _problem(rng, T, N)
    U[1, 3] = -np.inf
    idx, logw = _random_sets(rng, T, N, Ks, n_det=2)
    alpha, log_z = K.rdp_forward(U, idx, logw, *_kernel_args(lowrank, tr, Bfull), lowrank, chunk)
    alpha_ref, log_z_ref = _sub_forward_ref(U, idx, logw, Bfull)
    assert_allclose(alpha, alpha_ref, rtol=1e-12, atol=1e-12)
    assert_allclose(log_z, log_z_ref, rtol=1e-12)
    # and the enumeration of the weighted slot paths
    assert_allclose(log_z, _lse(_slot_paths(U, idx, logw, Bfull)[1]), rtol=1e-12)


@pytest.mark.parametrize("lowrank", [False, True])
@pytest.mark.parametrize("chunk", [2, 256])
def test_backward_kernel_matches_brute_force(lowrank, chunk):
    N = 6
    p = _forward_on_random_sets(2, 4, N, 4, lowrank, chunk)
    U, tr, Bfull, idx, logw, alpha, log_z = p.U, p.tr, p.Bfull, p.idx, p.logw, p.alpha, p.log_z
    beta, node, gU, gB, gL, gR, pair = K.rdp_backward(
        U, idx, logw, *p.args, lowrank, alpha, log_z, chunk, N, True)
    log_z_ref, node_ref, pair_ref, gU_ref, gB_ref = _sub_marginals_brute(U, idx, logw, Bfull)
    assert_allclose(log_z, log_z_ref, rtol=1e-12)
    assert_allclose(node, node_ref, atol=1e-12)
    assert_allclose(pair, pair_ref, atol=1e-12)
    assert_allclose(gU, gU_ref, atol=1e-12)
    # beta: alpha + beta is the log of the slot's marginal mass
    assert_allclose(_lse(alpha[0] + beta[0]), log_z, rtol=1e-12)
    if lowrank:
        assert gB.shape == (0, 0)
        # chain rule through B = left @ right.T
        assert_allclose(gL, gB_ref @ tr.right, atol=1e-12)
        assert_allclose(gR, gB_ref.T @ tr.left, atol=1e-12)
    else:
        assert_allclose(gB, gB_ref, atol=1e-12)


@pytest.mark.parametrize("lowrank", [False, True])
def test_entropy_kernel_matches_numpy(lowrank):
    p = _forward_on_random_sets(3, 5, 8, 5, lowrank, 3)
    h = K.rdp_entropy(p.U, p.idx, p.logw, *p.args, lowrank, p.alpha, p.log_z, 3)
    assert_allclose(h, _sub_entropy_ref(p.U, p.idx, p.logw, p.Bfull), rtol=1e-12)


@pytest.mark.parametrize("lowrank", [False, True])
def test_gumbel_kernel_matches_numpy(lowrank):
    T, Ks = 5, 5
    p = _forward_on_random_sets(4, T, 8, Ks, lowrank, 3)
    for _ in range(5):
        G = p.rng.gumbel(size=(T, Ks))
        slots, relaxed, log_prob = K.rdp_gumbel(p.U, p.idx, p.logw, *p.args, lowrank, p.alpha,
                                                p.log_z, G, 0.7)
        s_ref, r_ref, lp_ref = _sub_gumbel_ref(p.U, p.idx, p.logw, p.Bfull, G, 0.7)
        assert_array_equal(slots, s_ref)
        assert_allclose(relaxed, r_ref, atol=1e-12)
        assert_allclose(log_prob, lp_ref, rtol=1e-12)
        assert np.all(np.isfinite(p.logw[np.arange(T), slots]))


def test_sample_slots_matches_numpy():
    rng = np.random.default_rng(5)
    T, N, K1, K2 = 4, 12, 3, 6
    q = rng.random((T, N)) ** 3
    q[2, :] = 0.0
    q[2, :4] = 1.0  # position 2: no mass outside the top set
    q /= q.sum(axis=1, keepdims=True)
    det = np.argsort(-q, axis=1, kind="stable")[:, :K1].astype(np.int64)
    q_rest = q.copy()
    np.put_along_axis(q_rest, det, 0.0, axis=1)
    cdf = np.cumsum(q_rest, axis=1)
    last_pos = np.array([np.flatnonzero(r).max() if r.any() else 0 for r in q_rest])
    u = rng.random((T, K2))
    idx = np.empty((T, K1 + K2), dtype=np.int64)
    logw = np.empty((T, K1 + K2))
    K.sample_slots(det, q_rest, cdf, last_pos, u, np.log(K2), idx, logw)
    assert_array_equal(idx[:, :K1], det)
    assert_array_equal(logw[:, :K1], 0.0)
    for t in range(T):
        total = q_rest[t].sum()
        if total == 0:
            assert np.all(logw[t, K1:] == -np.inf)
            continue
        # inverse-cdf sampling of q_rest / total
        j = np.minimum(np.searchsorted(cdf[t], u[t] * cdf[t, -1], side="right"), last_pos[t])
        assert_array_equal(idx[t, K1:], j)
        assert not np.isin(j, det[t]).any()
        assert_allclose(logw[t, K1:], -np.log(K2 * q_rest[t, j] / total), rtol=1e-12)


def test_draws_kernel_equals_single_calls():
    """Draw d of the batched kernel is the single estimate from the same uniforms."""
    rng = np.random.default_rng(6)
    U, tr, Bfull = _problem(rng, 5, 15)
    n_draws, k1, k2 = 7, 2, 3
    draws = randomized_log_partition_draws(U, Bfull, k1, k2, n_draws, proposal="local",
                                           random_state=np.random.RandomState(0))
    uniforms = np.random.RandomState(0).random_sample((n_draws, 5, k2))
    q = make_proposal(U, Bfull, "local")
    for d in range(n_draws):
        sets = sample_index_sets(q, k1, k2, random_state=_Replay(uniforms[d]))
        single = randomized_log_partition(U, Bfull, index_sets=sets).log_partition
        assert_allclose(draws[d], single, rtol=1e-13)
        alpha_ref, log_z_ref = _sub_forward_ref(U, sets.index, sets.log_weight, Bfull)
        assert_allclose(single, log_z_ref, rtol=1e-12)


class _Replay(np.random.RandomState):
    """A RandomState whose random_sample returns fixed uniforms."""

    def __init__(self, uniforms):
        super().__init__(0)
        self._u = uniforms

    def random_sample(self, size=None):
        assert tuple(size) == self._u.shape
        return self._u


# ---------------------------------------------------------------- proposals and index sets
def test_make_proposal():
    rng = np.random.default_rng(7)
    T, N = 3, 6
    U, tr, Bfull = _problem(rng, T, N)
    U[0, 2] = -np.inf
    for kind in PROPOSALS:
        for B in (Bfull, tr):
            q = make_proposal(U, B, kind)
            assert q.shape == (T, N)
            assert_allclose(q.sum(axis=1), 1.0)
            assert np.all(q >= 0)
    assert_allclose(make_proposal(U, Bfull, "uniform"), 1.0 / N)
    local = make_proposal(U, Bfull, "local")
    assert_allclose(local, np.exp(U - _lse(U, axis=1)[:, None]))
    assert local[0, 2] == 0.0
    norms = np.exp(0.5 * (np.abs(tr.left).sum(1) + np.abs(tr.right).sum(1)))
    assert_allclose(make_proposal(U, tr, "global")[1], norms / norms.sum(), rtol=1e-9)
    mass = np.exp(Bfull).sum(0) + np.exp(Bfull).sum(1)
    assert_allclose(make_proposal(U, Bfull, "global")[2], mass / mass.sum(), rtol=1e-9)
    assert_allclose(make_proposal(U, tr, "local+global"),
                    0.5 * (local + make_proposal(U, tr, "global")))
    with pytest.raises(ValueError, match="Unknown proposal"):
        make_proposal(U, Bfull, "softmax")
    # a position with every state forbidden falls back to uniform, not NaN
    U[1] = -np.inf
    assert_allclose(make_proposal(U, Bfull, "local")[1], 1.0 / N)


def test_index_sets_structure():
    rng = np.random.default_rng(8)
    T, N = 4, 10
    q = rng.random((T, N))
    q /= q.sum(axis=1, keepdims=True)
    sets = sample_index_sets(q, 3, 5, random_state=0)
    assert sets.index.shape == (T, 8) and sets.n_deterministic == 3
    order = np.argsort(-q, axis=1)
    assert_array_equal(sets.index[:, :3], order[:, :3])
    assert_array_equal(sets.log_weight[:, :3], 0.0)
    for t in range(T):
        rest = q[t].copy()
        rest[order[t, :3]] = 0
        sampled = sets.index[t, 3:]
        assert not np.isin(sampled, order[t, :3]).any()
        assert_allclose(sets.log_weight[t, 3:], -np.log(5 * rest[sampled] / rest.sum()))
    # forcing: the forced state takes the first slot with weight 0, is never sampled
    y = np.array([9, order[1, 0], 0, 5])
    for n_top in (0, 1, 3):
        fs = sample_index_sets(q, n_top, 4, random_state=1, force=y)
        k1 = max(n_top, 1)
        assert fs.n_deterministic == k1
        assert_array_equal(fs.index[:, 0], y)
        assert_array_equal(fs.log_weight[:, :k1], 0.0)
        for t in range(T):
            assert y[t] not in fs.index[t, k1:]
            others = [s for s in order[t] if s != y[t]][: k1 - 1]
            assert_array_equal(fs.index[t, 1:k1], others)
    # n_top + n_sampled >= N: every state summed exactly
    full = sample_index_sets(q, 4, 6, random_state=0)
    assert full.n_deterministic == N and full.index.shape == (T, N)
    assert_array_equal(np.sort(full.index, axis=1), np.tile(np.arange(N), (T, 1)))
    assert_array_equal(full.log_weight, 0.0)


@pytest.mark.parametrize("random_state", [None, 3, np.random.RandomState(3),
                                          np.random.default_rng(3)])
def test_random_state_types(random_state):
    rng = np.random.default_rng(9)
    U, tr, Bfull = _problem(rng, 4, 20)
    res = randomized_log_partition(U, Bfull, 2, 4, random_state=random_state)
    assert np.isfinite(res.log_partition)


def test_seeded_results_are_reproducible():
    rng = np.random.default_rng(10)
    U, tr, Bfull = _problem(rng, 4, 20)
    a = randomized_log_partition(U, tr, 2, 4, random_state=5)
    b = randomized_log_partition(U, tr, 2, 4, random_state=5)
    assert a.log_partition == b.log_partition
    assert_array_equal(a.index_sets.index, b.index_sets.index)
    c = randomized_log_partition(U, tr, 2, 4, random_state=6)
    assert not np.array_equal(a.index_sets.index, c.index_sets.index)
    g1 = randomized_log_partition_draws(U, tr, 2, 4, 50, random_state=np.random.default_rng(1))
    g2 = randomized_log_partition_draws(U, tr, 2, 4, 50, random_state=np.random.default_rng(1))
    assert_array_equal(g1, g2)


# ---------------------------------------------------------------- n_top >= N: exact
@pytest.mark.parametrize("lowrank", [False, True])
@pytest.mark.parametrize("T", [1, 2, 4])
def test_full_index_sets_reproduce_exact(lowrank, T):
    rng = np.random.default_rng(11 + T)
    N = 4
    U, tr, Bfull = _problem(rng, T, N, scale_u=1.5, scale_b=1.0)
    if not lowrank:
        Bfull = Bfull.copy()
        Bfull[1, 2] = -np.inf  # a forbidden transition
        U[0, 3] = -np.inf
    B = tr if lowrank else Bfull
    for proposal in PROPOSALS:
        for n_top, n_sampled in ((N, 0), (N + 3, 2), (2, 2)):
            res = randomized_log_partition(U, B, n_top, n_sampled, proposal=proposal,
                                           random_state=0)
            assert_allclose(res.log_partition, log_partition_ref(U, Bfull), rtol=0, atol=1e-10)
        assert_allclose(res.log_partition, brute_force_log_partition(U, Bfull), atol=1e-10)
        assert_allclose(topk_log_partition(U, B, N, proposal=proposal),
                        res.log_partition, atol=1e-10)
        m = randomized_marginals(U, B, N, 0, proposal=proposal)
        unary_ref, pair_ref = marginals_ref(U, Bfull)
        assert_allclose(m.unary, unary_ref, atol=1e-10)
        if lowrank:
            assert m.pairwise is None
            assert_allclose(m.grad_left, pair_ref @ tr.right, atol=1e-10)
            assert_allclose(m.grad_right, pair_ref.T @ tr.left, atol=1e-10)
        else:
            assert m.grad_left is None and m.grad_right is None
            assert_allclose(m.pairwise, pair_ref, atol=1e-10)
        if T <= 4:
            u_bf, p_bf = brute_force_marginals(U, Bfull)
            assert_allclose(m.unary, u_bf, atol=1e-10)
        h = randomized_entropy(U, B, N, 0, proposal=proposal)
        assert_allclose(h, _brute_entropy(U, Bfull), atol=1e-10)


@pytest.mark.parametrize("lowrank", [False, True])
def test_full_index_sets_gumbel_sample_is_exact_posterior_sample(lowrank):
    rng = np.random.default_rng(12)
    T, N = 5, 6
    U, tr, Bfull = _problem(rng, T, N, scale_u=1.5, scale_b=1.0)
    B = tr if lowrank else Bfull
    sets = sample_index_sets(make_proposal(U, B, "local+global"), N, 0)
    rows = np.arange(T)[:, None]
    for _ in range(50):
        G = rng.gumbel(size=(T, N))  # noise per state, mapped onto the slots
        s = randomized_gumbel_sample(U, B, index_sets=sets, gumbel=G[rows, sets.index],
                                     temperature=0.3)
        y = _exact_ffbs_gumbel(U, Bfull, G)
        assert_array_equal(s.sample, y)
        # its log-probability is the exact log p(y)
        score = U[np.arange(T), y].sum() + Bfull[y[:-1], y[1:]].sum()
        assert_allclose(s.log_prob, score - log_partition_ref(U, Bfull), atol=1e-10)
        assert_allclose(s.relaxed.sum(axis=1), 1.0)
        assert_array_equal(np.argmax(s.relaxed, axis=1), s.slots)


def test_full_index_sets_gumbel_sample_frequencies(seed):
    """Path frequencies of the sampler match the exact posterior.

    27 paths, each checked at 5 standard errors (two-sided p ~ 6e-7 per
    path, so ~2e-5 for the whole test under the null).
    """
    rng = np.random.default_rng(seed + 13)
    T, N, n = 3, 3, 3000
    U, tr, Bfull = _problem(rng, T, N, scale_u=1.0, scale_b=1.0)
    gen = np.random.default_rng(seed + 14)
    counts = {}
    for _ in range(n):
        y = tuple(randomized_gumbel_sample(U, Bfull, N, 0, random_state=gen).sample)
        counts[y] = counts.get(y, 0) + 1
    log_z = log_partition_ref(U, Bfull)
    for y in itertools.product(range(N), repeat=T):
        y = np.array(y)
        p = np.exp(U[np.arange(T), y].sum() + Bfull[y[:-1], y[1:]].sum() - log_z)
        se = np.sqrt(p * (1 - p) / n)
        assert abs(counts.get(tuple(y), 0) / n - p) <= 5 * se


# ---------------------------------------------------------------- statistics
@pytest.mark.parametrize("proposal", PROPOSALS)
def test_unbiased_in_linear_space(proposal, seed):
    """E[Z-hat / Z] = 1 and E[log Z-hat] <= log Z, from 20,000 draws.

    The sample mean of Z-hat / Z must lie within 4 estimated standard errors
    of 1: two-sided p ~ 6e-5 per check under the null, so the 4 (+1 forced)
    checks give a false alarm about once in 3,000 seeds, while a bias of a
    few percent (e.g. a weight off by a factor) is far outside the band.
    """
    rng = np.random.default_rng(seed + 15)
    T, N = 6, 30
    U, tr, Bfull = _problem(rng, T, N, r=4, scale_u=1.0, scale_b=0.3)
    log_z = log_partition_ref(U, Bfull)
    draws = randomized_log_partition_draws(U, Bfull, 3, 6, 20_000, proposal=proposal,
                                           random_state=seed)
    ratio = np.exp(draws - log_z)
    se = ratio.std(ddof=1) / np.sqrt(ratio.size)
    assert se > 0
    assert abs(ratio.mean() - 1.0) <= 4 * se, (ratio.mean(), se)
    assert draws.mean() <= log_z  # Jensen
    if proposal == "local+global":
        # low-rank transitions, and forcing labels into the deterministic set
        y = rng.integers(0, N, size=T)
        draws = randomized_log_partition_draws(U, tr, 2, 6, 20_000, proposal=proposal,
                                               random_state=seed + 1, force=y)
        ratio = np.exp(draws - log_z)
        se = ratio.std(ddof=1) / np.sqrt(ratio.size)
        assert abs(ratio.mean() - 1.0) <= 4 * se, (ratio.mean(), se)
        assert draws.mean() <= log_z


def test_topk_is_a_lower_bound_increasing_in_k():
    rng = np.random.default_rng(16)
    U, tr, Bfull = _problem(rng, 5, 12)
    log_z = log_partition_ref(U, Bfull)
    values = [topk_log_partition(U, tr, k) for k in range(1, 13)]
    assert np.all(np.diff(values) >= -1e-12)
    assert values[-2] < log_z
    assert_allclose(values[-1], log_z, atol=1e-10)
    res = randomized_log_partition(U, tr, 4, 0)
    assert res.log_partition == values[3]
    assert res.index_sets.index.shape == (5, 4)


@pytest.mark.parametrize("lowrank", [False, True])
def test_gradient_matches_finite_differences(lowrank, assert_grad_fd):
    """d log Z-hat equals central differences with the index sets held fixed."""
    rng = np.random.default_rng(17)
    T, N, r = 4, 7, 2
    U, tr, Bfull = _problem(rng, T, N, r=r)
    B = tr if lowrank else Bfull
    res = randomized_marginals(U, B, 2, 3, random_state=1, return_slot_pairwise=True)
    sets = res.index_sets
    assert (res.unary == 0).any()  # some states are off the sub-lattice: zero gradient

    def f(U_, B_):
        return randomized_log_partition(U_, B_, index_sets=sets).log_partition

    fd = {"h": 1e-5, "rtol": 1e-6, "atol": 1e-9}
    assert_grad_fd(lambda x: f(x.reshape(U.shape), B), U.ravel(), res.unary, **fd)
    if lowrank:
        left, right = tr.left, tr.right
        assert_grad_fd(lambda x: f(U, (x.reshape(left.shape), right)), left.ravel(),
                       res.grad_left, **fd)
        assert_grad_fd(lambda x: f(U, (left, x.reshape(right.shape))), right.ravel(),
                       res.grad_right, **fd)
    else:
        assert_grad_fd(lambda x: f(U, x.reshape(Bfull.shape)), Bfull.ravel(), res.pairwise, **fd)
    # sub-lattice marginals are consistent with the state gradient
    assert_allclose(res.slot_marginals.sum(axis=1), 1.0)
    assert_allclose(res.slot_pairwise.sum(axis=(1, 2)), 1.0)
    assert_allclose(res.slot_pairwise.sum(axis=2), res.slot_marginals[:-1], atol=1e-12)


def test_lowrank_equals_full_matrix():
    rng = np.random.default_rng(18)
    T, N = 6, 40
    U, tr, Bfull = _problem(rng, T, N, r=5)
    q = make_proposal(U, tr, "local+global")
    for k1, k2 in ((3, 5), (0, 4), (10, 0)):
        sets = sample_index_sets(q, k1, k2, random_state=2)
        a = randomized_log_partition(U, tr, index_sets=sets).log_partition
        b = randomized_log_partition(U, Bfull, index_sets=sets).log_partition
        assert_allclose(a, b, rtol=1e-12)
        ma = randomized_marginals(U, tr, index_sets=sets)
        mb = randomized_marginals(U, Bfull, index_sets=sets)
        assert_allclose(ma.unary, mb.unary, atol=1e-12)
        assert_allclose(ma.grad_left, mb.pairwise @ tr.right, atol=1e-12)
        assert_allclose(ma.grad_right, mb.pairwise.T @ tr.left, atol=1e-12)
        assert_allclose(randomized_entropy(U, tr, index_sets=sets),
                        randomized_entropy(U, Bfull, index_sets=sets), rtol=1e-12)
        G = rng.gumbel(size=sets.index.shape)
        sa = randomized_gumbel_sample(U, tr, index_sets=sets, gumbel=G)
        sb = randomized_gumbel_sample(U, Bfull, index_sets=sets, gumbel=G)
        assert_array_equal(sa.sample, sb.sample)
        assert_allclose(sa.relaxed, sb.relaxed, atol=1e-12)
    # same seed and a B-independent proposal: same index sets and estimate
    for proposal in ("uniform", "local", q):
        a = randomized_log_partition(U, tr, 3, 5, proposal=proposal, random_state=4)
        b = randomized_log_partition(U, Bfull, 3, 5, proposal=proposal, random_state=4)
        assert_array_equal(a.index_sets.index, b.index_sets.index)
        assert_allclose(a.log_partition, b.log_partition, rtol=1e-12)
    # a plain (left, right) tuple is the same as LowRankTransitions
    assert randomized_log_partition(U, (tr.left, tr.right), 3, 5, random_state=4) \
        .log_partition == randomized_log_partition(U, tr, 3, 5, random_state=4).log_partition


def test_neg_inf_unaries_with_local_proposal():
    """Forbidden states get q = 0 and are never sampled; no NaN anywhere."""
    rng = np.random.default_rng(19)
    T, N = 5, 12
    U, tr, Bfull = _problem(rng, T, N)
    U[:, 6:] = -np.inf  # only 6 states allowed; top 3 + sampled from the other 3
    log_z = log_partition_ref(U, Bfull)
    draws = randomized_log_partition_draws(U, Bfull, 3, 2, 200, proposal="local",
                                           random_state=0)
    assert np.all(np.isfinite(draws))
    res = randomized_marginals(U, Bfull, 3, 2, proposal="local", random_state=0)
    assert np.all(res.index_sets.index < 6)
    assert np.all(np.isfinite(res.unary)) and np.all(res.unary[:, 6:] == 0)
    # top set covering every allowed state: nothing left to sample, exact result
    res = randomized_marginals(U, Bfull, 6, 3, proposal="local", random_state=0)
    assert np.all(res.index_sets.log_weight[:, 6:] == -np.inf)
    assert_allclose(res.log_partition, log_z, atol=1e-10)
    assert_allclose(res.unary, marginals_ref(U, Bfull)[0], atol=1e-10)
    assert np.isfinite(randomized_entropy(U, Bfull, 3, 2, proposal="local", random_state=0))


def test_local_proposal_keeps_far_states_reachable():
    """A state 800 nats below the best unary score, which the transitions
    make carry almost all of Z: the "local" softmax would underflow to
    q = 0 (never drawn, E[Z-hat] = exp(-100) Z); floored, Z-hat is unbiased."""
    U = np.array([[0.0, 0.0, 0.0, 0.0], [800.0, 0.0, 0.0, 0.0]])
    B = np.zeros((4, 4))
    B[:, 1] = 900.0
    q = make_proposal(U, B, "local")
    assert np.all(q > 0)
    assert_allclose(q[1, 1:], 1e-12 / (1 + 3e-12))
    ratio = np.exp(randomized_log_partition_draws(U, B, 1, 2, 4000, proposal="local",
                                                  random_state=0) - log_partition_ref(U, B))
    se = ratio.std() / np.sqrt(ratio.size)
    assert abs(ratio.mean() - 1.0) < 4 * se
    U[1, 2] = -np.inf  # a forbidden state stays at 0
    assert make_proposal(U, B, "local")[1, 2] == 0.0


def test_relaxed_sample_and_temperature():
    rng = np.random.default_rng(20)
    T, N = 4, 25
    U, tr, Bfull = _problem(rng, T, N, scale_u=2.0)
    s = randomized_gumbel_sample(U, tr, 3, 4, temperature=1e-3, random_state=0)
    assert_allclose(s.relaxed.sum(axis=1), 1.0)
    onehot = np.zeros_like(s.relaxed)
    onehot[np.arange(T), s.slots] = 1.0
    assert_allclose(s.relaxed, onehot, atol=1e-6)  # cold: relaxed -> hard
    states = s.relaxed_states(N)
    assert states.shape == (T, N)
    assert_allclose(states.sum(axis=1), 1.0)
    assert_array_equal(np.argmax(states, axis=1), s.sample)
    hot = randomized_gumbel_sample(U, tr, index_sets=s.index_sets, temperature=100.0,
                                   random_state=0)
    assert hot.relaxed.max() < 0.5  # hot: relaxed -> spread over the slots
    assert_array_equal(s.sample, s.index_sets.index[np.arange(T), s.slots])


def test_randomized_entropy_close_to_exact_for_large_sets():
    """Sanity of Alg. 3 away from the limit: the estimates centre on H.

    Alg. 3 is consistent but not unbiased (it plugs ratio estimates into a
    log), so no k*SE band applies; its bias here is about 0.1% of H, while a
    misplaced importance weight (e.g. log p^ instead of log p~ in the
    recursion) moves the mean by well over 10%. 2% separates the two.
    """
    rng = np.random.default_rng(21)
    T, N = 5, 30
    U, tr, Bfull = _problem(rng, T, N, scale_u=2.0, scale_b=0.3)
    h_exact = randomized_entropy(U, Bfull, N, 0)
    est = [randomized_entropy(U, Bfull, 10, 10, random_state=s) for s in range(200)]
    assert abs(np.mean(est) - h_exact) < 0.01 * h_exact
    assert np.std(est) > 0


# ---------------------------------------------------------------- input checks
def test_input_validation():
    rng = np.random.default_rng(22)
    U, tr, Bfull = _problem(rng, 3, 5)
    with pytest.raises(ValueError, match="n_top \\+ n_sampled must be positive"):
        randomized_log_partition(U, Bfull, 0, 0)
    with pytest.raises(ValueError, match="n_sampled must be >= 0"):
        randomized_log_partition(U, Bfull, 2, -1)
    with pytest.raises(TypeError, match="n_top must be an integer"):
        randomized_log_partition(U, Bfull, 2.0, 1)
    with pytest.raises(TypeError, match="n_top must be an integer"):
        randomized_log_partition(U, Bfull, True, 1)
    with pytest.raises(ValueError, match="required"):
        randomized_log_partition(U, Bfull)
    with pytest.raises(ValueError, match="Unknown proposal"):
        randomized_log_partition(U, Bfull, 2, 1, proposal="softmax")
    with pytest.raises(ValueError, match="proposal must have shape"):
        randomized_log_partition(U, Bfull, 2, 1, proposal=np.ones((3, 4)))
    with pytest.raises(ValueError, match="non-negative"):
        randomized_log_partition(U, Bfull, 2, 1, proposal=-np.ones((3, 5)))
    with pytest.raises(ValueError, match="U must be 2-D"):
        randomized_log_partition(U[None], Bfull, 2, 1)
    with pytest.raises(ValueError, match="n_steps >= 1"):
        randomized_log_partition(np.zeros((0, 5)), Bfull, 2, 1)
    with pytest.raises(ValueError, match="NaN"):
        randomized_log_partition(np.full((3, 5), np.nan), Bfull, 2, 1)
    with pytest.raises(TypeError, match="real numbers"):
        randomized_log_partition(np.full((3, 5), "a"), Bfull, 2, 1)
    with pytest.raises(ValueError, match="B must have shape"):
        randomized_log_partition(U, Bfull[:4, :4], 2, 1)
    with pytest.raises(ValueError, match="left and right"):
        randomized_log_partition(U, (tr.left, tr.right[:, :2]), 2, 1)
    with pytest.raises(ValueError, match="left and right"):
        randomized_log_partition(U, (tr.left[:4], tr.right[:4]), 2, 1)
    with pytest.raises(ValueError, match="pair"):
        randomized_log_partition(U, (tr.left, tr.right, tr.right), 2, 1)
    with pytest.raises(ValueError, match="non-finite"):
        randomized_log_partition(U, (np.full_like(tr.left, -np.inf), tr.right), 2, 1)
    with pytest.raises(TypeError, match="None"):
        randomized_log_partition(U, None, 2, 1)
    with pytest.raises(ValueError, match="force"):
        randomized_log_partition(U, Bfull, 2, 1, force=[0, 1, 5])
    with pytest.raises(ValueError, match="force"):
        randomized_log_partition(U, Bfull, 2, 1, force=[0, 1])
    sets = randomized_log_partition(U, Bfull, 2, 1, random_state=0).index_sets
    with pytest.raises(ValueError, match="either index_sets"):
        randomized_log_partition(U, Bfull, 2, 1, index_sets=sets)
    with pytest.raises(TypeError, match="IndexSets"):
        randomized_log_partition(U, Bfull, index_sets=(sets.index, sets.log_weight, 2))
    bad = IndexSets(sets.index + 10, sets.log_weight, 2)
    with pytest.raises(ValueError, match="outside"):
        randomized_log_partition(U, Bfull, index_sets=bad)
    with pytest.raises(ValueError, match="n_steps=2"):
        randomized_log_partition(U[:2], Bfull, index_sets=sets)
    for temperature in (0.0, -1.0, "1", None):
        with pytest.raises(ValueError, match="temperature"):
            randomized_gumbel_sample(U, Bfull, 2, 1, temperature=temperature)
    with pytest.raises(ValueError, match="gumbel must have shape"):
        randomized_gumbel_sample(U, Bfull, index_sets=sets, gumbel=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="n_draws must be >= 0"):
        randomized_log_partition_draws(U, Bfull, 2, 1, -3)
    with pytest.raises(ValueError, match="every row of proposal"):
        sample_index_sets(np.zeros((3, 5)), 2, 1)
    # a chain with no allowed path on the sub-lattice: log Z-hat = -inf,
    # and the functions that need a distribution say so
    Bneg = np.full((5, 5), -np.inf)
    assert randomized_log_partition(U, Bneg, 2, 1, random_state=0).log_partition == -np.inf
    for func in (randomized_marginals, randomized_entropy, randomized_gumbel_sample):
        with pytest.raises(ValueError, match="-inf"):
            func(U, Bneg, 2, 1, random_state=0)


def test_lowrank_never_builds_the_dense_matrix():
    """N = 60,000 states: an N x N float64 matrix would need 29 GB."""
    rng = np.random.default_rng(23)
    T, N, r = 3, 60_000, 4
    U = rng.normal(size=(T, N))
    tr = LowRankTransitions(0.3 * rng.normal(size=(N, r)), 0.3 * rng.normal(size=(N, r)))
    res = randomized_marginals(U, tr, 4, 4, random_state=0)
    assert np.isfinite(res.log_partition)
    assert res.pairwise is None and res.grad_left.shape == (N, r)
    # reference on the sub-lattice, with only the K x K blocks of B formed
    idx, logw, _ = res.index_sets
    Bsub = {t: tr.left[idx[t - 1]] @ tr.right[idx[t]].T for t in range(1, T)}
    alpha = U[0, idx[0]] + logw[0]
    for t in range(1, T):
        alpha = U[t, idx[t]] + logw[t] + _lse(alpha[:, None] + Bsub[t], axis=0)
    assert_allclose(res.log_partition, _lse(alpha), rtol=1e-12)
    assert_allclose(res.unary.sum(axis=1), 1.0)
