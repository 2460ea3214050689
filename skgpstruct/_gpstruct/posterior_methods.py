"""GPStructTagger's methods on the fitted posterior beyond prediction: the
ELBO on new data and the expected information gain of labelling."""

from sklearn.utils.validation import check_is_fitted

from .._input.sequences import SequenceData
from ..likelihoods import get_likelihood
from .information_gain import information_gain
from .predict import posterior_elbo

__all__ = ["PosteriorMethodsMixin"]


class PosteriorMethodsMixin:
    """:meth:`elbo` and :meth:`predict_information_gain` of
    :class:`~skgpstruct.GPStructTagger` (which provides ``_predictive``,
    ``_check_X``, ``_encoder`` and the fitted attributes)."""

    def elbo(self, X, y):
        """Evidence lower bound of the fitted posterior on ``(X, y)``.

        The expected log-likelihood of the given sequences (estimated with
        ``n_predict_samples`` samples per sequence and component) minus the
        KL terms; useful to compare models on held-out data. Like
        ``n_predict_samples``, ``likelihood`` is read when this is called:
        after ``set_params(likelihood="crf")``, a model fitted with the
        pseudo-likelihood gives the bound under the exact CRF likelihood.
        The sequences are taken a chunk of
        :data:`~skgpstruct._gpstruct.predict.PREDICT_CHUNK_SEQUENCES` at a
        time, as in prediction: memory does not grow with their number, and
        the value is that of one pass over all of them, bit for bit.

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
        return posterior_elbo(self._predictive(), data, get_likelihood(self.likelihood),
                              self.transition_prior_var_)

    def predict_information_gain(self, X, X_target=None):
        """Expected information each sequence's labels give about the labels
        of a target set of tokens (active learning: which to label next).

        The expected predictive information gain (EPIG; Bickford Smith,
        Kirsch, Farquhar, Gal, Foster and Rainforth, AISTATS 2023) of
        sequence ``x``: the mutual information between its label sequence
        ``y`` and the label ``y*`` of a token ``x*`` of ``X_target``, under
        the posterior, averaged over the target tokens,
        ``E_y mean_x* KL(p(y* | y, x*) || p(y* | x*))``
        (:func:`~skgpstruct.chain.path_information_gain`). Where the path
        mutual information of :meth:`predict_uncertainty` (the BALD score)
        counts what the labels would teach about the model, this counts
        only what they would teach about the predictions at the target
        inputs: a sequence whose doubts are about features no target token
        has scores little.

        The ``n_predict_samples`` posterior draws are joint over all
        sequences: each draws the feature weights once (mean ``coef_``,
        variances ``coef_var_``) and the transitions once, so that
        sequences sharing features are correlated as in the posterior. The
        weights of features never active in training, which
        :meth:`predict_marginals` leaves out of the model, are drawn from
        their prior (variance ``temperature_`` times the kernel's, as the
        cold posterior's ``coef_var_``): labelling a sequence that has them
        brings them into the model, and what it would teach about them is
        part of its value. Each token's potentials also get the jitter of
        the model's covariances as noise. Every draw is seeded by
        ``predict_seed_`` (a weight's by its feature, a token's noise and a
        sequence's sampled paths by its :func:`sequence seed
        <skgpstruct._input.sequences.sequence_seeds>`), so a sequence's value
        depends on that sequence, ``X_target`` and the model only. It is an
        estimate from those draws: a sequence that shares no feature with
        the target (nor, with a point-mass transition posterior, anything
        else) comes back slightly above 0, the upward bias of a mutual
        information estimated from finitely many draws, which shrinks as
        ``1 / n_predict_samples``.

        In the inducing-point form (``approximation_ == "inducing"``, that
        of the kernels other than the linear one) the draws are of ``q(f) = int p(f
        | u) q(u) du``: ``n_predict_samples`` per mixture component (weighted
        by ``weights_``), each taking the inducing variables from its
        component and the part of every token's potentials they leave free
        (the Nystrom residual ``k(x, x') - k(x, Z) k(Z, Z)^-1 k(Z, x')``)
        jointly over the tokens of the target, then each sequence's given the
        target's. That residual correlates tokens alike but far from the
        inducing points, in whichever sequences they are: a sequence whose
        tokens repeat the target's tells about them even where the inducing
        points span little. The target's tokens are drawn as one Gaussian, so
        the memory and time grow as the square and the cube of their number
        (pass a sample of the pool as ``X_target`` where it is large). A
        sequence's value depends on that sequence, ``X_target`` and the
        model only here too; ``X_target=X`` estimates the same quantity as
        the default from other draws.

        Parameters
        ----------
        X : list of (T_n, n_features) array-likes or sparse matrices
            The candidate sequences, as for :meth:`predict`.
        X_target : list of (T_n, n_features) array-likes or sparse matrices, default=None
            The sequences whose tokens' labels matter (for instance a
            sample of the inputs the tagger will be used on). None: ``X``
            (the pool's own distribution).

        Returns
        -------
        information_gain : ndarray of shape (n_sequences,)
            In nats per target token, at least 0.

        Raises
        ------
        MemoryBudgetError
            If the draws of the potentials of ``X`` and ``X_target`` (and,
            in the inducing-point form, the covariance of the target's
            tokens) would not fit in :func:`~skgpstruct._utils.memory.memory_budget`
            (lower ``n_predict_samples`` or pass a smaller ``X_target``).
        """
        check_is_fitted(self, self._fitted_attribute)
        data = self._check_X(X)
        target = None if X_target is None else self._check_X(X_target)
        return information_gain(self._predictive(), data, target)
