"""The GP's expected log-likelihood on partial labels (``-1``: unknown):
against an independent Monte Carlo estimate with the likelihood of the known
labels by enumeration, and the ELBO's gradients (inducing-point and
weight-space forms) against finite differences."""

import numpy as np
import pytest

from skgpstruct.chain._reference import brute_force_partial_log_likelihood
from skgpstruct.gp import RBFKernel, compute_gp_terms, draw_normals, expected_log_likelihood
from skgpstruct.gp.weight_space import WeightSpaceObjective
from skgpstruct.likelihoods import CRFLikelihood

from .test_elbo import ATOL, H, RTOL, _dense_moments, _objective, _problem, _random_params, _start
from .test_weight_space import _problem as _ws_problem
from .test_weight_space import _random_x

CRF = CRFLikelihood()


def _hide(y, seed, p=0.5):
    y = y.copy()
    y[np.random.default_rng(seed).random(y.size) < p] = -1
    return y


@pytest.mark.parametrize("seed", [0, 1])
def test_ell_on_partial_labels_matches_brute_force_monte_carlo(seed):
    X, Z, y, lengths = _problem(6, lengths=(1, 3, 4), V=2)
    y = _hide(y, seed)
    y[0] = 1  # the length-1 sequence keeps its label
    kernel = RBFKernel(1.5, 1.0)
    K, V, M, S = 1, 2, Z.shape[0], 4000
    _, _, p = _random_params(K, V, M, seed=7)
    terms = compute_gp_terms(kernel, X, lengths, Z, jitter=1e-4)
    seeds = np.random.default_rng(seed).integers(0, 2**31, lengths.size)
    eps, eps_bin = draw_normals(lengths, K, V, S, seeds)
    ours = expected_log_likelihood(CRF, terms, y, p, eps, eps_bin, return_grad=False)
    mean, cov = _dense_moments(kernel, X, Z, 1e-4, p.q_mu, p.q_sqrt)
    rng = np.random.default_rng(seed + 1000)
    N = X.shape[0]
    for n in range(lengths.size):
        s, e = terms.offsets[n], terms.offsets[n + 1]
        T = e - s
        idx = np.concatenate([j * N + np.arange(s, e) for j in range(V)])
        f = rng.multivariate_normal(mean[0, s:e].T.ravel(), cov[0][np.ix_(idx, idx)], S)
        F = f.reshape(S, V, T).transpose(0, 2, 1)
        B = p.m_bin + np.sqrt(p.s_bin) * rng.standard_normal((S, V, V))
        lp = np.array([brute_force_partial_log_likelihood(F[i], B[i], y[s:e])[0]
                       for i in range(S)])
        var = lp.var(ddof=1) / S
        # two independent averages of S draws: 5 SE of the difference
        assert abs(ours[n] - lp.mean()) <= 5 * np.sqrt(2 * var) + 1e-12
    # a sequence with an unknown label contributes less than when it is known
    full = expected_log_likelihood(CRF, terms, np.abs(y), p, eps, eps_bin, return_grad=False)
    assert np.all(ours >= full - 1e-12)


@pytest.mark.parametrize("coupled", [False, True], ids=["mean_field", "coupled"])
def test_elbo_gradient_on_partial_labels(coupled, assert_grad_fd):
    X, Z, y, lengths = _problem(12, lengths=(1, 3, 4), V=2, M=4)
    y = _hide(y, 3)
    assert (y < 0).any()
    f = _objective("crf", RBFKernel(length_scale=1.3, variance=0.8), X, Z, y, lengths, 2, 2,
                   coupled=coupled)
    x0 = _start(f, seed=13)
    idx, seeds = np.arange(3), np.array([1, 2, 3])
    value, grad = f(x0, idx, seeds, scale=1.7)
    assert_grad_fd(lambda x: f(x, idx, seeds, scale=1.7)[0], x0, grad, h=H, rtol=RTOL,
                   atol=ATOL)
    assert np.abs(grad[f.layout.slices["q_sqrt"]]).max() > 0.1


def test_weight_space_gradient_on_partial_labels(check_weight_space_grad):
    X, lengths, y = _ws_problem(0)
    y = _hide(y, 4)
    assert (y < 0).any()
    obj = WeightSpaceObjective(CRF, X, lengths, y, 3, learn_variance=True,
                               learn_transition_var=True, jitter=1e-2, n_samples=5)
    x = _random_x(obj.layout, 5)
    n = obj.lengths.size
    check_weight_space_grad(obj, x, np.arange(n), np.arange(100, 100 + n), 1.7, (True, True))
