"""GPStructTagger with ``posterior="coupled"`` (one Gaussian over all
labels' whitened inducing values per mixture component): prediction,
uncertainty, ELBO, warm start, sklearn API, determinism, and agreement with
the mean-field posterior when the coupling is zero."""

import copy
import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.linalg import block_diag
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from skgpstruct import GPStructTagger
from skgpstruct._gpstruct import inducing_form
from skgpstruct._gpstruct.predict import sequence_moments
from skgpstruct._input.sequences import SequenceData
from skgpstruct.datasets import make_chain_data
from skgpstruct.gp.variational import mean_field_to_coupled

pytestmark = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning")

FAST = dict(approximation="inducing", n_inducing=8, kernel_variance=3.0,
            transition_prior_var=1.0, n_samples=8, n_predict_samples=16,
            max_iter=15, random_state=0)
N_TRAIN = 20


@pytest.fixture(scope="module")
def data():
    return make_chain_data(n_sequences=30, n_classes=3, n_features=5,
                           length=(2, 7), random_state=0)


@pytest.fixture(scope="module", params=[1, 2], ids=["K1", "K2"])
def fitted(request, data):
    X, y = data
    return GPStructTagger(posterior="coupled", n_components=request.param,
                          **FAST).fit(X[:N_TRAIN], y[:N_TRAIN])


def _test_data(est, X):
    return SequenceData.from_sequences(X, n_features=est.n_features_in_)


# --------------------------------------------------------------------------
# outputs


def test_fitted_posterior_is_coupled(fitted):
    K, V, M = fitted.q_mu_.shape
    assert (K, V) == (fitted.n_components, 3)
    assert fitted.q_sqrt_.shape == (K, V * M, V * M)
    assert_array_equal(np.triu(fitted.q_sqrt_, 1), 0.0)
    # the fit used the coupling: some cross-label entries are not zero
    assert np.abs(np.tril(fitted.q_sqrt_[:, M:, :M])).max() > 0.0


def test_predictions_are_sane(fitted, data):
    X, y = data
    Xt, yt = X[N_TRAIN:], y[N_TRAIN:]
    marginals = fitted.predict_marginals(Xt)
    labels = fitted.predict(Xt)
    assert len(marginals) == len(labels) == len(Xt)
    for P, lab, x in zip(marginals, labels, Xt):
        assert P.shape == (len(x), 3)
        assert np.all(P >= 0.0)
        assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
        assert lab.shape == (len(x),)
        assert set(lab) <= set(fitted.classes_)
        # the marginal decoder takes the argmax of the averaged marginals
        assert_array_equal(lab, fitted.classes_[P.argmax(axis=1)])
    accuracy = np.mean(np.concatenate(labels) == np.concatenate(yt))
    assert fitted.score(Xt, yt) == pytest.approx(accuracy)
    assert accuracy > 0.6  # make_chain_data is easy; chance is 1 / 3
    viterbi = copy.deepcopy(fitted).set_params(decode="viterbi")
    for lab, x in zip(viterbi.predict(Xt), Xt):
        assert lab.shape == (len(x),) and set(lab) <= set(fitted.classes_)


def test_uncertainty_and_elbo(fitted, data):
    X, y = data
    Xt, yt = X[N_TRAIN:], y[N_TRAIN:]
    for kind in ("entropy", "mutual_information", "marginal_std"):
        out = fitted.predict_uncertainty(Xt, kind=kind)
        assert len(out) == len(Xt)
        for u, x in zip(out, Xt):
            assert u.shape[0] == len(x)
            assert np.all(np.isfinite(u)) and np.all(u >= 0.0)
            if kind != "marginal_std":
                assert np.all(u <= np.log(3) + 1e-12)
    # the epistemic part of the entropy cannot exceed the entropy
    for mi, h in zip(fitted.predict_uncertainty(Xt, kind="mutual_information"),
                     fitted.predict_uncertainty(Xt, kind="entropy")):
        assert np.all(mi <= h + 1e-12)
    # of whole label paths: the joint draws of the coupled posterior
    mi = fitted.predict_uncertainty(Xt, kind="mutual_information", per="path")
    h = fitted.predict_uncertainty(Xt, kind="entropy", per="path")
    assert mi.shape == h.shape == (len(Xt),)
    assert np.all(mi >= 0) and np.all(mi <= h + 1e-12)
    assert np.all(mi <= np.log(fitted.n_predict_samples) + 1e-12)
    elbo = fitted.elbo(Xt, yt)
    assert np.isfinite(elbo) and elbo < 0.0


# --------------------------------------------------------------------------
# determinism


def test_repeated_calls_are_identical(fitted, data):
    Xt, yt = data[0][N_TRAIN:], data[1][N_TRAIN:]
    for a, b in zip(fitted.predict_marginals(Xt), fitted.predict_marginals(Xt)):
        assert_array_equal(a, b)
    kind = "mutual_information"
    for a, b in zip(fitted.predict_uncertainty(Xt, kind=kind),
                    fitted.predict_uncertainty(Xt, kind=kind)):
        assert_array_equal(a, b)
    assert fitted.elbo(Xt, yt) == fitted.elbo(Xt, yt)


def test_a_sequence_does_not_depend_on_its_batch(fitted, data):
    Xt = data[0][N_TRAIN:]
    batch = fitted.predict_marginals(Xt)
    # the same draws (per-sequence seeds) and the same moments: computed one
    # sequence at a time, bit-identical (batched, they were up to 2e-12 off
    # in the path probabilities)
    paths = fitted.predict_path_proba(Xt, log=True)
    for i in (0, 3, 7):
        assert_array_equal(fitted.predict_marginals([Xt[i]])[0], batch[i])
        assert_array_equal(fitted.predict_path_proba([Xt[i]], log=True), paths[i:i + 1])
    reversed_ = fitted.predict_marginals(Xt[::-1])[::-1]
    for a, b in zip(reversed_, batch):
        assert_array_equal(a, b)


def test_n_jobs_does_not_change_predictions(fitted, data):
    Xt = data[0][N_TRAIN:]
    threaded = copy.deepcopy(fitted).set_params(n_jobs=2)
    for a, b in zip(threaded.predict_marginals(Xt), fitted.predict_marginals(Xt)):
        assert_array_equal(a, b)


# --------------------------------------------------------------------------
# zero coupling: the mean-field posterior


@pytest.mark.parametrize("K", [1, 2])
def test_zero_coupling_matches_mean_field(data, K):
    """A mean-field fit written as a coupled posterior (block-diagonal
    ``q_sqrt``, :func:`mean_field_to_coupled`) is the same distribution:
    the same means, a joint covariance that is the block diagonal of the
    mean-field ones, and, since the coupled sampler reads the same standard
    normals label-major, the same draws: the marginals, uncertainties and
    ELBO agree up to rounding."""
    X, y = data
    Xt, yt = X[N_TRAIN:], y[N_TRAIN:]
    mf = GPStructTagger(n_components=K, **FAST).fit(X[:N_TRAIN], y[:N_TRAIN])
    assert mf.q_sqrt_.ndim == 4
    cp = copy.deepcopy(mf).set_params(posterior="coupled")
    cp.q_sqrt_ = mean_field_to_coupled(mf.q_sqrt_)

    test = _test_data(mf, Xt)
    b_mf, S_mf = sequence_moments(mf._predictive(), test)
    b_cp, S_cp = sequence_moments(cp._predictive(), test)
    assert_array_equal(b_cp, b_mf)
    for s_mf, s_cp, x in zip(S_mf, S_cp, Xt):
        T = len(x)
        assert s_cp.shape == (K, 3 * T, 3 * T)
        ref = np.stack([block_diag(*s_mf[k]) for k in range(K)])
        off = np.kron(1.0 - np.eye(3), np.ones((T, T))).astype(bool)
        assert_array_equal(s_cp[:, off], 0.0)  # no cross-label covariance
        assert_allclose(s_cp, ref, rtol=1e-12, atol=1e-14)

    for a, b in zip(cp.predict_marginals(Xt), mf.predict_marginals(Xt)):
        assert_allclose(a, b, rtol=0, atol=1e-10)
    for kind in ("mutual_information", "marginal_std"):
        for a, b in zip(cp.predict_uncertainty(Xt, kind=kind),
                        mf.predict_uncertainty(Xt, kind=kind)):
            assert_allclose(a, b, rtol=0, atol=1e-10)
    assert cp.elbo(Xt, yt) == pytest.approx(mf.elbo(Xt, yt), rel=1e-12)
    assert_array_equal(np.concatenate(cp.predict(Xt)),
                       np.concatenate(mf.predict(Xt)))


# --------------------------------------------------------------------------
# sklearn API


def test_pickle_and_clone(fitted, data):
    Xt = data[0][N_TRAIN:]
    restored = pickle.loads(pickle.dumps(fitted))
    for a, b in zip(restored.predict_marginals(Xt), fitted.predict_marginals(Xt)):
        assert_array_equal(a, b)
    c = clone(fitted)
    assert c.get_params()["posterior"] == "coupled"
    assert not hasattr(c, "q_sqrt_")


def _spy_init(monkeypatch, record):
    init = inducing_form.initial_posterior

    def spy(*args, previous=None, **kwargs):
        params, Z = init(*args, previous=previous, **kwargs)
        record.append((previous is not None, copy.deepcopy(params)))
        return params, Z

    monkeypatch.setattr(inducing_form, "initial_posterior", spy)


def test_warm_start_mean_field_to_coupled_converts(data, monkeypatch):
    X, y = data
    est = GPStructTagger(warm_start=True, **FAST).fit(X[:N_TRAIN], y[:N_TRAIN])
    q_mu, q_sqrt = est.q_mu_.copy(), est.q_sqrt_.copy()
    record = []
    _spy_init(monkeypatch, record)
    est.set_params(posterior="coupled", max_iter=3)
    assert est._warm_start_compatible()
    est.fit(X[:N_TRAIN], y[:N_TRAIN])
    (warm, start), = record
    assert warm
    assert_array_equal(start.q_mu, q_mu)
    assert_array_equal(start.q_sqrt, mean_field_to_coupled(q_sqrt))
    K, V, M = est.q_mu_.shape
    assert est.q_sqrt_.shape == (K, V * M, V * M)
    for P in est.predict_marginals(X[N_TRAIN:]):
        assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)


def test_warm_start_coupled_to_mean_field_is_cold(data, monkeypatch):
    X, y = data
    est = GPStructTagger(posterior="coupled", warm_start=True, **FAST)
    est.fit(X[:N_TRAIN], y[:N_TRAIN])
    record = []
    _spy_init(monkeypatch, record)
    est.fit(X[:N_TRAIN], y[:N_TRAIN])  # coupled -> coupled: warm
    est.set_params(posterior="mean_field")
    assert not est._warm_start_compatible()
    est.fit(X[:N_TRAIN], y[:N_TRAIN])
    assert [warm for warm, _ in record] == [True, False]
    assert est.q_sqrt_.ndim == 4
    cold = GPStructTagger(**FAST).fit(X[:N_TRAIN], y[:N_TRAIN])
    for a, b in zip(est.predict_marginals(X[N_TRAIN:]),
                    cold.predict_marginals(X[N_TRAIN:])):
        assert_array_equal(a, b)


def test_grid_search_over_posterior(data):
    X, y = data
    search = GridSearchCV(GPStructTagger(**FAST),
                          {"posterior": ["mean_field", "coupled"]}, cv=2)
    search.fit(X[:N_TRAIN], y[:N_TRAIN])
    scores = search.cv_results_["mean_test_score"]
    assert scores.shape == (2,) and np.all(np.isfinite(scores))
    assert np.all((scores >= 0.0) & (scores <= 1.0))
    best = search.best_estimator_
    assert best.q_sqrt_.ndim == (3 if best.posterior == "coupled" else 4)
    assert 0.0 <= search.score(X[N_TRAIN:], y[N_TRAIN:]) <= 1.0


# --------------------------------------------------------------------------
# gradient of the objective fit minimises, at the estimator's scale


def test_estimator_objective_gradient_matches_finite_differences(fitted, data,
                                                                 assert_grad_fd):
    """The gradient of the estimator's own coupled objective (its layout,
    KL terms and transition prior) at the fitted point, against central
    differences on a random subset of coordinates (tests/gp/test_elbo.py
    checks every coordinate on a smaller problem)."""
    X, y = data
    est = copy.deepcopy(fitted)
    train = SequenceData.from_sequences(X[:N_TRAIN], y[:N_TRAIN])
    train.y_flat = est._encoder().transform(train.y_flat).astype(np.int64)
    start = inducing_form.variational_params(vars(est))
    objective = inducing_form.elbo_objective(est._check_params(3), train, start, est.kernel_,
                                             est.inducing_points_, True,
                                             **est.get_params(deep=False))[0]
    assert objective.layout.coupled
    x0 = objective.layout.pack(start, objective.initial_hyperparameters())
    idx = np.arange(train.n_sequences)
    seeds = np.arange(train.n_sequences) + 11
    value, grad = objective(x0, idx, seeds)
    assert np.isfinite(value)
    coords = np.random.default_rng(0).choice(x0.size, size=24, replace=False)
    coords = np.union1d(coords, [objective.layout.slices["q_sqrt"].start])

    def f(z):
        x = x0.copy()
        x[coords] = z
        return objective(x, idx, seeds)[0]

    assert_grad_fd(f, x0[coords], grad[coords], h=1e-6, rtol=1e-5, atol=1e-5)
    assert np.abs(grad[coords]).max() > 1e-3
