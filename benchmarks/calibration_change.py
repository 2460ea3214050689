"""What a change did to GPStructTagger on the GPstruct tasks: one section of
``benchmarks/results/calibration.json`` against another, paired over the
folds (nothing is refitted).

``error %`` is that of ``predict`` (the tagger's ``decode_``: Viterbi for
span labels, the crfpp paths' B / I / O tags, since ``decode="auto"``),
``argmax error %`` that of the argmax of the marginals (the same fits).

For each task and feature path, GPStructTagger's rows of the section
``--after`` against those of ``--before`` (default ``default``): for token
error, the argmax of the marginals' token error, log loss and ECE (lower is
better), the mean per-fold difference
(after minus before, the same fold's test sentences), its standard error
over the folds, ``t = mean / SE`` and whether the change is within two
standard errors (``|mean| <= 2 SE``) or better; the mean over the task /
path pairs of each metric's change; and the ratio of the median fit
seconds. The paired statistics are :func:`tests._paired.paired`.

Results go to the section ``default`` of
``benchmarks/results/calibration_change.{md,json}`` (``--name KEY``: the
section ``KEY``).

Usage::

    python benchmarks/calibration_change.py --after SECTION [--before default]
        [--name SECTION]
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # the repository, for tests._paired
from _common import add_name_argument, read_section, section_key, write_results  # noqa: E402

from tests._paired import paired  # noqa: E402

METRICS = ("error %", "argmax error %", "log loss", "ECE %")
GP = "GPStructTagger"


def _rows(section, task, features):
    return [r for r in section["per_fold"] if r["task"] == task
            and r["features"] == features and r["model"] == GP]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after", required=True,
                        help="section of calibration.json with the change")
    parser.add_argument("--before", default="default", help="section to compare with")
    add_name_argument(parser, "calibration_change")
    args = parser.parse_args(argv)
    after = read_section("calibration", section_key("calibration", args.after))
    before = read_section("calibration", section_key("calibration", args.before))
    pairs = sorted({(r["task"], r["features"]) for r in after["per_fold"]
                    if r["model"] == GP})
    rows, changes = [], {m: [] for m in METRICS}
    for task, features in pairs:
        a, b = _rows(after, task, features), _rows(before, task, features)
        row = {"task": task, "features": features}
        for metric in METRICS:
            mean, se, t, worse, n = paired(a, b, metric)
            changes[metric].append(mean)
            verdict = "better" if mean <= 0 else ("within 2 SE" if mean <= 2 * se
                                                  else "WORSE")
            row[f"{metric} change"] = f"{mean:+.4f} ± {se:.4f} ({verdict})"
        fit_a = float(np.median([r["fit s"] for r in a]))
        fit_b = float(np.median([r["fit s"] for r in b]))
        row.update({"fit s before": round(fit_b, 2), "fit s after": round(fit_a, 2),
                    "fit x": round(fit_a / fit_b, 3), "folds": len(a)})
        rows.append(row)
    mean_row = {"task": "mean over pairs", "features": ""}
    for metric in METRICS:
        mean_row[f"{metric} change"] = f"{np.mean(changes[metric]):+.4f}"
    mean_row.update({"fit s before": "", "fit s after": "", "fit x": "", "folds": ""})
    rows.append(mean_row)
    notes = [
        f"GPStructTagger's per-fold results in the section {args.after} minus those in "
        f"{args.before} of calibration.json, on the same folds and test sentences: mean ± "
        "standard error over the folds; negative: the change is better. 'within 2 SE': "
        "worse on average by at most two standard errors.",
        "fit x: the median fit seconds over the folds, after / before (the two runs on "
        "the same machine, not side by side).",
    ]
    write_results("calibration_change", rows, list(rows[0]),
                  title="GPStructTagger on the GPstruct tasks: a change, paired over the "
                  "folds", notes=notes, section=section_key("calibration_change", args.name))


if __name__ == "__main__":
    main()
