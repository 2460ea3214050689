"""The posterior temperature of GPStructTagger, with its prior variance,
by internal validation of a Laplace stand-in of the cold posterior.

The posterior's averaged marginals are flatter than its mode's, so the
variance whose mode validates best
(:func:`skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance`) is not always the
posterior's best: on the same folds :func:`cv_posterior` chooses the prior
variance (among those of the error band) and the temperature of
GPStructTagger's cold posterior together, from the held-out marginals of
a Laplace stand-in of the cold posterior whose mean moves out with its
spread as the variational fit's does (:func:`_mean_scales`); see its
docstring. :func:`cv_temperature` is the same at one variance.
"""

import numpy as np
import scipy.sparse as sp

from .._tagging.crf_solver import crf_unary
from .._utils.parallel import small_blas
from ..chain import log_likelihood_grad_ragged, marginals_ragged
from ..metrics._uncertainty import _binned
from .prior_variance_cv import _folds, _within_one_se, mode_path
from .span_decoder import SpanScorer, pick_with_decoder, span_counts

__all__ = ["TEMPERATURE_GRID", "cv_posterior", "cv_temperature", "pair_calibration",
           "warmest_pair"]

#: Candidate posterior temperatures of :func:`cv_temperature`, 1 (the
#: Bayesian posterior) down to 0.01 (close to the posterior mode, the CRF),
#: halving to 0.025. With the earlier floor of 0.1 the rule sat on the floor
#: on every benchmark fold: a rule at its grid's edge is not a choice.
TEMPERATURE_GRID = (1.0, 0.5, 0.25, 0.1, 0.05, 0.025, 0.01)
#: Posterior draws per held-out sequence in :func:`cv_temperature`.
_CV_SAMPLES = 32
#: Common draws of the spread on the training folds in :func:`_mean_scales`.
_SCALE_SAMPLES = 16
#: Bins of the held-out calibration error in :func:`cv_posterior`.
_CV_BINS = 15
#: Largest growth of the mean over the mode in :func:`_mean_scales`.
_MAX_SCALE = 20.0
#: Bytes of the stacked potentials of one batched chain call over draws.
_BATCH_BYTES = 64 * 2 ** 20


def _laplace_variances(crf, data, variance):
    """Mean-field Laplace variances of a MAP CRF's (a
    :class:`~skgpstruct._tagging.crf_solver.CRFParams` on ``data``'s labels) unary weights and
    transitions: ``1 / (1 / sigma^2 + diag of the Gauss-Newton curvature)``
    (0 for the features absent from ``data``),
    the curvature of the unary weight ``(d, v)`` being ``sum_t x_td^2
    p_tv (1 - p_tv)`` and that of the transition ``(u, v)`` its expected
    count ``sum_t p_t(u, v)`` (an upper bound of its ``p (1 - p)`` sum)."""
    X = sp.csr_matrix(data.X_flat, dtype=np.float64)
    P, pair = marginals_ragged(crf_unary(crf, data), data.lengths, crf.transition)
    curv_w = np.asarray(X.multiply(X).T @ (P * (1.0 - P)))
    curv_b = pair.sum(axis=0)
    s_w = 1.0 / (1.0 / variance + curv_w)
    # features absent from training are not part of the model (as in
    # GPStructTagger's weight-space form and in CRF toolkits): no variance
    s_w[np.diff(X.tocsc().indptr) == 0] = 0.0
    return s_w, 1.0 / (1.0 / variance + curv_b)


def _batched(U0, B0, lengths, c, noise):
    """Arguments of one ragged chain call over every draw of ``noise`` (a
    list of ``(e_u, e_b)``): the potentials ``c * (U0, B0) + (e_u, e_b)``
    of each draw stacked, each sequence of each draw a chain of its own
    (every draw its own transitions)."""
    n = len(noise)
    U = np.concatenate([c * U0 + e_u for e_u, _ in noise])
    B = np.stack([c * B0 + e_b for _, e_b in noise])
    return U, np.tile(lengths, n), B[np.repeat(np.arange(n), len(lengths))]


def _groups(n_draws, data, n_labels):
    """Groups of draws whose stacked chain calls (:func:`_batched`) take at
    most :data:`_BATCH_BYTES` (at least one draw a group)."""
    size = 8 * n_labels * (data.n_tokens + n_labels * data.n_sequences)
    step = int(max(1, min(n_draws, _BATCH_BYTES // size)))
    return [range(i, min(i + step, n_draws)) for i in range(0, n_draws, step)]


def _spread(X, s_w, s_b):
    """A function ``draw(rng) -> (e_u, e_b)``: one draw of the spread
    ``(s_w, s_b)`` at ``T = 1`` on the tokens ``X``, the unary potentials'
    ``X @ (sqrt(s_w) * eps_w)`` (one draw of every weight, shared by the
    tokens that have the feature; ``eps_w`` drawn only for the weights that
    have a variance and a feature in ``X``, the others add nothing) and the
    transitions' ``sqrt(s_b) * eps_b``."""
    X = sp.csr_matrix(X, dtype=np.float64)
    cols = np.flatnonzero((np.diff(X.tocsc().indptr) > 0) & s_w.any(axis=1))
    X_cols, sd_w, sd_b = X[:, cols], np.sqrt(s_w[cols]), np.sqrt(s_b)

    def draw(rng):
        e_u = np.asarray(X_cols @ (sd_w * rng.standard_normal(sd_w.shape)))
        return e_u, sd_b * rng.standard_normal(sd_b.shape)

    return draw


def _spread_draws(s_w, s_b, data, rng):
    """:data:`_SCALE_SAMPLES` draws of the spread on ``data``
    (:func:`_spread`). A temperature scales them by ``sqrt(T)``: the draws
    are common to every temperature (and, with the same ``rng`` state,
    every variance)."""
    draw = _spread(data.X_flat, s_w, s_b)
    return [draw(rng) for _ in range(_SCALE_SAMPLES)]


def _ray_objective(crf, data, draws, temperature, variance):
    """``f(c)`` and ``f'(c)``: minus the cold objective (times ``T``) of the
    mean ``c * w`` of the mode ``w`` of ``crf``, ``-(E[log p(y | c w + e)] -
    c^2 |w|^2 / (2 sigma^2))``, the expectation over the common ``draws``
    (:func:`_spread_draws`) of the spread scaled by ``sqrt(temperature)``
    on ``data`` (so ``f`` is smooth in ``c``; convex, the log-likelihood
    being concave in the potentials)."""
    lengths = data.lengths
    U0, B0 = crf_unary(crf, data), crf.transition
    # the CRF's columns: the labels of these (its training) sequences
    y = np.where(data.y_flat >= 0, np.searchsorted(crf.labels, data.y_flat), -1)
    root = np.sqrt(temperature)
    noise = [(root * e_u, root * e_b) for e_u, e_b in draws]
    groups = _groups(len(noise), data, B0.shape[0])
    # |w|^2 of the model's weights: the unary weights and the transitions
    # (transition_prior_var="auto": the same prior variance; the CRF's
    # intercept is not penalised)
    norm2 = float(np.sum(crf.coef ** 2) + np.sum(B0 ** 2))

    def negative(c):
        ll = dll = 0.0
        for group in groups:
            U, lens, B = _batched(U0, B0, lengths, c, [noise[k] for k in group])
            values, g_u, g_b = log_likelihood_grad_ragged(U, lens, B,
                                                          np.tile(y, len(group)))
            ll += float(values.sum())
            # d/dc of the potentials is (U0, B0) in every draw
            dll += float(np.sum(g_u.reshape(len(group), *U0.shape) * U0)
                         + np.sum(g_b * B0))
        n = len(noise)
        return (-(ll / n - c * c * norm2 / (2.0 * variance)),
                -(dll / n - c * norm2 / variance))

    return negative


def _root(slope, low, step):
    """The root of the increasing ``slope`` above ``low`` (``slope(low) <
    0``) on ``[low, _MAX_SCALE]``: bracketed by steps from ``low`` that
    double, then :func:`scipy.optimize.brentq` to 1e-3 (``_MAX_SCALE`` if
    the slope is still negative there)."""
    from scipy.optimize import brentq

    while True:
        high = min(low + step, _MAX_SCALE)
        if slope(high) >= 0.0:
            return float(brentq(slope, low, high, xtol=1e-3))
        if high >= _MAX_SCALE:
            return _MAX_SCALE
        low, step = high, 2.0 * step


def _mean_scales(crf, s_w, s_b, data, temperatures, variance, rng):
    """The factors ``c_T`` by which the cold posterior's mean grows over the
    posterior mode ``w`` under the spread ``T * (s_w, s_b)``, for each
    temperature ``T`` of ``temperatures``.

    The mean of the mean-field fit maximises ``E_q[log p(y | w)] -
    |m|^2 / (2 sigma^2)`` (the cold ELBO times ``T``): the expected
    log-likelihood under the spread, not at the mean. Noise flattens the
    marginals, so the optimum moves out along the mode's direction; on the
    first chunking fold (CRF++ template, ``sigma^2 = 10``, ``T = 0.1``) the
    fitted means are 2.4 to 2.7 times the mode's for features seen 1 to 100
    times and for the transitions alike. ``c_T`` is that optimum restricted
    to the ray ``c * w`` on ``[1, 20]`` (:func:`_ray_objective`, convex in
    ``c``: the root of its derivative, to 1e-3); without spread it is 1,
    the mode's own stationarity.

    The draws of the spread are common to every temperature
    (:func:`_spread_draws`), so ``c_T`` grows with ``T``: the temperatures
    are solved from the coldest up, each root bracketed from the one below
    (1 for the coldest), with a first step twice the last growth (a tenth
    of the bracket's start at least).
    """
    draws = _spread_draws(s_w, s_b, data, rng)
    out = {}
    below, growth = 1.0, 0.0
    for T in sorted(temperatures):
        objective = _ray_objective(crf, data, draws, T, variance)
        cache = {}

        def slope(c):
            if c not in cache:  # brentq evaluates the bracket's ends again
                cache[c] = objective(c)[1]
            return cache[c]

        if slope(below) < 0.0:
            c = _root(slope, below, max(2.0 * growth, 0.1 * below))
        elif below == 1.0 or slope(1.0) >= 0.0:
            c = 1.0  # the mode: no growth (or the draws' noise says so)
        else:  # not monotone in T (the draws' noise): search under below
            c = _root(slope, 1.0, below - 1.0)
        growth, below = max(c - below, 0.0), c
        out[T] = c
    return [out[T] for T in temperatures]


def _held_out_scores(crf, s_w, s_b, scales, data, temperatures, rng):
    """Held-out negative log marginals of the true labels, confidences (the
    largest marginal) and whether the argmax is right (each one row per
    temperature, one column per token whose label ``crf`` knows) under the
    Laplace posterior of ``crf`` scaled by each temperature, its mean by
    the matching ``scales`` (common draws), and the argmax's label codes
    (one row per temperature, one column per token)."""
    V = crf.labels.size
    known = np.isin(data.y_flat, crf.labels)
    Y = np.where(known, np.minimum(np.searchsorted(crf.labels, data.y_flat), V - 1), 0)
    lengths = data.lengths
    U0, B0 = crf_unary(crf, data), crf.transition
    draw = _spread(data.X_flat, s_w, s_b)
    shape = (len(temperatures), int(known.sum()))
    losses, conf, correct = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool)
    P_all = np.zeros((len(temperatures),) + U0.shape)
    for group in _groups(_CV_SAMPLES, data, V):
        # the spread of each draw at T = 1, scaled by sqrt(T) below
        base = [draw(rng) for _ in group]
        for i, (temp, c) in enumerate(zip(temperatures, scales)):
            root = np.sqrt(temp)
            noise = [(root * e_u, root * e_b) for e_u, e_b in base]
            U, lens, B = _batched(U0, B0, lengths, c, noise)
            P_all[i] += marginals_ragged(U, lens, B)[0].reshape(len(group),
                                                                *U0.shape).sum(axis=0)
    arg = P_all.argmax(axis=2)  # the argmax of the averaged marginals
    pred = crf.labels[arg]
    for i, P in enumerate(P_all):
        P = P[known] / _CV_SAMPLES
        p_true = P[np.arange(P.shape[0]), Y[known]]
        losses[i] = -np.log(np.clip(p_true, 1e-12, 1.0))
        conf[i] = P.max(axis=1)
        correct[i] = arg[i, known] == Y[known]
    return losses, conf, correct, pred


def _calibration_error(conf, correct, n_bins=_CV_BINS):
    """Expected calibration error of pooled held-out tokens (the bins of
    :func:`skgpstruct.metrics.expected_calibration_error`) and its standard
    error, ``sqrt(sum_b n_b a_b (1 - a_b)) / n`` (the binomial noise of the
    bins' accuracies ``a_b``)."""
    counts, conf_sum, acc_sum = _binned(conf, correct, n_bins)
    acc = acc_sum / np.maximum(counts, 1)
    se = np.sqrt(np.sum(counts * acc * (1.0 - acc))) / conf.size
    return float(np.sum(np.abs(conf_sum - acc_sum)) / conf.size), float(se)


def pair_calibration(conf, correct):
    """``(ece, ece_se)`` of every ``(variance, temperature)`` pair: the
    :func:`_calibration_error` of the held-out tokens ``conf[i, j]``,
    ``correct[i, j]`` (arrays of shape (n_variances, n_temperatures))."""
    return np.array([[_calibration_error(conf[i, j], correct[i, j])
                      for j in range(conf.shape[1])]
                     for i in range(conf.shape[0])]).transpose(2, 0, 1)


def warmest_pair(close, mean, se, ece, ece_se):
    """``(i, j)`` the rule of :func:`cv_posterior` picks among the pairs
    ``close`` marks (variances by temperatures, temperatures from 1 down):
    those whose log loss ``mean`` is within one standard error ``se`` of
    the lowest, there those whose calibration error is within one
    ``ece_se`` of the lowest, then the warmest temperature and at it the
    lowest calibration error; None when ``close`` marks none."""
    if not close.any():
        return None
    close = close & _within_one_se(np.where(close, mean, np.inf), se)
    close &= _within_one_se(np.where(close, ece, np.inf), ece_se)
    j = int(np.flatnonzero(close.any(axis=0))[0])
    i = int(np.argmin(np.where(close[:, j], ece[:, j], np.inf)))
    return i, j


def _posterior_scores(crf, fold, variance, grid, seed, scorer=None):
    """``c_T`` of each temperature of ``grid`` on the training part of
    ``fold``, the held-out scores (:func:`_held_out_scores`) on its test
    part, under the Laplace posterior of the mode ``crf`` (the draws from
    ``seed``), and with a :class:`~skgpstruct._gpstruct.span_decoder.SpanScorer`
    of the test part the span counts ``(viterbi, marginal)`` of the mode's
    Viterbi paths (3,) and of the marginals' argmax per temperature (n_T, 3)."""
    train, test = fold
    s_w, s_b = _laplace_variances(crf, train, variance)
    draws = np.random.default_rng(seed)
    c = _mean_scales(crf, s_w, s_b, train, grid, variance, draws)
    scores = _held_out_scores(crf, s_w, s_b, c, test, grid, draws)
    return c, scores, span_counts(scorer, crf, scores[3])


def _fold_scores(fold, n_classes, variances, grid, seed, names=None):
    """:func:`_posterior_scores` of each of ``variances`` (ascending:
    strongest prior first) on ``fold``, along the path of its
    posterior-mode CRFs (:func:`~skgpstruct._gpstruct.prior_variance_cv.mode_path`):
    each fitted on the training part warm-started from the one before and
    scored before the next is fitted, so that one CRF (``n_features x
    n_labels`` weights) is held at a time, not one per variance. ``names``:
    the span tags of the label codes, for the span counts (None: none)."""
    scorer = None if names is None else SpanScorer(names, fold[1])
    return [_posterior_scores(crf, fold, variance, grid, seed, scorer)
            for variance, crf in mode_path(fold[0], n_classes, variances)]


def cv_posterior(data, n_classes, variances, *, grid=TEMPERATURE_GRID, n_folds=3,
                 random_state=0, n_jobs=None, n_repeats=1, mode_error=None,
                 span_labels=None):
    """Prior variance and posterior temperature chosen jointly by K-fold
    validation of the posterior's averaged marginals (log loss, then
    calibration error).

    On each fold, for each candidate ``variance``, the CRF at the posterior
    mode (the MAP CRF of
    :func:`~skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance`) is fitted on the other folds,
    warm-started from the next stronger prior. Its mean-field
    Laplace posterior ``N(c_T w_map, T * diag(s))`` (``s`` from the
    Gauss-Newton curvature of the training folds) stands for the cold
    posterior at each temperature ``T`` of ``grid``, and the held-out
    fold's token marginals are averaged over 32 posterior draws. ``c_T``
    (:func:`_mean_scales`, at least 1) is how far the mean of the
    variational fit moves out along the mode under that spread: the mean
    of the mean-field fit maximises the *expected* log-likelihood under
    its spread, and noise flattens the marginals, so the mean grows with
    the spread (2.4 to 2.7 times the mode's on the first chunking fold,
    CRF++ template, ``sigma^2 = 10``, ``T = 0.1``). Without ``c_T`` the
    stand-in is far too flat at warm temperatures (on that fold's test
    sentences at ``T = 0.1``: log loss 0.69, against 0.30 with ``c_T`` and
    0.27 for the fitted GP), and the rule sits at the coldest temperature
    of any grid.

    The rule: of all ``(variance, T)`` pairs (with ``mode_error``, only
    those whose held-out token error is within one binomial standard error
    of ``mode_error``, the best posterior-mode CRF's on the same folds: the
    GP is to be no less accurate than the CRF its validation fits; none:
    the coldest temperature, at the variance of its lowest log loss), those whose mean held-out
    negative log marginal of the true labels is within one standard error
    (over the held-out tokens) of the lowest; of those, the ones whose
    held-out expected calibration error (15 bins of the largest marginal,
    the tokens of all folds pooled) is within one standard error
    (``sqrt(sum_b n_b a_b (1 - a_b)) / n``, the binomial noise of the bins'
    accuracies) of the lowest; of those, the warmest ``T``, and at it the
    lowest calibration error. The log loss, a proper score, rules out what
    the data reject; within its noise, where it is flat (as it is over
    wide ranges of both parameters), the calibration of the marginals
    decides, the thing a user of the marginals reads; within the noise of
    both, the Bayesian posterior (``T = 1``) is preferred over a colder
    one. On data drawn from the model the rule keeps ``T = 1``; on the
    benchmark folds it picks ``T`` between 0.025 and 0.5. Choosing the
    variance with the temperature matters: the averaged marginals of a
    posterior are flatter than its mode's, so the variance whose mode
    validates best (a plain CRF's choice) is often too strong a prior for
    the posterior (on the papers' base NP folds the mode's choice is 0.5,
    the posterior's 1).

    Parameters
    ----------
    data, n_classes, n_folds
        As in :func:`~skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance`
        (the training sequences, labels encoded in ``[0, n_classes)``, and
        the folds).
    variances : float or sequence of float
        Candidate prior variances of the weights (and transitions), e.g.
        the ``"band"`` of :func:`~skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance`.
    grid : sequence of float, default=TEMPERATURE_GRID
        Candidate temperatures in ``(0, 1]``.
    random_state : int, default=0
        Seeds the fold split (as
        :func:`~skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance`) and the draws (common to
        every candidate).
    n_jobs : int or None, default=None
        Threads over the folds (the results do not depend on it).
    n_repeats : int, default=1
        Shuffled K-fold splits, as in
        :func:`~skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance` (each held-out
        token scored once per split, all of them pooled; the standard
        errors of the log loss and the calibration error stay those of the
        distinct tokens).
    mode_error : float or None, default=None
        The lowest held-out token error rate of the posterior-mode CRFs on
        the same folds (``variance_cv_results_["error"].min()``); None: no
        accuracy condition.
    span_labels : ndarray of shape (n_classes,) or None, default=None
        The span tags of the label codes: the decoder is chosen too
        (:func:`~skgpstruct._gpstruct.span_decoder.pick_with_decoder`: the
        marginals' argmax at the pair of the accuracy rule, or Viterbi at
        the pair of the rule without it, by held-out span F1; Viterbi on a
        tie). None: the marginals' argmax.

    Returns
    -------
    variance : float
        The chosen prior variance.
    temperature : float
        The chosen temperature.
    results : dict
        ``"variance"`` (ascending) and ``"temperature"`` (from 1 down), and
        per ``(variance, temperature)`` pair (arrays of shape
        ``(n_variances, n_temperatures)``): ``"log_loss"`` (mean held-out
        negative log marginal), ``"log_loss_se"`` (its standard error over
        the held-out tokens), ``"calibration_error"`` and
        ``"calibration_error_se"`` (held-out ECE, a fraction, and its
        standard error) and ``"mean_scale"`` (``c_T``, the mean over the
        folds); with ``span_labels`` also ``"decoder"`` (``"marginal"`` or
        ``"viterbi"``), ``"viterbi_f1"`` and ``"marginal_f1"`` (the
        held-out span F1 of each decoder at its pair).

    Raises
    ------
    CannotValidate
        A ValueError: fewer than 2 sequences, or no fold with two labels in
        its training part.
    """
    from joblib import Parallel, delayed

    variances = np.sort(np.atleast_1d(np.asarray(variances, dtype=np.float64)))
    grid = np.sort(np.asarray(grid, dtype=np.float64))[::-1]
    rng = np.random.default_rng(random_state)
    folds = list(_folds(data, n_folds, random_state, "temperature", n_repeats))
    # common draws for every variance of a fold (one seed a fold, in order)
    seeds = [rng.integers(2 ** 32) for _ in folds]
    # the folds are independent, each seeded by its own seed; single-threaded
    # BLAS in each (its small products are no faster threaded, and threaded
    # ones sum in another order): the same numbers whatever n_jobs is
    with small_blas(), Parallel(n_jobs=n_jobs, prefer="threads") as parallel:
        out = parallel(delayed(_fold_scores)(fold, n_classes, variances, grid, seed,
                                             span_labels)
                       for fold, seed in zip(folds, seeds))
    scores = [[] for _ in variances]
    scales = np.zeros((variances.size, grid.size))
    spans = None if span_labels is None else (
        np.zeros((variances.size, 3), dtype=np.int64),
        np.zeros((variances.size, grid.size, 3), dtype=np.int64))
    for per_variance in out:  # fold order
        for i, (c, fold_scores, counts) in enumerate(per_variance):
            scales[i] += c
            scores[i].append(fold_scores)
            if spans is not None:
                spans[0][i] += counts[0]
                spans[1][i] += counts[1]
    n_used = len(folds)
    # (variance, temperature, token) arrays of the pooled held-out tokens
    losses, conf, correct = (np.stack([np.concatenate([f[k] for f in parts], axis=1)
                                       for parts in scores]) for k in range(3))
    mean = losses.mean(axis=2)
    # each distinct held-out token is scored n_repeats times (once a split)
    n_distinct = losses.shape[2] / n_repeats
    se = losses.std(axis=2) / np.sqrt(n_distinct)
    ece, ece_se = pair_calibration(conf, correct)
    ece_se = ece_se * np.sqrt(n_repeats)
    close = np.ones(mean.shape, dtype=bool)
    if mode_error is not None:
        # no less accurate than the best posterior-mode CRF on the same
        # held-out tokens: its error rate plus one binomial standard error
        err = 1.0 - correct.mean(axis=2)
        n = correct.shape[2] / n_repeats
        close = err <= mode_error + np.sqrt(mode_error * (1.0 - mode_error) / n) + 1e-12
    # none as accurate as the mode: the coldest, nearest the mode
    (i, j), choice = pick_with_decoder(
        lambda mask: warmest_pair(mask, mean, se, ece, ece_se), close,
        (int(np.argmin(mean[:, -1])), grid.size - 1), spans)
    results = {"variance": variances, "temperature": grid, "log_loss": mean,
               "log_loss_se": se, "calibration_error": ece,
               "calibration_error_se": ece_se, "mean_scale": scales / n_used,
               **choice}
    return float(variances[i]), float(grid[j]), results


def cv_temperature(data, n_classes, variance, *, grid=TEMPERATURE_GRID, n_folds=3,
                   random_state=0, n_jobs=None, n_repeats=1):
    """Posterior temperature chosen by K-fold validation at one prior
    variance: :func:`cv_posterior` with ``variances=[variance]``.

    Parameters
    ----------
    variance : float
        Prior variance of the weights (and transitions).
    data, n_classes, grid, n_folds, random_state, n_jobs, n_repeats
        As in :func:`cv_posterior`.

    Returns
    -------
    temperature : float
        The chosen temperature.
    results : dict
        ``"temperature"`` (from 1 down), and per candidate ``"log_loss"``,
        ``"log_loss_se"``, ``"calibration_error"``,
        ``"calibration_error_se"`` and ``"mean_scale"`` (as
        :func:`cv_posterior`'s).

    Raises
    ------
    CannotValidate
        As :func:`cv_posterior`.
    """
    _, temperature, res = cv_posterior(data, n_classes, [variance], grid=grid,
                                       n_folds=n_folds, random_state=random_state,
                                       n_jobs=n_jobs, n_repeats=n_repeats)
    return temperature, {key: (value[0] if isinstance(value, np.ndarray)
                               and key != "temperature" else value)
                         for key, value in res.items() if key != "variance"}
