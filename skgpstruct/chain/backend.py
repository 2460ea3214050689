"""One choice of device for the chain dynamic programmes.

:func:`get_backend` resolves ``device`` (``"cpu"``, ``"cuda"`` or
``"auto"``, with :func:`skgpstruct._utils.device.resolve_device`) and returns an
object whose methods have the same signatures and results on both devices:

* ``log_likelihood_grad_ragged(U, lengths, B, y)`` -> ``(values, grad_U, grad_B)``
* ``marginals_ragged(U, lengths, B)`` -> ``(unary, pairwise)``
* ``viterbi_ragged(U, lengths, B)`` -> ``(paths, scores)``
* ``randomized_loss_grad_ragged(U, lengths, y, transitions, n_top, n_sampled,
  *, proposal, seeds)`` -> ``(losses, grad_U, grad_transitions)``

as :func:`skgpstruct.chain.log_likelihood_grad_ragged`,
:func:`skgpstruct.chain.marginals_ragged`,
:func:`skgpstruct.chain.viterbi_ragged` and
:func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged` (``B`` may be
shared or one matrix per sequence in the exact ones). Results are numpy
arrays on both devices. The CUDA backend (:mod:`skgpstruct.chain.cuda`,
numba.cuda imported on first use) keeps the lengths and labels of the last
batch on the GPU, so that a fit evaluating the same arrays every iteration
uploads them once; the cache is keyed by the identity of the ``lengths``
(and ``y``) arrays, which must not be changed in place while it is held,
and is released by :meth:`close` or on leaving a ``with`` block.

Examples
--------
>>> import numpy as np
>>> from skgpstruct.chain.backend import get_backend
>>> with get_backend("cpu") as backend:
...     paths, scores = backend.viterbi_ragged(np.eye(3), [1, 2], np.zeros((3, 3)))
>>> paths
array([0, 1, 2])
"""

from .._utils.device import resolve_device
from . import exact
from .randomized import _pass

__all__ = ["get_backend", "CPUBackend", "CUDABackend"]


class _Backend:
    """Context-manager protocol shared by the backends."""

    name = None

    def close(self):
        """Release what the backend holds on its device (nothing on the CPU)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"{type(self).__name__}()"


class CPUBackend(_Backend):
    """The numba kernels of :mod:`skgpstruct.chain` (see :func:`get_backend`)."""

    name = "cpu"

    def log_likelihood_grad_ragged(self, U, lengths, B, y):
        """:func:`skgpstruct.chain.log_likelihood_grad_ragged`."""
        return exact.log_likelihood_grad_ragged(U, lengths, B, y)

    def marginals_ragged(self, U, lengths, B):
        """:func:`skgpstruct.chain.marginals_ragged`."""
        return exact.marginals_ragged(U, lengths, B)

    def viterbi_ragged(self, U, lengths, B):
        """:func:`skgpstruct.chain.viterbi_ragged`."""
        return exact.viterbi_ragged(U, lengths, B)

    def randomized_loss_grad_ragged(self, U, lengths, y, transitions, n_top, n_sampled, *,
                                    proposal="local+global", seeds):
        """:func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged`."""
        return _pass.loss_grad_cpu(U, lengths, y, transitions, n_top, n_sampled,
                                   proposal=proposal, seeds=seeds)


class CUDABackend(_Backend):
    """The numba.cuda kernels of :mod:`skgpstruct.chain.cuda` (see
    :func:`get_backend`); holds the last batch's lengths and labels on the GPU."""

    name = "cuda"

    def __init__(self):
        self._cache = None

    def close(self):
        """Drop the cached device arrays."""
        self._cache = None

    def _chains(self, lengths, y=None):
        """Device lengths (and labels) of a batch, uploaded once per batch."""
        from . import cuda

        c = self._cache
        if c is None or c[0] is not lengths or (y is not None and c[1] is not y):
            self._cache = c = (lengths, y, cuda.DeviceChains(lengths, y))
        return c[2]

    def log_likelihood_grad_ragged(self, U, lengths, B, y):
        """:func:`skgpstruct.chain.cuda.log_likelihood_grad_ragged`."""
        from . import cuda

        return cuda.log_likelihood_grad_ragged(U, self._chains(lengths, y), B)

    def marginals_ragged(self, U, lengths, B):
        """:func:`skgpstruct.chain.cuda.marginals_ragged`."""
        from . import cuda

        return cuda.marginals_ragged(U, self._chains(lengths), B)

    def viterbi_ragged(self, U, lengths, B):
        """:func:`skgpstruct.chain.cuda.viterbi_ragged`."""
        from . import cuda

        return cuda.viterbi_ragged(U, self._chains(lengths), B)

    def randomized_loss_grad_ragged(self, U, lengths, y, transitions, n_top, n_sampled, *,
                                    proposal="local+global", seeds):
        """:func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged` on the
        GPU (float32 ``U`` computes in float32)."""
        from .randomized import _cuda as _cuda_randomized

        return _cuda_randomized.loss_grad_ragged(U, lengths, self._chains(lengths, y),
                                                 transitions, n_top, n_sampled,
                                                 proposal=proposal, seeds=seeds)


def get_backend(device="cpu"):
    """The backend of the chain dynamic programmes on ``device``.

    Parameters
    ----------
    device : {"cpu", "cuda", "auto"} or backend, default="cpu"
        Resolved with :func:`skgpstruct._utils.device.resolve_device` (``"auto"``
        is the GPU when numba.cuda can use one); a backend is returned as is.

    Returns
    -------
    backend : CPUBackend or CUDABackend
        Methods with the same signatures on both (module docstring); use it
        as a context manager (or call ``close()``) to release device caches.

    Raises
    ------
    RuntimeError
        For ``"cuda"`` without a usable GPU.
    ValueError
        For any other value.

    Examples
    --------
    >>> from skgpstruct.chain.backend import get_backend
    >>> get_backend("cpu")
    CPUBackend()
    """
    if isinstance(device, _Backend):
        return device
    return CUDABackend() if resolve_device(device) == "cuda" else CPUBackend()
