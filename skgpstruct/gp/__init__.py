"""Sparse variational GP machinery: pure functions, no estimator state.

- :mod:`skgpstruct.gp.kernels`: kernels on dense and scipy.sparse token
  features, with cross-covariance gradients and their contractions;
- :mod:`skgpstruct.gp.inducing`: inducing inputs and label fractions
  (k-means / random subset);
- :mod:`skgpstruct.gp.posterior`: the mixture (mean-field or coupled)
  posterior over inducing values, its flat parametrisation and KL terms.
"""

from .inducing import init_inducing_points, unique_rows
from .kernels import (
    LinearKernel,
    RBFKernel,
    kernel_diag_gradient_contract,
    kernel_gradient_contract,
)
from .posterior import (
    VariationalLayout,
    VariationalParams,
    gauss_kl,
    init_variational_params,
    mean_field_to_coupled,
    mixture_entropy_bound,
    mixture_kl,
    transition_kl,
)

__all__ = [
    "LinearKernel",
    "RBFKernel",
    "kernel_gradient_contract",
    "kernel_diag_gradient_contract",
    "init_inducing_points",
    "unique_rows",
    "VariationalParams",
    "VariationalLayout",
    "init_variational_params",
    "gauss_kl",
    "mixture_entropy_bound",
    "mixture_kl",
    "transition_kl",
    "mean_field_to_coupled",
]
