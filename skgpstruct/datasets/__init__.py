"""Sequence-labelling data: CRF++ and CoNLL-U files, the GPstruct papers' files,
synthetic chains.

* :func:`load_crfpp` reads CRF++'s column format (one token a line, the last
  column is the label, a blank line ends a sentence) into the column sequences
  that :class:`skgpstruct.features.CRFppTemplate` featurises.
* :func:`load_conllu` reads CoNLL-U files (Universal Dependencies
  treebanks) into the same column sequences and the tags of morphological
  tagging (UPOS, XPOS, FEATS or UPOS + FEATS).
* :func:`load_gpstruct` reads the binary features that the GPstruct papers used
  (pygpstruct's ``<i>.x`` / ``<i>.y`` files) into sparse matrices.
* :func:`load_benchmark` puts both together with the benchmark folds of
  ``folds.json`` (the papers' five-fold protocol); :func:`get_data_home` says where that
  data is looked for.
* :func:`make_chain_data` draws sequences from a random linear-chain
  (HMM-style) model: the built-in data of the demo and of most tests.

The loaders live in ``_loaders``, ``_gpstruct_files`` and ``_conllu`` (their
shared text reading in ``_text``), the synthetic data in ``_synthetic``.
"""

from ._conllu import load_conllu
from ._loaders import get_data_home, load_benchmark, load_crfpp, load_gpstruct
from ._synthetic import make_chain_data

__all__ = [
    "get_data_home",
    "load_benchmark",
    "load_conllu",
    "load_crfpp",
    "load_gpstruct",
    "make_chain_data",
]
