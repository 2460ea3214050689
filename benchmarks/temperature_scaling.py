"""Post-hoc temperature scaling of both taggers
(:class:`skgpstruct.calibration.TemperatureScaledTagger`).

For each task (``basenp``, ``chunking``) and feature path (``gpstruct``: the
papers' features; ``crfpp``: the CRF++ template's), on the five folds of
``folds.json`` (the papers' five-fold protocol), every model is fitted on the fold's
training sentences as it is and wrapped in
``TemperatureScaledTagger(model, cv=3)`` (the temperature chosen by the
pooled marginal log loss of 3-fold cross-validation on the training
sentences, then the model refitted on all of them), and both are scored on
the fold's test sentences as in ``benchmarks/calibration.py``: token error %,
marginal log loss, Brier score, ECE % (15 bins) and error % at 80 % coverage.

Models: RandomizedCRFTagger in exact mode at each ``--c2`` (0.01, 0.1, 1,
10: crfsuite's best-error c2 of each task among them, and penalties off it,
as a user who tunes ``c2`` for error or keeps a default would have), and
GPStructTagger with default parameters (``--gp-features``: the paths it runs
on, the papers' by default; its fits are the slow part).

The table holds the means over the folds, the mean temperature, and the
paired differences (scaled minus plain) of log loss and ECE with their
standard errors over the folds. Results go to the section ``default`` of
``benchmarks/results/temperature_scaling.{md,json}`` (``--name KEY``: the
section ``KEY``).

Usage::

    python benchmarks/temperature_scaling.py [--tasks basenp chunking]
        [--features gpstruct crfpp] [--folds 0 1 2 3 4] [--c2 0.01 0.1 1 10]
        [--gp-features gpstruct] [--quick] [--name SECTION]

``--quick`` runs fold 0 of basenp, papers' features. The GP on the CRF++
template (the section ``crfpp_gp`` of
``benchmarks/results/temperature_scaling.md``)::

    python benchmarks/temperature_scaling.py --features crfpp --gp-features crfpp \
        --name crfpp_gp
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_name_argument, section_key, write_results  # noqa: E402
from calibration import _fit_ours  # noqa: E402
from gpstruct_table1 import _fold_data  # noqa: E402

from skgpstruct import GPStructTagger, RandomizedCRFTagger  # noqa: E402
from skgpstruct.calibration import TemperatureScaledTagger  # noqa: E402
from skgpstruct.datasets import load_benchmark  # noqa: E402

METRICS = ["error %", "log loss", "Brier", "ECE %", "error % at 80 % coverage"]


def _run(model, X_tr, y_tr, X_te, y_te):
    out = _fit_ours(model, X_tr, y_tr, X_te, y_te)
    out = {m: float(out[m]) for m in METRICS + ["fit s"]}
    out["temperature"] = float(getattr(model, "temperature_", 1.0)
                               if isinstance(model, TemperatureScaledTagger) else 1.0)
    return out


def _models(c2s, with_gp, seed):
    out = {f"RandomizedCRFTagger exact c2={c2}": RandomizedCRFTagger(
        n_top=None, c2=c2, random_state=seed) for c2 in c2s}
    if with_gp:
        out["GPStructTagger"] = GPStructTagger(random_state=seed)
    return out


def _paired(plain, scaled, metric):
    d = np.array([s[metric] - p[metric] for p, s in zip(plain, scaled)])
    se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
    return float(d.mean()), float(se)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["basenp", "chunking"])
    parser.add_argument("--features", nargs="+", default=["gpstruct", "crfpp"])
    parser.add_argument("--gp-features", nargs="*", default=["gpstruct"],
                        help="feature paths GPStructTagger runs on (none: CRFs only)")
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--c2", nargs="+", type=float, default=[0.01, 0.1, 1.0, 10.0])
    parser.add_argument("--quick", action="store_true")
    add_name_argument(parser, "temperature_scaling")
    args = parser.parse_args(argv)
    section = section_key("temperature_scaling", args.name)
    if args.quick:
        args.tasks, args.features, args.folds = ["basenp"], ["gpstruct"], [0]
    rows, per_fold = [], []
    for task in args.tasks:
        for features in args.features:
            bunch = load_benchmark(task, features=features)
            results = {}
            for k in args.folds:
                X_tr, y_tr, X_te, y_te = _fold_data(bunch, *bunch.folds[k])
                models = _models(args.c2, features in args.gp_features, seed=k)
                for name, model in models.items():
                    plain = _run(model, X_tr, y_tr, X_te, y_te)
                    scaled = _run(TemperatureScaledTagger(model, cv=3), X_tr, y_tr, X_te, y_te)
                    results.setdefault(name, []).append((plain, scaled))
                    per_fold.append({"task": task, "features": features, "model": name,
                                     "fold": k, "plain": plain, "scaled": scaled})
                    print(f"{task} {features} fold {k} {name}: tau {scaled['temperature']:.3f}; "
                          + ", ".join(f"{m} {plain[m]:.4g} -> {scaled[m]:.4g}"
                                      for m in METRICS), flush=True)
            for name, pairs in results.items():
                plain = [p for p, _ in pairs]
                scaled = [s for _, s in pairs]
                for label, runs in (("plain", plain), ("scaled", scaled)):
                    row = {"task": task, "features": features, "model": name,
                           "calibration": label}
                    row.update({m: float(np.mean([r[m] for r in runs]))
                                for m in METRICS + ["fit s"]})
                    if label == "scaled":
                        row["temperature"] = float(np.mean([r["temperature"] for r in runs]))
                        for m in ("log loss", "ECE %"):
                            d, se = _paired(plain, scaled, m)
                            row[f"{m} scaled - plain"] = f"{d:+.4f} +- {se:.4f}"
                    rows.append(row)
    columns = ["task", "features", "model", "calibration", *METRICS, "temperature",
               "log loss scaled - plain", "ECE % scaled - plain", "fit s"]
    notes = [
        f"Means over folds {args.folds}; 'scaled': TemperatureScaledTagger(model, cv=3), "
        "the temperature chosen by the pooled held-out marginal log loss of 3-fold "
        "cross-validation on the training sentences; 'temperature' is its mean over the "
        "folds; the differences are paired by fold (mean +- standard error).",
        "ECE over 15 equal-width bins of the max marginal; error % at 80 % coverage: "
        "among the 80 % of test tokens with the highest max marginal. A test label "
        "unseen in a training fold gets marginal 0.",
        "GPStructTagger: default parameters; RandomizedCRFTagger: n_top=None (exact).",
    ]
    write_results("temperature_scaling", rows, columns,
                  title="Temperature scaling of the token marginals (mean over folds)",
                  notes=notes, extra={"per_fold": per_fold, "folds": args.folds,
                                      "c2": args.c2}, section=section)


if __name__ == "__main__":
    main()
