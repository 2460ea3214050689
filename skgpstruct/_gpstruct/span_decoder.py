"""GPStructTagger's decoder for span labels (``decode="auto"``), chosen by
its own validation together with the temperature.

Span labels (:func:`~skgpstruct.metrics.is_span_tagging`) are scored by
span F1, and two decoders serve them: the per-token argmax of the averaged
marginals (the fewest expected token errors; its tags need not agree along
the path) and Viterbi on the posterior mean potentials (one consistent
path, as a CRF decodes). Neither wins everywhere: on the CRF++ base NP
folds the marginals' argmax is better (F1 90.99 against 90.50 over the 5
folds), on CoNLL-2002 Spanish NER Viterbi is (78.63 against 77.58 on the
test set). So the validation that chooses the prior variance and the
temperature (:func:`~skgpstruct._gpstruct.posterior_cv.cv_posterior`,
:func:`~skgpstruct._gpstruct.split_cv.split_posterior`) chooses the decoder
too, by the held-out span F1 of each decoder at the pair its rule allows
it (:func:`pick_with_decoder`):

- the marginals' argmax at the pair of the accuracy rule (only pairs whose
  held-out token error is within one standard error of the best
  posterior-mode CRF's are candidates);
- Viterbi at the pair of the rule without that condition: the stand-in's
  mean is ``c_T`` times the mode (one scalar per temperature), so its
  Viterbi path is the mode CRF's whatever the temperature, and the
  accuracy condition holds by construction. The temperature then serves
  the marginals' calibration alone.

Viterbi is kept on a tie. Labels that are not span tags keep the
marginals' argmax and the accuracy rule.
"""

import numpy as np

from .._tagging.crf_solver import crf_unary
from ..chain import viterbi_ragged
from ..metrics._sequence import extract_chunks

__all__ = ["SpanScorer", "pick_with_decoder", "span_counts", "span_f1"]


def span_f1(counts):
    """Span F1 from ``(n_correct, n_pred, n_true)`` counts (1 when neither
    side has a span, as :func:`~skgpstruct.metrics.chunk_f1_score`)."""
    correct, pred, true = (float(c) for c in counts)
    if pred == 0 and true == 0:
        return 1.0
    return 2.0 * correct / (pred + true)


class SpanScorer:
    """Span counts of label paths against the gold spans of held-out
    sequences.

    Parameters
    ----------
    names : ndarray of shape (n_classes,)
        The span tags of the label codes.
    data : SequenceData
        The held-out sequences, labels encoded in ``[0, n_classes)`` (``-1``:
        unknown; a sequence with an unknown label is left out of the counts,
        its spans not being known).
    """

    def __init__(self, names, data):
        self.names = np.asarray(names, dtype=object)
        self.data = data
        self.gold = [None if (y < 0).any() else extract_chunks(self.names[y])
                     for y in self._split(data.y_flat)]

    def _split(self, flat):
        return np.split(np.asarray(flat), self.data.offsets[1:-1])

    def counts(self, flat):
        """``(n_correct, n_pred, n_true)`` of the label codes ``flat`` (one
        per held-out token, the sequences stacked)."""
        out = np.zeros(3, dtype=np.int64)
        for gold, path in zip(self.gold, self._split(flat)):
            if gold is None:
                continue
            pred = extract_chunks(self.names[path])
            out += (len(gold & pred), len(pred), len(gold))
        return out

    def viterbi(self, crf):
        """The counts of the Viterbi paths of the CRF ``crf`` (a
        :class:`~skgpstruct._tagging.crf_solver.CRFParams`)."""
        paths, _ = viterbi_ragged(crf_unary(crf, self.data), self.data.lengths,
                                  crf.transition)
        return self.counts(crf.labels[paths])


def span_counts(scorer, crf, pred):
    """``(viterbi, marginal)`` span counts of the mode ``crf``'s Viterbi
    paths (3,) and of each row of ``pred`` (the marginals' argmax per
    temperature; (n_T, 3)) on the sequences of the :class:`SpanScorer`
    ``scorer``; None without ``scorer`` (not span labels)."""
    if scorer is None:
        return None
    return scorer.viterbi(crf), np.array([scorer.counts(row) for row in pred])


def pick_with_decoder(rule, close, fallback, spans=None):
    """``((i, j), choice)``: the pair of the validation and, for span
    labels, the decoder (module docstring).

    Parameters
    ----------
    rule : callable
        ``rule(mask)``: the pair the validation's rule picks among the
        pairs ``mask`` marks, or None (``warmest_pair`` on its scores).
    close : ndarray of bool of shape (n_variances, n_temperatures)
        The pairs as accurate as the best posterior-mode CRF.
    fallback : tuple
        The pair when ``close`` marks none.
    spans : tuple or None
        ``(viterbi, marginal)`` span counts: ``viterbi`` of shape
        ``(n_variances, 3)`` (each variance's mode), ``marginal`` of shape
        ``(n_variances, n_temperatures, 3)``; None: not span labels.

    Returns
    -------
    pick : tuple of int
    choice : dict
        ``"decoder"`` (``"marginal"`` or ``"viterbi"``), ``"viterbi_f1"``
        and ``"marginal_f1"`` (held-out span F1 of each decoder at its
        pair); empty without ``spans`` (the accuracy rule's pair).
    """
    pick = rule(close)
    pick = fallback if pick is None else pick
    if spans is None:
        return pick, {}
    viterbi, marginal = spans
    free = rule(np.ones(close.shape, dtype=bool))
    choice = {"viterbi_f1": span_f1(viterbi[free[0]]),
              "marginal_f1": span_f1(marginal[pick])}
    if choice["viterbi_f1"] >= choice["marginal_f1"]:
        return free, dict(choice, decoder="viterbi")
    return pick, dict(choice, decoder="marginal")
