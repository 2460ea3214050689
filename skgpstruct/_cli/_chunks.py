"""``skgpstruct eval``: token accuracy, per-label scores and conlleval's chunks.

Chunks are read from the tags as CoNLL's ``conlleval`` script reads them: a
tag ``X-TYPE`` splits at its first hyphen into the prefix ``X`` and the
type ``TYPE`` (a tag without hyphen, such as ``O`` or a bare ``B``, has the
empty type); a chunk starts at

* ``B`` (after anything), or ``I`` after ``O`` or at the start of a
  sentence (IOB1's chunks start with ``I``; so does a malformed IOB2 chunk);
* any tag other than ``O`` whose type differs from the previous tag's;

and it ends before ``B`` or ``O``, before a tag of another type, and at the
end of the sentence. conlleval's rules for the IOE tags ``E`` and the
brackets ``[`` / ``]`` are ported too. A predicted chunk is correct when a
gold chunk has the same first token, last token and type. Precision, recall
and F1 (FB1) are percentages; 0 where undefined, as in conlleval.
"""

import re
import sys
from collections import Counter

import numpy as np

from ._eval_input import read_eval_input

__all__ = ["chunk_scores", "conlleval_chunks", "evaluate", "read_eval_input"]

_SPLIT = re.compile(r"^([^-]*)-(.*)$", re.DOTALL)


def _split(label):
    m = _SPLIT.match(label)
    return (m.group(1), m.group(2)) if m else (label, "")


# conlleval's endOfChunk / startOfChunk: the (previous tag, tag) pairs
# between which a chunk ends / at which one starts, whatever the types
_END_PAIRS = frozenset({("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"),
                        ("E", "E"), ("E", "I"), ("E", "O")})
_START_PAIRS = frozenset({("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"),
                          ("E", "E"), ("E", "I"), ("O", "E")})


def _chunk_edge(pairs, prev_tag, tag, own_tag, prev_type, type_):
    """conlleval's rules of a chunk boundary: a pair of ``pairs``, a change
    of type at an ``own_tag`` other than ``O`` / ``.``, or a bracket there."""
    if (prev_tag, tag) in pairs:
        return True
    if own_tag not in ("O", ".") and prev_type != type_:
        return True
    return own_tag in ("[", "]")


def _end_of_chunk(prev_tag, tag, prev_type, type_):
    """conlleval's ``endOfChunk``: a chunk ends between the two tags."""
    return _chunk_edge(_END_PAIRS, prev_tag, tag, prev_tag, prev_type, type_)


def _start_of_chunk(prev_tag, tag, prev_type, type_):
    """conlleval's ``startOfChunk``: a chunk starts at ``tag``."""
    return _chunk_edge(_START_PAIRS, prev_tag, tag, tag, prev_type, type_)


def conlleval_chunks(labels):
    """The chunks of one sentence's tags, as conlleval finds them.

    Parameters
    ----------
    labels : sequence of str
        The tags of a sentence (IOB1, IOB2 / BIO, with or without types).

    Returns
    -------
    chunks : list of tuple (int, int, str)
        ``(first, last + 1, type)`` of each chunk, in order.

    Examples
    --------
    >>> conlleval_chunks(["B-NP", "I-NP", "O", "I-VP", "B-VP", "I-NP"])
    [(0, 2, 'NP'), (3, 4, 'VP'), (4, 5, 'VP'), (5, 6, 'NP')]
    >>> conlleval_chunks(["B", "I", "B", "O", "I"])
    [(0, 2, ''), (2, 3, ''), (4, 5, '')]
    """
    chunks = []
    start = None
    prev_tag, prev_type = "O", ""
    for i, label in enumerate(list(labels) + ["O"]):  # the sentence end: an O
        tag, type_ = _split(label)
        if start is not None and _end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((start, i, prev_type))
            start = None
        if i < len(labels) and _start_of_chunk(prev_tag, tag, prev_type, type_):
            if start is not None:  # E / bracket quirks: a start without an end
                chunks.append((start, i, prev_type))
            start = i
        prev_tag, prev_type = tag, type_
    return chunks


def _prf(correct, n_pred, n_gold):
    precision = 100.0 * correct / n_pred if n_pred else 0.0
    recall = 100.0 * correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "correct": correct, "found_pred": n_pred, "found_gold": n_gold}


def chunk_scores(y_true, y_pred):
    """conlleval's chunk precision, recall and F1, overall and per type.

    Parameters
    ----------
    y_true, y_pred : list of sequence of str
        Gold and predicted tags of each sentence (same lengths).

    Returns
    -------
    scores : dict
        ``"overall"`` and ``"per_type"`` (type -> the same keys): each a dict
        with ``precision``, ``recall``, ``f1`` (percent), ``correct``,
        ``found_pred`` and ``found_gold`` (numbers of chunks).

    Examples
    --------
    >>> s = chunk_scores([["B-NP", "I-NP", "O"]], [["B-NP", "O", "O"]])
    >>> s["overall"]["correct"], s["overall"]["found_pred"], s["overall"]["f1"]
    (0, 1, 0.0)
    """
    gold, pred, correct = Counter(), Counter(), Counter()
    for t, p in zip(y_true, y_pred):
        g_chunks, p_chunks = set(conlleval_chunks(t)), conlleval_chunks(p)
        gold.update(c[2] for c in g_chunks)
        pred.update(c[2] for c in p_chunks)
        correct.update(c[2] for c in p_chunks if c in g_chunks)
    types = sorted(set(gold) | set(pred))
    return {
        "overall": _prf(sum(correct.values()), sum(pred.values()), sum(gold.values())),
        "per_type": {k: _prf(correct[k], pred[k], gold[k]) for k in types},
    }


def _is_iob(labels):
    return all(label == "O" or _split(label)[0] in ("B", "I") for label in labels)


def evaluate(gold_path, pred_path=None, *, encoding="utf-8", out=None):
    """Print token accuracy, per-label scores and chunk scores (``skgpstruct eval``).

    The per-label table is sklearn's
    :func:`~sklearn.metrics.classification_report`; the chunk scores
    (:func:`chunk_scores`) are printed in conlleval's layout when every tag
    is ``O`` or has the prefix ``B`` or ``I`` (IOB tags), and skipped
    otherwise.

    Parameters
    ----------
    gold_path, pred_path, encoding
        See :func:`read_eval_input`.
    out : file-like, default=None
        Where to print (``sys.stdout`` if None).

    Returns
    -------
    scores : dict
        ``"accuracy"`` (fraction of tokens), ``"n_tokens"``,
        ``"n_sentences"``, ``"report"`` (classification_report's dict) and
        ``"chunks"`` (:func:`chunk_scores`, or None for tags that are not IOB).
    """
    from sklearn.metrics import classification_report

    out = sys.stdout if out is None else out
    y_true, y_pred = read_eval_input(gold_path, pred_path, encoding)
    flat_true = np.array([x for s in y_true for x in s], dtype=object)
    flat_pred = np.array([x for s in y_pred for x in s], dtype=object)
    n = len(flat_true)
    accuracy = float(np.mean(flat_true == flat_pred))
    print(f"{n} tokens, {len(y_true)} sentences; token accuracy: {100 * accuracy:.2f}%",
          file=out)
    labels = sorted(set(flat_true) | set(flat_pred))
    print("\nper label:", file=out)
    print(classification_report(flat_true, flat_pred, labels=labels, digits=4,
                                zero_division=0), file=out)
    report = classification_report(flat_true, flat_pred, labels=labels,
                                   zero_division=0, output_dict=True)
    chunks = None
    if _is_iob(labels):
        chunks = chunk_scores(y_true, y_pred)
        o = chunks["overall"]
        print("chunks (conlleval):", file=out)
        print(f"processed {n} tokens with {o['found_gold']} phrases; found: "
              f"{o['found_pred']} phrases; correct: {o['correct']}.", file=out)
        print(f"accuracy: {100 * accuracy:6.2f}%; precision: {o['precision']:6.2f}%; "
              f"recall: {o['recall']:6.2f}%; FB1: {o['f1']:6.2f}", file=out)
        for type_, s in chunks["per_type"].items():
            if type_:
                print(f"{type_:>17}: precision: {s['precision']:6.2f}%; recall: "
                      f"{s['recall']:6.2f}%; FB1: {s['f1']:6.2f}  {s['found_pred']}",
                      file=out)
    else:
        print("chunks: not scored (the tags are not IOB: O, B-..., I-...)", file=out)
    return {"accuracy": accuracy, "n_tokens": n, "n_sentences": len(y_true),
            "report": report, "chunks": chunks}
