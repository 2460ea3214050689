"""Tests of skgpstruct.features: CRFppTemplate and SequenceVectorizer."""

import pickle
import re
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction import DictVectorizer
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from skgpstruct.datasets import load_benchmark
from skgpstruct.features import CRFppTemplate, SequenceVectorizer

# A template in CRF++'s syntax (written for these tests) exercising padding on
# both sides, several macros, literal text, a constant feature and B lines.
TEMPLATE = """\
# Unigram
U00:%x[-2,0]
U01:%x[-1,0]
U02:%x[0,0]
U05:%x[-1,0]/%x[0,0]
U06:%x[0,0]/%x[1,0]

U17:%x[0,1]/%x[1,1]
U18:%x[1,1]/%x[2,1]
U20:%x[-2,1]/%x[-1,1]/%x[0,1]
U30:pre%x[0,0]-mid-%x[1,1]}{post
U

# Bigram
B
"""

SENTENCE = [("He", "PRP"), ("reckons", "VBZ"), (".", ".")]

# Written out by hand from CRF++'s rules (feature.cpp): "_B-1" is the token
# before the first, "_B-2" the one before that, "_B+1" the token after the
# last, "_B+2" the one after that.
EXPECTED = [
    {
        "U00:_B-2", "U01:_B-1", "U02:He", "U05:_B-1/He", "U06:He/reckons",
        "U17:PRP/VBZ", "U18:VBZ/.", "U20:_B-2/_B-1/PRP",
        "U30:preHe-mid-VBZ}{post", "U",
    },
    {
        "U00:_B-1", "U01:He", "U02:reckons", "U05:He/reckons", "U06:reckons/.",
        "U17:VBZ/.", "U18:./_B+1", "U20:_B-1/PRP/VBZ",
        "U30:prereckons-mid-.}{post", "U",
    },
    {
        "U00:He", "U01:reckons", "U02:.", "U05:reckons/.", "U06:./_B+1",
        "U17:./_B+1", "U18:_B+1/_B+2", "U20:PRP/VBZ/.",
        "U30:pre.-mid-_B+1}{post", "U",
    },
]


def _row_features(names, x, t):
    """Feature strings of the non-zero columns of row t."""
    return {names[j] for j in x.indices[x.indptr[t]:x.indptr[t + 1]]}


# ---------------------------------------------------------------------------
# An independent expansion: regular-expression substitution, one token at a
# time, padding computed from the distance to the sentence ends.
# ---------------------------------------------------------------------------

_MACRO_RE = re.compile(r"%x\[(-?\d+),(\d+)\]")


def _reference_expand(template_text, sentence):
    lines = [ln for ln in template_text.splitlines() if ln.startswith("U")]
    out = []
    for t in range(len(sentence)):
        feats = []
        for line in lines:
            def value(m, t=t):
                i = t + int(m.group(1))
                if i < 0:
                    return "_B" + str(i)  # i = -1 -> "_B-1"
                if i >= len(sentence):
                    return "_B+" + str(i - len(sentence) + 1)
                return sentence[i][int(m.group(2))]

            feats.append(_MACRO_RE.sub(value, line))
        out.append(feats)
    return out


# ---------------------------------------------------------------------------
# CRFppTemplate: hand-checked expansion
# ---------------------------------------------------------------------------


def test_crfpp_hand_checked_sentence():
    vec = CRFppTemplate(TEMPLATE).fit([SENTENCE])
    assert set(vec.vocabulary_) == set().union(*EXPECTED)
    (x,) = vec.transform([SENTENCE])
    names = vec.get_feature_names_out()
    assert sp.isspmatrix_csr(x) and x.shape == (3, len(vec.vocabulary_))
    for t in range(3):
        assert _row_features(names, x, t) == EXPECTED[t]
    # The independent expansion agrees with the hand-written strings.
    assert [set(r) for r in _reference_expand(TEMPLATE, SENTENCE)] == EXPECTED


def test_crfpp_bigram_lines_with_macros_warn():
    """CRF++'s token-conditioned label-pair features: kept, ignored, said."""
    with pytest.warns(UserWarning, match=r"'B01:%x\[0,0\]'\) are ignored"):
        vec = CRFppTemplate(TEMPLATE + "B01:%x[0,0]\n").fit([SENTENCE])
    assert vec.bigram_templates_ == ["B", "B01:%x[0,0]"]
    assert vec.vocabulary_ == CRFppTemplate(TEMPLATE).fit([SENTENCE]).vocabulary_


def test_crfpp_attributes_and_bigram_lines_ignored():
    vec = CRFppTemplate(TEMPLATE).fit([SENTENCE])
    assert vec.bigram_templates_ == ["B"]
    assert vec.unigram_templates_[0] == "U00:%x[-2,0]" and vec.unigram_templates_[-1] == "U"
    assert vec.n_columns_ == 2
    no_b = TEMPLATE.replace("\nB\n", "\n")
    vec2 = CRFppTemplate(no_b).fit([SENTENCE])
    assert vec2.vocabulary_ == vec.vocabulary_ and vec2.bigram_templates_ == []
    names = vec.get_feature_names_out()
    assert names.dtype == object and list(names) == sorted(names)
    assert all(vec.vocabulary_[f] == i for i, f in enumerate(names))
    # Every string occurs once in the sentence, except the constant "U".
    counts = dict(zip(names, vec.feature_counts_.tolist()))
    assert counts == {f: 3 if f == "U" else 1 for f in names}


def test_crfpp_row_offsets_up_to_eight():
    vec = CRFppTemplate("U0:%x[-8,0]\nU1:%x[8,0]\nU2:%x[-3,0]").fit([[("w",)]])
    assert set(vec.vocabulary_) == {"U0:_B-8", "U1:_B+8", "U2:_B-3"}


def test_crfpp_tokens_as_str_and_crlf_template():
    vec = CRFppTemplate("U0:%x[0,0]\r\nU1:%x[1,0]\r\n").fit([["a", "b"]])
    assert set(vec.vocabulary_) == {"U0:a", "U0:b", "U1:b", "U1:_B+1"}


@pytest.mark.parametrize(
    "template, match",
    [
        ("X01:%x[0,0]", "must start with 'U'"),
        (" U01:%x[0,0]", "must start with 'U'"),
        ("U01:%x[0]", "macro"),
        ("U01:%y[0,0]", "macro"),
        ("U01:%x[ 0,0]", "macro"),
        ("U01:%x[+1,0]", "macro"),
        ("U01:%x[0,-1]", "macro"),
        ("U01:100%", "macro"),
        ("U01:%x[9,0]", r"outside CRF\+\+'s range"),
        ("# only comments\nB\n", "no unigram"),
        ("U01:%x[0,2]", "reads column 2"),
    ],
)
def test_crfpp_bad_templates(template, match):
    with pytest.raises(ValueError, match=match):
        CRFppTemplate(template).fit([SENTENCE])


def test_crfpp_bad_input():
    vec = CRFppTemplate("U0:%x[0,0]")
    with pytest.raises(NotFittedError):
        vec.transform([SENTENCE])
    with pytest.raises(TypeError, match="list of sequences"):
        vec.fit("He reckons")
    with pytest.raises(TypeError, match="list of sequences"):
        vec.fit(np.array([["a", "b"]]))
    with pytest.raises(TypeError, match="Sequence 0"):
        vec.fit(["He reckons"])
    with pytest.raises(TypeError, match="Token 1 of sequence 0 holds a int"):
        vec.fit([[("a",), (3,)]])
    with pytest.raises(TypeError, match="Token 0 of sequence 1"):
        vec.fit([[("a",)], [3]])
    with pytest.raises(ValueError, match="empty"):
        vec.fit([])
    with pytest.raises(ValueError, match="min_freq"):
        CRFppTemplate("U0:%x[0,0]", min_freq=0).fit([SENTENCE])
    with pytest.raises(ValueError, match="min_freq=5"):
        CRFppTemplate("U0:%x[0,0]", min_freq=5).fit([SENTENCE])
    with pytest.raises(ValueError, match="dtype"):
        CRFppTemplate("U0:%x[0,0]", dtype=np.int64).fit([SENTENCE])
    # scipy.sparse has no float16 (it used to come out as an unusable matrix)
    with pytest.raises(ValueError, match="no float16"):
        CRFppTemplate("U0:%x[0,0]", dtype=np.float16).fit([SENTENCE])
    fitted = CRFppTemplate("U0:%x[0,0]").fit([SENTENCE]).set_params(dtype=np.float16)
    with pytest.raises(ValueError, match="no float16"):
        fitted.transform([SENTENCE])


def test_a_failed_refit_leaves_the_earlier_fit():
    X = [[("He", "PRP"), ("reckons", "VBZ")]]
    vec = CRFppTemplate("U00:%x[0,0]").fit(X)
    before = vec.transform([[("PRP", "He")]])[0].toarray()
    for params in (dict(template="U00:%x[0,1]", min_freq=5),  # no feature 5 times
                   dict(template="U00:%x[0,3]")):  # a column the tokens lack
        vec.set_params(**params)
        with pytest.raises(ValueError):
            vec.fit(X)
        vec.set_params(template="U00:%x[0,0]", min_freq=1)
        # the earlier template with the earlier vocabulary (the new template
        # used to be applied with the old vocabulary, or to crash)
        np.testing.assert_array_equal(vec.transform([[("PRP", "He")]])[0].toarray(), before)
        assert vec.n_columns_ == 1
    with pytest.raises(ValueError, match="template"):
        CRFppTemplate(3).fit([SENTENCE])
    fitted = CRFppTemplate("U0:%x[0,1]").fit([SENTENCE])
    with pytest.raises(ValueError, match="Token 0 of sequence 0 has 1 column"):
        fitted.transform([[("He",)]])


def test_crfpp_unseen_features_and_min_freq():
    train = [[("a", "X"), ("b", "Y"), ("a", "X")], [("a", "Y")]]
    template = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[0,0]/%x[0,1]"
    counts = Counter(f for s in train for tok in _reference_expand(template, s) for f in tok)
    assert counts["U0:a"] == 3 and counts["U2:a/X"] == 2 and counts["U2:b/Y"] == 1
    for k in (1, 2, 3):
        vec = CRFppTemplate(template, min_freq=k).fit(train)
        assert set(vec.vocabulary_) == {f for f, c in counts.items() if c >= k}
        for f, c in zip(vec.get_feature_names_out(), vec.feature_counts_):
            assert counts[f] == c
    vec = CRFppTemplate(template, min_freq=2).fit(train)  # U0:a, U1:X, U1:Y, U2:a/X
    (x,) = vec.transform([[("b", "X"), ("c", "Z")]])
    names = vec.get_feature_names_out()
    assert x.shape == (2, 4)
    assert _row_features(names, x, 0) == {"U1:X"}
    assert _row_features(names, x, 1) == set()  # all unseen: empty row


def test_crfpp_duplicate_strings_are_binary():
    # Two template lines giving the same string at one token: one column, 1.
    vec = CRFppTemplate("U:%x[0,0]\nU:%x[0,1]").fit([[("a", "a"), ("a", "b")]])
    (x,) = vec.transform([[("a", "a")]])
    assert x.toarray().tolist() == [[1.0, 0.0]]
    assert vec.feature_counts_.tolist() == [3, 1]  # counted per occurrence


def test_crfpp_sklearn_api(tmp_path):
    est = CRFppTemplate(TEMPLATE, min_freq=2)
    assert est.get_params() == {"template": TEMPLATE, "min_freq": 2, "dtype": np.float64}
    cl = clone(est)
    assert cl.get_params() == est.get_params() and cl is not est
    est.set_params(min_freq=1)
    assert est.min_freq == 1
    check_no_attributes_set_in_init("CRFppTemplate", CRFppTemplate(TEMPLATE))
    check_get_params_invariance("CRFppTemplate", CRFppTemplate(TEMPLATE))
    check_set_params("CRFppTemplate", CRFppTemplate(TEMPLATE))
    assert "CRFppTemplate(template=" in repr(est)
    # from_file reads the text.
    path = tmp_path / "template"
    path.write_text(TEMPLATE, encoding="euc_jp")
    from_file = CRFppTemplate.from_file(path, encoding="euc_jp", min_freq=3)
    assert from_file.template == TEMPLATE and from_file.min_freq == 3
    # Pickle round trip of a fitted transformer.
    fitted = CRFppTemplate(TEMPLATE, dtype=np.float32).fit([SENTENCE])
    restored = pickle.loads(pickle.dumps(fitted))
    a, b = fitted.transform([SENTENCE])[0], restored.transform([SENTENCE])[0]
    assert a.dtype == np.float32 and (a != b).nnz == 0
    # fit_transform equals fit then transform.
    c = CRFppTemplate(TEMPLATE).fit_transform([SENTENCE, SENTENCE[:1]])
    d = CRFppTemplate(TEMPLATE).fit([SENTENCE, SENTENCE[:1]]).transform([SENTENCE, SENTENCE[:1]])
    assert all((p != q).nnz == 0 for p, q in zip(c, d))


# ---------------------------------------------------------------------------
# CRFppTemplate on the basenp benchmark (shared data)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def basenp_fold0(shared_dir):
    data = load_benchmark("basenp", data_home=shared_dir / "data")
    train, test = data.folds[0]
    return data.template, [data.X[i] for i in train], [data.X[i] for i in test]


def test_crfpp_basenp_matches_reference_expansion(basenp_fold0):
    template, train, test = basenp_fold0
    assert len(train) == 150
    vec = CRFppTemplate(template)
    Xt = vec.fit_transform(train)
    names = vec.get_feature_names_out()
    ref_train = [_reference_expand(template, s) for s in train]
    expected = {f for s in ref_train for tok in s for f in tok}
    assert set(vec.vocabulary_) == expected
    n_lines = sum(ln.startswith("U") for ln in template.splitlines())
    assert n_lines == 20
    for x, ref in zip(Xt, ref_train):
        assert x.shape == (len(ref), len(expected))
        assert np.all(x.data == 1.0)
        for t, feats in enumerate(ref):
            assert _row_features(names, x, t) == set(feats)
    # Test sentences: unseen strings are dropped, the rest kept.
    n_unseen = 0
    for x, s in zip(vec.transform(test), test):
        for t, feats in enumerate(_reference_expand(template, s)):
            known = set(feats) & expected
            n_unseen += len(set(feats) - known)
            assert _row_features(names, x, t) == known
    assert n_unseen > 0
    # min_freq as crf_learn -f: occurrence counts over the training data.
    counts = Counter(f for s in ref_train for tok in s for f in tok)
    vec3 = CRFppTemplate(template, min_freq=3).fit(train)
    assert set(vec3.vocabulary_) == {f for f, c in counts.items() if c >= 3}
    assert 0 < len(vec3.vocabulary_) < len(expected)


# ---------------------------------------------------------------------------
# SequenceVectorizer
# ---------------------------------------------------------------------------


def test_sequence_vectorizer_matches_dictvectorizer_on_flat_dicts():
    X = [
        [{"w": "He", "up": True, "len": 2, "sfx": ["e", "He"]},
         {"w": "reckons", "up": False, "len": 7.5, "bias": 1.0}],
        [{"w": "the", "len": np.int64(3), "f32": np.float32(0.25)}],
    ]
    vec = SequenceVectorizer()
    Xt = vec.fit_transform(X)
    dv = DictVectorizer().fit([tok for s in X for tok in s])
    assert vec.get_feature_names_out().tolist() == dv.get_feature_names_out().tolist()
    for x, s in zip(Xt, X):
        assert sp.isspmatrix_csr(x) and x.dtype == np.float64
        np.testing.assert_array_equal(x.toarray(), dv.transform(s).toarray())
    assert [x.shape for x in vec.transform(X)] == [(2, 9), (1, 9)]


def test_sequence_vectorizer_crfsuite_forms():
    X = [[
        {"word": "He", "prefix": {"p1": "H", "p2": "He"}, "shape": {"upper": 1.5}},
        ["BOS", "cap"],  # a token as a list of feature names
        {"word": "x", "gone": None, "words": ("a", "a")},
    ]]
    vec = SequenceVectorizer(separator=":", sort=False)
    (x,) = vec.fit_transform(X)
    assert vec.feature_names_ == [
        "word:He", "prefix:p1:H", "prefix:p2:He", "shape:upper", "BOS", "cap",
        "word:x", "words:a",
    ]
    np.testing.assert_array_equal(
        x.toarray(),
        [[1, 1, 1, 1.5, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0, 1, 2]],
    )


def test_sequence_vectorizer_unseen_dense_dtype_and_zeros():
    vec = SequenceVectorizer(sparse=False, dtype=np.float32)
    vec.fit([[{"a": "x", "flag": False}]])
    assert vec.get_feature_names_out().tolist() == ["a=x", "flag"]
    (x,) = vec.transform([[{"a": "y", "new": 3.0, "flag": True}, {}]])
    assert isinstance(x, np.ndarray) and x.dtype == np.float32
    np.testing.assert_array_equal(x, [[0, 1], [0, 0]])
    (xs,) = SequenceVectorizer().fit_transform([[{"a": 0.0, "b": 1.0}]])
    assert xs.nnz == 1  # zero values are not stored


def test_sequence_vectorizer_min_freq():
    X = [[{"w": "a", "x": 2.0}, {"w": "b"}], [{"w": "a"}, {"w": "c", "x": 1.0}]]
    full = SequenceVectorizer().fit(X)
    assert full.feature_names_ == ["w=a", "w=b", "w=c", "x"]
    cut = SequenceVectorizer(min_freq=1, sort=False)
    Xt = cut.fit_transform(X)
    assert cut.feature_names_ == ["w=a", "x"]  # each seen twice; b and c once
    np.testing.assert_array_equal(Xt[0].toarray(), [[1, 2], [0, 0]])
    np.testing.assert_array_equal(cut.transform(X)[1].toarray(), Xt[1].toarray())
    with pytest.raises(ValueError, match="min_freq=2 drops every feature"):
        SequenceVectorizer(min_freq=2).fit(X)


@pytest.mark.parametrize(
    "X, exc, match",
    [
        ("abc", TypeError, "list of sequences"),
        ([{"a": 1}], TypeError, "Sequence 0"),
        ([["word"]], TypeError, "Token 0 of sequence 0"),
        ([[{1: "a"}]], TypeError, "feature names must be str"),
        ([[{"a": 1j}]], TypeError, "complex"),
        ([[{"a": object()}]], TypeError, "supported are"),
        ([[{"a": [1, 2]}]], TypeError, "lists must hold str"),
        ([[{"a": float("nan")}]], ValueError, "nan"),
        ([[{}]], ValueError, "No feature"),
        ([], ValueError, "empty"),
    ],
)
def test_sequence_vectorizer_errors(X, exc, match):
    with pytest.raises(exc, match=match):
        SequenceVectorizer().fit(X)


def test_sequence_vectorizer_sklearn_api():
    with pytest.raises(NotFittedError):
        SequenceVectorizer().transform([[{"a": 1}]])
    with pytest.raises(ValueError, match="dtype"):
        SequenceVectorizer(dtype=np.int32).fit([[{"a": 1}]])
    with pytest.raises(ValueError, match="no float16"):
        SequenceVectorizer(dtype=np.float16).fit([[{"a": 1}]])
    with pytest.raises(ValueError, match="separator"):
        SequenceVectorizer(separator=1).fit([[{"a": 1}]])
    check_parameters_default_constructible("SequenceVectorizer", SequenceVectorizer())
    check_no_attributes_set_in_init("SequenceVectorizer", SequenceVectorizer())
    check_get_params_invariance("SequenceVectorizer", SequenceVectorizer())
    check_set_params("SequenceVectorizer", SequenceVectorizer())
    est = SequenceVectorizer(sort=False)
    assert clone(est).get_params() == est.get_params()
    fitted = SequenceVectorizer().fit([[{"a": "x"}]])
    restored = pickle.loads(pickle.dumps(fitted))
    assert restored.vocabulary_ == fitted.vocabulary_


# ---------------------------------------------------------------------------
# Both transformers as the first step of a Pipeline
# ---------------------------------------------------------------------------


class _RecordingTagger(BaseEstimator):
    """Final step that needs a list of (T_n, n_features) matrices."""

    def fit(self, X, y):
        assert isinstance(X, list) and len(X) == len(y)
        for x, labels in zip(X, y):
            assert x.shape[0] == len(labels)
        self.n_features_ = X[0].shape[1]
        labels = [lab for s in y for lab in s]
        self.majority_ = Counter(labels).most_common(1)[0][0]
        return self

    def predict(self, X):
        assert all(x.shape[1] == self.n_features_ for x in X)
        return [[self.majority_] * x.shape[0] for x in X]


@pytest.mark.parametrize(
    "transformer, X",
    [
        (CRFppTemplate(TEMPLATE), [SENTENCE, SENTENCE[:2]]),
        (SequenceVectorizer(), [[{"w": "He"}, {"w": "x"}, {"w": "y"}], [{"w": "x"}] * 2]),
    ],
)
def test_transformers_in_pipeline(transformer, X):
    y = [["B", "O", "O"], ["B", "O"]]
    pipe = Pipeline([("features", transformer), ("tagger", _RecordingTagger())])
    pipe.fit(X, y)
    assert pipe.named_steps["tagger"].n_features_ == len(pipe[0].vocabulary_)
    assert pipe.predict(X) == [["O"] * 3, ["O"] * 2]
    assert pipe.get_params()["features__" + next(iter(transformer.get_params()))] is not None
    assert clone(pipe).fit(X, y).predict(X[:1]) == [["O"] * 3]
