"""
===========
Quick start
===========

Draw labelled sequences from a random linear-chain model, fit both taggers,
and compare their token error with a per-token classifier that sees the same
features but not the transitions between labels.
"""

# %%
# Data
# ----
# :func:`~skgpstruct.datasets.make_chain_data` returns a list of sequences
# ``X`` (one ``(n_tokens, n_features)`` array each) and a list of label
# sequences ``y``: the input format of every skgpstruct estimator.
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.metrics import token_error_rate

X, y = make_chain_data(n_sequences=200, n_classes=4, n_features=10, random_state=0)
X_train, y_train, X_test, y_test = X[:100], y[:100], X[100:], y[100:]
print(f"{len(X_train)} training sequences, first one: X {X_train[0].shape}, "
      f"y {y_train[0][:8]}...")

# %%
# Fit
# ---
# The CRF (exact mode, L-BFGS) and the Gaussian-process CRF; the per-token
# logistic regression sees every token alone.
models = {
    "per-token logistic regression": None,
    "RandomizedCRFTagger (exact CRF)": RandomizedCRFTagger(c2=0.1, random_state=0),
    "GPStructTagger": GPStructTagger(random_state=0),
}
errors, seconds = {}, {}
for name, model in models.items():
    start = time.perf_counter()
    if model is None:
        logreg = LogisticRegression(max_iter=1000).fit(
            np.concatenate(X_train), np.concatenate(y_train))
        pred = [logreg.predict(x) for x in X_test]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X_train, y_train)
        pred = model.predict(X_test)
    seconds[name] = time.perf_counter() - start
    errors[name] = 100 * token_error_rate(y_test, pred)
    print(f"{name:<34} token error {errors[name]:5.2f} %   fit {seconds[name]:.2f} s")

# %%
# The transitions are what the CRFs add: the per-token model cannot use the
# neighbouring labels.
fig, ax = plt.subplots(figsize=(6, 2.5))
ax.barh(list(errors), list(errors.values()), color=["0.6", "C0", "C1"])
ax.set_xlabel("token error % (test)")
ax.invert_yaxis()
fig.tight_layout()

# %%
# Marginals of one test sequence
# ------------------------------
# ``predict_marginals`` gives ``p(y_t = j | x)`` per token: one
# ``(n_tokens, n_classes)`` array per sequence, columns in ``classes_`` order.
gp = models["GPStructTagger"]
marginals = gp.predict_marginals(X_test[:1])[0]
fig, ax = plt.subplots(figsize=(7, 2.5))
image = ax.imshow(marginals.T, aspect="auto", cmap="Blues", vmin=0, vmax=1)
ax.plot(np.searchsorted(gp.classes_, y_test[0]), "o", mfc="none", mec="C3",
        label="true label")
ax.set_yticks(range(len(gp.classes_)), gp.classes_)
ax.set_xlabel("token")
ax.set_ylabel("label")
ax.legend(loc="upper right", fontsize="small")
fig.colorbar(image, ax=ax, label="marginal")
fig.tight_layout()
plt.show()
