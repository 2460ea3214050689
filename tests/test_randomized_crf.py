"""RandomizedCRFTagger: maths of its loss, sklearn conventions, bad input."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import (
    check_estimator_cloneable,
    check_estimator_repr,
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from skgpstruct import RandomizedCRFTagger, chain
from skgpstruct._sequences import SequenceData
from skgpstruct.chain import _reference as ref
from skgpstruct.datasets import make_chain_data
from skgpstruct.features import SequenceVectorizer
from skgpstruct.metrics import SCORERS


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=120, n_classes=4, n_features=8, random_state=1)
    return X[:80], y[:80], X[80:], y[80:]


def _fitted_for_objective(n_classes, n_features, transitions="full", rank=2):
    est = RandomizedCRFTagger(transitions=transitions, rank=rank, c2=0.3)
    est.classes_ = np.arange(n_classes)
    est.n_features_in_ = n_features
    est._n_top_, est._n_sampled_ = None, 0
    est.exact_ = True
    return est


@pytest.mark.parametrize("transitions", ["full", "low_rank"])
def test_exact_loss_is_crf_negative_log_likelihood_and_gradient_matches_fd(transitions):
    rng = np.random.default_rng(0)
    X, y = make_chain_data(n_sequences=5, n_classes=3, n_features=4, random_state=0)
    data = SequenceData.from_sequences(X, y)
    est = _fitted_for_objective(3, 4, transitions)
    theta = rng.normal(scale=0.5, size=est._layout()[-1])
    loss, grad = est._chunk_loss_grad(theta, data, np.zeros(5, dtype=np.int64))
    # The loss is the sum of reference CRF negative log-likelihoods.
    W, b, trans = est._unpack(theta)
    B = trans if transitions == "full" else trans[0] @ trans[1].T
    expected = -sum(ref.log_likelihood_ref(x @ W + b, B, t) for x, t in zip(X, y))
    assert loss == pytest.approx(expected, rel=1e-12)
    # Central differences, h = 1e-6: truncation O(h^2) ~ 1e-12 and rounding
    # ~ 1e-16 * |loss| / h ~ 1e-9 in absolute terms, hence atol 1e-7.
    h = 1e-6
    fd = np.empty_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        fd[i] = (
            est._chunk_loss_grad(theta + e, data, np.zeros(5, dtype=np.int64))[0]
            - est._chunk_loss_grad(theta - e, data, np.zeros(5, dtype=np.int64))[0]
        ) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    # The penalty gradient (bias excluded) too.
    pen, gpen = est._penalty(theta)
    cuts = est._layout()
    mask = np.ones_like(theta)
    mask[cuts[1] : cuts[2]] = 0
    assert pen == pytest.approx(0.3 * np.sum(mask * theta**2))
    np.testing.assert_allclose(gpen, 0.6 * mask * theta)


def test_randomized_gradient_matches_fd_with_fixed_draws(monkeypatch):
    # The training gradient treats the sub-lattice and its weights as
    # constants (the proposal depends on U, so a new draw at a perturbed
    # point would move them): hold the index sets of the first call fixed.
    from skgpstruct.chain import randomized as rdp

    original = rdp.randomized_marginals
    sets = {}

    def fixed_sets(U, B, n_top, n_sampled, *, random_state, **kw):
        if random_state in sets:
            return original(U, B, index_sets=sets[random_state])
        res = original(U, B, n_top, n_sampled, random_state=random_state, **kw)
        sets[random_state] = res.index_sets
        return res

    monkeypatch.setattr(rdp, "randomized_marginals", fixed_sets)
    rng = np.random.default_rng(3)
    X, y = make_chain_data(n_sequences=3, n_classes=6, n_features=3, random_state=2)
    data = SequenceData.from_sequences(X, y)
    est = _fitted_for_objective(6, 3)
    est._n_top_, est._n_sampled_, est.exact_ = 2, 2, False
    theta = rng.normal(scale=0.3, size=est._layout()[-1])
    seeds = np.array([5, 6, 7])
    loss, grad = est._chunk_loss_grad(theta, data, seeds)
    h = 1e-6
    idx = rng.choice(theta.size, size=25, replace=False)
    for i in idx:
        e = np.zeros_like(theta)
        e[i] = h
        fd = (est._chunk_loss_grad(theta + e, data, seeds)[0]
              - est._chunk_loss_grad(theta - e, data, seeds)[0]) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_exact_fit_predict_and_attributes(data):
    X_tr, y_tr, X_te, y_te = data
    crf = RandomizedCRFTagger(c2=0.05).fit(X_tr, y_tr)
    assert crf.exact_ and crf.n_iter_ >= 1 and len(crf.loss_history_) == crf.n_iter_
    assert crf.coef_.shape == (8, 4) and crf.transition_.shape == (4, 4)
    pred = crf.predict(X_te)
    assert [len(p) for p in pred] == [len(t) for t in y_te]
    # Viterbi on the stored parameters, recomputed independently
    for x, p in zip(X_te[:5], pred[:5]):
        path, _ = ref.viterbi_ref(x @ crf.coef_ + crf.intercept_, crf.transition_)
        np.testing.assert_array_equal(p, crf.classes_[path])
    marg = crf.predict_marginals(X_te)
    assert all(np.allclose(m.sum(axis=1), 1.0) for m in marg)
    assert crf.score(X_te, y_te) > 0.6
    assert crf.predict_single(X_te[0]).shape == (len(y_te[0]),)


def test_string_labels_and_sparse_features(data):
    X_tr, y_tr, X_te, _ = data
    names = np.array(["ADJ", "NOUN", "VERB", "X"])
    ys = [names[t] for t in y_tr]
    crf = RandomizedCRFTagger(max_iter=30).fit([sp.csr_matrix(x) for x in X_tr], ys)
    dense = RandomizedCRFTagger(max_iter=30).fit(X_tr, ys)
    assert list(crf.classes_) == list(names)
    np.testing.assert_allclose(crf.coef_, dense.coef_, atol=1e-8)
    assert set(np.concatenate(crf.predict(X_te))) <= set(names)


def test_randomized_mode_close_to_exact(data):
    X_tr, y_tr, X_te, y_te = data
    exact = RandomizedCRFTagger(optimizer="adam", max_iter=20, random_state=0)
    rand = RandomizedCRFTagger(n_top=2, n_sampled=1, max_iter=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        acc_e = exact.fit(X_tr, y_tr).score(X_te, y_te)
        acc_r = rand.fit(X_tr, y_tr).score(X_te, y_te)
    assert not rand.exact_
    assert acc_r > acc_e - 0.05


def test_n_jobs_gives_identical_model(data):
    X_tr, y_tr, _, _ = data
    kw = dict(n_top=2, n_sampled=1, max_iter=3, random_state=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = RandomizedCRFTagger(n_jobs=1, **kw).fit(X_tr, y_tr)
        b = RandomizedCRFTagger(n_jobs=2, **kw).fit(X_tr, y_tr)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.transition_, b.transition_)
    c = RandomizedCRFTagger(n_jobs=1).fit(X_tr, y_tr)
    d = RandomizedCRFTagger(n_jobs=2).fit(X_tr, y_tr)
    np.testing.assert_array_equal(c.coef_, d.coef_)


def test_beam_decoding_equals_exact_with_full_beam(data):
    X_tr, y_tr, X_te, _ = data
    crf = RandomizedCRFTagger().fit(X_tr, y_tr)
    beam = clone(crf).set_params(beam_size=4).fit(X_tr, y_tr)
    for a, b in zip(crf.predict(X_te), beam.predict(X_te)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(crf.predict_marginals(X_te), beam.predict_marginals(X_te)):
        np.testing.assert_allclose(a, b, atol=1e-10)


def test_warm_start_continues(data):
    X_tr, y_tr, _, _ = data
    crf = RandomizedCRFTagger(max_iter=200, warm_start=True).fit(X_tr, y_tr)
    first = crf.loss_history_[-1]
    crf.fit(X_tr, y_tr)
    assert crf.loss_history_[0] <= first * (1 + 1e-6)


def test_pickle_roundtrip(data):
    X_tr, y_tr, X_te, _ = data
    crf = RandomizedCRFTagger().fit(X_tr, y_tr)
    back = pickle.loads(pickle.dumps(crf))
    for a, b in zip(crf.predict(X_te), back.predict(X_te)):
        np.testing.assert_array_equal(a, b)


def test_pipeline_cross_val_and_grid_search():
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran"]
    tags = {"the": "DET", "a": "DET", "cat": "N", "mat": "N", "dog": "N",
            "sat": "V", "ran": "V", "on": "P"}
    X, y = [], []
    for _ in range(40):
        sent = list(rng.choice(words, size=rng.integers(2, 7)))
        X.append([{"w": w, "suffix": w[-1:]} for w in sent])
        y.append([tags[w] for w in sent])
    pipe = Pipeline([("vec", SequenceVectorizer()), ("crf", RandomizedCRFTagger(c2=0.01))])
    scores = cross_val_score(pipe, X, y, cv=KFold(3), scoring=SCORERS["flat_accuracy"], n_jobs=2)
    assert scores.mean() > 0.9
    grid = GridSearchCV(pipe, {"crf__c2": [0.01, 10.0]}, cv=KFold(2),
                        scoring=SCORERS["flat_accuracy"])
    grid.fit(X, y)
    assert grid.best_params_["crf__c2"] == 0.01


@pytest.mark.parametrize(
    "check",
    [check_no_attributes_set_in_init, check_parameters_default_constructible,
     check_get_params_invariance, check_set_params, check_estimator_cloneable,
     check_estimator_repr],
)
def test_sklearn_data_free_checks(check):
    check("RandomizedCRFTagger", RandomizedCRFTagger())


def test_not_fitted_and_bad_input(data):
    X_tr, y_tr, X_te, _ = data
    with pytest.raises(NotFittedError):
        RandomizedCRFTagger().predict(X_te)
    with pytest.raises(ValueError, match="single label"):
        RandomizedCRFTagger().fit(X_tr[:3], [np.zeros(len(t)) for t in y_tr[:3]])
    with pytest.raises(ValueError, match="tokens in X but"):
        RandomizedCRFTagger().fit(X_tr[:2], [y_tr[0], y_tr[1][:-1]])
    with pytest.raises(ValueError, match="NaN"):
        bad = [x.copy() for x in X_tr[:2]]
        bad[1][0, 0] = np.nan
        RandomizedCRFTagger().fit(bad, y_tr[:2])
    with pytest.raises(ValueError, match="lbfgs"):
        RandomizedCRFTagger(n_top=1, optimizer="lbfgs").fit(X_tr, y_tr)
    with pytest.raises(ValueError):
        RandomizedCRFTagger(transitions="diagonal").fit(X_tr, y_tr)
    fitted = RandomizedCRFTagger(max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted.fit(X_tr, y_tr)
    with pytest.raises(ValueError, match="features, expected 8"):
        fitted.predict([np.zeros((3, 5))])
