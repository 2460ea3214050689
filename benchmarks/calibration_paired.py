"""Paired differences over the folds of ``benchmarks/calibration.py``'s
results: GPStructTagger against each plain CRF, per task and feature path.

Reads the section ``--source`` (default ``default``) of
``benchmarks/results/calibration.json`` (nothing is refitted). For each
task and path, the peers are sklearn-crfsuite at its best-error ``c2`` and
RandomizedCRFTagger (exact mode) at the same ``c2``, as in issue 13's
acceptance. For log loss, ECE and error at 80 % coverage (lower is better
for all three) it gives the GP's mean paired difference over the folds (GP
minus peer, the same fold's test sentences), its standard error, the
t statistic and the number of folds on which the GP is worse.

Results go to the section ``default`` of
``benchmarks/results/calibration_paired.{md,json}`` (``--name KEY``: the
section ``KEY``). The paired statistics are :func:`tests._paired.paired`
(the tests check it by hand).

Usage::

    python benchmarks/calibration_paired.py [--source default] [--name SECTION]
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # the repository, for tests._paired
from _common import add_name_argument, read_section, section_key, write_results  # noqa: E402

from tests._paired import paired  # noqa: E402

METRICS = ("log loss", "ECE %", "error % at 80 % coverage")
GP = "GPStructTagger"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="default",
                        help="section of benchmarks/results/calibration.json to read")
    add_name_argument(parser, "calibration_paired")
    args = parser.parse_args(argv)
    section = section_key("calibration_paired", args.name)
    source = section_key("calibration", args.source)
    d = read_section("calibration", source)
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
        f"From the section {source} of calibration.json: GPStructTagger (defaults) minus "
        "each peer, per fold, on the same test sentences; mean, standard error over the "
        "folds and t = mean / SE. Negative: the GP is better.",
        f"Of {len(rows)} comparisons the GP is worse on average in {n_worse} (largest t: "
        f"{max(r['t'] for r in rows):+.2f}) and better with t < -2 in {n_sig_better}.",
    ]
    write_results("calibration_paired", rows, list(rows[0]),
                  title="Calibration: the GP against the plain CRFs, paired over the folds",
                  notes=notes, section=section)


if __name__ == "__main__":
    main()
