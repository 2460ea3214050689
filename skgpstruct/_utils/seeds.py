"""The seed range of the package's random draws."""

import numpy as np

__all__ = ["SEED_MAX"]

#: Largest per-sequence seed, exclusive: the estimators draw seeds in
#: ``[0, SEED_MAX)`` (``RandomState.randint(SEED_MAX)``).
SEED_MAX = np.iinfo(np.int32).max
