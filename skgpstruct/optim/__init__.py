"""First-order optimisers on flat parameter vectors.

The estimators hold their parameters as one flat float64 vector and call
``step(params, grad)`` of one of these objects per minibatch, or
:func:`minimize_lbfgs` for full-batch problems. All of them *minimise*.

:class:`Adam` and :class:`SGD` update the parameters in one numba pass
(:func:`_adam_update`, :func:`_sgd_update`) on the assembled gradient
``scale * grad + weight_decay * params`` (no decay on one ``undecayed``
slice, e.g. a bias): at millions of parameters (the weights of thousands of
labels) numpy temporaries would cost more than a training step itself.

The package holds every optimiser the estimators use: the minibatch steps
(:mod:`._steps`: SGD, Adam, SAGA), scipy's L-BFGS-B with the package's stopping
and interrupt conventions (:mod:`._lbfgs`), OWL-QN for an L1 term
(:mod:`.owlqn`) and the row-sparse proximal AdaGrad (:mod:`.proximal`).
"""

from ._lbfgs import FitInterrupted, FitInterruptedWarning, minimize_lbfgs
from ._steps import SAGA, SGD, Adam, make_optimizer

__all__ = ["SGD", "Adam", "SAGA", "FitInterrupted", "FitInterruptedWarning", "make_optimizer",
           "minimize_lbfgs"]
