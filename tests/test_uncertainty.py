"""predict_uncertainty: entropy of the marginals (both taggers), mutual
information and the posterior spread of the marginals (GPStructTagger)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

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
    with pytest.raises(ValueError, match="per token"):
        gp.predict_uncertainty(X_te, kind="marginal_std", per="sequence")
    std = gp.predict_uncertainty(X_te, kind="marginal_std")
    assert std[0].shape == (len(X_te[0]), 3)
