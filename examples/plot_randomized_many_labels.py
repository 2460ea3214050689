"""
===========================================
Randomized dynamic programming, many labels
===========================================

With ``N`` labels an exact CRF costs O(T N²) per sequence of ``T`` tokens.
:class:`~skgpstruct.RandomizedCRFTagger` with ``n_top`` and ``n_sampled``
trains on ``K = n_top + n_sampled`` states per position (the best of a
proposal, plus a sample of the rest, re-weighted so that the estimate of the
partition function is unbiased): O(T K²). Here with 200 labels, training on
5 % and 10 % of them against exact training.
"""

import time
import warnings

import matplotlib.pyplot as plt
from sklearn.exceptions import ConvergenceWarning

from skgpstruct import RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.metrics import flat_accuracy_score

n_classes = 200
X, y = make_chain_data(n_sequences=300, n_classes=n_classes, n_features=400,
                       sparse=True, n_active=3, noise=0.3, random_state=0)
X_train, y_train, X_test, y_test = X[:200], y[:200], X[200:], y[200:]

common = dict(c2=0.1, random_state=0)
taggers = {
    "exact (L-BFGS)": RandomizedCRFTagger(max_iter=50, **common),
    "K = 5 % (AdaGrad)": RandomizedCRFTagger(
        n_top=0.025, n_sampled=0.025, optimizer="adagrad", learning_rate=0.5,
        max_iter=10, **common),
    "K = 10 % (AdaGrad)": RandomizedCRFTagger(
        n_top=0.05, n_sampled=0.05, optimizer="adagrad", learning_rate=0.5,
        max_iter=10, **common),
}
# compile the numba kernels first, so that the timings below are the fits'
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    for tagger in taggers.values():
        RandomizedCRFTagger(**{**tagger.get_params(), "max_iter": 1}).fit(
            X_train[:5], y_train[:5])

results = {}
for name, tagger in taggers.items():
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        tagger.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    accuracy = 100 * flat_accuracy_score(y_test, tagger.predict(X_test))
    results[name] = (seconds, accuracy)
    print(f"{name:<20} fit {seconds:5.2f} s   test accuracy {accuracy:5.2f} %")

# %%
# Accuracy against fit time
# -------------------------
# On a toy problem the gap is small; it grows with ``N``: at 444 labels
# (UD morphological tags) ``K = 10 %`` fits 22x faster than exact training
# (see the benchmarks in the documentation).
fig, ax = plt.subplots(figsize=(5, 3.5))
for name, (seconds, accuracy) in results.items():
    ax.scatter(seconds, accuracy, s=40)
    ax.annotate(name, (seconds, accuracy), textcoords="offset points",
                xytext=(5, 5), fontsize="small")
ax.set_xlabel("fit seconds")
ax.set_ylabel("test accuracy %")
ax.margins(0.3)
fig.tight_layout()
plt.show()
