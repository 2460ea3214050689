"""Full-batch L-BFGS-B (scipy) with the package's stopping rule, and the
warnings and interrupt of every optimiser loop."""

import warnings
from numbers import Integral

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from ._steps import _check_real

__all__ = ["FitInterrupted", "FitInterruptedWarning", "minimize_lbfgs", "warn_interrupted",
           "warn_max_iter"]


def warn_max_iter(solver, max_iter, unit):
    """The one ConvergenceWarning of the package's fit loops.

    Parameters
    ----------
    solver : str
        Name of the optimiser (``"L-BFGS"``, ``"adam"``...).
    max_iter : int
        The limit reached.
    unit : str
        ``"iterations"`` or ``"epochs"``.
    """
    warnings.warn(
        f"{solver} reached max_iter={max_iter} {unit} before converging; "
        "increase max_iter or tol.",
        ConvergenceWarning,
        stacklevel=2,
    )


def minimize_lbfgs(fun, x0, *, max_iter=100, tol=1e-6, callback=None, bounds=None):
    """Minimise ``fun(x) -> (value, grad)`` with scipy's L-BFGS-B.

    Emits a :class:`~sklearn.exceptions.ConvergenceWarning` when
    ``max_iter`` is reached.

    Parameters
    ----------
    fun : callable
        Returns the objective and its gradient at a flat float64 vector.
    x0 : ndarray of shape (n_params,)
        Starting point.
    max_iter : int, default=100
        Maximum number of L-BFGS iterations, >= 1.
    tol : float, default=1e-6
        Relative tolerance on the objective (scipy's ``ftol``), >= 0; the
        projected-gradient tolerance ``gtol`` is set to ``tol`` as well.
    callback : callable, default=None
        Called with the current value after every iteration.
    bounds : sequence of (float or None, float or None), default=None
        Box constraints per coordinate (scipy's L-BFGS-B ``bounds``); None
        means unbounded.

    Returns
    -------
    x : ndarray
        The minimiser found.
    n_iter : int
        Number of iterations run.
    history : list of float
        Objective after each iteration.

    Raises
    ------
    ValueError
        If ``max_iter`` or ``tol`` is out of its range.
    FitInterrupted
        On a KeyboardInterrupt after at least one iteration (a subclass of
        KeyboardInterrupt): it carries the last iterate, the best so far
        (L-BFGS-B only accepts steps that lower the objective). One before
        the first iteration is raised as it is.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.optim import minimize_lbfgs
    >>> x, n_iter, history = minimize_lbfgs(
    ...     lambda x: (float((x - 3) @ (x - 3)), 2 * (x - 3)), np.zeros(2),
    ...     bounds=[(None, 2.0), (None, None)])
    >>> np.round(x, 6).tolist()
    [2.0, 3.0]
    """
    # scipy runs one iteration with maxiter=0 (and takes a negative one)
    if isinstance(max_iter, bool) or not isinstance(max_iter, Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}.")
    _check_real("tol", tol, 0.0, None)
    history = []
    last = {}

    def wrapped(x):
        value, grad = fun(x)
        last["value"] = float(value)
        return value, grad

    def cb(xk):
        history.append(last["value"])
        last["x"] = np.array(xk, dtype=np.float64, copy=True)
        if callback is not None:
            callback(last["value"])

    try:
        res = minimize(
            wrapped,
            x0,
            jac=True,
            method="L-BFGS-B",
            callback=cb,
            bounds=bounds,
            options={"maxiter": max_iter, "ftol": tol, "gtol": tol, "maxcor": 20},
        )
    except KeyboardInterrupt as exc:
        if "x" not in last or isinstance(exc, FitInterrupted):
            raise
        raise FitInterrupted(last["x"], len(history)) from exc
    if res.status == 1:
        warn_max_iter("L-BFGS", max_iter, "iterations")
    elif res.status != 0 and not history:
        # stopping near the optimum on a line search that can't improve the
        # last digits is common and harmless; never leaving the start is not
        warnings.warn(
            "L-BFGS stopped before its first iteration "
            f"({res.message}): the model is its starting point. The objective "
            "or its gradient is not usable there; badly scaled features (scale "
            "them, e.g. with sklearn's MaxAbsScaler) are the usual cause.",
            ConvergenceWarning, stacklevel=2,
        )
    return res.x, int(res.nit), history


class FitInterrupted(KeyboardInterrupt):
    """A KeyboardInterrupt during an optimisation, with the best iterate
    reached before it.

    Parameters
    ----------
    x : ndarray
        The best iterate so far.
    n_done : int
        Completed iterations / epochs.
    """

    def __init__(self, x, n_done):
        super().__init__(f"interrupted after {n_done} iterations")
        self.x, self.n_done = x, n_done


class FitInterruptedWarning(UserWarning):
    """``fit`` was interrupted (KeyboardInterrupt) and kept the best iterate
    reached so far."""


def warn_interrupted(name, n_done, unit):
    """Warn that a fit was interrupted after ``n_done`` iterations / epochs.

    Parameters
    ----------
    name : str
        Optimiser name.
    n_done : int
        Completed iterations / epochs.
    unit : str
        ``"iterations"`` or ``"epochs"``.
    """
    warnings.warn(
        f"{name} was interrupted after {n_done} {unit}; the model is fitted with "
        "the best iterate so far (call fit again to finish).",
        FitInterruptedWarning, stacklevel=3,
    )
