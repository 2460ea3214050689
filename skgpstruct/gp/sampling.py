"""Sampling of the latent potentials from their Gaussian marginals.

Per sequence ``n``, component ``k`` and label ``j`` the unary potentials are
``F[s, :, j] = b_kj + chol(Sigma_kj) eps[k, s, j, :]`` (coupled: one
``T_n V``-dimensional block, label-major) and the transitions
``B_s = m_bin + sqrt(s_bin) * eps_bin[k, s]``, ``S`` samples per
component. The standard normals ``eps``, ``eps_bin`` are drawn by
:func:`draw_normals` from one seed per sequence, so the draws do not depend
on how sequences are chunked or on ``n_jobs``; :func:`sample_potentials`
turns them into potentials. Training (:mod:`skgpstruct.gp.ell`) and
prediction (GPStructTagger.predict_marginals) both sample this way. The
long sequences of the weight-space form are sampled without ``chol(Sigma)``
(:mod:`skgpstruct.gp._weight_space_long`), from the same ``eps`` and
``eps_bin`` plus standard normals for the feature weights, drawn after
them from the same seed (``n_weights`` of :func:`draw_normals`).
"""

import numpy as np

from .terms import _check_offsets

__all__ = ["draw_normals", "sample_potentials"]


def draw_normals(lengths, n_components, n_classes, n_samples, seeds, n_weights=None):
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
    n_weights : array-like of int of shape (n_sequences,), default=None
        Number ``D_n`` of feature weights drawn per sequence, label and
        sample for the sequences sampled in weight space
        (:mod:`skgpstruct.gp._weight_space_long`; 0 for the others). They
        are drawn from the sequence's generator *after* ``eps`` and
        ``eps_bin``, so those two are the same with or without them.

    Returns
    -------
    eps : list of ndarray of shape (K, S, V, T_n)
        For the unary potentials (in weight space: the jitter's part).
    eps_bin : list of ndarray of shape (K, S, V, V)
        For the transitions.
    eps_w : list of ndarray of shape (K, S, V, D_n)
        Only with ``n_weights``: for the feature weights (``D_n = 0`` for
        a sequence with ``n_weights[n] == 0``, which draws nothing more).

    Examples
    --------
    >>> eps, eps_bin = draw_normals([2, 3], 1, 2, 5, seeds=[7, 8])
    >>> eps[1].shape, eps_bin[1].shape
    ((1, 5, 2, 3), (1, 5, 2, 2))
    >>> _, _, eps_w = draw_normals([2, 3], 1, 2, 5, seeds=[7, 8], n_weights=[0, 4])
    >>> eps_w[0].shape, eps_w[1].shape
    ((1, 5, 2, 0), (1, 5, 2, 4))
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
    if n_weights is not None:
        n_weights = np.asarray(n_weights)
        if (n_weights.dtype.kind not in "iu" or n_weights.shape != lengths.shape
                or np.any(n_weights < 0)):
            raise ValueError(
                f"n_weights must be {lengths.size} non-negative integers (one per "
                f"sequence), got {n_weights.dtype} array of shape {n_weights.shape}."
            )
    eps, eps_bin, eps_w = [], [], []
    for n, (T, seed) in enumerate(zip(lengths, seeds.tolist())):
        rng = np.random.default_rng(seed % 2**64)
        eps.append(rng.standard_normal((K, S, V, int(T))))
        eps_bin.append(rng.standard_normal((K, S, V, V)))
        if n_weights is not None:
            D = int(n_weights[n])
            eps_w.append(rng.standard_normal((K, S, V, D)) if D
                         else np.empty((K, S, V, 0)))
    if n_weights is None:
        return eps, eps_bin
    return eps, eps_bin, eps_w


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




def sample_potentials(b, C, eps, m_bin, s_bin, eps_bin, amplitude=1.0):
    """Samples of the potentials of a group of sequences of one length.

    Parameters
    ----------
    b : ndarray of shape (n_g, K, T, V)
        Means of the unary potentials per sequence and component.
    C : ndarray of shape (n_g, K, nb, d, d)
        Lower Cholesky factors of the covariances in block layout:
        mean-field ``nb = V`` blocks of size ``d = T`` (one per label),
        coupled ``nb = 1`` block of size ``d = V T`` (label-major).
    eps : ndarray of shape (n_g, K, S, V, T)
        Standard normals (the :func:`draw_normals` arrays of the sequences,
        stacked).
    m_bin : ndarray of shape (V, V)
        Means of the transition potentials.
    s_bin : ndarray of shape (V, V)
        Their variances.
    eps_bin : ndarray of shape (n_g, K, S, V, V)
        Standard normals for the transitions.
    amplitude : float, default=1.0
        Factor of the unary samples (``sqrt`` of a kernel scale: in the
        whitened parametrisation ``b`` and ``C`` scale with the square
        root of the kernel).

    Returns
    -------
    F : ndarray of shape (n_g, K, S, T, V)
        ``amplitude * (b + C eps)``, C-contiguous.
    B : ndarray of shape (n_g, K, S, V, V)
        ``m_bin + sqrt(s_bin) * eps_bin``.

    Examples
    --------
    >>> import numpy as np
    >>> b = np.zeros((1, 1, 2, 1))
    >>> C = np.tile(2.0 * np.eye(2), (1, 1, 1, 1, 1))
    >>> eps, eps_bin = draw_normals([2], 1, 1, 3, seeds=[0])
    >>> F, B = sample_potentials(b, C, eps[0][None], np.zeros((1, 1)),
    ...                          np.ones((1, 1)), eps_bin[0][None])
    >>> bool(np.allclose(F[0, 0, :, :, 0], 2.0 * eps[0][0, :, 0, :]))
    True
    """
    F, _ = _sample_unary(b, C, eps, amplitude)
    return F, m_bin + np.sqrt(s_bin) * eps_bin


def _block_normals(eps, nb, d):
    """``eps`` (n_g, K, S, V, T) in the block layout (n_g, K, nb, d, S)."""
    n_g, K, S = eps.shape[:3]
    return eps.reshape(n_g, K, S, nb, d).transpose(0, 1, 3, 4, 2)


def _sample_unary(b, C, eps, amplitude=1.0):
    """Unary samples ``F`` (n_g, K, S, T, V) and the block-layout normals
    ``E_blk`` (n_g, K, nb, d, S) they came from (for the gradients)."""
    n_g, K, S, V, T = eps.shape
    E_blk = _block_normals(eps, C.shape[2], C.shape[3])
    CE = np.matmul(C, E_blk)  # (n_g, K, nb, d, S)
    F = CE.transpose(0, 1, 4, 2, 3).reshape(n_g, K, S, V, T).swapaxes(-1, -2)
    F = np.ascontiguousarray(F + b[:, :, None])
    if amplitude != 1.0:
        F *= amplitude
    return F, E_blk
