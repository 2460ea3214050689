"""Inspecting a fitted :class:`~skgpstruct.RandomizedCRFTagger`, as sklearn-crfsuite does.

sklearn-crfsuite users read a model through ``crf.state_features_`` (a dict
``{(attribute, label): weight}``) and ``crf.transition_features_`` (``{(label
from, label to): weight}``), and print the strongest of them. The same views
of a :class:`~skgpstruct.RandomizedCRFTagger`:

* :func:`state_features` and :func:`transition_features` return those
  dicts (also the tagger's ``state_features_`` / ``transition_features_``
  properties, with feature indices for names);
* :func:`top_features` lists the ``n`` largest (or most negative) of them,
  with feature names taken from a :class:`~sklearn.pipeline.Pipeline`'s
  transformers (``get_feature_names_out``) when the model is one.
"""

from numbers import Integral

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from ._randomized_crf.tagger import RandomizedCRFTagger
from ._randomized_crf.weights import state_weights, transition_weights

__all__ = ["state_features", "top_features", "transition_features"]


def _tagger_and_names(model, feature_names):
    """The tagger of ``model`` (itself or a Pipeline's last step) and the
    names of its input features (given, from the Pipeline, or indices)."""
    tagger = model[-1] if isinstance(model, Pipeline) else model
    if not isinstance(tagger, RandomizedCRFTagger):
        raise TypeError(
            "state and transition weights are those of a RandomizedCRFTagger (or a "
            f"Pipeline ending in one); got {type(tagger).__name__}."
        )
    check_is_fitted(tagger, "coef_")
    if feature_names is None and isinstance(model, Pipeline) and len(model) > 1:
        try:
            feature_names = model[:-1].get_feature_names_out()
        except (AttributeError, ValueError, TypeError):
            feature_names = None
    if feature_names is None:
        return tagger, list(range(tagger.n_features_in_))
    feature_names = np.asarray(feature_names, dtype=object)
    if feature_names.shape != (tagger.n_features_in_,):
        raise ValueError(
            f"feature_names must hold one name per input feature "
            f"({tagger.n_features_in_}); got shape {feature_names.shape}."
        )
    return tagger, feature_names.tolist()


def state_features(model, feature_names=None):
    """The state (unary) weights as ``{(feature, label): weight}``.

    Parameters
    ----------
    model : RandomizedCRFTagger or Pipeline
        A fitted tagger, or a fitted Pipeline ending in one.
    feature_names : array-like of str of shape (n_features,), default=None
        Names of the tagger's input features; by default the Pipeline's
        ``get_feature_names_out()`` when it has one, else the feature
        indices.

    Returns
    -------
    weights : dict
        ``{(feature, label): weight}`` for every non-zero weight (features
        never seen in training have zero weights and are left out). With
        thousands of features and labels this holds millions of entries:
        :func:`top_features` gives the strongest. The per-label bias is not
        a feature's weight: it is the tagger's ``intercept_``.
    """
    tagger, names = _tagger_and_names(model, feature_names)
    return state_weights(tagger.coef_, tagger.classes_.tolist(), names)


def transition_features(model):
    """The transition weights as ``{(label_from, label_to): weight}``.

    Parameters
    ----------
    model : RandomizedCRFTagger or Pipeline
        A fitted tagger, or a fitted Pipeline ending in one. Low-rank
        transitions are multiplied out (``left @ right.T``).

    Returns
    -------
    weights : dict
        One entry per ordered pair of labels.
    """
    tagger, _ = _tagger_and_names(model, None)
    return transition_weights(tagger._dense_transitions(), tagger.classes_.tolist())


def top_features(model, feature_names=None, *, n=20, kind="state", order="positive"):
    """The ``n`` strongest state or transition weights.

    Parameters
    ----------
    model : RandomizedCRFTagger or Pipeline
        A fitted tagger, or a fitted Pipeline ending in one.
    feature_names : array-like of str of shape (n_features,), default=None
        As in :func:`state_features` (unused for transitions).
    n : int, default=20
        How many to return.
    kind : {"state", "transition"}, default="state"
        Unary (feature, label) weights or (label, label) transitions.
    order : {"positive", "negative", "absolute"}, default="positive"
        The largest weights, the most negative, or the largest in absolute
        value.

    Returns
    -------
    top : list of ((key, key), float)
        ``((feature, label), weight)`` or ``((label_from, label_to),
        weight)``, strongest first (ties: in feature-then-label order). State
        weights of 0 are left out, as in :func:`state_features` (so fewer
        than ``n`` may come back, e.g. after L1 training).

    Examples
    --------
    >>> from skgpstruct import RandomizedCRFTagger
    >>> from skgpstruct.inspection import top_features
    >>> X = [[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]] * 5
    >>> y = [["A", "B"], ["A", "B"]] * 5
    >>> crf = RandomizedCRFTagger(c2=0.1).fit(X, y)
    >>> sorted(key for key, _ in top_features(crf, ["x0", "x1"], n=2))
    [('x0', 'A'), ('x1', 'B')]
    """
    if kind not in ("state", "transition"):
        raise ValueError(f"kind must be 'state' or 'transition', got {kind!r}.")
    if order not in ("positive", "negative", "absolute"):
        raise ValueError(
            f"order must be 'positive', 'negative' or 'absolute', got {order!r}."
        )
    if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}.")
    tagger, names = _tagger_and_names(model, feature_names)
    labels = tagger.classes_.tolist()
    if kind == "state":
        W = tagger.coef_
        key = (lambda i: (names[i // W.shape[1]], labels[i % W.shape[1]]))
    else:
        W = tagger._dense_transitions()
        key = (lambda i: (labels[i // W.shape[1]], labels[i % W.shape[1]]))
    flat = W.ravel()
    candidates = np.flatnonzero(flat) if kind == "state" else np.arange(flat.size)
    values = flat[candidates]
    score = {"positive": -values, "negative": values, "absolute": -np.abs(values)}[order]
    top = candidates[np.argsort(score, kind="stable")[: int(n)]]
    return [(key(i), float(flat[i])) for i in top]
