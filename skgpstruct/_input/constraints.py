"""Constraints at prediction (``allowed=``): which labels each token may
take, as a boolean mask over ``classes_``.

``allowed`` has one entry per sequence: ``None`` (no constraint) or one entry
per token, each ``None`` (any label), a single label (a string or number:
the label is forced) or a collection of labels (list, tuple, set, frozenset
or 1-D array). The taggers condition on the constraint: the CRF's
distribution over the paths it allows, the GP's posterior predictive given
that the path lies in the allowed set.
"""

from collections.abc import Set

import numpy as np

__all__ = ["allowed_mask"]


def _token_labels(entry, n, t):
    """The labels of one token's entry as a list (None: any label)."""
    if entry is None:
        return None
    if isinstance(entry, (str, bytes)) or np.ndim(entry) == 0 and not isinstance(
            entry, (list, tuple, Set)):
        return [entry.item() if isinstance(entry, np.generic) else entry]
    if isinstance(entry, np.ndarray) and entry.ndim != 1:
        raise ValueError(f"allowed[{n}][{t}] must be None, a label or a 1-D collection of "
                         f"labels, got an array of shape {entry.shape}.")
    labels = list(entry)
    if not labels:
        raise ValueError(f"allowed[{n}][{t}] is empty: token {t} of sequence {n} "
                         "would allow no label, so no path.")
    return labels


def allowed_mask(allowed, classes, lengths):
    """The boolean mask (n_tokens, n_classes) of an ``allowed`` constraint,
    or None when it constrains nothing.

    Parameters
    ----------
    allowed : list or None
        One entry per sequence: None, or one entry per token (None, a label
        or a collection of labels of ``classes``).
    classes : ndarray of shape (n_classes,)
        The fitted ``classes_``.
    lengths : ndarray of int of shape (n_sequences,)
        The sequences' lengths.

    Returns
    -------
    mask : ndarray of bool of shape (n_tokens, n_classes) or None

    Raises
    ------
    ValueError
        On another number of sequences or tokens than ``X``'s, a label not in
        ``classes`` or an empty collection (no path), naming the sequence and
        token.
    """
    if allowed is None:
        return None
    if isinstance(allowed, (str, bytes)) or not hasattr(allowed, "__len__"):
        raise TypeError("allowed must be a list with one entry per sequence (None or "
                        "one entry per token).")
    if len(allowed) != len(lengths):
        raise ValueError(f"allowed has {len(allowed)} entries but X has {len(lengths)} "
                         "sequences.")
    index = {c.item() if isinstance(c, np.generic) else c: j for j, c in enumerate(classes)}
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    mask = np.ones((int(offsets[-1]), len(classes)), dtype=bool)
    constrained = False
    for n, seq in enumerate(allowed):
        if seq is None:
            continue
        if isinstance(seq, (str, bytes)) or len(seq) != lengths[n]:
            raise ValueError(f"allowed[{n}] must be None or have one entry per token "
                             f"({lengths[n]}), got {seq!r:.80}.")
        for t, entry in enumerate(seq):
            labels = _token_labels(entry, n, t)
            if labels is None:
                continue
            row = mask[offsets[n] + t]
            row[:] = False
            for label in labels:
                key = label.item() if isinstance(label, np.generic) else label
                j = index.get(key) if _hashable(key) else None
                if j is None:
                    raise ValueError(f"allowed[{n}][{t}] holds {label!r}, not a label of "
                                     f"classes_ ({list(classes)[:20]}).")
                row[j] = True
            constrained = True
    return mask if constrained else None


def _hashable(x):
    try:
        hash(x)
    except TypeError:
        return False
    return True
