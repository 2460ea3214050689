"""Tests of skgpstruct.features.WordFeatures."""

import pickle
import random
import warnings
from collections import Counter

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.utils import murmurhash3_32
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from skgpstruct import RandomizedCRFTagger
from skgpstruct.features import WordFeatures
from skgpstruct.features._word import _shapes

SENTENCE = ["Ügyész", "12-t", "."]

# Written out by hand from the documented rules (window=1, affix_length=4).
EXPECTED = [
    {
        "w=ügyész", "p1=ü", "p2=üg", "p3=ügy", "p4=ügyé",
        "s1=z", "s2=sz", "s3=ész", "s4=yész",
        "shape=Xxxxx", "short_shape=Xx", "is_title", "is_first",
        "-1:BOS", "+1:w=12-t", "+1:s1=t", "+1:s2=-t", "+1:s3=2-t",
    },
    {
        "w=12-t", "p1=1", "p2=12", "p3=12-", "p4=12-t",
        "s1=t", "s2=-t", "s3=2-t", "s4=12-t",
        "shape=dd-x", "short_shape=d-x", "has_digit", "has_hyphen", "is_lower",
        "-1:w=ügyész", "-1:s1=z", "-1:s2=sz", "-1:s3=ész", "+1:w=.", "+1:s1=.",
    },
    {
        "w=.", "p1=.", "s1=.", "shape=.", "short_shape=.", "is_punct", "is_last",
        "-1:w=12-t", "-1:s1=t", "-1:s2=-t", "-1:s3=2-t", "+1:EOS",
    },
]


def _row_names(names, x, t):
    return {names[j] for j in x.indices[x.indptr[t]:x.indptr[t + 1]]}


def _all_row_names(vec, x):
    names = vec.get_feature_names_out()
    return [_row_names(names, x, t) for t in range(x.shape[0])]


def _random_sentences(n_tokens, seed=0, alphabet="abcdeÉőÜ-1."):
    rng = random.Random(seed)
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7)))
             for _ in range(60)]
    X, n = [], 0
    while n < n_tokens:
        length = rng.randint(1, 9)
        X.append([rng.choice(words) for _ in range(length)])
        n += length
    return X


# ---------------------------------------------------------------------------
# The features themselves
# ---------------------------------------------------------------------------


def test_hand_checked_sentence():
    vec = WordFeatures()
    (x,) = vec.fit_transform([SENTENCE])
    assert x.shape == (3, len(vec.vocabulary_))
    assert _all_row_names(vec, x) == EXPECTED
    assert set(vec.vocabulary_) == set().union(*EXPECTED)
    assert x.dtype == np.float64 and np.all(x.data == 1.0)
    assert x.has_sorted_indices
    # bias adds one feature to every token.
    vec = WordFeatures(bias=True)
    (x,) = vec.fit_transform([SENTENCE])
    assert _all_row_names(vec, x) == [e | {"bias"} for e in EXPECTED]


def test_tokens_as_tuples_and_column():
    rows = [(w, "POS" + str(i)) for i, w in enumerate(SENTENCE)]
    vec = WordFeatures()
    (x,) = vec.fit_transform([rows])
    assert _all_row_names(vec, x) == EXPECTED
    (x,) = vec.fit_transform([[(w,) for w in SENTENCE]])  # CoNLL-U 1-tuples
    assert _all_row_names(vec, x) == EXPECTED
    (x,) = vec.fit_transform([[list(r) for r in rows]])
    assert _all_row_names(vec, x) == EXPECTED
    vec = WordFeatures(column=1, window=0, affix_length=0)
    (x,) = vec.fit_transform([rows])
    assert _all_row_names(vec, x)[1] == {
        "w=pos1", "shape=XXXd", "short_shape=Xd", "has_digit", "is_upper"}


@pytest.mark.parametrize(
    "form, shape, short",
    [
        ("Word", "Xxxx", "Xx"),
        ("Elephant", "Xxxxx", "Xx"),
        ("1999", "dddd", "d"),
        ("12345", "dddd", "d"),
        ("U.S.", "X.X.", "X.X."),
        ("ÁRVÍZTŰRŐ", "XXXX", "X"),
        ("ő", "x", "x"),
        ("e\u0301e", "xxx", "x"),  # a combining mark counts as a letter
        ("漢字", "xx", "x"),
        ("......", "....", "."),
        ("McDonald's", "XxXxxxx'x", "XxXx'x"),
        ("", "", ""),
    ],
)
def test_word_shape(form, shape, short):
    assert _shapes(form) == (shape, short)


def test_unicode_flags_and_lowercasing():
    vec = WordFeatures(window=0, affix_length=2)
    (x,) = vec.fit_transform([["ŐRÜLT", "Ügyész", "ő", "«", "42", "x-y"]])
    rows = _all_row_names(vec, x)
    assert rows[0] == {"w=őrült", "p1=ő", "p2=őr", "s1=t", "s2=lt", "shape=XXXX",
                       "short_shape=X", "is_upper", "is_first"}
    assert {"w=ügyész", "p2=üg", "is_title"} <= rows[1]
    assert "is_upper" not in rows[1] and "is_lower" not in rows[1]
    assert rows[2] == {"w=ő", "p1=ő", "s1=ő", "shape=x", "short_shape=x", "is_lower"}
    assert "is_punct" in rows[3]  # « is Unicode category Pi
    assert {"all_digits", "has_digit", "shape=dd"} <= rows[4]
    assert "is_punct" not in rows[4]
    assert {"has_hyphen", "is_lower"} <= rows[5] and "has_digit" not in rows[5]
    assert rows[5] >= {"is_last"}


@pytest.mark.parametrize("window", [0, 1, 2, 3])
def test_window_edges(window):
    vec = WordFeatures(window=window, affix_length=0)
    X = [["a"], ["a", "b", "c", "d"]]
    xs = vec.fit_transform(X)
    one = _all_row_names(vec, xs[0])[0]
    edges = {f"-{d}:BOS" for d in range(1, window + 1)} | {
        f"+{d}:EOS" for d in range(1, window + 1)}
    own = {"w=a", "shape=x", "short_shape=x", "is_lower", "is_first", "is_last"}
    assert one == own | edges
    rows = _all_row_names(vec, xs[1])
    for t, names in enumerate(rows):
        ctx = {n for n in names if ":" in n}
        expected = set()
        for d in range(1, window + 1):
            expected.add(f"-{d}:w={'abcd'[t - d]}" if t - d >= 0 else f"-{d}:BOS")
            expected.add(f"+{d}:w={'abcd'[t + d]}" if t + d < 4 else f"+{d}:EOS")
        assert ctx == expected
        assert ("is_first" in names) == (t == 0) and ("is_last" in names) == (t == 3)
    if window == 0:
        assert not any(":" in f for f in vec.vocabulary_)


def test_neighbour_suffixes_follow_affix_length():
    for affix, n_suffix in [(0, 0), (2, 2), (4, 3), (6, 3)]:
        vec = WordFeatures(affix_length=affix).fit([["a", "ügyész"]])
        got = {f for f in vec.vocabulary_ if f.startswith("+1:s")}
        assert got == {f"+1:s{k}={'ügyész'[-k:]}" for k in range(1, n_suffix + 1)}


# ---------------------------------------------------------------------------
# Vocabulary, min_freq, unseen features
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("window", [0, 1, 2])
def test_feature_counts_match_the_output(window):
    # fit counts per distinct form; transform builds every row: they agree.
    X = _random_sentences(400, seed=window)
    vec = WordFeatures(window=window, bias=True)
    xs = vec.fit_transform(X)
    column_sums = np.asarray(sum(x.sum(axis=0) for x in xs)).ravel()
    np.testing.assert_array_equal(column_sums, vec.feature_counts_)
    assert vec.n_features_out_ == len(vec.vocabulary_) == len(vec.feature_counts_)
    assert vec.feature_counts_[vec.vocabulary_["bias"]] == sum(map(len, X))
    assert vec.feature_counts_[vec.vocabulary_["is_first"]] == len(X)
    assert list(vec.get_feature_names_out()) == sorted(vec.vocabulary_)


def test_min_freq():
    train = [["a", "b", "a"], ["a"]]
    full = WordFeatures(affix_length=1).fit(train)
    counts = dict(zip(full.get_feature_names_out(), full.feature_counts_))
    assert counts["w=a"] == 3 and counts["w=b"] == 1
    assert counts["-1:BOS"] == 2 and counts["+1:w=a"] == 1 and counts["-1:w=a"] == 1
    for k in (2, 3):
        vec = WordFeatures(affix_length=1, min_freq=k).fit(train)
        assert set(vec.vocabulary_) == {f for f, c in counts.items() if c >= k}
    vec = WordFeatures(affix_length=1, min_freq=3).fit(train)
    (x,) = vec.transform([["b", "a"]])
    assert _all_row_names(vec, x) == [{"shape=x", "short_shape=x", "is_lower"},
                                      {"w=a", "p1=a", "s1=a", "shape=x",
                                       "short_shape=x", "is_lower"}]
    with pytest.raises(ValueError, match="min_freq=9"):
        WordFeatures(min_freq=9).fit(train)


def test_unseen_features_are_dropped():
    vec = WordFeatures(window=0).fit([["cat"]])
    (x,) = vec.transform([["Dog", "cat"]])
    assert x.shape == (2, len(vec.vocabulary_))
    assert _all_row_names(vec, x) == [{"is_first"}, EXPECTED_CAT - {"is_first"}]
    (x,) = vec.transform([["Dog"]])
    assert _all_row_names(vec, x) == [{"is_first", "is_last"}]


EXPECTED_CAT = {"w=cat", "p1=c", "p2=ca", "p3=cat", "s1=t", "s2=at", "s3=cat",
                "shape=xxx", "short_shape=x", "is_lower", "is_first", "is_last"}


# ---------------------------------------------------------------------------
# Feature hashing
# ---------------------------------------------------------------------------


def _bucket(name, n):
    return murmurhash3_32(name, seed=0, positive=True) % n


@pytest.mark.parametrize("n_features", [2**18, 64, 1])
def test_hashing_buckets_width_and_statelessness(n_features):
    vec = WordFeatures(n_features=n_features)
    (x,) = vec.transform([SENTENCE])  # stateless: no fit needed
    assert x.shape == (3, n_features)
    for t, names in enumerate(EXPECTED):
        got = x.indices[x.indptr[t]:x.indptr[t + 1]]
        assert set(got) == {_bucket(f, n_features) for f in names}
        assert list(got) == sorted(set(got))  # sorted, no duplicates
    assert np.all(x.data == 1.0)  # collisions are OR'ed to 1
    if n_features == 1:
        assert x.toarray().tolist() == [[1.0]] * 3
    (y,) = vec.fit_transform([SENTENCE])
    assert (x != y).nnz == 0
    assert vec.vocabulary_ is None and vec.feature_counts_ is None
    assert vec.n_features_out_ == n_features
    names = vec.get_feature_names_out()
    assert len(names) == n_features and names[0] == "hash_0"


def test_hashing_is_deterministic_and_batch_independent():
    X = _random_sentences(300, seed=5)
    vec = WordFeatures(n_features=2**12, window=2)
    a = vec.fit(X[:3]).transform(X)
    b = clone(vec).transform(X)
    c = [vec.transform([s])[0] for s in X]
    d = vec.transform(X[::-1])[::-1]
    for p, q, r, s in zip(a, b, c, d):
        assert (p != q).nnz == 0 and (p != r).nnz == 0 and (p != s).nnz == 0
    # The hashed and the vocabulary features of a token are the same names.
    voc = WordFeatures(window=2).fit(X)
    names = voc.get_feature_names_out()
    for x_voc, x_hash in zip(voc.transform(X[:20]), a[:20]):
        for t in range(x_voc.shape[0]):
            want = {_bucket(f, 2**12) for f in _row_names(names, x_voc, t)}
            assert set(x_hash.indices[x_hash.indptr[t]:x_hash.indptr[t + 1]]) == want


def test_hashing_parameter_errors():
    with pytest.raises(ValueError, match="min_freq=2 needs a vocabulary"):
        WordFeatures(n_features=16, min_freq=2).fit([SENTENCE])
    with pytest.raises(ValueError, match="min_freq=2 needs a vocabulary"):
        WordFeatures(n_features=16, min_freq=2).transform([SENTENCE])
    with pytest.raises(ValueError, match="n_features"):
        WordFeatures(n_features=0).transform([SENTENCE])
    with pytest.raises(ValueError, match="dtype"):
        WordFeatures(n_features=8, dtype=np.int64).transform([SENTENCE])
    # Fitted with hashing, then switched to a vocabulary: not fitted for that.
    vec = WordFeatures(n_features=8).fit([SENTENCE]).set_params(n_features=None)
    with pytest.raises(NotFittedError, match="hashing"):
        vec.transform([SENTENCE])
    with pytest.raises(NotFittedError, match="hashing"):
        vec.get_feature_names_out()


# ---------------------------------------------------------------------------
# dtype, input checks, sklearn API
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n_features", [None, 32])
def test_dtype(n_features):
    (x,) = WordFeatures(dtype=np.float32, n_features=n_features).fit_transform([SENTENCE])
    assert x.dtype == np.float32 and x.format == "csr"
    with pytest.raises(ValueError, match="dtype"):
        WordFeatures(dtype=np.int32).fit([SENTENCE])
    with pytest.raises(ValueError, match="dtype"):
        WordFeatures(dtype="not a dtype").fit([SENTENCE])
    with pytest.raises(ValueError, match="no float16"):  # scipy's own error before
        WordFeatures(dtype=np.float16, n_features=n_features).fit_transform([SENTENCE])


@pytest.mark.parametrize(
    "X, exc, match",
    [
        ("He reckons", TypeError, "list of sequences"),
        (np.array([["a", "b"]]), TypeError, "list of sequences"),
        (["He reckons"], TypeError, "Sequence 0 of X"),
        ([["a"], 3], TypeError, "Sequence 1 of X"),
        ([["a"], []], ValueError, "Sequence 1 of X is empty"),
        ([], ValueError, "X is empty"),
        ([["a", 3]], TypeError, "Token 1 of sequence 0 must be a str"),
        ([["a", None]], TypeError, "Token 1 of sequence 0 must be a str"),
        ([[("a",), (3,)]], TypeError, r"Token 1 of sequence 0: the word form .* int"),
        ([[("a",), ()]], ValueError, "Token 1 of sequence 0 has 0 column"),
        ([[b"bytes"]], TypeError, "Token 0 of sequence 0 must be a str"),
    ],
)
def test_bad_input(X, exc, match):
    with pytest.raises(exc, match=match):
        WordFeatures().fit(X)


def test_bad_parameters_and_column_errors():
    for kw in [dict(window=-1), dict(affix_length=-1), dict(min_freq=0),
               dict(column=-1), dict(n_features=0), dict(bias="yes"),
               dict(window=1.5)]:
        name = next(iter(kw))
        with pytest.raises(ValueError, match=name):
            WordFeatures(**kw).fit([SENTENCE])
    with pytest.raises(ValueError, match="is a str .* but column=1"):
        WordFeatures(column=1).fit([SENTENCE])
    with pytest.raises(ValueError, match="has 1 column"):
        WordFeatures(column=1).fit([[("a", "b"), ("c",)]])
    with pytest.raises(NotFittedError):
        WordFeatures().transform([SENTENCE])
    with pytest.raises(NotFittedError):
        WordFeatures().get_feature_names_out()
    fitted = WordFeatures().fit([SENTENCE])
    with pytest.raises(TypeError, match="Token 0 of sequence 0"):
        fitted.transform([[1]])


def test_sklearn_api():
    est = WordFeatures(window=2, min_freq=3)
    assert est.get_params() == {
        "column": 0, "window": 2, "affix_length": 4, "bias": False, "min_freq": 3,
        "n_features": None, "dtype": np.float64}
    cl = clone(est)
    assert cl.get_params() == est.get_params() and cl is not est
    est.set_params(min_freq=1, n_features=64)
    assert est.min_freq == 1 and est.n_features == 64
    check_parameters_default_constructible("WordFeatures", WordFeatures())
    check_no_attributes_set_in_init("WordFeatures", WordFeatures())
    check_get_params_invariance("WordFeatures", WordFeatures())
    check_set_params("WordFeatures", WordFeatures())
    assert repr(WordFeatures(window=2)) == "WordFeatures(window=2)"
    assert WordFeatures().__sklearn_tags__().requires_fit
    assert not WordFeatures(n_features=8).__sklearn_tags__().requires_fit
    assert WordFeatures().__sklearn_tags__().input_tags.string
    fitted = WordFeatures(dtype=np.float32).fit([SENTENCE])
    restored = pickle.loads(pickle.dumps(fitted))
    a, b = fitted.transform([SENTENCE])[0], restored.transform([SENTENCE])[0]
    assert a.dtype == np.float32 and (a != b).nnz == 0
    X = _random_sentences(100)
    c = WordFeatures().fit_transform(X)
    d = WordFeatures().fit(X).transform(X)
    assert all((p != q).nnz == 0 for p, q in zip(c, d))


# ---------------------------------------------------------------------------
# In a pipeline in front of a tagger
# ---------------------------------------------------------------------------

_NOUNS = ["kutya", "macska", "ház", "Ügyész", "ő", "dog", "cat", "house"]
_VERBS = ["fut", "eszik", "látott", "runs", "eats", "saw"]


def _tagged_sentences(n, seed):
    rng = random.Random(seed)
    X, y = [], []
    for _ in range(n):
        words, tags = [], []
        for _ in range(rng.randint(2, 5)):
            words += [rng.choice(_NOUNS), rng.choice(_VERBS)]
            tags += ["NOUN", "VERB"]
        X.append(words + ["."])
        y.append(tags + ["PUNCT"])
    return X, y


@pytest.mark.parametrize("n_features", [None, 2**10])
def test_pipeline_with_randomized_crf(n_features):
    X, y = _tagged_sentences(30, seed=0)
    X_te, y_te = _tagged_sentences(5, seed=1)
    pipe = make_pipeline(WordFeatures(n_features=n_features),
                         RandomizedCRFTagger(max_iter=5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe.fit(X, y)
    pred = pipe.predict(X_te)
    assert [len(p) for p in pred] == [len(s) for s in X_te]
    flat_pred = [t for s in pred for t in s]
    flat_true = [t for s in y_te for t in s]
    accuracy = np.mean([p == t for p, t in zip(flat_pred, flat_true)])
    assert accuracy > 0.9, Counter(zip(flat_true, flat_pred))
    assert clone(pipe).get_params()["wordfeatures__n_features"] == n_features
