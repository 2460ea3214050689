import numpy as np
import pytest

from skgpstruct.chain import _reference as ref
from skgpstruct.chain.beam import beam_states, beam_viterbi


@pytest.mark.parametrize("T, V", [(1, 3), (5, 4), (12, 9)])
def test_full_beam_is_exact_viterbi(T, V):
    rng = np.random.default_rng(T * V)
    U, B = rng.normal(size=(T, V)), rng.normal(size=(V, V))
    path, score = beam_viterbi(U, B, V)
    p_ref, s_ref = ref.viterbi_ref(U, B)
    np.testing.assert_array_equal(path, p_ref)
    assert score == pytest.approx(s_ref, abs=1e-10)


def test_small_beam_is_the_best_path_inside_the_beams():
    rng = np.random.default_rng(1)
    T, V, K = 4, 6, 2
    U, B = rng.normal(size=(T, V)), rng.normal(size=(V, V))
    path, score = beam_viterbi(U, B, K)
    states = beam_states(U, K)
    # brute force over the K^T paths inside the beams
    best = -np.inf
    for combo in np.ndindex(*([K] * T)):
        p = states[np.arange(T), combo]
        s = U[np.arange(T), p].sum() + B[p[:-1], p[1:]].sum()
        best = max(best, s)
    assert score == pytest.approx(best, abs=1e-12)
    assert all(path[t] in states[t] for t in range(T))
    assert score <= ref.viterbi_ref(U, B)[1] + 1e-12


def test_low_rank_equals_full_matrix():
    rng = np.random.default_rng(2)
    T, V, r = 7, 30, 3
    U = rng.normal(size=(T, V))
    left, right = rng.normal(size=(V, r)), rng.normal(size=(V, r))
    a = beam_viterbi(U, (left, right), 5)
    b = beam_viterbi(U, left @ right.T, 5)
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1] == pytest.approx(b[1], abs=1e-12)


def test_bad_beam():
    with pytest.raises(ValueError, match="beam_size"):
        beam_viterbi(np.zeros((2, 3)), np.zeros((3, 3)), 0)
    with pytest.raises(ValueError):
        beam_viterbi(np.zeros((2, 3)), (np.zeros((4, 2)), np.zeros((4, 2))), 2)
    with pytest.raises(TypeError, match="beam_size must be an integer"):
        beam_viterbi(np.zeros((2, 3)), np.zeros((3, 3)), 2.7)  # used to run with 2


@pytest.mark.parametrize("lowrank", [False, True])
def test_nan_and_inf_are_refused_in_both_transition_forms(lowrank):
    # the low-rank branch used to return (path, nan) or an inf score
    L = np.eye(2)
    B = (L, L) if lowrank else L @ L.T
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="U contains (NaN|\\+inf)"):
            beam_viterbi(np.array([[0.0, bad], [1.0, 0.0]]), B, 2)
    if lowrank:
        with pytest.raises(ValueError, match="left contains non-finite"):
            beam_viterbi(np.zeros((2, 2)), (np.array([[np.nan, 0], [0, 1.0]]), L), 2)
