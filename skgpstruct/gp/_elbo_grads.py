"""Internals of the gray-box ELBO (private helpers of :mod:`.elbo`).

Marginal covariances by length bucket, control-variate moments of the
score estimator and the backward passes (Cholesky, sparse-GP algebra,
kernel matrices).

Conventions shared with :mod:`skgpstruct.gp.elbo`:

- sequences are processed in *length buckets* (:class:`Bucket`): all
  sequences of one length ``T`` (at most ``_BUCKET_TOKENS`` tokens per
  bucket), so that per-sequence ``T x T`` algebra runs as batched numpy
  calls instead of Python loops;
- covariances are stored per bucket in *block layout* ``(n_g, K, nb, d, d)``:
  mean-field ``nb = V`` blocks of size ``d = T`` (one per label), coupled one
  block of size ``d = V * T`` (label-major, index ``j * T + t``), so one code
  path samples and differentiates both;
- the gradient with respect to a symmetric matrix ``Sigma`` is the symmetric
  ``G`` with ``dF = <G, dSigma>`` for every symmetric perturbation (so it can
  be contracted with ``dK / dtheta`` entry by entry).
"""

from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.blas import dtrmm

from .._utils.parallel import small_blas

__all__ = []

#: Largest number of entries of an (n_tokens, n_labels_chunk, M) temporary.
_MAX_BLOCK = 2**23
#: Largest number of tokens in one length bucket.
_BUCKET_TOKENS = 512


class Bucket(NamedTuple):
    """Sequences of one length ``T``.

    ``seqs`` (n_g,) are their positions, ``rows`` (n_g, T) their token rows
    and ``start:stop`` their rows in bucket order (the token permutation
    ``perm`` of :func:`make_buckets`, under which each bucket is contiguous).
    """

    T: int
    seqs: np.ndarray
    rows: np.ndarray
    start: int
    stop: int


def make_buckets(offsets):
    """Group sequences by length (chunks of at most ``_BUCKET_TOKENS`` tokens).

    Returns the buckets and ``perm`` (n_tokens,), the token order in which
    every bucket's rows are contiguous (``X[perm][bk.start:bk.stop]`` are
    the rows ``X[bk.rows.ravel()]``).
    """
    lengths = np.diff(offsets)
    order = np.argsort(lengths, kind="stable")
    sorted_len = lengths[order]
    cuts = np.flatnonzero(np.diff(sorted_len)) + 1
    out, pos = [], 0
    for seqs in np.split(order, cuts):
        T = int(lengths[seqs[0]])
        step = max(1, _BUCKET_TOKENS // T)
        for start in range(0, seqs.size, step):
            part = seqs[start : start + step]
            rows = offsets[part][:, None] + np.arange(T)[None, :]
            out.append(Bucket(T, part, rows, pos, pos + rows.size))
            pos += rows.size
    perm = np.concatenate([bk.rows.ravel() for bk in out])
    return out, perm


def times_tril(A, L):
    """``A @ L`` for lower-triangular ``L`` (BLAS ``trmm``, half a ``gemm``)."""
    return dtrmm(1.0, L, A.T, side=0, lower=1, trans_a=1).T


def tril_half(X):
    """Lower triangle with the diagonal halved (Murray's Phi), batched."""
    out = np.tril(X)
    idx = np.arange(X.shape[-1])
    out[..., idx, idx] *= 0.5
    return out


def chol_backward(C, C_bar, C_inv=None):
    """Gradient w.r.t. ``Sigma`` from the gradient w.r.t. ``C = chol(Sigma)``.

    Murray (2016), "Differentiation of the Cholesky decomposition", in the
    symmetric form ``sym(C^-T Phi(C^T tril(C_bar)) C^-1)``. Batched over the
    leading axes.
    """
    Ct = np.swapaxes(C, -1, -2)
    P = tril_half(np.matmul(Ct, np.tril(C_bar)))
    if C_inv is None:
        C_inv = np.linalg.inv(C)
    X = np.matmul(np.matmul(np.swapaxes(C_inv, -1, -2), P), C_inv)
    return 0.5 * (X + np.swapaxes(X, -1, -2))


def _cv_coef(mean_g, mean_h, mean_gh, mean_hh):
    """``a = Cov(g, h) / Var(h)`` per coordinate (0 where ``Var(h) <= 0``)."""
    var = mean_hh - mean_h * mean_h
    cov = mean_gh - mean_g * mean_h
    return np.divide(cov, var, out=np.zeros_like(cov), where=var > 0)


def control_variate_mean(moments, S):
    """``mean(g - a h)`` with a cross-fitted control-variate coefficient.

    ``a = Cov(g, h) / Var(h)`` per coordinate, two-fold cross-fitted: each
    half's mean is corrected with the coefficient of the other half
    (unbiased, as ``E[h] = 0`` and the halves are independent; a
    coefficient from the same samples would be correlated with their mean
    of ``h``, an ``O(1 / S)`` bias). ``S < 2`` gives the plain mean.

    Parameters
    ----------
    moments : callable
        ``moments(sl)`` returns the sample means ``(mean_g, mean_h,
        mean_gh, mean_hh)`` over the samples ``sl`` (a slice).
    S : int
        Number of samples.
    """
    if S < 2:
        return moments(slice(None))[0]
    half = S // 2
    first, second = moments(slice(0, half)), moments(slice(half, S))
    a1, a2 = _cv_coef(*first), _cv_coef(*second)
    est1 = first[0] - a2 * first[1]
    est2 = second[0] - a1 * second[1]
    return (half * est1 + (S - half) * est2) / S


def score_mean_grad(U, lp):
    """Score-function gradient w.r.t. the mean, with control variates.

    ``U`` (..., d, S) holds ``Sigma^-1 (f_s - b)`` per sample, ``lp``
    (..., S) the log-likelihoods; returns (..., d).
    """

    def moments(sl):
        u, lpx = U[..., sl], lp[..., None, sl]
        u2 = u * u
        return (u * lpx).mean(-1), u.mean(-1), (u2 * lpx).mean(-1), u2.mean(-1)

    return control_variate_mean(moments, U.shape[-1])


def score_cov_grad(U, P, lp):
    """Score-function gradient w.r.t. the covariance, with control variates.

    ``h_s = (u_s u_s^T - P) / 2`` with ``u_s = Sigma^-1 (f_s - b)`` (columns of
    ``U``, shape (..., d, S)) and ``P = Sigma^-1`` (..., d, d); ``g_s = lp_s
    h_s``. The per-entry sample moments are formed with matrix products
    (no (S, d, d) temporary). Returns (..., d, d), symmetric.
    """
    PP = P * P

    def moments(sl):
        u, lps = U[..., sl], lp[..., sl]
        n = u.shape[-1]
        lpx = lps[..., None, :]
        ut = np.swapaxes(u, -1, -2)
        u2 = u * u
        u2t = np.swapaxes(u2, -1, -2)
        mean_lp = lps.mean(-1)[..., None, None]
        UU = np.matmul(u, ut) / n
        ULU = np.matmul(u * lpx, ut) / n
        mean_h = 0.5 * (UU - P)
        mean_g = 0.5 * (ULU - mean_lp * P)
        mean_hh = 0.25 * (np.matmul(u2, u2t) / n - 2.0 * P * UU + PP)
        mean_gh = 0.25 * (np.matmul(u2 * lpx, u2t) / n - 2.0 * P * ULU + mean_lp * PP)
        return mean_g, mean_h, mean_gh, mean_hh

    out = control_variate_mean(moments, U.shape[-1])
    return 0.5 * (out + np.swapaxes(out, -1, -2))


def score_transition_grads(E_bin, sq, s_bin, lp):
    """Score-function gradients w.r.t. ``m_bin`` and ``s_bin``.

    ``E_bin`` (..., S, V, V) are the standard normals with ``B = m + sq * E``,
    ``lp`` (..., S). Returns two arrays (..., V, V), one estimate per leading
    index (the caller weights and sums them).
    """
    out = []
    for h in (E_bin / sq, 0.5 * (E_bin * E_bin - 1.0) / s_bin):

        def moments(sl, h=h):
            hs, lpx = h[..., sl, :, :], lp[..., sl, None, None]
            h2 = hs * hs
            return (hs * lpx).mean(-3), hs.mean(-3), (h2 * lpx).mean(-3), h2.mean(-3)

        out.append(control_variate_mean(moments, lp.shape[-1]))
    return out


def marginal_blocks(terms, q_mu, q_sqrt, coupled, buckets, A_perm):
    """Means (K, N, V) and per-bucket covariances (n_g, K, nb, d, d)."""
    A = terms.A
    M = A.shape[1]
    K, V, _ = q_mu.shape
    b = np.matmul(A, q_mu.transpose(0, 2, 1))  # (K, N, V)
    Kt = [np.stack([terms.Ktilde[i] for i in bk.seqs]) for bk in buckets]
    if not coupled:
        Sig = [np.empty((bk.seqs.size, K, V, bk.T, bk.T)) for bk in buckets]
        for k in range(K):
            for j in range(V):
                AL = times_tril(A_perm, q_sqrt[k, j])  # A L_kj, bucket order
                with small_blas():
                    for bk, Sb, Ktb in zip(buckets, Sig, Kt):
                        ALb = AL[bk.start : bk.stop].reshape(bk.seqs.size, bk.T, M)
                        np.matmul(ALb, ALb.swapaxes(-1, -2), out=Sb[:, k, j])
                        Sb[:, k, j] += Ktb
        return b, Sig
    Sig = []
    VM = V * M
    for bk, Ktb in zip(buckets, Kt):
        n_g, T = bk.rows.shape
        Ab = A_perm[bk.start : bk.stop]
        Sb = np.empty((n_g, K, 1, V * T, V * T))
        for k in range(K):
            L_r = q_sqrt[k].reshape(V, M, VM).transpose(1, 0, 2).reshape(M, V * VM)
            ALb = (Ab @ L_r).reshape(n_g, T, V, VM).transpose(0, 2, 1, 3)
            ALb = ALb.reshape(n_g, V * T, VM)
            with small_blas():
                Sk = np.matmul(ALb, ALb.swapaxes(-1, -2))
            S5 = Sk.reshape(n_g, V, T, V, T)
            for j in range(V):
                S5[:, j, :, j, :] += Ktb
            Sb[:, k, 0] = Sk
        Sig.append(Sb)
    return b, Sig


def kernel_matrix_grads(terms, dA, Sbar, buckets, coupled, V):
    """``A = Knz Lzz^-T``, ``Lzz = chol(Kzz + jitter I)``: from ``dA`` and
    the covariance gradients to ``dKnz``, ``dKzz`` and the ``dKnn`` blocks."""
    A, Lzz = terms.A, terms.Lzz
    dKnz = solve_triangular(Lzz, dA.T, lower=True, trans="T").T
    # W = Lzz^-T: dLzz = -tril(W dW^T W) with dW = Knz^T dA, i.e.
    # -tril(Lzz^-T dA^T A)
    Q = dA.T @ A
    with small_blas():
        dLzz = -np.tril(solve_triangular(Lzz, Q, lower=True, trans="T"))
        dKzz = chol_backward(Lzz, dLzz)
    dKnn = [None] * (terms.offsets.size - 1)
    for bk, Sb in zip(buckets, Sbar):
        n_g, T = bk.rows.shape
        if coupled:
            S5 = Sb[:, :, 0].reshape(n_g, -1, V, T, V, T)
            blocks = sum(S5[:, :, j, :, j, :] for j in range(V)).sum(axis=1)
        else:
            blocks = Sb.sum(axis=(1, 2))
        for a, n in enumerate(bk.seqs):
            dKnn[n] = blocks[a]
    return {"Knz": dKnz, "Knn": dKnn, "Kzz": dKzz}


def _unpermute_dA(dA_perm, perm, db, q_mu):
    """``dA`` in token order: the covariance part (bucket order) plus the
    mean part ``sum_k db_k m_k``; None when ``dA_perm`` is None."""
    if dA_perm is None:
        return None
    dA = np.empty(dA_perm.shape)
    dA[perm] = dA_perm
    for k in range(q_mu.shape[0]):
        dA += db[k] @ q_mu[k]
    return dA


def backward_mean_field(A, A_perm, perm, q_mu, q_sqrt, db, Sbar, buckets, need_A):
    """Gradients w.r.t. ``q_mu``, ``q_sqrt`` (and ``A``), mean-field.

    ``b_kj = A m_kj`` and ``Sigma_kj,n = Ktilde_n + A_n L_kj L_kj^T A_n^T``:
    ``dm_kj = A^T db_kj``, ``dL_kj = 2 tril(G_kj L_kj)`` with
    ``G_kj = sum_n A_n^T Sbar_kj,n A_n = A^T Y_kj`` where ``Y_kj`` stacks
    ``Sbar_kj,n A_n`` over the sequences (in bucket order, ``A_perm =
    A[perm]``; one BLAS-3 product per label chunk). With ``need_A`` also
    ``dA = sum_k db_k m_k + 2 sum_kj Y_kj (S_kj - I)`` (``Ktilde`` depends on
    ``A`` as ``-A A^T``).
    """
    K, V, M = q_mu.shape
    N = A.shape[0]
    d_mu = np.matmul(A.T, db).transpose(0, 2, 1)
    d_sqrt = np.zeros_like(q_sqrt)
    dA_perm = np.zeros((N, M)) if need_A else None
    chunk = max(1, min(V, _MAX_BLOCK // max(1, N * M)))
    for k in range(K):
        for j0 in range(0, V, chunk):
            j1 = min(V, j0 + chunk)
            nJ = j1 - j0
            Y = np.empty((N, nJ, M))
            with small_blas():
                for bk, Sb in zip(buckets, Sbar):
                    n_g, T = bk.rows.shape
                    Ab = A_perm[bk.start : bk.stop].reshape(n_g, 1, T, M)
                    Yb = np.matmul(Sb[:, k, j0:j1], Ab)  # (n_g, nJ, T, M)
                    Y[bk.start : bk.stop] = Yb.transpose(0, 2, 1, 3).reshape(-1, nJ, M)
            G = (A_perm.T @ Y.reshape(N, nJ * M)).reshape(M, nJ, M)
            for jj in range(nJ):
                L = q_sqrt[k, j0 + jj]
                with small_blas():  # (M, M) products
                    d_sqrt[k, j0 + jj] = 2.0 * np.tril(times_tril(G[:, jj, :], L))
                    if need_A:
                        R = L @ L.T
                        R[np.diag_indices(M)] -= 1.0
                if need_A:
                    dA_perm += 2.0 * (Y[:, jj] @ R)
    return d_mu, d_sqrt, _unpermute_dA(dA_perm, perm, db, q_mu)


def backward_coupled(A, A_perm, perm, q_mu, q_sqrt, db, Sbar, buckets, need_A):
    """As :func:`backward_mean_field` for coupled ``q_sqrt`` (K, VM, VM).

    The joint covariance of the ``V T`` latent values of a sequence is
    ``blockdiag(Ktilde) + (I_V (x) A_n) S (I_V (x) A_n)^T``; block ``(i, j)``
    of ``G = sum_n (I (x) A_n)^T Sbar_n (I (x) A_n)`` is
    ``sum_n A_n^T Sbar_n[i, j] A_n``.
    """
    K, V, M = q_mu.shape
    N = A.shape[0]
    VM = V * M
    d_mu = np.matmul(A.T, db).transpose(0, 2, 1)
    d_sqrt = np.zeros_like(q_sqrt)
    dA_perm = np.zeros((N, M)) if need_A else None
    for k in range(K):
        Y = np.empty((N, V, V, M))
        with small_blas():
            for bk, Sb in zip(buckets, Sbar):
                n_g, T = bk.rows.shape
                Ab = A_perm[bk.start : bk.stop].reshape(n_g, 1, 1, T, M)
                S5 = Sb[:, k, 0].reshape(n_g, V, T, V, T).transpose(0, 1, 3, 2, 4)
                Yb = np.matmul(S5, Ab)  # (n_g, V, V, T, M)
                Y[bk.start : bk.stop] = Yb.transpose(0, 3, 1, 2, 4).reshape(-1, V, V, M)
        G = (A_perm.T @ Y.reshape(N, V * V * M)).reshape(M, V, V, M)
        G = G.transpose(1, 0, 2, 3).reshape(VM, VM)
        L = q_sqrt[k]
        with small_blas():  # (VM, VM) products
            d_sqrt[k] = 2.0 * np.tril(times_tril(G, L))
            R = L @ L.T if need_A else None
        if need_A:
            R[np.diag_indices(VM)] -= 1.0
            # dA = 2 sum_ij (Sbar_ij A) R_ji ; R_ji = R[(j, p), (i, q)]
            Rs = R.reshape(V, M, V, M).transpose(2, 0, 1, 3).reshape(V * V * M, M)
            dA_perm += 2.0 * (Y.reshape(N, V * V * M) @ Rs)
    return d_mu, d_sqrt, _unpermute_dA(dA_perm, perm, db, q_mu)
