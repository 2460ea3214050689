"""The decoder registry shared by both taggers."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct._tagging.decoders import DECODERS, decode
from skgpstruct.chain.backend import get_backend
from skgpstruct.datasets import make_chain_data
from skgpstruct.metrics import is_span_tagging


@pytest.fixture(scope="module")
def fitted():
    X, y = make_chain_data(n_sequences=30, n_classes=4, n_features=5, random_state=1)
    crf = RandomizedCRFTagger(random_state=0).fit(X[:20], y[:20])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a short fit is enough
        gp = GPStructTagger(n_inducing=10, max_iter=10, n_samples=4,
                            n_predict_samples=8, random_state=0).fit(X[:20], y[:20])
    return crf, gp, X[20:]


def test_registry_names():
    assert set(DECODERS) == {"marginal", "viterbi", "beam"}


@pytest.mark.parametrize("which", ["crf", "gp"])
def test_marginal_decoder_is_the_argmax_of_predict_marginals(fitted, which):
    crf, gp, X = fitted
    tagger = crf if which == "crf" else gp
    data = tagger._check_X(X)
    paths = decode("marginal", tagger, data, get_backend("cpu"))
    for p, m in zip(paths, tagger.predict_marginals(X)):
        np.testing.assert_array_equal(p, m.argmax(axis=1))


@pytest.mark.parametrize("which", ["crf", "gp"])
def test_full_beam_equals_viterbi(fitted, which):
    crf, gp, X = fitted
    tagger = crf if which == "crf" else gp
    tagger.beam_size = len(tagger.classes_)  # read by the "beam" decoder only
    try:
        data = tagger._check_X(X)
        a = decode("viterbi", tagger, data, get_backend("cpu"))
        b = decode("beam", tagger, data, get_backend("cpu"))
    finally:
        del tagger.beam_size
        if which == "crf":
            tagger.beam_size = None
    for p, q in zip(a, b):
        np.testing.assert_array_equal(p, q)


def test_gp_predict_uses_its_decode_parameter(fitted):
    _, gp, X = fitted
    data = gp._check_X(X)
    gp.set_params(decode="viterbi")
    try:
        expect = decode("viterbi", gp, data, get_backend("cpu"))
        for p, q in zip(gp.predict(X), expect):
            np.testing.assert_array_equal(p, gp.classes_[q])
    finally:
        gp.set_params(decode="auto")


def test_unknown_decoder_is_a_clear_error(fitted):
    crf, _, X = fitted
    with pytest.raises(ValueError, match="Unknown decoder 'nbest'"):
        decode("nbest", crf, crf._check_X(X), get_backend("cpu"))


@pytest.mark.parametrize("labels, expected", [
    (["B-NP", "I-NP", "O"], True), (["B", "I", "O"], True), (["I-PER", "O"], True),
    (["B-PER", "E-PER", "S-LOC", "O"], True), (["B_ORG", "I_ORG"], True),
    (["B-NP", "O"], False),  # no tag continues a span: every span is one token
    (["B-NP", "I-NP", "NN"], False), (["DT", "IN", "NN"], False), (["O"], False),
    ([0, 1, 2], False), (np.array(["B-X", "I-X", "O"]), True),
])
def test_is_span_tagging(labels, expected):
    assert is_span_tagging(labels) is expected


def test_gp_auto_decode_is_chosen_for_span_labels_else_marginal(fitted):
    _, gp, X = fitted
    assert gp.decode == "auto" and gp.decode_ == "marginal"  # integer labels
    names = np.array(["O", "B-NP", "I-NP", "B-VP"])
    Xs, ys = make_chain_data(n_sequences=20, n_classes=4, n_features=5, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        span = GPStructTagger(n_inducing=10, max_iter=5, n_samples=4, n_predict_samples=8,
                              random_state=0).fit(Xs, [names[y] for y in ys])
    chosen = span.temperature_cv_results_["decoder"]  # by the validation
    assert span.decode_ == chosen in ("viterbi", "marginal")
    auto = span.predict(X)
    span.set_params(decode=chosen)
    for p, q in zip(auto, span.predict(X)):
        np.testing.assert_array_equal(p, q)
    span.set_params(decode="marginal")
    assert span.decode_ == "marginal"
    with pytest.raises(Exception, match="not fitted"):
        GPStructTagger().decode_
