"""Metrics of predicted label sequences: flat token scores, sequence
accuracy, chunk F1, and the scorers of GridSearchCV (the package facade
:mod:`skgpstruct.metrics` re-exports them)."""

import inspect

import numpy as np
from sklearn import metrics as skm
from sklearn.metrics import make_scorer

from ._uncertainty import __all__ as _CALIBRATION_ALL
from ._checks import _check_sequence_pairs, _drop_unknown_weights, _flatten
from ._uncertainty import (
    expected_calibration_error,
    make_marginal_scorer,
    marginal_brier_score,
    marginal_log_loss,
    neg_expected_calibration_error,
    neg_marginal_brier_score,
    neg_marginal_log_loss,
    reliability_curve,
    risk_coverage_curve,
    selective_error,
    sequence_log_loss,
)

__all__ = [
    "flat_accuracy_score",
    "token_error_rate",
    "sequence_accuracy_score",
    "flat_f1_score",
    "flat_precision_score",
    "flat_recall_score",
    "flat_fbeta_score",
    "flat_classification_report",
    "chunk_f1_score",
    "extract_chunks",
    "is_span_tagging",
    "flat_accuracy",
    "token_error",
    "sequence_accuracy",
    "chunk_f1",
    *_CALIBRATION_ALL,
    "neg_marginal_log_loss",
    "neg_marginal_brier_score",
    "neg_expected_calibration_error",
    "SCORERS",
    "get_scorer",
]


_FLAT_DOC = """{summary}

    {notes}The sequences are checked to line up and flattened into one list of
    tokens, which :func:`sklearn.metrics.{metric}` scores. ``None`` in
    ``y_true`` marks an unknown label: the token is skipped (its prediction
    is ignored).

    Parameters
    ----------
    y_true : list of array-like of shape (T_n,)
        Gold label sequences; ``None`` marks an unknown label.
    y_pred : list of array-like of shape (T_n,)
        Predicted label sequences, aligned with ``y_true``.
{params}
    Returns
    -------
{returns}
    Raises
    ------
    ValueError
        If the sequences do not line up, or if every token of ``y_true``
        is ``None``.
{examples}    """


def _flat_metric(name, metric, flat_metric, *, summary, returns, params="",
                 notes="", examples=""):
    """Build the sequence-level metric ``name`` from a token-level one.

    Parameters
    ----------
    name : str
        Name of the public function (set as its ``__name__``).
    metric : str
        Name of the :mod:`sklearn.metrics` function it applies.
    flat_metric : callable
        ``flat_metric(flat_true, flat_pred, *args, **kwargs)`` on the
        flattened tokens; its signature becomes the function's.
    summary, returns, params, notes, examples : str
        Docstring pieces: the summary line, the numpydoc entry of the return
        value and those of the arguments after ``y_pred`` (indented by 4
        spaces), a paragraph before the standard description, and an
        Examples section.

    Returns
    -------
    func : callable
        ``func(y_true, y_pred, *args, **kwargs)``.
    """

    signature = inspect.signature(flat_metric)

    def func(y_true, y_pred, *args, **kwargs):
        flat_true, flat_pred, known = _flatten(y_true, y_pred)
        if known is not None:
            args, kwargs = _drop_unknown_weights(signature, known, args, kwargs)
        return flat_metric(flat_true, flat_pred, *args, **kwargs)

    func.__name__ = func.__qualname__ = name
    func.__signature__ = signature
    func.__doc__ = _FLAT_DOC.format(
        summary=summary, notes=notes + "\n\n    " if notes else "",
        metric=metric, params=params, returns=returns,
        examples="\n" + examples if examples else "",
    )
    return func


def _accuracy(y_true, y_pred, sample_weight=None):
    return float(skm.accuracy_score(y_true, y_pred, sample_weight=sample_weight))


def _error_rate(y_true, y_pred):
    return 1.0 - _accuracy(y_true, y_pred)


def _report(y_true, y_pred, **kwargs):
    kwargs.setdefault("zero_division", 0)
    return skm.classification_report(y_true, y_pred, **kwargs)


flat_accuracy_score = _flat_metric(
    "flat_accuracy_score", "accuracy_score", _accuracy,
    summary="Token-level accuracy over all sequences.",
    params="""\
    sample_weight : array-like of shape (n_tokens,), default=None
        Per-token weights on the flattened tokens, one for every token
        (those of unknown labels included: their weights are dropped).
""",
    returns="""\
    score : float
        Fraction of tokens whose label is predicted correctly.
""",
    examples="""\
    Examples
    --------
    >>> from skgpstruct.metrics import flat_accuracy_score
    >>> flat_accuracy_score([["B", "I"], ["O"]], [["B", "O"], ["O"]])
    0.666...
""",
)


token_error_rate = _flat_metric(
    "token_error_rate", "accuracy_score", _error_rate,
    summary="Token error rate: the fraction of mislabelled tokens, ``1 - flat accuracy``.",
    notes="The metric of the GPstruct papers' Table 1, which print it in percent "
          "(multiply by 100). Like every metric of this module it is a fraction "
          "in [0, 1].",
    returns="""\
    error : float
        Fraction of mislabelled tokens.
""",
    examples="""\
    Examples
    --------
    >>> from skgpstruct.metrics import token_error_rate
    >>> token_error_rate([[0, 1, 1, 0]], [[0, 1, 0, 0]])
    0.25
""",
)


def sequence_accuracy_score(y_true, y_pred):
    """Fraction of sequences whose every label is predicted correctly.

    ``None`` in ``y_true`` marks an unknown label: the token is skipped. A
    sequence counts as correct when all its known tokens are; a sequence
    whose tokens are all unknown is left out (an empty sequence counts as
    correct).

    Parameters
    ----------
    y_true : list of array-like of shape (T_n,)
        Gold label sequences; ``None`` marks an unknown label.
    y_pred : list of array-like of shape (T_n,)
        Predicted label sequences.

    Returns
    -------
    score : float

    Raises
    ------
    ValueError
        If the sequences do not line up, or if every token of ``y_true``
        is ``None``.

    Examples
    --------
    >>> from skgpstruct.metrics import sequence_accuracy_score
    >>> sequence_accuracy_score([["B", "I"], ["O"]], [["B", "O"], ["O"]])
    0.5
    """
    y_true, y_pred, known = _check_sequence_pairs(y_true, y_pred)
    return float(np.mean([np.array_equal(a, b) for a, b, k in zip(y_true, y_pred, known)
                          if k is None or k.any()]))


def _sklearn_score(name, metric, what, example=""):
    """``name``: the token-level version of :mod:`sklearn.metrics`'s
    ``metric`` (precision, recall, F1: keyword arguments passed through)."""
    score = getattr(skm, metric)

    def flat(y_true, y_pred, **kwargs):
        return score(y_true, y_pred, **kwargs)

    examples = ""
    if example:
        examples = f"""\
    Examples
    --------
    >>> from skgpstruct.metrics import {name}
    >>> {example}
    0.666...
"""
    return _flat_metric(
        name, metric, flat,
        summary=f"Token-level {what} (keyword arguments as "
                f"``sklearn.metrics.{metric}``), as sklearn-crfsuite's.",
        params=f"""\
    **kwargs
        ``average``, ``labels``, ... passed to :func:`sklearn.metrics.{metric}`.
""",
        returns="""\
    score : float or ndarray
""",
        examples=examples,
    )


flat_f1_score = _sklearn_score("flat_f1_score", "f1_score", "F1 score")
flat_precision_score = _sklearn_score(
    "flat_precision_score", "precision_score", "precision",
    'float(flat_precision_score([["B", "I"], ["O"]], [["B", "B"], ["O"]], average="micro"))')
flat_recall_score = _sklearn_score(
    "flat_recall_score", "recall_score", "recall",
    'float(flat_recall_score([["B", "I"], ["O"]], [["B", "B"], ["O"]], average="macro"))')



def _fbeta(y_true, y_pred, beta, **kwargs):
    return skm.fbeta_score(y_true, y_pred, beta=beta, **kwargs)


flat_fbeta_score = _flat_metric(
    "flat_fbeta_score", "fbeta_score", _fbeta,
    summary="Token-level F-beta score (keyword arguments as "
            "``sklearn.metrics.fbeta_score``), as sklearn-crfsuite's.",
    params="""\
    beta : float
        Weight of recall against precision.
    **kwargs
        ``average``, ``labels``, ... passed to :func:`sklearn.metrics.fbeta_score`.
""",
    returns="""\
    score : float or ndarray
""",
    examples="""\
    Examples
    --------
    >>> from skgpstruct.metrics import flat_fbeta_score
    >>> float(flat_fbeta_score([["B", "I"], ["O"]], [["B", "B"], ["O"]], 1, average="micro"))
    0.666...
""",
)

flat_classification_report = _flat_metric(
    "flat_classification_report", "classification_report", _report,
    summary="Per-label precision, recall and F1 over all tokens.",
    params="""\
    **kwargs
        Passed to :func:`sklearn.metrics.classification_report`
        (``labels``, ``digits``, ``output_dict``, ...); ``zero_division``
        defaults to 0 here.
""",
    returns="""\
    report : str or dict
""",
)


def _split_tag(tag):
    """Split a BIO/IOB tag into (prefix, type); plain tags give type ''."""
    tag = str(tag)
    if tag in ("O", "", "-1"):
        return "O", ""
    for sep in ("-", "_"):
        if len(tag) > 2 and tag[1] == sep and tag[0] in "BIESO":
            return tag[0], tag[2:]
    if tag in ("B", "I", "E", "S"):
        return tag, ""
    # A tag without a chunk prefix (e.g. POS) is treated as its own chunk type.
    return "B", tag


def extract_chunks(tags):
    """Chunks of a BIO / IOB1 / IOBES tag sequence, CoNLL-2000 style.

    A chunk starts at a ``B`` tag, at an ``I`` tag whose type differs from the
    previous tag's (IOB1, and CoNLL's ``conlleval`` treatment of ill-formed
    BIO), or at an ``S`` tag, and ends before the next start or an ``O``.
    Tags without a type (``B``, ``I``, ``O`` as in the base NP data) form
    chunks of type ``''``. ``O``, the empty tag and ``-1`` are outside every
    chunk.

    Parameters
    ----------
    tags : array-like of str of shape (T,)
        One tag per token.

    Returns
    -------
    chunks : set of tuple (type, start, end)
        Half-open token spans ``[start, end)``.

    Examples
    --------
    >>> sorted(extract_chunks(["B-NP", "I-NP", "O", "B-VP", "I-NP"]))
    [('NP', 0, 2), ('NP', 4, 5), ('VP', 3, 4)]
    """
    chunks = set()
    start, ctype = None, None
    prev_prefix = "O"
    for t, tag in enumerate(tags):
        prefix, typ = _split_tag(tag)
        begins = prefix in ("B", "S") or (
            prefix in ("I", "E")
            and (start is None or typ != ctype or prev_prefix in ("E", "S"))
        )
        if prefix == "O" or begins:
            if start is not None:
                chunks.add((ctype, start, t))
                start, ctype = None, None
        if begins:
            start, ctype = t, typ
        prev_prefix = prefix
    if start is not None:
        chunks.add((ctype, start, len(tags)))
    return chunks


def is_span_tagging(labels):
    """Whether a label set encodes spans (chunks, entities) as
    :func:`extract_chunks` reads them.

    True when every label is a string that is ``O`` or a span tag (a
    ``B``, ``I``, ``E`` or ``S`` prefix, alone or followed by ``-`` or
    ``_`` and a type: ``B-NP``, ``I_PER``, ``B``), and some label is an
    ``I`` or ``E`` tag (a span may cover more than one token). Such tasks
    are scored by span F1 (:func:`chunk_f1_score`), for which the labels of
    one path must agree with each other; GPStructTagger's
    ``decode="auto"`` decodes them by Viterbi.

    Parameters
    ----------
    labels : array-like
        The label set (e.g. a tagger's ``classes_``).

    Returns
    -------
    bool

    Examples
    --------
    >>> is_span_tagging(["B-NP", "I-NP", "O"]), is_span_tagging(["B", "I", "O"])
    (True, True)
    >>> is_span_tagging(["DT", "IN", "NN"]), is_span_tagging([0, 1, 2])
    (False, False)
    """
    prefixes = set()
    for label in labels:
        if not isinstance(label, str):
            return False
        if label == "O":
            continue
        if label in ("B", "I", "E", "S") or (
                len(label) > 2 and label[0] in "BIES" and label[1] in "-_"):
            prefixes.add(label[0])
        else:
            return False
    return bool(prefixes & {"I", "E"})


def chunk_f1_score(y_true, y_pred, *, return_precision_recall=False):
    """CoNLL chunk F1: a chunk counts only if its type and span both match.

    ``None`` in ``y_true`` marks an unknown label. A chunk's extent cannot be
    read around an unknown tag (``B-NP I-NP None``: the chunk may or may not
    go on), so a sequence with any unknown gold tag is left out of the chunk
    F1 entirely, its gold and predicted chunks alike; only the sequences
    whose gold tags are all known are scored. (The token-level metrics, such
    as :func:`flat_accuracy_score`, do score the known tokens of such
    sequences.)

    Parameters
    ----------
    y_true : list of array-like of str of shape (T_n,)
        Gold BIO / IOB tag sequences (e.g. ``B-NP``, ``I-NP``, ``O``; or
        ``B``, ``I``, ``O`` without types); ``None`` marks an unknown tag.
    y_pred : list of array-like of str of shape (T_n,)
        Predicted tag sequences.
    return_precision_recall : bool, default=False
        If True, return ``(precision, recall, f1)``.

    Returns
    -------
    f1 : float
        Micro-averaged chunk F1 over all the scored sequences (1.0 when
        neither side has any chunk).

    Raises
    ------
    ValueError
        If the sequences do not line up, or if ``y_true`` has ``None`` and
        every sequence of it has an unknown tag (no sequence to score).

    Examples
    --------
    >>> from skgpstruct.metrics import chunk_f1_score
    >>> chunk_f1_score([["B-NP", "I-NP", "O"]], [["B-NP", "O", "O"]])
    0.0
    >>> chunk_f1_score([["B", "I", "O", "B"]], [["B", "I", "O", "O"]])
    0.666...
    """
    y_true, y_pred, known = _check_sequence_pairs(y_true, y_pred)
    pairs = [(a, b) for a, b, k in zip(y_true, y_pred, known) if k is None]
    if not pairs:
        raise ValueError("chunk_f1_score: every sequence of y_true has an unknown "
                         "(None) tag; chunk F1 scores only the sequences whose tags "
                         "are all known.")
    n_true = n_pred = n_correct = 0
    for a, b in pairs:
        ca, cb = extract_chunks(a), extract_chunks(b)
        n_true += len(ca)
        n_pred += len(cb)
        n_correct += len(ca & cb)
    if n_true == 0 and n_pred == 0:
        precision = recall = f1 = 1.0
    else:
        precision = n_correct / n_pred if n_pred else 0.0
        recall = n_correct / n_true if n_true else 0.0
        denom = precision + recall
        f1 = 2 * precision * recall / denom if denom > 0 else 0.0
    if return_precision_recall:
        return precision, recall, f1
    return f1


flat_accuracy = make_scorer(flat_accuracy_score)
token_error = make_scorer(token_error_rate, greater_is_better=False)
sequence_accuracy = make_scorer(sequence_accuracy_score)
chunk_f1 = make_scorer(chunk_f1_score)

#: Scorers by name, for ``GridSearchCV(scoring=SCORERS["flat_accuracy"])``;
#: ``None`` in ``y`` marks an unknown label, which they skip as their metrics do.
SCORERS = {
    "flat_accuracy": flat_accuracy,
    "token_error": token_error,
    "sequence_accuracy": sequence_accuracy,
    "chunk_f1": chunk_f1,
    "neg_marginal_log_loss": neg_marginal_log_loss,
    "neg_marginal_brier_score": neg_marginal_brier_score,
    "neg_expected_calibration_error": neg_expected_calibration_error,
}


def get_scorer(scoring):
    """The scorer(s) of the package by name, for ``cross_validate`` and
    ``GridSearchCV``.

    scikit-learn resolves ``scoring="name"`` from its own registry only, which
    cannot be extended, and its scorers do not read lists of sequences;
    ``scoring=get_scorer("flat_accuracy")`` is the way to name ours. Like
    their metrics, the scorers skip the tokens whose label in ``y`` is
    ``None`` (unknown).

    Parameters
    ----------
    scoring : str, callable, or list / tuple / set of str
        A key of :data:`SCORERS` (``"flat_accuracy"``, ``"token_error"``,
        ``"sequence_accuracy"``, ``"chunk_f1"``, ``"neg_marginal_log_loss"``,
        ``"neg_marginal_brier_score"``, ``"neg_expected_calibration_error"``),
        a scorer (returned as it is), or several names (multi-metric).

    Returns
    -------
    scorer : callable or dict
        The scorer, or ``{name: scorer}`` for several names (what
        ``cross_validate(scoring=...)`` takes for several metrics).

    Raises
    ------
    ValueError
        For a name that is not a key of :data:`SCORERS` (the message lists
        them).

    Examples
    --------
    >>> from sklearn.model_selection import cross_validate
    >>> from skgpstruct import RandomizedCRFTagger
    >>> from skgpstruct.datasets import make_chain_data
    >>> from skgpstruct.metrics import get_scorer
    >>> X, y = make_chain_data(n_sequences=40, n_classes=3, random_state=0)
    >>> scores = cross_validate(RandomizedCRFTagger(), X, y, cv=2,
    ...                        scoring=get_scorer(["flat_accuracy", "sequence_accuracy"]))
    >>> sorted(k for k in scores if k.startswith("test_"))
    ['test_flat_accuracy', 'test_sequence_accuracy']
    """
    if callable(scoring):
        return scoring
    if isinstance(scoring, (list, tuple, set, frozenset)):
        return {name: get_scorer(name) for name in scoring}
    if isinstance(scoring, str) and scoring in SCORERS:
        return SCORERS[scoring]
    raise ValueError(
        f"{scoring!r} is not a skgpstruct scorer; choose from {sorted(SCORERS)} (or pass "
        "a scorer made with sklearn.metrics.make_scorer on one of the metrics)."
    )
