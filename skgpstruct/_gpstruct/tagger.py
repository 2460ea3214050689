"""GPStructTagger, a linear-chain CRF with Gaussian-process potentials: a thin
estimator over the functions of :mod:`.fitting`, :mod:`.weight_space_form`,
:mod:`.inducing_form`, :mod:`.predict` and :mod:`.information_gain`."""

from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._tagging.base import SequenceTaggerMixin
from ..likelihoods import CRFLikelihood
from ..metrics._sequence import is_span_tagging
from .._utils.seeds import SEED_MAX
from . import inducing_form, weight_space_form
from .fitting import (PARAMETER_CONSTRAINTS, check_memory, check_params, optimize,
                      resolve_approximation, resolve_fit_params, stale_attributes,
                      warm_start_compatible)
from .posterior_methods import PosteriorMethodsMixin
from .predict import (decode_potentials, path_log_proba, path_uncertainty, predictive,
                      token_marginals, token_uncertainty)

__all__ = ["GPStructTagger"]


class GPStructTagger(PosteriorMethodsMixin, SequenceTaggerMixin, BaseEstimator):
    """Linear-chain CRF whose potentials are Gaussian processes (GPstruct).

    One GP per label over the token features gives the unary potentials; the
    transition potentials have a Gaussian prior. The posterior is learned by
    *gray-box* sparse variational inference (Galliani, Dezfouli, Bonilla and
    Quadrianto, AISTATS 2017): inducing points, a mixture-of-Gaussians
    posterior, and an expected log-likelihood estimated by sampling only
    ``T_n``-dimensional Gaussians per sequence and label.

    Parameters
    ----------
    kernel : Kernel, default=None
        Covariance of every label's GP, an sklearn kernel object (searchable
        as ``kernel__*``). None means the linear kernel
        ``k(x, x') = sigma^2 <x, x'>`` (the GPstruct papers' kernel: a
        ``N(0, sigma^2)`` prior on the weight of each feature and label)
        with ``sigma^2`` set by ``kernel_variance``; the kernels of
        :mod:`skgpstruct.gp.kernels` accept scipy.sparse features, sklearn's
        own kernels (but ``ConstantKernel`` and ``WhiteKernel``) need dense
        ones: sparse sequences with those are a ValueError that says so.
    kernel_variance : "cv", "elbo" or float, default="cv"
        Prior variance ``sigma^2`` of the weights when ``kernel=None``.
        ``"cv"``: chosen among 0.1, 0.2, 0.5, 1, ..., 100 by 3-fold validation of
        the posterior-mode CRF of the same model (CRFsuite's
        ``c2 = 1 / (2 sigma^2)``) on the training sequences: the lowest
        held-out log loss among the variances whose held-out token error is
        within one standard error of the lowest (with
        ``temperature="auto"`` the posterior's held-out marginals then
        choose among the variances of that band, see ``temperature``)
        (:func:`skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance`; 30
        fits of a plain CRF, a few seconds on the benchmark folds; the
        table is kept in ``variance_cv_results_``; with fewer than two
        training sequences, or no fold with two labels in training and one
        of them held out, 1.0 with a UserWarning; in the inducing-point
        form the variance alone, without the temperature's joint choice).
        From 2,000 training sequences on, the same rules run on one split
        instead of 3 folds: a tenth held out, the CRFs of one warm-started
        path on a sample of at most 2,000 of the others, stopped once the
        held-out log loss has risen twice, and the temperature's pairs
        limited to those whose held-out error is within one standard error
        of the best mode's (:mod:`skgpstruct._gpstruct.split_cv`): its cost
        stops growing with the data.
        ``"elbo"``: learned
        with the posterior by maximising the ELBO (type-II maximum
        likelihood); with the mean-field posterior the bound prefers too
        strong a prior (0.4 on the first chunking fold, 7.7 % token error,
        against 6.0 % at the 10 that validation picks), which is why it is
        not the default. A number fixes it.
    approximation : {"auto", "features", "inducing"}, default="auto"
        ``"features"``: the weight-space form of the linear kernel
        (:mod:`skgpstruct.gp.weight_space`): the features are the inducing
        variables, ``q(w_v) = N(m_v, diag(s_v))``; no Nystrom residual, no
        ``M x M`` algebra, a fit costs about as much as the per-sequence
        sampling and forward-backward. A sequence longer than 256 tokens
        (when that is cheaper) is sampled through its weights instead of its
        ``T x T`` covariance: memory and time linear in its length
        (:mod:`skgpstruct.gp._weight_space_long`). ``"inducing"``: the papers'
        inducing-point form, for every kernel. ``"auto"`` is
        ``"features"`` for the linear kernel (``kernel=None`` or a
        :class:`~skgpstruct.gp.kernels.LinearKernel`) with one mean-field
        component, ``"inducing"`` otherwise.
    n_inducing : int, default=500
        Number of inducing points. At or above the number of distinct
        training tokens the model is the full (non-sparse) GP.
    inducing : {"kmeans", "random"}, default="kmeans"
        How inducing points are chosen among the training tokens.
    n_components : int, default=1
        Number of Gaussian components of the posterior mixture.
    posterior : {"mean_field", "coupled"}, default="mean_field"
        Independent posteriors per label, or one Gaussian coupling all
        labels' inducing values (small ``n_inducing * n_classes`` only;
        ``approximation="inducing"``). Coupled, each sequence's ``T_n V``
        unary potentials are sampled jointly, in fit and in prediction
        alike; with a block-diagonal ``q_sqrt_`` it is the mean-field
        posterior, draw for draw (up to rounding). Its Cholesky factor has
        ``(V M)^2 / 2`` entries per component, held about 48 times by
        L-BFGS: 0.4 GiB for V = 3 labels and M = 500 (base NP), 0.9 GiB for
        V = 23 and M = 100, 24 GiB for V = 23 and M = 500 (chunking), 3.6
        GiB for V = 45 and M = 100 (Penn POS tags). ``fit`` refuses, before
        allocating, what exceeds the memory budget
        (:class:`~skgpstruct.exceptions.MemoryBudgetError`, saying what to
        lower; 75 % of the machine's memory or ``SKGPSTRUCT_MEMORY_BUDGET``
        GiB). When it is worth its cost: where the labels' functions are
        correlated a posteriori (additive models whose parts trade off, as
        in ``benchmarks/coupled_additive.py``). On base NP (papers'
        features, 5 folds, M = 500) it gave 4.83 % token error, log loss
        0.167 and ECE 3.7 % against the mean-field inducing form's 4.82 /
        0.164 / 3.2 % at about twice the fit time
        (section ``basenp_coupled`` of ``benchmarks/results/calibration.md``): not on the
        CRF benchmarks so far.
    likelihood : {"crf", "pseudo", "randomized"} or Likelihood, default="crf"
        Exact CRF likelihood (forward-backward), the piecewise
        pseudo-likelihood, the CRF likelihood with a randomized partition
        function for large label sets
        (:class:`~skgpstruct.likelihoods.RandomizedCRFLikelihood`; pass an
        instance to set its ``n_top`` / ``n_sampled``), or any
        :class:`skgpstruct.likelihoods.Likelihood`.
    gradient : {"pathwise", "score"}, default="pathwise"
        Estimator of the expected log-likelihood's gradient:
        reparameterisation through the per-sequence Cholesky factor, or the
        paper's score-function (gray-box) estimator with control variates.
        ``"score"`` needs a stochastic ``optimizer``: its estimate is not the
        gradient of the fixed-sample objective, so an L-BFGS line search on
        it would be inconsistent (``fit`` raises a ValueError).
    n_samples : int or "auto", default="auto"
        Samples per sequence and mixture component for the expected
        log-likelihood. ``"auto"``: 100 with L-BFGS and the dense
        stochastic optimisers, 1 with ``"svi"`` (a fresh draw every step).
        With ``optimizer="lbfgs"`` the samples are drawn
        once, and a covariance with many free entries per sequence can be
        fitted to a few fixed draws instead of to the posterior. On the
        first chunking fold of the benchmarks, 10 samples gave a fitted ELBO
        560 nats above its value on fresh samples and 8.81 % token error;
        100 samples gave 80 nats and 7.45 %, in about the same fit time
        (the cost per iteration is mostly the covariance algebra). Fewer
        samples are enough for the stochastic optimisers, which draw new
        ones every step.
    n_predict_samples : int, default=128
        Posterior samples per sequence averaged by ``predict_marginals``
        (and by ``predict`` with ``decode="marginal"``), in antithetic
        pairs (each draw of the noise with its negative), with one set of
        draws of the transitions shared by all sequences. Fewer make the
        per-token argmax noisy: on the second base NP benchmark fold the
        token error was 5.37 / 5.63 / 5.20 / 5.17 % with 16 / 64 / 256 /
        1024 independent samples, from one fit. The pairs halve the
        variance of the averaged marginals (median over the 2,779 entries
        of 60 CoNLL-2000 test sentences: 0.495 of that of as many
        independent draws), so 128 paired draws are as precise as the
        former default of 256 independent ones, at half the cost.
    optimizer : {"auto", "lbfgs", "svi", "adam", "sgd", "saga"}, default="auto"
        ``"lbfgs"``: L-BFGS on the fixed-sample ELBO (samples drawn once).
        ``"svi"``: stochastic variational inference in the weight-space
        form (:mod:`skgpstruct._gpstruct.svi`): minibatches of sequences,
        ``n_samples`` fresh draws of the *weights* per sequence and step
        (pathwise gradients), AdaGrad steps on the weights of the
        minibatch's features only (the KL term spread over the sequences
        that have each feature, so the minibatch estimate stays unbiased),
        started, on a cold fit, at the Laplace stand-in of the cold
        posterior around the posterior-mode CRF (the CRF the validation
        chose, refitted on all sequences); it stops when an epoch's
        improvement of the ELBO, paired over the sequences, is below two of
        its standard errors. ``"adam"``, ``"sgd"``, ``"saga"``: dense
        stochastic steps on minibatches with fresh samples every step.
        ``"auto"``: ``"svi"`` where one L-BFGS evaluation would cost more
        than :data:`~skgpstruct._gpstruct.fitting.LBFGS_MAX_WORK` chain
        multiply-adds (``n_samples * n_tokens * n_classes^2``; the
        weight-space form with the exact CRF likelihood on the CPU),
        ``"adam"`` for the score-function gradient and the subsampled
        randomized likelihood, ``"lbfgs"`` otherwise. The choice is kept in
        ``optimizer_``.
    learning_rate : float or "auto", default="auto"
        Step size of the stochastic optimisers; ``"auto"``: 0.05 for
        ``"svi"`` (AdaGrad's, in units of the prior's standard deviation),
        0.01 for the others.
    batch_size : int or None, default=None
        Sequences per minibatch of the stochastic optimisers (None: 64 with
        ``"svi"``, all with the others).
    max_iter : int, default=300
        L-BFGS iterations, or epochs of the stochastic optimisers.
    tol : float, default=1e-6
        Relative tolerance on the objective (L-BFGS: scipy's ``ftol`` and
        ``gtol``); the dense stochastic optimisers stop when the epoch's
        ELBO improves by less than ``tol`` (relative) two epochs in a row,
        an epoch that lowers it counting as no improvement. ``"svi"`` stops
        by its own rule (see ``optimizer``), ``tol`` unused.
    optimize_hyperparameters : bool or "scale", default=False
        Also learn the hyperparameters of a given ``kernel`` by maximising
        the ELBO (``kernel=None``: ``kernel_variance="elbo"`` learns the
        variance; any other ``kernel_variance`` with this option set is an
        error, since it fixes or validates the variance). Inducing
        form: True learns ``kernel.theta`` (within ``kernel.bounds``, log
        space, as sklearn's GaussianProcessRegressor); ``"scale"`` learns
        only an overall factor ``c`` of the kernel, at almost no extra cost
        (``kernel_`` becomes ``ConstantKernel(c) * kernel``, ``c`` in
        [1e-5, 1e5], the jitter scaled by ``c`` too). Weight-space form:
        True or ``"scale"`` learn the LinearKernel's variance.
    decode : {"auto", "marginal", "viterbi"}, default="auto"
        ``predict`` takes the per-token argmax of the averaged marginals
        (``"marginal"``: the least expected number of token errors), or
        runs Viterbi on the posterior mean potentials (``"viterbi"``: one
        consistent path, as a CRF decodes). ``"auto"``: for labels that
        encode spans (:func:`~skgpstruct.metrics.is_span_tagging`:
        ``B-NP``, ``I-PER``, ``O``, ...), scored by span F1, the one of the
        two whose held-out span F1 is higher in the validation that chooses
        the temperature (``temperature="auto"``; Viterbi on a tie, and
        Viterbi when no validation runs); otherwise the marginals. With
        Viterbi the temperature serves the marginals' calibration alone:
        the accuracy condition of the temperature's rule (see
        ``temperature``) binds the marginals' argmax only, since the
        Viterbi path of the validation's stand-in is the posterior-mode
        CRF's at every temperature. The decoder used is ``decode_``, the
        held-out F1s are in ``temperature_cv_results_``.
    jitter : float, default=1e-4
        Added to the diagonal of the kernel matrices.
    transition_prior_var : "auto", "elbo" or float, default="auto"
        Prior variance ``tau^2`` of the transition potentials. ``"auto"``:
        the weights' prior variance ``sigma^2`` in the weight-space form
        (one prior over all the CRF's weights, as the L2 penalty ``c2`` of
        CRFsuite and of the CRF that ``kernel_variance="cv"`` validates:
        the posterior mode is that CRF), 1.0 (the papers' value) in the
        inducing-point form. ``"elbo"``: learned with the posterior
        (weight-space form; at the optimum ``tau^2 = mean(m^2 + s)`` over
        the transitions, the variational-EM fixed point; 1.0 in the
        inducing-point form, which does not learn it). The bound learns a
        weak prior (``tau^2`` about 40 on the first chunking fold, where
        ``sigma^2 = 10``) under which the transitions never seen in
        training are pushed far below the CRF's and fitted marginals are
        less well calibrated (log loss 0.285 against 0.281 with
        ``"auto"``), and it needs more iterations (104 against 61).
    temperature : "auto" or float in (0, 1], default="auto"
        Temperature ``T`` of the posterior in the weight-space form: the
        mean-field fit of the *cold* posterior ``p(w | D)^(1 / T)`` (the
        expected log-likelihood weighed by ``1 / T``, the prior variances
        ``sigma^2`` and ``tau^2`` scaled by ``T``). Its mode is the
        posterior mode, the CRF with ``c2 = 1 / (2 sigma^2)``, for every
        ``T``; ``T`` narrows the spread around it: 1 is the Bayesian
        posterior, ``T -> 0`` the CRF. ``"auto"``: chosen with
        ``kernel_variance="cv"``, on the same folds and together with the
        prior variance (among those whose posterior-mode CRF's held-out
        error is within one standard error of the lowest), from 1, 0.5,
        0.25, 0.1, 0.05, 0.025 and 0.01: of the ``(sigma^2, T)`` pairs
        whose held-out token error is within one standard error of the
        best posterior-mode CRF's (the GP no less accurate than the CRF its
        validation fits; none: the coldest ``T``; for span labels decoded
        by Viterbi, every pair: see ``decode``), those whose held-out
        marginal log loss is within one standard error of
        the lowest, and there whose held-out calibration error (ECE, 15
        bins) is within one standard error of the lowest, the warmest ``T``
        (at it the lowest calibration error)
        (:func:`skgpstruct._gpstruct.posterior_cv.cv_posterior`: the Laplace
        posterior of each fold's CRF scaled by each ``T``, its mean moved
        out along the mode as far as the variational fit's moves under that
        spread, 32 draws; 5 to 25 s on the benchmark folds; the table is
        kept in ``temperature_cv_results_``), 1
        otherwise (a given ``kernel``, a fixed or learned
        ``kernel_variance``). Why: with one prior variance for thousands
        of binary features, most of them rare, the posterior spread of a
        test token's potentials is too wide for the data (the model is
        misspecified, and the mean-field posterior is not what widens it:
        its predictive variances are within 20 % of the full Gaussian's on
        the benchmark folds), and the marginals averaged over it are
        under-confident. On data drawn from the model itself the
        Bayesian posterior is the better calibrated and validation picks
        a warm ``T``. See ``benchmarks/results/calibration*.md``. Only
        ``T = 1`` in the inducing-point form.
    n_jobs : int or None, default=None
        Threads over chunks of sequences, those of the CRF fits of the
        validation that chooses ``kernel_variance="cv"``, and over the folds
        of the one that chooses ``temperature="auto"`` (each fold scores its
        candidate variances one after another, holding one CRF's weights at
        a time). Results do not depend on it: a fit over
        several chunks runs BLAS on one thread whatever ``n_jobs`` is (so
        ``n_jobs=1`` uses one core there), a fit over one chunk keeps BLAS's
        threads.
    device : {"cpu", "cuda", "auto"}, default="cpu"
        Where the forward-backward passes of training run. ``"cuda"`` runs
        those of the CRF likelihood on the GPU (numba.cuda, one launch per
        length bucket for all samples of its sequences; the chunks of
        sequences then run one after another, ``n_jobs`` is unused in
        training): a likelihood with a ``device`` parameter gets
        ``device_``; the pseudo and randomized likelihoods and the sampled
        marginals of prediction stay on the CPU,
        ``decode="viterbi"`` runs on ``device_``. ``"auto"``
        is ``"cuda"`` when ``numba.cuda.is_available()``. ``"cuda"``
        without a usable GPU raises a RuntimeError that says how to get one
        (``pip install "skgpstruct[cuda]"``).
    random_state : int, RandomState or None, default=None
        Seeds the inducing points, the initial means and every sample of
        training, and ``predict_seed_``.
    verbose : int, default=0
        0: nothing. 1: log to the ``"skgpstruct"`` logger, at INFO, the
        fit's start (sequences, tokens, labels, optimiser), how the
        optimiser ended (converged or ``max_iter`` reached) and the fit's
        time, and the ELBO of every iteration / epoch at DEBUG; draw a
        tqdm bar over the iterations / epochs of every optimiser on stderr
        when stderr is a terminal. 2 and above: the same, with the ELBO
        of every iteration / epoch at INFO. With no logging configured the
        INFO records are written to stderr during ``fit``; with handlers
        configured (``logging.basicConfig``...) they go there instead. The
        first verbose fit in a process notes that numba compiles the
        kernels (cached on disk for later processes).
    warm_start : bool, default=False
        Reuse the previous posterior, inducing points and kernel when
        refitting on data with the same labels and features (and the same
        form); the fitted ``kernel_`` is kept, so a changed
        ``kernel_variance`` takes effect only on a cold fit (so does a
        change to ``transition_prior_var="auto"``; a number given for it is
        used as given). A mean-field
        posterior continues into ``posterior="coupled"`` (as the same,
        block-diagonal, distribution); a coupled one into
        ``posterior="mean_field"`` only by a cold fit.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Labels seen in ``fit``.
    kernel_ : Kernel
        The kernel with the fitted hyperparameters; with
        ``optimize_hyperparameters="scale"``, ``ConstantKernel(c) * kernel``
        with the learned factor ``c``.
    device_ : {"cpu", "cuda"}
        The device ``fit`` resolved ``device`` to.
    approximation_ : {"features", "inducing"}
        The form that was fitted (see ``approximation``).
    jitter_ : float
        The jitter added to the kernel matrices: ``jitter`` in the
        weight-space form; in the inducing-point form the smallest value
        from ``jitter`` up (tenfold steps) with which every training
        sequence's covariance factorises (more than ``jitter`` with a
        :class:`~skgpstruct.exceptions.JitterWarning`), kept for
        prediction.
    coef_ : ndarray of shape (n_classes, n_features)
        Weight-space form only: posterior means of the weights
        (``sigma m``); unary potentials ``X @ coef_.T``. With a
        ``LinearKernel(bias=b)`` one more column: the weight of a constant
        feature of value ``sqrt(b / variance)`` appended to ``X``.
    coef_var_ : ndarray of shape (n_classes, n_features)
        Weight-space form only: their posterior variances (``sigma^2 s``);
        0 for the features never seen in training, which are not part of
        the model (as in CRF toolkits, whose feature set is the training
        set's).
    transition_prior_var_ : float
        The transition prior variance used (learned with ``"elbo"``).
    temperature_ : float
        The posterior temperature used (see ``temperature``); the cold
        posterior's ``coef_``, ``coef_var_``, ``transition_mean_`` and
        ``transition_var_`` are the fitted ones, ``kernel_`` and
        ``transition_prior_var_`` the model's prior.
    temperature_cv_results_ : dict or None
        Weight-space form only (absent after an inducing-point fit); with
        ``temperature="auto"`` and ``kernel_variance="cv"``: the
        results of :func:`skgpstruct._gpstruct.posterior_cv.cv_posterior`
        (``"variance"``, ``"temperature"``, and per pair ``"log_loss"``,
        ``"log_loss_se"``, ``"calibration_error"``,
        ``"calibration_error_se"``, ``"mean_scale"``), or None when the
        temperature was not validated.
    variance_cv_results_ : dict
        Only with ``kernel=None, kernel_variance="cv"``: ``"variance"``,
        ``"error"``, ``"log_loss"`` (the posterior-mode CRF's, held-out,
        per candidate) and ``"band"`` (a boolean mask over
        ``"variance"``: whether each one's error is within one standard
        error of the lowest; ``temperature="auto"`` chooses among those).
    inducing_points_ : ndarray or csr_matrix of shape (n_inducing, n_features)
        Inducing-point form only: inducing inputs ``Z``.
    q_mu_ : ndarray of shape (n_components, n_classes, n_inducing)
        Inducing-point form only: whitened posterior means.
    q_sqrt_ : ndarray
        Lower Cholesky factors of the whitened posterior covariances, of
        shape (n_components, n_classes, n_inducing, n_inducing), or
        (n_components, n_classes * n_inducing, n_classes * n_inducing)
        coupled.
    weights_ : ndarray of shape (n_components,)
        Mixture weights.
    transition_mean_ : ndarray of shape (n_classes, n_classes)
        Posterior means of the transition potentials.
    transition_var_ : ndarray of shape (n_classes, n_classes)
        Posterior variances of the transition potentials.
    n_features_in_ : int
        Number of token features.
    optimizer_ : str
        The optimizer the fit ran (``optimizer`` with ``"auto"`` resolved).
    n_iter_ : int
        Iterations (L-BFGS) or epochs run.
    elbo_history_ : list of float
        ELBO after every iteration / epoch.
    loss_curve_ : list of float
        The objective the optimiser minimised after every iteration /
        epoch, the negative ELBO (``-elbo_history_``): lower is better, as
        ``loss_curve_`` of :class:`~skgpstruct.RandomizedCRFTagger` and
        sklearn's MLP. One value per iteration / epoch run
        (``len(loss_curve_) == n_iter_``); an epoch's value is the sum of
        its minibatches' estimates.
    decode_ : str
        The decoder of ``predict``: ``decode``, ``"auto"`` resolved by the
        validation for span labels (``temperature_cv_results_["decoder"]``;
        ``"viterbi"`` when none ran), else ``"marginal"``.
    predict_seed_ : int
        Drawn at the end of ``fit``. The posterior draws behind
        ``predict_marginals``, ``predict`` (``decode="marginal"``),
        ``score``, ``predict_uncertainty`` and ``elbo`` come, per sequence,
        from a seed hashed from ``predict_seed_`` and the sequence's own
        features (:func:`skgpstruct._input.sequences.sequence_seeds`): a fitted
        model gives the same output for a sequence on every call, whatever
        else is in the batch and whatever ``n_jobs`` is, bit for bit (the
        posterior moments are computed per sequence in both forms; ``elbo``
        sums over the batch).

    See Also
    --------
    RandomizedCRFTagger : a (non-Bayesian) CRF for very large label sets.

    References
    ----------
    .. [1] P. Galliani, A. Dezfouli, E. V. Bonilla and N. Quadrianto,
       "Gray-box inference for structured Gaussian process models",
       AISTATS 2017.
    .. [2] S. Bratieres, N. Quadrianto and Z. Ghahramani, "GPstruct:
       Bayesian structured prediction using Gaussian processes", IEEE TPAMI
       2015.

    Examples
    --------
    >>> from skgpstruct import GPStructTagger
    >>> from skgpstruct.datasets import make_chain_data
    >>> X, y = make_chain_data(n_sequences=40, n_classes=3, n_features=5, random_state=0)
    >>> gp = GPStructTagger(n_inducing=20, tol=1e-4, random_state=0)
    >>> gp = gp.fit(X[:30], y[:30])
    >>> marginals = gp.predict_marginals(X[30:])
    >>> marginals[0].shape == (len(y[30]), 3)
    True
    >>> bool(gp.score(X[30:], y[30:]) > 0.8)
    True
    """

    _fitted_attribute = "transition_mean_"
    _UNCERTAINTY_KINDS = ("entropy", "mutual_information", "marginal_std")

    _parameter_constraints: dict = {**SequenceTaggerMixin._parameter_constraints,
                                     **PARAMETER_CONSTRAINTS}

    def __init__(self, *, kernel=None, kernel_variance="cv", approximation="auto",
                 n_inducing=500, inducing="kmeans", n_components=1, posterior="mean_field",
                 likelihood="crf", gradient="pathwise", n_samples="auto",
                 n_predict_samples=128, optimizer="auto", learning_rate="auto",
                 batch_size=None, max_iter=300, tol=1e-6, optimize_hyperparameters=False,
                 decode="auto", jitter=1e-4, transition_prior_var="auto",
                 temperature="auto", n_jobs=None, device="cpu", random_state=None,
                 verbose=0, warm_start=False):
        self.kernel = kernel
        self.kernel_variance = kernel_variance
        self.approximation = approximation
        self.n_inducing = n_inducing
        self.inducing = inducing
        self.n_components = n_components
        self.posterior = posterior
        self.likelihood = likelihood
        self.gradient = gradient
        self.n_samples = n_samples
        self.n_predict_samples = n_predict_samples
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.tol = tol
        self.optimize_hyperparameters = optimize_hyperparameters
        self.decode = decode
        self.jitter = jitter
        self.transition_prior_var = transition_prior_var
        self.temperature = temperature
        self.n_jobs = n_jobs
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    # ------------------------------------------------------------------ fit
    def _check_params(self, n_classes):
        """The likelihood ``fit`` uses (:func:`.fitting.check_params`)."""
        return check_params(n_classes, self.device_, **self.get_params(deep=False))

    def _warm_start_compatible(self):
        """Whether a warm start can continue from the fitted state
        (:func:`.fitting.warm_start_compatible`)."""
        return warm_start_compatible(vars(self), **self.get_params(deep=False))

    def _fit(self, data, warm, lik):
        """Fit the variational posterior (``fit`` after :meth:`_fit_setup`):
        the form's objective, the optimiser on it, the fitted attributes."""
        if (data.y_flat < 0).any() and type(lik) is not CRFLikelihood:
            raise ValueError(
                "Partial labels (None in y) need likelihood='crf': the likelihood of "
                "the known labels sums over the paths that agree with them, which "
                f"{type(lik).__name__} does not compute.")
        rng = check_random_state(self.random_state)
        params = resolve_fit_params(self.get_params(deep=False), data, len(self.classes_))
        form = resolve_approximation(**params)
        check_memory(data, form, len(self.classes_), **params)
        # the last fit's attributes, that a warm start continues from
        previous = dict(vars(self)) if warm else None
        module = weight_space_form if form == "features" else inducing_form
        span = self.decode == "auto" and is_span_tagging(self.classes_)
        problem = module.prepare_fit(data, lik, rng, previous, len(self.classes_),
                                     span_labels=self.classes_ if span else None, **params)
        x, self.elbo_history_, self.n_iter_ = optimize(
            problem, data.n_sequences, rng, self._monitor(label="ELBO", sign=-1.0),
            self._parallel(), **params)
        for name in stale_attributes(form, warm):
            self.__dict__.pop(name, None)
        self.__dict__.update(problem.finish(x))
        self.optimizer_ = params["optimizer"]
        # drawn last, so that the fit itself consumes the same stream as before
        self.predict_seed_ = int(rng.randint(SEED_MAX))

    @property
    def loss_curve_(self):
        """The minimised objective per iteration / epoch, ``-elbo_history_``
        (see the class docstring)."""
        history = self.__dict__.get("elbo_history_")
        if history is None:  # a NotFittedError is an AttributeError too
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet: loss_curve_ "
                "exists after fit."
            )
        return [-value for value in history]

    # -------------------------------------------------------------- predict
    def _predictive(self):
        """The fitted posterior, as :mod:`.predict` and :mod:`.information_gain` read it."""
        return predictive(vars(self), self._potential_scale, **self.get_params(deep=False))

    @property
    def decode_(self):
        """The decoder ``predict`` uses: ``decode``, with ``"auto"``
        resolved by the validation for span labels
        (:func:`~skgpstruct.metrics.is_span_tagging`;
        ``temperature_cv_results_["decoder"]``, ``"viterbi"`` when no
        validation chose), else ``"marginal"``."""
        check_is_fitted(self, "classes_")
        if self.decode != "auto":
            return self.decode
        chosen = (self.__dict__.get("temperature_cv_results_") or {}).get("decoder")
        if chosen is not None:  # chosen by the validation with the temperature
            return chosen
        return "viterbi" if is_span_tagging(self.classes_) else "marginal"

    def _decoder(self):
        return self.decode_

    def _decode_potentials(self, data):
        return decode_potentials(self._predictive(), data)

    def _token_marginals(self, data):
        return token_marginals(self._predictive(), data)

    def _path_log_proba(self, data, paths):
        return path_log_proba(self._predictive(), data, paths)

    def _token_uncertainty(self, data, kind):
        if kind == "entropy":
            return super()._token_uncertainty(data, kind)
        return token_uncertainty(self._predictive(), data, kind)

    def _path_uncertainty(self, data, kind, n_paths=1):
        return path_uncertainty(self._predictive(), data, kind, n_paths)
