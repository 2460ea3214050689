"""Metrics for lists of label sequences.

Every function takes ``y_true`` and ``y_pred`` as lists of sequences (one list
or 1-D array of labels per sequence, as the estimators' ``predict`` returns)
and checks that they line up sequence by sequence before flattening them, so
that a misaligned prediction is an error, not a silently wrong score. The
scorers at the bottom (``flat_accuracy``, ...) plug into
``GridSearchCV(scoring=...)`` and ``cross_val_score``.

The calibration metrics (``marginal_log_loss``, ``marginal_brier_score``,
``expected_calibration_error``, ``reliability_curve``, ``selective_error``,
``risk_coverage_curve``, ``sequence_log_loss``) score the token marginals of
``predict_marginals`` instead of the predicted labels; they take the labels of
the marginals' columns as ``labels=`` (the estimator's ``classes_``), and
``make_marginal_scorer`` turns any of them into a scorer.

``None`` in ``y_true`` marks an unknown label: every metric and scorer skips
that token (its prediction or marginal is ignored). ``sequence_accuracy_score``
judges a sequence on its known tokens and leaves out a sequence with none;
``chunk_f1_score`` leaves out every sequence with an unknown tag. A ``y_true``
without any known token is a ValueError.
"""

from . import _sequence
from ._sequence import *  # noqa: F401,F403  (the names of _sequence.__all__)

__all__ = list(_sequence.__all__)
