"""RandomizedCRFTagger's row-sparse training path: proximal AdaGrad on the
rows of the features a minibatch uses.

The ``optimizer="adagrad"`` fit of :class:`~skgpstruct.RandomizedCRFTagger`,
functions of a :class:`~skgpstruct._tagging.crf_objective.CRFSpec` (the
objective and its parameter layout are :mod:`skgpstruct._tagging.crf_objective`'s),
kept apart so that the estimator module holds the parameters and the
other optimisers. A minibatch's loss reads, and its
gradient touches, only the weight rows of the features its tokens use
(:func:`_used_columns`); :class:`~skgpstruct.optim.proximal.ProximalAdaGrad`
applies the penalty's steps that the other rows missed when they are next
used, so a step costs the minibatch's features, not the vocabulary.
"""

import numpy as np
import scipy.sparse as sp

from .._tagging.base import fit_epochs
from .._tagging.crf_objective import (bias_grad, check_finite, layout, penalty_value,
                                      potential_loss_grad, unpack)
from .._utils.parallel import map_chunks
from ..optim.proximal import ProximalAdaGrad, RowSparseGradient

__all__ = ["chunk_sparse_loss_grad", "fit_adagrad", "sparse_loss_grad"]

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


def chunk_sparse_loss_grad(spec, theta, data, seeds, n_rows, backend, used=None):
    """:func:`~skgpstruct._tagging.crf_objective.chunk_loss_grad` with the
    weight gradient kept on the rows of the features the chunk uses:
    ``(loss, rows, grad_rows, grad_rest)`` (``grad_rest`` the bias and
    transitions). Reads only those rows of the weights; ``used``, when
    given, is ``(rows, X restricted to them, those rows of the weights)``,
    already gathered."""
    W, b, trans = unpack(spec, theta, n_rows)
    if used is None:
        rows, Xc = _used_columns(data.X_flat, compact=True)
        W_rows = W[rows]
    else:
        rows, Xc, W_rows = used
    U = np.asarray(Xc @ W_rows) + b
    # every row of W_rows meets a stored entry of Xc: a non-finite weight
    # makes U non-finite (0 * inf is NaN)
    check_finite(b, U, *(trans if isinstance(trans, tuple) else (trans,)))
    loss, gU, g_trans = potential_loss_grad(spec, U, data, trans, seeds, backend)
    g_rows = np.asarray(Xc.T @ gU)
    return loss, rows, g_rows, np.concatenate([bias_grad(spec, gU)] + g_trans)


def sparse_loss_grad(spec, theta, data, seeds, n_rows, parallel, backend):
    """Summed loss and row-sparse gradient of all sequences of ``data``
    (chunks in fixed order, merged on the union of their rows; on the
    GPU all of them in one chunk, one launch, no threads)."""
    on_gpu = backend.name == "cuda"
    parts = map_chunks(
        lambda chunk, chunk_seeds: chunk_sparse_loss_grad(
            spec, theta, data.subset(chunk), chunk_seeds, n_rows, backend),
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


def fit_adagrad(spec, data, theta, rng, parallel, monitor, backend, *, learning_rate,
                batch_size, desc=None):
    """Epochs of proximal AdaGrad on minibatches of ``data`` (its columns the
    weight rows of ``theta``), lazy on the weight rows
    (:class:`~skgpstruct.optim.proximal.ProximalAdaGrad`): a step costs the
    features its minibatch uses, not the whole vocabulary. The objective of
    the tagger's Adam / SGD epochs (per-sequence loss, the penalty
    ``c2 / n ||theta||^2 + c1 / n ||theta||_1`` per sequence, by its
    proximal step); an epoch's reported value adds the penalty at the
    epoch's end."""
    n, n_rows = data.n_sequences, data.X_flat.shape[1]
    cuts = layout(spec, n_rows)
    opt = ProximalAdaGrad(learning_rate, n_rows=n_rows,
                          n_cols=spec.n_labels, weight_decay=2.0 * spec.c2 / n,
                          l1=spec.c1 / n,
                          undecayed=(int(cuts[1]), int(cuts[2])), parallel=parallel)

    on_gpu = backend.name == "cuda"

    def step(t, idx, seeds):
        batch = data.subset(idx)
        if on_gpu or len(idx) <= _SPARSE_CHUNK_SEQUENCES:
            # one chunk: its rows are caught up and gathered in one pass
            rows, Xc = _used_columns(batch.X_flat, compact=True)
            W_rows = opt.catch_up(t, rows, gather=True)
            loss, rows, g_rows, rest = chunk_sparse_loss_grad(
                spec, t, batch, seeds, n_rows, backend, used=(rows, Xc, W_rows))
            return loss, RowSparseGradient(rows, g_rows, rest), 1.0 / len(idx)
        opt.catch_up(t, _used_columns(batch.X_flat))
        loss, grad = sparse_loss_grad(spec, t, batch, seeds, n_rows, parallel, backend)
        return loss, grad, 1.0 / len(idx)

    return fit_epochs(step, theta, opt, monitor, n_sequences=n, batch_size=batch_size,
                      rng=rng, desc=desc, epoch_value=lambda t: penalty_value(spec, t, cuts))
