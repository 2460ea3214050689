"""sklearn-crfsuite's ``scorers`` module: scorers for ``GridSearchCV`` and
``cross_val_score``.

``flat_accuracy`` (token accuracy) and ``sequence_accuracy`` (whole
sequences right), made with :func:`sklearn.metrics.make_scorer` from
:mod:`skgpstruct.crfsuite.metrics`; other scorers:
``make_scorer(metrics.flat_f1_score, average="weighted", labels=labels)``.
``None`` in ``y`` marks an unknown label: the scorers skip that token, as
the metrics do.
"""

from ..metrics import flat_accuracy, sequence_accuracy

__all__ = ["flat_accuracy", "sequence_accuracy"]
