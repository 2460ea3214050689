"""Numba linear-chain kernels against brute force, the numpy reference and
finite differences."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct import chain
from skgpstruct.chain import _reference as ref

def path_score(U, B, y, start=None, end=None):
    T = len(y)
    score = sum(U[t, y[t]] for t in range(T)) + sum(B[y[t - 1], y[t]] for t in range(1, T))
    if start is not None:
        score += start[y[0]]
    if end is not None:
        score += end[y[-1]]
    return score


def _log_likelihood_explicit_none(U, B, y, start=None, end=None):
    """chain.log_likelihood with start / end always passed (None when absent)."""
    return chain.log_likelihood(U=U, B=B, y=y, start=start, end=end)


# --------------------------------------------------------- brute force
def test_unbatched_matches_brute_force(tiny_shape, start_end, chain_problem,
                                       assert_matches_brute_force):
    T, V = tiny_shape
    kw, y = chain_problem(1000 * T + 10 * V + start_end, T, V, start_end=start_end)
    got = assert_matches_brute_force(
        kw, y, log_partition=chain.log_partition, marginals=chain.marginals,
        log_likelihood=_log_likelihood_explicit_none, viterbi=chain.viterbi,
    )
    assert_allclose(got.unary.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert_allclose(got.pairwise.sum(), T - 1, rtol=0, atol=1e-10)
    assert got.path.dtype == np.int64
    assert_allclose(got.score, path_score(y=got.path, **kw), rtol=0, atol=1e-10)


@pytest.mark.parametrize("T,V", [(1, 1), (1, 3), (2, 1), (3, 2), (4, 3), (5, 4)])
@pytest.mark.parametrize("per_sample_B", [False, True])
def test_batched_matches_brute_force(T, V, per_sample_B, start_end, chain_problem, sample_kw):
    S = 3
    kw, y = chain_problem(7 * T + V, T, V, S=S, per_sample_B=per_sample_B, start_end=start_end)
    log_z = chain.log_partition(**kw)
    unary, pairwise = chain.marginals(**kw)
    ll, gU, gB = chain.log_likelihood_grad(y=y, **kw)
    paths, scores = chain.viterbi(**kw)
    assert log_z.shape == (S,) and unary.shape == (S, T, V) and pairwise.shape == (S, V, V)
    assert gB.shape == (S, V, V) and paths.shape == (S, T) and scores.shape == (S,)
    for s in range(S):
        kws = sample_kw(kw, s)
        assert_allclose(log_z[s], ref.brute_force_log_partition(**kws), rtol=0, atol=1e-10)
        bu, bp = ref.brute_force_marginals(**kws)
        assert_allclose(unary[s], bu, rtol=0, atol=1e-10)
        assert_allclose(pairwise[s], bp, rtol=0, atol=1e-10)
        assert_allclose(ll[s], ref.brute_force_log_likelihood(y=y, **kws), rtol=0, atol=1e-10)
        bpath, bscore = ref.brute_force_viterbi(**kws)
        assert_array_equal(paths[s], bpath)
        assert_allclose(scores[s], bscore, rtol=0, atol=1e-10)


def test_property_forbidden_entries_match_brute_force(check_forbidden_chains):
    """Random -inf masks on U, B, start, end: kernels still equal enumeration."""

    def check(kw, y):
        log_z = chain.log_partition(**kw)
        unary, pairwise = chain.marginals(**kw)
        bu, bp = ref.brute_force_marginals(**kw)
        assert_allclose(log_z, ref.brute_force_log_partition(**kw), rtol=0, atol=1e-10)
        assert_allclose(unary, bu, rtol=0, atol=1e-10)
        assert_allclose(pairwise, bp, rtol=0, atol=1e-10)
        assert not np.isnan(unary).any() and not np.isnan(pairwise).any()
        path, score = chain.viterbi(**kw)
        assert_allclose(score, ref.brute_force_viterbi(**kw)[1], rtol=0, atol=1e-10)
        if np.isfinite(log_z):
            assert_allclose(unary.sum(axis=1), 1.0, rtol=0, atol=1e-12)
            assert_allclose(score, path_score(y=path, **kw), rtol=0, atol=1e-10)

    check_forbidden_chains(check, p_forbid=[0.0, 0.2, 0.5])


def test_viterbi_ties_go_to_lowest_label():
    """Integer potentials make exact ties; DP and enumeration must agree on
    the tie-breaking rule (lowest index, reading from the last position)."""
    rng = np.random.default_rng(3)
    n_tied = 0
    for _ in range(40):
        T, V = rng.integers(1, 6), rng.integers(1, 5)
        U = rng.integers(0, 2, (T, V)).astype(float)
        B = rng.integers(0, 2, (V, V)).astype(float)
        path, score = chain.viterbi(U, B)
        bpath, bscore = ref.brute_force_viterbi(U, B)
        assert_array_equal(path, bpath)
        assert score == bscore
        all_scores = [path_score(U, B, p) for p in itertools.product(range(V), repeat=T)]
        n_tied += sum(s == bscore for s in all_scores) > 1
    assert n_tied > 10  # the test really exercised ties
    path, score = chain.viterbi(np.zeros((4, 3)), np.zeros((3, 3)))
    assert_array_equal(path, [0, 0, 0, 0])


# ------------------------------------------------------ numpy reference
@pytest.mark.parametrize("S,per_sample_B", [(None, False), (4, False), (4, True)])
def test_matches_numpy_reference_large(S, per_sample_B, start_end, chain_problem):
    T, V = 30, 14
    kw, y = chain_problem(11, T, V, S=S, per_sample_B=per_sample_B, start_end=start_end, scale=2.0)
    tol = {"rtol": 1e-10, "atol": 1e-10}
    assert_allclose(chain.forward_log(**kw), ref.forward_log_ref(**kw), **tol)
    assert_allclose(chain.backward_log(**kw), ref.backward_log_ref(**kw), **tol)
    assert_allclose(chain.log_partition(**kw), ref.log_partition_ref(**kw), **tol)
    for got, want in zip(chain.marginals(**kw), ref.marginals_ref(**kw)):
        assert_allclose(got, want, **tol)
    assert_allclose(chain.log_likelihood(y=y, **kw), ref.log_likelihood_ref(y=y, **kw), **tol)
    for got, want in zip(chain.log_likelihood_grad(y=y, **kw), ref.log_likelihood_grad_ref(y=y, **kw)):
        assert_allclose(got, want, **tol)
    path, score = chain.viterbi(**kw)
    rpath, rscore = ref.viterbi_ref(**kw)
    assert_array_equal(path, rpath)
    assert_allclose(score, rscore, **tol)


def test_lattices_are_consistent(random_chain):
    """fwd + bwd - log Z are the log marginals; log Z from either end agrees."""
    rng = np.random.default_rng(5)
    kw = random_chain(rng, 9, 5, start_end=True)
    fwd, bwd = chain.forward_log(**kw), chain.backward_log(**kw)
    log_z = chain.log_partition(**kw)
    assert_allclose(bwd[-1], 0.0, atol=0)
    for t in range(9):  # log Z = logsumexp(fwd[t] + bwd[t]) for every t
        assert_allclose(np.logaddexp.reduce(fwd[t] + bwd[t]), log_z, rtol=1e-12)
    assert_allclose(np.exp(fwd + bwd - log_z), chain.marginals(**kw)[0], rtol=1e-10)


def test_unbatched_return_types(random_chain):
    rng = np.random.default_rng(0)
    kw = random_chain(rng, 4, 3)
    y = [0, 1, 2, 0]
    assert isinstance(chain.log_partition(**kw), float)
    assert isinstance(chain.log_likelihood(y=y, **kw), float)
    assert isinstance(chain.log_likelihood_grad(y=y, **kw)[0], float)
    assert isinstance(chain.viterbi(**kw)[1], float)
    # array-likes are accepted
    assert_allclose(
        chain.log_partition(kw["U"].tolist(), kw["B"].tolist()), chain.log_partition(**kw)
    )


# ------------------------------------------------------------ gradients
def test_dlogz_equals_marginals_by_finite_differences(random_chain, assert_potentials_grad_fd):
    """d log Z / dU = unary marginals and d log Z / dB = summed pairwise
    marginals. Central differences with h = 1e-5 at N(0, 1) potentials: the
    truncation error is O(h^2) ~ 1e-11 and the rounding error
    ~ eps * |log Z| / h ~ 1e-10, hence atol = 1e-8 next to rtol = 1e-6."""
    rng = np.random.default_rng(21)
    kw = random_chain(rng, 5, 3, start_end=True)
    unary, pairwise = chain.marginals(**kw)
    assert_potentials_grad_fd(chain.log_partition, kw, {"U": unary, "B": pairwise},
                              h=1e-5, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("T", [1, 2, 6])
def test_log_likelihood_grad_by_finite_differences(T, chain_problem, assert_potentials_grad_fd):
    """Gradients wrt U, B, start and end (the latter two read off grad_U).
    Step and tolerances as in test_dlogz_equals_marginals_by_finite_differences."""
    kw, y = chain_problem(31 + T, T, 4, start_end=True)
    value, gU, gB = chain.log_likelihood_grad(y=y, **kw)
    assert_allclose(value, chain.log_likelihood(y=y, **kw), rtol=1e-12)
    assert_potentials_grad_fd(
        lambda **kw_: chain.log_likelihood(y=y, **kw_), kw,
        {"U": gU, "B": gB, "start": gU[0], "end": gU[-1]}, h=1e-5, rtol=1e-6, atol=1e-8,
    )


@pytest.mark.parametrize("per_sample_B", [False, True])
def test_batched_grad_by_finite_differences(per_sample_B, chain_problem, assert_potentials_grad_fd):
    """Batched grad_B is per sample; with a shared B its sum over samples is
    the gradient of the summed log-likelihood. Step/tolerances as above."""
    S, T, V = 3, 4, 3
    kw, y = chain_problem(41, T, V, S=S, per_sample_B=per_sample_B, start_end=True)
    values, gU, gB = chain.log_likelihood_grad(y=y, **kw)
    assert gB.shape == (S, V, V)
    assert_potentials_grad_fd(
        lambda **kw_: chain.log_likelihood(y=y, **kw_).sum(), kw,
        {"U": gU, "B": gB if per_sample_B else gB.sum(axis=0)}, h=1e-5, rtol=1e-6, atol=1e-8,
    )


def test_ragged_matches_per_sequence_calls():
    rng = np.random.default_rng(51)
    V = 4
    lengths = np.array([1, 5, 3, 7])
    U = rng.standard_normal((lengths.sum(), V))
    B, start, end = rng.standard_normal((V, V)), rng.standard_normal(V), rng.standard_normal(V)
    y = rng.integers(0, V, lengths.sum())
    values, gU, gB = chain.log_likelihood_grad_ragged(U, lengths, B, y, start, end)
    gB_sum = np.zeros((V, V))
    offsets = np.r_[0, np.cumsum(lengths)]
    for n, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        v, gu, gb = chain.log_likelihood_grad(U[a:b], B, y[a:b], start, end)
        assert_allclose(values[n], v, rtol=1e-12)
        assert_allclose(gU[a:b], gu, rtol=1e-12, atol=1e-15)
        gB_sum += gb
    assert_allclose(gB, gB_sum, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("lengths", [[1, 5, 3, 7], [4]])
def test_ragged_per_sequence_B_matches_per_sequence_calls(lengths):
    """B of shape (n_sequences, V, V): each chain uses its own transitions
    (with -inf entries) and gets its own grad_B."""
    rng = np.random.default_rng(52)
    V = 4
    lengths = np.array(lengths)
    n, N = lengths.size, lengths.sum()
    U = rng.standard_normal((N, V))
    B = rng.standard_normal((n, V, V))
    B[:, 0, 1] = -np.inf
    start, end = rng.standard_normal(V), rng.standard_normal(V)
    y = rng.integers(0, V, N)
    for t in range(1, N):  # keep the gold path allowed
        if y[t - 1] == 0 and y[t] == 1:
            y[t] = 2
    values, gU, gB = chain.log_likelihood_grad_ragged(U, lengths, B, y, start, end)
    paths, scores = chain.viterbi_ragged(U, lengths, B, start, end)
    unary, pairwise = chain.marginals_ragged(U, lengths, B, start, end)
    assert gB.shape == (n, V, V) and pairwise.shape == (n, V, V)
    offsets = np.r_[0, np.cumsum(lengths)]
    for k, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        v, gu, gb = chain.log_likelihood_grad(U[a:b], B[k], y[a:b], start, end)
        assert_allclose(values[k], v, rtol=1e-12)
        assert_allclose(gU[a:b], gu, rtol=1e-12, atol=1e-15)
        assert_allclose(gB[k], gb, rtol=1e-12, atol=1e-14)
        p_ref, s_ref = ref.viterbi_ref(U[a:b], B[k], start, end)
        np.testing.assert_array_equal(paths[a:b], p_ref)
        assert scores[k] == pytest.approx(s_ref, abs=1e-10)
        u_ref, pw_ref = ref.marginals_ref(U[a:b], B[k], start, end)
        assert_allclose(unary[a:b], u_ref, atol=1e-10)
        assert_allclose(pairwise[k], pw_ref, atol=1e-10)


# ------------------------------------------------ large and -inf potentials
def test_large_potentials_are_finite(chain_problem):
    """Potentials of magnitude 1e3 would overflow exp(); log space must not."""
    kw, y = chain_problem(61, 5, 4, start_end=True, scale=1e3)
    log_z = chain.log_partition(**kw)
    unary, pairwise = chain.marginals(**kw)
    value, gU, gB = chain.log_likelihood_grad(y=y, **kw)
    assert np.isfinite(log_z) and abs(log_z) > 1e3
    for arr in (unary, pairwise, gU, gB):
        assert np.all(np.isfinite(arr))
    assert_allclose(unary.sum(axis=1), 1.0, atol=1e-12)
    assert np.isfinite(value)
    assert_allclose(log_z, ref.brute_force_log_partition(**kw), rtol=1e-13)
    bu, bp = ref.brute_force_marginals(**kw)
    assert_allclose(unary, bu, atol=1e-10)
    assert_allclose(pairwise, bp, atol=1e-10)
    path, score = chain.viterbi(**kw)
    assert_array_equal(path, ref.brute_force_viterbi(**kw)[0])


def test_underflow_fallbacks():
    """Scores whose maxima sit at different labels by ~1500 make the
    linear-space sums of the kernels underflow (forward, backward) or their
    scale factor overflow (pairwise marginals); the exact fallbacks must give
    the right answer: the two surviving paths (0, 0) and (1, 0) both score
    -1500."""
    U = np.array([[0.0, -1500.0], [0.0, -np.inf]])
    B = np.array([[-1500.0, 0.0], [0.0, 0.0]])
    assert_allclose(chain.log_partition(U, B), -1500 + np.log(2), rtol=1e-15)
    assert_allclose(chain.backward_log(U, B)[0], [-1500.0, 0.0])
    unary, pairwise = chain.marginals(U, B)
    assert_allclose(unary, [[0.5, 0.5], [1.0, 0.0]], atol=1e-14)
    assert_allclose(pairwise, [[0.5, 0.0], [0.5, 0.0]], atol=1e-14)
    bu, bp = ref.brute_force_marginals(U, B)
    assert_allclose(unary, bu, atol=1e-14)
    assert_allclose(pairwise, bp, atol=1e-14)


def test_forbidden_transitions():
    """A chain that must alternate 0 -> 1 -> 0 ...: only two paths survive."""
    T, V = 5, 2
    U = np.zeros((T, V))
    B = np.array([[-np.inf, 0.0], [0.0, -np.inf]])
    assert_allclose(chain.log_partition(U, B), np.log(2))
    unary, pairwise = chain.marginals(U, B)
    assert_allclose(unary, 0.5)
    assert_allclose(pairwise, [[0.0, 2.0], [2.0, 0.0]])
    assert chain.log_likelihood(U, B, [0, 0, 1, 0, 1]) == -np.inf
    value, gU, gB = chain.log_likelihood_grad(U, B, [0, 0, 1, 0, 1])
    assert value == -np.inf and np.all(np.isfinite(gU)) and np.all(np.isfinite(gB))
    assert_allclose(chain.log_likelihood(U, B, [0, 1, 0, 1, 0]), -np.log(2))
    path, score = chain.viterbi(U, B)
    assert_array_equal(path, [0, 1, 0, 1, 0])
    assert score == 0.0


@pytest.mark.parametrize("S", [None, 2])
def test_every_path_forbidden(S):
    """log Z = -inf, zero marginals, no NaN (and no warning: warnings are errors)."""
    T, V = 3, 2
    U = np.zeros((T, V)) if S is None else np.zeros((S, T, V))
    U[..., 1, :] = -np.inf
    B = np.zeros((V, V))
    log_z = chain.log_partition(U, B)
    assert np.all(log_z == -np.inf)
    unary, pairwise = chain.marginals(U, B)
    assert np.all(unary == 0.0) and np.all(pairwise == 0.0)
    value, gU, gB = chain.log_likelihood_grad(U, B, [0, 1, 0])
    assert np.all(value == -np.inf) and not np.isnan(gU).any() and not np.isnan(gB).any()
    path, score = chain.viterbi(U, B)
    assert np.all(score == -np.inf) and not np.isnan(score).any()
    fwd, bwd = chain.forward_log(U, B), chain.backward_log(U, B)
    assert not np.isnan(fwd).any() and not np.isnan(bwd).any()


def test_forbidden_start_and_end():
    U, B = np.zeros((3, 3)), np.zeros((3, 3))
    start = np.array([-np.inf, 0.0, -np.inf])
    end = np.array([0.0, -np.inf, -np.inf])
    unary, _ = chain.marginals(U, B, start, end)
    assert_allclose(unary[0], [0, 1, 0])
    assert_allclose(unary[-1], [1, 0, 0])
    assert_allclose(chain.log_partition(U, B, start, end), np.log(3))
    assert_array_equal(chain.viterbi(U, B, start, end)[0], [1, 0, 0])


# ------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "args,match",
    [
        ((np.zeros(3), np.zeros((3, 3))), "U must be 2-D"),
        ((np.zeros((1, 2, 3, 3)), np.zeros((3, 3))), "U must be 2-D"),
        ((np.zeros((0, 3)), np.zeros((3, 3))), "n_steps = 0"),
        ((np.zeros((2, 0)), np.zeros((0, 0))), "n_labels = 0"),
        ((np.zeros((0, 2, 3)), np.zeros((3, 3))), "n_samples = 0"),
        ((np.zeros((2, 3)), np.zeros((4, 4))), "n_labels = 3"),
        ((np.zeros((2, 3)), np.zeros((3, 4))), "n_labels = 3"),
        ((np.zeros((2, 3)), np.zeros((2, 3, 3))), r"B must have shape \(n_labels, n_labels\)"),
        ((np.zeros((2, 2, 3)), np.zeros((5, 3, 3))), "B has 5 samples"),
        ((np.array([[0.0, np.nan]]), np.zeros((2, 2))), "U contains NaN"),
        ((np.zeros((1, 2)), np.array([[0.0, np.inf], [0, 0]])), r"B contains \+inf"),
        ((np.zeros((1, 2)), np.zeros((2, 2)), np.zeros(3)), "start has shape"),
        ((np.zeros((1, 2)), np.zeros((2, 2)), None, np.zeros((2, 2))), "end must have shape"),
        ((np.zeros((2, 1, 2)), np.zeros((2, 2)), np.zeros((3, 2))), "start has shape"),
        (([[0.0, 1.0], [2.0]], np.zeros((2, 2))), "U could not be converted"),
    ],
)
def test_bad_potentials_raise(args, match):
    with pytest.raises(ValueError, match=match):
        chain.log_partition(*args)
    with pytest.raises(ValueError, match=match):
        chain.marginals(*args)


def test_bad_dtype_raises():
    with pytest.raises(TypeError, match="U must contain real numbers"):
        chain.log_partition(np.array([["a", "b"]]), np.zeros((2, 2)))
    with pytest.raises(TypeError, match="B must contain real numbers"):
        chain.viterbi(np.zeros((1, 2)), np.zeros((2, 2), dtype=complex))


def test_bad_labels_raise(assert_refuses_bad_labels):
    assert_refuses_bad_labels(chain.log_likelihood, chain.log_likelihood_grad)


def test_integral_float_labels_accepted():
    U, B = np.zeros((3, 3)), np.zeros((3, 3))
    assert chain.log_likelihood(U, B, np.array([0.0, 1.0, 2.0])) == chain.log_likelihood(U, B, [0, 1, 2])


def test_bad_ragged_input_raises():
    U, B = np.zeros((5, 2)), np.zeros((2, 2))
    y = np.zeros(5, dtype=int)
    with pytest.raises(ValueError, match="lengths sum to 4"):
        chain.log_likelihood_grad_ragged(U, [2, 2], B, y)
    with pytest.raises(ValueError, match="lengths must be positive"):
        chain.log_likelihood_grad_ragged(U, [5, 0], B, y)
    with pytest.raises(ValueError, match="stacked 2-D U"):
        chain.log_likelihood_grad_ragged(np.zeros((1, 5, 2)), [5], B, y)
    with pytest.raises(ValueError, match="stacked 2-D U"):
        chain.log_likelihood_grad_ragged(U[None], [5], np.zeros((1, 2, 2)), y)
    with pytest.raises(ValueError, match="per-sequence B must have shape"):
        chain.log_likelihood_grad_ragged(U, [2, 3], np.zeros((3, 2, 2)), y)
    with pytest.raises(ValueError, match="B contains NaN"):
        chain.viterbi_ragged(U, [2, 3], np.full((2, 2, 2), np.nan))
    with pytest.raises(ValueError, match="y has length 4"):
        chain.log_likelihood_grad_ragged(U, [2, 3], B, [0, 1, 0, 1])


# ---------------------------------------------------------------- ragged forms
def test_ragged_viterbi_and_marginals_match_per_sequence():
    from skgpstruct.chain import marginals_ragged, viterbi_ragged

    rng = np.random.default_rng(11)
    lengths = np.array([1, 4, 2, 7])
    V = 3
    U = rng.normal(size=(lengths.sum(), V))
    B = rng.normal(size=(V, V))
    start, end = rng.normal(size=V), rng.normal(size=V)
    paths, scores = viterbi_ragged(U, lengths, B, start, end)
    unary, pairwise = marginals_ragged(U, lengths, B, start, end)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for n in range(len(lengths)):
        a, b = offsets[n], offsets[n + 1]
        p_ref, s_ref = ref.viterbi_ref(U[a:b], B, start, end)
        np.testing.assert_array_equal(paths[a:b], p_ref)
        assert scores[n] == pytest.approx(s_ref, abs=1e-10)
        u_ref, pw_ref = ref.marginals_ref(U[a:b], B, start, end)
        np.testing.assert_allclose(unary[a:b], u_ref, atol=1e-10)
        np.testing.assert_allclose(pairwise[n], pw_ref, atol=1e-10)
    with pytest.raises(ValueError):
        viterbi_ragged(U, [1, 2], B)
