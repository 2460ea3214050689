"""What both sequence transformers share: input checks and the fit protocol.

:class:`_SequenceFeatures` is the base of :class:`~skgpstruct.features.CRFppTemplate`
and :class:`~skgpstruct.features.SequenceVectorizer`. A subclass reads ``X``
once into its own intermediate form (``_read``), learns its vocabulary from
that form (``_fit_read``) and turns the form into matrices
(``_transform_read``); ``fit``, ``fit_transform`` and ``transform`` are the one
code path built on these three hooks, so ``fit_transform`` reads ``X`` once.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils.validation import check_is_fitted


def _check_float_dtype(dtype):
    """Return ``np.dtype(dtype)``; ValueError unless it is a floating dtype."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(
            f"dtype must be a NumPy floating dtype, got {dtype!r}."
        ) from None
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a NumPy floating dtype, got {dtype}.")
    if dtype.itemsize < 4:
        raise ValueError(
            f"dtype must be float32, float64 or longdouble, got {dtype}: "
            "scipy.sparse has no float16 matrices."
        )
    return dtype


def _vocabulary_from_counts(counts, min_freq):
    """``(vocabulary_, feature_counts_)`` of the features counted at least
    ``min_freq`` times, in sorted name order; ValueError if none is."""
    names = sorted(f for f, c in counts.items() if c >= min_freq)
    if not names:
        raise ValueError(
            f"No feature occurs at least min_freq={min_freq} times in "
            "the training data."
        )
    vocabulary = {f: i for i, f in enumerate(names)}
    return vocabulary, np.array([counts[f] for f in names], dtype=np.int64)


def _check_sequence_list(X, what):
    """The outer list of sequences: a list-like, not a string or 2-D array."""
    message = (
        f"X must be a list of sequences, each a list of {what}; got a "
        f"{type(X).__name__}."
    )
    if isinstance(X, (str, bytes)) or sp.issparse(X) or (
        isinstance(X, np.ndarray) and X.dtype != object
    ):
        raise TypeError(message)
    try:
        return list(X)
    except TypeError:
        raise TypeError(message) from None


def _check_sequence(n, seq, what, not_lists=(str, bytes)):
    """TypeError unless ``seq``, sequence ``n`` of X, is list-like (has a
    length and is none of the types ``not_lists``), as a list of ``what``."""
    if isinstance(seq, not_lists) or not hasattr(seq, "__len__"):
        raise TypeError(
            f"Sequence {n} of X must be a list of {what}, got a {type(seq).__name__}."
        )


class _SequenceFeatures(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Base of the transformers from token descriptions to feature matrices.

    Subclasses define ``_read(X, fitting)`` (validate ``X`` and return its
    intermediate form, one entry per sequence; ``fitting`` says whether the
    fitted attributes may be used), ``_fit_read(read)`` (set ``vocabulary_``
    and the other fitted attributes) and ``_transform_read(read)`` (the list
    of output matrices), and the input tag ``_input_tag`` (``"string"`` or
    ``"dict"``). Every subclass has a ``dtype`` parameter.
    """

    _input_tag = None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        setattr(tags.input_tags, self._input_tag, True)
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def _fit_once(self, X):
        """Check the parameters, read ``X``, fit on it; return the read form.

        A fit that fails leaves the transformer as it was (the parsed
        template and the vocabulary of an earlier fit stay together)."""
        _check_float_dtype(self.dtype)
        before = dict(self.__dict__)
        try:
            read = self._read(X, fitting=True)
            if not read:
                raise ValueError("X is empty: at least one sequence is required.")
            self._fit_read(read)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise
        return read

    def fit(self, X, y=None):
        """Learn the features of the training sequences.

        Parameters
        ----------
        X : list of list
            Training sequences, one list of tokens each, the tokens in the
            form the class description gives.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        self._fit_once(X)
        return self

    def fit_transform(self, X, y=None):
        """Fit and transform, reading ``X`` once.

        Parameters
        ----------
        X, y : list of list, None
            As for :meth:`fit` (``y`` is ignored).

        Returns
        -------
        Xt : list of matrix of shape (T_n, n_features)
            What :meth:`transform` returns for ``X``.
        """
        return self._transform_read(self._fit_once(X))

    def _transform_checked(self, X):
        check_is_fitted(self, "vocabulary_")
        _check_float_dtype(self.dtype)  # set_params may have changed it
        return self._transform_read(self._read(X, fitting=False))

    def get_feature_names_out(self, input_features=None):
        """Feature names, one per output column.

        Parameters
        ----------
        input_features : None
            Ignored (the input has no columns of its own).

        Returns
        -------
        feature_names_out : ndarray of str objects of shape (n_features,)
        """
        check_is_fitted(self, "vocabulary_")
        names = np.empty(len(self.vocabulary_), dtype=object)
        names[list(self.vocabulary_.values())] = list(self.vocabulary_)
        return names
