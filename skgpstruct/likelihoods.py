"""Structured likelihoods ``log p(y | f)`` for batches of sampled potentials.

GPStructTagger's inference is *gray-box*: it only needs, for a sequence, the
log-likelihood of its labels under a batch of ``S`` sampled unary potentials
``F`` of shape (S, T, V) and transitions ``B`` of shape (S, V, V), and where
available its gradient ``d log p / dF``, ``d log p / dB``. A likelihood is an
object with that template (GPflow's ``Likelihood`` in spirit): a new one plugs
in by subclassing :class:`Likelihood` and writing ``_log_prob`` (and
``_log_prob_grad`` if it can), without touching the inference.

Likelihoods are sklearn estimators as far as parameters go
(``get_params`` / ``set_params`` / ``clone``), so ``likelihood__*`` is
searchable in ``GridSearchCV``.
"""

import numpy as np
from sklearn.base import BaseEstimator

from . import chain
from .chain.backend import get_backend

__all__ = [
    "Likelihood",
    "CRFLikelihood",
    "PseudoLikelihood",
    "RandomizedCRFLikelihood",
    "get_likelihood",
]


class Likelihood(BaseEstimator):
    """Base class: ``log p(y | F, B)`` for a batch of samples.

    Subclasses implement ``_log_prob(F, B, y)`` and, if the gradient is
    available, ``_log_prob_grad(F, B, y)`` and set ``has_gradient = True``.
    """

    #: Whether :meth:`log_prob_grad` is available (needed by the pathwise
    #: gradient estimator; the score-function estimator needs values only).
    has_gradient = False

    @staticmethod
    def _check(F, B, y):
        F = np.asarray(F, dtype=np.float64)
        B = np.asarray(B, dtype=np.float64)
        if F.ndim != 3:
            raise ValueError(f"F must have shape (S, T, V), got {F.shape}.")
        if B.ndim == 2:
            B = np.broadcast_to(B, (F.shape[0],) + B.shape)
        if B.shape != (F.shape[0], F.shape[2], F.shape[2]):
            raise ValueError(
                f"B must have shape (S, V, V) = {(F.shape[0], F.shape[2], F.shape[2])}, "
                f"got {B.shape}."
            )
        y = np.asarray(y, dtype=np.int64)
        if y.shape != (F.shape[1],):
            raise ValueError(f"y must have shape (T,) = ({F.shape[1]},), got {y.shape}.")
        return F, np.ascontiguousarray(B), y

    def log_prob(self, F, B, y):
        """``log p(y | F_s, B_s)`` for every sample ``s``.

        Parameters
        ----------
        F : array-like of shape (S, T, V)
            Sampled unary potentials of one sequence.
        B : array-like of shape (S, V, V) or (V, V)
            Sampled transition potentials (shared if 2-D).
        y : array-like of int of shape (T,)
            Encoded labels.

        Returns
        -------
        values : ndarray of shape (S,)
        """
        return self._log_prob(*self._check(F, B, y))

    def log_prob_grad(self, F, B, y):
        """Values and gradients of ``log p(y | F_s, B_s)``.

        Parameters
        ----------
        F, B, y : array-like
            As in :meth:`log_prob`: samples ``F`` (S, T, V) and ``B``
            (S, V, V) or (V, V), labels ``y`` (T,).

        Returns
        -------
        values : ndarray of shape (S,)
        grad_F : ndarray of shape (S, T, V)
        grad_B : ndarray of shape (S, V, V)
        """
        if not self.has_gradient:
            raise NotImplementedError(
                f"{type(self).__name__} provides values only; use gradient='score'."
            )
        return self._log_prob_grad(*self._check(F, B, y))

    @staticmethod
    def _check_many(F, B, Y):
        F = np.asarray(F, dtype=np.float64)
        if F.ndim != 4:
            raise ValueError(f"F must have shape (G, S, T, V), got {F.shape}.")
        G, S, T, V = F.shape
        B = np.ascontiguousarray(B, dtype=np.float64)
        if B.shape != (G, S, V, V):
            raise ValueError(f"B must have shape (G, S, V, V) = {(G, S, V, V)}, got {B.shape}.")
        Y = np.asarray(Y, dtype=np.int64)
        if Y.shape != (G, T):
            raise ValueError(f"Y must have shape (G, T) = {(G, T)}, got {Y.shape}.")
        return np.ascontiguousarray(F), B, Y

    def log_prob_many(self, F, B, Y):
        """:meth:`log_prob` for ``G`` sequences of one length at once.

        Parameters
        ----------
        F : array-like of shape (G, S, T, V)
            ``S`` sampled unary potentials of each of ``G`` sequences.
        B : array-like of shape (G, S, V, V)
            Sampled transitions of each sample.
        Y : array-like of int of shape (G, T)
            Encoded labels of each sequence.

        Returns
        -------
        values : ndarray of shape (G, S)
        """
        F, B, Y = self._check_many(F, B, Y)
        return self._log_prob_many(F, B, Y)

    def log_prob_grad_many(self, F, B, Y):
        """:meth:`log_prob_grad` for ``G`` sequences of one length at once.

        Parameters
        ----------
        F, B, Y
            As in :meth:`log_prob_many`.

        Returns
        -------
        values : ndarray of shape (G, S)
        grad_F : ndarray of shape (G, S, T, V)
        grad_B : ndarray of shape (G, S, V, V)
        """
        if not self.has_gradient:
            raise NotImplementedError(
                f"{type(self).__name__} provides values only; use gradient='score'."
            )
        F, B, Y = self._check_many(F, B, Y)
        return self._log_prob_grad_many(F, B, Y)

    def _log_prob(self, F, B, y):
        raise NotImplementedError

    def _log_prob_grad(self, F, B, y):
        raise NotImplementedError

    # One call per sequence; subclasses with a batched kernel override these.
    def _log_prob_many(self, F, B, Y):
        return np.stack([self._log_prob(F[g], B[g], Y[g]) for g in range(len(F))])

    def _log_prob_grad_many(self, F, B, Y):
        out = [self._log_prob_grad(F[g], B[g], Y[g]) for g in range(len(F))]
        return tuple(np.stack(parts) for parts in zip(*out))


class CRFLikelihood(Likelihood):
    """Exact linear-chain CRF likelihood (forward-backward, O(T V^2)).

    ``log p(y | F, B) = sum_t F[t, y_t] + sum_t B[y_{t-1}, y_t] - log Z(F, B)``.

    Parameters
    ----------
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the batched calls (:meth:`log_prob_many`,
        :meth:`log_prob_grad_many`, the ones GPStructTagger makes) run,
        chosen by :func:`skgpstruct.chain.backend.get_backend`: ``"cuda"``
        is one GPU launch for all samples of all sequences of a call (a
        RuntimeError without a usable GPU), ``"auto"`` the GPU when one is
        usable. Single-sequence calls stay on the CPU.

    Examples
    --------
    >>> import numpy as np
    >>> lik = CRFLikelihood()
    >>> F = np.zeros((2, 3, 2))
    >>> np.round(lik.log_prob(F, np.zeros((2, 2)), [0, 1, 1]), 6)
    array([-2.079442, -2.079442])
    """

    has_gradient = True

    def __init__(self, device="cpu"):
        self.device = device

    def _log_prob(self, F, B, y):
        return chain.log_likelihood(F, B, y)

    def _log_prob_grad(self, F, B, y):
        return chain.log_likelihood_grad(F, B, y)

    @staticmethod
    def _ragged(F, B, Y):
        """Every (sequence, sample) as one chain of the ragged kernels."""
        G, S, T, V = F.shape
        lengths = np.full(G * S, T, dtype=np.int64)
        y = np.repeat(Y, S, axis=0).ravel()
        return F.reshape(G * S * T, V), lengths, B.reshape(G * S, V, V), y

    def _ragged_grad(self, F, B, Y):
        U, lengths, B, y = self._ragged(F, B, Y)
        return get_backend(self.device).log_likelihood_grad_ragged(U, lengths, B, y)

    def _log_prob_many(self, F, B, Y):
        return self._ragged_grad(F, B, Y)[0].reshape(F.shape[:2])

    def _log_prob_grad_many(self, F, B, Y):
        values, gU, gB = self._ragged_grad(F, B, Y)
        return values.reshape(F.shape[:2]), gU.reshape(F.shape), gB.reshape(B.shape)


class PseudoLikelihood(Likelihood):
    """Piecewise pseudo-likelihood of the chain (O(T V)).

    See :func:`skgpstruct.chain.pseudo_log_likelihood` for the definition.

    Examples
    --------
    >>> import numpy as np
    >>> lik = PseudoLikelihood()
    >>> np.round(lik.log_prob(np.zeros((1, 2, 2)), np.zeros((2, 2)), [0, 1]), 6)
    array([-2.772589])
    """

    has_gradient = True

    def _log_prob(self, F, B, y):
        return chain.pseudo_log_likelihood(F, B, y)

    def _log_prob_grad(self, F, B, y):
        return chain.pseudo_log_likelihood_grad(F, B, y)


class RandomizedCRFLikelihood(Likelihood):
    """CRF likelihood with a randomized log-partition function (large label sets).

    ``log p(y | F, B) = score(y) - log Z-hat`` where ``log Z-hat`` is the
    randomized forward algorithm of Fu, Cunningham and Lapata (ICML 2022) on
    ``n_top`` top states plus ``n_sampled`` sampled states per position, the
    gold label always kept (see
    :func:`skgpstruct.chain.randomized.randomized_marginals`). Each sample
    costs O(T K^2) instead of O(T V^2), ``K = n_top + n_sampled``; with
    ``K >= V`` it is the exact CRF likelihood. ``Z-hat`` is unbiased, so
    ``log Z-hat`` is biased low and the value biased high, by an amount that
    shrinks as ``K`` grows.

    The sub-lattice of a sample is drawn from a seed that is a hash of the
    sample's potentials and ``random_state``: the value is a deterministic
    function of its inputs (the same model for any ``n_jobs``), and the
    gradient treats the sub-lattice as fixed, as in training with the
    randomized forward algorithm.

    Parameters
    ----------
    n_top : int, default=8
        States kept deterministically per position (gold label included).
    n_sampled : int, default=8
        States sampled per position from the proposal over the rest.
    proposal : {"local+global", "local", "global", "uniform"}, default="local+global"
        Proposal over states.
    random_state : int, default=0
        Mixed into the per-sample seeds.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> F, B, y = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 3, 3)), [0, 2, 1, 1]
    >>> exact = CRFLikelihood().log_prob(F, B, y)
    >>> bool(np.allclose(RandomizedCRFLikelihood(n_top=3, n_sampled=0).log_prob(F, B, y), exact))
    True
    """

    has_gradient = True

    def __init__(self, n_top=8, n_sampled=8, proposal="local+global", random_state=0):
        self.n_top = n_top
        self.n_sampled = n_sampled
        self.proposal = proposal
        self.random_state = random_state

    def _seed(self, F_s):
        import zlib

        return (zlib.crc32(np.ascontiguousarray(F_s).tobytes())
                + 1_000_003 * int(self.random_state)) % (2**31 - 1)

    def _run(self, F, B, y, need_grad):
        from .chain import randomized as rdp

        S, T, V = F.shape
        if self.n_top + self.n_sampled >= V:
            exact = CRFLikelihood()
            return exact._log_prob_grad(F, B, y) if need_grad else exact._log_prob(F, B, y)
        values = np.empty(S)
        dF = np.zeros_like(F) if need_grad else None
        dB = np.zeros_like(B) if need_grad else None
        t = np.arange(T)
        for s in range(S):
            res = rdp.randomized_marginals(
                F[s], B[s], self.n_top, self.n_sampled, proposal=self.proposal,
                random_state=self._seed(F[s]), force=y,
            )
            gold = F[s, t, y].sum() + B[s, y[:-1], y[1:]].sum()
            values[s] = gold - res.log_partition
            if need_grad:
                dF[s] = -res.unary
                dF[s, t, y] += 1.0
                dB[s] = -res.pairwise
                np.add.at(dB[s], (y[:-1], y[1:]), 1.0)
        return (values, dF, dB) if need_grad else values

    def _log_prob(self, F, B, y):
        return self._run(F, B, y, False)

    def _log_prob_grad(self, F, B, y):
        return self._run(F, B, y, True)


_BY_NAME = {
    "crf": CRFLikelihood,
    "pseudo": PseudoLikelihood,
    "randomized": RandomizedCRFLikelihood,
}


def get_likelihood(likelihood):
    """A likelihood object from a name or an instance.

    Parameters
    ----------
    likelihood : {"crf", "pseudo", "randomized"} or Likelihood
        Name or instance (returned as is).

    Returns
    -------
    likelihood : Likelihood
    """
    if isinstance(likelihood, Likelihood):
        return likelihood
    if isinstance(likelihood, str) and likelihood in _BY_NAME:
        return _BY_NAME[likelihood]()
    raise ValueError(
        f"Unknown likelihood {likelihood!r}; expected one of {sorted(_BY_NAME)} "
        "or a skgpstruct.likelihoods.Likelihood instance."
    )
