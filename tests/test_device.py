"""The ``device`` parameter: skgpstruct._utils.device and the estimators.

No GPU is needed: ``numba.cuda.is_available`` is monkeypatched (it is True
under the CUDA simulator, which ``tests/chain/test_cuda.py`` switches on for
the whole session when it is collected). The CUDA kernels themselves are tested in
``tests/chain/test_cuda.py``.
"""

import importlib
import subprocess
import sys
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from skgpstruct import RandomizedCRFTagger
from skgpstruct._utils.device import cuda_status, resolve_device
from skgpstruct.datasets import make_chain_data


@pytest.fixture
def cuda_available(monkeypatch):
    """Set what ``numba.cuda.is_available()`` answers."""
    cuda = importlib.import_module("numba.cuda")

    def setter(value):
        monkeypatch.setattr(cuda, "is_available", lambda: value)

    return setter


@pytest.fixture
def data():
    return make_chain_data(n_sequences=8, n_classes=3, n_features=4, length=(2, 5),
                           random_state=0)


def test_importing_the_package_does_not_import_numba_cuda():
    code = ("import sys, skgpstruct, skgpstruct.chain; "
            "assert 'numba.cuda' not in sys.modules, 'numba.cuda imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def test_resolve_device(cuda_available):
    cuda_available(True)
    assert cuda_status() == (True, "")
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cuda") == "cuda"
    cuda_available(False)
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="device must be"):
        resolve_device("gpu")


def test_cuda_without_gpu_says_how_to_get_one(cuda_available):
    cuda_available(False)
    with pytest.raises(RuntimeError, match=r'pip install "skgpstruct\[cuda\]"') as info:
        resolve_device("cuda")
    message = str(info.value)
    assert "is_available() is False" in message
    assert "NVIDIA driver" in message and "NUMBA_ENABLE_CUDASIM=1" in message


def test_numba_cuda_unusable(monkeypatch):
    """numba.cuda that cannot be imported, or whose check raises: "auto" is
    the CPU, "cuda" a RuntimeError naming the cause."""
    monkeypatch.setitem(sys.modules, "numba.cuda", None)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(RuntimeError, match="ModuleNotFoundError"):
        resolve_device("cuda")
    monkeypatch.undo()
    cuda = importlib.import_module("numba.cuda")

    def broken():
        raise OSError("driver exploded")

    monkeypatch.setattr(cuda, "is_available", broken)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(RuntimeError, match="driver exploded"):
        resolve_device("cuda")


def test_gpu_seen_but_compiler_target_broken(cuda_available, monkeypatch, data):
    """numba.cuda sees a GPU but its compiler target fails to load (as
    numba-cuda 0.30 does with NumPy 2.5, at the first compilation): "auto"
    warns and runs on the CPU, "cuda" raises naming the cause, before any
    kernel is compiled."""
    cuda_available(True)
    monkeypatch.setattr(importlib.import_module("numba.core.config"), "ENABLE_CUDASIM", 0)
    monkeypatch.setitem(sys.modules, "numba.cuda.cudaimpl", None)
    available, reason = cuda_status()
    assert not available
    assert "compiler target" in reason and "ModuleNotFoundError" in reason
    with pytest.warns(RuntimeWarning, match='device="auto" runs on the CPU'):
        assert resolve_device("auto") == "cpu"
    with pytest.raises(RuntimeError, match="numba-cuda and NumPy"):
        resolve_device("cuda")
    X, y = data
    with pytest.warns(RuntimeWarning, match="compiler target"):
        est = RandomizedCRFTagger(device="auto", c2=0.1, random_state=0).fit(X, y)
    assert est.device_ == "cpu"


def test_no_gpu_auto_is_silent(cuda_available):
    cuda_available(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_device("auto") == "cpu"


def test_tagger_device_cuda_without_gpu_raises_at_fit(cuda_available, data):
    cuda_available(False)
    X, y = data
    est = RandomizedCRFTagger(device="cuda", max_iter=2)
    with pytest.raises(RuntimeError, match=r"skgpstruct\[cuda\]"):
        est.fit(X, y)
    assert not hasattr(est, "coef_")


def test_tagger_device_auto_falls_back_to_cpu(cuda_available, data):
    cuda_available(False)
    X, y = data
    auto = RandomizedCRFTagger(device="auto", c2=0.1, random_state=0).fit(X, y)
    cpu = RandomizedCRFTagger(device="cpu", c2=0.1, random_state=0).fit(X, y)
    assert auto.device_ == "cpu" and cpu.device_ == "cpu"
    assert_array_equal(auto.coef_, cpu.coef_)
    for a, b in zip(auto.predict(X), cpu.predict(X)):
        assert_array_equal(a, b)


def test_tagger_rejects_unknown_device(data):
    X, y = data
    with pytest.raises(ValueError, match="device"):
        RandomizedCRFTagger(device="gpu").fit(X, y)


def test_fitted_on_cuda_predicts_on_cpu_without_gpu(cuda_available, data):
    """A model fitted on the GPU (device_ == "cuda") and used where no GPU is
    usable predicts with the CPU kernels."""
    cuda_available(False)
    X, y = data
    est = RandomizedCRFTagger(c2=0.1, random_state=0).fit(X, y)
    expected = est.predict(X)
    marginals = est.predict_marginals(X)
    est.device_ = "cuda"
    for a, b in zip(est.predict(X), expected):
        assert_array_equal(a, b)
    for a, b in zip(est.predict_marginals(X), marginals):
        assert_array_equal(a, b)
    assert np.isclose(marginals[0].sum(axis=1), 1).all()
