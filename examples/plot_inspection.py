"""
=======================
Inspecting a fitted CRF
=======================

:mod:`skgpstruct.inspection` shows a fitted
:class:`~skgpstruct.RandomizedCRFTagger` as sklearn-crfsuite does: state
features (feature, label) and transitions (label, next label) with their
weights, named by the pipeline's transformers.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from skgpstruct import RandomizedCRFTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.features import SequenceVectorizer
from skgpstruct.inspection import top_features, transition_features

# %%
# Feature dicts, as sklearn-crfsuite takes them
# ---------------------------------------------
# Synthetic binary features, turned into one dict per token (``"f7": 1``),
# and letters as labels.
X, y = make_chain_data(n_sequences=150, n_classes=4, n_features=12, sparse=True,
                       noise=0.2, random_state=0)
names = np.array(list("ABCD"))
X_dicts = [[{f"f{j}": 1.0 for j in row.indices} for row in x] for x in X]
y_names = [names[labels] for labels in y]

model = make_pipeline(SequenceVectorizer(), RandomizedCRFTagger(c1=0.05, c2=0.05))
model.fit(X_dicts, y_names)

# %%
# The strongest state features
# ----------------------------
# ``top_features`` takes the names from the pipeline's transformers (here
# :class:`~skgpstruct.features.SequenceVectorizer`): ``((feature, label),
# weight)`` pairs, the strongest first.
for (feature, label), weight in top_features(model, n=8):
    print(f"{weight:+.3f}  {feature:>4} -> {label}")

print("strongest negative:")
for (feature, label), weight in top_features(model, n=4, order="negative"):
    print(f"{weight:+.3f}  {feature:>4} -> {label}")

# %%
# Transitions
# -----------
# ``transition_features`` gives ``{(label, next label): weight}``, like
# sklearn-crfsuite's ``transition_features_``.
transitions = transition_features(model)
labels = list(model[-1].classes_)
matrix = np.array([[transitions.get((a, b), 0.0) for b in labels] for a in labels])
fig, ax = plt.subplots(figsize=(4, 3.5))
limit = np.abs(matrix).max()
image = ax.imshow(matrix, cmap="RdBu_r", vmin=-limit, vmax=limit)
ax.set_xticks(range(len(labels)), labels)
ax.set_yticks(range(len(labels)), labels)
ax.set_xlabel("next label")
ax.set_ylabel("label")
fig.colorbar(image, ax=ax, label="weight")
fig.tight_layout()
plt.show()
