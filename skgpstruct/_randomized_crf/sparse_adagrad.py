"""RandomizedCRFTagger's row-sparse training path: proximal AdaGrad on the
rows of the features a minibatch uses.

A mixin of :class:`~skgpstruct.RandomizedCRFTagger` (``optimizer="adagrad"``),
kept apart so that the estimator module holds the parameters and the
other optimisers (the dense objective is :mod:`skgpstruct._tagging.crf_objective`). A minibatch's loss reads, and its
gradient touches, only the weight rows of the features its tokens use
(:func:`_used_columns`); :class:`~skgpstruct.optim.proximal.ProximalAdaGrad`
applies the penalty's steps that the other rows missed when they are next
used, so a step costs the minibatch's features, not the vocabulary.
"""

import numpy as np
import scipy.sparse as sp

from .._tagging.base import fit_epochs
from .._utils.parallel import map_chunks
from ..optim.proximal import ProximalAdaGrad, RowSparseGradient

__all__ = ["RowSparseAdaGradMixin"]

# Sequences per unit of parallel work (fixed, so that sums are taken in the
# same order whatever n_jobs is): a default minibatch (32 sequences) is one
# chunk, whose row-sparse gradient needs no merging. 16
# let n_jobs=2 share a minibatch, but merging two chunks' rows (a union and
# a scattered add over rows x labels) cost more than the second thread won:
# on hu_szeged (444 labels) an epoch took 1.47 s at 16, 1.09 s at 32 (1 job).
_SPARSE_CHUNK_SEQUENCES = 32


def _used_columns(X, compact=False):
    """Sorted columns of ``X`` with a stored (sparse) or non-zero (dense)
    entry; with ``compact``, also ``X`` restricted to them."""
    if sp.issparse(X):
        X = X.tocsr()
        rows = np.unique(X.indices)
        if not compact:
            return rows
        return rows, sp.csr_matrix((X.data, np.searchsorted(rows, X.indices), X.indptr),
                                   shape=(X.shape[0], rows.shape[0]))
    rows = np.flatnonzero((X != 0).any(axis=0))
    return (rows, X[:, rows]) if compact else rows


class RowSparseAdaGradMixin:
    """The ``optimizer="adagrad"`` fit of :class:`~skgpstruct.RandomizedCRFTagger`
    (its ``_unpack``, ``_potential_loss_grad``, ``_check_finite``,
    ``_layout`` and ``_penalty_value`` are the estimator's)."""

    def _chunk_sparse_loss_grad(self, theta, data, seeds, n_rows, used=None):
        """:meth:`_chunk_loss_grad` with the weight gradient kept on the rows
        of the features the chunk uses: ``(loss, rows, grad_rows, grad_rest)``
        (``grad_rest`` the bias and transitions). Reads only those rows of
        the weights; ``used``, when given, is ``(rows, X restricted to them,
        those rows of the weights)``, already gathered."""
        W, b, trans = self._unpack(theta, n_rows)
        if used is None:
            rows, Xc = _used_columns(data.X_flat, compact=True)
            W_rows = W[rows]
        else:
            rows, Xc, W_rows = used
        U = np.asarray(Xc @ W_rows) + b
        # every row of W_rows meets a stored entry of Xc: a non-finite weight
        # makes U non-finite (0 * inf is NaN)
        self._check_finite(b, U, *(trans if isinstance(trans, tuple) else (trans,)))
        loss, gU, g_trans = self._potential_loss_grad(U, data, trans, seeds)
        g_rows = np.asarray(Xc.T @ gU)
        return loss, rows, g_rows, np.concatenate([gU.sum(axis=0)] + g_trans)

    def _sparse_loss_grad(self, theta, data, seeds, n_rows, parallel):
        """Summed loss and row-sparse gradient of all sequences of ``data``
        (chunks in fixed order, merged on the union of their rows; on the
        GPU all of them in one chunk, one launch, no threads)."""
        on_gpu = self._on_gpu
        parts = map_chunks(
            lambda chunk, chunk_seeds: self._chunk_sparse_loss_grad(
                theta, data.subset(chunk), chunk_seeds, n_rows),
            np.arange(data.n_sequences), seeds,
            chunk_size=data.n_sequences if on_gpu else _SPARSE_CHUNK_SEQUENCES,
            parallel=None if on_gpu else parallel)
        if len(parts) == 1:
            loss, rows, g_rows, rest = parts[0]
            return loss, RowSparseGradient(rows, g_rows, rest)
        rows = np.unique(np.concatenate([p[1] for p in parts]))
        g_rows = np.zeros((rows.shape[0], parts[0][2].shape[1]))
        loss, rest = 0.0, np.zeros_like(parts[0][3])
        for part_loss, part_rows, part_g, part_rest in parts:  # fixed order
            loss += part_loss
            g_rows[np.searchsorted(rows, part_rows)] += part_g
            rest += part_rest
        return loss, RowSparseGradient(rows, g_rows, rest)

    def _fit_adagrad(self, data, theta, n_rows, rng, parallel, monitor):
        """Epochs of proximal AdaGrad on minibatches, lazy on the weight rows
        (:class:`~skgpstruct.optim.proximal.ProximalAdaGrad`): a step costs
        the features its minibatch uses, not the whole vocabulary. Same
        objective as :meth:`_fit_stochastic` (per-sequence loss, the penalty
        ``c2 / n ||theta||^2 + c1 / n ||theta||_1`` per sequence, by its
        proximal step); an epoch's reported value adds the penalty at the
        epoch's end."""
        n = data.n_sequences
        cuts = self._layout(n_rows)
        opt = ProximalAdaGrad(self._learning_rate_, n_rows=n_rows,
                              n_cols=len(self.classes_), weight_decay=2.0 * self.c2 / n,
                              l1=self.c1 / n,
                              undecayed=(int(cuts[1]), int(cuts[2])), parallel=parallel)

        on_gpu = self._on_gpu

        def step(t, idx, seeds):
            batch = data.subset(idx)
            if on_gpu or len(idx) <= _SPARSE_CHUNK_SEQUENCES:
                # one chunk: its rows are caught up and gathered in one pass
                rows, Xc = _used_columns(batch.X_flat, compact=True)
                W_rows = opt.catch_up(t, rows, gather=True)
                loss, rows, g_rows, rest = self._chunk_sparse_loss_grad(
                    t, batch, seeds, n_rows, used=(rows, Xc, W_rows))
                return loss, RowSparseGradient(rows, g_rows, rest), 1.0 / len(idx)
            opt.catch_up(t, _used_columns(batch.X_flat))
            loss, grad = self._sparse_loss_grad(t, batch, seeds, n_rows, parallel)
            return loss, grad, 1.0 / len(idx)

        return fit_epochs(step, theta, opt, monitor, n_sequences=n,
                          batch_size=self.batch_size, rng=rng,
                          desc="RandomizedCRFTagger",
                          epoch_value=lambda t: self._penalty_value(t, cuts))
