"""RandomizedCRFTagger's room: the estimator (:mod:`.tagger`) and its
row-sparse proximal AdaGrad path (:mod:`.sparse_adagrad`).
"""

from .tagger import RandomizedCRFTagger

__all__ = ["RandomizedCRFTagger"]
