"""Warnings and errors that skgpstruct raises besides ValueError / TypeError.

- :class:`JitterWarning`: a covariance needed more jitter than ``jitter``
  to be factorised (the fitted ``jitter_`` says how much).
- :class:`FitInterruptedWarning`: ``fit`` was interrupted (Ctrl-C) and
  kept the best iterate reached so far.
- :class:`MemoryBudgetError`: ``fit`` would need more memory than the
  budget (75 % of the machine's, or ``SKGPSTRUCT_MEMORY_BUDGET`` GiB); a
  MemoryError, raised before anything large is allocated.

Convergence problems use sklearn's
:class:`~sklearn.exceptions.ConvergenceWarning`.
"""

from ._utils.memory import MemoryBudgetError
from .gp.terms import JitterWarning
from .optim import FitInterruptedWarning

__all__ = ["FitInterruptedWarning", "JitterWarning", "MemoryBudgetError"]
