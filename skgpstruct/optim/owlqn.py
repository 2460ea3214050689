"""OWL-QN: L-BFGS for a smooth objective plus a weighted L1 penalty, as
libLBFGS (and so CRFsuite, and so sklearn-crfsuite) runs it.

Orthant-Wise Limited-memory Quasi-Newton (Andrew and Gao, ICML 2007)
minimises ::

    F(x) = f(x) + sum_i c_i |x_i|

with ``f`` smooth and ``c_i >= 0`` (0 leaves a coordinate unpenalised, as a
bias; with every ``c_i = 0`` it is plain L-BFGS). Each iteration, as
libLBFGS's ``lbfgs()`` with ``orthantwise_c > 0``:

1. takes the *pseudo-gradient* ``pg`` of ``F`` (the steepest-descent
   direction's negative: ``g_i + c_i sign(x_i)`` off zero; at ``x_i = 0``,
   ``g_i + c_i`` if that is negative, ``g_i - c_i`` if that is positive,
   else 0);
2. turns it into a direction ``d = -H pg`` with the L-BFGS two-loop
   recursion on the last ``memory`` pairs ``(s, y)`` of steps and
   differences of the *smooth* gradient ``g`` (initial matrix ``s.y / y.y``
   of the newest pair), and zeroes every penalised ``d_i`` whose sign is
   not that of ``-pg_i``;
3. backtracks (halving) from step 1 (``1 / ||d||`` at the first iteration,
   along ``-pg``), projecting each trial point on the orthant of the
   current point (``sign(x_i)``, or ``sign(-pg_i)`` where ``x_i = 0``): a
   penalised coordinate that would change sign is set to exactly 0. A
   trial is accepted when ``F(x_new) <= F(x) + 1e-4 pg . (x_new - x)``;
   without penalised coordinates the step must also meet the curvature
   condition ``g_new . d >= 0.9 g . d`` (else it grows by 2.1), libLBFGS's
   backtracking Wolfe search.

Stopping is CRFsuite's (libLBFGS's ``epsilon``, ``past`` and ``delta``),
with ``tol`` for both of its tolerances:

- ``||pg|| / max(||x||, 1) <= tol``, or
- ``F`` fell by at most ``tol * |F|`` over the last ``period`` iterations
  (``(F_{k - period} - F_k) / F_k``, CRFsuite's ``delta`` over ``period``,
  its defaults ``1e-5`` and 10), or
- ``max_iter`` iterations (CRFsuite's ``max_iterations``).

So ``max_iter`` and ``tol`` of a CRF fit with ``c1 > 0`` mean what
``max_iterations`` and ``delta`` (= ``epsilon``) mean to CRFsuite, and the
same settings take the same steps (up to rounding). Coordinates stay
exactly 0 where the penalty outweighs the gradient, which is what makes
the solutions sparse.

The vector work runs in the numba kernels of
:mod:`skgpstruct.optim._owlqn_kernels` on preallocated buffers: the stored
pairs are ``2 memory`` vectors of the problem's size (float64, or float32
with ``pair_dtype``), the rest six.
"""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ._lbfgs import FitInterrupted, warn_max_iter
from ._owlqn_kernels import (
    constrain_direction,
    directional,
    pseudo_gradient_into,
    store_pair,
    trial_point,
    two_loop,
)

__all__ = ["minimize_owlqn", "pseudo_gradient"]

# libLBFGS's defaults: the sufficient-decrease constant of the backtracking
# line search (ftol), its curvature constant (wolfe, without penalised
# coordinates), its step factors, and the most trial points per line search
# (CRFsuite's max_linesearch).
_ARMIJO = 1e-4
_WOLFE = 0.9
_SHRINK, _GROW = 0.5, 2.1
_MAX_LINESEARCH = 20


def pseudo_gradient(x, grad, l1):
    """Pseudo-gradient of ``f(x) + sum_i l1_i |x_i|`` (Andrew and Gao, 2007).

    Parameters
    ----------
    x : ndarray of shape (n,)
        The point.
    grad : ndarray of shape (n,)
        Gradient of the smooth part ``f`` at ``x``.
    l1 : float or ndarray of shape (n,)
        Non-negative L1 coefficients.

    Returns
    -------
    pg : ndarray of shape (n,)
        The one-sided directional derivative's steepest direction, negated:
        0 exactly where ``x_i = 0`` and ``|grad_i| <= l1_i`` (a zero
        pseudo-gradient is the optimality condition of ``F``).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.optim.owlqn import pseudo_gradient
    >>> pseudo_gradient(np.array([1.0, -1.0, 0.0, 0.0, 0.0]),
    ...                 np.array([0.5, 0.5, 0.5, 2.0, -2.0]), 1.0).tolist()
    [1.5, -0.5, 0.0, 1.0, -1.0]
    """
    x = np.asarray(x, dtype=np.float64)
    grad = np.asarray(grad, dtype=np.float64)
    l1 = np.broadcast_to(np.asarray(l1, dtype=np.float64), x.shape)
    right, left = grad + l1, grad - l1  # derivatives towards +inf / -inf
    at_zero = np.where(right < 0, right, np.where(left > 0, left, 0.0))
    return np.where(x > 0, right, np.where(x < 0, left, at_zero))


def minimize_owlqn(fun, x0, l1, *, max_iter=100, tol=1e-5, callback=None, memory=6,
                   period=10, pair_dtype=np.float64):
    """Minimise ``fun(x)[0] + sum_i l1_i |x_i|`` with OWL-QN, as CRFsuite.

    Emits a :class:`~sklearn.exceptions.ConvergenceWarning` when
    ``max_iter`` is reached, as :func:`skgpstruct.optim.minimize_lbfgs`.

    Parameters
    ----------
    fun : callable
        ``fun(x) -> (value, grad)`` of the smooth part at a flat float64
        vector.
    x0 : ndarray of shape (n_params,)
        Starting point.
    l1 : float or ndarray of shape (n_params,)
        Non-negative L1 coefficient of each coordinate (0: unpenalised).
    max_iter : int, default=100
        Most iterations (accepted steps): CRFsuite's ``max_iterations``.
    tol : float, default=1e-5
        Stop when ``F`` fell by at most ``tol * |F|`` over the last
        ``period`` iterations (CRFsuite's ``delta``) or when ``||pg|| /
        max(||x||, 1) <= tol`` (its ``epsilon``).
    callback : callable, default=None
        Called with the objective ``F`` (penalty included) after every
        iteration.
    memory : int, default=6
        Stored ``(s, y)`` pairs (CRFsuite's ``num_memories``).
    period : int, default=10
        Iterations over which the decrease is measured (CRFsuite's
        ``period``).
    pair_dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        Storage of the ``(s, y)`` pairs: float32 halves their memory (``2
        memory n`` numbers, the bulk of the optimiser's on a large model);
        the recursion runs in float64 on the rounded pairs, their ``y . s``
        taken from the rounded values, so the estimate stays positive
        definite.

    Returns
    -------
    x : ndarray
        The minimiser found (penalised coordinates exactly 0 where the
        penalty wins).
    n_iter : int
        Iterations run.
    history : list of float
        The objective ``F`` after each iteration.

    Raises
    ------
    FitInterrupted
        On a KeyboardInterrupt after at least one iteration, with the last
        iterate (the best so far: every accepted step lowers ``F``).

    Notes
    -----
    A line search that finds no acceptable step clears the stored pairs and
    retries once along ``-pg`` (libLBFGS stops there); a second failure ends
    the run (near the optimum, where rounding hides the decrease, this is
    the usual end when ``tol`` is tiny), with a ConvergenceWarning only if
    no iteration was made.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.optim.owlqn import minimize_owlqn
    >>> target = np.array([3.0, 0.5, -2.0])
    >>> x, n_iter, _ = minimize_owlqn(
    ...     lambda x: (0.5 * float((x - target) @ (x - target)), x - target),
    ...     np.zeros(3), 1.0, tol=1e-10)
    >>> np.round(x, 6).tolist()  # soft-thresholding of the target by 1
    [2.0, 0.0, -1.0]
    """
    x = np.array(x0, dtype=np.float64, copy=True)
    l1 = np.array(np.broadcast_to(np.asarray(l1, dtype=np.float64), x.shape))
    if (l1 < 0).any():
        raise ValueError("the L1 coefficients must be non-negative.")
    if int(memory) < 1 or int(period) < 1:
        raise ValueError("memory and period must be at least 1.")
    state = _State(x, l1, int(memory), fun, np.dtype(pair_dtype))
    history = []
    n_iter, converged, failed = 0, False, False
    try:
        converged = state.small_gradient(tol)
        retried = False
        while not converged and n_iter < max_iter:
            if not state.line_search():
                if state.n_pairs and not retried:
                    state.restart()  # as L-BFGS-B: one restart from steepest descent
                    retried = True
                    continue
                failed = True
                break
            retried = False
            n_iter += 1
            history.append(state.F)
            if callback is not None:
                callback(state.F)
            converged = state.small_gradient(tol)
            if not converged and n_iter >= period:  # libLBFGS's delta over past
                before = history[n_iter - 1 - period] if n_iter > period else state.F0
                converged = before - state.F <= tol * abs(state.F)
            if not converged and n_iter < max_iter:
                state.next_direction()
    except KeyboardInterrupt as exc:
        if n_iter == 0 or isinstance(exc, FitInterrupted):
            raise
        raise FitInterrupted(state.x.copy(), n_iter) from exc
    if failed and n_iter == 0:
        warnings.warn(
            "OWL-QN stopped before its first iteration (no step along the "
            "pseudo-gradient lowered the objective): the model is its starting "
            "point. The objective or its gradient is not usable there; badly "
            "scaled features (scale them, e.g. with sklearn's MaxAbsScaler) are "
            "the usual cause.",
            ConvergenceWarning, stacklevel=2,
        )
    elif not converged and not failed:
        warn_max_iter("OWL-QN" if (l1 > 0).any() else "L-BFGS", max_iter, "iterations")
    return state.x, n_iter, history


class _State:
    """The iterate, its gradients, the direction and the stored pairs of
    :func:`minimize_owlqn`, in preallocated buffers."""

    def __init__(self, x, l1, memory, fun, pair_dtype):
        n = x.shape[0]
        self.fun, self.l1, self.memory = fun, l1, memory
        self.wolfe = not (l1 > 0).any()  # plain L-BFGS: the curvature test too
        self.x, self.xp = x, np.empty(n)
        self.pg, self.d = np.empty(n), np.empty(n)
        self.S, self.Y = np.empty((memory, n), pair_dtype), np.empty((memory, n), pair_dtype)
        self.ys = np.empty(memory)
        self.n_pairs, self.newest, self.gamma = 0, -1, 1.0
        self.F, self.g = self._evaluate(x, float(l1 @ np.abs(x)))
        self.F0 = self.F
        self._gradient_norms()
        np.negative(self.pg, out=self.d)
        self.step = 1.0 / max(float(np.sqrt(self.pp)), 1e-300)

    def _evaluate(self, x, norm1):
        value, grad = self.fun(x)
        return float(value) + norm1, np.array(grad, dtype=np.float64, copy=True)

    def _gradient_norms(self):
        self.pp, self.xx = pseudo_gradient_into(self.x, self.g, self.l1, self.pg)

    def small_gradient(self, tol):
        """libLBFGS's ``epsilon`` test at the current point."""
        return float(np.sqrt(self.pp)) <= tol * max(float(np.sqrt(self.xx)), 1.0)

    def restart(self):
        """Forget the pairs; the direction ``-pg``, step ``1 / ||pg||``."""
        self.n_pairs = 0
        np.negative(self.pg, out=self.d)
        self.step = 1.0 / max(float(np.sqrt(self.pp)), 1e-300)

    def line_search(self):
        """Backtrack along ``d`` from ``step``; on success the iterate moves
        (and ``xp``, ``gp`` keep the previous one). Return whether it did."""
        x, xp = self.xp, self.x  # the trial point goes into the other buffer
        dginit = float(self.pg @ self.d)
        if not dginit < 0:
            return False
        step = self.step
        for _ in range(_MAX_LINESEARCH):
            dg, norm1 = trial_point(xp, self.d, step, self.pg, self.l1, x)
            F, g = self._evaluate(x, norm1)
            if F > self.F + _ARMIJO * dg or not dg < 0:
                step *= _SHRINK
                continue
            if self.wolfe and directional(g, self.d) < _WOLFE * dginit:
                step *= _GROW
                continue
            self.x, self.xp, self.gp, self.g, self.F = x, xp, self.g, g, F
            self._gradient_norms()
            return True
        return False

    def next_direction(self):
        """Store the last step's pair, and the next direction and step."""
        j = (self.newest + 1) % self.memory
        ys, yy = store_pair(self.x, self.xp, self.g, self.gp, self.S[j], self.Y[j])
        if ys > 1e-12 * yy:  # keeps H positive definite
            self.ys[j], self.newest, self.gamma = ys, j, ys / yy
            self.n_pairs = min(self.n_pairs + 1, self.memory)
        if not self.n_pairs:
            self.restart()
            return
        order = (self.newest - np.arange(self.n_pairs)[::-1]) % self.memory
        two_loop(self.pg, self.S, self.Y, self.ys, order.astype(np.int64), self.gamma,
                 self.d)
        if not constrain_direction(self.d, self.pg, self.l1) < 0:
            self.restart()  # no descent left in it
            return
        self.step = 1.0
