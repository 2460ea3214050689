"""Sparse variational GP machinery: pure functions, no estimator state.

The layers, bottom up (each imports only those before it, and nothing of
the package above ``gp/`` except the chain helpers and the deterministic
chunked sum):

- :mod:`skgpstruct.gp.kernels`: kernels on dense and scipy.sparse token
  features, with cross-covariance gradients and their contractions;
- :mod:`skgpstruct.gp.inducing`: inducing inputs and label fractions
  (k-means / random subset);
- :mod:`skgpstruct.gp.variational`: the mixture (mean-field or coupled)
  posterior's parameters, their flat layout and initialisation;
- :mod:`skgpstruct.gp.kl`: the KL terms of the ELBO;
- :mod:`skgpstruct.gp.terms`: kernel quantities ``A_n``, ``Ktilde_n`` and
  the per-sequence Gaussian marginals;
- :mod:`skgpstruct.gp.sampling`: standard normals from per-sequence seeds
  and samples of the potentials (training and prediction);
- :mod:`skgpstruct.gp.ell`: the expected log-likelihood and its pathwise
  and score-function gradients;
- :mod:`skgpstruct.gp.elbo`: :class:`ELBOObjective`, the objective that
  GPStructTagger minimises.
"""

from . import elbo
from . import ell
from . import inducing
from . import kernels
from . import kl
from . import sampling
from . import terms
from . import variational
from .elbo import *  # noqa: F403
from .ell import *  # noqa: F403
from .inducing import *  # noqa: F403
from .kernels import *  # noqa: F403
from .kl import *  # noqa: F403
from .sampling import *  # noqa: F403
from .terms import *  # noqa: F403
from .variational import *  # noqa: F403

__all__ = [
    name
    for module in (kernels, inducing, variational, kl, terms, sampling, ell, elbo)
    for name in module.__all__
]
