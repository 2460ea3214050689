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

from .. import chain
from .._input.sequences import sequence_seeds
from .._utils.memory import MemoryBudgetError, memory_budget
from .._utils.parallel import small_blas
from .inducing_form import alone_sequence, kernel_terms
from .predict import parallel
from .weight_space_form import FittedWeights, feature_design, feature_jitter
from ..chain.paths import _information_gain, _prepare_target, _weights
from ..gp.terms import jittered_cholesky

__all__ = ["inducing_unary_draws", "information_gain", "joint_unary_draws",
           "weight_variances"]

#: Arrays of the size of the target's marginals alive per sequence in flight
#: (:func:`~skgpstruct.chain.path_information_gain`: the conditional
#: predictive, its logarithm, the KL terms and the selection of them).
_PER_SEQUENCE_COPIES = 4
#: Weights drawn at once: (draws x labels x columns) doubles at most.
_BLOCK_DOUBLES = 1 << 22


def _check_memory(pred, data, target, given, inducing):
    """Refuse draws that would not fit in the memory budget."""
    V = pred.transition_mean.shape[0]
    D = pred.n_samples * (len(pred.weights) if inducing else 1)
    n_tokens = data.n_tokens + (target.n_tokens if given else 0)
    # the draws and the target's marginals, and per sequence in flight the
    # conditional predictive of the target and its KL terms (and temporaries);
    # inducing: the target's residual covariance and its factor
    in_flight = min(effective_n_jobs(pred.n_jobs), data.n_sequences)
    need = 8.0 * D * V * (n_tokens + target.n_tokens * (1 + _PER_SEQUENCE_COPIES
                                                        * in_flight))
    if inducing:
        need += 8.0 * 2 * target.n_tokens ** 2
    if need > memory_budget():
        raise MemoryBudgetError(
            f"predict_information_gain would need about {need / 1024 ** 3:.1f} GiB "
            f"for {D} draws of {n_tokens} tokens' potentials; lower "
            "n_predict_samples or pass a smaller X_target.")
    return D


def information_gain(pred, data, target=None):
    """The expected predictive information gain of each sequence of
    ``data`` about the labels of the tokens of ``target`` (None: those of
    ``data``) under the fitted posterior ``pred`` (a
    :class:`~skgpstruct._gpstruct.predict.Predictive`); see
    ``GPStructTagger.predict_information_gain``."""
    given = target is not None
    target = target if given else data
    inducing = not isinstance(pred.posterior, FittedWeights)
    D = _check_memory(pred, data, target, given, inducing)
    B = _transition_draws(pred, D)
    seeds = sequence_seeds(data, pred.seed)
    with small_blas(), parallel(pred) as run:
        if inducing:
            F_target, F = inducing_unary_draws(pred, target, data if given else None,
                                               seeds, run)
            weights = np.repeat(pred.weights, pred.n_samples)
        else:
            F_target = joint_unary_draws(
                pred, target, sequence_seeds(target, pred.seed) if given else seeds)
            F = joint_unary_draws(pred, data, seeds) if given else F_target
            weights = None
        P = np.concatenate(run(
            delayed(_draw_marginals)(F_target[:, a:b], B)
            for a, b in zip(target.offsets[:-1], target.offsets[1:])), axis=1)
        # chain.path_information_gain per sequence, the target's part once
        weights = _weights(D, weights)
        prepared = _prepare_target(P, weights)
        out = run(
            delayed(_information_gain)(F[:, a:b], B, weights, prepared,
                                       np.random.default_rng([int(seed), 6]))
            for a, b, seed in zip(data.offsets[:-1], data.offsets[1:], seeds))
    return np.asarray(out, dtype=np.float64)


def _transition_draws(pred, n_draws):
    """(n_draws, V, V) draws of the transitions, seeded by ``pred.seed``."""
    V = pred.transition_mean.shape[0]
    eps = np.random.default_rng([pred.seed, 5]).standard_normal((n_draws, V, V))
    return pred.scale * (pred.transition_mean + np.sqrt(pred.transition_var) * eps)


def weight_variances(fitted):
    """``coef_var_`` with the prior variance on the features never active
    in training (the bias column, if any, always is), of the
    :class:`~skgpstruct._gpstruct.weight_space_form.FittedWeights`
    ``fitted``."""
    var = fitted.coef_var.copy()
    unseen = np.ones(var.shape[1], dtype=bool)
    unseen[fitted.active] = False
    unseen[fitted.n_features:] = False
    var[:, unseen] = fitted.temperature * fitted.variance
    return var


def joint_unary_draws(pred, data, seeds):
    """(S, n_tokens, V) draws of the unary potentials of every token of
    ``data`` in the weight-space form, the weights of a draw shared by all
    tokens (each feature's draws seeded by the feature), plus each token's
    jitter noise (seeded by its sequence's entry of ``seeds``, from
    :func:`~skgpstruct._input.sequences.sequence_seeds`)."""
    fitted = pred.posterior
    S, V = pred.n_samples, pred.transition_mean.shape[0]
    X = feature_design(data.X_flat, fitted.bias_column).tocsc()
    cols = np.flatnonzero(np.diff(X.indptr))
    std = np.sqrt(weight_variances(fitted))
    F = np.zeros((data.n_tokens, S * V))
    step = max(1, _BLOCK_DOUBLES // (S * V))
    for start in range(0, cols.size, step):
        block = cols[start:start + step]
        W = np.stack([np.random.default_rng([pred.seed, 3, int(c)])
                      .standard_normal((S, V)) for c in block], axis=2)
        W = fitted.coef[None, :, block] + std[None, :, block] * W  # (S, V, cols)
        F += X[:, block] @ W.reshape(S * V, block.size).T
    F = F.reshape(data.n_tokens, S, V).transpose(1, 0, 2)
    jitter = np.sqrt(feature_jitter(fitted))
    for (a, b), seed in zip(zip(data.offsets[:-1], data.offsets[1:]), seeds):
        F[:, a:b] += jitter * np.random.default_rng([int(seed), 4]).standard_normal(
            (S, b - a, V))
    return pred.scale * F


def inducing_unary_draws(pred, target, data, seeds, run):
    """Joint draws of the unary potentials in the inducing-point form.

    ``q(f) = int p(f | u) q(u) du``: each of the ``n_components *
    n_samples`` draws takes the whitened inducing variables ``v`` from its
    component of ``q`` (seeded by ``pred.seed``), the mean ``A v`` of every
    token, and the Nystrom residual ``k(x, x') - A_x A_x'^T`` (with the
    model's jitter on the diagonal), which is correlated across the tokens
    of different sequences, not only within one: the residual of the
    target's tokens is drawn jointly (seeded by ``pred.seed``), and each
    sequence of ``data`` given it (seeded by its entry of ``seeds``), in
    ``run`` (a joblib ``Parallel``), so that its draws are exact jointly
    with the target's whatever else is in ``data``. Returns ``(F_target,
    F)``, each (n_draws, tokens, V); ``F`` is ``F_target`` when ``data`` is
    None."""
    fitted, S = pred.posterior, pred.n_samples
    K, V, M = fitted.q_mu.shape
    eps = np.random.default_rng([pred.seed, 7]).standard_normal((K, S, V * M))
    if fitted.q_sqrt.ndim == 3:  # coupled: (K, V M, V M), label-major
        v = (fitted.q_mu.reshape(K, 1, V * M)
             + np.matmul(eps, fitted.q_sqrt.transpose(0, 2, 1))).reshape(K, S, V, M)
    else:  # mean-field: (K, V, M, M)
        v = fitted.q_mu[:, None] + np.matmul(
            eps.reshape(K, S, V, M).transpose(0, 2, 1, 3),
            fitted.q_sqrt.transpose(0, 1, 3, 2)).transpose(0, 2, 1, 3)
    # token-major layouts (tokens, draws x labels): one matrix product each
    v = v.reshape(K * S * V, M).T  # (M, draws x labels)
    X_t = target.X_flat
    A_t = kernel_terms(fitted, target).A
    C = _residual(fitted, X_t, A_t)
    L = jittered_cholesky(C, 0.0, "The residual covariance of the target's tokens")[0]
    Z = np.random.default_rng([pred.seed, 8]).standard_normal(
        (target.n_tokens, K * S * V))
    F_target = _draw_major(A_t @ v + L @ Z, K * S, V)
    if data is None:
        return pred.scale * F_target, pred.scale * F_target
    parts = run(
        delayed(_conditional_draws)(fitted, alone_sequence(data, n), X_t, A_t, L, Z, v,
                                    int(seed))
        for n, seed in enumerate(seeds))
    return pred.scale * F_target, pred.scale * np.concatenate(parts, axis=1)


def _conditional_draws(fitted, sub, X_t, A_t, L, Z, v, seed):
    """(n_draws, T, V) draws of one sequence's unary potentials, joint with
    the target's (``L Z`` its residual draws and ``v`` the inducing ones,
    token-major as in :func:`inducing_unary_draws`)."""
    terms = kernel_terms(fitted, sub)  # A_n and the residual within the sequence
    V = fitted.q_mu.shape[1]
    W = solve_triangular(
        L, fitted.factor * np.asarray(fitted.kernel(X_t, sub.X_flat)) - A_t @ terms.A.T,
        lower=True)  # (target tokens, T)
    cond = terms.Ktilde[0] - W.T @ W
    Lc = jittered_cholesky(cond, 0.0,
                           "The conditional residual covariance of a sequence")[0]
    n_draws = Z.shape[1] // V
    e = np.random.default_rng([seed, 4]).standard_normal((sub.n_tokens, Z.shape[1]))
    return _draw_major(terms.A @ v + W.T @ Z + Lc @ e, n_draws, V)


def _residual(fitted, X, A):
    """``k(X, X) + jitter I - A A^T`` under the fitted kernel, ``A`` from
    :func:`~skgpstruct._gpstruct.inducing_form.kernel_terms` (whose
    per-sequence ``Ktilde`` are its diagonal blocks), across sequences too."""
    C = fitted.factor * np.asarray(fitted.kernel(X), dtype=np.float64) - A @ A.T
    C[np.diag_indices_from(C)] += fitted.factor * fitted.jitter
    return C


def _draw_major(F, n_draws, V):
    """(tokens, draws x labels) to (draws, tokens, labels)."""
    return np.ascontiguousarray(F.reshape(F.shape[0], n_draws, V).transpose(1, 0, 2))


def _draw_marginals(U, B):
    """Token marginals (S, T, V) of one sequence under each draw."""
    return chain.marginals(U, B)[0]
