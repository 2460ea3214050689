"""``None`` in ``y_true`` marks an unknown label: every metric and scorer skips
that token. Each metric is checked against the same metric on the sequences
with those tokens removed by hand (or against a value worked out by hand)."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from skgpstruct.crfsuite import metrics as crf_metrics
from skgpstruct.crfsuite import scorers as crf_scorers
from skgpstruct.metrics import (
    SCORERS,
    chunk_f1_score,
    expected_calibration_error,
    flat_accuracy_score,
    flat_classification_report,
    flat_f1_score,
    flat_fbeta_score,
    flat_precision_score,
    flat_recall_score,
    make_marginal_scorer,
    marginal_brier_score,
    marginal_log_loss,
    reliability_curve,
    risk_coverage_curve,
    selective_error,
    sequence_accuracy_score,
    sequence_log_loss,
    token_error_rate,
)

# string labels: sequence 1 is wholly unknown, sequence 0 partly
Y_TRUE = [["B-NP", None, "O", "B-VP"], [None, None], ["B-NP", "I-NP", "O"],
          ["O", "B-NP", None]]
Y_PRED = [["B-NP", "I-NP", "B-VP", "B-VP"], ["O", "B-NP"], ["B-NP", "I-NP", "O"],
          ["O", "B-NP", "I-NP"]]
# the same with the unknown tokens (and the emptied sequence) removed by hand
KNOWN_TRUE = [["B-NP", "O", "B-VP"], ["B-NP", "I-NP", "O"], ["O", "B-NP"]]
KNOWN_PRED = [["B-NP", "B-VP", "B-VP"], ["B-NP", "I-NP", "O"], ["O", "B-NP"]]

# integer labels, with an object array among the lists
INT_TRUE = [[1, None, 0], np.array([None, 2, 2, None], dtype=object), [0, 1]]
INT_PRED = [[1, 0, 1], np.array([0, 2, 1, 1]), [0, 1]]
INT_KNOWN_TRUE = [[1, 0], [2, 2], [0, 1]]
INT_KNOWN_PRED = [[1, 1], [2, 1], [0, 1]]

FLAT_METRICS = [
    (flat_accuracy_score, {}),
    (token_error_rate, {}),
    (flat_f1_score, {"average": "macro"}),
    (flat_precision_score, {"average": "weighted", "zero_division": 0}),
    (flat_recall_score, {"average": None}),
    (flat_fbeta_score, {"beta": 2, "average": "micro"}),
    (crf_metrics.flat_f1_score, {"average": "weighted"}),
    (crf_metrics.flat_accuracy_score, {}),
]


@pytest.mark.parametrize("metric, kwargs", FLAT_METRICS)
@pytest.mark.parametrize("data", ["str", "int"])
def test_flat_metrics_skip_unknown_tokens(metric, kwargs, data):
    y_true, y_pred, known_true, known_pred = (
        (Y_TRUE, Y_PRED, KNOWN_TRUE, KNOWN_PRED) if data == "str" else
        (INT_TRUE, INT_PRED, INT_KNOWN_TRUE, INT_KNOWN_PRED))
    got = metric(y_true, y_pred, **kwargs)
    expected = metric(known_true, known_pred, **kwargs)
    np.testing.assert_array_equal(got, expected)


def test_flat_accuracy_by_hand():
    # known tokens by hand: B-NP ok, O wrong, B-VP ok | B-NP I-NP O ok |
    # O B-NP ok -> 7 / 8
    assert flat_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(7 / 8)
    assert token_error_rate(Y_TRUE, Y_PRED) == pytest.approx(1 / 8)
    assert flat_accuracy_score(INT_TRUE, INT_PRED) == pytest.approx(4 / 6)
    # a prediction at an unknown token is ignored, whatever it is
    other = [["B-NP", "O", "B-VP", "B-VP"], ["B-VP", "B-VP"], ["B-NP", "I-NP", "O"],
             ["O", "B-NP", None]]
    assert flat_accuracy_score(Y_TRUE, other) == pytest.approx(7 / 8)


def test_classification_report_skips_unknown_tokens():
    got = flat_classification_report(Y_TRUE, Y_PRED, output_dict=True)
    expected = flat_classification_report(KNOWN_TRUE, KNOWN_PRED, output_dict=True)
    assert got == expected
    assert got["weighted avg"]["support"] == 8


def test_sample_weight_of_unknown_tokens_is_dropped():
    # one weight per token, unknown ones included: 4 + 2 + 3 + 3 = 12
    weights = np.arange(1.0, 13.0)
    known = np.array([v is not None for seq in Y_TRUE for v in seq])
    got = flat_accuracy_score(Y_TRUE, Y_PRED, weights)
    assert got == pytest.approx(
        flat_accuracy_score(KNOWN_TRUE, KNOWN_PRED, sample_weight=weights[known]))
    # the wrong token is the third (weight 3) of the known weights' sum
    assert got == pytest.approx(1 - 3 / weights[known].sum())
    assert flat_f1_score(Y_TRUE, Y_PRED, average="macro", sample_weight=weights) \
        == pytest.approx(flat_f1_score(KNOWN_TRUE, KNOWN_PRED, average="macro",
                                       sample_weight=weights[known]))
    with pytest.raises(ValueError, match="sample_weight has shape"):
        flat_accuracy_score(Y_TRUE, Y_PRED, sample_weight=weights[known])


def test_sequence_accuracy_judges_known_tokens_and_skips_unknown_sequences():
    # sequence 0 wrong (O -> B-VP), 1 skipped, 2 right, 3 right on its known tokens
    assert sequence_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(2 / 3)
    assert crf_metrics.sequence_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(2 / 3)
    # integer labels: [1, 1] vs [1, 0] wrong, [2, 1] vs [2, 2] wrong, [0, 1] right
    assert sequence_accuracy_score(INT_TRUE, INT_PRED) == pytest.approx(1 / 3)
    # an all-known empty sequence still counts as right, as before
    assert sequence_accuracy_score([[None, "a"], [], ["b"]],
                                   [["x", "b"], [], ["b"]]) == pytest.approx(2 / 3)


def test_chunk_f1_leaves_out_sequences_with_an_unknown_tag():
    # only sequence 2 is wholly known: scored alone, it is perfect
    assert chunk_f1_score(Y_TRUE, Y_PRED) == 1.0
    y_true = [["B-NP", "I-NP", None], ["B-NP", "O", "B-VP"], ["O", "B-NP", "I-NP"]]
    y_pred = [["B-NP", "O", "O"], ["B-NP", "O", "O"], ["O", "B-NP", "I-NP"]]
    expected = chunk_f1_score(y_true[1:], y_pred[1:], return_precision_recall=True)
    got = chunk_f1_score(y_true, y_pred, return_precision_recall=True)
    assert got == pytest.approx(expected)
    # by hand: 3 gold chunks, 2 predicted, 2 right -> P 1, R 2/3, F1 0.8
    assert got == pytest.approx((1.0, 2 / 3, 0.8))
    with pytest.raises(ValueError, match="every sequence of y_true has an unknown"):
        chunk_f1_score(y_true[:1], y_pred[:1])


ALL_UNKNOWN_TRUE = [[None, None], [None]]
ALL_UNKNOWN_PRED = [["B", "O"], ["O"]]


@pytest.mark.parametrize("metric", [
    flat_accuracy_score, token_error_rate, flat_f1_score, flat_classification_report,
    sequence_accuracy_score, chunk_f1_score, crf_metrics.flat_precision_score,
    crf_metrics.sequence_accuracy_score,
])
def test_all_unknown_is_an_error(metric):
    with pytest.raises(ValueError, match="no known label"):
        metric(ALL_UNKNOWN_TRUE, ALL_UNKNOWN_PRED)
    with pytest.raises(ValueError, match="no known label"):
        metric([np.array([None, None], dtype=object)], [[1, 0]])


def test_misaligned_sequences_with_unknown_labels_are_still_errors():
    with pytest.raises(ValueError, match="3 labels in y_true"):
        flat_accuracy_score([["B", None, "O"]], [["B", "O"]])
    with pytest.raises(ValueError, match="sequences"):
        flat_accuracy_score([["B", None]], [["B", "O"], ["O"]])
    with pytest.raises(ValueError, match="mix types"):
        flat_accuracy_score([["B", None, 1]], [["B", "O", "O"]])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_nan_is_not_an_unknown_label():
    # float NaN keeps its old treatment (sklearn refuses it), unlike None
    y_true = [np.array([1.0, np.nan, 0.0])]
    with pytest.raises(ValueError, match="NaN"):
        flat_accuracy_score(y_true, [np.array([1.0, 1.0, 0.0])])
    # a NaN among str labels is a number, not an unknown label
    with pytest.raises(ValueError, match="mix types"):
        flat_accuracy_score([["a", np.nan]], [["a", "b"]])


# marginals: columns a, b
LABELS = ["a", "b"]
M_TRUE = [["a", None, "b"], [None], ["b", "a"]]
M_PROBA = [[[0.9, 0.1], [0.5, 0.5], [0.3, 0.7]], [[0.2, 0.8]], [[0.4, 0.6], [0.35, 0.65]]]
M_KNOWN_TRUE = [["a", "b"], ["b", "a"]]
M_KNOWN_PROBA = [[[0.9, 0.1], [0.3, 0.7]], [[0.4, 0.6], [0.35, 0.65]]]
M_INT_TRUE = [np.array([0, None, 1], dtype=object), [None], [1, 0]]

MARGINAL_METRICS = [
    (marginal_log_loss, {}),
    (marginal_brier_score, {}),
    (expected_calibration_error, {"n_bins": 4}),
    (selective_error, {"coverage": 0.5}),
    (sequence_log_loss, {}),
]


@pytest.mark.parametrize("metric, kwargs", MARGINAL_METRICS)
@pytest.mark.parametrize("data", ["str", "int"])
def test_marginal_metrics_drop_unknown_rows(metric, kwargs, data):
    y_true, labels, known = ((M_TRUE, LABELS, M_KNOWN_TRUE) if data == "str" else
                             (M_INT_TRUE, [0, 1], [[0, 1], [1, 0]]))
    got = metric(y_true, M_PROBA, labels=labels, **kwargs)
    assert got == pytest.approx(metric(known, M_KNOWN_PROBA, labels=labels, **kwargs))


def test_marginal_metrics_by_hand():
    # true probabilities of the known tokens: .9, .7, .6, .35
    assert marginal_log_loss(M_TRUE, M_PROBA, labels=LABELS) == pytest.approx(
        -np.mean(np.log([0.9, 0.7, 0.6, 0.35])))
    # sequence 1 (all unknown) is left out of the mean over sequences
    assert sequence_log_loss(M_TRUE, M_PROBA, labels=LABELS) == pytest.approx(
        -(np.log(0.9 * 0.7) + np.log(0.6 * 0.35)) / 2)
    # argmax right on .9, .7, .6; wrong on the .65 token
    assert selective_error(M_TRUE, M_PROBA, labels=LABELS, coverage=1.0) == 0.25


def test_curves_drop_unknown_rows():
    for got, expected in zip(
            reliability_curve(M_TRUE, M_PROBA, labels=LABELS, n_bins=5),
            reliability_curve(M_KNOWN_TRUE, M_KNOWN_PROBA, labels=LABELS, n_bins=5)):
        np.testing.assert_array_equal(got, expected)
    assert reliability_curve(M_TRUE, M_PROBA, labels=LABELS)[2].sum() == 4
    for got, expected in zip(risk_coverage_curve(M_TRUE, M_PROBA, labels=LABELS),
                             risk_coverage_curve(M_KNOWN_TRUE, M_KNOWN_PROBA,
                                                 labels=LABELS)):
        np.testing.assert_array_equal(got, expected)


def test_marginal_metrics_all_unknown_and_misaligned():
    with pytest.raises(ValueError, match="no known label"):
        marginal_log_loss([[None], [None, None]], [[[0.5, 0.5]], [[1, 0], [0, 1]]],
                          labels=LABELS)
    with pytest.raises(ValueError, match="rows in marginals"):
        marginal_brier_score([["a", None]], [[[0.5, 0.5]]], labels=LABELS)
    # the rows of unknown tokens are still checked to be probabilities
    with pytest.raises(ValueError, match="sums to"):
        marginal_brier_score([["a", None]], [[[0.5, 0.5], [0.5, 0.6]]], labels=LABELS)


class _Fake(BaseEstimator):
    """Fitted stand-in: stored predictions and marginals."""

    def __init__(self, pred=None, marginals=None, classes=None):
        self.pred = pred
        self.marginals = marginals
        self.classes = classes

    def fit(self, X, y):
        self.classes_ = np.asarray(self.classes)
        return self

    def predict(self, X):
        return self.pred

    def predict_proba(self, X):
        return self.marginals


def test_scorers_skip_unknown_tokens():
    est = _Fake(Y_PRED).fit(None, None)
    for name in ("flat_accuracy", "token_error", "sequence_accuracy"):
        assert SCORERS[name](est, None, Y_TRUE) == pytest.approx(
            SCORERS[name](_Fake(KNOWN_PRED), None, KNOWN_TRUE))
    # chunk F1 on the one wholly known sequence, with a wrong prediction there
    pred = [list(s) for s in Y_PRED]
    pred[2] = ["B-NP", "O", "O"]
    assert SCORERS["chunk_f1"](_Fake(pred), None, Y_TRUE) == pytest.approx(
        chunk_f1_score([Y_TRUE[2]], [pred[2]]))
    assert SCORERS["chunk_f1"](_Fake(pred), None, Y_TRUE) == 0.0
    assert SCORERS["flat_accuracy"](est, None, Y_TRUE) == pytest.approx(7 / 8)
    assert SCORERS["token_error"](est, None, Y_TRUE) == pytest.approx(-1 / 8)
    assert crf_scorers.flat_accuracy(est, None, Y_TRUE) == pytest.approx(7 / 8)
    assert crf_scorers.sequence_accuracy(est, None, Y_TRUE) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="no known label"):
        crf_scorers.flat_accuracy(_Fake(ALL_UNKNOWN_PRED), None, ALL_UNKNOWN_TRUE)


def test_marginal_scorers_skip_unknown_tokens():
    est = _Fake(marginals=M_PROBA, classes=LABELS).fit(None, None)
    known = _Fake(marginals=M_KNOWN_PROBA, classes=LABELS).fit(None, None)
    for name in ("neg_marginal_log_loss", "neg_marginal_brier_score",
                 "neg_expected_calibration_error"):
        assert SCORERS[name](est, None, M_TRUE) == pytest.approx(
            SCORERS[name](known, None, M_KNOWN_TRUE))
    scorer = make_marginal_scorer(selective_error, coverage=1.0)
    assert scorer(est, None, M_TRUE) == pytest.approx(-0.25)
