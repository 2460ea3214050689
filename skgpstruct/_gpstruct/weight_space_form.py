"""GPStructTagger's weight-space (inducing-feature) form: its fit, and the
moments, expected log-likelihood and KL term of the fitted posterior.

Plain functions: ``GPStructTagger.fit`` calls :func:`prepare_fit` with the
data and its parameters, and its predictions call the others with the
fitted arrays (a :class:`FittedWeights`); the maths is in
:mod:`skgpstruct.gp.weight_space`.
"""

import warnings
from functools import partial
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from joblib import Parallel
from sklearn.base import clone
from sklearn.utils import check_random_state

from .._tagging.base import box_projection
from .._utils.seeds import SEED_MAX
from .._tagging.crf_solver import CRFSpec, fit_crf
from .fitting import FitProblem, transition_variance
from .posterior_cv import _laplace_variances, cv_posterior
from .prior_variance_cv import CannotValidate, cv_prior_variance
from .split_cv import SPLIT_MIN_SEQUENCES, split_posterior
from .svi import StochasticFeatureELBO
from ..gp.kernels import LinearKernel
from ..gp.kl import transition_kl
from ..gp.sampling import draw_normals
from ..gp.weight_space import (
    FeatureParams,
    WeightSpaceObjective,
    _Blocks,
    _blocks_ell,
    feature_kl,
    feature_moments,
)

__all__ = ["CV_FALLBACK_VARIANCE", "FittedWeights", "feature_design", "feature_jitter",
           "fitted_weights", "posterior_kl", "prepare_fit", "prior_variance",
           "sequence_ell", "sequence_moments"]

#: Starting prior variance of the weights when it is learned and no kernel
#: is given: the standard normal prior, before the data say otherwise.
_START_VARIANCE = 1.0
#: Prior variance of ``kernel_variance="cv"`` when there is too little data
#: to validate (one sequence, or no fold with two labels): the unit
#: (standard normal) prior, with a UserWarning.
CV_FALLBACK_VARIANCE = 1.0
#: Iterations and tolerance (CRFsuite's stopping rule) of the posterior-mode
#: CRF that starts an SVI fit: the tutorial's 100 iterations, and a tenth of
#: a per mille over ten iterations (SVI moves the mean on from there).
MODE_MAX_ITER = 100
MODE_TOL = 1e-4


class FittedWeights(NamedTuple):
    """A fitted weight-space posterior, as the predictions read it."""

    coef: np.ndarray  #: ``coef_``
    coef_var: np.ndarray  #: ``coef_var_``
    active: np.ndarray  #: ``_active_features_``
    bias_column: float  #: ``_bias_column_``
    variance: float  #: the weights' prior variance, ``kernel_.variance``
    temperature: float  #: ``temperature_``
    jitter: float  #: the ``jitter`` parameter
    n_features: int  #: ``n_features_in_``


def fitted_weights(fitted, jitter):
    """The :class:`FittedWeights` of the fitted attributes ``fitted`` (a
    dict) and the ``jitter`` parameter."""
    return FittedWeights(
        fitted["coef_"], fitted["coef_var_"], fitted["_active_features_"],
        fitted["_bias_column_"], float(fitted["kernel_"].variance),
        fitted.get("temperature_", 1.0), jitter, fitted["n_features_in_"])


def check_features_form(kernel, posterior, n_components):
    """Refuse what the weight-space form cannot fit."""
    if not (kernel is None or isinstance(kernel, LinearKernel)):
        raise ValueError(
            "approximation='features' needs the linear kernel (kernel=None or "
            f"a LinearKernel), got {kernel!r}; use approximation="
            "'inducing' for other kernels."
        )
    if posterior != "mean_field" or n_components != 1:
        raise ValueError(
            "approximation='features' has one mean-field Gaussian posterior; "
            "posterior='coupled' and n_components > 1 need "
            "approximation='inducing'."
        )


def variance_learned(kernel, kernel_variance, optimize_hyperparameters):
    """Whether the ELBO learns the prior variance of the weights."""
    if kernel is not None:
        return optimize_hyperparameters in (True, "scale")
    return kernel_variance == "elbo"


def prior_variance(data, n_classes, *, kernel, kernel_variance, random_state, n_jobs):
    """The starting prior variance of the weights of the linear kernel, and
    its validation.

    ``kernel=None``: ``kernel_variance`` decides ("cv":
    :func:`~skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance`;
    "elbo": learned from 1.0; a number: fixed). A given kernel keeps its
    variance, learned with ``optimize_hyperparameters``.

    Returns
    -------
    variance : float
    validation : tuple or None
        With "cv", ``(seed, results)``: the seed of the folds (drawn from
        ``random_state``, which :func:`choose_temperature` validates on
        too) and the table of ``variance_cv_results_`` (None, with a
        UserWarning, when the data are too few to validate); else None.
    """
    if kernel is not None:
        return float(getattr(kernel, "variance", 1.0)), None
    if kernel_variance == "elbo":
        return _START_VARIANCE, None
    if kernel_variance != "cv":
        return float(kernel_variance), None
    seed = check_random_state(random_state).randint(SEED_MAX)
    try:
        variance, results = cv_prior_variance(data, n_classes, random_state=seed,
                                              n_jobs=n_jobs)
    except CannotValidate as exc:
        # the defaults fit any data the validators accept
        warnings.warn(f"{exc} Using kernel_variance={CV_FALLBACK_VARIANCE}.",
                      UserWarning, stacklevel=4)
        return CV_FALLBACK_VARIANCE, (seed, None)
    return variance, (seed, results)


def choose_temperature(data, n_classes, variance, temperature, validation, n_jobs,
                       span_labels=None):
    """``(variance, temperature, temperature_cv_results_)`` of a cold
    weight-space fit: the prior variance as given and ``temperature`` when
    a number; ``"auto"`` with the prior variance validated
    (``validation`` of :func:`prior_variance`) both chosen jointly by
    :func:`~skgpstruct._gpstruct.posterior_cv.cv_posterior` among the
    variances of ``variance_cv_results_["band"]``, no less accurate than the
    best posterior-mode CRF of that validation (``mode_error``), and with
    ``span_labels`` the decoder (``"decoder"`` of the results); else 1 (the
    Bayesian posterior)."""
    if temperature != "auto":
        return variance, float(temperature), None
    if validation is None or validation[1] is None:
        return variance, 1.0, None
    # the folds of cv_prior_variance, which validated: no CannotValidate
    seed, results = validation
    return cv_posterior(data, n_classes, results["variance"][results["band"]],
                        random_state=seed, n_jobs=n_jobs,
                        mode_error=float(np.min(results["error"])),
                        span_labels=span_labels)


def feature_design(X_flat, bias_column):
    """The token matrix the weights act on: the bias column appended when
    the kernel has one (``bias_column = sqrt(bias / variance)``)."""
    X = sp.csr_matrix(X_flat, dtype=np.float64)
    if bias_column > 0:
        ones = np.full((X.shape[0], 1), bias_column)
        X = sp.hstack([X, sp.csr_matrix(ones)], format="csr")
    return X


def _bias_column(kernel, variance):
    """``sqrt(bias / variance)`` of the kernel (0 without a kernel)."""
    bias = float(kernel.bias) if kernel is not None else 0.0
    if variance <= 0:
        raise ValueError("The LinearKernel's variance must be positive.")
    return float(np.sqrt(bias / variance))


def _start(X, n_classes, variance, tau2, previous):
    """Starting :class:`FeatureParams` over the active features of the
    design ``X``, and those features. A warm start (``previous``, the
    fitted attributes of a weight-space fit) continues from the fitted
    posterior, on its features together with those first active in ``X``
    (at the prior). ``variance`` and ``tau2`` are the cold posterior's
    prior variances."""
    V = n_classes
    seen = np.flatnonzero(np.diff(sp.csc_matrix(X).indptr))
    if previous is None:
        D = seen.size
        return FeatureParams(np.zeros((D, V)), np.ones((D, V)), np.zeros((V, V)),
                             np.full((V, V), tau2), variance, tau2), seen
    # the earlier fit's features, and those first active now, which start
    # at the prior (mean 0, variance 1 in units of the prior's)
    before = previous["_active_features_"]
    active = np.union1d(before, seen)
    new = ~np.isin(active, before)
    m = previous["coef_"].T[active] / np.sqrt(variance)
    s = previous["coef_var_"].T[active] / variance
    m[new], s[new] = 0.0, 1.0
    return FeatureParams(m, s, previous["transition_mean_"], previous["transition_var_"],
                         variance, tau2), active


def prepare_fit(data, lik, rng, previous, n_classes, *, kernel, kernel_variance,
                posterior, n_components, temperature, transition_prior_var,
                optimize_hyperparameters, jitter, n_samples, gradient, random_state,
                n_jobs, optimizer="lbfgs", span_labels=None, **_):
    """The :class:`~skgpstruct._gpstruct.fitting.FitProblem` of a
    weight-space fit: its prior variances (validated, learned or given) and
    temperature, the objective over the active features and its start (the
    fitted posterior ``previous``, a dict of fitted attributes, on a warm
    start). The prior variances in the objective are the cold posterior's,
    ``temperature`` times the model's. ``span_labels``: the span
    tags of the label codes when ``decode="auto"`` is to be chosen by the
    validation with the temperature (None: not span labels)."""
    check_features_form(kernel, posterior, n_components)
    rng.randint(SEED_MAX, size=2)  # the draws of the inducing form's init
    attributes, validation, start = {}, None, None
    if previous is None and kernel is None and kernel_variance == "cv" \
            and data.n_sequences >= SPLIT_MIN_SEQUENCES:
        # one held-out split (split_cv), which also gives the SVI's start
        seed = check_random_state(random_state).randint(SEED_MAX)
        with Parallel(n_jobs=n_jobs, prefer="threads") as parallel:
            variance, chosen, attributes["variance_cv_results_"], \
                attributes["temperature_cv_results_"], start = split_posterior(
                    data, n_classes, random_state=seed, parallel=parallel,
                    choose_temperature=temperature == "auto", span_labels=span_labels)
        temperature = chosen if temperature == "auto" else float(temperature)
    else:
        if previous is None:
            variance, validation = prior_variance(data, n_classes, kernel=kernel,
                                                  kernel_variance=kernel_variance,
                                                  random_state=random_state, n_jobs=n_jobs)
            if validation is not None:
                attributes["variance_cv_results_"] = validation[1]
        else:
            variance = float(previous["kernel_"].variance)
        if previous is not None and temperature == "auto":  # the fitted one
            temperature = float(previous.get("temperature_", 1.0))
        else:
            variance, temperature, attributes["temperature_cv_results_"] = \
                choose_temperature(data, n_classes, variance, temperature, validation,
                                   n_jobs, span_labels)
    learn = (variance_learned(kernel, kernel_variance, optimize_hyperparameters),
             transition_variance(transition_prior_var)[1])
    tau2, tau2_learned = transition_variance(transition_prior_var, variance)
    tau2 = temperature * tau2
    bias_column = (_bias_column(kernel, variance) if previous is None
                   else previous["_bias_column_"])
    X = feature_design(data.X_flat, bias_column)
    if previous is not None and (tau2_learned or transition_prior_var == "auto"):
        # "elbo" and "auto" continue from the earlier fit's tau^2 (as the
        # kernel's variance does); a given number is used as given
        tau2 = temperature * previous["transition_prior_var_"]
    params, active = _start(X, n_classes, temperature * variance, tau2, previous)
    # the fitted attributes read _start's parameters (their prior variance,
    # which a Laplace start shares) whichever start the optimiser takes
    def finish(objective):
        return partial(_fitted_attributes, objective, params, variance, temperature, learn,
                       transition_prior_var, bias_column, active, kernel, jitter,
                       attributes, data.X_flat.shape[1])

    if optimizer == "svi":
        objective = StochasticFeatureELBO(
            X[:, active], data.lengths, data.y_flat, n_classes, temperature=temperature,
            jitter=jitter, n_samples=n_samples, learn=learn)
        start_params = params if previous is not None else laplace_start(
            data, active, n_classes, variance, temperature, tau2, start, bias_column,
            n_jobs)
        return FitProblem(objective, objective.pack(start_params), None, None,
                          finish(objective))
    objective = WeightSpaceObjective(
        lik, X[:, active], data.lengths, data.y_flat, n_classes,
        learn_variance=learn[0], learn_transition_var=learn[1],
        jitter=jitter, n_samples=n_samples, gradient=gradient,
        temperature=temperature)
    x = objective.layout.pack(params)
    box = objective.bounds(x)
    return FitProblem(objective, x, box, box_projection(box), finish(objective))


def laplace_start(data, active, n_classes, variance, temperature, tau2, start, bias_column,
                  n_jobs):
    """The start of a cold SVI fit (whitened :class:`FeatureParams` over the
    ``active`` features): the Laplace stand-in of the cold posterior,
    ``N(c w, T diag(s))`` around the posterior-mode CRF ``w`` with the
    mean-field Laplace variances ``s`` of all training sequences
    (:func:`~skgpstruct._gpstruct.posterior_cv._laplace_variances`).
    The mode is fitted on ``data`` (no intercept; :data:`MODE_MAX_ITER`
    iterations, CRFsuite's rule with :data:`MODE_TOL`), from the CRF of
    ``start``, ``(crf, c)`` of the validation
    (:func:`~skgpstruct._gpstruct.split_cv.split_posterior`), when it has
    the same labels; ``start=None``: from zero, ``c = 1``. The labels the CRF lacks and
    the kernel's bias column start at the prior (``tau2``: the cold prior
    variance of the transitions)."""
    present = data.labels_present(n_classes)
    init, c = (None, 1.0) if start is None else start
    if init is not None and not np.array_equal(init.labels, np.flatnonzero(present)):
        init = None  # a sample without some label: start from zero
    spec = CRFSpec(present, c2=0.5 / variance, fit_intercept=False)
    with Parallel(n_jobs=n_jobs, prefer="threads") as parallel:
        crf = fit_crf(data, spec, init, max_iter=MODE_MAX_ITER, tol=MODE_TOL,
                      parallel=parallel, crfsuite_rule=True)
    start = (crf, c)
    crf, c = start
    s_w, s_b = _laplace_variances(crf, data, variance)
    coef, var_w = crf.coef, s_w
    if bias_column > 0:  # the kernel's bias column: at the prior
        coef = np.vstack([coef, np.zeros((1, coef.shape[1]))])
        var_w = np.vstack([var_w, np.full((1, coef.shape[1]), variance)])
    cols = crf.labels
    m = np.zeros((active.size, n_classes))
    s = np.ones((active.size, n_classes))
    m[:, cols] = c * coef[active] / np.sqrt(temperature * variance)
    s[:, cols] = np.where(var_w[active] > 0, var_w[active], variance) / variance
    m_bin = np.zeros((n_classes, n_classes))
    s_bin = np.full((n_classes, n_classes), tau2)
    m_bin[np.ix_(cols, cols)] = c * crf.transition
    s_bin[np.ix_(cols, cols)] = temperature * s_b
    return FeatureParams(m, s, m_bin, s_bin, temperature * variance, tau2)


def _fitted_attributes(objective, start, variance, temperature, learn, transition_prior_var,
                       bias_column, active, kernel, jitter, attributes, n_features, x):
    """The fitted attributes of the weight-space form at the optimum ``x``
    (``start``: the starting parameters, whose prior variance a fit that
    does not learn it keeps; ``attributes``: those set before the
    optimisation)."""
    fitted = objective.layout.unpack(x)
    # a fixed variance is kept as given, not as exp(log(.)) of it; the
    # model's prior variances are the cold posterior's / temperature
    sigma2 = fitted.variance / temperature if learn[0] else variance
    tau2 = (fitted.transition_var / temperature if learn[1]
            else transition_variance(transition_prior_var, variance)[0])
    if not learn[0]:
        fitted.variance = start.variance
    V = fitted.m_bin.shape[0]
    D = n_features + (1 if bias_column > 0 else 0)
    scale = fitted.variance
    coef = np.zeros((V, D))
    coef_var = np.zeros((V, D))
    coef[:, active] = np.sqrt(scale) * fitted.m.T
    coef_var[:, active] = scale * fitted.s.T
    kernel_ = clone(kernel) if kernel is not None else LinearKernel()
    return dict(
        attributes, temperature_=temperature, _bias_column_=bias_column,
        _active_features_=active, coef_=coef, coef_var_=coef_var, jitter_=float(jitter),
        kernel_=kernel_.set_params(variance=sigma2, bias=sigma2 * bias_column ** 2),
        transition_mean_=fitted.m_bin, transition_var_=fitted.s_bin,
        transition_prior_var_=tau2, weights_=np.ones(1), approximation_="features")


def feature_jitter(fitted):
    """The jitter of the potentials' covariances, scaled as in ``fit`` (by
    the cold posterior's prior variance)."""
    return fitted.jitter * fitted.temperature * fitted.variance


def sequence_moments(fitted, data, n_samples):
    """Posterior moments of the unary potentials of every sequence of
    ``data`` under the :class:`FittedWeights` ``fitted``; a long
    sequence's covariance stays factored (a
    :class:`~skgpstruct.gp._weight_space_long.WeightSpaceCovariance`,
    sampled in weight space with ``n_samples``)."""
    X = feature_design(data.X_flat, fitted.bias_column)
    return feature_moments(X, data.lengths, fitted.coef.T, fitted.coef_var.T,
                           1.0, feature_jitter(fitted), n_samples=n_samples)


def sequence_ell(data, fitted, likelihood, transition_mean, transition_var, n_samples,
                 seeds):
    """Expected log-likelihood of each sequence of ``data`` under the
    fitted posterior (``n_samples`` draws, seeded by ``seeds``, one per
    sequence)."""
    X = feature_design(data.X_flat, fitted.bias_column)
    V = transition_mean.shape[0]
    # long sequences sampled in weight space, as in predict_marginals
    blocks = _Blocks(X, data.offsets, n_samples)
    params = FeatureParams(fitted.coef.T, fitted.coef_var.T, transition_mean,
                           transition_var, 1.0, 1.0)
    noise = draw_normals(data.lengths, 1, V, n_samples, seeds, n_weights=blocks.n_weights)
    return _blocks_ell(likelihood, blocks, data.y_flat, params, noise,
                       feature_jitter(fitted), return_grad=False)


def posterior_kl(fitted, transition_mean, transition_var, transition_prior_var):
    """KL term of the fitted weight-space posterior."""
    sigma2 = fitted.variance
    # the features never active in training are not part of the model
    # (coef_var_ 0 there), as in the fitted objective
    active = fitted.active
    kl = feature_kl(fitted.coef[:, active] / np.sqrt(sigma2),
                    fitted.coef_var[:, active] / sigma2)
    return kl + transition_kl(transition_mean, transition_var, transition_prior_var)
