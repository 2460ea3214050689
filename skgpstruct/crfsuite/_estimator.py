"""``skgpstruct.crfsuite.CRF``: sklearn-crfsuite's estimator on our CRF.

The class takes sklearn-crfsuite's parameters, with its defaults, maps them
onto a :class:`~sklearn.pipeline.Pipeline` of
:class:`~skgpstruct.features.SequenceVectorizer` (python-crfsuite's
attribute names: ``separator=":"``) and
:class:`~skgpstruct.RandomizedCRFTagger` in exact mode (or
:class:`~skgpstruct.GPStructTagger` with ``tagger="gp"``), and returns what
sklearn-crfsuite returns. The mapping of each parameter is in the class
docstring and in ``doc/coming_from_crfsuite.rst``.
"""

import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import Pipeline

from ..features import SequenceVectorizer

__all__ = ["CRF", "TrainingLog"]

#: python-crfsuite's algorithms we train, and those we refuse.
_ALGORITHMS = ("lbfgs", "l2sgd")
_NO_EQUIVALENT = {
    "ap": "the averaged perceptron",
    "pa": "passive aggressive",
    "arow": "AROW",
}
#: Parameters of the algorithms we refuse, and of l2sgd's step calibration.
_ALGORITHM_PARAMS = {
    "pa_type": "pa", "c": "pa", "error_sensitive": "pa", "averaging": "pa",
    "variance": "arow", "gamma": "arow",
}
_LINESEARCHES = ("MoreThuente", "Backtracking", "StrongBacktracking")
#: CRFsuite's L-BFGS has no iteration cap by default; ours stops by its rule.
_UNLIMITED = 100_000


@dataclass
class TrainingLog:
    """What python-crfsuite's log parser holds after a fit, from our fit.

    Attributes
    ----------
    iterations : list of dict
        One dict per iteration (L-BFGS / OWL-QN) or epoch (``l2sgd``):
        ``num`` (from 1), ``loss`` (the penalised objective) and ``time``
        (seconds that iteration took), as python-crfsuite's.
    last_iteration : dict
        ``iterations[-1]``; after a fit with ``X_dev`` it also holds the
        held-out ``scores`` (``{label: (precision, recall, f1, support)}``)
        and ``item_accuracy_float`` / ``instance_accuracy_float``, the
        token and sentence accuracy on the development sequences (CRFsuite
        computes them at every iteration; we score the final model).
    """

    iterations: list = field(default_factory=list)

    @property
    def last_iteration(self):
        return self.iterations[-1] if self.iterations else {}


def _check_labels(y):
    out = []
    for n, seq in enumerate(y):
        if isinstance(seq, str):
            raise TypeError(f"y[{n}] is a str; each label sequence must be a list of labels.")
        labels = list(seq)
        out.append(labels)
    return out


class CRF(BaseEstimator):
    """sklearn-crfsuite's ``CRF``, trained by skgpstruct.

    ``from skgpstruct import crfsuite as sklearn_crfsuite`` is the only
    change code written for sklearn-crfsuite needs: the parameters, their
    defaults, ``fit(X, y, X_dev=None, y_dev=None)``, ``predict``,
    ``predict_single``, ``predict_marginals``, ``predict_marginals_single``,
    ``score``, ``classes_``, ``state_features_``, ``transition_features_``,
    ``size_`` and ``training_log_`` are sklearn-crfsuite's. Underneath is
    :class:`~skgpstruct.RandomizedCRFTagger` in exact mode (the same model
    and objective as CRFsuite's L-BFGS) behind a
    :class:`~skgpstruct.features.SequenceVectorizer` that names attributes
    as python-crfsuite does (``"word.lower():juan"``); ``pipeline_`` is
    that fitted Pipeline. ``tagger="gp"`` puts
    :class:`~skgpstruct.GPStructTagger` there instead, for calibrated
    marginals and ``predict_uncertainty``.

    Parameters
    ----------
    algorithm : {"lbfgs", "l2sgd"} or None, default=None
        None or ``"lbfgs"``: L-BFGS (OWL-QN when ``c1 > 0``), as
        CRFsuite. ``"l2sgd"``: the same L2-penalised objective minimised
        by our proximal AdaGrad over minibatches (CRFsuite runs SGD with a
        calibrated step; the minimum is the same, the path is not).
        ``"ap"``, ``"pa"`` and ``"arow"`` (perceptron-style training of
        another objective) have no equivalent here: a ValueError.
    min_freq : float or None, default=None
        Attributes occurring at most ``min_freq`` times in the training
        tokens are dropped (CRFsuite counts attribute-label pairs; we count
        the attribute). None or 0: no cut-off.
    all_possible_states : bool or None, default=None
        True: a weight for every (attribute, label) pair; None / False
        (CRFsuite's default): only for the pairs seen in training.
    all_possible_transitions : bool or None, default=None
        Ours always learns every label-to-label transition, CRFsuite's
        ``all_possible_transitions=True``. With False CRFsuite keeps only
        the transitions seen in training (the others fixed at 0); we learn
        the others too (they come out negative), a small difference of
        model, never of interface.
    c1 : float or None, default=None
        L1 coefficient (None: 0).
    c2 : float or None, default=None
        L2 coefficient (None: 1.0, CRFsuite's default).
    max_iterations : int or None, default=None
        L-BFGS iterations (None: until CRFsuite's stopping rule, as
        CRFsuite) or ``l2sgd`` epochs (None: 1000, as CRFsuite).
    num_memories : int or None, default=None
        Documented no-op: our L-BFGS keeps 20 pairs and OWL-QN 6
        (CRFsuite's default). The memory changes the path to the minimum,
        not the minimum.
    epsilon, delta : float or None, default=None
        CRFsuite's two stopping tests (None: 1e-5 each): the gradient norm
        relative to the weights' and the relative decrease of the objective
        over ``period`` iterations. Ours applies one tolerance to both
        tests, ``min(epsilon, delta)``, so it never stops before CRFsuite
        would. ``l2sgd``: ``delta`` between epochs.
    period : int or None, default=None
        10 (CRFsuite's default) is the only value supported: another is a
        ValueError.
    linesearch : {"MoreThuente", "Backtracking", "StrongBacktracking"} or None
        Documented no-op: ours is a backtracking Wolfe line search
        (OWL-QN: libLBFGS's backtracking) whatever the name (the line
        search changes the path, not the minimum).
    max_linesearch : int or None, default=None
        Documented no-op (as ``linesearch``).
    calibration_eta, calibration_rate, calibration_samples, \
calibration_candidates, calibration_max_trials : optional
        CRFsuite's step-size search for ``l2sgd``: documented no-ops
        (AdaGrad needs none: it scales each weight's steps by its own
        gradients).
    pa_type, c, error_sensitive, averaging, variance, gamma : optional
        Parameters of ``"pa"`` and ``"arow"``: setting one is a ValueError,
        as those algorithms are.
    verbose : bool, default=False
        Log the fit (each iteration's objective) through the
        ``"skgpstruct"`` logger.
    model_filename : None
        python-crfsuite model files cannot be read: a path is a
        ValueError (retrain, then ``pickle`` / ``joblib``).
    keep_tempfiles : bool, default=False
        Documented no-op: no temporary files are written.
    trainer_cls : None
        python-crfsuite trainer classes do not apply: anything but None is
        a ValueError.
    tagger : {"crf", "gp"} or estimator, default="crf"
        What trains underneath: ``"crf"`` (RandomizedCRFTagger in exact
        mode, from the parameters above), ``"gp"`` (GPStructTagger at its
        defaults, which chooses its own prior and temperature; ``c1``,
        ``c2``, ``max_iterations`` and the stopping settings do not apply
        to it, with a warning when set), or an unfitted skgpstruct tagger
        (cloned at ``fit``).
    n_jobs : int or None, default=None
        Threads over sequences for the tagger underneath.
    random_state : int or None, default=None
        Seed of the tagger underneath (``l2sgd``'s minibatches, the GP).

    Attributes
    ----------
    pipeline_ : Pipeline
        The fitted ``SequenceVectorizer`` + tagger.
    classes_ : list of str
        The labels (sorted; CRFsuite lists them in order of appearance).
    state_features_ : dict
        ``{(attribute, label): weight}`` of the non-zero state weights.
    transition_features_ : dict
        ``{(label_from, label_to): weight}``.
    num_attributes_ : int
        Number of attributes of the model.
    attributes_ : list of str
        The attributes, by index.
    size_ : int
        Bytes of the model's weights and attribute names (CRFsuite: the
        size of its model file).
    training_log_ : TrainingLog
        Per-iteration loss and time (``training_log_.iterations``).

    See Also
    --------
    skgpstruct.RandomizedCRFTagger : The tagger underneath.
    skgpstruct.features.SequenceVectorizer : Its features.

    Notes
    -----
    Not provided: ``tagger_`` (a ``pycrfsuite.Tagger``: use ``pipeline_``)
    and a ``model_filename`` to read (python-crfsuite's binary format).
    Unlike sklearn-crfsuite's, the estimator pickles with its model, its
    ``repr`` works with current scikit-learn and nothing is left in the
    temporary directory.

    Examples
    --------
    >>> from skgpstruct import crfsuite as sklearn_crfsuite
    >>> X = [[{"w": "the"}, {"w": "cat"}], [{"w": "a"}, {"w": "dog"}, {"w": "ran"}]] * 5
    >>> y = [["D", "N"], ["D", "N", "V"]] * 5
    >>> crf = sklearn_crfsuite.CRF(c1=0.1, c2=0.1, max_iterations=100,
    ...                            all_possible_transitions=True).fit(X, y)
    >>> crf.predict_single([{"w": "a"}, {"w": "cat"}])
    ['D', 'N']
    >>> crf.classes_
    ['D', 'N', 'V']
    """

    def __init__(self, algorithm=None, min_freq=None, all_possible_states=None,
                 all_possible_transitions=None, c1=None, c2=None, max_iterations=None,
                 num_memories=None, epsilon=None, period=None, delta=None, linesearch=None,
                 max_linesearch=None, calibration_eta=None, calibration_rate=None,
                 calibration_samples=None, calibration_candidates=None,
                 calibration_max_trials=None, pa_type=None, c=None, error_sensitive=None,
                 averaging=None, variance=None, gamma=None, verbose=False,
                 model_filename=None, keep_tempfiles=False, trainer_cls=None,
                 tagger="crf", n_jobs=None, random_state=None):
        self.algorithm = algorithm
        self.min_freq = min_freq
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.num_memories = num_memories
        self.epsilon = epsilon
        self.period = period
        self.delta = delta
        self.linesearch = linesearch
        self.max_linesearch = max_linesearch
        self.calibration_eta = calibration_eta
        self.calibration_rate = calibration_rate
        self.calibration_samples = calibration_samples
        self.calibration_candidates = calibration_candidates
        self.calibration_max_trials = calibration_max_trials
        self.pa_type = pa_type
        self.c = c
        self.error_sensitive = error_sensitive
        self.averaging = averaging
        self.variance = variance
        self.gamma = gamma
        self.verbose = verbose
        self.model_filename = model_filename
        self.keep_tempfiles = keep_tempfiles
        self.trainer_cls = trainer_cls
        self.tagger = tagger
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ----------------------------------------------------------- settings
    def _algorithm(self):
        algorithm = "lbfgs" if self.algorithm is None else self.algorithm
        if algorithm in _NO_EQUIVALENT:
            raise ValueError(
                f"algorithm={algorithm!r} ({_NO_EQUIVALENT[algorithm]}) has no equivalent "
                "in skgpstruct: it trains another objective than the CRF likelihood. Use "
                "algorithm='lbfgs' (the default) or 'l2sgd'."
            )
        if algorithm not in _ALGORITHMS:
            raise ValueError(f"algorithm must be one of {_ALGORITHMS} (or None), got "
                             f"{algorithm!r}.")
        for name, owner in _ALGORITHM_PARAMS.items():
            if getattr(self, name) is not None:
                raise ValueError(f"{name} is a parameter of algorithm={owner!r}, which "
                                 "skgpstruct does not train; leave it None.")
        return algorithm

    def _check_settings(self):
        if self.model_filename is not None:
            raise ValueError(
                "model_filename: python-crfsuite model files cannot be read by skgpstruct; "
                "retrain the model with CRF(...).fit and save it with pickle or joblib."
            )
        if self.trainer_cls is not None:
            raise ValueError("trainer_cls: python-crfsuite trainers do not apply to "
                             "skgpstruct; leave it None (verbose=True logs the iterations).")
        if self.period not in (None, 10):
            raise ValueError(f"period={self.period!r}: only CRFsuite's default, 10, is "
                             "supported.")
        if self.linesearch is not None and self.linesearch not in _LINESEARCHES:
            raise ValueError(f"linesearch must be one of {_LINESEARCHES}, got "
                             f"{self.linesearch!r}.")
        algorithm = self._algorithm()
        if algorithm == "l2sgd" and self.c1:
            raise ValueError("c1 applies to algorithm='lbfgs' only (CRFsuite's l2sgd has "
                             "no L1 term).")
        return algorithm

    def _tol(self):
        tols = [v for v in (self.epsilon, self.delta) if v is not None]
        return float(min(tols)) if tols else 1e-5

    def _tagger(self, algorithm):
        from .. import GPStructTagger, RandomizedCRFTagger

        if not isinstance(self.tagger, str):
            if not hasattr(self.tagger, "fit"):
                raise TypeError(f"tagger must be 'crf', 'gp' or an estimator, got "
                                f"{self.tagger!r}.")
            return clone(self.tagger)
        if self.tagger == "gp":
            set_here = [name for name in ("c1", "c2", "max_iterations", "epsilon", "delta")
                        if getattr(self, name) is not None]
            if set_here:
                warnings.warn(
                    f"tagger='gp': {', '.join(set_here)} do not apply (GPStructTagger "
                    "chooses its prior inside fit); they are ignored.", UserWarning,
                    stacklevel=3)
            return GPStructTagger(n_jobs=self.n_jobs, random_state=self.random_state,
                                  verbose=int(bool(self.verbose)))
        if self.tagger != "crf":
            raise ValueError(f"tagger must be 'crf', 'gp' or an estimator, got "
                             f"{self.tagger!r}.")
        c1 = 0.0 if self.c1 is None else float(self.c1)
        c2 = 1.0 if self.c2 is None else float(self.c2)
        common = dict(c1=c1, c2=c2, tol=self._tol(), n_jobs=self.n_jobs,
                      random_state=self.random_state, verbose=int(bool(self.verbose)))
        if algorithm == "l2sgd":
            epochs = 1000 if self.max_iterations is None else int(self.max_iterations)
            return RandomizedCRFTagger(optimizer="adagrad", learning_rate=0.5,
                                       max_iter=epochs, **common)
        iters = _UNLIMITED if self.max_iterations is None else int(self.max_iterations)
        return RandomizedCRFTagger(optimizer="lbfgs", max_iter=iters,
                                   all_possible_states=bool(self.all_possible_states),
                                   **common)

    # ---------------------------------------------------------------- fit
    def fit(self, X, y, X_dev=None, y_dev=None):
        """Train the model.

        Parameters
        ----------
        X : list of list of dict (or of list of str)
            Feature dicts per token, in python-crfsuite's format.
        y : list of list of str
            Labels per token.
        X_dev, y_dev : optional
            Development sequences, scored at the end of the fit into
            ``training_log_.last_iteration`` (pass both or neither).

        Returns
        -------
        self : CRF
        """
        if (X_dev is None) != (y_dev is None):
            raise ValueError("Pass both X_dev and y_dev to use the holdout data")
        algorithm = self._check_settings()
        vectorizer = SequenceVectorizer(separator=":", min_freq=self.min_freq or 0)
        pipeline = Pipeline([("vectorizer", vectorizer), ("tagger", self._tagger(algorithm))])
        y = _check_labels(y)
        with warnings.catch_warnings():
            if self.max_iterations is not None:
                # CRFsuite stops at max_iterations silently
                warnings.filterwarnings("ignore", message=".*max_iter.*")
            pipeline.fit(X, y)
        self.pipeline_ = pipeline
        self.training_log_ = self._log(pipeline[-1])
        if X_dev is not None:
            self._score_dev(X_dev, _check_labels(y_dev))
        return self

    @staticmethod
    def _log(tagger):
        losses = list(getattr(tagger, "loss_curve_", []))
        times = list(getattr(tagger, "_iteration_times", [np.nan] * len(losses)))
        steps = np.diff([0.0] + times)
        return TrainingLog([{"num": i + 1, "loss": float(v), "time": float(t)}
                            for i, (v, t) in enumerate(zip(losses, steps))])

    def _score_dev(self, X_dev, y_dev):
        from sklearn.metrics import precision_recall_fscore_support

        pred = self.predict(X_dev)
        flat_true = [v for s in y_dev for v in s]
        flat_pred = [v for s in pred for v in s]
        labels = self.classes_
        p, r, f, s = precision_recall_fscore_support(flat_true, flat_pred, labels=labels,
                                                     zero_division=0)
        if not self.training_log_.iterations:
            self.training_log_.iterations.append({"num": 0})
        last = self.training_log_.iterations[-1]
        last["scores"] = {lab: (float(p[i]), float(r[i]), float(f[i]), int(s[i]))
                          for i, lab in enumerate(labels)}
        last["item_accuracy_float"] = float(np.mean(np.array(flat_true) == np.array(flat_pred)))
        last["instance_accuracy_float"] = float(np.mean(
            [list(a) == list(b) for a, b in zip(y_dev, pred)]))

    # ------------------------------------------------------------ predict
    def _fitted(self):
        if "pipeline_" not in self.__dict__:
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. "
                                 "Call 'fit' with appropriate arguments first.")
        return self.pipeline_

    def predict(self, X):
        """Labels of each sequence.

        Parameters
        ----------
        X : list of list of dict
            Feature dicts per token.

        Returns
        -------
        y : ndarray of object, of shape (n_sequences,)
            One list of str per sequence, as sklearn-crfsuite returns.
        """
        paths = self._fitted().predict(X)
        out = np.empty(len(paths), dtype=object)
        for n, path in enumerate(paths):
            out[n] = [str(v) for v in path]
        return out

    def predict_single(self, xseq):
        """Labels of one sequence.

        Parameters
        ----------
        xseq : list of dict
            Feature dicts per token.

        Returns
        -------
        y : list of str
        """
        return self.predict([xseq])[0]

    def predict_marginals(self, X):
        """Per-token label probabilities.

        Parameters
        ----------
        X : list of list of dict
            Feature dicts per token.

        Returns
        -------
        marginals : ndarray of object, of shape (n_sequences,)
            One list per sequence of ``{label: probability}`` per token.
        """
        margs = self._fitted().predict_proba(X)
        labels = self.classes_
        out = np.empty(len(margs), dtype=object)
        for n, m in enumerate(margs):
            out[n] = [dict(zip(labels, row.tolist())) for row in np.asarray(m)]
        return out

    def predict_marginals_single(self, xseq):
        """Per-token label probabilities of one sequence.

        Parameters
        ----------
        xseq : list of dict
            Feature dicts per token.

        Returns
        -------
        marginals : list of dict
            ``{label: probability}`` per token.
        """
        return self.predict_marginals([xseq])[0]

    def score(self, X, y):
        """Token accuracy of ``predict`` (sklearn-crfsuite's ``score``).

        Parameters
        ----------
        X : list of list of dict
            Feature dicts per token.
        y : list of list of str
            Gold labels.

        Returns
        -------
        score : float
        """
        from .metrics import flat_accuracy_score

        return flat_accuracy_score(y, self.predict(X))

    # ---------------------------------------------------------- inspect
    @property
    def classes_(self):
        """The labels, a list of str."""
        return [str(v) for v in self._fitted()[-1].classes_]

    @property
    def attributes_(self):
        """The attribute names, by index."""
        return list(self._fitted()[0].feature_names_)

    @property
    def num_attributes_(self):
        """Number of attributes."""
        return len(self._fitted()[0].feature_names_)

    def _weights(self, what):
        """State weights ``(n_attributes, n_classes)`` and transitions
        ``(n_classes, n_classes)``: the CRF's, or the GP's posterior means
        (weight-space form)."""
        from .. import RandomizedCRFTagger

        tagger = self._fitted()[-1]
        n = self.num_attributes_
        if isinstance(tagger, RandomizedCRFTagger):
            return tagger.coef_, tagger._dense_transitions()
        coef = getattr(tagger, "coef_", None)
        if coef is not None and getattr(tagger, "transition_mean_", None) is not None:
            return coef[:, :n].T, tagger.transition_mean_
        raise AttributeError(f"{what} needs weights per attribute: {type(tagger).__name__} "
                             "in this form (inducing points) has none.")

    @property
    def state_features_(self):
        """``{(attribute, label): weight}`` of the non-zero state weights
        (``tagger="gp"``: the posterior means)."""
        coef, _ = self._weights("state_features_")
        names, labels = self.attributes_, self.classes_
        rows, cols = np.nonzero(coef)
        return {(names[i], labels[j]): float(coef[i, j]) for i, j in zip(rows, cols)}

    @property
    def transition_features_(self):
        """``{(label_from, label_to): weight}`` (``tagger="gp"``: the
        posterior means)."""
        _, trans = self._weights("transition_features_")
        labels = self.classes_
        return {(a, b): float(trans[i, j]) for i, a in enumerate(labels)
                for j, b in enumerate(labels)}

    @property
    def size_(self):
        """Bytes of the model: its weights and its attribute names."""
        tagger = self._fitted()[-1]
        arrays = [v for v in vars(tagger).values() if isinstance(v, np.ndarray)]
        names = sum(len(n.encode()) + 1 for n in self.attributes_)
        return int(sum(a.nbytes for a in arrays) + names)
