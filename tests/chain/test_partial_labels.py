"""Partial labels (``-1``: unknown) in the chain kernels: the likelihood of
the known labels and its gradients against enumeration of the paths that
agree with them, every kernel path (log space, linear space, the BLAS
training pass, the fused CRF pass) and finite differences."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skgpstruct import chain
from skgpstruct.chain import _reference as ref


def _problem(seed, T, V, scale=1.5):
    rng = np.random.default_rng(seed)
    U = rng.normal(scale=scale, size=(T, V))
    B = rng.normal(scale=scale, size=(V, V))
    y = rng.integers(V, size=T)
    y[rng.random(T) < 0.5] = -1
    if (y >= 0).all():
        y[rng.integers(T)] = -1
    return U, B, y


@pytest.mark.parametrize("T,V", [(1, 3), (2, 2), (4, 3), (5, 2), (3, 4)])
def test_single_matches_enumeration(T, V):
    for seed in range(4):
        U, B, y = _problem(seed, T, V)
        want, gU_want, gB_want = ref.brute_force_partial_log_likelihood(U, B, y)
        assert_allclose(chain.log_likelihood(U, B, y), want, rtol=1e-12, atol=1e-12)
        value, gU, gB = chain.log_likelihood_grad(U, B, y)
        assert_allclose(value, want, rtol=1e-12, atol=1e-12)
        assert_allclose(gU, gU_want, atol=1e-12)
        assert_allclose(gB, gB_want, atol=1e-12)


def test_all_known_and_all_unknown_are_the_edge_cases():
    U, B, y = _problem(0, 4, 3)
    full = np.abs(y)  # every label known
    assert_allclose(chain.log_likelihood(U, B, full),
                    ref.brute_force_log_likelihood(U, B, full), atol=1e-12)
    # nothing known: the likelihood of no observation is 1, no gradient
    value, gU, gB = chain.log_likelihood_grad(U, B, np.full(4, -1))
    assert abs(value) < 1e-12
    assert np.abs(gU).max() < 1e-12 and np.abs(gB).max() < 1e-12


def test_batched_and_start_end():
    rng = np.random.default_rng(3)
    U = rng.normal(size=(3, 4, 3))
    B = rng.normal(size=(3, 3))
    start, end = rng.normal(size=3), rng.normal(size=3)
    y = np.array([1, -1, -1, 2])
    values, gU, gB = chain.log_likelihood_grad(U, B, y, start, end)
    for s in range(3):
        want, gU_w, gB_w = ref.brute_force_partial_log_likelihood(U[s], B, y, start, end)
        assert_allclose(values[s], want, atol=1e-12)
        assert_allclose(gU[s], gU_w, atol=1e-12)
        assert_allclose(gB[s], gB_w, atol=1e-12)


def test_forbidden_known_label_gives_minus_inf():
    U, B, y = _problem(1, 3, 3)
    y[:] = [0, -1, 2]
    U[0, 0] = -np.inf
    assert chain.log_likelihood(U, B, y) == -np.inf
    assert chain.log_likelihood_grad(U, B, y)[0] == -np.inf


@pytest.mark.parametrize("V", [3, 9])  # 9: the BLAS training pass
def test_ragged_mixes_partial_and_full_sequences(V):
    rng = np.random.default_rng(V)
    lengths = np.array([3, 1, 4, 2, 3, 4])
    n = lengths.sum()
    U = rng.normal(size=(n, V))
    B = rng.normal(size=(V, V))
    y = rng.integers(V, size=n)
    offsets = np.r_[0, np.cumsum(lengths)]
    for k in (0, 2, 5):  # three partial sequences among full ones
        a, b = offsets[k], offsets[k + 1]
        y[a] = -1
        if b - a > 2:
            y[a + 2] = -1
    values, gU, gB = chain.log_likelihood_grad_ragged(U, lengths, B, y)
    gB_want = np.zeros((V, V))
    for k in range(len(lengths)):
        a, b = offsets[k], offsets[k + 1]
        if V ** (b - a) > 10 ** 5:
            continue
        want, gU_w, gB_w = ref.brute_force_partial_log_likelihood(U[a:b], B, y[a:b])
        assert_allclose(values[k], want, atol=1e-11)
        assert_allclose(gU[a:b], gU_w, atol=1e-11)
        gB_want += gB_w
    # the summed gB against the per-sequence (non-BLAS) kernel
    per = chain.log_likelihood_grad_ragged(U, lengths, np.broadcast_to(B, (6, V, V)), y)[2]
    assert_allclose(gB, per.sum(axis=0), atol=1e-11)


def test_gradient_matches_finite_differences():
    U, B, y = _problem(7, 5, 3)
    value, gU, gB = chain.log_likelihood_grad(U, B, y)
    h = 1e-6
    for idx in np.ndindex(U.shape):
        Up, Um = U.copy(), U.copy()
        Up[idx] += h
        Um[idx] -= h
        fd = (chain.log_likelihood(Up, B, y) - chain.log_likelihood(Um, B, y)) / (2 * h)
        assert abs(fd - gU[idx]) < 1e-7
    for idx in np.ndindex(B.shape):
        Bp, Bm = B.copy(), B.copy()
        Bp[idx] += h
        Bm[idx] -= h
        fd = (chain.log_likelihood(U, Bp, y) - chain.log_likelihood(U, Bm, y)) / (2 * h)
        assert abs(fd - gB[idx]) < 1e-7


def test_labels_below_minus_one_are_refused():
    U, B, y = _problem(0, 3, 3)
    y[0] = -2
    with pytest.raises(ValueError, match="unknown"):
        chain.log_likelihood(U, B, y)


@pytest.mark.parametrize("V", [3, 9])
def test_partial_sequences_run_in_linear_space_and_match_log_space(V):
    from skgpstruct.chain import exact
    from skgpstruct.chain._exact_kernels import _fb_ragged_kernel as log_space

    rng = np.random.default_rng(11)
    lengths = np.array([5, 3, 6, 1, 4])
    n = lengths.sum()
    U, B = rng.normal(size=(n, V)), rng.normal(size=(V, V))
    y = rng.integers(V, size=n)
    y[rng.random(n) < 0.4] = -1
    assert not exact._ragged_fallbacks(U, lengths, B, y).any()
    values, gU, gB = chain.log_likelihood_grad_ragged(U, lengths, B, y)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    zeros = np.zeros(V)
    gU_ref, gB_ref = np.empty_like(U), np.empty((len(lengths), V, V))
    ref_values = log_space(U, offsets, B[None], zeros, zeros, y, gU_ref, gB_ref)
    np.testing.assert_allclose(values, ref_values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gU, gU_ref, atol=1e-12)
    np.testing.assert_allclose(gB, gB_ref.sum(axis=0), atol=1e-11)
    # batched (the weight-noise pass's kernel): many draws of one sequence
    Ub = rng.normal(size=(4, 5, V))
    yb = np.array([1, -1, -1, 0, -1]) % V
    yb[[1, 2, 4]] = -1
    vb, gUb, gBb = chain.log_likelihood_grad(Ub, B, yb)
    for k in range(4):
        want, gU_w, gB_w = ref.brute_force_partial_log_likelihood(Ub[k], B, yb)
        assert_allclose(vb[k], want, atol=1e-12)
        assert_allclose(gUb[k], gU_w, atol=1e-12)
        assert_allclose(gBb[k], gB_w, atol=1e-12)
