"""How much GPStructTagger's test calibration moves with the seed of the
validation inside ``fit``, and what repeating its split would change.

``fit`` chooses the prior variance and the posterior temperature by 3-fold
validation of the training sequences (:func:`skgpstruct._gpstruct.prior_variance_cv.cv_prior_variance`,
:func:`skgpstruct._gpstruct.posterior_cv.cv_posterior`); ``random_state`` seeds the split and the
validation's draws. On small training sets the choice, and so the test
ECE, depends on that seed. Per seed offset ``s`` this script fits the
default GP on every fold of ``folds.json`` with ``random_state = fold + s``
and scores the fold's test sentences (token error, marginal log loss, ECE
over 15 bins). The table gives, per seed, the mean over folds, then the
mean and standard deviation of those means over the seeds: the calibration
to expect from the defaults, of which ``calibration.md`` (offset 0) is one
draw. ``--repeats R`` validates with ``R`` shuffled splits (repeated
K-fold, ``n_repeats``), which ``fit`` does not do by default.

Usage::

    python benchmarks/validation_seeds.py [--task chunking] [--features gpstruct]
        [--seeds 0 1000 2000 3000 4000] [--repeats 1]

Results go to the section ``<task>_<features>_r<R>`` of
``benchmarks/results/validation_seeds.{md,json}`` (the other sections are
kept).
"""

import argparse
import functools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import write_results  # noqa: E402
from gpstruct_table1 import _fold_data  # noqa: E402
from temperature_sweep import _fit, _scores  # noqa: E402

from skgpstruct._gpstruct import weight_space_form as _gp_features  # noqa: E402
from skgpstruct.datasets import load_benchmark  # noqa: E402

METRICS = ("error %", "log loss", "ECE %")


_VALIDATORS = {name: getattr(_gp_features, name)
               for name in ("cv_prior_variance", "cv_posterior")}


def _with_repeats(n_repeats):
    """Make ``fit``'s two validators use ``n_repeats`` splits (1: the
    package's own functions). Each call wraps the package's functions, so
    calling it again (a reused worker process) does not stack wrappers."""
    for name, validator in _VALIDATORS.items():
        setattr(_gp_features, name, validator if n_repeats == 1 else
                functools.partial(validator, n_repeats=n_repeats))


def run(bunch, folds, seeds):
    out = []
    for offset in seeds:
        for fold in folds:
            X_tr, y_tr, X_te, y_te = _fold_data(bunch, *bunch.folds[fold])
            gp = _fit(X_tr, y_tr, random_state=fold + offset)
            error, log_loss, ece = _scores(gp, X_te, y_te)
            out.append({"seed": offset, "fold": fold, "sigma2": float(gp.kernel_.variance),
                        "T": float(gp.temperature_), "error %": error,
                        "log loss": log_loss, "ECE %": ece})
            print(f"seed +{offset} fold {fold}: sigma^2 {out[-1]['sigma2']:g} "
                  f"T {out[-1]['T']:g} error {error:.2f} log loss {log_loss:.4f} "
                  f"ECE {ece:.2f}", flush=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="chunking")
    parser.add_argument("--features", default="gpstruct")
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1000, 2000, 3000, 4000])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    if args.repeats != 1:
        _with_repeats(args.repeats)
    bunch = load_benchmark(args.task, features=args.features)
    per_fold = run(bunch, args.folds, args.seeds)
    rows = []
    for offset in args.seeds:
        mine = [r for r in per_fold if r["seed"] == offset]
        rows.append({"seed offset": str(offset),
                     **{m: float(np.mean([r[m] for r in mine])) for m in METRICS},
                     "(sigma^2, T) per fold": ", ".join(f"({r['sigma2']:g}, {r['T']:g})"
                                                        for r in mine)})
    means = np.array([[row[m] for m in METRICS] for row in rows])
    rows.append({"seed offset": "mean over seeds", **dict(zip(METRICS, means.mean(axis=0))),
                 "(sigma^2, T) per fold": ""})
    rows.append({"seed offset": "sd over seeds",
                 **dict(zip(METRICS, means.std(axis=0, ddof=1) if len(means) > 1
                            else np.zeros(len(METRICS)))),
                 "(sigma^2, T) per fold": ""})
    write_results(
        "validation_seeds", rows,
        ["seed offset", *METRICS, "(sigma^2, T) per fold"],
        title=(f"GPStructTagger on {args.task} ({args.features} features): test "
               f"calibration over the seeds of the validation in fit "
               f"({args.repeats} split{'s' if args.repeats > 1 else ''})"),
        notes=[f"Each seed row: mean over folds {args.folds} of the test sentences' token "
               "error, marginal log loss and ECE (15 bins) of the default GPStructTagger "
               "fitted with random_state = fold + offset (offset 0: the fits of "
               "calibration.md, up to BLAS rounding).",
               f"Validation: {args.repeats} shuffled 3-fold split(s) (n_repeats of "
               "cv_prior_variance and cv_posterior; fit uses 1).",
               f"python benchmarks/validation_seeds.py --task {args.task} --features "
               f"{args.features} --seeds {' '.join(map(str, args.seeds))} "
               f"--repeats {args.repeats}"],
        extra={"task": args.task, "features": args.features, "folds": args.folds,
               "seeds": args.seeds, "repeats": args.repeats, "per_fold": per_fold},
        section=f"{args.task}_{args.features}_r{args.repeats}")


if __name__ == "__main__":
    main()
