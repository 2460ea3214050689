"""A linear-chain CRF's parameter vector and its objective, as functions of
a :class:`CRFSpec`: the layout of the weights, bias and transitions in one
flat vector, the penalty, and the chain's loss and gradient over chunks of
sequences (exact, or randomized on sub-lattices).

:class:`~skgpstruct.RandomizedCRFTagger` trains with them (every
optimiser), and so does the validation of
:class:`~skgpstruct.GPStructTagger`'s prior (through
:func:`skgpstruct._tagging.crf_solver.fit_crf`). The functions read nothing
but their arguments: the spec, the parameters, the data, and the chain
``backend`` of :func:`skgpstruct.chain.backend.get_backend` (on the GPU,
``backend.name == "cuda"``, a sum over sequences is one chunk).
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._utils.parallel import map_chunks
from ..chain import randomized as rdp

__all__ = ["CRFSpec", "bias_grad", "check_finite", "chunk_loss_grad", "chunk_potential_grad",
           "crf_loss_grad", "l1_coefficients", "layout", "penalty", "penalty_value",
           "potential_loss_grad", "unpack"]

# Sequences per unit of parallel work. Fixed (not derived from n_jobs) so
# that sums are taken in the same order whatever n_jobs is.
_CRF_CHUNK_SEQUENCES = 32


@dataclass(frozen=True, eq=False)
class CRFSpec:
    """What a linear-chain CRF is, apart from its data and its parameters.

    Parameters
    ----------
    labels : ndarray of int or of bool
        The labels the CRF covers, as codes of the data's labels (its
        ``y_flat``): sorted distinct codes, or a boolean mask over the codes
        (``mask[k]``: code ``k`` is covered). The CRF's ``k``-th column is
        the ``k``-th label of ``labels``; the data it is trained on must
        have only these labels. Stored as a read-only int64 array.
    c2 : float, default=0.0
        L2 coefficient: ``c2 * ||theta||^2`` over all but the bias.
    c1 : float, default=0.0
        L1 coefficient, over the same parameters (OWL-QN; 0: none).
    transitions : {"full", "low_rank"}, default="full"
        A full (V, V) transition matrix, or ``left @ right.T``.
    rank : int, default=32
        Rank of low-rank transitions.
    n_top : int or None, default=None
        None: the exact loss. Otherwise the randomized loss on sub-lattices
        of ``n_top`` top and ``n_sampled`` sampled states per position, with
        the proposal ``proposal``
        (:func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged`).
    n_sampled : int, default=0
    proposal : str, default="local+global"
    fit_intercept : bool, default=True
        Whether the CRF has a per-label bias (unpenalised). False: the bias
        stays 0 (its gradient is 0), CRFsuite's model, which has none.
    all_possible_states : bool, default=True
        Whether every (feature, label) pair has a weight. False: only the
        pairs that occur in the training data (a token with the feature
        non-zero and the label), the others stay 0 (CRFsuite's default,
        ``all_possible_states=False``); the exact loss on the CPU only.
    """

    labels: np.ndarray
    c2: float = 0.0
    c1: float = 0.0
    transitions: str = "full"
    rank: int = 32
    n_top: int = None
    n_sampled: int = 0
    proposal: str = "local+global"
    fit_intercept: bool = True
    all_possible_states: bool = True

    def __post_init__(self):
        labels = np.asarray(self.labels)
        if labels.dtype == bool:
            labels = np.flatnonzero(labels)
        labels = np.array(labels, dtype=np.int64).ravel()
        if np.any(np.diff(labels) <= 0):
            raise ValueError("CRFSpec labels must be sorted distinct codes or a boolean mask.")
        labels.setflags(write=False)
        object.__setattr__(self, "labels", labels)

    @property
    def n_labels(self):
        """Columns of the CRF (labels covered)."""
        return int(self.labels.size)

    @property
    def exact(self):
        """Whether the loss is the exact negative log-likelihood."""
        return self.n_top is None


# ---------------------------------------------------------------- parameters
def layout(spec, n_rows):
    """Offsets of W, b and the transitions in the flat parameter vector of
    ``n_rows`` weight rows (features)."""
    V = spec.n_labels
    sizes = [n_rows * V, V]
    if spec.transitions == "full":
        sizes.append(V * V)
    else:
        sizes += [V * spec.rank, V * spec.rank]
    return np.cumsum([0] + sizes)


def unpack(spec, theta, n_rows):
    """Views ``(W, b, transitions)`` of ``theta``; ``transitions`` is the
    (V, V) matrix, or ``(left, right)`` when low rank."""
    V = spec.n_labels
    cuts = layout(spec, n_rows)
    W = theta[cuts[0] : cuts[1]].reshape(n_rows, V)
    b = theta[cuts[1] : cuts[2]]
    if spec.transitions == "full":
        return W, b, theta[cuts[2] : cuts[3]].reshape(V, V)
    left = theta[cuts[2] : cuts[3]].reshape(V, spec.rank)
    right = theta[cuts[3] : cuts[4]].reshape(V, spec.rank)
    return W, b, (left, right)


def _l2_value(spec, theta, cuts):
    """``c2 * ||theta||^2`` over all but the bias."""
    bias = theta[cuts[1] : cuts[2]]
    return spec.c2 * (float(theta @ theta) - float(bias @ bias))


def penalty_value(spec, theta, cuts):
    """The objective's penalty, ``c2 * ||theta||^2 + c1 * ||theta||_1`` over
    all but the bias (``cuts`` from :func:`layout`)."""
    value = _l2_value(spec, theta, cuts)
    if spec.c1:
        bias = theta[cuts[1] : cuts[2]]
        value += spec.c1 * (float(np.abs(theta).sum()) - float(np.abs(bias).sum()))
    return value


def l1_coefficients(spec, n_rows):
    """OWL-QN's per-coordinate L1 weights: ``c1`` on the parameters that
    ``c2`` penalises, 0 on the bias."""
    cuts = layout(spec, n_rows)
    l1 = np.full(int(cuts[-1]), float(spec.c1))
    l1[cuts[1] : cuts[2]] = 0.0
    return l1


def penalty(spec, theta, n_rows):
    """``c2 * ||theta||^2`` over all but the bias, and its gradient (the
    smooth part of the penalty; OWL-QN takes the L1 term)."""
    cuts = layout(spec, n_rows)
    value = _l2_value(spec, theta, cuts)
    grad = (2.0 * spec.c2) * theta
    grad[cuts[1] : cuts[2]] = 0.0
    return value, grad


# -------------------------------------------------------------------- losses
def bias_grad(spec, gU):
    """The bias's gradient from the unaries' ``gU`` (tokens x V): their sum,
    or 0 when the spec fits no intercept."""
    if not spec.fit_intercept:
        return np.zeros(gU.shape[1])
    return gU.sum(axis=0)


def check_finite(*arrays):
    """Raise a ValueError, saying what to change, if any array is not finite."""
    if not all(np.isfinite(a).all() for a in arrays):
        raise ValueError(
            "The CRF potentials became non-finite during training: the "
            "optimisation diverged (lower learning_rate, or raise c2) or the "
            "features are too large (scale them, e.g. with sklearn's "
            "MaxAbsScaler or StandardScaler)."
        )


def _exact_loss_grad(spec, U, lengths, y, trans, backend):
    """The exact negative log-likelihood of sequences (``-1`` in ``y``: an
    unknown label, marginalised), its gradient in ``U`` and the
    transitions' (a list of flat arrays)."""
    B = trans if spec.transitions == "full" else trans[0] @ trans[1].T
    values, gU, gB = backend.log_likelihood_grad_ragged(U, lengths, B, y)
    loss = -float(values.sum())
    gU = np.negative(gU, out=gU)  # gradient of the loss
    if spec.transitions == "full":
        return loss, gU, [-gB.ravel()]
    return loss, gU, [-(gB @ trans[1]).ravel(), -(gB.T @ trans[0]).ravel()]


def partial_sequences(data):
    """Which sequences of ``data`` have an unknown label (a code ``-1``)."""
    unknown = (data.y_flat < 0).astype(np.int64)
    return np.add.reduceat(unknown, data.offsets[:-1]) > 0


def potential_loss_grad(spec, U, data, trans, seeds, backend):
    """Loss of a chunk (exact or randomized) from its unary potentials
    ``U`` (``data.y_flat`` the CRF's columns, ``-1`` unknown); return it
    with the gradient in ``U`` and the transitions' gradient (a list of
    flat arrays). The randomized loss takes the sequences with an unknown
    label exactly (a sub-lattice of the constrained sum is future work):
    their term is the exact ``log Z_c - log Z``."""
    if spec.exact:
        return _exact_loss_grad(spec, U, data.lengths, data.y_flat, trans, backend)
    partial = partial_sequences(data)
    if not partial.any():
        return _randomized_loss_grad(spec, U, data.lengths, data.y_flat, trans, seeds,
                                     backend)
    rows_p = data.token_index(np.flatnonzero(partial))
    loss, gU_p, g = _exact_loss_grad(spec, U[rows_p], data.lengths[partial],
                                     data.y_flat[rows_p], trans, backend)
    gU = np.empty_like(U)
    gU[rows_p] = gU_p
    full = np.flatnonzero(~partial)
    if full.size:
        rows_f = data.token_index(full)
        loss_f, gU[rows_f], g_f = _randomized_loss_grad(
            spec, U[rows_f], data.lengths[full], data.y_flat[rows_f], trans,
            seeds[full], backend)
        loss += loss_f
        g = [a + b for a, b in zip(g, g_f)]
    return loss, gU, g


def _randomized_loss_grad(spec, U, lengths, y_flat, trans, seeds, backend):
    """Randomized loss of fully labelled sequences, its gradient in ``U``
    and the transitions' gradient (a list of flat arrays)."""
    chain = trans if spec.transitions == "full" else rdp.LowRankTransitions(*trans)
    losses, gU, g = backend.randomized_loss_grad_ragged(
        U, lengths, y_flat, chain, spec.n_top, spec.n_sampled,
        proposal=spec.proposal, seeds=seeds)
    g_trans = [a.ravel() for a in ((g,) if spec.transitions == "full" else g)]
    return float(losses.sum()), gU, g_trans


def chunk_potential_grad(spec, theta, data, seeds, backend):
    """Loss of a chunk, its gradient in the unary potentials (per token; for
    a dense ``X``, already the weights' gradient) and the gradient of the
    bias and transitions (flat). The weight rows of ``theta`` are the
    columns of ``data.X_flat``."""
    W, b, trans = unpack(spec, theta, data.X_flat.shape[1])
    U = np.asarray(data.X_flat @ W) + b
    check_finite(U)
    loss, gU, g_trans = potential_loss_grad(spec, U, data, trans, seeds, backend)
    rest = np.concatenate([bias_grad(spec, gU)] + g_trans)
    if not sp.issparse(data.X_flat):
        # dense X (few features): the chunk's own weight gradient, as
        # BLAS rounds a product differently with the matrix sizes
        return loss, np.asarray(data.X_flat.T @ gU), rest
    return loss, gU, rest


def chunk_loss_grad(spec, theta, data, seeds, backend):
    """Negative log-likelihood (exact or randomized) of a chunk and its
    gradient in ``theta``. The randomized loss is
    :func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged`
    (sequence ``n`` draws its sub-lattice from ``seeds[n]``)."""
    check_finite(theta)
    loss, g, rest = chunk_potential_grad(spec, theta, data, seeds, backend)
    gW = np.asarray(data.X_flat.T @ g) if sp.issparse(data.X_flat) else g
    return loss, np.concatenate([gW.ravel(), rest])


def crf_loss_grad(spec, theta, data, seq_idx, seeds, parallel, backend):
    """Summed loss and gradient over the sequences ``seq_idx`` of ``data``.

    Chunks of sequences in fixed order (on the GPU all of them in one
    chunk), on ``parallel``'s threads (None: in turn), give the gradient in
    the unary potentials, and one sparse product ``X.T @ grad_U`` over all
    the tokens gives the weights' (not one dense ``n_features x n_labels``
    product per chunk). ``seeds`` (one per sequence of ``seq_idx``) seed the
    randomized loss's draws; the exact loss ignores them.
    """
    check_finite(theta)
    on_gpu = backend.name == "cuda"
    sub = data.subset(seq_idx)
    n = sub.n_sequences
    parts = map_chunks(
        lambda chunk, chunk_seeds: chunk_potential_grad(
            spec, theta, sub.subset(chunk), chunk_seeds, backend),
        np.arange(n), seeds, chunk_size=n if on_gpu else _CRF_CHUNK_SEQUENCES,
        parallel=None if on_gpu else parallel)
    loss, rest = parts[0][0], parts[0][2].copy()
    for part_loss, _, part_rest in parts[1:]:  # fixed order
        loss += part_loss
        rest += part_rest
    if not sp.issparse(sub.X_flat):  # the chunks' weight gradients, summed
        gW = parts[0][1].copy()
        for part in parts[1:]:
            gW += part[1]
    else:
        gU = parts[0][1] if len(parts) == 1 else np.concatenate([p[1] for p in parts])
        gW = np.asarray(sub.X_flat.T @ gU)
    return loss, np.concatenate([gW.ravel(), rest])
