"""sklearn-crfsuite's tutorial at full size: sklearn-crfsuite against the
drop-in ``skgpstruct.crfsuite`` (only the import changed).

CoNLL-2002 Spanish NER (``esp.train`` / ``esp.testb`` under the data home),
the tutorial's features (``_conll.tutorial_features``, the tutorial's
``word2features``) and its model, ``CRF(algorithm="lbfgs", c1=0.1, c2=0.1,
max_iterations=100, all_possible_transitions=True)``, fitted by each package
in turn (``--repeats`` times, the order alternating) in this process after a
warm-up fit on 20 sentences (numba compiles there, not in the timed fit).
Columns: the tutorial's score, ``metrics.flat_f1_score(y_test, y_pred,
average="weighted", labels=labels)`` with ``labels`` the classes but
``O``; its difference to sklearn-crfsuite's; entity F1 (conlleval's); fit,
``predict`` and ``predict_marginals`` seconds (medians) and the fit's ratio
to sklearn-crfsuite's in the same repeat (median); the iterations.
``--search N`` also runs the tutorial's ``RandomizedSearchCV`` (c1 ~
expon(0.5), c2 ~ expon(0.05), ``cv=3``, ``n_iter=N``, the same
``random_state`` for both packages) and scores its best estimator on the
test set. Results: the section ``default`` of
``benchmarks/results/crfsuite_tutorial.{md,json}`` (``--name KEY``: ``KEY``).

Usage::

    python benchmarks/crfsuite_tutorial.py [--repeats 3] [--n-jobs 1]
        [--search 0] [--max-sentences N] [--name SECTION]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_name_argument, section_key, write_results  # noqa: E402
from _conll import read_columns, tutorial_features  # noqa: E402

from skgpstruct.datasets import get_data_home  # noqa: E402
from skgpstruct.metrics import chunk_f1_score  # noqa: E402

TUTORIAL = dict(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100,
                all_possible_transitions=True)


def load(name, limit=None):
    sents = read_columns(get_data_home() / "conll2002" / name)[:limit]
    X = [[tutorial_features(s, i) for i in range(len(s))] for s in sents]
    y = [[tok[-1] for tok in s] for s in sents]
    return X, y


def packages():
    import sklearn_crfsuite
    import sklearn_crfsuite.metrics  # noqa: F401  (the tutorial imports it too)

    from skgpstruct import crfsuite
    return {"sklearn-crfsuite": sklearn_crfsuite, "skgpstruct.crfsuite": crfsuite}


def make(package, name, n_jobs, **params):
    if name == "skgpstruct.crfsuite":
        params["n_jobs"] = n_jobs
    return package.CRF(**params)


def run(package, name, data, n_jobs):
    X_tr, y_tr, X_te, y_te = data
    crf = make(package, name, n_jobs, **TUTORIAL)
    t0 = time.perf_counter()
    crf.fit(X_tr, y_tr)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    y_pred = crf.predict(X_te)
    pred_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    crf.predict_marginals(X_te)
    marg_s = time.perf_counter() - t0
    return crf, y_pred, fit_s, pred_s, marg_s


def search(package, name, data, n_iter, n_jobs):
    import scipy.stats
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import RandomizedSearchCV

    X_tr, y_tr, X_te, y_te = data
    labels = sorted({v for s in y_tr for v in s} - {"O"})
    crf = make(package, name, n_jobs, algorithm="lbfgs", max_iterations=100,
               all_possible_transitions=True)
    space = {"c1": scipy.stats.expon(scale=0.5), "c2": scipy.stats.expon(scale=0.05)}
    f1 = make_scorer(package.metrics.flat_f1_score, average="weighted", labels=labels)
    rs = RandomizedSearchCV(crf, space, cv=3, n_iter=n_iter, scoring=f1, random_state=0)
    t0 = time.perf_counter()
    rs.fit(X_tr, y_tr)
    seconds = time.perf_counter() - t0
    test = package.metrics.flat_f1_score(y_te, rs.best_estimator_.predict(X_te),
                                         average="weighted", labels=labels)
    return rs.best_params_, rs.best_score_, test, seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--search", type=int, default=0, metavar="N_ITER")
    parser.add_argument("--max-sentences", type=int, default=None)
    add_name_argument(parser, "crfsuite_tutorial")
    args = parser.parse_args(argv)
    section = section_key("crfsuite_tutorial", args.name)
    data = (*load("esp.train", args.max_sentences), *load("esp.testb", args.max_sentences))
    pkgs = packages()
    for name, package in pkgs.items():  # warm-up: numba compiles here
        make(package, name, args.n_jobs, **TUTORIAL).fit(data[0][:20], data[1][:20])
    labels = sorted({v for s in data[1] for v in s} - {"O"})
    results = {name: [] for name in pkgs}
    ratios = []
    for r in range(args.repeats):
        order = list(pkgs) if r % 2 == 0 else list(pkgs)[::-1]
        times = {}
        for name in order:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                crf, y_pred, fit_s, pred_s, marg_s = run(pkgs[name], name, data, args.n_jobs)
            f1w = pkgs[name].metrics.flat_f1_score(data[3], y_pred, average="weighted",
                                                   labels=labels)
            n_iter = len(crf.training_log_.iterations)
            results[name].append((f1w, chunk_f1_score(data[3], list(y_pred)), fit_s,
                                  pred_s, marg_s, n_iter))
            times[name] = fit_s
            print(f"repeat {r + 1}/{args.repeats} {name}: fit {fit_s:.1f} s, "
                  f"{n_iter} iterations, weighted F1 {f1w:.4f}", flush=True)
        ratios.append(times["skgpstruct.crfsuite"] / times["sklearn-crfsuite"])
    ref = results["sklearn-crfsuite"][0][0]
    rows = []
    for name, res in results.items():
        first = res[0]
        rows.append({
            "package": name, "flat_f1_score (weighted)": round(first[0], 4),
            "minus crfsuite's": float(first[0] - ref),
            "entity F1": round(100 * first[1], 2),
            "fit s": float(np.median([x[2] for x in res])),
            "fit / crfsuite's": (1.0 if name == "sklearn-crfsuite"
                                 else float(np.median(ratios))),
            "predict s": float(np.median([x[3] for x in res])),
            "predict_marginals s": float(np.median([x[4] for x in res])),
            "iterations": first[5],
            "same in repeats": len({round(x[0], 10) for x in res}) == 1,
        })
    notes = [f"CoNLL-2002 Spanish NER, {len(data[0])} training / {len(data[2])} test "
             f"sentences (esp.train / esp.testb), the tutorial's features and "
             f"CRF({', '.join(f'{k}={v!r}' for k, v in TUTORIAL.items())}).",
             f"Medians of {args.repeats} repeats (fit ratio: per repeat, then the "
             f"median); n_jobs={args.n_jobs} for skgpstruct.crfsuite."]
    if args.search:
        for name, package in pkgs.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                best, cv, test, seconds = search(package, name, data, args.search,
                                                 args.n_jobs)
            notes.append(f"RandomizedSearchCV (cv=3, n_iter={args.search}) with {name}: "
                         f"best c1={best['c1']:.4f}, c2={best['c2']:.4f}, cv F1 {cv:.4f}, "
                         f"test F1 {test:.4f}, {seconds:.0f} s.")
            print(notes[-1], flush=True)
    columns = ["package", "flat_f1_score (weighted)", "minus crfsuite's", "entity F1",
               "fit s", "fit / crfsuite's", "predict s", "predict_marginals s",
               "iterations", "same in repeats"]
    write_results("crfsuite_tutorial", rows, columns,
                  title="sklearn-crfsuite's tutorial with only the import changed",
                  notes=notes, extra={"repeats": args.repeats, "n_jobs": args.n_jobs},
                  section=section)


if __name__ == "__main__":
    main()
