"""Prediction memory does not grow with the number of sequences predicted.

GPStructTagger's predictions and its held-out ``elbo`` hold one chunk of
sequences' posterior moments at a time
(``_gp_predict.PREDICT_CHUNK_SEQUENCES``); RandomizedCRFTagger's
exact marginals run on chunks of sequences, so that the kernel's
(n_sequences, V, V) pairwise marginals stay bounded
(``crf_solver._PAIRWISE_BYTES``). Both give the numbers of one call, bit
for bit."""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct._gpstruct import predict as _gp_predict
from skgpstruct._gpstruct import inducing_form, weight_space_form
from skgpstruct._tagging import crf_solver


def _sparse_sequences(n, T, V, D, seed, n_active=4):
    """``n`` sequences of ``T`` tokens with ``n_active`` binary features of
    ``D`` each, and random labels of ``V`` (the first sequence starts with
    as many distinct labels as it can hold)."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        cols = rng.integers(0, D, (T, n_active))
        X.append(sp.csr_matrix((np.ones(T * n_active),
                                (np.repeat(np.arange(T), n_active), cols.ravel())),
                               shape=(T, D)))
        y.append(rng.integers(0, V, T))
    y[0][:min(V, T)] = np.arange(min(V, T))
    return X, y


def _peak(call):
    """``call()``'s result and the peak of the memory it traced (bytes)."""
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


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
    original = _gp_predict.sequence_moments

    def recording(pred, data):
        sizes.append(data.n_sequences)
        return original(pred, data)

    monkeypatch.setattr(_gp_predict, "sequence_moments", recording)
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
    out, peak = _peak(lambda: fitted.predict_marginals(X))
    assert len(out) == 2000
    assert peak < 100e6, f"predict_marginals peaked at {peak / 1e6:.0f} MB"


def _fit_inducing(X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GPStructTagger(approximation="inducing", n_inducing=10, max_iter=2,
                              n_samples=4, n_predict_samples=4, random_state=0).fit(X, y)


@pytest.mark.parametrize("form", ["features", "inducing"])
def test_elbo_is_summed_chunk_by_chunk(fitted, form, monkeypatch):
    X, y = _sparse_sequences(30, 5, 10, 500, seed=3)
    model = fitted if form == "features" else _fit_inducing(*_sparse_sequences(20, 30, 10,
                                                                               500, seed=0))
    whole = model.elbo(X, y)
    monkeypatch.setattr(_gp_predict, "PREDICT_CHUNK_SEQUENCES", 7)
    sizes = []
    module = weight_space_form if form == "features" else inducing_form
    original = module.sequence_ell

    def recording(data, *args):
        sizes.append(data.n_sequences)
        return original(data, *args)

    monkeypatch.setattr(module, "sequence_ell", recording)
    assert model.elbo(X, y) == whole  # the same sum, bit for bit
    assert sizes == [7, 7, 7, 7, 2]


def test_elbo_memory_does_not_grow_with_the_sequences(fitted):
    # 2000 sequences of 30 tokens, 10 labels: 199 MB at the peak when every
    # sequence's covariances and draws were built at once; 32 MB by chunks
    # (30 MB for 500 sequences, 36 MB for 4000)
    X, y = _sparse_sequences(2000, 30, 10, 500, seed=4)
    fitted.elbo(X[:2], y[:2])
    value, peak = _peak(lambda: fitted.elbo(X, y))
    assert np.isfinite(value)
    assert peak < 80e6, f"elbo peaked at {peak / 1e6:.0f} MB"


# ------------------------------------------------------ RandomizedCRFTagger
def _fit_crf(V):
    X, y = _sparse_sequences(V, 10, V, 300, seed=0, n_active=3)
    for n in range(V):  # every label seen
        y[n][0] = n
    with warnings.catch_warnings():  # max_iter reached: a short fit is enough
        warnings.simplefilter("ignore", ConvergenceWarning)
        return RandomizedCRFTagger(max_iter=2, random_state=0).fit(X, y)


def test_marginals_memory_does_not_grow_with_pairwise_marginals():
    # 2000 sequences of 3 tokens, 150 labels: the marginals are 7 MB, the
    # pairwise marginals of one call over all of them 360 MB
    model = _fit_crf(150)
    X, _ = _sparse_sequences(2000, 3, 150, 300, seed=1, n_active=3)
    model.predict_marginals(X[:2])
    out, peak = _peak(lambda: model.predict_marginals(X))
    assert len(out) == 2000 and out[0].shape == (3, 150)
    assert peak < 120e6, f"predict_marginals peaked at {peak / 1e6:.0f} MB"


def test_chunked_marginals_are_those_of_one_call(monkeypatch):
    model = _fit_crf(12)
    rng = np.random.default_rng(2)
    X = [_sparse_sequences(1, int(T), 12, 300, seed=int(T), n_active=3)[0][0]
         for T in rng.integers(1, 30, 50)]
    whole = model.predict_marginals(X)
    entropy = model.predict_uncertainty(X)
    monkeypatch.setattr(crf_solver, "_PAIRWISE_BYTES", 8 * 12 * 12 * 7)  # 7 sequences
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
