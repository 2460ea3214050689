"""GPStructTagger's prior variance and temperature at scale: one held-out
split, one path of posterior-mode CRFs, and the start of the stochastic fit.

The K-fold validation of :mod:`.prior_variance_cv` and :mod:`.posterior_cv`
costs ``n_folds x len(grid)`` CRF fits: on 9,000 sentences, several times a
CRFsuite fit for the validation alone. From :data:`SPLIT_MIN_SEQUENCES`
training sequences on, the same rules run on one split that holds out a
tenth of the sequences (at least 200 sequences, some 5,000 tokens at
CoNLL's sentence length: the binomial standard error of a 5 % token error is
then 0.3 points, finer than the steps of the grid move it):

- the prior variance: the posterior-mode CRFs of the training part along
  the grid, strongest prior first, each warm-started from the one before
  (one path) on a random sample of at most :data:`PATH_SEQUENCES` of the
  others, scored on the held-out tenth; the path stops once the held-out
  log loss has risen two steps in a row (past its minimum: the variances
  beyond, weaker priors still, are not reached); the rule among those
  reached is ``cv_prior_variance``'s (``"error_1se"``);
- the temperature, with the variance among the band's: ``cv_posterior``'s
  Laplace stand-ins of the cold posterior and its rule, on the same split,
  the mean scales ``c_T`` from at most :data:`_SCALE_SEQUENCES` training
  sequences (a scalar per temperature: a sample estimates it as well), and
  one more condition that makes the GP no less accurate than the CRF its
  validation fits: only the pairs whose held-out token error is within one
  standard error of the best posterior-mode CRF's are candidates (the
  coldest temperature at the band's best variance when none is).

The CRFs have no unpenalised intercept: they are the posterior modes of the
GP's own model (a prior on every weight and transition), so the chosen
variance's CRF, its Laplace variances and ``c_T`` give the stochastic fit a
start at the Laplace stand-in that validation chose.
"""

from dataclasses import replace

import numpy as np

from .._tagging.crf_solver import CRFSpec, fit_crf
from .._utils.parallel import small_blas
from .posterior_cv import (TEMPERATURE_GRID, _held_out_scores, _laplace_variances,
                           _mean_scales, pair_calibration, warmest_pair)
from .span_decoder import SpanScorer, pick_with_decoder, span_counts
from .prior_variance_cv import PRIOR_VARIANCE_GRID, CannotValidate, _error_band, _held_out

__all__ = ["SPLIT_MIN_SEQUENCES", "split_posterior"]

#: Training sequences from which the validation holds out one tenth instead
#: of running 3 folds.
SPLIT_MIN_SEQUENCES = 2000
#: Fraction of the sequences held out.
_HELD_OUT = 0.1
#: Most training sequences of the path of CRFs (a random sample of the
#: training part): the prior variance is the model's, whatever the amount of
#: data, so a sample estimates it, and the validation's cost stops growing
#: with the data.
PATH_SEQUENCES = 2000
#: Most training sequences of the mean scales' ray objective.
_SCALE_SEQUENCES = 1000
#: Iterations and tolerance (CRFsuite's rule) of each CRF of the path
#: (warm-started).
_PATH_MAX_ITER = 100
_PATH_TOL = 1e-4
#: Grid steps past the minimum before the path stops.
_PATIENCE = 2


def _split(data, random_state):
    """``(train, test)``: a shuffled tenth of the sequences held out."""
    rng = np.random.default_rng(random_state)
    perm = rng.permutation(data.n_sequences)
    n_test = max(1, int(round(_HELD_OUT * data.n_sequences)))
    train, test = data.subset(np.sort(perm[n_test:])), data.subset(np.sort(perm[:n_test]))
    labels = np.flatnonzero(train.labels_present(int(data.y_flat.max()) + 1))
    if labels.size < 2 or not np.isin(test.y_flat, labels).any():
        raise CannotValidate("The held-out split had a single label in training, or "
                             "held out only labels its training part lacks.")
    return train, test


def _path(train, test, n_classes, grid, parallel):
    """The mode path with early stopping: ``(errors, losses, crfs)`` per
    variance reached (held-out token error counts, summed negative log
    marginals, the fitted CRFs)."""
    present = train.labels_present(n_classes)
    spec = CRFSpec(present, fit_intercept=False)
    errors, losses, crfs, params = [], [], [], None
    for variance in grid:
        params = fit_crf(train, replace(spec, c2=0.5 / variance), params,
                         max_iter=_PATH_MAX_ITER, tol=_PATH_TOL, parallel=parallel,
                         crfsuite_rule=True)
        e, ll = _held_out(params, test, n_classes)
        errors.append(e)
        losses.append(ll)
        crfs.append(params)
        rising = len(losses) > _PATIENCE and all(
            losses[-k] > losses[-k - 1] for k in range(1, _PATIENCE + 1))
        if rising:
            break
    return np.array(errors, dtype=float), np.array(losses), crfs


def split_posterior(data, n_classes, *, grid=PRIOR_VARIANCE_GRID,
                    temperatures=TEMPERATURE_GRID, random_state=0, parallel=None,
                    choose_temperature=True, span_labels=None):
    """The prior variance and temperature on one held-out split (module
    docstring), and the start of the stochastic fit; with ``span_labels``
    (the span tags of the label codes) the decoder too, by
    :func:`~skgpstruct._gpstruct.span_decoder.pick_with_decoder`, as
    :func:`~skgpstruct._gpstruct.posterior_cv.cv_posterior` does.

    Returns
    -------
    variance, temperature : float
    variance_results : dict
        As ``variance_cv_results_`` (``"variance"``, ``"error"``,
        ``"log_loss"``, ``"band"``), over the variances the path reached.
    temperature_results : dict or None
        As ``temperature_cv_results_`` (with ``span_labels``,
        ``"decoder"`` included) plus
        ``"error"`` (held-out token error of each pair); None without
        ``choose_temperature``.
    start : (CRFParams, float)
        The chosen variance's CRF (fitted on the path's sample) and the
        mean scale ``c_T`` of the chosen pair (1 without the temperature).
    """
    grid = np.sort(np.asarray(grid, dtype=np.float64))
    train, test = _split(data, random_state)
    rng = np.random.default_rng(random_state)
    if train.n_sequences > PATH_SEQUENCES:
        train = train.subset(np.sort(rng.permutation(train.n_sequences)[:PATH_SEQUENCES]))
    errors, losses, crfs = _path(train, test, n_classes, grid, parallel)
    n = test.n_known
    reached = grid[:errors.size]
    band = _error_band(errors, n)
    best = int(min(np.flatnonzero(band), key=lambda j: (losses[j], errors[j])))
    variance_results = {"variance": reached, "error": errors / n, "log_loss": losses / n,
                        "band": band}
    if not choose_temperature:
        return float(reached[best]), 1.0, variance_results, None, (crfs[best], 1.0)
    temps = np.sort(np.asarray(temperatures, dtype=np.float64))[::-1]
    sub = train
    if train.n_sequences > _SCALE_SEQUENCES:
        sub = train.subset(np.sort(rng.permutation(train.n_sequences)[:_SCALE_SEQUENCES]))
    seed = rng.integers(2 ** 32)
    idx = np.flatnonzero(band)
    scorer = None if span_labels is None else SpanScorer(span_labels, test)
    scores, scales, counts = [], [], []
    with small_blas():
        for i in idx:
            s_w, s_b = _laplace_variances(crfs[i], train, reached[i])
            draws = np.random.default_rng(seed)
            c = _mean_scales(crfs[i], s_w, s_b, sub, temps, reached[i], draws)
            scores.append(_held_out_scores(crfs[i], s_w, s_b, c, test, temps, draws))
            scales.append(c)
            counts.append(span_counts(scorer, crfs[i], scores[-1][3]))
    losses_p = np.stack([sc[0] for sc in scores])  # (variance, T, token)
    conf = np.stack([sc[1] for sc in scores])
    correct = np.stack([sc[2] for sc in scores])
    mean = losses_p.mean(axis=2)
    se = losses_p.std(axis=2) / np.sqrt(losses_p.shape[2])
    ece, ece_se = pair_calibration(conf, correct)
    err = 1.0 - correct.mean(axis=2)
    # no less accurate than the best mode: its error plus one standard error
    rate = errors.min() / n
    close = err <= rate + np.sqrt(rate * (1.0 - rate) / n)
    spans = None if scorer is None else (np.stack([v for v, _ in counts]),
                                         np.stack([m for _, m in counts]))
    # none as accurate: the coldest, at the mode's variance
    (i, j), choice = pick_with_decoder(
        lambda mask: warmest_pair(mask, mean, se, ece, ece_se), close,
        (int(np.flatnonzero(idx == best)[0]), temps.size - 1), spans)
    temperature_results = {
        "variance": reached[idx], "temperature": temps, "log_loss": mean,
        "log_loss_se": se, "calibration_error": ece, "calibration_error_se": ece_se,
        "error": err, "mean_scale": np.array(scales), **choice}
    return (float(reached[idx[i]]), float(temps[j]), variance_results, temperature_results,
            (crfs[idx[i]], float(scales[i][j])))
