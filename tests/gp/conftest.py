"""Shared fixtures of the gp/ tests."""

import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True)
def _single_threaded_blas():
    """The matrices of these tests are tiny: threaded BLAS only adds
    wake-up latency (milliseconds per call on a loaded machine)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield
