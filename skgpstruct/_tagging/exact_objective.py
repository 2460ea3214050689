"""The exact CRF's full-batch objective over CSR features, prepared once per
fit: the negative log-likelihood plus ``c2 ||theta||^2`` (all but the bias)
and its gradient, from the fused kernels of
:mod:`skgpstruct.chain._crf_training_kernels`.

:func:`skgpstruct._tagging.crf_solver.fit_crf` evaluates it at every
iteration of L-BFGS / OWL-QN. What :func:`~.crf_objective.crf_loss_grad`
redoes per evaluation (a CSR subset per chunk of sequences, scipy's
products ``X W`` and ``X.T dU``, the concatenations) is done once here:
the CSR of ``X``, the chunk boundaries, the gradient
buffers. An evaluation is then two kernel passes,

1. per fixed chunk of :data:`CHUNK_SEQUENCES` sequences: unaries, the
   chain's forward-backward, its loss and gradients (threads over blocks of
   chunks);
2. per block of features: the weights' gradient ``2 c2 W - X.T dU``
   (threads over blocks of features),

and sums of the per-chunk parts in chunk order. Each output is written by
one kernel call in an order fixed by the data, so the value and gradient
are the same bits whatever the number of threads.
"""

import numpy as np
import scipy.sparse as sp
from joblib import delayed, effective_n_jobs, parallel_config

from ..chain._crf_training_kernels import chunks_loss_grad, scatter_weights
from .crf_objective import check_finite, layout, unpack

__all__ = ["CHUNK_SEQUENCES", "ExactCRFObjective", "seen_states"]

#: Sequences per chunk of the training pass: fixed, so that sums are taken in
#: the same order whatever ``n_jobs`` is; large enough for the chain's
#: matrix products over a chunk's sequences to run at BLAS speed.
CHUNK_SEQUENCES = 128


def seen_states(X, y, V):
    """(n_features, V) float 0 / 1: 1 where some token has the feature
    non-zero and the label (CRFsuite's state features without
    ``all_possible_states``); tokens of unknown label (``-1``) add none."""
    X = sp.coo_matrix(X)
    seen = np.zeros((X.shape[1], V))
    nonzero = (X.data != 0) & (y[X.row] >= 0)
    seen[X.col[nonzero], y[X.row[nonzero]]] = 1.0
    return seen


def _balanced_cuts(weights, n_parts):
    """Cut points ``0 = c_0 <= ... <= c_n = len(weights)`` splitting the items
    into ``n_parts`` contiguous runs of about equal summed weight."""
    total = np.concatenate([[0], np.cumsum(weights, dtype=np.float64)])
    targets = total[-1] * np.arange(1, n_parts) / n_parts
    inner = np.searchsorted(total, targets)
    return np.unique(np.concatenate([[0], inner, [len(weights)]])).astype(np.int64)


class ExactCRFObjective:
    """``theta -> (loss + c2 ||theta||^2, gradient)`` of an exact CRF on CSR data.

    Parameters
    ----------
    spec : CRFSpec
        Exact (``n_top=None``), full or low-rank transitions.
    data : SequenceData
        Training sequences with a CSR (or dense) ``X_flat``, labels as the
        spec's columns.
    parallel : joblib.Parallel or None, default=None
        Threads (None: in turn). The result does not depend on it.
    allowed : ndarray of bool of shape (n_tokens, V) or None, default=None
        Labels each token may take (None: all): a forbidden label's unary is
        ``-inf``.
    """

    def __init__(self, spec, data, parallel=None, allowed=None):
        if not spec.exact:
            raise ValueError("ExactCRFObjective is the exact loss (spec.n_top=None).")
        X = sp.csr_matrix(data.X_flat, dtype=np.float64)
        X.sort_indices()
        self.spec, self.parallel = spec, parallel
        self.n_rows, self.V = X.shape[1], spec.n_labels
        self.cuts = layout(spec, self.n_rows)
        self._X = (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data)
        self._offsets = data.offsets
        self._y = np.ascontiguousarray(data.y_flat, dtype=np.int64)
        n = data.n_sequences
        self._bounds = np.unique(np.concatenate(
            [np.arange(0, n, CHUNK_SEQUENCES), [n]])).astype(np.int64)
        n_chunks = self._bounds.shape[0] - 1
        if allowed is None:
            allowed = np.ones((0, self.V), dtype=np.bool_)
        elif allowed.shape != (data.n_tokens, self.V):
            raise ValueError(f"allowed must have shape {(data.n_tokens, self.V)}, "
                             f"got {allowed.shape}.")
        self._allowed = np.ascontiguousarray(allowed, dtype=np.bool_)
        n_threads = 1
        if parallel is not None:  # threads: also in a daemon process (loky says 1 there)
            with parallel_config(backend="threading"):
                n_threads = max(1, effective_n_jobs(parallel.n_jobs))
        self.n_threads = n_threads
        tokens = self._offsets[self._bounds[1:]] - self._offsets[self._bounds[:-1]]
        self._chunk_cuts = _balanced_cuts(tokens, n_threads)
        self._feature_cuts = _balanced_cuts(
            np.bincount(self._X[1], minlength=self.n_rows) + 1, n_threads)
        self._gU = np.empty((data.n_tokens, self.V))
        self._gB = np.empty((n_chunks, self.V, self.V))
        self._gb = np.empty((n_chunks, self.V))
        self._losses = np.empty(n_chunks)
        self._fell = np.empty(n, dtype=np.int8)
        self.state_mask = None if spec.all_possible_states else seen_states(X, self._y, self.V)

    def _run(self, func, cuts):
        """``func(lo, hi)`` for each run ``[lo, hi)`` of ``cuts``, on the
        threads when there are several."""
        runs = list(zip(cuts[:-1], cuts[1:]))
        if self.parallel is None or len(runs) == 1:
            for lo, hi in runs:
                func(lo, hi)
        else:
            self.parallel(delayed(func)(lo, hi) for lo, hi in runs)

    def chain_pass(self, W, b, B):
        """Pass 1 at weights ``W``, bias ``b``, transitions ``B`` (V, V):
        fills the per-chunk losses and gradients and the unaries' gradient."""
        self._run(lambda c0, c1: chunks_loss_grad(
            *self._X, W, b, self._allowed, self._offsets, self._y, B[None], self._bounds,
            c0, c1, self._gU, self._gB, self._gb, self._losses, self._fell),
            self._chunk_cuts)

    def __call__(self, theta):
        """The objective (negative log-likelihood plus the L2 term, no L1)
        and its gradient at ``theta`` (a new array)."""
        spec = self.spec
        check_finite(theta)
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        W, b, trans = unpack(spec, theta, self.n_rows)
        full = spec.transitions == "full"
        B = np.ascontiguousarray(trans if full else trans[0] @ trans[1].T)
        self.chain_pass(W, b, B)
        loss = float(self._losses.sum())
        if not np.isfinite(loss):
            check_finite(np.array([loss]))
        grad = np.empty_like(theta)
        cuts, two_c2 = self.cuts, 2.0 * spec.c2
        gW = grad[cuts[0]:cuts[1]].reshape(self.n_rows, self.V)
        self._run(lambda f0, f1: scatter_weights(
            *self._X, self._gU, W, two_c2, f0, f1, gW), self._feature_cuts)
        if self.state_mask is not None:  # the unseen pairs' weights stay 0
            gW *= self.state_mask
        grad[cuts[1]:cuts[2]] = self._gb.sum(axis=0) if spec.fit_intercept else 0.0
        gB = -self._gB.sum(axis=0)
        if full:
            grad[cuts[2]:cuts[3]] = (gB + two_c2 * trans).ravel()
        else:
            left, right = trans
            grad[cuts[2]:cuts[3]] = (gB @ right + two_c2 * left).ravel()
            grad[cuts[3]:cuts[4]] = (gB.T @ left + two_c2 * right).ravel()
        value = loss + spec.c2 * (float(theta @ theta) - float(b @ b))
        return value, grad
