"""Kernel quantities of the sparse GP: ``A_n``, ``Ktilde_n`` and the marginals.

In the whitened parametrisation: inducing inputs ``Z``
(M, D), ``Lzz = chol(k(Z, Z) + jitter I)``, and for sequence ``n`` with
tokens ``X_n`` (T_n, D):

- ``A_n = k(X_n, Z) Lzz^-T`` (T_n, M),
- ``Ktilde_n = k(X_n, X_n) + jitter I - A_n A_n^T`` (T_n, T_n),
- per component ``k`` and label ``j``: ``f_nj ~ N(b, Sigma)`` with
  ``b = A_n m_kj`` and ``Sigma = Ktilde_n + A_n S_kj A_n^T``; coupled, the
  ``T_n V``-dimensional joint covariance is
  ``blockdiag_j(Ktilde_n) + (I_V (x) A_n) S_k (I_V (x) A_n)^T``.

A kernel ``ConstantKernel(c) * k`` whose factor is a learned scale is
evaluated as ``c`` times the terms of ``k`` (the jitter scales with ``c``);
:func:`split_kernel_scale` is the one place that recognises that form.
Gradients with respect to the kernel matrices are contracted into
``d / dtheta`` by :func:`kernel_matrix_grads_to_theta`.
"""

import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, block_diag, cholesky, solve_triangular
from sklearn.gaussian_process.kernels import ConstantKernel, Product

from .._input.arrays import check_lengths
from .._utils.parallel import small_blas
from . import _elbo_grads as _g
from .kernels import kernel_gradient_contract

__all__ = [
    "GPTerms",
    "JitterWarning",
    "JITTER_TRIES",
    "jittered_cholesky",
    "stable_jitter",
    "inducing_cholesky",
    "compute_gp_terms",
    "sequence_marginals",
    "kernel_matrix_grads_to_theta",
    "split_kernel_scale",
]


# --------------------------------------------------------------------------
# validation helpers


def _check_offsets(lengths, n_tokens=None):
    """Offsets of ``lengths`` (``n_tokens`` None: any positive total)."""
    if n_tokens is None:
        arr = np.asarray(lengths)
        n_tokens = int(arr.sum()) if arr.dtype.kind in "iu" else 0
    return check_lengths(lengths, n_tokens)


def _check_X(X, name="X_flat"):
    if sp.issparse(X):
        return sp.csr_matrix(X)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_rows, n_features), got shape {X.shape}."
        )
    return X


def _posterior_shape(q_mu, q_sqrt, M, prefix=""):
    """``(K, V, coupled)`` of valid shapes of ``q_mu`` and ``q_sqrt``."""
    if q_mu.ndim != 3 or q_mu.shape[2] != M:
        raise ValueError(
            f"{prefix}q_mu must have shape (K, V, M) with M = {M} inducing "
            f"points, got {q_mu.shape}."
        )
    K, V, _ = q_mu.shape
    if q_sqrt.shape == (K, V, M, M):
        return K, V, False
    if q_sqrt.shape == (K, V * M, V * M):
        return K, V, True
    raise ValueError(
        f"{prefix}q_sqrt must have shape (K, V, M, M) = {(K, V, M, M)} "
        f"(mean-field) or (K, V*M, V*M) = {(K, V * M, V * M)} (coupled), "
        f"got {q_sqrt.shape}."
    )


# --------------------------------------------------------------------------
# kernel quantities


class GPTerms(NamedTuple):
    """Kernel quantities of a set of sequences at fixed hyperparameters.

    Attributes
    ----------
    A : ndarray of shape (n_tokens, M)
        ``k(X, Z) Lzz^-T``, sequences stacked.
    Ktilde : list of ndarray of shape (T_n, T_n)
        ``k(X_n, X_n) + jitter I - A_n A_n^T`` per sequence.
    offsets : ndarray of int64 of shape (n_sequences + 1,)
        Sequence ``n`` occupies rows ``offsets[n]:offsets[n + 1]``.
    Knz : ndarray of shape (n_tokens, M)
        ``k(X, Z)`` (for hyperparameter gradients).
    Lzz : ndarray of shape (M, M)
        Lower Cholesky factor of ``k(Z, Z) + jitter I``.
    """

    A: np.ndarray
    Ktilde: list
    offsets: np.ndarray
    Knz: np.ndarray
    Lzz: np.ndarray

    @property
    def lengths(self):
        """Sequence lengths, ndarray of shape (n_sequences,)."""
        return np.diff(self.offsets)

    def scaled(self, factor):
        """The terms of the kernel (and jitter) multiplied by ``factor``.

        Parameters
        ----------
        factor : float
            Positive scale of the kernel.

        Returns
        -------
        terms : GPTerms
            ``A`` and ``Lzz`` times ``sqrt(factor)``, ``Ktilde`` and ``Knz``
            times ``factor`` (the same object when ``factor == 1``).
        """
        if factor == 1.0:
            return self
        if not (np.isfinite(factor) and factor > 0):
            raise ValueError(f"factor must be positive and finite, got {factor!r}.")
        r = np.sqrt(factor)
        return GPTerms(self.A * r, [Kt * factor for Kt in self.Ktilde], self.offsets,
                       self.Knz * factor, self.Lzz * r)

    def subset(self, seq_idx):
        """The terms of some of the sequences, in the order given.

        Parameters
        ----------
        seq_idx : array-like of int of shape (n_selected,)
            Positions of the sequences to keep (repeats allowed).

        Returns
        -------
        terms : GPTerms
            With the selected rows of ``A`` and ``Knz``, the selected
            ``Ktilde`` blocks, new offsets and the same ``Lzz``.
        """
        idx = np.asarray(seq_idx)
        n_seq = len(self.Ktilde)
        if idx.dtype.kind not in "iu" or idx.ndim != 1:
            raise ValueError("seq_idx must be a 1-D array of integer positions.")
        if idx.size and (idx.min() < -n_seq or idx.max() >= n_seq):
            raise ValueError(f"seq_idx out of range for {n_seq} sequences.")
        idx = idx % n_seq if idx.size else idx.astype(np.int64)
        rows, offsets = _rows(self.offsets, idx, identity=False)
        return GPTerms(
            A=self.A[rows],
            Ktilde=[self.Ktilde[i] for i in idx],
            offsets=offsets,
            Knz=self.Knz[rows],
            Lzz=self.Lzz,
        )


def _rows(offsets, seq_idx, identity=True):
    """Token rows of the sequences ``seq_idx`` (in order) and their new
    offsets; with ``identity``, ``None`` alone when ``seq_idx`` selects
    every sequence in order (the caller keeps its arrays)."""
    idx = np.asarray(seq_idx, dtype=np.int64)
    if identity:
        if np.array_equal(idx, np.arange(offsets.size - 1)):
            return None
    starts = offsets[idx]
    lengths = offsets[idx + 1] - starts
    new = np.zeros(idx.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=new[1:])
    rows = np.repeat(starts - new[:-1], lengths) + np.arange(new[-1])
    return rows if identity else (rows, new)


#: How many times a failed Cholesky factorisation is retried, each time with
#: ten times more jitter on the diagonal (as GPy's ``jitchol``): at most
#: ``jitter * 10**JITTER_TRIES`` in all.
JITTER_TRIES = 6


class JitterWarning(RuntimeWarning):
    """A covariance needed more jitter than the ``jitter`` asked for to be
    factorised; the warning says how much was used."""


def jittered_cholesky(A, jitter, what, *, factor=None):
    """Lower Cholesky factors of ``A``, retried with more jitter on failure.

    The first try factorises ``A`` as given (which already holds ``jitter``
    on its diagonal, if the caller added it). After a failure the diagonal
    gets ``jitter * (10**k - 1)`` more, ``k = 1 .. JITTER_TRIES``: the total
    jitter becomes ``jitter * 10**k``. A retry that succeeds emits a
    :class:`JitterWarning` (shown once per call site by Python's default
    filter).

    Parameters
    ----------
    A : ndarray of shape (..., d, d)
        Symmetric matrices (a stack factorises as a whole: one jitter for
        all).
    jitter : float
        The jitter already on the diagonal (a tiny default, ``1e-10`` times
        the mean diagonal, is used to grow from when it is 0).
    what : str
        Name of the matrix in the messages.
    factor : callable, default=None
        ``factor(A) -> L`` (default ``np.linalg.cholesky``).

    Returns
    -------
    L : ndarray of shape (..., d, d)
    total_jitter : float
        The jitter on the factorised diagonal (``jitter`` when the first try
        succeeded).

    Raises
    ------
    ValueError
        If ``A`` is not finite, or not positive definite even with
        ``jitter * 10**JITTER_TRIES``.

    Examples
    --------
    >>> import numpy as np
    >>> import warnings
    >>> A = np.ones((2, 2))  # singular
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     L, used = jittered_cholesky(A, 1e-4, "A")
    >>> used
    0.001
    """
    factor = np.linalg.cholesky if factor is None else factor
    A = np.asarray(A, dtype=np.float64)
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{what} has non-finite entries (an overflow upstream).")
    try:
        return factor(A), float(jitter)
    except LinAlgError:
        pass
    diag = np.diagonal(A, axis1=-2, axis2=-1)
    base = float(jitter) if jitter > 0 else 1e-10 * max(float(np.abs(diag).mean()), 1e-300)
    eye = np.eye(A.shape[-1])
    for k in range(1, JITTER_TRIES + 1):
        total = base * 10.0 ** k
        try:
            L = factor(A + (total - jitter) * eye)
        except LinAlgError:
            continue
        warnings.warn(
            f"{what} was not positive definite with jitter {jitter:g}; "
            f"factorised with {total:g} on the diagonal.",
            JitterWarning, stacklevel=3,
        )
        return L, total
    raise ValueError(
        f"{what} is not positive definite even with {total:g} on the diagonal "
        f"({JITTER_TRIES} retries from jitter {jitter:g}): the kernel matrix "
        "is broken (check the features and the kernel's hyperparameters)."
    )


def _scipy_cholesky(A):
    # threaded LAPACK potrf is very slow at M ~ 500 on a busy machine
    with small_blas():
        return cholesky(A, lower=True)


def inducing_cholesky(kernel, Z, jitter=1e-4, *, return_jitter=False):
    """Lower Cholesky factor of ``k(Z, Z) + jitter I``.

    If the factorisation fails, it is retried with ten times the jitter, up
    to :data:`JITTER_TRIES` times (:func:`jittered_cholesky`, with a
    :class:`JitterWarning`).

    Parameters
    ----------
    kernel : sklearn Kernel
        Kernel of the GPs.
    Z : {array-like, sparse matrix} of shape (M, n_features)
        Inducing inputs.
    jitter : float, default=1e-4
        Added to the diagonal.
    return_jitter : bool, default=False
        Also return the jitter that was used.

    Returns
    -------
    Lzz : ndarray of shape (M, M)
    jitter : float
        Only with ``return_jitter``: the jitter on the factorised diagonal.

    Raises
    ------
    ValueError
        If the matrix is not positive definite even with the largest jitter.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp.kernels import LinearKernel
    >>> inducing_cholesky(LinearKernel(), np.eye(2), jitter=0.0)
    array([[1., 0.],
           [0., 1.]])
    """
    Z = _check_X(Z, "Z")
    if not (np.isfinite(jitter) and jitter >= 0):
        raise ValueError(f"jitter must be a finite float >= 0, got {jitter!r}.")
    Kzz = np.asarray(kernel(Z), dtype=np.float64)
    Kzz[np.diag_indices_from(Kzz)] += jitter
    Lzz, used = jittered_cholesky(
        Kzz, jitter, f"k(Z, Z) + {jitter:g} I (M = {Kzz.shape[0]} inducing points)",
        factor=_scipy_cholesky)
    return (Lzz, used) if return_jitter else Lzz


def stable_jitter(kernel, X_flat, lengths, Z, jitter=1e-4):
    """The smallest jitter ``jitter * 10**k`` (``k <= JITTER_TRIES``) with
    which ``k(Z, Z) + jitter I`` and every sequence's ``Ktilde_n`` are
    positive definite, and the terms computed with it.

    ``Ktilde_n = k(X_n, X_n) + jitter I - A_n A_n^T`` is positive
    semi-definite in exact arithmetic (a Schur complement) but can lose
    that by rounding when ``k(Z, Z)`` is ill-conditioned (a low-rank
    kernel, duplicate inducing points); every marginal covariance
    ``Sigma_n = Ktilde_n + A_n S A_n^T`` of the ELBO is then positive
    definite for any ``S``. A :class:`JitterWarning` says when more than
    ``jitter`` was needed.

    Parameters
    ----------
    kernel : sklearn Kernel
    X_flat : {array-like, sparse matrix} of shape (n_tokens, n_features)
    lengths : array-like of int of shape (n_sequences,)
    Z : {array-like, sparse matrix} of shape (M, n_features)
    jitter : float, default=1e-4
        The jitter asked for.

    Returns
    -------
    jitter : float
        The jitter used.
    terms : GPTerms
        :func:`compute_gp_terms` with it.

    Raises
    ------
    ValueError
        If no jitter up to ``jitter * 10**JITTER_TRIES`` works.
    """
    Lzz, used = inducing_cholesky(kernel, Z, jitter, return_jitter=True)
    for _ in range(JITTER_TRIES + 1):
        terms = compute_gp_terms(kernel, X_flat, lengths, Z, jitter=used, Lzz=Lzz)
        if all(_is_pd(Kt) for Kt in terms.Ktilde):
            if used != jitter:
                warnings.warn(
                    f"The GP covariances were not positive definite with jitter "
                    f"{jitter:g}; using {used:g} (see the fitted jitter_).",
                    JitterWarning, stacklevel=2)
            return used, terms
        used = used * 10.0 if used > 0 else 1e-10
        if used > max(jitter, 1e-10) * 10.0 ** JITTER_TRIES:
            break
        Lzz = inducing_cholesky(kernel, Z, used)
    raise ValueError(
        "The GP covariances k(X_n, X_n) - Q_n of the training sequences are not "
        f"positive definite even with jitter {used:g}: check the features and "
        "the kernel's hyperparameters."
    )


def _is_pd(A):
    try:
        np.linalg.cholesky(A)
    except LinAlgError:
        return False
    return True


def _token_groups(offsets, max_tokens=_g._BUCKET_TOKENS):
    """Consecutive sequence ranges ``(n0, n1)`` of at most ``max_tokens``
    tokens (or one longer sequence)."""
    groups, n0 = [], 0
    n_seq = offsets.size - 1
    while n0 < n_seq:
        n1 = n0 + 1
        while n1 < n_seq and offsets[n1 + 1] - offsets[n0] <= max_tokens:
            n1 += 1
        groups.append((n0, n1))
        n0 = n1
    return groups


def compute_gp_terms(kernel, X_flat, lengths, Z, *, jitter=1e-4, Lzz=None):
    """Kernel quantities ``A``, ``Ktilde`` of a set of sequences.

    Parameters
    ----------
    kernel : sklearn Kernel
        Kernel of the GPs (e.g. :class:`~skgpstruct.gp.kernels.LinearKernel`).
    X_flat : {ndarray, sparse matrix} of shape (n_tokens, n_features)
        Tokens of all sequences, stacked.
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths, summing to ``n_tokens``.
    Z : {ndarray, sparse matrix} of shape (M, n_features)
        Inducing inputs.
    jitter : float, default=1e-4
        Added to the diagonals of ``k(Z, Z)`` and of each ``k(X_n, X_n)``.
    Lzz : ndarray of shape (M, M), default=None
        Precomputed :func:`inducing_cholesky` (same kernel and jitter).

    Returns
    -------
    terms : GPTerms

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp.kernels import LinearKernel
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> terms = compute_gp_terms(LinearKernel(), X, [1, 2], X[:2], jitter=0.0)
    >>> terms.A
    array([[1., 0.],
           [0., 1.],
           [1., 1.]])
    >>> terms.Ktilde[1]
    array([[0., 0.],
           [0., 0.]])
    """
    X_flat = _check_X(X_flat)
    Z = _check_X(Z, "Z")
    offsets = _check_offsets(lengths, X_flat.shape[0])
    if Lzz is None:
        Lzz = inducing_cholesky(kernel, Z, jitter)
    else:
        Lzz = np.asarray(Lzz, dtype=np.float64)
        if Lzz.shape != (Z.shape[0], Z.shape[0]):
            raise ValueError(
                f"Lzz must have shape {(Z.shape[0],) * 2}, got {Lzz.shape}."
            )
    Knz = np.ascontiguousarray(kernel(X_flat, Z), dtype=np.float64)
    A = np.ascontiguousarray(solve_triangular(Lzz, Knz.T, lower=True).T)
    Ktilde = []
    with small_blas():
        for n0, n1 in _token_groups(offsets):
            base = offsets[n0]
            Kg = np.asarray(kernel(X_flat[base : offsets[n1]]), dtype=np.float64)
            for n in range(n0, n1):
                s, e = offsets[n] - base, offsets[n + 1] - base
                An = A[offsets[n] : offsets[n + 1]]
                Kt = Kg[s:e, s:e] - An @ An.T
                Kt[np.diag_indices_from(Kt)] += jitter
                Ktilde.append(Kt)
    return GPTerms(A=A, Ktilde=Ktilde, offsets=offsets, Knz=Knz, Lzz=Lzz)


def sequence_marginals(terms, q_mu, q_sqrt):
    """Gaussian marginals of the latent unary potentials of each sequence.

    Parameters
    ----------
    terms : GPTerms
        From :func:`compute_gp_terms`.
    q_mu : array-like of shape (K, V, M)
        Whitened means.
    q_sqrt : array-like of shape (K, V, M, M) or (K, V*M, V*M)
        Whitened Cholesky factors, mean-field or coupled.

    Returns
    -------
    b : ndarray of shape (K, n_tokens, V)
        Means ``A m_kj``, sequences stacked.
    Sigma : list of ndarray
        Per sequence: shape (K, V, T_n, T_n) (mean-field: ``Ktilde_n +
        A_n S_kj A_n^T``) or (K, V*T_n, V*T_n) (coupled: the joint
        covariance, label-major, index ``j * T_n + t``).
    """
    q_mu = np.asarray(q_mu, dtype=np.float64)
    q_sqrt = np.asarray(q_sqrt, dtype=np.float64)
    M = terms.A.shape[1]
    _, _, coupled = _posterior_shape(q_mu, q_sqrt, M)
    buckets, perm = _g.make_buckets(terms.offsets)
    A_perm = terms.A[perm]
    b, Sig = _g.marginal_blocks(terms, q_mu, q_sqrt, coupled, buckets, A_perm)
    out = [None] * (terms.offsets.size - 1)
    for bk, Sb in zip(buckets, Sig):
        for a, n in enumerate(bk.seqs):
            out[n] = Sb[a, :, 0] if coupled else Sb[a]
    return b, out



def kernel_matrix_grads_to_theta(kernel, X_flat, lengths, Z, grads):
    """Contract gradients w.r.t. the kernel matrices into ``d / dtheta``.

    Parameters
    ----------
    kernel : sklearn Kernel
        The kernel the matrices were computed with.
    X_flat : {ndarray, sparse matrix} of shape (n_tokens, n_features)
        Tokens, stacked.
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths.
    Z : {ndarray, sparse matrix} of shape (M, n_features)
        Inducing inputs.
    grads : dict
        ``"Knz"`` (n_tokens, M), ``"Knn"`` (list of (T_n, T_n)) and ``"Kzz"``
        (M, M), as returned by :func:`expected_log_likelihood` with
        ``hyperparameters=True``.

    Returns
    -------
    grad_theta : ndarray of shape (kernel.n_dims,)
        ``sum_ab dF/dKnz_ab dKnz_ab/dtheta + sum_n (...Knn_n...) + (...Kzz...)``,
        by :func:`~skgpstruct.gp.kernels.kernel_gradient_contract` (the
        ``Knn`` blocks in block-diagonal groups of up to 512 tokens).
    """
    X_flat = _check_X(X_flat)
    Z = _check_X(Z, "Z")
    offsets = _check_offsets(lengths, X_flat.shape[0])
    if len(grads["Knn"]) != offsets.size - 1:
        raise ValueError("grads['Knn'] must hold one block per sequence.")
    out = kernel_gradient_contract(kernel, X_flat, Z, grads["Knz"])
    out = out + kernel_gradient_contract(kernel, Z, None, grads["Kzz"])
    for n0, n1 in _token_groups(offsets):
        G = block_diag(*grads["Knn"][n0:n1])
        out = out + kernel_gradient_contract(
            kernel, X_flat[offsets[n0] : offsets[n1]], None, G
        )
    return out




def split_kernel_scale(kernel):
    """The base kernel and scale of ``ConstantKernel(c) * base``.

    GPStructTagger with ``optimize_hyperparameters="scale"`` learns its
    kernel as ``ConstantKernel(c) * base`` and evaluates it as ``c`` times
    the terms of ``base`` (``GPTerms.scaled``: the jitter scales with ``c``
    too), so that the terms of ``base`` are computed once per fit. This is
    the one function that recognises that form.

    Parameters
    ----------
    kernel : sklearn Kernel
        A kernel, possibly an sklearn ``Product`` whose first factor is a
        ``ConstantKernel``.

    Returns
    -------
    base : sklearn Kernel
        ``kernel.k2`` for such a product, else ``kernel``.
    factor : float
        ``kernel.k1.constant_value`` for such a product, else 1.0.

    Examples
    --------
    >>> from sklearn.gaussian_process.kernels import ConstantKernel
    >>> from skgpstruct.gp.kernels import LinearKernel
    >>> split_kernel_scale(ConstantKernel(2.0) * LinearKernel())
    (LinearKernel(variance=1, bias=0), 2.0)
    >>> split_kernel_scale(LinearKernel())
    (LinearKernel(variance=1, bias=0), 1.0)
    """
    if isinstance(kernel, Product) and isinstance(kernel.k1, ConstantKernel):
        return kernel.k2, float(kernel.k1.constant_value)
    return kernel, 1.0
