"""Ctrl-C during ``fit`` (issue: reliability).

``fit`` either fits from the best iterate reached before a KeyboardInterrupt
(once the optimiser has completed an iteration or epoch, with a
``FitInterruptedWarning``) or, for an interrupt before that, propagates it and
leaves the estimator exactly as it was: unfitted, or its previous fit. The
interrupt is injected into the objective on a chosen evaluation.
"""

import importlib
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import skgpstruct._tagging.base as base_module
import skgpstruct.optim._lbfgs as optim_module  # where scipy's minimize is called
from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.optim import FitInterruptedWarning


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=12, n_features=5, n_classes=3, random_state=3)[:2]
    return X, y


CASES = {
    "gp": lambda **kw: GPStructTagger(n_samples=8, n_predict_samples=8, kernel_variance=1.0,
                                      random_state=0, **kw),
    "crf": lambda **kw: RandomizedCRFTagger(n_top=None, random_state=0, **kw),
}


#: Where each estimator's stochastic fit calls fit_epochs.
FIT_LOOP_MODULES = {"gp": "skgpstruct._gpstruct.fitting",
                    "crf": "skgpstruct._randomized_crf.tagger"}


def _interrupt_lbfgs(monkeypatch, at):
    """Raise KeyboardInterrupt at the ``at``-th objective evaluation of L-BFGS."""
    real = optim_module.minimize
    calls = {"n": 0}

    def minimize(fun, x0, **kw):
        def wrapped(x):
            calls["n"] += 1
            if calls["n"] == at:
                raise KeyboardInterrupt
            return fun(x)
        return real(wrapped, x0, **kw)

    monkeypatch.setattr(optim_module, "minimize", minimize)
    # the CRF's L-BFGS is minimize_owlqn with nothing penalised
    real_owlqn = base_module.minimize_owlqn

    def owlqn(fun, x0, l1, **kw):
        def wrapped(x):
            calls["n"] += 1
            if calls["n"] == at:
                raise KeyboardInterrupt
            return fun(x)
        return real_owlqn(wrapped, x0, l1, **kw)

    monkeypatch.setattr(base_module, "minimize_owlqn", owlqn)
    return calls


def _fitted_state(est):
    return {k for k in vars(est) if k.endswith("_") and not k.startswith("__")}


@pytest.mark.parametrize("case", CASES)
def test_interrupt_before_the_first_iteration_leaves_it_unfitted(case, data, monkeypatch):
    X, y = data
    est = CASES[case]()
    before = dict(vars(est))
    _interrupt_lbfgs(monkeypatch, at=1)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, y)
    assert vars(est) == before
    assert not _fitted_state(est)


@pytest.mark.parametrize("case", CASES)
def test_interrupt_keeps_the_previous_fit(case, data, monkeypatch):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = CASES[case](max_iter=5).fit(X, y)
    before = dict(vars(est))
    pred = est.predict(X)
    est.set_params(max_iter=7)
    _interrupt_lbfgs(monkeypatch, at=1)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X, y)
    after = dict(vars(est))
    assert after.pop("max_iter") == 7
    before.pop("max_iter")
    assert after.keys() == before.keys()
    assert all(after[k] is before[k] for k in before)
    assert_array_equal(np.concatenate(est.predict(X)), np.concatenate(pred))


@pytest.mark.parametrize("case", CASES)
def test_interrupt_later_fits_from_the_last_iterate(case, data, monkeypatch):
    """The interrupted fit equals a fit stopped by ``max_iter`` at the same
    iteration (L-BFGS-B is deterministic, so its iterates are the same)."""
    X, y = data
    calls = _interrupt_lbfgs(monkeypatch, at=12)
    with pytest.warns(FitInterruptedWarning, match="interrupted after"):
        est = CASES[case](max_iter=200).fit(X, y)
    assert calls["n"] == 12
    n = est.n_iter_
    assert 1 <= n < 12
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = CASES[case](max_iter=n).fit(X, y)
    assert ref.n_iter_ == n
    assert_array_equal(np.concatenate(est.predict(X)), np.concatenate(ref.predict(X)))
    m, r = est.predict_marginals(X), ref.predict_marginals(X)
    assert all(np.array_equal(a, b) for a, b in zip(m, r))


@pytest.mark.parametrize("case", CASES)
def test_interrupt_of_the_stochastic_optimiser(case, data, monkeypatch):
    X, y = data
    calls = {"n": 0}
    real = base_module.fit_epochs

    def fit_epochs(step, x, *args, **kw):
        def wrapped(z, idx, seeds):
            calls["n"] += 1
            if calls["n"] == 7:  # in the fourth epoch of 2 minibatches
                raise KeyboardInterrupt
            return step(z, idx, seeds)
        return real(wrapped, x, *args, **kw)

    # the module whose fit loop calls fit_epochs
    module = importlib.import_module(FIT_LOOP_MODULES[case])
    monkeypatch.setattr(module, "fit_epochs", fit_epochs)
    est = CASES[case](optimizer="adam", batch_size=6, max_iter=50)
    with pytest.warns(FitInterruptedWarning, match="after 3 epochs"):
        est.fit(X, y)
    assert est.n_iter_ == 3
    pred = est.predict(X)
    assert all(set(p) <= set(est.classes_) for p in pred)
