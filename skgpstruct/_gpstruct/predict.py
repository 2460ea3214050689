"""GPStructTagger's predictions: posterior moments, sampled marginals,
predictive uncertainty and the ELBO on new data.

A mixin of :class:`~skgpstruct.GPStructTagger`: every prediction of either
posterior form (inducing points or weight space) goes through
:meth:`GPPredictMixin._sequence_moments` (the Gaussian marginals of each
sequence's unary potentials) and the same sampler as training.
"""

import numpy as np
from joblib import delayed
from scipy.special import logsumexp
from sklearn.utils.validation import check_is_fitted

from .. import chain
from .._tagging.predict import entropy, renormalize_rows
from .._utils.parallel import small_blas
from .._input.sequences import SequenceData, sequence_seeds
from ..gp._weight_space_long import WeightSpaceCovariance
from ..gp.ell import expected_log_likelihood
from ..gp._sparse_support import _check_sparse_support
from ..gp.kl import mixture_kl, transition_kl
from ..gp.sampling import draw_normals, sample_potentials
from ..gp.terms import compute_gp_terms, jittered_cholesky, sequence_marginals
from ..likelihoods import get_likelihood

__all__ = ["GPPredictMixin"]

#: Sequences whose posterior moments prediction holds at a time
#: (:meth:`GPPredictMixin._moment_chunks`): their ``(V, T_n, T_n)``
#: covariances (and, in the weight-space form, their pair matrix) are built
#: for one chunk, used and dropped, so that the memory of ``predict`` does
#: not grow with the number of sequences predicted.
PREDICT_CHUNK_SEQUENCES = 256



def alone_sequence(data, n):
    """Sequence ``n`` of ``data`` on its own, dense if it came dense in a
    batch that mixed dense and sparse sequences (stacked as CSR): the
    representation it has in a batch of its own."""
    sub = data.subset([n])
    if sub.dense_rows is not None:
        sub = SequenceData(sub.X_flat.toarray(), sub.lengths)
    return sub

class GPPredictMixin:
    """Prediction methods of :class:`~skgpstruct.GPStructTagger`."""

    def _terms(self, data):
        """Kernel quantities of ``data`` under the fitted kernel (that of
        the base kernel scaled by the learned factor, with "scale")."""
        base, factor = self._fixed_kernel()
        _check_sparse_support(base, data.X_flat)
        terms = compute_gp_terms(
            base, data.X_flat, data.lengths, self.inducing_points_,
            jitter=self.jitter_, Lzz=self._Lzz,
        )
        return terms.scaled(factor)

    # -------------------------------------------------------------- predict
    def _sequence_moments(self, data):
        """Posterior moments of the unary potentials of every sequence.

        The inducing form computes them one sequence at a time: its batched
        kernel products, triangular solves and length buckets round a
        sequence's moments differently with the rest of the batch (up to
        1e-12 in the path probabilities), and a sequence must get the same
        numbers whatever else is in its batch (the weight-space moments are
        per sequence already)."""
        if self.approximation_ == "features":
            return self._feature_sequence_moments(data)

        def alone(n):
            return sequence_marginals(self._terms(alone_sequence(data, n)), self.q_mu_,
                                      self.q_sqrt_)

        # small products: single-threaded BLAS, in n_jobs threads (the same
        # numbers whatever n_jobs and the machine's BLAS threads are)
        with small_blas(), self._parallel() as parallel:
            parts = parallel(delayed(alone)(n) for n in range(data.n_sequences))
        b = np.concatenate([b_n for b_n, _ in parts], axis=1)
        return b, [S for _, Sigma_n in parts for S in Sigma_n]

    def _seeds(self, data):
        """Per-sequence seeds of the posterior draws (see ``predict_seed_``)."""
        return sequence_seeds(data, self.predict_seed_)

    def _draw_potentials(self, b_n, Sigma_n, seed):
        """``F, B, factored``: the ``n_predict_samples`` posterior draws of
        one sequence's unary potentials ``F[0, k]`` (S, T, V) and
        transitions ``B[0, k]`` (S, V, V) per mixture component ``k``, drawn
        as in training (:func:`~skgpstruct.gp.sampling.draw_normals` from
        the sequence's seed, :func:`~skgpstruct.gp.sampling.sample_potentials`).
        ``Sigma_n`` is the sequence's entry of
        :func:`~skgpstruct.gp.terms.sequence_marginals`: (K, V, T, T)
        mean-field blocks, or the (K, V T, V T) joint covariance of the
        coupled posterior (sampled as one block, label-major, as in
        training), or a weight-space factorisation of a long sequence
        (``factored``: sampled in weight space)."""
        F, B, factored = self._posterior_draws(b_n, Sigma_n, seed)
        s = self._potential_scale
        if s != 1.0:  # TemperatureScaledTagger: every draw's potentials scaled
            F, B = s * F, s * B
        return F, B, factored

    def _posterior_draws(self, b_n, Sigma_n, seed):
        """The draws of :meth:`_draw_potentials` before ``_potential_scale``."""
        K, T, V = b_n.shape
        if isinstance(Sigma_n, WeightSpaceCovariance):
            F, B = Sigma_n.sample_potentials(b_n, self.transition_mean_,
                                             self.transition_var_,
                                             self.n_predict_samples, seed)
            return F, B, True
        eps, eps_bin = draw_normals([T], K, V, self.n_predict_samples, [seed])
        # (K, V, T, T): mean-field blocks; (K, V T, V T): the coupled
        # joint covariance, one label-major block (nb = 1)
        C = jittered_cholesky(
            Sigma_n, 0.0,
            f"A marginal covariance Sigma_n of a sequence of length {T}")[0]
        if C.ndim == 3:
            C = C[:, None]
        F, B = sample_potentials(b_n[None], C[None], eps[0][None],
                                 self.transition_mean_, self.transition_var_,
                                 eps_bin[0][None])
        return F, B, False

    def _sample_path_log_proba(self, b_n, Sigma_n, seed, path):
        """``log p(path | x)`` of one sequence: ``p(path | f)`` averaged
        over the draws of :meth:`_draw_potentials` (those of
        :meth:`_sample_marginals`), per component weighted by ``weights_``."""
        F, B, _ = self._draw_potentials(b_n, Sigma_n, seed)
        terms = []
        for k in range(b_n.shape[0]):
            log_p = chain.log_likelihood(F[0, k], B[0, k], path)  # per draw
            terms.append(np.log(self.weights_[k]) + log_p - np.log(log_p.size))
        return min(float(logsumexp(np.concatenate(terms))), 0.0)

    def _path_log_proba(self, data, paths):
        """The posterior predictive ``log p(path | x)`` of each sequence
        (see ``predict_path_proba``)."""
        return np.array(self._per_sequence(data, self._sample_path_log_proba, paths),
                        dtype=np.float64)

    def _per_sequence(self, data, func, *args):
        """``func(b_n, Sigma_n, seed_n, *args_n)`` for every sequence of
        ``data`` (its posterior moments and seed, the ``n``-th item of each
        of ``args``), in parallel over the sequences."""
        out = []
        # per-sequence work on small matrices: single-threaded BLAS is faster
        with small_blas(), self._parallel() as parallel:
            for idx, sub, b, Sigma in self._moment_chunks(data):
                seeds = self._seeds(sub)
                offsets = sub.offsets
                out.extend(parallel(
                    delayed(func)(b[:, offsets[i] : offsets[i + 1]], Sigma[i], seeds[i],
                                  *(a[n] for a in args))
                    for i, n in enumerate(idx)
                ))
        return out

    def _moment_chunks(self, data):
        """``(idx, sub, b, Sigma)`` for consecutive chunks of at most
        :data:`PREDICT_CHUNK_SEQUENCES` sequences: their positions in
        ``data``, ``data.subset(idx)`` and its :meth:`_sequence_moments`.
        A sequence's moments and seed depend on that sequence alone (see
        :meth:`_sequence_moments`, :func:`~skgpstruct._input.sequences.sequence_seeds`),
        so chunking changes no number; only one chunk's covariances are
        held at a time."""
        for idx, sub in self._chunks(data):
            b, Sigma = self._sequence_moments(sub)
            yield idx, sub, b, Sigma

    @staticmethod
    def _chunks(data):
        """``(idx, data.subset(idx))`` for consecutive chunks of at most
        :data:`PREDICT_CHUNK_SEQUENCES` sequences of ``data``."""
        for start in range(0, data.n_sequences, PREDICT_CHUNK_SEQUENCES):
            idx = np.arange(start, min(start + PREDICT_CHUNK_SEQUENCES, data.n_sequences))
            yield idx, data.subset(idx)

    def _sample_marginals(self, b_n, Sigma_n, seed, stats=False):
        """Marginals of one sequence averaged over the posterior draws of
        :meth:`_draw_potentials`. With ``stats`` also the mean over draws of
        the token entropies (T,) and the standard deviation over draws of
        each marginal (T, V)."""
        K, T, V = b_n.shape
        F, B, factored = self._draw_potentials(b_n, Sigma_n, seed)
        out, second, mean_entropy = np.zeros((T, V)), np.zeros((T, V)), np.zeros(T)
        for k in range(K):
            unary, _ = chain.marginals(F[0, k], B[0, k])
            if factored:  # long: renormalised (short ones keep their numbers)
                renormalize_rows(unary)
            w = self.weights_[k]
            out += w * unary.mean(axis=0)
            if stats:
                second += w * (unary ** 2).mean(axis=0)
                mean_entropy += w * entropy(unary).mean(axis=0)
        if not stats:
            return out
        return out, mean_entropy, np.sqrt(np.maximum(second - out ** 2, 0.0))

    def _token_marginals(self, data, stats=False):
        """Sample-averaged marginals of every sequence of ``data`` (the
        ``"marginal"`` decoder and :meth:`predict_marginals`); with
        ``stats`` the tuples of :meth:`_sample_marginals`."""
        return self._per_sequence(data, self._sample_marginals, [stats] * data.n_sequences)

    def _decoder(self):
        return self.decode

    _UNCERTAINTY_KINDS = ("entropy", "mutual_information", "marginal_std")

    def _token_uncertainty(self, data, kind):
        """Per-token uncertainty of ``kind`` (see ``predict_uncertainty``)."""
        if kind == "entropy":
            return super()._token_uncertainty(data, kind)
        out = []
        for mean, mean_entropy, std in self._token_marginals(data, stats=True):
            if kind == "marginal_std":
                out.append(std)
            else:  # epistemic part: H(mean) - mean H, >= 0 up to rounding
                out.append(np.maximum(entropy(mean) - mean_entropy, 0.0))
        return out

    def _sample_path_uncertainty(self, b_n, Sigma_n, seed, n_paths=1):
        """``(entropy, mutual_information)`` of one sequence's label path
        under the posterior predictive: :func:`~skgpstruct.chain.mixture_path_entropy`
        over the draws of :meth:`_draw_potentials` (those of the marginals),
        each of component ``k``'s ``S`` draws weighted ``weights_[k] / S``;
        ``n_paths`` paths per draw (or ``"auto"``), sampled from a stream of
        the sequence's seed."""
        K, T, V = b_n.shape
        F, B, _ = self._draw_potentials(b_n, Sigma_n, seed)
        S = F.shape[2]
        return chain.mixture_path_entropy(
            F[0].reshape(K * S, T, V), B[0].reshape(K * S, V, V),
            np.repeat(self.weights_ / S, S), n_paths=n_paths,
            random_state=np.random.default_rng([int(seed), 1]))

    def _path_uncertainty(self, data, kind, n_paths=1):
        """Per-sequence uncertainty of ``kind`` of the whole label path (see
        ``predict_uncertainty``, ``per="path"``)."""
        pairs = self._per_sequence(data, self._sample_path_uncertainty,
                                   [n_paths] * data.n_sequences)
        return [h if kind == "entropy" else mi for h, mi in pairs]

    def _decode_potentials(self, data):
        """Posterior-mean potentials (the ``"viterbi"`` decoder)."""
        b = np.concatenate([b for _, _, b, _ in self._moment_chunks(data)], axis=1)
        s = self._potential_scale
        return s * np.tensordot(self.weights_, b, axes=1), s * self.transition_mean_

    def elbo(self, X, y):
        """Evidence lower bound of the fitted posterior on ``(X, y)``.

        The expected log-likelihood of the given sequences (estimated with
        ``n_predict_samples`` samples per sequence and component) minus the
        KL terms; useful to compare models on held-out data. Like
        ``n_predict_samples``, ``likelihood`` is read when this is called:
        after ``set_params(likelihood="crf")``, a model fitted with the
        pseudo-likelihood gives the bound under the exact CRF likelihood.
        The sequences are taken a chunk of :data:`PREDICT_CHUNK_SEQUENCES`
        at a time, as in prediction: memory does not grow with their
        number, and the value is that of one pass over all of them, bit for
        bit.

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        y : list of array-like of shape (T_n,)
            Labels (all seen in ``fit``).

        Returns
        -------
        elbo : float
        """
        check_is_fitted(self, "transition_mean_")
        data = SequenceData.from_sequences(X, y, n_features=self.n_features_in_,
                                           label_encoder=self._encoder())
        if self.approximation_ == "features":
            ell, kl = self._feature_ell, self._feature_kl()
        else:
            ell = self._inducing_ell
            kl = mixture_kl(self.q_mu_, self.q_sqrt_, self.weights_) + transition_kl(
                self.transition_mean_, self.transition_var_, self.transition_prior_var_
            )
        # one chunk's moments and draws at a time; a sequence's expected
        # log-likelihood depends on that sequence alone, and the sum runs
        # over all of them in order, as over one chunk
        values = np.concatenate([ell(sub) for _, sub in self._chunks(data)])
        return float(np.sum(values) - kl)

    def _inducing_ell(self, data):
        """Expected log-likelihood of each sequence of ``data`` under the
        fitted inducing-point posterior (``n_predict_samples`` draws)."""
        eps, eps_bin = draw_normals(
            data.lengths, self.q_mu_.shape[0], len(self.classes_),
            self.n_predict_samples, self._seeds(data),
        )
        return expected_log_likelihood(
            get_likelihood(self.likelihood), self._terms(data), data.y_flat,
            self._params(), eps, eps_bin, return_grad=False,
        )

