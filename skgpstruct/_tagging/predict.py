"""What the sequence taggers share at prediction time.

:class:`PredictMixin` holds ``predict``, ``predict_marginals`` (and its
sklearn name ``predict_proba``), ``predict_path_proba``,
``predict_uncertainty``, ``predict_single``, ``predict_marginals_single``
(the last two from :class:`SingleSequenceMixin`) and ``score``, on top of
the hooks each tagger defines: ``_decoder()`` (a
:data:`~skgpstruct._tagging.decoders.DECODERS` name), ``_decode_potentials(data)``
(point potentials), ``_token_marginals(data)`` and, where the tagger's
path probability is not the one of its point potentials (GPStructTagger),
``_path_log_proba(data, paths)``. :func:`entropy` and :func:`renormalize_rows` are the helpers both
taggers use on marginals.
"""

import numpy as np
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.validation import check_is_fitted

from .decoders import _dense, decode
from .._input.constraints import allowed_mask
from .._input.sequences import SequenceData
from ..chain import log_likelihood, path_entropy
from ..chain.backend import get_backend
from ..chain.nbest import nbest_viterbi
from ..chain.paths import check_n_paths
from ..metrics._sequence import flat_accuracy_score

__all__ = ["PredictMixin", "SingleSequenceMixin", "check_marginals_output", "entropy",
           "marginals_output", "renormalize_rows"]


def entropy(p):
    """Entropy (nats) of distributions over the last axis; ``0 log 0 = 0``."""
    return -np.sum(p * np.log(np.where(p > 0, p, 1.0)), axis=-1)


def renormalize_rows(unary):
    """Divide marginals by their sums over the last axis, in place.

    ``exp(fwd + bwd - log Z)`` drifts from 1 along long chains (about 2e-9
    at 10,000 tokens) by a factor common to a position's labels; dividing by
    the row sum removes it. Rows of zeros (every path forbidden) stay zero.

    Parameters
    ----------
    unary : ndarray of shape (..., n_labels)

    Returns
    -------
    unary : ndarray
        The same array.
    """
    total = unary.sum(axis=-1, keepdims=True)
    np.divide(unary, total, out=unary, where=total > 0)
    return unary


def check_marginals_output(output):
    """Refuse an ``output`` of ``predict_marginals`` other than "array" / "dict"."""
    if output not in ("array", "dict"):
        raise ValueError(f"output must be 'array' or 'dict', got {output!r}.")


def marginals_output(marginals, classes, output):
    """Marginals as arrays, or (``output="dict"``) sklearn-crfsuite's one
    ``{label: p}`` dict per token, labels as Python scalars."""
    if output == "array":
        return marginals
    labels = classes.tolist()
    return [[dict(zip(labels, row.tolist())) for row in m] for m in marginals]


class SingleSequenceMixin:
    """``predict_single`` and ``predict_marginals_single`` (sklearn-crfsuite's
    one-sequence methods) on top of ``predict`` and ``predict_marginals``."""

    def predict_single(self, x):
        """Predict the labels of one sequence.

        Parameters
        ----------
        x : array-like or sparse matrix of shape (T, n_features)
            Token features of the sequence.

        Returns
        -------
        y_pred : ndarray of shape (T,)
        """
        return self.predict([x])[0]

    def predict_marginals_single(self, x, *, output="array"):
        """Per-token marginals of one sequence (sklearn-crfsuite's
        ``predict_marginals_single``).

        Parameters
        ----------
        x : array-like or sparse matrix of shape (T, n_features)
            Token features of the sequence.
        output : {"array", "dict"}, default="array"
            ``"dict"``: one ``{label: p}`` dict per token, as
            sklearn-crfsuite.

        Returns
        -------
        marginals : ndarray of shape (T, n_classes), or list of dict
            Columns ordered as ``classes_``.
        """
        return self.predict_marginals([x], output=output)[0]


class PredictMixin(SingleSequenceMixin):
    """Prediction methods of the sequence taggers (module docstring)."""

    #: Factor on every potential at prediction time (``1 / temperature``):
    #: 1 for a tagger as fitted; :class:`~skgpstruct.calibration.TemperatureScaledTagger`
    #: sets it on its own fitted copy. Each tagger applies it where its
    #: prediction potentials are made (``_decode_potentials`` and the
    #: marginals' potentials), so that every prediction method agrees.
    _potential_scale = 1.0

    def _check_X(self, X, allowed=None):
        check_is_fitted(self, self._fitted_attribute)
        data = SequenceData.from_sequences(X, n_features=self.n_features_in_)
        return self._constrain(data, allowed)

    def _constrain(self, data, allowed):
        """``data`` with the ``log_mask`` of the constraint ``allowed``."""
        mask = allowed_mask(allowed, self.classes_, data.lengths)
        if mask is not None:
            data.log_mask = np.where(mask, 0.0, -np.inf)
        return data

    def _decoder(self):
        """Name of the :data:`~skgpstruct._tagging.decoders.DECODERS` entry ``predict`` uses."""
        raise NotImplementedError

    @property
    def _on_gpu(self):
        """Whether ``fit`` resolved ``device`` to the GPU (False before fit)."""
        return getattr(self, "device_", "cpu") == "cuda"

    def _predict_backend(self):
        """The chain backend of prediction: the GPU if ``fit`` ran on it and
        it is still usable, else the CPU."""
        return get_backend("auto" if self._on_gpu else "cpu")

    def predict(self, X, *, allowed=None):
        """Label sequences with the tagger's decoder.

        Parameters
        ----------
        X : list of array-like or sparse matrix of shape (T_n, n_features)
            Token features of each sequence.
        allowed : list, default=None
            A constraint: one entry per sequence, None (no constraint) or one
            entry per token, None (any label), a label (forced) or a
            collection of labels. The result is conditional on the path
            lying in the allowed set (see :ref:`annotating-less`).

        Returns
        -------
        y_pred : list of ndarray of shape (T_n,)
            Predicted labels (values of ``classes_``).
        """
        data = self._check_X(X, allowed)
        paths = decode(self._decoder(), self, data, self._predict_backend())
        return [self.classes_[p] for p in paths]

    def predict_marginals(self, X, *, output="array", allowed=None):
        """Per-token label marginals ``p(y_t = j | x)``.

        :class:`~skgpstruct.GPStructTagger` averages forward-backward
        marginals over ``n_predict_samples`` posterior samples of the
        potentials (per mixture component, weighted by ``weights_``);
        :class:`~skgpstruct.RandomizedCRFTagger` runs exact
        forward-backward, or with ``beam_size`` that of the chain restricted
        to the ``beam_size`` best unary states per position (zero
        elsewhere).

        Parameters
        ----------
        X : list of (T_n, n_features) array-likes or sparse matrices
            The sequences, as for :meth:`predict`.
        output : {"array", "dict"}, default="array"
            ``"dict"``: sklearn-crfsuite's format, one ``{label: p}`` dict
            per token (labels as in ``classes_``, as Python scalars).
        allowed : list, default=None
            A constraint: one entry per sequence, None (no constraint) or one
            entry per token, None (any label), a label (forced) or a
            collection of labels. The result is conditional on the path
            lying in the allowed set (see :ref:`annotating-less`).

        Returns
        -------
        marginals : list of ndarray of shape (T_n, n_classes), or list of list of dict
            Columns ordered as ``classes_``; rows sum to 1.

        Examples
        --------
        >>> from skgpstruct import RandomizedCRFTagger
        >>> from skgpstruct.datasets import make_chain_data
        >>> X, y = make_chain_data(n_sequences=5, n_classes=2, random_state=0)[:2]
        >>> crf = RandomizedCRFTagger(n_top=None, random_state=0).fit(X, y)
        >>> sorted(crf.predict_marginals(X[:1], output="dict")[0][0])
        [0, 1]
        """
        check_marginals_output(output)
        return marginals_output(self._token_marginals(self._check_X(X, allowed)),
                                self.classes_, output)

    def predict_proba(self, X, *, output="array", allowed=None):
        """Per-token label marginals, the same as :meth:`predict_marginals`.

        The sklearn name, so that a :class:`~sklearn.pipeline.Pipeline`
        ending in a tagger reaches the marginals, in either format
        (``pipe.predict_proba(X, output="dict")``: a Pipeline passes the
        keyword to its last step). (sklearn's ``cross_val_predict`` does not
        work with sequence taggers: it stacks the folds' outputs as one
        array, and sequences are ragged; loop over the splits of a
        :class:`~sklearn.model_selection.KFold` instead.)

        Parameters
        ----------
        X : list of (T_n, n_features) array-likes or sparse matrices
            The sequences, as for :meth:`predict`.
        output : {"array", "dict"}, default="array"
            As for :meth:`predict_marginals`.
        allowed : list, default=None
            A constraint: one entry per sequence, None (no constraint) or one
            entry per token, None (any label), a label (forced) or a
            collection of labels. The result is conditional on the path
            lying in the allowed set (see :ref:`annotating-less`).

        Returns
        -------
        marginals : list of ndarray of shape (T_n, n_classes), or list of list of dict
            Columns ordered as ``classes_``; rows sum to 1.

        Examples
        --------
        >>> from sklearn.pipeline import make_pipeline
        >>> from skgpstruct import RandomizedCRFTagger
        >>> from skgpstruct.features import SequenceVectorizer
        >>> X = [[{"w": "the"}, {"w": "cat"}], [{"w": "a"}, {"w": "dog"}]]
        >>> y = [["DT", "NN"], ["DT", "NN"]]
        >>> crf = make_pipeline(SequenceVectorizer(), RandomizedCRFTagger()).fit(X, y)
        >>> sorted(crf.predict_proba(X[:1], output="dict")[0][0])
        ['DT', 'NN']
        """
        return self.predict_marginals(X, output=output, allowed=allowed)

    def predict_path_proba(self, X, y=None, *, log=False, allowed=None):
        """Probability of a whole label path of each sequence, ``p(y_1, ...,
        y_T | x)``.

        :class:`~skgpstruct.RandomizedCRFTagger`: ``exp(score(y) - log Z)``
        under its potentials, by exact forward on the full chain, also with
        ``n_top`` (which concerns training only) and with ``beam_size``
        (which restricts :meth:`predict`, :meth:`predict_marginals` and
        :meth:`predict_uncertainty` to the beam, not this method: its path
        probabilities then do not sum to those marginals).
        :class:`~skgpstruct.GPStructTagger`: the posterior predictive
        probability, ``p(y | f)`` averaged over the same
        ``n_predict_samples`` posterior draws of the potentials (per mixture
        component, weighted by ``weights_``) as :meth:`predict_marginals`,
        so that summing it over the paths with ``y_t = j`` gives that
        method's ``p(y_t = j | x)``. It is the probability crf_test prints
        with ``-v1`` (``skgpstruct tag -v1``); unlike the product of the
        token marginals (``metrics.sequence_log_loss``) it is the
        probability of the path itself.

        Parameters
        ----------
        X : list of (T_n, n_features) array-likes or sparse matrices
            The sequences, as for :meth:`predict`.
        y : list of (T_n,) array-likes, default=None
            The label paths to score (labels of ``classes_``); None scores
            the paths :meth:`predict` returns.
        log : bool, default=False
            Return natural logarithms (a long path's probability underflows).
        allowed : list, default=None
            A constraint: one entry per sequence, None (no constraint) or one
            entry per token, None (any label), a label (forced) or a
            collection of labels. The result is conditional on the path
            lying in the allowed set (see :ref:`annotating-less`).

        Returns
        -------
        proba : ndarray of shape (n_sequences,)
            Probabilities (or their logarithms) in ``[0, 1]``.

        Raises
        ------
        ValueError
            If ``y`` has another number of sequences than ``X``, a sequence
            of another length, or a label not in ``classes_``.

        Examples
        --------
        >>> import numpy as np
        >>> from skgpstruct import RandomizedCRFTagger
        >>> from skgpstruct.datasets import make_chain_data
        >>> X, y = make_chain_data(n_sequences=20, n_classes=2, length=3,
        ...                        random_state=0)[:2]
        >>> crf = RandomizedCRFTagger(n_top=None, random_state=0).fit(X, y)
        >>> paths = [np.array(p) for p in np.ndindex(2, 2, 2)]  # all 8 paths
        >>> round(float(crf.predict_path_proba([X[0]] * 8, paths).sum()), 6)
        1.0
        """
        if y is None:
            data = self._check_X(X, allowed)
            paths = decode(self._decoder(), self, data, self._predict_backend())
        else:  # validated with X, labels encoded (unknown ones raise)
            check_is_fitted(self, self._fitted_attribute)
            data = SequenceData.from_sequences(X, y, n_features=self.n_features_in_,
                                               label_encoder=self._encoder())
            data = self._constrain(data, allowed)
            paths = data.split(data.y_flat)
        out = self._path_log_proba(data, paths)
        return out if log else np.exp(out)

    def _encoder(self):
        """A LabelEncoder of the fitted ``classes_``."""
        enc = LabelEncoder()
        enc.classes_ = self.classes_
        return enc

    def _path_log_proba(self, data, paths):
        """``log p(path | x)`` of each sequence under the point potentials
        (exact forward); ``-inf`` when the path or every path is forbidden."""
        U, transitions = self._decode_potentials(data)
        B = np.asarray(_dense(transitions), dtype=np.float64)
        out = np.array([log_likelihood(u, B, path) for u, path in
                        zip(data.split(np.asarray(U, dtype=np.float64)), paths)])
        return np.minimum(out, 0.0)  # rounding: a sure path is log 1 = 0

    def predict_nbest(self, X, n, *, allowed=None):
        """The ``n`` best label paths of each sequence with their
        probabilities (what ``skgpstruct tag -n`` prints).

        The candidates are the ``n`` highest-scoring paths under the
        tagger's point potentials (list Viterbi,
        :func:`~skgpstruct.chain.nbest_viterbi`; for GPStructTagger its
        posterior-mean potentials), each with its :meth:`predict_path_proba`
        (for GPStructTagger the posterior predictive probability), most
        probable first. For RandomizedCRFTagger they are the ``n`` most
        probable paths.

        Parameters
        ----------
        X : list of (T_n, n_features) array-likes or sparse matrices
            The sequences, as for :meth:`predict`.
        n : int
            Paths wanted per sequence, at least 1 (fewer when a sequence has
            fewer allowed paths).
        allowed : list, default=None
            A constraint: one entry per sequence, None (no constraint) or one
            entry per token, None (any label), a label (forced) or a
            collection of labels. The result is conditional on the path
            lying in the allowed set (see :ref:`annotating-less`).

        Returns
        -------
        nbest : list of list of (ndarray of shape (T_n,), float)
            Per sequence, ``(labels, probability)`` pairs, most probable
            first (labels of ``classes_``).

        Examples
        --------
        >>> from skgpstruct import RandomizedCRFTagger
        >>> from skgpstruct.datasets import make_chain_data
        >>> X, y = make_chain_data(n_sequences=20, n_classes=2, length=3,
        ...                        random_state=0)[:2]
        >>> crf = RandomizedCRFTagger(random_state=0).fit(X, y)
        >>> best = crf.predict_nbest(X[:1], 8)[0]  # all 8 paths of length 3
        >>> round(sum(p for _, p in best), 6)
        1.0
        >>> crf.predict_nbest(X[:1], 2, allowed=[[0, None, 1]])[0][0][0]
        array([0, 1, 1])
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}.")
        data = self._check_X(X, allowed)
        U, transitions = self._decode_potentials(data)
        B = np.asarray(_dense(transitions), dtype=np.float64)
        paths = [nbest_viterbi(u, B, int(n))[0] for u in data.split(np.asarray(U, float))]
        rows = np.repeat(np.arange(data.n_sequences), [len(p) for p in paths])
        flat = np.exp(self._path_log_proba(data.subset(rows),
                                           [p for ps in paths for p in ps]))
        out, k = [], 0
        for ps in paths:
            probs = flat[k:k + len(ps)]
            k += len(ps)
            order = np.argsort(-probs, kind="stable")
            out.append([(self.classes_[ps[i]], float(probs[i])) for i in order])
        return out

    _UNCERTAINTY_KINDS = ("entropy",)

    def predict_uncertainty(self, X, kind="entropy", *, per="token", n_paths=1,
                            allowed=None):
        """How unsure the tagger is, per token or per sequence.

        - ``"entropy"`` (both taggers): entropy in nats of each token's
          marginal distribution (:meth:`predict_marginals`): the total
          uncertainty, 0 when one label has probability 1, ``log
          n_classes`` at most.
        - ``"mutual_information"`` (GPStructTagger): the entropy of the
          averaged marginals minus the average entropy of the marginals of
          each posterior draw of the potentials (the BALD score): the part
          of the uncertainty that comes from not knowing the model
          (epistemic), which more training data would remove; 0 when all
          posterior draws agree.
        - ``"marginal_std"`` (GPStructTagger): the standard deviation over
          posterior draws of each label's marginal, shape (T_n, n_classes)
          per sequence.

        Parameters
        ----------
        X : list of (T_n, n_features) array-likes or sparse matrices
            The sequences, as for :meth:`predict`.
        kind : str, default="entropy"
            One of the kinds above that the tagger offers.
        per : {"token", "sequence", "path"}, default="token"
            ``"token"``: per token. ``"sequence"``: the sum over each
            sequence's tokens (for ``"entropy"`` an upper bound on the
            entropy of the label sequence). ``"path"``: of the whole label
            sequence, the labels taken jointly: ``"entropy"`` is the entropy
            of the distribution over label sequences (exact for
            RandomizedCRFTagger; for GPStructTagger estimated from one path
            sampled per posterior draw, or ``n_paths``, or exact given the
            draws where the sequence has no more label paths than that),
            ``"mutual_information"`` the mutual information between the
            label sequence and the posterior (the
            BALD score of the sequence; tokens whose doubts go together
            count once), estimated from the same paths (at most ``log
            n_predict_samples`` with one mixture component). Not for
            ``"marginal_std"``.
        n_paths : int or "auto", default=1
            GPStructTagger, ``per="path"``: paths sampled per posterior draw
            (:func:`~skgpstruct.chain.mixture_path_entropy`). More paths
            lower the Monte Carlo error of the estimates (mostly the paths'
            where the draws are close: a well-trained model's), at
            ``n_paths`` times the cost of the path step. ``"auto"`` chooses
            it per sequence, from two pilot rounds, by a fixed rule: the
            fewest paths that make the paths' share of the mutual
            information's Monte Carlo variance no larger than the posterior
            draws' (which only ``n_predict_samples`` can lower), at most 32
            (``skgpstruct.chain.paths.AUTO_MAX_PATHS``). A sequence's
            value still depends on that sequence and ``predict_seed_``
            alone. The exact path entropy of RandomizedCRFTagger does not
            sample and ignores it.
        allowed : list, default=None
            A constraint: one entry per sequence, None (no constraint) or one
            entry per token, None (any label), a label (forced) or a
            collection of labels. The result is conditional on the path
            lying in the allowed set (see :ref:`annotating-less`).

        Returns
        -------
        uncertainty : list of ndarray of shape (T_n,) or (T_n, n_classes), or ndarray of shape (n_sequences,)
            Per token (a list with one array per sequence), or per sequence.
        """
        if kind not in self._UNCERTAINTY_KINDS:
            raise ValueError(
                f"kind must be one of {self._UNCERTAINTY_KINDS} for "
                f"{type(self).__name__}, got {kind!r}."
            )
        if per not in ("token", "sequence", "path"):
            raise ValueError(f"per must be 'token', 'sequence' or 'path', got {per!r}.")
        check_n_paths(n_paths)
        if per != "token" and kind == "marginal_std":
            raise ValueError("kind='marginal_std' is per token (and label) only.")
        if per == "path":
            return np.asarray(self._path_uncertainty(self._check_X(X, allowed), kind,
                                                     n_paths), dtype=np.float64)
        values = self._token_uncertainty(self._check_X(X, allowed), kind)
        if per == "sequence":
            return np.array([float(v.sum()) for v in values])
        return values

    def _token_uncertainty(self, data, kind):
        """Token entropies of the marginals (the kinds every tagger has)."""
        return [entropy(p) for p in self._token_marginals(data)]

    def _path_uncertainty(self, data, kind, n_paths=1):
        """Exact entropy of each sequence's path distribution under the
        point potentials (``kind="entropy"``, the one every tagger has)."""
        U, transitions = self._decode_potentials(data)
        B = np.asarray(_dense(transitions), dtype=np.float64)
        return [path_entropy(u, B) for u in data.split(np.asarray(U, dtype=np.float64))]

    def score(self, X, y):
        """Token accuracy of ``predict(X)`` against ``y``.

        Parameters
        ----------
        X : list of (T_n, n_features) array-likes or sparse matrices
            The sequences to label, as for :meth:`predict`.
        y : list of (T_n,) array-likes
            Their true labels. A label never seen in ``fit`` is allowed
            and counts as an error (the tagger cannot predict it), as in
            sklearn's classifiers and CRFsuite's evaluation: held-out data
            of a large tag set often has a few (cross-validation folds
            included). The probability methods, which have no column for
            it, refuse it instead.

        Returns
        -------
        score : float
            Fraction of tokens labelled correctly.
        """
        return flat_accuracy_score(y, self.predict(X))
