"""sklearn-crfsuite's tutorial (CoNLL-2002 Spanish NER), unchanged but for
the import: ``from skgpstruct import crfsuite as sklearn_crfsuite``.

The tutorial's code as it runs with today's scikit-learn
(``sklearn.model_selection``, ``cv_results_`` instead of the removed
``grid_search`` / ``grid_scores_``), its data read from
``shared/data/conll2002`` instead of nltk's downloader (``iob_sents`` gives
the same ``(word, pos, label)`` triples), on a subset and with a small search
so that CI stays short; the full size, beside sklearn-crfsuite, is
``benchmarks/crfsuite_tutorial.py``. Skips without the data.
"""

from collections import Counter

import numpy as np
import pytest
import scipy.stats
from sklearn.metrics import make_scorer
from sklearn.model_selection import RandomizedSearchCV

from skgpstruct import crfsuite as sklearn_crfsuite
from skgpstruct.crfsuite import metrics
from skgpstruct.datasets import get_data_home

DATA = get_data_home() / "conll2002"
pytestmark = pytest.mark.skipif(not (DATA / "esp.train").is_file(),
                                reason="shared/data/conll2002 is absent")


def iob_sents(name, limit):
    """nltk's ``conll2002.iob_sents(name)``: sentences of (word, pos, label)."""
    sents, cur = [], []
    with open(DATA / name, encoding="utf-8") as lines:
        for line in lines:
            parts = line.split()
            if not parts:
                if cur:
                    sents.append(cur)
                    cur = []
                    if len(sents) == limit:
                        break
                continue
            cur.append(tuple(parts))
    if cur and len(sents) < limit:
        sents.append(cur)
    return sents


# ---- the tutorial's code from here on (only the import above changed) ----
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


@pytest.fixture(scope="module")
def tutorial():
    train_sents = iob_sents('esp.train', 400)
    test_sents = iob_sents('esp.testb', 300)

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
    return crf, X_train, y_train, X_test, y_test


def test_tutorial_evaluation(tutorial):
    crf, X_train, y_train, X_test, y_test = tutorial
    labels = list(crf.classes_)
    labels.remove('O')

    y_pred = crf.predict(X_test)
    f1 = metrics.flat_f1_score(y_test, y_pred, average='weighted', labels=labels)

    # group B and I results
    sorted_labels = sorted(labels, key=lambda name: (name[1:], name[0]))
    report = metrics.flat_classification_report(y_test, y_pred, labels=sorted_labels,
                                                digits=3)
    # 400 training sentences: the entity F1 of a working CRF, far from chance
    assert 0.4 < f1 <= 1.0
    assert "B-PER" in report and "weighted avg" in report
    assert len(crf.training_log_.iterations) == crf.pipeline_[-1].n_iter_ <= 100


def test_tutorial_features_and_transitions(tutorial):
    crf = tutorial[0]

    def print_transitions(trans_features):
        return ["%-6s -> %-7s %0.6f" % (label_from, label_to, weight)
                for (label_from, label_to), weight in trans_features]

    top = print_transitions(Counter(crf.transition_features_).most_common(20))
    assert len(top) == 20
    # an entity continues its own type: I-PER follows B-PER more than anything
    best = Counter(crf.transition_features_).most_common(1)[0][0]
    assert best[1].startswith("I-") and best[0][2:] == best[1][2:]

    def print_state_features(state_features):
        return ["%0.6f %-8s %s" % (weight, label, attr)
                for (attr, label), weight in state_features]

    lines = print_state_features(Counter(crf.state_features_).most_common(30))
    assert len(lines) == 30
    attrs = {attr for attr, _ in crf.state_features_}
    assert "word.lower():de" in attrs or any(a.startswith("word.lower():") for a in attrs)


def test_tutorial_hyperparameter_search(tutorial):
    _, X_train, y_train, _, _ = tutorial
    X_train, y_train = X_train[:200], y_train[:200]
    crf = sklearn_crfsuite.CRF(
        algorithm='lbfgs',
        max_iterations=30,
        all_possible_transitions=True
    )
    params_space = {
        'c1': scipy.stats.expon(scale=0.5),
        'c2': scipy.stats.expon(scale=0.05),
    }
    labels = sorted({v for s in y_train for v in s} - {'O'})

    # use the same metric for evaluation
    f1_scorer = make_scorer(metrics.flat_f1_score,
                            average='weighted', labels=labels)

    # search (the tutorial: cv=3, n_iter=50, n_jobs=-1)
    rs = RandomizedSearchCV(crf, params_space,
                            cv=2,
                            verbose=0,
                            n_jobs=1,
                            n_iter=2,
                            scoring=f1_scorer,
                            random_state=0)
    rs.fit(X_train, y_train)
    assert set(rs.best_params_) == {'c1', 'c2'}
    assert 0 < rs.best_score_ <= 1
    assert rs.best_estimator_.size_ / 1000000 > 0
    _x = [s['c1'] for s in rs.cv_results_['params']]
    _c = [s for s in rs.cv_results_['mean_test_score']]
    assert len(_x) == len(_c) == 2 and np.isfinite(_c).all()
