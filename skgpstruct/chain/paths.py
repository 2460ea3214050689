"""Whole label sequences of a linear chain: exact samples, the entropy of
the path distribution, and the log-probability of many paths under many
potentials (for Monte Carlo estimates over posterior draws).

Plain numpy on top of the exact kernels (:func:`~skgpstruct.chain.forward_log`,
:func:`~skgpstruct.chain.marginals`, :func:`~skgpstruct.chain.log_partition`);
the samples are drawn by forward filtering, backward sampling, each backward
step a Gumbel-max over the labels.
"""

import numpy as np
from scipy.special import logsumexp
from sklearn.utils import check_random_state

from .._input.arrays import check_labels, check_potentials
from .exact import forward_log, log_partition, marginals

__all__ = ["sample_paths", "path_entropy", "paths_log_likelihood", "mixture_path_entropy",
           "path_information_gain"]


def _batched(U, B, start, end):
    """The potentials checked by :func:`check_potentials` (``U`` as (S, T,
    V), the rest with a leading axis of 1 or S, zeros for a missing start /
    end), those as (S, V, V) / (S, V) views for indexing, and whether ``U``
    came without a batch axis."""
    U3, B3, st, en, batched = check_potentials(U, B, start, end)
    S, _, V = U3.shape
    views = (np.broadcast_to(B3, (S, V, V)), np.broadcast_to(st, (S, V)),
             np.broadcast_to(en, (S, V)))
    return U3, (B3, st, en), views, not batched


def sample_paths(U, B, start=None, end=None, *, random_state=None):
    """Exact samples of the label sequence, one per set of potentials.

    Forward filtering, backward sampling: the last label is drawn from its
    marginal, then each label given the one after it, ``p(y_t = i | y_{t+1}
    = j) ~ exp(fwdlattice[t, i] + B[i, j])``.

    Parameters
    ----------
    U, B, start, end
        As in :func:`forward_log` (a batch axis on ``U`` draws one path per
        sample of the potentials).
    random_state : int, RandomState or Generator instance or None, default=None
        Source of the Gumbel noise.

    Returns
    -------
    paths : ndarray of int64 of shape (n_steps,) or (n_samples, n_steps)
        A path drawn from ``p(y | U, B)`` (for every sample).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import sample_paths
    >>> sample_paths(np.array([[5.0, -5.0], [-5.0, 5.0]]), np.zeros((2, 2)),
    ...              random_state=0)
    array([0, 1])
    """
    U, given, (B, _, _), single = _batched(U, B, start, end)
    paths = _backward_sample(_forward(U, given), B, _rng(random_state))
    return paths[0] if single else paths


def _rng(random_state):
    return (random_state if isinstance(random_state, np.random.Generator)
            else check_random_state(random_state))


def _forward(U, given):
    """Forward lattices (S, T, V) of checked potentials; an error if some
    sample forbids every path."""
    S, T, V = U.shape
    fwd = np.asarray(forward_log(U, *given)).reshape(S, T, V)
    if not np.all(np.isfinite(logsumexp(fwd[:, -1], axis=1))):
        raise ValueError("Every path is forbidden under some of the potentials.")
    return fwd


def _backward_sample(fwd, B, rng):
    """One path per sample from the forward lattices ``fwd`` (S, T, V) and
    the (S, V, V) transition view ``B``: backward Gumbel-max steps."""
    S, T, V = fwd.shape
    gumbel = rng.gumbel(size=(S, T, V))
    paths = np.empty((S, T), dtype=np.int64)
    paths[:, -1] = np.argmax(fwd[:, -1] + gumbel[:, -1], axis=1)
    rows = np.arange(S)
    for t in range(T - 2, -1, -1):
        paths[:, t] = np.argmax(fwd[:, t] + B[rows, :, paths[:, t + 1]] + gumbel[:, t], axis=1)
    return paths


def path_entropy(U, B, start=None, end=None):
    """Entropy (nats) of the distribution over whole label sequences.

    ``H = log Z - E[score(y)]``, the expected score from the unary and
    pairwise marginals: exact, in ``O(T V^2)``. It is at most the sum of the
    token marginals' entropies, with equality when the labels are
    independent.

    Parameters
    ----------
    U, B, start, end
        As in :func:`forward_log`.

    Returns
    -------
    entropy : float or ndarray of shape (n_samples,)
        ``-sum_y p(y) log p(y)`` (for every sample).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import path_entropy
    >>> float(path_entropy(np.zeros((3, 2)), np.zeros((2, 2))))  # 8 paths
    2.0794415416798357
    """
    U, given, (B, start, end), single = _batched(U, B, start, end)
    S, T, V = U.shape
    log_z = np.asarray(log_partition(U, *given), dtype=np.float64).reshape(S)
    unary, pairwise = marginals(U, *given)
    unary = np.asarray(unary).reshape(S, T, V)
    pairwise = np.asarray(pairwise).reshape(S, V, V)

    def expected(p, score):  # 0 * -inf = 0: a forbidden label has p = 0
        return p * np.where(p > 0, score, 0.0)

    mean_score = (expected(unary, U).sum(axis=(1, 2)) + expected(pairwise, B).sum(axis=(1, 2))
                  + expected(unary[:, 0], start).sum(axis=1)
                  + expected(unary[:, -1], end).sum(axis=1))
    out = np.maximum(log_z - mean_score, 0.0)  # rounding: a sure path has H = 0
    return float(out[0]) if single else out


def paths_log_likelihood(U, B, paths, start=None, end=None):
    """``log p(path_j | U_i, B_i)`` of every path under every sample.

    Parameters
    ----------
    U, B
        As in :func:`forward_log`.
    paths : array-like of int of shape (n_paths, n_steps)
        Label sequences in ``[0, n_labels)``.
    start, end
        As in :func:`forward_log`.

    Returns
    -------
    log_likelihood : ndarray of shape (n_samples, n_paths) or (n_paths,)
        ``-inf`` for a path that the potentials forbid.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import paths_log_likelihood
    >>> paths_log_likelihood(np.zeros((2, 2)), np.zeros((2, 2)), [[0, 1], [1, 1]])
    array([-1.38629436, -1.38629436])
    """
    U, given, (B, start, end), single = _batched(U, B, start, end)
    S, T, V = U.shape
    paths = np.asarray(paths)
    if paths.ndim != 2 or paths.shape[1] != T:
        raise ValueError(f"paths must have shape (n_paths, {T}), got {paths.shape}.")
    paths = check_labels(paths.ravel(), paths.size, V, name="paths").reshape(paths.shape)
    log_z = np.asarray(log_partition(U, *given), dtype=np.float64).reshape(S)
    out = _score_paths(U, B, start, end, log_z, paths)
    return out[0] if single else out


def _score_paths(U, B, start, end, log_z, paths):
    """``log p(path_j | sample i)`` (S, n_paths) of checked potentials (the
    (S, ...) views) with log partition functions ``log_z`` (S,)."""
    S, T, V = U.shape
    out = np.empty((S, paths.shape[0]))
    steps = np.arange(T)
    chunk = max(1, int(4_000_000 // max(S * T, 1)))  # bounded memory on long chains
    for a in range(0, paths.shape[0], chunk):
        y = paths[a : a + chunk]
        score = U[:, steps[None, :], y].sum(axis=2)  # (S, chunk)
        if T > 1:
            score += B[:, y[:, :-1], y[:, 1:]].sum(axis=2)
        score += start[:, y[:, 0]] + end[:, y[:, -1]]
        out[:, a : a + chunk] = score
    with np.errstate(invalid="ignore"):  # -inf - -inf: every path forbidden
        return np.where(np.isneginf(out), -np.inf, out - log_z[:, None])


def check_n_paths(n_paths):
    """``n_paths`` of :func:`mixture_path_entropy` if it is a positive
    integer or ``"auto"``; a ValueError otherwise."""
    if isinstance(n_paths, str) and n_paths == "auto":
        return n_paths
    if (isinstance(n_paths, bool) or not isinstance(n_paths, (int, np.integer))
            or n_paths < 1):
        raise ValueError(f"n_paths must be a positive integer or 'auto', got {n_paths!r}.")
    return n_paths


#: The most rounds of paths ``mixture_path_entropy(n_paths="auto")`` draws.
AUTO_MAX_PATHS = 32


def _auto_rounds(w, d0, d1):
    """Rounds of paths for ``n_paths="auto"`` from two pilot rounds' gaps
    ``d_r[s] = log p(y_rs | s) - log p(y_rs)`` (weights ``w``).

    The mutual-information estimate ``sum_s w_s d_s`` (averaged over ``m``
    rounds) has variance ``sum_s w_s^2 (sigma_b^2 + sigma_w^2 / m)`` where
    ``sigma_w^2`` is the variance of a gap over the paths of one component
    and ``sigma_b^2`` that of its mean over the components: the first part
    is the error of having only these components (posterior draws), which
    more paths cannot remove; the second is the paths'. The rule takes the
    fewest rounds that make the paths' part no larger than the components'
    one, ``m = ceil(sigma_w^2 / sigma_b^2)``, between 1 and
    :data:`AUTO_MAX_PATHS`. Both variances are estimated from the pilot,
    weighted by ``w``: ``sigma_w^2`` from the pairs' halved squared
    differences, ``sigma_b^2`` from the spread of the pairs' means less
    ``sigma_w^2 / 2``."""
    w = w / w.sum()
    within = float(np.sum(w * (d0 - d1) ** 2) / 2)
    mean = (d0 + d1) / 2
    between = float(np.sum(w * (mean - np.sum(w * mean)) ** 2)) - within / 2
    if within <= 0:
        return 1
    if between <= within / AUTO_MAX_PATHS:
        return AUTO_MAX_PATHS
    return max(1, int(np.ceil(within / between)))  # below the cap: between > within / cap


def _enumerated_mixture_entropy(U, B, start, end, log_z, log_w, keep, w):
    """:func:`mixture_path_entropy`'s two values, exact given the components:
    every one of the ``V^T`` label paths scored under every component."""
    S, T, V = U.shape
    every = np.indices((V,) * T).reshape(T, -1).T  # (V^T, T)
    log_p = _score_paths(U, B, start, end, log_z, every)  # [component, path]
    log_mix = logsumexp(log_p + log_w[:, None], axis=0)
    mix, p = np.exp(log_mix), np.exp(log_p[keep])
    entropy = float(-np.sum(mix * np.where(mix > 0, log_mix, 0.0)))
    each = -np.sum(p * np.where(p > 0, log_p[keep], 0.0), axis=1)
    mutual_information = entropy - float(np.sum(w * each))
    return max(0.0, entropy), max(0.0, mutual_information)  # rounding; never -0.0


def _mixture(U, weights):
    """``U`` as float64 (n_samples, n_steps, n_labels) and the mixture
    weights normalised (uniform for None), both checked."""
    U = np.asarray(U, dtype=np.float64)
    if U.ndim != 3:
        raise ValueError(f"U must have shape (n_samples, n_steps, n_labels), got {U.shape}.")
    return U, _weights(U.shape[0], weights)


def _weights(S, weights):
    """The ``S`` mixture weights normalised (uniform for None), checked."""
    if weights is None:
        weights = np.full(S, 1.0 / S)
    weights = np.asarray(weights, dtype=np.float64)
    if (weights.shape != (S,) or not np.all(np.isfinite(weights))
            or np.any(weights < 0) or not weights.sum() > 0):
        raise ValueError(f"weights must be {S} finite non-negative numbers, not all 0.")
    return weights / weights.sum()


def mixture_path_entropy(U, B, weights=None, *, n_paths=1, random_state=None):
    """Entropy of a mixture of chains over whole label sequences, and its
    mutual information with the mixture component, by sampling paths.

    The mixture is ``p(y) = sum_s w_s p(y | U_s, B_s)`` (for instance the
    posterior predictive over draws ``s`` of a Bayesian CRF's potentials).
    One path ``y_s`` is drawn from each component (:func:`sample_paths`) and
    scored under every component (:func:`paths_log_likelihood`), in each of
    ``n_paths`` rounds, and the rounds' sums below are averaged:

    - ``entropy = -sum_s w_s log p(y_s)``, an unbiased estimate of ``H[p]``;
    - ``mutual_information = sum_s w_s (log p(y_s | U_s, B_s) - log p(y_s))``,
      an unbiased estimate of ``H[p] - sum_s w_s H[p(. | U_s, B_s)]`` (the
      epistemic part when ``s`` runs over posterior draws; the expected value
      of the second term is each component's exact :func:`path_entropy`).

    Both sums are unbiased given the components, since a path drawn from a
    component picked with probability ``w_s`` is a draw from ``p``. A chain
    with no more label paths (``n_labels ** n_steps``) than the rounds
    would sample in all (``n_samples * n_paths``; ``3 n_samples`` with
    ``"auto"``, its fewest) has both computed exactly given the components
    instead, every path scored under every component at no more cost: no
    Monte Carlo error, nothing clipped but rounding, and no paths drawn. The
    mutual information's sum can come out negative; it is returned clipped
    at 0, which biases the returned value upward where the mutual
    information is small beside the sum's Monte Carlo error (with two
    components, a true 0.113 nats comes back 0.193 on average; with 256
    posterior-like draws at a true 0.0030, 0.0038). More paths per
    component shrink that error, and with it the bias, without more
    components: where the components are close (posterior draws of a
    trained model) it is mostly the paths' (each round's ``log p(y_s | U_s,
    B_s) - log p(y_s)`` varies with the path ``y_s`` far more than its mean
    varies between components), so ``n_paths`` rounds divide the variance by
    nearly ``n_paths``, at ``n_paths`` times the cost of the sampling and
    scoring (the forward passes are shared).

    Parameters
    ----------
    U : array-like of shape (n_samples, n_steps, n_labels)
        Unary potentials of each component.
    B : array-like of shape (n_labels, n_labels) or (n_samples, n_labels, n_labels)
        Transition potentials (shared or per component).
    weights : array-like of shape (n_samples,), default=None
        Mixture weights (non-negative, normalised here); None: uniform.
    n_paths : int or "auto", default=1
        Paths drawn from each component (rounds of one per component).
        ``"auto"``: two pilot rounds measure how much of the mutual
        information's Monte Carlo variance is the paths' (the spread of a
        component's ``log p(y | U_s, B_s) - log p(y)`` over its paths) and
        how much the components' (the spread of its mean over them); then
        the fewest rounds that make the paths' part no larger than the
        components' are drawn afresh, between 1 and ``AUTO_MAX_PATHS``
        (32). The pilot's paths are not in the estimate (kept, they would
        make it depend on the rule's choice).
    random_state : int, RandomState or Generator instance or None, default=None
        Source of the sampled paths (one stream: the first round's paths are
        those of ``n_paths=1``).

    Returns
    -------
    entropy : float
        Estimate of the entropy (nats) of the mixture's label sequences.
    mutual_information : float
        Estimate of the mutual information between the label sequence and
        the component, at least 0.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import mixture_path_entropy
    >>> U = np.zeros((4, 3, 2))  # four identical components: no information
    >>> h, mi = mixture_path_entropy(U, np.zeros((2, 2)), random_state=0)
    >>> round(h, 6), round(mi, 12)
    (2.079442, 0.0)
    """
    U, weights = _mixture(U, weights)
    S = U.shape[0]
    auto = check_n_paths(n_paths) == "auto"
    U, given, (B3, start, end), _ = _batched(U, B, None, None)
    fwd = _forward(U, given)
    log_z = np.asarray(log_partition(U, *given), dtype=np.float64).reshape(U.shape[0])
    rng = _rng(random_state)
    with np.errstate(divide="ignore"):
        log_w = np.log(weights)
    keep = weights > 0
    w = weights[keep]
    S, T, V = U.shape
    if V ** T <= S * (3 if auto else int(n_paths)):  # exact at no more cost
        return _enumerated_mixture_entropy(U, B3, start, end, log_z, log_w, keep, w)
    rounds = int(n_paths) if not auto else None
    entropy, mutual_information, gaps = [], [], []
    while rounds is None or len(entropy) < rounds:
        paths = _backward_sample(fwd, B3, rng)
        log_p = _score_paths(U, B3, start, end, log_z, paths)  # [component, path]
        log_mix = logsumexp(log_p + log_w[:, None], axis=0)  # log p(y_s)
        gap = np.diagonal(log_p)[keep] - log_mix[keep]
        if rounds is None:  # "auto": a pilot round, only to choose the rounds
            gaps.append(gap)
            if len(gaps) == 2:
                rounds = _auto_rounds(w, *gaps)
            continue
        entropy.append(float(-np.sum(w * log_mix[keep])))
        mutual_information.append(float(np.sum(w * gap)))
    n = len(entropy)
    entropy, mutual_information = sum(entropy) / n, sum(mutual_information) / n
    return max(0.0, entropy), max(0.0, mutual_information)  # never -0.0


def path_information_gain(U, B, target, weights=None, *, random_state=None):
    """Expected information a chain's label sequence gives about other
    variables, under a mixture of chains (posterior draws).

    Component ``s`` (weight ``w_s``) gives the chain the potentials ``U_s,
    B_s`` and each of ``N`` other discrete variables ``y*_i`` the
    distribution ``target[s, i]``, independently of the chain's labels given
    ``s``. Observing the label sequence ``y`` re-weights the components by
    ``p(y | U_s, B_s)``; the value is the mutual information between ``y``
    and each ``y*_i``, averaged over ``i``::

        E_y [ mean_i KL( p(y*_i | y) || p(y*_i) ) ],
        p(y*_i | y) = sum_s w_s p(y | U_s, B_s) target[s, i] / p(y).

    With the components posterior draws of a tagger's potentials and
    ``target`` their token marginals at inputs to be predicted, this is the
    expected predictive information gain of labelling the chain (EPIG;
    Bickford Smith, Kirsch, Farquhar, Gal, Foster and Rainforth, AISTATS
    2023), which values what the labels teach about those inputs rather
    than about the potentials themselves (the BALD score,
    :func:`mixture_path_entropy`'s mutual information).

    The expectation over ``y`` is estimated by one path drawn from each
    component (:func:`sample_paths`, so a draw from ``p(y)``), each scored
    under every component (:func:`paths_log_likelihood`); the KL divergences
    are exact given the path, so every term is non-negative. A chain with
    no more label paths (``n_labels ** n_steps``) than components is
    enumerated instead: exact given the components, no paths drawn.

    Parameters
    ----------
    U : array-like of shape (n_samples, n_steps, n_labels)
        Unary potentials of each component.
    B : array-like of shape (n_labels, n_labels) or (n_samples, n_labels, n_labels)
        Transition potentials (shared or per component).
    target : array-like of shape (n_samples, n_targets, n_classes)
        Each component's distribution of each other variable (rows
        non-negative, summing to 1).
    weights : array-like of shape (n_samples,), default=None
        Mixture weights (non-negative, normalised here); None: uniform.
    random_state : int, RandomState or Generator instance or None, default=None
        Source of the sampled paths.

    Returns
    -------
    information_gain : float
        In nats, at least 0; 0 when the components agree on the chain or on
        the targets.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import path_information_gain
    >>> U = np.array([[[4.0, -4.0]], [[-4.0, 4.0]]])  # two draws, one step
    >>> target = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])  # y* follows the draw
    >>> round(path_information_gain(U, np.zeros((2, 2)), target), 3)
    0.69
    """
    U, weights = _mixture(U, weights)
    return _information_gain(U, B, weights, _prepare_target(target, weights), random_state)


def _prepare_target(target, weights):
    """What :func:`path_information_gain` needs of ``target`` whatever the
    chain, checked: the (n_samples, n_targets n_classes) matrix, the log of
    the mixture's ``p(y*)`` and ``n_targets`` (computed once for many
    chains against one target)."""
    S = weights.size
    target = np.asarray(target, dtype=np.float64)
    if target.ndim != 3 or target.shape[0] != S or target.shape[1] < 1:
        raise ValueError(f"target must have shape ({S}, n_targets, n_classes) with "
                         f"n_targets >= 1, got {target.shape}.")
    if (not np.all(np.isfinite(target)) or np.any(target < 0)
            or not np.allclose(target.sum(axis=2), 1.0, atol=1e-8)):
        raise ValueError("target must hold probability distributions (finite, "
                         "non-negative rows summing to 1).")
    n, c = target.shape[1:]
    flat = target.reshape(S, n * c)
    with np.errstate(divide="ignore"):
        log_prior = np.log(weights @ flat)  # p(y*)
    return flat, log_prior, n


def _information_gain(U, B, weights, prepared, random_state):
    """:func:`path_information_gain` of one chain (``U`` float64 (S, T, V),
    ``weights`` normalised) against a target from :func:`_prepare_target`."""
    flat, log_prior, n = prepared
    U, given, (B3, start, end), _ = _batched(U, B, None, None)
    S, T, V = U.shape
    log_z = np.asarray(log_partition(U, *given), dtype=np.float64).reshape(S)
    with np.errstate(divide="ignore"):
        log_w = np.log(weights)
    enumerate_all = V ** T <= S  # every path, exactly weighted: no more work than sampling
    paths = (np.indices((V,) * T).reshape(T, -1).T if enumerate_all
             else _backward_sample(_forward(U, given), B3, _rng(random_state)))
    log_joint = _score_paths(U, B3, start, end, log_z, paths) + log_w[:, None]
    # the paths' weights: p(y) of every path, or w_s for the one drawn from s
    p_path = np.exp(logsumexp(log_joint, axis=0)) if enumerate_all else weights
    keep = p_path > 0
    log_joint = log_joint[:, keep]
    post = np.exp(log_joint - logsumexp(log_joint, axis=0))  # p(s | y_j)
    cond = post.T @ flat  # p(y* | y_j), (paths, n * c)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(cond > 0, cond * (np.log(cond) - log_prior), 0.0)
    kl = terms.sum(axis=1) / n  # mean over the targets, per path
    return max(0.0, float(p_path[keep] @ kl))  # rounding; never -0.0
