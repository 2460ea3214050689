"""The fused training kernels of the exact CRF (chain/_crf_training_kernels.py)
and the objective built on them (_tagging/exact_objective.py) against numpy
references, the package's chain functions and finite differences."""

import numpy as np
import pytest
import scipy.sparse as sp
from joblib import Parallel

from skgpstruct._input.sequences import SequenceData
from skgpstruct._tagging.crf_objective import CRFSpec, crf_loss_grad, layout, penalty
from skgpstruct._tagging.exact_objective import ExactCRFObjective
from skgpstruct.chain import log_likelihood_grad_ragged
from skgpstruct.chain._crf_training_kernels import chunks_loss_grad, csr_unary, scatter_weights
from skgpstruct.chain.backend import get_backend


def _data(V, n=300, F=40, seed=0, max_len=9):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len, size=n)
    X = sp.random(int(lengths.sum()), F, density=0.1, random_state=seed, format="csr")
    X.data = rng.standard_normal(X.nnz)
    y = rng.integers(0, V, size=int(lengths.sum()))
    return SequenceData(X, lengths, y), rng


def _csr(X):
    return X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data


def test_csr_unary_matches_the_sparse_product_and_masks():
    data, rng = _data(5)
    X, V = data.X_flat, 5
    W, b = rng.standard_normal((X.shape[1], V)), rng.standard_normal(V)
    allowed = rng.random((X.shape[0], V)) < 0.7
    U = np.empty((X.shape[0] - 7, V))
    csr_unary(*_csr(X), W, b, allowed, 7, X.shape[0], U)
    expected = np.asarray(X[7:] @ W) + b
    expected[~allowed[7:]] = -np.inf
    np.testing.assert_allclose(U, expected, rtol=1e-12, atol=1e-12)
    csr_unary(*_csr(X), W, b, np.ones((0, V), dtype=bool), 0, X.shape[0] - 7, U)
    np.testing.assert_allclose(U, (np.asarray(X @ W) + b)[:-7], rtol=1e-12, atol=1e-12)


def test_scatter_weights_matches_the_transposed_product_on_any_split():
    data, rng = _data(6)
    X, V = data.X_flat, 6
    gU, W = rng.standard_normal((X.shape[0], V)), rng.standard_normal((X.shape[1], V))
    expected = 0.4 * W - np.asarray(X.T @ gU)
    whole = np.empty_like(W)
    scatter_weights(*_csr(X), gU, W, 0.4, 0, X.shape[1], whole)
    np.testing.assert_allclose(whole, expected, rtol=1e-12, atol=1e-12)
    parts = np.empty_like(W)
    for f0, f1 in [(0, 3), (3, 17), (17, X.shape[1])]:
        scatter_weights(*_csr(X), gU, W, 0.4, f0, f1, parts)
    np.testing.assert_array_equal(parts, whole)  # the same bits, whatever the split


@pytest.mark.parametrize("V", [3, 12])  # one sequence at a time, and the BLAS pass
def test_chunks_loss_grad_matches_the_chain_function(V):
    data, rng = _data(V)
    X = data.X_flat
    W, b = rng.standard_normal((X.shape[1], V)), rng.standard_normal(V)
    B = rng.standard_normal((V, V))
    bounds = np.array([0, 100, 250, data.n_sequences], dtype=np.int64)
    gU = np.empty((X.shape[0], V))
    gB, gb = np.empty((3, V, V)), np.empty((3, V))
    losses, fell = np.empty(3), np.empty(data.n_sequences, dtype=np.int8)
    chunks_loss_grad(*_csr(X), W, b, np.ones((0, V), dtype=bool), data.offsets, data.y_flat,
                     B[None], bounds, 0, 3, gU, gB, gb, losses, fell)
    U = np.asarray(X @ W) + b
    for c in range(3):
        s0, s1 = bounds[c], bounds[c + 1]
        a, e = data.offsets[s0], data.offsets[s1]
        values, g_U, g_B = log_likelihood_grad_ragged(U[a:e], data.lengths[s0:s1], B,
                                                      data.y_flat[a:e])
        assert losses[c] == pytest.approx(-values.sum(), rel=1e-12)
        np.testing.assert_allclose(gU[a:e], g_U, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(gB[c], g_B, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(gb[c], -g_U.sum(axis=0), rtol=1e-9, atol=1e-10)
    assert not fell.any()


@pytest.mark.parametrize("V, transitions", [(3, "full"), (12, "full"), (12, "low_rank")])
def test_objective_matches_crf_loss_grad_and_is_the_same_for_any_n_jobs(V, transitions):
    data, rng = _data(V)
    spec = CRFSpec(np.arange(V), c2=0.3, transitions=transitions, rank=4)
    F = data.X_flat.shape[1]
    theta = rng.standard_normal(layout(spec, F)[-1])
    n = data.n_sequences
    with get_backend("cpu") as backend:
        loss, grad = crf_loss_grad(spec, theta, data, np.arange(n), np.zeros(n, int), None,
                                   backend)
    pen, gpen = penalty(spec, theta, F)
    value, g = ExactCRFObjective(spec, data)(theta)
    assert value == pytest.approx(loss + pen, rel=1e-12)
    np.testing.assert_allclose(g, grad + gpen, rtol=1e-10, atol=1e-10)
    with Parallel(n_jobs=2, prefer="threads") as parallel:
        objective = ExactCRFObjective(spec, data, parallel)
        assert objective.n_threads == 2 and len(objective._chunk_cuts) == 3
        value2, g2 = objective(theta)
    assert value2 == value
    np.testing.assert_array_equal(g2, g)


def test_objective_gradient_matches_finite_differences_without_intercept():
    data, rng = _data(4, n=20, F=6)
    spec = CRFSpec(np.arange(4), c2=0.2, fit_intercept=False)
    objective = ExactCRFObjective(spec, data)
    theta = 0.5 * rng.standard_normal(layout(spec, 6)[-1])
    _, g = objective(theta)
    cuts = layout(spec, 6)
    np.testing.assert_array_equal(g[cuts[1]:cuts[2]], 0.0)  # the bias stays 0
    eps = 1e-6
    for i in rng.choice(np.r_[0:cuts[1], cuts[2]:cuts[3]], size=12, replace=False):
        step = np.zeros_like(theta)
        step[i] = eps
        fd = (objective(theta + step)[0] - objective(theta - step)[0]) / (2 * eps)
        assert g[i] == pytest.approx(fd, rel=1e-6, abs=1e-6)


def test_objective_with_an_allowed_mask_is_the_constrained_loss():
    data, rng = _data(4, n=30, F=6)
    spec = CRFSpec(np.arange(4), c2=0.0)
    theta = rng.standard_normal(layout(spec, 6)[-1])
    allowed = np.ones((data.n_tokens, 4), dtype=bool)
    allowed[np.arange(data.n_tokens), (data.y_flat + 1) % 4] = False  # never the gold
    masked, _ = ExactCRFObjective(spec, data, allowed=allowed)(theta)
    plain, _ = ExactCRFObjective(spec, data)(theta)
    assert masked < plain  # fewer competing paths: a smaller partition function
    allowed[0, data.y_flat[0]] = False  # the gold path forbidden: infinite loss
    with pytest.raises(ValueError, match="non-finite"):
        ExactCRFObjective(spec, data, allowed=allowed)(theta)
    with pytest.raises(ValueError, match="shape"):
        ExactCRFObjective(spec, data, allowed=allowed[1:])


def test_dense_rows_product_matches_numpy_and_does_not_depend_on_the_batch():
    from skgpstruct._input.sequences import _dense_product

    rng = np.random.default_rng(3)
    X, W = rng.standard_normal((40, 200)), rng.standard_normal((200, 7))
    X[rng.random(X.shape) < 0.3] = 0.0
    out = _dense_product(X, W)
    np.testing.assert_allclose(out, X @ W, rtol=1e-12, atol=1e-12)
    for rows in ([0], [0, 1], list(range(17))):
        np.testing.assert_array_equal(_dense_product(X[rows], W), out[rows])


def test_all_possible_states_false_trains_only_the_seen_pairs():
    from skgpstruct import RandomizedCRFTagger
    from skgpstruct._tagging.crf_solver import fit_crf
    from skgpstruct._tagging.exact_objective import seen_states

    data, _ = _data(4, n=12, F=60, seed=2)
    seen = seen_states(data.X_flat, data.y_flat, 4).astype(bool)
    assert 0 < seen.sum() < seen.size  # some pairs never occur
    fits = {}
    for c1 in (0.0, 0.3):
        spec = CRFSpec(np.arange(4), c2=0.1, c1=c1, all_possible_states=False)
        fits[c1] = fit_crf(data, spec, max_iter=50)
        assert not fits[c1].coef[~seen].any()
        with Parallel(n_jobs=2, prefer="threads") as parallel:
            again = fit_crf(data, spec, max_iter=50, parallel=parallel)
        np.testing.assert_array_equal(again.coef, fits[c1].coef)
    assert np.count_nonzero(fits[0.0].coef[seen]) == seen.sum()
    # every pair is free without the restriction
    full = fit_crf(data, CRFSpec(np.arange(4), c2=0.1), max_iter=50)
    unseen = ~seen & seen.any(axis=1)[:, None]  # of the features some token has
    assert unseen.any() and np.count_nonzero(full.coef[unseen]) == unseen.sum()
    # a warm start's unseen weights are dropped
    init = fit_crf(data, CRFSpec(np.arange(4), c2=0.1, all_possible_states=False), full,
                   max_iter=50)
    assert not init.coef[~seen].any()
    with pytest.raises(ValueError, match="all_possible_states=False"):
        RandomizedCRFTagger(all_possible_states=False, optimizer="adam").fit(
            data.split(data.X_flat.toarray()), data.split(data.y_flat))
