"""
=================================
Pipeline and grid search
=================================

The taggers are scikit-learn estimators: they go at the end of a
:class:`~sklearn.pipeline.Pipeline`, and ``GridSearchCV`` tunes them with the
sequence scorers of :mod:`skgpstruct.metrics` (by name with
:func:`~skgpstruct.metrics.get_scorer`). Here the L2 coefficient ``c2`` of a
CRF after a feature scaler, chosen by 3-fold cross-validation on token
accuracy, with whole-sequence accuracy as a second score.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skgpstruct import RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.metrics import flat_accuracy_score, get_scorer


class PerTokenScaler(TransformerMixin, BaseEstimator):
    """StandardScaler over all tokens, applied to each sequence."""

    def fit(self, X, y=None):
        self.scaler_ = StandardScaler().fit(np.concatenate(X))
        return self

    def transform(self, X):
        return [self.scaler_.transform(x) for x in X]


X, y = make_chain_data(n_sequences=240, n_classes=4, n_features=10, noise=1.0,
                       random_state=0)
X_train, y_train, X_test, y_test = X[:120], y[:120], X[120:], y[120:]

pipeline = Pipeline([("scale", PerTokenScaler()),
                     ("crf", RandomizedCRFTagger(random_state=0))])
search = GridSearchCV(
    pipeline,
    {"crf__c2": [0.01, 0.1, 1.0, 10.0, 100.0]},
    scoring=get_scorer(["flat_accuracy", "sequence_accuracy"]),
    refit="flat_accuracy",
    cv=3,
)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    search.fit(X_train, y_train)
print("best:", search.best_params_)
print(f"test token accuracy: {flat_accuracy_score(y_test, search.predict(X_test)):.3f}")

# %%
# The cross-validation curves
# ---------------------------
c2 = np.array(search.cv_results_["param_crf__c2"], dtype=float)
fig, left = plt.subplots(figsize=(5.5, 3.5))
left.semilogx(c2, search.cv_results_["mean_test_flat_accuracy"], "o-", color="C0")
left.set_xlabel("c2")
left.set_ylabel("token accuracy (CV)", color="C0")
right = left.twinx()
right.semilogx(c2, search.cv_results_["mean_test_sequence_accuracy"], "s--",
               color="C1")
right.set_ylabel("sequence accuracy (CV)", color="C1")
fig.tight_layout()
plt.show()
