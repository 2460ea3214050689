"""Active learning on basenp (papers' features): random vs CRF entropy vs GP
mutual information.

Per fold of ``folds.json`` (DESIGN.md section 7) the fold's 150 training
sentences are the pool and its 150 test sentences the test set. Every
strategy starts from the same 10 sentences drawn at random (seeded by the
fold) and acquires ``--step`` (10) sentences per round up to ``--budget``
(100):

* ``random``: the next sentences of one random permutation of the pool;
* ``crf_entropy``: the unlabelled sentences with the largest summed token
  entropy of the marginals of a RandomizedCRFTagger in exact mode
  (``n_top=None``) fitted on the labelled ones ("total token entropy",
  Settles and Craven, EMNLP 2008);
* ``gp_mi``: the largest summed token mutual information (BALD: the
  entropy of the mean marginals minus the mean entropy over posterior draws,
  ``predict_uncertainty(kind="mutual_information", per="sequence")``) of a
  GPStructTagger (default parameters) fitted on the labelled ones.

After every round both a GPStructTagger (defaults) and the exact
RandomizedCRFTagger (``--c2``) are fitted on each strategy's labelled set and
scored (token error %) on the test sentences; the acquiring model of
``crf_entropy`` / ``gp_mi`` is the one fitted there. Ties in a score are
broken by pool position, so a run is deterministic.

The table holds, per strategy, model and number of labelled sentences, the
mean and standard deviation over the folds; the script also prints how many
sentences GP mutual information needs to reach the GP's error after 100
random sentences (mean curves over the folds). Results go to
``benchmarks/results/active_learning.{md,json}`` and, with matplotlib (the
``plot`` extra), ``active_learning.png`` (mean curves with +- one standard
deviation bands).

Usage::

    python benchmarks/active_learning.py [--folds 0 1 2 3 4] [--start 10]
        [--step 10] [--budget 100] [--c2 1.0] [--quick]

``--quick`` runs fold 0 up to 40 sentences.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS_DIR, write_results  # noqa: E402
from gpstruct_table1 import _fold_data  # noqa: E402

from skgpstruct import GPStructTagger, RandomizedCRFTagger  # noqa: E402
from skgpstruct.datasets import load_benchmark  # noqa: E402

STRATEGIES = ("random", "crf_entropy", "gp_mi")
MODELS = ("GPStructTagger", "RandomizedCRFTagger")


def _error(model, X_te, y_te):
    """Token error % (labels unseen in training count as errors)."""
    pred = np.concatenate(model.predict(X_te))
    return 100.0 * float(np.mean(pred != np.concatenate(y_te)))


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X, y)


def _pick(scores, pool, k):
    """The ``k`` pool positions with the largest scores (ties: lower position)."""
    order = np.lexsort((np.asarray(pool), -np.asarray(scores)))
    return [pool[i] for i in order[:k]]


def run_fold(b, fold, args):
    """Error curves of every strategy and model on one fold."""
    tr, te = b.folds[fold]
    X_pool, y_pool, X_te, y_te = _fold_data(b, tr, te)
    n_pool = len(X_pool)
    rng = np.random.RandomState(fold)
    perm = list(rng.permutation(n_pool))
    sizes = list(range(args.start, min(args.budget, n_pool) + 1, args.step))
    curves = {}
    for strategy in STRATEGIES:
        labelled = perm[: args.start]
        curve = {m: [] for m in MODELS}
        t0 = time.perf_counter()
        for size in sizes:
            X_l = [X_pool[i] for i in labelled]
            y_l = [y_pool[i] for i in labelled]
            gp = _fit(GPStructTagger(random_state=fold), X_l, y_l)
            crf = _fit(RandomizedCRFTagger(n_top=None, c2=args.c2, random_state=fold),
                       X_l, y_l)
            curve["GPStructTagger"].append(_error(gp, X_te, y_te))
            curve["RandomizedCRFTagger"].append(_error(crf, X_te, y_te))
            if size == sizes[-1]:
                break
            pool = [i for i in range(n_pool) if i not in set(labelled)]
            k = min(args.step, len(pool))
            if strategy == "random":
                new = perm[len(labelled): len(labelled) + k]
            else:
                model, kind = ((crf, "entropy") if strategy == "crf_entropy"
                               else (gp, "mutual_information"))
                scores = model.predict_uncertainty([X_pool[i] for i in pool], kind=kind,
                                                   per="sequence")
                new = _pick(scores, pool, k)
            labelled = labelled + list(new)
        curves[strategy] = curve
        print(f"fold {fold} {strategy:12s} GP "
              + " ".join(f"{e:.2f}" for e in curve["GPStructTagger"])
              + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    return sizes, curves


def _reach(sizes, curve, target):
    """The first size whose error is at most ``target`` (None: never)."""
    for size, err in zip(sizes, curve):
        if err <= target + 1e-12:
            return size
    return None


def _plot(sizes, means, stds, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (the 'plot' extra): no figure written.")
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, model in zip(axes, MODELS):
        for strategy in STRATEGIES:
            m, s = np.array(means[strategy][model]), np.array(stds[strategy][model])
            ax.plot(sizes, m, marker="o", label=strategy)
            ax.fill_between(sizes, m - s, m + s, alpha=0.2)
        ax.set_title(f"test error of {model}")
        ax.set_xlabel("labelled sentences")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("token error % (mean +- std over folds)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--start", type=int, default=10)
    parser.add_argument("--step", type=int, default=10)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--c2", type=float, default=1.0,
                        help="L2 of the RandomizedCRFTagger (crfsuite's best c2 on basenp)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--name", default="active_learning")
    args = parser.parse_args(argv)
    if args.quick:
        args.folds, args.budget = [0], 40
    b = load_benchmark("basenp", features="gpstruct")
    per_fold = {}
    for fold in args.folds:
        sizes, per_fold[fold] = run_fold(b, fold, args)
    means = {s: {m: np.mean([per_fold[f][s][m] for f in args.folds], axis=0).tolist()
                 for m in MODELS} for s in STRATEGIES}
    stds = {s: {m: np.std([per_fold[f][s][m] for f in args.folds], axis=0).tolist()
                for m in MODELS} for s in STRATEGIES}
    rows = []
    for s in STRATEGIES:
        for m in MODELS:
            row = {"strategy": s, "model": m}
            row.update({str(n): f"{a:.2f} +- {d:.2f}"
                        for n, a, d in zip(sizes, means[s][m], stds[s][m])})
            rows.append(row)
    target = means["random"]["GPStructTagger"][-1]
    reach = {s: _reach(sizes, means[s]["GPStructTagger"], target) for s in STRATEGIES}
    notes = [f"Token error % of the test sentences (mean +- std over folds {args.folds}) "
             "after each round, by the number of labelled sentences; start "
             f"{args.start} random, +{args.step} per round; RandomizedCRFTagger exact, "
             f"c2={args.c2}; GPStructTagger defaults.",
             f"GPStructTagger's error after {sizes[-1]} random sentences: {target:.2f} %. "
             "Sentences each strategy needs to reach it (mean curves, GPStructTagger): "
             + ", ".join(f"{s} {reach[s]}" for s in STRATEGIES) + "."]
    write_results(args.name, rows, ["strategy", "model"] + [str(n) for n in sizes],
                  title="Active learning on basenp (papers' features)", notes=notes,
                  extra={"sizes": sizes, "folds": args.folds, "c2": args.c2,
                         "means": means, "stds": stds, "target": target, "reach": reach,
                         "per_fold": {str(f): per_fold[f] for f in args.folds}})
    _plot(sizes, means, stds, RESULTS_DIR / f"{args.name}.png")


if __name__ == "__main__":
    main()
