"""Paired differences over the folds of ``benchmarks/calibration.py``'s
results: GPStructTagger against each plain CRF, per task and feature path.

Reads ``benchmarks/results/<--source>.json`` (nothing is refitted). For each
task and path, the peers are sklearn-crfsuite at its best-error ``c2`` and
RandomizedCRFTagger (exact mode) at the same ``c2``, as in issue 13's
acceptance. For log loss, ECE and error at 80 % coverage (lower is better
for all three) it gives the GP's mean paired difference over the folds (GP
minus peer, the same fold's test sentences), its standard error, the
t statistic and the number of folds on which the GP is worse.

Results go to ``benchmarks/results/calibration_paired.{md,json}``.

Usage::

    python benchmarks/calibration_paired.py [--source calibration]
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS_DIR, write_results  # noqa: E402

METRICS = ("log loss", "ECE %", "error % at 80 % coverage")
GP = "GPStructTagger"


def paired(gp_rows, peer_rows, metric):
    """Mean, standard error and t of the per-fold ``gp - peer``, and the
    number of folds where it is positive; rows are matched by fold."""
    peer = {r["fold"]: r[metric] for r in peer_rows}
    d = np.array([r[metric] - peer[r["fold"]] for r in gp_rows if r["fold"] in peer])
    if d.size < 2:
        raise ValueError(f"{metric}: fewer than two folds in common.")
    se = float(d.std(ddof=1) / np.sqrt(d.size))
    mean = float(d.mean())
    t = mean / se if se > 0 else (0.0 if mean == 0 else np.sign(mean) * np.inf)
    return mean, se, float(t), int(np.sum(d > 0)), int(d.size)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="calibration")
    parser.add_argument("--name", default="calibration_paired")
    args = parser.parse_args(argv)
    d = json.loads((RESULTS_DIR / f"{args.source}.json").read_text())
    rows, n_worse, n_sig_better = [], 0, 0
    for key, c2 in d["best_crfsuite_c2"].items():
        task, features = key.split("/")

        def select(model):
            return [r for r in d["per_fold"] if r["task"] == task
                    and r["features"] == features and r["model"] == model]

        gp = select(GP)
        for peer in (f"sklearn-crfsuite c2={c2}", f"RandomizedCRFTagger exact c2={c2}"):
            for metric in METRICS:
                mean, se, t, worse, n = paired(gp, select(peer), metric)
                n_worse += mean > 0
                n_sig_better += t < -2
                rows.append({"task": task, "features": features, "peer": peer,
                             "metric": metric, "GP - peer": f"{mean:+.4f}",
                             "SE": f"{se:.4f}", "t": round(t, 2),
                             "folds GP worse": f"{worse}/{n}"})
    notes = [
        f"From {args.source}.json: GPStructTagger (defaults) minus each peer, per fold, on the "
        "same test sentences; mean, standard error over the folds and t = mean / SE. Negative: "
        "the GP is better.",
        f"Of {len(rows)} comparisons the GP is worse on average in {n_worse} (largest t: "
        f"{max(r['t'] for r in rows):+.2f}) and better with t < -2 in {n_sig_better}.",
    ]
    write_results(args.name, rows, list(rows[0]),
                  title="Calibration: the GP against the plain CRFs, paired over the folds",
                  notes=notes)


if __name__ == "__main__":
    main()
