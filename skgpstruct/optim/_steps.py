"""The minibatch optimisers: SGD and Adam (one fused numba pass per step),
SAGA, and :func:`make_optimizer`."""

import math
from numbers import Integral, Real

import numpy as np
from numba import njit

__all__ = ["SGD", "Adam", "SAGA", "make_optimizer"]


# ------------------------------------------------------------ fused kernels
@njit(cache=True, nogil=True)
def _adam_range(params, grad, scale, decay, m, v, lr, beta1, beta2, epsilon, c1, c2,
                start, stop):
    for i in range(start, stop):
        g = scale * grad[i] + decay * params[i]
        m[i] = m[i] * beta1 + (1 - beta1) * g
        v[i] = v[i] * beta2 + (1 - beta2) * g * g
        params[i] -= lr * (m[i] / c1) / (math.sqrt(v[i] / c2) + epsilon)


@njit(cache=True, nogil=True)
def _adam_update(params, grad, scale, decay, lo, hi, m, v, lr, beta1, beta2, epsilon,
                 c1, c2):
    """One Adam step in place, fused into one pass over the parameters.

    The gradient is ``scale * grad + decay * params``, without the decay on
    ``params[lo:hi]``; ``m``, ``v`` are the moment estimates (updated in
    place) and ``c1 = 1 - beta1**t``, ``c2 = 1 - beta2**t`` the bias
    corrections of step ``t`` (from 1), computed by the caller.
    """
    n = params.shape[0]
    _adam_range(params, grad, scale, decay, m, v, lr, beta1, beta2, epsilon, c1, c2,
                0, lo)
    _adam_range(params, grad, scale, 0.0, m, v, lr, beta1, beta2, epsilon, c1, c2,
                lo, hi)
    _adam_range(params, grad, scale, decay, m, v, lr, beta1, beta2, epsilon, c1, c2,
                hi, n)


@njit(cache=True, nogil=True)
def _sgd_range(params, grad, scale, decay, velocity, lr, momentum, start, stop):
    for i in range(start, stop):
        g = scale * grad[i] + decay * params[i]
        velocity[i] = velocity[i] * momentum - lr * g
        params[i] += velocity[i]


@njit(cache=True, nogil=True)
def _sgd_update(params, grad, scale, decay, lo, hi, velocity, lr, momentum):
    """One heavy-ball SGD step in place, fused into one pass.

    Same gradient as :func:`_adam_update`; ``velocity`` is updated in place
    (with ``momentum=0`` the step is plain ``params -= lr * g``).
    """
    n = params.shape[0]
    _sgd_range(params, grad, scale, decay, velocity, lr, momentum, 0, lo)
    _sgd_range(params, grad, scale, 0.0, velocity, lr, momentum, lo, hi)
    _sgd_range(params, grad, scale, decay, velocity, lr, momentum, hi, n)


# --------------------------------------------------------------- optimisers
def _check_real(name, value, low, high, *, low_open=False, high_open=False):
    """``value`` as a float, after a ValueError naming ``name`` when it is not
    a real number in the interval (``None``: unbounded on that side)."""
    ok = isinstance(value, Real) and not isinstance(value, bool) and np.isfinite(value)
    ok = ok and (low is None or (value > low if low_open else value >= low))
    ok = ok and (high is None or (value < high if high_open else value <= high))
    if not ok:
        left = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
        right = "inf)" if high is None else f"{high:g}" + (")" if high_open else "]")
        raise ValueError(f"{name} must be a real number in {left}, {right}, got {value!r}.")
    return float(value)


def _check_grad(optimizer, params, grad, stepped):
    """``grad`` as a float64 array, after refusing one whose shape is not the
    1-D ``params``' and ``params`` of another size than the ``stepped`` (None
    before the first step) that ``optimizer``'s state was made for."""
    grad = np.asarray(grad, dtype=np.float64)
    if grad.shape != np.shape(params) or np.ndim(params) != 1:
        raise ValueError(
            f"grad has shape {grad.shape}, params {np.shape(params)}: they must "
            "be 1-D of the same shape."
        )
    if stepped is not None and stepped != params.size:
        raise ValueError(
            f"params has {params.size} entries, but this {type(optimizer).__name__} "
            f"stepped on {stepped} before; use a new optimiser for other parameters."
        )
    return grad


class _FusedStep:
    """What :class:`SGD` and :class:`Adam` share: the L2 decay, its
    undecayed slice, the step counter and the state arrays' allocation."""

    fixed_blocks = False  # minibatches may be reshuffled every epoch
    _n_states = 0  # the subclass's state arrays, one entry per parameter each

    def __init__(self, learning_rate, weight_decay, undecayed):
        _check_real("learning_rate", learning_rate, 0.0, None, low_open=True)
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.undecayed = (0, 0) if undecayed is None else tuple(undecayed)
        self.t = 0
        self._state = None

    def _state_size(self):
        return None if self._state is None else self._state[0].size

    def _states(self, params):
        """The state arrays, zeros like ``params`` from the first step on."""
        if self._state is None:
            self._state = tuple(np.zeros_like(params) for _ in range(self._n_states))
        return self._state

    def _args(self, scale, n):
        # the slice params[lo:hi] as Python reads it (negative ends count
        # from the end, ends past n are clipped): the numba kernels index
        # without bounds checks
        lo, hi, _ = slice(*(int(i) for i in self.undecayed)).indices(n)
        return float(scale), float(self.weight_decay), lo, max(lo, hi)

    def _check_step(self, params, grad):
        """``grad`` as a float64 array, after refusing what the numba kernels
        would read or write out of bounds (or not update in place)."""
        if not (isinstance(params, np.ndarray) and params.ndim == 1
                and params.dtype.kind == "f"):
            raise TypeError(
                "params must be a 1-D float ndarray (updated in place), got "
                + (f"an array of dtype {params.dtype} and shape {params.shape}"
                   if isinstance(params, np.ndarray) else type(params).__name__) + "."
            )
        if not params.flags.writeable:
            raise ValueError("params must be writeable (it is updated in place).")
        return _check_grad(self, params, grad, self._state_size())

    def step(self, params, grad, *, scale=1.0, block=None):
        """Update ``params`` in place with ``scale * grad`` (+ decay); return it.

        Parameters
        ----------
        params : ndarray of float64 of shape (n_params,)
            Updated in place; the same size at every step (the moment
            estimates are per parameter).
        grad : array-like of float of shape (n_params,)
            Gradient of the objective.
        scale : float, default=1.0
            Factor of ``grad``.
        block : int, default=None
            Ignored (the minibatch index, for :class:`SAGA`'s interface).

        Returns
        -------
        params : ndarray

        Raises
        ------
        TypeError
            If ``params`` is not a 1-D float ndarray.
        ValueError
            If ``params`` is read-only, ``grad`` has another shape, or
            ``params`` has another size than at the first step.
        """
        grad = self._check_step(params, grad)
        self.t += 1
        self._update(params, grad, scale)
        return params


class SGD(_FusedStep):
    """Stochastic gradient descent with optional (heavy-ball) momentum.

    Steps on ``scale * grad + weight_decay * params`` (no decay on
    ``params[undecayed[0]:undecayed[1]]``).

    Parameters
    ----------
    learning_rate : float
        Step size, > 0.
    momentum : float, default=0.0
        Heavy-ball momentum in [0, 1).
    weight_decay : float, default=0.0
        Coefficient of the L2 term added to the gradient (the gradient of
        ``weight_decay / 2 * ||params||^2``).
    undecayed : (int, int) or None, default=None
        ``(lo, hi)``: the slice of ``params`` without decay (None: none).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.optim import SGD
    >>> x = np.array([1.0, -2.0])
    >>> opt = SGD(0.5)
    >>> for _ in range(30):
    ...     _ = opt.step(x, x)  # gradient of ||x||^2 / 2
    >>> bool(np.abs(x).max() < 1e-6)
    True
    """

    _n_states = 1  # the velocity

    def __init__(self, learning_rate, momentum=0.0, *, weight_decay=0.0, undecayed=None):
        super().__init__(learning_rate, weight_decay, undecayed)
        _check_real("momentum", momentum, 0.0, 1.0, high_open=True)
        self.momentum = momentum

    def _update(self, params, grad, scale):
        (velocity,) = self._states(params)
        _sgd_update(params, grad, *self._args(scale, params.size), velocity,
                    float(self.learning_rate), float(self.momentum))


class Adam(_FusedStep):
    """Adam (Kingma and Ba, 2015), on the gradient :class:`SGD` steps on.

    The bias corrections ``1 - beta**t`` are computed in Python (numba's
    float ** int multiplies by squaring and rounds differently).

    Parameters
    ----------
    learning_rate : float
        Step size, > 0.
    beta1, beta2 : float, default=0.9, 0.999
        Decay rates of the first and second moment estimates, in [0, 1).
    epsilon : float, default=1e-8
        Added to the denominator, >= 0.
    weight_decay, undecayed : float and (int, int) or None, default=0.0, None
        L2 coefficient and the slice without decay, as in :class:`SGD`.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.optim import Adam
    >>> x = np.array([1.0, -2.0, 5.0])
    >>> opt = Adam(0.1, weight_decay=1.0, undecayed=(2, 3))  # x[2] is a bias
    >>> for _ in range(300):
    ...     _ = opt.step(x, np.zeros(3))  # the L2 term alone pulls x[:2] to 0
    >>> bool(np.abs(x[:2]).max() < 1e-2), float(x[2])
    (True, 5.0)
    """

    _n_states = 2  # the first and second moment estimates

    def __init__(self, learning_rate, beta1=0.9, beta2=0.999, epsilon=1e-8, *,
                 weight_decay=0.0, undecayed=None):
        super().__init__(learning_rate, weight_decay, undecayed)
        _check_real("beta1", beta1, 0.0, 1.0, high_open=True)
        _check_real("beta2", beta2, 0.0, 1.0, high_open=True)
        _check_real("epsilon", epsilon, 0.0, None)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def _update(self, params, grad, scale):
        m, v = self._states(params)
        c1 = 1.0 - self.beta1**self.t
        c2 = 1.0 - self.beta2**self.t
        _adam_update(params, grad, *self._args(scale, params.size), m, v,
                     float(self.learning_rate), float(self.beta1), float(self.beta2),
                     float(self.epsilon), float(c1), float(c2))


class SAGA:
    """SAGA (Defazio, Bach and Lacoste-Julien, 2014) over a finite sum.

    The objective is ``sum_b f_b(x)`` over ``n_blocks`` blocks (minibatches of
    sequences with a fixed partition); ``step(params, grad, block=b)`` takes
    the gradient of block ``b`` alone (not rescaled) and applies the
    variance-reduced update
    ``x -= lr * (g_b - g_b_old + mean_g_old) * n_blocks``,
    i.e. an unbiased estimate of the full gradient whose variance vanishes at
    the optimum. Before every block has been seen, ``mean_g_old`` is the sum
    of the stored gradients divided by the number of blocks seen, the
    current one included (SAG's warm start: the first step is ``g_b``
    alone).

    Parameters
    ----------
    learning_rate : float
        Step size, > 0.
    n_blocks : int
        Number of blocks of the finite sum, >= 1.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.optim import SAGA
    >>> x = np.array([1.0, -2.0])
    >>> opt = SAGA(0.25, n_blocks=2)
    >>> for _ in range(60):
    ...     for b in range(2):
    ...         _ = opt.step(x, x / 2, block=b)  # two halves of ||x||^2 / 2
    >>> bool(np.abs(x).max() < 1e-6)
    True
    """

    fixed_blocks = True  # the blocks of the finite sum never change

    def __init__(self, learning_rate, n_blocks):
        _check_real("learning_rate", learning_rate, 0.0, None, low_open=True)
        if isinstance(n_blocks, bool) or not isinstance(n_blocks, Integral) or n_blocks < 1:
            raise ValueError(f"n_blocks must be an integer >= 1, got {n_blocks!r}.")
        self.learning_rate = learning_rate
        self.n_blocks = int(n_blocks)
        self.t = 0
        self._table = None
        self._mean = None
        self._seen = None

    def step(self, params, grad, *, scale=1.0, block=None):
        """Update ``params`` in place from block ``block``'s gradient; return it.

        Parameters
        ----------
        params, grad : ndarray of float64 of shape (n_params,)
            The parameters (updated in place) and the gradient of block
            ``block`` of the finite sum.
        scale : float, default=1.0
            Factor applied to ``grad`` before it enters the table.
        block : int
            Which block ``grad`` belongs to, in ``range(n_blocks)``
            (required: None raises a ValueError).

        Returns
        -------
        params : ndarray

        Raises
        ------
        ValueError
            If ``block`` is not an integer in ``range(n_blocks)``, ``grad``
            has another shape than ``params``, or ``params`` another size
            than at the first step.
        """
        if block is None:
            raise ValueError("SAGA.step needs the block of the gradient.")
        if (isinstance(block, bool) or not isinstance(block, Integral)
                or not 0 <= block < self.n_blocks):
            raise ValueError(
                f"block must be an integer in range({self.n_blocks}), got {block!r}."
            )
        grad = _check_grad(self, params, grad,
                           None if self._table is None else self._table.shape[1])
        if scale != 1.0:
            grad = scale * grad
        if self._table is None:
            self._table = np.zeros((self.n_blocks, params.size))
            self._mean = np.zeros(params.size)
            self._seen = np.zeros(self.n_blocks, dtype=bool)
        old = self._table[block]
        direction = grad - old + self._mean
        if not self._seen.all():
            seen = self._seen.copy()
            seen[block] = True
            direction = grad - old + self._mean * self.n_blocks / max(seen.sum(), 1)
            self._seen[block] = True
        self._mean += (grad - old) / self.n_blocks
        self._table[block] = grad
        self.t += 1
        params -= self.learning_rate * direction * self.n_blocks
        return params


def make_optimizer(name, learning_rate, n_blocks=None, *, weight_decay=0.0,
                   undecayed=None):
    """Create an optimiser by name.

    Parameters
    ----------
    name : {"adam", "sgd", "saga"}
        Which optimiser (``"sgd"`` has momentum 0.9).
    learning_rate : float
        Step size.
    n_blocks : int, default=None
        Number of minibatches of the finite sum (``"saga"`` only).
    weight_decay : float, default=0.0
        L2 coefficient added to the gradient (``"adam"``, ``"sgd"``).
    undecayed : (int, int) or None, default=None
        Slice of the parameters without decay (``"adam"``, ``"sgd"``).

    Returns
    -------
    optimizer : SGD, Adam or SAGA
    """
    if name == "adam":
        return Adam(learning_rate, weight_decay=weight_decay, undecayed=undecayed)
    if name == "sgd":
        return SGD(learning_rate, momentum=0.9, weight_decay=weight_decay,
                   undecayed=undecayed)
    if name == "saga":
        if n_blocks is None:
            raise ValueError("SAGA needs the number of blocks of the finite sum.")
        if weight_decay:
            raise ValueError("SAGA takes no weight_decay; add the penalty to grad.")
        return SAGA(learning_rate, n_blocks)
    raise ValueError(f"Unknown optimizer {name!r}; expected 'adam', 'sgd' or 'saga'.")


