"""How often a model-based strategy of ``benchmarks/active_learning.py``
would pass "reaches random's 100-sentence error with at most 60 sentences
(mean over folds)", if the folds (or fold x seed runs) were drawn again.

Reads the ``per_fold`` curves that ``active_learning.py`` writes to
``benchmarks/results/<name>.json`` (nothing is refitted). For each results
file and GPStructTagger strategy it reports, over the file's runs:

* the mean error at 60 sentences and random's mean error at 100;
* their paired difference (the same run's strategy at 60 minus its random
  arm at 100), mean +- standard error over the runs;
* the sentences at which the mean curve first reaches random's mean at 100
  (as ``active_learning.py`` reports it);
* the bootstrap probability that it does so with at most 60 sentences:
  ``--n-boot`` resamples of the runs with replacement (seeded), the mean
  curves and random's mean at 100 recomputed on each.

Results go to ``benchmarks/results/active_learning_bootstrap.{md,json}``.

Usage::

    python benchmarks/active_learning_bootstrap.py [--files active_learning ...]
        [--n-boot 20000] [--seed 0] [--at 60]
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS_DIR, write_results  # noqa: E402

MODEL = "GPStructTagger"
FILES = ("active_learning", "active_learning_acqseed1", "active_learning_acqseed2",
         "active_learning_prior", "active_learning_epig", "active_learning_power",
         "active_learning_autopaths", "active_learning_cvrepeats3", "active_learning_repeats",
         "active_learning_epig_repeats")


def first_reach(sizes, curves, targets):
    """Per row of ``curves`` (..., n_sizes), the first size whose value is at
    most the row's entry of ``targets``; ``inf`` where none is."""
    hit = curves <= targets[..., None]
    first = np.where(hit.any(axis=-1), hit.argmax(axis=-1), -1)
    sizes = np.asarray(sizes, dtype=np.float64)
    return np.where(first >= 0, sizes[np.maximum(first, 0)], np.inf)


def summarise(sizes, random, curves, at=60, n_boot=20000, seed=0):
    """The row of one strategy: ``random`` and ``curves`` are (runs, sizes)."""
    random, curves = np.asarray(random, float), np.asarray(curves, float)
    n = random.shape[0]
    i_at, i_end = sizes.index(at), len(sizes) - 1
    diff = curves[:, i_at] - random[:, i_end]
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    reach = first_reach(sizes, curves[idx].mean(axis=1), random[idx, i_end].mean(axis=1))
    observed = first_reach(sizes, curves.mean(axis=0)[None], random[:, i_end].mean()[None])[0]
    return {
        "runs": n,
        f"error % at {at}": round(float(curves[:, i_at].mean()), 2),
        f"random at {sizes[i_end]}": round(float(random[:, i_end].mean()), 2),
        "paired diff.": f"{diff.mean():+.3f} +- {diff.std(ddof=1) / np.sqrt(n):.3f}",
        "reaches at": "never" if np.isinf(observed) else int(observed),
        f"P(reach <= {at})": round(float(np.mean(reach <= at)), 2),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="+", default=list(FILES))
    parser.add_argument("--n-boot", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--at", type=int, default=60)
    parser.add_argument("--name", default="active_learning_bootstrap")
    args = parser.parse_args(argv)
    rows = []
    for name in args.files:
        path = RESULTS_DIR / f"{name}.json"
        if not path.exists():
            print(f"skipping {name}: no {path.name}")
            continue
        d = json.loads(path.read_text())
        runs = list(d["per_fold"].values())
        strategies = [s for s in runs[0] if s != "random" and MODEL in runs[0][s]]
        random = [r["random"][MODEL] for r in runs]
        for s in strategies:
            row = {"results": name, "strategy": s}
            row.update(summarise(d["sizes"], random, [r[s][MODEL] for r in runs],
                                 at=args.at, n_boot=args.n_boot, seed=args.seed))
            rows.append(row)
    notes = [
        "GPStructTagger's token error % on base NP (papers' features), from each file's "
        "per-run curves; a run is a fold (5 runs) or a fold and seed (15).",
        f"P(reach <= {args.at}): the fraction of {args.n_boot} bootstrap resamples of the runs "
        f"(seed {args.seed}) in which the strategy's mean curve is at most random's mean "
        f"error at 100 sentences at {args.at} sentences or fewer.",
    ]
    write_results(args.name, rows, list(rows[0]),
                  title="Active learning: how often the 60-sentence bar would pass on other folds",
                  notes=notes)


if __name__ == "__main__":
    main()
