"""Maths of linear chains: pure functions on potentials, no estimator state.

Potentials for one sequence are unary scores ``U`` of shape ``(T, V)`` and
transition scores ``B`` of shape ``(V, V)`` with ``B[i, j]`` the score of label
``i`` at position ``t - 1`` followed by label ``j`` at ``t``; optional
``start`` / ``end`` vectors of shape ``(V,)`` are added to the first / last
position. Batched forms take ``U`` of shape ``(S, T, V)`` with ``B`` of shape
``(V, V)`` (shared) or ``(S, V, V)``.
"""

from .exact import (
    backward_log,
    forward_log,
    log_likelihood,
    log_likelihood_grad,
    log_likelihood_grad_ragged,
    log_partition,
    marginals,
    marginals_ragged,
    viterbi,
    viterbi_ragged,
)
from .pseudo import pseudo_log_likelihood, pseudo_log_likelihood_grad
from .randomized import (
    IndexSets,
    LowRankTransitions,
    RandomizedForward,
    RandomizedGumbelSample,
    RandomizedMarginals,
    make_proposal,
    randomized_entropy,
    randomized_gumbel_sample,
    randomized_log_partition,
    randomized_log_partition_draws,
    randomized_marginals,
    sample_index_sets,
    topk_log_partition,
)

__all__ = [
    "forward_log",
    "backward_log",
    "log_partition",
    "log_likelihood",
    "log_likelihood_grad",
    "marginals",
    "viterbi",
    "log_likelihood_grad_ragged",
    "viterbi_ragged",
    "marginals_ragged",
    "pseudo_log_likelihood",
    "pseudo_log_likelihood_grad",
    "LowRankTransitions",
    "IndexSets",
    "RandomizedForward",
    "RandomizedMarginals",
    "RandomizedGumbelSample",
    "make_proposal",
    "sample_index_sets",
    "randomized_log_partition",
    "randomized_log_partition_draws",
    "randomized_marginals",
    "randomized_entropy",
    "randomized_gumbel_sample",
    "topk_log_partition",
]
