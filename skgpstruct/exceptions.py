"""Warnings and errors that skgpstruct raises besides ValueError / TypeError.

- :class:`JitterWarning`: a covariance needed more jitter than ``jitter``
  to be factorised (the fitted ``jitter_`` says how much).
- :class:`FitInterruptedWarning`: ``fit`` was interrupted (Ctrl-C) and
  kept the best iterate reached so far.
- :class:`MemoryBudgetError`: ``fit`` would need more memory than the
  budget (75 % of the machine's, or ``SKGPSTRUCT_MEMORY_BUDGET`` GiB); a
  MemoryError, raised before anything large is allocated.

- :class:`ModelFileError`: :func:`skgpstruct.load` refused a file (not a
  model file, an old pickle-based one, damaged, from another version, or
  asking for a type or a pickle the format does not hold), or
  :func:`skgpstruct.save` a model it cannot write safely; a ValueError.

Convergence problems use sklearn's
:class:`~sklearn.exceptions.ConvergenceWarning`.
"""

from ._model_files import ModelFileError
from ._utils.memory import MemoryBudgetError
from .gp.terms import JitterWarning
from .optim import FitInterruptedWarning

__all__ = ["FitInterruptedWarning", "JitterWarning", "MemoryBudgetError", "ModelFileError"]
