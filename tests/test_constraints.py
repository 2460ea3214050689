"""Constraints at prediction (``allowed=``): both taggers' conditional
marginals, path probabilities, decoding, n-best paths and uncertainty
against enumeration of the paths (the unconstrained path probabilities
restricted to the allowed set and renormalised), through Pipeline and
TemperatureScaledTagger, and the errors of bad constraints."""

import itertools

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct.calibration import TemperatureScaledTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.features import SequenceVectorizer

T, V = 4, 3
ALLOWED = [None, [0, 2], 1, None]


@pytest.fixture(scope="module", params=["crf", "gp"])
def fitted(request):
    X, y = make_chain_data(n_sequences=40, n_classes=V, length=T, random_state=0)[:2]
    est = (RandomizedCRFTagger(random_state=0) if request.param == "crf"
           else GPStructTagger(random_state=0))
    return est.fit(X, y), X


def _enumerated(est, x, allowed):
    paths = [np.array(p) for p in itertools.product(range(V), repeat=T)]
    pp = est.predict_path_proba([x] * len(paths), paths)
    ok = np.array([all(a is None or (p[t] in a if isinstance(a, list) else p[t] == a)
                       for t, a in enumerate(allowed)) for p in paths])
    cond = np.where(ok, pp, 0.0) / pp[ok].sum()
    marg = np.zeros((T, V))
    for p, c in zip(paths, cond):
        marg[np.arange(T), p] += c
    return paths, cond, marg


@pytest.mark.parametrize("allowed", [ALLOWED, [2, None, None, [0, 1]], [None] * T])
def test_conditional_equals_restricted_renormalised_paths(fitted, allowed):
    est, X = fitted
    x = X[0]
    paths, cond, marg = _enumerated(est, x, allowed)
    got = est.predict_marginals([x], allowed=[allowed])[0]
    np.testing.assert_allclose(got, marg, atol=1e-12)
    np.testing.assert_allclose(est.predict_proba([x], allowed=[allowed])[0], marg, atol=1e-12)
    ppa = est.predict_path_proba([x] * len(paths), paths, allowed=[allowed] * len(paths))
    np.testing.assert_allclose(ppa, cond, atol=1e-12)
    best = paths[int(np.argmax(cond))]
    nbest = est.predict_nbest([x], 3, allowed=[allowed])[0]
    probs = [p for _, p in nbest]
    assert probs == sorted(probs, reverse=True)
    for labels, p in nbest:
        k = next(i for i, q in enumerate(paths) if np.array_equal(q, labels))
        assert p == pytest.approx(cond[k], abs=1e-12) and cond[k] > 0
    if isinstance(est, RandomizedCRFTagger):  # Viterbi: the most probable allowed path
        np.testing.assert_array_equal(est.predict([x], allowed=[allowed])[0], best)
        np.testing.assert_array_equal(nbest[0][0], best)


def test_predict_obeys_the_constraint_and_none_changes_nothing(fitted):
    est, X = fitted
    pred = est.predict(X[:5], allowed=[ALLOWED] * 5)
    for p in pred:
        assert p[1] in (0, 2) and p[2] == 1
    for a, b in zip(est.predict_marginals(X[:5], allowed=[None] * 5),
                    est.predict_marginals(X[:5])):
        np.testing.assert_array_equal(a, b)
    # a constraint on one sequence does not move another's prediction
    mixed = est.predict_marginals(X[:2], allowed=[ALLOWED, None])
    np.testing.assert_array_equal(mixed[1], est.predict_marginals(X[1:2])[0])


def test_forcing_every_label_leaves_one_path(fitted):
    est, X = fitted
    forced = [0, 1, 1, 2]
    nbest = est.predict_nbest(X[:1], 5, allowed=[forced])[0]
    assert len(nbest) == 1 and nbest[0][1] == pytest.approx(1.0)
    np.testing.assert_array_equal(nbest[0][0], forced)
    u = est.predict_uncertainty(X[:1], per="path", allowed=[forced])
    assert abs(u[0]) < 1e-9


def test_gp_mutual_information_vanishes_at_a_forced_token():
    X, y = make_chain_data(n_sequences=30, n_classes=V, length=T, random_state=1)[:2]
    gp = GPStructTagger(random_state=0).fit(X, y)
    mi = gp.predict_uncertainty(X[:1], "mutual_information", allowed=[[None, 1, None, None]])
    assert mi[0][1] < 1e-12


def test_bad_constraints_are_clear_errors(fitted):
    est, X = fitted
    with pytest.raises(ValueError, match=r"allowed\[0\]\[2\] holds 7, not a label"):
        est.predict(X[:1], allowed=[[None, None, 7, None]])
    with pytest.raises(ValueError, match=r"allowed\[1\]\[0\] is empty"):
        est.predict(X[:2], allowed=[None, [[], None, None, None]])
    with pytest.raises(ValueError, match="one entry per token"):
        est.predict(X[:1], allowed=[[None]])
    with pytest.raises(ValueError, match="2 entries but X has 1"):
        est.predict(X[:1], allowed=[None, None])
    with pytest.raises(ValueError, match="n must be an integer"):
        est.predict_nbest(X[:1], 0)


def test_pipeline_and_temperature_scaling_pass_the_constraint():
    words = [["the", "cat", "sat"], ["a", "dog", "ran"], ["the", "dog", "sat"]] * 5
    X = [[{"w": w} for w in s] for s in words]
    y = [["DT", "NN", "VB"]] * 15
    allowed = [[None, "VB", None]]
    pipe = make_pipeline(SequenceVectorizer(), RandomizedCRFTagger()).fit(X, y)
    assert pipe.predict(X[:1], allowed=allowed)[0][1] == "VB"
    p = pipe.predict_proba(X[:1], allowed=allowed)[0]
    assert p[1, list(pipe.classes_).index("VB")] == pytest.approx(1.0)
    scaled = TemperatureScaledTagger(make_pipeline(SequenceVectorizer(),
                                                   RandomizedCRFTagger()), cv=3).fit(X, y)
    assert scaled.predict(X[:1], allowed=allowed)[0][1] == "VB"
    q = scaled.predict_marginals(X[:1], allowed=allowed)[0]
    assert q[1, list(scaled.classes_).index("VB")] == pytest.approx(1.0)
