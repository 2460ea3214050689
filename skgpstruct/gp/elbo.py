"""Gray-box ELBO of GPStructTagger and its gradients.

The model (DESIGN.md section 4; Galliani et al., AISTATS 2017) in the
whitened parametrisation: ``V`` labels, each with a GP over token features,
inducing inputs ``Z`` (M, D) shared by the labels,
``Lzz = chol(k(Z, Z) + jitter I)`` and whitened inducing values ``v_j`` with
``u_j = Lzz v_j``. For sequence ``n`` with tokens ``X_n`` (T_n, D):

- ``A_n = k(X_n, Z) Lzz^-T`` (T_n, M),
- ``Ktilde_n = k(X_n, X_n) + jitter I - A_n A_n^T`` (T_n, T_n),
- ``q(v) = sum_k pi_k prod_j N(v_j; m_kj, S_kj)``, ``S_kj = L_kj L_kj^T``
  (mean-field over labels; ``q_mu`` (K, V, M), ``q_sqrt`` (K, V, M, M)), or
  one Gaussian over all labels per component (coupled; ``q_sqrt``
  (K, V*M, V*M), label-major),
- per component ``k`` and label ``j``: ``f_nj ~ N(b, Sigma)`` with
  ``b = A_n m_kj`` and ``Sigma = Ktilde_n + A_n S_kj A_n^T``; coupled, the
  ``T_n V``-dimensional joint covariance is
  ``blockdiag_j(Ktilde_n) + (I_V (x) A_n) S_k (I_V (x) A_n)^T``,
- transitions ``q(f_bin) = N(m_bin, diag(s_bin))`` (V, V).

``ELBO = scale * sum_n sum_k pi_k E_{q_k}[log p(y_n | f_n, B)] - KL(q(v) || p(v))
- KL(q(f_bin) || p(f_bin))``. Each expectation is estimated by sampling only
``T_n``-dimensional Gaussians (``T_n V``-dimensional, coupled):
``F[s, :, j] = b_kj + chol(Sigma_kj) eps[k, s, j, :]`` and
``B_s = m_bin + sqrt(s_bin) * eps_bin[k, s]``, ``S`` samples per component,
with the standard normals ``eps``, ``eps_bin`` drawn by :func:`draw_normals`
from one seed per sequence (so the draws do not depend on how sequences are
chunked or on ``n_jobs``).

Gradient estimators of the expected log-likelihood (``gradient=``):

- ``"pathwise"``: with ``eps`` fixed the sample average is a smooth
  deterministic function; ``d log p / dF`` from the likelihood is
  backpropagated through ``F = b + C eps``, the Cholesky factor ``C``
  (Murray, 2016) and the sparse-GP algebra into the variational parameters
  and, optionally, the kernel matrices. It equals finite differences of the
  fixed-sample objective, so L-BFGS can optimise that objective directly.
- ``"score"``: the gray-box estimator of the paper (supplementary D), which
  needs ``log p`` values only: ``E_q[grad log q(f) log p(y | f)]`` with the
  control variate ``h = grad log q`` and per-coordinate coefficient
  ``a = Cov(g, h) / Var(h)`` estimated from the same ``S`` samples
  (``S = 1`` gives ``a = 0``). That coefficient is correlated with the
  sample mean of ``h``, which biases the estimate by ``O(1 / S)``;
  ``control_variate="cross"`` removes the bias by cross-fitting ``a`` over
  two halves of the samples. ``grad_b log N = Sigma^-1 (f - b)``,
  ``grad_Sigma log N = (Sigma^-1 (f - b) (f - b)^T Sigma^-1 - Sigma^-1) / 2``.
  The gradients w.r.t. ``(b, Sigma)`` then follow the same chain rule as
  the pathwise ones.

All gradients are of ``values.sum()`` (resp. of the ELBO). Gradients with
respect to symmetric matrices (``Kzz``, each ``Knn`` block) are symmetric
and meant to be contracted entry by entry with ``dK / dtheta`` (see
:func:`kernel_matrix_grads_to_theta`).
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, block_diag, cholesky, solve_triangular

from ..likelihoods import get_likelihood
from . import _elbo_grads as _g
from .kernels import kernel_gradient_contract
from .posterior import VariationalParams, mixture_kl, transition_kl

__all__ = [
    "GPTerms",
    "inducing_cholesky",
    "compute_gp_terms",
    "sequence_marginals",
    "draw_normals",
    "expected_log_likelihood",
    "kernel_matrix_grads_to_theta",
    "elbo",
]

_GRADIENTS = ("pathwise", "score")
_CONTROL_VARIATES = ("same", "cross", "none")
_small_blas = _g.small_blas


# --------------------------------------------------------------------------
# validation helpers


def _check_offsets(lengths, n_tokens):
    arr = np.asarray(lengths)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"lengths must be integers, got dtype {arr.dtype}.")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"lengths must be a non-empty 1-D array, got shape {arr.shape}."
        )
    if arr.min() <= 0:
        raise ValueError("lengths must be positive.")
    if n_tokens is not None and int(arr.sum()) != n_tokens:
        raise ValueError(
            f"lengths sum to {int(arr.sum())} but there are {n_tokens} tokens."
        )
    offsets = np.zeros(arr.size + 1, dtype=np.int64)
    np.cumsum(arr, out=offsets[1:])
    return offsets


def _check_X(X, name="X_flat"):
    if sp.issparse(X):
        return sp.csr_matrix(X)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_rows, n_features), got shape {X.shape}."
        )
    return X


def _check_params(params, M):
    """Shapes and finiteness of the variational parameters."""
    if not isinstance(params, VariationalParams):
        raise TypeError(
            f"params must be a VariationalParams, got {type(params).__name__}."
        )
    q_mu = np.asarray(params.q_mu, dtype=np.float64)
    q_sqrt = np.asarray(params.q_sqrt, dtype=np.float64)
    if q_mu.ndim != 3 or q_mu.shape[2] != M:
        raise ValueError(
            f"params.q_mu must have shape (K, V, M) with M = {M} inducing points, "
            f"got {q_mu.shape}."
        )
    K, V, _ = q_mu.shape
    if q_sqrt.shape == (K, V, M, M):
        coupled = False
    elif q_sqrt.shape == (K, V * M, V * M):
        coupled = True
    else:
        raise ValueError(
            f"params.q_sqrt must have shape (K, V, M, M) = {(K, V, M, M)} "
            f"(mean-field) or (K, V*M, V*M) = {(K, V * M, V * M)} (coupled), "
            f"got {q_sqrt.shape}."
        )
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
    return q_mu, q_sqrt, w, m_bin, s_bin, coupled


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
        starts = self.offsets[idx]
        lengths = self.offsets[idx + 1] - starts
        offsets = np.zeros(idx.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        rows = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return GPTerms(
            A=self.A[rows],
            Ktilde=[self.Ktilde[i] for i in idx],
            offsets=offsets,
            Knz=self.Knz[rows],
            Lzz=self.Lzz,
        )


def inducing_cholesky(kernel, Z, jitter=1e-4):
    """Lower Cholesky factor of ``k(Z, Z) + jitter I``.

    Parameters
    ----------
    kernel : sklearn Kernel
        Kernel of the GPs.
    Z : {array-like, sparse matrix} of shape (M, n_features)
        Inducing inputs.
    jitter : float, default=1e-4
        Added to the diagonal.

    Returns
    -------
    Lzz : ndarray of shape (M, M)

    Raises
    ------
    ValueError
        If the matrix is not positive definite.

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
    try:
        # threaded LAPACK potrf is very slow at M ~ 500 on a busy machine
        with _small_blas():
            return cholesky(Kzz, lower=True)
    except LinAlgError as exc:
        raise ValueError(
            f"k(Z, Z) + {jitter:g} I is not positive definite (M = {Kzz.shape[0]}): "
            "increase the jitter, or remove duplicate / near-duplicate inducing "
            "points."
        ) from exc


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
    with _small_blas():
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
    if q_mu.ndim != 3 or q_mu.shape[2] != M:
        raise ValueError(f"q_mu must have shape (K, V, {M}), got {q_mu.shape}.")
    K, V, _ = q_mu.shape
    if q_sqrt.shape == (K, V, M, M):
        coupled = False
    elif q_sqrt.shape == (K, V * M, V * M):
        coupled = True
    else:
        raise ValueError(
            f"q_sqrt must have shape {(K, V, M, M)} or {(K, V * M, V * M)}, got "
            f"{q_sqrt.shape}."
        )
    buckets, perm = _g.make_buckets(terms.offsets)
    A_perm = terms.A[perm]
    b, Sig = _g.marginal_blocks(terms, q_mu, q_sqrt, coupled, buckets, A_perm)
    out = [None] * (terms.offsets.size - 1)
    for bk, Sb in zip(buckets, Sig):
        for a, n in enumerate(bk.seqs):
            out[n] = Sb[a, :, 0] if coupled else Sb[a]
    return b, out


# --------------------------------------------------------------------------
# sampling


def draw_normals(lengths, n_components, n_classes, n_samples, seeds):
    """Standard normal draws of every sequence, from one seed per sequence.

    Parameters
    ----------
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths.
    n_components : int
        Mixture components ``K``.
    n_classes : int
        Labels ``V``.
    n_samples : int
        Samples ``S`` per component.
    seeds : array-like of int of shape (n_sequences,)
        One seed per sequence (negative values are taken modulo ``2**64``):
        sequence ``n``'s draws come from
        ``numpy.random.default_rng(seeds[n])`` only, so they do not depend
        on how the sequences are chunked or on ``n_jobs``.

    Returns
    -------
    eps : list of ndarray of shape (K, S, V, T_n)
        For the unary potentials.
    eps_bin : list of ndarray of shape (K, S, V, V)
        For the transitions.

    Examples
    --------
    >>> eps, eps_bin = draw_normals([2, 3], 1, 2, 5, seeds=[7, 8])
    >>> eps[1].shape, eps_bin[1].shape
    ((1, 5, 2, 3), (1, 5, 2, 2))
    """
    offsets = _check_offsets(lengths, None)
    lengths = np.diff(offsets)
    for name, v in (("n_components", n_components), ("n_classes", n_classes),
                    ("n_samples", n_samples)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}.")
    seeds = np.asarray(seeds)
    if seeds.dtype.kind not in "iu" or seeds.shape != lengths.shape:
        raise ValueError(
            f"seeds must be {lengths.size} integers (one per sequence), got "
            f"{seeds.dtype} array of shape {seeds.shape}."
        )
    K, V, S = int(n_components), int(n_classes), int(n_samples)
    eps, eps_bin = [], []
    for T, seed in zip(lengths, seeds.tolist()):
        rng = np.random.default_rng(seed % 2**64)
        eps.append(rng.standard_normal((K, S, V, int(T))))
        eps_bin.append(rng.standard_normal((K, S, V, V)))
    return eps, eps_bin


# --------------------------------------------------------------------------
# expected log-likelihood


def _check_draws(eps, eps_bin, lengths, K, V):
    n_seq = lengths.size
    if len(eps) != n_seq or len(eps_bin) != n_seq:
        raise ValueError(
            f"eps and eps_bin must hold one array per sequence ({n_seq}), got "
            f"{len(eps)} and {len(eps_bin)}."
        )
    S = np.shape(eps[0])[1] if np.ndim(eps[0]) == 4 else -1
    for n, T in enumerate(lengths):
        if np.shape(eps[n]) != (K, S, V, T) or S < 1:
            raise ValueError(
                f"eps[{n}] must have shape (K, S, V, T_n) = {(K, S, V, int(T))}, got "
                f"{np.shape(eps[n])}."
            )
        if np.shape(eps_bin[n]) != (K, S, V, V):
            raise ValueError(
                f"eps_bin[{n}] must have shape (K, S, V, V) = {(K, S, V, V)}, got "
                f"{np.shape(eps_bin[n])}."
            )
    return S


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
    control_variate="same",
    log_scale=None,
):
    """Monte Carlo expected log-likelihood of each sequence, with gradients.

    Parameters
    ----------
    likelihood : {"crf", "pseudo"} or Likelihood
        The structured likelihood (see :mod:`skgpstruct.likelihoods`).
    terms : GPTerms
        Kernel quantities of the sequences (:func:`compute_gp_terms`).
    y_flat : array-like of int of shape (n_tokens,)
        Encoded labels in ``[0, V)``, sequences stacked.
    params : VariationalParams
        Whitened variational parameters (mean-field or coupled ``q_sqrt``).
    eps : list of ndarray of shape (K, S, V, T_n)
        Standard normals of :func:`draw_normals`.
    eps_bin : list of ndarray of shape (K, S, V, V)
        Standard normals for the transitions.
    gradient : {"pathwise", "score"}, default="pathwise"
        Gradient estimator (see the module docstring). "pathwise" needs a
        likelihood with ``has_gradient``.
    return_grad : bool, default=True
        Whether to return gradients.
    hyperparameters : bool, default=False
        Whether to also return the gradients w.r.t. the kernel matrices.
    control_variate : {"same", "cross", "none"}, default="same"
        Control variate of the "score" estimator (ignored by "pathwise"):
        "same" estimates ``a = Cov(g, h) / Var(h)`` from the same ``S``
        samples, as in the paper (biased by ``O(1 / S)``: ``a`` and the
        sample mean of ``h`` are correlated); "cross" cross-fits it over two
        halves of the samples (each half corrected with the other half's
        ``a``; unbiased, somewhat noisier for small ``S``); "none" uses no
        control variate.
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
    >>> from skgpstruct.gp.kernels import LinearKernel
    >>> from skgpstruct.gp.posterior import init_variational_params
    >>> X = np.eye(3)
    >>> terms = compute_gp_terms(LinearKernel(), X, [1, 2], X)
    >>> params = init_variational_params(np.eye(3)[:, :2], kzz_cholesky=terms.Lzz)
    >>> eps, eps_bin = draw_normals([1, 2], 1, 2, 4, seeds=[0, 1])
    >>> values, grad = expected_log_likelihood(
    ...     "crf", terms, [0, 1, 0], params, eps, eps_bin)
    >>> values.shape, grad["q_sqrt"].shape
    ((2,), (1, 2, 3, 3))
    """
    likelihood = get_likelihood(likelihood)
    if gradient not in _GRADIENTS:
        raise ValueError(f"gradient must be one of {_GRADIENTS}, got {gradient!r}.")
    if control_variate not in _CONTROL_VARIATES:
        raise ValueError(
            f"control_variate must be one of {_CONTROL_VARIATES}, got "
            f"{control_variate!r}."
        )
    cv = control_variate
    if return_grad and gradient == "pathwise" and not likelihood.has_gradient:
        raise ValueError(
            f"{type(likelihood).__name__} provides log p values only; use "
            "gradient='score'."
        )
    amp = 1.0
    if log_scale is not None:
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
        amp = float(np.exp(0.5 * log_scale))
    A, offsets = terms.A, terms.offsets
    N, M = A.shape
    q_mu, q_sqrt, w, m_bin, s_bin, coupled = _check_params(params, M)
    K, V, _ = q_mu.shape
    lengths = np.diff(offsets)
    y_flat = np.asarray(y_flat)
    if y_flat.dtype.kind not in "iu" or y_flat.shape != (N,):
        raise ValueError(
            f"y_flat must be {N} integer labels (one per token), got {y_flat.dtype} "
            f"array of shape {y_flat.shape}."
        )
    if y_flat.min() < 0 or y_flat.max() >= V:
        raise ValueError(f"y_flat must lie in [0, {V}).")
    y_flat = y_flat.astype(np.int64)
    S = _check_draws(eps, eps_bin, lengths, K, V)

    buckets, perm = _g.make_buckets(offsets)
    A_perm = A[perm]
    b, Sig = _g.marginal_blocks(terms, q_mu, q_sqrt, coupled, buckets, A_perm)
    pathwise = gradient == "pathwise"
    need_lik_grad = return_grad and (pathwise or log_scale is not None)
    sq = np.sqrt(s_bin)
    wS = w / S
    values = np.empty(lengths.size)
    if return_grad:
        db = np.zeros((K, N, V))
        Sbar = []
        g_w = np.zeros(K)
        g_m = np.zeros((V, V))
        g_s = np.zeros((V, V))
        g_scale = 0.0

    for bk, Sb in zip(buckets, Sig):
        n_g, T = bk.rows.shape
        nb, d = Sb.shape[2], Sb.shape[3]
        with _small_blas():
            try:
                C = np.linalg.cholesky(Sb)
            except np.linalg.LinAlgError as exc:
                raise ValueError(
                    "A marginal covariance Sigma_n of a sequence of length "
                    f"{T} is not positive definite; increase the jitter."
                ) from exc
            E = np.stack([eps[n] for n in bk.seqs])  # (n_g, K, S, V, T)
            Eb = np.stack([eps_bin[n] for n in bk.seqs])  # (n_g, K, S, V, V)
            E_blk = E.reshape(n_g, K, S, nb, d).transpose(0, 1, 3, 4, 2)
            CE = np.matmul(C, E_blk)  # (n_g, K, nb, d, S)
            F = CE.transpose(0, 1, 4, 2, 3).reshape(n_g, K, S, V, T).swapaxes(-1, -2)
            F = F + b[:, bk.rows].transpose(1, 0, 2, 3)[:, :, None]
            F = np.ascontiguousarray(F)
            if amp != 1.0:
                F *= amp
            Bs = m_bin + sq * Eb
            # every (sequence, component) of the bucket in one likelihood call
            Yk = np.repeat(y_flat[bk.rows], K, axis=0)  # (n_g K, T)
            F4 = F.reshape(n_g * K, S, T, V)
            B4 = Bs.reshape(n_g * K, S, V, V)
            if need_lik_grad:
                lp, gF, gB = likelihood.log_prob_grad_many(F4, B4, Yk)
                gF = gF.reshape(F.shape)
                gB = gB.reshape(Bs.shape)
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
            if amp != 1.0 and pathwise:
                gF *= amp  # d log p / d(unscaled F)
            if pathwise:
                wk = wS[None, :, None, None]
                db_b = gF.sum(axis=2) * wk  # (n_g, K, T, V)
                g_blk = gF.swapaxes(-1, -2).reshape(n_g, K, S, nb, d)
                C_bar = np.matmul(
                    g_blk.transpose(0, 1, 3, 4, 2), E_blk.swapaxes(-1, -2)
                )
                C_bar *= wS[None, :, None, None, None]
                Sbar.append(_g.chol_backward(C, C_bar))
                g_m += np.einsum("nksij,k->ij", gB, wS)
                g_s += np.einsum("nksij,nksij,k->ij", gB, Eb, wS) * (0.5 / sq)
            else:
                C_inv = np.linalg.inv(C)
                C_inv_t = C_inv.swapaxes(-1, -2)
                U = np.matmul(C_inv_t, E_blk)  # Sigma^-1 (f - b), (n_g, K, nb, d, S)
                lp_b = np.broadcast_to(lp[:, :, None, :], (n_g, K, nb, S))
                wk = w[None, :, None, None]
                g_b = _g.score_mean_grad(U, lp_b, cv) * wk  # (n_g, K, nb, d)
                db_b = g_b.reshape(n_g, K, V, T).swapaxes(-1, -2)
                P = np.matmul(C_inv_t, C_inv)
                Sbar.append(_g.score_cov_grad(U, P, lp_b, cv) * wk[..., None])
                e_m, e_s = _g.score_transition_grads(Eb, sq, s_bin, lp, cv)
                g_m += np.einsum("nkij,k->ij", e_m, w)
                g_s += np.einsum("nkij,k->ij", e_s, w)
            db[:, bk.rows] = db_b.transpose(1, 0, 2, 3)

    if not return_grad:
        return values
    backward = _g.backward_coupled if coupled else _g.backward_mean_field
    d_mu, d_sqrt, dA = backward(
        A, A_perm, perm, q_mu, q_sqrt, db, Sbar, buckets, hyperparameters
    )
    grad = {"q_mu": d_mu, "q_sqrt": d_sqrt, "weights": g_w, "m_bin": g_m, "s_bin": g_s}
    if log_scale is not None:
        grad["log_scale"] = g_scale
    if hyperparameters:
        grad.update(_g.kernel_matrix_grads(terms, dA, Sbar, buckets, coupled, V))
    return values, grad


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


# --------------------------------------------------------------------------
# ELBO


def elbo(
    likelihood,
    kernel,
    X_flat,
    lengths,
    y_flat,
    Z,
    params,
    eps,
    eps_bin,
    *,
    scale=1.0,
    jitter=1e-4,
    gradient="pathwise",
    hyperparameters=False,
    return_grad=True,
    terms=None,
    transition_prior_var=1.0,
    control_variate="same",
):
    """Evidence lower bound of the whitened GPstruct model (MC estimate).

    ``scale * sum_n ELL_n - mixture_kl(q_mu, q_sqrt, weights) -
    transition_kl(m_bin, s_bin)``; with a minibatch, ``scale =
    n_sequences / batch_size`` makes it an unbiased estimate of the full
    ELBO.

    Parameters
    ----------
    likelihood : {"crf", "pseudo"} or Likelihood
        Structured likelihood.
    kernel : sklearn Kernel
        Kernel of the GPs.
    X_flat : {ndarray, sparse matrix} of shape (n_tokens, n_features)
        Tokens, stacked.
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths.
    y_flat : array-like of int of shape (n_tokens,)
        Encoded labels.
    Z : {ndarray, sparse matrix} of shape (M, n_features)
        Inducing inputs.
    params : VariationalParams
        Whitened variational parameters.
    eps, eps_bin : lists of ndarray
        Standard normals from :func:`draw_normals`.
    scale : float, default=1.0
        Multiplier of the expected log-likelihood.
    jitter : float, default=1e-4
        Diagonal jitter of ``k(Z, Z)`` and ``k(X_n, X_n)``.
    gradient : {"pathwise", "score"}, default="pathwise"
        Gradient estimator of the expected log-likelihood.
    hyperparameters : bool, default=False
        Whether to return ``"theta"``, the gradient w.r.t. ``kernel.theta``
        (and the scaled kernel-matrix gradients ``"Knz"``, ``"Knn"``,
        ``"Kzz"``).
    return_grad : bool, default=True
        Whether to return the gradients.
    terms : GPTerms, default=None
        Precomputed :func:`compute_gp_terms` of these sequences (at the
        current kernel and ``jitter``); None computes them.
    transition_prior_var : float, default=1.0
        Prior variance of the transition weights.
    control_variate : {"same", "cross", "none"}, default="same"
        Control variate of the "score" estimator (see
        :func:`expected_log_likelihood`).

    Returns
    -------
    value : float
        The ELBO estimate.
    grad : dict
        Only if ``return_grad``: ``"q_mu"``, ``"q_sqrt"``, ``"weights"``,
        ``"m_bin"``, ``"s_bin"`` (see :func:`expected_log_likelihood`) and,
        with ``hyperparameters``, ``"theta"`` (kernel.n_dims,).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp.kernels import LinearKernel
    >>> from skgpstruct.gp.posterior import init_variational_params
    >>> X, Z = np.eye(3), np.eye(3)
    >>> Lzz = inducing_cholesky(LinearKernel(), Z)
    >>> params = init_variational_params(np.eye(3)[:, :2], kzz_cholesky=Lzz)
    >>> eps, eps_bin = draw_normals([1, 2], 1, 2, 4, seeds=[0, 1])
    >>> value, grad = elbo("crf", LinearKernel(), X, [1, 2], [0, 1, 0], Z, params,
    ...                    eps, eps_bin, hyperparameters=True)
    >>> grad["theta"].shape
    (1,)
    """
    X_flat = _check_X(X_flat)
    Z = _check_X(Z, "Z")
    if terms is None:
        terms = compute_gp_terms(kernel, X_flat, lengths, Z, jitter=jitter)
    elif not np.array_equal(terms.offsets, _check_offsets(lengths, X_flat.shape[0])):
        raise ValueError("terms were computed for different sequence lengths.")
    if not np.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale!r}.")
    out = expected_log_likelihood(
        likelihood,
        terms,
        y_flat,
        params,
        eps,
        eps_bin,
        gradient=gradient,
        return_grad=return_grad,
        hyperparameters=hyperparameters and return_grad,
        control_variate=control_variate,
    )
    values, g = out if return_grad else (out, None)
    kl_u = mixture_kl(
        params.q_mu, params.q_sqrt, params.weights, return_grad=return_grad
    )
    kl_b = transition_kl(
        params.m_bin, params.s_bin, transition_prior_var, return_grad=return_grad
    )
    if not return_grad:
        return float(scale * values.sum() - kl_u - kl_b)
    (kl_u, gu), (kl_b, gb) = kl_u, kl_b
    value = float(scale * values.sum() - kl_u - kl_b)
    grad = {
        "q_mu": scale * g["q_mu"] - gu["q_mu"],
        "q_sqrt": scale * g["q_sqrt"] - gu["q_sqrt"],
        "weights": scale * g["weights"] - gu["weights"],
        "m_bin": scale * g["m_bin"] - gb["m_bin"],
        "s_bin": scale * g["s_bin"] - gb["s_bin"],
    }
    if hyperparameters:
        km = {
            "Knz": scale * g["Knz"],
            "Knn": [scale * Gn for Gn in g["Knn"]],
            "Kzz": scale * g["Kzz"],
        }
        grad.update(km)
        grad["theta"] = kernel_matrix_grads_to_theta(kernel, X_flat, lengths, Z, km)
    return value, grad
