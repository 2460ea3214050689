"""Linear-chain dynamic programmes on an NVIDIA GPU (numba.cuda).

The functions mirror the ragged CPU functions of
:mod:`skgpstruct.chain.exact` with the same arguments and results, for
many chains of different lengths stacked in one array:
:func:`log_partition_ragged`, :func:`marginals_ragged`,
:func:`log_likelihood_grad_ragged` and :func:`viterbi_ragged`, with
transitions ``B`` shared by all chains, shape ``(n_labels, n_labels)``, or
one per chain, shape ``(n_chains, n_labels, n_labels)`` (every (sequence,
sample) pair of a GPstruct minibatch is one chain with its own sampled
``B``). The randomized training pass on the GPU is
:mod:`skgpstruct.chain.randomized._cuda`; code that should run on either
device goes through :func:`skgpstruct.chain.backend.get_backend`.

This module is imported only on demand (``import skgpstruct`` does not
import numba.cuda). It needs numba's CUDA target and a GPU: ``pip install
"skgpstruct[cuda]"`` and an NVIDIA driver; numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported) runs the same
kernels in Python, slowly, which is how the test-suite checks them.

Inputs may be host (numpy) arrays or numba device arrays (anything with
``__cuda_array_interface__``); results are returned as host arrays, or left
on the device with ``to_host=False``. The floating type follows ``U``:
float32 potentials are computed in float32, anything else in float64. Host
inputs are validated like the CPU functions' (NaN and ``+inf`` rejected);
device inputs are checked for shape and type only. :class:`DeviceChains`
uploads the lengths (and labels) of a batch once, for reuse across the
iterations of a fit.

Each chain is one thread block (threads over the labels); see
:mod:`skgpstruct.chain._cuda_kernels` for the kernels and how they agree with
the CPU ones to rounding.

Examples
--------
With a GPU (or the simulator) available:

>>> import numpy as np
>>> from skgpstruct.chain import cuda as chain_cuda
>>> U, B = np.zeros((3, 2)), np.zeros((2, 2))
>>> chain_cuda.log_partition_ragged(U, [1, 2], B)  # doctest: +SKIP
array([0.69314718, 1.38629436])
"""

import numpy as np

from . import _cuda_device as _dev
from ._cuda_device import DeviceChains
from ._cuda_kernels import kernels

__all__ = [
    "DeviceChains",
    "log_partition_ragged",
    "marginals_ragged",
    "log_likelihood_grad_ragged",
    "viterbi_ragged",
]


class _Problem:
    """Checked, uploaded inputs of an exact ragged function."""

    def __init__(self, U, lengths, B, start, end):
        self.U, self.dtype, self.n_tokens, self.V = _dev._check_U(U)
        self.chains = _dev._chains(lengths, self.n_tokens)
        self.n_chains = self.chains.n_chains
        self.B, self.per_chain = _dev._check_B(B, self.V, self.n_chains, self.dtype)
        self.start = _dev._check_vec(start, "start", self.V, self.n_chains, self.dtype)
        self.end = _dev._check_vec(end, "end", self.V, self.n_chains, self.dtype)
        self.k = kernels(self.dtype)
        self.itemsize = self.dtype.itemsize


def _forward_backward(p, do_bwd):
    """Launch ``prep_exp`` and ``fb``; return (E, bmax, fwd, bwd, logz)."""
    V, nB = p.V, p.B.shape[0]
    E = _dev._empty((nB, V * V), p.dtype)
    F = _dev._empty((nB, V * V), p.dtype)
    bmax = _dev._empty((nB, V), p.dtype)
    rmax = _dev._empty((nB, V), p.dtype)
    _dev._launch(p.k.prep_exp, *_dev._flat(nB * V), 0, p.B, E, bmax, F, rmax)
    fwd = _dev._empty((p.n_tokens, V), p.dtype)
    bwd = _dev._empty((p.n_tokens, V), p.dtype) if do_bwd else _dev._dummy(p.dtype)
    logz = _dev._empty((p.n_chains,), p.dtype)
    nt = _dev._threads(V)
    base = V + nt
    stage = (base + V * V) * p.itemsize <= _dev._SMEM_BUDGET
    shared = (base + (V * V if stage else 0)) * p.itemsize
    _dev._launch(p.k.fb, p.n_chains, nt, shared, p.U, p.chains.d_offsets, p.B, E, bmax, F,
            rmax, p.start, p.end, fwd, bwd, logz, bool(do_bwd), bool(stage))
    return E, bmax, fwd, bwd, logz


def _marginals_pass(p, E, bmax, fwd, bwd, logz, y):
    """Launch ``marginals``; ``y`` given: log-likelihood gradients instead."""
    V = p.V
    want_grad = y is not None
    A = _dev._empty((p.n_tokens, V), p.dtype)
    G = _dev._empty((p.n_tokens, V), p.dtype)
    out_unary = _dev._empty((p.n_tokens, V), p.dtype)
    pair = _dev._empty((p.n_chains, V * V), p.dtype)
    values = _dev._empty((p.n_chains,), p.dtype) if want_grad else _dev._dummy(p.dtype, 1)
    y_arg = y if want_grad else _dev._to_device(np.zeros(1, dtype=np.int64))
    nt = _dev._threads(V)
    _dev._launch(p.k.marginals, p.n_chains, nt, nt * p.itemsize, p.U, p.chains.d_offsets, p.B,
            E, bmax, p.start, p.end, fwd, bwd, logz, A, G, y_arg, out_unary, pair, values,
            bool(want_grad))
    return out_unary, pair, values


# ------------------------------------------------------------ exact API
def log_partition_ragged(U, lengths, B, start=None, end=None, *, to_host=True):
    """Log partition function of many chains stacked in one array.

    Parameters
    ----------
    U : array-like or device array of shape (n_tokens, n_labels)
        Unary potentials of all chains stacked; float32 or float64 (other
        types are converted to float64).
    lengths : array-like of int of shape (n_chains,) or DeviceChains
        Chain lengths, summing to ``n_tokens``.
    B : array-like or device array of shape (n_labels, n_labels) or (n_chains, n_labels, n_labels)
        Transitions shared by all chains, or one matrix per chain.
    start, end : array-like of shape (n_labels,) or (n_chains, n_labels), default=None
        Added to the first / last position of every chain (or of each).
    to_host : bool, default=True
        Return a numpy array; False leaves the result on the device.

    Returns
    -------
    log_z : ndarray of shape (n_chains,)
        ``-inf`` for a chain whose every path is forbidden.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.cuda import log_partition_ragged
    >>> log_partition_ragged(np.zeros((3, 2)), [1, 2], np.zeros((2, 2)))  # doctest: +SKIP
    array([0.69314718, 1.38629436])
    """
    p = _Problem(U, lengths, B, start, end)
    logz = _forward_backward(p, False)[4]
    return _dev._fetch(logz, to_host)


def marginals_ragged(U, lengths, B, start=None, end=None, *, to_host=True):
    """Unary and summed pairwise marginals of many stacked chains.

    Parameters
    ----------
    U : array-like or device array of shape (n_tokens, n_labels)
        Unary potentials of the chains, stacked.
    lengths, B, start, end
        As in :func:`log_partition_ragged`.
    to_host : bool, default=True
        Whether to copy the results to the host (else device arrays).

    Returns
    -------
    unary : ndarray of shape (n_tokens, n_labels)
        Per-token marginals, stacked like the rows of ``U``.
    pairwise : ndarray of shape (n_chains, n_labels, n_labels)
        ``sum_t p(y_{t-1} = i, y_t = j)`` of each chain.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.cuda import marginals_ragged
    >>> U, B = np.zeros((3, 2)), np.zeros((2, 2))
    >>> unary, pairwise = marginals_ragged(U, [1, 2], B)  # doctest: +SKIP
    >>> unary  # doctest: +SKIP
    array([[0.5, 0.5],
           [0.5, 0.5],
           [0.5, 0.5]])
    """
    p = _Problem(U, lengths, B, start, end)
    E, bmax, fwd, bwd, logz = _forward_backward(p, True)
    out_unary, pair, _ = _marginals_pass(p, E, bmax, fwd, bwd, logz, None)
    pair = pair.reshape((p.n_chains, p.V, p.V))
    return _dev._fetch(out_unary, to_host), _dev._fetch(pair, to_host)


def log_likelihood_grad_ragged(U, lengths, B, y=None, start=None, end=None, *, to_host=True):
    """Log-likelihood of many stacked labelled chains and its gradients.

    Parameters
    ----------
    U, lengths, B, start, end, to_host
        As in :func:`log_partition_ragged`.
    y : array-like of int of shape (n_tokens,), device array or None
        Stacked labels in ``[0, n_labels)``; None takes the labels of
        ``lengths`` (a :class:`DeviceChains` made with ``y``).

    Returns
    -------
    values : ndarray of shape (n_chains,)
        log p(y_n | U_n, B_n) per chain.
    grad_U : ndarray of shape (n_tokens, n_labels)
        ``onehot(y) - unary marginals``; the gradient with respect to
        ``start`` / ``end`` is its first / last row of each chain.
    grad_B : ndarray of shape (n_labels, n_labels) or (n_chains, n_labels, n_labels)
        ``pair counts of y - summed pairwise marginals``: summed over the
        chains for a shared ``B``, per chain for per-chain ``B``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.cuda import log_likelihood_grad_ragged
    >>> U, B = np.zeros((3, 2)), np.zeros((2, 2))
    >>> values, gU, gB = log_likelihood_grad_ragged(U, [1, 2], B, [0, 1, 1])  # doctest: +SKIP
    >>> np.round(values, 6)  # doctest: +SKIP
    array([-0.693147, -1.386294])
    """
    p = _Problem(U, lengths, B, start, end)
    d_y = p.chains.labels(y, p.V)
    E, bmax, fwd, bwd, logz = _forward_backward(p, True)
    gU, pair, values = _marginals_pass(p, E, bmax, fwd, bwd, logz, d_y)
    V = p.V
    if p.per_chain:
        gB = pair.reshape((p.n_chains, V, V))
    else:
        total = _dev._empty((V * V,), p.dtype)
        _dev._launch(p.k.sum_chains, *_dev._flat(V * V), 0, pair, total)
        gB = total.reshape((V, V))
    return _dev._fetch(values, to_host), _dev._fetch(gU, to_host), _dev._fetch(gB, to_host)


def viterbi_ragged(U, lengths, B, start=None, end=None, *, to_host=True):
    """Most probable label path of each of many stacked chains.

    Parameters
    ----------
    U, lengths, B, start, end, to_host
        As in :func:`log_partition_ragged`.

    Returns
    -------
    paths : ndarray of int64 of shape (n_tokens,)
        Best paths, stacked like the rows of ``U``; ties go to the lowest
        label index, as :func:`skgpstruct.chain.viterbi`.
    scores : ndarray of shape (n_chains,)
        Their unnormalised scores; ``-inf`` for a chain whose every path is
        forbidden (its path is then all zeros).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.cuda import viterbi_ragged
    >>> U = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    >>> viterbi_ragged(U, [1, 2], np.zeros((2, 2)))  # doctest: +SKIP
    (array([0, 1, 0]), array([1., 2.]))
    """
    p = _Problem(U, lengths, B, start, end)
    V = p.V
    Bflat = p.B.reshape((p.B.shape[0], V * V))
    delta = _dev._empty((p.n_tokens, V), p.dtype)
    back = _dev._empty((p.n_tokens, V), np.int32)
    paths = _dev._empty((p.n_tokens,), np.int64)
    scores = _dev._empty((p.n_chains,), p.dtype)
    nt = _dev._threads(V)
    stage = (V + V * V) * p.itemsize <= _dev._SMEM_BUDGET
    shared = (V + (V * V if stage else 0)) * p.itemsize
    _dev._launch(p.k.viterbi, p.n_chains, nt, shared, p.U, p.chains.d_offsets, Bflat, p.start,
            p.end, delta, back, paths, scores, bool(stage))
    return _dev._fetch(paths, to_host), _dev._fetch(scores, to_host)
