"""path_information_gain: the mutual information between a chain's label
path and other variables under a mixture, against its definition by
enumeration (the joint distribution of path and target, in plain numpy)."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skgpstruct.chain import path_information_gain


def _brute_path_probs(U, B):
    """p(y | component s) of every path (V^T, in itertools order), from the
    path scores by definition."""
    S, T, V = U.shape
    B = np.broadcast_to(B, (S, V, V))
    paths = list(itertools.product(range(V), repeat=T))
    score = np.array([[U[s, np.arange(T), y].sum()
                       + sum(B[s, y[t - 1], y[t]] for t in range(1, T)) for y in paths]
                      for s in range(S)])
    p = np.exp(score - score.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def _brute_information_gain(U, B, target, weights=None):
    """mean_i I(y; y*_i) from the joint ``p(y, y*_i) = sum_s w_s p(y | s)
    p(y*_i | s)``: sum p(y, y*) log(p(y, y*) / (p(y) p(y*)))."""
    S = U.shape[0]
    w = np.full(S, 1.0 / S) if weights is None else np.asarray(weights) / np.sum(weights)
    py_s = _brute_path_probs(U, B)  # (S, paths)
    out = []
    for i in range(target.shape[1]):
        joint = np.einsum("s,sp,sc->pc", w, py_s, target[:, i])
        py, pc = joint.sum(axis=1), joint.sum(axis=0)
        ratio = np.where(joint > 0, joint / np.outer(py, pc), 1.0)
        out.append(np.sum(joint * np.log(ratio)))
    return float(np.mean(out))


def _problem(seed, S, T, V, N, C=3, scale=1.5):
    rs = np.random.RandomState(seed)
    U = scale * rs.randn(S, T, V)
    B = rs.randn(S, V, V)
    logits = 2.0 * rs.randn(S, N, C)
    target = np.exp(logits) / np.exp(logits).sum(axis=2, keepdims=True)
    return U, B, target


@pytest.mark.parametrize("shape", [(1, 3), (2, 3), (3, 2), (2, 5)])
def test_exact_on_a_small_path_space(shape):
    T, V = shape
    U, B, target = _problem(T * 10 + V, 32, T, V, N=4)  # V^T <= 32: enumerated
    assert_allclose(path_information_gain(U, B, target, random_state=0),
                    _brute_information_gain(U, B, target), rtol=1e-10, atol=1e-12)


def test_weights_are_those_of_repeated_components():
    U, B, target = _problem(1, 4, 1, 3, N=5)  # 3 paths <= 4 components: exact
    w = np.array([2.0, 0.0, 1.0, 1.0])
    rep = [0, 0, 2, 3]
    got = path_information_gain(U, B, target, w)
    assert_allclose(got, _brute_information_gain(U, B, target, w), rtol=1e-10)
    assert_allclose(got, path_information_gain(U[rep], B[rep], target[rep]), rtol=1e-10)


@pytest.mark.parametrize("shared_transitions", [False, True])
def test_sampled_estimate_is_unbiased(shared_transitions):
    S, T, V = 16, 4, 3  # 81 paths > 16 components: sampled, one path each
    U, B, target = _problem(7, S, T, V, N=6)
    if shared_transitions:
        B = B[0]
    want = _brute_information_gain(U, B, target)
    vals = np.array([path_information_gain(U, B, target, random_state=r)
                     for r in range(400)])
    se = vals.std(ddof=1) / np.sqrt(vals.size)
    assert vals.std() > 0  # it does sample
    assert abs(vals.mean() - want) < 4 * se


def test_no_information_when_the_components_agree():
    U, B, target = _problem(3, 8, 5, 3, N=4)
    same_chain = path_information_gain(np.repeat(U[:1], 8, axis=0), B[0], target,
                                       random_state=0)
    same_target = path_information_gain(U, B, np.repeat(target[:1], 8, axis=0),
                                        random_state=0)
    assert_allclose([same_chain, same_target], 0.0, atol=1e-12)


def test_bounded_by_the_targets_entropy_and_deterministic():
    U, B, target = _problem(4, 8, 6, 3, N=4, scale=4.0)
    p = target.mean(axis=0)
    bound = np.mean(-np.sum(p * np.log(p), axis=1))
    got = path_information_gain(U, B, target, random_state=5)
    assert 0.0 < got <= bound
    assert got == path_information_gain(U, B, target, random_state=5)


def test_forbidden_paths_and_a_one_hot_target():
    # two components that the first label tells apart exactly: y* = s
    U = np.zeros((2, 3, 2))
    U[0, 0, 1] = U[1, 0, 0] = -np.inf
    target = np.eye(2)[:, None, :]  # (2 components, 1 target, 2 classes)
    assert_allclose(path_information_gain(U, np.zeros((2, 2)), target), np.log(2),
                    rtol=1e-12)


def test_bad_inputs_are_refused():
    U, B, target = _problem(0, 4, 3, 2, N=2)
    with pytest.raises(ValueError, match="U must have shape"):
        path_information_gain(U[0], B, target)
    with pytest.raises(ValueError, match="target must have shape"):
        path_information_gain(U, B, target[:3])
    with pytest.raises(ValueError, match="target must have shape"):
        path_information_gain(U, B, target[:, :0])
    with pytest.raises(ValueError, match="probability distributions"):
        path_information_gain(U, B, 2 * target)
    bad = target.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="probability distributions"):
        path_information_gain(U, B, bad)
    with pytest.raises(ValueError, match="weights must be"):
        path_information_gain(U, B, target, np.zeros(4))
    with pytest.raises(ValueError, match="weights must be"):
        path_information_gain(U, B, target, np.ones(3))
