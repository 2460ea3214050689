"""predict_uncertainty: entropy of the marginals (both taggers), mutual
information and the posterior spread of the marginals (GPStructTagger)."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=60, n_classes=3, n_features=6, random_state=3)
    return X[:40], y[:40], X[40:], y[40:]


def _gp(X, y, **kw):
    return GPStructTagger(random_state=0, kernel_variance=3.0, n_predict_samples=64,
                          **kw).fit(X, y)


def test_entropy_is_that_of_the_marginals(data):
    X_tr, y_tr, X_te, _ = data
    for est in (RandomizedCRFTagger(c2=0.1).fit(X_tr, y_tr), _gp(X_tr, y_tr)):
        H = est.predict_uncertainty(X_te)
        for h, p in zip(H, est.predict_marginals(X_te)):
            assert h.shape == (p.shape[0],)
            assert_allclose(h, [-sum(q * np.log(q) for q in row if q > 0) for row in p])
            assert np.all(h >= 0) and np.all(h <= np.log(3) + 1e-12)
        seq = est.predict_uncertainty(X_te, per="sequence")
        assert_allclose(seq, [h.sum() for h in H])


def test_mutual_information_zero_when_draws_coincide(data):
    X_tr, y_tr, X_te, _ = data
    gp = _gp(X_tr, y_tr)
    mi = np.concatenate(gp.predict_uncertainty(X_te, kind="mutual_information"))
    assert mi.mean() > 1e-4  # a posterior with spread: the draws disagree
    gp.coef_var_[:] = 0.0  # a point-mass posterior: every draw is the same
    gp.transition_var_ = np.zeros_like(gp.transition_var_)
    gp.jitter = 1e-30  # Cholesky of a (numerically) zero covariance
    mi = np.concatenate(gp.predict_uncertainty(X_te, kind="mutual_information"))
    std = np.concatenate(gp.predict_uncertainty(X_te, kind="marginal_std"))
    assert_allclose(mi, 0.0, atol=1e-10)
    assert_allclose(std, 0.0, atol=1e-7)


def test_mutual_information_grows_as_training_data_shrink(data):
    X_tr, y_tr, X_te, _ = data
    small = _gp(X_tr[:4], y_tr[:4])
    large = _gp(X_tr, y_tr)
    mi_small = np.concatenate(small.predict_uncertainty(X_te, kind="mutual_information"))
    mi_large = np.concatenate(large.predict_uncertainty(X_te, kind="mutual_information"))
    assert mi_small.mean() > 2 * mi_large.mean()


def test_uncertainty_kinds_are_checked(data):
    X_tr, y_tr, X_te, _ = data
    crf = RandomizedCRFTagger().fit(X_tr, y_tr)
    with pytest.raises(ValueError, match="kind must be one of"):
        crf.predict_uncertainty(X_te, kind="mutual_information")
    gp = _gp(X_tr[:10], y_tr[:10])
    with pytest.raises(ValueError, match="per must be"):
        gp.predict_uncertainty(X_te, per="word")
    for per in ("sequence", "path"):
        with pytest.raises(ValueError, match="per token"):
            gp.predict_uncertainty(X_te, kind="marginal_std", per=per)
    std = gp.predict_uncertainty(X_te, kind="marginal_std")
    assert std[0].shape == (len(X_te[0]), 3)


def _enumerated_path_proba(est, x):
    """``p(path | x)`` of every label path of one short sequence, by
    ``predict_path_proba``."""
    paths = list(itertools.product(est.classes_, repeat=len(x)))
    return est.predict_path_proba([x] * len(paths), [np.array(p) for p in paths])


def test_path_entropy_of_the_crf_is_that_of_its_path_distribution(data):
    X_tr, y_tr, X_te, _ = data
    crf = RandomizedCRFTagger(c2=0.1).fit(X_tr, y_tr)
    short = [x[:4] for x in X_te[:5]]
    H = crf.predict_uncertainty(short, per="path")
    assert H.shape == (5,)
    for h, x in zip(H, short):
        p = _enumerated_path_proba(crf, x)
        assert_allclose(p.sum(), 1.0, rtol=1e-12)
        assert_allclose(h, -np.sum(p * np.log(p)), rtol=0, atol=1e-10)
    # the labels taken jointly: at most the summed token entropies
    assert np.all(crf.predict_uncertainty(X_te, per="path")
                  <= crf.predict_uncertainty(X_te, per="sequence") + 1e-12)


@pytest.mark.parametrize("mixture", [False, True], ids=["weight_space", "two_components"])
def test_path_entropy_of_the_gp_estimates_that_of_its_predictive_paths(data, mixture):
    """One sampled path per posterior draw: unbiased for the entropy of the
    draws' mean path distribution (``predict_path_proba``), within 4
    standard errors of ``-log p(path)`` over its ``n_predict_samples``
    (per mixture component)."""
    X_tr, y_tr, X_te, _ = data
    kw = ({"approximation": "inducing", "n_components": 2, "n_inducing": 20, "max_iter": 30}
          if mixture else {})
    gp = _gp(X_tr[:10], y_tr[:10], **kw)
    n_draws = gp.n_predict_samples * len(gp.weights_)
    short = [x[:4] for x in X_te[:6]]
    H = gp.predict_uncertainty(short, per="path")
    for h, x in zip(H, short):
        p = _enumerated_path_proba(gp, x)
        assert_allclose(p.sum(), 1.0, rtol=1e-9)
        want = -np.sum(p * np.log(p))
        se = np.sqrt(np.sum(p * np.log(p) ** 2) - want ** 2) / np.sqrt(n_draws)
        assert abs(h - want) <= 4 * se, (h, want, se)


def test_path_mutual_information(data):
    X_tr, y_tr, X_te, _ = data
    small, large = _gp(X_tr[:4], y_tr[:4]), _gp(X_tr, y_tr)
    mi_small = small.predict_uncertainty(X_te, "mutual_information", per="path")
    mi_large = large.predict_uncertainty(X_te, "mutual_information", per="path")
    assert mi_small.shape == (len(X_te),)
    assert np.all(mi_small >= 0) and np.all(mi_small <= np.log(small.n_predict_samples))
    assert mi_small.mean() > 2 * mi_large.mean()
    # the same numbers whatever else is in the batch
    again = small.predict_uncertainty(X_te[::-1], "mutual_information", per="path")[::-1]
    assert_array_equal(mi_small, again)
    H = small.predict_uncertainty(X_te, "entropy", per="path")
    assert np.all(mi_small <= H + 1e-12)
    small.coef_var_[:] = 0.0  # a point-mass posterior: every draw is the same
    small.transition_var_ = np.zeros_like(small.transition_var_)
    small.jitter = 1e-30
    assert_allclose(small.predict_uncertainty(X_te, "mutual_information", per="path"),
                    0.0, atol=1e-10)


def test_path_estimates_take_n_paths(data, monkeypatch):
    X_tr, y_tr, X_te, _ = data
    gp = _gp(X_tr[:4], y_tr[:4])
    crf = RandomizedCRFTagger(c2=0.1).fit(X_tr, y_tr)
    default = gp.predict_uncertainty(X_te, "mutual_information", per="path")
    assert_array_equal(default, gp.predict_uncertainty(X_te, "mutual_information",
                                                       per="path", n_paths=1))
    for n_paths in (3, "auto"):
        mi = gp.predict_uncertainty(X_te, "mutual_information", per="path", n_paths=n_paths)
        assert np.all(mi >= 0) and np.all(mi <= np.log(gp.n_predict_samples))
        assert not np.array_equal(mi, default)  # other paths: other estimates
        # a sequence's value whatever else is in the batch
        again = gp.predict_uncertainty(X_te[::-1], "mutual_information", per="path",
                                       n_paths=n_paths)[::-1]
        assert_array_equal(mi, again)
    # the exact entropy of the CRF samples nothing: n_paths changes nothing
    assert_array_equal(crf.predict_uncertainty(X_te, per="path", n_paths=5),
                       crf.predict_uncertainty(X_te, per="path"))
    # it reaches the estimator of every sequence
    from skgpstruct._gpstruct import predict as _gp_predict

    seen = []
    real = _gp_predict.chain.mixture_path_entropy

    def spy(*args, **kw):
        seen.append(kw["n_paths"])
        return real(*args, **kw)

    monkeypatch.setattr(_gp_predict.chain, "mixture_path_entropy", spy)
    gp.predict_uncertainty(X_te[:3], "entropy", per="path", n_paths=7)
    assert seen == [7, 7, 7]
    monkeypatch.undo()
    for est in (gp, crf):
        for bad in (0, -2, 1.5, True, None, "Auto"):
            with pytest.raises(ValueError, match="n_paths must be a positive integer or 'auto'"):
                est.predict_uncertainty(X_te, per="path", n_paths=bad)


def test_path_estimates_of_one_token_sequences_are_the_token_ones(data):
    # one token, 3 labels: fewer paths than posterior draws, so the path
    # entropy and mutual information are computed exactly given the draws,
    # the token ones of the same draws (predict_marginals')
    X_tr, y_tr, X_te, _ = data
    gp = _gp(X_tr[:6], y_tr[:6])
    one = [x[:1] for x in X_te]
    for kind in ("entropy", "mutual_information"):
        assert_allclose(gp.predict_uncertainty(one, kind, per="path"),
                        gp.predict_uncertainty(one, kind, per="sequence"), rtol=1e-9, atol=1e-12)
    assert np.all(gp.predict_uncertainty(one, per="path") <= np.log(3))
