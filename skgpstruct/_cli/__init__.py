"""The command line behind :mod:`skgpstruct.cli` (``skgpstruct train``,
``tag`` and ``eval``), in the manner of CRF++'s ``crf_learn`` /
``crf_test`` and CoNLL's ``conlleval``.

* ``_common``: the error type of the command line, input decoding (files or
  stdin), column files and warnings relayed as one-line messages;
* ``_model``: the model file (a dict of the fitted pipeline and its
  metadata, :func:`skgpstruct.save`'s format) and the version rule applied
  when it is loaded;
* ``_train``: ``skgpstruct train`` (data, features, tagger, pipeline);
* ``_tag``: ``skgpstruct tag`` (crf_test's output, ``-v`` and ``-n``);
* ``_constraints``: ``tag --allowed`` (the labels each token may take) and
  ``train --unknown-label`` (partial labels);
* ``_eval_input``: ``skgpstruct eval``'s input (plain, ``-v1`` / ``-v2``
  output; one file or two);
* ``_chunks``: conlleval's chunks and ``skgpstruct eval``.

The argument parser and ``main`` live in :mod:`skgpstruct.cli`.
"""

from ._chunks import chunk_scores, conlleval_chunks, evaluate
from ._common import CLIError
from ._model import MODEL_KEY, load_model, save_model
from ._tag import tag
from ._train import train

__all__ = [
    "CLIError",
    "MODEL_KEY",
    "chunk_scores",
    "conlleval_chunks",
    "evaluate",
    "load_model",
    "save_model",
    "tag",
    "train",
]
