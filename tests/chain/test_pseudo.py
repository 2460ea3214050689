"""Piecewise pseudo-likelihood kernels against the factor-by-factor
definition, the numpy reference and finite differences."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skgpstruct import chain
from skgpstruct.chain import _reference as ref

def test_matches_definition(tiny_shape, start_end, chain_problem):
    T, V = tiny_shape
    kw, y = chain_problem(100 * T + V + 50 * start_end, T, V, start_end=start_end)
    want = ref.pseudo_log_likelihood_by_definition(y=y, **kw)
    assert_allclose(chain.pseudo_log_likelihood(y=y, **kw), want, rtol=0, atol=1e-10)
    assert_allclose(chain.pseudo_log_likelihood_grad(y=y, **kw)[0], want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("per_sample_B", [False, True])
def test_batched_matches_definition(per_sample_B, start_end, chain_problem, sample_kw):
    S, T, V = 4, 5, 3
    kw, y = chain_problem(3, T, V, S=S, per_sample_B=per_sample_B, start_end=start_end)
    values = chain.pseudo_log_likelihood(y=y, **kw)
    gvalues, gU, gB = chain.pseudo_log_likelihood_grad(y=y, **kw)
    assert values.shape == (S,) and gU.shape == (S, T, V) and gB.shape == (S, V, V)
    assert_allclose(gvalues, values, rtol=1e-13)
    for s in range(S):
        want = ref.pseudo_log_likelihood_by_definition(y=y, **sample_kw(kw, s))
        assert_allclose(values[s], want, rtol=0, atol=1e-10)


def test_closed_form_with_zero_transitions():
    """With B = 0 every pairwise local conditional is 1/V, and the unary
    terms are the exact log-likelihood of independent positions."""
    rng = np.random.default_rng(4)
    T, V = 6, 5
    U, B = rng.standard_normal((T, V)), np.zeros((V, V))
    y = rng.integers(0, V, T)
    exact = chain.log_likelihood(U, B, y)  # = sum_t log softmax(U_t)[y_t]
    assert_allclose(chain.pseudo_log_likelihood(U, B, y), exact - 2 * (T - 1) * np.log(V), rtol=1e-12)


@pytest.mark.parametrize("S,per_sample_B", [(None, False), (3, False), (3, True)])
def test_matches_numpy_reference_large(S, per_sample_B, chain_problem):
    T, V = 30, 14
    kw, y = chain_problem(5, T, V, S=S, per_sample_B=per_sample_B, start_end=True, scale=2.0)
    tol = {"rtol": 1e-10, "atol": 1e-10}
    assert_allclose(chain.pseudo_log_likelihood(y=y, **kw), ref.pseudo_log_likelihood_ref(y=y, **kw), **tol)
    got = chain.pseudo_log_likelihood_grad(y=y, **kw)
    want = ref.pseudo_log_likelihood_grad_ref(y=y, **kw)
    for g, w in zip(got, want):
        assert_allclose(g, w, **tol)


@pytest.mark.parametrize("T", [1, 2, 7])
def test_grad_by_finite_differences(T, chain_problem, assert_potentials_grad_fd):
    """Central differences with h = 1e-5 at N(0, 1) potentials: truncation
    O(h^2) ~ 1e-11, rounding ~ eps * |value| / h ~ 1e-10, so atol = 1e-8
    next to rtol = 1e-6. start / end gradients are grad_U[0] / grad_U[-1]."""
    kw, y = chain_problem(60 + T, T, 4, start_end=True)
    value, gU, gB = chain.pseudo_log_likelihood_grad(y=y, **kw)
    assert_potentials_grad_fd(
        lambda **kw_: chain.pseudo_log_likelihood(y=y, **kw_), kw,
        {"U": gU, "B": gB, "start": gU[0], "end": gU[-1]}, h=1e-5, rtol=1e-6, atol=1e-8,
    )
    if T > 1:
        assert np.abs(gB).max() > 0.1  # the B gradient is really exercised


@pytest.mark.parametrize("per_sample_B", [False, True])
def test_batched_grad_by_finite_differences(per_sample_B, chain_problem, assert_potentials_grad_fd):
    kw, y = chain_problem(70, 4, 3, S=3, per_sample_B=per_sample_B, start_end=True)
    _, gU, gB = chain.pseudo_log_likelihood_grad(y=y, **kw)
    assert_potentials_grad_fd(
        lambda **kw_: chain.pseudo_log_likelihood(y=y, **kw_).sum(), kw,
        {"U": gU, "B": gB if per_sample_B else gB.sum(axis=0)}, h=1e-5, rtol=1e-6, atol=1e-8,
    )


def test_property_forbidden_entries(check_forbidden_chains):
    def check(kw, y):
        want = ref.pseudo_log_likelihood_by_definition(y=y, **kw)
        value, gU, gB = chain.pseudo_log_likelihood_grad(y=y, **kw)
        assert_allclose(value, want, rtol=0, atol=1e-10)
        assert not np.isnan(gU).any() and not np.isnan(gB).any()
        rvalue, rgU, rgB = ref.pseudo_log_likelihood_grad_ref(y=y, **kw)
        assert_allclose(gU, rgU, rtol=1e-10, atol=1e-12)
        assert_allclose(gB, rgB, rtol=1e-10, atol=1e-12)

    check_forbidden_chains(check, p_forbid=[0.0, 0.3, 0.7])


def test_large_potentials_are_finite(chain_problem):
    kw, y = chain_problem(8, 6, 4, start_end=True, scale=1e3)
    value, gU, gB = chain.pseudo_log_likelihood_grad(y=y, **kw)
    assert np.isfinite(value)
    assert np.all(np.isfinite(gU)) and np.all(np.isfinite(gB))
    assert_allclose(value, ref.pseudo_log_likelihood_by_definition(y=y, **kw), rtol=1e-12)


def test_forbidden_label_gives_minus_inf():
    U = np.zeros((3, 2))
    U[1, 0] = -np.inf
    B = np.zeros((2, 2))
    assert chain.pseudo_log_likelihood(U, B, [0, 0, 0]) == -np.inf
    value, gU, gB = chain.pseudo_log_likelihood_grad(U, B, [0, 0, 0])
    assert value == -np.inf and np.all(np.isfinite(gU)) and np.all(np.isfinite(gB))
    # the allowed labelling is finite and sees label 0 at t = 1 as impossible
    value, gU, _ = chain.pseudo_log_likelihood_grad(U, B, [0, 1, 0])
    assert np.isfinite(value)
    assert_allclose(gU[1], [0.0, 0.0])  # onehot(1) - softmax([-inf, 0])


def test_bad_input_raises(assert_refuses_bad_labels):
    assert_refuses_bad_labels(chain.pseudo_log_likelihood, chain.pseudo_log_likelihood_grad)
    with pytest.raises(ValueError, match="U contains NaN"):
        chain.pseudo_log_likelihood(np.full((3, 3), np.nan), np.zeros((3, 3)), [0, 1, 2])
