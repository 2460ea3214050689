"""What the sequence taggers share: fitted-input checks, ``score``, tags."""

from sklearn.preprocessing import LabelEncoder
from sklearn.utils.validation import check_is_fitted

from ._sequences import SequenceData
from .metrics import flat_accuracy_score

__all__ = ["SequenceTaggerMixin"]


class SequenceTaggerMixin:
    """Mixin for estimators that label lists of sequences.

    Subclasses define ``predict`` and the name of one fitted attribute in
    ``_fitted_attribute``; the mixin adds ``predict_single``, ``score``
    (flat token accuracy, as sklearn-crfsuite) and the sklearn tags of an
    estimator whose ``X`` is a list of 2-D sequences. Put it left of
    ``BaseEstimator`` in the bases.
    """

    _fitted_attribute = None

    def _fit_data(self, X, y):
        """Validated training data and a label encoder fitted on ``y``.

        Raises a ValueError when ``y`` holds a single label. The labels in
        the returned data are not encoded yet (a warm start compares the
        new ``classes_`` with the old ones first).
        """
        data = SequenceData.from_sequences(X, y)
        encoder = LabelEncoder().fit(data.y_flat)
        if len(encoder.classes_) < 2:
            raise ValueError(
                f"y has a single label ({encoder.classes_[0]!r}); a tagger needs "
                "at least 2 classes."
            )
        return data, encoder

    def _check_X(self, X):
        check_is_fitted(self, self._fitted_attribute)
        return SequenceData.from_sequences(X, n_features=self.n_features_in_)

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
            Fraction of tokens labelled correctly.
        """
        return flat_accuracy_score(y, self.predict(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        tags.non_deterministic = False
        return tags
