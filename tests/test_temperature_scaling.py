"""TemperatureScaledTagger and the taggers' potential scale
(``skgpstruct.calibration``).

- the scale hook: a CRF with its potentials scaled is the CRF with its
  weights scaled (marginals, path probabilities, path entropy; full and
  low-rank transitions, beam marginals and decoding), its marginals match
  brute-force enumeration of ``exp(s * score)``, and a GP's scaled
  marginals are the average of the forward-backward marginals of its
  scaled posterior draws;
- the search: a CRF whose potentials are a known multiple of the model
  that generated the held-out labels gets that multiple back as its
  temperature (within a tolerance far below the multiples tested);
- the chosen temperature is a local minimum of the held-out log loss and
  no worse than 1;
- sklearn conventions, prefit mode, Pipelines and bad input.
"""

import copy
import itertools
import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from skgpstruct import GPStructTagger, RandomizedCRFTagger, chain
from skgpstruct._gpstruct.predict import (posterior_draws, sequence_moments,
                                         with_shared_transitions)
from skgpstruct._input.sequences import sequence_seeds
from skgpstruct.calibration import TemperatureScaledTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.features import SequenceVectorizer
from skgpstruct.metrics import marginal_log_loss


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=80, n_classes=3, n_features=6, noise=1.0,
                           random_state=3)[:2]
    return X[:50], y[:50], X[50:], y[50:]


def _crf(**kw):
    return RandomizedCRFTagger(n_top=None, c2=0.1, random_state=0, **kw)


def _scaled_copy(crf, s):
    out = copy.deepcopy(crf)
    out._potential_scale = s
    return out


@pytest.mark.parametrize("transitions", ["full", "low_rank", "beam"])
def test_crf_scale_is_the_crf_with_scaled_weights(data, transitions):
    X_tr, y_tr, X_te, _ = data
    kw = {"low_rank": {"transitions": "low_rank", "rank": 2},
          "beam": {"beam_size": 2}}.get(transitions, {})
    crf = _crf(**kw).fit(X_tr, y_tr)
    s = 2.5
    weights = copy.deepcopy(crf)
    weights.coef_ = s * crf.coef_
    weights.intercept_ = s * crf.intercept_
    if transitions == "low_rank":
        weights.transition_left_ = s * crf.transition_left_
    else:
        weights.transition_ = s * crf.transition_
    scaled = _scaled_copy(crf, s)
    for a, b in zip(scaled.predict_marginals(X_te), weights.predict_marginals(X_te)):
        assert_allclose(a, b, rtol=1e-10, atol=1e-13)
    assert_allclose(scaled.predict_path_proba(X_te, log=True),
                    weights.predict_path_proba(X_te, log=True), rtol=1e-10)
    assert_allclose(scaled.predict_uncertainty(X_te, per="path"),
                    weights.predict_uncertainty(X_te, per="path"), rtol=1e-10)
    # the scale changed something, and the Viterbi paths did not change
    assert not np.allclose(scaled.predict_marginals(X_te)[0], crf.predict_marginals(X_te)[0])
    for a, b in zip(scaled.predict(X_te), crf.predict(X_te)):
        assert_array_equal(a, b)


def test_crf_scaled_marginals_by_enumeration(data):
    X_tr, y_tr, X_te, _ = data
    crf = _crf().fit(X_tr, y_tr)
    s = 0.4
    x = X_te[0][:4]
    U = x @ crf.coef_ + crf.intercept_
    B = crf.transition_
    T, V = U.shape
    expected = np.zeros((T, V))
    for path in itertools.product(range(V), repeat=T):
        score = sum(U[t, path[t]] for t in range(T)) + sum(
            B[path[t - 1], path[t]] for t in range(1, T))
        w = np.exp(s * score)
        for t in range(T):
            expected[t, path[t]] += w
    expected /= expected.sum(axis=1, keepdims=True)
    assert_allclose(_scaled_copy(crf, s).predict_marginals([x])[0], expected, rtol=1e-10)


@pytest.mark.parametrize("approximation", ["features", "inducing"])
def test_gp_scaled_marginals_average_the_scaled_draws(data, approximation):
    X_tr, y_tr, X_te, _ = data
    gp = GPStructTagger(approximation=approximation, kernel_variance=1.0,
                        n_inducing=10, n_samples=8, n_predict_samples=16, max_iter=20,
                        random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(X_tr[:20], y_tr[:20])
    s = 1.7
    scaled = _scaled_copy(gp, s)
    got = scaled.predict_marginals(X_te[:3])
    # reference: the unscaled posterior draws, scaled, through forward-backward
    from skgpstruct._input.sequences import SequenceData

    d = SequenceData.from_sequences(X_te[:3], n_features=gp.n_features_in_)
    b, Sigma = sequence_moments(gp._predictive(), d)
    seeds = sequence_seeds(d, gp.predict_seed_)
    # the draws every prediction takes: the transitions shared by the
    # sequences, the unary draws the sequence's own
    pred = with_shared_transitions(gp._predictive())
    for i in range(3):
        b_n = b[:, d.offsets[i]: d.offsets[i + 1]]
        F, Bd, _ = posterior_draws(pred, b_n, Sigma[i], seeds[i])
        ref = sum(w * chain.marginals(s * F[0, k], s * Bd[0, k])[0].mean(axis=0)
                  for k, w in enumerate(gp.weights_))
        assert_allclose(got[i], ref, rtol=1e-10, atol=1e-13)
    assert not np.allclose(got[0], gp.predict_marginals(X_te[:1])[0])


def _sampled_labels(crf, X, factor, seed):
    """Labels drawn from the CRF whose potentials are ``factor`` times
    ``crf``'s."""
    rng = np.random.default_rng(seed)
    out = []
    for x in X:
        U = factor * (x @ crf.coef_ + crf.intercept_)
        path = chain.sample_paths(U, factor * crf.transition_, random_state=rng)
        out.append(crf.classes_[path])
    return out


@pytest.mark.parametrize("multiple", [3.0, 0.4])
def test_temperature_recovers_a_known_over_or_under_confidence(multiple):
    """A model whose potentials are ``multiple`` times those of the model
    the labels come from is calibrated by ``tau = multiple``."""
    X, y = make_chain_data(n_sequences=60, n_classes=3, n_features=6, noise=1.0,
                           random_state=5)[:2]
    truth = _crf().fit(X, y)
    X_held = make_chain_data(n_sequences=400, n_classes=3, n_features=6, noise=1.0,
                             random_state=6)[0]
    y_held = _sampled_labels(truth, X_held, 1.0, seed=7)
    wrong = copy.deepcopy(truth)
    wrong.coef_ = multiple * truth.coef_
    wrong.intercept_ = multiple * truth.intercept_
    wrong.transition_ = multiple * truth.transition_
    ts = TemperatureScaledTagger(wrong, cv="prefit").fit(X_held, y_held)
    # about 5,000 tokens: the log-loss minimiser is within a few percent
    assert abs(np.log(ts.temperature_ / multiple)) < 0.1
    before, after = ts.calibration_log_loss_
    assert after < before - 0.01
    # the prefit estimator itself is left as it was
    assert wrong._potential_scale == 1.0
    assert_allclose(wrong.coef_, multiple * truth.coef_)
    # a scale already set (a scaled tagger scaled again) composes
    hacked = _scaled_copy(truth, multiple)
    again = TemperatureScaledTagger(hacked, cv="prefit").fit(X_held, y_held)
    assert again.temperature_ == pytest.approx(ts.temperature_, rel=1e-3)
    assert hacked._potential_scale == multiple
    assert again.estimator_._potential_scale == pytest.approx(
        multiple / again.temperature_)


def test_chosen_temperature_is_a_local_minimum(data):
    X_tr, y_tr, X_te, y_te = data
    crf = RandomizedCRFTagger(n_top=None, c2=0.001, random_state=0).fit(X_tr, y_tr)
    ts = TemperatureScaledTagger(crf, cv="prefit").fit(X_te, y_te)

    def loss(tau):
        m = _scaled_copy(crf, 1.0 / tau)
        return marginal_log_loss(y_te, m.predict_marginals(X_te), labels=crf.classes_)

    tau = ts.temperature_
    assert_allclose(loss(tau), ts.calibration_log_loss_[1], rtol=1e-10)
    assert_allclose(loss(1.0), ts.calibration_log_loss_[0], rtol=1e-10)
    assert loss(tau) <= loss(1.0)
    assert loss(tau) <= loss(tau * 1.05) and loss(tau) <= loss(tau / 1.05)
    # and the fitted tagger predicts with it
    assert_allclose(np.concatenate(ts.predict_marginals(X_te)),
                    np.concatenate(_scaled_copy(crf, 1.0 / tau).predict_marginals(X_te)),
                    rtol=1e-12)


def test_cross_validated_fit(data):
    X_tr, y_tr, X_te, y_te = data
    crf = RandomizedCRFTagger(n_top=None, c2=0.001, random_state=0)
    ts = TemperatureScaledTagger(crf, cv=3).fit(X_tr, y_tr)
    assert 0.05 <= ts.temperature_ <= 20.0
    assert ts.calibration_log_loss_[1] <= ts.calibration_log_loss_[0]
    # the final tagger is the estimator fitted on all the data, scaled
    full = clone(crf).fit(X_tr, y_tr)
    assert_allclose(ts.estimator_.coef_, full.coef_)
    assert ts.estimator_._potential_scale == pytest.approx(1.0 / ts.temperature_)
    assert not hasattr(ts, "predict_information_gain")  # the CRF has none
    assert crf._potential_scale == 1.0 and not hasattr(crf, "coef_")
    assert_array_equal(ts.classes_, full.classes_)
    assert ts.n_features_in_ == full.n_features_in_
    # deterministic
    again = TemperatureScaledTagger(crf, cv=3).fit(X_tr, y_tr)
    assert again.temperature_ == ts.temperature_
    # the methods of the tagger, scaled
    assert ts.score(X_te, y_te) == pytest.approx(full.score(X_te, y_te))
    assert len(ts.predict_path_proba(X_te)) == len(X_te)
    assert len(ts.predict_uncertainty(X_te, "entropy", per="sequence")) == len(X_te)
    d = ts.predict_marginals(X_te[:1], output="dict")[0][0]
    assert set(d) == set(full.classes_.tolist())
    assert_array_equal(ts.predict_single(X_te[1]), ts.predict([X_te[1]])[0])
    assert_array_equal(ts.predict_marginals_single(X_te[1]), ts.predict_marginals([X_te[1]])[0])
    assert ts.predict_marginals_single(X_te[0], output="dict")[0] == d
    restored = pickle.loads(pickle.dumps(ts))
    assert_allclose(np.concatenate(restored.predict_proba(X_te)),
                    np.concatenate(ts.predict_proba(X_te)))


def test_gp_smoke(data):
    X_tr, y_tr, X_te, _ = data
    gp = GPStructTagger(kernel_variance=1.0, n_samples=4, n_predict_samples=16,
                        max_iter=15, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ts = TemperatureScaledTagger(gp, cv=2).fit(X_tr[:24], y_tr[:24])
    mi = ts.predict_uncertainty(X_te[:4], "mutual_information", per="path")
    assert mi.shape == (4,) and np.all(mi >= 0)
    assert ts.estimator_._potential_scale == pytest.approx(1.0 / ts.temperature_)
    ig = ts.predict_information_gain(X_te[:4], X_target=X_te[:6])
    assert ig.shape == (4,) and np.all(ig >= 0)
    unscaled = copy.copy(ts.estimator_)
    unscaled._potential_scale = 1.0
    if ts.temperature_ != 1.0:  # the scale reaches the draws
        assert not np.allclose(ig, unscaled.predict_information_gain(X_te[:4], X_te[:6]))


def test_sklearn_conventions(data):
    X_tr, y_tr, _, _ = data
    name = "TemperatureScaledTagger"
    est = TemperatureScaledTagger(_crf(), cv=2)
    check_no_attributes_set_in_init(name, est)
    check_parameters_default_constructible(name, TemperatureScaledTagger())
    check_get_params_invariance(name, est)
    check_set_params(name, est)
    assert clone(est).get_params()["estimator"].get_params() == _crf().get_params()
    with pytest.raises(NotFittedError):
        est.predict(X_tr)
    # the default estimator is the plain CRF
    default = TemperatureScaledTagger(cv=2).fit(X_tr[:20], y_tr[:20])
    assert isinstance(default.estimator_, RandomizedCRFTagger)
    scores = cross_val_score(est, X_tr, y_tr, cv=KFold(2))
    assert np.all(scores > 0.5)
    grid = GridSearchCV(est, {"estimator__c2": [0.01, 1.0]}, cv=KFold(2)).fit(X_tr, y_tr)
    assert grid.best_params_["estimator__c2"] in (0.01, 1.0)


def test_pipeline_estimator():
    sentences = [["the", "cat", "sat"], ["a", "dog", "ran", "off"], ["the", "dog", "sat"],
                 ["a", "cat", "ran"], ["the", "cat", "ran", "off"], ["a", "dog", "sat"]] * 3
    words = [[{"w": w} for w in sent] for sent in sentences]
    tags = [["D", "N", "V"], ["D", "N", "V", "P"], ["D", "N", "V"], ["D", "N", "V"],
            ["D", "N", "V", "P"], ["D", "N", "V"]] * 3
    pipe = Pipeline([("vec", SequenceVectorizer()), ("tagger", _crf())])
    ts = TemperatureScaledTagger(pipe, cv=3).fit(words, tags)
    assert ts.estimator_[-1]._potential_scale == pytest.approx(1.0 / ts.temperature_)
    proba = ts.predict_marginals(words[:2])
    assert_allclose(proba[0].sum(axis=1), 1.0)
    assert ts.predict_proba(words[:2], output="dict") == ts.predict_marginals(
        words[:2], output="dict")
    pipe_of_ts = Pipeline([("ts", ts)])  # keyword forwarded through a Pipeline too
    assert pipe_of_ts.predict_proba(words[:2], output="dict")[0][0] == pytest.approx(
        ts.predict_marginals(words[:2], output="dict")[0][0])
    assert ts.predict(words[:1])[0].tolist() == ["D", "N", "V"]
    assert not hasattr(ts, "predict_path_proba")  # a Pipeline does not route it
    assert not hasattr(ts, "n_features_in_")  # dict features: the vectorizer has none


def test_refit_with_a_pipeline_drops_the_earlier_n_features_in(data):
    X_tr, y_tr, _, _ = data
    ts = TemperatureScaledTagger(_crf(), cv=3).fit(X_tr, y_tr)
    assert ts.n_features_in_ == X_tr[0].shape[1]
    words = [[{"w": str(int(v > 0))} for v in x[:, 0]] for x in X_tr]
    pipe = Pipeline([("vec", SequenceVectorizer()), ("tagger", _crf())])
    ts.set_params(estimator=pipe).fit(words, y_tr)
    assert not hasattr(ts, "n_features_in_")


def test_groups_reach_the_splitter(data):
    """``groups`` go to the splitter: the same temperature as the splits it
    makes from them, given as an iterable; and not the group-blind one."""
    X_tr, y_tr, _, _ = data
    groups = np.arange(len(X_tr)) % 7  # e.g. the documents of the sequences
    splits = list(GroupKFold(3).split(np.zeros(len(X_tr)), groups=groups))
    for train, test in splits:
        assert not set(groups[train]) & set(groups[test])
    crf = RandomizedCRFTagger(n_top=None, c2=0.001, random_state=0)
    by_groups = TemperatureScaledTagger(crf, cv=GroupKFold(3)).fit(X_tr, y_tr, groups=groups)
    given = TemperatureScaledTagger(crf, cv=splits).fit(X_tr, y_tr)
    assert by_groups.temperature_ == given.temperature_
    assert by_groups.calibration_log_loss_ == given.calibration_log_loss_
    plain = TemperatureScaledTagger(crf, cv=3).fit(X_tr, y_tr)
    assert plain.calibration_log_loss_ != given.calibration_log_loss_
    with pytest.raises(ValueError, match="groups"):  # sklearn's: GroupKFold needs them
        TemperatureScaledTagger(crf, cv=GroupKFold(3)).fit(X_tr, y_tr)
    with pytest.raises(ValueError, match="one entry per sequence"):
        TemperatureScaledTagger(crf, cv=GroupKFold(3)).fit(X_tr, y_tr, groups=groups[:-1])
    fitted = clone(crf).fit(X_tr, y_tr)
    with pytest.raises(ValueError, match="prefit"):
        TemperatureScaledTagger(fitted, cv="prefit").fit(X_tr, y_tr, groups=groups)


def test_bad_input(data):
    X_tr, y_tr, _, _ = data
    with pytest.raises(TypeError, match="skgpstruct tagger"):
        TemperatureScaledTagger(LogisticRegression(), cv=2).fit(X_tr, y_tr)
    with pytest.raises(NotFittedError):
        TemperatureScaledTagger(_crf(), cv="prefit").fit(X_tr, y_tr)
    for bad in [(1.0, 0.5), (0.0, 2.0), (0.1,), (0.1, np.inf)]:
        with pytest.raises(ValueError, match="temperature_range"):
            TemperatureScaledTagger(_crf(), temperature_range=bad).fit(X_tr, y_tr)
    with pytest.raises(ValueError, match="different numbers of sequences"):
        TemperatureScaledTagger(_crf(), cv=2).fit(X_tr, y_tr[:-1])
    with pytest.raises(ValueError, match="only 2 sequences"):
        TemperatureScaledTagger(_crf(), cv=3).fit(X_tr[:2], y_tr[:2])
    with pytest.raises(ValueError):
        TemperatureScaledTagger(_crf(), cv="later").fit(X_tr, y_tr)
    with pytest.raises(TypeError, match="lists"):
        TemperatureScaledTagger(_crf(), cv=2).fit(iter(X_tr), y_tr)


@pytest.mark.parametrize("cv", ["prefit", "splits"])
def test_held_out_labels_checked_against_X(data, cv):
    """The labels must line up with X's tokens before any temperature is
    chosen: with cv="prefit" nothing else would check them (a shifted
    label sequence was once scored silently), with given splits the
    held-out folds' labels are never fitted."""
    X_tr, y_tr, _, _ = data
    if cv == "prefit":
        est, cv = _crf().fit(X_tr, y_tr), "prefit"
    else:
        est, cv = _crf(), [(np.arange(0, 20), np.arange(20, 40))]
    ts = TemperatureScaledTagger(est, cv=cv)
    short = [t[:-1] for t in y_tr[:40]]
    with pytest.raises(ValueError, match="Sequence 0 has .* tokens in X but .* labels in y"):
        ts.fit(X_tr[:40], short)
    # one sequence too long and another too short, the same total
    shifted = [np.append(y_tr[0], y_tr[0][0]), y_tr[1][:-1]] + list(y_tr[2:40])
    with pytest.raises(ValueError, match="tokens in X but"):
        ts.fit(X_tr[:40], shifted)
    with pytest.raises(ValueError, match="is a string"):
        ts.fit(X_tr[:1], ["abc"])
    with pytest.raises(ValueError, match="must be 1-D"):
        ts.fit(X_tr[:40], [np.asarray(t)[:, None] for t in y_tr[:40]])
    with pytest.raises(TypeError, match="list of label sequences"):
        ts.fit(X_tr[0], np.asarray(y_tr[0]))
    with pytest.raises(ValueError, match="empty"):
        ts.fit([], [])


def test_range_without_one(data):
    """The search stays in the range; the loss at 1 is still reported."""
    X_tr, y_tr, X_te, y_te = data
    crf = RandomizedCRFTagger(n_top=None, c2=0.001, random_state=0).fit(X_tr, y_tr)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ts = TemperatureScaledTagger(crf, cv="prefit", temperature_range=(1.5, 3.0)).fit(
            X_te, y_te)
    assert 1.5 <= ts.temperature_ <= 3.0
    assert np.isfinite(ts.calibration_log_loss_[0])
    # the optimum of this range is its lower end: the user is told
    assert ts.temperature_ == pytest.approx(1.5, rel=2e-3)
    assert [str(w.message) for w in caught if "lower end" in str(w.message)]


def test_warns_only_when_the_temperature_sits_at_the_range_edge(data):
    """A range that stops short of the optimum warns, naming its end; one
    that contains it does not."""
    X_tr, y_tr, X_te, y_te = data
    crf = RandomizedCRFTagger(n_top=None, c2=0.001, random_state=0).fit(X_tr, y_tr)
    free = TemperatureScaledTagger(crf, cv="prefit").fit(X_te, y_te)
    tau = free.temperature_
    assert 0.06 < tau < 15  # inside the default range, away from its ends
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        TemperatureScaledTagger(crf, cv="prefit").fit(X_te, y_te)
    with pytest.warns(UserWarning, match="upper end of temperature_range"):
        short = TemperatureScaledTagger(crf, cv="prefit",
                                        temperature_range=(0.05, 0.9 * tau)).fit(X_te, y_te)
    assert short.temperature_ == pytest.approx(0.9 * tau, rel=2e-3)
    with pytest.warns(UserWarning, match="lower end of temperature_range"):
        TemperatureScaledTagger(crf, cv="prefit",
                                temperature_range=(1.1 * tau, 20.0)).fit(X_te, y_te)
