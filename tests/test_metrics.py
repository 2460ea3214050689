import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

from skgpstruct.metrics import (
    SCORERS,
    chunk_f1_score,
    extract_chunks,
    flat_accuracy_score,
    flat_classification_report,
    flat_f1_score,
    flat_precision_score,
    flat_recall_score,
    sequence_accuracy_score,
    token_error_rate,
)

Y_TRUE = [["B", "I", "O"], ["O", "B"], ["B", "I", "I", "O"]]
Y_PRED = [["B", "O", "O"], ["O", "B"], ["B", "I", "O", "O"]]


def test_flat_scores_match_sklearn_on_flattened_tokens():
    flat_t = sum(Y_TRUE, [])
    flat_p = sum(Y_PRED, [])
    assert flat_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(
        accuracy_score(flat_t, flat_p)
    )
    assert token_error_rate(Y_TRUE, Y_PRED) == pytest.approx(2 / 9)
    assert flat_f1_score(Y_TRUE, Y_PRED, average="macro") == pytest.approx(
        f1_score(flat_t, flat_p, average="macro")
    )
    report = flat_classification_report(Y_TRUE, Y_PRED, output_dict=True)
    assert report["accuracy"] == pytest.approx(7 / 9)
    # by hand: B 3/3 both; I precision 1/1, recall 1/3; O precision 3/5, recall 3/3
    assert flat_precision_score(Y_TRUE, Y_PRED, average=None, labels=["B", "I", "O"]) \
        == pytest.approx([1.0, 1.0, 0.6])
    assert flat_recall_score(Y_TRUE, Y_PRED, average=None, labels=["B", "I", "O"]) \
        == pytest.approx([1.0, 1 / 3, 1.0])
    for average in ("micro", "macro", "weighted"):
        assert flat_precision_score(Y_TRUE, Y_PRED, average=average) == pytest.approx(
            precision_score(flat_t, flat_p, average=average))
        assert flat_recall_score(Y_TRUE, Y_PRED, average=average) == pytest.approx(
            recall_score(flat_t, flat_p, average=average))


def test_sequence_accuracy():
    assert sequence_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(1 / 3)
    assert sequence_accuracy_score(Y_TRUE, Y_TRUE) == 1.0


def test_accepts_arrays_and_ints():
    yt = [np.array([0, 1, 1]), np.array([2])]
    yp = [np.array([0, 1, 0]), np.array([2])]
    assert flat_accuracy_score(yt, yp) == pytest.approx(0.75)


@pytest.mark.parametrize(
    "y_pred, match",
    [
        ([["B", "I", "O"], ["O", "B"]], "sequences"),
        ([["B", "I"], ["O", "B"], ["B", "I", "I", "O"]], "Sequence 0 has 3"),
        (["BIO", ["O", "B"], ["B", "I", "I", "O"]], "string"),
    ],
)
def test_misaligned_input_raises(y_pred, match):
    with pytest.raises((ValueError, TypeError), match=match):
        flat_accuracy_score(Y_TRUE, y_pred)


@pytest.mark.parametrize("y_true, y_pred, match", [
    ([["A", 1]], [["A", "1"]], "y_true sequence 0 mixes str and non-str"),
    ([[1, 2]], [["1", "2"]], "y_true sequence 0 has number labels, y_pred sequence 0 str"),
    ([["A"], [1]], [["A"], [1]], "y_true sequence 1 number"),
])
def test_labels_of_mixed_types_raise(y_true, y_pred, match):
    # they used to be converted to str and compared: 1 == "1", accuracy 1.0
    with pytest.raises(ValueError, match=match):
        flat_accuracy_score(y_true, y_pred)


def test_score_refuses_labels_of_another_type():
    from skgpstruct import RandomizedCRFTagger

    X = [np.eye(2), np.eye(2)[::-1]]
    crf = RandomizedCRFTagger().fit(X, [["1", "2"], ["2", "1"]])
    with pytest.raises(ValueError, match="mix types"):
        crf.score(X[:1], [[1, "2"]])
    with pytest.raises(ValueError, match="mix types"):
        crf.score(X[:1], [[1, 2]])
    # an empty pair of sequences has no type
    assert flat_accuracy_score([[], ["a"]], [[], ["a"]]) == 1.0


def test_extract_chunks_bio_and_iob1():
    assert extract_chunks(["B-NP", "I-NP", "O", "B-VP"]) == {
        ("NP", 0, 2),
        ("VP", 3, 4),
    }
    # IOB1 / ill-formed BIO: an I after O or of another type starts a chunk
    assert extract_chunks(["I-NP", "I-NP", "I-VP", "O", "I-PP"]) == {
        ("NP", 0, 2),
        ("VP", 2, 3),
        ("PP", 4, 5),
    }
    # B directly after B starts a new chunk; untyped base NP tags
    assert extract_chunks(["B", "B", "I", "O"]) == {("", 0, 1), ("", 1, 3)}
    # IOBES
    assert extract_chunks(["S-NP", "B-VP", "E-VP", "S-NP"]) == {
        ("NP", 0, 1),
        ("VP", 1, 3),
        ("NP", 3, 4),
    }


def test_chunk_f1_hand_computed():
    y_true = [["B-NP", "I-NP", "O", "B-VP", "B-NP"], ["B-PP", "B-NP", "I-NP"]]
    y_pred = [["B-NP", "I-NP", "O", "B-VP", "I-VP"], ["B-PP", "B-NP", "O"]]
    # true chunks: NP(0,2) VP(3,4) NP(4,5) PP(0,1) NP(1,3) -> 5
    # pred chunks: NP(0,2) VP(3,5) PP(0,1) NP(1,2) -> 4; correct: NP(0,2), PP
    p, r, f = chunk_f1_score(y_true, y_pred, return_precision_recall=True)
    assert p == pytest.approx(2 / 4)
    assert r == pytest.approx(2 / 5)
    assert f == pytest.approx(2 * 0.5 * 0.4 / 0.9)
    assert chunk_f1_score(y_true, y_true) == 1.0
    assert chunk_f1_score([["O", "O"]], [["O", "O"]]) == 1.0
    assert chunk_f1_score([["O", "O"]], [["B", "O"]]) == 0.0


class _Echo(BaseEstimator):
    """Minimal fitted 'estimator' whose predict returns stored predictions."""

    def __init__(self, pred=None):
        self.pred = pred

    def predict(self, X):
        return self.pred

    def fit(self, X, y):
        return self


def test_scorers_on_sequences():
    est = _Echo(Y_PRED)
    assert SCORERS["flat_accuracy"](est, None, Y_TRUE) == pytest.approx(7 / 9)
    assert SCORERS["token_error"](est, None, Y_TRUE) == pytest.approx(-2 / 9)
    assert SCORERS["sequence_accuracy"](est, None, Y_TRUE) == pytest.approx(1 / 3)
    assert 0 < SCORERS["chunk_f1"](est, None, Y_TRUE) < 1


def test_get_scorer_by_name_list_and_callable():
    from sklearn.model_selection import GridSearchCV

    from skgpstruct import RandomizedCRFTagger
    from skgpstruct.datasets import make_chain_data
    from skgpstruct.metrics import SCORERS, flat_accuracy_score, get_scorer

    assert get_scorer("flat_accuracy") is SCORERS["flat_accuracy"]
    assert get_scorer(["chunk_f1", "token_error"]) == {
        "chunk_f1": SCORERS["chunk_f1"], "token_error": SCORERS["token_error"]}
    assert get_scorer(flat_accuracy_score) is flat_accuracy_score
    with pytest.raises(ValueError, match="flat_accuracy"):
        get_scorer("accuracy")
    with pytest.raises(ValueError, match="not a skgpstruct scorer"):
        get_scorer(3)
    X, y = make_chain_data(n_sequences=40, n_classes=3, random_state=0)
    grid = GridSearchCV(RandomizedCRFTagger(), {"c2": [0.01, 1.0]}, cv=2,
                        scoring=get_scorer("flat_accuracy")).fit(X, y)
    # the token accuracy of each fold (a fraction), not sklearn's own scorer
    assert grid.best_score_ == pytest.approx(max(grid.cv_results_["mean_test_score"]))
    assert 0.0 < grid.best_score_ <= 1.0
