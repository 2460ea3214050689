"""The scaled linear-space forward-backward kernels (``chain._linear_kernels``)
behind ``marginals``, ``log_likelihood(_grad)``, ``log_partition`` and the
ragged forms: against the numpy references, brute force, the log-space
kernels (``chain._exact_kernels``, which they fall back to on extreme
potentials) and finite differences; which path they take; and the
independence of a sequence's results from the rest of its batch."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct import chain
from skgpstruct.chain import _exact_kernels as logk
from skgpstruct.chain import _linear_space_kernels as link
from skgpstruct.chain import _reference as ref
from skgpstruct.chain import exact

# Linear and log space sum the same positive terms in different orders:
# relative differences of a few T V eps on log Z, absolute on probabilities.
TOL = {"rtol": 1e-10, "atol": 1e-12}


def _log_space(U, B, start=None, end=None, y=None):
    """The log-space kernel on the same (validated) input: value, unary (or
    grad U), pairwise (or grad B), batched."""
    U3, B3, st, en, _ = exact.check_potentials(U, B, start, end)
    S, T, V = U3.shape
    labels = exact._NO_LABELS if y is None else np.asarray(y, dtype=np.int64)
    unary, pairwise = np.empty((S, T, V)), np.empty((S, V, V))
    value = logk._fb_kernel(U3, B3, st, en, labels, unary, pairwise)
    return value, unary, pairwise


def _batched(x):
    return x if np.ndim(x) else np.atleast_1d(x)


def _check_against_reference(kw, y):
    """The public linear-space functions equal the numpy references."""
    for got, want in zip(chain.marginals(**kw), ref.marginals_ref(**kw)):
        assert_allclose(got, want, **TOL)
    for got, want in zip(chain.log_likelihood_grad(y=y, **kw),
                         ref.log_likelihood_grad_ref(y=y, **kw)):
        assert_allclose(got, want, **TOL)
    assert_allclose(chain.log_partition(**kw), ref.log_partition_ref(**kw), **TOL)
    ll = chain.log_likelihood(y=y, **kw)
    assert_allclose(ll, ref.log_likelihood_ref(y=y, **kw), **TOL)
    assert_array_equal(ll, chain.log_likelihood_grad(y=y, **kw)[0])  # same arithmetic


# ------------------------------------------------------------ moderate input
@pytest.mark.parametrize("scale", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("T,V", [(1, 1), (1, 4), (2, 3), (7, 5), (30, 14)])
@pytest.mark.parametrize("S,per_sample_B", [(None, False), (3, False), (3, True)])
def test_matches_reference_and_takes_linear_path(scale, T, V, S, per_sample_B, start_end,
                                                 chain_problem):
    kw, y = chain_problem(100 * T + V, T, V, S=S, per_sample_B=per_sample_B,
                          start_end=start_end, scale=scale)
    _check_against_reference(kw, y)
    assert not exact._fallbacks(**kw).any()
    assert not exact._fallbacks(y=y, **kw).any()
    # and the log-space kernel agrees
    value, gU, gB = chain.log_likelihood_grad(y=y, **kw)
    l_value, l_gU, l_gB = _log_space(y=y, **kw)
    assert_allclose(_batched(value), l_value, **TOL)
    assert_allclose(gU.reshape(l_gU.shape), l_gU, **TOL)
    assert_allclose(gB.reshape(l_gB.shape), l_gB, **TOL)


def test_matches_brute_force(tiny_shape, start_end, chain_problem, assert_matches_brute_force):
    T, V = tiny_shape
    kw, y = chain_problem(77 * T + V + start_end, T, V, start_end=start_end, scale=2.0)
    assert_matches_brute_force(
        kw, y, log_partition=chain.log_partition, marginals=chain.marginals,
        log_likelihood=chain.log_likelihood, viterbi=chain.viterbi,
    )
    assert not exact._fallbacks(**kw).any()


def test_forbidden_labels_stay_in_linear_space():
    """-inf unaries (forbidden labels, start and end states) are exact zeros
    in linear space: no fallback, exact zero marginals, brute force agrees."""
    rng = np.random.default_rng(3)
    T, V = 5, 4
    U = rng.standard_normal((T, V))
    U[:, 2] = -np.inf  # a whole forbidden label
    U[1, 0] = -np.inf
    B = rng.standard_normal((V, V))
    start = np.array([0.0, -np.inf, 0.5, 0.1])
    end = np.array([-np.inf, 0.0, 0.0, 0.3])
    kw = {"U": U, "B": B, "start": start, "end": end}
    assert not exact._fallbacks(**kw).any()
    unary, pairwise = chain.marginals(**kw)
    bu, bp = ref.brute_force_marginals(**kw)
    assert_allclose(unary, bu, **TOL)
    assert_allclose(pairwise, bp, **TOL)
    assert np.all(unary[:, 2] == 0.0) and unary[1, 0] == 0.0 and unary[0, 1] == 0.0
    assert np.all(pairwise[2] == 0.0) and np.all(pairwise[:, 2] == 0.0)
    assert_allclose(chain.log_partition(**kw), ref.brute_force_log_partition(**kw), **TOL)


def test_ranges_just_inside_the_safe_bound():
    """R_B + R_U just below _SAFE_RANGE: still linear space, still accurate
    (probabilities of ~exp(-149) are kept, no under- or overflow)."""
    r = link._SAFE_RANGE
    B = np.array([[0.0, -0.5 * r + 1], [-0.5 * r + 1, 0.0]])
    U = np.array([[0.0, -0.5 * r + 1], [-0.5 * r + 1, 0.0], [0.0, -0.5 * r + 1]])
    assert not exact._fallbacks(U, B).any()
    l_value, l_unary, l_pairwise = _log_space(U, B)
    unary, pairwise = chain.marginals(U, B)
    assert_allclose(unary, l_unary[0], rtol=1e-10, atol=0)
    assert_allclose(pairwise, l_pairwise[0], rtol=1e-10, atol=0)
    assert_allclose(chain.log_partition(U, B), l_value[0], rtol=1e-14)
    assert np.all(unary > 0) and np.all(pairwise > 0) and pairwise.min() < 1e-60
    assert exact._fallbacks(U, B + np.diag([0.0, 5.0])).all()  # range now above the bound


# ------------------------------------------------------------- extreme input
def _extreme_cases():
    rng = np.random.default_rng(7)
    T, V = 6, 4
    cases = {}
    for mag in (1e3, 1e5):  # extreme B: every sample falls back
        cases[f"scale{mag:g}"] = (mag * rng.standard_normal((T, V)),
                                  mag * rng.standard_normal((V, V)), True)
    U, B = rng.standard_normal((T, V)), rng.standard_normal((V, V))
    B_inf = B.copy()
    B_inf[0, 1] = B_inf[2, 2] = -np.inf
    cases["B_-inf"] = (U, B_inf, True)
    B_lab = B.copy()
    B_lab[1, :] = B_lab[:, 1] = -np.inf  # label 1 unreachable after t = 0
    U_lab = U.copy()
    U_lab[:, 3] = -np.inf  # and label 3 forbidden everywhere
    cases["forbidden_label_B_and_U"] = (U_lab, B_lab, True)
    U_rng = U.copy()
    U_rng[2, 1] = -1e4  # one row spanning 1e4 nats
    cases["huge_row_range"] = (U_rng, B, False)
    U_dead = U.copy()
    U_dead[3] = -np.inf  # every path forbidden
    cases["all_forbidden"] = (U_dead, B, False)
    return cases


@pytest.mark.parametrize("case", list(_extreme_cases()))
def test_extreme_potentials_fall_back_to_log_space(case):
    """Extreme potentials take the log-space core and give exactly its
    results, without NaN; the moderate samples of the same batch stay in
    linear space unless B itself is extreme."""
    U, B, both_fall_back = _extreme_cases()[case]
    rng = np.random.default_rng(8)
    Ub = np.stack([U, rng.standard_normal(U.shape)])  # extreme sample, moderate sample
    y = np.zeros(U.shape[0], dtype=np.int64)
    assert_array_equal(exact._fallbacks(U, B), [True])
    fell_b = exact._fallbacks(Ub, B)
    assert_array_equal(fell_b, [True, both_fall_back])
    unary, pairwise = chain.marginals(Ub, B)
    l_value, l_unary, l_pairwise = _log_space(Ub, B)
    assert_array_equal(unary[0], l_unary[0])
    assert_array_equal(pairwise[0], l_pairwise[0])
    value, gU, gB = chain.log_likelihood_grad(Ub, B, y)
    l_value, l_gU, l_gB = _log_space(Ub, B, y=y)
    assert_array_equal(value[0], l_value[0])
    assert_array_equal(gU[0], l_gU[0])
    assert_array_equal(gB[0], l_gB[0])
    assert_array_equal(chain.log_likelihood(Ub, B, y), value)
    for arr in (unary, pairwise, gU, gB):
        assert not np.isnan(arr).any()
    assert not np.isnan(value).any() and not np.isnan(chain.log_partition(Ub, B)).any()
    # ragged: the same per sequence
    lengths = [U.shape[0], U.shape[0]]
    r_unary, r_pairwise = chain.marginals_ragged(np.concatenate(Ub), lengths, B)
    assert_array_equal(r_unary[:U.shape[0]], unary[0])
    assert_array_equal(r_pairwise[0], pairwise[0])
    assert_array_equal(exact._ragged_fallbacks(np.concatenate(Ub), lengths, B), fell_b)


# ------------------------------------------------------------------ ragged
def _ragged_problem(seed, lengths, V, scale=1.0, extreme=()):
    rng = np.random.default_rng(seed)
    N = int(np.sum(lengths))
    U = scale * rng.standard_normal((N, V))
    B = scale * rng.standard_normal((V, V))
    start, end = rng.standard_normal(V), rng.standard_normal(V)
    y = rng.integers(0, V, N)
    offsets = np.r_[0, np.cumsum(lengths)]
    for n in extreme:  # sequences made extreme: huge range in one row
        U[offsets[n]] *= 1e4
    return U, B, start, end, y, offsets


@pytest.mark.parametrize("blas", [False, True])
@pytest.mark.parametrize("V", [3, 70])
def test_ragged_grad_matches_reference(blas, V, monkeypatch):
    """Both ragged training passes (one sequence at a time, and the BLAS pass
    over all sequences of the call) equal the references, fallback sequences
    included, with sequences of length 1. (The fallback sequence, with
    potentials of 1e4, gets an absolute tolerance of 1e-10: its gradient
    entries near 0 are differences of probabilities near 1 computed from
    log values of magnitude 1e4 with absolute rounding errors of ~1e-12.)"""
    monkeypatch.setattr(link, "_BLAS_MIN_LABELS", 1 if blas else 10**9)
    lengths = [5, 1, 9, 3, 9, 2, 1]
    U, B, start, end, y, offsets = _ragged_problem(V, lengths, V, extreme=(2,))
    assert_array_equal(exact._ragged_fallbacks(U, lengths, B, y, start, end),
                       [n == 2 for n in range(len(lengths))])
    values, gU, gB = chain.log_likelihood_grad_ragged(U, lengths, B, y, start, end)
    gB_sum = np.zeros((V, V))
    for n, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        r_value, r_gU, r_gB = ref.log_likelihood_grad_ref(U[a:b], B, y[a:b], start, end)
        tol = TOL if n != 2 else {"rtol": 1e-10, "atol": 1e-10}
        assert_allclose(values[n], r_value, **tol)
        assert_allclose(gU[a:b], r_gU, **tol)
        gB_sum += r_gB
    assert_allclose(gB, gB_sum, rtol=1e-10, atol=1e-10)


def test_ragged_blas_pass_equals_one_by_one(monkeypatch):
    rng = np.random.default_rng(4)
    V = 80
    lengths = rng.integers(1, 25, 12)
    U, B, start, end, y, _ = _ragged_problem(5, lengths, V, scale=2.0)
    monkeypatch.setattr(link, "_BLAS_MIN_LABELS", 10**9)
    one = chain.log_likelihood_grad_ragged(U, lengths, B, y, start, end)
    monkeypatch.setattr(link, "_BLAS_MIN_LABELS", 1)
    blas = chain.log_likelihood_grad_ragged(U, lengths, B, y, start, end)
    assert not exact._ragged_fallbacks(U, lengths, B, y, start, end).any()
    for a, b in zip(blas, one):
        assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("V", [3, 70])
def test_ragged_grad_by_finite_differences(V, monkeypatch):
    """Directional derivatives of sum(values) along random directions in
    (U, B, start, end) against central differences (h = 1e-5; truncation
    O(h^2), rounding ~eps |f| / h: tolerance 1e-6 relative)."""
    monkeypatch.setattr(link, "_BLAS_MIN_LABELS", 64)  # V = 70 runs the BLAS pass
    lengths = [4, 1, 6, 3]
    U, B, start, end, y, _ = _ragged_problem(11, lengths, V)
    values, gU, gB = chain.log_likelihood_grad_ragged(U, lengths, B, y, start, end)
    g_start, g_end = np.zeros(V), np.zeros(V)
    offsets = np.r_[0, np.cumsum(lengths)]
    for a, b in zip(offsets[:-1], offsets[1:]):
        g_start += gU[a]
        g_end += gU[b - 1]
    rng = np.random.default_rng(12)
    h = 1e-5
    for _ in range(4):
        d = [rng.standard_normal(x.shape) for x in (U, B, start, end)]

        def f(e):
            return chain.log_likelihood_grad_ragged(
                U + e * d[0], lengths, B + e * d[1], y, start + e * d[2], end + e * d[3])[0].sum()

        fd = (f(h) - f(-h)) / (2 * h)
        an = (gU * d[0]).sum() + (gB * d[1]).sum() + g_start @ d[2] + g_end @ d[3]
        assert_allclose(an, fd, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------- determinism
def test_prediction_results_do_not_depend_on_the_batch():
    """A sequence's marginals (and a sample's) are bit-identical computed
    alone and inside batches of other sequences, moderate or extreme."""
    rng = np.random.default_rng(21)
    V = 70
    B = rng.standard_normal((V, V))
    u0 = rng.standard_normal((13, V))
    alone_u, alone_p = chain.marginals_ragged(u0, [13], B)
    others = [rng.standard_normal((L, V)) for L in (30, 1, 13, 7)]
    others[1] = others[1] * 1e4  # an extreme one (log-space path)
    for k in range(len(others) + 1):
        seqs = others[:k] + [u0] + others[k:]
        lengths = [len(s) for s in seqs]
        unary, pairwise = chain.marginals_ragged(np.concatenate(seqs), lengths, B)
        a = sum(lengths[:k])
        assert_array_equal(unary[a:a + 13], alone_u)
        assert_array_equal(pairwise[k], alone_p[0])
    # batched samples, shared and per-sample B
    Ub = rng.standard_normal((5, 13, V))
    Ub[0] = u0
    Ub[3] *= 1e4
    one_u, one_p = chain.marginals(u0, B)
    batch_u, batch_p = chain.marginals(Ub, B)
    assert_array_equal(batch_u[0], one_u)
    assert_array_equal(batch_p[0], one_p)
    Bb = rng.standard_normal((5, V, V))
    Bb[0] = B
    batch_u, batch_p = chain.marginals(Ub, Bb)
    assert_array_equal(batch_u[0], one_u)
    assert_array_equal(batch_p[0], one_p)


def test_ragged_blas_pass_by_blocks(monkeypatch):
    """Sequences split into several BLAS blocks give the one-block result."""
    lengths = [3, 7, 1, 5, 2, 8, 4]
    U, B, start, end, y, _ = _ragged_problem(13, lengths, 20)
    monkeypatch.setattr(link, "_BLAS_MIN_LABELS", 1)
    whole = chain.log_likelihood_grad_ragged(U, lengths, B, y, start, end)
    monkeypatch.setattr(exact, "_BLAS_BLOCK", 3)
    blocks = chain.log_likelihood_grad_ragged(U, lengths, B, y, start, end)
    for a, b in zip(blocks, whole):
        assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shared_B", [True, False])
@pytest.mark.parametrize("with_start_end", [False, True])
def test_log_space_baseline_marginals_match_reference(shared_B, with_start_end):
    """The log-space baseline's marginals mode (no labels), batched, against
    the numpy reference on random potentials (it was compared only on
    hand-built input, or with itself through the fallback)."""
    rng = np.random.default_rng(11 + 2 * shared_B + with_start_end)
    S, T, V = 3, 6, 4
    U = 3.0 * rng.standard_normal((S, T, V))
    B = rng.standard_normal((V, V) if shared_B else (S, V, V))
    kw = dict(U=U, B=B)
    if with_start_end:
        kw.update(start=rng.standard_normal(V), end=rng.standard_normal(V))
    value, unary, pairwise = _log_space(**kw)
    want_unary, want_pairwise = ref.marginals_ref(**kw)
    assert_allclose(unary, want_unary, **TOL)
    assert_allclose(pairwise, want_pairwise, **TOL)
    assert_allclose(value, ref.log_partition_ref(**kw), **TOL)


@pytest.mark.parametrize("per_sequence_B", [False, True])
@pytest.mark.parametrize("summed_pairwise", [False, True])
@pytest.mark.parametrize("labelled", [False, True])
def test_log_space_ragged_baseline_matches_reference(per_sequence_B, summed_pairwise,
                                                     labelled):
    """``_fb_ragged_kernel`` (the log-space ragged baseline of
    ``benchmarks/chain_kernels.py``) against the numpy references sequence
    by sequence: lengths 1 to 7, a forbidden (-inf) entry, one sequence at
    potentials of order 1e3, start and end potentials; with and without
    labels, shared or per-sequence transitions, per-sequence or summed
    pairwise output."""
    rng = np.random.default_rng(5 + 4 * per_sequence_B + 2 * summed_pairwise + labelled)
    V = 3
    lengths = np.array([1, 4, 7, 2, 5])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    N, n = lengths.size, int(offsets[-1])
    U = rng.standard_normal((n, V))
    U[offsets[2]:offsets[3]] *= 1e3
    U[offsets[1] + 1, 2] = -np.inf
    B = rng.standard_normal((N if per_sequence_B else 1, V, V))
    start, end = rng.standard_normal(V), rng.standard_normal(V)
    y = np.empty(n, dtype=np.int64)
    for k in range(N):  # labels that avoid the forbidden entry
        y[offsets[k]:offsets[k + 1]] = rng.integers(0, 2, lengths[k])
    unary = np.empty((n, V))
    pairwise = np.empty((1 if summed_pairwise else N, V, V))
    labels = y if labelled else exact._NO_LABELS
    value = logk._fb_ragged_kernel(U, offsets, B, start, end, labels, unary, pairwise)
    total = np.zeros((V, V))
    for k in range(N):
        a, b = offsets[k], offsets[k + 1]
        kw = dict(U=U[a:b], B=B[k if per_sequence_B else 0], start=start, end=end)
        if labelled:
            want_value, want_unary, want_pair = ref.log_likelihood_grad_ref(y=y[a:b], **kw)
        else:
            want_unary, want_pair = ref.marginals_ref(**kw)
            want_value = ref.log_partition_ref(**kw)
        assert_allclose(value[k], want_value, rtol=1e-10, atol=1e-9)
        assert_allclose(unary[a:b], want_unary, **TOL)
        if summed_pairwise:
            total += want_pair
        else:
            assert_allclose(pairwise[k], want_pair, **TOL)
    if summed_pairwise:
        assert_allclose(pairwise[0], total, **TOL)
