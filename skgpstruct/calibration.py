"""Post-hoc calibration of the taggers' marginals.

:class:`TemperatureScaledTagger` divides every potential of a fitted tagger
(unary and transition; for :class:`~skgpstruct.GPStructTagger` those of each
posterior draw) by one number, the temperature ``tau``, chosen to minimise the
marginal log loss of held-out sequences (Guo et al., "On calibration of modern
neural networks", ICML 2017, for a classifier's logits; here the potentials of
a linear chain, so that the scaled model is still a CRF and its marginals,
path probabilities and uncertainties stay consistent). ``tau > 1`` softens an
over-confident tagger, ``tau < 1`` sharpens an under-confident one. The
Viterbi path of a CRF does not change; marginal decoding can.

GPStructTagger calibrates in the model already (its ``temperature="auto"``
chooses the posterior's spread by held-out marginals inside ``fit``); the
scaling is mostly for the plain CRF, whose L2 penalty chosen by error says
nothing about its confidence. ``benchmarks/temperature_scaling.py`` measures
both.
"""

import copy
import warnings
from numbers import Integral, Real

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.model_selection import check_cv
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ._tagging.base import sequence_tags
from ._tagging.predict import (PredictMixin, SingleSequenceMixin, check_marginals_output,
                       marginals_output)
from ._input.validation import check_y_sequences
from .metrics._sequence import flat_accuracy_score

__all__ = ["TemperatureScaledTagger"]


def _final_tagger(estimator):
    """The skgpstruct tagger of ``estimator`` (itself, or a Pipeline's last step)."""
    tagger = estimator[-1] if isinstance(estimator, Pipeline) else estimator
    if not isinstance(tagger, PredictMixin):
        raise TypeError(
            "estimator must be a skgpstruct tagger (GPStructTagger, "
            "RandomizedCRFTagger) or a Pipeline ending in one, got "
            f"{type(tagger).__name__}."
        )
    return tagger


def _set_scale(estimator, scale):
    _final_tagger(estimator)._potential_scale = float(scale)


def _tagger_has(name):
    """``available_if`` check: the (fitted, else given) estimator has ``name``."""
    def check(self):
        est = self.estimator_ if hasattr(self, "estimator_") else self._estimator()
        return hasattr(est, name)
    return check


def _given(allowed):
    """``{"allowed": allowed}`` when a constraint is given, else ``{}`` (so
    that an estimator without the keyword still predicts unconstrained)."""
    return {} if allowed is None else {"allowed": allowed}


def _warn_at_edge(tau, low, high):
    """Warn when the chosen ``tau`` sits at an end of the searched range
    (within twice the search's tolerance, 2e-3 in ``log tau``): the
    held-out loss may still fall beyond it."""
    for edge, side, meaning in ((low, "lower", "sharpening the marginals still helps"),
                                (high, "upper", "flattening the marginals still helps")):
        if abs(np.log(tau) - np.log(edge)) <= 2e-3:
            warnings.warn(
                f"The chosen temperature {tau:.4g} is at the {side} end of "
                f"temperature_range=({low:g}, {high:g}): {meaning} on the held-out "
                "sequences, so the optimum may lie beyond; widen temperature_range. "
                "A temperature this far from 1 also says that the tagger is badly "
                "calibrated on them (too few training sequences, or a penalty far "
                "too weak or too strong).", UserWarning, stacklevel=3)


def _n_tokens(i, seq):
    """Tokens of sequence ``i`` of ``X`` (an array, a sparse matrix or, before
    a Pipeline's featuriser, a list of tokens)."""
    shape = getattr(seq, "shape", None)
    if shape is not None and len(shape) >= 1:
        return int(shape[0])
    try:
        return len(seq)
    except TypeError:
        raise TypeError(f"Sequence {i} of X has no length: each sequence must be "
                        "an array, a sparse matrix or a list of tokens.") from None


class _HeldOut:
    """Held-out sequences of one fitted estimator, and the marginal
    probabilities of their true labels at a given potential scale (a
    factor on the estimator's own, 1 unless it was scaled before)."""

    def __init__(self, estimator, X, y):
        self.estimator, self.X = estimator, X
        self.base = _final_tagger(estimator)._potential_scale
        classes = _final_tagger(estimator).classes_
        flat = np.concatenate([np.asarray(t) for t in y]) if len(y) else np.array([])
        index = {label: j for j, label in enumerate(classes.tolist())}
        # labels the fold's tagger never saw cannot be helped by a
        # temperature: left out of the objective
        self.columns = np.array([index.get(label, -1) for label in flat.tolist()],
                                dtype=np.int64)
        self.keep = self.columns >= 0

    def log_proba(self, scale):
        _set_scale(self.estimator, self.base * scale)
        P = np.concatenate(self.estimator.predict_proba(self.X), axis=0)
        rows = np.flatnonzero(self.keep)
        return np.log(np.maximum(P[rows, self.columns[rows]], 1e-300))


class TemperatureScaledTagger(SingleSequenceMixin, MetaEstimatorMixin, BaseEstimator):
    """A tagger whose potentials are divided by a temperature chosen on
    held-out sequences.

    ``fit`` chooses one temperature ``tau`` that minimises the marginal log
    loss (:func:`skgpstruct.metrics.marginal_log_loss`) of held-out
    sequences: with an integer or a splitter ``cv``, of every fold's
    validation sequences under a clone of ``estimator`` fitted on the rest,
    pooled; with ``cv="prefit"``, of ``(X, y)`` under the fitted
    ``estimator``. The model returned is then ``estimator`` fitted on all of
    ``(X, y)`` (or a copy of the prefit one) with every potential divided by
    ``tau`` (see :mod:`skgpstruct.calibration`).

    Parameters
    ----------
    estimator : GPStructTagger, RandomizedCRFTagger or Pipeline, default=None
        The tagger, or a Pipeline ending in one (its ``predict_proba`` is
        used; the scaled Pipeline then offers ``predict``,
        ``predict_proba`` / ``predict_marginals`` and ``score``, not
        ``predict_path_proba`` nor ``predict_uncertainty``, which a Pipeline
        does not forward). None: ``RandomizedCRFTagger()``.
    cv : int, cross-validation generator, iterable or "prefit", default=3
        Splits of the sequences (an int ``k``: ``KFold(k)`` over the
        sequences, in order, as :func:`sklearn.model_selection.check_cv`);
        ``"prefit"``: ``estimator`` is already fitted and ``(X, y)`` are
        held-out sequences, used only to choose ``tau``.
    temperature_range : tuple of float, default=(0.05, 20.0)
        The interval ``tau`` is searched in (on a log scale: a grid of 9
        points, then Brent's method around the best). A ``tau`` at either
        end raises a UserWarning: the optimum may lie beyond it.

    Attributes
    ----------
    estimator_ : estimator
        The fitted tagger (or Pipeline) whose potentials are scaled.
    temperature_ : float
        The chosen ``tau``.
    calibration_log_loss_ : tuple of float
        The held-out marginal log loss at ``tau = 1`` and at
        ``temperature_`` (mean over the held-out tokens whose label the
        fold's tagger saw in training).
    classes_ : ndarray of shape (n_classes,)
        The tagger's labels.
    n_features_in_ : int
        Number of features the tagger was fitted on (a Pipeline's first
        step's; absent when that step has none).

    See Also
    --------
    skgpstruct.metrics.marginal_log_loss : The objective.
    skgpstruct.metrics.expected_calibration_error : Calibration error.

    Notes
    -----
    ``temperature_`` is not the ``temperature`` of GPStructTagger, which
    narrows the posterior's spread around its mean: this one scales the
    potentials, mean and spread alike (for a GP, every posterior draw).

    Examples
    --------
    >>> from skgpstruct import RandomizedCRFTagger
    >>> from skgpstruct.calibration import TemperatureScaledTagger
    >>> from skgpstruct.datasets import make_chain_data
    >>> X, y = make_chain_data(n_sequences=60, n_classes=3, noise=1.0,
    ...                        random_state=0)[:2]
    >>> crf = RandomizedCRFTagger(n_top=None, c2=0.001, random_state=0)
    >>> scaled = TemperatureScaledTagger(crf, cv=3).fit(X, y)
    >>> before, after = scaled.calibration_log_loss_
    >>> bool(after <= before)
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict_proba"]), None],
        "cv": ["cv_object", StrOptions({"prefit"})],
        "temperature_range": [tuple],
    }

    def __init__(self, estimator=None, *, cv=3, temperature_range=(0.05, 20.0)):
        self.estimator = estimator
        self.cv = cv
        self.temperature_range = temperature_range

    def _estimator(self):
        if self.estimator is None:
            from ._randomized_crf.tagger import RandomizedCRFTagger

            return RandomizedCRFTagger()
        return self.estimator

    def _check_range(self):
        rng = self.temperature_range
        ok = (len(rng) == 2 and all(isinstance(v, Real) and np.isfinite(v) for v in rng)
              and 0 < rng[0] < rng[1])
        if not ok:
            raise ValueError(
                "temperature_range must be (low, high) with 0 < low < high, "
                f"got {rng!r}."
            )
        return float(rng[0]), float(rng[1])

    def fit(self, X, y, groups=None):
        """Choose the temperature and fit the tagger.

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence (with ``cv="prefit"``: held-out
            sequences).
        y : list of array-like of shape (T_n,)
            Labels of each sequence.
        groups : array-like of shape (n_sequences,), default=None
            Group of each sequence (for instance its document), passed to
            the splitter of ``cv`` (``GroupKFold``, ...); not allowed with
            ``cv="prefit"``.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        low, high = self._check_range()
        estimator = self._estimator()
        _final_tagger(estimator)
        if not (hasattr(X, "__len__") and hasattr(y, "__len__")):
            raise TypeError(
                "X and y must be lists (or tuples) of sequences, got "
                f"{type(X).__name__} and {type(y).__name__}."
            )
        if len(X) != len(y):
            raise ValueError(
                f"X and y have different numbers of sequences: {len(X)} and {len(y)}."
            )
        # the labels against X's token counts here, as the tagger's own fit
        # does: the held-out labels of cv="prefit" meet no other check
        y = check_y_sequences(y, lengths=[_n_tokens(i, x) for i, x in enumerate(X)],
                              unknown=True)
        if groups is not None:
            groups = np.asarray(groups)
            if isinstance(self.cv, str):
                raise ValueError('groups are for the splits of cv; cv="prefit" has none.')
            if groups.shape != (len(X),):
                raise ValueError(
                    f"groups must have one entry per sequence ({len(X)}), got shape "
                    f"{groups.shape}."
                )
        if isinstance(self.cv, str):  # "prefit"
            check_is_fitted(_final_tagger(estimator), _final_tagger(estimator)._fitted_attribute)
            final = copy.deepcopy(estimator)
            held = [_HeldOut(final, X, y)]
        else:
            cv = check_cv(self.cv)
            if isinstance(cv.get_n_splits(), Integral) and cv.get_n_splits() > len(X):
                raise ValueError(
                    f"cv has {cv.get_n_splits()} folds but there are only {len(X)} "
                    "sequences."
                )
            held = []
            for train, test in cv.split(np.zeros(len(X)), groups=groups):
                fold = clone(estimator).fit([X[i] for i in train], [y[i] for i in train])
                held.append(_HeldOut(fold, [X[i] for i in test], [y[i] for i in test]))
            final = None
        if not sum(int(h.keep.sum()) for h in held):
            raise ValueError("No held-out token has a label its tagger was fitted on.")
        self.temperature_, self.calibration_log_loss_ = self._search(held, low, high)
        _warn_at_edge(self.temperature_, low, high)
        if final is None:
            final = clone(estimator).fit(X, y)
        _set_scale(final, _final_tagger(final)._potential_scale / self.temperature_)
        self.estimator_ = final
        tagger = _final_tagger(final)
        self.classes_ = tagger.classes_
        first = final[0] if isinstance(final, Pipeline) else final
        if hasattr(first, "n_features_in_"):
            self.n_features_in_ = first.n_features_in_
        elif hasattr(self, "n_features_in_"):
            del self.n_features_in_  # an earlier fit's, not this model's
        return self

    @staticmethod
    def _search(held, low, high):
        """``(tau, (loss at 1, loss at tau))``: the held-out marginal log
        loss minimised over ``log tau`` in ``[log low, log high]``."""
        n = sum(int(h.keep.sum()) for h in held)

        def loss(log_tau):
            scale = float(np.exp(-log_tau))
            return -sum(float(h.log_proba(scale).sum()) for h in held) / n

        grid = np.linspace(np.log(low), np.log(high), 9)
        values = [loss(t) for t in grid]
        best = int(np.argmin(values))
        lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
        res = minimize_scalar(loss, bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-3})
        log_tau, value = (res.x, res.fun) if res.fun <= values[best] else (grid[best],
                                                                            values[best])
        # tau = 1 (when in range) if it is no worse than the search's optimum
        at_one = loss(0.0)
        if low <= 1.0 <= high and at_one <= value:
            log_tau, value = 0.0, at_one
        for h in held:
            _set_scale(h.estimator, h.base)
        return float(np.exp(log_tau)), (float(at_one), float(value))

    # ------------------------------------------------------------ predict
    def _check_fitted(self):
        check_is_fitted(self, "estimator_")

    def predict(self, X, *, allowed=None):
        """Labels of the scaled tagger's decoder (Viterbi: as unscaled).

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        allowed : list, default=None
            A constraint at prediction (see the tagger's ``predict``).

        Returns
        -------
        y_pred : list of ndarray of shape (T_n,)
        """
        self._check_fitted()
        return self.estimator_.predict(X, **_given(allowed))

    @available_if(_tagger_has("predict_nbest"))
    def predict_nbest(self, X, n, *, allowed=None):
        """The ``n`` best paths and their probabilities under the scaled
        tagger (see the tagger's ``predict_nbest``).

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        n : int
            Paths per sequence.
        allowed : list, default=None
            A constraint at prediction (see the tagger's ``predict``).

        Returns
        -------
        nbest : list of list of (ndarray, float)
        """
        self._check_fitted()
        return self.estimator_.predict_nbest(X, n, allowed=allowed)

    def predict_proba(self, X, *, output="array", allowed=None):
        """Per-token marginals of the scaled tagger (the same as
        :meth:`predict_marginals`, under sklearn's name).

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        output : {"array", "dict"}, default="array"
            ``"dict"``: one ``{label: p}`` dict per token.
        allowed : list, default=None
            A constraint at prediction (see the tagger's ``predict``).

        Returns
        -------
        marginals : list of ndarray of shape (T_n, n_classes), or list of list of dict
            Columns ordered as ``classes_``.
        """
        return self.predict_marginals(X, output=output, allowed=allowed)

    def predict_marginals(self, X, *, output="array", allowed=None):
        """Per-token marginals of the scaled tagger (see the tagger's
        ``predict_marginals``).

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        output : {"array", "dict"}, default="array"
            ``"dict"``: one ``{label: p}`` dict per token.
        allowed : list, default=None
            A constraint at prediction (see the tagger's ``predict``).

        Returns
        -------
        marginals : list of ndarray of shape (T_n, n_classes), or list of list of dict
        """
        self._check_fitted()
        if hasattr(self.estimator_, "predict_marginals"):
            return self.estimator_.predict_marginals(X, output=output, **_given(allowed))
        check_marginals_output(output)  # a Pipeline: its predict_proba
        return marginals_output(self.estimator_.predict_proba(X, **_given(allowed)),
                                self.classes_, output)

    @available_if(_tagger_has("predict_path_proba"))
    def predict_path_proba(self, X, y=None, *, log=False, allowed=None):
        """Probability of a whole label path under the scaled tagger (see
        the tagger's ``predict_path_proba``).

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        y : list of array-like of shape (T_n,), default=None
            Paths to score; None: the predicted ones.
        log : bool, default=False
            Return natural logarithms.
        allowed : list, default=None
            A constraint at prediction (see the tagger's ``predict``).

        Returns
        -------
        proba : ndarray of shape (n_sequences,)
        """
        self._check_fitted()
        return self.estimator_.predict_path_proba(X, y, log=log, **_given(allowed))

    @available_if(_tagger_has("predict_uncertainty"))
    def predict_uncertainty(self, X, kind="entropy", *, per="token", n_paths=1,
                            allowed=None):
        """Uncertainty of the scaled tagger (see the tagger's
        ``predict_uncertainty``).

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        kind : str, default="entropy"
            A kind the tagger offers.
        per : {"token", "sequence", "path"}, default="token"
            Per token, summed per sequence, or of the whole path.
        n_paths : int or "auto", default=1
            Paths per posterior draw of a sampled path estimate (see the
            tagger's ``predict_uncertainty``).
        allowed : list, default=None
            A constraint at prediction (see the tagger's ``predict``).

        Returns
        -------
        uncertainty : list of ndarray or ndarray of shape (n_sequences,)
        """
        self._check_fitted()
        return self.estimator_.predict_uncertainty(X, kind, per=per, n_paths=n_paths,
                                                   **_given(allowed))

    @available_if(_tagger_has("predict_information_gain"))
    def predict_information_gain(self, X, X_target=None):
        """Expected information each sequence's labels give about the labels
        of ``X_target``'s tokens under the scaled tagger (see
        :meth:`GPStructTagger.predict_information_gain
        <skgpstruct.GPStructTagger.predict_information_gain>`).

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each candidate sequence.
        X_target : list of array-like or sparse matrix, default=None
            The target sequences; None: ``X``.

        Returns
        -------
        information_gain : ndarray of shape (n_sequences,)
        """
        self._check_fitted()
        return self.estimator_.predict_information_gain(X, X_target)

    def score(self, X, y):
        """Token accuracy of ``predict(X)`` against ``y``.

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        y : list of array-like of shape (T_n,)
            True labels.

        Returns
        -------
        score : float
        """
        return flat_accuracy_score(y, self.predict(X))

    def __sklearn_tags__(self):
        return sequence_tags(super().__sklearn_tags__())
