"""The memory guard of GPStructTagger.fit (``skgpstruct._utils.memory``)."""

import numpy as np
import pytest

from skgpstruct import GPStructTagger
from skgpstruct._utils.memory import (
    COVARIANCE_COPIES,
    LBFGS_COPIES,
    MemoryBudgetError,
    check_fit_memory,
    memory_budget,
)
from skgpstruct.datasets import make_chain_data

GIB = 1024.0 ** 3


def test_budget_from_environment(monkeypatch):
    monkeypatch.setenv("SKGPSTRUCT_MEMORY_BUDGET", "2.5")
    assert memory_budget() == 2.5 * GIB
    for bad in ("0", "-1", "lots"):
        monkeypatch.setenv("SKGPSTRUCT_MEMORY_BUDGET", bad)
        with pytest.raises(ValueError, match="SKGPSTRUCT_MEMORY_BUDGET"):
            memory_budget()
    monkeypatch.delenv("SKGPSTRUCT_MEMORY_BUDGET")
    assert 0 < memory_budget() < 1e15


def test_estimate_by_hand(monkeypatch):
    monkeypatch.setenv("SKGPSTRUCT_MEMORY_BUDGET", "1000")
    K, V, M, T, S = 2, 3, 10, 7, 5
    mean_field = check_fit_memory(approximation="inducing", posterior="mean_field",
                                  n_components=K, n_classes=V, n_inducing=M,
                                  max_length=T, n_samples=S)
    expected = 8.0 * (LBFGS_COPIES * K * V * M * (M + 1) / 2
                      + COVARIANCE_COPIES * (K * V * T * T + K * S * V * V))
    assert mean_field == expected
    coupled = check_fit_memory(approximation="inducing", posterior="coupled",
                               n_components=K, n_classes=V, n_inducing=M,
                               max_length=T, n_samples=S)
    d = V * M
    expected = 8.0 * (LBFGS_COPIES * K * d * (d + 1) / 2
                      + COVARIANCE_COPIES * (K * (T * V) ** 2 + K * S * V * V))
    assert coupled == expected
    features = check_fit_memory(approximation="features", posterior="mean_field",
                                n_components=1, n_classes=V, n_inducing=M,
                                max_length=10**6, n_samples=S)
    assert features == 8.0 * COVARIANCE_COPIES * S * V * V


def test_coupled_posterior_on_chunking_sizes_is_refused(monkeypatch):
    """The coupled posterior with M = 500 on chunking's 23 labels has
    (23 * 500)^2 / 2 = 66e6 parameters, about 24 GiB with the optimiser's
    copies: refused on a 16 GiB budget, with what to lower."""
    monkeypatch.setenv("SKGPSTRUCT_MEMORY_BUDGET", "16")
    kw = dict(approximation="inducing", n_components=1, n_classes=23, n_inducing=500,
              max_length=78, n_samples=100)
    with pytest.raises(MemoryBudgetError, match=r"(?s)posterior's Cholesky.*lower n_inducing"):
        check_fit_memory(posterior="coupled", **kw)
    assert check_fit_memory(posterior="mean_field", **kw) < 16 * GIB


def test_fit_refuses_before_allocating_and_stays_unfitted(monkeypatch):
    X, y = make_chain_data(n_sequences=6, n_features=3, n_classes=3, random_state=0)[:2]
    est = GPStructTagger(approximation="inducing", posterior="coupled", n_inducing=20,
                         max_iter=2, random_state=0)
    monkeypatch.setenv("SKGPSTRUCT_MEMORY_BUDGET", str(1e-4))  # 107 kB
    before = dict(vars(est))
    with pytest.raises(MemoryBudgetError, match="SKGPSTRUCT_MEMORY_BUDGET"):
        est.fit(X, y)
    assert vars(est) == before
    # a long sequence in the inducing form: the T x T covariances are named
    Xl = [np.vstack(X)]
    yl = [np.concatenate(y)]
    est.set_params(posterior="mean_field", n_inducing=5)
    with pytest.raises(MemoryBudgetError, match="approximation='features'"):
        est.fit(Xl * 1, yl)


def test_public_exceptions_module():
    from skgpstruct import exceptions

    assert issubclass(exceptions.MemoryBudgetError, MemoryError)
    assert issubclass(exceptions.JitterWarning, RuntimeWarning)
    assert issubclass(exceptions.FitInterruptedWarning, UserWarning)

