"""OWL-QN: L-BFGS for a smooth objective plus a weighted L1 penalty.

Orthant-Wise Limited-memory Quasi-Newton (Andrew and Gao, ICML 2007)
minimises ::

    F(x) = f(x) + sum_i c_i |x_i|

with ``f`` smooth and ``c_i >= 0`` (0 leaves a coordinate unpenalised, as a
bias). It is the L1 mode of libLBFGS, which CRFsuite (and so
sklearn-crfsuite) runs when ``c1 > 0``. Each iteration

1. takes the *pseudo-gradient* ``pg`` of ``F`` (the steepest-descent
   direction's negative: ``g_i + c_i sign(x_i)`` off zero; at ``x_i = 0``,
   ``g_i + c_i`` if that is negative, ``g_i - c_i`` if that is positive,
   else 0);
2. turns it into a direction ``d = -H pg`` with the L-BFGS two-loop
   recursion on the pairs ``(s, y)`` of steps and differences of the
   *smooth* gradient ``g``, and zeroes the penalised coordinates at 0
   where ``d`` disagrees in sign with ``-pg``;
3. backtracks (halving) from step 1 along ``d``, projecting each trial
   point on the orthant of the current point (``sign(x_i)``, or
   ``sign(-pg_i)`` where ``x_i = 0``): a penalised coordinate that would
   change sign is set to exactly 0. A trial is accepted when
   ``F(x_new) <= F(x) + 1e-4 pg . (x_new - x)`` (and that bound is a
   decrease).

Two departures from the paper (and libLBFGS), both keeping ``d`` a
descent direction (``pg . d < 0``) and the iterates in the chosen orthant:

- the sign alignment of ``d`` applies to the coordinates at 0 only. Off
  zero the orthant is ``sign(x_i)`` whatever the sign of ``d_i`` (the line
  search's projection keeps the iterate in it), and zeroing the quasi-Newton
  components that disagree with ``-pg`` there truncates 10-20 of a
  direction's components on a small CRF even with a negligible ``c1``;
- the two-loop recursion runs on the coordinates not *pinned* at 0 (``x_i
  = 0`` and ``|g_i| <= c_i``, so ``pg_i = 0``), the pairs restricted to
  them, as L-BFGS-B's subspace step: with the full pairs, the estimate of
  the free block's inverse Hessian is that of a Schur complement, too long
  a step (4-20x on a CRF, each overshoot costing backtracks).

On the CRF of ``tests/test_l1.py`` (52 parameters) at ``tol=1e-10`` these
take ``c1 = 0.1`` / ``1`` / ``10`` from 294 / 279 / 26 iterations (708 /
528 / 27 evaluations) to 130 / 88 / 43 (224 / 110 / 52), with a lower
final objective in every case; at the default ``tol`` both take 15-40.

Coordinates stay exactly 0 where the penalty outweighs the gradient,
which is what makes the solutions sparse. Stopping follows scipy's
L-BFGS-B (and so :func:`skgpstruct.optim.minimize_lbfgs`): ``tol`` bounds
the relative decrease ``(F_prev - F) / max(|F_prev|, |F|, 1)`` and the
largest entry of the pseudo-gradient (the L1 analogue of the projected
gradient), with 20 stored pairs.
"""

import warnings
from collections import deque

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ._lbfgs import FitInterrupted, warn_max_iter

__all__ = ["minimize_owlqn", "pseudo_gradient"]

# Sufficient-decrease constant of the backtracking line search (libLBFGS's
# ftol) and the most trial points per line search (step down to 2 ** -19).
_ARMIJO = 1e-4
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


def _two_loop(pg, pairs, pinned):
    """``-H pg`` with the L-BFGS inverse-Hessian estimate of ``pairs``
    (``(s, y)``, oldest first) restricted to the coordinates outside
    ``pinned`` (indices; ``pg`` is 0 there, and so is the result), scaled by
    ``s.y / y.y`` of the newest usable pair; None when no pair has positive
    curvature on those coordinates."""
    n = pg.shape[0]
    if pinned.shape[0] == 0:
        def dot(u, v):
            return float(u @ v)
    elif 2 * pinned.shape[0] <= n:
        def dot(u, v):
            return float(u @ v) - float(u[pinned] @ v[pinned])
    else:
        free = np.setdiff1d(np.arange(n), pinned, assume_unique=True)

        def dot(u, v):
            return float(u[free] @ v[free])
    usable = []
    for s, y in pairs:
        sy, yy = dot(s, y), dot(y, y)
        if sy > 1e-12 * yy:  # positive curvature on the free coordinates
            usable.append((s, y, 1.0 / sy, yy))
    if not usable:
        return None
    q = pg.copy()
    alphas = []
    for s, y, rho, _ in reversed(usable):
        a = rho * dot(s, q)
        q -= a * y
        q[pinned] = 0.0
        alphas.append(a)
    _, _, rho, yy = usable[-1]
    q *= 1.0 / (rho * yy)
    for (s, y, rho, _), a in zip(usable, reversed(alphas)):
        b = rho * dot(y, q)
        q += (a - b) * s
        q[pinned] = 0.0
    return -q


def minimize_owlqn(fun, x0, l1, *, max_iter=100, tol=1e-6, callback=None, memory=20):
    """Minimise ``fun(x)[0] + sum_i l1_i |x_i|`` with OWL-QN.

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
        Most iterations (accepted steps).
    tol : float, default=1e-6
        Stop when the relative decrease ``(F_prev - F) / max(|F_prev|, |F|,
        1)`` or the largest absolute pseudo-gradient is at most ``tol``
        (scipy's L-BFGS-B ``ftol`` and ``gtol``).
    callback : callable, default=None
        Called with the objective ``F`` (penalty included) after every
        iteration.
    memory : int, default=20
        Stored ``(s, y)`` pairs (scipy's ``maxcor`` as the package uses it).

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
    A line search that finds no decrease clears the stored pairs and
    retries once along the pseudo-gradient; a second failure ends the run
    (near the optimum, where rounding hides the decrease, this is the usual
    end when ``tol`` is tiny), with a ConvergenceWarning only if no
    iteration was made.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.optim.owlqn import minimize_owlqn
    >>> target = np.array([3.0, 0.5, -2.0])
    >>> x, n_iter, _ = minimize_owlqn(
    ...     lambda x: (0.5 * float((x - target) @ (x - target)), x - target),
    ...     np.zeros(3), 1.0)
    >>> np.round(x, 6).tolist()  # soft-thresholding of the target by 1
    [2.0, 0.0, -1.0]
    """
    x = np.array(x0, dtype=np.float64, copy=True)
    l1 = np.array(np.broadcast_to(np.asarray(l1, dtype=np.float64), x.shape))
    if (l1 < 0).any():
        raise ValueError("the L1 coefficients must be non-negative.")
    penalised = l1 > 0

    def objective(point):
        value, grad = fun(point)
        return (float(value) + float(l1 @ np.abs(point)),
                np.array(grad, dtype=np.float64, copy=True))

    history = []
    pairs = deque(maxlen=int(memory))
    n_iter, converged, failed = 0, False, False
    try:
        F, g = objective(x)
        pg = pseudo_gradient(x, g, l1)
        converged = float(np.abs(pg).max(initial=0.0)) <= tol
        retried = False
        while not converged and n_iter < max_iter:
            at_zero = penalised & (x == 0)
            pinned = np.flatnonzero(at_zero & (pg == 0))
            d = _two_loop(pg, pairs, pinned) if pairs else None
            if d is not None:
                d[at_zero & (d * pg >= 0)] = 0.0
                if not float(pg @ d) < 0:  # no descent left in it
                    d = None
            if d is None:
                pairs.clear()
                d = -pg
            step = 1.0 if pairs else 1.0 / float(np.sqrt(d @ d))
            orthant = np.where(x != 0, np.sign(x), -np.sign(pg))
            for _ in range(_MAX_LINESEARCH):
                x_new = x + step * d
                x_new[penalised & (x_new * orthant <= 0)] = 0.0
                F_new, g_new = objective(x_new)
                decrease = float(pg @ (x_new - x))
                if decrease < 0 and F_new <= F + _ARMIJO * decrease:
                    break
                step *= 0.5
            else:
                if pairs and not retried:
                    pairs.clear()  # as L-BFGS-B: one restart from steepest descent
                    retried = True
                    continue
                failed = True
                break
            retried = False
            s, y = x_new - x, g_new - g
            ys = float(s @ y)
            F_prev = F
            x, F, g = x_new, F_new, g_new
            pg = pseudo_gradient(x, g, l1)
            n_iter += 1
            history.append(F)
            if callback is not None:
                callback(F)
            if ys > 1e-12 * float(y @ y):  # keeps H positive definite
                pairs.append((s, y))
            converged = ((F_prev - F) <= tol * max(abs(F_prev), abs(F), 1.0)
                         or float(np.abs(pg).max(initial=0.0)) <= tol)
    except KeyboardInterrupt as exc:
        if n_iter == 0 or isinstance(exc, FitInterrupted):
            raise
        raise FitInterrupted(x, n_iter) from exc
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
        warn_max_iter("OWL-QN", max_iter, "iterations")
    return x, n_iter, history
