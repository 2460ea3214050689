"""
====================================
Uncertainty and calibration
====================================

How well do the token marginals of the two taggers match how often they are
right? A reliability diagram bins the tokens by the tagger's confidence (its
largest marginal) and compares each bin's confidence with its accuracy;
:mod:`skgpstruct.metrics` gives the summary numbers. A CRF with a weak
penalty is over-confident; :class:`~skgpstruct.calibration.TemperatureScaledTagger`
divides its potentials by a temperature chosen on held-out folds. Then the
taggers' uncertainty is used to abstain on the tokens they are least sure
about, and the GP's is split into its parts.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct.calibration import TemperatureScaledTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.metrics import (
    expected_calibration_error,
    marginal_brier_score,
    marginal_log_loss,
    reliability_curve,
    risk_coverage_curve,
    token_error_rate,
)

# A small, noisy training set: where calibration matters.
X, y = make_chain_data(n_sequences=260, n_classes=5, n_features=10, noise=1.0,
                       random_state=1)
X_train, y_train, X_test, y_test = X[:60], y[:60], X[60:], y[60:]

taggers = {
    "CRF (c2=0.01)": RandomizedCRFTagger(c2=0.01, random_state=0),
    "CRF, scaled": TemperatureScaledTagger(RandomizedCRFTagger(c2=0.01, random_state=0),
                                           cv=3),
    "GPStructTagger": GPStructTagger(random_state=0),
}
marginals = {}
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    for name, tagger in taggers.items():
        tagger.fit(X_train, y_train)
        marginals[name] = tagger.predict_marginals(X_test)

for name, tagger in taggers.items():
    P, labels = marginals[name], tagger.classes_
    print(f"{name:<16} error {100 * token_error_rate(y_test, tagger.predict(X_test)):5.2f} %  "
          f"log loss {marginal_log_loss(y_test, P, labels=labels):.3f}  "
          f"Brier {marginal_brier_score(y_test, P, labels=labels):.3f}  "
          f"ECE {100 * expected_calibration_error(y_test, P, labels=labels):.2f} %")
print(f"temperature of the scaled CRF: {taggers['CRF, scaled'].temperature_:.2f}")

# %%
# Reliability diagram
# -------------------
# Points on the diagonal are calibrated: tokens predicted with confidence 0.8
# are right 80 % of the time. Below it, the tagger is over-confident.
fig, ax = plt.subplots(figsize=(5, 4.5))
ax.plot([0, 1], [0, 1], ":", color="0.5", label="calibrated")
for name, tagger in taggers.items():
    confidence, accuracy, counts = reliability_curve(
        y_test, marginals[name], labels=tagger.classes_, n_bins=10)
    keep = counts > 0
    ax.plot(confidence[keep], accuracy[keep], "o-", label=name)
ax.set_xlabel("confidence (largest marginal)")
ax.set_ylabel("accuracy")
ax.set_xlim(0, 1)
ax.set_ylim(0, 1)
ax.legend()
fig.tight_layout()

# %%
# Abstaining on the least sure tokens
# -----------------------------------
# Keep the tokens the tagger is surest about and count the errors among them:
# the error at each coverage (``risk_coverage_curve``). A tagger whose
# confidence ranks its errors well has a curve that falls fast.
fig, ax = plt.subplots(figsize=(5, 4))
for name, tagger in taggers.items():
    coverage, risk = risk_coverage_curve(y_test, marginals[name], labels=tagger.classes_)
    ax.plot(coverage, 100 * np.asarray(risk), label=name)
ax.set_xlabel("coverage (fraction of tokens kept)")
ax.set_ylabel("error % on the kept tokens")
ax.legend()
fig.tight_layout()

# %%
# What the GP does not know
# -------------------------
# ``predict_uncertainty`` splits the GP's uncertainty: ``"entropy"`` is all
# of it, ``"mutual_information"`` the part from not knowing the model
# (epistemic), which more data would remove. With ``per="path"`` both are of
# the whole label sequence, its labels taken jointly: the mutual information
# of the path is the score that active learning ranks unlabelled sentences by.
gp = taggers["GPStructTagger"]
mutual_information = gp.predict_uncertainty(X_test, "mutual_information", per="path")
entropy = gp.predict_uncertainty(X_test, "entropy", per="path")
errors = np.array([np.sum(p != t) for p, t in zip(gp.predict(X_test), y_test)])
fig, ax = plt.subplots(figsize=(5, 4))
points = ax.scatter(entropy, mutual_information, c=errors, cmap="viridis", s=15)
fig.colorbar(points, ax=ax, label="token errors in the sequence")
ax.set_xlabel("entropy of the label path (nats)")
ax.set_ylabel("mutual information of the path (nats)")
fig.tight_layout()
plt.show()
