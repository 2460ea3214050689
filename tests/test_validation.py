import numpy as np
import pytest
import scipy.sparse as sp

from skgpstruct._input.validation import (
    check_sequences,
    check_X_sequences,
    stack_sequences,
)


def test_valid_dense_and_sparse():
    X = [np.ones((3, 2)), sp.csr_matrix(np.eye(2))]
    y = [[0, 1, 1], [1, 0]]
    Xc, yc = check_sequences(X, y)
    assert Xc[0].dtype == np.float64 and Xc[0].flags.c_contiguous
    assert sp.issparse(Xc[1]) and Xc[1].format == "csr"
    assert [len(s) for s in yc] == [3, 2]


def test_length_one_sequence_is_valid():
    Xc, yc = check_sequences([np.zeros((1, 4))], [["x"]])
    assert Xc[0].shape == (1, 4) and yc[0].shape == (1,)


@pytest.mark.parametrize(
    "X, y, exc, match",
    [
        ([], [], ValueError, "X is empty"),
        ([np.zeros((0, 3))], [[]], ValueError, "Sequence 0 of X is empty"),
        ([np.zeros(3)], [[0, 0, 0]], ValueError, "must be 2-D"),
        ([np.zeros((2, 3)), np.zeros((2, 4))], [[0, 0], [0, 0]], ValueError, "4 features, expected 3"),
        ([np.array([[np.nan, 0.0]])], [[0]], ValueError, "NaN or infinite"),
        ([sp.csr_matrix(np.array([[np.inf, 0.0]]))], [[0]], ValueError, "NaN or infinite"),
        ([np.zeros((2, 3))], [[0, 0], [1]], ValueError, "1 sequences but y has 2"),
        ([np.zeros((2, 3))], [[0, 0, 0]], ValueError, "2 tokens in X but 3 labels"),
        ([np.zeros((2, 3))], ["ab"], ValueError, "is a string"),
        ([np.zeros((2, 3))], [[[0], [0]]], ValueError, "must be 1-D"),
        (np.zeros((2, 3)), [[0, 0]], TypeError, "list of sequences"),
        ([np.zeros((2, 3))], np.zeros((1, 2)), TypeError, "list of label sequences"),
        # complex features: a cast to float would drop the imaginary parts
        ([np.ones((2, 3)) + 1j], [[0, 0]], ValueError, "complex values"),
        ([sp.csr_matrix(np.ones((2, 3)) + 1j)], [[0, 0]], ValueError, "complex values"),
        ([[[1 + 1j] * 3] * 2], [[0, 0]], ValueError, "could not be converted"),
        # token descriptions passed straight to a tagger: name the transformer
        ([[{"w": "the"}, {"w": "cat"}]], [[0, 0]], TypeError,
         r"feature dicts \(sklearn-crfsuite's format\).*SequenceVectorizer"),
        ([[["w=the"], ["w=cat"]]], [[0, 0]], TypeError, "lists of strings.*CRFppTemplate"),
        ([["the", "cat"]], [[0, 0]], TypeError, "holds strings.*WordFeatures"),
        # a missing label is not a class
        ([np.zeros((2, 3))], [np.array([0.0, np.nan])], ValueError,
         r"missing label \(np.float64\(nan\), token 1\)"),
        ([np.zeros((2, 3))], [[float("nan"), 1.0]], ValueError, "missing label"),
        ([np.zeros((2, 3))], [np.array([None, 1], dtype=object)], ValueError,
         r"missing label \(None, token 0\)"),
        ([np.zeros((2, 3))], [["a", None]], ValueError, "missing label"),
    ],
)
def test_bad_input_raises(X, y, exc, match):
    with pytest.raises(exc, match=match):
        check_sequences(X, y)


def test_n_features_checked_against_fit():
    with pytest.raises(ValueError, match="expected 5"):
        check_X_sequences([np.zeros((2, 3))], n_features=5)


def test_dense_required():
    with pytest.raises(TypeError, match="dense"):
        check_X_sequences([sp.csr_matrix((2, 3))], accept_sparse=False)


def test_stack_sequences():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(t, 3)) for t in (1, 4, 2)]
    flat, lengths = stack_sequences(X)
    assert flat.shape == (7, 3) and list(lengths) == [1, 4, 2]
    np.testing.assert_array_equal(flat, np.concatenate(X))
    flat_sp, _ = stack_sequences([sp.csr_matrix(x) for x in X])
    np.testing.assert_array_equal(flat_sp.toarray(), flat)
