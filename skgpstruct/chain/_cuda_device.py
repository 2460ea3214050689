"""Device plumbing and input checks of the CUDA chain functions (numba.cuda).

Every transfer and launch of :mod:`skgpstruct.chain.cuda` and
:mod:`skgpstruct.chain.randomized._cuda` goes through the functions below
(the test that compiles every kernel for a real GPU replaces them), and
:class:`DeviceChains` holds the lengths and labels of a batch on the GPU.
Imported only on demand: it imports numba.cuda.
"""

import numpy as np
from numba import cuda
from numba.core import config as _numba_config

from .._input.arrays import _as_real_array, check_labels, check_lengths

__all__ = ["DeviceChains"]

# a GPU, at least 1 in the simulator (which runs every thread in Python).
_MAX_THREADS = 256
_WARP = 32
# Dynamic shared memory per block kept under the 48 KiB that needs no opt-in.
_SMEM_BUDGET = 40 * 1024
# Threads per block of the one-thread-per-item kernels.
_FLAT_THREADS = 128


# ---------------------------------------------------------- device plumbing
# Every transfer and launch goes through these five functions.
def _is_device(x):
    """Whether ``x`` is a device array (numba's or any CUDA array interface)."""
    from numba.cuda.cudadrv.devicearray import is_cuda_ndarray

    return is_cuda_ndarray(x) or hasattr(x, "__cuda_array_interface__")


def _to_device(x):
    return cuda.to_device(np.ascontiguousarray(x))


def _empty(shape, dtype):
    return cuda.device_array(shape, dtype=dtype)


def _to_host(d):
    return d.copy_to_host()


def _launch(kernel, blocks, threads, shared_bytes, *args):
    kernel[blocks, threads, 0, shared_bytes](*args)


def _threads(n):
    """Power-of-two block size for ``n`` labels or slots."""
    lo = 1 if _numba_config.ENABLE_CUDASIM else _WARP
    lo = min(lo, _MAX_THREADS)
    nt = 1
    while nt < n and nt < _MAX_THREADS:
        nt *= 2
    return max(nt, lo)


def _flat(n_items):
    """(blocks, threads) of a one-thread-per-item launch."""
    threads = max(1, min(_FLAT_THREADS, n_items))
    return max(1, -(-n_items // threads)), threads


def _zeros(shape, dtype, k):
    """A zero-filled device array (``k``: the kernels of its dtype)."""
    d = _empty(shape, dtype)
    n = int(np.prod(shape))
    if n:
        _launch(k.fill, *_flat(n), 0, d.reshape((n,)), dtype.type(0))
    return d


def _dummy(dtype, ndim=2):
    """A one-element device array for an argument a kernel does not read."""
    return _to_device(np.zeros((1,) * ndim, dtype=dtype))


def _device_view(x, name):
    """A numba device array for a device input."""
    if not hasattr(x, "copy_to_host"):  # foreign CUDA array (CuPy, torch, ...)
        x = cuda.as_cuda_array(x)
    if not x.is_c_contiguous():
        raise ValueError(f"{name} must be C-contiguous on the device.")
    return x


def _fetch(x, to_host):
    return _to_host(x) if to_host else x


# --------------------------------------------------------------- checking
def _real_input(x, name, dtype):
    """Device array of ``x`` in ``dtype`` (host input checked and uploaded)."""
    if _is_device(x):
        d = _device_view(x, name)
        if d.dtype != dtype:
            raise TypeError(
                f"{name} is a device array of dtype {d.dtype}; it must have the "
                f"dtype of U ({np.dtype(dtype).name})."
            )
        return d
    return _to_device(_as_real_array(x, name, dtype))


def _potential_dtype(U):
    return np.dtype(np.float32) if np.dtype(U.dtype) == np.float32 else np.dtype(np.float64)


def _check_U(U):
    if _is_device(U):
        d = _device_view(U, "U")
        if d.dtype not in (np.float32, np.float64):
            raise TypeError(f"U on the device must be float32 or float64, got {d.dtype}.")
        shape, dtype = d.shape, np.dtype(d.dtype)
    else:
        dtype = _potential_dtype(U) if hasattr(U, "dtype") else np.dtype(np.float64)
        host = _as_real_array(U, "U", dtype)
        shape = host.shape
        d = None
    if len(shape) != 2:
        raise ValueError(
            f"U must be 2-D of shape (n_tokens, n_labels) (chains stacked), got shape {shape}."
        )
    if shape[0] == 0 or shape[1] == 0:
        raise ValueError(f"U must have at least one token and one label, got shape {shape}.")
    if d is None:
        d = _to_device(host)
    return d, dtype, shape[0], shape[1]


class DeviceChains:
    """Lengths (and labels) of a ragged batch of chains, uploaded once.

    Pass it as ``lengths`` (or ``offsets``) to the functions of this module
    to reuse the same device arrays across calls, e.g. the iterations of a
    fit.

    Parameters
    ----------
    lengths : array-like of int of shape (n_chains,)
        Positive chain lengths.
    y : array-like of int of shape (n_tokens,), default=None
        Stacked labels (non-negative), used by
        :func:`~skgpstruct.chain.cuda.log_likelihood_grad_ragged` and
        :func:`~skgpstruct.chain.randomized._cuda.rdp_loss_grad_ragged` when
        their ``y`` is None.

    Attributes
    ----------
    lengths : ndarray of int64 of shape (n_chains,)
    offsets : ndarray of int64 of shape (n_chains + 1,)
        Chain ``n`` is rows ``offsets[n]:offsets[n + 1]``.
    n_chains, n_tokens : int
    y : ndarray of int64 of shape (n_tokens,) or None
        The labels.
    d_offsets : device array of int64
        ``offsets`` on the device.
    d_y : device array of int64 or None
        ``y`` on the device.

    Examples
    --------
    >>> from skgpstruct.chain.cuda import DeviceChains
    >>> chains = DeviceChains([1, 2], y=[0, 1, 1])  # doctest: +SKIP
    >>> chains.offsets  # doctest: +SKIP
    array([0, 1, 3])
    """

    def __init__(self, lengths, y=None):
        arr = np.asarray(lengths)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"lengths must be integers, got dtype {arr.dtype}.")
        total = int(arr.sum()) if arr.ndim == 1 else 0
        self.offsets = check_lengths(arr, total)
        self.lengths = np.diff(self.offsets)
        self.n_chains = int(self.lengths.shape[0])
        self.n_tokens = int(self.offsets[-1])
        self.d_offsets = _to_device(self.offsets)
        self.y = None
        self.d_y = None
        self._y_max = -1
        if y is not None:
            self.y = check_labels(y, self.n_tokens, np.iinfo(np.int64).max)
            self._y_max = int(self.y.max())
            self.d_y = _to_device(self.y)

    def labels(self, y, n_labels):
        """Labels on the device: ``y`` checked and uploaded, or the stored ones.

        Parameters
        ----------
        y : array-like of int of shape (n_tokens,), device array or None
            Labels; None takes the stored ones. A device array is checked for
            dtype (int64) and shape only.
        n_labels : int
            Labels must lie in ``[0, n_labels)``.

        Returns
        -------
        d_y : device array of int64 of shape (n_tokens,)
        """
        if y is None:
            if self.d_y is None:
                raise ValueError("y is None and these DeviceChains hold no labels.")
            if self._y_max >= n_labels:
                raise ValueError(
                    f"the stored labels go up to {self._y_max}, outside [0, {n_labels})."
                )
            return self.d_y
        if _is_device(y):
            d = _device_view(y, "y")
            if d.dtype != np.int64 or d.shape != (self.n_tokens,):
                raise ValueError(
                    f"y on the device must be int64 of shape ({self.n_tokens},), got "
                    f"{d.dtype} of shape {d.shape}."
                )
            return d
        return _to_device(check_labels(y, self.n_tokens, n_labels))


def _chains(lengths, n_tokens):
    chains = lengths if isinstance(lengths, DeviceChains) else DeviceChains(lengths)
    if chains.n_tokens != n_tokens:
        raise ValueError(f"lengths sum to {chains.n_tokens} but U has {n_tokens} rows.")
    return chains


def _check_B(B, V, n_chains, dtype):
    d = _real_input(B, "B", dtype)
    if len(d.shape) == 2:
        ok = d.shape == (V, V)
        per_chain = False
    elif len(d.shape) == 3:
        ok = d.shape == (n_chains, V, V)
        per_chain = True
    else:
        ok = False
    if not ok:
        raise ValueError(
            f"B must have shape ({V}, {V}) (shared) or ({n_chains}, {V}, {V}) (one per "
            f"chain), got {tuple(d.shape)}."
        )
    if not per_chain:
        d = d.reshape((1, V, V))
    return d, per_chain


def _check_vec(x, name, V, n_chains, dtype):
    if x is None:
        return _to_device(np.zeros((1, V), dtype=dtype))
    d = _real_input(x, name, dtype)
    if len(d.shape) == 1 and d.shape[0] == V:
        return d.reshape((1, V))
    if len(d.shape) == 2 and d.shape == (n_chains, V):
        return d
    raise ValueError(
        f"{name} must have shape ({V},) or ({n_chains}, {V}), got {tuple(d.shape)}."
    )
