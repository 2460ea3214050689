"""skgpstruct.crfsuite: sklearn-crfsuite's CRF, metrics and scorers."""

import inspect
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct import crfsuite as sklearn_crfsuite
from skgpstruct.crfsuite import metrics, scorers
from skgpstruct.features import SequenceVectorizer

#: sklearn-crfsuite 0.5's CRF.__init__ parameters and defaults.
CRFSUITE_PARAMS = {
    "algorithm": None, "min_freq": None, "all_possible_states": None,
    "all_possible_transitions": None, "c1": None, "c2": None, "max_iterations": None,
    "num_memories": None, "epsilon": None, "period": None, "delta": None,
    "linesearch": None, "max_linesearch": None, "calibration_eta": None,
    "calibration_rate": None, "calibration_samples": None,
    "calibration_candidates": None, "calibration_max_trials": None, "pa_type": None,
    "c": None, "error_sensitive": None, "averaging": None, "variance": None,
    "gamma": None, "verbose": False, "model_filename": None, "keep_tempfiles": False,
    "trainer_cls": None,
}
#: Its public methods and attributes: each has a counterpart here, but the
#: python-crfsuite objects (documented in the class's Notes and the docs).
CRFSUITE_API = {
    "fit", "predict", "predict_single", "predict_marginals",
    "predict_marginals_single", "score", "classes_", "size_", "num_attributes_",
    "attributes_", "state_features_", "transition_features_", "training_log_",
    "get_params", "set_params", "modelfile",
}
NOT_PROVIDED = {"tagger_", "modelfile"}


def words(n, seed):
    """Tokens as feature dicts: a determiner-noun-verb toy language."""
    rng = np.random.default_rng(seed)
    vocab = {"D": ["the", "a", "this"], "N": ["cat", "dog", "idea", "man"],
             "V": ["ran", "sleeps", "saw"]}
    X, y = [], []
    for _ in range(n):
        tags = ["D", "N", "V"] + (["D", "N"] if rng.random() < 0.5 else [])
        toks = [str(rng.choice(vocab[t])) for t in tags]
        X.append([{"bias": 1.0, "w": w, "suffix": w[-2:], "first": i == 0}
                  for i, w in enumerate(toks)])
        y.append(tags)
    return X, y


@pytest.fixture(scope="module")
def data():
    return words(40, 0)


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    return sklearn_crfsuite.CRF(c1=0.1, c2=0.1, max_iterations=100,
                                all_possible_transitions=True).fit(X, y)


def test_constructor_has_sklearn_crfsuites_parameters_and_defaults():
    params = inspect.signature(sklearn_crfsuite.CRF).parameters
    for name, default in CRFSUITE_PARAMS.items():
        assert name in params, name
        assert params[name].default == default, name


def test_against_installed_sklearn_crfsuite():
    real = pytest.importorskip("sklearn_crfsuite")
    ours = inspect.signature(sklearn_crfsuite.CRF).parameters
    for name, p in inspect.signature(real.CRF).parameters.items():
        assert ours[name].default == p.default, name
    public = {n for n in dir(real.CRF) if not n.startswith("_")} | {"training_log_"}
    missing = public - set(dir(sklearn_crfsuite.CRF)) - {"training_log_"} - NOT_PROVIDED
    assert not missing, missing


def test_every_crfsuite_method_and_attribute_works(fitted, data):
    X, y = data
    for name in CRFSUITE_API - NOT_PROVIDED:
        assert hasattr(fitted, name), name
    pred = fitted.predict(X)
    assert pred.dtype == object and len(pred) == len(X)
    assert all(isinstance(p, list) and all(type(v) is str for v in p) for p in pred)
    assert fitted.predict_single(X[0]) == pred[0]
    margs = fitted.predict_marginals(X)
    single = fitted.predict_marginals_single(X[0])
    assert margs[0] == single and len(single) == len(X[0])
    assert all(set(tok) == set(fitted.classes_) for tok in single)
    assert all(abs(sum(tok.values()) - 1) < 1e-9 for tok in single)
    assert fitted.classes_ == ["D", "N", "V"]
    assert fitted.score(X, y) == metrics.flat_accuracy_score(y, pred)
    assert fitted.num_attributes_ == len(fitted.attributes_)
    assert "w:cat" in fitted.attributes_ and "first" in fitted.attributes_
    assert fitted.size_ > 8 * fitted.num_attributes_
    # keys as crfsuite's: (attribute, label) and (label, label)
    state = fitted.state_features_
    assert state and all(a in fitted.attributes_ and lab in fitted.classes_
                         for a, lab in state)
    assert state[("w:cat", "N")] > 0
    trans = fitted.transition_features_
    assert set(trans) <= {(a, b) for a in "DNV" for b in "DNV"}
    assert trans[("D", "N")] > trans[("D", "V")]
    log = fitted.training_log_
    assert len(log.iterations) == fitted.pipeline_[-1].n_iter_
    assert [it["num"] for it in log.iterations] == list(range(1, len(log.iterations) + 1))
    assert all(it["time"] >= 0 for it in log.iterations)
    assert log.last_iteration["loss"] == fitted.pipeline_[-1].loss_curve_[-1]


def test_is_the_randomized_crf_underneath(fitted, data):
    """The same model as the package's Pipeline at the same settings."""
    X, y = data
    pipe = make_pipeline(SequenceVectorizer(separator=":"),
                         RandomizedCRFTagger(c1=0.1, c2=0.1, max_iter=100,
                                             optimizer="lbfgs",
                                             all_possible_states=False)).fit(X, y)
    np.testing.assert_allclose(pipe[-1].coef_, fitted.pipeline_[-1].coef_)
    ours = pipe.predict_proba(X)
    theirs = fitted.predict_marginals(X)
    for m, d in zip(ours, theirs):
        np.testing.assert_allclose(m, [[tok[c] for c in fitted.classes_] for tok in d])


def test_crfsuite_defaults_map_to_c2_1_and_observed_states(data):
    X, y = data
    crf = sklearn_crfsuite.CRF().fit(X, y)
    tagger = crf.pipeline_[-1]
    assert (tagger.c1, tagger.c2, tagger.all_possible_states) == (0.0, 1.0, False)
    every = sklearn_crfsuite.CRF(all_possible_states=True).fit(X, y)
    assert len(every.state_features_) > len(crf.state_features_)


def test_tokens_as_lists_of_strings(data):
    X, y = data
    X_str = [[[f"w:{tok['w']}", f"suffix:{tok['suffix']}"] for tok in seq] for seq in X]
    crf = sklearn_crfsuite.CRF(c2=0.1).fit(X_str, y)
    assert crf.score(X_str, y) > 0.9
    assert "w:cat" in crf.attributes_


def test_min_freq_drops_rare_attributes(data):
    X, y = data
    X2 = [list(seq) for seq in X]
    X2[0] = [dict(tok, rare="once") for tok in X2[0]]
    counts = sklearn_crfsuite.CRF(c2=0.1).fit(X2, y).attributes_
    cut = sklearn_crfsuite.CRF(c2=0.1, min_freq=len(X2[0])).fit(X2, y).attributes_
    assert "rare:once" in counts and "rare:once" not in cut
    assert "w:cat" in cut


def test_dev_set_scores_in_the_log(data):
    X, y = data
    crf = sklearn_crfsuite.CRF(c2=0.1).fit(X[:30], y[:30], X_dev=X[30:], y_dev=y[30:])
    last = crf.training_log_.last_iteration
    assert set(last["scores"]) == {"D", "N", "V"}
    assert last["item_accuracy_float"] == crf.score(X[30:], y[30:])
    with pytest.raises(ValueError, match="both X_dev and y_dev"):
        sklearn_crfsuite.CRF().fit(X, y, X_dev=X)


def test_l2sgd_trains_the_same_objective(data):
    X, y = data
    crf = sklearn_crfsuite.CRF(algorithm="l2sgd", c2=0.1, max_iterations=50,
                               random_state=0).fit(X, y)
    assert crf.pipeline_[-1].optimizer == "adagrad"
    assert crf.score(X, y) > 0.9
    with pytest.raises(ValueError, match="c1 applies to algorithm='lbfgs'"):
        sklearn_crfsuite.CRF(algorithm="l2sgd", c1=0.1).fit(X, y)


@pytest.mark.parametrize("params, match", [
    ({"algorithm": "ap"}, "averaged perceptron"),
    ({"algorithm": "arow"}, "AROW"),
    ({"algorithm": "bogus"}, "algorithm must be one of"),
    ({"pa_type": 2}, "pa_type is a parameter of algorithm='pa'"),
    ({"variance": 1.0}, "algorithm='arow'"),
    ({"period": 5}, "period=5"),
    ({"linesearch": "Newton"}, "linesearch must be one of"),
    ({"model_filename": "model.crfsuite"}, "python-crfsuite model files"),
    ({"trainer_cls": object}, "trainer_cls"),
    ({"tagger": "svm"}, "tagger must be"),
])
def test_settings_without_equivalent_are_clear_errors(data, params, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        sklearn_crfsuite.CRF(**params).fit(X, y)


def test_documented_no_ops_are_accepted(data):
    X, y = data
    base = sklearn_crfsuite.CRF(c2=0.1).fit(X, y)
    noop = sklearn_crfsuite.CRF(c2=0.1, num_memories=3, linesearch="Backtracking",
                                max_linesearch=5, keep_tempfiles=True,
                                calibration_eta=0.5).fit(X, y)
    np.testing.assert_array_equal(base.pipeline_[-1].coef_, noop.pipeline_[-1].coef_)


def test_epsilon_and_delta_give_the_stricter_tolerance(data):
    X, y = data
    crf = sklearn_crfsuite.CRF(epsilon=1e-3, delta=1e-7).fit(X, y)
    assert crf.pipeline_[-1].tol == 1e-7


def test_not_fitted_is_a_clear_error(data):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        sklearn_crfsuite.CRF().predict(data[0])


def test_clone_pickle_repr_and_grid_search(fitted, data):
    X, y = data
    assert "c1=0.1" in repr(fitted)
    assert clone(fitted).get_params() == fitted.get_params()
    back = pickle.loads(pickle.dumps(fitted))
    assert list(back.predict(X)) == list(fitted.predict(X))
    assert back.predict_marginals(X[:2])[0] == fitted.predict_marginals(X[:2])[0]
    f1 = make_scorer(metrics.flat_f1_score, average="weighted", labels=["N", "V"])
    search = GridSearchCV(sklearn_crfsuite.CRF(max_iterations=20),
                          {"c2": [0.01, 1.0]}, cv=2, scoring=f1).fit(X, y)
    assert search.best_params_["c2"] in (0.01, 1.0)
    assert scorers.flat_accuracy(search.best_estimator_, X, y) > 0.9
    assert 0 <= scorers.sequence_accuracy(search.best_estimator_, X, y) <= 1


def test_gp_underneath(data):
    X, y = data
    with pytest.warns(UserWarning, match="c1, c2 do not apply"):
        gp = sklearn_crfsuite.CRF(tagger="gp", c1=0.1, c2=0.1, random_state=0).fit(X, y)
    margs = gp.predict_marginals(X[:3])
    assert abs(sum(margs[0][0].values()) - 1) < 1e-9
    assert gp.score(X, y) > 0.9
    assert gp.pipeline_[-1].predict_uncertainty(gp.pipeline_[0].transform(X[:2]))
    # the posterior means as crfsuite's weights
    np.testing.assert_array_equal(
        gp.state_features_[("w:cat", "N")],
        gp.pipeline_[-1].coef_[1, gp.attributes_.index("w:cat")])
    assert gp.transition_features_[("D", "N")] == gp.pipeline_[-1].transition_mean_[0, 1]
    inducing = sklearn_crfsuite.CRF(
        tagger=GPStructTagger(approximation="inducing", n_inducing=10, random_state=0))
    with pytest.raises(AttributeError, match="needs weights per attribute"):
        inducing.fit(X, y).state_features_
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sklearn_crfsuite.CRF(tagger=RandomizedCRFTagger(c2=0.5)).fit(X, y)


def test_metrics_are_sklearn_crfsuites(data):
    y = [["B", "I", "O"], ["O", "B"]]
    p = [["B", "O", "O"], ["O", "B"]]
    assert metrics.flat_accuracy_score(y, p) == 0.8
    assert metrics.sequence_accuracy_score(y, p) == 0.5
    from sklearn.metrics import fbeta_score, f1_score
    flat_y, flat_p = sum(y, []), sum(p, [])
    assert metrics.flat_fbeta_score(y, p, 2, average="macro") == fbeta_score(
        flat_y, flat_p, beta=2, average="macro")
    assert metrics.flat_f1_score(y, p, average="weighted") == f1_score(
        flat_y, flat_p, average="weighted")
    assert "precision" in metrics.flat_classification_report(y, p)
    with pytest.raises(ValueError):
        metrics.flat_accuracy_score(y, [["B", "I"], ["O", "B"]])  # misaligned
