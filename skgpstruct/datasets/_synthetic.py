"""Synthetic sequence-labelling data: :func:`make_chain_data`.

Sequences drawn from a random linear-chain (HMM-style) model: the built-in
data of the demo and of most tests. The labels come from a sparse Markov
chain (:func:`_draw_labels`), the token features from the labels alone
(dense Gaussian, or binary sparse by :func:`_sparse_features`).
"""

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import Interval, validate_params

__all__ = ["make_chain_data"]


def _check_length(length):
    if isinstance(length, Integral) and not isinstance(length, bool):
        if length < 1:
            raise ValueError(f"length must be >= 1, got {length}.")
        return int(length), int(length)
    if isinstance(length, tuple) and len(length) == 2 and all(
        isinstance(v, Integral) and not isinstance(v, bool) for v in length
    ):
        lo, hi = int(length[0]), int(length[1])
        if not 1 <= lo <= hi:
            raise ValueError(
                f"length=(min, max) needs 1 <= min <= max, got {length}."
            )
        return lo, hi
    raise TypeError(
        f"length must be an int or a (min, max) tuple of ints, got {length!r}."
    )


def _class_means(rng, n_classes, n_features):
    """Unit-norm class means, exactly orthonormal when that is cheap."""
    if n_classes <= min(n_features, 100):
        # QR of a Gaussian matrix: O(n_features n_classes^2), kept cheap.
        q, _ = np.linalg.qr(rng.standard_normal((n_features, n_classes)))
        return np.ascontiguousarray(q.T)
    # Random unit directions (nearly orthogonal when n_features is large).
    means = rng.standard_normal((n_classes, n_features))
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return means / norms


@validate_params(
    {
        "n_sequences": [Interval(Integral, 1, None, closed="left")],
        "n_classes": [Interval(Integral, 2, None, closed="left")],
        "n_features": [Interval(Integral, 1, None, closed="left")],
        "length": [Interval(Integral, 1, None, closed="left"), tuple],
        "transition_strength": [Interval(Real, 0, 1, closed="both")],
        "n_successors": [Interval(Integral, 1, None, closed="left")],
        "noise": [Interval(Real, 0, None, closed="left"), None],
        "sparse": ["boolean"],
        "n_active": [Interval(Integral, 1, None, closed="left")],
        "return_params": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_chain_data(
    n_sequences=100,
    n_classes=3,
    n_features=10,
    *,
    length=(5, 20),
    transition_strength=0.8,
    n_successors=1,
    noise=None,
    sparse=False,
    n_active=3,
    return_params=False,
    random_state=None,
):
    """Draw labelled sequences from a random linear-chain (HMM-style) model.

    Labels follow a Markov chain whose transition matrix is
    ``A = s * P + (1 - s) / n_classes`` with ``s = transition_strength`` and
    ``P`` the average of ``n_successors`` random permutation matrices: from
    label ``i`` the chain moves with probability ``s`` to one of ``i``'s
    preferred successors and otherwise to a uniformly drawn label. ``A`` is
    doubly stochastic, so with the uniform start every position's label is
    marginally uniform, and it is stored in O(n_classes * n_successors)
    memory (never as a dense matrix), which keeps ten thousand labels cheap.

    Token features depend on the token's label only:

    * dense (default): ``x_t = mu[y_t] + noise * eps``, ``eps`` standard
      normal, with unit-norm class means ``mu`` (orthonormal when
      ``n_classes <= min(n_features, 100)``), so that the difficulty hardly
      depends on ``n_features``;
    * ``sparse=True``: binary features. Every label owns a disjoint group of
      features (when ``n_classes <= n_features``; otherwise labels share
      one feature each). A token switches on ``n_active`` features, each drawn
      from its label's group with probability ``1 - noise`` and uniformly
      from all features otherwise (repeats count once).

    With the defaults a per-token classifier knowing the true model labels
    about 75% of the tokens correctly and the exact chain posterior about 90%.

    Parameters
    ----------
    n_sequences : int, default=100
        Number of sequences.
    n_classes : int, default=3
        Number of labels (at least 2).
    n_features : int, default=10
        Number of token features.
    length : int or tuple of (int, int), default=(5, 20)
        Length of every sequence, or the (min, max) range, both included,
        from which each sequence's length is drawn uniformly.
    transition_strength : float in [0, 1], default=0.8
        Probability of moving to a preferred successor; 0 makes the labels
        independent (transitions carry no information).
    n_successors : int, default=1
        Number of preferred successors of each label (random permutations;
        two of them may coincide).
    noise : float, default=None
        Dense: standard deviation of the Gaussian noise per feature
        (default 0.7). Sparse: probability in [0, 1] that an active feature is
        drawn at random rather than from the label's group (default 0.5).
    sparse : bool, default=False
        Return binary scipy CSR features instead of dense Gaussian ones.
    n_active : int, default=3
        Sparse only: feature draws per token.
    return_params : bool, default=False
        Also return the generating model.
    random_state : int, RandomState instance or None, default=None
        Seed; the output is deterministic for a given int.

    Returns
    -------
    X : list of ndarray (or csr_matrix if ``sparse``) of shape (T_n, n_features)
        float64 token features of each sequence.
    y : list of ndarray of int64 of shape (T_n,)
        Labels in ``[0, n_classes)``.
    params : :class:`~sklearn.utils.Bunch`
        Only if ``return_params``: ``startprob`` (uniform), ``successors``
        (n_classes, n_successors) so that ``A[i] = s * mean_j
        onehot(successors[i, j]) + (1 - s) / n_classes``,
        ``transition_strength``, ``noise``, and ``means`` (dense) or
        ``feature_groups`` (sparse: the sorted feature indices of each label's
        group) and ``n_active``.

    Examples
    --------
    >>> X, y = make_chain_data(n_sequences=2, n_classes=3, n_features=4,
    ...                        length=3, random_state=0)
    >>> [x.shape for x in X], y[0].dtype
    ([(3, 4), (3, 4)], dtype('int64'))
    >>> int(max(s.max() for s in y)) < 3
    True
    """
    lo, hi = _check_length(length)
    if noise is None:
        noise = 0.5 if sparse else 0.7
    if sparse and noise > 1:
        raise ValueError(
            f"With sparse=True, noise is a probability and must be in [0, 1]; "
            f"got {noise}."
        )
    rng = check_random_state(random_state)
    V, D, N = int(n_classes), int(n_features), int(n_sequences)
    successors, lengths, y_flat = _draw_labels(
        rng, N, V, lo, hi, n_successors, transition_strength
    )
    ends = np.cumsum(lengths)[:-1]
    y = [np.ascontiguousarray(s) for s in np.split(y_flat, ends)]

    params = Bunch(
        startprob=np.full(V, 1.0 / V),
        successors=successors,
        transition_strength=float(transition_strength),
        noise=float(noise),
    )
    if not sparse:
        means = _class_means(rng, V, D)
        X_flat = means[y_flat] + noise * rng.standard_normal((y_flat.shape[0], D))
        X = [np.ascontiguousarray(x) for x in np.split(X_flat, ends)]
        params.means = means
    else:
        X, perm = _sparse_features(rng, y_flat, lengths, V, D, noise, n_active)
        params.n_active = int(n_active)
        if return_params:
            params.feature_groups = [
                np.sort(perm[np.arange(c, D, V)]) if c < D else perm[[c % D]]
                for c in range(V)
            ]
    if return_params:
        return X, y, params
    return X, y


def _draw_labels(rng, N, V, lo, hi, n_successors, transition_strength):
    """Draw the successor table, the lengths and the labels of the chain.

    All sequences at once, one time step after the other. Returns
    ``successors`` (V, n_successors), ``lengths`` (N,) and the labels
    stacked sequence after sequence, ``y_flat`` (sum(lengths),).
    """
    successors = np.empty((V, n_successors), dtype=np.int64)
    for j in range(n_successors):
        successors[:, j] = rng.permutation(V)
    lengths = rng.randint(lo, hi + 1, size=N).astype(np.int64)
    T_max = int(lengths.max())
    labels = np.empty((N, T_max), dtype=np.int64)
    labels[:, 0] = rng.randint(V, size=N)
    for t in range(1, T_max):
        prev = labels[:, t - 1]
        follow = rng.random_sample(N) < transition_strength
        pick = rng.randint(n_successors, size=N)
        jump = rng.randint(V, size=N)
        labels[:, t] = np.where(follow, successors[prev, pick], jump)
    mask = np.arange(T_max)[None, :] < lengths[:, None]
    return successors, lengths, labels[mask]  # row-major: sequence after sequence


def _sparse_features(rng, y_flat, lengths, V, D, noise, n_active):
    """Binary CSR features of the tokens, one matrix per sequence.

    Label c owns the features perm[c], perm[c + V], perm[c + 2V], ... (< D);
    when V > D, label c owns perm[c % D] alone. Returns the list of matrices
    and ``perm``.
    """
    n_tokens = y_flat.shape[0]
    perm = rng.permutation(D).astype(np.int64)
    classes = np.arange(V, dtype=np.int64)
    group_size = np.where(classes < D, (D - classes + V - 1) // V, 1)
    n_slots = n_tokens * n_active
    slot_label = np.repeat(y_flat, n_active)
    u = (rng.random_sample(n_slots) * group_size[slot_label]).astype(np.int64)
    own = perm[(slot_label + V * u) % D]
    random_feature = rng.randint(D, size=n_slots)
    from_noise = rng.random_sample(n_slots) < noise
    cols = np.where(from_noise, random_feature, own)
    rows = np.repeat(np.arange(n_tokens, dtype=np.int64), n_active)
    X_flat = sp.csr_matrix(
        (np.ones(n_slots), (rows, cols)), shape=(n_tokens, D)
    )
    X_flat.sum_duplicates()
    X_flat.data[:] = 1.0
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return [X_flat[starts[n]:starts[n + 1]] for n in range(len(lengths))], perm
