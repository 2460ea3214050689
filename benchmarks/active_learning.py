"""Active learning on basenp (papers' features): random vs CRF entropy vs GP
mutual information.

Per fold of ``folds.json`` (the papers' five-fold protocol) the fold's 150 training
sentences are the pool and its 150 test sentences the test set. Every
strategy starts from the same 10 sentences drawn at random (seeded by the
fold) and acquires ``--step`` (10) sentences per round up to ``--budget``
(100):

* ``random``: the next sentences of one random permutation of the pool;
* ``crf_entropy``: the unlabelled sentences with the largest summed token
  entropy of the marginals of a RandomizedCRFTagger in exact mode
  (``n_top=None``) fitted on the labelled ones ("total token entropy",
  Settles and Craven, EMNLP 2008);
* ``gp_mi``: the largest mutual information between a sentence's label
  path and the posterior (BALD for the whole sequence: the entropy of the
  posterior predictive over label paths minus the mean entropy over the
  posterior draws, ``predict_uncertainty(kind="mutual_information",
  per="path")``) of a GPStructTagger (default parameters) fitted on the
  labelled ones.

Three more ways of spending the GP's mutual information, off by default
(``--strategies``), each a published principle rather than a tuned one:

* ``gp_mi_tokens``: the largest summed token mutual information (the entropy
  of the mean token marginals minus the mean entropy over posterior draws,
  summed over the sentence, ``per="sequence"``): ``gp_mi`` before the path
  form. It counts a doubt shared by neighbouring tokens (a chunk's extent)
  once per token;

* ``gp_mi_batch``: greedy batch selection with hallucinated labels (the
  batch GP-UCB idea of Desautels, Krause and Burdick, JMLR 2014: the
  posterior variance after a new observation does not depend on its label).
  After each pick the weights' posterior variances of the picked sentence's
  features are shrunk by the Gauss-Newton curvature its labels would add
  (``x_tj^2 p_tv (1 - p_tv)``, the variance of the label indicator under
  the marginals, divided by the temperature: ``coef_var_`` is the cold
  posterior's), and the mutual information of the sentences sharing a
  feature with it is computed again, so that a batch does not spend ten
  sentences on one uncertain feature;
* ``gp_mi_density``: information density (Settles and Craven, EMNLP 2008):
  the mutual information times the mean cosine similarity of the sentence's
  bag of features to the pool's, so that outliers are not preferred.

* ``gp_mi_power``: stochastic batch acquisition (power BALD, Kirsch,
  Farquhar, Atighehchian, Jesson, Branchaud-Charron and Gal, TMLR 2023): the
  batch is drawn without replacement with probabilities proportional to the
  path mutual information of ``gp_mi`` raised to the power ``beta = 1`` (the
  paper's default; Gumbel-top-k on its log), seeded by the run's seed and
  the labelled set's size. Top-k takes the k best scores as if each were
  the only one picked; drawing them lets a batch hold sentences whose
  scores are near the top without all being near the same doubt.

* ``gp_mi_prior``: ``gp_mi`` with the weights of the features never active
  in the labelled set at their prior variance (``temperature_ * sigma^2``,
  as ``predict_information_gain`` draws them) instead of none: the tagger
  leaves those features out of its predictions, so its own score cannot see
  the novelty of a sentence full of them, though the exact posterior of a
  weight that no label has touched is its prior;
* ``gp_epig``: the expected predictive information gain about the labels of
  the unlabelled pool's tokens (Bickford Smith, Kirsch, Farquhar, Gal,
  Foster and Rainforth, AISTATS 2023;
  ``GPStructTagger.predict_information_gain(X_pool)``): what a sentence's
  labels would teach about the predictions at the pool's inputs rather than
  about the model, from posterior draws joint over the sentences.

(``gp_mi_batch`` and ``gp_mi_density`` spend the summed token mutual
information, as ``gp_mi_tokens``.)

``--task ud_upos`` runs the same protocol on a task the package's defaults
and this benchmark were not chosen on: UPOS (17 tags) of the UD
Hungarian-Szeged treebank, the pool its first ``--pool`` (300) training
sentences, the test set its test sentences, features
:class:`skgpstruct.features.WordFeatures` fitted on the pool's words (the
unlabelled text); a "fold" there is the seed of the starting sentences and of
the random order.

After every round both a GPStructTagger (defaults) and the exact
RandomizedCRFTagger (``--c2``) are fitted on each strategy's labelled set and
scored (token error %) on the test sentences; the acquiring model of
``crf_entropy`` / ``gp_mi`` is the one fitted there. Ties in a score are
broken by pool position, so a run is deterministic.

``--cv-repeats R`` makes the GP's own validation inside ``fit`` (the
choice of ``(sigma^2, T)``) use ``R`` shuffled 3-fold splits (``n_repeats``
of ``cv_prior_variance`` and ``cv_posterior``), the fits of small labelled
sets being where that choice is noisiest; 1 (the default) is the package's.

``--acquisition-seed A`` adds ``A`` to the fitted GP's ``predict_seed_``
for the acquisition scores only: the same fits, test errors and random arm,
other Monte Carlo draws of the scores, so that two values of ``A`` measure
how much of a curve is the noise of the scores' draws.

``--repeats R`` runs every fold ``R`` times, seeded ``fold + 1000 r``
(``r = 0`` is the fold's own run): other starting sentences, random orders
and Monte Carlo draws of the fits, so that the means carry less of the noise
of one draw of each.

The table holds, per strategy, model and number of labelled sentences, the
mean and standard deviation over the folds (and repeats); the script also prints how many
sentences GP mutual information needs to reach the GP's error after 100
random sentences (mean curves over the folds). Results go to the section
``default`` of ``benchmarks/results/active_learning.{md,json}`` (``--name
KEY``: the section ``KEY``; the other sections are kept) and, with
matplotlib (the ``plot`` extra), ``active_learning.png``
(``active_learning_KEY.png``; mean curves with +- one standard deviation
bands).

Usage::

    python benchmarks/active_learning.py [--folds 0 1 2 3 4] [--start 10]
        [--step 10] [--budget 100] [--c2 1.0] [--quick]
        [--strategies random crf_entropy gp_mi gp_mi_tokens gp_mi_batch gp_mi_density
                      gp_mi_power gp_mi_prior gp_epig]
        [--task basenp|ud_upos] [--pool 300] [--models GPStructTagger]
        [--n-jobs 1] [--repeats 1] [--cv-repeats 1] [--n-paths 1]
        [--acquisition-seed 0] [--name SECTION]

``--quick`` runs fold 0 up to 40 sentences.
"""

import argparse
import copy
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
from joblib import Parallel, delayed
from sklearn.preprocessing import normalize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_name_argument, plot_path, section_key, write_results  # noqa: E402
from gpstruct_table1 import _fold_data  # noqa: E402
from validation_seeds import _with_repeats  # noqa: E402

from skgpstruct import GPStructTagger, RandomizedCRFTagger  # noqa: E402
from skgpstruct._gpstruct.information_gain import weight_variances  # noqa: E402
from skgpstruct.datasets import load_benchmark  # noqa: E402

STRATEGIES = ("random", "crf_entropy", "gp_mi")
EXTRA_STRATEGIES = ("gp_mi_tokens", "gp_mi_batch", "gp_mi_density", "gp_mi_power",
                    "gp_mi_prior", "gp_epig")
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


def _mutual_information(gp, X, per="sequence", n_paths=1):
    return np.asarray(gp.predict_uncertainty(X, kind="mutual_information", per=per,
                                             n_paths=n_paths),
                      dtype=np.float64)


def _pick_batch_mi(gp, X, pool, k):
    """``gp_mi_batch``: ``k`` pool positions picked one at a time, each the
    largest mutual information under the posterior shrunk by the picks
    before it (hallucinated labels, see the module docstring)."""
    g = copy.copy(gp)  # a shallow copy: only coef_var_ is replaced
    g.coef_var_ = gp.coef_var_.copy()
    n_features = gp.n_features_in_
    rows = [sp.csr_matrix(x, dtype=np.float64) for x in X]
    cols = [set(r.indices) for r in rows]
    scores = _mutual_information(g, X)
    left, picked = list(range(len(X))), []
    for _ in range(k):
        sub = np.asarray(left)
        i = int(sub[np.lexsort((np.asarray(pool)[sub], -scores[sub]))[0]])
        picked.append(i)
        left.remove(i)
        marg = g.predict_marginals([X[i]])[0]
        # Gauss-Newton curvature of the sentence's log-likelihood in each
        # weight (V, n_features), in the cold posterior's units
        curv = np.asarray(rows[i].multiply(rows[i]).T @ (marg * (1.0 - marg))).T
        var = g.coef_var_[:, :n_features]
        g.coef_var_[:, :n_features] = var / (1.0 + var * curv / gp.temperature_)
        shared = [j for j in left if cols[j] & cols[i]]
        if shared:
            scores[shared] = _mutual_information(g, [X[j] for j in shared])
    return [pool[i] for i in picked]


def _with_prior_for_unseen(gp):
    """A shallow copy of a weight-space ``gp`` whose weights of the features
    never active in its training set have their prior variance (the cold
    posterior's, ``temperature_ * sigma^2``, the units of ``coef_var_``)
    instead of none: the exact posterior of a weight its likelihood never
    touched is its prior."""
    g = copy.copy(gp)
    # those of predict_information_gain
    g.coef_var_ = weight_variances(gp._predictive().posterior)
    return g


def _density(X):
    """Mean cosine similarity of each sentence's bag of features to those of
    all of ``X`` (information density, Settles and Craven 2008)."""
    bags = normalize(sp.vstack([sp.csr_matrix(sp.csr_matrix(x).sum(axis=0)) for x in X]))
    return np.asarray((bags @ bags.T).mean(axis=1)).ravel()


def _n_paths(text):
    """``--n-paths``: a positive integer or ``auto``."""
    return text if text == "auto" else int(text)


def _pick_power(scores, pool, k, rng, beta=1.0):
    """``k`` pool positions drawn without replacement with probabilities
    proportional to ``scores ** beta``: the ``k`` largest of ``beta log
    score`` plus standard Gumbel noise (zero scores only after every
    positive one; ties by pool position)."""
    scores = np.asarray(scores, dtype=np.float64)
    with np.errstate(divide="ignore"):
        keys = beta * np.log(scores) + rng.gumbel(size=scores.shape)
    return _pick(keys, pool, k)


def _acquire(strategy, gp, crf, X, pool, k, n_paths=1, rng=None):
    """The ``k`` pool positions a model-based ``strategy`` asks for."""
    if strategy == "crf_entropy":
        return _pick(crf.predict_uncertainty(X, kind="entropy", per="sequence"), pool, k)
    if strategy == "gp_mi":
        return _pick(_mutual_information(gp, X, per="path", n_paths=n_paths), pool, k)
    if strategy == "gp_mi_prior":
        return _pick(_mutual_information(_with_prior_for_unseen(gp), X, per="path",
                                         n_paths=n_paths), pool, k)
    if strategy == "gp_epig":
        return _pick(gp.predict_information_gain(X), pool, k)
    if strategy == "gp_mi_power":
        return _pick_power(_mutual_information(gp, X, per="path", n_paths=n_paths), pool, k, rng)
    if strategy == "gp_mi_tokens":
        return _pick(_mutual_information(gp, X), pool, k)
    if strategy == "gp_mi_density":
        return _pick(_mutual_information(gp, X) * _density(X), pool, k)
    if strategy == "gp_mi_batch":
        return _pick_batch_mi(gp, X, pool, k)
    raise ValueError(f"unknown strategy {strategy!r}")


def run_fold(data, fold, args, seed=None):
    """Error curves of every strategy and model on one fold; ``seed`` (the
    fold when None) draws the starting sentences and the random order and
    seeds the models."""
    seed = fold if seed is None else seed
    _with_repeats(args.cv_repeats)  # in the worker: a process of its own under n_jobs
    X_pool, y_pool, X_te, y_te = data
    n_pool = len(X_pool)
    rng = np.random.RandomState(seed)
    perm = list(rng.permutation(n_pool))
    sizes = list(range(args.start, min(args.budget, n_pool) + 1, args.step))
    curves = {}
    for strategy in args.strategies:
        labelled = perm[: args.start]
        curve = {m: [] for m in args.models}
        t0 = time.perf_counter()
        for size in sizes:
            X_l = [X_pool[i] for i in labelled]
            y_l = [y_pool[i] for i in labelled]
            gp = crf = None
            if "GPStructTagger" in args.models or strategy.startswith("gp_"):
                gp = _fit(GPStructTagger(random_state=seed), X_l, y_l)
            if "RandomizedCRFTagger" in args.models or strategy == "crf_entropy":
                crf = _fit(RandomizedCRFTagger(n_top=None, c2=args.c2, random_state=seed),
                           X_l, y_l)
            for name, model in (("GPStructTagger", gp), ("RandomizedCRFTagger", crf)):
                if name in args.models:
                    curve[name].append(_error(model, X_te, y_te))
            if size == sizes[-1]:
                break
            pool = [i for i in range(n_pool) if i not in set(labelled)]
            k = min(args.step, len(pool))
            if strategy == "random":
                new = perm[len(labelled): len(labelled) + k]
            else:
                acq = gp
                if args.acquisition_seed and gp is not None:  # scores' draws only
                    acq = copy.copy(gp)
                    acq.predict_seed_ = gp.predict_seed_ + args.acquisition_seed
                new = _acquire(strategy, acq, crf, [X_pool[i] for i in pool], pool, k,
                               n_paths=args.n_paths,
                               rng=np.random.default_rng([seed, len(labelled)]))
            labelled = labelled + list(new)
        curves[strategy] = curve
        first = args.models[0]
        print(f"fold {fold} seed {seed} {strategy:13s} {first} "
              + " ".join(f"{e:.2f}" for e in curve[first])
              + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    return sizes, curves


def _load(args):
    """``fold -> (X_pool, y_pool, X_test, y_test)`` and the task's title."""
    if args.task == "basenp":
        b = load_benchmark("basenp", features="gpstruct")
        return (lambda fold: _fold_data(b, *b.folds[fold])), "basenp (papers' features)"
    from ud_morph import featurize, load_split

    data = load_split("upos", quick=False)
    data["train"] = tuple(part[: args.pool] for part in data["train"])
    feats, _ = featurize(data)  # WordFeatures fitted on the pool's words
    y = {split: [np.asarray(t) for t in data[split][1]] for split in data}
    fixed = (feats["train"], y["train"], feats["test"], y["test"])
    return (lambda fold: fixed), f"UD Hungarian-Szeged UPOS (pool: {args.pool} sentences)"


def _reach(sizes, curve, target):
    """The first size whose error is at most ``target`` (None: never)."""
    for size, err in zip(sizes, curve):
        if err <= target + 1e-12:
            return size
    return None


def _paired_note(sizes, per_fold, strategies):
    """Per model-based strategy and size, the paired difference of the GP's
    error to its error after ``sizes[-1]`` random sentences in the same run
    (fold and seed), as mean +- standard error over the runs: the noise of
    the "reaches at" comparison."""
    parts = []
    for s in strategies:
        if s == "random":
            continue
        diff = np.array([np.asarray(c[s]["GPStructTagger"])
                         - c["random"]["GPStructTagger"][-1] for c in per_fold.values()])
        se = (diff.std(axis=0, ddof=1) / np.sqrt(len(diff)) if len(diff) > 1
              else np.full(diff.shape[1], np.nan))
        parts.append(f"{s}: " + ", ".join(
            f"{n} {m:+.2f} +- {e:.2f}" for n, m, e in zip(sizes, diff.mean(axis=0), se)))
    return (f"GPStructTagger's error minus its error after {sizes[-1]} random sentences "
            f"in the same run, by labelled sentences (mean +- standard error over the "
            f"{len(per_fold)} runs): " + "; ".join(parts) + ".")


def _plot(sizes, means, stds, path, strategies, models):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (the 'plot' extra): no figure written.")
        return
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), sharey=True,
                             squeeze=False)
    axes = axes[0]
    for ax, model in zip(axes, models):
        for strategy in strategies:
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
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES),
                        choices=STRATEGIES + EXTRA_STRATEGIES)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--task", default="basenp", choices=("basenp", "ud_upos"))
    parser.add_argument("--pool", type=int, default=300,
                        help="ud_upos: the pool's size (the first training sentences)")
    parser.add_argument("--n-jobs", type=int, default=1,
                        help="folds run in parallel processes")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs per fold, seeded fold + 1000 r (r = 0: the fold's own)")
    parser.add_argument("--cv-repeats", type=int, default=1,
                        help="shuffled splits of the GP's validation inside fit "
                             "(n_repeats of cv_prior_variance and cv_posterior)")
    parser.add_argument("--n-paths", type=_n_paths, default=1,
                        help="paths per posterior draw of gp_mi's path mutual "
                             "information (predict_uncertainty's n_paths: an integer or auto)")
    parser.add_argument("--acquisition-seed", type=int, default=0,
                        help="added to the fitted GP's predict_seed_ for the acquisition "
                             "scores only (their Monte Carlo draws; the fits, the test "
                             "errors and the random arm are unchanged)")
    parser.add_argument("--quick", action="store_true")
    add_name_argument(parser, "active_learning")
    args = parser.parse_args(argv)
    section = section_key("active_learning", args.name)  # a bad name fails now, not at the end
    if args.quick:
        args.folds, args.budget = [0], 40
    if "GPStructTagger" not in args.models:
        parser.error("--models must include GPStructTagger (the curves compared)")
    fold_data, title = _load(args)
    # runs in parallel processes (each seeded by its own seed: the same numbers)
    keys = [(f, r) for f in args.folds for r in range(args.repeats)]
    runs = Parallel(n_jobs=args.n_jobs)(
        delayed(run_fold)(fold_data(f), f, args, f + 1000 * r) for f, r in keys)
    sizes = runs[0][0]
    per_fold = {(str(f) if r == 0 else f"{f}.{r}"): curves
                for (f, r), (_, curves) in zip(keys, runs)}
    strategies, models = args.strategies, args.models
    means = {s: {m: np.mean([c[s][m] for c in per_fold.values()], axis=0).tolist()
                 for m in models} for s in strategies}
    stds = {s: {m: np.std([c[s][m] for c in per_fold.values()], axis=0).tolist()
                for m in models} for s in strategies}
    rows = []
    for s in strategies:
        for m in models:
            row = {"strategy": s, "model": m}
            row.update({str(n): f"{a:.2f} +- {d:.2f}"
                        for n, a, d in zip(sizes, means[s][m], stds[s][m])})
            rows.append(row)
    over = (f"folds {args.folds}" if args.repeats == 1 else
            f"{len(per_fold)} runs: folds {args.folds} x {args.repeats} seeds each")
    notes = [f"Token error % of the test sentences (mean +- std over {over}) "
             "after each round, by the number of labelled sentences; start "
             f"{args.start} random, +{args.step} per round; RandomizedCRFTagger exact, "
             f"c2={args.c2}; GPStructTagger defaults."]
    target = reach = None
    if "random" in strategies:
        target = means["random"]["GPStructTagger"][-1]
        reach = {s: _reach(sizes, means[s]["GPStructTagger"], target) for s in strategies}
        notes.append(
            f"GPStructTagger's error after {sizes[-1]} random sentences: {target:.2f} %. "
            "Sentences each strategy needs to reach it (mean curves, GPStructTagger): "
            + ", ".join(f"{s} {reach[s]}" for s in strategies) + ".")
        print(notes[-1])
        notes.append(_paired_note(sizes, per_fold, strategies))
        print(notes[-1])
    write_results("active_learning", rows, ["strategy", "model"] + [str(n) for n in sizes],
                  title=f"Active learning on {title}", notes=notes,
                  extra={"task": args.task, "sizes": sizes, "folds": args.folds,
                         "repeats": args.repeats, "c2": args.c2, "means": means,
                         "stds": stds, "target": target, "reach": reach,
                         "per_fold": per_fold}, section=section)
    _plot(sizes, means, stds, plot_path("active_learning", section), strategies, models)


if __name__ == "__main__":
    main()
