"""Whole label sequences: exact path samples, path entropy and the
log-likelihood of many paths under many potentials, against enumeration."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct.chain.paths import AUTO_MAX_PATHS, _auto_rounds
from skgpstruct.chain import (log_likelihood, mixture_path_entropy, path_entropy,
                              paths_log_likelihood, sample_paths)
from skgpstruct.chain import _reference as ref


def _all_paths(T, V):
    return np.array(list(itertools.product(range(V), repeat=T)), dtype=np.int64)


def _brute_log_probs(kw, T, V):
    return np.array([ref.brute_force_log_likelihood(y=y, **kw) for y in _all_paths(T, V)])


def test_path_entropy_matches_enumeration(tiny_shape, start_end, chain_problem):
    T, V = tiny_shape
    kw, _ = chain_problem(T * 10 + V, T, V, start_end=start_end, scale=1.5)
    log_p = _brute_log_probs(kw, T, V)
    want = -np.sum(np.exp(log_p) * log_p)
    assert_allclose(path_entropy(**kw), want, rtol=0, atol=1e-10)


def test_path_entropy_is_at_most_the_summed_token_entropies(chain_problem):
    from skgpstruct.chain import marginals

    kw, _ = chain_problem(0, 6, 3, scale=2.0)
    unary, _ = marginals(**kw)
    assert path_entropy(**kw) <= -np.sum(unary * np.log(unary)) + 1e-12
    kw["B"] = np.zeros_like(kw["B"])  # independent labels: equality
    unary, _ = marginals(**kw)
    assert_allclose(path_entropy(**kw), -np.sum(unary * np.log(unary)), rtol=1e-12)


def test_path_entropy_batched_and_with_forbidden_transitions(chain_problem, sample_kw):
    kw, _ = chain_problem(1, 4, 3, S=5, per_sample_B=True, start_end=True)
    kw["B"][:, 0, 1] = -np.inf  # a forbidden transition: 0 log 0 = 0
    got = path_entropy(**kw)
    assert got.shape == (5,)
    for s in range(5):
        one = sample_kw(kw, s)
        log_p = _brute_log_probs(one, 4, 3)
        p = np.exp(log_p)
        want = -np.sum(p * np.where(p > 0, log_p, 0.0))
        assert_allclose(got[s], want, rtol=0, atol=1e-10)


def test_paths_log_likelihood_matches_log_likelihood(chain_problem, sample_kw):
    T, V, S = 5, 3, 4
    kw, _ = chain_problem(2, T, V, S=S, per_sample_B=True, start_end=True)
    paths = np.random.default_rng(0).integers(0, V, (7, T))
    got = paths_log_likelihood(paths=paths, **kw)
    assert got.shape == (S, 7)
    for j, y in enumerate(paths):
        assert_allclose(got[:, j], log_likelihood(y=y, **kw), rtol=0, atol=1e-10)
    one = sample_kw(kw, 0)
    assert_allclose(paths_log_likelihood(paths=paths, **one), got[0], rtol=0, atol=1e-12)
    one["B"] = one["B"].copy()
    one["B"][paths[0, 0], paths[0, 1]] = -np.inf  # that path is forbidden
    assert paths_log_likelihood(paths=paths[:1], **one)[0] == -np.inf


def test_sample_paths_follows_the_path_distribution(start_end, chain_problem):
    T, V, N = 3, 2, 40_000
    kw, _ = chain_problem(3, T, V, start_end=start_end)
    p = np.exp(_brute_log_probs(kw, T, V))
    batch = {k: np.broadcast_to(v, (N,) + np.shape(v)) if k == "U" else v
             for k, v in kw.items()}
    paths = sample_paths(random_state=0, **batch)
    assert paths.shape == (N, T) and paths.dtype == np.int64
    codes = paths @ (V ** np.arange(T - 1, -1, -1))  # itertools.product's order
    freq = np.bincount(codes, minlength=V ** T) / N
    se = np.sqrt(p * (1 - p) / N)
    assert np.all(np.abs(freq - p) <= 4.5 * se + 1e-12), (freq, p)


def test_sample_paths_one_chain_is_deterministic_and_allowed(chain_problem):
    kw, _ = chain_problem(4, 6, 3)
    kw["B"][1, 2] = -np.inf
    a = sample_paths(random_state=7, **kw)
    assert a.shape == (6,)
    assert_array_equal(a, sample_paths(random_state=7, **kw))
    many = sample_paths(random_state=0, U=np.repeat(kw["U"][None], 500, 0), B=kw["B"])
    assert not np.any((many[:, :-1] == 1) & (many[:, 1:] == 2))


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="U must be 2-D"):
        path_entropy(np.zeros(3), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="B must be square with n_labels = 3"):
        sample_paths(np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="start has shape"):
        path_entropy(np.zeros((2, 3)), np.zeros((3, 3)), start=np.zeros(2))
    with pytest.raises(ValueError, match="paths must have shape"):
        paths_log_likelihood(np.zeros((2, 3)), np.zeros((3, 3)), [[0, 1, 2]])
    with pytest.raises(ValueError, match=r"paths contains labels outside \[0, 3\)"):
        paths_log_likelihood(np.zeros((2, 3)), np.zeros((3, 3)), [[0, 3]])
    with pytest.raises(ValueError, match="Every path is forbidden"):
        sample_paths(np.zeros((2, 2)), np.full((2, 2), -np.inf))


def _mixture_by_enumeration(U, B, w):
    T, V = U.shape[1:]
    log_p = np.array([_brute_log_probs({"U": u, "B": B}, T, V) for u in U])  # (S, paths)
    p = np.exp(log_p)
    mix = w @ p
    h_mix = -np.sum(mix * np.log(mix))
    h_each = -np.sum(p * log_p, axis=1)
    return h_mix, h_mix - w @ h_each


def _disagreeing_mixture(uniform):
    rng = np.random.default_rng(5)
    S, T, V = 12, 4, 3  # 81 paths: more than 4 rounds' 48, sampled at n_paths <= 4
    U = 1.5 * rng.standard_normal((S, T, V))
    B = rng.standard_normal((V, V))
    w = np.full(S, 1.0 / S) if uniform else rng.dirichlet(np.ones(S))
    return U, B, w


@pytest.mark.parametrize("n_paths", [1, 4, "auto"])
@pytest.mark.parametrize("uniform", [True, False])
def test_mixture_path_entropy_is_unbiased_given_the_components(uniform, n_paths):
    U, B, w = _disagreeing_mixture(uniform)
    R = 600
    h_true, mi_true = _mixture_by_enumeration(U, B, w)
    est = np.array([mixture_path_entropy(U, B, None if uniform else w, n_paths=n_paths,
                                         random_state=r) for r in range(R)])
    mean, se = est.mean(axis=0), est.std(axis=0, ddof=1) / np.sqrt(R)
    assert np.all(np.abs(mean - [h_true, mi_true]) <= 4 * se), (mean, h_true, mi_true, se)
    assert mi_true > 10 * se[1]  # the components disagree: a test that can fail


def test_mixture_path_entropy_more_paths_divide_the_variance():
    # given the components every draw is a path's: n_paths rounds are
    # independent, so the variance of the estimates falls by n_paths
    U, B, w = _disagreeing_mixture(False)
    R, m = 600, 4
    one = np.array([mixture_path_entropy(U, B, w, random_state=r) for r in range(R)])
    many = np.array([mixture_path_entropy(U, B, w, n_paths=m, random_state=R + r)
                     for r in range(R)])
    ratio = m * many.var(axis=0, ddof=1) / one.var(axis=0, ddof=1)
    # the log of a sample variance of R draws of kurtosis k has sd about
    # sqrt((k - 1) / R) (2 / R for normal draws); of a ratio of two
    # independent ones, the root of the sum; 4 sd either way
    def kurtosis(x):
        z = x - x.mean(axis=0)
        return np.mean(z ** 4, axis=0) / np.mean(z ** 2, axis=0) ** 2

    sd = np.sqrt((kurtosis(one) - 1 + kurtosis(many) - 1) / R)
    assert np.all(np.abs(np.log(ratio)) < 4 * sd), (ratio, sd)
    assert np.all(4 * sd < np.log(m) / 2)  # a test that can fail: ignoring n_paths would
    # the first round is n_paths=1's: the same generator, the same paths
    assert mixture_path_entropy(U, B, w, n_paths=1, random_state=3) == \
        mixture_path_entropy(U, B, w, random_state=3)
    for bad in (0, -1, 2.0, True, None):
        with pytest.raises(ValueError, match="n_paths must be a positive integer"):
            mixture_path_entropy(U, B, w, n_paths=bad)
    with pytest.raises(ValueError, match="or 'auto'"):
        mixture_path_entropy(U, B, w, n_paths="Auto")


def test_auto_rounds_balances_the_paths_error_against_the_components():
    # gaps d_r = a + (-1)^r e: the pairs' halved squared difference is 2 e^2
    # (sigma_w^2), the pairs' means are a, whose spread 1 less sigma_w^2 / 2
    # is sigma_b^2; the rule is ceil(sigma_w^2 / sigma_b^2) within [1, 32]
    a, w = np.array([0.0, 0.0, 2.0, 2.0]), np.full(4, 0.25)
    for e, want in ((0.0, 1),             # no path noise: one round
                    (0.5, 1),             # 0.5 / 0.75
                    (0.9, 9),             # 1.62 / 0.19 = 8.5
                    (0.99, AUTO_MAX_PATHS),  # 1.96 / 0.0199 = 98.5: capped
                    (1.5, AUTO_MAX_PATHS)):  # sigma_b^2 estimated below 0
        assert _auto_rounds(w, a + e, a - e) == want, e
    # the weights weigh the components: all weight on two equal means
    w2 = np.array([0.5, 0.5, 0.0, 0.0])
    assert _auto_rounds(w2, a + 0.5, a - 0.5) == AUTO_MAX_PATHS
    assert _auto_rounds(w * 7, a + 0.9, a - 0.9) == 9  # scale-free in the weights


def test_mixture_path_entropy_auto_draws_the_rounds_its_rule_asks_for(monkeypatch):
    from skgpstruct.chain import paths as paths_module

    U, B, w = _disagreeing_mixture(True)
    for m in (1, 5):
        calls = []
        real = paths_module._backward_sample

        def counted(*args):
            calls.append(1)
            return real(*args)

        monkeypatch.setattr(paths_module, "_auto_rounds", lambda *a, m=m: m)
        monkeypatch.setattr(paths_module, "_backward_sample", counted)
        got = mixture_path_entropy(U, B, n_paths="auto", random_state=7)
        assert len(calls) == 2 + m  # two pilot rounds, then m
        monkeypatch.setattr(paths_module, "_backward_sample", real)
        # the pilot's paths are not in the estimate: it is that of the m
        # rounds after them in the stream
        rng = np.random.RandomState(7)  # what random_state=7 means
        fwd = paths_module._forward(*paths_module._batched(U, B, None, None)[:2])
        B3 = paths_module._batched(U, B, None, None)[2][0]
        for _ in range(2):
            paths_module._backward_sample(fwd, B3, rng)
        assert got == mixture_path_entropy(U, B, n_paths=m, random_state=rng)


def test_mixture_path_entropy_of_identical_components_has_no_information(chain_problem):
    kw, _ = chain_problem(6, 5, 3)
    U = np.repeat(kw["U"][None], 8, axis=0)
    h, mi = mixture_path_entropy(U, kw["B"], random_state=0)
    assert mi == pytest.approx(0.0, abs=1e-12)
    # one path per component scored exactly: the mean of -log p(y) over 8 draws
    assert 0 < h < 5 * np.log(3)
    with pytest.raises(ValueError, match="weights must be"):
        mixture_path_entropy(U, kw["B"], weights=np.zeros(8))
    for bad in (np.inf, np.nan):  # inf / inf used to give NaN weights, (-0.0, 0.0)
        with pytest.raises(ValueError, match="finite"):
            mixture_path_entropy(U, kw["B"], weights=[bad] + [1.0] * 7)
    # a clipped estimate is 0.0, never -0.0
    assert np.copysign(1.0, mixture_path_entropy(U, kw["B"], random_state=0)[1]) == 1.0
    with pytest.raises(ValueError, match="U must have shape"):
        mixture_path_entropy(kw["U"], kw["B"])


@pytest.mark.parametrize("n_paths", [1, "auto"])
def test_mixture_path_entropy_is_exact_on_a_small_path_space(n_paths):
    # 9 paths, no more than the 12 (or 36) the rounds would sample: every
    # path is scored, as enumeration, whatever the random state
    rng = np.random.default_rng(2)
    S, T, V = 12, 2, 3
    U = 1.5 * rng.standard_normal((S, T, V))
    B = rng.standard_normal((V, V))
    w = rng.dirichlet(np.ones(S))
    w[3] = 0.0  # a component left out
    w /= w.sum()
    h_true, mi_true = _mixture_by_enumeration(U, B, w)
    for r in range(3):
        got = mixture_path_entropy(U, B, w, n_paths=n_paths, random_state=r)
        assert_allclose(got, (h_true, mi_true), rtol=1e-12, atol=1e-14)
    # a forbidden transition: its paths have probability 0 everywhere
    B2 = B.copy()
    B2[0, 1] = -np.inf
    log_p = np.array([_brute_log_probs({"U": u, "B": B2}, T, V) for u in U])
    p = np.exp(log_p)
    mix = w @ p
    h = -np.sum(mix[mix > 0] * np.log(mix[mix > 0]))
    each = np.array([-np.sum(q[q > 0] * np.log(q[q > 0])) for q in p])
    assert_allclose(mixture_path_entropy(U, B2, w, n_paths=n_paths), (h, h - w @ each),
                    rtol=1e-12)
    # one more step: 27 paths, more than 12 (n_paths=1) or as many as 36
    # ("auto"): sampled at n_paths=1, exact with "auto"
    U3 = rng.standard_normal((S, 3, V))
    a, b = (mixture_path_entropy(U3, B, w, n_paths=n_paths, random_state=r) for r in (0, 1))
    assert (a == b) == (n_paths == "auto")
