"""Stochastic variational inference for GPStructTagger's weight-space form:
minibatches of sequences, pathwise gradients from a few draws of the
weights per sequence, AdaGrad steps that touch only the features a
minibatch has, and a stopping rule that knows the estimate is noisy.

The objective is the cold ELBO of :class:`~skgpstruct.gp.weight_space.WeightSpaceObjective`
(the same parameters, whitened: ``q(u_dv) = N(m_dv, s_dv)``, potentials
``sqrt(T sigma^2) x @ u``), written as a sum over sequences,

``ELBO = sum_n [ELL_n / T - sum_{d in n} KL_d / c_d] - KL_bin``,

where ``KL_d = 0.5 sum_v (s_dv + m_dv^2 - 1 - log s_dv)`` is feature ``d``'s
part of the KL term and ``c_d`` the number of training sequences that have
it: every feature of the objective is in some sequence, so the sum over
sequences gives the KL term exactly, and a minibatch's estimate
``(N / B) sum_{n in batch}`` is unbiased for the whole ELBO *and* has
gradients on the minibatch's features only. (Spreading the prior over the
sequences that use a feature is what lets a step cost what its sequences
cost, not the ``D x V`` of all weights; the transitions' KL is dense and
small, ``B / N`` of it a step.) The expected log-likelihoods come from
:func:`skgpstruct.chain.weight_noise.weight_noise_pass` (draws of the
weights themselves, so that tokens sharing a feature share its draw).

Steps: :class:`~skgpstruct.optim.proximal.ProximalAdaGrad` (no decay: the
prior is in the gradient) on the row-sparse gradients, ``log s`` kept in
the box of the L-BFGS form. AdaGrad's steps shrink as the squared gradients
add up, which is what a noisy gradient needs to settle (Robbins-Monro),
and its per-coordinate scale suits features seen once as well as the bias.

Stopping: every epoch visits each sequence once, so the epochs'
objectives can be compared sequence by sequence. The run stops when the
last epoch's improvement, summed over the sequences, is below two standard
errors of that sum (the paired differences' spread): the epoch no longer
improves the objective by more than its own noise. ``max_iter`` bounds the
epochs.
"""

import numpy as np
import scipy.sparse as sp

from .._utils.seeds import SEED_MAX
from ..chain.weight_noise import SequenceColumns, weight_noise_pass
from ..gp.kl import transition_kl
from ..gp.weight_space import LOG_S_BOUNDS, FeatureParams
from ..optim.proximal import ProximalAdaGrad, RowSparseGradient

__all__ = ["SVI_BATCH_SIZE", "SVI_LEARNING_RATE", "SVI_SAMPLES", "StochasticFeatureELBO",
           "fit_svi"]

#: Sequences per minibatch (``batch_size=None``): large enough that a step's
#: Python work is small beside its chain passes, small enough for about a
#: hundred steps an epoch on 9,000 sentences.
SVI_BATCH_SIZE = 64
#: Draws per sequence and step (``n_samples="auto"``): each step redraws, so
#: the noise averages out over steps; one more draw costs almost one more
#: pass.
SVI_SAMPLES = 1
#: AdaGrad's step size (``learning_rate="auto"``), in whitened units (the
#: prior's standard deviation is 1).
SVI_LEARNING_RATE = 0.05
#: The standard errors of an epoch's improvement the stopping rule asks for.
_STOP_SE = 2.0


class StochasticFeatureELBO:
    """The cold ELBO of the weight-space form as a sum over sequences.

    Parameters
    ----------
    X : sparse matrix of shape (n_tokens, n_features)
        Tokens of the training sequences (the features to learn; each in
        some token).
    lengths : array-like of int of shape (n_sequences,)
    y_flat : ndarray of int of shape (n_tokens,)
    n_classes : int
    temperature : float in (0, 1]
        The expected log-likelihood is weighed by ``1 / temperature``.
    jitter : float
        Added to the diagonal of each unscaled covariance (an independent
        draw per token and label).
    n_samples : int
        Draws per sequence.
    learn : (bool, bool)
        Whether ``log sigma^2`` (the cold prior variance of the weights)
        and ``log tau^2`` (of the transitions) are learned.

    Notes
    -----
    The parameter vector is ``[W, m_bin, log s_bin, log sigma^2, log
    tau^2]`` with ``W`` of shape (n_features, 2 V): per feature its ``V``
    whitened means then their log variances, one row per feature (the rows
    a minibatch touches).
    """

    def __init__(self, X, lengths, y_flat, n_classes, *, temperature, jitter, n_samples,
                 learn=(False, False)):
        X = sp.csr_matrix(X, dtype=np.float64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.columns = SequenceColumns(X, offsets)
        if np.any(self.columns.counts == 0):
            raise ValueError("Every feature of the stochastic objective must be in a "
                             "training token.")
        self.y = np.asarray(y_flat, dtype=np.int64)
        self.V, self.D = int(n_classes), X.shape[1]
        self.N = self.columns.n_sequences
        self.temperature = float(temperature)
        self.jitter, self.n_samples = float(jitter), int(n_samples)
        self.learn = tuple(bool(b) for b in learn)
        self.n_block = self.D * 2 * self.V

    # ------------------------------------------------------------ layout
    @property
    def layout(self):
        """The object with :meth:`pack` / :meth:`unpack` (this one, as the
        L-BFGS objectives' ``layout``)."""
        return self

    def pack(self, params):
        """The flat vector of a :class:`~skgpstruct.gp.weight_space.FeatureParams`."""
        Wb = np.concatenate([params.m, np.log(params.s)], axis=1)
        return np.concatenate([Wb.ravel(), np.ravel(params.m_bin), np.log(np.ravel(
            params.s_bin)), np.log([params.variance, params.transition_var])])

    def _parts(self, x):
        V, nb = self.V, self.n_block
        W = x[:nb].reshape(self.D, 2 * V)
        rest = x[nb:]
        return W, rest[:V * V].reshape(V, V), rest[V * V:2 * V * V].reshape(V, V), rest[-2:]

    def unpack(self, x):
        """The :class:`~skgpstruct.gp.weight_space.FeatureParams` of ``x``."""
        W, m_bin, ls_bin, hyper = self._parts(x)
        V = self.V
        h = np.exp(hyper)
        return FeatureParams(W[:, :V].copy(), np.exp(W[:, V:]), m_bin.copy(),
                             np.exp(ls_bin), h[0], h[1])

    # --------------------------------------------------------- estimates
    def batch(self, x, seqs, seeds, parallel=None):
        """Minus the minibatch's part of the ELBO, per sequence, and the
        gradient of their sum.

        Returns
        -------
        values : ndarray of shape (n_batch,)
            ``-(ELL_n / T - sum_{d in n} KL_d / c_d) + KL_bin / N`` of each
            sequence (their sum over all sequences is minus the ELBO's
            estimate).
        grad : RowSparseGradient
            Gradient of ``values.sum()``.
        """
        W, m_bin, ls_bin, hyper = self._parts(x)
        V, T = self.V, self.temperature
        scale = float(np.exp(0.5 * hyper[0]))
        ell, rows, g_rows, counts, g_bin, g_log = weight_noise_pass(
            self.columns, self.y, seqs, seeds, W, m_bin, ls_bin, scale=scale,
            jitter_sd=np.sqrt(self.jitter), n_samples=self.n_samples, parallel=parallel)
        Wr = W[rows]
        m, s = Wr[:, :V], np.exp(Wr[:, V:])
        share = 1.0 / self.columns.counts[rows]
        kl_rows = 0.5 * np.sum(s + m * m - 1.0 - Wr[:, V:], axis=1) * share
        # each sequence's KL share: its features' KL_d / c_d
        seq_kl = self._sequence_kl(seqs, rows, kl_rows)
        tau2 = float(np.exp(hyper[1]))
        s_bin = np.exp(ls_bin)
        kl_b, g_b = transition_kl(m_bin, s_bin, tau2, return_grad=True)
        frac = len(seqs) / self.N
        values = -(ell / T - seq_kl) + kl_b / self.N
        weight = (counts * share)[:, None]
        grad_rows = -(g_rows / T)
        grad_rows[:, :V] += weight * m
        grad_rows[:, V:] += weight * 0.5 * (s - 1.0)
        second = s_bin + m_bin ** 2
        rest = np.concatenate([
            (-(g_bin[0] / T) + frac * g_b["m_bin"]).ravel(),
            (-(g_bin[1] / T) + frac * g_b["s_bin"] * s_bin).ravel(),
            [-(g_log / T) if self.learn[0] else 0.0,
             frac * 0.5 * float(np.sum(1.0 - second / tau2)) if self.learn[1] else 0.0]])
        return values, RowSparseGradient(rows, grad_rows, rest)

    def _sequence_kl(self, seqs, rows, kl_rows):
        """``sum_{d in n} KL_d / c_d`` of each sequence of ``seqs``."""
        c = self.columns
        lookup = np.zeros(self.D)
        lookup[rows] = kl_rows
        sizes = c.n_cols(seqs)
        idx = np.concatenate([c.cols[c.col_off[n]:c.col_off[n + 1]] for n in seqs])
        return np.add.reduceat(lookup[idx], np.r_[0, np.cumsum(sizes)[:-1]]) \
            if idx.size else np.zeros(len(seqs))

    def clip(self, x, rows):
        """Project ``log s`` of ``rows`` (and of the transitions) into the box."""
        V, nb = self.V, self.n_block
        W = x[:nb].reshape(self.D, 2 * V)
        W[rows, V:] = np.clip(W[rows, V:], *LOG_S_BOUNDS)
        ls = x[nb + V * V:nb + 2 * V * V]
        np.clip(ls, *LOG_S_BOUNDS, out=ls)


def fit_svi(objective, x, rng, monitor, parallel=None, *, learning_rate, batch_size):
    """Epochs of minibatch AdaGrad steps on ``objective`` (a
    :class:`StochasticFeatureELBO`) from ``x`` (in place), until the
    paired stopping rule of the module docstring or ``monitor.max_iter``
    epochs; each epoch draws from ``rng`` a permutation of the sequences
    and one seed per sequence. Reports each epoch's estimate of minus the
    ELBO to ``monitor``. Returns ``x`` (a KeyboardInterrupt after the first
    epoch returns the best epoch's, with a FitInterruptedWarning)."""
    from .._tagging.base import run_epochs

    N = objective.N
    batch = int(batch_size or SVI_BATCH_SIZE)
    opt = ProximalAdaGrad(learning_rate, n_rows=objective.D, n_cols=2 * objective.V)
    name = "AdaGrad (SVI)"
    monitor.start(name, unit="epoch", desc="GPStructTagger")
    last = {}  # the previous epoch's per-sequence values

    def epoch():
        order = rng.permutation(N)
        seeds = rng.randint(SEED_MAX, size=N)
        values = np.empty(N)
        for k in range(0, N, batch):
            idx = order[k:k + batch]
            v, grad = objective.batch(x, idx, seeds[k:k + batch], parallel)
            values[idx] = v
            opt.step(x, grad, scale=1.0 / len(idx))
            objective.clip(x, grad.rows)
        total = float(values.sum())
        monitor.report(total)
        monitor.converged = False
        if "values" in last:
            d = last["values"] - values  # per-sequence improvement
            se = float(np.sqrt(N) * d.std())
            monitor.converged = bool(d.sum() < _STOP_SE * se)
        last["values"] = values
        return total

    return run_epochs(epoch, x, monitor, name)
