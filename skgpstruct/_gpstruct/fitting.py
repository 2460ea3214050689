"""What GPStructTagger's fit shares between its two posterior forms.

The checks of the parameter combinations ``fit`` cannot run, the form and
the transition prior the parameters resolve to, and the optimiser loop
that runs on the objective a form prepares
(:func:`~skgpstruct._gpstruct.weight_space_form.prepare_fit`,
:func:`~skgpstruct._gpstruct.inducing_form.prepare_fit`): plain functions
of the estimator's parameters (``GPStructTagger.get_params()``, passed as
keywords; each takes those it names).
"""

from numbers import Integral, Real
from typing import Callable, NamedTuple

import numpy as np
from sklearn.base import clone
from sklearn.gaussian_process.kernels import Kernel
from sklearn.utils._param_validation import Interval, StrOptions

from .._tagging.base import box_projection, fit_epochs, fit_lbfgs, minibatches
from .._utils.memory import check_fit_memory
from .._utils.seeds import SEED_MAX
from ..gp.kernels import LinearKernel
from ..likelihoods import Likelihood, RandomizedCRFLikelihood, get_likelihood
from ..optim import make_optimizer

__all__ = ["LBFGS_MAX_WORK", "LBFGS_SAMPLES", "PARAMETER_CONSTRAINTS", "FitProblem",
           "check_memory", "check_params", "fit_stochastic", "optimize",
           "resolve_approximation", "resolve_fit_params", "stale_attributes",
           "transition_variance", "warm_start_compatible"]

#: ``n_samples="auto"`` of L-BFGS and of the dense stochastic optimisers.
LBFGS_SAMPLES = 100
#: ``optimizer="auto"`` runs L-BFGS on the fixed-sample ELBO while one of its
#: evaluations, ``n_samples`` forward-backward passes of every training
#: sequence, costs at most this many ``n_samples * n_tokens * V^2``
#: multiply-adds of its chains (a few tenths of a second: a few hundred
#: evaluations then take a minute or two), and stochastic variational
#: inference (``"svi"``, whose epoch costs about one pass) above. The
#: GPstruct papers' tasks are all below it (chunking, the largest: 6e7),
#: CoNLL-2000 from 100 sentences on and CoNLL-2002 from 500 above it.
LBFGS_MAX_WORK = 1e8
#: ``learning_rate="auto"`` of the dense stochastic optimisers.
_DENSE_LEARNING_RATE = 0.01


#: sklearn's validation of GPStructTagger's own parameters (those of every
#: tagger are SequenceTaggerMixin's).
PARAMETER_CONSTRAINTS = {
    "kernel": [Kernel, None],
    "n_inducing": [Interval(Integral, 1, None, closed="left")],
    "inducing": [StrOptions({"kmeans", "random"})],
    "n_components": [Interval(Integral, 1, None, closed="left")],
    "posterior": [StrOptions({"mean_field", "coupled"})],
    "likelihood": [StrOptions({"crf", "pseudo", "randomized"}), Likelihood],
    "gradient": [StrOptions({"pathwise", "score"})],
    "n_samples": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "n_predict_samples": [Interval(Integral, 1, None, closed="left")],
    "optimizer": [StrOptions({"auto", "lbfgs", "svi", "adam", "sgd", "saga"})],
    "learning_rate": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
    "batch_size": [Interval(Integral, 1, None, closed="left"), None],
    "optimize_hyperparameters": ["boolean", StrOptions({"scale"})],
    "kernel_variance": [Interval(Real, 0, None, closed="neither"),
                        StrOptions({"cv", "elbo"})],
    "approximation": [StrOptions({"auto", "features", "inducing"})],
    "decode": [StrOptions({"auto", "marginal", "viterbi"})],
    "jitter": [Interval(Real, 0, None, closed="left")],
    "transition_prior_var": [Interval(Real, 0, None, closed="neither"),
                             StrOptions({"auto", "elbo"})],
    "temperature": [Interval(Real, 0, 1, closed="right"), StrOptions({"auto"})],
}


#: Fitted attributes of one posterior form only (dropped by a fit in the other).
_FEATURES_ONLY = ("coef_", "coef_var_", "temperature_cv_results_", "_active_features_",
                  "_bias_column_")
_INDUCING_ONLY = ("q_mu_", "q_sqrt_", "inducing_points_", "_Lzz")


class FitProblem(NamedTuple):
    """What a form's ``prepare_fit`` hands the optimiser."""

    #: The objective (an :class:`~skgpstruct.gp.elbo.ELBOObjective` or a
    #: :class:`~skgpstruct.gp.weight_space.WeightSpaceObjective`).
    objective: object
    #: The packed starting point.
    x: np.ndarray
    #: The L-BFGS box.
    bounds: object
    #: ``(start, low, high)`` of the stochastic steps' projection, or None
    #: for :func:`box_projection` of ``objective.bounds()``.
    project: object
    #: ``finish(x)``: the fitted attributes (a dict) at the optimum ``x``.
    finish: Callable


def resolve_approximation(*, approximation, kernel, posterior, n_components, **_):
    """``"features"`` or ``"inducing"``, resolved from ``approximation``."""
    if approximation != "auto":
        return approximation
    linear = kernel is None or isinstance(kernel, LinearKernel)
    simple = posterior == "mean_field" and n_components == 1
    return "features" if linear and simple else "inducing"


def resolve_fit_params(params, data, n_classes):
    """``params`` (``GPStructTagger.get_params()``) with ``optimizer``,
    ``n_samples`` and ``learning_rate`` resolved from ``"auto"`` for a fit
    on ``data``: the optimizer by :data:`LBFGS_MAX_WORK` (SVI only for the
    weight-space form with the exact CRF likelihood on the CPU and a
    pathwise gradient; the score-function gradient and the subsampled
    randomized likelihood need a stochastic optimiser, Adam), then the
    optimizer's own ``n_samples`` and ``learning_rate``."""
    from .svi import SVI_LEARNING_RATE, SVI_SAMPLES

    params = dict(params)
    optimizer = params["optimizer"]
    if optimizer == "auto":
        lik = get_likelihood(params["likelihood"])
        form = resolve_approximation(**params)
        samples = LBFGS_SAMPLES if params["n_samples"] == "auto" else params["n_samples"]
        work = samples * data.n_tokens * n_classes ** 2
        if params["gradient"] == "score" or (
                isinstance(lik, RandomizedCRFLikelihood)
                and lik.n_top + lik.n_sampled < n_classes):
            optimizer = "adam"
        elif (form == "features" and type(lik).__name__ == "CRFLikelihood"
              and params["device"] == "cpu" and work > LBFGS_MAX_WORK):
            optimizer = "svi"
        else:
            optimizer = "lbfgs"
    svi = optimizer == "svi"
    if params["n_samples"] == "auto":
        params["n_samples"] = SVI_SAMPLES if svi else LBFGS_SAMPLES
    if params["learning_rate"] == "auto":
        params["learning_rate"] = SVI_LEARNING_RATE if svi else _DENSE_LEARNING_RATE
    params["optimizer"] = optimizer
    return params


def check_memory(data, form, n_classes, *, posterior, n_components, n_inducing, n_samples,
                 **_):
    """Refuse, before allocating, a fit in ``form`` on ``data`` that would
    exceed the memory budget
    (:func:`~skgpstruct._utils.memory.check_fit_memory`)."""
    check_fit_memory(
        approximation=form, posterior=posterior, n_components=n_components,
        n_classes=n_classes, n_inducing=min(n_inducing, data.X_flat.shape[0]),
        max_length=int(data.lengths.max()), n_samples=n_samples)


def stale_attributes(form, warm):
    """The attributes a fit in ``form`` drops: a cold fit keeps the table of
    its own validation only, and a refit in the other form leaves no
    attribute of the last fit's form behind."""
    dropped = _INDUCING_ONLY if form == "features" else _FEATURES_ONLY
    return dropped + (() if warm else ("variance_cv_results_",))


def warm_start_compatible(fitted, *, posterior, n_components, **params):
    """Whether a warm start with the parameters ``params`` can continue from
    the fitted attributes ``fitted`` (a dict): the same form (of
    :func:`resolve_approximation`) and number of components; a mean-field fit continues into a coupled one
    (converted exactly,
    :func:`~skgpstruct._gpstruct.inducing_form.initial_posterior`), a
    coupled fit into a mean-field one only by a cold start (its cross-label
    covariances have no mean-field counterpart)."""
    form = resolve_approximation(posterior=posterior, n_components=n_components, **params)
    if fitted["approximation_"] != form:
        return False
    if form == "features":
        return True
    if posterior == "mean_field" and np.ndim(fitted["q_sqrt_"]) == 3:
        return False
    return fitted["q_mu_"].shape[0] == n_components


def transition_variance(transition_prior_var, variance=None):
    """``(tau^2, learned)`` from ``transition_prior_var``; ``"auto"`` is
    the weights' prior variance ``variance`` (weight-space form), or 1.0
    (the papers' value; the inducing-point form, ``variance=None``)."""
    if transition_prior_var == "elbo":
        return 1.0, True
    if transition_prior_var == "auto":
        return (1.0 if variance is None else float(variance)), False
    return float(transition_prior_var), False


def check_params(n_classes, device_, *, likelihood, optimizer, gradient, kernel,
                 optimize_hyperparameters, kernel_variance, **_):
    """The likelihood ``fit`` uses (on ``device_``, the resolved
    ``device``), after the checks of the parameter combinations it cannot
    run."""
    lik = get_likelihood(likelihood)
    if "device" in lik.get_params():  # likelihoods that run chain DPs
        lik = clone(lik).set_params(device=device_)
    if (isinstance(lik, RandomizedCRFLikelihood)
            and lik.n_top + lik.n_sampled < n_classes
            and max(lik.n_top, 1) + lik.n_sampled < 2):
        raise ValueError(
            f"RandomizedCRFLikelihood(n_top={lik.n_top}, n_sampled={lik.n_sampled}) "
            "keeps one state per position, the gold label, so the likelihood "
            "is identically 1 and nothing is learned; use n_top >= 2 or "
            "n_sampled >= 1."
        )
    if (
        isinstance(lik, RandomizedCRFLikelihood)
        and lik.n_top + lik.n_sampled < n_classes
        and optimizer == "lbfgs"
    ):
        raise ValueError(
            "optimizer='lbfgs' needs a smooth objective, but the randomized "
            "likelihood draws a new sub-lattice whenever the potentials "
            "change; use optimizer='adam', 'sgd' or 'saga'."
        )
    if gradient == "score" and optimizer == "lbfgs":
        raise ValueError(
            "gradient='score' needs a stochastic optimizer: the score-function "
            "estimate is not the gradient of the fixed-sample objective that "
            "L-BFGS minimises, so its line search would run on an inconsistent "
            "gradient; use optimizer='adam', 'sgd' or 'saga', or "
            "gradient='pathwise'."
        )
    if (kernel is None and optimize_hyperparameters in (True, "scale")
            and kernel_variance != "elbo"):
        raise ValueError(
            "optimize_hyperparameters learns a given kernel's hyperparameters; "
            "with kernel=None the prior variance follows kernel_variance="
            f"{kernel_variance!r}. Use kernel_variance='elbo' to learn it, "
            "or pass kernel=LinearKernel(variance=...)."
        )
    if optimizer == "svi" and (type(lik).__name__ != "CRFLikelihood" or gradient != "pathwise"
                               or device_ != "cpu"):
        raise ValueError(
            "optimizer='svi' samples the CRF's weights and runs its exact "
            "forward-backward on the CPU with pathwise gradients: it needs "
            "likelihood='crf', gradient='pathwise' and device='cpu'; use "
            "optimizer='adam' otherwise."
        )
    if gradient == "pathwise" and not lik.has_gradient:
        raise ValueError(
            f"{type(lik).__name__} gives no gradient: use gradient='score'."
        )
    return lik


def optimize(problem, n, rng, monitor, parallel, *, optimizer, learning_rate, batch_size,
             **_):
    """Run ``optimizer`` on ``problem.objective`` from ``problem.x`` (L-BFGS
    within ``problem.bounds`` on fixed samples, or the stochastic epochs of
    :func:`fit_stochastic`) over the ``n`` training sequences, reporting to
    ``monitor`` (a :class:`~skgpstruct._tagging.base.ConvergenceMonitor`),
    the chunks of sequences run in ``parallel`` (a joblib ``Parallel``).

    Returns
    -------
    x : ndarray
        The optimum.
    elbo_history : list of float
        The ELBO after every iteration / epoch.
    n_iter : int
        Iterations / epochs run.
    """
    objective, x = problem.objective, problem.x
    # on the GPU the chunks run one after another in this thread: kernels
    # launched from n_jobs threads at once would share the device (numba's
    # simulator refuses them), and the chunked sum is the same either way
    on_gpu = getattr(getattr(objective, "likelihood", None), "device", "cpu") == "cuda"
    with parallel:
        parallel = None if on_gpu else parallel
        if optimizer == "svi":
            from .svi import fit_svi

            x = fit_svi(objective, x, rng, monitor, parallel, learning_rate=learning_rate,
                        batch_size=batch_size)
        elif optimizer == "lbfgs":
            seeds, all_idx = rng.randint(SEED_MAX, size=n), np.arange(n)
            x = fit_lbfgs(lambda z: objective(z, all_idx, seeds, 1.0, parallel),
                          x, monitor, bounds=problem.bounds)
        else:
            x = fit_stochastic(objective, x, n, rng, parallel, monitor, problem.project,
                               optimizer=optimizer, learning_rate=learning_rate,
                               batch_size=batch_size)
    return x, [-value for value in monitor.history], monitor.iter


def fit_stochastic(objective, x, n, rng, parallel, monitor, project=None, *, optimizer,
                   learning_rate, batch_size):
    """Epochs of minibatch steps with fresh samples every step; the
    parameters are projected onto the L-BFGS box after every step
    (``project``: ``(start, low, high)`` of ``fit_epochs``, by default
    :func:`box_projection` of ``objective.bounds()``)."""
    _, n_batches = minibatches(n, batch_size)
    saga = optimizer == "saga"
    opt = make_optimizer(optimizer, learning_rate, n_blocks=n_batches)

    def step(z, idx, seeds):
        value, grad = objective(z, idx, seeds, n / len(idx), parallel)
        # Gradients per training sequence, so that learning_rate means
        # the same whatever the data size: the minibatch objective
        # estimates the full one, and SAGA's blocks are the n_batches
        # terms of its finite sum. Divided here, stepped with scale 1
        # (g / n and (1 / n) * g round differently).
        grad = grad / (n_batches * n) if saga else grad / n
        return value / n_batches, grad, 1.0

    if project is None:
        project = box_projection(objective.bounds())
    return fit_epochs(step, x, opt, monitor, n_sequences=n,
                      batch_size=batch_size, rng=rng, project=project,
                      desc="GPStructTagger")
