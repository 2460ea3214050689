"""GPStructTagger's predictions hold one chunk of sequences' posterior
moments at a time (``_gp_predict.PREDICT_CHUNK_SEQUENCES``)."""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from skgpstruct import GPStructTagger
from skgpstruct import _gp_predict


def _sparse_sequences(n, T, V, D, seed):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        cols = rng.integers(0, D, (T, 4))
        X.append(sp.csr_matrix((np.ones(T * 4), (np.repeat(np.arange(T), 4), cols.ravel())),
                               shape=(T, D)))
        y.append(rng.integers(0, V, T))
    y[0][:min(V, T)] = np.arange(min(V, T))
    return X, y


@pytest.fixture(scope="module")
def fitted():
    X, y = _sparse_sequences(20, 30, 10, 500, seed=0)
    with warnings.catch_warnings():  # max_iter reached: a short fit is enough
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GPStructTagger(kernel_variance=1.0, max_iter=2, n_samples=4,
                              n_predict_samples=4, random_state=0).fit(X, y)


def test_moments_are_built_chunk_by_chunk(fitted, monkeypatch):
    chunk = 7
    monkeypatch.setattr(_gp_predict, "PREDICT_CHUNK_SEQUENCES", chunk)
    X, y = _sparse_sequences(30, 5, 10, 500, seed=1)
    whole = fitted.predict_marginals(X)
    sizes = []
    original = type(fitted)._sequence_moments

    def recording(self, data):
        sizes.append(data.n_sequences)
        return original(self, data)

    monkeypatch.setattr(type(fitted), "_sequence_moments", recording)
    chunked = fitted.predict_marginals(X)
    assert sizes == [7, 7, 7, 7, 2]
    for a, b in zip(whole, chunked):  # the same numbers, bit for bit
        np.testing.assert_array_equal(a, b)
    sizes.clear()
    fitted.set_params(decode="viterbi")
    try:
        fitted.predict(X)
    finally:
        fitted.set_params(decode="marginal")
    assert max(sizes) <= chunk
    for call in (lambda: fitted.predict_path_proba(X, y),
                 lambda: fitted.predict_uncertainty(X, kind="mutual_information"),
                 lambda: fitted.predict_uncertainty(X, per="path")):
        sizes.clear()
        call()
        assert max(sizes) <= chunk


def test_predict_memory_does_not_grow_with_the_sequences(fitted):
    # 2000 sequences of 30 tokens, 10 labels: their (V, T, T) covariances
    # alone take 144 MB, the pair matrices as much again (313 MB at the
    # peak when all were built at once); a chunk of 256 needs about 40 MB
    X, _ = _sparse_sequences(2000, 30, 10, 500, seed=2)
    fitted.predict_marginals(X[:2])
    tracemalloc.start()
    try:
        out = fitted.predict_marginals(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(out) == 2000
    assert peak < 100e6, f"predict_marginals peaked at {peak / 1e6:.0f} MB"
