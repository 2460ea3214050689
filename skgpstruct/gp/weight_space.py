"""Weight-space (inducing-feature) form of GPstruct with a linear kernel.

With the linear kernel ``k(x, x') = sigma^2 <x, x'>`` each label's GP is
``f_v(x) = sigma <x, u_v>`` with ``u_v ~ N(0, I)``: the features themselves
are the inducing variables, and the sparse approximation has no Nystrom
residual. The posterior is ``q(u_v) = N(m_v, diag(s_v))`` (whitened,
independent over labels and features), so

- the potentials of a sequence ``n`` and label ``v`` are Gaussian with mean
  ``sigma X_n m_v`` and covariance ``sigma^2 (X_n diag(s_v) X_n^T + jitter I)``:
  the same ``T_n``-dimensional Gaussians as the inducing-point form, sampled
  and fed to the likelihood by the same code (:mod:`skgpstruct.gp.ell`);
- a feature seen in training gets a posterior variance below the prior's, a
  feature never seen keeps ``m = 0, s = 1`` (the prior): a test token's
  predictive variance is ``sigma^2 sum_d x_d^2 s_vd``;
- the covariances cost ``O(V nnz(P))`` per evaluation, where ``P`` holds the
  products ``x_td x_t'd`` of the features shared by two tokens of one
  sequence (:func:`pair_matrix`), and the gradients w.r.t. ``s`` one product
  with ``P^T``: no ``M x M`` algebra at all;
- the KL term is closed-form, ``0.5 sum (s + m^2 - 1 - log s)``;
- a long sequence (:func:`~skgpstruct.gp._weight_space_long.use_weight_space_sampling`:
  more than ``LONG_MIN_LENGTH`` tokens and cheaper so) is sampled in weight
  space instead, ``f_v = sigma (X_n (m_v + sqrt(s_v) eps_w) + sqrt(jitter)
  eps_T)``: the same Gaussian without its ``T x T`` covariance
  (:mod:`skgpstruct.gp._weight_space_long`); shorter sequences take the
  path above, unchanged.

The prior variances are learned with the posterior (type-II maximum
likelihood on the ELBO): ``log sigma^2`` through the amplitude of the
samples (``log_scale`` of :func:`~skgpstruct.gp.ell.ell_from_blocks`), and
the transition prior variance ``tau^2`` through the closed-form KL of the
transitions. At a stationary point ``tau^2 = mean(m_bin^2 + s_bin)``, the
variational-EM fixed point.
"""

import threading

import numpy as np
import scipy.sparse as sp

from .._utils.parallel import chunk_blas_limits, chunked_sum
from . import _dense_pairs as _dense
from . import _elbo_grads as _g
from . import _weight_space_long as _long
from .ell import _check_likelihood, ell_from_blocks
from .kl import transition_kl
from .sampling import draw_normals
from .terms import _check_offsets
from .variational import layout_slices

__all__ = ["FeatureLayout", "FeatureParams", "WeightSpaceObjective",
           "feature_kl", "feature_moments", "pair_matrix"]

#: Box of ``log s`` (whitened posterior variances; the prior's is 0).
LOG_S_BOUNDS = (-25.0, 3.0)
#: Box of the learned log prior variances (kernel and transitions).
LOG_VAR_BOUNDS = (np.log(1e-4), np.log(1e4))
#: Sequences per unit of parallel work (fixed: results do not depend on
#: n_jobs). Small, since the weight-space form has no large BLAS products
#: to batch: 150 training sentences give 5 chunks for the threads.
CHUNK_SEQUENCES = 32
#: Bytes of standard normal draws kept between evaluations. L-BFGS
#: evaluates the objective on the same draws every time (fixed seeds), and
#: redrawing them costs about a tenth of an evaluation; beyond this budget
#: (large label sets) they are redrawn.
NOISE_CACHE_BYTES = 256 * 2 ** 20


class FeatureParams:
    """Variational parameters of the weight-space form.

    Parameters
    ----------
    m, s : ndarray of shape (n_features, V)
        Whitened posterior means and variances of the feature weights.
    m_bin, s_bin : ndarray of shape (V, V)
        Posterior means and variances of the transition potentials.
    variance : float
        Prior variance ``sigma^2`` of the feature weights (the kernel's).
    transition_var : float
        Prior variance ``tau^2`` of the transitions.
    """

    def __init__(self, m, s, m_bin, s_bin, variance, transition_var):
        self.m, self.s, self.m_bin, self.s_bin = m, s, m_bin, s_bin
        self.variance, self.transition_var = float(variance), float(transition_var)
        self.weights = np.ones(1)


class FeatureLayout:
    """Flat vector ``[m, log s, m_bin, log s_bin, log sigma^2, log tau^2]``.

    Parameters
    ----------
    n_features : int
        Number of (active) features.
    n_classes : int
        Number of labels ``V``.
    """

    def __init__(self, n_features, n_classes):
        D, V = int(n_features), int(n_classes)
        self.n_features, self.n_classes = D, V
        self.slices, self.size = layout_slices(
            [("m", D * V), ("s", D * V), ("m_bin", V * V), ("s_bin", V * V),
             ("hyperparameters", 2)])

    def pack(self, params):
        """The flat vector of ``params`` (a :class:`FeatureParams`)."""
        x, sl = np.empty(self.size), self.slices
        x[sl["m"]] = np.ravel(params.m)
        x[sl["s"]] = np.log(np.ravel(params.s))
        x[sl["m_bin"]] = np.ravel(params.m_bin)
        x[sl["s_bin"]] = np.log(np.ravel(params.s_bin))
        x[sl["hyperparameters"]] = np.log([params.variance, params.transition_var])
        return x

    def unpack(self, x):
        """The :class:`FeatureParams` of the flat vector ``x``."""
        D, V, sl = self.n_features, self.n_classes, self.slices
        h = np.exp(x[sl["hyperparameters"]])
        return FeatureParams(
            x[sl["m"]].reshape(D, V), np.exp(x[sl["s"]]).reshape(D, V),
            x[sl["m_bin"]].reshape(V, V), np.exp(x[sl["s_bin"]]).reshape(V, V),
            h[0], h[1])

    def pack_gradient(self, params, grad):
        """Gradients w.r.t. the parameters to the flat vector (chain rule
        through the logarithms)."""
        g, sl = np.empty(self.size), self.slices
        g[sl["m"]] = np.ravel(grad["m"])
        g[sl["s"]] = np.ravel(grad["s"] * params.s)
        g[sl["m_bin"]] = np.ravel(grad["m_bin"])
        g[sl["s_bin"]] = np.ravel(grad["s_bin"] * params.s_bin)
        g[sl["hyperparameters"]] = [grad["log_variance"], grad["log_transition_var"]]
        return g


def pair_matrix(X, T):
    """Products of the features shared by two tokens of one sequence.

    Parameters
    ----------
    X : sparse matrix of shape (n_g * T, n_features)
        Tokens of ``n_g`` sequences of length ``T``, stacked.
    T : int
        The sequence length.

    Returns
    -------
    P : csr_matrix of shape (n_g * T * T, n_features)
        Row ``(a T + t) T + t'`` holds ``x_td x_t'd`` for the tokens ``t,
        t'`` of sequence ``a``, so that ``(P @ s).reshape(n_g, T, T, V)``
        are the covariances ``X_a diag(s_v) X_a^T``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [1.0, 2.0]]))
    >>> (pair_matrix(X, 2) @ np.array([1.0, 1.0])).reshape(2, 2)
    array([[1., 1.],
           [1., 5.]])
    """
    C = sp.coo_matrix(X)
    r, d, v = C.row.astype(np.int64), C.col.astype(np.int64), C.data
    a, t = r // T, r % T
    order = np.lexsort((t, d, a))
    a, t, d, v = a[order], t[order], d[order], v[order]
    n = a.size
    key = a * X.shape[1] + d
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if n else np.zeros(0, int)
    sizes = np.diff(np.r_[first, n])
    group = np.repeat(np.arange(first.size), sizes)
    reps = sizes[group]  # each entry pairs with every entry of its group
    i = np.repeat(np.arange(n), reps)
    start = np.cumsum(reps) - reps
    j = np.repeat(first[group], reps) + (np.arange(i.size) - np.repeat(start, reps))
    rows = (a[i] * T + t[i]) * T + t[j]
    return sp.csr_matrix((v[i] * v[j], (rows, d[i])),
                         shape=(X.shape[0] * T, X.shape[1]))


class _Blocks:
    """Buckets of sequences of one length and their pair matrices.

    With ``n_samples`` the sequences that
    :func:`~skgpstruct.gp._weight_space_long.use_weight_space_sampling`
    sends to weight space with that many samples are left out of the
    buckets and kept in ``long`` (``n_weights``: their ``D_n``, 0 for the
    others; None when there are none); without, every sequence is bucketed.
    """

    def __init__(self, X, offsets, n_samples=None):
        self.X = sp.csr_matrix(X)
        self.offsets = offsets
        self.long = _long.find_long_sequences(self.X, offsets, n_samples)
        self.n_weights = None
        if self.long:
            is_long = np.zeros(offsets.size - 1, dtype=bool)
            is_long[[ls.seq for ls in self.long]] = True
            self.buckets = _long.short_buckets(offsets, np.flatnonzero(~is_long))
            self.n_weights = np.zeros(offsets.size - 1, dtype=np.int64)
            for ls in self.long:
                self.n_weights[ls.seq] = ls.cols.size
        else:  # exactly as before the weight-space path existed
            self.buckets, _ = _g.make_buckets(offsets)
        self.pairs = [self._bucket_pairs(bk) for bk in self.buckets]

    def _bucket_pairs(self, bk):
        """``(P, dense)`` of a bucket: the pair matrix of its tokens and,
        where some of its sequences have dense columns
        (:func:`~skgpstruct.gp._dense_pairs.dense_columns`), their dense
        part (a :class:`~skgpstruct.gp._dense_pairs.DenseColumns`, the pair
        matrix then that of the other entries; None for none)."""
        Xb = self.X[bk.rows.ravel()]
        columns = _dense.dense_columns(Xb, bk.T)
        if not any(cols.size for cols in columns):  # the pair matrix alone, as ever
            return pair_matrix(Xb, bk.T), None
        dense = _dense.DenseColumns(Xb, bk.T, columns)
        return pair_matrix(dense.rest, bk.T), dense

    def moments(self, m, s, jitter):
        """Means (1, N, V) and per-bucket covariances (n_g, 1, V, T, T)."""
        V = m.shape[1]
        # C order: a sparse product with a Fortran operand copies it (ravel)
        # once per call, here once per bucket
        m, s = np.ascontiguousarray(m), np.ascontiguousarray(s)
        b = np.asarray(self.X @ m)[None]
        Sig = []
        for bk, (P, dense) in zip(self.buckets, self.pairs):
            n_g, T = bk.rows.shape
            S = np.asarray(P @ s).reshape(n_g, T, T, V).transpose(0, 3, 1, 2)
            if dense is not None:
                dense.add_covariances(s, S)
            S = S + jitter * np.eye(T)
            Sig.append(S[:, None])
        return b, Sig

    def backward(self, db, Sbar, V):
        """Gradients w.r.t. ``m`` and ``s`` from those w.r.t. the moments."""
        dm = np.asarray(self.X.T @ db[0])
        ds = np.zeros_like(dm)
        for (P, dense), Sb in zip(self.pairs, Sbar):
            flat = Sb[:, 0].transpose(0, 2, 3, 1).reshape(-1, V)
            ds += np.asarray(P.T @ flat)
            if dense is not None:
                dense.backward(Sb[:, 0], ds)
        return dm, ds


def feature_kl(m, s):
    """KL of ``N(m, diag(s))`` from ``N(0, I)`` (whitened weights).

    Parameters
    ----------
    m, s : ndarray of shape (n_features, V)
        Whitened posterior means and (positive) variances.

    Returns
    -------
    kl : float
        ``0.5 * sum(s + m^2 - 1 - log s)``.

    Examples
    --------
    >>> import numpy as np
    >>> float(feature_kl(np.zeros((2, 3)), np.ones((2, 3))))
    0.0
    """
    return 0.5 * float(np.sum(s + m * m - 1.0 - np.log(s)))


def feature_moments(X, lengths, m, s, variance, jitter, n_samples=None):
    """Posterior moments of the unary potentials of every sequence.

    Parameters
    ----------
    X : sparse matrix of shape (n_tokens, n_features)
        Tokens, sequences stacked.
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths.
    m, s : ndarray of shape (n_features, V)
        Whitened posterior means and variances of the feature weights.
    variance : float
        Prior variance ``sigma^2``.
    jitter : float
        Added to the diagonal of each (unscaled) covariance.
    n_samples : int, default=None
        Samples that will be drawn per sequence: the long sequences that
        are cheaper to sample in weight space with that many
        (:func:`~skgpstruct.gp._weight_space_long.use_weight_space_sampling`)
        get a factored covariance. None: every covariance dense.

    Returns
    -------
    b : ndarray of shape (1, n_tokens, V)
        Means ``sigma X m``.
    Sigma : list of ndarray of shape (1, V, T_n, T_n) or WeightSpaceCovariance
        Covariances ``sigma^2 (X_n diag(s_v) X_n^T + jitter I)``; for a
        sequence sampled in weight space a
        :class:`~skgpstruct.gp._weight_space_long.WeightSpaceCovariance`
        (the same matrices, factored; ``toarray()`` gives them dense).
    """
    offsets = _check_offsets(lengths, X.shape[0])
    blocks = _Blocks(X, offsets, n_samples)
    b, Sig = blocks.moments(m, s, jitter)
    out = [None] * (offsets.size - 1)
    for bk, Sb in zip(blocks.buckets, Sig):
        for a, n in enumerate(bk.seqs):
            out[n] = variance * Sb[a]
    for ls in blocks.long:
        out[ls.seq] = _long.WeightSpaceCovariance(ls.X, variance * s[ls.cols],
                                                  variance * jitter)
    return np.sqrt(variance) * b, out


def _blocks_ell(likelihood, blocks, y_flat, params, noise, jitter, *,
               gradient="pathwise", return_grad=True, log_scale=None):
    """Expected log-likelihood of the sequences of ``blocks`` (a
    :class:`_Blocks`), with gradients w.r.t. ``m`` and ``s``.

    The bucketed sequences go through the covariances and
    :func:`~skgpstruct.gp.ell.ell_from_blocks`, the long ones through
    :func:`~skgpstruct.gp._weight_space_long.long_ell`. ``noise`` is the
    output of :func:`~skgpstruct.gp.sampling.draw_normals` (with
    ``n_weights=blocks.n_weights`` when there are long sequences);
    ``jitter`` and ``log_scale`` as in :func:`feature_moments` and
    ``ell_from_blocks``. Returns the values (n_sequences,), and with
    ``return_grad`` the dict of ``ell_from_blocks`` with ``"m"`` and
    ``"s"`` in place of ``"b"`` and ``"Sigma"``.
    """
    V = params.m.shape[1]
    eps, eps_bin = noise[0], noise[1]
    b, Sig = blocks.moments(params.m, params.s, jitter)
    out = ell_from_blocks(likelihood, b, Sig, blocks.buckets, y_flat, params, eps,
                          eps_bin, gradient=gradient, return_grad=return_grad,
                          log_scale=log_scale)
    values, grad = out if return_grad else (out, None)
    if return_grad:
        dm, ds = blocks.backward(grad.pop("b"), grad.pop("Sigma"), V)
        grad.update(m=dm, s=ds)
    if blocks.long:
        _long.long_ell(likelihood, blocks.long, b, y_flat, params, jitter, noise,
                       values, grad, gradient=gradient, log_scale=log_scale)
    return (values, grad) if return_grad else values


class WeightSpaceObjective:
    """Negative ELBO of the weight-space form and its gradient.

    Same calling convention as :class:`~skgpstruct.gp.elbo.ELBOObjective`.

    Parameters
    ----------
    likelihood : Likelihood
        Structured likelihood object (:mod:`skgpstruct.likelihoods`).
    X_flat : sparse matrix of shape (n_tokens, n_features)
        Tokens of all training sequences (only the features to learn).
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths.
    y_flat : ndarray of int of shape (n_tokens,)
        Encoded labels.
    n_classes : int
        Number of labels.
    learn_variance, learn_transition_var : bool
        Whether ``sigma^2`` / ``tau^2`` are learned (else held at their
        starting values: their gradients are zero and their bounds a point).
    jitter : float, default=1e-4
        Added to the diagonal of every unscaled covariance.
    n_samples : int, default=100
        Samples per sequence.
    gradient : {"pathwise", "score"}, default="pathwise"
        Gradient estimator of the expected log-likelihood. For the long
        sequences sampled in weight space "score" is the score function of
        the weights' Gaussian (:mod:`skgpstruct.gp._weight_space_long`).
    temperature : float in (0, 1], default=1.0
        The expected log-likelihood is weighed by ``1 / temperature``. With
        the prior variances scaled by ``temperature`` too (the caller's
        part), the optimum is the mean-field approximation of the *cold*
        posterior ``p(w | D)^(1 / T)``: the same mode, the spread around it
        narrowed (``T -> 0``: the MAP CRF; ``T = 1``: the Bayesian
        posterior).

    Notes
    -----
    A sequence that
    :func:`~skgpstruct.gp._weight_space_long.use_weight_space_sampling`
    sends to weight space (more than ``LONG_MIN_LENGTH`` tokens, with
    ``n_samples`` samples) is sampled without its ``T x T`` covariance:
    ``O(S nnz(X_n))`` instead of ``O(T^3)``. Which sequences these are is
    decided once per chunk of sequences (with its pair matrices), and its
    draws include those of the feature weights (kept in the noise cache
    under a key that includes their number).
    """

    def __init__(self, likelihood, X_flat, lengths, y_flat, n_classes, *,
                 learn_variance=True, learn_transition_var=True, jitter=1e-4,
                 n_samples=100, gradient="pathwise", temperature=1.0):
        _check_likelihood(likelihood, gradient, True, 0.0, False)
        if not 0.0 < float(temperature) <= 1.0:
            raise ValueError(f"temperature must be in (0, 1], got {temperature!r}.")
        self.temperature = float(temperature)
        self.likelihood, self.gradient = likelihood, gradient
        self.X_flat = sp.csr_matrix(X_flat, dtype=np.float64)
        self.offsets = _check_offsets(lengths, self.X_flat.shape[0])
        self.lengths = np.diff(self.offsets)
        self.y_flat = np.asarray(y_flat, dtype=np.int64)
        self.layout = FeatureLayout(self.X_flat.shape[1], n_classes)
        self.learn = (bool(learn_variance), bool(learn_transition_var))
        self.jitter, self.n_samples = float(jitter), int(n_samples)
        self._blocks = {}
        self._noise, self._noise_bytes, self._noise_lock = {}, 0, threading.Lock()
        self._noise_budget = NOISE_CACHE_BYTES

    def __getstate__(self):
        # joblib backends that run the chunks in other processes (dask)
        # pickle the chunk work, and this objective with it: a lock cannot
        # be pickled, and the copy starts with an empty noise cache (its
        # draws come from the same seeds, so the values are the same)
        state = self.__dict__.copy()
        del state["_noise_lock"]
        state["_noise"], state["_noise_bytes"] = {}, 0
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._noise_lock = threading.Lock()

    def bounds(self, x0):
        """L-BFGS-B box: ``log s`` and the learned log variances bounded, a
        variance not learned fixed at its value in ``x0``."""
        sl = self.layout.slices
        box = [(None, None)] * self.layout.size
        for i in range(sl["s"].start, sl["s"].stop):
            box[i] = LOG_S_BOUNDS
        for i, learn in enumerate(self.learn):
            pos = sl["hyperparameters"].start + i
            box[pos] = LOG_VAR_BOUNDS if learn else (x0[pos], x0[pos])
        return box

    def _chunk_blocks(self, chunk):
        key = np.asarray(chunk, dtype=np.int64).tobytes()  # exact, no hash collisions
        blocks = self._blocks.get(key)
        if blocks is None:
            rows = np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1])
                                   for i in chunk])
            offsets = np.concatenate([[0], np.cumsum(self.lengths[chunk])])
            blocks = (_Blocks(self.X_flat[rows], offsets, self.n_samples),
                      self.y_flat[rows])
            if len(self._blocks) < 64:
                self._blocks[key] = blocks
        return blocks

    def _chunk_noise(self, chunk, lengths, chunk_seeds, n_weights=None):
        """:func:`~skgpstruct.gp.sampling.draw_normals` of a chunk, kept
        while the seeds (and the weight draws of its long sequences,
        ``n_weights``) stay the same (within :data:`NOISE_CACHE_BYTES`)."""
        key = np.asarray(chunk, dtype=np.int64).tobytes()
        seeds = np.asarray(chunk_seeds).tobytes()
        if n_weights is not None:  # short-only chunks keep their old key
            seeds += b"w" + np.asarray(n_weights, dtype=np.int64).tobytes()
        hit = self._noise.get(key)
        if hit is not None and hit[0] == seeds:
            return hit[1]
        noise = draw_normals(lengths, 1, self.layout.n_classes, self.n_samples,
                             chunk_seeds, n_weights=n_weights)
        size = sum(a.nbytes for part in noise for a in part)
        old = 0 if hit is None else hit[2]
        with self._noise_lock:  # chunks run on threads
            if self._noise_bytes - old + size <= self._noise_budget:
                self._noise[key] = (seeds, noise, size)
                self._noise_bytes += size - old
        return noise

    def __call__(self, x, seq_idx, seeds, scale=1.0, parallel=None):
        """Negative ELBO estimate and its gradient at ``x`` (see
        :meth:`skgpstruct.gp.elbo.ELBOObjective.__call__`)."""
        layout = self.layout
        params = layout.unpack(x)
        ell, g = self._ell_sum(params, np.asarray(seq_idx), np.asarray(seeds), parallel)
        # a cold posterior weighs the likelihood by 1 / temperature
        scale = scale / self.temperature
        m, s = params.m, params.s
        kl_u = feature_kl(m, s)
        tau2 = params.transition_var
        kl_b, g_b = transition_kl(params.m_bin, params.s_bin, tau2, return_grad=True)
        second = params.s_bin + params.m_bin ** 2
        grad = {
            "m": scale * g["m"] - m,
            "s": scale * g["s"] - 0.5 * (1.0 - 1.0 / s),
            "m_bin": scale * g["m_bin"] - g_b["m_bin"],
            "s_bin": scale * g["s_bin"] - g_b["s_bin"],
            "log_variance": scale * g["log_scale"] if self.learn[0] else 0.0,
            "log_transition_var": (-0.5 * float(np.sum(1.0 - second / tau2))
                                   if self.learn[1] else 0.0),
        }
        value = scale * ell - kl_u - kl_b
        return -value, -layout.pack_gradient(params, grad)

    def _ell_sum(self, params, seq_idx, seeds, parallel):
        log_scale = float(np.log(params.variance))

        def work(chunk, chunk_seeds):
            blocks, y = self._chunk_blocks(chunk)
            noise = self._chunk_noise(
                chunk, blocks.offsets[1:] - blocks.offsets[:-1], chunk_seeds,
                blocks.n_weights)
            values, grad = _blocks_ell(
                self.likelihood, blocks, y, params, noise, self.jitter,
                gradient=self.gradient, log_scale=log_scale)
            return float(np.sum(values)), grad

        with chunk_blas_limits(len(seq_idx), CHUNK_SEQUENCES):
            return chunked_sum(work, seq_idx, seeds, chunk_size=CHUNK_SEQUENCES,
                               parallel=parallel)
