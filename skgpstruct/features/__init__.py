"""Transformers from token descriptions to sparse feature sequences.

* :class:`CRFppTemplate` expands CRF++ feature templates (``U01:%x[-1,0]``)
  over column sequences as :func:`skgpstruct.datasets.load_crfpp` returns
  them, exactly as CRF++ does, into binary features.
* :class:`SequenceVectorizer` turns sklearn-crfsuite's input (a list of
  sequences of feature dicts) into numeric features, with
  :class:`~sklearn.feature_extraction.DictVectorizer`'s conventions.
* :class:`WordFeatures` needs no template: binary features of each token's
  word form (lowercased form, prefixes, suffixes, word shape, orthographic
  flags) and of its neighbours' forms, with a learned vocabulary or feature
  hashing.

All three output one scipy CSR matrix of shape ``(T_n, n_features)`` per
sequence (the ``X`` of the skgpstruct estimators), so they can be the first
step of a :class:`~sklearn.pipeline.Pipeline` in front of a tagger. One module
per transformer (``_crfpp``, ``_sequence_vectorizer``, ``_word``); ``_common``
holds their base class (one ``fit`` / ``fit_transform`` / ``transform`` path)
and the input checks they share.
"""

from ._crfpp import CRFppTemplate
from ._sequence_vectorizer import SequenceVectorizer
from ._word import WordFeatures

__all__ = ["CRFppTemplate", "SequenceVectorizer", "WordFeatures"]
