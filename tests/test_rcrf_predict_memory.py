"""RandomizedCRFTagger's exact marginals run on chunks of sequences, so that
the (n_sequences, V, V) pairwise marginals of the kernel stay bounded."""

import tracemalloc
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from skgpstruct import RandomizedCRFTagger
from skgpstruct import _randomized_crf


def _sequences(n, T, V, D, seed):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        cols = rng.integers(0, D, (T, 3))
        X.append(sp.csr_matrix((np.ones(T * 3), (np.repeat(np.arange(T), 3), cols.ravel())),
                               shape=(T, D)))
        y.append(rng.integers(0, V, T))
    return X, y


def _fit(V):
    X, y = _sequences(V, 10, V, 300, seed=0)
    for n in range(V):  # every label seen
        y[n][0] = n
    with warnings.catch_warnings():  # max_iter reached: a short fit is enough
        warnings.simplefilter("ignore", ConvergenceWarning)
        return RandomizedCRFTagger(max_iter=2, random_state=0).fit(X, y)


def test_marginals_memory_does_not_grow_with_pairwise_marginals():
    # 2000 sequences of 3 tokens, 150 labels: the marginals are 7 MB, the
    # pairwise marginals of one call over all of them 360 MB
    model = _fit(150)
    X, _ = _sequences(2000, 3, 150, 300, seed=1)
    model.predict_marginals(X[:2])
    tracemalloc.start()
    try:
        out = model.predict_marginals(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(out) == 2000 and out[0].shape == (3, 150)
    assert peak < 120e6, f"predict_marginals peaked at {peak / 1e6:.0f} MB"


def test_chunked_marginals_are_those_of_one_call(monkeypatch):
    model = _fit(12)
    rng = np.random.default_rng(2)
    X = [_sequences(1, int(T), 12, 300, seed=int(T))[0][0] for T in rng.integers(1, 30, 50)]
    whole = model.predict_marginals(X)
    entropy = model.predict_uncertainty(X)
    monkeypatch.setattr(_randomized_crf, "_PAIRWISE_BYTES", 8 * 12 * 12 * 7)  # 7 sequences
    calls = []
    backend = model._predict_backend()
    original = type(backend).marginals_ragged

    def recording(self, U, lengths, B):
        calls.append(len(lengths))
        return original(self, U, lengths, B)

    monkeypatch.setattr(type(backend), "marginals_ragged", recording)
    chunked = model.predict_marginals(X)
    assert calls == [7] * 7 + [1]
    for a, b in zip(whole, chunked):  # bit for bit
        np.testing.assert_array_equal(a, b)
    for a, b in zip(entropy, model.predict_uncertainty(X)):
        np.testing.assert_array_equal(a, b)
