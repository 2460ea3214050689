"""Scaling out with dask: joblib's dask backend over a 2-worker LocalCluster.

Both estimators parallelise over chunks of sequences with joblib
(``n_jobs``); under ``joblib.parallel_config(backend="dask")`` those chunks
run on the dask workers, and the results must not change. The cluster runs
in-process (``processes=False``: two worker threads, no process start-up), so
the module takes a few seconds. Skipped when dask.distributed is absent
(``pip install "skgpstruct[dask]"``).
"""

import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
joblib = pytest.importorskip("joblib")

from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402

from skgpstruct import GPStructTagger, RandomizedCRFTagger  # noqa: E402
from skgpstruct.datasets import make_chain_data  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return make_chain_data(n_sequences=40, random_state=0)


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # distributed's start-up chatter
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False,
            dashboard_address=None,
        )
        client = distributed.Client(cluster)
    try:
        yield client
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            client.close()
            cluster.close()


def _fit_predict(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # few iterations on purpose
        estimator.fit(X, y)
    return estimator.predict(X), estimator.predict_marginals(X)


def _assert_same(reference, result):
    (pred_ref, marg_ref), (pred, marg) = reference, result
    assert len(pred) == len(pred_ref)
    for a, b in zip(pred_ref, pred):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(marg_ref, marg):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "params",
    [
        {},  # exact mode, L-BFGS: chunks of 32 sequences, two chunks on 40
        {"n_top": 1, "n_sampled": 1, "max_iter": 5, "batch_size": 40},
    ],
    ids=["exact", "randomized"],
)
def test_randomized_crf_on_dask_matches_default_backend(data, client, params):
    X, y = data
    make = lambda: RandomizedCRFTagger(n_jobs=2, random_state=0, **params)  # noqa: E731
    reference = _fit_predict(make(), X, y)
    with distributed.get_task_stream(client) as tasks:
        with joblib.parallel_config(backend="dask"):
            result = _fit_predict(make(), X, y)
    _assert_same(reference, result)
    assert len(tasks.data) > 0, "nothing ran on the dask workers"


def test_gpstruct_predict_on_dask_matches_default_backend(data, client):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp = GPStructTagger(max_iter=5, n_jobs=2, random_state=0).fit(X, y)
    reference = gp.predict(X), gp.predict_marginals(X)
    with distributed.get_task_stream(client) as tasks:
        with joblib.parallel_config(backend="dask"):
            result = gp.predict(X), gp.predict_marginals(X)
    _assert_same(reference, result)
    assert len(tasks.data) > 0, "nothing ran on the dask workers"


def test_gpstruct_fit_on_dask_matches_default_backend(data, client):
    X, y = data
    make = lambda: GPStructTagger(max_iter=5, n_jobs=2, random_state=0)  # noqa: E731
    reference = _fit_predict(make(), X, y)
    with joblib.parallel_config(backend="dask"):
        result = _fit_predict(make(), X, y)
    _assert_same(reference, result)


def test_cross_validation_of_both_taggers_on_dask(data, client):
    # the dask backend runs the folds on the workers; each fit inside a worker
    # uses the default (thread) backend for its own n_jobs
    X, y = data
    for estimator in (RandomizedCRFTagger(random_state=0),
                      GPStructTagger(max_iter=5, random_state=0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            reference = cross_val_score(estimator, X, y, cv=2)
            with distributed.get_task_stream(client) as tasks:
                with joblib.parallel_config(backend="dask"):
                    scores = cross_val_score(estimator, X, y, cv=2, n_jobs=2)
        np.testing.assert_array_equal(scores, reference)
        assert len(tasks.data) > 0


def test_grid_search_on_dask(data, client):
    X, y = data
    grid = {"c2": [0.01, 1.0]}
    reference = GridSearchCV(RandomizedCRFTagger(random_state=0), grid, cv=2).fit(X, y)
    with joblib.parallel_config(backend="dask"):
        search = GridSearchCV(RandomizedCRFTagger(random_state=0), grid, cv=2,
                              n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(search.cv_results_["mean_test_score"],
                                  reference.cv_results_["mean_test_score"])
    assert search.best_params_ == reference.best_params_
