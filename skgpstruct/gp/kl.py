"""KL terms of the variational posterior over inducing values and transitions.

Notation: ``K`` mixture components, ``V`` labels (one
GP each), ``M`` inducing points shared by the labels.

- **Whitening.** Every function takes the prior covariance ``Kzz`` (or its
  Cholesky factor) optionally: given, ``q_mu`` / ``q_sqrt`` describe the
  inducing values ``u_j`` directly and the prior is ``N(0, Kzz)`` per label;
  omitted, they describe whitened values ``v_j`` with ``u_j = Lzz v_j``
  (``Lzz = chol(Kzz)``) and prior ``N(0, I)``. The KL is the same number in
  both forms (KL is invariant under the invertible map), but the whitened
  prior does not depend on the kernel, so the whitened form is the default
  of :func:`init_variational_params` and the one we recommend.
- **Mean-field** (over labels): ``q(u) = sum_k pi_k prod_j N(u_j; m_kj, S_kj)``
  with ``q_mu`` of shape (K, V, M) and ``q_sqrt`` (K, V, M, M), ``S_kj =
  L_kj L_kj^T``, ``L_kj`` lower-triangular with positive diagonal.
- **Coupled**: each component is one Gaussian over all labels' values,
  stacked label-major (index ``j * M + p``, i.e. ``q_mu[k].ravel()``), with
  ``q_sqrt`` of shape (K, V*M, V*M); the prior is block-diagonal
  ``I_V (x) Kzz``. Functions tell the two apart by ``q_sqrt.ndim`` (4 or 3).
- **Mixture KL.** ``KL(q || p) = sum_k pi_k CE_k - H[q]`` with the exact
  cross-entropies ``CE_k = -E_{q_k} log p(u)`` and, for ``K > 1``, the
  entropy replaced by the lower bound (Huber et al., 2008)
  ``H[q] >= -sum_k pi_k log sum_l pi_l N(m_k; m_l, S_k + S_l)``, so the
  returned KL is an upper bound (and the ELBO stays a lower bound). For
  ``K = 1`` the exact Gaussian entropy is used.

Gradients are returned as dicts of arrays shaped like the inputs: with
respect to ``q_mu``, ``q_sqrt`` (lower triangle; zero above it),
``weights`` (partial derivatives treating each ``pi_k`` as free; the
:class:`~skgpstruct.gp.variational.VariationalLayout` maps them to logits) and ``K`` (the prior
covariance ``Kzz``, for the non-whitened form; contract it with
:func:`skgpstruct.gp.kernels.kernel_gradient_contract` to get the kernel
hyperparameter gradient).

Cost: the cross-entropy is ``O(K V M^3)`` non-whitened and ``O(K V M^2)``
whitened; the entropy bound is ``O(K^2 V M^3)`` mean-field and
``O(K^2 (V M)^3)`` coupled (the coupled form is for small ``V M``).
"""

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky, solve_triangular
from scipy.special import logsumexp

from .terms import jittered_cholesky
from .variational import _array, _check_sqrt, _check_weights

__all__ = [
    "gauss_kl",
    "mixture_entropy_bound",
    "mixture_kl",
    "transition_kl",
]

_LOG_2PI = np.log(2.0 * np.pi)


# --------------------------------------------------------------------------
# validation helpers


def _blocks(q_mu, q_sqrt):
    """Block views ``mu_b`` (K, B, d) and ``L_b`` (K, B, d, d): B = V,
    d = M mean-field and B = 1, d = V * M coupled (no checks)."""
    if q_sqrt.ndim == 4:
        return q_mu, q_sqrt
    K, V, M = q_mu.shape
    return q_mu.reshape(K, 1, V * M), q_sqrt[:, None]

def _check_posterior(q_mu, q_sqrt):
    """Validate shapes; return (q_mu, q_sqrt, mu_b, L_b) with block views.

    ``mu_b`` (K, B, d), ``L_b`` (K, B, d, d): B = V, d = M mean-field and
    B = 1, d = V * M coupled.
    """
    q_mu = _array(q_mu, "q_mu", 3)
    q_sqrt = np.asarray(q_sqrt, dtype=np.float64)
    K, V, M = q_mu.shape
    if q_sqrt.shape not in ((K, V, M, M), (K, V * M, V * M)):
        raise ValueError(
            f"q_sqrt must have shape (K, V, M, M) = {(K, V, M, M)} (mean-field) or "
            f"(K, V*M, V*M) = {(K, V * M, V * M)} (coupled) for q_mu of shape "
            f"{q_mu.shape}, got {q_sqrt.shape}."
        )
    if not np.all(np.isfinite(q_sqrt)):
        raise ValueError("q_sqrt contains NaN or infinite values.")
    _check_sqrt(q_sqrt)
    return (q_mu, q_sqrt) + _blocks(q_mu, q_sqrt)


def _prior_cholesky(K, K_cholesky, M):
    """Lower Cholesky factor of the prior covariance, or None (whitened)."""
    if K_cholesky is not None:
        Lk = _array(K_cholesky, "K_cholesky", 2)
        if Lk.shape != (M, M):
            raise ValueError(f"K_cholesky must have shape {(M, M)}, got {Lk.shape}.")
        _check_sqrt(Lk, "K_cholesky")
        return Lk
    if K is None:
        return None
    K = _array(K, "K", 2)
    if K.shape != (M, M):
        raise ValueError(f"K must have shape {(M, M)}, got {K.shape}.")
    try:
        return cholesky(K, lower=True)
    except LinAlgError as exc:
        raise ValueError(
            "K is not positive definite; add jitter to its diagonal."
        ) from exc




# --------------------------------------------------------------------------
# building blocks


def _cross_entropy(q_mu, q_sqrt, Lk, coef, need_grad):
    """Per-component ``CE_k = -E_{q_k}[log p(u)]`` and coef-weighted gradients.

    Mean-field and coupled alike: the rows of each label block of ``L_k``
    (``R_kj``, shape (M, c)) enter only through ``tr(Kzz^-1 R R^T)``.
    """
    K, V, M = q_mu.shape
    R = q_sqrt.reshape(K, V, M, -1)  # view; c = M or V * M
    c = R.shape[-1]
    ce = np.empty(K)
    d_mu = np.zeros_like(q_mu) if need_grad else None
    d_R = np.zeros_like(R) if need_grad else None
    d_K = np.zeros((M, M)) if (need_grad and Lk is not None) else None
    const = V * M * _LOG_2PI
    if Lk is not None:
        const += 2.0 * V * np.log(np.diagonal(Lk)).sum()
        Kinv = cho_solve((Lk, True), np.eye(M)) if need_grad else None
    for k in range(K):
        if Lk is None:
            ce[k] = 0.5 * (const + np.vdot(q_mu[k], q_mu[k]) + np.vdot(R[k], R[k]))
            if need_grad:
                d_mu[k] = coef[k] * q_mu[k]
                d_R[k] = coef[k] * R[k]
            continue
        A = solve_triangular(Lk, q_mu[k].T, lower=True)  # (M, V)
        Rk = R[k].transpose(1, 0, 2).reshape(M, V * c)
        B = solve_triangular(Lk, Rk, lower=True)
        ce[k] = 0.5 * (const + np.vdot(A, A) + np.vdot(B, B))
        if need_grad:
            Kinv_m = solve_triangular(Lk, A, lower=True, trans="T")
            Kinv_R = solve_triangular(Lk, B, lower=True, trans="T")
            d_mu[k] = coef[k] * Kinv_m.T
            d_R[k] = coef[k] * Kinv_R.reshape(M, V, c).transpose(1, 0, 2)
            d_K += 0.5 * coef[k] * (V * Kinv - Kinv_m @ Kinv_m.T - Kinv_R @ Kinv_R.T)
    if not need_grad:
        return ce, None
    d_sqrt = d_R.reshape(q_sqrt.shape)
    if Lk is not None:  # Kzz^-1 L is not triangular: keep the lower part
        d = q_sqrt.shape[-1]
        upper = np.triu_indices(d, 1)
        for block in d_sqrt.reshape(-1, d, d):
            block[upper] = 0.0
    return ce, {"q_mu": d_mu, "q_sqrt": d_sqrt, "K": d_K}


def _lower_cholesky(A):
    return cholesky(A, lower=True)


def _pair_logpdf(delta, Lk, Ll, need_grad):
    """``log N(delta; 0, Lk Lk^T + Ll Ll^T)`` and its gradients."""
    C = Lk @ Lk.T + Ll @ Ll.T
    # positive definite in exact arithmetic (the diagonals of Lk, Ll are
    # bounded away from 0 during fit); retried with jitter if rounding says not
    Lc = jittered_cholesky(C, 0.0, "The covariance of two mixture components' "
                           "difference", factor=_lower_cholesky)[0]
    alpha = cho_solve((Lc, True), delta)
    value = (
        -0.5 * delta.size * _LOG_2PI
        - np.log(np.diagonal(Lc)).sum()
        - 0.5 * np.dot(delta, alpha)
    )
    if not need_grad:
        return value, None
    # d/dC = (alpha alpha^T - C^-1) / 2 and d/dL = 2 (d/dC) L
    d = delta.size
    Cinv_L = cho_solve((Lc, True), np.hstack([Lk, Ll]))
    g_k = np.outer(alpha, Lk.T @ alpha) - Cinv_L[:, :d]
    g_l = np.outer(alpha, Ll.T @ alpha) - Cinv_L[:, d:]
    return value, (-alpha, np.tril(g_k), np.tril(g_l))


def _entropy(mu_b, L_b, weights, need_grad):
    """Entropy (K = 1) or its Jensen lower bound (K > 1), with gradients.

    The gradient w.r.t. ``L_b`` comes as ``d_diag`` (K, B, d), the part on
    the diagonals, plus ``d_L`` (K, B, d, d) from the pair terms (None for
    K = 1, so that no full-size array is allocated then).
    """
    K, B, d = mu_b.shape
    diag = np.diagonal(L_b, axis1=-2, axis2=-1)  # (K, B, d)
    log_diag = np.log(diag)
    d_mu = np.zeros_like(mu_b) if need_grad else None
    d_w = np.zeros(K) if need_grad else None
    if K == 1:
        H = 0.5 * B * d * (1.0 + _LOG_2PI) + log_diag.sum()
        return H, ((d_mu, None, 1.0 / diag, d_w) if need_grad else None)
    pairs = [(k, l) for k in range(K) for l in range(k + 1, K)]
    log_n = np.empty((K, K))
    log_n[np.diag_indices(K)] = -0.5 * B * d * np.log(4.0 * np.pi) - log_diag.sum(
        axis=(1, 2)
    )
    for k, l in pairs:
        log_n[k, l] = log_n[l, k] = sum(
            _pair_logpdf(mu_b[k, b] - mu_b[l, b], L_b[k, b], L_b[l, b], False)[0]
            for b in range(B)
        )
    a = np.log(weights)[None, :] + log_n
    lse = logsumexp(a, axis=1)
    H = -np.dot(weights, lse)
    if not need_grad:
        return H, None
    resp = np.exp(a - lse[:, None])  # resp[k, l], rows sum to 1
    coef = -weights[:, None] * resp  # dH / dlog_n[k, l] (ordered pair)
    d_w[:] = -lse - (weights[:, None] * resp).sum(axis=0) / weights
    d_diag = -np.diagonal(coef)[:, None, None] / diag
    d_L = np.zeros_like(L_b)
    for k, l in pairs:
        w = coef[k, l] + coef[l, k]
        for b in range(B):
            _, (g_delta, g_k, g_l) = _pair_logpdf(
                mu_b[k, b] - mu_b[l, b], L_b[k, b], L_b[l, b], True
            )
            d_mu[k, b] += w * g_delta
            d_mu[l, b] -= w * g_delta
            d_L[k, b] += w * g_k
            d_L[l, b] += w * g_l
    return H, (d_mu, d_L, d_diag, d_w)


def _add_entropy_grad(d_sqrt, sign, d_L, d_diag):
    """``d_sqrt += sign * (d_L + diag(d_diag))`` in place, on block views."""
    K, B, d = d_diag.shape
    blocks = d_sqrt.reshape(K, B, d, d)
    if d_L is not None:
        blocks += sign * d_L
    idx = np.arange(d)
    blocks[..., idx, idx] += sign * d_diag
    return d_sqrt


# --------------------------------------------------------------------------
# public KL terms


def gauss_kl(q_mu, q_sqrt, K=None, *, K_cholesky=None, return_grad=False):
    """KL divergence between Gaussians and a shared zero-mean prior.

    ``sum_b KL(N(q_mu[b], q_sqrt[b] q_sqrt[b]^T) || N(0, K))``; with ``K``
    and ``K_cholesky`` both None the prior is ``N(0, I)`` (whitened), as
    GPflow's ``gauss_kl`` (whose ``q_mu`` is (M, B); ours is batch-first).

    Parameters
    ----------
    q_mu : array-like of shape (B, M) or (M,)
        Means.
    q_sqrt : array-like of shape (B, M, M) or (M, M)
        Lower-triangular Cholesky factors with positive diagonal.
    K : array-like of shape (M, M), default=None
        Prior covariance (e.g. ``Kzz`` with jitter).
    K_cholesky : array-like of shape (M, M), default=None
        Its lower Cholesky factor, used instead of ``K`` when given.
    return_grad : bool, default=False
        Whether to also return the gradients.

    Returns
    -------
    kl : float
        Sum of the KL divergences.
    grad : dict
        Only if ``return_grad``: ``"q_mu"``, ``"q_sqrt"`` (shapes of the
        inputs) and, for a non-whitened prior, ``"K"`` (M, M).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp.kl import gauss_kl
    >>> round(gauss_kl(np.ones(2), np.eye(2)), 6)
    1.0
    """
    q_mu = np.asarray(q_mu, dtype=np.float64)
    q_sqrt = np.asarray(q_sqrt, dtype=np.float64)
    single = q_mu.ndim == 1
    if single:
        q_mu, q_sqrt = q_mu[None], q_sqrt[None]
    if q_mu.ndim != 2 or q_sqrt.shape != q_mu.shape + (q_mu.shape[1],):
        raise ValueError(
            "q_mu must have shape (B, M) or (M,) and q_sqrt (B, M, M) or (M, M); "
            f"got {np.shape(q_mu)} and {np.shape(q_sqrt)}."
        )
    mu3, L4 = q_mu[:, None, :], q_sqrt[:, None]
    _check_posterior(mu3, L4)
    Lk = _prior_cholesky(K, K_cholesky, q_mu.shape[1])
    n = q_mu.shape[0]
    ce, g = _cross_entropy(mu3, L4, Lk, np.ones(n), return_grad)
    M = q_mu.shape[1]
    H = 0.5 * n * M * (1.0 + _LOG_2PI) + np.log(np.diagonal(q_sqrt, 0, 1, 2)).sum()
    kl = float(ce.sum() - H)
    if not return_grad:
        return kl
    idx = np.arange(M)
    d_sqrt = g["q_sqrt"][:, 0]
    d_sqrt[:, idx, idx] -= 1.0 / q_sqrt[:, idx, idx]  # exact entropy's part
    grad = {"q_mu": g["q_mu"][:, 0], "q_sqrt": d_sqrt}
    if single:
        grad = {key: val[0] for key, val in grad.items()}
    if Lk is not None:
        grad["K"] = g["K"]
    return kl, grad


def mixture_entropy_bound(q_mu, q_sqrt, weights=None, *, return_grad=False):
    """Entropy of the mixture posterior (exact for K = 1, else a lower bound).

    ``-sum_k pi_k log sum_l pi_l N(m_k; m_l, S_k + S_l)`` for ``K > 1``.

    Parameters
    ----------
    q_mu : array-like of shape (K, V, M)
        Means.
    q_sqrt : array-like of shape (K, V, M, M) or (K, V*M, V*M)
        Cholesky factors, mean-field or coupled (see the module docstring).
    weights : array-like of shape (K,), default=None
        Mixture weights (positive, summing to 1); None means uniform.
    return_grad : bool, default=False
        Whether to also return the gradients.

    Returns
    -------
    entropy : float
        The entropy (K = 1) or its lower bound.
    grad : dict
        Only if ``return_grad``: ``"q_mu"``, ``"q_sqrt"``, ``"weights"``.
    """
    q_mu, q_sqrt, mu_b, L_b = _check_posterior(q_mu, q_sqrt)
    w = _check_weights(weights, q_mu.shape[0])
    H, g = _entropy(mu_b, L_b, w, return_grad)
    if not return_grad:
        return float(H)
    d_mu, d_L, d_diag, d_w = g
    d_sqrt = _add_entropy_grad(np.zeros(q_sqrt.shape), 1.0, d_L, d_diag)
    return float(H), {
        "q_mu": d_mu.reshape(q_mu.shape),
        "q_sqrt": d_sqrt,
        "weights": d_w,
    }


def mixture_kl(
    q_mu, q_sqrt, weights=None, K=None, *, K_cholesky=None, return_grad=False
):
    """KL of the mixture posterior over inducing values from the GP prior.

    ``sum_k pi_k CE_k - H``, with exact cross-entropies and the entropy of
    :func:`mixture_entropy_bound` (exact for K = 1, so the result is then
    the exact KL; for K > 1 it is an upper bound on the KL).

    Parameters
    ----------
    q_mu : array-like of shape (K, V, M)
        Means.
    q_sqrt : array-like of shape (K, V, M, M) or (K, V*M, V*M)
        Cholesky factors, mean-field or coupled.
    weights : array-like of shape (K,), default=None
        Mixture weights; None means uniform.
    K : array-like of shape (M, M), default=None
        Prior covariance ``Kzz`` of each label's GP; None with
        ``K_cholesky`` None means whitened (prior ``N(0, I)``).
    K_cholesky : array-like of shape (M, M), default=None
        Lower Cholesky factor of ``K``, used instead of ``K`` when given.
    return_grad : bool, default=False
        Whether to also return the gradients.

    Returns
    -------
    kl : float
        The KL (bound).
    grad : dict
        Only if ``return_grad``: ``"q_mu"``, ``"q_sqrt"``, ``"weights"`` and,
        non-whitened, ``"K"``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp.kl import mixture_kl, gauss_kl
    >>> q_mu, q_sqrt = np.ones((1, 2, 3)), np.tile(np.eye(3), (1, 2, 1, 1))
    >>> bool(np.isclose(mixture_kl(q_mu, q_sqrt), gauss_kl(q_mu[0], q_sqrt[0])))
    True
    """
    q_mu, q_sqrt, _, _ = _check_posterior(q_mu, q_sqrt)
    w = _check_weights(weights, q_mu.shape[0])
    Lk = _prior_cholesky(K, K_cholesky, q_mu.shape[2])
    return _mixture_kl(q_mu, q_sqrt, w, Lk, return_grad)


def _mixture_kl(q_mu, q_sqrt, w, Lk=None, return_grad=False):
    """:func:`mixture_kl` on valid float64 inputs (no checks): for
    parameters that come from :meth:`VariationalLayout.unpack`."""
    mu_b, L_b = _blocks(q_mu, q_sqrt)
    ce, g_ce = _cross_entropy(q_mu, q_sqrt, Lk, w, return_grad)
    H, g_h = _entropy(mu_b, L_b, w, return_grad)
    kl = float(np.dot(w, ce) - H)
    if not return_grad:
        return kl
    d_mu, d_L, d_diag, d_w = g_h
    grad = {
        "q_mu": g_ce["q_mu"] - d_mu.reshape(q_mu.shape),
        "q_sqrt": _add_entropy_grad(g_ce["q_sqrt"], -1.0, d_L, d_diag),
        "weights": ce - d_w,
    }
    if Lk is not None:
        grad["K"] = g_ce["K"]
    return kl, grad


def transition_kl(m_bin, s_bin, prior_var=1.0, *, return_grad=False):
    """KL of the diagonal Gaussian over transitions from ``N(0, prior_var I)``.

    Parameters
    ----------
    m_bin : array-like of shape (V, V)
        Means of the transition weights.
    s_bin : array-like of shape (V, V)
        Their variances (positive).
    prior_var : float, default=1.0
        Prior variance (1 in the GPstruct papers).
    return_grad : bool, default=False
        Whether to also return the gradients.

    Returns
    -------
    kl : float
        ``0.5 * sum(s / p + m^2 / p - 1 - log(s / p))``.
    grad : dict
        Only if ``return_grad``: ``"m_bin"`` and ``"s_bin"`` (w.r.t. the
        variances themselves).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp.kl import transition_kl
    >>> transition_kl(np.zeros((2, 2)), np.ones((2, 2)))
    0.0
    """
    m = _array(m_bin, "m_bin", 2)
    s = _array(s_bin, "s_bin", 2)
    if m.shape != s.shape or m.shape[0] != m.shape[1]:
        raise ValueError(f"m_bin and s_bin must be (V, V), got {m.shape}, {s.shape}.")
    if np.any(s <= 0):
        raise ValueError("s_bin must be positive.")
    if not (np.isfinite(prior_var) and prior_var > 0):
        raise ValueError(f"prior_var must be positive, got {prior_var!r}.")
    p = float(prior_var)
    kl = 0.5 * float(np.sum(s / p + m * m / p - 1.0 - np.log(s / p)))
    if not return_grad:
        return kl
    return kl, {"m_bin": m / p, "s_bin": 0.5 * (1.0 / p - 1.0 / s)}
