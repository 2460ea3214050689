"""The GP tagger's posterior predictive given a constraint (``allowed=``).

Given the set ``A`` of label paths a constraint allows, the posterior
predictive conditional is a ratio of posterior expectations,
``p(y | x, A) = E_f[p(y | f) 1(y in A)] / E_f[p(A | f)]``, estimated with
the draws of :func:`~skgpstruct._gpstruct.predict.draw_potentials` (those of
the unconstrained marginals and path probabilities): draw ``s`` of component
``k`` weighs ``w_ks = weights[k] / S * Z_A(f_s) / Z(f_s)``, with ``Z_A`` the
sum over the allowed paths (the potentials with ``-inf`` at the forbidden
labels), and within a draw the distribution is the CRF's given ``A``. The
marginals, path probabilities and path uncertainty below all use these
weights, so that summing the path probabilities over the allowed paths with
``y_t = j`` gives the marginals (to rounding). The weights are the
posterior given that the path lies in ``A``: a constraint is an observation.
"""

import numpy as np
from scipy.special import logsumexp

from .. import chain
from .._tagging.predict import entropy, renormalize_rows

__all__ = ["constrained_draws", "constrained_marginals", "constrained_path_log_proba",
           "constrained_path_uncertainty"]


def constrained_draws(draws, weights, log_mask):
    """``(F_A, B, w, factored)``: the draws ``(F, B, factored)`` of
    :func:`~skgpstruct._gpstruct.predict.draw_potentials` of one sequence
    with ``log_mask`` (T, V; 0 or ``-inf``) added, (K S, T, V), their
    transitions (K S, V, V) and the normalised weights ``w`` (K S,) of the
    module's ratio (``weights``: the mixture's)."""
    F, B, factored = draws
    K, S, T, V = F.shape[1:]
    F = F[0].reshape(K * S, T, V)
    B = np.broadcast_to(B[0], (K, S, V, V)).reshape(K * S, V, V)
    F_A = F + log_mask
    log_w = (np.repeat(np.log(weights) - np.log(S), S)
             + chain.log_partition(F_A, B) - chain.log_partition(F, B))
    return F_A, B, np.exp(log_w - logsumexp(log_w)), factored


def constrained_marginals(draws, weights, log_mask, stats=False):
    """Marginals given the constraint ``log_mask``: the weighted mean of the
    draws' marginals given ``A`` (with ``stats`` also the weighted mean
    entropy and the weighted standard deviation)."""
    F_A, B, w, factored = constrained_draws(draws, weights, log_mask)
    unary, _ = chain.marginals(F_A, B)
    if factored:
        for u in unary:
            renormalize_rows(u)
    out = np.tensordot(w, unary, axes=1)
    if not stats:
        return out
    second = np.tensordot(w, unary ** 2, axes=1)
    mean_entropy = np.tensordot(w, entropy(unary), axes=1)
    return out, mean_entropy, np.sqrt(np.maximum(second - out ** 2, 0.0))


def constrained_path_log_proba(draws, weights, log_mask, path):
    """``log p(path | x, A)``: ``-inf`` for a path outside ``A``."""
    F_A, B, w, _ = constrained_draws(draws, weights, log_mask)
    with np.errstate(divide="ignore"):
        log_p = chain.log_likelihood(F_A, B, path) + np.log(w)
    return min(float(logsumexp(log_p)), 0.0)


def constrained_path_uncertainty(draws, weights, log_mask, n_paths, random_state):
    """``(entropy, mutual_information)`` of the path given ``A``: the
    mixture of the draws' CRFs given ``A`` with the weights above."""
    F_A, B, w, _ = constrained_draws(draws, weights, log_mask)
    return chain.mixture_path_entropy(F_A, B, w, n_paths=n_paths, random_state=random_state)
