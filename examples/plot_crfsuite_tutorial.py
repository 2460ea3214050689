"""
=============================================
sklearn-crfsuite's tutorial, one import later
=============================================

sklearn-crfsuite's tutorial (CoNLL-2002 Spanish named entities) with
``from skgpstruct import crfsuite as sklearn_crfsuite`` as its only change,
on a subset of the data so that this page builds in seconds (the full size,
beside sklearn-crfsuite: ``benchmarks/crfsuite_tutorial.py``). Then what
crfsuite cannot do: the tokens and entities the model is least sure of, how
well its probabilities are calibrated, and the Bayesian tagger beside it.
"""

import warnings
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np

from skgpstruct import crfsuite as sklearn_crfsuite
from skgpstruct.crfsuite import metrics
from skgpstruct.datasets import get_data_home
from skgpstruct.metrics import chunk_f1_score, expected_calibration_error, marginal_log_loss
from skgpstruct.plotting import plot_reliability_diagram

# %%
# The data
# --------
# The tutorial reads ``nltk.corpus.conll2002.iob_sents``; the same
# ``(word, part of speech, entity tag)`` triples come from the CoNLL-2002
# files (here the first 1,000 training and 500 test sentences).

DATA = get_data_home() / "conll2002"


def iob_sents(name, limit):
    sents, cur = [], []
    with open(DATA / name, encoding="utf-8") as lines:
        for line in lines:
            parts = line.split()
            if parts:
                cur.append(tuple(parts))
            elif cur:
                sents.append(cur)
                cur = []
                if len(sents) == limit:
                    break
    return sents


train_sents = iob_sents("esp.train", 1000)
test_sents = iob_sents("esp.testb", 500)

# %%
# The tutorial's features and model
# ---------------------------------


def word2features(sent, i):
    word = sent[i][0]
    postag = sent[i][1]
    features = {
        'bias': 1.0,
        'word.lower()': word.lower(),
        'word[-3:]': word[-3:],
        'word[-2:]': word[-2:],
        'word.isupper()': word.isupper(),
        'word.istitle()': word.istitle(),
        'word.isdigit()': word.isdigit(),
        'postag': postag,
        'postag[:2]': postag[:2],
    }
    if i > 0:
        word1 = sent[i-1][0]
        postag1 = sent[i-1][1]
        features.update({
            '-1:word.lower()': word1.lower(),
            '-1:word.istitle()': word1.istitle(),
            '-1:word.isupper()': word1.isupper(),
            '-1:postag': postag1,
            '-1:postag[:2]': postag1[:2],
        })
    else:
        features['BOS'] = True
    if i < len(sent)-1:
        word1 = sent[i+1][0]
        postag1 = sent[i+1][1]
        features.update({
            '+1:word.lower()': word1.lower(),
            '+1:word.istitle()': word1.istitle(),
            '+1:word.isupper()': word1.isupper(),
            '+1:postag': postag1,
            '+1:postag[:2]': postag1[:2],
        })
    else:
        features['EOS'] = True
    return features


def sent2features(sent):
    return [word2features(sent, i) for i in range(len(sent))]


def sent2labels(sent):
    return [label for token, postag, label in sent]


def sent2tokens(sent):
    return [token for token, postag, label in sent]


X_train = [sent2features(s) for s in train_sents]
y_train = [sent2labels(s) for s in train_sents]
X_test = [sent2features(s) for s in test_sents]
y_test = [sent2labels(s) for s in test_sents]

crf = sklearn_crfsuite.CRF(
    algorithm='lbfgs',
    c1=0.1,
    c2=0.1,
    max_iterations=100,
    all_possible_transitions=True
)
crf.fit(X_train, y_train)

labels = list(crf.classes_)
labels.remove('O')
y_pred = crf.predict(X_test)
print("weighted F1:", round(metrics.flat_f1_score(y_test, y_pred, average='weighted',
                                                   labels=labels), 4))
sorted_labels = sorted(labels, key=lambda name: (name[1:], name[0]))
print(metrics.flat_classification_report(y_test, y_pred, labels=sorted_labels, digits=3))

print("top transitions:")
for (label_from, label_to), weight in Counter(crf.transition_features_).most_common(5):
    print("%-6s -> %-7s %0.6f" % (label_from, label_to, weight))

# %%
# Where the model is unsure
# -------------------------
# ``predict_marginals`` gives each token's label probabilities. The
# predicted entities whose weakest token has the lowest probability are
# those to check first; the same ranking over tokens points at the words
# to label next.

marginals = crf.predict_marginals(X_test)
found = []
for n, (sent, tags, probs) in enumerate(zip(test_sents, y_pred, marginals)):
    start = None
    for t, tag in enumerate(list(tags) + ["O"]):
        if start is not None and not tag.startswith("I-"):
            conf = min(probs[k][tags[k]] for k in range(start, t))
            words = " ".join(w for w, _, _ in sent[start:t])
            found.append((conf, words, tags[start][2:]))
            start = None
        if tag.startswith("B-") or (tag.startswith("I-") and start is None):
            start = t
found.sort()
print("the 8 predicted entities the CRF is least sure of:")
for conf, words, kind in found[:8]:
    print(f"  {conf:.2f}  {kind:4s} {words}")

# %%
# How well calibrated, and the Bayesian tagger beside it
# ------------------------------------------------------
# ``tagger="gp"`` puts :class:`~skgpstruct.GPStructTagger` underneath,
# which chooses its prior and a posterior temperature inside ``fit`` (here on
# the first 300 sentences, to keep the page quick) and averages its
# marginals over the posterior. The reliability diagram compares each
# confidence bin's accuracy with its confidence: on the diagonal, the
# probabilities mean what they say.

small = 300
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    models = {
        "CRF (tutorial settings)": sklearn_crfsuite.CRF(
            c1=0.1, c2=0.1, max_iterations=100,
            all_possible_transitions=True).fit(X_train[:small], y_train[:small]),
        "GPStructTagger": sklearn_crfsuite.CRF(tagger="gp", random_state=0).fit(
            X_train[:small], y_train[:small]),
    }

fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharey=True)
for ax, (name, model) in zip(axes, models.items()):
    pred = model.predict(X_test)
    probs = [np.array([[tok[c] for c in model.classes_] for tok in sent])
             for sent in model.predict_marginals(X_test)]
    ll = marginal_log_loss(y_test, probs, labels=model.classes_)
    ece = expected_calibration_error(y_test, probs, labels=model.classes_)
    f1 = chunk_f1_score(y_test, list(pred))
    print(f"{name}: entity F1 {100 * f1:.2f}, log loss {ll:.3f}, ECE {100 * ece:.2f} %")
    plot_reliability_diagram(y_test, probs, labels=model.classes_, ax=ax)
    ax.set_title(f"{name}\nECE {100 * ece:.2f} %")
fig.tight_layout()
plt.show()
