"""Piecewise pseudo-likelihood kernels against the factor-by-factor
definition, the numpy reference and finite differences."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from skgpstruct import chain
from skgpstruct.chain import _reference as ref

TINY = [(T, V) for T in range(1, 6) for V in range(1, 5)]


def random_chain(rng, T, V, S=None, per_sample_B=False, start_end=False, scale=1.0):
    lead = () if S is None else (S,)
    kw = {
        "U": scale * rng.standard_normal(lead + (T, V)),
        "B": scale * rng.standard_normal((lead if per_sample_B else ()) + (V, V)),
    }
    if start_end:
        kw["start"] = scale * rng.standard_normal((lead if per_sample_B else ()) + (V,))
        kw["end"] = scale * rng.standard_normal((lead if per_sample_B else ()) + (V,))
    return kw


def sample_kw(kw, s):
    return {k: (v[s] if v.ndim == (3 if k in ("U", "B") else 2) else v) for k, v in kw.items()}


def central_diff(f, x, h):
    x = np.array(x, dtype=float)
    grad = np.empty_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        grad[idx] = (f(xp) - f(xm)) / (2 * h)
    return grad


@pytest.mark.parametrize("T,V", TINY)
@pytest.mark.parametrize("start_end", [False, True])
def test_matches_definition(T, V, start_end):
    rng = np.random.default_rng(100 * T + V + 50 * start_end)
    kw = random_chain(rng, T, V, start_end=start_end)
    y = rng.integers(0, V, T)
    want = ref.pseudo_log_likelihood_by_definition(y=y, **kw)
    assert_allclose(chain.pseudo_log_likelihood(y=y, **kw), want, rtol=0, atol=1e-10)
    assert_allclose(chain.pseudo_log_likelihood_grad(y=y, **kw)[0], want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("per_sample_B", [False, True])
@pytest.mark.parametrize("start_end", [False, True])
def test_batched_matches_definition(per_sample_B, start_end):
    rng = np.random.default_rng(3)
    S, T, V = 4, 5, 3
    kw = random_chain(rng, T, V, S=S, per_sample_B=per_sample_B, start_end=start_end)
    y = rng.integers(0, V, T)
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
def test_matches_numpy_reference_large(S, per_sample_B):
    rng = np.random.default_rng(5)
    T, V = 30, 14
    kw = random_chain(rng, T, V, S=S, per_sample_B=per_sample_B, start_end=True, scale=2.0)
    y = rng.integers(0, V, T)
    tol = {"rtol": 1e-10, "atol": 1e-10}
    assert_allclose(chain.pseudo_log_likelihood(y=y, **kw), ref.pseudo_log_likelihood_ref(y=y, **kw), **tol)
    got = chain.pseudo_log_likelihood_grad(y=y, **kw)
    want = ref.pseudo_log_likelihood_grad_ref(y=y, **kw)
    for g, w in zip(got, want):
        assert_allclose(g, w, **tol)


@pytest.mark.parametrize("T", [1, 2, 7])
def test_grad_by_finite_differences(T):
    """Central differences with h = 1e-5 at N(0, 1) potentials: truncation
    O(h^2) ~ 1e-11, rounding ~ eps * |value| / h ~ 1e-10, so atol = 1e-8
    next to rtol = 1e-6. start / end gradients are grad_U[0] / grad_U[-1]."""
    rng = np.random.default_rng(60 + T)
    V = 4
    kw = random_chain(rng, T, V, start_end=True)
    y = rng.integers(0, V, T)
    value, gU, gB = chain.pseudo_log_likelihood_grad(y=y, **kw)
    h, tol = 1e-5, {"rtol": 1e-6, "atol": 1e-8}

    def f(**over):
        return chain.pseudo_log_likelihood(y=y, **{**kw, **over})

    assert_allclose(gU, central_diff(lambda U: f(U=U), kw["U"], h), **tol)
    assert_allclose(gB, central_diff(lambda B: f(B=B), kw["B"], h), **tol)
    assert_allclose(gU[0], central_diff(lambda s: f(start=s), kw["start"], h), **tol)
    assert_allclose(gU[-1], central_diff(lambda e: f(end=e), kw["end"], h), **tol)
    if T > 1:
        assert np.abs(gB).max() > 0.1  # the B gradient is really exercised


@pytest.mark.parametrize("per_sample_B", [False, True])
def test_batched_grad_by_finite_differences(per_sample_B):
    rng = np.random.default_rng(70)
    S, T, V = 3, 4, 3
    kw = random_chain(rng, T, V, S=S, per_sample_B=per_sample_B, start_end=True)
    y = rng.integers(0, V, T)
    _, gU, gB = chain.pseudo_log_likelihood_grad(y=y, **kw)
    h, tol = 1e-5, {"rtol": 1e-6, "atol": 1e-8}

    def f(**over):
        return chain.pseudo_log_likelihood(y=y, **{**kw, **over}).sum()

    assert_allclose(gU, central_diff(lambda U: f(U=U), kw["U"], h), **tol)
    fd_B = central_diff(lambda B: f(B=B), kw["B"], h)
    assert_allclose(gB if per_sample_B else gB.sum(axis=0), fd_B, **tol)


@settings(max_examples=50, deadline=None)
@given(
    T=st.integers(1, 5),
    V=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    p_forbid=st.sampled_from([0.0, 0.3, 0.7]),
)
def test_property_forbidden_entries(T, V, seed, p_forbid):
    rng = np.random.default_rng(seed)
    kw = random_chain(rng, T, V, start_end=True)
    for k in kw:
        kw[k][rng.random(kw[k].shape) < p_forbid] = -np.inf
    y = rng.integers(0, V, T)
    want = ref.pseudo_log_likelihood_by_definition(y=y, **kw)
    value, gU, gB = chain.pseudo_log_likelihood_grad(y=y, **kw)
    assert_allclose(value, want, rtol=0, atol=1e-10)
    assert not np.isnan(gU).any() and not np.isnan(gB).any()
    rvalue, rgU, rgB = ref.pseudo_log_likelihood_grad_ref(y=y, **kw)
    assert_allclose(gU, rgU, rtol=1e-10, atol=1e-12)
    assert_allclose(gB, rgB, rtol=1e-10, atol=1e-12)


def test_large_potentials_are_finite():
    rng = np.random.default_rng(8)
    kw = random_chain(rng, 6, 4, start_end=True, scale=1e3)
    y = rng.integers(0, 4, 6)
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


@pytest.mark.parametrize(
    "y,err,match",
    [
        ([0, 1], ValueError, "y has length 2"),
        ([0, 1, 5], ValueError, "outside"),
        ([0.5, 1, 0], TypeError, "integer labels"),
    ],
)
def test_bad_input_raises(y, err, match):
    U, B = np.zeros((3, 3)), np.zeros((3, 3))
    with pytest.raises(err, match=match):
        chain.pseudo_log_likelihood(U, B, y)
    with pytest.raises(err, match=match):
        chain.pseudo_log_likelihood_grad(U, B, y)
    with pytest.raises(ValueError, match="U contains NaN"):
        chain.pseudo_log_likelihood(np.full((3, 3), np.nan), B, [0, 1, 2])
