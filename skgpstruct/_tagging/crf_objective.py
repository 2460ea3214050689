"""RandomizedCRFTagger's parameter vector and its objective: the layout
of the weights, bias and transitions in one flat vector, the penalty, and
the chain's loss and gradient over chunks of sequences.

A mixin of :class:`~skgpstruct.RandomizedCRFTagger`, kept apart from the
estimator module, which holds the parameters' checks, the fit loops and
prediction.
"""

import numpy as np
import scipy.sparse as sp

from .._utils.parallel import map_chunks
from ..chain import randomized as rdp
from ..chain.backend import get_backend

__all__ = ["CRFObjectiveMixin"]

# Sequences per unit of parallel work. Fixed (not derived from n_jobs) so
# that sums are taken in the same order whatever n_jobs is.
_CHUNK_SEQUENCES = 32


class CRFObjectiveMixin:
    """The flat parameter vector of a linear-chain CRF (weights ``W``, bias
    ``b``, full or low-rank transitions) and its penalised negative
    log-likelihood, exact or randomized (see
    :class:`~skgpstruct.RandomizedCRFTagger`)."""


    # ------------------------------------------------------------ parameters
    def _layout(self, n_rows=None):
        """Offsets of W, b and the transitions in the flat parameter vector.

        ``n_rows`` is the number of weight rows (features): the features
        seen in training while fitting, ``n_features_in_`` otherwise.
        """
        D = self.n_features_in_ if n_rows is None else n_rows
        V = len(self.classes_)
        sizes = [D * V, V]
        if self.transitions == "full":
            sizes.append(V * V)
        else:
            sizes += [V * self.rank, V * self.rank]
        return np.cumsum([0] + sizes)

    def _unpack(self, theta, n_rows=None):
        D = self.n_features_in_ if n_rows is None else n_rows
        V = len(self.classes_)
        cuts = self._layout(D)
        W = theta[cuts[0] : cuts[1]].reshape(D, V)
        b = theta[cuts[1] : cuts[2]]
        if self.transitions == "full":
            return W, b, theta[cuts[2] : cuts[3]].reshape(V, V)
        left = theta[cuts[2] : cuts[3]].reshape(V, self.rank)
        right = theta[cuts[3] : cuts[4]].reshape(V, self.rank)
        return W, b, (left, right)

    def _pack(self, rows=None):
        """Flat parameter vector (weight rows ``rows`` only, if given)."""
        W = self.coef_ if rows is None else self.coef_[rows]
        parts = [W.ravel(), self.intercept_]
        if self.transitions == "full":
            parts.append(self.transition_.ravel())
        else:
            parts += [self.transition_left_.ravel(), self.transition_right_.ravel()]
        return np.concatenate(parts).astype(np.float64)

    def _store(self, theta, rows=None):
        """Store ``theta``; with ``rows``, its weight rows are those features
        (the features seen in training) and the other rows are zero."""
        n_rows = None if rows is None else len(rows)
        W, b, trans = self._unpack(theta, n_rows)
        if rows is None:
            self.coef_ = W.copy()
        else:
            self.coef_ = np.zeros((self.n_features_in_, len(self.classes_)))
            self.coef_[rows] = W
        self.intercept_ = b.copy()
        if self.transitions == "full":
            self.transition_ = trans.copy()
            self.transition_left_ = self.transition_right_ = None
        else:
            self.transition_ = None
            self.transition_left_ = trans[0].copy()
            self.transition_right_ = trans[1].copy()

    def _l2_value(self, theta, cuts):
        """``c2 * ||theta||^2`` over all but the bias."""
        bias = theta[cuts[1] : cuts[2]]
        return self.c2 * (float(theta @ theta) - float(bias @ bias))

    def _penalty_value(self, theta, cuts):
        """The objective's penalty, ``c2 * ||theta||^2 + c1 * ||theta||_1``
        over all but the bias."""
        value = self._l2_value(theta, cuts)
        if self.c1:
            bias = theta[cuts[1] : cuts[2]]
            value += self.c1 * (float(np.abs(theta).sum()) - float(np.abs(bias).sum()))
        return value

    def _l1_coefficients(self, n_rows=None):
        """OWL-QN's per-coordinate L1 weights: ``c1`` on the parameters that
        ``c2`` penalises, 0 on the bias."""
        cuts = self._layout(n_rows)
        l1 = np.full(int(cuts[-1]), float(self.c1))
        l1[cuts[1] : cuts[2]] = 0.0
        return l1

    def _penalty(self, theta, n_rows=None):
        """``c2 * ||theta||^2`` over all but the bias, and its gradient (the
        smooth part of the penalty; OWL-QN takes the L1 term)."""
        cuts = self._layout(n_rows)
        value = self._l2_value(theta, cuts)
        grad = (2.0 * self.c2) * theta
        grad[cuts[1] : cuts[2]] = 0.0
        return value, grad

    # --------------------------------------------------------------- losses
    def _check_finite(self, *arrays):
        if not all(np.isfinite(a).all() for a in arrays):
            raise ValueError(
                "The CRF potentials became non-finite during training: the "
                "optimisation diverged (lower learning_rate, or raise c2) or the "
                "features are too large (scale them, e.g. with sklearn's "
                "MaxAbsScaler or StandardScaler)."
            )

    def _potential_loss_grad(self, U, data, trans, seeds):
        """Loss of a chunk (exact or randomized) from its unary potentials
        ``U``; return it with the gradient in ``U`` and the transitions'
        gradient (a list of flat arrays)."""
        backend = self.__dict__.get("_backend") or get_backend(getattr(self, "device_", "cpu"))
        if self.exact_:
            if self.transitions == "full":
                B = trans
            else:
                B = trans[0] @ trans[1].T
            values, gU, gB = backend.log_likelihood_grad_ragged(U, data.lengths, B,
                                                                data.y_flat)
            loss = -float(values.sum())
            gU = np.negative(gU, out=gU)  # gradient of the loss
            if self.transitions == "full":
                return loss, gU, [-gB.ravel()]
            return loss, gU, [-(gB @ trans[1]).ravel(), -(gB.T @ trans[0]).ravel()]
        spec = trans if self.transitions == "full" else rdp.LowRankTransitions(*trans)
        losses, gU, g = backend.randomized_loss_grad_ragged(
            U, data.lengths, data.y_flat, spec, self._n_top_, self._n_sampled_,
            proposal=self.proposal, seeds=seeds)
        g_trans = [a.ravel() for a in ((g,) if self.transitions == "full" else g)]
        return float(losses.sum()), gU, g_trans

    def _chunk_loss_grad(self, theta, data, seeds):
        """Negative log-likelihood (exact or randomized) of a chunk + gradient.

        The weight rows of ``theta`` are the columns of ``data.X_flat``. The
        randomized loss is
        :func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged`
        (sequence ``n`` draws its sub-lattice from ``seeds[n]``).
        """
        self._check_finite(theta)
        loss, g, rest = self._chunk_potential_grad(theta, data, seeds)
        gW = np.asarray(data.X_flat.T @ g) if sp.issparse(data.X_flat) else g
        return loss, np.concatenate([gW.ravel(), rest])

    def _chunk_potential_grad(self, theta, data, seeds):
        """Loss of a chunk, its gradient in the unary potentials (per token)
        and the gradient of the bias and transitions (flat)."""
        W, b, trans = self._unpack(theta, data.X_flat.shape[1])
        U = np.asarray(data.X_flat @ W) + b
        self._check_finite(U)
        loss, gU, g_trans = self._potential_loss_grad(U, data, trans, seeds)
        rest = np.concatenate([gU.sum(axis=0)] + g_trans)
        if not sp.issparse(data.X_flat):
            # dense X (few features): the chunk's own weight gradient, as
            # BLAS rounds a product differently with the matrix sizes
            return loss, np.asarray(data.X_flat.T @ gU), rest
        return loss, gU, rest

    def _loss_grad(self, theta, data, seq_idx, seeds, parallel):
        """Summed loss and gradient over ``seq_idx``: chunks of sequences in
        fixed order (on the GPU all of them in one chunk) give the gradient
        in the unary potentials, and one sparse product ``X.T @ grad_U``
        over all the tokens gives the weights' (not one dense
        ``n_features x n_labels`` product per chunk)."""
        self._check_finite(theta)
        on_gpu = self._on_gpu
        sub = data.subset(seq_idx)
        n = sub.n_sequences
        parts = map_chunks(
            lambda chunk, chunk_seeds: self._chunk_potential_grad(
                theta, sub.subset(chunk), chunk_seeds),
            np.arange(n), seeds, chunk_size=n if on_gpu else _CHUNK_SEQUENCES,
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
