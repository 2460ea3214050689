"""The ``gp`` family of ``standard_tasks.py``: GPStructTagger at its defaults
and the L2 CRFs whose ``c2`` is chosen on a development set, against
sklearn-crfsuite at the tutorial's settings.

What it measures
----------------
On each task (CoNLL-2000 chunking, CoNLL-2002 Spanish NER; sklearn-crfsuite's
tutorial feature dicts, ``_conll.tutorial_features``) the family has these
rows, every fit in a fresh "spawn" process (``standard_tasks.in_process``):

* ``sklearn-crfsuite``: ``CRF(algorithm="lbfgs", c1=0.1, c2=0.1,
  max_iterations=100, all_possible_transitions=True)``, the tutorial's
  settings: the reference of every ratio and of ``F1 se``;
* ``sklearn-crfsuite L2``: the same with ``c1=0`` and ``c2`` chosen among
  :data:`C2_CANDIDATES` on the development set;
* ``RandomizedCRFTagger L2``: ``Pipeline([SequenceVectorizer(),
  RandomizedCRFTagger(c1=0, c2=c2, max_iter=100, n_jobs=J)])``, ``c2``
  chosen the same way (its own choice), one row per J of ``--n-jobs``;
* ``GPStructTagger``: ``Pipeline([SequenceVectorizer(),
  GPStructTagger(n_jobs=J, random_state=0)])``, every other parameter at
  its default: its fit chooses its prior variance and temperature itself
  (``kernel_variance="cv"``, ``temperature="auto"``), and that choice is
  part of its timed fit; one row per J.

The choice of ``c2`` (:func:`prepare`, once per task, in a process of its
own, before the timed fits; not timed): each candidate is fitted on the
choice's training sentences and scored by chunk F1 (conlleval's rule) on the
development sentences; the first candidate (in the order of
:data:`C2_CANDIDATES`) with the highest F1 wins, and the timed fit refits it
on all the training sentences. The development set (:func:`dev_split`):
CoNLL-2002's official ``esp.testa``, the choice's fits on all of
``esp.train``; for CoNLL-2000, which has none, a tenth of the training
sentences (a permutation seeded by :data:`DEV_SEED`), the choice's fits on
the other nine tenths. The test sentences are never used to choose.
``--max-sentences N`` keeps the first N sentences of ``esp.testa`` too.

Besides the columns of ``standard_tasks.py`` each row has: ``F1 se``,
``log loss se`` and ``ECE se``, the paired bootstrap standard errors of (its
score minus the tutorial crfsuite's; a note gives GPStructTagger's minus the
L2 CRF's, with theirs), :mod:`_bootstrap`,
:data:`BOOTSTRAP_RESAMPLES` resamples of the test sentences with
replacement (seeded by :data:`BOOTSTRAP_SEED`, the same resamples for every
row of a task), computed in the parent from the per-sentence predictions of
the first repeat; ``err@80 %``, the token error among the 80 % most
confident test tokens (:func:`skgpstruct.metrics.selective_error`,
confidence: the largest marginal); ``predict s``, ``predict(X_test)`` of the
fitted model (dicts in, the vectorizer included for ours); ``marginals s``,
crfsuite's ``CRF.predict_marginals(X_test)`` (its dicts, what a crfsuite user
calls) or our pipeline's ``transform`` plus the tagger's
``predict_marginals``; ``x crfsuite marginals``, that over the tutorial
crfsuite's in the same repeat (median of the per-repeat ratios);
``uncertainty s`` (GPStructTagger only), ``predict_uncertainty`` (default
arguments: token entropies of the marginals) of the already transformed
test set; ``uncertainty x marginals``, that over the GP's own ``marginals
s`` in the same repeat (median). Times are medians over the repeats.

The warm-up before the timed fit (numba compiles or loads its kernels
there): the CRFs fit 1 iteration on 20 sentences and predict and give the
marginals of 2; GPStructTagger fits one epoch with ``optimizer="svi"`` and
one iteration with ``optimizer="lbfgs"`` (the two optimizers
``optimizer="auto"`` chooses between; ``kernel_variance=1.0,
temperature=0.5, n_predict_samples=8``, no validation: under a second) on
20 sentences, then predicts, gives the marginals and the uncertainty of 2.
Its hyperparameter validation fits plain CRFs (kernels compiled by the
warm-up's posterior-mode CRF) and is not run in the warm-up (about 10 s).
"""

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import (chunk_counts, f1_of, paired_se, resample_weights,  # noqa: E402
                        resampled_scores, sentence_stats, token_stats)
from _conll import read_columns, tutorial_features  # noqa: E402
from calibration import _with_unseen_labels  # noqa: E402
from crfsuite_parity import sentences  # noqa: E402

from skgpstruct.datasets import get_data_home  # noqa: E402
from skgpstruct.metrics import (  # noqa: E402
    chunk_f1_score,
    expected_calibration_error,
    extract_chunks,
    flat_accuracy_score,
    marginal_log_loss,
    selective_error,
)

#: the tutorial's penalties (the reference row)
TUTORIAL_C1 = TUTORIAL_C2 = 0.1
#: the L2 rows' candidates, in the order ties are broken (the first wins)
C2_CANDIDATES = (0.01, 0.1, 1.0)
MAX_ITER = 100
WARMUP_SENTENCES = 20
N_BINS = 15
#: CoNLL-2000: the fraction of the training sentences held out to choose c2
DEV_FRACTION = 0.1
DEV_SEED = 0
#: official development files; a task without one holds out DEV_FRACTION
DEV_FILES = {"conll2002": "conll2002/esp.testa"}
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
COVERAGE = 0.8
REFERENCE = "sklearn-crfsuite"
#: the GP's warm-up fits: the two optimizers of optimizer="auto", no validation
GP_WARMUPS = ({"optimizer": "svi"}, {"optimizer": "lbfgs"})
GP_WARMUP_PARAMS = {"kernel_variance": 1.0, "temperature": 0.5, "max_iter": 1,
                    "n_predict_samples": 8}


# -------------------------------------------------------------------- data
def featurize(sents):
    """``(X, y)`` of ``(word, pos, label)`` sentences: the tutorial's feature
    dicts and the labels."""
    return ([[tutorial_features(s, i) for i in range(len(s))] for s in sents],
            [[t[-1] for t in s] for s in sents])


def dev_split(task, X, y, max_dev=None):
    """The development set of ``task`` and the sentences the choice fits on.

    Parameters
    ----------
    task : str
        A key of ``_conll.TASKS``.
    X, y : list
        The training sentences (feature dicts, labels).
    max_dev : int or None, default=None
        First sentences of an official development file kept (None: all).

    Returns
    -------
    fit : tuple of list
        ``(X_fit, y_fit)``: all of ``X, y`` when the task has a development
        file (:data:`DEV_FILES`), else the sentences not held out, in their
        order.
    dev : tuple of list
        ``(X_dev, y_dev)``: the development file's sentences, or the
        ``round(DEV_FRACTION * n)`` training sentences first in a
        permutation seeded by :data:`DEV_SEED`, in their order.
    description : str
        What the development set is (a file, or the sentences held out).
    """
    if task in DEV_FILES:
        dev = featurize(read_columns(Path(get_data_home()) / DEV_FILES[task])[:max_dev])
        return (X, y), dev, f"{DEV_FILES[task].split('/')[-1]} ({len(dev[1])} sentences)"
    n = len(y)
    n_dev = max(1, int(round(DEV_FRACTION * n)))
    held = np.zeros(n, dtype=bool)
    held[np.random.default_rng(DEV_SEED).permutation(n)[:n_dev]] = True
    def pick(keep):
        return ([X[i] for i in range(n) if held[i] == keep],
                [y[i] for i in range(n) if held[i] == keep])

    return pick(False), pick(True), (f"{n_dev} of the {n} training sentences held out "
                                     f"(seeded permutation, seed {DEV_SEED})")


# ------------------------------------------------------------------ models
def make_crfsuite(n_jobs, max_iter, c1=TUTORIAL_C1, c2=TUTORIAL_C2):
    """sklearn-crfsuite, L-BFGS, all possible transitions (``n_jobs`` unused)."""
    import sklearn_crfsuite

    return sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=max_iter,
                                all_possible_transitions=True)


def make_crfsuite_l2(n_jobs, max_iter, c2=TUTORIAL_C2):
    """sklearn-crfsuite with ``c1=0``."""
    return make_crfsuite(n_jobs, max_iter, c1=0.0, c2=c2)


def make_crf_l2(n_jobs, max_iter, c2=TUTORIAL_C2):
    """Our exact CRF with ``c1=0`` behind the vectorizer of the feature dicts."""
    from sklearn.pipeline import Pipeline

    from skgpstruct import RandomizedCRFTagger
    from skgpstruct.features import SequenceVectorizer

    return Pipeline([("vectorizer", SequenceVectorizer()),
                     ("crf", RandomizedCRFTagger(c1=0.0, c2=c2, max_iter=max_iter,
                                                 n_jobs=n_jobs))])


def make_gp(n_jobs, max_iter=None, **params):
    """GPStructTagger behind the vectorizer: its defaults, ``random_state=0``;
    ``max_iter=None`` keeps the default, ``params`` (the warm-up's) override."""
    from sklearn.pipeline import Pipeline

    from skgpstruct import GPStructTagger
    from skgpstruct.features import SequenceVectorizer

    if max_iter is not None:
        params["max_iter"] = max_iter
    return Pipeline([("vectorizer", SequenceVectorizer()),
                     ("gp", GPStructTagger(n_jobs=n_jobs, random_state=0, **params))])


def crfsuite_marginals(crf, X):
    """crfsuite's ``predict_marginals(X)`` (timed: the dicts a crfsuite user
    gets), then as arrays, columns in ``crf.classes_`` order.

    Returns
    -------
    seconds : float
    marginals : list of ndarray of shape (T_n, n_labels)
    labels : list
    """
    start = time.perf_counter()
    dicts = crf.predict_marginals(X)
    seconds = time.perf_counter() - start
    labels = list(crf.classes_)
    marginals = [np.array([[tok.get(lab, 0.0) for lab in labels] for tok in seq],
                          dtype=float).reshape(len(seq), len(labels)) for seq in dicts]
    return seconds, marginals, labels


def pipeline_marginals(pipe, X):
    """The pipeline's ``transform`` and the tagger's ``predict_marginals``,
    timed together; the same returns as :func:`crfsuite_marginals`."""
    start = time.perf_counter()
    marginals = pipe[-1].predict_marginals(pipe[:-1].transform(X))
    return time.perf_counter() - start, marginals, list(pipe[-1].classes_)


def crfsuite_iterations(crf):
    log = crf.training_log_
    return len(log.iterations) if log is not None else None


def pipeline_iterations(pipe):
    return int(pipe[-1].n_iter_)


#: model -> standard_tasks' Model fields (standard_tasks registers the names
#: it lacks); ``make(n_jobs, max_iter, **params)``, ``params`` the choice's
MODELS = {
    REFERENCE: {"make": make_crfsuite, "marginals": crfsuite_marginals,
                "iterations": crfsuite_iterations, "threaded": False},
    "sklearn-crfsuite L2": {"make": make_crfsuite_l2, "marginals": crfsuite_marginals,
                            "iterations": crfsuite_iterations, "threaded": False},
    "RandomizedCRFTagger L2": {"make": make_crf_l2, "marginals": pipeline_marginals,
                               "iterations": pipeline_iterations, "threaded": True},
    "GPStructTagger": {"make": make_gp, "marginals": pipeline_marginals,
                       "iterations": pipeline_iterations, "threaded": True},
}
#: the models whose c2 is chosen on the development set
TUNED = ("sklearn-crfsuite L2", "RandomizedCRFTagger L2")


# ------------------------------------------------------- scores and choices
def scores(y_true, y_pred, marginals, labels):
    """Test scores of one fit, in %: F1 (chunks), token accuracy, ECE (15
    bins), err@80 %; log loss in nats. A label unseen in training has
    marginal 0 (``calibration._with_unseen_labels``)."""
    marginals, labels = _with_unseen_labels(y_true, marginals, labels)
    return {"F1": 100 * chunk_f1_score(y_true, y_pred),
            "token acc": 100 * flat_accuracy_score(y_true, y_pred),
            "log loss": marginal_log_loss(y_true, marginals, labels=labels),
            "ECE %": 100 * expected_calibration_error(y_true, marginals, labels=labels,
                                                      n_bins=N_BINS),
            "err@80 %": 100 * selective_error(y_true, marginals, labels=labels,
                                              coverage=COVERAGE)}


def choose_c2(model, fit, dev, n_jobs=1, keep=False):
    """The ``c2`` of ``model`` (a key of :data:`TUNED`) with the best dev F1.

    Parameters
    ----------
    model : str
    fit, dev : tuple of list
        ``(X, y)`` the candidates are fitted on, and scored on.
    n_jobs : int, default=1
        Threads of our fits (results do not depend on it).
    keep : bool, default=False
        Also return the chosen candidate's fitted estimator.

    Returns
    -------
    c2 : float
        The first of :data:`C2_CANDIDATES` with the highest dev chunk F1.
    table : list of dict
        Per candidate: ``c2``, ``dev F1`` (%), ``fit s``.
    estimator : estimator
        Only with ``keep``: the chosen candidate, fitted on ``fit``.
    """
    table, best, best_est = [], None, None
    for c2 in C2_CANDIDATES:
        est = MODELS[model]["make"](n_jobs, MAX_ITER, c2=c2)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # max_iter reached
            est.fit(*fit)
        fit_s = time.perf_counter() - start
        f1 = 100 * chunk_f1_score(dev[1], est.predict(dev[0]))
        table.append({"c2": c2, "dev F1": f1, "fit s": fit_s})
        if best is None or f1 > best["dev F1"]:
            best, best_est = table[-1], (est if keep else None)
    return (best["c2"], table, best_est) if keep else (best["c2"], table)


def prepare(task, n_jobs_list, max_sentences):
    """Choose ``c2`` of the :data:`TUNED` models (run in a process of its own).

    Parameters
    ----------
    task : str
    n_jobs_list : list of int
        ``--n-jobs``; our choice's fits use the largest.
    max_sentences : int or None
        First training, development-file and test sentences kept.

    Returns
    -------
    context : dict
        ``c2`` ({model: chosen}), ``choice`` ({model: :func:`choose_c2`'s
        table}), ``dev`` (its description), ``y_test`` (the test labels,
        for the bootstrap).
    """
    (X, y), (_, yt) = sentences(task, max_sentences)
    _warm_crf(max(n_jobs_list), X, y)
    fit, dev, description = dev_split(task, X, y, max_sentences)
    context = {"c2": {}, "choice": {}, "dev": description, "y_test": yt}
    for model in TUNED:
        context["c2"][model], context["choice"][model] = choose_c2(
            model, fit, dev, max(n_jobs_list))
        print(f"{task} {model}: dev F1 " + ", ".join(
            f"c2={r['c2']:g} {r['dev F1']:.2f}" for r in context["choice"][model])
            + f" -> c2={context['c2'][model]:g}", file=sys.stderr, flush=True)
    return context


# -------------------------------------------------------- the worker process
def _maxrss_mib():
    """This process's peak resident set so far, MiB (``ru_maxrss``: KiB on Linux)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _warm_crf(n_jobs, X, y):
    """numba's kernels of our exact CRF (compiled or loaded), not timed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make_crf_l2(n_jobs, 1).fit(X[:WARMUP_SENTENCES], y[:WARMUP_SENTENCES])


def warm_up(model, n_jobs, X, y, Xt):
    """Fit ``model`` on :data:`WARMUP_SENTENCES` sentences and predict, give
    the marginals (and the GP's uncertainty) of 2: numba compiles or loads
    what the timed fit and the predictions run (see the module docstring)."""
    spec = MODELS[model]
    Xw, yw = X[:WARMUP_SENTENCES], y[:WARMUP_SENTENCES]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if model != "GPStructTagger":
            fitted = [spec["make"](n_jobs, 1).fit(Xw, yw)]
        else:
            fitted = [make_gp(n_jobs, **GP_WARMUP_PARAMS, **extra).fit(Xw, yw)
                      for extra in GP_WARMUPS]
        for est in fitted:
            est.predict(Xt[:2])
            spec["marginals"](est, Xt[:2])
            if model == "GPStructTagger":
                est[-1].predict_uncertainty(est[:-1].transform(Xt[:2]))


def gp_setting(gp):
    """What a fitted GPStructTagger chose: prior variance, the c2 of its
    posterior mode's CRF (``1 / (2 sigma^2)``), temperature, optimizer, decoder."""
    variance = float(getattr(gp.kernel_, "variance", float("nan")))
    return {"kernel variance": variance, "c2": 1.0 / (2.0 * variance),
            "temperature": float(gp.temperature_), "optimizer": gp.optimizer_,
            "decoder": gp.decode_}


def fit_worker(task, model, n_jobs, max_sentences, context):
    """Fit, time and score one model of the family on one task (in a process
    of its own).

    Parameters
    ----------
    task : str
    model : str
        A key of :data:`MODELS`.
    n_jobs : int
        Threads of our fits (ignored by crfsuite).
    max_sentences : int or None
        First training and test sentences kept (None: all).
    context : dict
        :func:`prepare`'s (the chosen ``c2``).

    Returns
    -------
    result : dict
        What ``standard_tasks.fit_worker`` returns (``fit s``, the memory,
        the scores, ``iterations``), plus ``err@80 %``, ``predict s``,
        ``marginals s``, ``uncertainty s`` (the GP; else None), ``c2`` and
        the GP's choice (:func:`gp_setting`), and ``y_pred`` (the test
        predictions, per sentence, for the parent's bootstrap).
    """
    spec = MODELS[model]
    (X, y), (Xt, yt) = sentences(task, max_sentences)
    warm_up(model, n_jobs, X, y, Xt)
    loaded = _maxrss_mib()
    params = {"c2": context["c2"][model]} if model in TUNED else {}
    estimator = spec["make"](n_jobs, None if model == "GPStructTagger" else MAX_ITER,
                             **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter reached: expected here
        start = time.perf_counter()
        estimator.fit(X, y)
        fit_s = time.perf_counter() - start
    fit_peak = _maxrss_mib()
    start = time.perf_counter()
    y_pred = estimator.predict(Xt)
    predict_s = time.perf_counter() - start
    marginals_s, marginals, labels = spec["marginals"](estimator, Xt)
    result = scores(yt, y_pred, marginals, labels)
    result["tokens"] = token_stats(yt, *_with_unseen_labels(yt, marginals, labels))
    uncertainty_s, setting = None, {"c2": params.get("c2", TUTORIAL_C2)}
    if model == "GPStructTagger":
        Ft = estimator[:-1].transform(Xt)
        start = time.perf_counter()
        estimator[-1].predict_uncertainty(Ft)
        uncertainty_s = time.perf_counter() - start
        setting = gp_setting(estimator[-1])
    peak = _maxrss_mib()
    result.update({"iterations": spec["iterations"](estimator), "fit s": fit_s,
                   "predict s": predict_s, "marginals s": marginals_s,
                   "uncertainty s": uncertainty_s, "loaded MiB": loaded,
                   "fit peak MiB": fit_peak, "peak MiB": peak, "model MiB": peak - loaded,
                   **setting, "y_pred": [list(map(str, s)) for s in y_pred]})
    return result


# ----------------------------------------------------------------- the parent
def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else float("nan")


def finish(rows, runs, context):
    """Add the family's columns to one task's rows (``standard_tasks.fit_rows``'s)
    and drop the per-sentence predictions from the recorded repeats.

    Parameters
    ----------
    rows : list of dict
        One task's rows, changed in place (those of this family's models).
    runs : dict
        ``{(model, n_jobs): [result of each repeat]}`` of the task.
    context : dict
        :func:`prepare`'s for the task.
    """
    yt = context["y_test"]
    ref = runs.get((REFERENCE, 1))
    W = resample_weights(len(yt), BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
    lengths = [len(seq) for seq in yt]
    boot = {}  # (model, n_jobs): the resamples' scores
    for key, results in runs.items():
        if key[0] in MODELS and "y_pred" in results[0]:
            boot[key] = resampled_scores(W, chunk_counts(yt, results[0]["y_pred"]),
                                         sentence_stats(lengths, results[0]["tokens"],
                                                        N_BINS), N_BINS)
    for row in rows:
        results = runs[(row["model"], row["n_jobs"])]
        if (row["model"], row["n_jobs"]) not in boot:
            continue  # another family's row
        mine = boot[(row["model"], row["n_jobs"])]
        for metric in ("F1", "log loss", "ECE %"):  # the full sample is the row's score
            assert abs(float(mine[metric][-1]) - row[metric]) < 1e-9, metric
        se = paired_se(mine, boot[(REFERENCE, 1)]) if (REFERENCE, 1) in boot else {}
        row["F1 se"] = se.get("F1", float("nan"))
        row["log loss se"] = se.get("log loss", float("nan"))
        row["ECE se"] = se.get("ECE %", float("nan"))
        crf = [k for k in boot if k[0] == "RandomizedCRFTagger L2"]
        if row["model"] == "GPStructTagger" and crf:
            other = boot[max(crf, key=lambda k: k[1])]
            se = paired_se(mine, other)
            row["minus CRF L2"] = {m: [float(mine[m][-1] - other[m][-1]), se[m]]
                                   for m in ("F1", "log loss", "ECE %")}
        row["err@80 %"] = results[0]["err@80 %"]
        for key in ("predict s", "marginals s", "uncertainty s"):
            row[key] = _median([r[key] for r in results])
        ratios = ([r["marginals s"] / q["marginals s"] for r, q in zip(results, ref)]
                  if ref and "marginals s" in ref[0] else [None])
        row["x crfsuite marginals"] = _median(ratios)
        row["x crfsuite marginals (repeats)"] = ratios
        if row["model"] == "GPStructTagger":
            ratios = [r["uncertainty s"] / r["marginals s"] for r in results]
            row["uncertainty x marginals"] = _median(ratios)
            row["uncertainty x marginals (repeats)"] = ratios
            setting = {k: results[0].get(k) for k in ("kernel variance", "c2", "temperature",
                                                       "optimizer", "decoder")}
            row.update(setting)
            row["chosen"] = (f"sigma2={setting['kernel variance']:g} "
                             f"(c2={setting['c2']:.3g}), T={setting['temperature']:g}, "
                             f"{setting['optimizer']}, {setting['decoder']}")
        elif row["model"] in TUNED:
            row["c2"] = context["c2"][row["model"]]
            row["chosen"] = f"c2={row['c2']:g}"
            row["choice"] = context["choice"][row["model"]]
            row["dev"] = context["dev"]
        else:
            row["c2"] = TUTORIAL_C2
            row["chosen"] = f"c1=c2={TUTORIAL_C2:g}"
        for r in results:
            r.pop("y_pred", None)
            r.pop("tokens", None)


def notes(rows, repeats):
    """The family's notes: settings, the choice of c2 and its dev F1 per
    task, how each column is defined, whether n_jobs changed a score."""
    out = [
        f"sklearn-crfsuite: the tutorial's c1 = c2 = {TUTORIAL_C1:g}, {MAX_ITER} "
        "iterations at most, all_possible_transitions=True: the reference of the ratios "
        "and of F1 se. L2 rows: c1 = 0, c2 chosen among "
        + " / ".join(f"{c:g}" for c in C2_CANDIDATES) + " by chunk F1 on the dev set "
        "(the first of the best), then refitted on all training sentences (the timed "
        "fit); the choice's fits are not timed; ours chooses with the largest n_jobs "
        "and uses that c2 for every n_jobs. GPStructTagger: Pipeline(SequenceVectorizer, "
        "GPStructTagger(n_jobs=J, random_state=0)), other parameters at their defaults; "
        "its own choice of prior variance, temperature and decoder is part of its fit s "
        "('chosen': sigma2, the c2 = 1 / (2 sigma2) of its posterior mode, T, the "
        "optimizer optimizer='auto' ran, the decoder decode='auto' chose).",
        "fit s: median of the repeats (ours: the Pipeline's fit, vectorizer included; "
        "crfsuite: CRF.fit); x crfsuite: its fit s / the tutorial crfsuite's in the same "
        f"repeat, median over {repeats} repeat(s). Each fit in a fresh process after a "
        f"warm-up on {WARMUP_SENTENCES} sentences (CRFs: 1 iteration; GPStructTagger: "
        "one svi epoch and one lbfgs iteration with sigma2 = 1, T = 0.5, no validation); "
        "peak MiB: ru_maxrss at the process's end (fit and test predictions); model "
        "MiB: that minus ru_maxrss after imports, data loading and the warm-up.",
        "F1: chunks, conlleval's rule; token acc, ECE (15 bins) in %; log loss: mean "
        "token -log marginal of the gold label, nats (a test label unseen in training "
        "has marginal 0: -log 1e-15); err@80 %: token error among the 80 % of test tokens "
        "with the largest top marginal (selective_error, coverage 0.8). Scores of the "
        "first repeat.",
        f"F1 se, log loss se, ECE se: paired bootstrap standard errors of (the row's "
        f"score - the tutorial crfsuite's), {BOOTSTRAP_RESAMPLES} resamples of the test "
        f"sentences with replacement (seed {BOOTSTRAP_SEED}, the same resamples for every "
        "row), first repeat's predictions and marginals (benchmarks/_bootstrap.py).",
        "predict s: predict(X_test) from feature dicts (ours: vectorizer included); "
        "marginals s: crfsuite's CRF.predict_marginals(X_test) (dicts), ours: the "
        "pipeline's transform + the tagger's predict_marginals; x crfsuite marginals: "
        "marginals s / the tutorial crfsuite's in the same repeat, median; uncertainty s "
        "(GP): predict_uncertainty of the already transformed test set, default "
        "arguments (token entropies); uncertainty x marginals: uncertainty s / the GP's "
        "marginals s in the same repeat, median. Times: medians of the repeats.",
    ]
    seen = set()
    for r in rows:
        if r.get("choice") and (r["task"], r["model"]) not in seen:
            seen.add((r["task"], r["model"]))
            where = "all" if r["task"] in DEV_FILES else "the other"
            out.append(f"{r['task']} {r['model']}: dev = {r['dev']}, the choice's fits "
                       f"on {where} training sentences; dev F1 by c2: "
                       + ", ".join(f"{c['c2']:g}: {c['dev F1']:.2f}" for c in r["choice"])
                       + f"; chosen c2 = {r['c2']:g}.")
    for r in rows:
        if r.get("minus CRF L2"):
            out.append(f"{r['task']}: GPStructTagger (n_jobs={r['n_jobs']}) minus "
                       "RandomizedCRFTagger L2, paired bootstrap as above: " + ", ".join(
                           f"{m} {d:+.4g} \u00b1 {se:.2g}"
                           for m, (d, se) in r["minus CRF L2"].items()) + ".")
    keys = ("F1", "token acc", "log loss", "ECE %", "err@80 %", "iterations")
    for model in ("RandomizedCRFTagger L2", "GPStructTagger"):
        by_task = {}
        for r in rows:
            if r["model"] == model:
                by_task.setdefault(r["task"], []).append(tuple(r.get(k) for k in keys))
        for task, found in by_task.items():
            if len(found) > 1:
                same = "the same" if len(set(found)) == 1 else "NOT the same"
                out.append(f"{task}: {model}'s scores are {same} for every n_jobs.")
    return out


#: how standard_tasks.py runs the family (see its FAMILIES)
FAMILY = {
    "models": [REFERENCE, "sklearn-crfsuite L2", "RandomizedCRFTagger L2", "GPStructTagger"],
    "reference": REFERENCE, "evaluation": None,
    "title": "GPStructTagger and the L2 CRFs (c2 chosen on a dev set)",
    "worker": fit_worker, "prepare": prepare, "finish": finish, "notes": notes,
    #: column -> the columns inserted after it
    "columns": {"n_jobs": ["chosen"], "F1": ["F1 se"], "log loss": ["log loss se"],
                "ECE %": ["ECE se", "err@80 %"],
                "x crfsuite": ["predict s", "marginals s", "x crfsuite marginals",
                               "uncertainty s", "uncertainty x marginals"]},
}
