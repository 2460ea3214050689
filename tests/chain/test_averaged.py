"""Marginals averaged over draws with prepared transitions
(chain/averaged.py) against the numpy reference, in linear and log space."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skgpstruct.chain._reference import marginals_ref
from skgpstruct.chain.averaged import (MarginalSums, add_draws, add_sampled_draws,
                                       averaged_marginals, prepare_transitions)


def _reference(U, B):
    P = np.stack([marginals_ref(U[k], B[k])[0] for k in range(U.shape[0])])
    H = -np.sum(P * np.log(np.where(P > 0, P, 1.0)), axis=-1)
    return P.mean(0), (P ** 2).mean(0), H.mean(0)


@pytest.mark.parametrize("spread", [1.0, 400.0])  # 400: past the linear-space range
def test_averaged_marginals_match_the_reference(spread):
    rng = np.random.default_rng(0)
    S, T, V = 7, 5, 4
    U = spread * rng.standard_normal((S, T, V))
    B = rng.standard_normal((S, V, V))
    B[2, 0, 1] = -np.inf  # a forbidden transition in one draw: log space
    prep = prepare_transitions(B)
    mean, second, h = averaged_marginals(U, prep, stats=True)
    ref = _reference(U, B)
    for got, want in zip((mean, second, h), ref):
        assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert_allclose(averaged_marginals(U, prep), ref[0], rtol=1e-10, atol=1e-12)


def test_sums_accumulate_over_calls():
    rng = np.random.default_rng(1)
    U, B = rng.standard_normal((6, 3, 2)), rng.standard_normal((6, 2, 2))
    whole = add_draws(MarginalSums(3, 2), U, prepare_transitions(B))
    parts = MarginalSums(3, 2)
    add_draws(parts, U[:4], prepare_transitions(B[:4]))
    add_draws(parts, U[4:], prepare_transitions(B[4:]))
    assert parts.n_draws == whole.n_draws == 6
    assert_allclose(parts.mean, whole.mean, rtol=1e-13)


def test_bad_shapes_are_refused():
    prep = prepare_transitions(np.zeros((3, 2, 2)))
    with pytest.raises(ValueError, match="S = 3"):
        averaged_marginals(np.zeros((2, 4, 2)), prep)
    with pytest.raises(ValueError, match="n_labels"):
        averaged_marginals(np.zeros((3, 4, 3)), prep)
    with pytest.raises(ValueError, match="shape"):
        prepare_transitions(np.zeros((2, 2)))


def _lower_factors(rng, nb, d):
    A = rng.standard_normal((nb, d, d))
    return np.linalg.cholesky(A @ A.swapaxes(1, 2) + d * np.eye(d))


@pytest.mark.parametrize("S", [6, 7])  # an odd S: the last draw unpaired
@pytest.mark.parametrize("joint", [False, True])  # (V, T, T) blocks or one (V T)^2
@pytest.mark.parametrize("spread", [1.0, 400.0])
def test_sampled_draws_match_the_reference(S, joint, spread):
    rng = np.random.default_rng(2)
    T, V = 5, 3
    b = spread * rng.standard_normal((T, V))
    C = _lower_factors(rng, 1, V * T) if joint else _lower_factors(rng, V, T)
    C = C * (spread / 10.0)
    P = S // 2
    e = rng.standard_normal((S - P, V, T))
    B = rng.standard_normal((S, V, V))
    B[1, 0, 2] = -np.inf  # a forbidden transition in one draw: log space
    scale = 0.7
    eps = np.concatenate([e[:P], -e[:P], e[P:]])  # (S, V, T)
    flat = eps.reshape(S, -1)  # label-major: entry j T + t
    d = C.shape[1]
    L = np.zeros((V * T, V * T))
    for i in range(C.shape[0]):
        L[i * d:(i + 1) * d, i * d:(i + 1) * d] = np.tril(C[i])
    U = scale * (b[None] + (flat @ L.T).reshape(S, V, T).swapaxes(1, 2))
    ref = _reference(U, B)
    prep = prepare_transitions(B)
    C_upper = C + np.triu(rng.standard_normal(C.shape), 1)  # only the lower triangles read
    sums = add_sampled_draws(MarginalSums(T, V), b, C_upper, e, prep, scale, stats=True)
    assert sums.n_draws == S
    got = (sums.mean, sums.square / S, sums.entropy / S)
    for g, want in zip(got, ref):
        assert_allclose(g, want, rtol=1e-9, atol=1e-12)
    plain = add_sampled_draws(MarginalSums(T, V), b, C, e, prep, scale, stats=False)
    assert_allclose(plain.mean, ref[0], rtol=1e-9, atol=1e-12)


def test_sampled_draws_refuse_bad_input():
    prep = prepare_transitions(np.zeros((4, 2, 2)))
    b, C, e = np.zeros((3, 2)), np.eye(3)[None].repeat(2, axis=0), np.zeros((2, 2, 3))
    with pytest.raises(ValueError, match="nb d"):
        add_sampled_draws(MarginalSums(3, 2), b, C[:, :2, :2], e, prep)
    with pytest.raises(ValueError, match="S = 4"):
        add_sampled_draws(MarginalSums(3, 2), b, C, e[:1], prep)
    with pytest.raises(ValueError, match="sums"):
        add_sampled_draws(MarginalSums(4, 2), b, C, e, prep)
    bad = b.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        add_sampled_draws(MarginalSums(3, 2), bad, C, e, prep)
