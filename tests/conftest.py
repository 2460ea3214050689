"""Shared fixtures.

``shared_dir`` points at the benchmark data folder that sits beside the
repository (``../shared``); tests that need it skip when it is absent.
The random seed of the statistical tests is printed and can be overridden with
``SKGPSTRUCT_SEED`` (hmmlearn does the same with ``HMMLEARN_SEED``).
"""

import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = (REPO_ROOT / ".." / "shared").resolve()


def pytest_report_header(config):
    return [f"skgpstruct seed: {_seed()} (set SKGPSTRUCT_SEED to change)"]


def _seed():
    return int(os.environ.get("SKGPSTRUCT_SEED", "0"))


@pytest.fixture
def seed():
    """Base seed of the statistical tests (``SKGPSTRUCT_SEED``, default 0)."""
    return _seed()


@pytest.fixture
def rng(seed):
    """A fresh ``numpy.random.Generator`` seeded from :func:`seed`."""
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def shared_dir():
    """The ``../shared`` data folder; skips the test when it is absent."""
    if not (SHARED_DIR / "data").is_dir():
        pytest.skip("../shared/data is not available beside the repository")
    return SHARED_DIR


def fd_gradient(f, x, h=1e-6):
    """Central finite differences of the scalar ``f`` at the flat vector ``x``."""
    x = np.asarray(x, dtype=np.float64)
    g = np.empty_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2.0 * h)
    return g


def _assert_grad_fd(f, x, grad, *, h=1e-6, rtol=1e-5, atol=1e-6):
    """Assert that ``grad`` equals the central differences of ``f`` at ``x``.

    ``f`` maps a flat float64 vector to a float; ``grad`` is the analytic
    gradient at ``x`` (any shape, compared flattened).
    """
    expected = fd_gradient(f, x, h)
    np.testing.assert_allclose(np.ravel(grad), expected, rtol=rtol, atol=atol)


@pytest.fixture
def assert_grad_fd():
    """The one finite-difference gradient check of the test suite:
    ``assert_grad_fd(f, x, grad, h=1e-6, rtol=1e-5, atol=1e-6)``."""
    return _assert_grad_fd
