"""A drop-in for sklearn-crfsuite: change the import, keep the code.

::

    from skgpstruct import crfsuite as sklearn_crfsuite
    from skgpstruct.crfsuite import metrics, scorers

:class:`CRF` takes sklearn-crfsuite's parameters and returns what it
returns, trained by :class:`~skgpstruct.RandomizedCRFTagger` (exact
forward-backward, L-BFGS / OWL-QN as CRFsuite) or, with ``tagger="gp"``, by
:class:`~skgpstruct.GPStructTagger`. :mod:`~skgpstruct.crfsuite.metrics` and
:mod:`~skgpstruct.crfsuite.scorers` are sklearn-crfsuite's modules of the
same names. The side-by-side table of every method and attribute is in the
documentation's "Coming from sklearn-crfsuite" page.
"""

from . import metrics, scorers  # noqa: F401  (crfsuite.metrics after "import crfsuite")
from ._estimator import CRF, TrainingLog

__all__ = ["CRF", "TrainingLog"]
