"""GPStructTagger.predict_information_gain: the joint posterior draws (the
weight-space and the inducing-point forms) and the expected predictive
information gain of label sequences."""

import copy
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from joblib import Parallel
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct import GPStructTagger
from skgpstruct._gpstruct.inducing_form import kernel_terms
from skgpstruct._gpstruct.information_gain import inducing_unary_draws, joint_unary_draws
from skgpstruct._gpstruct.predict import sequence_moments
from skgpstruct._gpstruct.weight_space_form import feature_design, feature_jitter
from skgpstruct._utils.memory import MemoryBudgetError
from skgpstruct._input.sequences import sequence_seeds
from skgpstruct.datasets import make_chain_data
from skgpstruct.gp.kernels import RBFKernel


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=60, n_classes=3, n_features=6, random_state=3)
    return X[:40], y[:40], X[40:], y[40:]


def _gp(X, y, **kw):
    kw.setdefault("n_predict_samples", 64)
    return GPStructTagger(random_state=0, kernel_variance=3.0, **kw).fit(X, y)


def test_values_are_reproducible_and_independent_of_the_batch(data):
    X_tr, y_tr, X_te, _ = data
    gp = _gp(X_tr[:10], y_tr[:10])
    ig = gp.predict_information_gain(X_te)
    assert ig.shape == (len(X_te),) and np.all(ig >= 0) and ig.max() > 0
    assert_array_equal(ig, gp.predict_information_gain(X_te))
    assert_array_equal(ig, gp.predict_information_gain(X_te, X_target=X_te))
    # with the target fixed a sequence's value is its own, whatever the batch
    part = gp.predict_information_gain(X_te[::-1][:7], X_target=X_te)
    assert_array_equal(part, ig[::-1][:7])
    dense = gp.predict_information_gain([np.asarray(x) for x in X_te])
    assert_array_equal(dense, ig)
    assert_array_equal(gp.set_params(n_jobs=2).predict_information_gain(X_te), ig)


def test_joint_draws_have_the_posterior_moments(data):
    X_tr, y_tr, X_te, _ = data
    gp = _gp(X_tr[:10], y_tr[:10], n_predict_samples=4000)
    seen = np.zeros(gp.n_features_in_, dtype=bool)
    seen[gp._active_features_[gp._active_features_ < gp.n_features_in_]] = True
    X_new = [x.copy() for x in X_te[:3]]
    X_new[0][:, ~seen] = 0.0  # only features seen in training
    data_new = gp._check_X(X_new)
    F = joint_unary_draws(gp._predictive(), data_new,
                          sequence_seeds(data_new, gp.predict_seed_))
    X_d = feature_design(data_new.X_flat, gp._bias_column_).toarray()
    var = gp.coef_var_.copy()
    var[:, :gp.n_features_in_][:, ~seen] = gp.temperature_ * gp.kernel_.variance
    mean = X_d @ gp.coef_.T
    cov_tok = np.einsum("nd,vd,md->vnm", X_d, var, X_d)  # (V, tokens, tokens)
    cov_tok += feature_jitter(gp._predictive().posterior) * np.eye(X_d.shape[0])[None]
    S = F.shape[0]
    sd = np.sqrt(np.einsum("vnn->nv", cov_tok))
    assert np.all(np.abs(F.mean(axis=0) - mean) < 4.5 * sd / np.sqrt(S))
    # the first sequence (seen features only) has the tagger's own moments
    b, Sigma = sequence_moments(gp._predictive(), data_new.subset([0]))
    T0 = X_new[0].shape[0]
    assert_allclose(mean[:T0], b[0], rtol=1e-10, atol=1e-12)
    assert_allclose(cov_tok[:, :T0, :T0], Sigma[0][0], rtol=1e-10, atol=1e-12)
    # covariances across tokens of different sequences, within sampling error
    emp = np.einsum("snv,smv->vnm", F - mean, F - mean) / S
    tol = 5 * np.sqrt((cov_tok ** 2 + np.einsum("vn,vm->vnm", sd.T ** 2, sd.T ** 2)) / S)
    assert np.all(np.abs(emp - cov_tok) < tol)
    a, b1 = data_new.offsets[1], data_new.offsets[2]
    assert np.abs(cov_tok[:, :a, a:b1]).max() > 10 * tol[:, :a, a:b1].max() / 5  # correlated


def test_information_gain_shrinks_with_more_training_data(data):
    X_tr, y_tr, X_te, _ = data
    small = _gp(X_tr[:4], y_tr[:4]).predict_information_gain(X_te)
    large = _gp(X_tr, y_tr).predict_information_gain(X_te)
    assert small.mean() > 2 * large.mean()


def test_only_shared_features_and_transitions_inform_the_target():
    rs = np.random.RandomState(0)
    V, D, T = 2, 4, 5

    def seqs(cols, n):
        out = []
        for _ in range(n):
            x = np.zeros((T, D))
            x[np.arange(T), rs.choice(cols, size=T)] = 1.0
            out.append(x)
        return out

    X = seqs([0, 1, 2, 3], 20)
    y = [rs.randint(V, size=T) for _ in X]
    gp = _gp(X, y, n_predict_samples=256)
    target = seqs([0], 5)  # the targets have feature 0 only
    shared, other = seqs([0], 1), seqs([3], 1)
    ig = gp.predict_information_gain(shared + other, X_target=target)
    assert ig[0] > 5 * ig[1]
    # no transition spread either: a sequence without feature 0 tells nothing,
    # up to the upward bias of a mutual information estimated from 256 draws
    assert gp._bias_column_ == 0  # no weight shared by every token
    gp.transition_var_ = np.zeros_like(gp.transition_var_)
    ig = gp.predict_information_gain(shared + other, X_target=target)
    assert ig[1] < ig[0] / 50
    gp.n_predict_samples = 2048  # the bias shrinks as 1 / draws
    ig_more = gp.predict_information_gain(shared + other, X_target=target)
    assert ig_more[1] < ig[1] / 4
    assert_allclose(ig_more[0], ig[0], rtol=0.3)


def test_unseen_features_carry_their_prior_uncertainty(data):
    X_tr, y_tr, _, _ = data
    X = [sp.csr_matrix(x) for x in X_tr[:10]]
    X = [sp.hstack([x, sp.csr_matrix((x.shape[0], 1))], format="csr") for x in X]
    gp = _gp(X, y_tr[:10])  # the last feature never active in training
    new = np.zeros((4, X[0].shape[1]))
    new[:, -1] = 1.0  # only the unseen feature
    ig = gp.predict_information_gain([new], X_target=[new, new])
    assert ig[0] > 1e-3  # its weight is drawn from the prior


def test_refusals(data, monkeypatch):
    X_tr, y_tr, X_te, _ = data
    gp = _gp(X_tr[:6], y_tr[:6])
    with pytest.raises(ValueError):
        gp.predict_information_gain([x[:, :3] for x in X_te])
    with pytest.raises(ValueError):
        gp.predict_information_gain(X_te, X_target=[np.full((3, 6), np.nan)])
    monkeypatch.setenv("SKGPSTRUCT_MEMORY_BUDGET", "1e-6")
    with pytest.raises(MemoryBudgetError, match="n_predict_samples"):
        gp.predict_information_gain(X_te)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        GPStructTagger().predict_information_gain(X_te)


# ---------------------------------------------------------------- inducing form
# The joint draws of q(f) = int p(f | u) q(u) du, the Nystrom residual across
# sequences included, and the information gain computed from them.


def _inducing_gp(X, y, **kw):
    kw.setdefault("n_predict_samples", 64)
    kw.setdefault("n_inducing", 10)
    gp = GPStructTagger(kernel=RBFKernel(), approximation="inducing", random_state=0, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence on tiny fits
        return gp.fit(X, y)


def _draws(gp, X_target, X):
    target, data = gp._check_X(X_target), gp._check_X(X)
    with Parallel(n_jobs=1) as parallel:
        return inducing_unary_draws(gp._predictive(), target, data,
                                    sequence_seeds(data, gp.predict_seed_), parallel)


@pytest.mark.parametrize("posterior, n_components", [("mean_field", 2), ("coupled", 1)])
def test_inducing_joint_draws_have_the_moments_of_the_whole_posterior(data, posterior,
                                                                    n_components):
    X_tr, y_tr, X_te, _ = data
    S = 3000
    gp = _inducing_gp(X_tr[:12], y_tr[:12], n_predict_samples=S, posterior=posterior,
             n_components=n_components)
    target, cand = X_te[:2], X_te[2:4]
    F_t, F = _draws(gp, target, cand)
    # the exact joint posterior of every token: the tagger's own moments of
    # the candidates' and the target's tokens stacked as one sequence
    b, Sigma = sequence_moments(gp._predictive(), gp._check_X([np.vstack(cand + target)]))
    G = np.concatenate([F, F_t], axis=1)  # (K S, tokens, V), candidates first
    # the prior's residual given the inducing variables: the covariance of a
    # posterior with no spread in them
    point = copy.deepcopy(gp)
    point.q_sqrt_ = np.zeros_like(gp.q_sqrt_)
    R = sequence_moments(point._predictive(),
                         gp._check_X([np.vstack(cand + target)]))[1][0][0]
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
    gp = _inducing_gp(X_tr[:10], y_tr[:10], n_inducing=2, n_predict_samples=256)
    target = X_te[:3]
    F_t, F = _draws(gp, target, [X_te[1], X_te[5]])
    T1 = X_te[1].shape[0]
    a = X_te[0].shape[0]
    twin, rows = F[:, :T1], F_t[:, a:a + T1]  # the same sequence, drawn twice
    spread = rows.std(axis=0)
    assert np.max(np.abs(twin - rows) / spread) < 0.1
    # two inducing points leave most of the variance to the residual: without
    # it the copy would not follow its twin
    A = kernel_terms(gp._predictive().posterior, gp._check_X([X_te[1]])).A
    assert np.mean(np.sum(A ** 2, axis=1)) < 0.5 * gp._predictive().posterior.factor * gp.kernel_.diag(
        X_te[1]).mean()
    # and the copy is the more informative about the target
    ig = gp.predict_information_gain([X_te[1], X_te[5]], X_target=target)
    assert ig[0] > ig[1]


def test_inducing_values_are_reproducible_and_independent_of_the_batch(data):
    X_tr, y_tr, X_te, _ = data
    gp = _inducing_gp(X_tr[:10], y_tr[:10])
    target = X_te[12:]
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


def test_inducing_information_gain_shrinks_with_more_training_data(data):
    X_tr, y_tr, X_te, _ = data
    small = _inducing_gp(X_tr[:4], y_tr[:4]).predict_information_gain(X_te)
    large = _inducing_gp(X_tr, y_tr).predict_information_gain(X_te)
    assert small.mean() > 2 * large.mean()


def test_inducing_memory_guard_counts_the_target_covariance(data, monkeypatch):
    X_tr, y_tr, X_te, _ = data
    gp = _inducing_gp(X_tr[:6], y_tr[:6], n_predict_samples=2)
    target = [np.vstack(X_te)] * 8  # the test sequences stacked, 8 times
    n_t = sum(x.shape[0] for x in target)
    draws = 8.0 * 2 * 3 * (X_te[0].shape[0] + n_t * 5)
    monkeypatch.setenv("SKGPSTRUCT_MEMORY_BUDGET", str(4 * draws / 1024 ** 3))
    assert 16.0 * n_t ** 2 > 4 * draws  # only the covariance breaks the budget
    with pytest.raises(MemoryBudgetError, match="X_target"):
        gp.predict_information_gain(X_te[:1], X_target=target)


def test_inducing_draws_carry_the_potential_scale(data):
    X_tr, y_tr, X_te, _ = data
    gp = _inducing_gp(X_tr[:8], y_tr[:8])
    F_t, F = _draws(gp, X_te[:3], X_te[3:5])
    scaled = copy.copy(gp)
    scaled._potential_scale = 0.5  # as TemperatureScaledTagger sets it at temperature 2
    G_t, G = _draws(scaled, X_te[:3], X_te[3:5])
    assert_allclose(G_t, 0.5 * F_t, rtol=1e-12)
    assert_allclose(G, 0.5 * F, rtol=1e-12)
    assert not np.allclose(scaled.predict_information_gain(X_te[3:5], X_target=X_te[:3]),
                           gp.predict_information_gain(X_te[3:5], X_target=X_te[:3]))
