"""RandomizedCRFTagger: a linear-chain CRF trained with randomized DP.

Unary potentials are linear in the (sparse) token features,
``U_t = x_t W + b``; transitions are a full (N, N) matrix or low rank
(``B = left @ right.T``, for label sets in the thousands). Training minimises
``-sum_n (score(y_n) - log Z-hat_n) + c1 (|W|_1 + |transitions|_1)
+ c2 (||W||^2 + ||transitions||^2)`` (CRFsuite's objective and meaning of
``c1`` and ``c2``) where ``log Z-hat`` is the exact log-partition function,
or its randomized estimate on a sub-lattice of ``n_top`` top states plus
``n_sampled`` sampled states per position (Fu, Cunningham and Lapata, ICML
2022), with the gold label always kept in the sub-lattice.
"""

import contextlib
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from .._tagging.base import SequenceTaggerMixin, fit_epochs
from .._tagging.crf_objective import (CRFSpec, chunk_loss_grad, crf_loss_grad, layout,
                                      penalty, penalty_value, unpack)
from .._tagging.crf_solver import (CRFParams, chain_marginals, crf_unary, fit_crf, init_theta,
                                   pack, params_from_theta, training_data)
from .._tagging.decoders import _dense
from .._utils.parallel import small_blas
from .weights import state_weights, transition_weights
from .sparse_adagrad import fit_adagrad, sparse_loss_grad
from ..chain import randomized as rdp
from ..chain.beam import beam_states
from ..chain.backend import get_backend
from ..optim import make_optimizer

__all__ = ["RandomizedCRFTagger"]


def _resolve_count(value, n_classes):
    """Integer count from an int or a fraction of the label count."""
    if value is None:
        return None
    if isinstance(value, Integral):
        return int(value)
    return max(1, int(round(float(value) * n_classes)))


class RandomizedCRFTagger(SequenceTaggerMixin, BaseEstimator):
    """Linear-chain CRF trained with randomized dynamic programming.

    With ``n_top=None`` (or ``n_top + n_sampled >=`` the number of labels) it
    is a plain linear-chain CRF trained with the exact forward-backward
    algorithm, like sklearn-crfsuite with ``algorithm="lbfgs"``. With fewer
    states per position each training sequence costs O(T K^2) instead of
    O(T N^2), ``K = n_top + n_sampled``.

    Parameters
    ----------
    n_top : int, float or None, default=None
        States kept deterministically per position (the top of the
        proposal). A float in (0, 1] is a fraction of the number of labels.
        None trains with exact dynamic programming. In training the gold
        label is one of them, so ``n_top <= 1`` needs ``n_sampled >= 1``.
    n_sampled : int or float, default=0
        States sampled per position from the proposal restricted to the
        rest, re-weighted so that ``Z-hat`` is unbiased. Float: fraction of
        the number of labels.
    proposal : {"local+global", "local", "global", "uniform"}, default="local+global"
        Proposal over states (paper eq. 34): softmax of the unary scores,
        transition mass, their average, or uniform.
    transitions : {"full", "low_rank"}, default="full"
        A full (N, N) transition matrix, or ``B = left @ right.T`` with
        ``left``, ``right`` of shape (N, ``rank``) (never forms N x N).
    rank : int, default=32
        Rank of low-rank transitions.
    c1 : float, default=0.0
        L1 coefficient: the loss adds ``c1 * ||w||_1`` over the same
        parameters as ``c2`` (the unary weights and the transition
        parameters, the low-rank factors when low rank; not the per-label
        bias), as CRFsuite's ``c1``. Like ``c2`` it weighs the penalty
        against the negative log-likelihood *summed* over the training
        sequences, so ``c1`` and ``c2`` mean what they mean in
        sklearn-crfsuite. With ``c1 > 0`` L-BFGS becomes OWL-QN
        (Andrew and Gao, 2007, as in CRFsuite) and AdaGrad soft-thresholds
        in its proximal step; both leave many weights exactly 0. Adam and
        SGD refuse ``c1 > 0`` (a ValueError), and ``optimizer="auto"`` then
        picks ``"adagrad"`` for the randomized loss.
    c2 : float, default=0.1
        L2 coefficient: the loss adds ``c2 * ||w||^2`` over the unary
        weights and the transition parameters (not the per-label bias), as
        in CRFsuite.
    fit_intercept : bool or "auto", default="auto"
        Whether the unaries have a per-label bias ``intercept_``,
        unpenalised. ``"auto"``: none when L-BFGS / OWL-QN trains (exact
        mode), as CRFsuite, which has none; one for AdaGrad / Adam / SGD.
        With transitions the bias is redundant with the transitions'
        columns at every position but the first (a constant feature, as the
        tutorial's ``"bias"``, gives a penalised one), so unpenalised it
        opens a direction the data hardly determine, along which L-BFGS /
        OWL-QN crawl: at CRFsuite's tutorial settings (``c1 = c2 = 0.1``,
        100 iterations) on CoNLL-2002 Spanish NER the fit reaches an
        objective of 6,682 and F1 78.61 without it, 10,766 and 77.43 with
        it, in about half the time; on CoNLL-2000 chunking 10,993 / 93.06
        against 16,371 / 92.98 (``benchmarks/crfsuite_parity.py``). The
        minibatch optimisers' per-coordinate steps do not suffer from it.
    all_possible_states : bool, default=True
        Whether every (feature, label) pair has a weight (CRFsuite's
        ``all_possible_states=True``). False: only the pairs that occur in
        the training data (a token with the feature and the label) have
        one, the others stay exactly 0, CRFsuite's default; L-BFGS /
        OWL-QN only (exact mode, on the CPU). True is the default: the
        pairs the data never join push a label *down* where its features
        appear (a word never a person's name), and with them the fit reaches
        a lower objective and a higher F1 at the tutorial settings
        (``benchmarks/crfsuite_parity.py``, 100 iterations: CoNLL-2002
        Spanish NER objective 6,682 and F1 78.61 against 7,152 and 78.47
        with False, CRFsuite 7,167 and 78.60; CoNLL-2000 chunking 10,993 /
        93.06 against 11,793 / 92.98, CRFsuite 11,787 / 92.92).
    optimizer : {"auto", "lbfgs", "adagrad", "adam", "sgd"}, default="auto"
        ``"lbfgs"`` (full batch; exact mode only), ``"adagrad"``, ``"adam"``
        or ``"sgd"`` (minibatches of sequences). ``"auto"`` picks L-BFGS in
        exact mode (OWL-QN when ``c1 > 0``) and Adam otherwise (AdaGrad when
        ``c1 > 0``). ``"adagrad"`` is proximal AdaGrad (the L2 and L1 terms
        by its proximal step), lazy on the weights of features absent from a
        minibatch: a step costs the features the minibatch uses times the
        labels, where Adam and SGD update every weight at every step (their
        L2 term is dense). Use it when ``n_features x
        n_labels`` is large (a treebank's word features with hundreds of
        morphological tags: about 10x less time per epoch than Adam, see
        ``benchmarks/ud_morph.py``); ``learning_rate=0.5`` suits it (a
        weight's first step moves it by about ``learning_rate``, whatever
        the scale of its feature).
    learning_rate : float, default=0.05
        Step size of AdaGrad / Adam / SGD.
    batch_size : int, default=32
        Sequences per minibatch for Adam / SGD.
    max_iter : int, default=100
        L-BFGS / OWL-QN iterations (CRFsuite's ``max_iterations``), or
        epochs for AdaGrad / Adam / SGD.
    tol : float, default=1e-5
        Relative decrease of the loss under which training stops. L-BFGS /
        OWL-QN: CRFsuite's ``delta`` over its ``period`` of 10 iterations,
        and its ``epsilon`` (``||pseudo-gradient|| / max(||w||, 1)``), so
        that ``max_iter`` and ``tol`` mean what CRFsuite's
        ``max_iterations`` and ``delta = epsilon = tol`` mean
        (:func:`skgpstruct.optim.owlqn.minimize_owlqn`; OWL-QN takes
        CRFsuite's steps, L-BFGS keeps 20 stored pairs where CRFsuite keeps
        6); AdaGrad / Adam / SGD: between epochs, two epochs in a row, an
        epoch that raises the loss counting as no decrease.
    beam_size : int or None, default=None
        Decode with Viterbi restricted to the ``beam_size`` best unary
        states per position (O(T K^2)); None decodes exactly. The
        marginals and ``predict_uncertainty`` (token, sequence and path
        entropies) then come from the same restricted chain;
        ``predict_path_proba`` stays the full chain's.
    n_jobs : int or None, default=None
        Threads over chunks of sequences (numba kernels release the GIL).
        Results do not depend on ``n_jobs``.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the dynamic programmes run. ``"cuda"`` computes the training
        loss and gradient (exact and randomized), Viterbi decoding and the
        marginals with the kernels of :mod:`skgpstruct.chain.cuda` (all the
        sequences of a minibatch in one launch; ``n_jobs`` is then unused),
        and raises a RuntimeError in ``fit`` without a usable GPU; ``"auto"``
        is ``"cuda"`` when ``numba.cuda.is_available()`` and ``"cpu"``
        otherwise. Decoding with ``beam_size`` runs on the CPU.
    random_state : int, RandomState or None, default=None
        Seeds the minibatch order, the sampled states and the low-rank
        initialisation.
    verbose : int, default=0
        0: nothing. 1: the fit's start (sequences, tokens, labels and
        optimiser), the optimiser's outcome (converged, or ``max_iter``
        reached) and the fit's time go to the ``"skgpstruct"`` logger at
        INFO and each iteration's / epoch's loss at DEBUG, and a tqdm bar
        follows the optimiser on stderr when that is a terminal. 2 and
        above: the losses at INFO as well. The records go to the handlers
        that logging has (``logging.basicConfig``...), or, with none, to
        stderr during ``fit``. The first verbose fit in a process says
        that numba compiles the kernels (then cached on disk).
    warm_start : bool, default=False
        Start from the previous solution when refitting (with the same
        labels, number of features, transition form and ``rank``; otherwise
        the refit starts cold).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Labels seen in ``fit``.
    coef_ : ndarray of shape (n_features, n_classes)
        Unary weights ``W``.
    intercept_ : ndarray of shape (n_classes,)
        Per-label bias ``b``.
    transition_ : ndarray of shape (n_classes, n_classes) or None
        Full transitions (None when low rank).
    transition_left_, transition_right_ : ndarray of shape (n_classes, rank) or None
        Low-rank transition embeddings (None when full).
    n_features_in_ : int
        Number of token features.
    n_iter_ : int
        Iterations (L-BFGS) or epochs run.
    loss_history_ : list of float
        Training loss after every iteration / epoch.
    loss_curve_ : list of float
        The objective the optimiser minimised after every iteration /
        epoch, the penalised training loss (the values of
        ``loss_history_``): lower is better, as ``loss_curve_`` of
        :class:`~skgpstruct.GPStructTagger` (its negative ELBO) and
        sklearn's MLP. One value per iteration / epoch run
        (``len(loss_curve_) == n_iter_``); an epoch's value is the sum of
        its minibatches' losses.
    exact_ : bool
        Whether training used exact dynamic programming.
    device_ : {"cpu", "cuda"}
        The device ``fit`` resolved ``device`` to; ``predict`` and
        ``predict_marginals`` use it too (the CPU when no GPU is usable).
    state_features_ : dict
        ``{(feature index, label): weight}`` of the non-zero unary weights
        (sklearn-crfsuite's view; see :mod:`skgpstruct.inspection` for
        names and :func:`~skgpstruct.inspection.top_features`).
    transition_features_ : dict
        ``{(label_from, label_to): weight}``.

    See Also
    --------
    skgpstruct.chain.randomized.randomized_log_partition : training's log Z.

    Notes
    -----
    Features that are zero in every training token get zero weights (their
    optimum under the penalty) and are left out of the optimisation: a large
    sparse vocabulary costs only the features the training data uses. The
    randomized loss of a chunk of sequences is
    :func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged` (one
    numba pass, or one GPU launch), drawing each sequence's sub-lattice from
    its own seed as :func:`~skgpstruct.chain.randomized.randomized_marginals`
    would with ``force`` set to the gold labels.

    References
    ----------
    .. [1] Y. Fu, J. P. Cunningham and M. Lapata, "Scaling Structured
       Inference with Randomization", ICML 2022.

    Examples
    --------
    >>> from skgpstruct import RandomizedCRFTagger
    >>> from skgpstruct.datasets import make_chain_data
    >>> X, y = make_chain_data(n_sequences=60, n_classes=4, n_features=8, random_state=0)
    >>> crf = RandomizedCRFTagger(c2=0.01, random_state=0).fit(X[:40], y[:40])
    >>> bool(crf.score(X[40:], y[40:]) > 0.5)
    True
    """

    _fitted_attribute = "coef_"

    _parameter_constraints: dict = {
        **SequenceTaggerMixin._parameter_constraints,
        "n_top": [Interval(Integral, 1, None, closed="left"),
                  Interval(Real, 0, 1, closed="right"), None],
        "n_sampled": [Interval(Integral, 0, None, closed="left"),
                      Interval(Real, 0, 1, closed="right")],
        "proposal": [StrOptions(set(rdp.PROPOSALS))],
        "transitions": [StrOptions({"full", "low_rank"})],
        "rank": [Interval(Integral, 1, None, closed="left")],
        "c1": [Interval(Real, 0, None, closed="left")],
        "c2": [Interval(Real, 0, None, closed="left")],
        "fit_intercept": ["boolean", StrOptions({"auto"})],
        "all_possible_states": ["boolean"],
        "optimizer": [StrOptions({"auto", "lbfgs", "adagrad", "adam", "sgd"})],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "beam_size": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(
        self,
        *,
        n_top=None,
        n_sampled=0,
        proposal="local+global",
        transitions="full",
        rank=32,
        c1=0.0,
        c2=0.1,
        fit_intercept="auto",
        all_possible_states=True,
        optimizer="auto",
        learning_rate=0.05,
        batch_size=32,
        max_iter=100,
        tol=1e-5,
        beam_size=None,
        n_jobs=None,
        device="cpu",
        random_state=None,
        verbose=0,
        warm_start=False,
    ):
        self.n_top = n_top
        self.n_sampled = n_sampled
        self.proposal = proposal
        self.transitions = transitions
        self.rank = rank
        self.c1 = c1
        self.c2 = c2
        self.fit_intercept = fit_intercept
        self.all_possible_states = all_possible_states
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.tol = tol
        self.beam_size = beam_size
        self.n_jobs = n_jobs
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    @contextlib.contextmanager
    def _fit_backend(self):
        """Hold the backend of ``device_`` (and its device caches) during fit."""
        with get_backend(self.device_) as backend:
            self._backend = backend
            try:
                yield backend
            finally:
                del self._backend

    # ------------------------------------------------------------------ fit
    def _warm_start_compatible(self):
        """Whether a warm start can continue from the fitted transitions:
        the same form (full or low rank) and, when low rank, the same
        ``rank``; otherwise the fit starts cold (as after a change of labels
        or features)."""
        if self.transitions == "full":
            return getattr(self, "transition_", None) is not None
        left = getattr(self, "transition_left_", None)
        return left is not None and left.shape[1] == self.rank

    def _check_params(self, n_classes):
        """Resolve ``n_top`` / ``n_sampled`` (and ``exact_``) for
        ``n_classes`` labels; return the optimiser ``"auto"`` stands for,
        after refusing L-BFGS on the randomized loss."""
        self._n_top_ = _resolve_count(self.n_top, n_classes)
        self._n_sampled_ = _resolve_count(self.n_sampled, n_classes) or 0
        self.exact_ = self._n_top_ is None or self._n_top_ + self._n_sampled_ >= n_classes
        if not self.exact_ and max(self._n_top_, 1) + self._n_sampled_ < 2:
            raise ValueError(
                f"n_top={self.n_top!r} and n_sampled={self.n_sampled!r} leave one "
                "state per position, the gold label (kept in the top states), so "
                "the training sub-lattice holds only the gold path and the loss "
                "is identically 0; use n_top >= 2 or n_sampled >= 1."
            )
        optimizer = self.optimizer
        self._learning_rate_ = self.learning_rate
        if optimizer == "auto":
            optimizer = "lbfgs" if self.exact_ else ("adagrad" if self.c1 > 0 else "adam")
        if not self.all_possible_states and optimizer != "lbfgs":
            raise ValueError(
                "all_possible_states=False (weights only for the (feature, label) "
                "pairs seen in training) is implemented for optimizer='lbfgs' "
                f"(exact mode, n_top=None); got optimizer={optimizer!r}."
            )
        if self.c1 > 0 and optimizer in ("adam", "sgd"):
            raise ValueError(
                f"c1 > 0 (L1) needs a proximal optimiser; optimizer={optimizer!r} has "
                "none. Use optimizer='lbfgs' (OWL-QN; exact mode, n_top=None) or "
                "optimizer='adagrad' (soft-thresholding proximal AdaGrad)."
            )
        if optimizer == "lbfgs" and not self.exact_:
            raise ValueError(
                "optimizer='lbfgs' needs exact dynamic programming (the "
                "randomized loss changes with every draw); use 'adam' or 'sgd', "
                "or n_top=None."
            )
        return optimizer

    def _spec(self):
        """The :class:`~skgpstruct._tagging.crf_objective.CRFSpec` of the
        fitted parameters (as :meth:`_check_params` resolved them)."""
        return CRFSpec(np.arange(len(self.classes_)), c2=self.c2, c1=self.c1,
                       transitions=self.transitions, rank=self.rank,
                       n_top=None if self.exact_ else self._n_top_,
                       n_sampled=self._n_sampled_, proposal=self.proposal,
                       fit_intercept=self._fits_intercept(),
                       all_possible_states=self.all_possible_states)

    def _fits_intercept(self):
        """``fit_intercept`` resolved: ``"auto"`` is False for L-BFGS / OWL-QN
        and True for the minibatch optimisers."""
        if self.fit_intercept != "auto":
            return bool(self.fit_intercept)
        if self.optimizer != "auto":
            return self.optimizer != "lbfgs"
        return not self.exact_

    def _params(self):
        """The fitted parameters as a :class:`~skgpstruct._tagging.crf_solver.CRFParams`."""
        return CRFParams(np.arange(len(self.classes_)), self.coef_, self.intercept_,
                         self.transition_, self.transition_left_, self.transition_right_)

    def _fit(self, data, warm, optimizer):
        """Fit the CRF (``fit`` after :meth:`_fit_setup`)."""
        spec = self._spec()
        init = self._params() if warm else None
        rng = check_random_state(self.random_state)
        monitor = self._monitor(label="loss")
        # Parallelism is over chunks of sequences (n_jobs threads); the BLAS
        # calls inside are small, and multi-threaded BLAS on them only
        # oversubscribes the cores (as sklearn's KMeans, limit it to 1).
        with small_blas(), \
                self._parallel() as parallel, self._fit_backend() as backend:
            if optimizer == "lbfgs":
                params = fit_crf(data, spec, init, random_state=rng, parallel=parallel,
                                 crfsuite_rule=True,
                                 backend=backend, monitor=monitor)
            else:
                params = self._fit_minibatch(data, spec, init, optimizer, rng, parallel,
                                             monitor, backend)
        self.loss_history_ = monitor.history
        self._iteration_times = monitor.times  # wall clock: for crfsuite.CRF's log
        self.n_iter_ = monitor.iter
        self._store_params(params)

    def _fit_minibatch(self, data, spec, init, optimizer, rng, parallel, monitor, backend):
        """AdaGrad, Adam or SGD epochs on the features the training tokens
        use (as :func:`~skgpstruct._tagging.crf_solver.fit_crf`)."""
        fit_data, rows = training_data(data, spec)
        n_rows = fit_data.X_flat.shape[1]
        theta = init_theta(spec, n_rows, rng) if init is None else pack(init, rows)
        if optimizer == "adagrad":
            theta = fit_adagrad(spec, fit_data, theta, rng, parallel, monitor, backend,
                                learning_rate=self._learning_rate_,
                                batch_size=self.batch_size, desc="RandomizedCRFTagger")
        else:
            theta = self._fit_stochastic(spec, fit_data, theta, optimizer, rng, parallel,
                                         monitor, backend)
        return params_from_theta(spec, theta, data.X_flat.shape[1], rows)

    def _fit_stochastic(self, spec, data, theta, optimizer, rng, parallel, monitor,
                        backend):
        """Epochs of Adam / SGD on minibatches: per-sequence loss, and the
        penalty spread over the epoch's batches (gradient
        ``grad / len(idx) + 2 c2 theta / n``, the bias undecayed)."""
        n = data.n_sequences
        cuts = layout(spec, data.X_flat.shape[1])
        opt = make_optimizer(optimizer, self._learning_rate_,
                             weight_decay=2.0 * spec.c2 / n,
                             undecayed=(int(cuts[1]), int(cuts[2])))

        def step(t, idx, seeds):
            loss, grad = crf_loss_grad(spec, t, data, idx, seeds, parallel, backend)
            pen = penalty_value(spec, t, cuts)
            return loss + pen * len(idx) / n, grad, 1.0 / len(idx)

        return fit_epochs(step, theta, opt, monitor, n_sequences=n,
                          batch_size=self.batch_size, rng=rng,
                          desc="RandomizedCRFTagger")

    def _store_params(self, params):
        """Set the fitted attributes from a :class:`~skgpstruct._tagging.crf_solver.CRFParams`."""
        self.coef_ = params.coef
        self.intercept_ = params.intercept
        self.transition_ = params.transition
        self.transition_left_ = params.transition_left
        self.transition_right_ = params.transition_right

    # ------------------------------------- the objective, for tests and tools
    def _backend_now(self):
        return self.__dict__.get("_backend") or get_backend(getattr(self, "device_", "cpu"))

    def _n_rows(self, n_rows):
        return self.n_features_in_ if n_rows is None else n_rows

    def _layout(self, n_rows=None):
        """Offsets of W, b and the transitions in the flat parameter vector
        (``n_rows`` weight rows; default ``n_features_in_``)."""
        return layout(self._spec(), self._n_rows(n_rows))

    def _unpack(self, theta, n_rows=None):
        return unpack(self._spec(), theta, self._n_rows(n_rows))

    def _pack(self, rows=None):
        """Flat parameter vector (weight rows ``rows`` only, if given)."""
        return pack(self._params(), rows)

    def _penalty(self, theta, n_rows=None):
        return penalty(self._spec(), theta, self._n_rows(n_rows))

    def _penalty_value(self, theta, cuts):
        return penalty_value(self._spec(), theta, cuts)

    def _chunk_loss_grad(self, theta, data, seeds):
        return chunk_loss_grad(self._spec(), theta, data, seeds, self._backend_now())

    def _loss_grad(self, theta, data, seq_idx, seeds, parallel):
        return crf_loss_grad(self._spec(), theta, data, seq_idx, seeds, parallel,
                             self._backend_now())

    def _sparse_loss_grad(self, theta, data, seeds, n_rows, parallel):
        return sparse_loss_grad(self._spec(), theta, data, seeds, n_rows, parallel,
                                self._backend_now())

    @property
    def loss_curve_(self):
        """The minimised objective per iteration / epoch, a copy of
        ``loss_history_`` (see the class docstring)."""
        history = self.__dict__.get("loss_history_")
        if history is None:  # a NotFittedError is an AttributeError too
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet: loss_curve_ "
                "exists after fit."
            )
        return list(history)

    # ------------------------------------------------------------ inspect
    @property
    def state_features_(self):
        """``{(feature index, label): weight}`` of the non-zero unary weights,
        as sklearn-crfsuite's ``state_features_`` (names:
        :func:`skgpstruct.inspection.state_features`)."""
        check_is_fitted(self, "coef_")
        return state_weights(self.coef_, self.classes_.tolist(),
                             list(range(self.n_features_in_)))

    @property
    def transition_features_(self):
        """``{(label_from, label_to): weight}``, as sklearn-crfsuite's
        ``transition_features_``."""
        check_is_fitted(self, "coef_")
        return transition_weights(self._dense_transitions(), self.classes_.tolist())

    # -------------------------------------------------------------- predict
    def _unary(self, data):
        return crf_unary(self._params(), data)

    def _dense_transitions(self):
        return self._params().dense_transitions()

    def _transition_spec(self):
        return self._params().transitions

    def _decoder(self):
        return "viterbi" if self.beam_size is None else "beam"

    def _decode_potentials(self, data):
        """Prediction potentials ``(U, transitions)``: the fitted ones times
        ``_potential_scale`` (the low-rank factors' product scaled through
        its left factor)."""
        U, spec, s = self._unary(data), self._transition_spec(), self._potential_scale
        if data.log_mask is not None:  # a constraint: -inf at the forbidden labels
            U = U + data.log_mask
        if s == 1.0:
            return U, spec
        if isinstance(spec, tuple):
            return s * U, (s * spec[0], spec[1])
        return s * U, s * spec

    def _token_marginals(self, data):
        """Exact (or beam-restricted) marginals of every sequence of ``data``."""
        U, spec = self._decode_potentials(data)
        if self.beam_size is None:
            marginals = chain_marginals(U, data.lengths, _dense(spec), self._predict_backend())
            return data.split(marginals)
        if isinstance(spec, tuple):
            spec = rdp.LowRankTransitions(*spec)
        out = []
        for u in data.split(U):
            k, q = self._beam_proposal(u)
            out.append(rdp.randomized_marginals(u, spec, k, 0, proposal=q).unary)
        return out

    def _beam_proposal(self, u):
        """``(k, q)``: the beam's size and a proposal whose ``k`` states of
        highest mass are exactly :func:`~skgpstruct.chain.beam.beam_states`'
        (the ``beam_size`` best unary scores, ties to the lower state); with
        ``n_sampled=0`` the randomized DPs run on the chain restricted to the
        beam, the one beam decoding searches."""
        k = min(self.beam_size, u.shape[1])
        q = np.zeros_like(u)
        np.put_along_axis(q, beam_states(u, k), 1.0, axis=1)
        return k, q

    def _path_uncertainty(self, data, kind, n_paths=1):
        """Exact path entropy of each sequence's chain: the full chain's, or
        with ``beam_size`` that of the chain restricted to the beam (the one
        the marginals and token entropies come from, so that the summed
        token entropies stay an upper bound)."""
        if self.beam_size is None:
            return super()._path_uncertainty(data, kind, n_paths)
        U, spec = self._decode_potentials(data)
        if isinstance(spec, tuple):
            spec = rdp.LowRankTransitions(*spec)
        out = []
        for u in data.split(np.asarray(U, dtype=np.float64)):
            k, q = self._beam_proposal(u)
            out.append(rdp.randomized_entropy(u, spec, k, 0, proposal=q))
        return out
