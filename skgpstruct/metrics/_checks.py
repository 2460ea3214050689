"""Input checks of the metrics of label sequences, and unknown gold labels.

The label metrics check that ``y_true`` and ``y_pred`` line up sequence by
sequence (:func:`_check_sequence_pairs`). ``None`` in a sequence of
``y_true`` marks a token whose label is unknown, which every metric of
:mod:`skgpstruct.metrics` skips (the token is dropped from the score; its
prediction or marginal is ignored).

Only ``None`` is unknown: a float NaN is a label like any other here (the
metrics treat it as they did before), and an input without ``None`` takes the
metrics' unchanged path.
"""

import numpy as np

from .._input.validation import _label_kind

#: The message of the ValueError raised when no token of ``y_true`` is known.
NO_KNOWN_LABEL = ("y_true has no known label: every token is None (unknown), so "
                  "there is nothing to score.")


def unknown_mask(seq):
    """Which tokens of the gold sequence ``seq`` are unknown (``None``).

    Parameters
    ----------
    seq : array-like of shape (T,)
        One gold label sequence, as given (a list, tuple or array).

    Returns
    -------
    mask : ndarray of bool of shape (T,) or None
        True where the label is ``None``; ``None`` when no label is, or
        when ``seq`` is not a 1-D sequence (left to the callers' checks).
    """
    if isinstance(seq, (str, bytes)) or (isinstance(seq, np.ndarray)
                                         and seq.dtype != object):
        return None
    try:
        values = np.asarray(seq, dtype=object)
    except ValueError:  # ragged nesting: an error for the callers' checks
        return None
    if values.ndim != 1:
        return None
    mask = np.fromiter((v is None for v in values), dtype=bool,
                       count=values.shape[0])
    return mask if mask.any() else None


def keep_known(seq, known):
    """The tokens of the 1-D sequence ``seq`` where ``known`` is True.

    Parameters
    ----------
    seq : array-like of shape (T,)
        Labels (gold or predicted) of one sequence.
    known : ndarray of bool of shape (T,)
        The tokens to keep.

    Returns
    -------
    kept : ndarray or list
        A slice of ``seq`` when it is an array of a plain dtype, otherwise
        a list of its kept labels (so that numpy reads them as str or
        numbers, not as objects).
    """
    if isinstance(seq, np.ndarray) and seq.dtype != object:
        return seq[known]
    return np.asarray(seq, dtype=object)[known].tolist()


def _drop_unknown(i, a, b):
    """Sequence ``i`` without the tokens whose gold label is None.

    Returns ``(a, b, known)``: ``a`` and ``b`` unchanged and ``known`` None
    when ``a`` has no None, else the known tokens of both and their mask.
    """
    unknown = unknown_mask(a)
    if unknown is None:
        return a, b, None
    b_obj = np.asarray(b, dtype=object)
    if b_obj.ndim != 1:
        raise ValueError(f"Sequence {i} must be 1-D in both y_true and y_pred, "
                         f"got shapes {unknown.shape} and {b_obj.shape}.")
    if b_obj.shape[0] != unknown.shape[0]:
        raise ValueError(f"Sequence {i} has {unknown.shape[0]} labels in y_true "
                         f"but {b_obj.shape[0]} in y_pred.")
    known = ~unknown
    return keep_known(a, known), keep_known(b, known), known


def _check_sequence_pairs(y_true, y_pred):
    """Return y_true, y_pred as lists of 1-D arrays of matching lengths, the
    tokens whose gold label is None dropped, and the mask of the known tokens
    of each sequence (None for a sequence without None)."""
    if isinstance(y_true, str) or isinstance(y_pred, str):
        raise TypeError("y_true and y_pred must be lists of label sequences.")
    y_true = list(y_true)
    y_pred = list(y_pred)
    if len(y_true) != len(y_pred):
        raise ValueError(
            f"y_true has {len(y_true)} sequences but y_pred has {len(y_pred)}."
        )
    if len(y_true) == 0:
        raise ValueError("y_true and y_pred are empty.")
    out_true, out_pred, out_known = [], [], []
    first = None  # (where, kind) of the first labels seen
    for i, (a, b) in enumerate(zip(y_true, y_pred)):
        if isinstance(a, str) or isinstance(b, str):
            raise TypeError(
                f"Sequence {i} is a string; each sequence must be a list of "
                "labels, one per token."
            )
        a, b, known = _drop_unknown(i, a, b)
        # str and number labels would be converted to one type and compared
        # as strings (1 == "1"): refused, as fit refuses them
        for name, seq in (("y_true", a), ("y_pred", b)):
            if np.size(seq) == 0:
                continue  # no labels, no type
            kind = _label_kind(seq)
            if first is None:
                first = (f"{name} sequence {i}", kind)
            if kind == "mixed" or kind != first[1]:
                where = (f"{name} sequence {i} mixes str and non-str labels"
                         if kind == "mixed" else
                         f"{first[0]} has {first[1]} labels, {name} sequence {i} "
                         f"{kind} labels")
                raise ValueError(
                    f"The labels mix types ({where}); use one type (all str or "
                    "all numbers), so that they are not silently converted."
                )
        a = np.asarray(a)
        b = np.asarray(b)
        if a.ndim != 1 or b.ndim != 1:
            raise ValueError(
                f"Sequence {i} must be 1-D in both y_true and y_pred, got "
                f"shapes {a.shape} and {b.shape}."
            )
        if a.shape[0] != b.shape[0]:
            raise ValueError(
                f"Sequence {i} has {a.shape[0]} labels in y_true but "
                f"{b.shape[0]} in y_pred."
            )
        out_true.append(a)
        out_pred.append(b)
        out_known.append(known)
    if any(k is not None for k in out_known) and not any(a.size for a in out_true):
        raise ValueError(NO_KNOWN_LABEL)
    return out_true, out_pred, out_known


def _flatten(y_true, y_pred):
    """The flattened known tokens of both, and the mask of the known tokens
    among all of them (None when every token is known)."""
    y_true, y_pred, known = _check_sequence_pairs(y_true, y_pred)
    flat_known = None
    if any(k is not None for k in known):
        flat_known = np.concatenate([
            np.ones(len(a), dtype=bool) if k is None else k
            for a, k in zip(y_true, known)])
    return np.concatenate(y_true), np.concatenate(y_pred), flat_known


def _drop_unknown_weights(signature, known, args, kwargs):
    """``args``, ``kwargs`` of a flat metric with a ``sample_weight`` given for
    all the tokens cut to the known ones."""
    bound = signature.bind(None, None, *args, **kwargs)
    holder = bound.arguments
    if "sample_weight" not in holder:  # in the metric's **kwargs, if anywhere
        holder = next((holder[p.name] for p in signature.parameters.values()
                       if p.kind is p.VAR_KEYWORD and p.name in holder), {})
    weights = holder.get("sample_weight")
    if weights is not None:
        weights = np.asarray(weights)
        if weights.shape[:1] != known.shape:
            raise ValueError(
                f"sample_weight has shape {weights.shape} but y_true has "
                f"{known.shape[0]} tokens (the unknown ones included)."
            )
        holder["sample_weight"] = weights[known]
    return bound.args[2:], bound.kwargs
