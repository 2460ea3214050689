"""Deterministic parallel sums over chunks of sequences.

Both estimators (and the GP objective) evaluate a sum over training
sequences as a sum over *fixed* chunks of sequences, run on joblib threads
(the numba kernels release the GIL) and added up in chunk order. The chunk
size is a constant of the caller, never derived from ``n_jobs``, so the
floating-point sum (and hence a fitted model) is the same whatever
``n_jobs`` is. This module sits below ``chain/``, ``gp/`` and the
estimators and imports none of them.
"""

import threading
from contextlib import nullcontext

import numpy as np
from joblib import delayed
import threadpoolctl
from threadpoolctl import ThreadpoolController

__all__ = ["chunk_blas_limits", "chunked_sum", "map_chunks", "small_blas"]


def _release_openblas():
    """Let any thread set OpenBLAS's thread count (threadpoolctl >= 3.6 lets
    only the thread that last set it do so, until that thread's ``with``
    block ends; the limits below are not tied to one thread)."""
    clear = getattr(threadpoolctl.OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


class _SmallBlas:
    """Limit BLAS to one thread while any caller is inside.

    BLAS's thread count is one setting for the whole process. Reference
    counted under a lock, so that callers on several threads at once (joblib
    threads, fits side by side in a threading backend or an in-process dask
    cluster) cannot leave the limit in place: the first to enter sets it,
    the last to leave, on whatever thread, restores the original thread
    counts. (Nested ``threadpool_limits`` contexts on several threads, each
    saving and restoring on its own, left BLAS at one thread for the rest of
    the process when two overlapped.)
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._limiter = None
        # made once, at the first use (numpy's and scipy's BLAS are loaded by
        # then): a ThreadpoolController scans every loaded library, a few
        # milliseconds of system time, and the ELBO's gradient enters this
        # limit several times per evaluation (a new controller per entry made
        # the test suite three times slower)
        self._controller = None

    def __enter__(self):
        with self._lock:
            if self._depth == 0:
                if self._controller is None:
                    self._controller = ThreadpoolController()
                _release_openblas()
                self._limiter = self._controller.limit(limits=1, user_api="blas")
                _release_openblas()
            self._depth += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                _release_openblas()
                self._limiter.restore_original_limits()
                _release_openblas()
                self._limiter = None
        return False


_SMALL_BLAS = _SmallBlas()


def small_blas():
    """Context limiting BLAS to one thread (see :class:`_SmallBlas`).

    Returns
    -------
    context : context manager
        The process-wide, reference-counted limit.

    Examples
    --------
    >>> with small_blas():
    ...     pass
    """
    return _SMALL_BLAS


def chunk_blas_limits(n_selected, chunk_size):
    """The BLAS thread limit for a chunked sum over ``n_selected`` sequences.

    With several chunks the parallelism is across chunks (``n_jobs``) and BLAS
    runs one thread; with one chunk BLAS keeps its threads. The rule reads the
    data, never ``n_jobs``: multi-threaded BLAS rounds differently from
    single-threaded BLAS, so a limit that followed ``n_jobs`` would make a
    fitted model depend on it.

    Parameters
    ----------
    n_selected : int
        Sequences in the sum.
    chunk_size : int
        Sequences per chunk.

    Returns
    -------
    context : context manager
        :func:`small_blas` for several chunks, else a no-op.

    Examples
    --------
    >>> with chunk_blas_limits(10, chunk_size=32):
    ...     pass
    """
    if int(n_selected) > int(chunk_size):
        return small_blas()
    return nullcontext()


def _add(total, part):
    """``total + part`` for floats, arrays and dicts of arrays (in place
    where ``total`` is an array we own)."""
    if isinstance(part, dict):
        for key, value in part.items():
            total[key] = _add(total[key], value)
        return total
    if isinstance(part, np.ndarray):
        total += part
        return total
    return total + part


def _own(value):
    """A copy of ``value`` that :func:`_add` may update in place."""
    if isinstance(value, dict):
        return {key: _own(v) for key, v in value.items()}
    if isinstance(value, np.ndarray):
        return np.array(value, dtype=np.float64)
    return value


def map_chunks(func, seq_idx, seeds, *, chunk_size, parallel=None):
    """``[func(chunk, chunk_seeds) for each fixed chunk of seq_idx]``, in
    chunk order, run on ``parallel``'s threads when there are several chunks.

    Parameters
    ----------
    func, seq_idx, seeds, chunk_size, parallel
        As in :func:`chunked_sum`.

    Returns
    -------
    results : list
        One result per chunk ``seq_idx[i:i + chunk_size]``, in order.

    Examples
    --------
    >>> import numpy as np
    >>> map_chunks(lambda c, s: c.tolist(), np.arange(5), np.zeros(5), chunk_size=2)
    [[0, 1], [2, 3], [4]]
    """
    seq_idx = np.asarray(seq_idx)
    seeds = np.asarray(seeds)
    if seq_idx.shape[0] != seeds.shape[0]:
        raise ValueError(
            f"seq_idx and seeds must have the same length, got {seq_idx.shape[0]} "
            f"and {seeds.shape[0]}."
        )
    if seq_idx.shape[0] == 0:
        raise ValueError("chunks need at least one sequence.")
    starts = range(0, seq_idx.shape[0], int(chunk_size))
    jobs = [(seq_idx[i : i + chunk_size], seeds[i : i + chunk_size]) for i in starts]
    if parallel is None or len(jobs) == 1:
        return [func(c, s) for c, s in jobs]
    return list(parallel(delayed(func)(c, s) for c, s in jobs))


def chunked_sum(func, seq_idx, seeds, *, chunk_size, parallel=None):
    """Sum ``func(chunk, chunk_seeds)`` over fixed chunks of ``seq_idx``.

    Parameters
    ----------
    func : callable
        ``func(chunk, chunk_seeds)`` with ``chunk`` an array of sequence
        positions and ``chunk_seeds`` their seeds; returns a tuple of
        floats, ndarrays or dicts of ndarrays (the same structure for every
        chunk).
    seq_idx : ndarray of int of shape (n_selected,)
        Sequences to sum over, in order.
    seeds : ndarray of shape (n_selected,)
        One seed per selected sequence (aligned with ``seq_idx``).
    chunk_size : int
        Sequences per chunk: ``seq_idx[i:i + chunk_size]``.
    parallel : joblib.Parallel or None, default=None
        Runs the chunks (threads); None runs them in this thread.

    Returns
    -------
    total : tuple
        The element-wise sums of the chunks' results, added in chunk order
        (so the result does not depend on ``parallel``'s ``n_jobs``).

    Examples
    --------
    >>> import numpy as np
    >>> f = lambda c, s: (float(c.sum()), np.ones(2) * len(c))
    >>> chunked_sum(f, np.arange(5), np.zeros(5), chunk_size=2)
    (10.0, array([5., 5.]))
    """
    results = map_chunks(func, seq_idx, seeds, chunk_size=chunk_size, parallel=parallel)
    total = tuple(_own(part) for part in results[0])
    for result in results[1:]:  # fixed order: deterministic sums
        total = tuple(_add(t, part) for t, part in zip(total, result))
    return total
