"""Soak: both estimators with default parameters on many random problems.

For a seed a problem is drawn from :func:`skgpstruct.datasets.make_chain_data`
with sizes drawn from the seed: 2 to 50 labels, 2 to 60 features, 5 to 40
sequences of lengths from 1 up to 30 tokens (single-token sequences
included), dense (Gaussian features) or sparse (binary, CSR) half of the
time each, a noise level from 0.05 to 1. ``GPStructTagger(random_state=seed)``
and ``RandomizedCRFTagger(random_state=seed)``, otherwise with their
defaults, are fitted on the first 75 % of the sequences and predict the rest
(``predict``, ``predict_marginals``, ``score``). A run fails on any
exception, on NaN / inf / negative marginals or rows not summing to 1
(1e-6), or on a prediction outside ``classes_``. Warnings (ConvergenceWarning
at max_iter, the validation's documented fallback) are allowed: the soak
checks that the defaults never fail, not that they never warn.

By default a few seeds run (fast ones, chosen to cover sparse and dense
inputs, single-token sequences, many labels and the warning paths). The full
soak, seeds 0 to 99 (6 to 10 minutes on 2 cores), is marked ``slow`` and
runs with ``-m slow`` or ``SKGPSTRUCT_SLOW=1``::

    python -m pytest tests/test_soak.py -m slow     # the full soak only
    SKGPSTRUCT_SLOW=1 python -m pytest tests/test_soak.py   # both
"""

import os
import warnings

import numpy as np
import pytest

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data

ESTIMATORS = {
    "GPStructTagger": lambda seed: GPStructTagger(random_state=seed),
    "RandomizedCRFTagger": lambda seed: RandomizedCRFTagger(random_state=seed),
}

#: Seeds of the default run: sparse and dense, single-token sequences (51,
#: 61, 38, 83), up to 46 labels, and the two seeds whose GP fit warns (24,
#: 76: the validation's fallback).
QUICK_SEEDS = (76, 24, 51, 37, 61, 38, 83, 9)
#: Seeds of the full soak.
FULL_SEEDS = range(100)


def problem(seed):
    """The problem of ``seed``: ``(X_train, y_train, X_test, y_test, spec)``."""
    rng = np.random.RandomState(10_000 + seed)
    n_classes = int(rng.randint(2, 51))
    sparse = bool(rng.rand() < 0.5)
    n_features = int(rng.randint(2, 61))
    n_sequences = int(rng.randint(5, 41))
    max_len = int(rng.randint(1, 31))
    noise = float(np.round(rng.uniform(0.05, 1.0), 3))
    kw = dict(n_sequences=n_sequences, n_classes=n_classes, n_features=n_features,
              length=(1, max_len), noise=noise, sparse=sparse, random_state=seed)
    if sparse:
        kw["n_active"] = int(min(n_features, rng.randint(1, 6)))
    X, y = make_chain_data(**kw)[:2]
    n_train = max(1, int(round(0.75 * n_sequences)))
    if n_train == n_sequences:
        n_train -= 1
    spec = dict(seed=seed, labels=n_classes, features=n_features, sequences=n_sequences,
                max_len=max_len, sparse=sparse, noise=noise)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:], spec


def check_outputs(est, X_test, y_test):
    """Predictions and marginals of a fitted estimator; fails on a bad one;
    returns the test accuracy."""
    pred = est.predict(X_test)
    marg = est.predict_marginals(X_test)
    classes = set(est.classes_.tolist())
    for p, m, x in zip(pred, marg, X_test):
        assert len(p) == x.shape[0] and m.shape == (x.shape[0], len(est.classes_)), \
            "output shapes do not match the input"
        assert set(np.asarray(p).tolist()) <= classes, "a prediction outside classes_"
        assert np.all(np.isfinite(m)), "non-finite marginals"
        assert np.all(m >= 0) and np.allclose(m.sum(axis=1), 1.0, atol=1e-6), \
            "marginals not a distribution"
    score = est.score(X_test, y_test)
    assert np.isfinite(score) and 0.0 <= score <= 1.0
    return score


def soak(name, seed):
    """Fit and check ``name`` with its defaults on the problem of ``seed``;
    warnings are recorded, not raised."""
    X_tr, y_tr, X_te, y_te, spec = problem(seed)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        est = ESTIMATORS[name](seed).fit(X_tr, y_tr)
        check_outputs(est, X_te, y_te)


def _slow_enabled(config):
    """The full soak runs when asked for: ``SKGPSTRUCT_SLOW=1`` or a ``-m``
    expression (``-m slow``; ``-m "not slow"`` deselects it anyway)."""
    return os.environ.get("SKGPSTRUCT_SLOW") == "1" or bool(config.getoption("markexpr"))


def pytest_generate_tests(metafunc):
    if metafunc.function.__name__ != "test_soak_full":
        return
    if _slow_enabled(metafunc.config):
        metafunc.parametrize("seed", list(FULL_SEEDS))
    else:  # one skip line, not a hundred
        metafunc.parametrize("seed", [pytest.param(None, marks=pytest.mark.skip(
            reason="the full soak: run with -m slow or SKGPSTRUCT_SLOW=1"))], ids=["full"])


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("seed", QUICK_SEEDS)
def test_soak(name, seed):
    soak(name, seed)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_soak_full(name, seed):
    soak(name, seed)


def test_problems_cover_the_edge_cases():
    """The default seeds hold what the soak is for: sparse and dense inputs,
    single-token sequences, many labels."""
    specs = [problem(seed)[4] for seed in QUICK_SEEDS]
    assert {s["sparse"] for s in specs} == {True, False}
    assert any(s["max_len"] == 1 for s in specs)
    assert max(s["labels"] for s in specs) >= 40
    X_tr, y_tr, X_te, y_te, spec = problem(QUICK_SEEDS[0])
    assert len(X_tr) >= 1 and len(X_te) >= 1
    assert len(X_tr) + len(X_te) == spec["sequences"]
