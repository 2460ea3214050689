"""Learning curves on the standard tasks: test F1 and calibration of the L2
CRFs (c2 chosen on a dev set) and of GPStructTagger against the number of
training sentences.

What it measures
----------------
On CoNLL-2000 chunking and CoNLL-2002 Spanish NER (sklearn-crfsuite's
tutorial feature dicts, ``_conll.tutorial_features``; the data under
:func:`skgpstruct.datasets.get_data_home`), for each training size N of
``--sizes`` (default 100, 300, 1000, 3000 and ``all``), three models are
fitted on the first N sentences of the training pool and scored on the test
sentences (``--max-test``: the first N of them):

* ``sklearn-crfsuite L2``: ``CRF(algorithm="lbfgs", c1=0, c2=c2,
  max_iterations=100, all_possible_transitions=True)``;
* ``RandomizedCRFTagger L2``: ``Pipeline([SequenceVectorizer(),
  RandomizedCRFTagger(c1=0, c2=c2, max_iter=100, n_jobs=J)])``;
* ``GPStructTagger``: ``Pipeline([SequenceVectorizer(),
  GPStructTagger(n_jobs=J, random_state=0)])``, every other parameter at its
  default (its fit chooses its prior variance and temperature on its own
  training sentences; it does not see the dev set).

The CRFs' ``c2`` is chosen anew at every size among 0.01 / 0.1 / 1
(``_standard_gp.C2_CANDIDATES``): each candidate is fitted on the size-N
training set and scored by chunk F1 (conlleval's rule) on the development
set, the first with the highest F1 wins, and the reported test scores and
``fit s`` are that candidate's fit (no refit). The development set and the
training pool (``_standard_gp.dev_split``): for CoNLL-2002 the official
``esp.testa``, the pool all of ``esp.train`` in its order; for CoNLL-2000
a tenth of the full training set held out once (a permutation seeded by
``_standard_gp.DEV_SEED``), the pool the other nine tenths in their order,
so that its ``all`` is 90 % of ``train.txt``. The test set is never used to
choose.

Scores: chunk F1 and token accuracy in %, token log loss (nats) and expected
calibration error (15 bins, %) of the marginals (a test label unseen in
training has marginal 0: ``calibration._with_unseen_labels``), and
``err@80 %`` (json only: the token error among the 80 % most confident
tokens). ``fit s``: the fit's wall time (the pipeline's, vectorizer
included; crfsuite's ``CRF.fit``), all fits in this one process after a
tiny warm-up fit of each model at the start (numba's compilation or cache
load not timed; see ``_standard_gp.warm_up``). Everything is seeded: a run
is deterministic but for the times.

Usage::

    python benchmarks/learning_curve.py [--tasks conll2000 conll2002]
        [--sizes 100 300 1000 3000 all] [--n-jobs 2] [--max-test N]
        [--name SECTION]

Results: a section of ``benchmarks/results/learning_curve.{md,json}`` and the
figure ``benchmarks/results/learning_curve[_SECTION].png`` (per task, F1 and
ECE against the training sentences, log x axis, one line per model).
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_name_argument, plot_path, section_key, write_results  # noqa: E402
from _conll import TASKS  # noqa: E402
from _standard_gp import (C2_CANDIDATES, DEV_SEED, MODELS, TUNED, choose_c2,  # noqa: E402
                          dev_split, gp_setting, make_gp, scores, warm_up)
from crfsuite_parity import sentences  # noqa: E402

SCRIPT = "learning_curve"
DEFAULT_SIZES = ("100", "300", "1000", "3000", "all")
GP = "GPStructTagger"
#: the rows of every size, in this order (the plot's lines)
CURVE_MODELS = (*TUNED, GP)


def parse_size(text):
    """``--sizes`` item: a positive int, or ``all`` (None)."""
    if text == "all":
        return None
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size {text!r}: a positive int or 'all'")
    return value


def _test_scores(est, model, Xt, yt):
    """:func:`_standard_gp.scores` of a fitted model on the test sentences."""
    _, marginals, labels = MODELS[model]["marginals"](est, Xt)
    return scores(yt, est.predict(Xt), marginals, labels)


def run_task(task, sizes, n_jobs, max_test):
    """Every size and model of one task.

    Parameters
    ----------
    task : str
        A key of ``_conll.TASKS``.
    sizes : list of int or None
        Training sentences (None: the whole pool); sizes that come to the
        same number of sentences are run once.
    n_jobs : int
        Threads of our fits.
    max_test : int or None
        First test sentences kept (None: all).

    Returns
    -------
    rows : list of dict
    description : str
        The development set and the pool.
    """
    (X, y), (Xt, yt) = sentences(task)
    Xt, yt = Xt[:max_test], yt[:max_test]
    (Xp, yp), dev, description = dev_split(task, X, y)
    rows, done = [], set()
    for size in sizes:
        n = len(yp) if size is None else min(size, len(yp))
        if n in done:
            continue
        done.add(n)
        fit = (Xp[:n], yp[:n])
        for model in TUNED:
            c2, table, est = choose_c2(model, fit, dev, n_jobs, keep=True)
            fit_s = next(r["fit s"] for r in table if r["c2"] == c2)
            rows.append({"task": task, "size": n, "model": model, "chosen": f"c2={c2:g}",
                         "c2": c2, **_test_scores(est, model, Xt, yt), "fit s": fit_s,
                         "choice": table})
            _report(rows[-1])
        est = make_gp(n_jobs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            est.fit(*fit)
            fit_s = time.perf_counter() - start
        setting = gp_setting(est[-1])
        rows.append({"task": task, "size": n, "model": GP,
                     "chosen": (f"sigma2={setting['kernel variance']:g}, "
                                f"T={setting['temperature']:g}"),
                     **setting, **_test_scores(est, GP, Xt, yt), "fit s": fit_s,
                     "iterations": int(est[-1].n_iter_)})
        _report(rows[-1])
    return rows, description


def _report(row):
    print(f"{row['task']} {row['size']} {row['model']} ({row['chosen']}): F1 {row['F1']:.2f}, "
          f"ECE {row['ECE %']:.2f} %, fit {row['fit s']:.1f} s", file=sys.stderr, flush=True)


def plot(rows, tasks, path):
    """Per task, F1 and ECE against the training sentences (log x), one line
    per model; written to ``path`` (nothing without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (the 'plot' extra): no figure written.")
        return
    fig, axes = plt.subplots(len(tasks), 2, figsize=(10, 3.6 * len(tasks)), squeeze=False)
    for (ax_f1, ax_ece), task in zip(axes, tasks):
        for model in CURVE_MODELS:
            mine = sorted((r for r in rows if r["task"] == task and r["model"] == model),
                          key=lambda r: r["size"])
            sizes = [r["size"] for r in mine]
            ax_f1.plot(sizes, [r["F1"] for r in mine], marker="o", label=model)
            ax_ece.plot(sizes, [r["ECE %"] for r in mine], marker="o", label=model)
        for ax, what in ((ax_f1, "test chunk F1 %"), (ax_ece, "test ECE % (15 bins)")):
            ax.set_xscale("log")
            ax.set_xlabel("training sentences")
            ax.set_ylabel(what)
            ax.set_title(task)
            ax.grid(alpha=0.3)
        ax_f1.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"figure: {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--sizes", nargs="+", type=parse_size,
                        default=[parse_size(s) for s in DEFAULT_SIZES],
                        help="training sentences per point ('all': the whole pool)")
    parser.add_argument("--n-jobs", type=int, default=2, help="threads of our fits")
    parser.add_argument("--max-test", type=int, default=None,
                        help="first N test sentences (a quick run)")
    add_name_argument(parser, SCRIPT)
    args = parser.parse_args(argv)
    section = section_key(SCRIPT, args.name)
    (X, y), (Xt, _) = sentences(args.tasks[0], 50)
    for model in CURVE_MODELS:  # numba compiles (or loads) here, not in a timed fit
        warm_up(model, args.n_jobs, X, y, Xt)
    rows, devs = [], {}
    for task in args.tasks:
        task_rows, devs[task] = run_task(task, args.sizes, args.n_jobs, args.max_test)
        rows += task_rows
    notes = [
        "sklearn-crfsuite L2: c1 = 0, 100 iterations at most, "
        "all_possible_transitions=True; RandomizedCRFTagger L2: c1 = 0, max_iter = 100, "
        f"n_jobs = {args.n_jobs}; both with c2 chosen at each size among "
        + " / ".join(f"{c:g}" for c in C2_CANDIDATES) + " by chunk F1 on the dev set "
        "(fits on the size's training set; the first of the best); scores and fit s of "
        "that fit. GPStructTagger: defaults, random_state=0, n_jobs = "
        f"{args.n_jobs}; its own choice (sigma2, T) inside its fit, on its training "
        "sentences only.",
        "size N: the first N sentences of the training pool (conll2002: esp.train; "
        f"conll2000: train.txt less its dev tenth, seeded permutation seed {DEV_SEED}).",
        "F1: chunks, conlleval's rule; token acc, ECE (15 bins) in %; log loss: mean "
        "token -log marginal of the gold label, nats (a test label unseen in training "
        "has marginal 0: -log 1e-15). fit s: one fit's wall time, in one process after a "
        "warm-up fit of each model (numba compilation not timed)."
        + (f" Test: the first {args.max_test} sentences." if args.max_test else ""),
    ]
    notes += [f"{task} dev: {d}." for task, d in devs.items()]
    columns = ["task", "size", "model", "chosen", "F1", "token acc", "log loss", "ECE %",
               "fit s"]
    write_results(SCRIPT, rows, columns,
                  title="Learning curves: L2 CRFs (c2 chosen on dev) and GPStructTagger",
                  notes=notes, section=args.name,
                  extra={"sizes": args.sizes, "n_jobs": args.n_jobs,
                         "max_test": args.max_test, "tasks": args.tasks, "dev": devs})
    plot(rows, args.tasks, plot_path(SCRIPT, section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
