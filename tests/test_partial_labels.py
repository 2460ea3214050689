"""Partial labels in ``fit`` (``None``: an unknown label): the CRF objectives
(exact, fused, randomized) against enumeration of the paths that agree with
the known labels and finite differences; both taggers' fit, warnings and
errors; the GP's validation on partial labels."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct._input.sequences import SequenceData
from skgpstruct._tagging.crf_objective import CRFSpec, crf_loss_grad, layout, penalty, unpack
from skgpstruct._tagging.exact_objective import ExactCRFObjective
from skgpstruct.chain._reference import brute_force_partial_log_likelihood
from skgpstruct.chain.backend import get_backend
from skgpstruct.datasets import make_chain_data


def _data(V, n=30, F=8, seed=0, max_len=5, p_unknown=0.4):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len, size=n)
    X = sp.random(int(lengths.sum()), F, density=0.4, random_state=seed, format="csr")
    X.data = rng.standard_normal(X.nnz)
    y = rng.integers(0, V, size=int(lengths.sum()))
    y[rng.random(y.size) < p_unknown] = -1
    return SequenceData(X, lengths, y), rng


def _brute_loss(spec, theta, data):
    W, b, B = unpack(spec, theta, data.X_flat.shape[1])
    U = np.asarray(data.X_flat @ W) + b
    total = 0.0
    for n in range(data.n_sequences):
        a, e = data.offsets[n], data.offsets[n + 1]
        total -= brute_force_partial_log_likelihood(U[a:e], B, data.y_flat[a:e])[0]
    return total


@pytest.mark.parametrize("V", [3, 9])
def test_exact_objective_matches_enumeration_and_finite_differences(V):
    data, rng = _data(V, max_len=4 if V > 3 else 5)
    assert (data.y_flat < 0).any() and (data.y_flat >= 0).any()
    spec = CRFSpec(np.arange(V), c2=0.1)
    F = data.X_flat.shape[1]
    theta = 0.5 * rng.standard_normal(layout(spec, F)[-1])
    value, grad = ExactCRFObjective(spec, data)(theta)
    pen = penalty(spec, theta, F)[0]
    assert value == pytest.approx(_brute_loss(spec, theta, data) + pen, rel=1e-10)
    h = 1e-6
    for i in rng.choice(theta.size, size=15, replace=False):
        tp, tm = theta.copy(), theta.copy()
        tp[i] += h
        tm[i] -= h
        fd = (ExactCRFObjective(spec, data)(tp)[0] - ExactCRFObjective(spec, data)(tm)[0]) / (2 * h)
        assert fd == pytest.approx(grad[i], rel=1e-5, abs=1e-6)
    with get_backend("cpu") as backend:  # the generic chunked pass agrees
        n = data.n_sequences
        loss, g = crf_loss_grad(spec, theta, data, np.arange(n), np.zeros(n, int), None, backend)
    gpen = penalty(spec, theta, F)[1]
    assert loss + pen == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(g + gpen, grad, rtol=1e-9, atol=1e-10)


def test_randomized_loss_takes_partial_sequences_exactly():
    V = 6
    data, rng = _data(V, n=40, p_unknown=0.3)
    spec_r = CRFSpec(np.arange(V), n_top=2, n_sampled=1)
    spec_e = CRFSpec(np.arange(V))
    F = data.X_flat.shape[1]
    theta = 0.5 * rng.standard_normal(layout(spec_e, F)[-1])
    n = data.n_sequences
    partial = np.flatnonzero(np.add.reduceat((data.y_flat < 0).astype(int),
                                             data.offsets[:-1]) > 0)
    full = np.setdiff1d(np.arange(n), partial)
    seeds = np.arange(n)
    with get_backend("cpu") as backend:
        lr, gr = crf_loss_grad(spec_r, theta, data, np.arange(n), seeds, None, backend)
        lp, gp = crf_loss_grad(spec_e, theta, data, partial, seeds[partial], None, backend)
        lf, gf = crf_loss_grad(spec_r, theta, data, full, seeds[full], None, backend)
    assert lr == pytest.approx(lp + lf, rel=1e-12)
    np.testing.assert_allclose(gr, gp + gf, rtol=1e-10, atol=1e-10)


def _partial(y, p, seed):
    rng = np.random.default_rng(seed)
    out = []
    for seq in y:
        seq = list(seq.tolist())
        for t in range(len(seq)):
            if rng.random() < p:
                seq[t] = None
        out.append(seq)
    return out


@pytest.fixture(scope="module")
def chain_data():
    X, y = make_chain_data(n_sequences=60, random_state=0)[:2]
    return X, [np.array(["ab"[0] + str(v) for v in s]) for s in y]


@pytest.mark.parametrize("make", [lambda: RandomizedCRFTagger(c2=0.1),
                                  lambda: RandomizedCRFTagger(n_top=2, n_sampled=1),
                                  lambda: GPStructTagger(random_state=0),
                                  lambda: GPStructTagger(approximation="inducing",
                                                         n_inducing=20, random_state=0)],
                         ids=["exact", "randomized", "gp", "gp_inducing"])
def test_fit_on_partial_labels(make, chain_data):
    X, y = chain_data
    yp = _partial(y, 0.5, 1)
    yp[3] = [None] * len(yp[3])
    with pytest.warns(UserWarning, match="1 of 60 sequences of y have no known label"):
        model = make().fit(X, yp)
    assert list(model.classes_) == ["a0", "a1", "a2"]
    acc = np.mean(np.concatenate(model.predict(X)) == np.concatenate(y))
    assert acc > 0.85
    # labels all known but given as object arrays with None nowhere: the same fit
    same = [np.array(list(s), dtype=object) for s in y]
    a, b = make().fit(X, y), make().fit(X, same)
    np.testing.assert_array_equal(np.concatenate(a.predict_marginals(X)),
                                  np.concatenate(b.predict_marginals(X)))


def test_partial_labels_change_the_crf_and_fully_known_reproduce_it(chain_data):
    X, y = chain_data
    full = RandomizedCRFTagger(c2=0.1).fit(X, y)
    part = RandomizedCRFTagger(c2=0.1).fit(X, _partial(y, 0.5, 2))
    assert not np.allclose(full.coef_, part.coef_)
    # dropping the unknown tokens is not the same as marginalising them
    assert np.abs(full.coef_ - part.coef_).max() > 1e-3


def test_integer_labels_with_none():
    X, y = make_chain_data(n_sequences=30, random_state=1)[:2]
    yp = _partial(y, 0.3, 3)
    model = RandomizedCRFTagger().fit(X, yp)
    assert model.classes_.dtype.kind == "i"
    np.testing.assert_array_equal(model.classes_, np.unique(np.concatenate(y)))


def test_errors_on_partial_labels(chain_data):
    X, y = chain_data
    with pytest.raises(ValueError, match="no known label"):
        RandomizedCRFTagger().fit(X, [[None] * len(s) for s in y])
    with pytest.raises(ValueError, match="likelihood='crf'"):
        GPStructTagger(likelihood="pseudo").fit(X, _partial(y, 0.3, 4))
    with pytest.raises(ValueError, match="missing label"):
        RandomizedCRFTagger().fit(X[:1], [np.array([0.0, np.nan] + [1.0] * (len(y[0]) - 2))])
    with pytest.raises(ValueError, match="mixes label types"):
        RandomizedCRFTagger().fit(X[:2], [list(y[0]), [None, 1] + [None] * (len(y[1]) - 2)])


def test_gp_validation_runs_on_partial_labels(chain_data):
    X, y = chain_data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a short sequence may lose every label
        model = GPStructTagger(random_state=0).fit(X, _partial(y, 0.5, 5))
    res = model.variance_cv_results_
    assert np.all(np.isfinite(res["error"])) and np.all(np.isfinite(res["log_loss"]))
    assert np.all(res["error"] < 0.5)  # scored on the known held-out tokens only
    assert np.isfinite(model.temperature_)


def test_gp_svi_on_partial_labels(chain_data):
    X, y = chain_data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GPStructTagger(optimizer="svi", random_state=0, max_iter=20).fit(
            X, _partial(y, 0.4, 6))
    assert np.mean(np.concatenate(model.predict(X)) == np.concatenate(y)) > 0.85
