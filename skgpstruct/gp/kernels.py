"""Kernels on dense and scipy.sparse token features, with their gradients.

The kernels are :class:`sklearn.gaussian_process.kernels.Kernel` subclasses,
so ``theta``, ``bounds``, ``get_params``, ``set_params``, ``clone`` and
``GridSearchCV`` over ``kernel__<param>`` work as for sklearn's own kernels.
Unlike sklearn's, they

- accept scipy.sparse matrices (converted to CSR) as well as dense arrays for
  both ``X`` and ``Y`` (inner products and squared norms are computed
  sparse-friendly; nothing of shape ``(n_samples, n_features)`` is densified),
- return the gradient with respect to ``theta`` also for a cross-covariance
  ``k(X, Y)`` (``eval_gradient=True`` with ``Y`` given), as the sparse GP needs
  ``d k(X_n, Z) / d theta``,
- contract that gradient with a weight matrix without building the
  ``(n_X, n_Y, n_theta)`` tensor (:meth:`LinearKernel.gradient_contract`).

:func:`kernel_gradient_contract` does the same for any sklearn kernel (see
its Notes for how).

Gradients are with respect to ``theta``, the logarithms of the non-fixed
hyperparameters, in the order of ``kernel.hyperparameters`` (alphabetical, as
in sklearn): ``LinearKernel`` -> (bias, variance), ``RBFKernel`` ->
(length_scale, variance).
"""

from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.gaussian_process.kernels import Hyperparameter, Kernel, Product, Sum
from sklearn.utils import check_array

__all__ = [
    "LinearKernel",
    "RBFKernel",
    "kernel_gradient_contract",
]


def _check_X(X, name="X"):
    """Validate a feature matrix: float64 ndarray or CSR matrix, 2-D, finite."""
    if X is None:
        raise TypeError(f"{name} must be a 2-D array or sparse matrix, got None.")
    return check_array(
        X, accept_sparse="csr", dtype=np.float64, input_name=name, ensure_min_samples=1
    )


def _check_XY(X, Y):
    X = _check_X(X)
    if Y is None:
        return X, None
    Y = _check_X(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"X and Y have different numbers of features: {X.shape[1]} and "
            f"{Y.shape[1]}."
        )
    return X, Y


def _inner(X, Y):
    """Dense ndarray ``X @ Y.T`` for any mix of dense / CSR inputs."""
    if sp.issparse(X):
        if sp.issparse(Y):
            return (X @ Y.T).toarray()
        return np.asarray(X @ Y.T)
    if sp.issparse(Y):
        return np.asarray(Y @ X.T).T
    return X @ Y.T


def _row_sqnorms(X):
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", X, X)


def _col_scale(X, scale):
    """``X * scale`` column-wise (``scale`` of shape (n_features,))."""
    if sp.issparse(X):
        return sp.csr_matrix(X @ sp.diags(scale))
    return X * scale


def _check_G(G, shape, name="G"):
    G = np.asarray(G, dtype=np.float64)
    if G.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {G.shape}.")
    return G


class _ContractKernel(Kernel):
    """Shared machinery of the kernels of this module (not public).

    Subclasses implement ``_diag(X)``, ``_parts(X, Y, same)`` -> (K, cache),
    ``_param_grad(name, cache)`` -> dK/dlog(param) of shape (n_X, n_Y) or
    (n_X, n_Y, n_elements) and ``_param_contract(name, cache, G)``.
    """

    def _free_hyperparameters(self):
        return [h for h in self.hyperparameters if not h.fixed]

    @property
    def theta(self):
        """Log-transformed non-fixed hyperparameters, ndarray of shape (n_dims,).

        Raises a ValueError if a non-fixed hyperparameter is not positive (its
        logarithm is undefined); fix it with ``<name>_bounds="fixed"``.
        """
        for h in self._free_hyperparameters():
            value = np.asarray(getattr(self, h.name), dtype=np.float64)
            if np.any(value <= 0) or not np.all(np.isfinite(value)):
                raise ValueError(
                    f"{type(self).__name__}.{h.name}={value!r} must be positive and "
                    f"finite to be learnt on the log scale; set "
                    f"{h.name}_bounds='fixed' to keep it fixed."
                )
        return Kernel.theta.fget(self)

    @theta.setter
    def theta(self, theta):
        Kernel.theta.fset(self, theta)

    def __call__(self, X, Y=None, eval_gradient=False):
        """Return the kernel ``k(X, Y)`` and optionally its gradient.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples_X, n_features)
            Left argument.
        Y : {array-like, sparse matrix} of shape (n_samples_Y, n_features), \
                default=None
            Right argument. If None, ``k(X, X)`` is evaluated.
        eval_gradient : bool, default=False
            Whether to also return the gradient with respect to ``theta``;
            allowed also when ``Y`` is given (unlike sklearn's kernels).

        Returns
        -------
        K : ndarray of shape (n_samples_X, n_samples_Y)
            Kernel matrix.
        K_gradient : ndarray of shape (n_samples_X, n_samples_Y, n_dims)
            Gradient of ``K`` with respect to ``theta`` (the logarithms of
            the non-fixed hyperparameters). Only returned when
            ``eval_gradient`` is True.
        """
        X, Y = _check_XY(X, Y)
        K, cache = self._parts(X, X if Y is None else Y, Y is None)
        if not eval_gradient:
            return K
        grads = []
        for h in self._free_hyperparameters():
            dK = self._param_grad(h.name, cache)
            grads.append(dK if dK.ndim == 3 else dK[:, :, None])
        if not grads:
            return K, np.empty((K.shape[0], K.shape[1], 0))
        return K, np.concatenate(grads, axis=2)

    def gradient_contract(self, X, Y, G):
        """Contract the gradient of ``k(X, Y)`` with a weight matrix.

        Computes ``sum_ab G[a, b] * dK[a, b] / dtheta`` without building the
        ``(n_samples_X, n_samples_Y, n_dims)`` gradient tensor; memory is
        ``O(n_samples_X * n_samples_Y)``, like ``G`` itself.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples_X, n_features)
            Left argument.
        Y : {array-like, sparse matrix} of shape (n_samples_Y, n_features) or None
            Right argument; None means ``k(X, X)``.
        G : array-like of shape (n_samples_X, n_samples_Y)
            Weights, typically ``dF / dK`` of some scalar ``F``.

        Returns
        -------
        grad : ndarray of shape (n_dims,)
            ``dF / dtheta`` by the chain rule.
        """
        X, Y = _check_XY(X, Y)
        Yv = X if Y is None else Y
        G = _check_G(G, (X.shape[0], Yv.shape[0]))
        _, cache = self._parts(X, Yv, Y is None)
        out = [
            np.atleast_1d(self._param_contract(h.name, cache, G))
            for h in self._free_hyperparameters()
        ]
        return np.concatenate(out) if out else np.empty(0)

    def diag(self, X):
        """Return the diagonal of ``k(X, X)`` without computing ``k(X, X)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Argument of the kernel.

        Returns
        -------
        K_diag : ndarray of shape (n_samples,)
            ``k(x, x)`` for each row.
        """
        return self._diag(_check_X(X))


class LinearKernel(_ContractKernel):
    r"""Linear (dot-product) kernel ``k(x, x') = variance * <x, x'> + bias``.

    The kernel of the GPstruct papers (``variance=1, bias=0``, with
    ``1e-4 I`` jitter added to the training Gram matrix by the caller). It
    accepts dense arrays and scipy.sparse matrices; with sparse binary token
    features the Gram matrix costs one sparse matrix product.

    Parameters
    ----------
    variance : float, default=1.0
        Scale of the inner product (prior variance of the weights).
    bias : float, default=0.0
        Constant added to every entry (prior variance of an offset).
    variance_bounds : pair of floats >= 0 or "fixed", default=(1e-5, 1e5)
        Bounds on ``variance``; "fixed" removes it from ``theta``.
    bias_bounds : pair of floats >= 0 or "fixed", default="fixed"
        Bounds on ``bias``. Fixed by default: the default ``bias=0`` cannot
        be learnt on the log scale (``theta`` raises a ValueError if a
        non-fixed hyperparameter is not positive).

    See Also
    --------
    sklearn.gaussian_process.kernels.DotProduct : the dense sklearn analogue;
        ``LinearKernel(v, b)`` equals ``ConstantKernel(v) * DotProduct(sqrt(b / v))``.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from skgpstruct.gp.kernels import LinearKernel
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]))
    >>> kernel = LinearKernel(variance=2.0)
    >>> kernel(X)
    array([[4., 2.],
           [2., 4.]])
    >>> kernel.theta
    array([0.69314718])
    """

    def __init__(
        self, variance=1.0, bias=0.0, variance_bounds=(1e-5, 1e5), bias_bounds="fixed"
    ):
        self.variance = variance
        self.bias = bias
        self.variance_bounds = variance_bounds
        self.bias_bounds = bias_bounds

    @property
    def hyperparameter_variance(self):
        """The :class:`~sklearn.gaussian_process.kernels.Hyperparameter` of
        ``variance`` (searched within ``variance_bounds``)."""
        return Hyperparameter("variance", "numeric", self.variance_bounds)

    @property
    def hyperparameter_bias(self):
        """The :class:`~sklearn.gaussian_process.kernels.Hyperparameter` of
        ``bias`` (searched within ``bias_bounds``)."""
        return Hyperparameter("bias", "numeric", self.bias_bounds)

    def _check_values(self):
        for name in ("variance", "bias"):
            value = getattr(self, name)
            if not isinstance(value, Real) or not np.isfinite(value) or value < 0:
                raise ValueError(
                    f"LinearKernel.{name} must be a finite float >= 0, got {value!r}."
                )
        return float(self.variance), float(self.bias)

    def _parts(self, X, Y, same):
        v, b = self._check_values()
        P = _inner(X, Y)
        return v * P + b, (P, v, b)

    def _param_grad(self, name, cache):
        P, v, b = cache
        if name == "variance":
            return v * P
        return np.full(P.shape, b)

    def _param_contract(self, name, cache, G):
        P, v, b = cache
        if name == "variance":
            return v * np.vdot(G, P)
        return b * G.sum()

    def _diag(self, X):
        v, b = self._check_values()
        return v * _row_sqnorms(X) + b

    def is_stationary(self):
        """Whether the kernel is stationary (sklearn's kernel API).

        Returns
        -------
        stationary : bool
            False: the linear kernel depends on the inputs, not only on
            their difference.
        """
        return False

    def __repr__(self):
        return f"LinearKernel(variance={self.variance:.3g}, bias={self.bias:.3g})"


class RBFKernel(_ContractKernel):
    r"""Squared-exponential kernel with a variance.

    ``k(x, x') = variance * exp(-0.5 * ||(x - x') / length_scale||^2)``, with
    squared distances computed as ``||x||^2 + ||x'||^2 - 2 <x, x'>`` (so
    sparse inputs stay sparse) and clipped at 0; ``k(X)`` has an exact
    diagonal.

    Parameters
    ----------
    length_scale : float or ndarray of shape (n_features,), default=1.0
        Length scale; an array gives one per feature (anisotropic).
    variance : float, default=1.0
        Prior variance ``k(x, x)``.
    length_scale_bounds : pair of floats >= 0 or "fixed", default=(1e-5, 1e5)
        Bounds on ``length_scale``.
    variance_bounds : pair of floats >= 0 or "fixed", default=(1e-5, 1e5)
        Bounds on ``variance``.

    See Also
    --------
    sklearn.gaussian_process.kernels.RBF : the dense sklearn analogue;
        ``RBFKernel(l, v)`` equals ``ConstantKernel(v) * RBF(l)``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp.kernels import RBFKernel
    >>> kernel = RBFKernel(length_scale=1.0, variance=2.0)
    >>> K, dK = kernel(np.array([[0.0], [1.0]]), np.array([[0.0]]), eval_gradient=True)
    >>> K.ravel()
    array([2.        , 1.21306132])
    >>> dK.shape
    (2, 1, 2)
    """

    def __init__(
        self,
        length_scale=1.0,
        variance=1.0,
        length_scale_bounds=(1e-5, 1e5),
        variance_bounds=(1e-5, 1e5),
    ):
        self.length_scale = length_scale
        self.variance = variance
        self.length_scale_bounds = length_scale_bounds
        self.variance_bounds = variance_bounds

    @property
    def anisotropic(self):
        """Whether ``length_scale`` has one entry per feature."""
        return np.iterable(self.length_scale) and len(self.length_scale) > 1

    @property
    def hyperparameter_length_scale(self):
        """The :class:`~sklearn.gaussian_process.kernels.Hyperparameter` of
        ``length_scale`` (one entry per feature when anisotropic)."""
        if self.anisotropic:
            return Hyperparameter(
                "length_scale",
                "numeric",
                self.length_scale_bounds,
                len(self.length_scale),
            )
        return Hyperparameter("length_scale", "numeric", self.length_scale_bounds)

    @property
    def hyperparameter_variance(self):
        """The :class:`~sklearn.gaussian_process.kernels.Hyperparameter` of
        ``variance`` (searched within ``variance_bounds``)."""
        return Hyperparameter("variance", "numeric", self.variance_bounds)

    def _length_scale(self, n_features):
        ls = np.atleast_1d(np.asarray(self.length_scale, dtype=np.float64)).ravel()
        if np.any(ls <= 0) or not np.all(np.isfinite(ls)):
            raise ValueError(
                f"RBFKernel.length_scale must be positive and finite, got "
                f"{self.length_scale!r}."
            )
        if ls.size > 1 and ls.size != n_features:
            raise ValueError(
                f"RBFKernel has {ls.size} length scales but X has {n_features} "
                "features."
            )
        v = self.variance
        if not isinstance(v, Real) or not np.isfinite(v) or v <= 0:
            raise ValueError(f"RBFKernel.variance must be a positive float, got {v!r}.")
        return ls, float(v)

    def _parts(self, X, Y, same):
        ls, v = self._length_scale(X.shape[1])
        if ls.size > 1:
            Xs, Ys = _col_scale(X, 1.0 / ls), _col_scale(Y, 1.0 / ls)
        else:
            Xs, Ys = X * (1.0 / ls[0]), Y * (1.0 / ls[0])
        xx = _row_sqnorms(Xs)
        yy = xx if same else _row_sqnorms(Ys)
        D2 = xx[:, None] + yy[None, :] - 2.0 * _inner(Xs, Ys)
        np.maximum(D2, 0.0, out=D2)
        if same:
            np.fill_diagonal(D2, 0.0)
        K = v * np.exp(-0.5 * D2)
        return K, (K, D2, Xs, Ys, ls.size > 1)

    def _param_grad(self, name, cache):
        K, D2, Xs, Ys, aniso = cache
        if name == "variance":
            return K.copy()
        if not aniso:
            return K * D2
        Xd = Xs.toarray() if sp.issparse(Xs) else Xs
        Yd = Ys.toarray() if sp.issparse(Ys) else Ys
        return K[:, :, None] * (Xd[:, None, :] - Yd[None, :, :]) ** 2

    def _param_contract(self, name, cache, G):
        K, D2, Xs, Ys, aniso = cache
        W = G * K
        if name == "variance":
            return W.sum()
        if not aniso:
            return np.vdot(W, D2)
        # sum_ab W_ab (x_ad - y_bd)^2, per feature d, in row chunks of X so
        # that no dense (chunk, n_features) block exceeds ~2**22 entries.
        Xsq = Xs.multiply(Xs) if sp.issparse(Xs) else Xs * Xs
        Ysq = Ys.multiply(Ys) if sp.issparse(Ys) else Ys * Ys
        out = np.asarray(Xsq.T @ W.sum(axis=1)).ravel()
        out += np.asarray(Ysq.T @ W.sum(axis=0)).ravel()
        step = max(1, (1 << 22) // max(1, Xs.shape[1]))
        for start in range(0, Xs.shape[0], step):
            Wc = W[start : start + step]
            WY = np.asarray((Ys.T @ Wc.T).T)  # (chunk, n_features), dense
            Xc = Xs[start : start + step]
            prod = Xc.multiply(WY) if sp.issparse(Xc) else Xc * WY
            out -= 2.0 * np.asarray(prod.sum(axis=0)).ravel()
        return out

    def _diag(self, X):
        _, v = self._length_scale(X.shape[1])
        return np.full(X.shape[0], v)

    def is_stationary(self):
        """Whether the kernel is stationary (sklearn's kernel API).

        Returns
        -------
        stationary : bool
            True: the RBF kernel depends only on ``x - x'``.
        """
        return True

    def __repr__(self):
        if self.anisotropic:
            ls = "[{}]".format(", ".join(f"{x:.3g}" for x in self.length_scale))
        else:
            ls = f"{np.ravel(self.length_scale)[0]:.3g}"
        return f"RBFKernel(length_scale={ls}, variance={self.variance:.3g})"


def _stack(X, Y):
    if sp.issparse(X) or sp.issparse(Y):
        return sp.vstack([sp.csr_matrix(X), sp.csr_matrix(Y)], format="csr")
    return np.vstack([np.asarray(X), np.asarray(Y)])


def _n_rows(X):
    return X.shape[0] if hasattr(X, "shape") else len(X)


def kernel_gradient_contract(kernel, X, Y, G, *, max_elements=2**24, eps=1e-5):
    """``sum_ab G[a, b] * d k(X, Y)[a, b] / dtheta`` for any kernel.

    Parameters
    ----------
    kernel : sklearn Kernel
        A kernel of this module, an sklearn kernel, or sums / products of
        them.
    X : {array-like, sparse matrix} of shape (n_samples_X, n_features)
        Left argument.
    Y : {array-like, sparse matrix} of shape (n_samples_Y, n_features) or None
        Right argument; None means ``k(X, X)`` (so a ``WhiteKernel`` counts).
    G : array-like of shape (n_samples_X, n_samples_Y)
        Weights, typically ``dF / dK``.
    max_elements : int, default=2**24
        Largest gradient tensor (entries) the sklearn fallback may build
        before it switches to finite differences.
    eps : float, default=1e-5
        Step in ``theta`` of the finite-difference fallback.

    Returns
    -------
    grad : ndarray of shape (kernel.n_dims,)
        Contracted gradient, in the order of ``kernel.theta``.

    Notes
    -----
    Kernels with a ``gradient_contract`` method (:class:`LinearKernel`,
    :class:`RBFKernel`) use it (exact, no 3-D tensor). ``Sum`` and
    ``Product`` recurse into their parts (a product weights each part's
    contraction with the other part's kernel matrix). Any other kernel
    (sklearn's ``RBF``, ``ConstantKernel``, ``WhiteKernel``, ...):

    - ``Y`` None: sklearn's analytic ``kernel(X, eval_gradient=True)``;
    - ``Y`` given: sklearn's analytic gradient on the stacked inputs
      ``[X; Y]``, of which the ``(X, Y)`` block is kept, provided the
      ``(n_X + n_Y)^2 * n_dims`` tensor has at most ``max_elements`` entries;
    - beyond that, central finite differences in ``theta`` with step
      ``eps`` (``2 * n_dims`` kernel evaluations; relative error about
      ``1e-9``).

    sklearn's vector kernels need dense ``X`` and ``Y``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF
    >>> from skgpstruct.gp.kernels import kernel_gradient_contract
    >>> X, Z = np.array([[0.0], [1.0]]), np.array([[0.5]])
    >>> kernel_gradient_contract(RBF(1.0), X, Z, np.ones((2, 1)))
    array([0.44124845])
    """
    if hasattr(kernel, "gradient_contract"):
        return kernel.gradient_contract(X, Y, G)
    n_y = _n_rows(X) if Y is None else _n_rows(Y)
    G = _check_G(G, (_n_rows(X), n_y))
    if isinstance(kernel, Sum):
        return np.concatenate(
            [
                kernel_gradient_contract(k, X, Y, G, max_elements=max_elements, eps=eps)
                for k in (kernel.k1, kernel.k2)
            ]
        )
    if isinstance(kernel, Product):
        K1, K2 = kernel.k1(X, Y), kernel.k2(X, Y)
        kw = dict(max_elements=max_elements, eps=eps)
        return np.concatenate(
            [
                kernel_gradient_contract(kernel.k1, X, Y, G * K2, **kw),
                kernel_gradient_contract(kernel.k2, X, Y, G * K1, **kw),
            ]
        )
    theta = kernel.theta
    if theta.size == 0:
        return np.empty(0)
    n_x = _n_rows(X)
    if (n_x + (0 if Y is None else n_y)) ** 2 * theta.size <= max_elements:
        if Y is None:
            _, dK = kernel(X, eval_gradient=True)
        else:
            _, dK = kernel(_stack(X, Y), eval_gradient=True)
            dK = dK[:n_x, n_x:]
        return np.einsum("ab,abp->p", G, dK)
    out = np.empty(theta.size)
    for i in range(theta.size):
        step = np.zeros_like(theta)
        step[i] = eps
        Kp = kernel.clone_with_theta(theta + step)(X, Y)
        Km = kernel.clone_with_theta(theta - step)(X, Y)
        out[i] = np.vdot(G, Kp - Km) / (2.0 * eps)
    return out
