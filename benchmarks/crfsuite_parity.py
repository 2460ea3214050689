"""Same settings, same model? RandomizedCRFTagger against sklearn-crfsuite,
judged by the objective both minimise.

On CoNLL-2000 chunking (train / test) and CoNLL-2002 Spanish NER (esp.train
/ esp.testb) with sklearn-crfsuite's tutorial features (``_conll.py``;
ours through :class:`~skgpstruct.features.SequenceVectorizer`), both fit
``-log-likelihood + c1 |w|_1 + c2 ||w||^2`` with the tutorial's settings
(``c1 = c2 = 0.1``, ``all_possible_transitions=True``) for each iteration
cap of ``--max-iter`` (crfsuite: ``max_iterations``; ours: ``max_iter``).
Besides test F1 (chunks, conlleval's rule) and token accuracy, each model's
weights are scored by the *same* objective on the training data: ours
(:func:`skgpstruct._tagging.crf_objective.crf_loss_grad` plus the
penalties), with crfsuite's state weights mapped to our feature columns
(crfsuite's attribute ``f:v`` is our ``f=v``, at the first ``:`` that gives
one of our columns; numeric ones keep their name; the count of attributes
that map to none is the column ``unmapped``)
and its transitions to our matrix, its bias 0 (crfsuite has none; ours is
unpenalised, so at the optimum ours can only be lower). A lower objective
is a better optimum of the one problem; equal objectives with different
F1 would point to a modelling difference, a crfsuite objective below ours
to our optimiser.

Usage::

    python benchmarks/crfsuite_parity.py [--tasks conll2000 conll2002]
        [--max-iter 100 1000] [--max-sentences N] [--ours 0 1 2]

Results: ``benchmarks/results/crfsuite_parity.{md,json}``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_name_argument, write_results  # noqa: E402
from _conll import TASKS, read_columns, tutorial_features  # noqa: E402

from skgpstruct import RandomizedCRFTagger  # noqa: E402
from skgpstruct._input.sequences import SequenceData  # noqa: E402
from skgpstruct._tagging.crf_objective import CRFSpec, crf_loss_grad, layout, penalty  # noqa: E402
from skgpstruct.chain.backend import get_backend  # noqa: E402
from skgpstruct.datasets import get_data_home  # noqa: E402
from skgpstruct.features import SequenceVectorizer  # noqa: E402
from skgpstruct.metrics import chunk_f1_score, flat_accuracy_score  # noqa: E402

SCRIPT = "crfsuite_parity"
C1 = C2 = 0.1
# Our CRF as the defaults give it (no bias, as CRFsuite), with an
# unpenalised per-label bias (fit_intercept=True, the default before), and
# with weights for the seen (feature, label) pairs only (CRFsuite's default).
OURS = (("RandomizedCRFTagger", {}),
        ("RandomizedCRFTagger fit_intercept", {"fit_intercept": True}),
        ("RandomizedCRFTagger seen states", {"all_possible_states": False}))


def sentences(task, max_sentences=None):
    home = Path(get_data_home())
    train, test = (read_columns(home / f)[:max_sentences] for f in TASKS[task])

    def xy(sents):
        return ([[tutorial_features(s, i) for i in range(len(s))] for s in sents],
                [[t[-1] for t in s] for s in sents])

    return xy(train), xy(test)


class Objective:
    """Our penalised objective on the training data, for any weights."""

    def __init__(self, vec, X, y, labels):
        F = sp.vstack(vec.transform(X)).tocsr()
        code = {lab: k for k, lab in enumerate(labels)}
        y_flat = np.array([code[lab] for s in y for lab in s], dtype=np.int64)
        self.data = SequenceData(F, np.array([len(s) for s in y]), y_flat, None)
        self.spec = CRFSpec(np.arange(len(labels)), c2=C2, c1=C1)
        self.D, self.V = F.shape[1], len(labels)

    def __call__(self, W, b, B):
        theta = np.concatenate([W.ravel(), b, B.ravel()])
        n = self.data.n_sequences
        loss, _ = crf_loss_grad(self.spec, theta, self.data, np.arange(n),
                                np.zeros(n, dtype=np.int64), None, get_backend("cpu"))
        l2, _ = penalty(self.spec, theta, self.D)
        cuts = layout(self.spec, self.D)
        l1 = C1 * (np.abs(theta).sum() - np.abs(theta[cuts[1]:cuts[2]]).sum())
        return float(loss), float(l2 + l1)


def crfsuite_weights(crf, vec, labels):
    """crfsuite's weights in our layout, and how many attributes did not map."""
    code = {lab: k for k, lab in enumerate(labels)}
    W, missing = np.zeros((len(vec.vocabulary_), len(labels))), 0
    for (attr, lab), w in crf.state_features_.items():
        j = vec.vocabulary_.get(attr)
        # a string value: crfsuite's "name:value", ours "name=value"; names
        # ("-1:postag") and values ("10:30", the POS ":") may hold ':' too
        cuts = [k for k, ch in enumerate(attr) if ch == ":"]
        while j is None and cuts:
            k = cuts.pop(0)
            j = vec.vocabulary_.get(attr[:k] + "=" + attr[k + 1:])
        if j is None:
            missing += 1
            continue
        W[j, code[lab]] = w
    B = np.zeros((len(labels), len(labels)))
    for (a, b), w in crf.transition_features_.items():
        B[code[a], code[b]] = w
    return W, B, missing


def row(task, model, max_iter, objective, weights, fit_s, y_test, pred, n_iter, extra=()):
    loss, pen = objective(*weights)
    return {"task": task, "model": model, "max_iter": max_iter, "iterations": n_iter,
            "F1": 100 * chunk_f1_score(y_test, pred),
            "token acc": 100 * flat_accuracy_score(y_test, pred),
            "objective": loss + pen, "-log-lik": loss, "penalty": pen,
            "nonzero": int(np.count_nonzero(weights[0])), "fit s": fit_s, **dict(extra)}


def run(task, caps, max_sentences=None, ours=None):
    import sklearn_crfsuite

    (X, y), (Xt, yt) = sentences(task, max_sentences)
    labels = sorted({lab for s in y for lab in s})
    vec = SequenceVectorizer().fit(X)
    objective = Objective(vec, X, y, labels)
    F, Ft = vec.transform(X), vec.transform(Xt)
    with warnings.catch_warnings():  # numba's compile (or cache load) kept out of the times
        warnings.simplefilter("ignore")
        RandomizedCRFTagger(c1=C1, c2=C2, max_iter=2).fit(F[:20], y[:20])
    rows = []
    for cap in caps:
        start = time.perf_counter()
        crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=C1, c2=C2, max_iterations=cap,
                                   all_possible_transitions=True).fit(X, y)
        fit_s = time.perf_counter() - start
        W, B, missing = crfsuite_weights(crf, vec, labels)
        n_iter = len(crf.training_log_.iterations) if crf.training_log_ else None
        rows.append(row(task, "sklearn-crfsuite", cap, objective, (W, np.zeros(len(labels)), B),
                        fit_s, yt, crf.predict(Xt), n_iter, {"unmapped": missing}))
        print(rows[-1], file=sys.stderr, flush=True)
        for name, kwargs in OURS if ours is None else [OURS[i] for i in ours]:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = RandomizedCRFTagger(c1=C1, c2=C2, max_iter=cap, **kwargs).fit(F, y)
            fit_s = time.perf_counter() - start
            rows.append(row(task, name, cap, objective,
                            (ours.coef_, ours.intercept_, ours.transition_), fit_s, yt,
                            ours.predict(Ft), ours.n_iter_))
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--max-iter", nargs="+", type=int, default=[100, 1000])
    parser.add_argument("--max-sentences", type=int, default=None,
                        help="first N training and test sentences (a smoke run)")
    parser.add_argument("--ours", nargs="+", type=int, default=None,
                        help="which of our models (0: the defaults, 1: fit_intercept=True, "
                        "2: all_possible_states=False)")
    add_name_argument(parser, SCRIPT)
    args = parser.parse_args()
    rows = [r for task in args.tasks
            for r in run(task, args.max_iter, args.max_sentences, args.ours)]
    columns = ["task", "model", "max_iter", "iterations", "F1", "token acc", "objective",
               "-log-lik", "penalty", "nonzero", "unmapped", "fit s"]
    write_results(SCRIPT, rows, columns,
                  title="Same settings, same model? Both CRFs scored by one objective",
                  notes=[f"c1 = {C1}, c2 = {C2}, all_possible_transitions=True (the "
                         "tutorial's); objective: ours, on the training data, with "
                         "crfsuite's weights mapped to our columns and its bias 0."],
                  section=args.name)


if __name__ == "__main__":
    main()
