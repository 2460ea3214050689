"""Fixtures shared by the linear-chain tests.

* ``tiny_shape`` / ``start_end``: the parametrisations repeated across the
  brute-force tests (every ``(T, V)`` with ``T <= 5``, ``V <= 4``; with and
  without start / end potentials).
* ``random_chain`` / ``chain_problem`` / ``sample_kw``: random potentials as
  keyword arguments ``U, B[, start, end]`` (optionally a batch of ``S``
  samples), with gold labels, and one sample of a batch.
* ``assert_matches_brute_force``: log Z, marginals, log-likelihood and
  Viterbi of one short chain against enumeration of its paths.
* ``assert_potentials_grad_fd``: the gradients wrt each potential against
  central differences, through the suite's one ``assert_grad_fd``.
* ``check_forbidden_chains``: a hypothesis property over random chains with
  ``-inf`` entries.
* ``assert_refuses_bad_labels``: one parametrised list of bad labels that
  every function taking ``(U, B, y)`` must refuse with the same message.

The helpers are functions that hold no state, session-scoped where they can be.
"""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct.chain import _reference as ref

TINY = [(T, V) for T in range(1, 6) for V in range(1, 5)]


@pytest.fixture(params=TINY, ids=[f"T{T}-V{V}" for T, V in TINY])
def tiny_shape(request):
    """``(T, V)``: every chain short enough to enumerate (T <= 5, V <= 4)."""
    return request.param


@pytest.fixture(params=[False, True], ids=["no_start_end", "start_end"])
def start_end(request):
    """Whether the chain has start / end potentials."""
    return request.param


def _random_chain(rng, T, V, S=None, per_sample_B=False, start_end=False, scale=1.0):
    lead = () if S is None else (S,)
    kw = {
        "U": scale * rng.standard_normal(lead + (T, V)),
        "B": scale * rng.standard_normal((lead if per_sample_B else ()) + (V, V)),
    }
    if start_end:
        kw["start"] = scale * rng.standard_normal((lead if per_sample_B else ()) + (V,))
        kw["end"] = scale * rng.standard_normal((lead if per_sample_B else ()) + (V,))
    return kw


@pytest.fixture(scope="session")
def random_chain():
    """``random_chain(rng, T, V, S=None, per_sample_B=False, start_end=False,
    scale=1.0)``: N(0, scale^2) potentials as a dict ``U, B[, start, end]``.

    With ``S`` the unaries are a batch ``(S, T, V)``; ``per_sample_B`` gives
    ``B``, ``start`` and ``end`` a leading sample axis as well.
    """
    return _random_chain


@pytest.fixture(scope="session")
def chain_problem():
    """``chain_problem(seed, T, V, **random_chain_kwargs) -> (kw, y)``: the
    potentials of :func:`random_chain` drawn from ``default_rng(seed)``, then
    ``T`` gold labels from the same generator."""

    def make(seed, T, V, **kwargs):
        rng = np.random.default_rng(seed)
        kw = _random_chain(rng, T, V, **kwargs)
        return kw, rng.integers(0, V, T)

    return make


@pytest.fixture(scope="session")
def sample_kw():
    """``sample_kw(kw, s)``: the potentials of sample ``s`` of a batched chain
    (arrays without a sample axis are shared and returned as they are)."""

    def select(kw, s):
        out = {}
        for k, v in kw.items():
            ndim = 3 if k in ("U", "B") else 2
            out[k] = v[s] if v.ndim == ndim else v
        return out

    return select


def _assert_matches_brute_force(kw, y, *, log_partition, marginals, log_likelihood, viterbi):
    """Check the four exact-inference functions at one chain against
    enumeration (``rtol=0, atol=1e-10``); return what they computed (``unary,
    pairwise, path, score``) and the brute-force values (``bu, bp``)."""
    tol = {"rtol": 0, "atol": 1e-10}
    assert_allclose(log_partition(**kw), ref.brute_force_log_partition(**kw), **tol)
    unary, pairwise = marginals(**kw)
    bu, bp = ref.brute_force_marginals(**kw)
    assert_allclose(unary, bu, **tol)
    assert_allclose(pairwise, bp, **tol)
    assert_allclose(log_likelihood(y=y, **kw), ref.brute_force_log_likelihood(y=y, **kw), **tol)
    path, score = viterbi(**kw)
    bpath, bscore = ref.brute_force_viterbi(**kw)
    assert_array_equal(path, bpath)
    assert_allclose(score, bscore, **tol)
    return SimpleNamespace(unary=unary, pairwise=pairwise, path=path, score=score, bu=bu, bp=bp)


@pytest.fixture(scope="session")
def assert_matches_brute_force():
    """``assert_matches_brute_force(kw, y, *, log_partition, marginals,
    log_likelihood, viterbi)``: log Z, marginals, log-likelihood of ``y`` and
    the Viterbi path / score of the single chain ``kw`` equal enumeration of
    its paths to 1e-10; returns a namespace of the values (``unary, pairwise,
    path, score``) and the enumerated marginals (``bu, bp``)."""
    return _assert_matches_brute_force


@pytest.fixture
def assert_potentials_grad_fd(assert_grad_fd):
    """``assert_potentials_grad_fd(f, kw, grads, *, h, rtol, atol)``: for each
    ``name: grad`` of ``grads``, ``grad`` equals the central differences of
    the scalar ``f(**kw)`` wrt ``kw[name]`` (the other potentials held), by
    the suite's one :func:`assert_grad_fd` with the given step and
    tolerances."""

    def check(f, kw, grads, **fd_kwargs):
        for name, grad in grads.items():
            shape = np.shape(kw[name])

            def f_flat(x, name=name, shape=shape):
                return f(**{**kw, name: x.reshape(shape)})

            assert_grad_fd(f_flat, np.ravel(kw[name]), grad, **fd_kwargs)

    return check


@pytest.fixture(scope="session")
def check_forbidden_chains():
    """``check_forbidden_chains(check, p_forbid)``: a hypothesis property over
    short chains with ``-inf`` entries.

    Runs ``check(kw, y)`` on 50 examples: ``T <= 5``, ``V <= 4``, N(0, 1)
    potentials ``U, B, start, end`` drawn from ``default_rng(seed)`` (any
    32-bit seed), each entry set to ``-inf`` with a probability drawn from
    ``p_forbid``, then ``T`` labels from the same generator. Failures are
    shrunk and reported by hypothesis as usual.
    """

    def run(check, p_forbid):
        @settings(max_examples=50, deadline=None)
        @given(
            T=st.integers(1, 5),
            V=st.integers(1, 4),
            seed=st.integers(0, 2**32 - 1),
            p=st.sampled_from(p_forbid),
        )
        def prop(T, V, seed, p):
            rng = np.random.default_rng(seed)
            kw = _random_chain(rng, T, V, start_end=True)
            for k in kw:
                kw[k][rng.random(kw[k].shape) < p] = -np.inf
            check(kw, rng.integers(0, V, T))

        prop()

    return run


# Labels a chain of 3 steps and 3 labels must refuse: (y, error, message).
BAD_LABELS = {
    "too_short": ([0, 1], ValueError, "y has length 2"),
    "label_3": ([0, 1, 3], ValueError, r"outside \[0, 3\)"),
    "label_5": ([0, 1, 5], ValueError, "outside"),
    "negative": ([0, -2, 2], ValueError, r"outside \[0, 3\)"),  # -1: unknown (exact)
    "2d": ([[0, 1, 2]], ValueError, "y must be 1-D"),
    "fraction": ([0.5, 1, 2], TypeError, "integer labels"),
    "fraction_last": ([0.5, 1, 0], TypeError, "integer labels"),
    "strings": (["a", "b", "c"], TypeError, "integer labels"),
}


@pytest.fixture(params=list(BAD_LABELS.values()), ids=list(BAD_LABELS))
def assert_refuses_bad_labels(request):
    """``assert_refuses_bad_labels(*funcs)``: each ``func(U, B, y)`` on a zero
    chain of 3 steps and 3 labels raises the error and message of one case of
    bad labels ``y`` (wrong length, out of range, 2-D, not integral)."""
    y, err, match = request.param

    def check(*funcs):
        U, B = np.zeros((3, 3)), np.zeros((3, 3))
        for func in funcs:
            with pytest.raises(err, match=match):
                func(U, B, y)

    return check
