"""Calibration metrics of token marginals against hand-computed values."""

import math

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.metrics import brier_score_loss, log_loss
from sklearn.model_selection import GridSearchCV, cross_val_score

from skgpstruct import RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.metrics import (
    SCORERS,
    expected_calibration_error,
    make_marginal_scorer,
    marginal_brier_score,
    marginal_log_loss,
    neg_marginal_log_loss,
    reliability_curve,
    risk_coverage_curve,
    selective_error,
    sequence_log_loss,
)

# Two sequences, three tokens, two classes:
#   token 1: true a, p = (.9, .1)  confidence .9, argmax a: right
#   token 2: true b, p = (.6, .4)  confidence .6, argmax a: wrong
#   token 3: true b, p = (.3, .7)  confidence .7, argmax b: right
LABELS = ["a", "b"]
Y = [["a", "b"], ["b"]]
P = [np.array([[0.9, 0.1], [0.6, 0.4]]), np.array([[0.3, 0.7]])]


def test_log_loss_hand_computed():
    expected = -(math.log(0.9) + math.log(0.4) + math.log(0.7)) / 3
    assert marginal_log_loss(Y, P, labels=LABELS) == pytest.approx(expected)
    assert marginal_log_loss(Y, P, labels=LABELS) == pytest.approx(0.459442, abs=1e-6)


def test_sequence_log_loss_hand_computed():
    # sequence 1: -(log .9 + log .4) = 1.0216512, sequence 2: -log .7 = 0.3566749
    assert sequence_log_loss(Y, P, labels=LABELS) == pytest.approx(
        (1.0216512 + 0.3566749) / 2, abs=1e-6
    )
    # an empty sequence counts 0 and still counts as a sequence
    assert sequence_log_loss(Y + [[]], P + [np.zeros((0, 2))], labels=LABELS) == (
        pytest.approx((1.0216512 + 0.3566749) / 3, abs=1e-6)
    )


def test_brier_hand_computed():
    # (.1^2 + .1^2) + (.6^2 + .6^2) + (.3^2 + .3^2) = .02 + .72 + .18
    assert marginal_brier_score(Y, P, labels=LABELS) == pytest.approx(0.92 / 3)


def test_ece_hand_computed():
    # 15 bins: .9 -> bin 13, .6 -> bin 9, .7 -> bin 10, one token each:
    # (|1 - .9| + |0 - .6| + |1 - .7|) / 3
    assert expected_calibration_error(Y, P, labels=LABELS) == pytest.approx(1.0 / 3)
    # one or two bins: all in the same bin, accuracy 2/3, confidence 2.2/3
    for n_bins in (1, 2):
        assert expected_calibration_error(Y, P, labels=LABELS, n_bins=n_bins) == (
            pytest.approx(0.2 / 3)
        )
    # 5 bins: .6 and .7 in [.6, .8) (conf .65, acc .5), .9 in [.8, 1]
    assert expected_calibration_error(Y, P, labels=LABELS, n_bins=5) == (
        pytest.approx(2 / 3 * 0.15 + 1 / 3 * 0.1)
    )


def test_reliability_curve_hand_computed():
    conf, acc, counts = reliability_curve(Y, P, labels=LABELS, n_bins=5)
    np.testing.assert_array_equal(counts, [0, 0, 0, 2, 1])
    np.testing.assert_allclose(conf, [np.nan, np.nan, np.nan, 0.65, 0.9])
    np.testing.assert_allclose(acc, [np.nan, np.nan, np.nan, 0.5, 1.0])
    # ECE is the count-weighted gap of the curve
    ok = counts > 0
    assert np.sum(counts[ok] / counts.sum() * np.abs(acc[ok] - conf[ok])) == (
        pytest.approx(expected_calibration_error(Y, P, labels=LABELS, n_bins=5))
    )


def test_confidence_one_goes_to_top_bin_and_bin_edges_are_left_closed():
    y = [["a", "b", "a"]]
    p = [np.array([[1.0, 0.0], [0.5, 0.5], [0.2, 0.8]])]
    conf, acc, counts = reliability_curve(y, p, labels=LABELS, n_bins=2)
    # confidence .5 is in [.5, 1], not [0, .5); 1.0 is in the top bin
    np.testing.assert_array_equal(counts, [0, 3])
    # a tie is resolved to the first column ('a'), wrong for true 'b'
    np.testing.assert_allclose(acc, [np.nan, 1 / 3])
    _, _, counts = reliability_curve(y, p, labels=LABELS, n_bins=10)
    assert counts[9] == 1 and counts[8] == 1 and counts[5] == 1  # 1.0, .8, .5


def test_a_confidence_on_every_bin_edge_opens_its_bin():
    # floor(conf * n_bins) put 148 of the edges k / n (n <= 100) in the bin
    # below, e.g. 0.57 * 100 = 56.999...
    for n_bins in range(1, 101):
        k = np.arange((n_bins + 1) // 2, n_bins + 1)  # edges k / n >= 0.5
        conf = k / n_bins  # a max marginal of two labels
        _, _, counts = reliability_curve([["a"] * k.size], [np.column_stack([conf, 1 - conf])],
                                         labels=LABELS, n_bins=n_bins)
        expected = np.bincount(np.minimum(k, n_bins - 1), minlength=n_bins)
        np.testing.assert_array_equal(counts, expected, err_msg=f"n_bins={n_bins}")


def test_selective_error_hand_computed():
    # ranked by confidence: .9 right, .7 right, .6 wrong
    assert selective_error(Y, P, labels=LABELS) == pytest.approx(1 / 3)  # ceil(2.4) = 3
    assert selective_error(Y, P, labels=LABELS, coverage=0.5) == 0.0  # ceil(1.5) = 2
    assert selective_error(Y, P, labels=LABELS, coverage=2 / 3) == 0.0
    assert selective_error(Y, P, labels=LABELS, coverage=0.01) == 0.0  # at least 1
    assert selective_error(Y, P, labels=LABELS, coverage=1.0) == pytest.approx(1 / 3)


def test_selective_error_keeps_exactly_ceil_coverage_n():
    # 25 tokens of confidence .99, .98, ..., .75; only the 8th is wrong.
    # 0.28 * 25 is 7.000000000000001 in floats: 7 tokens must be kept, not 8.
    conf = 1.0 - 0.01 * np.arange(1, 26)
    p = [np.column_stack([conf, 1 - conf])]
    y = [["a"] * 7 + ["b"] + ["a"] * 17]
    assert 0.28 * 25 > 7
    assert selective_error(y, p, labels=LABELS, coverage=0.28) == 0.0
    assert selective_error(y, p, labels=LABELS, coverage=0.32) == pytest.approx(1 / 8)
    assert selective_error(y, p, labels=LABELS, coverage=0.2801) == pytest.approx(1 / 8)


def test_selective_error_ties_keep_original_order():
    p = [np.array([[0.6, 0.4], [0.4, 0.6]])]  # both confidence .6, argmax a then b
    assert selective_error([["a", "a"]], p, labels=LABELS, coverage=0.5) == 0.0
    assert selective_error([["b", "b"]], p, labels=LABELS, coverage=0.5) == 1.0
    # across sequences too: sequence 0 comes first
    p2 = [p[0][1:], p[0][:1]]
    assert selective_error([["a"], ["a"]], p2, labels=LABELS, coverage=0.5) == 1.0


def test_risk_coverage_curve_hand_computed():
    cov, err = risk_coverage_curve(Y, P, labels=LABELS)
    np.testing.assert_allclose(cov, [1 / 3, 2 / 3, 1.0])
    np.testing.assert_allclose(err, [0.0, 0.0, 1 / 3])
    for k in range(1, 4):
        assert selective_error(Y, P, labels=LABELS, coverage=k / 3) == (
            pytest.approx(err[k - 1])
        )


def test_perfect_and_uniform_marginals():
    y = [[0, 2, 1], [1]]
    onehot = [np.eye(3)[[0, 2, 1]], np.eye(3)[[1]]]
    assert marginal_log_loss(y, onehot, labels=[0, 1, 2]) == 0.0
    assert marginal_brier_score(y, onehot, labels=[0, 1, 2]) == 0.0
    assert expected_calibration_error(y, onehot, labels=[0, 1, 2]) == 0.0
    assert selective_error(y, onehot, labels=[0, 1, 2]) == 0.0
    uniform = [np.full((3, 3), 1 / 3), np.full((1, 3), 1 / 3)]
    assert marginal_log_loss(y, uniform, labels=[0, 1, 2]) == pytest.approx(math.log(3))
    # (1 - 1/3)^2 + 2 (1/3)^2 = 2/3
    assert marginal_brier_score(y, uniform, labels=[0, 1, 2]) == pytest.approx(2 / 3)


def test_column_order_follows_labels():
    # the same marginals read with the columns swapped: true label gets the other column
    swapped = [m[:, ::-1] for m in P]
    expected = -(math.log(0.1) + math.log(0.6) + math.log(0.3)) / 3
    assert marginal_log_loss(Y, P, labels=["b", "a"]) == pytest.approx(expected)
    assert marginal_log_loss(Y, swapped, labels=["b", "a"]) == pytest.approx(
        marginal_log_loss(Y, P, labels=LABELS)
    )


def test_eps_clips_zero_probability():
    y = [["b"]]
    p = [np.array([[1.0, 0.0]])]
    assert marginal_log_loss(y, p, labels=LABELS) == pytest.approx(-math.log(1e-15))
    assert marginal_log_loss(y, p, labels=LABELS, eps=1e-3) == pytest.approx(-math.log(1e-3))
    assert marginal_log_loss(y, p, labels=LABELS, eps=0) == math.inf  # no warning either


def test_matches_sklearn_on_flattened_tokens():
    rng = np.random.default_rng(0)
    lengths = [4, 1, 7]
    P3 = [rng.dirichlet(np.ones(3), size=n) for n in lengths]
    y3 = [rng.choice(["x", "y", "z"], size=n) for n in lengths]
    flat_y, flat_p = np.concatenate(y3), np.concatenate(P3)
    assert marginal_log_loss(y3, P3, labels=["x", "y", "z"]) == pytest.approx(
        log_loss(flat_y, flat_p, labels=["x", "y", "z"])
    )
    P2 = [rng.dirichlet(np.ones(2), size=n) for n in lengths]
    y2 = [rng.integers(0, 2, size=n) for n in lengths]
    # two classes: the multi-class Brier score is twice sklearn's binary one
    assert marginal_brier_score(y2, P2, labels=[0, 1]) == pytest.approx(
        2 * brier_score_loss(np.concatenate(y2), np.concatenate(P2)[:, 1])
    )


def test_row_sum_tolerance():
    y = [["a"]]
    assert marginal_log_loss(y, [np.array([[0.5 + 5e-7, 0.5]])], labels=LABELS) > 0
    with pytest.raises(ValueError, match=r"row sums to 1\.000002, not 1"):
        marginal_log_loss(y, [np.array([[0.5 + 2e-6, 0.5]])], labels=LABELS)


@pytest.mark.parametrize(
    "y_true, marginals, labels, match",
    [
        (Y, P[:1], LABELS, "y_true has 2 sequences but marginals has 1"),
        ([["a", "b", "a"], ["b"]], P, LABELS, "Sequence 0 has 3 labels in y_true but 2 rows"),
        (Y, [np.ones((2, 3)) / 3, np.ones((1, 3)) / 3], LABELS,
         "Sequence 0 of marginals has 3 columns but labels has 2"),
        ([["a", "c"], ["b"]], P, LABELS, r"label 'c' \(sequence 0, token 1\)"),
        ([[0, 1], [7]], P, [0, 1], r"label 7 \(sequence 1, token 0\)"),
        ([["0", "1"], ["1"]], P, [0, 1], "label '0'"),
        (Y, [P[0], np.array([[0.2, 0.7]])], LABELS, "Sequence 1 of marginals: token 0's row sums"),
        (Y, [P[0], np.array([[np.nan, 0.7]])], LABELS, "NaN"),
        (Y, [P[0], np.array([[np.inf, 0.7]])], LABELS, "infinite"),
        (Y, [P[0], np.array([[-0.1, 1.1]])], LABELS, "negative probability"),
        ([], [], LABELS, "empty"),
        ([[], []], [np.zeros((0, 2)), np.zeros((0, 2))], LABELS, "no tokens"),
        (Y, [P[0], np.array([0.3, 0.7])], LABELS, "must be 2-D"),
        ([[["a"], ["b"]], ["b"]], P, LABELS, "Sequence 0 of y_true must be 1-D"),
        (Y, P, ["a", "b", "a"], "'a' more than once"),
        (Y, P, [], "non-empty 1-D"),
        (Y, P, [["a", "b"]], "non-empty 1-D"),
        (Y, P, None, "labels is required"),
    ],
)
@pytest.mark.parametrize(
    "metric",
    [marginal_log_loss, marginal_brier_score, expected_calibration_error,
     reliability_curve, selective_error, risk_coverage_curve, sequence_log_loss],
)
def test_invalid_input_raises(metric, y_true, marginals, labels, match):
    with pytest.raises(ValueError, match=match):
        metric(y_true, marginals, labels=labels)


@pytest.mark.parametrize(
    "metric",
    [marginal_log_loss, marginal_brier_score, expected_calibration_error,
     reliability_curve, selective_error, risk_coverage_curve, sequence_log_loss],
)
def test_dict_marginals_refused_with_a_pointer(metric):
    """predict_marginals(output="dict") is a list of {label: p} per token:
    the metrics say to ask for arrays instead of failing in a float cast."""
    as_dicts = [[dict(zip(LABELS, row)) for row in p] for p in P]
    with pytest.raises(TypeError, match="output='array'"):
        metric(Y, as_dicts, labels=LABELS)


@pytest.mark.parametrize("y_true", ["ab", ["ab", "b"]])
def test_strings_instead_of_sequences_raise(y_true):
    with pytest.raises(TypeError, match="string|list of label sequences"):
        marginal_log_loss(y_true, P, labels=LABELS)


@pytest.mark.parametrize(
    "func, kwargs, match",
    [
        (expected_calibration_error, {"n_bins": 0}, "n_bins"),
        (expected_calibration_error, {"n_bins": 2.5}, "n_bins"),
        (reliability_curve, {"n_bins": True}, "n_bins"),
        (selective_error, {"coverage": 0.0}, "coverage"),
        (selective_error, {"coverage": 1.5}, "coverage"),
        (marginal_log_loss, {"eps": -1e-3}, "eps"),
        (marginal_log_loss, {"eps": 1.0}, "eps"),
    ],
)
def test_invalid_parameters_raise(func, kwargs, match):
    with pytest.raises(ValueError, match=match):
        func(Y, P, labels=LABELS, **kwargs)


def test_labels_is_keyword_only():
    with pytest.raises(TypeError):
        marginal_log_loss(Y, P, LABELS)


class _Marginals(BaseEstimator):
    """Fitted stand-in whose predict_marginals returns stored marginals."""

    def __init__(self, marginals=None, classes=None):
        self.marginals = marginals
        self.classes = classes

    def fit(self, X, y):
        self.classes_ = np.asarray(self.classes)
        return self

    def predict_marginals(self, X):
        return self.marginals

    predict_proba = predict_marginals


def test_scorers_negate_the_losses_with_classes_as_labels():
    est = _Marginals(P, LABELS).fit(None, None)
    assert SCORERS["neg_marginal_log_loss"](est, None, Y) == pytest.approx(-0.459442, abs=1e-6)
    assert SCORERS["neg_marginal_brier_score"](est, None, Y) == pytest.approx(-0.92 / 3)
    assert SCORERS["neg_expected_calibration_error"](est, None, Y) == pytest.approx(-1 / 3)
    # classes_ decides the column order
    est_swapped = _Marginals(P, ["b", "a"]).fit(None, None)
    assert SCORERS["neg_marginal_log_loss"](est_swapped, None, Y) == pytest.approx(
        (math.log(0.1) + math.log(0.6) + math.log(0.3)) / 3
    )
    scorer = make_marginal_scorer(selective_error, coverage=0.5)
    assert scorer(est, None, Y) == 0.0
    assert make_marginal_scorer(selective_error, greater_is_better=True,
                                coverage=1.0)(est, None, Y) == pytest.approx(1 / 3)
    assert "coverage=0.5" in repr(scorer)
    with pytest.raises(TypeError, match="callable"):
        make_marginal_scorer("marginal_log_loss")


def test_scorer_in_grid_search_over_randomized_crf():
    X, y = make_chain_data(n_sequences=45, n_classes=3, n_features=6, random_state=0)
    search = GridSearchCV(
        RandomizedCRFTagger(random_state=0), {"c2": [0.01, 100.0]},
        scoring=SCORERS["neg_marginal_log_loss"], cv=3, error_score="raise",
    ).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and np.all(scores < 0)
    # a heavily regularised CRF is closer to uniform marginals: worse log loss
    assert search.best_params_ == {"c2": 0.01}
    # the scorer agrees with the metric on the refitted model
    crf = search.best_estimator_
    assert neg_marginal_log_loss(crf, X, y) == pytest.approx(
        -marginal_log_loss(y, crf.predict_marginals(X), labels=crf.classes_)
    )
    ece = cross_val_score(RandomizedCRFTagger(random_state=0), X, y, cv=3,
                          scoring=SCORERS["neg_expected_calibration_error"])
    assert np.all((ece <= 0) & (ece >= -1))


def test_marginal_scorers_reach_a_tagger_through_a_pipeline():
    # a Pipeline forwards predict_proba (and classes_), not predict_marginals
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    X, y = make_chain_data(n_sequences=30, n_classes=3, n_features=6, random_state=0)
    pipe = make_pipeline(FunctionTransformer(lambda X: X),
                         RandomizedCRFTagger(random_state=0)).fit(X, y)
    crf = pipe[-1]
    for name, metric in [("neg_marginal_log_loss", marginal_log_loss),
                         ("neg_expected_calibration_error", expected_calibration_error)]:
        assert SCORERS[name](pipe, X, y) == pytest.approx(
            -metric(y, crf.predict_marginals(X), labels=crf.classes_))
