"""The calibration error of GPStructTagger's marginals against the number
of posterior draws behind them, for its prediction estimator and the
plain one, on one fitted model.

The ECE of averaged marginals is a nonlinear statistic of a Monte Carlo
estimate: the same fitted posterior gives different ECEs under different
estimators until both have converged. This script fits GPStructTagger
(defaults, ``random_state=fold``) on one fold of a GPstruct task and scores
the test fold's marginals, for each draw count and ``--seeds`` values of
``predict_seed_``, with

- ``default``: the estimator ``predict_marginals`` runs (antithetic unary
  draws made in the kernel, the transition draws shared by the sequences);
- ``plain``: independent draws of the unary potentials and transitions per
  sequence (the estimator of the package before the shared, antithetic
  draws; ``with_shared_transitions`` bypassed).

Columns: mean ECE % over the seeds and its standard error, and the mean
token log loss. Both estimators are unbiased for each marginal; the rows
at many draws give the ECE of the posterior predictive itself.

Usage::

    python benchmarks/ece_draws.py [--task basenp_large] [--features crfpp]
        [--fold 0] [--draws 128 1024 16384] [--seeds 8 8 3] [--name KEY]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_name_argument, section_key, write_results  # noqa: E402
from gpstruct_table1 import _fold_data  # noqa: E402

from skgpstruct import GPStructTagger  # noqa: E402
from skgpstruct._gpstruct import predict as _predict  # noqa: E402
from skgpstruct.datasets import load_benchmark  # noqa: E402
from skgpstruct.metrics import expected_calibration_error, marginal_log_loss  # noqa: E402

N_BINS = 15


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="basenp_large")
    parser.add_argument("--features", default="crfpp")
    parser.add_argument("--fold", type=int, default=0)
    parser.add_argument("--draws", nargs="+", type=int, default=[128, 1024, 16384])
    parser.add_argument("--seeds", nargs="+", type=int, default=[8, 8, 3])
    add_name_argument(parser, "ece_draws")
    args = parser.parse_args(argv)
    if len(args.seeds) != len(args.draws):
        parser.error("--seeds takes one count per --draws value")
    bunch = load_benchmark(args.task, features=args.features)
    train, test = bunch.folds[args.fold]
    X_tr, y_tr, X_te, y_te = _fold_data(bunch, train, test)
    gp = GPStructTagger(random_state=args.fold)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gp.fit(X_tr, y_tr)
    labels = list(gp.classes_)
    seed0 = gp.predict_seed_
    shared = _predict.with_shared_transitions
    rows = []
    try:
        for estimator in ("default", "plain"):
            _predict.with_shared_transitions = (shared if estimator == "default"
                                                else (lambda pred: pred))
            for n, n_seeds in zip(args.draws, args.seeds):
                ece, loss, times = [], [], []
                for s in range(n_seeds):
                    gp.set_params(n_predict_samples=n)
                    gp.predict_seed_ = seed0 + 1000 + s
                    t0 = time.perf_counter()
                    m = gp.predict_marginals(X_te)
                    times.append(time.perf_counter() - t0)
                    ece.append(100 * expected_calibration_error(y_te, m, labels=labels,
                                                                n_bins=N_BINS))
                    loss.append(marginal_log_loss(y_te, m, labels=labels))
                row = {"estimator": estimator, "draws": n, "seeds": n_seeds,
                       "ECE %": float(np.mean(ece)),
                       "ECE se": (float(np.std(ece, ddof=1) / np.sqrt(n_seeds))
                                  if n_seeds > 1 else float("nan")),
                       "ECE % by seed": [round(v, 4) for v in ece],
                       "log loss": float(np.mean(loss)),
                       "marginals s": float(np.median(times))}
                rows.append(row)
                print(row, flush=True)
    finally:
        _predict.with_shared_transitions = shared
        gp.predict_seed_ = seed0
    n_tokens = sum(len(y) for y in y_te)
    notes = [
        f"{args.task} / {args.features}, fold {args.fold}: GPStructTagger() fitted once "
        f"(sigma^2 = {gp.kernel_.variance:g}, T = {gp.temperature_:g}), {n_tokens} test "
        f"tokens; each row: predict_marginals of the test fold with n_predict_samples = "
        "draws, predict_seed_ varied over the seeds.",
        "default: antithetic unary draws made in the kernel, one set of transition draws "
        "shared by the sequences (what predict_marginals runs); plain: independent draws "
        "of each sequence's unary potentials and transitions (with_shared_transitions "
        "bypassed).",
        f"ECE %: {N_BINS} bins of the largest marginal, mean over the seeds; ECE se: its "
        "standard error over the seeds (the Monte Carlo noise of the statistic); one "
        f"token crossing a bin edge moves the ECE by up to {200 / n_tokens:.3f} points.",
    ]
    write_results("ece_draws", rows, ["estimator", "draws", "seeds", "ECE %", "ECE se",
                                      "log loss", "marginals s"],
                  title="ECE of the marginals against the posterior draws behind them",
                  notes=notes, section=section_key("ece_draws", args.name))


if __name__ == "__main__":
    main()
