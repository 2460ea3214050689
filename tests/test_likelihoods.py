import numpy as np
import pytest
from sklearn.base import clone

from skgpstruct.chain import _reference as ref
from skgpstruct.likelihoods import (
    CRFLikelihood,
    PseudoLikelihood,
    RandomizedCRFLikelihood,
    get_likelihood,
)


def _inputs(S=3, T=5, V=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(S, T, V)), rng.normal(size=(S, V, V)), rng.integers(0, V, T)


def test_crf_and_pseudo_match_references():
    F, B, y = _inputs()
    np.testing.assert_allclose(
        CRFLikelihood().log_prob(F, B, y),
        [ref.log_likelihood_ref(F[s], B[s], y) for s in range(3)], atol=1e-10)
    np.testing.assert_allclose(
        PseudoLikelihood().log_prob(F, B, y),
        [ref.pseudo_log_likelihood_ref(F[s], B[s], y) for s in range(3)], atol=1e-10)
    # shared B broadcasts
    v = CRFLikelihood().log_prob(F, B[0], y)
    assert v[0] == pytest.approx(ref.log_likelihood_ref(F[0], B[0], y))


def test_randomized_exact_when_all_states_kept():
    F, B, y = _inputs()
    lik = RandomizedCRFLikelihood(n_top=6, n_sampled=0)
    v, dF, dB = lik.log_prob_grad(F, B, y)
    e, eF, eB = CRFLikelihood().log_prob_grad(F, B, y)
    np.testing.assert_allclose(v, e, atol=1e-10)
    np.testing.assert_allclose(dF, eF, atol=1e-10)
    np.testing.assert_allclose(dB, eB, atol=1e-10)


def test_randomized_is_deterministic_upper_biased_and_gradient_consistent():
    F, B, y = _inputs(S=4, T=6, V=12, seed=1)
    lik = RandomizedCRFLikelihood(n_top=2, n_sampled=3, proposal="uniform")
    v1, dF, dB = lik.log_prob_grad(F, B, y)
    v2 = lik.log_prob(F, B, y)
    np.testing.assert_array_equal(v1, v2)
    # E[log Z-hat] <= log Z (Jensen), so the value is biased high: over 300
    # independent sub-lattices the mean excess is >= 0 up to 4 standard
    # errors (a false failure has probability ~3e-5 when the bias is 0).
    exact = CRFLikelihood().log_prob(F[:1], B[:1], y)[0]
    diffs = np.array([
        RandomizedCRFLikelihood(n_top=2, n_sampled=3, proposal="uniform",
                                random_state=r).log_prob(F[:1], B[:1], y)[0] - exact
        for r in range(300)
    ])
    se = diffs.std(ddof=1) / np.sqrt(diffs.size)
    assert diffs.mean() >= -4 * se
    assert diffs.std() > 0  # the draws really differ
    # gradient rows: onehot(y) minus marginals that sum to one per position
    np.testing.assert_allclose(dF.sum(axis=2), 0.0, atol=1e-10)
    np.testing.assert_allclose(dB.sum(axis=(1, 2)), 0.0, atol=1e-10)


def test_get_likelihood_and_clone():
    assert isinstance(get_likelihood("randomized"), RandomizedCRFLikelihood)
    lik = RandomizedCRFLikelihood(n_top=3)
    assert get_likelihood(lik) is lik
    assert clone(lik).get_params()["n_top"] == 3
    with pytest.raises(ValueError, match="Unknown likelihood"):
        get_likelihood("hinge")
    with pytest.raises(ValueError, match="shape"):
        CRFLikelihood().log_prob(np.zeros((2, 3)), np.zeros((3, 3)), [0, 1])


@pytest.mark.parametrize(
    "lik", [CRFLikelihood(), PseudoLikelihood(), RandomizedCRFLikelihood(n_top=2, n_sampled=2)],
    ids=["crf", "pseudo", "randomized"],
)
def test_many_matches_per_sequence_calls(lik):
    """log_prob(_grad)_many over G sequences = one log_prob(_grad) call each
    (CRFLikelihood has its own batched kernel, the others the default loop)."""
    rng = np.random.default_rng(3)
    G, S, T, V = 4, 3, 5, 6
    F, B = rng.normal(size=(G, S, T, V)), rng.normal(size=(G, S, V, V))
    Y = rng.integers(0, V, (G, T))
    values = lik.log_prob_many(F, B, Y)
    v2, gF, gB = lik.log_prob_grad_many(F, B, Y)
    assert values.shape == (G, S) and gF.shape == F.shape and gB.shape == B.shape
    for g in range(G):
        v, dF, dB = lik.log_prob_grad(F[g], B[g], Y[g])
        np.testing.assert_allclose(values[g], v, rtol=1e-12)
        np.testing.assert_allclose(v2[g], v, rtol=1e-12)
        np.testing.assert_allclose(gF[g], dF, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gB[g], dB, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="Y must have shape"):
        lik.log_prob_many(F, B, Y[:, :-1])
    with pytest.raises(ValueError, match="B must have shape"):
        lik.log_prob_many(F, B[:, 0], Y)


@pytest.mark.parametrize("proposal", ["uniform", "local+global"])
def test_randomized_gradient_matches_finite_differences_on_a_fixed_sub_lattice(
        proposal, assert_grad_fd):
    """The randomized likelihood's gradient is that of log p-hat(y) with its
    sub-lattice held fixed: the states and, for a proposal that depends on
    the potentials, their importance weights (constants, as in training by
    the randomized forward algorithm). The sub-lattice's seed is hashed from
    the potentials, so it is pinned here; with the uniform proposal that
    alone fixes the weights and central differences of the likelihood
    itself must agree, with "local+global" those of log p-hat on the
    sub-lattice's own index sets."""
    from skgpstruct.chain import randomized as rdp

    F, B, y = _inputs(S=2, T=5, V=9, seed=4)
    lik = RandomizedCRFLikelihood(n_top=2, n_sampled=3, proposal=proposal)
    lik._seed = lambda F_s: 12345
    _, dF, dB = lik.log_prob_grad(F, B, y)
    t = np.arange(F.shape[1])
    for s in range(F.shape[0]):
        sets = rdp.randomized_marginals(F[s], B[s], 2, 3, proposal=proposal,
                                        random_state=12345, force=y).index_sets

        def log_p(f, b):
            z = rdp.randomized_marginals(f, b, index_sets=sets).log_partition
            return f[t, y].sum() + b[y[:-1], y[1:]].sum() - z

        assert_grad_fd(lambda f: log_p(f.reshape(F[s].shape), B[s]), F[s].ravel(), dF[s])
        assert_grad_fd(lambda b: log_p(F[s], b.reshape(B[s].shape)), B[s].ravel(), dB[s])
    if proposal == "uniform":
        assert_grad_fd(lambda f: lik.log_prob(f.reshape(F.shape), B, y).sum(), F.ravel(),
                       dF)
        assert_grad_fd(lambda b: lik.log_prob(F, b.reshape(B.shape), y).sum(), B.ravel(),
                       dB)
