"""Calibration metrics for token marginals (re-exported by :mod:`skgpstruct.metrics`).

Every function takes ``y_true``, a list of label sequences, and
``marginals``, a list of arrays of shape (T_n, n_classes) as
``predict_marginals`` returns, with ``labels`` naming the columns (the
estimator's ``classes_``). The two are checked to line up sequence by
sequence and token by token before anything is computed, as the label
metrics of :mod:`skgpstruct.metrics` do, so that a misaligned input is an
error, not a silently wrong score.

All the scores here are token-level and returned as fractions (not
percentages), except :func:`sequence_log_loss`. ``None`` in ``y_true`` marks
an unknown label: the token is skipped (its row of the marginals is dropped).
"""

import math
import numbers
from collections.abc import Mapping

import numpy as np

from ._checks import NO_KNOWN_LABEL, unknown_mask

__all__ = [
    "marginal_log_loss",
    "marginal_brier_score",
    "expected_calibration_error",
    "reliability_curve",
    "selective_error",
    "risk_coverage_curve",
    "sequence_log_loss",
    "make_marginal_scorer",
]

#: Tolerance on ``|sum_j p_j - 1|`` of every row of the marginals.
ROW_SUM_TOL = 1e-6


_DOC_PIECES = {
    "parameters": """Parameters
    ----------
    y_true : list of array-like of shape (T_n,)
        Gold label sequences. ``None`` in ``y_true`` marks an unknown
        label: the token is skipped.
    marginals : list of array-like of shape (T_n, n_classes)
        Token marginals, columns in the order of ``labels``.
    labels : array-like of shape (n_classes,)
        The labels of the columns (the estimator's ``classes_``).""",
    "example_3": """>>> y_true = [["B", "I"], ["O"]]
    >>> marginals = [[[0.8, 0.2, 0.0], [0.3, 0.6, 0.1]], [[0.1, 0.0, 0.9]]]""",
    "example_4": """>>> y_true = [["B", "I"], ["O", "O"]]
    >>> marginals = [[[0.8, 0.2, 0.0], [0.3, 0.6, 0.1]],
    ...              [[0.1, 0.0, 0.9], [0.1, 0.7, 0.2]]]""",
}


def _fill_doc(func):
    """Fill a docstring's ``{parameters}``, ``{example_3}``, ... from _DOC_PIECES."""
    func.__doc__ = func.__doc__.format(**_DOC_PIECES)
    return func


def _label_repr(labels, limit=10):
    shown = ", ".join(repr(v) for v in labels[:limit])
    return "[" + shown + (", ..." if len(labels) > limit else "") + "]"


def _check_labels(y_true, labels):
    """Validate ``labels``; return them as a list and a label -> column dict."""
    if labels is None:
        raise ValueError("labels is required: the labels of the marginals' "
                         "columns, e.g. the estimator's classes_.")
    if isinstance(y_true, str) or isinstance(labels, str):
        raise TypeError("y_true must be a list of label sequences and labels "
                        "an array-like of labels.")
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] == 0:
        raise ValueError("labels must be a non-empty 1-D array-like, got shape "
                         f"{labels.shape}.")
    label_list = labels.tolist()
    index = {}
    for j, lab in enumerate(label_list):
        if lab in index:
            raise ValueError(f"labels contains {lab!r} more than once.")
        index[lab] = j
    return label_list, index


def _check_sequence(i, a, p, n_classes):
    """Validate sequence ``i``: labels ``a`` and marginals ``p``, as arrays."""
    if isinstance(a, str):
        raise TypeError(f"Sequence {i} of y_true is a string; each sequence "
                        "must be a list of labels, one per token.")
    a = np.asarray(a)
    error = f"Sequence {i} of marginals"
    if (isinstance(p, (list, tuple)) and len(p) and isinstance(p[0], Mapping)) \
            or isinstance(p, Mapping):
        raise TypeError(f"{error} holds dicts ({{label: probability}}, the form of "
                        "predict_marginals(X, output='dict')); the metrics take "
                        "arrays: use output='array' (the default) and pass "
                        "labels=tagger.classes_.")
    p = np.asarray(p, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"Sequence {i} of y_true must be 1-D, got shape {a.shape}.")
    if p.ndim != 2:
        raise ValueError(f"{error} must be 2-D (T_n, n_classes), got shape {p.shape}.")
    if p.shape[1] != n_classes:
        raise ValueError(f"{error} has {p.shape[1]} columns but labels has "
                         f"{n_classes} labels.")
    if a.shape[0] != p.shape[0]:
        raise ValueError(f"Sequence {i} has {a.shape[0]} labels in y_true but "
                         f"{p.shape[0]} rows in marginals.")
    for bad, what in ((~np.isfinite(p), "a NaN or infinite value"),
                      (p < 0, "a negative probability")):
        if np.any(bad):
            t = int(np.argwhere(bad)[0, 0])
            raise ValueError(f"{error} has {what} (token {t}).")
    sums = p.sum(axis=1)
    bad = np.abs(sums - 1.0) > ROW_SUM_TOL
    if np.any(bad):
        t = int(np.argmax(bad))
        raise ValueError(f"{error}: token {t}'s row sums to {float(sums[t]):.9g}, "
                         f"not 1 (tolerance {ROW_SUM_TOL:g}).")
    return a, p


def _label_columns(i, a, index, label_list):
    """Column of each label of sequence ``i``, ``a``, in the marginals."""
    idx = np.empty(a.shape[0], dtype=np.intp)
    for t, lab in enumerate(a.tolist()):
        try:
            idx[t] = index[lab]
        except (KeyError, TypeError):
            raise ValueError(f"y_true contains the label {lab!r} (sequence {i}, "
                             f"token {t}), which is not in labels "
                             f"{_label_repr(label_list)}.") from None
    return idx


@_fill_doc
def _check_marginals(y_true, marginals, labels):
    """Check that ``y_true`` and ``marginals`` line up with ``labels``.

    {parameters}

    Returns
    -------
    y_index : ndarray of int of shape (n_tokens,)
        Column of every known token's true label, all sequences concatenated.
    proba : ndarray of float of shape (n_tokens, n_classes)
        The marginals of the same tokens, concatenated the same way.
    lengths : ndarray of int of shape (n_scored,)
        Known tokens per sequence (a sequence with none left out).

    Raises
    ------
    TypeError
        If ``y_true`` or one of its sequences is a string.
    ValueError
        On any misalignment, an unknown label, a NaN or infinite or negative
        probability, a row that does not sum to 1 within
        :data:`ROW_SUM_TOL`, no tokens at all, or no known token.
    """
    label_list, index = _check_labels(y_true, labels)
    y_true = list(y_true)
    marginals = list(marginals)
    if len(y_true) != len(marginals):
        raise ValueError(f"y_true has {len(y_true)} sequences but marginals "
                         f"has {len(marginals)}.")
    if len(y_true) == 0:
        raise ValueError("y_true and marginals are empty.")

    y_index, proba, lengths, any_unknown = [], [], [], False
    for i, (a, p) in enumerate(zip(y_true, marginals)):
        unknown = unknown_mask(a)
        a, p = _check_sequence(i, a, p, len(label_list))
        if unknown is not None:  # the known tokens' rows; none: sequence skipped
            any_unknown, a, p = True, a[~unknown], p[~unknown]
            if a.shape[0] == 0:
                continue
        y_index.append(_label_columns(i, a, index, label_list))
        proba.append(p)
        lengths.append(a.shape[0])
    lengths = np.asarray(lengths, dtype=np.intp)
    if lengths.sum() == 0:
        raise ValueError(NO_KNOWN_LABEL if any_unknown else
                         "y_true has no tokens: every sequence is empty.")
    return np.concatenate(y_index), np.concatenate(proba, axis=0), lengths


def _check_number(name, value, expected, ok, integer=False):
    """``value`` as an int (``integer``, bools refused) or a float, if ``ok(value)``."""
    kind = numbers.Integral if integer else numbers.Real
    if (not isinstance(value, kind) or (integer and isinstance(value, bool))
            or not ok(value)):
        raise ValueError(f"{name} must be {expected}, got {value!r}.")
    return int(value) if integer else float(value)


def _true_proba(y_true, marginals, labels, eps):
    eps = _check_number("eps", eps, "a float in [0, 1)", lambda e: 0 <= e < 1)
    y_index, proba, lengths = _check_marginals(y_true, marginals, labels)
    p = proba[np.arange(y_index.shape[0]), y_index]
    return np.clip(p, eps, 1.0), lengths


def _neg_log(p):
    # p == 0 only when eps == 0: an infinite loss, without numpy's warning
    with np.errstate(divide="ignore"):
        return -np.log(p)


def _confidence(y_true, marginals, labels):
    """Max marginal and whether its argmax (first on ties) is the true label."""
    y_index, proba, _ = _check_marginals(y_true, marginals, labels)
    conf = proba.max(axis=1)
    correct = proba.argmax(axis=1) == y_index
    return conf, correct


@_fill_doc
def marginal_log_loss(y_true, marginals, *, labels, eps=1e-15):
    """Mean negative log-probability of the true labels under the token marginals.

    ``-(1 / n_tokens) sum_tokens log max(p_t(y_t), eps)`` over all the
    tokens of all the sequences: the token-level cross-entropy, as
    :func:`sklearn.metrics.log_loss` on the flattened tokens.

    Parameters
    ----------
    y_true : list of array-like of shape (T_n,)
        Gold label sequences. ``None`` in ``y_true`` marks an unknown
        label: the token is skipped (its row of ``marginals`` is ignored).
    marginals : list of array-like of shape (T_n, n_classes)
        Token marginals as ``predict_marginals`` returns them; every row
        sums to 1.
    labels : array-like of shape (n_classes,)
        The labels of the columns of ``marginals``, in order (the
        estimator's ``classes_``). Every label of ``y_true`` must be one of
        them.
    eps : float, default=1e-15
        Probabilities are clipped to ``[eps, 1]`` before the log, so that a
        true label given probability 0 costs ``-log(eps)`` (about 34.5), not
        infinity. ``eps=0`` gives infinity.

    Returns
    -------
    loss : float
        Non-negative; lower is better.

    See Also
    --------
    sequence_log_loss : the same summed over each sequence.

    Examples
    --------
    >>> from skgpstruct.metrics import marginal_log_loss
    {example_3}
    >>> marginal_log_loss(y_true, marginals, labels=["B", "I", "O"])  # -(log .8 + log .6 + log .9) / 3
    0.2797...
    """
    p, _ = _true_proba(y_true, marginals, labels, eps)
    return float(np.mean(_neg_log(p)))


@_fill_doc
def sequence_log_loss(y_true, marginals, *, labels, eps=1e-15):
    """Mean over sequences of the negative log-probability of the true sequence,
    factorised over the token marginals.

    For sequence ``n``, ``-log prod_t max(p_t(y_t), eps) = -sum_t log
    max(p_t(y_t), eps)``, averaged over the sequences (an empty sequence
    counts 0). This is the factorised (mean-field) approximation of the
    probability of the whole true label sequence: it treats the tokens as
    independent given ``x``, which a linear-chain model's posterior is not,
    so it is neither the exact path probability ``p(y | x)`` nor a bound on
    it; it is what can be computed from ``predict_marginals`` alone. An
    unknown label (``None``) drops its token from the sum; a sequence whose
    tokens are all unknown is left out of the mean.

    {parameters}
    eps : float, default=1e-15
        Token probabilities are clipped to ``[eps, 1]`` before the log.

    Returns
    -------
    loss : float
        In nats per sequence; lower is better.

    Examples
    --------
    >>> from skgpstruct.metrics import sequence_log_loss
    {example_3}
    >>> sequence_log_loss(y_true, marginals, labels=["B", "I", "O"])  # -(log(.8 * .6) + log .9) / 2
    0.4196...
    """
    p, lengths = _true_proba(y_true, marginals, labels, eps)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    per_token = _neg_log(p)
    # np.add.reduceat mishandles empty segments: sum through a cumulative sum
    csum = np.concatenate([[0.0], np.cumsum(per_token)])
    per_seq = csum[starts + lengths] - csum[starts]
    return float(np.mean(per_seq))


@_fill_doc
def marginal_brier_score(y_true, marginals, *, labels):
    """Multi-class Brier score of the token marginals.

    ``(1 / n_tokens) sum_tokens sum_j (p_t(j) - [y_t = j])^2``: the mean
    squared distance between each token's marginal and the one-hot vector of
    its true label (Brier's original multi-class definition; it lies in
    ``[0, 2]``, and for two classes it is twice
    :func:`sklearn.metrics.brier_score_loss`).

    {parameters}

    Returns
    -------
    score : float
        Lower is better.

    Examples
    --------
    >>> from skgpstruct.metrics import marginal_brier_score
    {example_3}
    >>> marginal_brier_score(y_true, marginals, labels=["B", "I", "O"])  # (0.08 + 0.26 + 0.02) / 3
    0.12
    """
    y_index, proba, _ = _check_marginals(y_true, marginals, labels)
    diff = proba.copy()
    diff[np.arange(y_index.shape[0]), y_index] -= 1.0
    return float(np.mean(np.sum(diff * diff, axis=1)))


def _bin_stats(y_true, marginals, labels, n_bins):
    n_bins = _check_number("n_bins", n_bins, "an integer >= 1", lambda n: n >= 1,
                           integer=True)
    conf, correct = _confidence(y_true, marginals, labels)
    return _binned(conf, correct, n_bins)


def _binned(conf, correct, n_bins):
    """Per-bin token counts and sums of confidence and correctness of the
    equal-width bins of :func:`reliability_curve` (validated inputs)."""
    # against the edges b / n_bins themselves: floor(conf * n_bins) puts a
    # confidence on an edge in the bin below where the product rounds down
    # (0.57 * 100 = 56.999...)
    edges = np.arange(n_bins + 1) / n_bins
    bins = np.minimum(np.searchsorted(edges, conf, side="right") - 1, n_bins - 1)
    bins = bins.astype(np.intp)
    counts = np.bincount(bins, minlength=n_bins)
    conf_sum = np.bincount(bins, weights=conf, minlength=n_bins)
    acc_sum = np.bincount(bins, weights=correct.astype(float), minlength=n_bins)
    return counts, conf_sum, acc_sum


@_fill_doc
def reliability_curve(y_true, marginals, *, labels, n_bins=15):
    """Accuracy against confidence of the token predictions, in equal-width bins.

    Each token's confidence is its largest marginal and its prediction the
    label of that column (the first one on ties). Bin ``b`` holds the
    tokens with confidence in ``[b / n_bins, (b + 1) / n_bins)``, the last
    bin also those with confidence 1 (bin ``min(floor(confidence * n_bins),
    n_bins - 1)``). A calibrated model has accuracy equal to confidence in
    every bin: plot ``accuracy`` against ``confidence`` with the diagonal
    for the reliability diagram.

    {parameters}
    n_bins : int, default=15
        Number of bins on ``[0, 1]``.

    Returns
    -------
    confidence : ndarray of shape (n_bins,)
        Mean confidence of the tokens of each bin (NaN for an empty bin).
    accuracy : ndarray of shape (n_bins,)
        Fraction of them predicted correctly (NaN for an empty bin).
    counts : ndarray of int of shape (n_bins,)
        Tokens per bin.

    See Also
    --------
    expected_calibration_error : the count-weighted mean gap of this curve.

    Examples
    --------
    >>> from skgpstruct.metrics import reliability_curve
    {example_3}
    >>> conf, acc, counts = reliability_curve(
    ...     y_true, marginals, labels=["B", "I", "O"], n_bins=2)
    >>> print(conf, acc, counts)  # bin [0, .5) is empty; .8, .6, .9 in [.5, 1]
    [ nan 0.766...] [nan 1.] [0 3]
    """
    counts, conf_sum, acc_sum = _bin_stats(y_true, marginals, labels, n_bins)
    nonempty = counts > 0
    confidence = np.full(counts.shape, np.nan)
    accuracy = np.full(counts.shape, np.nan)
    confidence[nonempty] = conf_sum[nonempty] / counts[nonempty]
    accuracy[nonempty] = acc_sum[nonempty] / counts[nonempty]
    return confidence, accuracy, counts


@_fill_doc
def expected_calibration_error(y_true, marginals, *, labels, n_bins=15):
    """Expected calibration error of the token marginals' top-label confidence.

    ``ECE = sum_b (n_b / n_tokens) |accuracy_b - confidence_b|`` over
    ``n_bins`` equal-width bins of the confidence (the largest marginal of
    each token) on ``[0, 1]``, the top bin closed; ``accuracy_b`` is the
    fraction of the bin's tokens whose argmax label is the true one and
    ``confidence_b`` their mean confidence (see :func:`reliability_curve`).

    {parameters}
    n_bins : int, default=15
        Number of equal-width bins on ``[0, 1]``.

    Returns
    -------
    ece : float
        A fraction in ``[0, 1]`` (not a percentage); lower is better.

    Examples
    --------
    >>> from skgpstruct.metrics import expected_calibration_error
    {example_3}
    >>> # all three correct, confidences .8, .6, .9 in three bins
    >>> expected_calibration_error(y_true, marginals, labels=["B", "I", "O"])
    0.2333...
    """
    counts, conf_sum, acc_sum = _bin_stats(y_true, marginals, labels, n_bins)
    # sum_b (n_b / N) |acc_b - conf_b| = sum_b |acc_sum_b - conf_sum_b| / N
    return float(np.sum(np.abs(acc_sum - conf_sum)) / counts.sum())


def _n_kept(coverage, n_tokens):
    """``ceil(coverage * n_tokens)``, not fooled by rounding (0.7 * 10 != 7 in floats)."""
    x = coverage * n_tokens
    nearest = round(x)
    if abs(x - nearest) <= 1e-9 * max(1.0, x):
        return max(int(nearest), 1)
    return max(math.ceil(x), 1)


def _sorted_errors(y_true, marginals, labels):
    conf, correct = _confidence(y_true, marginals, labels)
    order = np.argsort(-conf, kind="stable")
    return ~correct[order]


@_fill_doc
def selective_error(y_true, marginals, *, labels, coverage=0.8):
    """Token error rate among the most confident ``coverage`` fraction of tokens.

    Tokens are ranked by confidence (their largest marginal), highest first,
    ties kept in their original order (sequence by sequence, token by
    token); the first ``ceil(coverage * n_tokens)`` of them are kept (at
    least one) and the fraction of those whose argmax label is wrong is
    returned. This is the error a user gets by abstaining on (or sending
    to a human) the least confident ``1 - coverage`` of the tokens.

    {parameters}
    coverage : float in (0, 1], default=0.8
        Fraction of the tokens kept. ``coverage=1`` gives the plain token
        error rate (as a fraction).

    Returns
    -------
    error : float
        A fraction in ``[0, 1]``, as :func:`token_error_rate`; lower is
        better.

    See Also
    --------
    risk_coverage_curve : the error at every coverage.

    Examples
    --------
    >>> from skgpstruct.metrics import selective_error
    {example_4}
    >>> # confidences .8, .6, .9, .7; the 2 most confident (.9, .8) are right
    >>> selective_error(y_true, marginals, labels=["B", "I", "O"], coverage=0.5)
    0.0
    >>> selective_error(y_true, marginals, labels=["B", "I", "O"], coverage=1.0)
    0.25
    """
    coverage = _check_number("coverage", coverage, "a float in (0, 1]",
                             lambda c: 0 < c <= 1)
    wrong = _sorted_errors(y_true, marginals, labels)
    k = _n_kept(coverage, wrong.shape[0])
    return float(np.mean(wrong[:k]))


@_fill_doc
def risk_coverage_curve(y_true, marginals, *, labels):
    """Token error rate against coverage, keeping the most confident tokens first.

    With the tokens ranked as in :func:`selective_error`, the curve has one
    point per cut: keeping the first ``k`` tokens, ``k = 1 .. n_tokens``,
    gives coverage ``k / n_tokens`` and the error rate among them, so
    ``errors[k - 1] == selective_error(..., coverage=k / n_tokens)``. A
    model whose confidence ranks its errors well has a curve that stays low
    until large coverage; its area is the AURC.

    {parameters}

    Returns
    -------
    coverages : ndarray of shape (n_tokens,)
        ``k / n_tokens`` for ``k = 1 .. n_tokens``, increasing to 1.
    errors : ndarray of shape (n_tokens,)
        Fraction of wrong tokens among the ``k`` most confident.

    Examples
    --------
    >>> from skgpstruct.metrics import risk_coverage_curve
    {example_4}
    >>> coverages, errors = risk_coverage_curve(y_true, marginals, labels=["B", "I", "O"])
    >>> coverages, errors
    (array([0.25, 0.5 , 0.75, 1.  ]), array([0.        , 0.        , 0.333..., 0.25      ]))
    """
    wrong = _sorted_errors(y_true, marginals, labels)
    k = np.arange(1, wrong.shape[0] + 1)
    return k / wrong.shape[0], np.cumsum(wrong) / k


class _MarginalScorer:
    """``scorer(estimator, X, y)`` from a metric of the marginals
    (``predict_proba``, the taggers' ``predict_marginals`` under the name a
    Pipeline forwards)."""

    def __init__(self, score_func, sign, kwargs):
        self._score_func = score_func
        self._sign = sign
        self._kwargs = kwargs

    def __call__(self, estimator, X, y_true):
        marginals = estimator.predict_proba(X)
        score = self._score_func(y_true, marginals, labels=estimator.classes_,
                                 **self._kwargs)
        return self._sign * score

    def __repr__(self):
        args = "".join(f", {k}={v!r}" for k, v in self._kwargs.items())
        gib = "" if self._sign < 0 else ", greater_is_better=True"
        return f"make_marginal_scorer({self._score_func.__name__}{gib}{args})"


def make_marginal_scorer(score_func, *, greater_is_better=False, **kwargs):
    """Make a scorer for GridSearchCV from a metric of the token marginals.

    The scorer calls ``estimator.predict_proba(X)`` (the taggers'
    ``predict_marginals``, under the name that a Pipeline ending in a tagger
    forwards) and ``score_func(y, marginals, labels=estimator.classes_,
    **kwargs)``, and negates the result when ``greater_is_better`` is False,
    as :func:`sklearn.metrics.make_scorer` does (so ``neg_marginal_log_loss``
    is "greater is better", like sklearn's ``neg_log_loss``). A label of
    ``y`` that the estimator did not see in ``fit`` raises a ValueError, as
    sklearn's ``neg_log_loss`` does; ``None`` in ``y`` marks an unknown
    label, whose token is skipped.

    Parameters
    ----------
    score_func : callable
        ``score_func(y_true, marginals, *, labels, **kwargs)``, e.g.
        :func:`marginal_log_loss` or :func:`selective_error`.
    greater_is_better : bool, default=False
        Whether a higher ``score_func`` is better. The calibration metrics
        of this module are losses (lower is better).
    **kwargs
        Passed to ``score_func`` (``n_bins``, ``coverage``, ...).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, for ``scoring=`` in
        :class:`~sklearn.model_selection.GridSearchCV` and
        :func:`~sklearn.model_selection.cross_val_score`.

    Examples
    --------
    >>> from sklearn.model_selection import cross_val_score
    >>> from skgpstruct import RandomizedCRFTagger
    >>> from skgpstruct.datasets import make_chain_data
    >>> from skgpstruct.metrics import make_marginal_scorer, selective_error
    >>> X, y = make_chain_data(n_sequences=30, n_classes=3, n_features=6, random_state=0)
    >>> scorer = make_marginal_scorer(selective_error, coverage=0.9)
    >>> scores = cross_val_score(RandomizedCRFTagger(), X, y, cv=3, scoring=scorer)
    >>> bool(all(-1 <= s <= 0 for s in scores))
    True
    """
    if not callable(score_func):
        raise TypeError(f"score_func must be callable, got {score_func!r}.")
    return _MarginalScorer(score_func, 1 if greater_is_better else -1, kwargs)


neg_marginal_log_loss = make_marginal_scorer(marginal_log_loss)
neg_marginal_brier_score = make_marginal_scorer(marginal_brier_score)
neg_expected_calibration_error = make_marginal_scorer(expected_calibration_error)
