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
