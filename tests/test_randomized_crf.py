"""RandomizedCRFTagger: maths of its loss, fitting and decoding (the sklearn
conventions are in test_sklearn_api.py)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from skgpstruct import RandomizedCRFTagger
from skgpstruct._input.sequences import SequenceData
from skgpstruct.chain import _reference as ref
from skgpstruct.datasets import make_chain_data


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=120, n_classes=4, n_features=8, random_state=1)
    return X[:80], y[:80], X[80:], y[80:]


def _objective_case(seed, data_args, transitions="full", rank=2, scale=0.5,
                    counts=None, proposal=None):
    """Data, an estimator set up as after ``fit`` (c2 = 0.3; exact unless
    ``counts = (n_top, n_sampled)``) and random parameters ``theta`` (the
    first draw of the returned ``rng = default_rng(seed)``)."""
    rng = np.random.default_rng(seed)
    X, y = make_chain_data(**data_args)
    data = SequenceData.from_sequences(X, y)
    est = RandomizedCRFTagger(transitions=transitions, rank=rank, c2=0.3, fit_intercept=True)
    est.classes_ = np.arange(data_args["n_classes"])
    est.n_features_in_ = data_args["n_features"]
    est._n_top_, est._n_sampled_ = counts if counts else (None, 0)
    est.exact_ = counts is None
    if proposal is not None:
        est.proposal = proposal
    theta = rng.normal(scale=scale, size=est._layout()[-1])
    return X, y, data, est, theta, rng


@pytest.mark.parametrize("transitions", ["full", "low_rank"])
def test_exact_loss_is_crf_negative_log_likelihood_and_gradient_matches_fd(transitions):
    X, y, data, est, theta, _ = _objective_case(
        0, dict(n_sequences=5, n_classes=3, n_features=4, random_state=0), transitions)
    loss, grad = est._chunk_loss_grad(theta, data, np.zeros(5, dtype=np.int64))
    # The loss is the sum of reference CRF negative log-likelihoods.
    W, b, trans = est._unpack(theta)
    B = trans if transitions == "full" else trans[0] @ trans[1].T
    expected = -sum(ref.log_likelihood_ref(x @ W + b, B, t) for x, t in zip(X, y))
    assert loss == pytest.approx(expected, rel=1e-12)
    # Central differences, h = 1e-6: truncation O(h^2) ~ 1e-12 and rounding
    # ~ 1e-16 * |loss| / h ~ 1e-9 in absolute terms, hence atol 1e-7.
    h = 1e-6
    fd = np.empty_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        fd[i] = (
            est._chunk_loss_grad(theta + e, data, np.zeros(5, dtype=np.int64))[0]
            - est._chunk_loss_grad(theta - e, data, np.zeros(5, dtype=np.int64))[0]
        ) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    # The penalty gradient (bias excluded) too.
    pen, gpen = est._penalty(theta)
    cuts = est._layout()
    mask = np.ones_like(theta)
    mask[cuts[1] : cuts[2]] = 0
    assert pen == pytest.approx(0.3 * np.sum(mask * theta**2))
    np.testing.assert_allclose(gpen, 0.6 * mask * theta)


def _per_sequence_reference(est, theta, data, seeds):
    """Randomized loss and gradient, one ``randomized_marginals`` call per
    sequence (the plain path the batched kernel must reproduce)."""
    from skgpstruct.chain import randomized as rdp

    W, b, trans = est._unpack(theta, data.X_flat.shape[1])
    U = np.asarray(data.X_flat @ W) + b
    full = est.transitions == "full"
    spec = trans if full else rdp.LowRankTransitions(*trans)
    gU = np.zeros_like(U)
    g_trans = [np.zeros_like(a) for a in ((trans,) if full else trans)]
    loss = 0.0
    for n in range(data.n_sequences):
        s, e = data.offsets[n], data.offsets[n + 1]
        Un, yn = U[s:e], data.y_flat[s:e]
        res = rdp.randomized_marginals(
            Un, spec, est._n_top_, est._n_sampled_, proposal=est.proposal,
            random_state=int(seeds[n]), force=yn)
        gold = Un[np.arange(e - s), yn].sum()
        if full:
            gold += trans[yn[:-1], yn[1:]].sum()
            np.add.at(g_trans[0], (yn[:-1], yn[1:]), -1.0)
            g_trans[0] += res.pairwise
        else:
            left, right = trans
            gold += np.einsum("tr,tr->", left[yn[:-1]], right[yn[1:]])
            np.add.at(g_trans[0], yn[:-1], -right[yn[1:]])
            np.add.at(g_trans[1], yn[1:], -left[yn[:-1]])
            g_trans[0] += res.grad_left
            g_trans[1] += res.grad_right
        loss += res.log_partition - gold
        gU[s:e] += res.unary
        gU[s + np.arange(e - s), yn] -= 1.0
    gW = np.asarray(data.X_flat.T @ gU)
    return loss, np.concatenate([gW.ravel(), gU.sum(axis=0)] + [g.ravel() for g in g_trans])


@pytest.mark.parametrize("transitions", ["full", "low_rank"])
@pytest.mark.parametrize("proposal", ["uniform", "local", "global", "local+global"])
def test_batched_randomized_loss_equals_per_sequence_reference(transitions, proposal):
    # The jitted chunk kernel draws the same sub-lattices (same uniforms,
    # same deterministic states) as randomized_marginals per sequence, so the
    # two agree to rounding.
    _, _, data, est, theta, rng = _objective_case(
        4, dict(n_sequences=7, n_classes=9, n_features=5, length=(1, 6), random_state=3),
        transitions, rank=3, scale=0.7, counts=(3, 4), proposal=proposal)
    seeds = rng.integers(0, 2**31 - 1, size=7)
    loss, grad = est._chunk_loss_grad(theta, data, seeds)
    loss_ref, grad_ref = _per_sequence_reference(est, theta, data, seeds)
    assert loss == pytest.approx(loss_ref, rel=1e-12)
    np.testing.assert_allclose(grad, grad_ref, rtol=1e-10, atol=1e-12)
    # Chunking does not matter: each sequence has its own seed.
    parts = [est._chunk_loss_grad(theta, data.subset(i), seeds[i])
             for i in ([0, 1, 2], [3, 4, 5, 6])]
    assert loss == pytest.approx(parts[0][0] + parts[1][0], rel=1e-12)
    np.testing.assert_allclose(grad, parts[0][1] + parts[1][1], rtol=1e-10, atol=1e-12)
    # A different seed draws a different sub-lattice (the test can fail).
    other = est._chunk_loss_grad(theta, data, seeds + 1)[0]
    assert other != pytest.approx(loss, rel=1e-9)


@pytest.mark.parametrize("transitions", ["full", "low_rank"])
def test_batched_randomized_loss_recomputed_edges_and_log_space_fallback(
        transitions, monkeypatch):
    # Two other code paths of the kernel against the same reference:
    # (a) edge weights recomputed in the backward sweep instead of stored;
    # (b) potentials spanning ~2000 nats, which underflow the scaled
    #     linear-space pass and must send the sequence to the log-space
    #     kernels (else the loss would be wrong or NaN).
    from skgpstruct.chain.randomized._batch_kernels import _scaled_pass
    from skgpstruct.chain.randomized import _pass

    _, _, data, est, theta, rng = _objective_case(
        5, dict(n_sequences=5, n_classes=8, n_features=4, length=(2, 6), random_state=4),
        transitions, counts=(2, 3))
    seeds = rng.integers(0, 2**31 - 1, size=5)
    ref = _per_sequence_reference(est, theta, data, seeds)
    monkeypatch.setattr(_pass, "_STORE_EDGES", 0)
    loss, grad = est._chunk_loss_grad(theta, data, seeds)
    assert loss == pytest.approx(ref[0], rel=1e-12)
    np.testing.assert_allclose(grad, ref[1], rtol=1e-10, atol=1e-12)

    W, b, trans = est._unpack(theta)
    b[0] = 1000.0  # label 0 dominates every position...
    if transitions == "full":
        trans[:, 0] = -2000.0  # ...but can never be entered
    else:
        trans[0][:] = 0.0
        trans[1][:] = 0.0
        trans[0][:, 0] = 40.0
        trans[1][0, 0] = -50.0  # B[:, 0] = -2000
    U = np.asarray(data.X_flat @ W) + b
    empty = np.zeros((0, 0))
    B = trans if transitions == "full" else empty
    lr = (empty, empty) if transitions == "full" else trans
    expB = np.exp(B - B.max()) if transitions == "full" else empty
    idx = np.tile(np.arange(8), (3, 1))
    ok, _ = _scaled_pass(U[:3], idx, np.zeros((3, 8)), expB,
                         float(B.max()) if transitions == "full" else 0.0,
                         lr[0], lr[1], transitions != "full", True,
                         np.zeros((3, 8)), np.zeros_like(B), np.zeros_like(lr[0]),
                         np.zeros_like(lr[1]))
    assert not ok  # the fallback is really exercised
    ref = _per_sequence_reference(est, theta, data, seeds)
    loss, grad = est._chunk_loss_grad(theta, data, seeds)
    assert np.isfinite(ref[0]) and loss == pytest.approx(ref[0], rel=1e-12)
    np.testing.assert_allclose(grad, ref[1], rtol=1e-10, atol=1e-9)


def test_batched_kernel_keeps_ties_like_sample_index_sets():
    # A uniform proposal makes every state tie: the deterministic states
    # must then be the gold state and the lowest other indices, as in
    # sample_index_sets, else the sub-lattices (and the losses) would differ.
    from skgpstruct.chain.randomized._batch_kernels import _deterministic_states
    from skgpstruct.chain.randomized import sample_index_sets

    q = np.array([[0.1, 0.2, 0.2, 0.05, 0.2, 0.25], [1 / 6] * 6])
    force = np.array([2, 4])
    ref = sample_index_sets(q, 4, 1, random_state=0, force=force)
    for t in range(2):
        det = np.empty(4, dtype=np.int64)
        _deterministic_states(q[t] / q[t].sum(), force[t], 4, det)
        np.testing.assert_array_equal(det, ref.index[t, :4])


@pytest.mark.parametrize("seed", range(40))
def test_batched_deterministic_states_equal_the_stable_sort(seed):
    # The one-scan selection of the batched kernel against the numpy
    # reference (_prepare_sets: a stable argsort of -q), with many ties,
    # increasing and decreasing q, k1 from 1 to N.
    from skgpstruct.chain.randomized._batch_kernels import _deterministic_states
    from skgpstruct.chain.randomized.proposals import _prepare_sets

    rng = np.random.default_rng(seed)
    N = int(rng.integers(1, 30))
    kind = seed % 4
    if kind == 0:
        q = rng.random(N)
    elif kind == 1:
        q = rng.integers(0, 3, N).astype(float)  # many ties, zeros
    elif kind == 2:
        q = np.arange(N, dtype=float)  # increasing: every state inserted
    else:
        q = np.arange(N, 0, -1, dtype=float)
    for k1 in range(1, N + 1):
        gold = int(rng.integers(N))
        ref = _prepare_sets(q[None], k1, np.array([gold]))[0][0]
        det = np.full(k1, -1, dtype=np.int64)
        _deterministic_states(q, gold, k1, det)
        np.testing.assert_array_equal(det, ref)


@pytest.mark.parametrize("transitions", ["full", "low_rank"])
def test_randomized_gradient_matches_fd_with_fixed_draws(transitions):
    # The training gradient treats the sub-lattice and its weights as
    # constants. With the uniform proposal they do not depend on the
    # parameters (top states by index, weights 1 / (K2 q~) constant), so
    # for fixed seeds the loss is a smooth function whose gradient must
    # equal central differences (h = 1e-6: truncation ~1e-12, rounding
    # ~1e-16 |loss| / h ~ 1e-9, hence abs 1e-6).
    _, _, data, est, theta, _ = _objective_case(
        3, dict(n_sequences=3, n_classes=6, n_features=3, random_state=2), transitions,
        scale=0.3, counts=(2, 2), proposal="uniform")
    seeds = np.array([5, 6, 7])
    loss, grad = est._chunk_loss_grad(theta, data, seeds)
    est.exact_ = True
    # Sanity: the estimate is a real estimate, not the exact loss.
    assert loss != pytest.approx(est._chunk_loss_grad(theta, data, seeds)[0], rel=1e-6)
    est.exact_ = False
    h = 1e-6
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        fd = (est._chunk_loss_grad(theta + e, data, seeds)[0]
              - est._chunk_loss_grad(theta - e, data, seeds)[0]) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_exact_fit_predict_and_attributes(data):
    X_tr, y_tr, X_te, y_te = data
    crf = RandomizedCRFTagger(c2=0.05).fit(X_tr, y_tr)
    assert crf.exact_ and crf.n_iter_ >= 1 and len(crf.loss_history_) == crf.n_iter_
    assert crf.coef_.shape == (8, 4) and crf.transition_.shape == (4, 4)
    pred = crf.predict(X_te)
    assert [len(p) for p in pred] == [len(t) for t in y_te]
    # Viterbi on the stored parameters, recomputed independently
    for x, p in zip(X_te[:5], pred[:5]):
        path, _ = ref.viterbi_ref(x @ crf.coef_ + crf.intercept_, crf.transition_)
        np.testing.assert_array_equal(p, crf.classes_[path])
    marg = crf.predict_marginals(X_te)
    assert all(np.allclose(m.sum(axis=1), 1.0) for m in marg)
    assert crf.score(X_te, y_te) > 0.6
    assert crf.predict_single(X_te[0]).shape == (len(y_te[0]),)


@pytest.mark.parametrize("sparse_input", [False, True])
def test_features_absent_from_training_get_zero_weights(data, sparse_input):
    # Columns that are zero in every training token only feel the penalty,
    # so their optimal weights are 0 and fit() leaves them out of the
    # optimisation: the other weights are those of a fit without the
    # columns (same L-BFGS run, bit for bit) and the new rows are zero.
    X_tr, y_tr, X_te, _ = data
    rng = np.random.default_rng(7)
    insert = [0, 6, 10]  # positions of the all-zero columns in the wide X

    def widen(x):
        return np.insert(x, [0, 5, 8], 0.0, axis=1)

    X_wide = [widen(x) for x in X_tr]
    X_narrow = X_tr
    if sparse_input:  # (sparse and dense products round differently)
        X_wide = [sp.csr_matrix(x) for x in X_wide]
        X_narrow = [sp.csr_matrix(x) for x in X_tr]
    narrow = RandomizedCRFTagger(c2=0.05).fit(X_narrow, y_tr)
    wide = RandomizedCRFTagger(c2=0.05).fit(X_wide, y_tr)
    keep = np.setdiff1d(np.arange(11), insert)
    assert wide.coef_.shape == (11, 4)
    np.testing.assert_array_equal(wide.coef_[keep], narrow.coef_)
    np.testing.assert_array_equal(wide.coef_[insert], 0.0)
    np.testing.assert_array_equal(wide.transition_, narrow.transition_)
    # Test tokens may use the new columns: their zero weights add nothing.
    X_te_wide = [widen(x) for x in X_te]
    for x in X_te_wide:
        x[:, insert] = rng.normal(size=(x.shape[0], 3))
    for a, b in zip(wide.predict(X_te_wide), narrow.predict(X_te)):
        np.testing.assert_array_equal(a, b)
    # Warm start from the wide fit continues from the same point.
    again = clone(wide).set_params(warm_start=True)
    again.coef_, again.intercept_ = wide.coef_.copy(), wide.intercept_.copy()
    again.transition_ = wide.transition_.copy()
    again.transition_left_ = again.transition_right_ = None
    again.classes_, again.n_features_in_ = wide.classes_, wide.n_features_in_
    again.fit(X_wide, y_tr)
    assert again.loss_history_[0] <= wide.loss_history_[-1] * (1 + 1e-6)


def test_randomized_mode_close_to_exact(data):
    X_tr, y_tr, X_te, y_te = data
    exact = RandomizedCRFTagger(optimizer="adam", max_iter=20, random_state=0)
    rand = RandomizedCRFTagger(n_top=2, n_sampled=1, max_iter=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        acc_e = exact.fit(X_tr, y_tr).score(X_te, y_te)
        acc_r = rand.fit(X_tr, y_tr).score(X_te, y_te)
    assert not rand.exact_
    assert acc_r > acc_e - 0.05


def test_beam_decoding_equals_exact_with_full_beam(data):
    X_tr, y_tr, X_te, _ = data
    crf = RandomizedCRFTagger().fit(X_tr, y_tr)
    beam = clone(crf).set_params(beam_size=4).fit(X_tr, y_tr)
    for a, b in zip(crf.predict(X_te), beam.predict(X_te)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(crf.predict_marginals(X_te), beam.predict_marginals(X_te)):
        np.testing.assert_allclose(a, b, atol=1e-10)


@pytest.mark.parametrize("transitions", ["full", "low_rank"])
def test_beam_uncertainty_is_that_of_the_chain_restricted_to_the_beam(transitions):
    """With beam_size, the marginals, token entropies and path entropy all
    come from the chain restricted to each position's beam_size best unary
    states (the path entropy used to be the full chain's, above the summed
    token entropies that bound it)."""
    from skgpstruct.chain import beam, marginals, path_entropy

    X, y = make_chain_data(n_sequences=10, n_classes=3, n_features=4, length=(2, 4),
                           random_state=1)
    kw = dict(transitions="low_rank", rank=2) if transitions == "low_rank" else {}
    crf = RandomizedCRFTagger(max_iter=30, random_state=0, beam_size=2, **kw).fit(X[:7], y[:7])
    data = crf._check_X(X[7:])
    U, spec = crf._decode_potentials(data)
    B = spec[0] @ spec[1].T if isinstance(spec, tuple) else np.asarray(spec)
    path = crf.predict_uncertainty(X[7:], per="path")
    seq = crf.predict_uncertainty(X[7:], per="sequence")
    for n, (u, P) in enumerate(zip(data.split(U), crf.predict_marginals(X[7:]))):
        masked = np.full_like(u, -np.inf)
        keep = beam.beam_states(u, 2)
        np.put_along_axis(masked, keep, np.take_along_axis(u, keep, axis=1), axis=1)
        np.testing.assert_allclose(P, marginals(masked, B)[0], atol=1e-12)
        assert path[n] == pytest.approx(path_entropy(masked, B), abs=1e-10)
        assert path[n] <= seq[n] + 1e-12
    assert np.any(path < crf.set_params(beam_size=None).predict_uncertainty(X[7:],
                                                                              per="path"))


@pytest.mark.parametrize("first, second", [
    (dict(transitions="full"), dict(transitions="low_rank", rank=2)),
    (dict(transitions="low_rank", rank=2), dict(transitions="full")),
    (dict(transitions="low_rank", rank=2), dict(transitions="low_rank", rank=4)),
])
def test_warm_start_after_a_change_of_transitions_starts_cold(first, second):
    """A warm start cannot continue from transitions of another form or
    rank (it used to fail reading the old layout): the refit starts cold
    and equals a fresh fit."""
    from skgpstruct.datasets import make_chain_data

    X, y = make_chain_data(n_sequences=12, n_classes=3, n_features=5, length=(3, 6),
                           random_state=0)
    crf = RandomizedCRFTagger(warm_start=True, max_iter=10, random_state=0, **first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crf.fit(X, y)
        crf.set_params(**second).fit(X, y)
        fresh = RandomizedCRFTagger(max_iter=10, random_state=0, **second).fit(X, y)
    np.testing.assert_array_equal(crf.coef_, fresh.coef_)
    for a, b in zip(crf.predict_marginals(X), fresh.predict_marginals(X)):
        np.testing.assert_array_equal(a, b)


def test_single_label_message_shows_the_label_plainly():
    X = [np.ones((2, 3)), np.ones((3, 3))]
    with pytest.raises(ValueError, match=r"single label \('B-NP'\)"):
        RandomizedCRFTagger().fit(X, [np.array(["B-NP"] * 2), np.array(["B-NP"] * 3)])
