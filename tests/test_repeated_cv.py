"""Repeated K-fold validation (``n_repeats``) of the prior variance and the
posterior temperature: the folds, the standard errors of the distinct
held-out tokens, and sums over the splits."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skgpstruct._gpstruct import posterior_cv as _posterior_cv
from skgpstruct._gpstruct import prior_variance_cv as _variance_cv
from skgpstruct._input.sequences import SequenceData

from .test_gp_features import _model_data


@pytest.fixture(scope="module")
def data():
    X, y = _model_data(3.0, seed=2, n_sequences=30)
    return SequenceData.from_sequences(X, y, n_features=X[0].shape[1])


def _test_sets(folds):
    return [tuple(map(tuple, np.asarray(test.X_flat.toarray()))) for _, test in folds]


def test_folds_are_one_split_per_repeat(data):
    one = list(_variance_cv._folds(data, 3, 5, "x"))
    three = list(_variance_cv._folds(data, 3, 5, "x", n_repeats=3))
    assert len(one) == 3 and len(three) == 9
    # the first split is the split of n_repeats=1, fold for fold
    for (a_tr, a_te), (b_tr, b_te) in zip(one, three[:3]):
        np.testing.assert_array_equal(a_te.lengths, b_te.lengths)
        np.testing.assert_array_equal(a_te.y_flat, b_te.y_flat)
        np.testing.assert_array_equal(a_tr.y_flat, b_tr.y_flat)
    # each split holds every token out once: its test parts have all tokens
    for r in range(3):
        tokens = sum(test.n_tokens for _, test in three[3 * r:3 * r + 3])
        assert tokens == data.n_tokens
    # and the splits differ (the r-th seeded by random_state + r)
    sets = _test_sets(three)
    assert sets[:3] != sets[3:6] and sets[3:6] != sets[6:]
    assert _test_sets(list(_variance_cv._folds(data, 3, 6, "x"))) == sets[3:6]


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_n_repeats_must_be_a_positive_integer(data, bad):
    with pytest.raises(ValueError, match="n_repeats must be a positive integer"):
        list(_variance_cv._folds(data, 3, 0, "x", n_repeats=bad))


def test_error_band_is_that_of_the_distinct_tokens():
    errors, n = np.array([100.0, 108.0, 125.0]), 1000
    once = _variance_cv._error_band(errors, n)
    # three splits that each found the same errors: the same band
    np.testing.assert_array_equal(_variance_cv._error_band(3 * errors, 3 * n, 3), once)
    np.testing.assert_array_equal(once, [True, True, False])
    # 3000 scorings taken as 3000 tokens would narrow it (108 drops out)
    assert _variance_cv._error_band(3 * errors, 3 * n).sum() < once.sum()


def test_cv_prior_variance_sums_over_the_splits(data):
    grid = (0.5, 2.0, 8.0)
    a = _variance_cv.cv_prior_variance(data, 4, grid=grid, random_state=3)[1]
    b = _variance_cv.cv_prior_variance(data, 4, grid=grid, random_state=4)[1]
    both = _variance_cv.cv_prior_variance(data, 4, grid=grid, random_state=3,
                                          n_repeats=2)[1]
    for key in ("error", "log_loss"):
        assert_allclose(both[key], (a[key] + b[key]) / 2.0, rtol=1e-12, err_msg=key)


def test_cv_posterior_one_repeat_is_the_default(data):
    default = _posterior_cv.cv_posterior(data, 4, [1.0, 3.0], random_state=1)
    one = _posterior_cv.cv_posterior(data, 4, [1.0, 3.0], random_state=1, n_repeats=1)
    assert default[:2] == one[:2]
    for key in default[2]:
        np.testing.assert_array_equal(default[2][key], one[2][key], err_msg=key)


def test_cv_posterior_standard_errors_count_distinct_tokens(data, monkeypatch):
    scored = []
    score = _posterior_cv._posterior_scores

    def keep(*args):
        out = score(*args)
        scored.append(out[1])
        return out

    monkeypatch.setattr(_posterior_cv, "_posterior_scores", keep)
    _, _, res = _posterior_cv.cv_posterior(data, 4, [2.0], random_state=1, n_repeats=2)
    assert len(scored) == 6  # 2 splits x 3 folds, one variance
    losses, conf, correct = (np.concatenate([s[k] for s in scored], axis=1)
                             for k in range(3))
    n_distinct = losses.shape[1] / 2
    assert_allclose(res["log_loss_se"][0], losses.std(axis=1) / np.sqrt(n_distinct),
                    rtol=1e-12)
    assert_allclose(res["log_loss"][0], losses.mean(axis=1), rtol=1e-12)
    for j in range(conf.shape[0]):
        ece, se = _posterior_cv._calibration_error(conf[j], correct[j])
        assert_allclose(res["calibration_error"][0][j], ece, rtol=1e-12)
        assert_allclose(res["calibration_error_se"][0][j], se * np.sqrt(2.0), rtol=1e-12)
