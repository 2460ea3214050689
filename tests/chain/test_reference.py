"""The numpy references against brute-force enumeration and hand-worked
values (the oracles the numba kernels are tested against must themselves
be right)."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp

from skgpstruct.chain import _reference as ref

def test_hand_worked_two_by_two():
    """T = 2, V = 2: the four paths written out by hand."""
    U = np.array([[1.0, 0.5], [0.2, -0.3]])
    B = np.array([[0.1, -1.0], [0.7, 0.0]])
    start, end = np.array([0.3, 0.0]), np.array([0.0, -0.4])
    scores = {
        (i, j): U[0, i] + start[i] + B[i, j] + U[1, j] + end[j] for i in (0, 1) for j in (0, 1)
    }
    log_z = math.log(sum(math.exp(s) for s in scores.values()))
    assert_allclose(ref.log_partition_ref(U, B, start, end), log_z, rtol=1e-14)
    assert_allclose(ref.brute_force_log_partition(U, B, start, end), log_z, rtol=1e-14)
    p = {k: math.exp(s - log_z) for k, s in scores.items()}
    unary, pairwise = ref.marginals_ref(U, B, start, end)
    assert_allclose(unary, [[p[0, 0] + p[0, 1], p[1, 0] + p[1, 1]], [p[0, 0] + p[1, 0], p[0, 1] + p[1, 1]]])
    assert_allclose(pairwise, [[p[0, 0], p[0, 1]], [p[1, 0], p[1, 1]]])
    best = max(scores, key=scores.get)
    path, score = ref.viterbi_ref(U, B, start, end)
    assert tuple(path) == best and score == pytest.approx(scores[best])
    assert_allclose(ref.log_likelihood_ref(U, B, [1, 0], start, end), scores[1, 0] - log_z)
    # forward lattice: fwd[1, j] = log sum_i exp(U0[i] + start[i] + B[i, j]) + U1[j] + end[j]
    fwd = ref.forward_log_ref(U, B, start, end)
    assert_allclose(fwd[1], [math.log(math.exp(scores[0, j]) + math.exp(scores[1, j])) for j in (0, 1)])
    # pseudo-likelihood by hand for y = (1, 0)
    Uf = U + np.vstack([start, end])
    pl = (
        Uf[0, 1] - math.log(math.exp(Uf[0, 0]) + math.exp(Uf[0, 1]))
        + Uf[1, 0] - math.log(math.exp(Uf[1, 0]) + math.exp(Uf[1, 1]))
        + B[1, 0] - math.log(math.exp(B[1, 0]) + math.exp(B[1, 1]))
        + B[1, 0] - math.log(math.exp(B[0, 0]) + math.exp(B[1, 0]))
    )
    assert_allclose(ref.pseudo_log_likelihood_ref(U, B, [1, 0], start, end), pl, rtol=1e-14)
    assert_allclose(ref.pseudo_log_likelihood_by_definition(U, B, [1, 0], start, end), pl, rtol=1e-14)


def test_logsumexp_helper_matches_scipy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 4)) * 300
    a[1] = -np.inf
    a[2, :2] = -np.inf
    for axis in (0, 1):
        assert_array_equal(np.isneginf(ref._logsumexp(a, axis)), np.isneginf(logsumexp(a, axis=axis)))
        assert_allclose(ref._logsumexp(a, axis), logsumexp(a, axis=axis), rtol=1e-13)
    sm = ref._softmax(a, axis=1)
    assert_allclose(sm[1], 0.0)
    assert_allclose(sm[[0, 2, 3, 4]].sum(axis=1), 1.0)


def test_reference_matches_brute_force(tiny_shape, start_end, chain_problem,
                                       assert_matches_brute_force):
    """log Z, marginals, log-likelihood and Viterbi (to 1e-10, also in
    relative terms), the log-likelihood gradient and the pseudo-likelihood."""
    T, V = tiny_shape
    kw, y = chain_problem(10 * T + V + 100 * start_end, T, V, start_end=start_end)
    got = assert_matches_brute_force(
        kw, y, log_partition=ref.log_partition_ref, marginals=ref.marginals_ref,
        log_likelihood=ref.log_likelihood_ref, viterbi=ref.viterbi_ref,
    )
    bu, bp = got.bu, got.bp
    assert_allclose(bu.sum(axis=1), 1.0, atol=1e-12)
    value, gU, gB = ref.log_likelihood_grad_ref(y=y, **kw)
    onehot = np.eye(V)[y]
    assert_allclose(gU, onehot - bu, atol=1e-10)
    counts = np.zeros((V, V))
    for t in range(1, T):
        counts[y[t - 1], y[t]] += 1
    assert_allclose(gB, counts - bp, atol=1e-10)
    assert_allclose(
        ref.pseudo_log_likelihood_ref(y=y, **kw),
        ref.pseudo_log_likelihood_by_definition(y=y, **kw),
        rtol=0,
        atol=1e-10,
    )
    assert_allclose(ref.pseudo_log_likelihood_grad_ref(y=y, **kw)[0], ref.pseudo_log_likelihood_ref(y=y, **kw))


def test_brute_force_viterbi_tie_rule():
    """All paths tie: the chosen one is all zeros; with the last position
    forced to 1, the lowest labels before it."""
    U, B = np.zeros((3, 3)), np.zeros((3, 3))
    assert_array_equal(ref.brute_force_viterbi(U, B)[0], [0, 0, 0])
    U[2] = [-1.0, 0.0, 0.0]
    assert_array_equal(ref.brute_force_viterbi(U, B)[0], [0, 0, 1])
    assert_array_equal(ref.viterbi_ref(U, B)[0], [0, 0, 1])


def test_reference_batched_loops_over_samples():
    rng = np.random.default_rng(2)
    S, T, V = 3, 4, 3
    U, B = rng.standard_normal((S, T, V)), rng.standard_normal((S, V, V))
    start = rng.standard_normal(V)
    log_z = ref.log_partition_ref(U, B, start)
    unary, pairwise = ref.marginals_ref(U, B, start)
    paths, scores = ref.viterbi_ref(U, B, start)
    assert log_z.shape == (S,) and unary.shape == (S, T, V) and pairwise.shape == (S, V, V)
    assert paths.shape == (S, T) and scores.shape == (S,)
    for s in range(S):
        assert_allclose(log_z[s], ref.brute_force_log_partition(U[s], B[s], start), atol=1e-10)
        assert_allclose(unary[s], ref.brute_force_marginals(U[s], B[s], start)[0], atol=1e-10)


def test_reference_minus_inf_is_safe():
    """Every path forbidden: -inf, zero marginals, no NaN and no warning
    (pytest turns warnings into errors)."""
    U = np.zeros((3, 2))
    B = np.full((2, 2), -np.inf)
    assert ref.log_partition_ref(U, B) == -np.inf
    assert ref.brute_force_log_partition(U, B) == -np.inf
    unary, pairwise = ref.marginals_ref(U, B)
    assert np.all(unary == 0) and np.all(pairwise == 0)
    bu, bp = ref.brute_force_marginals(U, B)
    assert np.all(bu == 0) and np.all(bp == 0)
    assert ref.log_likelihood_ref(U, B, [0, 1, 0]) == -np.inf
    assert ref.brute_force_log_likelihood(U, B, [0, 1, 0]) == -np.inf
    value, gU, gB = ref.pseudo_log_likelihood_grad_ref(U, B, [0, 1, 0])
    assert value == -np.inf and not np.isnan(gU).any() and not np.isnan(gB).any()
    assert ref.pseudo_log_likelihood_by_definition(U, B, [0, 1, 0]) == -np.inf


def test_brute_force_rejects_batched_and_huge():
    with pytest.raises(ValueError, match="one sequence"):
        ref.brute_force_log_partition(np.zeros((2, 3, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="too many"):
        ref.brute_force_log_partition(np.zeros((30, 4)), np.zeros((4, 4)))
