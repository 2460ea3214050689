"""N-best Viterbi (:mod:`skgpstruct.chain.nbest`) against a plain-numpy
reference of the same list-Viterbi recursion and against enumeration."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct.chain import log_partition, viterbi
from skgpstruct.chain.nbest import nbest_viterbi

SHAPES = [(T, V) for T in range(1, 6) for V in range(1, 4)]


def _fold(U, start, end):
    Uf = np.array(U, dtype=float)
    if start is not None:
        Uf[0] += start
    if end is not None:
        Uf[-1] += end
    return Uf


def brute_force_nbest(U, B, n, start=None, end=None):
    """Every path of finite score, sorted by (score descending, labels read
    backwards ascending); the first ``n``."""
    Uf = _fold(U, start, end)
    T, V = Uf.shape
    rows = []
    for path in itertools.product(range(V), repeat=T):
        s = sum(Uf[t, path[t]] for t in range(T))
        s += sum(B[path[t - 1], path[t]] for t in range(1, T))
        if s > -np.inf:
            rows.append((-s, path[::-1], path))
    rows.sort()
    rows = rows[:n]
    paths = np.array([r[2] for r in rows], dtype=np.int64).reshape(len(rows), T)
    return paths, np.array([-r[0] for r in rows], dtype=float)


def nbest_viterbi_ref(U, B, n, start=None, end=None):
    """Plain-numpy list Viterbi: at each step, the candidates ``(score, label
    at t-1, rank at t-1)`` of every label sorted with ``np.lexsort`` (score
    descending, then label, then rank), the first ``n`` kept."""
    Uf = _fold(U, start, end)
    B = np.asarray(B, dtype=float)
    T, V = Uf.shape
    # per position: scores (V, n), back label / rank (V, n); -inf pads
    delta = np.full((V, n), -np.inf)
    delta[:, 0] = Uf[0]
    backs = []
    for t in range(1, T):
        cand = delta[:, :, None] + B[:, None, :]  # (i, k, j)
        new = np.full((V, n), -np.inf)
        bl = np.zeros((V, n), dtype=np.int64)
        br = np.zeros((V, n), dtype=np.int64)
        ii, kk = np.meshgrid(np.arange(V), np.arange(n), indexing="ij")
        for j in range(V):
            c = cand[:, :, j].ravel()
            order = np.lexsort((kk.ravel(), ii.ravel(), -c))[:n]
            new[j] = c[order] + Uf[t, j]
            bl[j], br[j] = ii.ravel()[order], kk.ravel()[order]
        delta = new
        backs.append((bl, br))
    jj, kk = np.meshgrid(np.arange(V), np.arange(n), indexing="ij")
    flat = delta.ravel()
    order = np.lexsort((kk.ravel(), jj.ravel(), -flat))[:n]
    order = order[flat[order] > -np.inf]
    paths = np.zeros((len(order), T), dtype=np.int64)
    for m, o in enumerate(order):
        label, rank = jj.ravel()[o], kk.ravel()[o]
        for t in range(T - 1, -1, -1):
            paths[m, t] = label
            if t > 0:
                bl, br = backs[t - 1]
                label, rank = bl[label, rank], br[label, rank]
    return paths, flat[order]


def _chain(rng, T, V, p_forbid=0.0, ties=False, start_end=False):
    def draw(shape):
        x = rng.integers(-1, 2, shape).astype(float) if ties else rng.standard_normal(shape)
        x[rng.random(shape) < p_forbid] = -np.inf
        return x

    kw = {"U": draw((T, V)), "B": draw((V, V))}
    if start_end:
        kw["start"], kw["end"] = draw(V), draw(V)
    return kw


def _check(kw, n):
    paths, scores = nbest_viterbi(n=n, **kw)
    bpaths, bscores = brute_force_nbest(n=n, **kw)
    assert_array_equal(paths, bpaths)
    assert_allclose(scores, bscores, rtol=0, atol=1e-10)
    rpaths, rscores = nbest_viterbi_ref(n=n, **kw)
    assert_array_equal(rpaths, bpaths)
    assert_allclose(rscores, bscores, rtol=0, atol=1e-10)
    return paths, scores


@pytest.mark.parametrize("T,V", SHAPES, ids=[f"T{T}-V{V}" for T, V in SHAPES])
@pytest.mark.parametrize("n", [1, 2, 5, 300])
@pytest.mark.parametrize("kind", ["random", "ties", "forbidden", "ties_forbidden"])
def test_matches_brute_force(T, V, n, kind, seed):
    rng = np.random.default_rng([seed, T, V, n])
    for start_end in (False, True):
        kw = _chain(rng, T, V, p_forbid=0.3 if "forbidden" in kind else 0.0,
                    ties="ties" in kind, start_end=start_end)
        paths, scores = _check(kw, n)
        n_finite = len(brute_force_nbest(n=V ** T, **kw)[1])
        assert len(paths) == min(n, n_finite)
        assert np.all(np.diff(scores) <= 0)


def test_all_paths_when_n_exceeds_their_number():
    U = np.array([[0.0, 1.0], [2.0, 0.0], [0.5, 0.5]])
    paths, scores = nbest_viterbi(U, np.zeros((2, 2)), 100)
    assert paths.shape == (8, 3)
    assert len({tuple(p) for p in paths}) == 8
    # the probabilities of all paths sum to 1
    assert_allclose(np.exp(scores - log_partition(U, np.zeros((2, 2)))).sum(), 1.0)


def test_all_zero_potentials_tie_order():
    # 4 paths of score 0, ordered by the labels read backwards
    paths, scores = nbest_viterbi(np.zeros((2, 2)), np.zeros((2, 2)), 4)
    assert_array_equal(paths, [[0, 0], [1, 0], [0, 1], [1, 1]])
    assert_array_equal(scores, 0.0)


def test_forbidden_everything_returns_no_path():
    B = np.array([[-np.inf, -np.inf], [-np.inf, -np.inf]])
    paths, scores = nbest_viterbi(np.zeros((3, 2)), B, 3)
    assert paths.shape == (0, 3) and scores.shape == (0,)
    # a single position needs no transition
    paths, _ = nbest_viterbi(np.zeros((1, 2)), B, 3)
    assert_array_equal(paths, [[0], [1]])


def test_forbidden_transitions_are_never_used():
    B = np.array([[0.0, -np.inf], [0.0, 0.0]])  # 0 -> 1 forbidden
    paths, _ = nbest_viterbi(np.zeros((4, 2)), B, 100)
    assert len(paths) == 5  # 1...1 then 0...0: T + 1 paths
    for p in paths:
        assert not np.any((p[:-1] == 0) & (p[1:] == 1))


@pytest.mark.parametrize("ties", [False, True])
def test_first_path_is_viterbi(ties, seed):
    rng = np.random.default_rng(seed)
    for T, V in [(1, 3), (4, 3), (7, 5), (12, 4)]:
        kw = _chain(rng, T, V, ties=ties, start_end=True)
        paths, scores = nbest_viterbi(n=3, **kw)
        vpath, vscore = viterbi(**kw)
        assert_array_equal(paths[0], vpath)
        assert_allclose(scores[0], vscore)


def test_longer_chain_against_reference(seed):
    rng = np.random.default_rng(seed)
    kw = _chain(rng, 30, 6, p_forbid=0.1, ties=True, start_end=True)
    paths, scores = nbest_viterbi(n=25, **kw)
    rpaths, rscores = nbest_viterbi_ref(n=25, **kw)
    assert_array_equal(paths, rpaths)
    assert_allclose(scores, rscores, rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "args,err,match",
    [
        ((np.zeros((2, 2)), np.zeros((2, 2)), 0), ValueError, "at least 1"),
        ((np.zeros((2, 2)), np.zeros((2, 2)), 1.5), TypeError, "must be an int"),
        ((np.zeros((2, 2)), np.zeros((2, 2)), True), TypeError, "must be an int"),
        ((np.zeros((1, 2, 2)), np.zeros((2, 2)), 2), ValueError, "one sequence"),
        ((np.zeros((2, 2)), np.zeros((3, 3)), 2), ValueError, "square"),
        ((np.full((2, 2), np.nan), np.zeros((2, 2)), 2), ValueError, "NaN"),
    ],
)
def test_refuses_bad_input(args, err, match):
    with pytest.raises(err, match=match):
        nbest_viterbi(*args)
