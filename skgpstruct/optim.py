"""First-order optimisers on flat parameter vectors.

The estimators hold their parameters as one flat float64 vector and call
``step(params, grad)`` of one of these objects per minibatch, or
:func:`minimize_lbfgs` for full-batch problems. All of them *minimise*.
"""

import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

__all__ = ["SGD", "Adam", "SAGA", "make_optimizer", "minimize_lbfgs"]


class SGD:
    """Stochastic gradient descent with optional momentum.

    Parameters
    ----------
    learning_rate : float
        Step size.
    momentum : float, default=0.0
        Heavy-ball momentum in [0, 1).
    decay : float, default=0.0
        Step size at step k is ``learning_rate / (1 + decay * k)``.
    """

    def __init__(self, learning_rate, momentum=0.0, decay=0.0):
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.decay = decay
        self.t = 0
        self._velocity = None

    def step(self, params, grad):
        """Update ``params`` in place with gradient ``grad``; return it."""
        lr = self.learning_rate / (1.0 + self.decay * self.t)
        self.t += 1
        if self.momentum:
            if self._velocity is None:
                self._velocity = np.zeros_like(params)
            self._velocity *= self.momentum
            self._velocity -= lr * grad
            params += self._velocity
        else:
            params -= lr * grad
        return params


class Adam:
    """Adam (Kingma and Ba, 2015).

    Parameters
    ----------
    learning_rate : float
        Step size.
    beta1, beta2 : float, default=0.9, 0.999
        Decay rates of the first and second moment estimates.
    epsilon : float, default=1e-8
        Added to the denominator.
    """

    def __init__(self, learning_rate, beta1=0.9, beta2=0.999, epsilon=1e-8):
        self.learning_rate = learning_rate
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.t = 0
        self._m = None
        self._v = None

    def step(self, params, grad):
        """Update ``params`` in place with gradient ``grad``; return it."""
        if self._m is None:
            self._m = np.zeros_like(params)
            self._v = np.zeros_like(params)
        self.t += 1
        self._m *= self.beta1
        self._m += (1 - self.beta1) * grad
        self._v *= self.beta2
        self._v += (1 - self.beta2) * grad * grad
        m_hat = self._m / (1 - self.beta1**self.t)
        v_hat = self._v / (1 - self.beta2**self.t)
        params -= self.learning_rate * m_hat / (np.sqrt(v_hat) + self.epsilon)
        return params


class SAGA:
    """SAGA (Defazio, Bach and Lacoste-Julien, 2014) over a finite sum.

    The objective is ``sum_b f_b(x)`` over ``n_blocks`` blocks (minibatches of
    sequences with a fixed partition); ``step(params, grad, block)`` takes the
    gradient of block ``block`` alone (not rescaled) and applies the
    variance-reduced update
    ``x -= lr * (g_b - g_b_old + mean_g_old) * n_blocks``,
    i.e. an unbiased estimate of the full gradient whose variance vanishes at
    the optimum.

    Parameters
    ----------
    learning_rate : float
        Step size.
    n_blocks : int
        Number of blocks of the finite sum.
    """

    def __init__(self, learning_rate, n_blocks):
        self.learning_rate = learning_rate
        self.n_blocks = int(n_blocks)
        self.t = 0
        self._table = None
        self._mean = None
        self._seen = None

    def step(self, params, grad, block):
        """Update ``params`` in place from block ``block``'s gradient; return it."""
        if self._table is None:
            self._table = np.zeros((self.n_blocks, params.size))
            self._mean = np.zeros(params.size)
            self._seen = np.zeros(self.n_blocks, dtype=bool)
        old = self._table[block]
        direction = grad - old + self._mean
        if not self._seen.all():
            # Before every block has been visited, the table's average
            # underestimates the full gradient; SAG-style warm start uses the
            # average over the blocks seen so far.
            seen = self._seen.copy()
            seen[block] = True
            direction = grad - old + self._mean * self.n_blocks / max(seen.sum(), 1)
            self._seen[block] = True
        self._mean += (grad - old) / self.n_blocks
        self._table[block] = grad
        self.t += 1
        params -= self.learning_rate * direction * self.n_blocks
        return params


def make_optimizer(name, learning_rate, n_blocks=None):
    """Create an optimiser by name.

    Parameters
    ----------
    name : {"adam", "sgd", "saga"}
        Which optimiser.
    learning_rate : float
        Step size.
    n_blocks : int, default=None
        Number of minibatches of the finite sum (``"saga"`` only).

    Returns
    -------
    optimizer : SGD, Adam or SAGA
    """
    if name == "adam":
        return Adam(learning_rate)
    if name == "sgd":
        return SGD(learning_rate, momentum=0.9)
    if name == "saga":
        if n_blocks is None:
            raise ValueError("SAGA needs the number of blocks of the finite sum.")
        return SAGA(learning_rate, n_blocks)
    raise ValueError(f"Unknown optimizer {name!r}; expected 'adam', 'sgd' or 'saga'.")


def minimize_lbfgs(fun, x0, *, max_iter=100, tol=1e-6, callback=None, warn=True,
                   bounds=None):
    """Minimise ``fun(x) -> (value, grad)`` with scipy's L-BFGS-B.

    Parameters
    ----------
    fun : callable
        Returns the objective and its gradient at a flat float64 vector.
    x0 : ndarray of shape (n_params,)
        Starting point.
    max_iter : int, default=100
        Maximum number of L-BFGS iterations.
    tol : float, default=1e-6
        Relative tolerance on the objective (scipy's ``ftol``); the
        projected-gradient tolerance ``gtol`` is set to ``tol`` as well.
    callback : callable, default=None
        Called with the current value after every iteration.
    warn : bool, default=True
        Emit a :class:`~sklearn.exceptions.ConvergenceWarning` when
        ``max_iter`` is reached.
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
    """
    history = []
    last = {}

    def wrapped(x):
        value, grad = fun(x)
        last["value"] = float(value)
        return value, grad

    def cb(xk):
        history.append(last["value"])
        if callback is not None:
            callback(last["value"])

    res = minimize(
        wrapped,
        x0,
        jac=True,
        method="L-BFGS-B",
        callback=cb,
        bounds=bounds,
        options={"maxiter": max_iter, "ftol": tol, "gtol": tol, "maxcor": 20},
    )
    if warn and res.status == 1:
        warnings.warn(
            f"L-BFGS reached max_iter={max_iter} before converging; increase "
            "max_iter or tol.",
            ConvergenceWarning,
        )
    return res.x, int(res.nit), history
