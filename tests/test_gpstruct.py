"""GPStructTagger: fitting, prediction, its variants and GP-specific errors
(the sklearn conventions are in test_sklearn_api.py)."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct._gpstruct.inducing_form import kernel_terms
from skgpstruct.datasets import make_chain_data
from skgpstruct.gp.kernels import LinearKernel, RBFKernel
from skgpstruct.likelihoods import RandomizedCRFLikelihood

SMALL = dict(approximation="inducing", kernel_variance=3.0,
             transition_prior_var=1.0, n_inducing=15, n_samples=4, n_predict_samples=16, max_iter=40)


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=50, n_classes=3, n_features=6, random_state=3)
    return X[:30], y[:30], X[30:], y[30:]


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


def test_fit_predict_shapes_and_accuracy(data):
    X_tr, y_tr, X_te, y_te = data
    gp = _fit(GPStructTagger(random_state=0, **SMALL), X_tr, y_tr)
    assert gp.q_mu_.shape == (1, 3, 15)
    assert gp.q_sqrt_.shape == (1, 3, 15, 15)
    assert gp.inducing_points_.shape == (15, 6)
    assert len(gp.elbo_history_) == gp.n_iter_ >= 1
    # the optimiser increased the (fixed-sample) ELBO
    assert gp.elbo_history_[-1] > gp.elbo_history_[0]
    marg = gp.predict_marginals(X_te)
    assert all(m.shape == (len(t), 3) and np.allclose(m.sum(axis=1), 1) for m, t in zip(marg, y_te))
    pred = gp.predict(X_te)
    np.testing.assert_array_equal(
        np.concatenate(pred), np.concatenate([gp.classes_[m.argmax(1)] for m in marg])
    )
    crf = RandomizedCRFTagger().fit(X_tr, y_tr)
    # a Bayesian tagger on the same features should not be far behind a CRF
    assert gp.score(X_te, y_te) > crf.score(X_te, y_te) - 0.1
    assert np.isfinite(gp.elbo(X_te, y_te))


@pytest.mark.parametrize(
    "params",
    [
        dict(likelihood="pseudo"),
        dict(gradient="score", optimizer="adam", learning_rate=0.05, batch_size=10,
             max_iter=5),
        dict(optimizer="adam", learning_rate=0.05, batch_size=10, max_iter=5),
        dict(optimizer="sgd", learning_rate=0.01, batch_size=10, max_iter=3),
        dict(optimizer="saga", learning_rate=0.01, batch_size=10, max_iter=3),
        dict(n_components=2),
        dict(decode="viterbi"),
        dict(inducing="random"),
        dict(optimize_hyperparameters=True, kernel=RBFKernel(length_scale=2.0)),
        dict(likelihood=RandomizedCRFLikelihood(n_top=1, n_sampled=1),
             optimizer="adam", learning_rate=0.05, batch_size=10, max_iter=3),
    ],
)
def test_variants_fit_and_predict(data, params):
    X_tr, y_tr, X_te, y_te = data
    kw = {**SMALL, **params}
    gp = _fit(GPStructTagger(random_state=0, **kw), X_tr, y_tr)
    pred = gp.predict(X_te)
    assert [len(p) for p in pred] == [len(t) for t in y_te]
    assert np.isfinite(gp.elbo_history_).all()
    if params.get("optimize_hyperparameters"):
        assert not np.allclose(gp.kernel_.theta, RBFKernel(length_scale=2.0).theta)


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])
def test_learned_kernel_scale(data, optimizer):
    """optimize_hyperparameters="scale" learns a ConstantKernel factor of
    the kernel on precomputed terms: a higher final (fixed-sample) ELBO
    than the fixed kernel, and prediction uses the terms of the scaled
    kernel (and jitter)."""
    from skgpstruct._input.sequences import SequenceData
    from skgpstruct.gp import compute_gp_terms

    X_tr, y_tr, X_te, _ = data
    kw = dict(SMALL, kernel=LinearKernel(variance=0.05), random_state=0)
    if optimizer == "adam":
        kw.update(optimizer="adam", learning_rate=0.05, max_iter=30)
    fixed = _fit(GPStructTagger(**kw), X_tr, y_tr)
    gp = _fit(GPStructTagger(optimize_hyperparameters="scale", **kw), X_tr, y_tr)
    assert fixed.kernel_.get_params() == kw["kernel"].get_params()
    assert isinstance(gp.kernel_.k1, ConstantKernel)
    s = gp.kernel_.k1.constant_value
    assert s > 2.0  # variance 0.05 is far too small for this data
    assert gp.kernel_.k2.get_params() == kw["kernel"].get_params()
    assert gp.elbo_history_[-1] > fixed.elbo_history_[-1]
    data_te = SequenceData.from_sequences(X_te, None, n_features=6)
    t = kernel_terms(gp._predictive().posterior, data_te)
    ref = compute_gp_terms(LinearKernel(variance=0.05 * s), data_te.X_flat, data_te.lengths,
                           gp.inducing_points_, jitter=gp.jitter * s)
    np.testing.assert_allclose(t.A, ref.A, rtol=1e-8, atol=1e-10)
    for a, b in zip(t.Ktilde, ref.Ktilde):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    # a warm start continues from the learned factor
    gp.set_params(warm_start=True, max_iter=1)
    _fit(gp, X_tr, y_tr)
    assert isinstance(gp.kernel_.k2, LinearKernel)


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])
def test_hyperparameters_stay_within_bounds(data, optimizer, monkeypatch):
    """kernel.theta stays within kernel.bounds, and the learned scale within
    _SCALE_BOUNDS, for L-BFGS-B and for the projected stochastic steps."""
    import skgpstruct._gpstruct.inducing_form as mod

    X_tr, y_tr, _, _ = data
    kw = dict(SMALL, random_state=0)
    if optimizer == "adam":
        kw.update(optimizer="adam", learning_rate=0.1, max_iter=30)
    free = _fit(GPStructTagger(optimize_hyperparameters="scale",
                               kernel=LinearKernel(variance=0.05), **kw), X_tr, y_tr)
    assert free.kernel_.k1.constant_value > 2.0  # unbounded below 2: leaves [0.5, 1.5]
    monkeypatch.setattr(mod, "_SCALE_BOUNDS", (0.5, 1.5))
    gp = _fit(GPStructTagger(optimize_hyperparameters="scale",
                             kernel=LinearKernel(variance=0.05), **kw), X_tr, y_tr)
    scale = gp.kernel_.k1.constant_value
    assert 0.5 <= scale <= 1.5 + 1e-12
    np.testing.assert_allclose(scale, 1.5, rtol=1e-6)

    kernel = LinearKernel(variance=0.05, variance_bounds=(0.04, 0.2))
    gp = _fit(GPStructTagger(optimize_hyperparameters=True, kernel=kernel, **kw),
              X_tr, y_tr)
    lo, hi = np.exp(gp.kernel_.bounds).T
    values = np.exp(gp.kernel_.theta)
    assert np.all(values >= lo * (1 - 1e-9)) and np.all(values <= hi * (1 + 1e-9))
    np.testing.assert_allclose(gp.kernel_.variance, 0.2, rtol=1e-6)


@pytest.mark.parametrize(
    "hyper, kernel",
    [(False, None), (True, RBFKernel(length_scale=2.0)), ("scale", LinearKernel(variance=3.0))],
    ids=["fixed", "rbf", "scale"],
)
def test_fit_gradient_is_that_of_the_objective(data, hyper, kernel, monkeypatch,
                                               assert_grad_fd):
    """The gradient fit used (one L-BFGS iteration) equals finite
    differences of the very objective fit called, at a point it visited."""
    from skgpstruct.gp import ELBOObjective

    calls = []
    original = ELBOObjective.__call__

    def recording(self, x, seq_idx, seeds, scale=1.0, parallel=None):
        out = original(self, x, seq_idx, seeds, scale, parallel)
        calls.append((self, np.array(x), np.array(seq_idx), np.array(seeds), scale,
                      out))
        return out

    monkeypatch.setattr(ELBOObjective, "__call__", recording)
    X_tr, y_tr, _, _ = data
    gp = GPStructTagger(n_inducing=4, n_samples=2, max_iter=1, random_state=0,
                        kernel=kernel, optimize_hyperparameters=hyper,
                        approximation="inducing", kernel_variance=3.0)
    _fit(gp, X_tr[:6], y_tr[:6])
    assert calls
    objective, x, idx, seeds, scale, (value, grad) = calls[-1]
    n_hyper = {False: 0, True: 2, "scale": 1}[hyper]
    assert objective.layout.n_hyperparameters == n_hyper
    assert_grad_fd(lambda z: original(objective, z, idx, seeds, scale)[0], x, grad,
                   h=1e-5, rtol=1e-5, atol=1e-6)
    if hyper:
        assert np.abs(grad[objective.layout.slices["hyperparameters"]]).max() > 1e-4


def test_sklearn_dense_kernel_accepted(data):
    X_tr, y_tr, X_te, _ = data
    gp = _fit(GPStructTagger(kernel=RBF(2.0), random_state=0, **SMALL), X_tr, y_tr)
    assert len(gp.predict(X_te)) == len(X_te)


def test_sklearn_dense_kernel_on_sparse_features_says_so(data):
    """scikit-learn's RBF needs dense features: sparse sequences at fit, or
    at predict / elbo after a dense fit, get an error that says so and what
    to do (they got "Unsupported dtype object" / a column-count mismatch)."""
    import scipy.sparse as sp

    X_tr, y_tr, X_te, y_te = data
    sparse = [sp.csr_matrix(x) for x in X_tr]
    match = "scikit-learn's RBF, which needs dense features"
    with pytest.raises(ValueError, match=match):
        GPStructTagger(kernel=RBF(2.0), random_state=0, **SMALL).fit(sparse, y_tr)
    gp = _fit(GPStructTagger(kernel=RBF(2.0), random_state=0, **SMALL), X_tr, y_tr)
    X_sp = [sp.csr_matrix(x) for x in X_te[:2]]
    for call in (lambda: gp.predict(X_sp), lambda: gp.predict_marginals(X_sp),
                 lambda: gp.elbo(X_sp, y_te[:2])):
        with pytest.raises(ValueError, match=match):
            call()
    # this package's kernels, alone or scaled, take sparse input
    _fit(GPStructTagger(kernel=ConstantKernel(2.0) * RBFKernel(), random_state=0, **SMALL),
         sparse, y_tr).predict(X_sp)


def test_elbo_rejects_labels_not_seen_in_fit(data):
    X_tr, y_tr, X_te, _ = data
    gp = _fit(GPStructTagger(random_state=0, **SMALL), X_tr, y_tr)
    with pytest.raises(ValueError, match="not seen in fit"):
        gp.elbo(X_te[:1], [np.full(len(X_te[0]), 7)])


def test_defaults_fit_a_single_sequence():
    """Defaults fit any data the validators accept: with one training
    sequence the validated prior variance falls back to 1 with a warning."""
    X, y = make_chain_data(n_sequences=1, n_features=3, length=30, random_state=0)[:2]
    with pytest.warns(UserWarning, match="at least 2 training sequences"):
        est = GPStructTagger(random_state=0, max_iter=20).fit(X, y)
    assert est.kernel_.variance == 1.0 and est.variance_cv_results_ is None
    assert est.score(X, y) > 0.5


@pytest.mark.parametrize("approximation", ["features", "inducing"])
def test_defaults_fit_when_every_fold_holds_out_unseen_labels(approximation):
    """Two sequences with disjoint labels: the only fold with two training
    labels holds out a label it never saw, so validation scores nothing. It
    falls back with a warning (it used to raise an IndexError, or in the
    inducing form pick 0.1 from a table of clipped log losses)."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 4)), rng.normal(size=(4, 4))]
    y = [["a", "b", "a", "b", "a"], ["c"] * 4]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(UserWarning, match="held out only labels its training part lacks"):
            gp = GPStructTagger(approximation=approximation, n_inducing=5, n_samples=4,
                                n_predict_samples=16, max_iter=10, random_state=0).fit(X, y)
    assert gp.kernel_.variance == 1.0 and gp.variance_cv_results_ is None


def test_refit_with_a_given_kernel_drops_the_validation_table():
    # inducing form: the pop was in _prior_variance, which a given kernel skips
    X, y = make_chain_data(n_sequences=12, n_classes=3, n_features=5, length=(3, 6),
                           random_state=0)[:2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gp = GPStructTagger(approximation="inducing", n_inducing=10, n_samples=4,
                            n_predict_samples=8, max_iter=5, random_state=0).fit(X, y)
        assert gp.variance_cv_results_ is not None
        gp.set_params(kernel=LinearKernel(variance=2.0)).fit(X, y)
    assert not hasattr(gp, "variance_cv_results_")


def test_refit_in_another_form_leaves_no_stale_attributes():
    """A refit after set_params keeps only this fit's attributes: the
    other form's posterior and a validation table that no longer applies
    used to stay and contradict the docstring."""
    X, y = make_chain_data(n_sequences=12, n_classes=3, n_features=5, length=(3, 6),
                           random_state=0)[:2]
    GP = dict(n_inducing=10, n_samples=5, n_predict_samples=8, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = GPStructTagger(kernel_variance="cv", temperature="auto", **GP).fit(X, y)
        assert g.variance_cv_results_ is not None and hasattr(g, "coef_")
        g.set_params(approximation="inducing", kernel_variance=2.0, temperature=1.0).fit(X, y)
        for name in ("coef_", "coef_var_", "variance_cv_results_", "temperature_cv_results_"):
            assert not hasattr(g, name), name
        assert g.q_mu_.shape[0] == 1
        g.set_params(approximation="features").fit(X, y)
        for name in ("q_mu_", "q_sqrt_", "inducing_points_", "variance_cv_results_"):
            assert not hasattr(g, name), name
        fresh = GPStructTagger(approximation="features", kernel_variance=2.0,
                               temperature=1.0, **GP).fit(X, y)
    assert sorted(k for k in vars(g) if k.endswith("_")) == sorted(
        k for k in vars(fresh) if k.endswith("_"))
    np.testing.assert_array_equal(g.coef_, fresh.coef_)
