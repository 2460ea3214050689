"""What the sequence taggers share: the fit loop and the sklearn surface.

- :class:`ConvergenceMonitor` records the minimised objective after every
  L-BFGS iteration or epoch, logs it (and draws a progress bar) when
  verbose and applies the one stopping rule of the stochastic optimisers.
  What a verbose fit shows, and where, is in :mod:`skgpstruct._utils.fit_log`.
- :func:`fit_lbfgs` and :func:`fit_epochs` drive L-BFGS-B and the epochs of
  minibatch optimisers (Adam, SGD, SAGA) on a flat parameter vector.
- :class:`SequenceTaggerMixin` holds the common parameter constraints, the
  shared start of ``fit`` (validation, label encoding, warm-start check,
  device, cross-parameter checks) and the sklearn tags; the prediction
  methods come from :class:`~skgpstruct._tagging.predict.PredictMixin`.
"""

import time
import warnings
from numbers import Integral, Real

import numpy as np
from joblib import Parallel
from sklearn.preprocessing import LabelEncoder
from sklearn.utils._param_validation import Interval, StrOptions

from .._utils.device import resolve_device
from .._utils.seeds import SEED_MAX
from .._utils.fit_log import current_fit, fit_logging, iteration_level, logger, progress_bar
from .._input.sequences import SequenceData
from .._input.validation import known_labels
from ..optim.owlqn import minimize_owlqn
from .predict import PredictMixin, entropy, renormalize_rows
from ..optim._lbfgs import FitInterrupted, minimize_lbfgs, warn_interrupted, warn_max_iter

__all__ = ["ConvergenceMonitor", "SequenceTaggerMixin", "entropy", "fit_epochs", "fit_lbfgs",
           "minibatches"]



class ConvergenceMonitor:
    """History and stopping rule of a fit (after hmmlearn's monitor).

    Every L-BFGS iteration or epoch reports the value of the *minimised*
    objective (a loss, or a negative ELBO). The stochastic optimisers stop
    when the relative improvement ``(prev - cur) / max(|prev|, 1e-12)``
    falls below ``tol`` two epochs in a row. The rule is signed: an epoch
    that makes the objective worse counts as no improvement, so a run whose
    noise outweighs its progress stops instead of wandering until
    ``max_iter``. L-BFGS keeps scipy's own rule (``ftol = gtol = tol``); the
    monitor only records and reports its iterations.

    When ``verbose``, every report is logged to the ``"skgpstruct"`` logger
    (at DEBUG for ``verbose=1``, INFO above) as
    ``"<unit> <k>: <label> <value>"`` and advances a tqdm bar on stderr
    (drawn only when stderr is a terminal); :meth:`finish` logs the outcome
    at INFO. The optimiser loops call :meth:`start` and :meth:`finish`; a
    loop that only calls :meth:`report` gets its bar started on the first
    report and closed by the estimator's ``fit``.

    Parameters
    ----------
    tol : float
        Relative improvement under which an epoch counts as settled.
    max_iter : int
        Most iterations / epochs.
    verbose : int, default=0
        0: log nothing.
    label : str, default="loss"
        Name logged before the value.
    sign : float, default=1.0
        Factor of the logged value (-1 logs an ELBO for a negative ELBO).
    unit : {"iter", "epoch"}, default="epoch"
        Word logged before the iteration number.
    name : str, default=None
        Label of the progress bar (the estimator's class name).

    Attributes
    ----------
    history : list of float
        The reported objective values, in order (the estimators'
        ``loss_curve_``).
    times : list of float
        Seconds from the monitor's creation to each report.
    iter : int
        Number of values reported (L-BFGS: scipy's iteration count).
    converged : bool
        Whether the stopping rule (or, for L-BFGS, scipy) ended the run.
    optimizer : str or None
        Name of the optimiser given to :meth:`start`, for the log.

    Examples
    --------
    >>> from skgpstruct._tagging.base import ConvergenceMonitor
    >>> monitor = ConvergenceMonitor(tol=1e-3, max_iter=10)
    >>> for value in [10.0, 5.0, 4.999, 4.9985]:
    ...     monitor.report(value)
    >>> monitor.converged, monitor.iter
    (True, 4)
    """

    patience = 2  # epochs in a row under tol

    def __init__(self, tol, max_iter, verbose=0, *, label="loss", sign=1.0, unit="epoch",
                 name=None):
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = int(verbose or 0)
        self.label = label
        self.sign = sign
        self.unit = unit
        self.name = name
        self.optimizer = None
        self.history = []
        self.times = []
        self._t0 = time.perf_counter()
        self.iter = 0
        self.converged = False
        self._settled = 0
        self._bar = None
        self._started = False

    def start(self, optimizer=None, *, unit=None, desc=None):
        """Begin a run: name the optimiser and, when verbose, open the bar.

        Parameters
        ----------
        optimizer : str, default=None
            Its name in the log (``"L-BFGS"``, ``"Adam"``...).
        unit : {"iter", "epoch"}, default=None
            Sets ``unit`` (None: keep it).
        desc : str, default=None
            Label of the bar (None: ``name``).
        """
        if unit is not None:
            self.unit = unit
        self.optimizer = optimizer
        self._started = True
        if self.verbose and self._bar is None:
            self._bar = progress_bar(self.max_iter, desc or self.name, self.unit)

    def report(self, value):
        """Record the objective after one iteration / epoch (and log it).

        Parameters
        ----------
        value : float
            The minimised objective.
        """
        if self.history:
            prev = self.history[-1]
            improvement = (prev - value) / max(abs(prev), 1e-12)
            self._settled = self._settled + 1 if improvement < self.tol else 0
            self.converged = self._settled >= self.patience
        self.history.append(value)
        self.times.append(time.perf_counter() - self._t0)
        self.iter += 1
        if self.verbose:
            if not self._started:
                self.start()
            shown = self.sign * value
            if self._bar is not None:
                self._bar.set_postfix_str(f"{self.label}={shown:.6g}", refresh=False)
                self._bar.update(1)
            logger.log(iteration_level(self.verbose), "%s %d: %s %.6g", self.unit,
                       self.iter, self.label, shown)

    def close(self):
        """Close the bar (if any); safe to call more than once."""
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()

    def finish(self):
        """Close the bar and, when verbose, log at INFO how the run ended:
        converged, ``max_iter`` reached or stopped early (an interrupt),
        with the last (for a stop: the best) reported value."""
        self.close()
        if not self.verbose:
            return
        units = {"iter": "iterations", "epoch": "epochs"}.get(self.unit, self.unit + "s")
        what = self.optimizer or "the optimizer"
        if self.converged:
            outcome, values = f"converged after {self.iter} {units}", self.history[-1:]
        elif self.iter >= self.max_iter:
            outcome = f"reached max_iter={self.max_iter} {units} without converging"
            values = self.history[-1:]
        else:
            outcome = f"stopped after {self.iter} {units} (interrupted)"
            values = [min(self.history)] if self.history else []
        if values:
            outcome += f"; {self.label} {self.sign * values[0]:.6g}"
        logger.info("%s %s", what, outcome)


def fit_lbfgs(fun, x0, monitor, *, bounds=None, l1=None, owlqn=None):
    """Minimise ``fun(x) -> (value, grad)`` with L-BFGS-B, or plus an L1 term
    with OWL-QN.

    Parameters
    ----------
    fun : callable
        The full-batch objective and its gradient at a flat vector.
    x0 : ndarray of float64 of shape (n_params,)
        Starting point.
    monitor : ConvergenceMonitor
        Gives ``max_iter`` and ``tol`` (scipy's ``maxiter``, ``ftol`` and
        ``gtol``); records every iteration.
    bounds : list of (float or None, float or None), default=None
        Box per coordinate (None: unbounded; not with ``l1``).
    l1 : float or ndarray of shape (n_params,), default=None
        L1 coefficient per coordinate: minimise ``fun + sum(l1 * |x|)`` with
        OWL-QN (:func:`~skgpstruct.optim.owlqn.minimize_owlqn`; the same
        ``max_iter`` and ``tol``, the L1 term included in the values
        recorded).
    owlqn : dict or None, default=None
        Keyword arguments of
        :func:`~skgpstruct.optim.owlqn.minimize_owlqn` (``memory``,
        ``pair_dtype``); with it (and ``l1`` 0 or None) L-BFGS is that
        function's, with CRFsuite's stopping rule, instead of scipy's.

    Returns
    -------
    x : ndarray
        The minimiser found. ``monitor.iter`` is scipy's iteration count.
        After a KeyboardInterrupt past the first iteration: the last
        iterate, with a :class:`~skgpstruct.optim.FitInterruptedWarning`
        (an interrupt before it propagates).
    """
    if owlqn is not None and l1 is None:
        l1 = 0.0
    name = "OWL-QN" if l1 is not None and np.any(np.asarray(l1) > 0) else "L-BFGS"
    monitor.start(name, unit="iter")
    try:
        kwargs = dict(max_iter=monitor.max_iter, tol=monitor.tol, callback=monitor.report)
        if l1 is None:
            x, n_iter, _ = minimize_lbfgs(fun, x0, bounds=bounds, **kwargs)
        else:
            x, n_iter, _ = minimize_owlqn(fun, x0, l1, **kwargs, **(owlqn or {}))
        converged = n_iter < monitor.max_iter
    except FitInterrupted as stop:
        monitor.close()
        warn_interrupted(name, stop.n_done, "iterations")
        x, n_iter, converged = stop.x, stop.n_done, False
    finally:
        monitor.close()
    monitor.iter, monitor.converged = n_iter, converged
    monitor.finish()
    return x


def minibatches(n_sequences, batch_size):
    """Sequences per minibatch and minibatches per epoch.

    Parameters
    ----------
    n_sequences : int
    batch_size : int or None
        None: one minibatch of all sequences.

    Returns
    -------
    batch : int
    n_batches : int
    """
    batch = n_sequences if batch_size is None else min(batch_size, n_sequences)
    return batch, -(-n_sequences // batch)


def box_projection(box):
    """``(0, low, high)`` for ``fit_epochs``'s ``project`` from an L-BFGS-B
    box (a list of ``(low, high)``, ``None`` for no bound); None for no box."""
    if box is None:
        return None
    low = np.array([-np.inf if b[0] is None else b[0] for b in box], dtype=np.float64)
    high = np.array([np.inf if b[1] is None else b[1] for b in box], dtype=np.float64)
    return 0, low, high


def fit_epochs(step, x, optimizer, monitor, *, n_sequences, batch_size, rng,
               project=None, desc=None, epoch_value=None):
    """Run epochs of minibatch steps on ``x`` (in place) until the monitor
    says converged or ``max_iter`` epochs are done.

    Every epoch draws, from ``rng``, the order of the sequences (a
    permutation; the fixed blocks ``0..n-1`` for SAGA) and then one seed
    per sequence (``rng.randint(SEED_MAX, size=n)``).

    Parameters
    ----------
    step : callable
        ``step(x, seq_idx, seeds) -> (value, grad, scale)``: the
        minibatch's share of the epoch objective (summed over the epoch and
        reported to ``monitor``), and the gradient the optimiser steps on,
        ``scale * grad``.
    x : ndarray of float64 of shape (n_params,)
        Parameters, updated in place.
    optimizer : SGD, Adam or SAGA
        From :func:`skgpstruct.optim.make_optimizer`.
    monitor : ConvergenceMonitor
        Gives ``max_iter`` and the stopping rule; records every epoch.
    n_sequences : int
        Number of training sequences.
    batch_size : int or None
        Sequences per minibatch (None: all).
    rng : RandomState
        The estimator's generator.
    project : (int, ndarray, ndarray) or None, default=None
        ``(start, low, high)``: after every step ``x[start:]`` is clipped to
        the box (projected steps for bounded hyperparameters).
    desc : str, default=None
        Label of the tqdm progress bar shown when ``monitor.verbose`` (None:
        ``monitor.name``).
    epoch_value : callable or None, default=None
        ``epoch_value(x) -> float`` added to the epoch's objective after its
        last step (a penalty that the steps leave out). Before it, an
        optimiser with a ``synchronize(x)`` method (lazy updates,
        :class:`~skgpstruct.optim.proximal.ProximalAdaGrad`) brings ``x`` up
        to date.

    Returns
    -------
    x : ndarray
        After a KeyboardInterrupt past the first epoch: the parameters at
        the end of the epoch with the lowest objective, with a
        :class:`~skgpstruct.optim.FitInterruptedWarning` (an interrupt
        before it propagates).
    """
    n = n_sequences
    batch, n_batches = minibatches(n, batch_size)
    name = type(optimizer).__name__
    monitor.start(name, unit="epoch", desc=desc)

    def epoch():
        order = np.arange(n) if optimizer.fixed_blocks else rng.permutation(n)
        seeds = rng.randint(SEED_MAX, size=n)
        total = 0.0
        for k in range(n_batches):
            idx = order[k * batch : (k + 1) * batch]
            value, grad, scale = step(x, idx, seeds[idx])
            optimizer.step(x, grad, scale=scale, block=k)
            if project is not None:
                start, low, high = project
                np.clip(x[start:], low, high, out=x[start:])
            total += value
        if hasattr(optimizer, "synchronize"):
            optimizer.synchronize(x)
        if epoch_value is not None:
            total += epoch_value(x)
        monitor.report(total)
        return total

    return run_epochs(epoch, x, monitor, name)


def run_epochs(epoch, x, monitor, name):
    """Run ``epoch()`` (one epoch on ``x`` in place, reporting to
    ``monitor``; returns the epoch's objective) until the monitor says
    converged or ``max_iter`` epochs are done; close the monitor and warn
    (as ``name``) when ``max_iter`` ended the run.

    Returns
    -------
    x : ndarray
        After a KeyboardInterrupt past the first epoch: the parameters at
        the end of the epoch with the lowest objective, with a
        :class:`~skgpstruct.optim.FitInterruptedWarning` (an interrupt
        before it propagates).
    """
    best, best_value, interrupted = None, np.inf, False
    try:
        for _ in range(monitor.max_iter):
            total = epoch()
            if best is None:
                best, best_value = x.copy(), total
            elif total < best_value:
                best[:], best_value = x, total  # no new allocation per epoch
            if monitor.converged:
                break
    except KeyboardInterrupt:
        if best is None:
            raise
        monitor.close()
        warn_interrupted(name, monitor.iter, "epochs")
        monitor.converged, interrupted = False, True
        x[:] = best
    finally:
        monitor.close()
    monitor.finish()
    if not (monitor.converged or interrupted):
        warn_max_iter(name, monitor.max_iter, "epochs")
    return x


def sequence_tags(tags):
    """sklearn tags of an estimator whose ``X`` is a list of 2-D (sparse or
    dense) sequences and whose ``y`` is required; deterministic."""
    tags.input_tags.two_d_array = False
    tags.input_tags.sparse = True
    tags.target_tags.required = True
    tags.non_deterministic = False
    return tags


def _skip_unlabelled(data, known):
    """``data`` without its sequences that have no known label, with a
    warning that counts them (they carry no information for a CRF)."""
    counts = np.add.reduceat(known.astype(np.int64), data.offsets[:-1])
    empty = counts == 0
    if not empty.any():
        return data
    warnings.warn(f"{int(empty.sum())} of {data.n_sequences} sequences of y have no "
                  "known label (every label is None) and are skipped.", UserWarning,
                  stacklevel=4)
    return data.subset(np.flatnonzero(~empty))


class SequenceTaggerMixin(PredictMixin):
    """Mixin for estimators that label lists of sequences.

    Subclasses define ``predict``, ``_fit(data, warm, resolved)``, the name
    of one fitted attribute in ``_fitted_attribute``, and extend
    ``_parameter_constraints`` (the entries every tagger has: ``max_iter``,
    ``tol``, ``n_jobs``, ``device``, ``random_state``, ``verbose``,
    ``warm_start``). ``fit`` runs :meth:`_fit_setup` (which calls the
    subclass's :meth:`_check_params`, the cross-parameter checks) and then
    ``_fit``. The mixin adds the prediction methods of
    :class:`~skgpstruct._tagging.predict.PredictMixin` (``predict``,
    ``predict_marginals``, ``predict_path_proba``, ``predict_uncertainty``,
    ``predict_single``, ``predict_marginals_single``, ``score``: flat token
    accuracy, as sklearn-crfsuite)
    and the sklearn tags of an estimator whose ``X`` is a list of 2-D
    sequences. Put it left of
    ``BaseEstimator`` in the bases.
    """

    _fitted_attribute = None

    _parameter_constraints: dict = {
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_jobs": [Integral, None],
        "device": [StrOptions({"cpu", "cuda", "auto"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
    }

    # ------------------------------------------------------------- fit setup
    def _check_params(self, n_classes):
        """Cross-parameter checks that ``_validate_params`` cannot make.

        Called by :meth:`_fit_setup` once the number of classes and
        ``device_`` are known; raises a ValueError for an inconsistent
        combination and returns what ``fit`` needs resolved (subclasses).
        """
        return None

    def _warm_start_compatible(self):
        """Whether the fitted state fits the current parameters (subclasses
        add their own conditions to the shared warm-start check)."""
        return True

    def _fit_setup(self, X, y):
        """The shared start of ``fit``.

        Validates the parameters and the data, fits the label encoder,
        decides whether to warm start (``warm_start`` and a previous fit with
        the same ``classes_`` and ``n_features_in_``), encodes the labels,
        resolves ``device_``, runs :meth:`_check_params` and sets
        ``classes_`` and ``n_features_in_``.

        Returns
        -------
        data : SequenceData
            Stacked training tokens with int64 labels.
        warm : bool
            Whether to continue from the fitted state.
        resolved : object
            What :meth:`_check_params` returned.
        """
        self._validate_params()
        data = SequenceData.from_sequences(X, y, unknown=True)
        known = known_labels(data.y_flat)
        if not known.any():
            raise ValueError("y has no known label (every label is None): a tagger "
                             "needs labelled tokens.")
        y_known = data.y_flat[known]
        if not known.all():
            y_known = np.asarray(y_known.tolist())  # the dtype of the known labels
        encoder = LabelEncoder().fit(y_known)
        if len(encoder.classes_) < 2:
            raise ValueError(
                f"y has a single label ({encoder.classes_[0].tolist()!r}); a tagger needs "
                "at least 2 classes."
            )
        n_features = data.X_flat.shape[1]
        warm = bool(
            self.warm_start
            and hasattr(self, self._fitted_attribute)
            and np.array_equal(getattr(self, "classes_", None), encoder.classes_)
            and self.n_features_in_ == n_features
            and self._warm_start_compatible()
        )
        codes = np.full(data.n_tokens, -1, dtype=np.int64)  # -1: unknown
        codes[known] = encoder.transform(y_known)
        data.y_flat = codes
        data = _skip_unlabelled(data, known)
        self.device_ = resolve_device(self.device)
        if self.device_ == "cuda" and not known.all():
            if self.device != "auto":
                raise ValueError("Partial labels (None in y) are trained on the CPU "
                                 "only: use device='cpu' or 'auto'.")
            self.device_ = "cpu"
        resolved = self._check_params(len(encoder.classes_))
        self.classes_ = encoder.classes_
        self.n_features_in_ = n_features
        return data, warm, resolved

    def fit(self, X, y):
        """Fit the tagger on labelled sequences.

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        y : list of array-like of shape (T_n,)
            Labels of each sequence. ``None`` marks a token whose label is
            unknown (partial labels; a sequence holding one is a list or an
            object array): the likelihood sums over the label paths that
            agree with the known labels (Tsuboi et al. 2008). A sequence
            with no known label is skipped with a warning; no known label
            at all is an error.

        Returns
        -------
        self : object
            The fitted estimator.

        Notes
        -----
        Ctrl-C (KeyboardInterrupt) once the optimiser has completed an
        iteration / epoch stops it and fits the model from the best iterate
        so far, with a :class:`~skgpstruct.optim.FitInterruptedWarning`
        (as sklearn's MLP). Any exception raised out of ``fit`` (an
        interrupt before that, or during the final bookkeeping, or an error)
        leaves the estimator exactly as it was before the call: unfitted, or
        the previous fit.

        With ``verbose``, the fit logs to the ``"skgpstruct"`` logger (see
        ``verbose`` in the class's parameters) and draws a progress bar on
        stderr when it is a terminal.
        """
        start = time.perf_counter()
        state = dict(self.__dict__)
        try:
            data, warm, resolved = self._fit_setup(X, y)
            with fit_logging(type(self).__name__, self.verbose, start) as log:
                log.begin(data.n_sequences, int(data.lengths.sum()), len(self.classes_),
                          self.n_features_in_, self._optimizer_name(resolved))
                self._fit(data, warm, resolved)
                log.end()
        except BaseException:
            # never half-set attributes: an error (or an interrupt before the
            # first iteration) leaves the estimator as it was before fit
            self.__dict__.clear()
            self.__dict__.update(state)
            raise
        return self

    def _parallel(self):
        """joblib threads over chunks of sequences (``n_jobs``)."""
        return Parallel(n_jobs=self.n_jobs, prefer="threads")

    def _optimizer_name(self, resolved):
        """The optimiser ``fit`` runs, for the log: what :meth:`_check_params`
        resolved when it is a name (``"auto"`` resolved), else ``optimizer``."""
        return resolved if isinstance(resolved, str) else getattr(self, "optimizer", None)

    def _monitor(self, label="loss", sign=1.0):
        """A :class:`ConvergenceMonitor` with this estimator's settings
        (its bar is closed when ``fit`` ends, whatever happens)."""
        monitor = ConvergenceMonitor(self.tol, self.max_iter, self.verbose, label=label,
                                     sign=sign, name=type(self).__name__)
        log = current_fit()
        if log is not None:
            log.monitors.append(monitor)
        return monitor

    # --------------------------------------------------------------- predict
    def __sklearn_tags__(self):
        return sequence_tags(super().__sklearn_tags__())
