"""GPStructTagger's decoder for span labels, chosen by its validation
(``_gpstruct/span_decoder.py``)."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skgpstruct import GPStructTagger
from skgpstruct._gpstruct.posterior_cv import cv_posterior
from skgpstruct._gpstruct.span_decoder import SpanScorer, pick_with_decoder, span_f1
from skgpstruct._gpstruct.split_cv import split_posterior
from skgpstruct._input.sequences import SequenceData
from skgpstruct._tagging.crf_solver import CRFSpec, crf_unary, fit_crf
from skgpstruct.chain import viterbi_ragged
from skgpstruct.chain._reference import viterbi_ref
from skgpstruct.datasets import make_chain_data
from skgpstruct.metrics import chunk_f1_score

NAMES = np.array(["O", "B-NP", "I-NP", "B-VP", "I-VP"])


def _data(n_sequences=40, seed=0):
    X, y = make_chain_data(n_sequences=n_sequences, n_classes=NAMES.size, n_features=6,
                           random_state=seed)
    return X, y, SequenceData.from_sequences(X, y, n_features=X[0].shape[1])


def _counts_by_metric(gold, pred):
    """(n_correct, n_pred, n_true) from chunk_f1_score's precision and recall."""
    from skgpstruct.metrics import extract_chunks
    n_true = sum(len(extract_chunks(g)) for g in gold)
    n_pred = sum(len(extract_chunks(p)) for p in pred)
    precision, recall, f1 = chunk_f1_score(gold, pred, return_precision_recall=True)
    return n_true, n_pred, f1


def test_span_counts_agree_with_chunk_f1_score():
    _, y, data = _data()
    rng = np.random.default_rng(0)
    scorer = SpanScorer(NAMES, data)
    for _ in range(5):
        flat = rng.integers(NAMES.size, size=data.n_tokens)
        counts = scorer.counts(flat)
        gold = [NAMES[s] for s in y]
        pred = [NAMES[p] for p in np.split(flat, data.offsets[1:-1])]
        n_true, n_pred, f1 = _counts_by_metric(gold, pred)
        assert counts[1] == n_pred and counts[2] == n_true
        assert span_f1(counts) == pytest.approx(f1, abs=1e-12)
    # the gold paths themselves: every span right
    assert span_f1(scorer.counts(data.y_flat)) == 1.0


def test_span_f1_without_spans_is_one():
    assert span_f1((0, 0, 0)) == 1.0
    assert span_f1((0, 3, 0)) == 0.0


def test_viterbi_counts_are_those_of_the_reference_paths():
    _, _, data = _data()
    spec = CRFSpec(np.ones(NAMES.size, dtype=bool), c2=0.5)
    crf = fit_crf(data, spec, None, max_iter=30)
    scorer = SpanScorer(NAMES, data)
    U = crf_unary(crf, data)
    paths = np.concatenate([viterbi_ref(U[a:b], crf.transition)[0]
                            for a, b in zip(data.offsets[:-1], data.offsets[1:])])
    np.testing.assert_array_equal(scorer.viterbi(crf), scorer.counts(crf.labels[paths]))


def test_viterbi_path_does_not_depend_on_the_mean_scale():
    # the premise of the rule: the stand-in's mean is c_T times the mode,
    # and a positive scale of all potentials keeps the best path
    rng = np.random.default_rng(1)
    U, B = rng.normal(size=(30, 5)), rng.normal(size=(5, 5))
    lengths = [7, 11, 12]
    base = viterbi_ragged(U, lengths, B)[0]
    for c in (0.3, 1.0, 2.7, 20.0):
        np.testing.assert_array_equal(viterbi_ragged(c * U, lengths, c * B)[0], base)


def _rule(order):
    """A stand-in for warmest_pair: the first pair of ``order`` the mask marks."""
    def rule(mask):
        for pair in order:
            if mask[pair]:
                return pair
        return None
    return rule


def test_pick_with_decoder():
    close = np.array([[False, True], [False, True]])
    rule = _rule([(0, 0), (1, 0), (1, 1), (0, 1)])
    viterbi = np.array([[8, 10, 10], [9, 10, 10]])  # F1 0.8, 0.9
    marginal = np.zeros((2, 2, 3), dtype=int)
    marginal[1, 1] = (85, 100, 100)  # 0.85 at the accurate pair
    # without spans: the accuracy rule's pair, no decoder
    assert pick_with_decoder(rule, close, (0, 1)) == ((1, 1), {})
    # Viterbi at the free pair (0, 0): 0.8 < 0.85, the marginals win
    pick, choice = pick_with_decoder(rule, close, (0, 1), (viterbi, marginal))
    assert pick == (1, 1) and choice["decoder"] == "marginal"
    assert choice["viterbi_f1"] == pytest.approx(0.8)
    assert choice["marginal_f1"] == pytest.approx(0.85)
    # Viterbi better: its pair is the rule's without the accuracy condition
    viterbi[0] = (9, 10, 10)
    pick, choice = pick_with_decoder(rule, close, (0, 1), (viterbi, marginal))
    assert pick == (0, 0) and choice["decoder"] == "viterbi"
    # a tie keeps Viterbi
    marginal[1, 1] = (90, 100, 100)
    assert pick_with_decoder(rule, close, (0, 1), (viterbi, marginal))[1]["decoder"] \
        == "viterbi"
    # no accurate pair: the fallback is the marginals' pair
    none = np.zeros_like(close)
    marginal[0, 1] = (95, 100, 100)
    pick, choice = pick_with_decoder(rule, none, (0, 1), (viterbi, marginal))
    assert pick == (0, 1) and choice["decoder"] == "marginal"


def test_cv_posterior_chooses_a_decoder_by_held_out_span_f1():
    _, _, data = _data(n_sequences=45, seed=2)
    kw = dict(random_state=1, mode_error=0.2)
    v0, t0, plain = cv_posterior(data, NAMES.size, [1.0, 3.0], **kw)
    v1, t1, res = cv_posterior(data, NAMES.size, [1.0, 3.0], span_labels=NAMES, **kw)
    assert "decoder" not in plain
    assert res["decoder"] in ("marginal", "viterbi")
    assert 0.0 <= res["marginal_f1"] <= 1.0 and 0.0 <= res["viterbi_f1"] <= 1.0
    if res["decoder"] == "marginal":  # the accuracy rule's pair, as without spans
        assert (v1, t1) == (v0, t0)
        assert res["marginal_f1"] > res["viterbi_f1"]
    else:
        assert res["viterbi_f1"] >= res["marginal_f1"]
    for key in ("log_loss", "calibration_error", "mean_scale"):
        np.testing.assert_array_equal(plain[key], res[key])


def test_split_posterior_chooses_a_decoder():
    _, _, data = _data(n_sequences=60, seed=3)
    out = split_posterior(data, NAMES.size, random_state=0, span_labels=NAMES)
    res = out[3]
    assert res["decoder"] in ("marginal", "viterbi")
    f1 = res[res["decoder"] + "_f1"]
    other = res["marginal_f1" if res["decoder"] == "viterbi" else "viterbi_f1"]
    assert f1 >= other


def test_tagger_decodes_as_its_validation_chose():
    X, y, _ = _data(n_sequences=40, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp = GPStructTagger(max_iter=10, n_predict_samples=8, random_state=0).fit(
            X, [NAMES[s] for s in y])
    res = gp.temperature_cv_results_
    assert gp.decode == "auto" and gp.decode_ == res["decoder"]
    gp.set_params(decode="viterbi")
    assert gp.decode_ == "viterbi"
    gp.set_params(decode="marginal")
    assert gp.decode_ == "marginal"
    # integer labels: no span decoder chosen, the marginals
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = GPStructTagger(max_iter=10, n_predict_samples=8, random_state=0).fit(X, y)
    assert "decoder" not in plain.temperature_cv_results_
    assert plain.decode_ == "marginal"


def test_the_chosen_decoder_survives_a_model_file(tmp_path):
    import skgpstruct

    X, y, _ = _data(n_sequences=40, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp = GPStructTagger(max_iter=5, n_predict_samples=8, random_state=0).fit(
            X, [NAMES[s] for s in y])
    path = tmp_path / "gp.skg"
    skgpstruct.save(gp, path)
    back = skgpstruct.load(path)
    assert back.temperature_cv_results_["decoder"] == gp.temperature_cv_results_["decoder"]
    assert back.decode_ == gp.decode_
    for a, b in zip(gp.predict(X), back.predict(X)):
        np.testing.assert_array_equal(a, b)
