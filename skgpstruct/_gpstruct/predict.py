"""GPStructTagger's predictions: sampled marginals, path probabilities,
predictive uncertainty and the ELBO on new data.

Plain functions of a :class:`Predictive`, the fitted posterior as
``GPStructTagger`` hands it to them: every prediction of either posterior
form (inducing points or weight space) goes through
:func:`sequence_moments` (the Gaussian marginals of each sequence's unary
potentials, computed by the form's module) and the same sampler as
training.
"""

from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed
from scipy.special import logsumexp

from .. import chain
from ..chain.averaged import MarginalSums, add_sampled_draws
from .._input.sequences import sequence_seeds
from .._tagging.predict import entropy, renormalize_rows
from .._utils.parallel import small_blas
from .constrained import (constrained_marginals, constrained_path_log_proba,
                          constrained_path_uncertainty)
from . import inducing_form, weight_space_form
from .weight_space_form import FittedWeights
from ..gp._weight_space_long import WeightSpaceCovariance
from ..gp.sampling import _sample_unary, draw_normals, sample_potentials
from ..gp.terms import jittered_cholesky

__all__ = ["PREDICT_CHUNK_SEQUENCES", "Predictive", "chunks", "decode_potentials",
           "draw_potentials", "moment_chunks", "parallel", "path_log_proba",
           "path_uncertainty", "per_sequence", "posterior_draws", "posterior_elbo",
           "predictive", "sequence_moments", "token_marginals", "token_uncertainty",
           "with_shared_transitions"]

#: Sequences whose posterior moments prediction holds at a time
#: (:func:`moment_chunks`): their ``(V, T_n, T_n)`` covariances (and, in
#: the weight-space form, their pair matrix) are built for one chunk, used
#: and dropped, so that the memory of ``predict`` does not grow with the
#: number of sequences predicted.
PREDICT_CHUNK_SEQUENCES = 256


class Predictive(NamedTuple):
    """A fitted GPStructTagger's posterior, as its predictions read it."""

    #: The form's fitted arrays: a
    #: :class:`~skgpstruct._gpstruct.weight_space_form.FittedWeights` or a
    #: :class:`~skgpstruct._gpstruct.inducing_form.FittedInducing`.
    posterior: object
    weights: np.ndarray  #: ``weights_``, of the mixture components
    transition_mean: np.ndarray  #: ``transition_mean_``
    transition_var: np.ndarray  #: ``transition_var_``
    n_samples: int  #: ``n_predict_samples``, per sequence and component
    seed: int  #: ``predict_seed_``
    scale: float  #: ``_potential_scale``, the factor on every potential
    n_jobs: object  #: ``n_jobs``
    #: The draws of the transitions every sequence shares (set by
    #: :func:`with_shared_transitions`): ``(B, prepared)``, ``B`` of shape
    #: (K, S, V, V) before ``scale`` and per component the
    #: :class:`~skgpstruct.chain.averaged.PreparedTransitions` of ``scale * B``.
    transitions: object = None


def predictive(fitted, scale, *, jitter, kernel, kernel_variance, optimize_hyperparameters,
               n_predict_samples, n_jobs, **_):
    """The :class:`Predictive` of a fitted GPStructTagger: its fitted
    attributes ``fitted`` (a dict), its ``_potential_scale`` and the
    parameters its predictions read when they are called."""
    if fitted["approximation_"] == "features":
        posterior = weight_space_form.fitted_weights(fitted, jitter)
    else:
        posterior = inducing_form.fitted_inducing(fitted, inducing_form.hyper_mode(
            kernel, kernel_variance, optimize_hyperparameters))
    return Predictive(posterior, fitted["weights_"], fitted["transition_mean_"],
                      fitted["transition_var_"], n_predict_samples, fitted["predict_seed_"],
                      scale, n_jobs)


def _antithetic(rng, K, S, a, b):
    """(K, S, a, b) standard normals in antithetic pairs: draw ``k`` and draw
    ``k + S // 2`` are ``e`` and ``-e`` (``k < S // 2``; an odd ``S``'s last
    draw is unpaired). The average over a pair of a smooth function of the
    draws has no error linear in the noise (the first-order terms cancel),
    and half as many normals are drawn."""
    P = S // 2
    e = _antithetic_halves(rng, K, S, a, b)
    return np.concatenate([e[:, :P], -e[:, :P], e[:, P:]], axis=1)


def _antithetic_halves(rng, K, S, a, b):
    """The (K, S - S // 2, a, b) normals that :func:`_antithetic` pairs."""
    return rng.standard_normal((K, S - S // 2, a, b))


def with_shared_transitions(pred):
    """``pred`` with the ``n_samples`` draws of the transitions of each
    component that every sequence's draws share: ``m_bin + sqrt(s_bin)
    eps``, ``eps`` antithetic (:func:`_antithetic`, paired as the unary
    draws of :func:`posterior_draws` are) from
    ``numpy.random.default_rng([predict_seed_, 3])``
    (the model's, not a sequence's: a sequence's predictions still depend
    on it and the model alone). One set of draws for all sequences is an
    estimator of each sequence's posterior predictive as good as a set per
    sequence, and its exponentials are computed once per call instead of
    once per sequence and draw (:func:`~skgpstruct.chain.averaged.prepare_transitions`)."""
    if pred.transitions is not None:
        return pred
    from ..chain.averaged import prepare_transitions

    K, V = len(pred.weights), pred.transition_mean.shape[0]
    eps = _antithetic(np.random.default_rng([int(pred.seed), 3]), K, pred.n_samples, V, V)
    B = pred.transition_mean + np.sqrt(pred.transition_var) * eps
    return pred._replace(transitions=(B, [prepare_transitions(pred.scale * B[k])
                                          for k in range(K)]))


def parallel(pred):
    """joblib threads over sequences (``n_jobs``), as the tagger's."""
    return Parallel(n_jobs=pred.n_jobs, prefer="threads")


def sequence_moments(pred, data):
    """Posterior moments ``(b, Sigma)`` of the unary potentials of every
    sequence of ``data``: ``b`` (K, n_tokens, V), and per sequence its
    :func:`~skgpstruct.gp.terms.sequence_marginals` entry (or a factored
    weight-space covariance of a long sequence). A sequence's moments
    depend on that sequence alone in both forms."""
    if isinstance(pred.posterior, FittedWeights):
        return weight_space_form.sequence_moments(pred.posterior, data, pred.n_samples)
    return inducing_form.sequence_moments(pred.posterior, data, pred.n_jobs)


def draw_potentials(pred, b_n, Sigma_n, seed):
    """``F, B, factored``: the ``n_samples`` posterior draws of one
    sequence's unary potentials ``F[0, k]`` (S, T, V) and transitions
    ``B[0, k]`` (S, V, V) per mixture component ``k``, drawn as in training
    (:func:`~skgpstruct.gp.sampling.draw_normals` from the sequence's seed,
    :func:`~skgpstruct.gp.sampling.sample_potentials`), scaled by
    ``pred.scale``. ``Sigma_n`` is the sequence's entry of
    :func:`sequence_moments`: (K, V, T, T) mean-field blocks, or the (K, V
    T, V T) joint covariance of the coupled posterior (sampled as one block,
    label-major, as in training), or a weight-space factorisation of a long
    sequence (``factored``: sampled in weight space)."""
    F, B, factored = posterior_draws(pred, b_n, Sigma_n, seed)
    s = pred.scale
    if s != 1.0:  # TemperatureScaledTagger: every draw's potentials scaled
        F, B = s * F, s * B
    return F, B, factored


def posterior_draws(pred, b_n, Sigma_n, seed):
    """The draws of :func:`draw_potentials` before ``pred.scale``."""
    K, T, V = b_n.shape
    if isinstance(Sigma_n, WeightSpaceCovariance):
        F, B = Sigma_n.sample_potentials(b_n, pred.transition_mean, pred.transition_var,
                                         pred.n_samples, seed)
        return F, B, True
    C = _unary_factor(Sigma_n, T)
    if pred.transitions is not None:  # the shared transitions: unary draws only
        eps = _antithetic(np.random.default_rng(int(seed) % 2 ** 64), K, pred.n_samples,
                          V, T)
        F = _sample_unary(b_n[None], C[None], eps[None])[0]
        return F, pred.transitions[0][None], False
    eps, eps_bin = draw_normals([T], K, V, pred.n_samples, [seed])
    F, B = sample_potentials(b_n[None], C[None], eps[0][None],
                             pred.transition_mean, pred.transition_var,
                             eps_bin[0][None])
    return F, B, False


def _unary_factor(Sigma_n, T):
    """The Cholesky factors of a sequence's covariances, in the block layout
    of :func:`~skgpstruct.gp.sampling.sample_potentials` without its first
    axis: (K, V, T, T) mean-field blocks, or (K, 1, V T, V T) for the
    coupled joint covariance (one label-major block)."""
    C = jittered_cholesky(
        Sigma_n, 0.0,
        f"A marginal covariance Sigma_n of a sequence of length {T}")[0]
    return C[:, None] if C.ndim == 3 else C


def chunks(data):
    """``(idx, data.subset(idx))`` for consecutive chunks of at most
    :data:`PREDICT_CHUNK_SEQUENCES` sequences of ``data``."""
    for start in range(0, data.n_sequences, PREDICT_CHUNK_SEQUENCES):
        idx = np.arange(start, min(start + PREDICT_CHUNK_SEQUENCES, data.n_sequences))
        yield idx, data.subset(idx)


def moment_chunks(pred, data):
    """``(idx, sub, b, Sigma)`` for consecutive chunks of at most
    :data:`PREDICT_CHUNK_SEQUENCES` sequences: their positions in ``data``,
    ``data.subset(idx)`` and its :func:`sequence_moments`. A sequence's
    moments and seed depend on that sequence alone (see
    :func:`sequence_moments`,
    :func:`~skgpstruct._input.sequences.sequence_seeds`), so chunking
    changes no number; only one chunk's covariances are held at a time."""
    for idx, sub in chunks(data):
        b, Sigma = sequence_moments(pred, sub)
        yield idx, sub, b, Sigma


def per_sequence(pred, data, func, *args):
    """``func(pred, b_n, Sigma_n, seed_n, *args_n)`` for every sequence of
    ``data`` (its posterior moments and seed, the ``n``-th item of each of
    ``args``), in parallel over the sequences."""
    out = []
    pred = with_shared_transitions(pred)
    # per-sequence work on small matrices: single-threaded BLAS is faster
    with small_blas(), parallel(pred) as run:
        for idx, sub, b, Sigma in moment_chunks(pred, data):
            seeds = sequence_seeds(sub, pred.seed)
            offsets = sub.offsets
            out.extend(run(
                delayed(func)(pred, b[:, offsets[i] : offsets[i + 1]], Sigma[i], seeds[i],
                              *(a[n] for a in args))
                for i, n in enumerate(idx)
            ))
    return out


def _sample_path_log_proba(pred, b_n, Sigma_n, seed, path, log_mask=None):
    """``log p(path | x)`` of one sequence: ``p(path | f)`` averaged over
    the draws of :func:`draw_potentials` (those of the marginals), per
    component weighted by ``pred.weights`` (given a constraint ``log_mask``:
    :func:`~skgpstruct._gpstruct.constrained.constrained_path_log_proba`)."""
    if log_mask is not None:
        return constrained_path_log_proba(draw_potentials(pred, b_n, Sigma_n, seed),
                                          pred.weights, log_mask, path)
    F, B, _ = draw_potentials(pred, b_n, Sigma_n, seed)
    terms = []
    for k in range(b_n.shape[0]):
        log_p = chain.log_likelihood(F[0, k], B[0, k], path)  # per draw
        terms.append(np.log(pred.weights[k]) + log_p - np.log(log_p.size))
    return min(float(logsumexp(np.concatenate(terms))), 0.0)


def path_log_proba(pred, data, paths):
    """The posterior predictive ``log p(path | x)`` of each sequence (see
    ``predict_path_proba``)."""
    return np.array(per_sequence(pred, data, _sample_path_log_proba, paths, _masks(data)),
                    dtype=np.float64)


def _sample_marginals(pred, b_n, Sigma_n, seed, stats=False, log_mask=None):
    """Marginals of one sequence averaged over the posterior draws of
    :func:`draw_potentials`. With ``stats`` also the mean over draws of the
    token entropies (T,) and the standard deviation over draws of each
    marginal (T, V). Given a constraint ``log_mask``:
    :func:`~skgpstruct._gpstruct.constrained.constrained_marginals`."""
    if log_mask is not None:
        return constrained_marginals(draw_potentials(pred, b_n, Sigma_n, seed),
                                     pred.weights, log_mask, stats)
    K, T, V = b_n.shape
    if pred.transitions is not None and not isinstance(Sigma_n, WeightSpaceCovariance):
        return _shared_marginals(pred, b_n, Sigma_n, seed, stats)
    F, B, factored = draw_potentials(pred, b_n, Sigma_n, seed)
    out, second, mean_entropy = np.zeros((T, V)), np.zeros((T, V)), np.zeros(T)
    for k in range(K):
        w = pred.weights[k]
        unary, _ = chain.marginals(F[0, k], B[0, k])
        if factored:  # long: renormalised (short ones keep their numbers)
            renormalize_rows(unary)
        out += w * unary.mean(axis=0)
        if stats:
            second += w * (unary ** 2).mean(axis=0)
            mean_entropy += w * entropy(unary).mean(axis=0)
    if not stats:
        return out
    return out, mean_entropy, np.sqrt(np.maximum(second - out ** 2, 0.0))


def _shared_marginals(pred, b_n, Sigma_n, seed, stats):
    """:func:`_sample_marginals` of a sequence whose draws share the
    transitions (:func:`with_shared_transitions`): the draws of
    :func:`draw_potentials` against the prepared transitions, only the
    sums of their marginals kept, the draws made one at a time in the
    kernel (:func:`~skgpstruct.chain.averaged.add_sampled_draws`)."""
    K, T, V = b_n.shape
    # the draws of draw_potentials, made inside the kernel one at a time
    C = _unary_factor(Sigma_n, T)
    e = _antithetic_halves(np.random.default_rng(int(seed) % 2 ** 64), K, pred.n_samples,
                           V, T)
    sums = [add_sampled_draws(MarginalSums(T, V), b_n[k], C[k], e[k],
                              pred.transitions[1][k], pred.scale, stats)
            for k in range(K)]
    out = sum(w * sk.mean for w, sk in zip(pred.weights, sums))
    if not stats:
        return out
    second = sum(w * sk.square / sk.n_draws for w, sk in zip(pred.weights, sums))
    mean_entropy = sum(w * sk.entropy / sk.n_draws for w, sk in zip(pred.weights, sums))
    return out, mean_entropy, np.sqrt(np.maximum(second - out ** 2, 0.0))


def token_marginals(pred, data, stats=False):
    """Sample-averaged marginals of every sequence of ``data`` (the
    ``"marginal"`` decoder and ``predict_marginals``); with ``stats`` the
    tuples of :func:`_sample_marginals`."""
    return per_sequence(pred, data, _sample_marginals, [stats] * data.n_sequences,
                        _masks(data))


def token_uncertainty(pred, data, kind):
    """Per-token uncertainty of ``kind``, ``"mutual_information"`` or
    ``"marginal_std"`` (see ``predict_uncertainty``)."""
    out = []
    for mean, mean_entropy, std in token_marginals(pred, data, stats=True):
        if kind == "marginal_std":
            out.append(std)
        else:  # epistemic part: H(mean) - mean H, >= 0 up to rounding
            out.append(np.maximum(entropy(mean) - mean_entropy, 0.0))
    return out


def _sample_path_uncertainty(pred, b_n, Sigma_n, seed, n_paths=1, log_mask=None):
    """``(entropy, mutual_information)`` of one sequence's label path
    under the posterior predictive:
    :func:`~skgpstruct.chain.mixture_path_entropy` over the draws of
    :func:`draw_potentials` (those of the marginals), each of component
    ``k``'s ``S`` draws weighted ``weights[k] / S``; ``n_paths`` paths per
    draw (or ``"auto"``), sampled from a stream of the sequence's seed."""
    K, T, V = b_n.shape
    if log_mask is not None:  # given a constraint: constrained_path_uncertainty
        return constrained_path_uncertainty(
            draw_potentials(pred, b_n, Sigma_n, seed), pred.weights, log_mask, n_paths,
            np.random.default_rng([int(seed), 1]))
    F, B, _ = draw_potentials(pred, b_n, Sigma_n, seed)
    S = F.shape[2]
    return chain.mixture_path_entropy(
        F[0].reshape(K * S, T, V), B[0].reshape(K * S, V, V),
        np.repeat(pred.weights / S, S), n_paths=n_paths,
        random_state=np.random.default_rng([int(seed), 1]))


def path_uncertainty(pred, data, kind, n_paths=1):
    """Per-sequence uncertainty of ``kind`` of the whole label path (see
    ``predict_uncertainty``, ``per="path"``)."""
    pairs = per_sequence(pred, data, _sample_path_uncertainty,
                         [n_paths] * data.n_sequences, _masks(data))
    return [h if kind == "entropy" else mi for h, mi in pairs]


def _masks(data):
    """One entry per sequence of ``data``: its constraint's ``log_mask``
    rows (0 or ``-inf``), or None."""
    if data.log_mask is None:
        return [None] * data.n_sequences
    return [None if np.all(m == 0.0) else m for m in data.split(data.log_mask)]


def decode_potentials(pred, data):
    """Posterior-mean potentials (the ``"viterbi"`` decoder), ``-inf`` at
    the labels a constraint forbids."""
    b = np.concatenate([b for _, _, b, _ in moment_chunks(pred, data)], axis=1)
    s = pred.scale
    U = s * np.tensordot(pred.weights, b, axes=1)
    if data.log_mask is not None:
        U = U + data.log_mask
    return U, s * pred.transition_mean


def posterior_elbo(pred, data, likelihood, transition_prior_var):
    """Evidence lower bound of the fitted posterior on the labelled
    ``data`` under ``likelihood`` (see ``GPStructTagger.elbo``), a chunk of
    :data:`PREDICT_CHUNK_SEQUENCES` sequences at a time."""
    post, m_bin, s_bin = pred.posterior, pred.transition_mean, pred.transition_var
    if isinstance(post, FittedWeights):
        kl = weight_space_form.posterior_kl(post, m_bin, s_bin, transition_prior_var)

        def ell(sub):
            return weight_space_form.sequence_ell(sub, post, likelihood, m_bin, s_bin,
                                                  pred.n_samples,
                                                  sequence_seeds(sub, pred.seed))
    else:
        kl = inducing_form.posterior_kl(post, pred.weights, m_bin, s_bin,
                                        transition_prior_var)

        def ell(sub):
            return inducing_form.sequence_ell(sub, post, likelihood, pred.weights, m_bin,
                                              s_bin, pred.n_samples,
                                              sequence_seeds(sub, pred.seed))
    # one chunk's moments and draws at a time; a sequence's expected
    # log-likelihood depends on that sequence alone, and the sum runs
    # over all of them in order, as over one chunk
    values = np.concatenate([ell(sub) for _, sub in chunks(data)])
    return float(np.sum(values) - kl)
