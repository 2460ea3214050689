"""GPStructTagger's validated temperature against every temperature of its grid.

GPStructTagger's defaults choose the prior variance and the posterior
temperature ``T`` inside ``fit`` (:func:`skgpstruct._gpstruct.posterior_cv.cv_posterior`).
This script asks how much calibration that choice leaves on the table: per
fold of ``folds.json`` it fits the default GP, then, at the variance it
chose, one GP for every temperature of the grid, and scores each on the
fold's test sentences (token error, marginal log loss, ECE over 15 bins),
beside the validation's own held-out log loss and ECE (with its standard
error) for that temperature.

The table holds, per temperature, the mean over folds of the test metrics,
and three summary rows: the validated choice (the defaults' numbers), the
best single temperature for all folds (chosen on the test sentences, so an
optimistic reference, not a rule) and each fold's best temperature (an
oracle). The per-fold rows are in the JSON file.

Usage::

    python benchmarks/temperature_sweep.py [--task chunking] [--features gpstruct]
        [--folds 0 1 2 3 4]

Results go to the section ``<task>_<features>`` of
``benchmarks/results/temperature_sweep.{md,json}`` (the other sections are
kept).
"""

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import write_results  # noqa: E402
from gpstruct_table1 import _fold_data  # noqa: E402

from skgpstruct import GPStructTagger  # noqa: E402
from skgpstruct.datasets import load_benchmark  # noqa: E402
from skgpstruct.metrics import expected_calibration_error, marginal_log_loss  # noqa: E402


def _fit(X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GPStructTagger(**params).fit(X, y)


def _scores(model, X_te, y_te):
    """Token error %, log loss and ECE % on the test sentences (a label
    unseen in training gets probability 0 and counts as an error)."""
    labels = np.union1d(model.classes_, np.unique(np.concatenate(y_te)))
    cols = np.searchsorted(labels, model.classes_)
    P = []
    for p in model.predict_marginals(X_te):
        q = np.zeros((p.shape[0], labels.size))
        q[:, cols] = p
        P.append(q)
    error = 100.0 * float(np.mean(np.concatenate(model.predict(X_te))
                                  != np.concatenate(y_te)))
    return (error, float(marginal_log_loss(y_te, P, labels=labels)),
            100.0 * float(expected_calibration_error(y_te, P, labels=labels)))


def run_fold(bunch, fold):
    X_tr, y_tr, X_te, y_te = _fold_data(bunch, *bunch.folds[fold])
    gp = _fit(X_tr, y_tr, random_state=fold)
    variance, chosen = float(gp.kernel_.variance), float(gp.temperature_)
    res = gp.temperature_cv_results_
    i = int(np.flatnonzero(np.asarray(res["variance"]) == variance)[0])
    rows = []
    for j, T in enumerate(np.asarray(res["temperature"], dtype=float)):
        model = gp if T == chosen else _fit(X_tr, y_tr, random_state=fold,
                                            kernel_variance=variance, temperature=T)
        error, log_loss, ece = _scores(model, X_te, y_te)
        rows.append({"T": float(T), "error %": error, "log loss": log_loss, "ECE %": ece,
                     "validation log loss": float(res["log_loss"][i][j]),
                     "validation ECE %": 100.0 * float(res["calibration_error"][i][j]),
                     "validation ECE se %": 100.0 * float(res["calibration_error_se"][i][j])})
        print(f"fold {fold} sigma^2 {variance:g} chosen T {chosen:g} | T {T:g}: "
              f"error {error:.2f} log loss {log_loss:.4f} ECE {ece:.2f} | validation "
              f"ECE {rows[-1]['validation ECE %']:.2f} +- "
              f"{rows[-1]['validation ECE se %']:.2f}", flush=True)
    return {"fold": fold, "variance": variance, "chosen": chosen, "rows": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="chunking")
    parser.add_argument("--features", default="gpstruct")
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    args = parser.parse_args(argv)
    bunch = load_benchmark(args.task, features=args.features)
    report(args.task, args.features, args.folds, [run_fold(bunch, f) for f in args.folds])


def report(task, features, folds, per_fold):
    """Print and write the table of the ``per_fold`` results of :func:`run_fold`."""
    temps = [r["T"] for r in per_fold[0]["rows"]]
    metrics = ("error %", "log loss", "ECE %")

    def mean_of(pick):
        """Mean over folds of the test metrics of the row ``pick(fold)``."""
        chosen = [pick(f) for f in per_fold]
        return {m: float(np.mean([r[m] for r in chosen])) for m in metrics}

    rows = []
    for k, T in enumerate(temps):
        rows.append({"temperature": f"{T:g} (all folds)", **mean_of(lambda f: f["rows"][k])})
    fixed = min(range(len(temps)), key=lambda k: rows[k]["ECE %"])
    rows.append({"temperature": "validated (the defaults)",
                 **mean_of(lambda f: next(r for r in f["rows"] if r["T"] == f["chosen"]))})
    rows.append({**rows[fixed],
                 "temperature": f"best single T on the test folds ({temps[fixed]:g})"})
    rows.append({"temperature": "each fold's best T on its test sentences (oracle)",
                 **mean_of(lambda f: min(f["rows"], key=lambda r: r["ECE %"]))})
    choices = ", ".join(f"fold {f['fold']}: sigma^2 {f['variance']:g}, T {f['chosen']:g} "
                        f"(test-best T {min(f['rows'], key=lambda r: r['ECE %'])['T']:g})"
                        for f in per_fold)
    write_results(
        "temperature_sweep", rows,
        ["temperature"] + list(metrics),
        title=(f"GPStructTagger on {task} ({features} features): the validated "
               "temperature against every temperature of the grid"),
        notes=[f"Mean over folds {folds} of the test sentences' token error, "
               "marginal log loss and ECE (15 bins), each temperature at the prior "
               "variance the defaults chose on that fold.",
               f"Choices: {choices}.",
               "The last two rows are chosen on the test sentences: references, not rules.",
               f"python benchmarks/temperature_sweep.py --task {task} "
               f"--features {features}"],
        extra={"task": task, "features": features, "folds": folds, "per_fold": per_fold},
        section=f"{task}_{features}")


if __name__ == "__main__":
    main()
