"""RandomizedCRFTagger's weights as sklearn-crfsuite's dicts: the views behind
the tagger's ``state_features_`` / ``transition_features_`` and
:mod:`skgpstruct.inspection`."""

import numpy as np

__all__ = ["state_weights", "transition_weights"]


def state_weights(coef, labels, names):
    """``{(names[feature], labels[label]): weight}`` of the non-zero entries
    of ``coef`` (shape ``(n_features, n_labels)``), in feature-then-label
    order."""
    rows, cols = np.nonzero(coef)
    return {(names[r], labels[c]): float(coef[r, c]) for r, c in zip(rows, cols)}


def transition_weights(B, labels):
    """``{(labels[i], labels[j]): B[i, j]}`` for every ordered pair."""
    return {(labels[i], labels[j]): float(B[i, j])
            for i in range(B.shape[0]) for j in range(B.shape[1])}
