"""Linear-chain dynamic programmes on an NVIDIA GPU (numba.cuda).

The functions mirror the ragged CPU functions of
:mod:`skgpstruct.chain.exact` (and the randomized training pass of
:mod:`skgpstruct.chain._rdp_batch`) with the same arguments and results, for
many chains of different lengths stacked in one array:

* :func:`log_partition_ragged`, :func:`marginals_ragged`,
  :func:`log_likelihood_grad_ragged` and :func:`viterbi_ragged`, with
  transitions ``B`` shared by all chains, shape ``(n_labels, n_labels)``, or
  one per chain, shape ``(n_chains, n_labels, n_labels)`` (every (sequence,
  sample) pair of a GPstruct minibatch is one chain with its own sampled
  ``B``);
* :func:`rdp_loss_grad_ragged`, the randomized loss and gradient used to
  train :class:`~skgpstruct.RandomizedCRFTagger`.

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

import math

import numpy as np
from numba import cuda
from numba.core import config as _numba_config

from ._cuda_kernels import kernels
from ._utils import _as_real_array, check_labels, check_lengths

__all__ = [
    "DeviceChains",
    "log_partition_ragged",
    "marginals_ragged",
    "log_likelihood_grad_ragged",
    "viterbi_ragged",
    "rdp_loss_grad_ragged",
]

# Threads per block: a power of two (the block reductions need it) covering
# the labels (or slots) of a chain, at most _MAX_THREADS; at least a warp on
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
        :func:`log_likelihood_grad_ragged` and :func:`rdp_loss_grad_ragged`
        when their ``y`` is None.

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


class _Problem:
    """Checked, uploaded inputs of an exact ragged function."""

    def __init__(self, U, lengths, B, start, end):
        self.U, self.dtype, self.n_tokens, self.V = _check_U(U)
        self.chains = _chains(lengths, self.n_tokens)
        self.n_chains = self.chains.n_chains
        self.B, self.per_chain = _check_B(B, self.V, self.n_chains, self.dtype)
        self.start = _check_vec(start, "start", self.V, self.n_chains, self.dtype)
        self.end = _check_vec(end, "end", self.V, self.n_chains, self.dtype)
        self.k = kernels(self.dtype)
        self.itemsize = self.dtype.itemsize


def _forward_backward(p, do_bwd):
    """Launch ``prep_exp`` and ``fb``; return (E, bmax, fwd, bwd, logz)."""
    V, nB = p.V, p.B.shape[0]
    E = _empty((nB, V * V), p.dtype)
    F = _empty((nB, V * V), p.dtype)
    bmax = _empty((nB, V), p.dtype)
    rmax = _empty((nB, V), p.dtype)
    _launch(p.k.prep_exp, *_flat(nB * V), 0, p.B, E, bmax, F, rmax)
    fwd = _empty((p.n_tokens, V), p.dtype)
    bwd = _empty((p.n_tokens, V), p.dtype) if do_bwd else _dummy(p.dtype)
    logz = _empty((p.n_chains,), p.dtype)
    nt = _threads(V)
    base = V + nt
    stage = (base + V * V) * p.itemsize <= _SMEM_BUDGET
    shared = (base + (V * V if stage else 0)) * p.itemsize
    _launch(p.k.fb, p.n_chains, nt, shared, p.U, p.chains.d_offsets, p.B, E, bmax, F,
            rmax, p.start, p.end, fwd, bwd, logz, bool(do_bwd), bool(stage))
    return E, bmax, fwd, bwd, logz


def _marginals_pass(p, E, bmax, fwd, bwd, logz, y):
    """Launch ``marginals``; ``y`` given: log-likelihood gradients instead."""
    V = p.V
    want_grad = y is not None
    A = _empty((p.n_tokens, V), p.dtype)
    G = _empty((p.n_tokens, V), p.dtype)
    out_unary = _empty((p.n_tokens, V), p.dtype)
    pair = _empty((p.n_chains, V * V), p.dtype)
    values = _empty((p.n_chains,), p.dtype) if want_grad else _dummy(p.dtype, 1)
    y_arg = y if want_grad else _to_device(np.zeros(1, dtype=np.int64))
    nt = _threads(V)
    _launch(p.k.marginals, p.n_chains, nt, nt * p.itemsize, p.U, p.chains.d_offsets, p.B,
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
    return _fetch(logz, to_host)


def marginals_ragged(U, lengths, B, start=None, end=None, *, to_host=True):
    """Unary and summed pairwise marginals of many stacked chains.

    Parameters
    ----------
    U, lengths, B, start, end, to_host
        As in :func:`log_partition_ragged`.

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
    return _fetch(out_unary, to_host), _fetch(pair, to_host)


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
        total = _empty((V * V,), p.dtype)
        _launch(p.k.sum_chains, *_flat(V * V), 0, pair, total)
        gB = total.reshape((V, V))
    return _fetch(values, to_host), _fetch(gU, to_host), _fetch(gB, to_host)


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
        Their unnormalised scores.

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
    delta = _empty((p.n_tokens, V), p.dtype)
    back = _empty((p.n_tokens, V), np.int32)
    paths = _empty((p.n_tokens,), np.int64)
    scores = _empty((p.n_chains,), p.dtype)
    nt = _threads(V)
    stage = (V + V * V) * p.itemsize <= _SMEM_BUDGET
    shared = (V + (V * V if stage else 0)) * p.itemsize
    _launch(p.k.viterbi, p.n_chains, nt, shared, p.U, p.chains.d_offsets, Bflat, p.start,
            p.end, delta, back, paths, scores, bool(stage))
    return _fetch(paths, to_host), _fetch(scores, to_host)


# ---------------------------------------------------------- randomized DP
def _inout(x, name, shape, dtype):
    """Device array for an accumulated output: (device array, host or None)."""
    if _is_device(x):
        d = _device_view(x, name)
        if tuple(d.shape) != tuple(shape) or d.dtype != dtype:
            raise ValueError(
                f"{name} must have shape {tuple(shape)} and dtype {np.dtype(dtype).name}, "
                f"got {tuple(d.shape)} {d.dtype}."
            )
        return d, None
    if not isinstance(x, np.ndarray) or x.shape != tuple(shape) or x.dtype != dtype:
        raise ValueError(
            f"{name} must be a numpy array of shape {tuple(shape)} and dtype "
            f"{np.dtype(dtype).name} (it is added to in place)."
        )
    return _to_device(x), x


def rdp_loss_grad_ragged(U, offsets, y, B, left, right, lowrank, code, q_global, k1,
                         uniforms, expB, shift_B, store_budget, gU, gB, gL, gR, *,
                         to_host=True):
    """Randomized negative log-likelihood of stacked sequences + gradient.

    The CUDA version of
    :func:`skgpstruct.chain._rdp_batch.rdp_loss_grad_ragged`, with the same
    arguments and results: given the same uniforms it gives the same losses
    and gradients to rounding (a uniform falling within rounding of a
    boundary of the proposal's cumulative sum may pick the neighbouring
    state).

    Parameters
    ----------
    U : array-like or device array of shape (n_tokens, N)
        Unary potentials of all sequences stacked (float32 or float64).
    offsets : array-like of int64 of shape (n_sequences + 1,) or DeviceChains
        Sequence ``n`` is rows ``offsets[n]:offsets[n + 1]``.
    y : array-like of int of shape (n_tokens,), device array or None
        Gold labels (forced onto the sub-lattice); None takes those of a
        :class:`DeviceChains` ``offsets``.
    B : array-like of shape (N, N) or (0, 0)
        Dense transitions (unused, may be empty, when ``lowrank``).
    left, right : array-like of shape (N, r) or (0, 0)
        Low-rank transitions ``B = left @ right.T`` (used when ``lowrank``).
    lowrank : bool
    code : int
        Proposal kind, see :func:`skgpstruct.chain._rdp_batch.proposal_code`.
    q_global : array-like of shape (N,)
        The global proposal vector (unused for codes 0 and 1).
    k1 : int
        Deterministic states per position, gold included, in ``[1, N]``.
    uniforms : array-like of shape (n_tokens, K2)
        Uniform draws of the sampled slots, stacked like ``U``.
    expB, shift_B, store_budget
        Accepted so that the call matches the CPU kernel's, and not used:
        the device pass runs in log space, which needs neither a scaled
        ``exp(B)`` nor stored edge weights.
    gU : ndarray or device array of shape (n_tokens, N)
        Added to: gradient of the summed loss with respect to ``U``.
    gB : ndarray or device array of shape (N, N) (dense) or any (low rank)
        Added to (dense transitions).
    gL, gR : ndarray or device array of shape (N, r) (low rank) or any (dense)
        Added to (low-rank transitions).
    to_host : bool, default=True
        Return the losses as a numpy array (host ``gU``, ``gB``, ``gL``,
        ``gR`` are always updated in place).

    Returns
    -------
    loss : ndarray of shape (n_sequences,)
        ``log Z-hat_n - score_n(y_n)``; ``+inf`` (and nothing added to the
        gradients) for a sequence whose sub-lattice carries no path.
    """
    d_U, dtype, n_tokens, N = _check_U(U)
    chains = offsets if isinstance(offsets, DeviceChains) else _chains_from_offsets(offsets)
    if chains.n_tokens != n_tokens:
        raise ValueError(f"offsets end at {chains.n_tokens} but U has {n_tokens} rows.")
    d_y = chains.labels(y, N)
    lowrank = bool(lowrank)
    code = int(code)
    if code not in (0, 1, 2, 3):
        raise ValueError(f"code must be a proposal code in 0..3, got {code}.")
    k1 = int(k1)
    if not 1 <= k1 <= N:
        raise ValueError(f"k1 must be in [1, {N}], got {k1}.")
    k = kernels(dtype)
    if lowrank:
        d_left = _real_input(left, "left", dtype)
        d_right = _real_input(right, "right", dtype)
        if len(d_left.shape) != 2 or d_left.shape[0] != N or d_right.shape != d_left.shape:
            raise ValueError(
                f"left and right must have the same shape (N, r) with N = {N}, got "
                f"{tuple(d_left.shape)} and {tuple(d_right.shape)}."
            )
        d_B = _dummy(dtype)
        rank = d_left.shape[1]
        d_gB, h_gB = _dummy(dtype), None
        d_gL, h_gL = _inout(gL, "gL", (N, rank), dtype)
        d_gR, h_gR = _inout(gR, "gR", (N, rank), dtype)
    else:
        d_B = _real_input(B, "B", dtype)
        if tuple(d_B.shape) != (N, N):
            raise ValueError(f"B must have shape ({N}, {N}), got {tuple(d_B.shape)}.")
        d_left = d_right = _dummy(dtype)
        d_gB, h_gB = _inout(gB, "gB", (N, N), dtype)
        d_gL = d_gR = _dummy(dtype)
        h_gL = h_gR = None
    d_gU, h_gU = _inout(gU, "gU", (n_tokens, N), dtype)
    if code >= 2:
        d_q = _real_input(q_global, "q_global", dtype)
        if tuple(d_q.shape) != (N,):
            raise ValueError(f"q_global must have shape ({N},), got {tuple(d_q.shape)}.")
    else:
        d_q = _dummy(dtype, 1)
    if _is_device(uniforms):
        d_unif = _device_view(uniforms, "uniforms")
        if d_unif.dtype != dtype:
            raise TypeError(f"uniforms on the device must have the dtype of U ({dtype.name}).")
    else:
        d_unif = None
        h_unif = np.ascontiguousarray(uniforms, dtype=dtype)
    shape_u = tuple(d_unif.shape) if d_unif is not None else h_unif.shape
    if len(shape_u) != 2 or shape_u[0] != n_tokens:
        raise ValueError(f"uniforms must have shape ({n_tokens}, K2), got {shape_u}.")
    k2 = shape_u[1]
    if d_unif is None:
        if k2 and (np.any(h_unif < 0) or np.any(h_unif >= 1)):
            raise ValueError("uniforms must lie in [0, 1).")
        d_unif = _to_device(h_unif) if k2 else _dummy(dtype)
    K = k1 + k2
    Q = _empty((n_tokens, N), dtype)
    idx = _empty((n_tokens, K), np.int64)
    logw = _empty((n_tokens, K), dtype)
    sc = dtype.type
    _launch(k.rdp_select, *_flat(n_tokens), 0, d_U, d_y, code, d_q,
            sc(1.0 / N), sc(N), k1, k2, d_unif, sc(math.log(max(k2, 1))), Q, idx, logw)
    alpha = _empty((n_tokens, K), dtype)
    beta = _empty((n_tokens, K), dtype)
    loss = _empty((chains.n_chains,), dtype)
    nt = _threads(K)
    stage = (K + nt + K * K) * dtype.itemsize <= _SMEM_BUDGET
    Eg = _dummy(dtype) if stage else _empty((chains.n_chains, K * K), dtype)
    shared = (K + nt + (K * K if stage else 0)) * dtype.itemsize
    _launch(k.rdp_fb, chains.n_chains, nt, shared, d_U, chains.d_offsets, d_y, d_B, d_left,
            d_right, lowrank, idx, logw, alpha, beta, Eg, loss, d_gU, d_gB, d_gL, d_gR,
            bool(stage))
    for d, h in ((d_gU, h_gU), (d_gB, h_gB), (d_gL, h_gL), (d_gR, h_gR)):
        if h is not None:
            h[...] = _to_host(d)
    return _fetch(loss, to_host)


def _chains_from_offsets(offsets):
    arr = np.asarray(offsets)
    if arr.dtype.kind not in "iu" or arr.ndim != 1 or arr.size < 2 or arr[0] != 0:
        raise ValueError(
            "offsets must be a 1-D integer array starting at 0 with at least two entries."
        )
    return DeviceChains(np.diff(arr))
