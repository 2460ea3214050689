"""skgpstruct.inspection: a RandomizedCRFTagger's weights as sklearn-crfsuite shows them."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.features import SequenceVectorizer
from skgpstruct.inspection import state_features, top_features, transition_features


@pytest.fixture(scope="module")
def crf():
    X, y = make_chain_data(n_sequences=40, n_classes=3, n_features=6, random_state=0)
    X = [np.where(np.abs(x) > 0.8, x, 0.0) for x in X]  # some zero weights
    X = [np.hstack([x, np.zeros((x.shape[0], 1))]) for x in X]  # a never-seen feature
    return RandomizedCRFTagger(c2=0.1).fit(X, [np.asarray(t) for t in y])


def test_state_features_are_the_non_zero_weights(crf):
    sf = crf.state_features_
    rows, cols = np.nonzero(crf.coef_)
    assert len(sf) == rows.size and rows.size < crf.coef_.size  # feature 6 unseen
    for (f, label), w in sf.items():
        assert w == crf.coef_[f, list(crf.classes_).index(label)]
    assert all(f != 6 for f, _ in sf)


def test_transition_features_are_the_transition_matrix(crf):
    tf = crf.transition_features_
    V = len(crf.classes_)
    assert len(tf) == V * V
    for i, a in enumerate(crf.classes_):
        for j, b in enumerate(crf.classes_):
            assert tf[(a, b)] == crf.transition_[i, j]


def test_low_rank_transitions_are_multiplied_out():
    X, y = make_chain_data(n_sequences=30, n_classes=3, n_features=4, random_state=1)
    lr = RandomizedCRFTagger(transitions="low_rank", rank=2, optimizer="adam",
                             max_iter=3, random_state=0)
    with pytest.warns(Warning):
        lr.fit(X, y)
    B = lr.transition_left_ @ lr.transition_right_.T
    assert transition_features(lr)[(lr.classes_[0], lr.classes_[1])] == B[0, 1]


@pytest.mark.parametrize("order", ["positive", "negative", "absolute"])
def test_top_features_are_sorted_and_complete(crf, order):
    names = [f"f{i}" for i in range(7)]
    top = top_features(crf, names, n=5, order=order)
    weights = np.array([w for _, w in top])
    key = {"positive": -weights, "negative": weights, "absolute": -np.abs(weights)}[order]
    assert np.all(np.diff(key) >= 0) and len(top) == 5
    everything = np.sort({"positive": -crf.coef_, "negative": crf.coef_,
                          "absolute": -np.abs(crf.coef_)}[order].ravel())
    np.testing.assert_allclose(np.sort(key), everything[:5])
    (name, label), w = top[0]
    assert w == crf.coef_[names.index(name), list(crf.classes_).index(label)]
    trans = top_features(crf, n=2, kind="transition")
    assert trans[0][1] == crf.transition_.max()


@pytest.mark.parametrize("order", ["positive", "negative", "absolute"])
def test_top_features_leave_zero_weights_out(crf, order):
    """As state_features does: the never-seen feature 6 has weight 0 and
    must not be listed, even when n exceeds the non-zero weights."""
    n_nonzero = np.count_nonzero(crf.coef_)
    top = top_features(crf, n=crf.coef_.size, order=order)
    assert len(top) == n_nonzero and all(w != 0 for _, w in top)
    assert all(f != 6 for (f, _), _ in top)
    assert set(key for key, _ in top) == set(crf.state_features_)
    assert len(top_features(crf, n=crf.coef_.size, kind="transition")) == crf.transition_.size


def test_names_come_from_a_pipeline():
    X = [[{"w": "the"}, {"w": "cat"}], [{"w": "a"}, {"w": "dog"}, {"w": "ran"}]] * 10
    y = [["DET", "NOUN"], ["DET", "NOUN", "VERB"]] * 10
    pipe = make_pipeline(SequenceVectorizer(), RandomizedCRFTagger(c2=0.1)).fit(X, y)
    top = top_features(pipe, n=3)
    assert {name for (name, _), _ in top} <= {"w=the", "w=cat", "w=a", "w=dog", "w=ran"}
    assert ("w=ran", "VERB") in state_features(pipe)


def test_bad_input_is_refused(crf):
    with pytest.raises(NotFittedError):
        top_features(RandomizedCRFTagger())
    assert not hasattr(RandomizedCRFTagger(), "state_features_")
    with pytest.raises(TypeError, match="RandomizedCRFTagger"):
        top_features(GPStructTagger())
    with pytest.raises(ValueError, match="one name per input feature"):
        top_features(crf, ["a", "b"])
    with pytest.raises(ValueError, match="kind"):
        top_features(crf, kind="unary")
    with pytest.raises(ValueError, match="order"):
        top_features(crf, order="up")
    for n in (0, 2.7, "3", True):
        with pytest.raises(ValueError, match="positive integer"):
            top_features(crf, n=n)
