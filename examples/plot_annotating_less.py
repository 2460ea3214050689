"""
===============
Annotating less
===============

Three things annotators ask of a tagger, on sequences drawn from a random
linear-chain model:

* learn from the tokens they did label, even when only part of a sentence is
  labelled (``None`` marks an unknown label in ``fit``);
* respect what they already know at prediction (``allowed=``: a forced label
  or a set of labels per token);
* tell them which tokens to label next (the GP's token mutual information).
"""

# %%
# Partial labels: the same number of labelled tokens, spread or whole
# --------------------------------------------------------------------
# A quarter of the training tokens is labelled, either as a random quarter
# of every sequence (the rest ``None``) or as whole sequences holding as
# many tokens. Both taggers marginalise the unknown labels: the likelihood
# sums over the label paths that agree with the known ones.
import matplotlib.pyplot as plt
import numpy as np

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.metrics import token_error_rate

X, y = make_chain_data(n_sequences=400, n_classes=4, n_features=10, random_state=0)
X_train, y_train, X_test, y_test = X[:300], y[:300], X[300:], y[300:]
rng = np.random.default_rng(0)

spread = []
for seq in y_train:
    seq = list(seq.tolist())
    keep = rng.random(len(seq)) < 0.25
    spread.append([label if k else None for label, k in zip(seq, keep)])
budget = sum(label is not None for seq in spread for label in seq)
order, whole, count = rng.permutation(len(X_train)), [], 0
for i in order:
    if count >= budget:
        break
    whole.append(i)
    count += len(y_train[i])
print(f"{budget} labelled tokens spread over {len(X_train)} sequences, "
      f"or {count} in {len(whole)} whole sequences")

errors = {}
for name, make in [("CRF", lambda: RandomizedCRFTagger(random_state=0)),
                   ("GP", lambda: GPStructTagger(random_state=0))]:
    part = make().fit(X_train, spread)
    full = make().fit([X_train[i] for i in whole], [y_train[i] for i in whole])
    errors[name] = (token_error_rate(y_test, part.predict(X_test)),
                    token_error_rate(y_test, full.predict(X_test)))
    print(f"{name}: test error {errors[name][0]:.3f} (spread) against "
          f"{errors[name][1]:.3f} (whole sequences)")

fig, ax = plt.subplots(figsize=(5, 3))
pos = np.arange(len(errors))
ax.bar(pos - 0.2, [e[0] for e in errors.values()], 0.4, label="partial, spread")
ax.bar(pos + 0.2, [e[1] for e in errors.values()], 0.4, label="whole sequences")
ax.set_xticks(pos, list(errors))
ax.set_ylabel("test token error")
ax.legend()
fig.tight_layout()

# %%
# Constraints at prediction
# -------------------------
# Force the second token's label and allow two labels at the third: the
# result is the distribution given the constraint (for the GP its posterior
# predictive given that the path lies in the allowed set).
gp = GPStructTagger(random_state=0).fit(X_train, y_train)
allowed = [[None, 2, [0, 1]] + [None] * (len(X_test[0]) - 3)]
print("unconstrained:", gp.predict(X_test[:1])[0][:5])
print("constrained:  ", gp.predict(X_test[:1], allowed=allowed)[0][:5])
for labels, p in gp.predict_nbest(X_test[:1], 3, allowed=allowed)[0]:
    print(f"  p = {p:.3f}: {labels[:5]}")

# %%
# Which tokens to label next
# --------------------------
# The mutual information between a token's label and the GP's posterior is
# the part of its uncertainty that more labels would remove (BALD); the
# tokens where it is largest are the ones to ask the annotator about.
mi = gp.predict_uncertainty(X_test[:20], "mutual_information")
flat = np.concatenate(mi)
print(f"the 5 most informative tokens of 20 test sequences: MI {np.sort(flat)[-5:]}")
