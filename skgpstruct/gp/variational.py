"""Variational parameters of GPStructTagger and their flat layout.

Notation: ``K`` mixture components, ``V`` labels (one
GP each), ``M`` inducing points shared by the labels.

- **Mean-field** (over labels): ``q(u) = sum_k pi_k prod_j N(u_j; m_kj, S_kj)``
  with ``q_mu`` of shape (K, V, M) and ``q_sqrt`` (K, V, M, M), ``S_kj =
  L_kj L_kj^T``, ``L_kj`` lower-triangular with positive diagonal.
- **Coupled**: each component is one Gaussian over all labels' values,
  stacked label-major (index ``j * M + p``, i.e. ``q_mu[k].ravel()``), with
  ``q_sqrt`` of shape (K, V*M, V*M). Functions tell the two apart by
  ``q_sqrt.ndim`` (4 or 3).
- **Whitening**: the estimator stores whitened values ``v_j = Lzz^-1 u_j``
  (prior ``N(0, I)``); :func:`init_variational_params` makes either form.

:class:`VariationalLayout` maps the parameters (and, optionally, kernel
hyperparameters appended as one more slice) to the flat unconstrained
vector the optimisers work on. The KL terms are in :mod:`skgpstruct.gp.kl`.
"""

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve, solve_triangular
from scipy.special import logsumexp
from sklearn.utils import check_random_state

__all__ = [
    "VariationalParams",
    "VariationalLayout",
    "init_variational_params",
    "mean_field_to_coupled",
]


# --------------------------------------------------------------------------
# validation helpers


def _array(a, name, ndim):
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return a


def _check_sqrt(L, name="q_sqrt"):
    """Lower-triangular with a positive diagonal (checked block by block)."""
    d = L.shape[-1]
    if L.shape[-2] != d:
        raise ValueError(f"{name} must hold square matrices, got shape {L.shape}.")
    if np.any(np.diagonal(L, axis1=-2, axis2=-1) <= 0):
        raise ValueError(f"{name} must have a positive diagonal.")
    for block in L.reshape(-1, d, d):
        if np.any(np.triu(block, 1)):
            raise ValueError(f"{name} must be lower-triangular.")


def _check_weights(weights, n_components):
    if weights is None:
        return np.full(n_components, 1.0 / n_components)
    w = _array(weights, "weights", 1)
    if w.shape != (n_components,):
        raise ValueError(f"weights must have shape ({n_components},), got {w.shape}.")
    if np.any(w <= 0) or abs(w.sum() - 1.0) > 1e-8:
        raise ValueError("weights must be positive and sum to 1.")
    return w




def mean_field_to_coupled(q_sqrt):
    """Block-diagonal coupled Cholesky factors from mean-field ones.

    Parameters
    ----------
    q_sqrt : array-like of shape (K, V, M, M)
        Mean-field factors.

    Returns
    -------
    q_sqrt_coupled : ndarray of shape (K, V*M, V*M)
        ``blockdiag(q_sqrt[k, 0], ..., q_sqrt[k, V-1])`` per component; with
        the same ``q_mu`` it describes the same distribution.
    """
    L = _array(q_sqrt, "q_sqrt", 4)
    K, V, M, _ = L.shape
    out = np.zeros((K, V * M, V * M))
    for j in range(V):
        out[:, j * M : (j + 1) * M, j * M : (j + 1) * M] = L[:, j]
    return out



# --------------------------------------------------------------------------
# parameters, flat layout and initialisation


def layout_slices(sizes):
    """``(slices, size)`` of consecutive blocks of a flat vector, from
    ``(name, length)`` pairs in order."""
    slices, start = {}, 0
    for name, n in sizes:
        slices[name] = slice(start, start + n)
        start += n
    return slices, start


@dataclass
class VariationalParams:
    """Parameters of ``q(u)`` (mixture over inducing values) and ``q(f_bin)``.

    Attributes
    ----------
    q_mu : ndarray of shape (K, V, M)
        Means (whitened or not: see the module docstring).
    q_sqrt : ndarray of shape (K, V, M, M) or (K, V*M, V*M)
        Lower-triangular Cholesky factors, mean-field or coupled.
    weights : ndarray of shape (K,)
        Mixture weights ``pi``.
    m_bin : ndarray of shape (V, V)
        Means of the transition weights.
    s_bin : ndarray of shape (V, V)
        Variances of the transition weights.
    """

    q_mu: np.ndarray
    q_sqrt: np.ndarray
    weights: np.ndarray
    m_bin: np.ndarray
    s_bin: np.ndarray


#: Bounds on ``log`` of the diagonal of the whitened ``q_sqrt``: standard
#: deviations from ``exp(-12.5)`` (a posterior 1e11 times narrower than the
#: prior in variance) to ``exp(1.5)`` (20 times wider).
LOG_SQRT_DIAG_BOUNDS = (-12.5, 1.5)
#: Bound on the absolute value of the off-diagonal entries of ``q_sqrt``.
SQRT_OFFDIAG_BOUND = float(np.exp(1.5))
#: Bounds on ``log s_bin - log max(tau^2, 1)``.
LOG_S_BIN_BOUNDS = (-25.0, 3.0)
#: Bound on the absolute value of the mixture logits.
LOGIT_BOUND = 30.0


class VariationalLayout:
    """Map :class:`VariationalParams` to a flat float64 vector and back.

    The flat vector (for scipy's L-BFGS) is unconstrained and holds, in this
    order, each block in C order:

    1. ``q_mu``: ``K * V * M`` entries;
    2. ``q_sqrt``: per component (and per label, mean-field) the lower
       triangle in ``np.tril_indices`` order (row by row), diagonal entries
       as their logarithms: ``K * V * M (M + 1) / 2`` entries mean-field,
       ``K * VM (VM + 1) / 2`` coupled;
    3. only if ``learn_weights``: ``K - 1`` logits ``eta`` with
       ``pi = softmax([eta, 0])``; otherwise the weights are fixed uniform;
    4. ``m_bin``: ``V * V`` entries;
    5. ``log(s_bin)``: ``V * V`` entries;
    6. ``hyperparameters``: ``n_hyperparameters`` entries, stored as given
       (e.g. a kernel's ``theta``, already in log space); empty by default.

    ``unpack(pack(p))`` returns ``p`` and ``pack(unpack(x))`` returns ``x``,
    exactly except for one rounding of ``exp`` / ``log`` in the positive
    entries (diagonals, weights, ``s_bin``; about 1e-16 relative).

    Parameters
    ----------
    n_components : int
        Number of mixture components ``K``.
    n_classes : int
        Number of labels ``V``.
    n_inducing : int
        Number of inducing points ``M``.
    coupled : bool, default=False
        Coupled (one Gaussian over all labels) instead of mean-field.
    learn_weights : bool, default=False
        Whether the mixture weights are free parameters (through logits).
    n_hyperparameters : int, default=0
        Length of the trailing hyperparameter slice.

    Attributes
    ----------
    size : int
        Length of the flat vector (hyperparameters included).
    slices : dict of str to slice
        Where each block lies in the flat vector (``"q_mu"``, ``"q_sqrt"``,
        ``"weights"``, ``"m_bin"``, ``"s_bin"``, ``"hyperparameters"``).

    Examples
    --------
    >>> from skgpstruct.gp.variational import VariationalLayout, init_variational_params
    >>> import numpy as np
    >>> layout = VariationalLayout(1, 2, 3)
    >>> params = init_variational_params(np.full((3, 2), 0.5), whiten=False)
    >>> x = layout.pack(params)
    >>> x.size == layout.size == 6 + 2 * 6 + 4 + 4
    True
    >>> VariationalLayout(1, 2, 3, n_hyperparameters=2).slices["hyperparameters"]
    slice(26, 28, None)
    """

    def __init__(self, n_components, n_classes, n_inducing, *, coupled=False,
                 learn_weights=False, n_hyperparameters=0):
        for name, v, low in (("n_components", n_components, 1),
                             ("n_classes", n_classes, 1),
                             ("n_inducing", n_inducing, 1),
                             ("n_hyperparameters", n_hyperparameters, 0)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                kind = "positive" if low else "non-negative"
                raise ValueError(f"{name} must be a {kind} integer, got {v!r}.")
        self.n_components, self.n_classes = int(n_components), int(n_classes)
        self.n_inducing = int(n_inducing)
        self.coupled, self.learn_weights = bool(coupled), bool(learn_weights)
        self.n_hyperparameters = int(n_hyperparameters)
        K, V, M = self.n_components, self.n_classes, self.n_inducing
        d = V * M if self.coupled else M
        self._sqrt_shape = (K, d, d) if self.coupled else (K, V, M, M)
        self._rows, self._cols = np.tril_indices(d)
        self._diag_pos = np.flatnonzero(self._rows == self._cols)
        sizes = [
            ("q_mu", K * V * M),
            ("q_sqrt", int(np.prod(self._sqrt_shape[:-2])) * self._rows.size),
            ("weights", K - 1 if self.learn_weights else 0),
            ("m_bin", V * V),
            ("s_bin", V * V),
            ("hyperparameters", self.n_hyperparameters),
        ]
        self.slices, self.size = layout_slices(sizes)

    def _check(self, params):
        K, V, M = self.n_components, self.n_classes, self.n_inducing
        shapes = {
            "q_mu": (K, V, M),
            "q_sqrt": self._sqrt_shape,
            "weights": (K,),
            "m_bin": (V, V),
            "s_bin": (V, V),
        }
        for name, shape in shapes.items():
            if np.shape(getattr(params, name)) != shape:
                raise ValueError(
                    f"params.{name} has shape {np.shape(getattr(params, name))}, "
                    f"the layout expects {shape}."
                )
        _check_sqrt(np.asarray(params.q_sqrt, dtype=np.float64), "params.q_sqrt")
        w = _check_weights(params.weights, K)
        if not self.learn_weights and not np.allclose(w, 1.0 / K, rtol=1e-12, atol=0):
            raise ValueError("weights are fixed uniform (learn_weights=False).")
        if np.any(np.asarray(params.s_bin) <= 0):
            raise ValueError("params.s_bin must be positive.")

    def _check_x(self, x):
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.size,):
            raise ValueError(f"x must have shape ({self.size},), got {x.shape}.")
        return x

    def pack(self, params, hyperparameters=None):
        """Flatten parameters (and hyperparameters) into a vector of shape (size,).

        Parameters
        ----------
        params : VariationalParams
            Valid parameters of this layout's shapes.
        hyperparameters : array-like of shape (n_hyperparameters,), default=None
            The trailing slice; required when ``n_hyperparameters > 0``.

        Returns
        -------
        x : ndarray of shape (size,)
        """
        self._check(params)
        x = np.empty(self.size)
        sl = self.slices
        x[sl["q_mu"]] = np.ravel(params.q_mu)
        tri = np.asarray(params.q_sqrt, dtype=np.float64)[..., self._rows, self._cols]
        tri[..., self._diag_pos] = np.log(tri[..., self._diag_pos])
        x[sl["q_sqrt"]] = tri.ravel()
        if self.learn_weights:
            logw = np.log(np.asarray(params.weights, dtype=np.float64))
            x[sl["weights"]] = logw[:-1] - logw[-1]
        x[sl["m_bin"]] = np.ravel(params.m_bin)
        x[sl["s_bin"]] = np.log(np.ravel(params.s_bin))
        if self.n_hyperparameters:
            h = np.ravel(np.asarray(hyperparameters, dtype=np.float64))
            if h.shape != (self.n_hyperparameters,):
                raise ValueError(
                    f"hyperparameters must have {self.n_hyperparameters} entries, "
                    f"got shape {np.shape(hyperparameters)}."
                )
            x[sl["hyperparameters"]] = h
        return x

    def unpack(self, x):
        """Rebuild :class:`VariationalParams` from a vector of shape (size,).

        The result is valid by construction (lower-triangular factors with
        positive diagonals, weights on the simplex, positive ``s_bin``), so
        internal callers need not check it again. The hyperparameter slice
        is ``x[layout.slices["hyperparameters"]]``.

        Parameters
        ----------
        x : array-like of float of shape (size,)
            The flat vector (as :meth:`pack` makes it).

        Returns
        -------
        params : VariationalParams
        """
        x = self._check_x(x)
        K, V, M = self.n_components, self.n_classes, self.n_inducing
        sl = self.slices
        tri = x[sl["q_sqrt"]].reshape(self._sqrt_shape[:-2] + (-1,)).copy()
        tri[..., self._diag_pos] = np.exp(tri[..., self._diag_pos])
        q_sqrt = np.zeros(self._sqrt_shape)
        q_sqrt[..., self._rows, self._cols] = tri
        if self.learn_weights:
            eta = np.append(x[sl["weights"]], 0.0)
            weights = np.exp(eta - logsumexp(eta))
        else:
            weights = np.full(K, 1.0 / K)
        return VariationalParams(
            q_mu=x[sl["q_mu"]].reshape(K, V, M).copy(),
            q_sqrt=q_sqrt,
            weights=weights,
            m_bin=x[sl["m_bin"]].reshape(V, V).copy(),
            s_bin=np.exp(x[sl["s_bin"]]).reshape(V, V),
        )

    def box(self, transition_prior_var=1.0):
        """Bounds ``(low, high)`` of the flat vector's variational entries.

        Whitened, the prior of the inducing values is ``N(0, I)``, and a
        posterior wider than the prior only lowers the ELBO; the box keeps
        every step of a line search (or of a stochastic optimiser, projected
        onto it) where ``exp`` cannot overflow and the covariances stay
        factorisable: ``log`` of the diagonals of ``q_sqrt`` within
        :data:`LOG_SQRT_DIAG_BOUNDS`, its off-diagonal entries within
        ``+-`` :data:`SQRT_OFFDIAG_BOUND`, ``log s_bin`` within
        :data:`LOG_S_BIN_BOUNDS` of ``log max(tau^2, 1)``, the mixture logits
        within ``+-`` :data:`LOGIT_BOUND`; means free; the hyperparameters
        free (the caller bounds them).

        Parameters
        ----------
        transition_prior_var : float, default=1.0
            Prior variance ``tau^2`` of the transition weights.

        Returns
        -------
        low, high : ndarray of shape (size,)
            ``-inf`` / ``inf`` where an entry is free.
        """
        low, high = np.full(self.size, -np.inf), np.full(self.size, np.inf)
        sl = self.slices
        n_tri = self._rows.size
        diag = np.zeros(n_tri, dtype=bool)
        diag[self._diag_pos] = True
        diag = np.tile(diag, (sl["q_sqrt"].stop - sl["q_sqrt"].start) // n_tri)
        q_low = np.where(diag, LOG_SQRT_DIAG_BOUNDS[0], -SQRT_OFFDIAG_BOUND)
        q_high = np.where(diag, LOG_SQRT_DIAG_BOUNDS[1], SQRT_OFFDIAG_BOUND)
        low[sl["q_sqrt"]], high[sl["q_sqrt"]] = q_low, q_high
        low[sl["weights"]], high[sl["weights"]] = -LOGIT_BOUND, LOGIT_BOUND
        log_tau2 = np.log(max(float(transition_prior_var), 1.0))
        low[sl["s_bin"]] = log_tau2 + LOG_S_BIN_BOUNDS[0]
        high[sl["s_bin"]] = log_tau2 + LOG_S_BIN_BOUNDS[1]
        return low, high

    def pack_gradient(self, params, grad, *, check=True):
        """Chain-rule gradients w.r.t. the parameters into the flat vector.

        Parameters
        ----------
        params : VariationalParams
            The point at which the gradients were taken.
        grad : dict
            Gradients w.r.t. ``"q_mu"``, ``"q_sqrt"`` (lower triangle),
            ``"weights"`` (partials w.r.t. each ``pi_k``), ``"m_bin"``,
            ``"s_bin"`` (w.r.t. the variances) and ``"hyperparameters"``
            (w.r.t. the stored slice itself); missing keys count as zero,
            and ``"K"`` (a prior-covariance gradient, which belongs to the
            kernel, not to this vector) is ignored.
        check : bool, default=True
            Validate ``params``; False for parameters that come from
            :meth:`unpack` (valid by construction).

        Returns
        -------
        grad_flat : ndarray of shape (size,)
            Gradient w.r.t. the flat vector of :meth:`pack`.
        """
        known = {"q_mu", "q_sqrt", "weights", "m_bin", "s_bin", "hyperparameters", "K"}
        unknown = set(grad) - known
        if unknown:
            raise ValueError(f"Unknown gradient keys: {sorted(unknown)}.")
        if check:
            self._check(params)
        out = np.zeros(self.size)
        sl = self.slices
        if grad.get("q_mu") is not None:
            out[sl["q_mu"]] = np.ravel(grad["q_mu"])
        if grad.get("q_sqrt") is not None:
            g = np.asarray(grad["q_sqrt"])[..., self._rows, self._cols]
            L = np.asarray(params.q_sqrt)[..., self._rows, self._cols]
            g[..., self._diag_pos] *= L[..., self._diag_pos]
            out[sl["q_sqrt"]] = g.ravel()
        if self.learn_weights and grad.get("weights") is not None:
            w, g = np.asarray(params.weights), np.asarray(grad["weights"])
            out[sl["weights"]] = (w * (g - np.dot(w, g)))[:-1]
        if grad.get("m_bin") is not None:
            out[sl["m_bin"]] = np.ravel(grad["m_bin"])
        if grad.get("s_bin") is not None:
            out[sl["s_bin"]] = np.ravel(grad["s_bin"]) * np.ravel(params.s_bin)
        if self.n_hyperparameters and grad.get("hyperparameters") is not None:
            out[sl["hyperparameters"]] = np.ravel(grad["hyperparameters"])
        return out


def _whitened_means(Lzz, u, ridge):
    """``Lzz^T (Lzz Lzz^T + lam I)^-1 u^T`` (rows of ``u``: labels),
    ``lam = ridge * mean(diag(Lzz Lzz^T))``."""
    if not (np.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"init_ridge must be a finite float >= 0, got {ridge!r}.")
    if ridge == 0:
        return solve_triangular(Lzz, u.T, lower=True).T
    Kzz = Lzz @ Lzz.T
    lam = ridge * float(np.mean(np.diagonal(Kzz)))
    Kzz[np.diag_indices_from(Kzz)] += lam
    return (Lzz.T @ cho_solve(cho_factor(Kzz, lower=True), u.T)).T


def init_variational_params(
    label_fractions,
    n_components=1,
    *,
    whiten=True,
    kzz_cholesky=None,
    coupled=False,
    mean_scale=1.0,
    sqrt_scale=1.0,
    s_bin_init=1.0,
    mean_noise=0.1,
    init_ridge=1e-2,
    random_state=None,
):
    """Initial parameters from the inducing points' label fractions.

    Following Galliani et al. (2017, supplementary 6.1), the mean of label
    ``j``'s GP at inducing point ``p`` starts from the fraction of ``p``'s
    cluster carrying label ``j``: ``u_jp = mean_scale * (F[p, j] - 1 / V)``
    (centred over labels, which a CRF cannot tell apart from ``F`` itself
    but which keeps the KL small). Whitened, the stored means are the
    posterior means of ``Lzz^-1 u_j`` given ``u_j`` observed with noise
    variance ``lam = init_ridge * mean(diag Kzz)``:
    ``v_j = Lzz^T (Kzz + lam I)^-1 u_j``. With ``lam = 0`` that is
    ``Lzz^-1 u_j``, whose norm (the KL) explodes when ``Kzz`` is
    ill-conditioned (a low-rank kernel, close inducing points): 100 per
    entry on 4 dense features, an initial ELBO of -1.5e5 and a first line
    search step out of range.

    Parameters
    ----------
    label_fractions : array-like of shape (M, V)
        As returned by :func:`skgpstruct.gp.inducing.init_inducing_points`.
    n_components : int, default=1
        Number of mixture components ``K``.
    whiten : bool, default=True
        Whether to store whitened means (then ``kzz_cholesky`` is required).
    kzz_cholesky : array-like of shape (M, M), default=None
        Lower Cholesky factor of ``Kzz`` (with jitter).
    coupled : bool, default=False
        Return coupled ``q_sqrt`` of shape (K, V*M, V*M).
    mean_scale : float, default=1.0
        Scale of the initial means.
    sqrt_scale : float, default=1.0
        ``q_sqrt`` starts at ``sqrt_scale * I`` (whitened and ``1.0``: the
        posterior covariance starts at the prior's).
    s_bin_init : float, default=1.0
        Initial transition variances (1: the papers' prior).
    mean_noise : float, default=0.1
        For ``K > 1``, standard deviation of Gaussian noise added to every
        component's means so that components can separate.
    init_ridge : float, default=1e-2
        Whitened only: noise variance of the observed label fractions,
        relative to the mean prior variance at the inducing points (0: the
        exact ``Lzz^-1 u_j``).
    random_state : int, RandomState instance or None, default=None
        Seed of that noise.

    Returns
    -------
    params : VariationalParams
        Uniform weights and zero transition means.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp.variational import init_variational_params
    >>> p = init_variational_params(np.array([[1.0, 0.0], [0.25, 0.75]]), whiten=False)
    >>> p.q_mu  # (K, V, M): label 0 at both inducing points, then label 1
    array([[[ 0.5 , -0.25],
            [-0.5 ,  0.25]]])
    """
    F = _array(label_fractions, "label_fractions", 2)
    M, V = F.shape
    K = int(n_components)
    if K < 1:
        raise ValueError(f"n_components must be >= 1, got {n_components!r}.")
    for name, v in (("sqrt_scale", sqrt_scale), ("s_bin_init", s_bin_init)):
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be positive, got {v!r}.")
    u = mean_scale * (F - F.mean(axis=1, keepdims=True)).T  # (V, M)
    if whiten:
        if kzz_cholesky is None:
            raise ValueError("whiten=True needs kzz_cholesky (chol of Kzz).")
        Lzz = _array(kzz_cholesky, "kzz_cholesky", 2)
        if Lzz.shape != (M, M):
            raise ValueError(f"kzz_cholesky must have shape {(M, M)}, got {Lzz.shape}.")
        _check_sqrt(Lzz, "kzz_cholesky")
        u = _whitened_means(Lzz, u, init_ridge)
    q_mu = np.repeat(u[None], K, axis=0)
    if K > 1:
        rng = check_random_state(random_state)
        q_mu = q_mu + mean_noise * rng.standard_normal(q_mu.shape)
    q_sqrt = np.tile(sqrt_scale * np.eye(M), (K, V, 1, 1))
    if coupled:
        q_sqrt = mean_field_to_coupled(q_sqrt)
    return VariationalParams(
        q_mu=q_mu,
        q_sqrt=q_sqrt,
        weights=np.full(K, 1.0 / K),
        m_bin=np.zeros((V, V)),
        s_bin=np.full((V, V), float(s_bin_init)),
    )
