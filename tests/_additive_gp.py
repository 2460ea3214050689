"""Conjugate additive GP regression with coupled and mean-field sparse
variational posteriors: the model of Adam's "Structured variational
inference for coupled Gaussian processes" (Table 1), in closed form.

``y = f1(x1) + f2(x2) + e``: exact inference, and sparse variational
posteriors over both latents' inducing values, either one joint Gaussian
(coupled, VCGP) or one per latent (mean-field, MF). The tests check it
(exact limits, bounds, gradients) and, through it, the package's
:func:`skgpstruct.gp.kl.mixture_kl` on coupled and mean-field factors;
``benchmarks/coupled_additive.py`` reproduces the paper's table with it.

**Hyperparameters.** RBF kernels ``k_j`` (variance ``s_j``, length scale
``l_j``) and the noise variance ``sigma^2`` maximise the exact log evidence
``log N(y | 0, K1 + K2 + sigma^2 I)`` (L-BFGS on the logarithms, analytic
gradients, a few restarts) and are then fixed for every model.

**Sparse posteriors.** Inducing inputs ``Z_j`` (``M`` per latent) carry
``u_j = f_j(Z_j)``; ``u = (u_1, u_2)`` stacked latent-major (the package's
coupled layout, ``V = 2`` labels) has the block-diagonal prior
``N(0, Kuu)``, ``Kuu = blockdiag(k_1(Z_1, Z_1), k_2(Z_2, Z_2))``. With
``g = f1 + f2`` at the training inputs, ``W = Kug = [k_1(Z_1, X_1);
k_2(Z_2, X_2)]`` (``2M x N``). The ELBO of ``q(u) = N(m, S)`` is

``L(q) = sum_n E_q[log N(y_n | g_n, sigma^2)] - KL(q(u) || p(u))``,

``E_q[log N(y_n | g_n, sigma^2)] = log N(y_n | mu_n, sigma^2)
- var_n / (2 sigma^2)``, where ``mu_n = a_n^T m`` and
``var_n = sum_j (k_j(x_nj, x_nj) - w_jn^T Kjj^-1 w_jn) + a_n^T S a_n`` with
``a_n = Kuu^-1 w_n``; the last term holds the cross-covariance of ``f1`` and
``f2`` when ``S`` couples them.

- *Coupled (VCGP).* The optimal ``q`` given ``Z`` is Titsias' over the joint
  inducing set: in whitened coordinates ``v = L^-1 u`` (``L = chol(Kuu)``,
  block diagonal), with ``A = L^-1 W / sigma`` and ``B = I + A A^T``,
  ``q*(v) = N(B^-1 A y / sigma, B^-1)``, and the collapsed bound
  ``F(Z) = log N(y | 0, Q + sigma^2 I) - tr(Kgg - Q) / (2 sigma^2)``,
  ``Q = W^T Kuu^-1 W``. With ``Z_j = X_j`` it is the exact log evidence.
- *Mean-field (MF).* The ELBO's dependence on ``q`` is
  ``L(q) = F(Z) - KL(q || q*)``, so the best factorised
  ``q = q(v_1) q(v_2)`` has the mean of ``q*`` and precisions equal to the
  diagonal blocks ``B_jj`` of ``q*``'s precision ``B``, and
  ``L_MF(Z) = F(Z) - (log|B_11| + log|B_22| - log|B|) / 2``. The
  correlation between ``f1`` and ``f2`` under it is exactly 0. The penalty
  is the mutual information of ``u_1`` and ``u_2`` under ``q*``; with
  ``Z_j = X_j`` it is that of ``f1`` and ``f2`` under the exact posterior,
  the limit of the MF - VCGP gap as ``M`` grows. Here it is about 2.5 nats
  (one strongly anti-correlated direction, the constant shared by ``f1``
  and ``f2``, and a few weak ones), far below the paper's ~25 nats, so the
  optimal MF posterior is much closer to the coupled one than the paper's
  (which was optimised by gradient and need not have been optimal). The
  benchmark reports it (``mf_full_neg_elbo``).

The KL term is evaluated with :func:`skgpstruct.gp.kl.mixture_kl` (whitened
prior ``N(0, I)``; coupled factor ``(1, 2M, 2M)`` or mean-field
``(1, 2, M, M)``), the expected log-likelihood in closed form as above; the
reported ``-L`` is this uncollapsed ELBO at the optimal ``q`` (it equals the
collapsed value up to rounding, which is checked).

**Inducing inputs.** ``Z`` (``2M`` scalars) maximises ``L(Z)`` (the optimal
``q`` plugged in) by L-BFGS, initialised at evenly spaced quantiles of the
training inputs. The gradient is analytic: by the envelope theorem it is the
partial derivative of the uncollapsed ELBO with respect to ``Z`` holding
``q(u) = N(m, S)`` (in the unwhitened coordinates) fixed, chained through
``W`` and ``Kuu``.
"""

import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.optimize import minimize

from skgpstruct.gp.kernels import RBFKernel
from skgpstruct.gp.kl import mixture_kl

_LOG_2PI = np.log(2.0 * np.pi)
#: Jitter on the diagonal of ``Kuu``, relative to the kernel variance.
JITTER = 1e-8


# --------------------------------------------------------------------------
# data and hyperparameters


def make_data(n, rng, noise_sd=0.5):
    """Inputs ``X`` (n, 2) uniform on [-3, 3] and noisy additive targets."""
    X = rng.uniform(-3.0, 3.0, size=(n, 2))
    y = np.sin(X[:, 0]) ** 3 + np.cos(3.0 * X[:, 1]) + noise_sd * rng.standard_normal(n)
    return X, y


def kernels_from(hyp):
    """The two RBF kernels from ``hyp = (s1, l1, s2, l2, noise_var)``."""
    s1, l1, s2, l2, _ = hyp
    return RBFKernel(l1, s1), RBFKernel(l2, s2)


def _col(x):
    return np.asarray(x, dtype=np.float64).reshape(-1, 1)


def exact_log_evidence(X, y, hyp, return_grad=False):
    """``log N(y | 0, K1 + K2 + sigma^2 I)`` and its gradient in ``log hyp``."""
    k1, k2 = kernels_from(hyp)
    K1, dK1 = k1(_col(X[:, 0]), eval_gradient=True)  # theta: (log l, log s)
    K2, dK2 = k2(_col(X[:, 1]), eval_gradient=True)
    n = y.size
    P = K1 + K2 + hyp[4] * np.eye(n)
    Lp = cholesky(P, lower=True)
    alpha = cho_solve((Lp, True), y)
    value = -0.5 * y @ alpha - np.log(np.diag(Lp)).sum() - 0.5 * n * _LOG_2PI
    if not return_grad:
        return value
    G = 0.5 * (np.outer(alpha, alpha) - cho_solve((Lp, True), np.eye(n)))
    grad = np.array([
        np.vdot(G, dK1[..., 1]), np.vdot(G, dK1[..., 0]),
        np.vdot(G, dK2[..., 1]), np.vdot(G, dK2[..., 0]),
        np.trace(G) * hyp[4],
    ])
    return value, grad


def posterior_mutual_information(X, hyp):
    """``I(f1; f2 | y)`` in nats, of the exact posterior over ``f1(X), f2(X)``.

    With independent priors ``I(f1; f2 | y) = I(f1, f2; y) - I(f1; y) -
    I(f2; y)``, and for ``y = f1 + f2 + e`` each term is a Gaussian channel's
    ``log det(I + K / noise) / 2``, which gives ``(log det(s2 I + K1) + log
    det(s2 I + K2) - log det(s2 I + K1 + K2) - n log s2) / 2`` (no inverse
    of an ill-conditioned ``K``). It is the gap between the exact log
    evidence and the best mean-field bound (inducing points at every
    input), hence the most any mean-field posterior can lose to the coupled
    one when the latter is exact.
    """
    k1, k2 = kernels_from(hyp)
    K1, K2 = k1(_col(X[:, 0])), k2(_col(X[:, 1]))
    n = X.shape[0]
    s2I = hyp[4] * np.eye(n)
    logdet = [2.0 * np.log(np.diag(cholesky(P, lower=True))).sum()
              for P in (s2I + K1, s2I + K2, s2I + K1 + K2)]
    return 0.5 * (logdet[0] + logdet[1] - logdet[2] - n * np.log(hyp[4]))


def fit_hyperparameters(X, y, rng, n_restarts=3):
    """Maximise the exact log evidence over ``log(s1, l1, s2, l2, sigma^2)``."""
    best = None
    starts = [np.log([1.0, 1.0, 1.0, 1.0, 0.3])]
    for _ in range(n_restarts - 1):
        starts.append(np.log([rng.uniform(0.3, 2.0), rng.uniform(0.2, 2.0),
                              rng.uniform(0.3, 2.0), rng.uniform(0.2, 2.0),
                              rng.uniform(0.05, 0.5)]))

    def fun(t):
        v, g = exact_log_evidence(X, y, np.exp(t), return_grad=True)
        return -v, -g

    bounds = [(-7.0, 5.0)] * 5
    for t0 in starts:
        res = minimize(fun, t0, jac=True, method="L-BFGS-B", bounds=bounds)
        if best is None or res.fun < best.fun:
            best = res
    return np.exp(best.x)


# --------------------------------------------------------------------------
# sparse variational posteriors


def _blocks(Z, X, hyp, jitter=JITTER):
    """Kernel blocks for inducing inputs ``Z`` (2, M) at inputs ``X`` (n, 2).

    Returns ``W`` (2M, n) = ``[k_j(Z_j, X_j)]`` stacked and the per-latent
    ``Kjj = k_j(Z_j, Z_j) + jitter``.
    """
    kernels = kernels_from(hyp)
    W = np.vstack([k(_col(Z[j]), _col(X[:, j])) for j, k in enumerate(kernels)])
    Kjj = [k(_col(Z[j])) + jitter * hyp[2 * j] * np.eye(Z.shape[1])
           for j, k in enumerate(kernels)]
    return W, Kjj


def _block_diag(mats):
    d = sum(m.shape[0] for m in mats)
    out = np.zeros((d, d))
    i = 0
    for m in mats:
        out[i:i + m.shape[0], i:i + m.shape[0]] = m
        i += m.shape[0]
    return out


def optimal_q(Z, X, y, hyp, coupled=True, *, jitter=None):
    """The optimal whitened ``q(v) = N(m_v, S_v)`` given ``Z`` and its pieces.

    Parameters
    ----------
    Z : ndarray of shape (2, M)
        Inducing inputs per latent.
    X : ndarray of shape (n, 2)
    y : ndarray of shape (n,)
    hyp : array-like of shape (5,)
        ``(s1, l1, s2, l2, sigma^2)``.
    coupled : bool, default=True
        Coupled (one Gaussian over both latents) or mean-field.
    jitter : float, default=None
        Relative jitter on ``Kuu``'s diagonal (default :data:`JITTER`).

    Returns
    -------
    state : dict
        ``L`` (block-diagonal Cholesky factor of ``Kuu``), ``W``, ``m_v``,
        ``S_v``, ``q_sqrt`` (lower factor of ``S_v``, coupled (1, 2M, 2M)
        or mean-field (1, 2, M, M)), ``collapsed`` (the collapsed bound: the
        ELBO at this ``q``).
    """
    W, Kjj = _blocks(Z, X, hyp, JITTER if jitter is None else jitter)
    M = Z.shape[1]
    n = y.size
    s2 = hyp[4]
    Ls = [cholesky(K, lower=True) for K in Kjj]
    L = _block_diag(Ls)
    A = solve_triangular(L, W, lower=True) / np.sqrt(s2)
    B = np.eye(2 * M) + A @ A.T
    LB = cholesky(B, lower=True)
    c = solve_triangular(LB, A @ y, lower=True) / np.sqrt(s2)
    trace_kff = n * (hyp[0] + hyp[2])
    F = (-0.5 * n * (_LOG_2PI + np.log(s2)) - np.log(np.diag(LB)).sum()
         - 0.5 * y @ y / s2 + 0.5 * c @ c - 0.5 * trace_kff / s2
         + 0.5 * np.vdot(A, A))
    m_v = solve_triangular(LB, c, lower=True, trans="T")
    if coupled:
        LBinv = solve_triangular(LB, np.eye(2 * M), lower=True)
        S_v = LBinv.T @ LBinv
        q_sqrt = cholesky(S_v, lower=True)[None]
    else:
        sl = [slice(0, M), slice(M, 2 * M)]
        Bjj_chol = [cholesky(B[s, s], lower=True) for s in sl]
        gap = (sum(np.log(np.diag(C)).sum() for C in Bjj_chol)
               - np.log(np.diag(LB)).sum())
        F = F - gap
        inv_chol = [solve_triangular(C, np.eye(M), lower=True) for C in Bjj_chol]
        S_blocks = [Ci.T @ Ci for Ci in inv_chol]
        S_v = _block_diag(S_blocks)
        q_sqrt = np.stack([cholesky(S, lower=True) for S in S_blocks])[None]
    return {"L": L, "Ls": Ls, "W": W, "m_v": m_v, "S_v": S_v, "q_sqrt": q_sqrt,
            "collapsed": float(F), "coupled": coupled}


def elbo(state, X, y, hyp):
    """The uncollapsed ELBO of ``q`` in ``state`` (package KL, closed-form ELL)."""
    L, W, m_v, S_v = state["L"], state["W"], state["m_v"], state["S_v"]
    s2 = hyp[4]
    M = m_v.size // 2
    Bw = solve_triangular(L, W, lower=True)  # L^-1 w_n: columns (2M, n)
    mu = Bw.T @ m_v
    var = (hyp[0] + hyp[2] - np.sum(Bw * Bw, axis=0)
           + np.sum(Bw * (S_v @ Bw), axis=0))
    ell = np.sum(-0.5 * (_LOG_2PI + np.log(s2)) - 0.5 * (y - mu) ** 2 / s2
                 - 0.5 * var / s2)
    kl = mixture_kl(m_v.reshape(1, 2, M), state["q_sqrt"])
    return float(ell - kl), float(kl)


def z_gradient(Z, X, y, hyp, state):
    """``dL/dZ`` (2, M) at fixed ``q(u)`` (the envelope gradient)."""
    L, W, m_v, S_v = state["L"], state["W"], state["m_v"], state["S_v"]
    s2 = hyp[4]
    d = m_v.size
    M = d // 2

    def lt(v):  # L^-T v
        return solve_triangular(L, v, lower=True, trans="T")

    Linv = solve_triangular(L, np.eye(d), lower=True)
    Kinv = Linv.T @ Linv
    km = lt(m_v)
    Kw = Kinv @ W
    KSK = Linv.T @ S_v @ Linv
    r = y - W.T @ km
    dW = (np.outer(km, r) + Kw - KSK @ W) / s2
    u = Kw @ r
    KSKW = KSK @ W
    dK = (-(np.outer(u, km) + np.outer(km, u)) / (2 * s2)
          - (Kw @ Kw.T) / (2 * s2)
          + (KSKW @ Kw.T + Kw @ KSKW.T) / (2 * s2)
          + 0.5 * (KSK + np.outer(km, km) - Kinv))
    dK = 0.5 * (dK + dK.T)
    g = np.empty_like(Z)
    for j in range(2):
        s = slice(j * M, (j + 1) * M)
        ell2 = hyp[2 * j + 1] ** 2
        z = Z[j]
        Wj = W[s]
        diff = X[:, j][None, :] - z[:, None]  # (M, n)
        g[j] = np.sum(dW[s] * Wj * diff, axis=1) / ell2
        Kj = state["Ls"][j] @ state["Ls"][j].T  # Kjj with jitter; off-diag exact
        dz = z[None, :] - z[:, None]  # z_k - z_i
        g[j] += 2.0 * np.sum(dK[s, s] * Kj * dz, axis=1) / ell2
    return g


def fit_inducing(X, y, hyp, M, coupled, maxiter=300):
    """Inducing inputs maximising the (optimal-q) ELBO; returns (Z, state)."""
    Z0 = np.stack([np.quantile(X[:, j], (np.arange(M) + 0.5) / M) for j in range(2)])

    def fun(z):
        Z = z.reshape(2, M)
        st = optimal_q(Z, X, y, hyp, coupled)
        return -st["collapsed"], -z_gradient(Z, X, y, hyp, st).ravel()

    res = minimize(fun, Z0.ravel(), jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter})
    Z = res.x.reshape(2, M)
    return Z, optimal_q(Z, X, y, hyp, coupled)


# --------------------------------------------------------------------------
# predictions and metrics


def predict_sparse(state, Z, Xs, hyp):
    """Means (n, 2), variances (n, 2) and covariance (n,) of ``f1, f2``."""
    W, _ = _blocks(Z, Xs, hyp)
    L, m_v, S_v = state["L"], state["m_v"], state["S_v"]
    M = Z.shape[1]
    Bw = solve_triangular(L, W, lower=True)  # (2M, n): block j nonzero in rows j
    b = [np.zeros_like(Bw), np.zeros_like(Bw)]
    b[0][:M], b[1][M:] = Bw[:M], Bw[M:]
    mean = np.stack([bj.T @ m_v for bj in b], axis=1)
    Sb = [S_v @ bj for bj in b]
    var = np.stack([hyp[2 * j] - np.sum(b[j] * b[j], axis=0) + np.sum(b[j] * Sb[j], axis=0)
                    for j in range(2)], axis=1)
    cov = np.sum(b[0] * Sb[1], axis=0)
    return mean, var, cov


def predict_exact(X, y, Xs, hyp):
    """Exact posterior means, variances and covariance of ``f1, f2``."""
    k1, k2 = kernels_from(hyp)
    n = y.size
    P = k1(_col(X[:, 0])) + k2(_col(X[:, 1])) + hyp[4] * np.eye(n)
    Lp = cholesky(P, lower=True)
    alpha = cho_solve((Lp, True), y)
    C1 = k1(_col(Xs[:, 0]), _col(X[:, 0]))
    C2 = k2(_col(Xs[:, 1]), _col(X[:, 1]))
    V1 = solve_triangular(Lp, C1.T, lower=True)
    V2 = solve_triangular(Lp, C2.T, lower=True)
    mean = np.stack([C1 @ alpha, C2 @ alpha], axis=1)
    var = np.stack([hyp[0] - np.sum(V1 * V1, axis=0), hyp[2] - np.sum(V2 * V2, axis=0)],
                   axis=1)
    cov = -np.sum(V1 * V2, axis=0)
    return mean, var, cov
