"""The standard tasks: our taggers against sklearn-crfsuite on CoNLL-2000
chunking and CoNLL-2002 Spanish NER, fit time, memory and test scores.

What it measures
----------------
On CoNLL-2000 chunking (``train.txt`` / ``test.txt``) and CoNLL-2002
Spanish NER (``esp.train`` / ``esp.testb``) under the data home
(:func:`skgpstruct.datasets.get_data_home`), every model is fitted on the
training sentences given as sklearn-crfsuite's tutorial feature dicts
(``_conll.tutorial_features``) and scored on the test sentences. The models
come in *families* (``--models``):

* ``crf`` (the exact CRF):

  - ``sklearn-crfsuite``: ``CRF(algorithm="lbfgs", c1=0.1, c2=0.1,
    max_iterations=100, all_possible_transitions=True)``, the tutorial's
    settings; its fit time is ``CRF.fit`` (reading the dicts included);
  - ``RandomizedCRFTagger``: ``Pipeline([SequenceVectorizer(),
    RandomizedCRFTagger(c1=0.1, c2=0.1, max_iter=100, n_jobs=J)])`` for each
    J of ``--n-jobs`` (exact forward-backward, OWL-QN since c1 > 0); its fit
    time is the pipeline's ``fit`` (the vectorizer included). Ours has no
    ``all_possible_transitions`` / ``all_possible_states``: it always has
    the full transition matrix and a weight for every (feature, label)
    pair, plus an unpenalised per-label bias.

* ``gp`` (GPStructTagger at its defaults, the L2 CRFs with ``c2`` chosen on
  a development set, the tutorial crfsuite as the reference; more columns:
  ``F1 se``, ``err@80 %``, prediction, marginal and uncertainty times):
  described in ``_standard_gp.py``, which holds its code.

Each fit runs in a fresh process (``multiprocessing``, "spawn"), which
loads the data, fits the model once on 20 sentences for one iteration and
predicts 2 (numba compiles or loads its kernels there, not in the timed
fit), records its peak resident set so far (``ru_maxrss``: the *loaded*
baseline), then times the fit and scores the test sentences: chunk F1
(conlleval's rule, :func:`skgpstruct.metrics.chunk_f1_score`), token
accuracy, token log loss and expected calibration error (15 bins) of the
marginals (``predict_marginals`` of either model; a test label never seen
in training gets marginal 0), and the iterations run. ``peak MiB`` is the
process's ``ru_maxrss`` at its end, ``model MiB`` the peak minus the
loaded baseline: what the fit (and the test predictions) added.

``--repeats`` repeats alternate the models (crfsuite, ours n_jobs=1, ours
n_jobs=2, crfsuite, ...). Fit seconds and memory are medians over the
repeats; ``x crfsuite`` is ours / crfsuite's fit seconds *in the same
repeat*, then the median. The scores are the first repeat's
(``same in repeats`` says whether all repeats gave the same).

A second table times one gradient evaluation of our exact objective
(:class:`skgpstruct._tagging.exact_objective.ExactCRFObjective`, what fit
evaluates, on all training sequences, the features no training token uses dropped, as the fit does;
median of 7 after a warm-up) for each ``--n-jobs``, in a process of its
own, against its floor: the same multiply-adds in minimal numba loops of
``crf_gradient_profile.py`` (single thread), the feature product and the
scatter (``nnz x V`` each) plus the chain pass (``3 V^2`` per token).

Usage::

    python benchmarks/standard_tasks.py [--tasks conll2000 conll2002]
        [--models crf gp] [--repeats 3] [--n-jobs 1 2] [--max-sentences N]
        [--name SECTION]

``--max-sentences N`` keeps the first N training and test sentences (a
quick run). Results: a section of ``benchmarks/results/standard_tasks.{md,json}``
(``default`` for a plain run, the families joined by ``+`` for other
``--models``, ``--name KEY`` for ``KEY``).
"""

import argparse
import multiprocessing
import resource
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (add_name_argument, markdown_table, section_key, time_call,  # noqa: E402
                     write_results)
from _conll import TASKS  # noqa: E402
from calibration import _with_unseen_labels  # noqa: E402
from crf_gradient_profile import _csr_times_block, _three_matvecs, load  # noqa: E402
from crfsuite_parity import sentences  # noqa: E402

from skgpstruct import RandomizedCRFTagger  # noqa: E402
from skgpstruct._tagging.crf_objective import layout, unpack  # noqa: E402
from skgpstruct._tagging.exact_objective import ExactCRFObjective  # noqa: E402
from skgpstruct._utils.parallel import small_blas  # noqa: E402
from skgpstruct.features import SequenceVectorizer  # noqa: E402
from skgpstruct.metrics import (  # noqa: E402
    chunk_f1_score,
    expected_calibration_error,
    flat_accuracy_score,
    marginal_log_loss,
)

SCRIPT = "standard_tasks"
C1 = C2 = 0.1
MAX_ITER = 100
WARMUP_SENTENCES = 20
EVAL_REPEATS = 7
N_BINS = 15
#: the scores of a fit (the same in every repeat when the fit is deterministic)
SCORES = ("F1", "token acc", "log loss", "ECE %", "iterations")


# ------------------------------------------------------------------ models
def _make_crfsuite(n_jobs, max_iter):
    """sklearn-crfsuite at the tutorial's settings (``n_jobs`` unused)."""
    import sklearn_crfsuite

    return sklearn_crfsuite.CRF(algorithm="lbfgs", c1=C1, c2=C2, max_iterations=max_iter,
                                all_possible_transitions=True)


def _crfsuite_marginals(crf, X):
    """crfsuite's marginals as arrays, columns in ``crf.classes_`` order."""
    labels = list(crf.classes_)
    marginals = [np.array([[tok.get(lab, 0.0) for lab in labels] for tok in seq],
                          dtype=float).reshape(len(seq), len(labels))
                 for seq in crf.predict_marginals(X)]
    return marginals, labels


def _crfsuite_iterations(crf):
    log = crf.training_log_
    return len(log.iterations) if log is not None else None


def _make_ours(n_jobs, max_iter):
    """Our exact CRF behind the vectorizer of the feature dicts."""
    from sklearn.pipeline import Pipeline

    return Pipeline([("vectorizer", SequenceVectorizer()),
                     ("crf", RandomizedCRFTagger(c1=C1, c2=C2, max_iter=max_iter,
                                                 n_jobs=n_jobs))])


def _pipeline_marginals(pipe, X):
    """The final tagger's marginals of the transformed ``X``, and its labels."""
    tagger = pipe[-1]
    return tagger.predict_marginals(pipe[:-1].transform(X)), list(tagger.classes_)


def _pipeline_iterations(pipe):
    return int(pipe[-1].n_iter_)


@dataclass(frozen=True)
class Model:
    """How to build, read and score one model of the table.

    Attributes
    ----------
    make : callable
        ``make(n_jobs, max_iter)``: an unfitted estimator of feature dicts.
    marginals : callable
        ``marginals(fitted, X)``: ``(list of (T_n, n_labels) arrays, labels)``.
    iterations : callable
        ``iterations(fitted)``: the optimiser's iterations.
    threaded : bool
        Whether ``n_jobs`` applies (one row per ``--n-jobs``; else one row).
    """

    make: object
    marginals: object
    iterations: object
    threaded: bool


#: model name -> how to run it (module-level functions: picklable for "spawn")
MODELS = {
    "sklearn-crfsuite": Model(_make_crfsuite, _crfsuite_marginals, _crfsuite_iterations,
                              threaded=False),
    "RandomizedCRFTagger": Model(_make_ours, _pipeline_marginals, _pipeline_iterations,
                                 threaded=True),
}


# ------------------------------------------------------ the worker processes
def _maxrss_mib():
    """This process's peak resident set so far, MiB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _scores(y_true, y_pred, marginals, labels):
    """Test scores of one fit: F1 and token accuracy in %, log loss, ECE in %."""
    marginals, labels = _with_unseen_labels(y_true, marginals, labels)
    return {"F1": 100 * chunk_f1_score(y_true, y_pred),
            "token acc": 100 * flat_accuracy_score(y_true, y_pred),
            "log loss": marginal_log_loss(y_true, marginals, labels=labels),
            "ECE %": 100 * expected_calibration_error(y_true, marginals, labels=labels,
                                                      n_bins=N_BINS)}


def fit_worker(task, model, n_jobs, max_sentences):
    """Fit and score one model on one task (run in a process of its own).

    Parameters
    ----------
    task : str
        A key of ``_conll.TASKS``.
    model : str
        A key of :data:`MODELS`.
    n_jobs : int
        Threads of our fit (ignored by models that are not ``threaded``).
    max_sentences : int or None
        First training and test sentences kept (None: all).

    Returns
    -------
    result : dict
        ``fit s``, ``loaded MiB`` (peak after imports, data and warm-up),
        ``fit peak MiB``, ``peak MiB`` (at the end), ``model MiB`` (peak
        minus loaded) and the :data:`SCORES`.
    """
    spec = MODELS[model]
    (X, y), (Xt, yt) = sentences(task, max_sentences)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter reached: expected here
        warm = spec.make(n_jobs, 1).fit(X[:WARMUP_SENTENCES], y[:WARMUP_SENTENCES])
        warm.predict(Xt[:2])
        spec.marginals(warm, Xt[:2])
        del warm
        loaded = _maxrss_mib()
        estimator = spec.make(n_jobs, MAX_ITER)
        start = time.perf_counter()
        estimator.fit(X, y)
        fit_s = time.perf_counter() - start
    fit_peak = _maxrss_mib()
    marginals, labels = spec.marginals(estimator, Xt)
    result = _scores(yt, estimator.predict(Xt), marginals, labels)
    peak = _maxrss_mib()
    result.update({"iterations": spec.iterations(estimator), "fit s": fit_s,
                   "loaded MiB": loaded, "fit peak MiB": fit_peak, "peak MiB": peak,
                   "model MiB": peak - loaded})
    return result


def evaluation_worker(task, n_jobs_list, max_sentences):
    """Time one gradient evaluation of our exact CRF and its floor (a process
    of its own).

    Parameters
    ----------
    task : str
    n_jobs_list : list of int
        Threads of the evaluation (joblib threads over chunks of sequences,
        BLAS limited to one thread, as ``fit`` runs it).
    max_sentences : int or None

    Returns
    -------
    result : dict
        ``ms``: ``{n_jobs: median ms}``; ``floor ms``: their floor (the
        product and the scatter floors plus the chain's); its parts; the
        data's sizes.
    """
    data, spec = load(task, max_sentences)  # crf_gradient_profile's, as fit trains
    X, n, V = data.X_flat, data.n_sequences, spec.n_labels
    D = X.shape[1]
    theta = 0.01 * np.random.default_rng(0).standard_normal(int(layout(spec, D)[-1]))
    W, b, B = unpack(spec, theta, D)
    from joblib import Parallel

    ms = {}
    with small_blas():
        for n_jobs in n_jobs_list:
            with Parallel(n_jobs=n_jobs, prefer="threads") as parallel:
                objective = ExactCRFObjective(spec, data, parallel)
                ms[n_jobs] = 1e3 * time_call(lambda: objective(theta),
                                             repeats=EVAL_REPEATS)[0]
    out = np.zeros((X.shape[0], V))
    product = 1e3 * time_call(lambda: _csr_times_block(X.indptr, X.indices, X.data, W, out),
                              repeats=EVAL_REPEATS)[0]
    U, expB = np.asarray(X @ W) + b, np.exp(B)
    chain = 1e3 * time_call(lambda: _three_matvecs(expB, U, out), repeats=EVAL_REPEATS)[0]
    return {"ms": ms, "floor ms": 2 * product + chain,
            "floors ms": {"unary": product, "forward-backward": chain, "scatter": product},
            "sentences": int(n), "tokens": int(X.shape[0]), "features": int(D),
            "labels": int(V), "nnz": int(X.nnz)}


#: family -> its models (rows in this order, alternating within a repeat),
#: the model whose fit time the ratios divide by, and the per-evaluation
#: timing of the family (None: none). Optional: ``worker`` (its fits'
#: ``worker(task, model, n_jobs, max_sentences, context)``, instead of
#: fit_worker), ``prepare`` (``prepare(task, n_jobs_list, max_sentences)``,
#: once per task in a process of its own: the ``context``), ``finish``
#: (``finish(task_rows, runs, context)``: adds its columns to the rows),
#: ``notes`` (``notes(rows, repeats)``, instead of _notes) and ``columns``
#: (``{column: [columns inserted after it]}``)
FAMILIES = {
    "crf": {"models": ["sklearn-crfsuite", "RandomizedCRFTagger"],
            "reference": "sklearn-crfsuite", "evaluation": evaluation_worker,
            "title": "the exact CRF"},
}
DEFAULT_FAMILIES = ["crf"]

import _standard_gp  # noqa: E402  (the gp family; imports nothing from here)

MODELS.update({name: Model(**fields) for name, fields in _standard_gp.MODELS.items()
               if name not in MODELS})
FAMILIES["gp"] = _standard_gp.FAMILY


# --------------------------------------------------------------- the parent
def in_process(fn, *args):
    """``fn(*args)`` in a fresh "spawn" process; its return value."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn, args)


def configurations(families, n_jobs_list):
    """The ``(model, n_jobs)`` rows of ``families``, in run order."""
    rows = []
    for family in families:
        for model in FAMILIES[family]["models"]:
            for n_jobs in (n_jobs_list if MODELS[model].threaded else [1]):
                if (model, n_jobs) not in rows:
                    rows.append((model, n_jobs))
    return rows


def run_fits(task, configs, repeats, max_sentences, workers=None):
    """Every configuration ``repeats`` times, alternating within a repeat.

    ``workers``: ``{model: (worker, extra arguments)}`` for the models of a
    family with a worker of its own (the others: :func:`fit_worker`).

    Returns
    -------
    runs : dict
        ``{(model, n_jobs): [result of each repeat]}`` (:func:`fit_worker`).
    """
    runs, workers = {c: [] for c in configs}, workers or {}
    for r in range(repeats):
        for model, n_jobs in configs:
            worker, extra = workers.get(model, (fit_worker, ()))
            res = in_process(worker, task, model, n_jobs, max_sentences, *extra)
            runs[(model, n_jobs)].append(res)
            print(f"{task} repeat {r + 1}/{repeats} {model} n_jobs={n_jobs}: "
                  f"fit {res['fit s']:.2f} s, {res['iterations']} iterations, "
                  f"F1 {res['F1']:.2f}, peak {res['peak MiB']:.0f} MiB "
                  f"(model {res['model MiB']:.0f})", file=sys.stderr, flush=True)
    return runs


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else float("nan")


def fit_rows(task, runs, reference):
    """One table row per configuration: the first repeat's scores, medians of
    times and memory, the median per-repeat ratio to ``reference``'s fit."""
    ref = runs.get((reference, 1))
    rows = []
    for (model, n_jobs), results in runs.items():
        first = {k: results[0][k] for k in SCORES}
        same = all({k: r[k] for k in SCORES} == first for r in results[1:])
        fits = [r["fit s"] for r in results]
        ratios = ([f / r["fit s"] for f, r in zip(fits, ref)] if ref is not None
                  else [None])
        rows.append({
            "task": task, "model": model, "n_jobs": n_jobs, **first,
            "fit s": _median(fits), "x crfsuite": _median(ratios),
            "peak MiB": _median([r["peak MiB"] for r in results]),
            "model MiB": _median([r["model MiB"] for r in results]),
            "same in repeats": ("-" if len(results) == 1 else "yes" if same else "no"),
            "fit s (repeats)": fits, "x crfsuite (repeats)": ratios,
            "repeats": results,
        })
    return rows


def evaluation_rows(task, result):
    """Rows of the per-evaluation table: one per n_jobs."""
    floor = result["floor ms"]
    return [{"task": task, "n_jobs": n_jobs, "ms": ms, "floor ms": floor,
             "x floor": ms / floor, "floors ms": result["floors ms"]}
            for n_jobs, ms in result["ms"].items()]


def _notes(rows, repeats):
    """The table's notes: settings, definitions, and whether n_jobs changed a score."""
    notes = [
        f"c1 = {C1}, c2 = {C2}, {MAX_ITER} iterations at most; sklearn-crfsuite with "
        "all_possible_transitions=True (the tutorial's); ours: full transitions and "
        "every (feature, label) weight always, no per-label bias (fit_intercept='auto', "
        "as crfsuite).",
        "fit s: median of the repeats (ours: the Pipeline's fit, vectorizer included; "
        "crfsuite: CRF.fit); x crfsuite: ours / crfsuite's fit in the same repeat, "
        f"median over {repeats} repeat(s).",
        "Each fit in a fresh process after a 1-iteration warm-up fit on "
        f"{WARMUP_SENTENCES} sentences (numba's compilation or cache load not timed); "
        "peak MiB: ru_maxrss at the process's end (fit and test predictions); model "
        "MiB: that minus ru_maxrss after imports, data loading and the warm-up.",
        "F1: chunks, conlleval's rule; token acc, ECE (15 bins) in %; log loss: mean "
        "token -log marginal of the gold label, nats (a test label unseen in training "
        "has marginal 0: -log 1e-15). Scores of the first repeat.",
    ]
    by_task = {}
    for r in rows:
        if r["model"] == "RandomizedCRFTagger":
            by_task.setdefault(r["task"], []).append(tuple(r[k] for k in SCORES))
    for task, scores in by_task.items():
        if len(scores) > 1:
            same = "the same" if len(set(scores)) == 1 else "NOT the same"
            notes.append(f"{task}: our scores are {same} for every n_jobs.")
    return notes


EVAL_NOTE = ("One evaluation of ExactCRFObjective (what fit evaluates: exact loss, L2 term "
             "and gradient, all training "
             "sequences, unused features dropped), median of "
             f"{EVAL_REPEATS}; floor: crf_gradient_profile.py's numba loops of the same "
             "multiply-adds, single thread: the feature product and the scatter "
             "(nnz x V each) plus the chain (3 V^2 per token).")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--models", nargs="+", default=DEFAULT_FAMILIES,
                        choices=list(FAMILIES), help="model families (default: crf)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-jobs", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--max-sentences", type=int, default=None,
                        help="first N training and test sentences (a quick run)")
    add_name_argument(parser, SCRIPT)
    args = parser.parse_args(argv)
    section = section_key(SCRIPT, args.name)
    if args.name is None and args.models != DEFAULT_FAMILIES:
        section = "+".join(args.models)
    configs = configurations(args.models, args.n_jobs)
    reference = FAMILIES[args.models[0]]["reference"]
    rows, evals, sizes = [], [], {}
    for task in args.tasks:
        contexts, workers = {}, {}
        for family in args.models:
            spec = FAMILIES[family]
            if spec.get("prepare") is not None:
                contexts[family] = in_process(spec["prepare"], task, args.n_jobs,
                                              args.max_sentences)
            if spec.get("worker") is not None:
                workers.update({m: (spec["worker"], (contexts.get(family),))
                                for m in spec["models"]})
        runs = run_fits(task, configs, args.repeats, args.max_sentences, workers)
        task_rows = fit_rows(task, runs, reference)
        for family in args.models:
            if FAMILIES[family].get("finish") is not None:
                FAMILIES[family]["finish"](task_rows, runs, contexts.get(family))
        rows += task_rows
        for family in args.models:
            evaluate = FAMILIES[family]["evaluation"]
            if evaluate is not None:
                result = in_process(evaluate, task, args.n_jobs, args.max_sentences)
                evals += evaluation_rows(task, result)
                sizes[task] = {k: result[k] for k in ("sentences", "tokens", "features",
                                                       "labels", "nnz")}
    notes = [n for family in args.models
             for n in (FAMILIES[family].get("notes") or _notes)(rows, args.repeats)]
    notes += [f"{task} training data: " + ", ".join(f"{k} {v}" for k, v in s.items())
              for task, s in sizes.items()]
    more = None
    if evals:
        more = ("## One gradient evaluation of our exact CRF against its floor\n\n"
                + markdown_table(evals, ["task", "n_jobs", "ms", "floor ms", "x floor"])
                + f"\n\n- {EVAL_NOTE}\n")
    title = ("Standard tasks: " + ", ".join(FAMILIES[f]["title"] for f in args.models)
             + " against sklearn-crfsuite")
    columns = ["task", "model", "n_jobs", "F1", "token acc", "log loss", "ECE %",
               "iterations", "fit s", "x crfsuite", "peak MiB", "model MiB",
               "same in repeats"]
    for family in args.models:
        for after, more_columns in FAMILIES[family].get("columns", {}).items():
            at = columns.index(after) + 1
            columns[at:at] = [c for c in more_columns if c not in columns]
    write_results(SCRIPT, rows, columns, title=title, notes=notes, section=section,
                  extra={"evaluation": evals, "sizes": sizes, "families": args.models,
                         "repeats": args.repeats, "n_jobs": args.n_jobs,
                         "max_sentences": args.max_sentences},
                  more_markdown=more)
    return 0


if __name__ == "__main__":
    sys.exit(main())
