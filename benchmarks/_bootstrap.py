"""Paired bootstrap over test sentences for ``standard_tasks.py``'s ``gp``
family: standard errors of the difference of two models' chunk F1, token
log loss and expected calibration error on the same test sentences.

A resample draws the test sentences with replacement; both models are
scored on the same resample, and the standard error is the standard
deviation over the resamples of (score of one model - score of the other).
The workers return per-token arrays (:func:`token_stats`) and the predicted
paths; the parent reduces them to per-sentence sums (:func:`sentence_stats`),
from which every resample's scores are exact sums (:func:`resampled_scores`):
a resample's F1, log loss and ECE are those of
:func:`skgpstruct.metrics.chunk_f1_score`, ``marginal_log_loss`` and
``expected_calibration_error`` on the resampled sentences (the bins of
:func:`skgpstruct.metrics.reliability_curve`).
"""

import numpy as np

from skgpstruct.metrics import extract_chunks

EPS = 1e-15  #: the floor of ``marginal_log_loss``


def chunk_counts(y_true, y_pred):
    """Per sentence: gold chunks, predicted chunks, correct ones (conlleval's
    chunks, :func:`skgpstruct.metrics.extract_chunks`), shape (n, 3)."""
    counts = np.zeros((len(y_true), 3), dtype=np.int64)
    for i, (a, b) in enumerate(zip(y_true, y_pred)):
        ca, cb = extract_chunks(a), extract_chunks(b)
        counts[i] = len(ca), len(cb), len(ca & cb)
    return counts


def f1_of(counts):
    """Chunk F1 in % of summed ``(gold, predicted, correct)`` counts (the last
    axis): ``2 correct / (gold + predicted)``, 100 when both are 0."""
    gold, pred, correct = np.moveaxis(counts, -1, 0)
    total = gold + pred
    return np.where(total > 0, 200.0 * correct / np.maximum(total, 1), 100.0)


def token_stats(y_true, marginals, labels):
    """Per test token (sentences stacked): the top marginal, whether its
    label (the first on ties) is the gold one, and ``-log max(p(gold),
    EPS)``; ``marginals`` with a zero column for every test label the model
    never saw (``calibration._with_unseen_labels``)."""
    index = {str(v): i for i, v in enumerate(labels)}
    P = np.vstack(marginals)
    gold = np.array([index[str(v)] for seq in y_true for v in seq], dtype=np.intp)
    p_gold = P[np.arange(gold.size), gold]
    return {"confidence": P.max(axis=1), "correct": P.argmax(axis=1) == gold,
            "nll": -np.log(np.maximum(p_gold, EPS))}


def sentence_stats(lengths, stats, n_bins):
    """Per-sentence sums (n, 3 + 3 n_bins): tokens, summed nll, 0 (unused),
    then per confidence bin the tokens, summed confidence and summed
    correctness (the bins of ``reliability_curve``)."""
    lengths = np.asarray(lengths)
    sent = np.repeat(np.arange(lengths.size), lengths)
    edges = np.arange(n_bins + 1) / n_bins
    conf = stats["confidence"]
    bins = np.minimum(np.searchsorted(edges, conf, side="right") - 1, n_bins - 1)
    out = np.zeros((lengths.size, 3 + 3 * n_bins))
    out[:, 0] = lengths
    np.add.at(out[:, 1], sent, stats["nll"])
    base = 3 + 3 * bins
    np.add.at(out, (sent, base), 1.0)
    np.add.at(out, (sent, base + 1), conf)
    np.add.at(out, (sent, base + 2), stats["correct"].astype(float))
    return out


def resample_weights(n, resamples, seed):
    """``(R, n)`` times each sentence is drawn in each of ``resamples``
    resamples (with replacement), and the full sample's weights (1, n)
    last; the draws of ``default_rng(seed).integers(0, n, (R, n))``."""
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    W = np.zeros((resamples + 1, n))
    for r in range(resamples):
        W[r] = np.bincount(draws[r], minlength=n)
    W[-1] = 1.0
    return W


def resampled_scores(W, counts, sums, n_bins):
    """F1 %, log loss and ECE % of every row of weights ``W`` (from
    :func:`chunk_counts` and :func:`sentence_stats`): a dict of (R,) arrays."""
    c = W @ counts
    s = W @ sums
    tokens = s[:, 0]
    binned = s[:, 3:].reshape(-1, n_bins, 3)
    ece = np.abs(binned[:, :, 2] - binned[:, :, 1]).sum(axis=1) / tokens
    return {"F1": f1_of(c), "log loss": s[:, 1] / tokens, "ECE %": 100.0 * ece}


def paired_se(a, b):
    """Standard errors of ``a[key] - b[key]`` over the resamples (all rows of
    :func:`resampled_scores` but the last, the full sample's)."""
    return {k: float(np.std(a[k][:-1] - b[k][:-1], ddof=1)) for k in a}
