"""The prior variance of GPStructTagger's linear kernel, by internal validation.

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
CRF, a few seconds on the benchmark folds, much less than one fit of the
GP.

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

:func:`cv_temperature` then chooses the temperature of GPStructTagger's cold
posterior on the same folds (see its docstring).
"""

import numpy as np
import scipy.sparse as sp
from sklearn.model_selection import KFold

__all__ = ["PRIOR_VARIANCE_GRID", "cv_prior_variance"]

#: Candidate prior variances, 0.1 to 100 (CRFsuite c2 from 5 to 0.005), in
#: the 1-2-5 series: three steps a decade. The held-out log loss of the
#: posterior-mode CRF is flat near its minimum, and a step of 10**0.5 (the
#: earlier 0.1, 0.3, 1, ...) could land a factor 1.7 from it on either
#: side; on the papers' base NP folds that moved the GP's ECE by a factor 2.
PRIOR_VARIANCE_GRID = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
_CV_MAX_ITER = 100


def _sequences(data):
    """The sequences of ``data`` as lists ``X, y`` (a tagger's ``fit`` input)."""
    return data.split(data.X_flat), data.split(data.y_flat)


def _held_out(crf, X, y, n_classes):
    """Token errors and summed negative log marginals of the true labels."""
    P = np.zeros((sum(len(t) for t in y), n_classes))
    P[:, crf.classes_] = np.concatenate(crf.predict_marginals(X))
    Y = np.concatenate(y)
    p_true = P[np.arange(Y.size), Y]
    errors = int(np.sum(P.argmax(axis=1) != Y))
    return errors, float(-np.sum(np.log(np.clip(p_true, 1e-12, 1.0))))


def _select(errors, losses, n_tokens, scoring):
    """Index of the chosen candidate from the summed held-out ``errors``
    (token counts) and ``losses`` (negative log marginals) over ``n_tokens``
    tokens (see ``scoring`` of :func:`cv_prior_variance`)."""
    order = range(len(errors))
    if scoring == "log_loss":
        return min(order, key=lambda j: (losses[j], errors[j]))
    if scoring == "error":
        return min(order, key=lambda j: (errors[j], losses[j]))
    rate = errors.min() / n_tokens
    limit = errors.min() + n_tokens * np.sqrt(rate * (1.0 - rate) / n_tokens)
    close = [j for j in order if errors[j] <= limit]
    return min(close, key=lambda j: (losses[j], errors[j]))


class CannotValidate(ValueError):
    """Too few sequences (or labels per fold) to validate the prior variance."""


def _folds(data, n_folds, random_state, what):
    """``(train, test)`` :class:`SequenceData` of each fold of a shuffled
    K-fold split of the sequences whose training part has two labels or
    more (the same folds for the same ``random_state``); ``what`` names the parameter
    (``"kernel_variance"``, ``"temperature"``) in the CannotValidate
    messages."""
    n = data.n_sequences
    k = min(int(n_folds), n)
    if k < 2:
        raise CannotValidate(f"Choosing {what} by validation needs at least 2 "
                             f"training sequences; give {what} a number.")
    found = False
    for train, test in KFold(k, shuffle=True, random_state=random_state).split(
            np.arange(n)):
        train = data.subset(train)
        if np.unique(train.y_flat).size < 2:
            continue
        found = True
        yield train, data.subset(test)
    if not found:
        raise CannotValidate("Every validation fold had a single label in "
                             f"training: give {what} a number.")


def cv_prior_variance(data, n_classes, *, grid=PRIOR_VARIANCE_GRID, n_folds=3,
                      random_state=0, n_jobs=None, scoring="error_1se"):
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

    Returns
    -------
    variance : float
        The chosen prior variance.
    results : dict
        ``"variance"``, ``"error"`` (held-out token error rate) and
        ``"log_loss"`` (mean held-out negative log marginal) per candidate.

    Raises
    ------
    CannotValidate
        A ValueError: fewer than 2 sequences, or no fold with two labels in
        its training part.
    """
    from ._randomized_crf import RandomizedCRFTagger

    if scoring not in ("error_1se", "error", "log_loss"):
        raise ValueError("scoring must be 'error_1se', 'error' or 'log_loss', got "
                         f"{scoring!r}.")
    grid = np.sort(np.asarray(grid, dtype=np.float64))
    errors, losses, n_tokens = np.zeros(grid.size), np.zeros(grid.size), 0
    for train, test in _folds(data, n_folds, random_state, "kernel_variance"):
        (X_tr, y_tr), (X_te, y_te) = _sequences(train), _sequences(test)
        crf = RandomizedCRFTagger(max_iter=_CV_MAX_ITER, warm_start=True, n_jobs=n_jobs)
        # strongest prior first: each fit starts from the previous optimum
        for j in range(grid.size):
            crf.set_params(c2=0.5 / grid[j]).fit(X_tr, y_tr)
            e, ll = _held_out(crf, X_te, y_te, n_classes)
            errors[j] += e
            losses[j] += ll
        n_tokens += test.n_tokens
    best = _select(errors, losses, n_tokens, scoring)
    results = {"variance": grid, "error": errors / n_tokens, "log_loss": losses / n_tokens}
    return float(grid[best]), results


#: Candidate posterior temperatures of :func:`cv_temperature`, 1 (the
#: Bayesian posterior) down to 0.01 (close to the posterior mode, the CRF),
#: halving to 0.025. With the earlier floor of 0.1 the rule sat on the floor
#: on every benchmark fold: a rule at its grid's edge is not a choice.
TEMPERATURE_GRID = (1.0, 0.5, 0.25, 0.1, 0.05, 0.025, 0.01)
#: Posterior draws per held-out sequence in :func:`cv_temperature`.
_CV_SAMPLES = 32


def _laplace_variances(crf, data, variance):
    """Mean-field Laplace variances of a MAP CRF's unary weights and
    transitions: ``1 / (1 / sigma^2 + diag of the Gauss-Newton curvature)``
    (0 for the features absent from ``data``),
    the curvature of the unary weight ``(d, v)`` being ``sum_t x_td^2
    p_tv (1 - p_tv)`` and that of the transition ``(u, v)`` its expected
    count ``sum_t p_t(u, v)`` (an upper bound of its ``p (1 - p)`` sum)."""
    from .chain import marginals_ragged

    X = sp.csr_matrix(data.X_flat, dtype=np.float64)
    P, pair = marginals_ragged(crf._unary(data), data.lengths, crf.transition_)
    curv_w = np.asarray(X.multiply(X).T @ (P * (1.0 - P)))
    curv_b = pair.sum(axis=0)
    s_w = 1.0 / (1.0 / variance + curv_w)
    # features absent from training are not part of the model (as in
    # GPStructTagger's weight-space form and in CRF toolkits): no variance
    s_w[np.diff(X.tocsc().indptr) == 0] = 0.0
    return s_w, 1.0 / (1.0 / variance + curv_b)


def _held_out_log_loss(crf, s_w, s_b, data, temperatures, rng):
    """Held-out negative log marginals of the true labels (one row per
    temperature, one column per token whose label ``crf`` knows) under the
    Laplace posterior of ``crf`` scaled by each temperature (common draws)."""
    from .chain import marginals_ragged

    V = crf.classes_.size
    col = {c: j for j, c in enumerate(crf.classes_)}
    known = np.array([v in col for v in data.y_flat])
    Y = np.array([col.get(v, 0) for v in data.y_flat])
    X, lengths = sp.csr_matrix(data.X_flat, dtype=np.float64), data.lengths
    U0, B0 = crf._unary(data), crf.transition_
    sd_w, sd_b = np.sqrt(s_w), np.sqrt(s_b)
    eps = [(rng.standard_normal(s_w.shape), rng.standard_normal((V, V)))
           for _ in range(_CV_SAMPLES)]
    losses = np.zeros((len(temperatures), int(known.sum())))
    for i, temp in enumerate(temperatures):
        P = np.zeros_like(U0)
        root = np.sqrt(temp)
        for e_w, e_b in eps:
            U = U0 + root * np.asarray(X @ (sd_w * e_w))
            P += marginals_ragged(U, lengths, B0 + root * sd_b * e_b)[0]
        p_true = P[np.arange(Y.size), Y] / _CV_SAMPLES
        losses[i] = -np.log(np.clip(p_true[known], 1e-12, 1.0))
    return losses


def cv_temperature(data, n_classes, variance, *, grid=TEMPERATURE_GRID, n_folds=3,
                   random_state=0, n_jobs=None):
    """Posterior temperature chosen by K-fold held-out log loss.

    On each fold the CRF at the posterior mode (the MAP CRF of
    :func:`cv_prior_variance` at ``variance``) is fitted on the other folds;
    its mean-field Laplace posterior ``N(w_map, T * diag(s))`` (``s`` from
    the Gauss-Newton curvature of the training folds) is scaled by each
    temperature ``T`` of ``grid`` and the held-out fold's token marginals
    are averaged over posterior draws. Returned is the warmest temperature
    whose mean held-out negative log marginal of the true labels is within
    one standard error (over the held-out tokens) of the lowest: the
    Bayesian posterior unless the data say that its spread costs more than
    the noise of the estimate. The Laplace posterior at the mode is
    wider than the variational one relative to its mean (the variational
    mean grows with the spread it averages over), so this estimate
    penalises warm temperatures more than the fit itself would; the
    one-standard-error band keeps it from cooling where the difference is
    noise. ``T = 1`` is the Bayesian posterior,
    ``T -> 0`` the MAP CRF; a cold posterior (``T < 1``) keeps the mode and
    narrows the spread around it.

    Parameters
    ----------
    data : SequenceData
        Training sequences, labels encoded in ``[0, n_classes)``.
    n_classes : int
        Number of labels.
    variance : float
        Prior variance of the weights (and transitions).
    grid : sequence of float, default=TEMPERATURE_GRID
        Candidate temperatures in ``(0, 1]``.
    n_folds : int, default=3
        Folds of sequences (fewer when there are fewer sequences).
    random_state : int, default=0
        Seeds the fold split (as :func:`cv_prior_variance`) and the draws.
    n_jobs : int or None, default=None
        Threads of each CRF fit.

    Returns
    -------
    temperature : float
        The chosen temperature.
    results : dict
        ``"temperature"`` (from 1 down), ``"log_loss"`` (mean held-out
        negative log marginal) and ``"log_loss_se"`` (its standard error
        over the held-out tokens) per candidate.

    Raises
    ------
    CannotValidate
        A ValueError: fewer than 2 sequences, or no fold with two labels in
        its training part.
    """
    from ._randomized_crf import RandomizedCRFTagger

    grid = np.sort(np.asarray(grid, dtype=np.float64))[::-1]
    rng = np.random.default_rng(random_state)
    losses = []
    for train, test in _folds(data, n_folds, random_state, "temperature"):
        crf = RandomizedCRFTagger(c2=0.5 / variance, max_iter=_CV_MAX_ITER,
                                  n_jobs=n_jobs).fit(*_sequences(train))
        s_w, s_b = _laplace_variances(crf, train, variance)
        losses.append(_held_out_log_loss(crf, s_w, s_b, test, grid, rng))
    losses = np.concatenate(losses, axis=1)
    mean = losses.mean(axis=1)
    low = int(np.argmin(mean))
    # one standard error of the best mean: within it, the warmest
    # temperature (grid sorted from 1 down)
    se = losses.std(axis=1) / np.sqrt(losses.shape[1])
    best = int(np.flatnonzero(mean <= mean[low] + se[low])[0])
    return float(grid[best]), {"temperature": grid, "log_loss": mean, "log_loss_se": se}
