"""GPStructTagger.predict_information_gain in the inducing-point form: the
joint draws of q(f) = int p(f | u) q(u) du, the Nystrom residual across
sequences included, and the information gain computed from them."""

import copy
import warnings

import numpy as np
import pytest
from joblib import Parallel
from numpy.testing import assert_array_equal

from skgpstruct import GPStructTagger
from skgpstruct._memory import MemoryBudgetError
from skgpstruct._sequences import sequence_seeds
from skgpstruct.datasets import make_chain_data
from skgpstruct.gp.kernels import RBFKernel


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=80, n_classes=3, n_features=6, random_state=3)
    return X[:40], y[:40], X[40:], y[40:]


def _gp(X, y, **kw):
    kw.setdefault("n_predict_samples", 64)
    kw.setdefault("n_inducing", 10)
    gp = GPStructTagger(kernel=RBFKernel(), approximation="inducing", random_state=0, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence on tiny fits
        return gp.fit(X, y)


def _draws(gp, X_target, X):
    target, data = gp._check_X(X_target), gp._check_X(X)
    with Parallel(n_jobs=1) as parallel:
        return gp._inducing_unary_draws(target, data, sequence_seeds(data, gp.predict_seed_),
                                        parallel)


@pytest.mark.parametrize("posterior, n_components", [("mean_field", 2), ("coupled", 1)])
def test_joint_draws_have_the_moments_of_the_whole_posterior(data, posterior, n_components):
    X_tr, y_tr, X_te, _ = data
    S = 3000
    gp = _gp(X_tr[:12], y_tr[:12], n_predict_samples=S, posterior=posterior,
             n_components=n_components)
    target, cand = X_te[:2], X_te[2:4]
    F_t, F = _draws(gp, target, cand)
    # the exact joint posterior of every token: the tagger's own moments of
    # the candidates' and the target's tokens stacked as one sequence
    b, Sigma = gp._sequence_moments(gp._check_X([np.vstack(cand + target)]))
    G = np.concatenate([F, F_t], axis=1)  # (K S, tokens, V), candidates first
    # the prior's residual given the inducing variables: the covariance of a
    # posterior with no spread in them
    point = copy.deepcopy(gp)
    point.q_sqrt_ = np.zeros_like(gp.q_sqrt_)
    R = point._sequence_moments(gp._check_X([np.vstack(cand + target)]))[1][0][0]
    R = R[0] if posterior == "mean_field" else R[:len(b[0]), :len(b[0])]
    n, V = G.shape[1], G.shape[2]
    nc, T0 = F.shape[1], cand[0].shape[0]
    for k in range(n_components):
        Gk = G[k * S:(k + 1) * S]  # the draws of component k
        if posterior == "coupled":  # (V n, V n), label-major
            cov = Sigma[0][k].reshape(V, n, V, n)
            cov = np.stack([cov[j, :, j, :] for j in range(V)])
        else:
            cov = Sigma[0][k]  # (V, n, n)
        sd = np.sqrt(np.einsum("vnn->nv", cov))
        assert np.all(np.abs(Gk.mean(axis=0) - b[k]) < 5 * sd / np.sqrt(S))
        D = Gk - b[k]
        emp = np.einsum("snv,smv->vnm", D, D) / S
        tol = 5 * np.sqrt((cov ** 2 + np.einsum("nv,mv->vnm", sd ** 2, sd ** 2)) / S)
        # each candidate is joint with the target and itself; two candidates
        # are correlated through the inducing variables and the target, their
        # residuals independent given the target's (a score never needs both)
        expected = cov.copy()
        c1, c2 = slice(0, T0), slice(T0, nc)
        drop = R[c1, c2] - R[c1, nc:] @ np.linalg.solve(R[nc:, nc:], R[nc:, c2])
        expected[:, c1, c2] -= drop
        expected[:, c2, c1] -= drop.T
        assert np.all(np.abs(emp - expected) < tol)
        if posterior == "coupled":  # and across labels
            full = Sigma[0][k].reshape(V, n, V, n)[0, :, 1, :]
            emp01 = np.einsum("sn,sm->nm", D[..., 0], D[..., 1]) / S
            tol01 = 5 * np.sqrt((full ** 2 + np.outer(sd[:, 0] ** 2, sd[:, 1] ** 2)) / S)
            assert np.all(np.abs(emp01 - full) < tol01)
    # the candidates and the target are correlated well beyond the noise
    assert np.abs(cov[:, :nc, nc:]).max() > 4 * tol[:, :nc, nc:].max() / 5


def test_tokens_repeated_across_sequences_share_their_residual(data):
    X_tr, y_tr, X_te, _ = data
    gp = _gp(X_tr[:10], y_tr[:10], n_inducing=2, n_predict_samples=256)
    target = X_te[:3]
    F_t, F = _draws(gp, target, [X_te[1], X_te[5]])
    T1 = X_te[1].shape[0]
    a = X_te[0].shape[0]
    copy, rows = F[:, :T1], F_t[:, a:a + T1]  # the same sequence, drawn twice
    spread = rows.std(axis=0)
    assert np.max(np.abs(copy - rows) / spread) < 0.1
    # two inducing points leave most of the variance to the residual: without
    # it the copy would not follow its twin
    A = gp._whitened_cross(gp._check_X([X_te[1]]).X_flat)
    assert np.mean(np.sum(A ** 2, axis=1)) < 0.5 * gp._fixed_kernel()[1] * gp.kernel_.diag(
        X_te[1]).mean()
    # and the copy is the more informative about the target
    ig = gp.predict_information_gain([X_te[1], X_te[5]], X_target=target)
    assert ig[0] > ig[1]


def test_values_are_reproducible_and_independent_of_the_batch(data):
    X_tr, y_tr, X_te, _ = data
    gp = _gp(X_tr[:10], y_tr[:10])
    target = X_te[20:]
    ig = gp.predict_information_gain(X_te[:12], X_target=target)
    assert ig.shape == (12,) and np.all(ig >= 0) and ig.max() > 0
    assert_array_equal(ig, gp.predict_information_gain(X_te[:12], X_target=target))
    part = gp.predict_information_gain(X_te[:12][::-1][:5], X_target=target)
    assert_array_equal(part, ig[::-1][:5])
    assert_array_equal(gp.set_params(n_jobs=2).predict_information_gain(
        X_te[:12], X_target=target), ig)
    own = gp.set_params(n_jobs=1).predict_information_gain(X_te[:12])  # the pool as target
    assert own.shape == (12,) and np.all(own >= 0)
    assert_array_equal(own, gp.predict_information_gain(X_te[:12]))


def test_information_gain_shrinks_with_more_training_data(data):
    X_tr, y_tr, X_te, _ = data
    small = _gp(X_tr[:4], y_tr[:4]).predict_information_gain(X_te)
    large = _gp(X_tr, y_tr).predict_information_gain(X_te)
    assert small.mean() > 2 * large.mean()


def test_memory_guard_counts_the_target_covariance(data, monkeypatch):
    X_tr, y_tr, X_te, _ = data
    gp = _gp(X_tr[:6], y_tr[:6], n_predict_samples=2)
    target = [np.vstack(X_te)] * 8  # 8 x 40 x T tokens
    n_t = sum(x.shape[0] for x in target)
    draws = 8.0 * 2 * 3 * (X_te[0].shape[0] + n_t * 5)
    monkeypatch.setenv("SKGPSTRUCT_MEMORY_BUDGET", str(4 * draws / 1024 ** 3))
    assert 16.0 * n_t ** 2 > 4 * draws  # only the covariance breaks the budget
    with pytest.raises(MemoryBudgetError, match="X_target"):
        gp.predict_information_gain(X_te[:1], X_target=target)
