"""GPStructTagger's weight-space (inducing-feature) form: fit and moments.

A mixin of :class:`~skgpstruct.GPStructTagger`, kept apart so that the
estimator module stays about the inducing-point form and the shared API; the
maths is in :mod:`skgpstruct.gp.weight_space`.
"""

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils import check_random_state

from .._tagging.base import box_projection
from .posterior_cv import cv_posterior
from .prior_variance_cv import CannotValidate, cv_prior_variance
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
from ..likelihoods import get_likelihood

_SEED_MAX = np.iinfo(np.int32).max
#: Starting prior variance of the weights when it is learned and no kernel
#: is given: the standard normal prior, before the data say otherwise.
_START_VARIANCE = 1.0
#: Prior variance of ``kernel_variance="cv"`` when there is too little data
#: to validate (one sequence, or no fold with two labels): the unit
#: (standard normal) prior, with a UserWarning.
CV_FALLBACK_VARIANCE = 1.0


class FeatureFormMixin:
    """Fit and predictive moments of the weight-space form."""

    def _approximation(self):
        """``"features"`` or ``"inducing"``, resolved from ``approximation``."""
        if self.approximation != "auto":
            return self.approximation
        linear = self.kernel is None or isinstance(self.kernel, LinearKernel)
        simple = self.posterior == "mean_field" and self.n_components == 1
        return "features" if linear and simple else "inducing"

    def _check_features_form(self):
        if not (self.kernel is None or isinstance(self.kernel, LinearKernel)):
            raise ValueError(
                "approximation='features' needs the linear kernel (kernel=None or "
                f"a LinearKernel), got {self.kernel!r}; use approximation="
                "'inducing' for other kernels."
            )
        if self.posterior != "mean_field" or self.n_components != 1:
            raise ValueError(
                "approximation='features' has one mean-field Gaussian posterior; "
                "posterior='coupled' and n_components > 1 need "
                "approximation='inducing'."
            )

    def _variance_learned(self):
        """Whether the ELBO learns the prior variance of the weights."""
        if self.kernel is not None:
            return self.optimize_hyperparameters in (True, "scale")
        return self.kernel_variance == "elbo"

    def _prior_variance(self, data):
        """The starting prior variance of the weights of the linear kernel.

        ``kernel=None``: ``kernel_variance`` decides ("cv":
        :func:`~skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance`, sets
        ``variance_cv_results_``; "elbo": learned from 1.0; a number: fixed).
        A given kernel keeps its variance, learned with
        ``optimize_hyperparameters``.
        """
        # the table of this fit's validation only (a cold fit: none before)
        self.__dict__.pop("variance_cv_results_", None)
        if self.kernel is not None:
            return float(getattr(self.kernel, "variance", 1.0))
        if self.kernel_variance == "elbo":
            return _START_VARIANCE
        if self.kernel_variance == "cv":
            # kept for cv_temperature, which validates on the same folds
            self._cv_seed = check_random_state(self.random_state).randint(_SEED_MAX)
            try:
                variance, self.variance_cv_results_ = cv_prior_variance(
                    data, len(self.classes_), random_state=self._cv_seed,
                    n_jobs=self.n_jobs)
            except CannotValidate as exc:
                # the defaults fit any data the validators accept
                warnings.warn(f"{exc} Using kernel_variance={CV_FALLBACK_VARIANCE}.",
                              UserWarning, stacklevel=4)
                self.variance_cv_results_ = None
                return CV_FALLBACK_VARIANCE
            return variance
        return float(self.kernel_variance)

    def _transition_variance(self, variance=None):
        """``(tau^2, learned)`` from ``transition_prior_var``; ``"auto"`` is
        the weights' prior variance ``variance`` (weight-space form), or 1.0
        (the papers' value; the inducing-point form, ``variance=None``)."""
        if self.transition_prior_var == "elbo":
            return 1.0, True
        if self.transition_prior_var == "auto":
            return (1.0 if variance is None else float(variance)), False
        return float(self.transition_prior_var), False

    def _temperature(self, data, variance, warm):
        """``(variance, temperature)`` of the weight-space fit: the prior
        variance as given and ``temperature`` when a number; ``"auto"``: the
        fitted one on a warm start; with the prior variance validated too
        (``kernel=None, kernel_variance="cv"``) both chosen jointly by
        :func:`~skgpstruct._gpstruct.posterior_cv.cv_posterior` among the variances of
        ``variance_cv_results_["band"]`` (sets
        ``temperature_cv_results_``); else 1 (the Bayesian posterior)."""
        if warm and self.temperature == "auto":
            return variance, float(getattr(self, "temperature_", 1.0))
        self.temperature_cv_results_ = None
        if self.temperature != "auto":
            return variance, float(self.temperature)
        results = getattr(self, "variance_cv_results_", None)
        if self.kernel is not None or self.kernel_variance != "cv" or results is None:
            return variance, 1.0
        # the folds of cv_prior_variance, which validated: no CannotValidate
        variance, temperature, self.temperature_cv_results_ = cv_posterior(
            data, len(self.classes_), results["variance"][results["band"]],
            random_state=self._cv_seed, n_jobs=self.n_jobs)
        return variance, temperature

    def _feature_design(self, X_flat):
        """The token matrix the weights act on: the bias column appended when
        the kernel has one (``sqrt(bias / variance)``)."""
        X = sp.csr_matrix(X_flat, dtype=np.float64)
        if self._bias_column_ > 0:
            ones = np.full((X.shape[0], 1), self._bias_column_)
            X = sp.hstack([X, sp.csr_matrix(ones)], format="csr")
        return X

    def _init_features(self, data, warm, variance, temperature=1.0):
        """Starting :class:`FeatureParams` over the active features, and the
        design matrix restricted to them. A warm start (only ever from a
        weight-space fit: ``_warm_start_compatible``) continues from the
        fitted posterior, on the bias column of that fit and on its features
        together with those first active in ``data`` (at the prior). The
        prior variances in the parameters are the cold posterior's,
        ``temperature`` times the model's."""
        V = len(self.classes_)
        tau2, tau2_learned = self._transition_variance(variance)
        tau2 = temperature * tau2
        if not warm:
            bias = float(self.kernel.bias) if self.kernel is not None else 0.0
            if variance <= 0:
                raise ValueError("The LinearKernel's variance must be positive.")
            self._bias_column_ = float(np.sqrt(bias / variance))
        X = self._feature_design(data.X_flat)
        variance = temperature * variance
        seen = np.flatnonzero(np.diff(sp.csc_matrix(X).indptr))
        if warm:
            # the earlier fit's features, and those first active now, which
            # start at the prior (mean 0, variance 1 in units of the prior's)
            active = np.union1d(self._active_features_, seen)
            new = ~np.isin(active, self._active_features_)
            m = self.coef_.T[active] / np.sqrt(variance)
            s = self.coef_var_.T[active] / variance
            m[new], s[new] = 0.0, 1.0
            self._active_features_ = active
            # "elbo" and "auto" continue from the earlier fit's tau^2 (as the
            # kernel's variance does); a given number is used as given
            keep = tau2_learned or self.transition_prior_var == "auto"
            params = FeatureParams(
                m, s, self.transition_mean_, self.transition_var_, variance,
                temperature * self.transition_prior_var_ if keep else tau2)
        else:
            active = seen
            self._active_features_ = active
            D = active.size
            params = FeatureParams(
                np.zeros((D, V)), np.ones((D, V)), np.zeros((V, V)),
                np.full((V, V), tau2), variance, tau2)
        return params, X[:, active]

    def _fit_features(self, data, warm, lik, rng):
        """Fit the weight-space posterior and its prior variances."""
        self._check_features_form()
        rng.randint(_SEED_MAX, size=2)  # the draws of the inducing form's init
        variance = float(self.kernel_.variance) if warm else self._prior_variance(data)
        variance, temperature = self._temperature(data, variance, warm)
        learn = (self._variance_learned(), self._transition_variance()[1])
        params, X = self._init_features(data, warm, variance, temperature)
        objective = WeightSpaceObjective(
            lik, X, data.lengths, data.y_flat, len(self.classes_),
            learn_variance=learn[0], learn_transition_var=learn[1],
            jitter=self.jitter, n_samples=self.n_samples, gradient=self.gradient,
            temperature=temperature)
        x = objective.layout.pack(params)
        box = objective.bounds(x)
        x = self._optimize(objective, x, data.n_sequences, rng, box,
                           project=box_projection(box))
        fitted = objective.layout.unpack(x)
        # a fixed variance is kept as given, not as exp(log(.)) of it; the
        # model's prior variances are the cold posterior's / temperature
        prior = (fitted.variance / temperature if learn[0] else variance,
                 fitted.transition_var / temperature if learn[1]
                 else self._transition_variance(variance)[0])
        if not learn[0]:
            fitted.variance = params.variance
        self.temperature_ = temperature
        self._store_features(fitted, prior)

    def _store_features(self, params, prior):
        """Fitted attributes of the weight-space form; ``prior``: the
        model's ``(sigma^2, tau^2)`` (``params`` holds the cold posterior's
        scaled ones)."""
        V = len(self.classes_)
        D = self.n_features_in_ + (1 if self._bias_column_ > 0 else 0)
        scale = params.variance
        coef = np.zeros((V, D))
        coef_var = np.zeros((V, D))
        coef[:, self._active_features_] = np.sqrt(scale) * params.m.T
        coef_var[:, self._active_features_] = scale * params.s.T
        self.coef_, self.coef_var_ = coef, coef_var
        self.jitter_ = float(self.jitter)
        sigma2 = prior[0]
        kernel = clone(self.kernel) if self.kernel is not None else LinearKernel()
        self.kernel_ = kernel.set_params(variance=sigma2,
                                         bias=sigma2 * self._bias_column_ ** 2)
        self.transition_mean_ = params.m_bin
        self.transition_var_ = params.s_bin
        self.transition_prior_var_ = prior[1]
        self.weights_ = np.ones(1)
        self.approximation_ = "features"

    def _feature_jitter(self):
        """The jitter of the potentials' covariances, scaled as in ``fit``
        (by the cold posterior's prior variance)."""
        temperature = getattr(self, "temperature_", 1.0)
        return self.jitter * temperature * float(self.kernel_.variance)

    def _feature_sequence_moments(self, data):
        """Posterior moments of the unary potentials (weight-space form); a
        long sequence's covariance stays factored (a
        :class:`~skgpstruct.gp._weight_space_long.WeightSpaceCovariance`,
        sampled in weight space with ``n_predict_samples``)."""
        X = self._feature_design(data.X_flat)
        return feature_moments(X, data.lengths, self.coef_.T, self.coef_var_.T,
                               1.0, self._feature_jitter(),
                               n_samples=self.n_predict_samples)

    def _feature_ell(self, data):
        """Expected log-likelihood of each sequence of ``data`` under the
        fitted weight-space posterior (``n_predict_samples`` draws)."""
        X = self._feature_design(data.X_flat)
        V = len(self.classes_)
        # long sequences sampled in weight space, as in predict_marginals
        blocks = _Blocks(X, data.offsets, self.n_predict_samples)
        params = FeatureParams(self.coef_.T, self.coef_var_.T, self.transition_mean_,
                               self.transition_var_, 1.0, 1.0)
        noise = draw_normals(data.lengths, 1, V, self.n_predict_samples, self._seeds(data),
                             n_weights=blocks.n_weights)
        return _blocks_ell(get_likelihood(self.likelihood), blocks, data.y_flat,
                           params, noise, self._feature_jitter(), return_grad=False)

    def _feature_kl(self):
        """KL term of the fitted weight-space posterior."""
        sigma2 = float(self.kernel_.variance)
        # the features never active in training are not part of the model
        # (coef_var_ 0 there), as in the fitted objective
        active = self._active_features_
        kl = feature_kl(self.coef_[:, active] / np.sqrt(sigma2),
                        self.coef_var_[:, active] / sigma2)
        return kl + transition_kl(self.transition_mean_, self.transition_var_,
                                  self.transition_prior_var_)


__all__ = ["FeatureFormMixin"]
