"""Weight-space sampling of the unary potentials of long sequences.

In the weight-space form (:mod:`skgpstruct.gp.weight_space`) the unary
potentials of a sequence ``n`` and label ``v`` are ``f_v = sigma X_n w_v``
plus the jitter's noise, with ``q(w_v) = N(m_v, diag(s_v))`` (whitened).
The short-sequence path forms their marginal covariance
``Sigma_n = sigma^2 (X_n diag(s_v) X_n^T + jitter I)`` (``T_n x T_n``) and
samples through its Cholesky factor: ``O(T^2)`` memory and ``O(T^3)`` time,
which rules out a sequence of ten thousand tokens. The same Gaussian is
sampled without any ``T x T`` matrix as

    ``f_v = sigma (X_n (m_v + sqrt(s_v) * eps_w) + sqrt(jitter) * eps_T)``,

``eps_w ~ N(0, I)`` over the ``D_n`` features active in the sequence (the
columns of ``X_n`` with a nonzero entry; the others do not enter ``f``) and
``eps_T ~ N(0, I_T)``: mean ``sigma X_n m_v``, covariance
``sigma^2 (X_n diag(s_v) X_n^T + jitter I)``, at ``O(S nnz(X_n) + S (D_n +
T))`` per label.

Which sequences are sampled this way (:func:`use_weight_space_sampling`):
those longer than :data:`LONG_MIN_LENGTH` tokens for which the cost model
says so. Shorter ones keep the Cholesky path, bit for bit (the sentences of
the benchmarks are far below the threshold). The draws of a sequence come
from its own seed (:func:`~skgpstruct.gp.sampling.draw_normals` with
``n_weights``: ``eps_T`` is the ``eps`` of the Cholesky path, ``eps_w`` is
drawn after it), so they depend on nothing but the sequence, its seed and
the model.

Gradients of the sampled expected log-likelihood:

- ``"pathwise"``: with the draws fixed ``F`` is linear in ``m`` and
  ``sqrt(s)``: ``d/dm = sigma X_n^T G``, ``d/ds = sigma (X_n^T G) eps_w /
  (2 sqrt(s))`` summed over the samples, ``G = d log p / dF``; the
  derivative w.r.t. ``log sigma^2`` is ``0.5 <G, F>`` as on the short path.
  These are the exact gradients of the fixed-sample objective.
- ``"score"``: the score-function estimator in weight space,
  ``E[log p(y | f(w)) grad log q(w)]`` with ``grad_m log q = eps_w /
  sqrt(s)`` and ``grad_s log q = (eps_w^2 - 1) / (2 s)``, with the same
  cross-fitted per-coordinate control variates as the transitions
  (:func:`~skgpstruct.gp._elbo_grads.score_transition_grads`). It is
  unbiased for the same gradient as the short path's estimator in ``f``
  space (which is its conditional expectation given ``f``, so it has the
  lower variance), and needs no ``Sigma_n^-1``.
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from . import _elbo_grads as _g
from .sampling import draw_normals

__all__ = ["LONG_MIN_LENGTH", "WeightSpaceCovariance", "use_weight_space_sampling"]

#: Sequences of at most this many tokens are always sampled through the
#: Cholesky factor of their covariance; longer ones go by the cost model of
#: :func:`use_weight_space_sampling`. Far above sentence lengths (the
#: longest CoNLL-2000 chunking sentence has 78 tokens), so that sentence
#: data keep their numbers bit for bit, and where the Cholesky path's
#: ``T^3`` starts to dominate a fit (it is milliseconds per sequence and
#: label below).
LONG_MIN_LENGTH = 256


def use_weight_space_sampling(length, nnz, n_weights, n_samples):
    """Whether a sequence's unary potentials are sampled in weight space.

    The rule: ``T > LONG_MIN_LENGTH`` and

        ``S (nnz + D + T) < T^3 / 3 + S T^2 / 2``,

    the multiply-adds (and normal draws) per label of one batch of ``S``
    samples in weight space (a sparse product with ``X_n`` and ``D + T``
    draws) against those of the Cholesky path (factorising the ``T x T``
    covariance, then one triangular product per sample). The Cholesky path
    also builds the covariance (``sum_d c_d^2`` products, ``c_d`` the tokens
    with feature ``d``: ``T^2`` already for a bias feature) and holds
    ``O(T^2)`` memory, and its backward pass costs ``O(T^3)`` more against
    ``O(S nnz)``; leaving these out makes the rule favour the Cholesky
    path, which it keeps only for long sequences of very dense,
    high-dimensional features (more than about ``T / 3 + T^2 / (3 S)``
    nonzeros per token).

    Parameters
    ----------
    length : int
        Tokens ``T`` of the sequence.
    nnz : int
        Nonzero entries of its feature matrix ``X_n``.
    n_weights : int
        Features ``D`` active in the sequence.
    n_samples : int
        Samples ``S`` drawn per label.

    Returns
    -------
    bool

    Examples
    --------
    >>> use_weight_space_sampling(40, 200, 10, 100)
    False
    >>> use_weight_space_sampling(10_000, 40_000, 50, 100)
    True
    """
    T, S = int(length), int(n_samples)
    if T <= LONG_MIN_LENGTH:
        return False
    return S * (int(nnz) + int(n_weights) + T) < T ** 3 / 3 + S * T * T / 2


class LongSequence(NamedTuple):
    """A sequence sampled in weight space: its position ``seq`` among the
    sequences, its token rows ``start:stop``, the columns ``cols`` (D_n,)
    active in it and its features ``X`` (T, D_n) restricted to them
    (canonical CSR: duplicates summed, explicit zeros dropped)."""

    seq: int
    start: int
    stop: int
    cols: np.ndarray
    X: sp.csr_matrix


def find_long_sequences(X, offsets, n_samples):
    """The sequences of ``X`` (CSR, sequences stacked at ``offsets``) that
    :func:`use_weight_space_sampling` sends to weight space with
    ``n_samples`` samples (none when ``n_samples`` is None)."""
    if n_samples is None:
        return []
    lengths = np.diff(offsets)
    out = []
    for n in np.flatnonzero(lengths > LONG_MIN_LENGTH):
        a, b = int(offsets[n]), int(offsets[n + 1])
        Xn = sp.csr_matrix(X[a:b], dtype=np.float64, copy=True)
        Xn.sum_duplicates()
        Xn.eliminate_zeros()
        cols = np.unique(Xn.indices)
        if use_weight_space_sampling(b - a, Xn.nnz, cols.size, n_samples):
            out.append(LongSequence(int(n), a, b, cols, sp.csr_matrix(Xn[:, cols])))
    return out


def short_buckets(offsets, short):
    """Length buckets (:func:`~skgpstruct.gp._elbo_grads.make_buckets`) of
    the sequences ``short`` (positions, increasing), numbered as in
    ``offsets``: the buckets ``make_buckets`` gives those sequences on
    their own, so each is processed as without the long sequences.
    ``start`` / ``stop`` count the tokens of the short sequences only (the
    weight-space form does not use them)."""
    if short.size == 0:
        return []
    sub = np.concatenate([[0], np.cumsum(np.diff(offsets)[short])])
    buckets, _ = _g.make_buckets(sub)
    out = []
    for bk in buckets:
        seqs = short[bk.seqs]
        rows = offsets[seqs][:, None] + np.arange(bk.T)[None, :]
        out.append(_g.Bucket(bk.T, seqs, rows, bk.start, bk.stop))
    return out


def _weight_noise(X, sd, sd_jitter, eps_w, eps_T):
    """``X (sd * eps_w) + sd_jitter * eps_T`` of every sample, (S, T, V).

    ``X`` (T, D), ``sd`` (D, V) the weights' standard deviations,
    ``eps_w`` (S, V, D), ``eps_T`` (S, V, T)."""
    S, V, D = eps_w.shape
    T = X.shape[0]
    W = (eps_w.transpose(2, 0, 1) * sd[:, None, :]).reshape(D, S * V)
    Z = np.asarray(X @ W).reshape(T, S, V).transpose(1, 0, 2)
    return Z + sd_jitter * eps_T.transpose(0, 2, 1)


class WeightSpaceCovariance:
    """The covariance ``X_n diag(s_v) X_n^T + jitter I`` of a long
    sequence's unary potentials, kept factored (never a ``T x T`` matrix).

    What :func:`~skgpstruct.gp.weight_space.feature_moments` gives in place
    of the dense covariances for the sequences sampled in weight space.

    Parameters
    ----------
    X : csr_matrix of shape (T, D)
        The sequence's features, restricted to its active columns.
    s : ndarray of shape (D, V)
        Variances of the weights of those columns (scaled by the kernel's
        variance, as the covariance).
    jitter : float
        The diagonal term (scaled likewise).
    """

    def __init__(self, X, s, jitter):
        self.X = sp.csr_matrix(X, dtype=np.float64)
        self.s = np.asarray(s, dtype=np.float64)
        self.jitter = float(jitter)

    @property
    def shape(self):
        """``(1, V, T, T)``, the shape of the dense covariances."""
        T, V = self.X.shape[0], self.s.shape[1]
        return (1, V, T, T)

    def toarray(self):
        """The dense covariances, ndarray of shape (1, V, T, T) (for small
        ``T`` only: tests and inspection)."""
        Xd = self.X.toarray()
        T = Xd.shape[0]
        out = np.einsum("td,dv,ud->vtu", Xd, self.s, Xd)
        return (out + self.jitter * np.eye(T))[None]

    def sample_potentials(self, b, m_bin, s_bin, n_samples, seed):
        """Samples of the sequence's potentials (one mixture component).

        Parameters
        ----------
        b : ndarray of shape (1, T, V)
            Means of the unary potentials.
        m_bin, s_bin : ndarray of shape (V, V)
            Means and variances of the transition potentials.
        n_samples : int
            Samples ``S``.
        seed : int
            The sequence's seed (:func:`~skgpstruct.gp.sampling.draw_normals`
            with ``n_weights``).

        Returns
        -------
        F : ndarray of shape (1, 1, S, T, V)
        B : ndarray of shape (1, 1, S, V, V)
            As :func:`~skgpstruct.gp.sampling.sample_potentials`.
        """
        T, D = self.X.shape
        V = self.s.shape[1]
        eps, eps_bin, eps_w = draw_normals([T], 1, V, n_samples, [seed],
                                           n_weights=[D])
        noise = _weight_noise(self.X, np.sqrt(self.s), np.sqrt(self.jitter),
                              eps_w[0][0], eps[0][0])
        F = np.ascontiguousarray(noise + b[0])[None, None]
        B = m_bin + np.sqrt(s_bin) * eps_bin[0][None]
        return F, B


def long_ell(likelihood, long, b, y_flat, params, jitter, noise, values, grad, *,
             gradient="pathwise", log_scale=None):
    """Expected log-likelihood of the long sequences, sampled in weight space.

    Fills ``values[seq]`` of every :class:`LongSequence` of ``long`` and,
    when ``grad`` is a dict (that of
    :func:`~skgpstruct.gp.ell.ell_from_blocks` after the moments' backward
    pass), adds their gradients to its ``"m"``, ``"s"``, ``"m_bin"``,
    ``"s_bin"`` (and ``"log_scale"``) in place.

    ``b`` (1, N, V) are the unscaled means ``X m``; ``params`` a
    :class:`~skgpstruct.gp.weight_space.FeatureParams`; ``noise`` the
    ``(eps, eps_bin, eps_w)`` of :func:`~skgpstruct.gp.sampling.draw_normals`
    with ``n_weights``; ``log_scale`` as in ``ell_from_blocks`` (the
    samples multiplied by ``exp(log_scale / 2)``).
    """
    eps, eps_bin, eps_w = noise
    amp = 1.0 if log_scale is None else float(np.exp(0.5 * log_scale))
    return_grad = grad is not None
    pathwise = gradient == "pathwise"
    need_lik_grad = return_grad and (pathwise or log_scale is not None)
    m_bin, s_bin = params.m_bin, params.s_bin
    sq_bin = np.sqrt(s_bin)
    sd_jitter = np.sqrt(jitter)
    for ls in long:
        T, D = ls.X.shape
        E_w = eps_w[ls.seq][0]  # (S, V, D)
        S, V = E_w.shape[0], E_w.shape[1]
        s_cols = params.s[ls.cols]  # (D, V)
        sd = np.sqrt(s_cols)
        F = _weight_noise(ls.X, sd, sd_jitter, E_w, eps[ls.seq][0])
        F += b[0, ls.start:ls.stop]
        if amp != 1.0:
            F *= amp
        Eb = eps_bin[ls.seq]  # (1, S, V, V)
        Bs = m_bin + sq_bin * Eb
        Y = y_flat[ls.start:ls.stop][None]
        if need_lik_grad:
            lp, gF, gB = likelihood.log_prob_grad_many(F[None], Bs, Y)
            gF, gB = gF[0], gB[0]
        else:
            lp = likelihood.log_prob_many(F[None], Bs, Y)
        values[ls.seq] = lp[0].mean()
        if not return_grad:
            continue
        if log_scale is not None:
            grad["log_scale"] += 0.5 * float(np.einsum("stv,stv->", gF, F)) / S
        if pathwise:
            if amp != 1.0:
                gF *= amp  # d log p / d(unscaled F)
            # (D, S, V): X^T G of every sample
            XG = np.asarray(ls.X.T @ gF.transpose(1, 0, 2).reshape(T, S * V))
            XG = XG.reshape(D, S, V)
            grad["m"][ls.cols] += XG.sum(axis=1) / S
            grad["s"][ls.cols] += ((XG * E_w.transpose(2, 0, 1)).sum(axis=1)
                                   * (0.5 / S) / sd)
            grad["m_bin"] += gB.sum(axis=0) / S
            grad["s_bin"] += (gB * Eb[0]).sum(axis=0) * (0.5 / S) / sq_bin
        else:
            E_dv = E_w.transpose(0, 2, 1)[None]  # (1, S, D, V)
            g_m, g_s = _g.score_transition_grads(E_dv, sd, s_cols, lp)
            grad["m"][ls.cols] += g_m[0]
            grad["s"][ls.cols] += g_s[0]
            e_m, e_s = _g.score_transition_grads(Eb, sq_bin, s_bin, lp)
            grad["m_bin"] += e_m[0]
            grad["s_bin"] += e_s[0]
    return values, grad
