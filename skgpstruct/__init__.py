"""skgpstruct: sequence labelling with uncertainty and at scale.

Scikit-learn compatible linear-chain models: ``GPStructTagger`` (a CRF whose
unary potentials are Gaussian-process functions of the token features, learned
by gray-box sparse variational inference) and ``RandomizedCRFTagger`` (a CRF
trained with randomized dynamic programming for large label sets), and
``save`` / ``load`` for model files that are safe to open (no pickles).

The maths of linear chains lives in :mod:`skgpstruct.chain`, the warnings and
errors in :mod:`skgpstruct.exceptions`, the data helpers
in :mod:`skgpstruct.datasets`, :mod:`skgpstruct.features` and
:mod:`skgpstruct.metrics`.
"""

__version__ = "0.1.0.dev0"

from ._gpstruct.tagger import GPStructTagger  # noqa: E402
from ._randomized_crf.tagger import RandomizedCRFTagger  # noqa: E402
from ._model_files import load, save  # noqa: E402

__all__ = ["GPStructTagger", "RandomizedCRFTagger", "load", "save", "__version__"]
