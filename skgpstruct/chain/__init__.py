"""Maths of linear chains: pure functions on potentials, no estimator state.

Potentials for one sequence are unary scores ``U`` of shape ``(T, V)`` and
transition scores ``B`` of shape ``(V, V)`` with ``B[i, j]`` the score of label
``i`` at position ``t - 1`` followed by label ``j`` at ``t``; optional
``start`` / ``end`` vectors of shape ``(V,)`` are added to the first / last
position. Batched forms take ``U`` of shape ``(S, T, V)`` with ``B`` of shape
``(V, V)`` (shared) or ``(S, V, V)``.
"""

from . import exact
from . import paths
from . import pseudo
from . import randomized
from .backend import get_backend
from .nbest import nbest_viterbi
from .exact import *  # noqa: F401,F403  (the names of exact.__all__)
from .paths import *  # noqa: F401,F403
from .pseudo import *  # noqa: F401,F403
from .randomized import *  # noqa: F401,F403

__all__ = exact.__all__ + paths.__all__ + pseudo.__all__ + randomized.__all__ + ["get_backend", "nbest_viterbi"]
