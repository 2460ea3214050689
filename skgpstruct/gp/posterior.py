"""Variational posterior over the inducing values: parameters and KL terms.

Notation (DESIGN.md section 4): ``K`` mixture components, ``V`` labels (one
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
:class:`VariationalLayout` maps them to logits) and ``K`` (the prior
covariance ``Kzz``, for the non-whitened form; contract it with
:func:`skgpstruct.gp.kernels.kernel_gradient_contract` to get the kernel
hyperparameter gradient).

Cost: the cross-entropy is ``O(K V M^3)`` non-whitened and ``O(K V M^2)``
whitened; the entropy bound is ``O(K^2 V M^3)`` mean-field and
``O(K^2 (V M)^3)`` coupled (the coupled form is for small ``V M``).
"""

from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky, solve_triangular
from scipy.special import logsumexp
from sklearn.utils import check_random_state

__all__ = [
    "VariationalParams",
    "VariationalLayout",
    "init_variational_params",
    "gauss_kl",
    "mixture_entropy_bound",
    "mixture_kl",
    "transition_kl",
    "mean_field_to_coupled",
]

_LOG_2PI = np.log(2.0 * np.pi)


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


def _check_posterior(q_mu, q_sqrt):
    """Validate shapes; return (q_mu, q_sqrt, mu_b, L_b) with block views.

    ``mu_b`` (K, B, d), ``L_b`` (K, B, d, d): B = V, d = M mean-field and
    B = 1, d = V * M coupled.
    """
    q_mu = _array(q_mu, "q_mu", 3)
    q_sqrt = np.asarray(q_sqrt, dtype=np.float64)
    K, V, M = q_mu.shape
    if q_sqrt.ndim == 4 and q_sqrt.shape == (K, V, M, M):
        mu_b, L_b = q_mu, q_sqrt
    elif q_sqrt.ndim == 3 and q_sqrt.shape == (K, V * M, V * M):
        mu_b, L_b = q_mu.reshape(K, 1, V * M), q_sqrt[:, None]
    else:
        raise ValueError(
            f"q_sqrt must have shape (K, V, M, M) = {(K, V, M, M)} (mean-field) or "
            f"(K, V*M, V*M) = {(K, V * M, V * M)} (coupled) for q_mu of shape "
            f"{q_mu.shape}, got {q_sqrt.shape}."
        )
    if not np.all(np.isfinite(q_sqrt)):
        raise ValueError("q_sqrt contains NaN or infinite values.")
    _check_sqrt(q_sqrt)
    return q_mu, q_sqrt, mu_b, L_b


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


def _pair_logpdf(delta, Lk, Ll, need_grad):
    """``log N(delta; 0, Lk Lk^T + Ll Ll^T)`` and its gradients."""
    C = Lk @ Lk.T + Ll @ Ll.T
    Lc = cholesky(C, lower=True)
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
    >>> from skgpstruct.gp.posterior import gauss_kl
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
    >>> from skgpstruct.gp.posterior import mixture_kl, gauss_kl
    >>> q_mu, q_sqrt = np.ones((1, 2, 3)), np.tile(np.eye(3), (1, 2, 1, 1))
    >>> bool(np.isclose(mixture_kl(q_mu, q_sqrt), gauss_kl(q_mu[0], q_sqrt[0])))
    True
    """
    q_mu, q_sqrt, mu_b, L_b = _check_posterior(q_mu, q_sqrt)
    w = _check_weights(weights, q_mu.shape[0])
    Lk = _prior_cholesky(K, K_cholesky, q_mu.shape[2])
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
    >>> from skgpstruct.gp.posterior import transition_kl
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
    5. ``log(s_bin)``: ``V * V`` entries.

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

    Attributes
    ----------
    size : int
        Length of the flat vector.
    slices : dict of str to slice
        Where each block lies in the flat vector.

    Examples
    --------
    >>> from skgpstruct.gp.posterior import VariationalLayout, init_variational_params
    >>> import numpy as np
    >>> layout = VariationalLayout(1, 2, 3)
    >>> params = init_variational_params(np.full((3, 2), 0.5), whiten=False)
    >>> x = layout.pack(params)
    >>> x.size == layout.size == 6 + 2 * 6 + 4 + 4
    True
    """

    def __init__(
        self, n_components, n_classes, n_inducing, *, coupled=False, learn_weights=False
    ):
        for name, v in (
            ("n_components", n_components),
            ("n_classes", n_classes),
            ("n_inducing", n_inducing),
        ):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}.")
        self.n_components, self.n_classes = int(n_components), int(n_classes)
        self.n_inducing = int(n_inducing)
        self.coupled, self.learn_weights = bool(coupled), bool(learn_weights)
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
        ]
        self.slices, start = {}, 0
        for name, n in sizes:
            self.slices[name] = slice(start, start + n)
            start += n
        self.size = start

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

    def pack(self, params):
        """Flatten parameters into a vector of shape (size,)."""
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
        return x

    def unpack(self, x):
        """Rebuild :class:`VariationalParams` from a vector of shape (size,)."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.size,):
            raise ValueError(f"x must have shape ({self.size},), got {x.shape}.")
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

    def pack_gradient(self, params, grad):
        """Chain-rule gradients w.r.t. the parameters into the flat vector.

        Parameters
        ----------
        params : VariationalParams
            The point at which the gradients were taken.
        grad : dict
            Gradients w.r.t. ``"q_mu"``, ``"q_sqrt"`` (lower triangle),
            ``"weights"`` (partials w.r.t. each ``pi_k``), ``"m_bin"``,
            ``"s_bin"`` (w.r.t. the variances); missing keys count as zero,
            and ``"K"`` (a prior-covariance gradient, which belongs to the
            kernel, not to this vector) is ignored.

        Returns
        -------
        grad_flat : ndarray of shape (size,)
            Gradient w.r.t. the flat vector of :meth:`pack`.
        """
        unknown = set(grad) - {"q_mu", "q_sqrt", "weights", "m_bin", "s_bin", "K"}
        if unknown:
            raise ValueError(f"Unknown gradient keys: {sorted(unknown)}.")
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
        return out


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
    random_state=None,
):
    """Initial parameters from the inducing points' label fractions.

    Following Galliani et al. (2017, supplementary 6.1), the mean of label
    ``j``'s GP at inducing point ``p`` starts from the fraction of ``p``'s
    cluster carrying label ``j``: ``u_jp = mean_scale * (F[p, j] - 1 / V)``
    (centred over labels, which a CRF cannot tell apart from ``F`` itself
    but which keeps the KL small). Whitened, the stored means are
    ``v_j = Lzz^-1 u_j``.

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
    random_state : int, RandomState instance or None, default=None
        Seed of that noise.

    Returns
    -------
    params : VariationalParams
        Uniform weights and zero transition means.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp.posterior import init_variational_params
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
        u = solve_triangular(Lzz, u.T, lower=True).T
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
