"""Expected predictive information gain of GPStructTagger.

:meth:`GPStructTagger.predict_information_gain` asks which sequences are
worth labelling: how much the label sequence of each would tell about the
labels of the tokens of a target set (by default the sequences themselves,
an unlabelled pool). That needs posterior draws that are *joint* over
sequences (a label seen in one sentence informs another through the weights
they share), where the tagger's other predictions draw each sequence's
potentials from its own marginal. In the weight-space form they are cheap:
one draw of the weights gives the potentials of every token. In the
inducing-point form a draw takes the inducing variables and the residual the
inducing points leave, jointly over the target's tokens.
"""

import numpy as np
from joblib import delayed, effective_n_jobs
from scipy.linalg import solve_triangular
from sklearn.utils.validation import check_is_fitted

from .. import chain
from .._utils.memory import MemoryBudgetError, memory_budget
from .predict import alone_sequence
from .._utils.parallel import small_blas
from .._input.sequences import sequence_seeds
from ..chain.paths import _information_gain, _prepare_target, _weights
from ..gp.terms import jittered_cholesky

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
        <skgpstruct._input.sequences.sequence_seeds>`), so a sequence's value
        depends on that sequence, ``X_target`` and the model only. It is an
        estimate from those draws: a sequence that shares no feature with
        the target (nor, with a point-mass transition posterior, anything
        else) comes back slightly above 0, the upward bias of a mutual
        information estimated from finitely many draws, which shrinks as
        ``1 / n_predict_samples``.

        In the inducing-point form (``approximation_ == "inducing"``, that
        of the kernels other than the linear one) the draws are of ``q(f) = int p(f
        | u) q(u) du``: ``n_predict_samples`` per mixture component (weighted
        by ``weights_``), each taking the inducing variables from its
        component and the part of every token's potentials they leave free
        (the Nystrom residual ``k(x, x') - k(x, Z) k(Z, Z)^-1 k(Z, x')``)
        jointly over the tokens of the target, then each sequence's given the
        target's. That residual correlates tokens alike but far from the
        inducing points, in whichever sequences they are: a sequence whose
        tokens repeat the target's tells about them even where the inducing
        points span little. The target's tokens are drawn as one Gaussian, so
        the memory and time grow as the square and the cube of their number
        (pass a sample of the pool as ``X_target`` where it is large). A
        sequence's value depends on that sequence, ``X_target`` and the
        model only here too; ``X_target=X`` estimates the same quantity as
        the default from other draws.

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
        MemoryBudgetError
            If the draws of the potentials of ``X`` and ``X_target`` (and,
            in the inducing-point form, the covariance of the target's
            tokens) would not fit in :func:`~skgpstruct._utils.memory.memory_budget`
            (lower ``n_predict_samples`` or pass a smaller ``X_target``).
        """
        check_is_fitted(self, self._fitted_attribute)
        data = self._check_X(X)
        target = data if X_target is None else self._check_X(X_target)
        inducing = self.approximation_ != "features"
        V = len(self.classes_)
        D = self.n_predict_samples * (len(self.weights_) if inducing else 1)
        n_tokens = data.n_tokens + (0 if X_target is None else target.n_tokens)
        # the draws and the target's marginals, and per sequence in flight the
        # conditional predictive of the target and its KL terms (and temporaries);
        # inducing: the target's residual covariance and its factor
        in_flight = min(effective_n_jobs(self.n_jobs), data.n_sequences)
        need = 8.0 * D * V * (n_tokens + target.n_tokens * (1 + _PER_SEQUENCE_COPIES
                                                            * in_flight))
        if inducing:
            need += 8.0 * 2 * target.n_tokens ** 2
        if need > memory_budget():
            raise MemoryBudgetError(
                f"predict_information_gain would need about {need / 1024 ** 3:.1f} GiB "
                f"for {D} draws of {n_tokens} tokens' potentials; lower "
                "n_predict_samples or pass a smaller X_target.")
        B = self._transition_draws(D)
        seeds = sequence_seeds(data, self.predict_seed_)
        with small_blas(), self._parallel() as parallel:
            if inducing:
                F_target, F = self._inducing_unary_draws(
                    target, None if X_target is None else data, seeds, parallel)
                weights = np.repeat(self.weights_, self.n_predict_samples)
            else:
                F_target = self._joint_unary_draws(
                    target,
                    seeds if X_target is None else sequence_seeds(target, self.predict_seed_))
                F = F_target if X_target is None else self._joint_unary_draws(data, seeds)
                weights = None
            P = np.concatenate(parallel(
                delayed(_draw_marginals)(F_target[:, a:b], B)
                for a, b in zip(target.offsets[:-1], target.offsets[1:])), axis=1)
            # chain.path_information_gain per sequence, the target's part once
            weights = _weights(D, weights)
            prepared = _prepare_target(P, weights)
            out = parallel(
                delayed(_information_gain)(F[:, a:b], B, weights, prepared,
                                           np.random.default_rng([int(seed), 6]))
                for a, b, seed in zip(data.offsets[:-1], data.offsets[1:], seeds))
        return np.asarray(out, dtype=np.float64)

    def _transition_draws(self, n_draws):
        """(n_draws, V, V) draws of the transitions, seeded by ``predict_seed_``."""
        V = len(self.classes_)
        eps = np.random.default_rng([self.predict_seed_, 5]).standard_normal(
            (n_draws, V, V))
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
        :func:`~skgpstruct._input.sequences.sequence_seeds`)."""
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


    def _inducing_unary_draws(self, target, data, seeds, parallel):
        """Joint draws of the unary potentials in the inducing-point form.

        ``q(f) = int p(f | u) q(u) du``: each of the ``n_components *
        n_predict_samples`` draws takes the whitened inducing variables ``v``
        from its component of ``q`` (seeded by ``predict_seed_``), the mean
        ``A v`` of every token, and the Nystrom residual ``k(x, x') - A_x
        A_x'^T`` (with the model's jitter on the diagonal), which is
        correlated across the tokens of different sequences, not only within
        one: the residual of the target's tokens is drawn jointly (seeded by
        ``predict_seed_``), and each sequence of ``data`` given it (seeded by
        its entry of ``seeds``), so that its draws are exact jointly with the
        target's whatever else is in ``data``. Returns ``(F_target, F)``, each
        (n_draws, tokens, V); ``F`` is ``F_target`` when ``data`` is None."""
        S = self.n_predict_samples
        K, V, M = self.q_mu_.shape
        eps = np.random.default_rng([self.predict_seed_, 7]).standard_normal((K, S, V * M))
        if self.q_sqrt_.ndim == 3:  # coupled: (K, V M, V M), label-major
            v = (self.q_mu_.reshape(K, 1, V * M)
                 + np.matmul(eps, self.q_sqrt_.transpose(0, 2, 1))).reshape(K, S, V, M)
        else:  # mean-field: (K, V, M, M)
            v = self.q_mu_[:, None] + np.matmul(
                eps.reshape(K, S, V, M).transpose(0, 2, 1, 3),
                self.q_sqrt_.transpose(0, 1, 3, 2)).transpose(0, 2, 1, 3)
        # token-major layouts (tokens, draws x labels): one matrix product each
        v = v.reshape(K * S * V, M).T  # (M, draws x labels)
        X_t = target.X_flat
        A_t = self._terms(target).A
        C = self._residual(X_t, A_t)
        L = jittered_cholesky(C, 0.0, "The residual covariance of the target's tokens")[0]
        Z = np.random.default_rng([self.predict_seed_, 8]).standard_normal(
            (target.n_tokens, K * S * V))
        F_target = _draw_major(A_t @ v + L @ Z, K * S, V)
        if data is None:
            return self._potential_scale * F_target, self._potential_scale * F_target
        parts = parallel(
            delayed(self._conditional_draws)(alone_sequence(data, n), X_t, A_t, L, Z, v,
                                             int(seed))
            for n, seed in enumerate(seeds))
        return (self._potential_scale * F_target,
                self._potential_scale * np.concatenate(parts, axis=1))

    def _conditional_draws(self, sub, X_t, A_t, L, Z, v, seed):
        """(n_draws, T, V) draws of one sequence's unary potentials, joint with
        the target's (``L Z`` its residual draws and ``v`` the inducing ones,
        token-major as in :meth:`_inducing_unary_draws`)."""
        terms = self._terms(sub)  # A_n and the residual within the sequence
        base, factor = self._fixed_kernel()
        W = solve_triangular(L, factor * np.asarray(base(X_t, sub.X_flat)) - A_t @ terms.A.T,
                             lower=True)  # (target tokens, T)
        cond = terms.Ktilde[0] - W.T @ W
        Lc = jittered_cholesky(cond, 0.0, "The conditional residual covariance of a sequence")[0]
        n_draws = Z.shape[1] // len(self.classes_)
        e = np.random.default_rng([seed, 4]).standard_normal((sub.n_tokens, Z.shape[1]))
        return _draw_major(terms.A @ v + W.T @ Z + Lc @ e, n_draws, len(self.classes_))

    def _residual(self, X, A):
        """``k(X, X) + jitter I - A A^T`` under the fitted kernel, ``A`` from
        :meth:`_terms` (whose per-sequence ``Ktilde`` are its diagonal
        blocks), across sequences too."""
        base, factor = self._fixed_kernel()
        C = factor * np.asarray(base(X), dtype=np.float64) - A @ A.T
        C[np.diag_indices_from(C)] += factor * self.jitter_
        return C


def _draw_major(F, n_draws, V):
    """(tokens, draws x labels) to (draws, tokens, labels)."""
    return np.ascontiguousarray(F.reshape(F.shape[0], n_draws, V).transpose(1, 0, 2))


def _draw_marginals(U, B):
    """Token marginals (S, T, V) of one sequence under each draw."""
    return chain.marginals(U, B)[0]
