"""The sklearn conventions of both taggers, parametrised over
GPStructTagger and RandomizedCRFTagger: clone / get_params / set_params,
pickling, Pipeline / GridSearchCV / cross_val_score, n_jobs determinism,
warm start, fitted checks, bad input, the cross-parameter checks, and the
shared fit loop (ConvergenceMonitor, verbose output, ConvergenceWarning)."""

import inspect
import pickle
import logging
import re
import warnings

import numpy as np
from numpy.testing import assert_array_equal
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import (
    check_estimator_cloneable,
    check_estimator_repr,
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct._tagging.base import ConvergenceMonitor
from skgpstruct.calibration import TemperatureScaledTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.features import SequenceVectorizer
from skgpstruct.gp.kernels import LinearKernel
from skgpstruct.likelihoods import CRFLikelihood, RandomizedCRFLikelihood
from skgpstruct.metrics import SCORERS

GP_SMALL = dict(approximation="inducing", kernel_variance=3.0,
             transition_prior_var=1.0, n_inducing=15, n_samples=4, n_predict_samples=16, max_iter=40)


class _ValuesOnly(CRFLikelihood):
    """A likelihood without a gradient (score-function estimator only)."""

    has_gradient = False


# Per estimator: its data (make_chain_data arguments, training size), the
# settings of a quick fit, the fitted parameters compared for determinism,
# the n_jobs configurations, the sparse / string-label fit, the pipeline
# search and the parameter that _validate_params rejects.
CASES = {
    "gp": dict(
        cls=GPStructTagger,
        data=dict(n_sequences=50, n_classes=3, n_features=6, random_state=3), n_train=30,
        quick=dict(random_state=0, **GP_SMALL),
        params=["q_mu_", "q_sqrt_"],
        n_jobs_configs=[dict(random_state=5, **GP_SMALL)],
        sparse=dict(random_state=0, kernel=LinearKernel(), **GP_SMALL),
        names=["B", "I", "O"], dense_match=[],
        warm=dict(random_state=0, **GP_SMALL),
        pipe=GPStructTagger(kernel=LinearKernel(), n_inducing=8, n_samples=3,
                            n_predict_samples=8, max_iter=30, random_state=0),
        grid={"kernel__variance": [0.01, 1.0]}, best=1.0, min_best_score=0.8,
        min_cv_score=0.8,
        bad_param=dict(likelihood="hinge"),
        stochastic=dict(optimizer="adam", learning_rate=0.05, batch_size=10, **{
            k: v for k, v in GP_SMALL.items() if k != "max_iter"}),
        history="elbo_history_", sign=-1.0, label="ELBO",
    ),
    "crf": dict(
        cls=RandomizedCRFTagger,
        data=dict(n_sequences=120, n_classes=4, n_features=8, random_state=1), n_train=80,
        quick=dict(max_iter=5),
        params=["coef_", "transition_"],
        n_jobs_configs=[dict(n_top=2, n_sampled=1, max_iter=3, random_state=7), dict()],
        sparse=dict(max_iter=30),
        names=["ADJ", "NOUN", "VERB", "X"], dense_match=["coef_"],
        warm=dict(max_iter=200),
        pipe=RandomizedCRFTagger(c2=0.01),
        grid={"c2": [0.01, 10.0]}, best=0.01, min_best_score=np.inf,
        min_cv_score=0.9,
        bad_param=dict(transitions="diagonal"),
        stochastic=dict(optimizer="adam"),
        history="loss_history_", sign=1.0, label="loss",
    ),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    """One estimator's case, with its train / test split."""
    spec = dict(CASES[request.param], name=request.param)
    X, y = make_chain_data(**spec["data"])
    n = spec["n_train"]
    spec.update(X_tr=X[:n], y_tr=y[:n], X_te=X[n:], y_te=y[n:],
                n_features=spec["data"]["n_features"])
    return spec


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


def _objective_history(est):
    """The minimised objective after every iteration / epoch."""
    if isinstance(est, GPStructTagger):
        return [-v for v in est.elbo_history_]
    return list(est.loss_history_)


# ------------------------------------------------------- sklearn conventions
@pytest.mark.parametrize("cls", [GPStructTagger, RandomizedCRFTagger])
@pytest.mark.parametrize(
    "check",
    [check_no_attributes_set_in_init, check_parameters_default_constructible,
     check_get_params_invariance, check_set_params, check_estimator_cloneable,
     check_estimator_repr],
)
def test_sklearn_data_free_checks(cls, check):
    check(cls.__name__, cls())


def test_clone_keeps_params_and_drops_fit(case):
    est = _fit(case["cls"](**case["quick"]), case["X_tr"], case["y_tr"])
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    assert not hasattr(copy, "classes_")
    with pytest.raises(NotFittedError):
        copy.predict(case["X_te"])


def test_same_random_state_same_model_for_any_n_jobs(case):
    for kw in case["n_jobs_configs"]:
        a = _fit(case["cls"](n_jobs=1, **kw), case["X_tr"], case["y_tr"])
        b = _fit(case["cls"](n_jobs=2, **kw), case["X_tr"], case["y_tr"])
        for attr in case["params"]:
            np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
        for m1, m2 in zip(a.predict_marginals(case["X_te"]),
                          b.predict_marginals(case["X_te"])):
            np.testing.assert_array_equal(m1, m2)


def test_sparse_features_string_labels_and_pickle(case):
    names = np.array(case["names"])
    ys = [names[t] for t in case["y_tr"]]
    X_sparse = [sp.csr_matrix(x) for x in case["X_tr"]]
    est = _fit(case["cls"](**case["sparse"]), X_sparse, ys)
    assert list(est.classes_) == list(names)
    X_te = [sp.csr_matrix(x) for x in case["X_te"]]
    assert set(np.concatenate(est.predict(X_te))) <= set(names)
    back = pickle.loads(pickle.dumps(est))
    for a, b in zip(est.predict(X_te), back.predict(X_te)):
        np.testing.assert_array_equal(a, b)
    # sparse and dense inputs give the same fit (up to the rounding of
    # sparse products)
    dense = _fit(case["cls"](**case["sparse"]), case["X_tr"], ys)
    for attr in case["dense_match"]:
        np.testing.assert_allclose(getattr(est, attr), getattr(dense, attr), atol=1e-8)


def test_warm_start_continues(case):
    """The second fit starts where the first ended (the same fixed samples
    are redrawn from the same seed)."""
    est = _fit(case["cls"](warm_start=True, **case["warm"]), case["X_tr"], case["y_tr"])
    first = _objective_history(est)[-1]
    _fit(est, case["X_tr"], case["y_tr"])
    assert _objective_history(est)[0] <= first + 1e-6 * abs(first)


def _word_data():
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran"]
    tags = {"the": "DET", "a": "DET", "cat": "N", "mat": "N", "dog": "N",
            "sat": "V", "ran": "V", "on": "P"}
    X, y = [], []
    for _ in range(40):
        sent = list(rng.choice(words, size=rng.integers(2, 7)))
        X.append([{"w": w, "suffix": w[-1:]} for w in sent])
        y.append([tags[w] for w in sent])
    return X, y


def test_pipeline_cross_val_and_grid_search(case):
    X, y = _word_data()
    pipe = Pipeline([("vec", SequenceVectorizer()), ("tagger", clone(case["pipe"]))])
    scorer = SCORERS["flat_accuracy"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        scores = cross_val_score(pipe, X, y, cv=KFold(3), scoring=scorer, n_jobs=2)
        grid = GridSearchCV(pipe, {f"tagger__{k}": v for k, v in case["grid"].items()},
                            cv=KFold(2), scoring=scorer).fit(X, y)
    assert scores.mean() > case["min_cv_score"]
    (key,) = case["grid"]
    assert (grid.best_params_[f"tagger__{key}"] == case["best"]
            or grid.best_score_ > case["min_best_score"])


# ------------------------------------------------------------ fitted checks
def test_not_fitted_and_bad_input(case):
    cls, X_tr, y_tr, X_te = case["cls"], case["X_tr"], case["y_tr"], case["X_te"]
    for method in ("predict", "predict_marginals"):
        with pytest.raises(NotFittedError):
            getattr(cls(), method)(X_te)
    with pytest.raises(NotFittedError):
        cls().score(X_te, case["y_te"])
    with pytest.raises(ValueError, match="single label"):
        cls().fit(X_tr[:3], [np.ones(len(t)) for t in y_tr[:3]])
    with pytest.raises(ValueError, match="tokens in X but .* labels in y"):
        cls().fit(X_tr[:2], [y_tr[0], y_tr[1][:-1]])
    with pytest.raises(ValueError, match="NaN"):
        bad = [x.copy() for x in X_tr[:2]]
        bad[1][0, 0] = np.nan
        cls().fit(bad, y_tr[:2])
    with pytest.raises(ValueError):
        cls(**case["bad_param"]).fit(X_tr, y_tr)
    fitted = _fit(cls(**case["quick"]), X_tr, y_tr)
    d = case["n_features"]
    with pytest.raises(ValueError, match=f"features, expected {d}"):
        fitted.predict([np.zeros((3, d - 1))])
    with pytest.raises(ValueError, match="NaN"):
        fitted.predict([np.full((2, d), np.nan)])


@pytest.mark.parametrize(
    "cls, params, match",
    [
        (GPStructTagger, dict(likelihood=RandomizedCRFLikelihood(n_top=1, n_sampled=1),
                              optimizer="lbfgs"), "smooth objective"),
        (GPStructTagger, dict(gradient="score", optimizer="lbfgs"),
         "gradient='score' needs a stochastic optimizer"),
        # the stochastic weight-space fit runs the exact CRF on the CPU only
        (GPStructTagger, dict(optimizer="svi", likelihood="pseudo"), "optimizer='svi'"),
        (GPStructTagger, dict(optimizer="svi", approximation="inducing"),
         "weight-space form"),
        (GPStructTagger, dict(likelihood=_ValuesOnly()), "gives no gradient"),
        # kernel=None: the variance follows kernel_variance, in both forms
        (GPStructTagger, dict(kernel_variance=1.0, optimize_hyperparameters=True),
         "kernel_variance='elbo'"),
        (GPStructTagger, dict(approximation="inducing", optimize_hyperparameters="scale"),
         "follows kernel_variance='cv'"),
        (RandomizedCRFTagger, dict(n_top=1, n_sampled=1, optimizer="lbfgs"), "lbfgs"),
        # one state per position, the gold one: the loss used to be 0, silently
        (RandomizedCRFTagger, dict(n_top=1, n_sampled=0), "only the gold path"),
        (RandomizedCRFTagger, dict(n_top=0.1), "use n_top >= 2 or n_sampled >= 1"),
        (GPStructTagger, dict(likelihood=RandomizedCRFLikelihood(n_top=1, n_sampled=0),
                              optimizer="adam"), "identically 1"),
    ],
)
def test_cross_parameter_checks(cls, params, match):
    X, y = make_chain_data(n_sequences=6, n_classes=3, n_features=4, random_state=0)
    with pytest.raises(ValueError, match=match):
        cls(**params).fit(X, y)


def test_score_gradient_runs_with_a_stochastic_optimizer():
    X, y = make_chain_data(n_sequences=12, n_classes=3, n_features=4, random_state=0)
    gp = _fit(GPStructTagger(gradient="score", optimizer="adam", n_inducing=8,
                             n_samples=4, n_predict_samples=8, max_iter=2,
                             random_state=0), X, y)
    assert gp.n_iter_ == len(gp.elbo_history_) == 2


# --------------------------------------------------------------- fit loop
def test_convergence_monitor_rule():
    """Relative improvement of the minimised objective under tol, two
    epochs in a row; a worse epoch counts as no improvement; a large
    improvement resets the count."""
    mon = ConvergenceMonitor(tol=1e-3, max_iter=100)
    mon.report(100.0)
    assert not mon.converged and mon.iter == 1
    mon.report(99.99)  # improvement 1e-4 < tol: 1
    assert not mon.converged
    mon.report(50.0)  # large improvement: reset
    mon.report(49.999)  # 1
    assert not mon.converged
    mon.report(49.998)  # 2 in a row
    assert mon.converged
    assert mon.history == [100.0, 99.99, 50.0, 49.999, 49.998] and mon.iter == 5
    worse = ConvergenceMonitor(tol=1e-3, max_iter=100)
    for value in [10.0, 11.0, 12.0]:  # the objective grows: settled
        worse.report(value)
    assert worse.converged
    negative = ConvergenceMonitor(tol=1e-3, max_iter=100)
    for value in [-10.0, -20.0, -30.0, -30.001]:  # an ELBO of 10, 20, 30...
        negative.report(value)
    assert not negative.converged
    negative.report(-30.002)
    assert negative.converged


def test_convergence_monitor_verbose_line(caplog):
    """At verbose=2 each report is an INFO record of the package logger."""
    caplog.set_level(logging.DEBUG, logger="skgpstruct")
    mon = ConvergenceMonitor(tol=0.0, max_iter=5, verbose=2, label="ELBO", sign=-1.0)
    mon.report(12.5)
    assert [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name.startswith("skgpstruct")] == [(logging.INFO, "epoch 1: ELBO -12.5")]


_LINE = re.compile(r"^(iter|epoch) (\d+): (ELBO|loss) (\S+)$")


@pytest.mark.parametrize("stochastic", [False, True], ids=["lbfgs", "epochs"])
def test_verbose_output_is_shared(case, stochastic, capsys, caplog):
    """Both estimators log one record per iteration / epoch, in the same
    format, through the package logger (INFO at verbose=2); nothing on
    stdout."""
    caplog.set_level(logging.DEBUG, logger="skgpstruct")
    kw = dict(case["stochastic"]) if stochastic else dict(case["quick"])
    kw.update(max_iter=3, verbose=2, random_state=0)
    est = _fit(case["cls"](**kw), case["X_tr"], case["y_tr"])
    assert capsys.readouterr().out == ""
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("skgpstruct")]
    lines = [m for m in map(_LINE.match, messages) if m]
    unit = "epoch" if stochastic else "iter"
    history = getattr(est, case["history"])
    assert [m.group(1) for m in lines] == [unit] * len(history)
    assert [int(m.group(2)) for m in lines] == list(range(1, len(history) + 1))
    assert {m.group(3) for m in lines} == {case["label"]}
    np.testing.assert_allclose([float(m.group(4)) for m in lines], history, rtol=1e-5)


@pytest.mark.parametrize("stochastic", [False, True], ids=["lbfgs", "epochs"])
def test_max_iter_warning_and_history(case, stochastic):
    kw = dict(case["stochastic"]) if stochastic else dict(case["quick"])
    kw.update(max_iter=1, random_state=0, tol=0.0)
    est = case["cls"](**kw)
    match = (r"(Adam) reached max_iter=1 epochs before converging" if stochastic
             else r"L-BFGS reached max_iter=1 iterations before converging")
    with pytest.warns(ConvergenceWarning, match=match):
        est.fit(case["X_tr"], case["y_tr"])
    assert est.n_iter_ == len(getattr(est, case["history"])) == 1


def test_predict_proba_reaches_the_marginals_through_a_pipeline(case):
    """``predict_proba`` is ``predict_marginals`` under sklearn's name, so a
    Pipeline ending in a tagger forwards it."""
    X, y = _word_data()
    pipe = Pipeline([("vec", SequenceVectorizer()), ("tagger", clone(case["pipe"]))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe.fit(X, y)
    proba = pipe.predict_proba(X)
    direct = pipe[-1].predict_marginals(pipe[0].transform(X))
    assert len(proba) == len(X)
    for p, d in zip(proba, direct):
        assert_array_equal(p, d)
        assert np.allclose(p.sum(axis=1), 1.0)
    # sklearn-crfsuite's format through the Pipeline (the keyword reaches the tagger)
    assert pipe.predict_proba(X, output="dict") == pipe[-1].predict_marginals(
        pipe[0].transform(X), output="dict")


def test_predict_marginals_dict_output_as_sklearn_crfsuite(case):
    X, y = _word_data()
    pipe = Pipeline([("vec", SequenceVectorizer()), ("tagger", clone(case["pipe"]))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe.fit(X, y)
    tagger, Xv = pipe[-1], pipe[0].transform(X)
    arrays = tagger.predict_marginals(Xv)
    dicts = tagger.predict_marginals(Xv, output="dict")
    assert [len(d) for d in dicts] == [len(a) for a in arrays]
    for a, d in zip(arrays, dicts):
        for row, token in zip(a, d):
            assert list(token) == tagger.classes_.tolist()
            assert all(type(k) is str for k in token)  # Python str, not numpy
            assert list(token.values()) == row.tolist()
    with pytest.raises(ValueError, match="output must be"):
        tagger.predict_marginals(Xv, output="list")
    # one sequence at a time, as sklearn-crfsuite's *_single methods
    for i in (0, len(Xv) - 1):
        assert_array_equal(tagger.predict_marginals_single(Xv[i]), arrays[i])
        assert tagger.predict_marginals_single(Xv[i], output="dict") == dicts[i]
        assert_array_equal(tagger.predict_single(Xv[i]), tagger.predict([Xv[i]])[0])
    with pytest.raises(ValueError, match="output must be"):
        tagger.predict_marginals_single(Xv[0], output="list")


def test_score_counts_an_unseen_label_as_an_error_the_probabilities_refuse_it():
    """``score`` is token accuracy: a held-out label never seen in fit is a
    token the tagger gets wrong (as sklearn's classifiers score it), so
    cross-validation over a large tag set does not fail on a fold; the
    probability of a path through it has no column and is refused."""
    X, y = make_chain_data(n_sequences=12, n_classes=3, n_features=4, length=(3, 6),
                           random_state=0)
    crf = RandomizedCRFTagger(max_iter=30).fit(X, y)
    pred = crf.predict(X[:2])
    y_new = [np.r_[7, pred[0][1:]], pred[1]]
    n = sum(len(p) for p in pred)
    assert crf.score(X[:2], y_new) == pytest.approx((n - 1) / n)
    with pytest.raises(ValueError, match="not seen in fit"):
        crf.predict_path_proba(X[:2], y_new)


def _documented_attributes(cls):
    """Names in the numpydoc Attributes section of ``cls``'s docstring."""
    lines = inspect.cleandoc(cls.__doc__).splitlines()
    start = lines.index("Attributes") + 2  # past the underline
    names = set()
    for line, below in zip(lines[start:], lines[start + 1:] + [""]):
        if below.startswith("---"):  # the next section's title
            break
        if line and not line.startswith(" "):
            names.update(name.strip() for name in line.split(" : ")[0].split(","))
    return names


@pytest.mark.parametrize("make", [
    lambda: GPStructTagger(kernel_variance=1.0, max_iter=3, n_samples=2,
                           n_predict_samples=4, random_state=0),
    lambda: GPStructTagger(**dict(GP_SMALL, max_iter=3), random_state=0),
    lambda: RandomizedCRFTagger(max_iter=3),
    lambda: RandomizedCRFTagger(transitions="low_rank", rank=2, optimizer="adam",
                                max_iter=2, random_state=0),
    lambda: TemperatureScaledTagger(RandomizedCRFTagger(max_iter=3), cv=2),
], ids=["gp-features", "gp-inducing", "crf", "crf-low-rank", "temperature"])
def test_every_fitted_attribute_is_documented(make):
    """The public attributes ``fit`` sets are in the class's Attributes
    section (GPStructTagger's ``jitter_``, which its JitterWarning points
    to, was not)."""
    X, y = make_chain_data(n_sequences=10, n_classes=3, n_features=4, random_state=0)[:2]
    est = _fit(make(), X, y)
    fitted = {name for name in vars(est)
              if name.endswith("_") and not name.startswith("_")}
    assert fitted - _documented_attributes(type(est)) == set()
