"""The prior variance of GPStructTagger's linear kernel, by internal
validation of the posterior-mode CRF.

The prior variance ``sigma^2`` of the weights of the linear kernel is the
L2 strength of a CRF: the posterior mode of the same model is the CRF that
minimises ``-log-likelihood + ||w||^2 / (2 sigma^2)``, i.e. CRFsuite's
``c2 = 1 / (2 sigma^2)``. :func:`cv_prior_variance` fits that CRF (exact
forward-backward, L-BFGS) on ``n_folds - 1`` folds of the training
sequences for every variance of a log grid, warm-started along the grid in
the manner of sklearn's ``LogisticRegressionCV``, scores the held-out fold
and returns, among the variances whose held-out token error is within one
standard error of the lowest, the one with the lowest held-out log loss
(``scoring="error_1se"``). It costs ``n_folds * len(grid)`` fits of a plain
CRF (times ``n_repeats``, the shuffled splits of a repeated K-fold), a few
seconds on the benchmark folds, much less than one fit of the GP.

Why not the ELBO (type-II maximum likelihood)? With a mean-field posterior
over thousands of correlated binary features the ELBO prefers a strong
prior: on the first chunking fold it picked ``sigma^2 = 0.4`` (7.72 % token
error) where ``sigma^2 = 10`` gave 5.99 %; the bound is loosest where the
true posterior is most correlated, i.e. at weak priors (Turner and Sahani,
"Two problems with variational expectation maximisation for time-series
models", 2011). Held-out error measures what the user measures, but it is
flat, to within its noise, over a wide range of variances (on the
benchmark folds often from 3 to 100), and the weakest prior of that range
leaves confident errors on rare features that a proper score, the log loss,
sees: it decides within the band.

The posterior's averaged marginals are flatter than its mode's, so the
variance whose mode validates best is not always the posterior's best:
:func:`skgpstruct._gpstruct.posterior_cv.cv_posterior` chooses the prior variance
among this module's error band together with the temperature of
GPStructTagger's cold posterior.
"""

from dataclasses import replace

import numpy as np
from joblib import Parallel
from sklearn.model_selection import KFold

from .._input.sequences import SequenceData
from .._tagging.crf_solver import CRFSpec, crf_marginals, fit_crf

__all__ = ["PRIOR_VARIANCE_GRID", "CannotValidate", "cv_prior_variance", "mode_path"]

#: Candidate prior variances, 0.1 to 100 (CRFsuite c2 from 5 to 0.005), in
#: the 1-2-5 series: three steps a decade. The held-out log loss of the
#: posterior-mode CRF is flat near its minimum, and a step of 10**0.5 (the
#: earlier 0.1, 0.3, 1, ...) could land a factor 1.7 from it on either
#: side; on the papers' base NP folds that moved the GP's ECE by a factor 2.
PRIOR_VARIANCE_GRID = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
_CV_MAX_ITER = 100


def mode_path(train, n_classes, variances, *, parallel=None):
    """The posterior-mode CRFs of ``train`` along ``variances`` (ascending:
    strongest prior first), each warm-started from the one before: yields
    ``(variance, params)`` (a :class:`~skgpstruct._tagging.crf_solver.CRFParams`).

    The CRF (exact, L-BFGS, :data:`_CV_MAX_ITER` iterations, ``c2 = 1 / (2
    sigma^2)``) covers the labels of ``train`` only: its columns are the
    codes a mask over the ``n_classes`` labels marks, those present in
    ``train``; the features no token of ``train`` uses get zero weights.
    Each fit is held until the next one replaces it.
    """
    present = train.labels_present(n_classes)
    spec = CRFSpec(present)
    params = None
    for variance in variances:
        params = fit_crf(train, replace(spec, c2=0.5 / variance), params,
                         max_iter=_CV_MAX_ITER, parallel=parallel)
        yield variance, params


def _held_out(params, test, n_classes):
    """Token errors and summed negative log marginals of the true labels
    (of the tokens whose label is known)."""
    P = np.zeros((test.n_tokens, n_classes))
    P[:, params.labels] = crf_marginals(params, test)
    known = test.y_flat >= 0
    P, Y = P[known], test.y_flat[known]
    p_true = P[np.arange(Y.size), Y]
    errors = int(np.sum(P.argmax(axis=1) != Y))
    return errors, float(-np.sum(np.log(np.clip(p_true, 1e-12, 1.0))))


def _error_band(errors, n_tokens, n_repeats=1):
    """Whether each candidate's summed held-out ``errors`` (token counts
    over ``n_tokens`` tokens) is within one binomial standard error (that
    of the lowest error rate) of the lowest. With ``n_repeats`` splits the
    ``n_tokens`` are ``n_repeats`` scorings of each held-out token: the
    standard error is that of ``n_tokens / n_repeats`` tokens (repeating
    the split averages out the split's noise, not the tokens')."""
    errors = np.asarray(errors, dtype=np.float64)
    rate = errors.min() / n_tokens
    se = n_tokens * np.sqrt(rate * (1.0 - rate) * n_repeats / n_tokens)
    return _within_one_se(errors, np.full(errors.shape, se))


def _within_one_se(values, se):
    """Whether each value is within one standard error (that of the lowest
    value) of the lowest."""
    low = np.unravel_index(np.argmin(values), values.shape)
    return values <= values[low] + se[low]


def _select(errors, losses, n_tokens, scoring, n_repeats=1):
    """Index of the chosen candidate from the summed held-out ``errors``
    (token counts) and ``losses`` (negative log marginals) over ``n_tokens``
    tokens (see ``scoring`` of :func:`cv_prior_variance`)."""
    order = range(len(errors))
    if scoring == "log_loss":
        return min(order, key=lambda j: (losses[j], errors[j]))
    if scoring == "error":
        return min(order, key=lambda j: (errors[j], losses[j]))
    close = np.flatnonzero(_error_band(errors, n_tokens, n_repeats))
    return min(close, key=lambda j: (losses[j], errors[j]))


class CannotValidate(ValueError):
    """Too few sequences (or labels per fold) to validate the prior variance."""


def _folds(data, n_folds, random_state, what, n_repeats=1):
    """``(train, test)`` :class:`~skgpstruct._input.sequences.SequenceData` of
    each fold of a shuffled K-fold split of the sequences whose training
    part has two labels or more and whose test part has a label of the
    training part (held-out tokens of labels unseen in training are not
    scored, so such a fold would score nothing), the same folds for the
    same ``random_state``; ``what`` names the parameter
    (``"kernel_variance"``, ``"temperature"``) in the CannotValidate
    messages. ``n_repeats > 1``: the folds of that many shuffled splits,
    the ``r``-th seeded by ``random_state + r`` (the first is the split of
    ``n_repeats=1``), so that each sequence is held out once per split."""
    if int(n_repeats) != n_repeats or n_repeats < 1:
        raise ValueError(f"n_repeats must be a positive integer, got {n_repeats!r}.")
    n = data.n_sequences
    k = min(int(n_folds), n)
    if k < 2:
        raise CannotValidate(f"Choosing {what} by validation needs at least 2 "
                             f"training sequences; give {what} a number.")
    found = False
    splits = (split for r in range(int(n_repeats))
              for split in KFold(k, shuffle=True,
                                 random_state=random_state if r == 0 else random_state + r
                                 ).split(np.arange(n)))
    for train, test in splits:
        train, test = data.subset(train), data.subset(test)
        labels = np.flatnonzero(train.labels_present(int(data.y_flat.max()) + 1))
        if labels.size < 2 or not np.isin(test.y_flat, labels).any():
            continue
        found = True
        yield train, test
    if not found:
        raise CannotValidate("Every validation fold had a single label in "
                             "training, or held out only labels its training "
                             f"part lacks: give {what} a number.")


def cv_prior_variance(data, n_classes, *, grid=PRIOR_VARIANCE_GRID, n_folds=3,
                      random_state=0, n_jobs=None, scoring="error_1se", n_repeats=1):
    """Prior variance of the weights chosen by K-fold validation of the MAP CRF.

    Parameters
    ----------
    data : SequenceData
        Training sequences, labels encoded in ``[0, n_classes)``.
    n_classes : int
        Number of labels.
    grid : sequence of float, default=PRIOR_VARIANCE_GRID
        Candidate variances.
    n_folds : int, default=3
        Folds of sequences (fewer when there are fewer sequences).
    random_state : int, default=0
        Seeds the fold split.
    n_jobs : int or None, default=None
        Threads of each CRF fit.
    scoring : {"error_1se", "error", "log_loss"}, default="error_1se"
        The held-out criterion. ``"error_1se"``: among the variances whose
        token error is within one standard error of the lowest (the
        binomial ``sqrt(e (1 - e) / n)`` over the ``n`` held-out tokens),
        the one with the lowest mean negative log marginal of the true
        labels (a strictly proper score): held-out error is flat, to within
        its noise, over a wide range of variances, and the log loss decides
        among them. ``"error"``: the lowest token error (ties: log loss).
        ``"log_loss"``: the lowest log loss (ties: error).
    n_repeats : int, default=1
        Shuffled K-fold splits (repeated K-fold; ``random_state`` an int,
        the ``r``-th split seeded by ``random_state + r``): every held-out
        token is scored once per split, and the scores are summed over all
        of them. Repeating averages out the noise of the split (which
        sequences train which fold's CRF), not that of the held-out tokens,
        so the error band's standard error stays that of ``n`` tokens. It
        costs ``n_repeats`` times the fits. GPStructTagger validates with
        one split; ``benchmarks/validation_seeds.py`` measures what more
        would change.
    results : dict
        ``"variance"``, ``"error"`` (held-out token error rate),
        ``"log_loss"`` (mean held-out negative log marginal) and ``"band"``
        (with ``"error_1se"``: whether the error is within one standard
        error of the lowest, the variances that
        :func:`skgpstruct._gpstruct.posterior_cv.cv_posterior` may choose among;
        otherwise the chosen variance alone) per candidate.

    Raises
    ------
    CannotValidate
        A ValueError: fewer than 2 sequences, or no fold with two labels in
        its training part.
    """
    if scoring not in ("error_1se", "error", "log_loss"):
        raise ValueError("scoring must be 'error_1se', 'error' or 'log_loss', got "
                         f"{scoring!r}.")
    grid = np.sort(np.asarray(grid, dtype=np.float64))
    if not np.all(grid > 0):
        raise ValueError(f"The prior variances must be positive, got {grid.tolist()}.")
    errors, losses, n_tokens = np.zeros(grid.size), np.zeros(grid.size), 0
    with Parallel(n_jobs=n_jobs, prefer="threads") as parallel:
        for train, test in _folds(data, n_folds, random_state, "kernel_variance", n_repeats):
            # scored with each sequence's product in the stacked CSR form
            # (as the held-out CRF always scored them, also where the
            # input mixed dense and sparse sequences)
            test = SequenceData(test.X_flat, test.lengths, test.y_flat)
            # strongest prior first: each fit starts from the previous optimum
            path = mode_path(train, n_classes, grid, parallel=parallel)
            for j, (_, params) in enumerate(path):
                e, ll = _held_out(params, test, n_classes)
                errors[j] += e
                losses[j] += ll
            n_tokens += test.n_known
    best = _select(errors, losses, n_tokens, scoring, n_repeats)
    band = (_error_band(errors, n_tokens, n_repeats) if scoring == "error_1se"
            else np.arange(grid.size) == best)
    results = {"variance": grid, "error": errors / n_tokens, "log_loss": losses / n_tokens,
               "band": band}
    return float(grid[best]), results
