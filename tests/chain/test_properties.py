"""Property-based tests (hypothesis) of the linear-chain kernels.

The other test modules of ``tests/chain`` check the kernels at fixed shapes
and seeds (a grid of tiny chains against brute force, one large chain
against the numpy references, a few finite-difference checks). This module
draws the shapes instead: chains of ``T = 1`` (a single position) to 8 steps
and ``V = 1`` to 6 labels, batched over samples (shared or per-sample
transitions) or stacked as ragged sequences, with N(0, scale^2) potentials
from a seeded numpy generator and entries set to ``-inf`` at random, or in
patterns that forbid every path (a dead position, all transitions, all
start states, or two consecutive positions whose allowed labels are
disconnected). Covered:

* **Exact kernels against the numpy references** (``chain._reference``):
  forward / backward lattices, log Z, marginals (rows summing to 1, or to 0
  when every path is forbidden), Viterbi (path equal to the reference's, its
  score equal to the best score), log-likelihood and its gradient, and the
  ragged forms; on chains small enough to enumerate, against brute force,
  with the Viterbi path checked whenever the optimum is not tied.
* **Gradients against central differences** for the log-likelihood and the
  piecewise pseudo-likelihood, ``-inf`` entries included (their derivative
  is 0 on both sides).
* **Pseudo-likelihood** against its reference and its factor-by-factor
  definition, batched, with ``-inf`` entries.
* **Forbidden paths**: log Z is ``-inf`` exactly when no path is allowed,
  and then every function behaves as documented (zero marginals, ``-inf``
  log-likelihood with finite gradients, Viterbi score ``-inf``); forbidden
  states and transitions have marginal exactly 0; the log-likelihood (and
  pseudo-likelihood) of ``y`` is ``-inf`` if and only if ``y`` uses a
  ``-inf`` potential.
* **Randomized DP with every state kept** (``n_top + n_sampled >= N``): for
  any seed, proposal and forced labels, dense (with ``-inf``) or low-rank
  transitions, log Z-hat, the draws, the top-K bound, the marginals, the
  entropy, Gumbel backward sampling (a path of positive probability, with
  its exact log-probability) and the randomized training pass equal their
  exact counterparts, and the functions that need a distribution raise the
  documented ValueError exactly when the exact log Z (or, for the training
  pass, a log-likelihood) is ``-inf``.
* **Invariances**: a constant added to the unary potentials of one position
  (or to ``start`` / ``end``) shifts log Z and the Viterbi score by exactly
  that constant and changes no marginal, log-likelihood or
  pseudo-likelihood; a constant added to every transition shifts log Z by
  ``(T - 1)`` times it; reversing time (``B -> B.T``, ``start <-> end``) and
  relabelling the states permute the results accordingly.

Every test uses ``derandomize=True`` and no example database, so the
examples are the same on every run.

Two of the properties were found failing and guard the fixes: the Viterbi
path is the documented all-zeros path when every path is forbidden (it used
to follow the back-pointers), and the CPU randomized training pass
(``randomized_loss_grad_ragged``) stays exact when the potentials span more
than ~700 nats (it used to lose paths and return NaN gradients there).

Tolerances. The kernels and the references run the same dynamic programmes
in float64 with different summation orders. With potentials of scale <= 3
and ``T <= 8``, every log-space quantity has magnitude M <~ 200, and each
result goes through O(T V) roundings of relative size eps = 2.2e-16, so the
two differ by at most ~ T V M eps ~ 2e-12 (and probabilities, exp of such
differences, by as much in absolute terms). ``rtol = atol = 1e-9`` leaves
three orders of magnitude of margin while any algorithmic error (a missed
path, a transposed transition, a wrong weight) moves results by far more.
Several tests also draw scale 300 (potentials spanning thousands of nats,
where the kernels' underflow fallbacks run): there M ~ 1e4 and the bound is
~1e-10 on probabilities, and relative on log values, still within the same
tolerance. Viterbi performs the same additions and comparisons in the same
order in the kernel and in the reference, so its paths must be identical.
"""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from skgpstruct import chain
from skgpstruct.chain import _reference as ref
from skgpstruct.chain.randomized import (
    PROPOSALS,
    LowRankTransitions,
    randomized_entropy,
    randomized_gumbel_sample,
    randomized_log_partition,
    randomized_log_partition_draws,
    randomized_loss_grad_ragged,
    randomized_marginals,
    topk_log_partition,
)

NEG_INF = -np.inf
# DP against DP (module docstring).
TOL = {"rtol": 1e-9, "atol": 1e-9}
# Randomized DP with every state kept against the exact log Z: 1e-10, and
# relative 1e-12 for |log Z| ~ 1e4 at scale 300 (both sides' relative
# rounding error is ~ T K eps ~ 1e-14).
EXACT_TOL = {"rtol": 1e-12, "atol": 1e-10}
# Central differences with step h. The error is the truncation h^2/6 |f'''|
# plus the rounding delta/h of one evaluation. f''' wrt one potential is a
# third cumulant of a count in [0, T - 1] (at most 7 here; <= 2(T - 1)
# softmax indicators for the pseudo-likelihood), bounded by 0.1 * 7^3 ~ 35,
# so the truncation is <= 6e-8 at h = 1e-4; delta <~ 10 T V M eps ~ 1e-11
# (M ~ 100 at scale <= 2), so the rounding is <= 1e-7. atol = 1e-6 is ~6x
# that worst case; a gradient off by a marginal of 1e-6 or more fails.
FD = {"h": 1e-4, "rtol": 0, "atol": 1e-6}


def _settings(max_examples, *extra_checks):
    """Deterministic hypothesis settings: fixed examples, no database."""
    return settings(max_examples=max_examples, deadline=None, derandomize=True,
                    database=None, suppress_health_check=list(extra_checks))


# ---------------------------------------------------------------- strategies
KILLS = [None, None, None, None, "row", "transitions", "start", "disconnect"]


def _forbid(rng, kw, T, V, p, kill):
    """Set entries of ``kw`` to -inf with probability ``p``, then apply the
    pattern ``kill`` that forbids every path (where it applies)."""
    for a in kw.values():
        a[rng.random(a.shape) < p] = NEG_INF
    if kill == "row":  # no label allowed at one position
        kw["U"][..., rng.integers(T), :] = NEG_INF
    elif kill == "transitions" and T > 1:
        kw["B"][...] = NEG_INF
    elif kill == "start" and "start" in kw:
        kw["start"][...] = NEG_INF
    elif kill == "disconnect" and T > 1:
        # labels allowed at t (a) and t + 1 (b), every transition a -> b forbidden
        t = rng.integers(T - 1)
        a, b = rng.random(V) < 0.5, rng.random(V) < 0.5
        a[rng.integers(V)] = b[rng.integers(V)] = True
        kw["U"][..., t, ~a] = NEG_INF
        kw["U"][..., t + 1, ~b] = NEG_INF
        kw["B"][..., a[:, None] & b[None, :]] = NEG_INF


@st.composite
def chain_problems(draw, *, min_T=1, max_T=8, min_V=1, max_V=6, batched=False,
                   max_paths=None, forbid=True, kills=KILLS, scales=(0.5, 1.0, 3.0)):
    """A chain ``kw = {U, B[, start, end]}`` and labels ``y`` (namespace).

    With ``max_paths``, ``V ** T <= max_paths`` (chains to enumerate). With
    ``batched``, ``S`` is None (2-D ``U``) or a sample count, and ``B``,
    ``start``, ``end`` are shared or per sample. With ``forbid``, entries
    are -inf with a drawn probability and one of ``kills`` is applied. ``y``
    is random or the Viterbi path of (the first sample of) the chain.
    """
    T = draw(st.integers(min_T, max_T))
    V_cap = max_V if max_paths is None else max(
        v for v in range(1, max_V + 1) if v ** T <= max_paths)
    V = draw(st.integers(min_V, V_cap))
    S = draw(st.sampled_from([None, 1, 3])) if batched else None
    per_sample_B = S is not None and draw(st.booleans())
    per_sample_se = S is not None and draw(st.booleans())
    start_end = draw(st.booleans())
    scale = draw(st.sampled_from(scales))
    seed = draw(st.integers(0, 2**32 - 1))
    p = draw(st.sampled_from([0.0, 0.1, 0.3, 0.6])) if forbid else 0.0
    kill = draw(st.sampled_from(kills)) if forbid else None
    rng = np.random.default_rng(seed)
    lead = () if S is None else (S,)
    lead_b = lead if per_sample_B else ()
    lead_se = lead if per_sample_se else ()
    kw = {"U": scale * rng.standard_normal(lead + (T, V)),
          "B": scale * rng.standard_normal(lead_b + (V, V))}
    if start_end:
        kw["start"] = scale * rng.standard_normal(lead_se + (V,))
        kw["end"] = scale * rng.standard_normal(lead_se + (V,))
    _forbid(rng, kw, T, V, p, kill)
    y = rng.integers(0, V, T)
    if draw(st.booleans()):
        path = ref.viterbi_ref(**kw)[0]
        y = path if S is None else path[0]
    return SimpleNamespace(kw=kw, y=np.asarray(y, dtype=np.int64), T=T, V=V, S=S)


# ---------------------------------------------------------------- helpers
def _samples(kw, S):
    """The unbatched potentials of each sample (one item when ``S`` is None)."""
    if S is None:
        return [kw]
    out = []
    for s in range(S):
        out.append({k: (v[s] if v.ndim == (3 if k in ("U", "B") else 2) else v)
                    for k, v in kw.items()})
    return out


def _folded(kw):
    """Unary potentials of one chain with start / end added (as the kernels)."""
    Uf = np.array(kw["U"], dtype=float)
    if "start" in kw:
        Uf[0] += kw["start"]
    if "end" in kw:
        Uf[-1] += kw["end"]
    return Uf


def _path_score(kw, y):
    """Unnormalised score of the path ``y`` of one chain."""
    Uf = _folded(kw)
    return float(Uf[np.arange(len(y)), y].sum() + kw["B"][y[:-1], y[1:]].sum())


def _all_scores(kw):
    """Every path of one chain (n_paths, T) and its score, by enumeration."""
    T, V = kw["U"].shape
    paths = np.array(list(itertools.product(range(V), repeat=T)), dtype=np.int64)
    scores = _folded(kw)[np.arange(T), paths].sum(axis=1)
    return paths, scores + kw["B"][paths[:, :-1], paths[:, 1:]].sum(axis=1)


def _onehot_and_counts(y, V):
    T = len(y)
    onehot = np.zeros((T, V))
    onehot[np.arange(T), y] = 1.0
    counts = np.zeros((V, V))
    np.add.at(counts, (y[:-1], y[1:]), 1.0)
    return onehot, counts


def _assert_marginals_normalised(unary, pairwise, log_z):
    """Rows of the unary marginals sum to 1 (0 when log Z = -inf) and the
    summed pairwise marginals to T - 1 (0); batched or not."""
    alive = np.isfinite(np.atleast_1d(log_z)).astype(float)
    u = unary.reshape((-1,) + unary.shape[-2:])
    pw = pairwise.reshape((-1,) + pairwise.shape[-2:])
    T = u.shape[1]
    assert_allclose(u.sum(axis=2), np.repeat(alive[:, None], T, axis=1), **TOL)
    assert_allclose(pw.sum(axis=(1, 2)), alive * (T - 1), **TOL)
    assert np.all(u >= 0) and np.all(pw >= 0)


# ---------------------------------------------------------------- exact kernels
@_settings(200)
@given(prob=chain_problems(batched=True, scales=(0.5, 1.0, 3.0, 300.0)))
def test_exact_kernels_match_numpy_reference(prob):
    """Every exact kernel equals its numpy reference, batched or not, with
    -inf entries; the marginals are normalised and the Viterbi path is the
    reference's and scores its own score."""
    kw, y = prob.kw, prob.y
    assert_allclose(chain.forward_log(**kw), ref.forward_log_ref(**kw), **TOL)
    assert_allclose(chain.backward_log(**kw), ref.backward_log_ref(**kw), **TOL)
    log_z = chain.log_partition(**kw)
    assert_allclose(log_z, ref.log_partition_ref(**kw), **TOL)
    unary, pairwise = chain.marginals(**kw)
    want_u, want_pw = ref.marginals_ref(**kw)
    assert_allclose(unary, want_u, **TOL)
    assert_allclose(pairwise, want_pw, **TOL)
    _assert_marginals_normalised(unary, pairwise, log_z)

    ll = chain.log_likelihood(y=y, **kw)
    assert_allclose(ll, ref.log_likelihood_ref(y=y, **kw), **TOL)
    value, gU, gB = chain.log_likelihood_grad(y=y, **kw)
    r_value, r_gU, r_gB = ref.log_likelihood_grad_ref(y=y, **kw)
    assert_array_equal(value, ll)  # the same arithmetic in both kernels
    assert_allclose(value, r_value, **TOL)
    assert_allclose(gU, r_gU, **TOL)
    assert_allclose(gB, r_gB, **TOL)
    for arr in (unary, pairwise, gU, gB):
        assert not np.isnan(arr).any()

    path, score = chain.viterbi(**kw)
    r_path, r_score = ref.viterbi_ref(**kw)
    assert_array_equal(path, r_path)
    assert_allclose(score, r_score, **TOL)
    for s, kws in enumerate(_samples(kw, prob.S)):
        p = path if prob.S is None else path[s]
        sc = score if prob.S is None else score[s]
        if np.isfinite(sc):
            assert_allclose(_path_score(kws, p), sc, **TOL)
        # (a score of -inf: see test_viterbi_path_is_zeros_when_every_path_is_forbidden)


@_settings(100)
@given(prob=chain_problems(max_paths=1024, scales=(0.5, 1.0, 3.0, 300.0)))
def test_exact_kernels_match_brute_force(prob):
    """Chains with at most 1024 paths: log Z, marginals, the log-likelihood
    and the best score equal enumeration; the Viterbi path is the unique
    maximiser whenever no other path scores within the tolerance of it."""
    kw, y = prob.kw, prob.y
    paths, scores = _all_scores(kw)
    assert_allclose(chain.log_partition(**kw), ref.brute_force_log_partition(**kw), **TOL)
    unary, pairwise = chain.marginals(**kw)
    bu, bp = ref.brute_force_marginals(**kw)
    assert_allclose(unary, bu, **TOL)
    assert_allclose(pairwise, bp, **TOL)
    assert_allclose(chain.log_likelihood(y=y, **kw),
                    ref.brute_force_log_likelihood(y=y, **kw), **TOL)
    path, score = chain.viterbi(**kw)
    best = scores.max()
    assert_allclose(score, best, **TOL)
    if np.isfinite(best):
        near = np.abs(scores - best) <= TOL["atol"] + TOL["rtol"] * abs(best)
        if near.sum() == 1:  # no tie: the argmax is unique
            assert_array_equal(path, paths[np.argmax(scores)])


_GRADIENTS = {
    "crf": (chain.log_likelihood, chain.log_likelihood_grad),
    "pseudo": (chain.pseudo_log_likelihood, chain.pseudo_log_likelihood_grad),
}


@pytest.mark.parametrize("objective", list(_GRADIENTS))
@_settings(60, HealthCheck.function_scoped_fixture)
@given(prob=chain_problems(max_T=6, max_V=4, kills=[None], scales=(0.5, 1.0, 2.0)))
def test_likelihood_grads_match_finite_differences(objective, prob,
                                                   assert_potentials_grad_fd):
    """d log p(y) / d (U, B, start, end) by central differences (step and
    tolerance: see FD), for the CRF log-likelihood and the piecewise
    pseudo-likelihood, at chains with -inf entries whose labelled path is
    allowed. The fixture returns a stateless function, so sharing it across
    hypothesis examples is safe."""
    value_fn, grad_fn = _GRADIENTS[objective]
    kw, y = prob.kw, prob.y
    if _path_score(kw, y) == NEG_INF:
        y = ref.viterbi_ref(**kw)[0]
    assume(np.isfinite(_path_score(kw, y)))  # else log Z = -inf: nothing to differentiate
    value, gU, gB = grad_fn(y=y, **kw)
    grads = {"U": gU, "B": gB}
    if "start" in kw:
        grads.update(start=gU[0], end=gU[-1])
    assert_potentials_grad_fd(lambda **k: value_fn(y=y, **k), kw, grads, **FD)


@_settings(100)
@given(lengths=st.lists(st.integers(1, 8), min_size=1, max_size=4),
       V=st.integers(1, 6), per_sequence_B=st.booleans(), start_end=st.booleans(),
       p=st.sampled_from([0.0, 0.1, 0.3]), seed=st.integers(0, 2**32 - 1))
def test_ragged_kernels_match_reference(lengths, V, per_sequence_B, start_end, p, seed):
    """log_likelihood_grad_ragged, viterbi_ragged and marginals_ragged equal
    the references run sequence by sequence (grad_B summed over the
    sequences for a shared B), -inf entries included."""
    rng = np.random.default_rng(seed)
    n, N = len(lengths), sum(lengths)
    kw = {"U": rng.standard_normal((N, V)),
          "B": rng.standard_normal((n, V, V) if per_sequence_B else (V, V))}
    if start_end:
        kw["start"], kw["end"] = rng.standard_normal(V), rng.standard_normal(V)
    _forbid(rng, kw, N, V, p, None)
    y = rng.integers(0, V, N)
    values, gU, gB = chain.log_likelihood_grad_ragged(y=y, lengths=lengths, **kw)
    paths, scores = chain.viterbi_ragged(lengths=lengths, **kw)
    unary, pairwise = chain.marginals_ragged(lengths=lengths, **kw)
    assert gB.shape == kw["B"].shape and pairwise.shape == (n, V, V)
    offsets = np.r_[0, np.cumsum(lengths)]
    gB_sum = np.zeros((V, V))
    for k, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        kws = {**kw, "U": kw["U"][a:b], "B": kw["B"][k] if per_sequence_B else kw["B"]}
        r_value, r_gU, r_gB = ref.log_likelihood_grad_ref(y=y[a:b], **kws)
        assert_allclose(values[k], r_value, **TOL)
        assert_allclose(gU[a:b], r_gU, **TOL)
        if per_sequence_B:
            assert_allclose(gB[k], r_gB, **TOL)
        gB_sum += r_gB
        r_path, r_score = ref.viterbi_ref(**kws)
        assert_array_equal(paths[a:b], r_path)
        assert_allclose(scores[k], r_score, **TOL)
        r_u, r_pw = ref.marginals_ref(**kws)
        assert_allclose(unary[a:b], r_u, **TOL)
        assert_allclose(pairwise[k], r_pw, **TOL)
    if not per_sequence_B:
        assert_allclose(gB, gB_sum, **TOL)


# ---------------------------------------------------------------- pseudo-likelihood
@_settings(150)
@given(prob=chain_problems(batched=True, scales=(0.5, 1.0, 3.0, 300.0)))
def test_pseudo_likelihood_matches_reference(prob):
    """Value and gradients equal the numpy reference (and, unbatched, the
    factor-by-factor definition); the value is -inf exactly when the
    labelled path uses a -inf potential, and the gradients stay finite."""
    kw, y = prob.kw, prob.y
    value = chain.pseudo_log_likelihood(y=y, **kw)
    g_value, gU, gB = chain.pseudo_log_likelihood_grad(y=y, **kw)
    r_value, r_gU, r_gB = ref.pseudo_log_likelihood_grad_ref(y=y, **kw)
    assert_allclose(value, ref.pseudo_log_likelihood_ref(y=y, **kw), **TOL)
    assert_allclose(g_value, value, **TOL)
    assert_allclose(g_value, r_value, **TOL)
    assert_allclose(gU, r_gU, **TOL)
    assert_allclose(gB, r_gB, **TOL)
    assert np.all(np.isfinite(gU)) and np.all(np.isfinite(gB))
    if prob.S is None:
        assert_allclose(value, ref.pseudo_log_likelihood_by_definition(y=y, **kw), **TOL)
    forbidden = [_path_score(kws, y) == NEG_INF for kws in _samples(kw, prob.S)]
    assert_array_equal(np.atleast_1d(value) == NEG_INF, forbidden)


# ---------------------------------------------------------------- -inf potentials
@_settings(200)
@given(prob=chain_problems(max_paths=4096, batched=True, scales=(0.5, 1.0, 3.0, 300.0)))
def test_forbidden_paths(prob):
    """log Z = -inf exactly when every path has a -inf potential, and then
    the documented values (zero marginals, -inf log-likelihood with the
    finite gradient onehot(y) / pair counts, a Viterbi score of -inf);
    forbidden states and transitions have marginal exactly 0; the
    log-likelihood of y is -inf exactly when y itself is forbidden."""
    kw, y = prob.kw, prob.y
    log_z = np.atleast_1d(chain.log_partition(**kw))
    unary, pairwise = chain.marginals(**kw)
    ll = np.atleast_1d(chain.log_likelihood(y=y, **kw))
    value, gU, gB = chain.log_likelihood_grad(y=y, **kw)
    paths, scores = chain.viterbi(**kw)
    fwd = chain.forward_log(**kw)
    if prob.S is None:  # a sample axis of length 1
        unary, pairwise, gU, gB, paths, fwd = (
            a[None] for a in (unary, pairwise, gU, gB, paths, fwd))
        scores = np.atleast_1d(scores)
    onehot, counts = _onehot_and_counts(y, prob.V)
    for s, kws in enumerate(_samples(kw, prob.S)):
        all_scores = _all_scores(kws)[1]
        dead = bool(np.all(all_scores == NEG_INF))
        assert (log_z[s] == NEG_INF) == dead
        assert (ref.log_partition_ref(**kws) == NEG_INF) == dead
        Uf, B = _folded(kws), kws["B"]
        # forbidden states / transitions carry no probability at all
        assert np.all(unary[s][Uf == NEG_INF] == 0.0)
        assert np.all(pairwise[s][B == NEG_INF] == 0.0)
        y_forbidden = _path_score(kws, y) == NEG_INF
        event("every path forbidden" if dead else
              "y forbidden, log Z finite" if y_forbidden else "y allowed")
        assert (ll[s] == NEG_INF) == y_forbidden
        assert np.atleast_1d(value)[s] == ll[s]
        assert np.isfinite(ll[s]) or ll[s] == NEG_INF
        assert not np.isnan(gU[s]).any() and not np.isnan(gB[s]).any()
        if dead:
            assert np.all(unary[s] == 0.0) and np.all(pairwise[s] == 0.0)
            assert_array_equal(gU[s], onehot)
            assert_array_equal(gB[s], counts)
            assert scores[s] == NEG_INF
            assert np.all(fwd[s][-1] == NEG_INF)
        else:
            assert np.isfinite(scores[s])
            assert np.isfinite(_path_score(kws, paths[s]))
    # y moved onto a forbidden state of the first sample (when it has one):
    # its log-likelihood is -inf wherever that path is forbidden
    t_bad, j_bad = np.nonzero(_folded(_samples(kw, prob.S)[0]) == NEG_INF)
    if t_bad.size:
        y_bad = y.copy()
        y_bad[t_bad[0]] = j_bad[0]
        ll_bad = np.atleast_1d(chain.log_likelihood(y=y_bad, **kw))
        assert ll_bad[0] == NEG_INF
        for s, kws in enumerate(_samples(kw, prob.S)):
            assert (ll_bad[s] == NEG_INF) == (_path_score(kws, y_bad) == NEG_INF)


@_settings(20)
@given(prob=chain_problems(min_T=2, max_T=6, min_V=2, max_V=4, forbid=False))
def test_viterbi_path_is_zeros_when_every_path_is_forbidden(prob):
    """skgpstruct.chain.viterbi documents "-inf if every path is forbidden
    (the path is then all zeros)". The last position is made dead, so no
    path is allowed, and label 0 is forbidden at the position before, so
    following the back-pointers would give a nonzero label there."""
    kw = {k: v.copy() for k, v in prob.kw.items()}
    kw["U"][-1] = NEG_INF
    kw["U"][-2, 0] = NEG_INF
    path, score = chain.viterbi(**kw)
    assert score == NEG_INF
    assert_array_equal(path, 0)
    lengths = [prob.T]
    paths, scores = chain.viterbi_ragged(lengths=lengths, **kw)
    assert_array_equal(paths, 0)


# ---------------------------------------------------------------- randomized DP
@st.composite
def full_randomized_problems(draw, *, min_N=1, scales=(1.0, 300.0), forbid=True):
    """A randomized-DP problem whose sub-lattice keeps every state:
    ``n_top + n_sampled >= N`` (with ``n_top`` of 0 allowed); N(0, scale^2)
    potentials (with ``forbid``, entries at -inf as in ``chain_problems``),
    dense transitions or low-rank ones (``B = left @ right.T`` of the same
    scale, never -inf); optional forced labels; any proposal, or a random
    proposal array."""
    T = draw(st.integers(1, 8))
    N = draw(st.integers(min_N, 6))
    n_top = draw(st.integers(0, N + 1))
    n_sampled = draw(st.integers(max(N - n_top, 0, 1 - n_top), N + 2))
    lowrank = draw(st.booleans())
    scale = draw(st.sampled_from(scales))
    seed = draw(st.integers(0, 2**32 - 1))
    proposal = draw(st.sampled_from(PROPOSALS + ("array",)))
    use_force = draw(st.booleans())
    p = draw(st.sampled_from([0.0, 0.1, 0.3, 0.6])) if forbid else 0.0
    kill = draw(st.sampled_from(KILLS)) if forbid else None
    rng = np.random.default_rng(seed)
    kw = {"U": scale * rng.standard_normal((T, N)), "B": scale * rng.standard_normal((N, N))}
    _forbid(rng, kw, T, N, p, None if kill == "start" else kill)
    U = kw["U"]
    if lowrank:  # only U can be -inf
        r = draw(st.integers(1, 3))
        B = LowRankTransitions(*(np.sqrt(scale / r) * rng.standard_normal((2, N, r))))
        Bfull = B.full()
    else:
        B = Bfull = kw["B"]
    if proposal == "array":
        proposal = rng.random((T, N)) + 0.01
    force = rng.integers(0, N, T) if use_force else None
    return SimpleNamespace(U=U, B=B, Bfull=Bfull, n_top=n_top, n_sampled=n_sampled,
                           proposal=proposal, force=force, seed=seed, lowrank=lowrank,
                           T=T, N=N, scale=scale)


def _rdp_args(prob):
    return dict(proposal=prob.proposal, force=prob.force, random_state=prob.seed)


def _exact_entropy(U, B, log_z, unary, pairwise):
    """H = log Z - E[score(y)] from the exact marginals (terms with a -inf
    potential have zero marginal and are left out), and its rounding error.

    The marginals are exp of log-lattice differences of magnitude <= M =
    1 + |log Z| + E|score|, so they carry a relative error of about T eps M;
    multiplied by potentials summing to E|score| = sum |marginal *
    potential|, this gives an absolute error of ~ T eps M E|score| (~1e-11 at
    unit scale, ~1e-6 at scale 300, where H is a small difference of numbers
    of size 1e3 to 1e4).
    """
    fu, fb = np.isfinite(U), np.isfinite(B)
    terms = np.concatenate([unary[fu] * U[fu], pairwise[fb] * B[fb]])
    e_abs = np.abs(terms).sum()
    err = 16 * U.shape[0] * np.finfo(float).eps * (1 + abs(log_z) + e_abs) * e_abs
    return log_z - terms.sum(), err


@_settings(150)
@given(prob=full_randomized_problems())
def test_randomized_log_partition_exact_when_every_state_kept(prob):
    """With n_top + n_sampled >= N, for any seed / proposal / forcing, the
    sub-lattice holds each state once with weight 1 and log Z-hat (one
    estimate, many draws, or the top-N bound) is the exact log Z."""
    log_z = ref.log_partition_ref(prob.U, prob.Bfull)
    res = randomized_log_partition(prob.U, prob.B, prob.n_top, prob.n_sampled,
                                   **_rdp_args(prob))
    assert_allclose(res.log_partition, log_z, **EXACT_TOL)
    sets = res.index_sets
    assert_array_equal(np.sort(sets.index, axis=1), np.tile(np.arange(prob.N), (prob.T, 1)))
    assert_array_equal(sets.log_weight, 0.0)
    if prob.force is not None:
        assert_array_equal(sets.index[:, 0], prob.force)
    draws = randomized_log_partition_draws(prob.U, prob.B, prob.n_top, prob.n_sampled, 3,
                                           **_rdp_args(prob))
    assert_allclose(draws, np.full(3, log_z), **EXACT_TOL)
    top = topk_log_partition(prob.U, prob.B, prob.N + prob.n_top,
                             proposal=prob.proposal, force=prob.force)
    assert_allclose(top, log_z, **EXACT_TOL)


@_settings(150)
@given(prob=full_randomized_problems(), temperature=st.floats(0.1, 10.0))
def test_randomized_estimators_exact_when_every_state_kept(prob, temperature):
    """With every state kept: the randomized marginals (gradient of log
    Z-hat) are the exact marginals, the randomized entropy is the exact
    entropy, and a Gumbel backward sample is a path of positive probability
    whose log_prob is its exact log-probability; when the exact log Z is
    -inf, each of them raises the documented ValueError instead."""
    U, Bfull = prob.U, prob.Bfull
    log_z = ref.log_partition_ref(U, Bfull)
    funcs = (randomized_marginals, randomized_entropy, randomized_gumbel_sample)
    event(f"log Z {'-inf' if log_z == NEG_INF else 'finite'}")
    if log_z == NEG_INF:
        assert randomized_log_partition(U, prob.B, prob.n_top, prob.n_sampled,
                                        **_rdp_args(prob)).log_partition == NEG_INF
        for func in funcs:
            with pytest.raises(ValueError, match="-inf"):
                func(U, prob.B, prob.n_top, prob.n_sampled, **_rdp_args(prob))
        return
    unary, pairwise = ref.marginals_ref(U, Bfull)
    m = randomized_marginals(U, prob.B, prob.n_top, prob.n_sampled, **_rdp_args(prob),
                             return_slot_pairwise=True)
    assert_allclose(m.log_partition, log_z, **EXACT_TOL)
    assert_allclose(m.unary, unary, **TOL)
    if prob.lowrank:
        assert_allclose(m.grad_left, pairwise @ prob.B.right, **TOL)
        assert_allclose(m.grad_right, pairwise.T @ prob.B.left, **TOL)
    else:
        assert_allclose(m.pairwise, pairwise, **TOL)
    assert_allclose(m.slot_marginals.sum(axis=1), 1.0, **TOL)
    assert_allclose(m.slot_pairwise.sum(axis=(1, 2)), 1.0, **TOL)

    h = randomized_entropy(U, prob.B, prob.n_top, prob.n_sampled, **_rdp_args(prob))
    h_exact, h_err = _exact_entropy(U, Bfull, log_z, unary, pairwise)
    assert_allclose(h, h_exact, rtol=TOL["rtol"], atol=TOL["atol"] + h_err)
    assert h >= -TOL["atol"] - h_err

    g = randomized_gumbel_sample(U, prob.B, prob.n_top, prob.n_sampled,
                                 temperature=temperature, **_rdp_args(prob))
    assert_array_equal(g.sample, g.index_sets.index[np.arange(prob.T), g.slots])
    score = _path_score({"U": U, "B": Bfull}, g.sample)
    assert np.isfinite(score)  # a path of positive probability
    assert_allclose(g.log_prob, score - log_z, **TOL)
    assert_allclose(g.relaxed.sum(axis=1), 1.0, **TOL)
    assert np.all(g.relaxed >= 0)


def _check_training_pass(lengths, prob, seeds, p_forbid):
    """randomized_loss_grad_ragged on stacked sequences (N(0, prob.scale^2)
    unaries, each -inf with probability ``p_forbid``, random gold labels,
    ``prob``'s transitions and sizes) against the exact negative
    log-likelihood and its gradient."""
    rng = np.random.default_rng(prob.seed)
    n, N, V = len(lengths), sum(lengths), prob.N
    U = np.where(rng.random((N, V)) < p_forbid, NEG_INF,
                 prob.scale * rng.standard_normal((N, V)))
    y = rng.integers(0, V, N)
    seeds = seeds[:n]
    proposal = prob.proposal if isinstance(prob.proposal, str) else "local"
    offsets = np.r_[0, np.cumsum(lengths)]
    ll = np.array([ref.log_likelihood_ref(U[a:b], prob.Bfull, y[a:b])
                   for a, b in zip(offsets[:-1], offsets[1:])])
    args = (U, lengths, y, prob.B, prob.n_top, prob.n_sampled)
    event(f"exact log-likelihood {'finite' if np.all(np.isfinite(ll)) else '-inf'}")
    if not np.all(np.isfinite(ll)):
        with pytest.raises(ValueError, match="randomized loss is undefined"):
            randomized_loss_grad_ragged(*args, proposal=proposal, seeds=seeds)
        return
    losses, gU, g_trans = randomized_loss_grad_ragged(*args, proposal=proposal, seeds=seeds)
    r_gU = np.zeros((N, V))
    r_gB = np.zeros((V, V))
    for a, b in zip(offsets[:-1], offsets[1:]):
        _, gu, gb = ref.log_likelihood_grad_ref(U[a:b], prob.Bfull, y[a:b])
        r_gU[a:b], r_gB = gu, r_gB + gb
    assert_allclose(losses, -ll, **TOL)
    assert_allclose(gU, -r_gU, **TOL)
    if prob.lowrank:
        assert_allclose(g_trans.left, -r_gB @ prob.B.right, **TOL)
        assert_allclose(g_trans.right, -r_gB.T @ prob.B.left, **TOL)
    else:
        assert_allclose(g_trans, -r_gB, **TOL)


SEEDS = st.lists(st.integers(0, 2**31 - 1), min_size=3, max_size=3)


@_settings(100)
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       prob=full_randomized_problems(scales=(1.0,)), seeds=SEEDS)
def test_randomized_training_pass_exact_when_every_state_kept(lengths, prob, seeds):
    """randomized_loss_grad_ragged with every state kept is the exact
    negative log-likelihood and its gradient; it raises ValueError exactly
    when some sequence's exact log-likelihood is -inf (no allowed path, or
    a forbidden gold path)."""
    _check_training_pass(lengths, prob, seeds, p_forbid=0.1)


@_settings(60)
@given(lengths=st.lists(st.integers(3, 8), min_size=1, max_size=3),
       prob=full_randomized_problems(min_N=2, scales=(300.0,), forbid=False), seeds=SEEDS)
def test_randomized_training_pass_exact_with_large_potentials(lengths, prob, seeds):
    """As test_randomized_training_pass_exact_when_every_state_kept with
    N(0, 300^2) potentials, the regime where the pass's scaled linear-space
    sums must fall back to log space (the exact kernels and
    randomized_marginals agree with the references there: see the tests
    above, which draw the same scale). No -inf entries, so that every
    example has a finite loss to compare."""
    _check_training_pass(lengths, prob, seeds, p_forbid=0.0)


# ---------------------------------------------------------------- invariances
@_settings(150)
@given(prob=chain_problems(batched=True), where=st.sampled_from(["U", "start", "end"]),
       c=st.floats(-20.0, 20.0, allow_nan=False, allow_infinity=False), data=st.data())
def test_unary_shift_at_one_position(prob, where, c, data):
    """Adding c to every unary potential of one position t (or to start,
    the unaries of t = 0, or end, of t = T - 1) adds c to log Z and to the
    Viterbi score, and changes no marginal, log-likelihood or
    pseudo-likelihood."""
    kw, y = prob.kw, prob.y
    shifted = {k: v.copy() for k, v in kw.items()}
    if where == "U" or where not in kw:
        t = data.draw(st.integers(0, prob.T - 1), label="t")
        shifted["U"][..., t, :] += c
    else:
        shifted[where] += c
    log_z, log_z2 = chain.log_partition(**kw), chain.log_partition(**shifted)
    assert_allclose(log_z2, log_z + c, **TOL)
    for a, b in zip(chain.marginals(**kw), chain.marginals(**shifted)):
        assert_allclose(b, a, **TOL)
    assert_allclose(chain.log_likelihood(y=y, **shifted), chain.log_likelihood(y=y, **kw), **TOL)
    assert_allclose(chain.pseudo_log_likelihood(y=y, **shifted),
                    chain.pseudo_log_likelihood(y=y, **kw), **TOL)
    path, score = chain.viterbi(**kw)
    path2, score2 = chain.viterbi(**shifted)
    assert_allclose(score2, score + c, **TOL)
    # path2 is optimal for the original chain too (robust to exact ties)
    for s, kws in enumerate(_samples(kw, prob.S)):
        p2 = path2 if prob.S is None else path2[s]
        sc = score if prob.S is None else score[s]
        assert_allclose(_path_score(kws, p2), sc, **TOL)


@_settings(80)
@given(prob=chain_problems(), c=st.floats(-20.0, 20.0, allow_nan=False,
                                          allow_infinity=False))
def test_transition_shift(prob, c):
    """Adding c to every transition adds (T - 1) c to log Z and changes no
    marginal or log-likelihood."""
    kw, y = prob.kw, prob.y
    shifted = {**kw, "B": kw["B"] + c}
    assert_allclose(chain.log_partition(**shifted),
                    chain.log_partition(**kw) + (prob.T - 1) * c, **TOL)
    for a, b in zip(chain.marginals(**kw), chain.marginals(**shifted)):
        assert_allclose(b, a, **TOL)
    assert_allclose(chain.log_likelihood(y=y, **shifted), chain.log_likelihood(y=y, **kw), **TOL)


@_settings(100)
@given(prob=chain_problems(), seed=st.integers(0, 2**32 - 1))
def test_time_reversal_and_relabelling(prob, seed):
    """Reversing time (U[::-1], B.T, start <-> end) or permuting the labels
    leaves log Z, the log-likelihood of the correspondingly transformed y,
    the pseudo-likelihood and the best score unchanged and transforms the
    marginals accordingly: a kernel that mixes up B's orientation or a label
    index fails here even when it is self-consistent."""
    kw, y = prob.kw, prob.y
    log_z = chain.log_partition(**kw)
    unary, pairwise = chain.marginals(**kw)
    ll = chain.log_likelihood(y=y, **kw)
    pl = chain.pseudo_log_likelihood(y=y, **kw)
    score = chain.viterbi(**kw)[1]

    rev = {"U": kw["U"][::-1], "B": kw["B"].T}
    if "start" in kw:
        rev.update(start=kw["end"], end=kw["start"])
    assert_allclose(chain.log_partition(**rev), log_z, **TOL)
    r_unary, r_pairwise = chain.marginals(**rev)
    assert_allclose(r_unary, unary[::-1], **TOL)
    assert_allclose(r_pairwise, pairwise.T, **TOL)
    assert_allclose(chain.log_likelihood(y=y[::-1], **rev), ll, **TOL)
    assert_allclose(chain.pseudo_log_likelihood(y=y[::-1], **rev), pl, **TOL)
    assert_allclose(chain.viterbi(**rev)[1], score, **TOL)

    perm = np.random.default_rng(seed).permutation(prob.V)  # new label k = old perm[k]
    inv = np.argsort(perm)
    rel = {k: (v[perm][:, perm] if k == "B" else v[..., perm]) for k, v in kw.items()}
    assert_allclose(chain.log_partition(**rel), log_z, **TOL)
    p_unary, p_pairwise = chain.marginals(**rel)
    assert_allclose(p_unary, unary[:, perm], **TOL)
    assert_allclose(p_pairwise, pairwise[perm][:, perm], **TOL)
    assert_allclose(chain.log_likelihood(y=inv[y], **rel), ll, **TOL)
    assert_allclose(chain.pseudo_log_likelihood(y=inv[y], **rel), pl, **TOL)
    assert_allclose(chain.viterbi(**rel)[1], score, **TOL)
