"""GPStructTagger's inducing-point form: its fit, and the kernel terms,
moments, expected log-likelihood and KL term of the fitted posterior.

Plain functions, as :mod:`skgpstruct._gpstruct.weight_space_form` for the
weight-space form: ``GPStructTagger.fit`` calls :func:`prepare_fit` with
the data and its parameters, and its predictions call the others with the
fitted arrays (a :class:`FittedInducing`); the maths is in
:mod:`skgpstruct.gp` (:class:`~skgpstruct.gp.elbo.ELBOObjective`).
"""

from functools import partial
from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.gaussian_process.kernels import ConstantKernel

from .._input.sequences import SequenceData
from .._utils.parallel import small_blas
from .._utils.seeds import SEED_MAX
from .fitting import FitProblem, transition_variance
from .weight_space_form import prior_variance
from ..gp._sparse_support import _check_sparse_support
from ..gp.elbo import ELBOObjective
from ..gp.ell import expected_log_likelihood
from ..gp.inducing import init_inducing_points
from ..gp.kernels import LinearKernel
from ..gp.kl import mixture_kl, transition_kl
from ..gp.sampling import draw_normals
from ..gp.terms import (compute_gp_terms, inducing_cholesky, sequence_marginals,
                        split_kernel_scale, stable_jitter)
from ..gp.variational import (VariationalLayout, VariationalParams,
                              init_variational_params, mean_field_to_coupled)

__all__ = ["FittedInducing", "alone_sequence", "elbo_objective", "fitted_inducing",
           "fixed_kernel", "hyper_mode", "initial_posterior", "kernel_terms",
           "posterior_kl", "prepare_fit", "sequence_ell", "sequence_moments",
           "variational_params"]

_SCALE_BOUNDS = (1e-5, 1e5)  # of the learned ConstantKernel factor ("scale")


class FittedInducing(NamedTuple):
    """A fitted inducing-point posterior, as the predictions read it."""

    #: The kernel whose GP terms are computed, and the factor they are
    #: scaled by (:func:`fixed_kernel` of ``kernel_``).
    kernel: object
    factor: float
    inducing_points: object  #: ``inducing_points_``
    jitter: float  #: ``jitter_``
    Lzz: np.ndarray  #: the Cholesky factor of ``K_ZZ`` (``_Lzz``)
    q_mu: np.ndarray  #: ``q_mu_``
    q_sqrt: np.ndarray  #: ``q_sqrt_``


def hyper_mode(kernel, kernel_variance, optimize_hyperparameters):
    """"all", "scale" or "none" from ``optimize_hyperparameters`` (the
    inducing-point form; ``kernel_variance="elbo"`` learns the scale)."""
    if kernel is None and kernel_variance == "elbo":
        return "scale"
    if isinstance(optimize_hyperparameters, str):
        return "scale"
    return "all" if optimize_hyperparameters else "none"


def fixed_kernel(kernel_, mode):
    """``(base, factor)``: the kernel whose GP terms are computed and the
    factor they are scaled by (``ConstantKernel(factor) * base``, learned
    with ``mode="scale"``; else factor 1)."""
    if mode == "scale":
        return split_kernel_scale(kernel_)
    return kernel_, 1.0


def fitted_inducing(fitted, mode):
    """The :class:`FittedInducing` of the fitted attributes ``fitted`` (a
    dict), its kernel split by :func:`fixed_kernel` as ``mode`` says."""
    return FittedInducing(*fixed_kernel(fitted["kernel_"], mode),
                          fitted["inducing_points_"], fitted["jitter_"], fitted["_Lzz"],
                          fitted["q_mu_"], fitted["q_sqrt_"])


def variational_params(fitted):
    """The :class:`VariationalParams` of the fitted attributes ``fitted``
    (a dict: ``q_mu_``, ``q_sqrt_``, ``weights_``, ``transition_mean_``,
    ``transition_var_``)."""
    return VariationalParams(
        q_mu=fitted["q_mu_"], q_sqrt=fitted["q_sqrt_"], weights=fitted["weights_"],
        m_bin=fitted["transition_mean_"], s_bin=fitted["transition_var_"],
    )


def initial_posterior(data, kernel_, n_classes, seeds, previous=None, *, n_inducing,
                      inducing, n_components, posterior, jitter, **_):
    """``(params, Z)``: the starting :class:`VariationalParams` and the
    inducing points. A warm start (``previous``, the fitted attributes of
    an inducing-point fit) continues from the fitted ones; else inducing
    points and label-fraction means from the training data (``seeds``:
    those of the inducing points and of the initial means)."""
    coupled = posterior == "coupled"
    if previous is not None:
        params = variational_params(previous)
        if coupled and params.q_sqrt.ndim == 4:  # from a mean-field fit
            params.q_sqrt = mean_field_to_coupled(params.q_sqrt)
        return params, previous["inducing_points_"]
    seed_inducing, seed_init = seeds
    Z, fractions = init_inducing_points(
        data.X_flat, data.y_flat, n_inducing, n_classes, method=inducing,
        random_state=seed_inducing,
    )
    Lzz = inducing_cholesky(kernel_, Z, jitter)
    params = init_variational_params(
        fractions, n_components, whiten=True, kzz_cholesky=Lzz,
        coupled=coupled, random_state=seed_init,
    )
    return params, Z


def elbo_objective(lik, data, params, kernel_, Z, warm, *, kernel, kernel_variance,
                   optimize_hyperparameters, posterior, n_components, jitter,
                   transition_prior_var, n_samples, gradient, **_):
    """``(objective, kernel_, jitter_)``: the
    :class:`~skgpstruct.gp.elbo.ELBOObjective` that ``fit`` minimises from
    ``params``, the kernel it fits and the jitter of its covariances. With
    ``optimize_hyperparameters="scale"``, ``kernel_`` becomes
    ``ConstantKernel(1.0) * kernel_`` on a cold start (and on a warm one
    from a fit that learned no scale): the factor is learned."""
    mode = hyper_mode(kernel, kernel_variance, optimize_hyperparameters)
    if mode == "scale" and (
        not warm or split_kernel_scale(kernel_)[0] is kernel_
    ):
        kernel_ = ConstantKernel(1.0, constant_value_bounds=_SCALE_BOUNDS) * kernel_
    K, V, M = params.q_mu.shape
    n_hyper = {"none": 0, "all": kernel_.n_dims, "scale": 1}[mode]
    layout = VariationalLayout(K, V, M, coupled=posterior == "coupled",
                               learn_weights=n_components > 1,
                               n_hyperparameters=n_hyper)
    base = split_kernel_scale(kernel_)[0] if mode == "scale" else kernel_
    # the smallest jitter (from ``jitter`` up) with which every covariance
    # of the training sequences factorises; kept for prediction
    jitter_, terms = stable_jitter(base, data.X_flat, data.lengths, Z, jitter)
    objective = ELBOObjective(
        lik, kernel_, Z, data.X_flat, data.lengths,
        data.y_flat, layout, hyperparameters=mode, jitter=jitter_,
        terms=None if mode == "all" else terms,
        transition_prior_var=transition_variance(transition_prior_var)[0],
        n_samples=n_samples, gradient=gradient,
    )
    return objective, kernel_, jitter_


def prepare_fit(data, lik, rng, previous, n_classes, *, kernel, kernel_variance,
                temperature, random_state, n_jobs, **params):
    """The :class:`~skgpstruct._gpstruct.fitting.FitProblem` of an
    inducing-point fit: ``kernel_``, inducing points and starting posterior
    (the fitted ones ``previous``, a dict of fitted attributes, on a warm
    start), and the objective."""
    if params.get("optimizer") == "svi":
        raise ValueError(
            "optimizer='svi' is the weight-space form's (the linear kernel, "
            "approximation='features'); the inducing-point form trains with "
            "optimizer='lbfgs', 'adam', 'sgd' or 'saga'."
        )
    if temperature not in ("auto", 1, 1.0):
        raise ValueError(
            f"temperature={temperature!r} needs the weight-space form "
            "(approximation='features'); the inducing-point form fits the "
            "Bayesian posterior (temperature 1)."
        )
    kernel_ = previous["kernel_"] if previous is not None else kernel
    if kernel_ is not None:
        _check_sparse_support(kernel_, data.X_flat)
    # Drawn whether or not they are used, so that a warm start sees the
    # same samples as a cold one.
    seeds = rng.randint(SEED_MAX, size=2)
    attributes = {"temperature_": 1.0}
    if previous is None and kernel is None:
        variance, validation = prior_variance(data, n_classes, kernel=kernel,
                                              kernel_variance=kernel_variance,
                                              random_state=random_state, n_jobs=n_jobs)
        if validation is not None:
            attributes["variance_cv_results_"] = validation[1]
        kernel_ = LinearKernel(variance=variance)
    elif previous is None:  # a given kernel is not validated
        kernel_ = clone(kernel)
    start, Z = initial_posterior(data, kernel_, n_classes, seeds, previous=previous,
                                 **params)
    objective, kernel_, jitter_ = elbo_objective(
        lik, data, start, kernel_, Z, previous is not None, kernel=kernel,
        kernel_variance=kernel_variance, **params)
    x = objective.layout.pack(start, objective.initial_hyperparameters())
    attributes.update(kernel_=kernel_, inducing_points_=Z, jitter_=jitter_)
    mode = hyper_mode(kernel, kernel_variance, params["optimize_hyperparameters"])
    finish = partial(_fitted_attributes, objective, attributes, mode,
                     params["transition_prior_var"])
    return FitProblem(objective, x, objective.bounds(), None, finish)


def _fitted_attributes(objective, attributes, mode, transition_prior_var, x):
    """The fitted attributes of the inducing-point form at the optimum
    ``x`` (``attributes``: those set before the optimisation)."""
    params, kernel_ = objective.unpack(x)
    base = fixed_kernel(kernel_, mode)[0]
    return dict(
        attributes, kernel_=kernel_, approximation_="inducing",
        transition_prior_var_=transition_variance(transition_prior_var)[0],
        q_mu_=params.q_mu, q_sqrt_=params.q_sqrt, weights_=params.weights,
        transition_mean_=params.m_bin, transition_var_=params.s_bin,
        _Lzz=inducing_cholesky(base, attributes["inducing_points_"],
                               attributes["jitter_"]))


def kernel_terms(fitted, data):
    """Kernel quantities of ``data`` under the fitted kernel (that of the
    base kernel scaled by the learned factor, with "scale")."""
    _check_sparse_support(fitted.kernel, data.X_flat)
    terms = compute_gp_terms(
        fitted.kernel, data.X_flat, data.lengths, fitted.inducing_points,
        jitter=fitted.jitter, Lzz=fitted.Lzz,
    )
    return terms.scaled(fitted.factor)


def alone_sequence(data, n):
    """Sequence ``n`` of ``data`` on its own, dense if it came dense in a
    batch that mixed dense and sparse sequences (stacked as CSR): the
    representation it has in a batch of its own."""
    sub = data.subset([n])
    if sub.dense_rows is not None:
        sub = SequenceData(sub.X_flat.toarray(), sub.lengths)
    return sub


def sequence_moments(fitted, data, n_jobs):
    """Posterior moments of the unary potentials of every sequence of
    ``data`` under the :class:`FittedInducing` ``fitted``, one sequence at a
    time (in ``n_jobs`` threads): the batched kernel products, triangular
    solves and length buckets round a sequence's moments differently with
    the rest of the batch (up to 1e-12 in the path probabilities), and a
    sequence must get the same numbers whatever else is in its batch."""

    def alone(n):
        return sequence_marginals(kernel_terms(fitted, alone_sequence(data, n)),
                                  fitted.q_mu, fitted.q_sqrt)

    # small products: single-threaded BLAS, in n_jobs threads (the same
    # numbers whatever n_jobs and the machine's BLAS threads are)
    with small_blas(), Parallel(n_jobs=n_jobs, prefer="threads") as parallel:
        parts = parallel(delayed(alone)(n) for n in range(data.n_sequences))
    b = np.concatenate([b_n for b_n, _ in parts], axis=1)
    return b, [S for _, Sigma_n in parts for S in Sigma_n]


def sequence_ell(data, fitted, likelihood, weights, transition_mean, transition_var,
                 n_samples, seeds):
    """Expected log-likelihood of each sequence of ``data`` under the
    fitted posterior (``n_samples`` draws per component, seeded by
    ``seeds``, one per sequence)."""
    eps, eps_bin = draw_normals(
        data.lengths, fitted.q_mu.shape[0], transition_mean.shape[0], n_samples, seeds,
    )
    params = VariationalParams(q_mu=fitted.q_mu, q_sqrt=fitted.q_sqrt, weights=weights,
                               m_bin=transition_mean, s_bin=transition_var)
    return expected_log_likelihood(
        likelihood, kernel_terms(fitted, data), data.y_flat, params, eps, eps_bin,
        return_grad=False,
    )


def posterior_kl(fitted, weights, transition_mean, transition_var, transition_prior_var):
    """KL term of the fitted inducing-point posterior."""
    return mixture_kl(fitted.q_mu, fitted.q_sqrt, weights) + transition_kl(
        transition_mean, transition_var, transition_prior_var)
