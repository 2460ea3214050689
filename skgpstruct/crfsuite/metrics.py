"""sklearn-crfsuite's ``metrics`` module: scores of label sequences.

Each function flattens the sequences (checking that they line up sequence by
sequence) and applies the :mod:`sklearn.metrics` function of the same name;
keyword arguments (``average``, ``labels``, ``digits``, ...) pass through.
They are :mod:`skgpstruct.metrics`'s, where the package's other sequence
metrics (chunk F1, calibration) are.

``None`` in ``y_true`` marks an unknown label: the token is skipped (its
prediction is ignored); ``sequence_accuracy_score`` counts a sequence as
correct when all its known tokens are, and leaves out a sequence without a
known token. A ``y_true`` without any known token is a ValueError.
"""

from ..metrics import (flat_accuracy_score, flat_classification_report, flat_f1_score,
                       flat_fbeta_score, flat_precision_score, flat_recall_score,
                       sequence_accuracy_score)

__all__ = [
    "flat_accuracy_score",
    "flat_precision_score",
    "flat_recall_score",
    "flat_f1_score",
    "flat_fbeta_score",
    "flat_classification_report",
    "sequence_accuracy_score",
]
