"""Shared fixtures of the gp/ tests."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True)
def _single_threaded_blas():
    """The matrices of these tests are tiny: threaded BLAS only adds
    wake-up latency (milliseconds per call on a loaded machine)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture
def check_weight_space_grad(assert_grad_fd):
    """``check(obj, x, idx, seeds, scale, learn)``: the gradient of a
    :class:`~skgpstruct.gp.weight_space.WeightSpaceObjective` at ``x``
    against central differences over every free entry (a variance that is
    not learned must have a zero gradient and is left out), and no block
    identically zero (so that every block really is checked)."""

    def check(obj, x, idx, seeds, scale, learn):
        value, grad = obj(x, idx, seeds, scale)
        assert np.isfinite(value) and grad.shape == (obj.layout.size,)
        free = np.ones(obj.layout.size, bool)
        start = obj.layout.slices["hyperparameters"].start
        for i, learned in enumerate(learn):
            if not learned:
                assert grad[start + i] == 0.0
                free[start + i] = False

        def f(z_free):
            z = x.copy()
            z[free] = z_free
            return obj(z, idx, seeds, scale)[0]

        assert_grad_fd(f, x[free], grad[free])
        for name in ("m", "s", "m_bin", "s_bin"):
            assert np.any(grad[obj.layout.slices[name]] != 0.0), name

    return check


@pytest.fixture
def check_chunk_invariance(monkeypatch):
    """``check(obj, x, idx, seeds, v_ref, g_ref)``: a weight-space objective
    cut into chunks of 3 sequences gives, on two threads, exactly what it
    gives serially (same chunks, summed in chunk order), and within a few
    ulps of ``(v_ref, g_ref)`` (other chunks: the same sum in another
    order)."""
    from joblib import Parallel
    from numpy.testing import assert_allclose, assert_array_equal

    import skgpstruct.gp.weight_space as ws

    def check(obj, x, idx, seeds, v_ref, g_ref):
        monkeypatch.setattr(ws, "CHUNK_SEQUENCES", 3)
        v_ser, g_ser = obj(x, idx, seeds)
        with Parallel(n_jobs=2, backend="threading") as parallel:
            v_par, g_par = obj(x, idx, seeds, parallel=parallel)
        assert v_par == v_ser
        assert_array_equal(g_par, g_ser)
        assert_allclose(v_ser, v_ref, rtol=1e-12)
        assert_allclose(g_ser, g_ref, rtol=1e-10, atol=1e-12)

    return check
