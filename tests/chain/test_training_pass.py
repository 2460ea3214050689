"""The public randomized training pass, randomized_loss_grad_ragged, against
per-sequence randomized_marginals (the plain-numpy side being that
function's forward-backward, itself tested in test_randomized.py)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skgpstruct import chain
from skgpstruct.chain.randomized import (
    PROPOSALS,
    LowRankTransitions,
    _pass,
    randomized_loss_grad_ragged,
    randomized_marginals,
)


def _problem(rng, lengths, N, lowrank):
    U = rng.normal(size=(sum(lengths), N))
    y = rng.integers(0, N, sum(lengths))
    if lowrank:
        return U, y, LowRankTransitions(rng.normal(size=(N, 2)), rng.normal(size=(N, 2)))
    return U, y, rng.normal(size=(N, N))


def _per_sequence(U, lengths, y, transitions, n_top, n_sampled, proposal, seeds):
    """Losses and gradients from randomized_marginals(force=y_n) per sequence."""
    lowrank = isinstance(transitions, tuple)
    B = transitions.full() if lowrank else transitions
    losses, gU = [], np.zeros_like(U)
    g_trans = [np.zeros_like(a) for a in (transitions if lowrank else (transitions,))]
    offsets = np.r_[0, np.cumsum(lengths)]
    for n, (s, e) in enumerate(zip(offsets[:-1], offsets[1:])):
        yn = y[s:e]
        res = randomized_marginals(U[s:e], transitions, n_top, n_sampled, proposal=proposal,
                                   random_state=int(seeds[n]), force=yn)
        losses.append(res.log_partition - U[s:e][np.arange(e - s), yn].sum()
                      - B[yn[:-1], yn[1:]].sum())
        gU[s:e] += res.unary
        gU[s + np.arange(e - s), yn] -= 1.0
        if lowrank:
            left, right = transitions
            g_trans[0] += res.grad_left
            g_trans[1] += res.grad_right
            np.add.at(g_trans[0], yn[:-1], -right[yn[1:]])
            np.add.at(g_trans[1], yn[1:], -left[yn[:-1]])
        else:
            g_trans[0] += res.pairwise
            np.add.at(g_trans[0], (yn[:-1], yn[1:]), -1.0)
    return np.array(losses), gU, g_trans


@pytest.mark.parametrize("lowrank", [False, True])
@pytest.mark.parametrize("proposal", PROPOSALS)
@pytest.mark.parametrize("store_edges", [True, False])
def test_equals_per_sequence_randomized_marginals(lowrank, proposal, store_edges,
                                                  monkeypatch):
    if not store_edges:  # edge weights recomputed in the backward sweep
        monkeypatch.setattr(_pass, "_STORE_EDGES", 0)
    rng = np.random.default_rng(7)
    lengths = [3, 1, 5, 2]
    U, y, transitions = _problem(rng, lengths, 9, lowrank)
    seeds = rng.integers(0, 2**31 - 1, size=4)
    losses, gU, g = randomized_loss_grad_ragged(U, lengths, y, transitions, 3, 4,
                                                proposal=proposal, seeds=seeds)
    ref_losses, ref_gU, ref_g = _per_sequence(U, lengths, y, transitions, 3, 4, proposal,
                                              seeds)
    assert isinstance(g, LowRankTransitions) == lowrank
    assert_allclose(losses, ref_losses, rtol=1e-12)
    assert_allclose(gU, ref_gU, rtol=1e-10, atol=1e-12)
    for got, want in zip(g if lowrank else (g,), ref_g):
        assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # the batching does not matter: each sequence has its own seed
    head = randomized_loss_grad_ragged(U[:4], lengths[:2], y[:4], transitions, 3, 4,
                                       proposal=proposal, seeds=seeds[:2])
    assert_allclose(head[0], losses[:2], rtol=1e-14)
    assert_allclose(head[1], gU[:4], rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("proposal", PROPOSALS)
def test_far_unary_scores_as_per_sequence(proposal):
    # rows spanning more than 745 nats, a far state that the transitions make
    # likely: the "local" proposal's floor, in the training kernel as in
    # make_proposal
    rng = np.random.default_rng(11)
    lengths = [3, 4]
    U, y, B = _problem(rng, lengths, 6, False)
    U[:, 0] += 800.0
    B[:, 1] += 900.0
    seeds = [3, 4]
    losses, gU, gB = randomized_loss_grad_ragged(U, lengths, y, B, 2, 3,
                                                 proposal=proposal, seeds=seeds)
    ref_losses, ref_gU, ref_g = _per_sequence(U, lengths, y, B, 2, 3, proposal, seeds)
    assert_allclose(losses, ref_losses, rtol=1e-12)
    assert_allclose(gU, ref_gU, rtol=1e-10, atol=1e-12)
    assert_allclose(gB, ref_g[0], rtol=1e-10, atol=1e-12)


def test_every_state_kept_is_the_exact_negative_log_likelihood():
    rng = np.random.default_rng(8)
    lengths = [4, 2]
    U, y, B = _problem(rng, lengths, 5, False)
    losses, gU, gB = randomized_loss_grad_ragged(U, lengths, y, B, 3, 2, seeds=[0, 1])
    values, gU_exact, gB_exact = chain.log_likelihood_grad_ragged(U, lengths, B, y)
    assert_allclose(losses, -values, rtol=1e-12)
    assert_allclose(gU, -gU_exact, atol=1e-12)
    assert_allclose(gB, -gB_exact, atol=1e-12)


def test_no_path_and_bad_seeds_raise():
    rng = np.random.default_rng(9)
    U, y, B = _problem(rng, [3], 6, False)
    U[1] = -np.inf
    with pytest.raises(ValueError, match="-inf on a training sub-lattice"):
        randomized_loss_grad_ragged(U, [3], y, B, 2, 2, seeds=[0])
    with pytest.raises(ValueError, match="seeds"):
        randomized_loss_grad_ragged(U, [3], y, B, 2, 2, seeds=[0, 1])
    with pytest.raises(ValueError, match="between 0 and"):
        randomized_loss_grad_ragged(U[[0, 2]], [2], y[:2], B, 2, 2, seeds=[-1])
    with pytest.raises(ValueError, match="between 0 and"):
        randomized_loss_grad_ragged(U[[0, 2]], [2], y[:2], B, 2, 2, seeds=[2**32])


def test_seeded_uniforms_are_randomstates_numbers():
    """The jitted per-sequence draw equals RandomState(seed).random_sample,
    bit for bit, for ragged sequences, extreme seeds, and from threads."""
    from concurrent.futures import ThreadPoolExecutor

    from skgpstruct.chain.randomized._batch_kernels import seeded_uniforms

    lengths = [3, 1, 7, 2, 5]
    offsets = np.r_[0, np.cumsum(lengths)]
    seeds = np.array([0, 2**32 - 1, 12345, 2**31 - 1, 7], dtype=np.int64)
    expected = np.concatenate([np.random.RandomState(int(s)).random_sample((n, 4))
                               for s, n in zip(seeds, lengths)])
    got = np.empty((offsets[-1], 4))
    seeded_uniforms(offsets, seeds, got)
    np.testing.assert_array_equal(got, expected)

    def draw(_):
        out = np.empty_like(got)
        seeded_uniforms(offsets, seeds, out)
        return out

    with ThreadPoolExecutor(4) as pool:
        for out in pool.map(draw, range(8)):
            np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(_pass._uniforms(offsets, 4, seeds.astype(np.uint32)),
                                  expected)
