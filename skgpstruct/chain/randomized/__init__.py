"""Randomized dynamic programming (RDP) for linear chains with many states.

Fu, Cunningham and Lapata (2022) scale the forward algorithm to tens of
thousands of states by running it on a small random *sub-lattice*: at every
position ``t`` an index set Omega_t holds the ``K1`` states with the highest
proposal probability ``q_t`` (summed exactly) plus ``K2`` states drawn
i.i.d. from ``q_t`` restricted to the remaining states and renormalised
(``q~_t``), each drawn state weighted by ``1 / (K2 q~_t)``. The forward
recursion then costs O(T K^2) time and O(T K) memory (``K = K1 + K2``)
instead of O(T N^2), and the estimate ``Z-hat`` of the partition function is
unbiased in linear space (paper Appendix A: each position's weighted sum is
an unbiased estimate of the sum over all states, the positions are drawn
independently and ``Z`` is multilinear in them), so that
``E[log Z-hat] <= log Z`` by Jensen's inequality.

Conventions (as in :mod:`skgpstruct.chain`): unary potentials ``U`` of shape
(T, N) and log p(y) = sum_t U[t, y_t] + sum_{t>=1} B[y_{t-1}, y_t] - log Z.
Transitions are given either

* full, as an array ``B`` of shape (N, N), ``B[i, j]`` the score of state
  ``i`` at ``t - 1`` followed by ``j`` at ``t``; or
* low rank, as :class:`LowRankTransitions` ``(left, right)`` (or a plain
  2-tuple) with ``B = left @ right.T``, ``left`` and ``right`` of shape
  (N, r): state ``i``'s "from" and "to" embeddings. ``B = E @ E.T`` is
  ``LowRankTransitions(E, E)``. No N x N matrix is ever formed: edge scores
  of the sub-lattice are computed from the embeddings in blocks.

Submodules: :mod:`~skgpstruct.chain.randomized.proposals`
(:func:`make_proposal`, :func:`sample_index_sets`: the sub-lattice),
:mod:`~skgpstruct.chain.randomized.algorithms`
(:func:`randomized_log_partition` (Alg. 1),
:func:`randomized_log_partition_draws` (many estimates in one jitted loop),
:func:`randomized_marginals` (the gradient, by the matching backward pass),
:func:`randomized_entropy` (Alg. 3), :func:`randomized_gumbel_sample`
(Alg. 4) and :func:`topk_log_partition` (the deterministic top-K
baseline)) and :mod:`~skgpstruct.chain.randomized.training`
(:func:`randomized_loss_grad_ragged`: the randomized training loss of many
labelled sequences and its gradient, on the CPU or the GPU). Every public
name is importable from this package.

References
----------
.. [1] Y. Fu, J. P. Cunningham and M. Lapata, "Scaling Structured Inference
   with Randomization", ICML 2022, arXiv:2112.03638.
"""

from . import _types
from . import algorithms
from . import proposals
from . import training
from ._types import *  # noqa: F401,F403  (the names of _types.__all__)
from .algorithms import *  # noqa: F401,F403
from .proposals import *  # noqa: F401,F403
from .training import *  # noqa: F401,F403

__all__ = _types.__all__ + proposals.__all__ + algorithms.__all__ + training.__all__
