"""GPStructTagger's inducing-point form: starting posterior, objective, store.

A mixin of :class:`~skgpstruct.GPStructTagger`, as
:mod:`skgpstruct._gpstruct.weight_space_form` is for the weight-space form, kept apart so
that the estimator module holds the parameters and the shared fit loop; the
maths is in :mod:`skgpstruct.gp` (:class:`~skgpstruct.gp.elbo.ELBOObjective`).
"""

import numpy as np
from sklearn.base import clone
from sklearn.gaussian_process.kernels import ConstantKernel

from ..gp.elbo import ELBOObjective
from ..gp.inducing import init_inducing_points
from ..gp._sparse_support import _check_sparse_support
from ..gp.kernels import LinearKernel
from ..gp.terms import inducing_cholesky, split_kernel_scale, stable_jitter
from ..gp.variational import (
    VariationalLayout,
    VariationalParams,
    init_variational_params,
    mean_field_to_coupled,
)

__all__ = ["InducingFormMixin"]

_SEED_MAX = np.iinfo(np.int32).max
_SCALE_BOUNDS = (1e-5, 1e5)  # of the learned ConstantKernel factor ("scale")


class InducingFormMixin:
    """Starting posterior, objective and fitted attributes of the
    inducing-point form."""

    def _params(self):
        return VariationalParams(
            q_mu=self.q_mu_, q_sqrt=self.q_sqrt_, weights=self.weights_,
            m_bin=self.transition_mean_, s_bin=self.transition_var_,
        )

    def _hyper_mode(self):
        """"all", "scale" or "none" from ``optimize_hyperparameters`` (the
        inducing-point form; ``kernel_variance="elbo"`` learns the scale)."""
        mode = self.optimize_hyperparameters
        if self.kernel is None and self.kernel_variance == "elbo":
            return "scale"
        if isinstance(mode, str):
            return "scale"
        return "all" if mode else "none"

    def _fixed_kernel(self):
        """``(base, factor)``: the kernel whose GP terms are computed and
        the factor they are scaled by (``ConstantKernel(factor) * base``,
        learned with ``optimize_hyperparameters="scale"``; else factor 1)."""
        if self._hyper_mode() == "scale":
            return split_kernel_scale(self.kernel_)
        return self.kernel_, 1.0

    def _init_params(self, data, warm, rng):
        """Starting :class:`VariationalParams`: the fitted ones on a warm
        start; else ``kernel_``, inducing points and label-fraction means
        from the training data."""
        kernel = self.kernel_ if warm else self.kernel
        if kernel is not None:
            _check_sparse_support(kernel, data.X_flat)
        V = len(self.classes_)
        coupled = self.posterior == "coupled"
        # Drawn whether or not they are used, so that a warm start sees the
        # same samples as a cold one.
        seed_inducing, seed_init = rng.randint(_SEED_MAX, size=2)
        if warm:
            params = self._params()
            if coupled and params.q_sqrt.ndim == 4:  # from a mean-field fit
                params.q_sqrt = mean_field_to_coupled(params.q_sqrt)
        else:
            # the table of this fit's validation only (_prior_variance sets
            # it; a given kernel is not validated)
            self.__dict__.pop("variance_cv_results_", None)
            self.kernel_ = (clone(self.kernel) if self.kernel is not None
                            else LinearKernel(variance=self._prior_variance(data)))
            Z, fractions = init_inducing_points(
                data.X_flat, data.y_flat, self.n_inducing, V, method=self.inducing,
                random_state=seed_inducing,
            )
            self.inducing_points_ = Z
            Lzz = inducing_cholesky(self.kernel_, Z, self.jitter)
            params = init_variational_params(
                fractions, self.n_components, whiten=True, kzz_cholesky=Lzz,
                coupled=coupled, random_state=seed_init,
            )
        return params

    def _objective(self, lik, data, params, warm):
        """The :class:`~skgpstruct.gp.elbo.ELBOObjective` that ``fit``
        minimises. With ``optimize_hyperparameters="scale"``, ``kernel_``
        becomes ``ConstantKernel(1.0) * kernel_`` on a cold start (and on a
        warm one from a fit that learned no scale): the factor is learned."""
        mode = self._hyper_mode()
        if mode == "scale" and (
            not warm or split_kernel_scale(self.kernel_)[0] is self.kernel_
        ):
            self.kernel_ = ConstantKernel(
                1.0, constant_value_bounds=_SCALE_BOUNDS) * self.kernel_
        K, V, M = params.q_mu.shape
        n_hyper = {"none": 0, "all": self.kernel_.n_dims, "scale": 1}[mode]
        layout = VariationalLayout(K, V, M, coupled=self.posterior == "coupled",
                                   learn_weights=self.n_components > 1,
                                   n_hyperparameters=n_hyper)
        base = split_kernel_scale(self.kernel_)[0] if mode == "scale" else self.kernel_
        # the smallest jitter (from ``jitter`` up) with which every covariance
        # of the training sequences factorises; kept for prediction
        self.jitter_, terms = stable_jitter(base, data.X_flat, data.lengths,
                                            self.inducing_points_, self.jitter)
        return ELBOObjective(
            lik, self.kernel_, self.inducing_points_, data.X_flat, data.lengths,
            data.y_flat, layout, hyperparameters=mode, jitter=self.jitter_,
            terms=None if mode == "all" else terms,
            transition_prior_var=self._transition_variance()[0],
            n_samples=self.n_samples, gradient=self.gradient,
        )

    def _store(self, x, objective):
        params, self.kernel_ = objective.unpack(x)
        self.approximation_ = "inducing"
        self.transition_prior_var_ = self._transition_variance()[0]
        self.q_mu_ = params.q_mu
        self.q_sqrt_ = params.q_sqrt
        self.weights_ = params.weights
        self.transition_mean_ = params.m_bin
        self.transition_var_ = params.s_bin
        self._Lzz = inducing_cholesky(self._fixed_kernel()[0], self.inducing_points_,
                                      self.jitter_)
