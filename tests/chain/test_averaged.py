"""Marginals averaged over draws with prepared transitions
(chain/averaged.py) against the numpy reference, in linear and log space."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skgpstruct.chain._reference import marginals_ref
from skgpstruct.chain.averaged import (MarginalSums, add_draws, averaged_marginals,
                                       prepare_transitions)


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
