"""predict_path_proba: the probability of a whole label path, against
brute-force enumeration of the paths, the marginals and the point
potentials."""

import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct.chain import log_partition
from skgpstruct.datasets import make_chain_data


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=50, n_classes=3, n_features=6, length=(2, 5),
                           random_state=5)
    return X[:40], [np.array(["abc"[v] for v in s]) for s in y[:40]], X[40:]


def _taggers():
    """Fitted taggers of each kind whose path probability has its own code
    path: point potentials (exact, randomized training, low-rank
    transitions) and posterior draws (weight space, inducing points with a
    two-component mixture, coupled posterior)."""
    return {
        "crf exact": lambda: RandomizedCRFTagger(n_top=None, c2=0.1, random_state=0),
        "crf randomized": lambda: RandomizedCRFTagger(n_top=1, n_sampled=1, c2=0.1,
                                                      random_state=0),
        "crf low rank": lambda: RandomizedCRFTagger(n_top=None, c2=0.1, transitions="low_rank", rank=2,
                                                    random_state=0),
        "gp features": lambda: GPStructTagger(kernel_variance=3.0, random_state=0),
        "gp inducing mixture": lambda: GPStructTagger(
            approximation="inducing", n_inducing=15, n_components=2, kernel_variance=3.0,
            max_iter=30, random_state=0),
        "gp coupled": lambda: GPStructTagger(
            approximation="inducing", posterior="coupled", n_inducing=10,
            kernel_variance=3.0, max_iter=30, random_state=0),
    }


@pytest.fixture(scope="module")
def fitted(data):
    X, y, _ = data
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: make().fit(X, y) for name, make in _taggers().items()}


def _all_paths(est, T):
    return [est.classes_[list(p)] for p in itertools.product(range(3), repeat=T)]


@pytest.mark.parametrize("name", list(_taggers()))
def test_sums_to_one_and_gives_the_marginals(fitted, data, name):
    # brute force over all 3**T paths: the probabilities sum to 1, and
    # summed over the paths with y_t = j they are predict_marginals' p(y_t
    # = j) (for the GP with the same posterior draws: to rounding)
    est = fitted[name]
    _, _, X_te = data
    for x in X_te[:3]:
        T = x.shape[0]
        paths = _all_paths(est, T)
        p = est.predict_path_proba([x] * len(paths), paths)
        assert np.all(p >= 0) and np.all(p <= 1)
        assert_allclose(p.sum(), 1.0, atol=1e-12)
        M = np.zeros((T, 3))
        for path, q in zip(paths, p):
            M[np.arange(T), np.searchsorted(est.classes_, path)] += q
        if name == "crf randomized":
            continue  # its marginals are exact only with n_top=None
        assert_allclose(M, est.predict_marginals([x])[0], atol=1e-12)


def test_crf_is_the_exact_path_probability(fitted, data):
    est = fitted["crf exact"]
    _, _, X_te = data
    paths = est.predict(X_te)
    p = est.predict_path_proba(X_te, paths)
    for x, path, q in zip(X_te, paths, p):
        u = np.asarray(x @ est.coef_) + est.intercept_
        k = np.searchsorted(est.classes_, path)
        score = u[np.arange(len(k)), k].sum() + est.transition_[k[:-1], k[1:]].sum()
        assert_allclose(q, np.exp(score - log_partition(u, est.transition_)), rtol=1e-12)


def test_gp_with_coinciding_draws_is_the_mean_potentials_probability(fitted, data):
    # a point-mass posterior: every draw is the posterior mean, so the
    # probability is that of the mean potentials (the CRF formula)
    import copy

    gp = copy.deepcopy(fitted["gp features"])
    _, _, X_te = data
    paths = gp.predict(X_te)
    spread = gp.predict_path_proba(X_te, paths)
    gp.coef_var_[:] = 0.0
    gp.transition_var_ = np.zeros_like(gp.transition_var_)
    gp.jitter = 1e-30
    point = gp.predict_path_proba(X_te, paths)
    data_te = gp._check_X(X_te)
    U, B = gp._decode_potentials(data_te)
    for u, path, q in zip(data_te.split(U), paths, point):
        k = np.searchsorted(gp.classes_, path)
        score = u[np.arange(len(k)), k].sum() + B[k[:-1], k[1:]].sum()
        assert_allclose(q, np.exp(score - log_partition(u, B)), rtol=1e-9)
    # with spread, the predictive probability of the likeliest paths is lower
    assert np.mean(spread) < np.mean(point)


@pytest.mark.parametrize("name", ["crf exact", "gp features"])
def test_default_paths_log_and_batch_independence(fitted, data, name):
    est = fitted[name]
    _, _, X_te = data
    p = est.predict_path_proba(X_te)
    assert p.shape == (len(X_te),)
    assert_allclose(p, est.predict_path_proba(X_te, est.predict(X_te)), rtol=1e-14)
    assert_allclose(np.log(p), est.predict_path_proba(X_te, log=True), rtol=1e-12)
    # whatever else is in the batch, and on every call
    for i in (0, 4):
        alone = est.predict_path_proba([X_te[i]])[0]
        assert alone == p[i]
    assert_allclose(est.predict_path_proba(X_te[::-1])[::-1], p, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["crf exact", "gp features"])
def test_bad_paths_are_rejected(fitted, data, name):
    est = fitted[name]
    _, _, X_te = data
    y = est.predict(X_te)
    with pytest.raises(ValueError, match="X has 10 sequences but y has 9"):
        est.predict_path_proba(X_te, y[:9])
    with pytest.raises(ValueError, match=r"Sequence 2 has \d+ tokens in X but \d+ labels in y"):
        est.predict_path_proba(X_te, y[:2] + [y[2][:-1]] + y[3:])
    with pytest.raises(ValueError, match=r"labels not seen in fit: \['z'\]"):
        est.predict_path_proba(X_te, y[:1] + [np.array(["z"] * len(y[1]))] + y[2:])
