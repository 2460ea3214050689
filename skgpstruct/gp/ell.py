"""Expected log-likelihood of GPStructTagger and its gradient estimators.

``ELL_n = sum_k pi_k E_{q_k}[log p(y_n | f_n, B)]``, estimated from the
samples of :mod:`skgpstruct.gp.sampling` (``S`` per component), sequences
processed in length buckets (:mod:`skgpstruct.gp._elbo_grads`). Three
pieces: sampling (:func:`_bucket_samples`), and one gradient estimator per
``gradient=``:

- ``"pathwise"`` (:func:`_pathwise_bucket`): with ``eps`` fixed the sample
  average is a smooth deterministic function; ``d log p / dF`` from the
  likelihood is backpropagated through ``F = b + C eps``, the Cholesky
  factor ``C`` (Murray, 2016) and the sparse-GP algebra into the
  variational parameters and, optionally, the kernel matrices. It equals
  finite differences of the fixed-sample objective, so L-BFGS can optimise
  that objective directly.
- ``"score"`` (:func:`_score_bucket`): the gray-box estimator of the paper
  (supplementary D), which needs ``log p`` values only:
  ``E_q[grad log q(f) log p(y | f)]`` with the control variate
  ``h = grad log q`` and per-coordinate coefficient
  ``a = Cov(g, h) / Var(h)``, cross-fitted over two halves of the samples
  (each half corrected with the other half's ``a``: unbiased, unlike the
  same-sample coefficient, which is correlated with the sample mean of
  ``h``; ``S = 1`` gives ``a = 0``). ``grad_b log N = Sigma^-1 (f - b)``,
  ``grad_Sigma log N = (Sigma^-1 (f - b) (f - b)^T Sigma^-1 - Sigma^-1) / 2``;
  the gradients w.r.t. ``(b, Sigma)`` then follow the same chain rule as
  the pathwise ones.

All gradients are of ``values.sum()``. Gradients with respect to symmetric
matrices (``Kzz``, each ``Knn`` block) are symmetric and meant to be
contracted entry by entry with ``dK / dtheta`` (see
:func:`~skgpstruct.gp.terms.kernel_matrix_grads_to_theta`).
"""

import numpy as np

from .._utils.parallel import small_blas
from . import _elbo_grads as _g
from .sampling import _check_draws, _sample_unary
from .terms import _posterior_shape, jittered_cholesky
from .variational import VariationalParams

__all__ = ["expected_log_likelihood"]

_GRADIENTS = ("pathwise", "score")


def _check_params(params, M):
    """Shapes and finiteness of the variational parameters."""
    if not isinstance(params, VariationalParams):
        raise TypeError(
            f"params must be a VariationalParams, got {type(params).__name__}."
        )
    q_mu = np.asarray(params.q_mu, dtype=np.float64)
    q_sqrt = np.asarray(params.q_sqrt, dtype=np.float64)
    K, V, _ = _posterior_shape(q_mu, q_sqrt, M, prefix="params.")
    if np.triu(q_sqrt, 1).any():
        raise ValueError("params.q_sqrt must be lower-triangular.")
    w = np.asarray(params.weights, dtype=np.float64)
    if w.shape != (K,) or np.any(w < 0) or abs(w.sum() - 1.0) > 1e-8:
        raise ValueError(
            f"params.weights must be {K} non-negative numbers summing to 1, got {w!r}."
        )
    m_bin = np.asarray(params.m_bin, dtype=np.float64)
    s_bin = np.asarray(params.s_bin, dtype=np.float64)
    if m_bin.shape != (V, V) or s_bin.shape != (V, V):
        raise ValueError(
            f"params.m_bin and params.s_bin must have shape {(V, V)}, got "
            f"{m_bin.shape} and {s_bin.shape}."
        )
    if np.any(s_bin <= 0):
        raise ValueError("params.s_bin must be positive.")
    arrays = {"q_mu": q_mu, "q_sqrt": q_sqrt, "m_bin": m_bin, "s_bin": s_bin}
    for name, a in arrays.items():
        if not np.all(np.isfinite(a)):
            raise ValueError(f"params.{name} contains NaN or infinite values.")
    return VariationalParams(q_mu, q_sqrt, w, m_bin, s_bin)


def _check_likelihood(likelihood, gradient, return_grad, log_scale, hyperparameters):
    if not callable(getattr(likelihood, "log_prob_many", None)):
        raise TypeError(
            "likelihood must be a Likelihood object (skgpstruct.likelihoods; "
            f"resolve names with get_likelihood), got {likelihood!r}."
        )
    if gradient not in _GRADIENTS:
        raise ValueError(f"gradient must be one of {_GRADIENTS}, got {gradient!r}.")
    if return_grad and gradient == "pathwise" and not likelihood.has_gradient:
        raise ValueError(
            f"{type(likelihood).__name__} provides log p values only; use "
            "gradient='score'."
        )
    if log_scale is None:
        return
    if not np.isfinite(log_scale):
        raise ValueError(f"log_scale must be finite, got {log_scale!r}.")
    if return_grad and not likelihood.has_gradient:
        raise ValueError(
            f"{type(likelihood).__name__} provides log p values only: the "
            "kernel scale cannot be learned with it."
        )
    if hyperparameters:
        raise ValueError(
            "log_scale is for fixed kernel terms; with hyperparameters=True "
            "learn the kernel's own amplitude instead."
        )


def _check_labels(y_flat, N, V):
    y_flat = np.asarray(y_flat)
    if y_flat.dtype.kind not in "iu" or y_flat.shape != (N,):
        raise ValueError(
            f"y_flat must be {N} integer labels (one per token), got {y_flat.dtype} "
            f"array of shape {y_flat.shape}."
        )
    if y_flat.min() < -1 or y_flat.max() >= V:
        raise ValueError(f"y_flat must lie in [0, {V}) (-1: an unknown label).")
    return y_flat.astype(np.int64)


def expected_log_likelihood(
    likelihood,
    terms,
    y_flat,
    params,
    eps,
    eps_bin,
    *,
    gradient="pathwise",
    return_grad=True,
    hyperparameters=False,
    log_scale=None,
):
    """Monte Carlo expected log-likelihood of each sequence, with gradients.

    Parameters
    ----------
    likelihood : Likelihood
        The structured likelihood object (see :mod:`skgpstruct.likelihoods`;
        ``skgpstruct.likelihoods.get_likelihood`` resolves names).
    terms : GPTerms
        Kernel quantities of the sequences
        (:func:`~skgpstruct.gp.terms.compute_gp_terms`).
    y_flat : array-like of int of shape (n_tokens,)
        Encoded labels in ``[0, V)``, sequences stacked.
    params : VariationalParams
        Whitened variational parameters (mean-field or coupled ``q_sqrt``).
    eps : list of ndarray of shape (K, S, V, T_n)
        Standard normals of :func:`~skgpstruct.gp.sampling.draw_normals`.
    eps_bin : list of ndarray of shape (K, S, V, V)
        Standard normals for the transitions.
    gradient : {"pathwise", "score"}, default="pathwise"
        Gradient estimator (see the module docstring). "pathwise" needs a
        likelihood with ``has_gradient``.
    return_grad : bool, default=True
        Whether to return gradients.
    hyperparameters : bool, default=False
        Whether to also return the gradients w.r.t. the kernel matrices.
    log_scale : float, default=None
        If given, the kernel of ``terms`` is multiplied by ``exp(log_scale)``
        (``terms`` stay those of the unscaled kernel): every sampled ``F``
        is multiplied by ``exp(log_scale / 2)``, since in the whitened
        parametrisation ``b`` and ``chol(Sigma_n)`` scale with the square
        root of the kernel (and the jitter with the kernel). With
        ``return_grad``, ``grad["log_scale"]`` is its derivative, a
        pathwise estimate (``0.5 * mean <d log p / dF, F>``) whichever
        ``gradient`` is chosen; it needs a likelihood with
        ``has_gradient``.

    Returns
    -------
    values : ndarray of shape (n_sequences,)
        ``sum_k pi_k mean_s log p(y_n | F_ks, B_ks)``.
    grad : dict
        Only if ``return_grad``: gradients of ``values.sum()`` w.r.t.
        ``"q_mu"`` (K, V, M), ``"q_sqrt"`` (lower triangle; shape of
        ``q_sqrt``), ``"weights"`` (K,) (partial derivatives, each ``pi_k``
        free), ``"m_bin"`` (V, V), ``"s_bin"`` (V, V) (w.r.t. the
        variances) and, with ``hyperparameters``, ``"Knz"`` (n_tokens, M),
        ``"Knn"`` (list of symmetric (T_n, T_n)) and ``"Kzz"`` (M, M,
        symmetric): the gradients w.r.t. ``k(X, Z)``, ``k(X_n, X_n)`` and
        ``k(Z, Z)``.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp import (LinearKernel, compute_gp_terms, draw_normals,
    ...                            init_variational_params)
    >>> from skgpstruct.likelihoods import CRFLikelihood
    >>> X = np.eye(3)
    >>> terms = compute_gp_terms(LinearKernel(), X, [1, 2], X)
    >>> params = init_variational_params(np.eye(3)[:, :2], kzz_cholesky=terms.Lzz)
    >>> eps, eps_bin = draw_normals([1, 2], 1, 2, 4, seeds=[0, 1])
    >>> values, grad = expected_log_likelihood(
    ...     CRFLikelihood(), terms, [0, 1, 0], params, eps, eps_bin)
    >>> values.shape, grad["q_sqrt"].shape
    ((2,), (1, 2, 3, 3))
    """
    _check_likelihood(likelihood, gradient, return_grad, log_scale, hyperparameters)
    N, M = terms.A.shape
    params = _check_params(params, M)
    K, V, _ = params.q_mu.shape
    y_flat = _check_labels(y_flat, N, V)
    _check_draws(eps, eps_bin, np.diff(terms.offsets), K, V)
    return _ell(likelihood, terms, y_flat, params, eps, eps_bin, gradient=gradient,
                return_grad=return_grad, hyperparameters=hyperparameters,
                log_scale=log_scale)


def _bucket_samples(bk, Sb, b, params, eps, eps_bin, amp):
    """Cholesky factors, block normals and samples ``(F, B)`` of a bucket."""
    T = bk.T
    C = jittered_cholesky(
        Sb, 0.0, f"A marginal covariance Sigma_n of a sequence of length {T}")[0]
    E = np.stack([eps[n] for n in bk.seqs])  # (n_g, K, S, V, T)
    Eb = np.stack([eps_bin[n] for n in bk.seqs])  # (n_g, K, S, V, V)
    F, E_blk = _sample_unary(b[:, bk.rows].transpose(1, 0, 2, 3), C, E, amp)
    Bs = params.m_bin + np.sqrt(params.s_bin) * Eb
    return C, E_blk, Eb, F, Bs


def _pathwise_bucket(C, E_blk, Eb, gF, gB, wS, sq):
    """Reparameterisation gradients of a bucket: w.r.t. the means ``b``
    (n_g, K, T, V), the covariances (block layout), ``m_bin``, ``s_bin``."""
    n_g, K, S, T, V = gF.shape
    nb, d = C.shape[2], C.shape[3]
    wk = wS[None, :, None, None]
    db_b = gF.sum(axis=2) * wk  # (n_g, K, T, V)
    g_blk = gF.swapaxes(-1, -2).reshape(n_g, K, S, nb, d)
    C_bar = np.matmul(g_blk.transpose(0, 1, 3, 4, 2), E_blk.swapaxes(-1, -2))
    C_bar *= wS[None, :, None, None, None]
    Sbar = _g.chol_backward(C, C_bar)
    g_m = np.einsum("nksij,k->ij", gB, wS)
    g_s = np.einsum("nksij,nksij,k->ij", gB, Eb, wS) * (0.5 / sq)
    return db_b, Sbar, g_m, g_s


def _score_bucket(C, E_blk, Eb, lp, w, sq, s_bin):
    """Score-function gradients of a bucket (cross-fitted control
    variates), in the layout of :func:`_pathwise_bucket`."""
    n_g, K, nb, d, S = E_blk.shape
    V = sq.shape[0]
    T = nb * d // V
    C_inv = np.linalg.inv(C)
    C_inv_t = C_inv.swapaxes(-1, -2)
    U = np.matmul(C_inv_t, E_blk)  # Sigma^-1 (f - b), (n_g, K, nb, d, S)
    lp_b = np.broadcast_to(lp[:, :, None, :], (n_g, K, nb, S))
    wk = w[None, :, None, None]
    g_b = _g.score_mean_grad(U, lp_b) * wk  # (n_g, K, nb, d)
    db_b = g_b.reshape(n_g, K, V, T).swapaxes(-1, -2)
    P = np.matmul(C_inv_t, C_inv)
    Sbar = _g.score_cov_grad(U, P, lp_b) * wk[..., None]
    e_m, e_s = _g.score_transition_grads(Eb, sq, s_bin, lp)
    g_m = np.einsum("nkij,k->ij", e_m, w)
    g_s = np.einsum("nkij,k->ij", e_s, w)
    return db_b, Sbar, g_m, g_s


def _ell(likelihood, terms, y_flat, params, eps, eps_bin, *, gradient="pathwise",
         return_grad=True, hyperparameters=False, log_scale=None):
    """:func:`expected_log_likelihood` on checked inputs (float64 ``params``
    valid by construction, int64 ``y_flat``, draws of the right shapes)."""
    A = terms.A
    q_mu, q_sqrt = params.q_mu, params.q_sqrt
    coupled = q_sqrt.ndim == 3
    buckets, perm = _g.make_buckets(terms.offsets)
    A_perm = A[perm]
    b, Sig = _g.marginal_blocks(terms, q_mu, q_sqrt, coupled, buckets, A_perm)
    out = ell_from_blocks(likelihood, b, Sig, buckets, y_flat, params, eps, eps_bin,
                          gradient=gradient, return_grad=return_grad,
                          log_scale=log_scale)
    if not return_grad:
        return out
    values, parts = out
    db, Sbar = parts.pop("b"), parts.pop("Sigma")
    backward = _g.backward_coupled if coupled else _g.backward_mean_field
    d_mu, d_sqrt, dA = backward(
        A, A_perm, perm, q_mu, q_sqrt, db, Sbar, buckets, hyperparameters
    )
    grad = {"q_mu": d_mu, "q_sqrt": d_sqrt, **parts}
    if hyperparameters:
        grad.update(_g.kernel_matrix_grads(terms, dA, Sbar, buckets, coupled,
                                           q_mu.shape[1]))
    return values, grad


def ell_from_blocks(likelihood, b, Sig, buckets, y_flat, params, eps, eps_bin, *,
                    gradient="pathwise", return_grad=True, log_scale=None):
    """The sampling and likelihood part of :func:`expected_log_likelihood`,
    from the posterior moments of the unary potentials.

    ``b`` (K, N, V) are the means, ``Sig`` the per-bucket covariances (block
    layout of :func:`~skgpstruct.gp._elbo_grads.marginal_blocks`); ``params``
    supplies ``weights``, ``m_bin`` and ``s_bin``. Returns the values, and
    with ``return_grad`` a dict of gradients of ``values.sum()`` w.r.t.
    ``"b"`` (K, N, V), ``"Sigma"`` (per bucket, symmetric blocks),
    ``"weights"``, ``"m_bin"``, ``"s_bin"`` (and ``"log_scale"``): the
    moments' gradients are mapped to the parameters by the caller.
    """
    amp = 1.0 if log_scale is None else float(np.exp(0.5 * log_scale))
    w, s_bin = params.weights, params.s_bin
    K, N, V = b.shape
    S = eps[0].shape[1]
    pathwise = gradient == "pathwise"
    need_lik_grad = return_grad and (pathwise or log_scale is not None)
    sq = np.sqrt(s_bin)
    wS = w / S
    values = np.empty(len(eps))
    db, Sbar = np.zeros((K, N, V)), []
    g_w, g_m, g_s, g_scale = np.zeros(K), np.zeros((V, V)), np.zeros((V, V)), 0.0
    for bk, Sb in zip(buckets, Sig):
        n_g, T = bk.rows.shape
        with small_blas():
            C, E_blk, Eb, F, Bs = _bucket_samples(bk, Sb, b, params, eps, eps_bin, amp)
            # every (sequence, component) of the bucket in one likelihood call
            Yk = np.repeat(y_flat[bk.rows], K, axis=0)  # (n_g K, T)
            F4, B4 = F.reshape(n_g * K, S, T, V), Bs.reshape(n_g * K, S, V, V)
            if need_lik_grad:
                lp, gF, gB = likelihood.log_prob_grad_many(F4, B4, Yk)
                gF, gB = gF.reshape(F.shape), gB.reshape(Bs.shape)
            else:
                lp = likelihood.log_prob_many(F4, B4, Yk)
            lp = lp.reshape(n_g, K, S)
            mean_lp = lp.mean(axis=2)  # (n_g, K)
            values[bk.seqs] = mean_lp @ w
            if not return_grad:
                continue
            g_w += mean_lp.sum(axis=0)
            if log_scale is not None:
                g_scale += 0.5 * float(np.einsum("nkstv,nkstv,k->", gF, F, wS))
            if pathwise:
                if amp != 1.0:
                    gF *= amp  # d log p / d(unscaled F)
                parts = _pathwise_bucket(C, E_blk, Eb, gF, gB, wS, sq)
            else:
                parts = _score_bucket(C, E_blk, Eb, lp, w, sq, s_bin)
            db_b, Sbar_b, g_m_b, g_s_b = parts
            Sbar.append(Sbar_b)
            g_m += g_m_b
            g_s += g_s_b
            db[:, bk.rows] = db_b.transpose(1, 0, 2, 3)
    if not return_grad:
        return values
    grad = {"b": db, "Sigma": Sbar, "weights": g_w, "m_bin": g_m, "s_bin": g_s}
    if log_scale is not None:
        grad["log_scale"] = g_scale
    return values, grad
