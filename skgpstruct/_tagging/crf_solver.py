"""The linear-chain CRF solver: fit a :class:`~.crf_objective.CRFSpec` to
:class:`~skgpstruct._input.sequences.SequenceData` by full-batch L-BFGS
(OWL-QN when ``c1 > 0``) on the exact loss, and its marginals.

:class:`~skgpstruct.RandomizedCRFTagger` fits with :func:`fit_crf` (its
``optimizer="lbfgs"``) and predicts its marginals with the code of
:func:`crf_marginals`; the validation of :class:`~skgpstruct.GPStructTagger`'s
prior calls the same functions on the sequences it already holds, one CRF
per fold on the labels of the fold's training part (the spec's ``labels``,
a mask over the data's label codes).

- :class:`CRFParams`: a fitted CRF (weights over all the data's features,
  bias, transitions), immutable.
- :func:`fit_crf`: the features no training token uses are left out of the
  optimisation (their weights' optimum is 0), the labels are mapped to the
  spec's columns, the start is zero (small random low-rank transitions) or
  a previous fit, and L-BFGS runs with the monitor's ``max_iter`` and
  ``tol``.
- :func:`crf_unary`, :func:`crf_marginals`, :func:`chain_marginals`: the
  potentials and the exact token marginals (chunks of sequences, rows
  renormalised).
"""

from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .._input.sequences import SequenceData
from .._utils.parallel import small_blas
from ..chain.backend import get_backend
from .base import ConvergenceMonitor, fit_lbfgs
from .crf_objective import CRFSpec, crf_loss_grad, l1_coefficients, penalty, unpack
from .decoders import _dense
from .exact_objective import ExactCRFObjective
from .predict import renormalize_rows

__all__ = ["CRFParams", "CRFSpec", "active_features", "chain_marginals", "crf_marginals",
           "crf_unary", "fit_crf", "init_theta", "pack", "params_from_theta",
           "training_data"]

#: Bytes of the (n_sequences, V, V) pairwise marginals that one exact
#: ``marginals_ragged`` call of :func:`chain_marginals` may allocate (and
#: discard): it runs on chunks of sequences of this size.
_PAIRWISE_BYTES = 64 * 2 ** 20


@dataclass(frozen=True, eq=False)
class CRFParams:
    """A linear-chain CRF's parameters (see :func:`fit_crf`).

    Attributes
    ----------
    labels : ndarray of int64 of shape (V,)
        The data's label codes of the columns (the spec's ``labels``).
    coef : ndarray of shape (n_features, V)
        Unary weights (zero rows for the features training did not see).
    intercept : ndarray of shape (V,)
    transition : ndarray of shape (V, V) or None
        Full transitions (None when low rank).
    transition_left, transition_right : ndarray of shape (V, rank) or None
        Low-rank transitions ``left @ right.T`` (None when full).
    """

    labels: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    transition: np.ndarray = None
    transition_left: np.ndarray = None
    transition_right: np.ndarray = None

    @property
    def transitions(self):
        """The (V, V) matrix, or ``(left, right)`` when low rank."""
        if self.transition is not None:
            return self.transition
        return (self.transition_left, self.transition_right)

    def dense_transitions(self):
        """The (V, V) transition matrix (``left @ right.T`` when low rank)."""
        return _dense(self.transitions)


def active_features(X):
    """Columns of ``X`` with a non-zero entry, or None if every column has one."""
    if sp.issparse(X):
        used = np.zeros(X.shape[1], dtype=bool)
        used[X.indices[X.data != 0]] = True
    else:
        used = (X != 0).any(axis=0)
    if used.all():
        return None
    return np.flatnonzero(used)


def training_data(data, spec):
    """``(data, rows)``: ``data`` on the features its tokens use (``rows``,
    None for all of them) with its labels as the spec's columns (``data``
    itself when nothing changes)."""
    # Weights of features that are zero in every training token only feel
    # the penalty, so their optimum is 0: fit the others alone.
    rows = active_features(data.X_flat)
    labels = spec.labels
    same_labels = labels.size == 0 or (labels[0] == 0 and labels[-1] == labels.size - 1)
    if rows is None and same_labels:
        return data, None
    X = data.X_flat if rows is None else data.X_flat[:, rows]
    if same_labels:
        y = data.y_flat
    else:
        known = data.y_flat >= 0  # -1: an unknown label stays -1
        y = np.where(known, np.searchsorted(labels, data.y_flat), -1)
        if not np.array_equal(labels[np.minimum(y[known], labels.size - 1)],
                              data.y_flat[known]):
            raise ValueError("The training labels must be among spec.labels.")
    return SequenceData(X, data.lengths, y, data.dense_rows), rows


def init_theta(spec, n_rows, rng):
    """Zero weights and bias; zero (full) or small random (low-rank, from
    ``rng``) transitions."""
    V = spec.n_labels
    init = [np.zeros(n_rows * V), np.zeros(V)]
    if spec.transitions == "full":
        init.append(np.zeros(V * V))
    else:
        scale = 0.01
        init += [scale * rng.standard_normal(V * spec.rank),
                 scale * rng.standard_normal(V * spec.rank)]
    return np.concatenate(init)


def pack(params, rows=None):
    """Flat parameter vector of ``params`` (weight rows ``rows`` only, if given)."""
    W = params.coef if rows is None else params.coef[rows]
    parts = [W.ravel(), params.intercept]
    if params.transition is not None:
        parts.append(params.transition.ravel())
    else:
        parts += [params.transition_left.ravel(), params.transition_right.ravel()]
    return np.concatenate(parts).astype(np.float64)


def params_from_theta(spec, theta, n_features, rows=None):
    """:class:`CRFParams` of ``theta`` (copies); with ``rows``, its weight rows
    are those features and the other rows of ``coef`` are zero."""
    W, b, trans = unpack(spec, theta, n_features if rows is None else len(rows))
    if rows is None:
        coef = W.copy()
    else:
        coef = np.zeros((n_features, spec.n_labels))
        coef[rows] = W
    if spec.transitions == "full":
        return CRFParams(spec.labels, coef, b.copy(), transition=trans.copy())
    return CRFParams(spec.labels, coef, b.copy(), transition_left=trans[0].copy(),
                     transition_right=trans[1].copy())


#: Stored pairs of OWL-QN (``c1 > 0``): CRFsuite's 6 (20 lower the objective
#: no further: Spanish NER at the tutorial settings, 100 iterations, 6,674
#: against 6,682); of L-BFGS with ``crfsuite_rule``: 20, scipy's as the
#: package ran it (6 reach 7,594 against 6,117 there with c1 = 0).
_OWLQN_MEMORY, _LBFGS_MEMORY = 6, 20
#: Above this many bytes of float64 pairs they are stored in float32: half
#: the memory, at no cost that shows on a large model (Spanish NER: 6,684
#: against 6,682, and 6,131 against 6,117 with c1 = 0), though the last
#: digits of a fit to a tiny ``tol`` need float64.
_PAIR_BYTES = 256 * 2 ** 20


def _optimiser_options(memory, n_params):
    """OWL-QN's options for ``memory`` pairs of ``n_params`` numbers."""
    big = 2 * memory * n_params * 8 > _PAIR_BYTES
    return {"memory": memory, "pair_dtype": np.float32 if big else np.float64}


def _lbfgs(spec, data, theta, parallel, monitor, backend, crfsuite_rule=False):
    """Full-batch L-BFGS on the exact loss plus the penalty; OWL-QN
    (``fit_lbfgs(..., l1=...)``, the same ``tol`` and ``max_iter``) with the
    L1 term when ``c1 > 0``."""
    n, n_rows = data.n_sequences, data.X_flat.shape[1]
    if not spec.all_possible_states and backend.name != "cpu":
        raise ValueError("all_possible_states=False needs the CPU (device='cpu').")
    if (sp.issparse(data.X_flat) or not spec.all_possible_states) and backend.name == "cpu":
        fun = ExactCRFObjective(spec, data, parallel)
        if fun.state_mask is not None:  # a warm start's unseen weights to 0
            theta = theta.copy()
            theta[:n_rows * spec.n_labels] *= fun.state_mask.ravel()
    else:
        all_idx = np.arange(n)
        zeros = np.zeros(n, dtype=np.int64)  # exact DP draws nothing

        def fun(t):
            loss, grad = crf_loss_grad(spec, t, data, all_idx, zeros, parallel, backend)
            pen, gpen = penalty(spec, t, n_rows)
            gpen += grad
            return loss + pen, gpen

    if spec.c1 > 0:
        return fit_lbfgs(fun, theta, monitor, l1=l1_coefficients(spec, n_rows),
                         owlqn=_optimiser_options(_OWLQN_MEMORY, theta.size))
    owlqn = _optimiser_options(_LBFGS_MEMORY, theta.size) if crfsuite_rule else None
    return fit_lbfgs(fun, theta, monitor, owlqn=owlqn)


def fit_crf(data, spec, init=None, *, max_iter=100, tol=1e-5, random_state=None,
            parallel=None, backend=None, monitor=None, crfsuite_rule=False):
    """Fit a CRF by full-batch L-BFGS (OWL-QN when ``spec.c1 > 0``) on the
    exact loss plus the penalty.

    Parameters
    ----------
    data : SequenceData
        Training sequences; every label of ``data.y_flat`` is one of
        ``spec.labels``.
    spec : CRFSpec
        The CRF (labels, transitions, penalty); exact (``n_top=None``).
    init : CRFParams or None, default=None
        Start from this fit (the same labels, features and transition
        form); None: zero weights, bias and full transitions, or small
        random low-rank ones (from ``random_state``).
    max_iter, tol : int, float
        L-BFGS iterations, and scipy's ``ftol`` and ``gtol`` (of a new
        silent monitor; a given ``monitor`` has its own).
    random_state : int, RandomState or None, default=None
        Seeds the low-rank start.
    parallel : joblib.Parallel or None, default=None
        Threads over chunks of sequences (None: in turn). The result does
        not depend on it.
    backend : chain backend or None, default=None
        :func:`skgpstruct.chain.backend.get_backend`'s object; None: the CPU.
    monitor : ConvergenceMonitor or None, default=None
        Records the iterations (``history``, ``iter``, ``converged``).
    crfsuite_rule : bool, default=False
        With ``c1 = 0``, L-BFGS as :func:`~skgpstruct.optim.owlqn.minimize_owlqn`
        runs it (CRFsuite's stopping rule for ``max_iter`` and ``tol``, 20
        pairs, float32 above 256 MiB of them) instead of scipy's L-BFGS-B (its ``ftol`` and
        ``gtol``). OWL-QN (``c1 > 0``) always stops by CRFsuite's rule.

    Returns
    -------
    params : CRFParams
        ``coef`` over all ``data``'s features (zero rows for those no token
        uses).
    """
    if not spec.exact:
        raise ValueError("fit_crf fits the exact loss (spec.n_top=None).")
    n_features = data.X_flat.shape[1]
    fit_data, rows = training_data(data, spec)
    if init is None:
        theta = init_theta(spec, fit_data.X_flat.shape[1], check_random_state(random_state))
    elif init.coef.shape != (n_features, spec.n_labels):
        raise ValueError(f"init has {init.coef.shape} weights; the CRF on these data has "
                         f"{(n_features, spec.n_labels)}.")
    else:
        theta = pack(init, rows)
    if monitor is None:
        monitor = ConvergenceMonitor(tol, max_iter)
    held = get_backend("cpu") if backend is None else nullcontext(backend)
    with small_blas(), held as chain:
        theta = _lbfgs(spec, fit_data, theta, parallel, monitor, chain, crfsuite_rule)
    return params_from_theta(spec, theta, n_features, rows)


def crf_unary(params, data):
    """Unary potentials ``X W + b`` of ``data``'s tokens (n_tokens, V)."""
    return data.product(params.coef) + params.intercept


def chain_marginals(U, lengths, B, backend):
    """Exact token marginals (n_tokens, V) of the chains of ``lengths``
    stacked in ``U`` with transitions ``B``, each row renormalised to sum 1.

    The backend's ``marginals_ragged`` runs on chunks of sequences: its
    pairwise marginals (unused here) take V^2 per sequence, far more than
    the tokens' V, and a sequence's marginals do not depend on the rest of
    its chunk.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n = lengths.shape[0]
    step = max(1, _PAIRWISE_BYTES // (8 * B.shape[-1] ** 2))
    out = np.empty(U.shape)
    for i in range(0, n, step):
        j = min(i + step, n)
        unary = backend.marginals_ragged(U[offsets[i]:offsets[j]], lengths[i:j], B)[0]
        # long chains drift from sum 1 (see renormalize_rows): 2e-12 after
        out[offsets[i]:offsets[j]] = renormalize_rows(unary)
    return out


def crf_marginals(params, data, backend=None):
    """Exact token marginals of every sequence of ``data`` (n_tokens, V),
    stacked: column ``k`` is the label ``params.labels[k]``.

    Parameters
    ----------
    params : CRFParams
    data : SequenceData
    backend : chain backend or None, default=None
        None: the CPU.

    Returns
    -------
    marginals : ndarray of shape (n_tokens, V)
        ``data.split(marginals)`` gives each sequence's.
    """
    backend = get_backend("cpu") if backend is None else backend
    return chain_marginals(crf_unary(params, data), data.lengths,
                           params.dense_transitions(), backend)
