"""Expected predictive information gain of GPStructTagger (weight-space form).

:meth:`GPStructTagger.predict_information_gain` asks which sequences are
worth labelling: how much the label sequence of each would tell about the
labels of the tokens of a target set (by default the sequences themselves,
an unlabelled pool). That needs posterior draws that are *joint* over
sequences (a label seen in one sentence informs another through the weights
they share), where the tagger's other predictions draw each sequence's
potentials from its own marginal. In the weight-space form they are cheap:
one draw of the weights gives the potentials of every token.
"""

import numpy as np
from joblib import delayed, effective_n_jobs
from sklearn.utils.validation import check_is_fitted

from . import chain
from ._memory import MemoryBudgetError, memory_budget
from ._parallel import small_blas
from ._sequences import sequence_seeds
from .chain.paths import _information_gain, _prepare_target, _weights

__all__ = ["InformationGainMixin"]

#: Arrays of the size of the target's marginals alive per sequence in flight
#: (:func:`~skgpstruct.chain.path_information_gain`: the conditional
#: predictive, its logarithm, the KL terms and the selection of them).
_PER_SEQUENCE_COPIES = 4
#: Weights drawn at once: (draws x labels x columns) doubles at most.
_BLOCK_DOUBLES = 1 << 22


class InformationGainMixin:
    """:meth:`predict_information_gain` of :class:`~skgpstruct.GPStructTagger`."""

    def predict_information_gain(self, X, X_target=None):
        """Expected information each sequence's labels give about the labels
        of a target set of tokens (active learning: which to label next).

        The expected predictive information gain (EPIG; Bickford Smith,
        Kirsch, Farquhar, Gal, Foster and Rainforth, AISTATS 2023) of
        sequence ``x``: the mutual information between its label sequence
        ``y`` and the label ``y*`` of a token ``x*`` of ``X_target``, under
        the posterior, averaged over the target tokens,
        ``E_y mean_x* KL(p(y* | y, x*) || p(y* | x*))``
        (:func:`~skgpstruct.chain.path_information_gain`). Where the path
        mutual information of :meth:`predict_uncertainty` (the BALD score)
        counts what the labels would teach about the model, this counts
        only what they would teach about the predictions at the target
        inputs: a sequence whose doubts are about features no target token
        has scores little.

        The ``n_predict_samples`` posterior draws are joint over all
        sequences: each draws the feature weights once (mean ``coef_``,
        variances ``coef_var_``) and the transitions once, so that
        sequences sharing features are correlated as in the posterior. The
        weights of features never active in training, which
        :meth:`predict_marginals` leaves out of the model, are drawn from
        their prior (variance ``temperature_`` times the kernel's, as the
        cold posterior's ``coef_var_``): labelling a sequence that has them
        brings them into the model, and what it would teach about them is
        part of its value. Each token's potentials also get the jitter of
        the model's covariances as noise. Every draw is seeded by
        ``predict_seed_`` (a weight's by its feature, a token's noise and a
        sequence's sampled paths by its :func:`sequence seed
        <skgpstruct._sequences.sequence_seeds>`), so a sequence's value
        depends on that sequence, ``X_target`` and the model only. It is an
        estimate from those draws: a sequence that shares no feature with
        the target (nor, with a point-mass transition posterior, anything
        else) comes back slightly above 0, the upward bias of a mutual
        information estimated from finitely many draws, which shrinks as
        ``1 / n_predict_samples``.

        Parameters
        ----------
        X : list of (T_n, n_features) array-likes or sparse matrices
            The candidate sequences, as for :meth:`predict`.
        X_target : list of (T_n, n_features) array-likes or sparse matrices, default=None
            The sequences whose tokens' labels matter (for instance a
            sample of the inputs the tagger will be used on). None: ``X``
            (the pool's own distribution).

        Returns
        -------
        information_gain : ndarray of shape (n_sequences,)
            In nats per target token, at least 0.

        Raises
        ------
        ValueError
            If the model was fitted in the inducing-point form
            (``approximation_ == "inducing"``): its potentials are joint over
            sequences only through the inducing variables, which this does
            not sample.
        MemoryBudgetError
            If the draws of the potentials of ``X`` and ``X_target`` would
            not fit in :func:`~skgpstruct._memory.memory_budget` (lower
            ``n_predict_samples`` or pass a smaller ``X_target``).
        """
        check_is_fitted(self, self._fitted_attribute)
        if self.approximation_ != "features":
            raise ValueError(
                "predict_information_gain needs the weight-space form (approximation_ "
                "'features', a linear kernel); this model was fitted with inducing "
                "points.")
        data = self._check_X(X)
        target = data if X_target is None else self._check_X(X_target)
        S, V = self.n_predict_samples, len(self.classes_)
        n_tokens = data.n_tokens + (0 if X_target is None else target.n_tokens)
        # the draws and the target's marginals, and per sequence in flight the
        # conditional predictive of the target and its KL terms (and temporaries)
        in_flight = min(effective_n_jobs(self.n_jobs), data.n_sequences)
        need = 8.0 * S * V * (n_tokens + target.n_tokens * (1 + _PER_SEQUENCE_COPIES
                                                            * in_flight))
        if need > memory_budget():
            raise MemoryBudgetError(
                f"predict_information_gain would need about {need / 1024 ** 3:.1f} GiB "
                f"for {S} draws of {n_tokens} tokens' potentials; lower "
                "n_predict_samples or pass a smaller X_target.")
        B = self._transition_draws()
        seeds = sequence_seeds(data, self.predict_seed_)
        with small_blas(), self._parallel() as parallel:
            F_target = self._joint_unary_draws(
                target, seeds if X_target is None else sequence_seeds(target, self.predict_seed_))
            P = np.concatenate(parallel(
                delayed(_draw_marginals)(F_target[:, a:b], B)
                for a, b in zip(target.offsets[:-1], target.offsets[1:])), axis=1)
            F = F_target if X_target is None else self._joint_unary_draws(data, seeds)
            # chain.path_information_gain per sequence, the target's part once
            weights = _weights(S, None)
            prepared = _prepare_target(P, weights)
            out = parallel(
                delayed(_information_gain)(F[:, a:b], B, weights, prepared,
                                           np.random.default_rng([int(seed), 6]))
                for a, b, seed in zip(data.offsets[:-1], data.offsets[1:], seeds))
        return np.asarray(out, dtype=np.float64)

    def _transition_draws(self):
        """(S, V, V) draws of the transitions, seeded by ``predict_seed_``."""
        V = len(self.classes_)
        eps = np.random.default_rng([self.predict_seed_, 5]).standard_normal(
            (self.n_predict_samples, V, V))
        return self._potential_scale * (self.transition_mean_
                                        + np.sqrt(self.transition_var_) * eps)

    def _weight_variances(self):
        """``coef_var_`` with the prior variance on the features never active
        in training (the bias column, if any, always is)."""
        var = self.coef_var_.copy()
        unseen = np.ones(var.shape[1], dtype=bool)
        unseen[self._active_features_] = False
        unseen[self.n_features_in_:] = False
        var[:, unseen] = self.temperature_ * float(self.kernel_.variance)
        return var

    def _joint_unary_draws(self, data, seeds):
        """(S, n_tokens, V) draws of the unary potentials of every token of
        ``data``, the weights of a draw shared by all tokens (each feature's
        draws seeded by the feature), plus each token's jitter noise (seeded
        by its sequence's entry of ``seeds``, from
        :func:`~skgpstruct._sequences.sequence_seeds`)."""
        S, V = self.n_predict_samples, len(self.classes_)
        X = self._feature_design(data.X_flat).tocsc()
        cols = np.flatnonzero(np.diff(X.indptr))
        std = np.sqrt(self._weight_variances())
        F = np.zeros((data.n_tokens, S * V))
        step = max(1, _BLOCK_DOUBLES // (S * V))
        for start in range(0, cols.size, step):
            block = cols[start:start + step]
            W = np.stack([np.random.default_rng([self.predict_seed_, 3, int(c)])
                          .standard_normal((S, V)) for c in block], axis=2)
            W = self.coef_[None, :, block] + std[None, :, block] * W  # (S, V, cols)
            F += X[:, block] @ W.reshape(S * V, block.size).T
        F = F.reshape(data.n_tokens, S, V).transpose(1, 0, 2)
        jitter = np.sqrt(self._feature_jitter())
        for (a, b), seed in zip(zip(data.offsets[:-1], data.offsets[1:]), seeds):
            F[:, a:b] += jitter * np.random.default_rng([int(seed), 4]).standard_normal(
                (S, b - a, V))
        return self._potential_scale * F


def _draw_marginals(U, B):
    """Token marginals (S, T, V) of one sequence under each draw."""
    return chain.marginals(U, B)[0]
