r"""Piecewise pseudo-likelihood of a linear chain, in O(T V) time.

Definition
----------
We use the *piecewise pseudo-likelihood* (PWPL) of Sutton & McCallum (2007)
for a chain whose factors are one unary factor per position, holding
:math:`\tilde U_t = U_t` (plus ``start`` at :math:`t = 0` and ``end`` at
:math:`t = T - 1`, folded in as in :mod:`skgpstruct.chain.exact`), and one
pairwise factor per edge :math:`(t - 1, t)`, holding ``B``. Every factor is
normalised on its own, and every variable of a factor is conditioned on the
other variables *of that factor only*:

.. math::

    \ell_{PWPL}(y) = \sum_{t=0}^{T-1} \Big[\tilde U_{t, y_t}
        - \log \sum_v e^{\tilde U_{t, v}}\Big]
      + \sum_{t=1}^{T-1} \Big[\big(B_{y_{t-1}, y_t}
        - \log \sum_v e^{B_{y_{t-1}, v}}\big)
      + \big(B_{y_{t-1}, y_t} - \log \sum_v e^{B_{v, y_t}}\big)\Big].

Its gradient is :math:`\partial \ell / \partial U_{t, v} = [v = y_t] -
\mathrm{softmax}(\tilde U_t)_v` and :math:`\partial \ell / \partial B_{i, j}
= \sum_{t \ge 1} \big(2 [i = y_{t-1}, j = y_t] - [i = y_{t-1}]\,
\mathrm{softmax}(B_{i, :})_j - [j = y_t]\, \mathrm{softmax}(B_{:, j})_i\big)`.
Each term needs one log-sum-exp over ``V`` values, so the cost is
:math:`O(T V)`, against :math:`O(T V^2)` for the exact likelihood.

This is the likelihood of eq. 48-50 of the
supplementary material of Galliani et al. (2017) ("sum over factors of local
conditionals; cost O(T V)"). The supplementary's own equations could not be
retrieved when this module was written, so the formula above follows Sutton
& McCallum's definition of PWPL (their local conditional
:math:`p_a(y_s \mid y_{a \setminus s})`, summed over factors :math:`a` and
variables :math:`s \in a`), which matches that description. A term whose
observed potential is ``-inf`` is ``-inf``; the softmax of an all ``-inf``
row is taken as 0, so the gradient stays finite.

References
----------
C. Sutton and A. McCallum. Piecewise pseudolikelihood for efficient training
of conditional random fields. ICML 2007.

P. Galliani, A. Dezfouli, E. V. Bonilla and N. Quadrianto. Gray-box inference
for structured Gaussian process models. AISTATS 2017, arXiv:1609.04289.
"""

import numpy as np
from numba import njit

from .._input.arrays import check_labels, check_potentials
from ._exact_kernels import _NEG_INF, _load, _lse

__all__ = ["pseudo_log_likelihood", "pseudo_log_likelihood_grad"]



@njit(cache=True, nogil=True)
def _local_term(observed, log_norm):
    """log of a local conditional, ``-inf`` if the observed value is forbidden."""
    if observed == _NEG_INF:
        return _NEG_INF
    return observed - log_norm


@njit(cache=True, nogil=True)
def _sub_softmax(x, log_norm, out):
    """out -= softmax(x) given log_norm = logsumexp(x); no-op if log_norm = -inf."""
    if log_norm == _NEG_INF:
        return
    for k in range(x.shape[0]):
        out[k] -= np.exp(x[k] - log_norm)


@njit(cache=True, nogil=True)
def _pseudo_core(Uf, B, y, col, grad, gU, gB):
    """PWPL of one sequence; with ``grad`` writes gU and adds into gB (which
    must be 0 on entry). ``col`` is a length-V scratch vector."""
    T, V = Uf.shape
    value = 0.0
    for t in range(T):
        lz = _lse(Uf[t])
        value += _local_term(Uf[t, y[t]], lz)
        if grad:
            for j in range(V):
                gU[t, j] = 0.0
            _sub_softmax(Uf[t], lz, gU[t])
            gU[t, y[t]] += 1.0
    for t in range(1, T):
        a, b = y[t - 1], y[t]
        for i in range(V):
            col[i] = B[i, b]
        lz_row = _lse(B[a])
        lz_col = _lse(col)
        value += _local_term(B[a, b], lz_row) + _local_term(B[a, b], lz_col)
        if grad:
            _sub_softmax(B[a], lz_row, gB[a])
            _sub_softmax(col, lz_col, gB[:, b])
            gB[a, b] += 2.0
    return value


@njit(cache=True, nogil=True)
def _pseudo_kernel(U, B, start, end, y, grad, gU, gB):
    S, T, V = U.shape
    out = np.empty(S)
    Uf = np.empty((T, V))
    col = np.empty(V)
    for s in range(S):
        Bs = _load(U, B, start, end, s, Uf)
        g = s if grad else 0  # without grad, gU / gB are 1-sample dummies
        if grad:
            gB[g, :, :] = 0.0
        out[s] = _pseudo_core(Uf, Bs, y, col, grad, gU[g], gB[g])
    return out


def pseudo_log_likelihood(U, B, y, start=None, end=None):
    """Piecewise pseudo-log-likelihood of a labelling (see module docstring).

    Parameters
    ----------
    U : array-like of shape (n_steps, n_labels) or (n_samples, n_steps, n_labels)
        Unary potentials.
    B : array-like of shape (n_labels, n_labels) or (n_samples, n_labels, n_labels)
        Transition potentials, ``B[i, j]`` for label ``i`` followed by ``j``.
    y : array-like of int of shape (n_steps,)
        Labels in ``[0, n_labels)``, the same for every sample.
    start, end : array-like of shape (n_labels,) or (n_samples, n_labels), default=None
        Potentials added to the unary potentials of the first / last position.

    Returns
    -------
    value : float or ndarray of shape (n_samples,)
        ``-inf`` when ``y`` uses a forbidden (``-inf``) potential.

    See Also
    --------
    skgpstruct.chain.log_likelihood : the exact log-likelihood, O(T V^2).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import pseudo_log_likelihood
    >>> # 2 unary terms log(1/2) and 2 pairwise terms log(1/2)
    >>> round(pseudo_log_likelihood(np.zeros((2, 2)), np.zeros((2, 2)), [0, 1]), 6)
    -2.772589
    """
    U3, B3, st, en, batched = check_potentials(U, B, start, end)
    y = check_labels(y, U3.shape[1], U3.shape[2])
    dummy = np.empty((1, 1, 1))
    values = _pseudo_kernel(U3, B3, st, en, y, False, dummy, dummy)
    return values if batched else float(values[0])


def pseudo_log_likelihood_grad(U, B, y, start=None, end=None):
    """Piecewise pseudo-log-likelihood and its gradients.

    Parameters
    ----------
    U, B, y, start, end
        As in :func:`pseudo_log_likelihood`.

    Returns
    -------
    value : float or ndarray of shape (n_samples,)
    grad_U : ndarray of the shape of ``U``
        ``onehot(y) - softmax(U[t])`` per position; the gradient with respect
        to ``start`` is ``grad_U[..., 0, :]`` and to ``end`` is
        ``grad_U[..., -1, :]``.
    grad_B : ndarray of shape (n_labels, n_labels) or (n_samples, n_labels, n_labels)
        Per sample for batched ``U``, even when ``B`` is shared.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain import pseudo_log_likelihood_grad
    >>> U, B = np.zeros((2, 2)), np.zeros((2, 2))
    >>> value, grad_U, grad_B = pseudo_log_likelihood_grad(U, B, [0, 1])
    >>> grad_B
    array([[-0.5,  1. ],
           [ 0. , -0.5]])
    """
    U3, B3, st, en, batched = check_potentials(U, B, start, end)
    S, T, V = U3.shape
    y = check_labels(y, T, V)
    gU = np.empty_like(U3)
    gB = np.empty((S, V, V))
    values = _pseudo_kernel(U3, B3, st, en, y, True, gU, gB)
    if batched:
        return values, gU, gB
    return float(values[0]), gU[0], gB[0]
