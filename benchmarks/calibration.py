"""Calibration of the token marginals: GPStructTagger vs two plain CRFs.

For each task (``basenp``, ``chunking``, ``basenp_large``) and feature path
(``gpstruct``: the papers' binary features; ``crfpp``: the CRF++ files
featurised by the task's template), on the five folds of ``folds.json``
(the papers' five-fold protocol), every model is fitted on the fold's training
sentences and scored on its test sentences by

* token error % of ``predict`` (the model's own labels: Viterbi for the
  CRFs; for GPStructTagger its ``decode_``: Viterbi for span labels, the
  argmax of the marginals for others) and of the
  argmax of the marginals,
* marginal log loss, multi-class Brier score and expected calibration error
  (15 equal-width bins of the max marginal, in %) of ``predict_marginals``,
* error % among the 80 % most confident tokens (argmax of the marginals),
* fit seconds.

Models: ``gp`` GPStructTagger (default parameters, or ``--gp-params``,
``random_state=fold``); ``crf`` RandomizedCRFTagger in exact mode
(``n_top=None``: exact forward-backward, L-BFGS) at each ``--c2``; and
``crfsuite`` sklearn-crfsuite (L-BFGS, ``c1=0``) at each ``--c2``, its
marginals from ``CRF.predict_marginals`` put in column order. The table holds
the means over the folds; it is written with the per-fold numbers to the
section ``default`` of ``benchmarks/results/calibration.{md,json}``, and a
reliability diagram (tokens pooled over the folds; GPStructTagger and the
two CRFs at crfsuite's best-error c2) per task and path to
``benchmarks/results/calibration_<task>_<path>.png`` when matplotlib (the
``plot`` extra) is installed (``--name KEY``: the section ``KEY`` and
``calibration_KEY_<task>_<path>.png``, so another run leaves the other
sections and figures alone). The script
also prints, per task and path, crfsuite's best-error c2 and how
GPStructTagger compares with crfsuite and with the exact RandomizedCRFTagger
at that c2 (issue 13's acceptance test).

Usage::

    python benchmarks/calibration.py [--tasks basenp chunking basenp_large]
        [--features gpstruct crfpp] [--folds 0 1 2 3 4]
        [--models gp crf crfsuite] [--c2 0.01 0.1 1] [--quick]
        [--gp-params '{"posterior": "coupled"}'] [--crf-params '{}'] [--n-jobs 2]
        [--name SECTION]

``--quick`` runs fold 0 of basenp on the gpstruct path only.
"""

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_name_argument, plot_path, section_key, write_results  # noqa: E402
from gpstruct_table1 import _crfsuite_features, _fold_data  # noqa: E402

from skgpstruct import GPStructTagger, RandomizedCRFTagger  # noqa: E402
from skgpstruct.datasets import load_benchmark  # noqa: E402
from skgpstruct.metrics import (  # noqa: E402
    expected_calibration_error,
    marginal_brier_score,
    marginal_log_loss,
    reliability_curve,
    selective_error,
    token_error_rate,
)

N_BINS = 15
COVERAGE = 0.8
METRICS = ["error %", "argmax error %", "log loss", "Brier", "ECE %", "error % at 80 % coverage", "fit s"]


def _with_unseen_labels(y_te, marginals, labels):
    """Append a zero column for every test label the model never saw.

    A test label absent from the training fold (rare tags of chunking) has
    marginal 0 under the model: it costs ``-log(eps)`` in the log loss and
    counts as an error, instead of making the metrics raise.
    """
    labels = list(labels)
    known = set(labels)
    unseen = sorted({v for seq in y_te for v in seq} - known, key=str)
    if not unseen:
        return marginals, labels
    pad = len(unseen)
    marginals = [np.hstack([m, np.zeros((m.shape[0], pad))]) for m in marginals]
    return marginals, labels + unseen


def _scores(y_te, y_pred, marginals, labels, fit_s):
    marginals, labels = _with_unseen_labels(y_te, marginals, labels)
    conf, acc, counts = reliability_curve(y_te, marginals, labels=labels, n_bins=N_BINS)
    return {
        "error %": 100.0 * token_error_rate(y_te, y_pred),
        "argmax error %": 100.0 * selective_error(y_te, marginals, labels=labels,
                                                  coverage=1.0),
        "log loss": marginal_log_loss(y_te, marginals, labels=labels),
        "Brier": marginal_brier_score(y_te, marginals, labels=labels),
        "ECE %": 100.0 * expected_calibration_error(y_te, marginals, labels=labels,
                                                    n_bins=N_BINS),
        "error % at 80 % coverage": 100.0 * selective_error(
            y_te, marginals, labels=labels, coverage=COVERAGE),
        "fit s": fit_s,
        # per-bin sums, so that the diagram can pool the folds' tokens
        "_bins": {"count": counts.tolist(),
                  "conf_sum": (np.nan_to_num(conf) * counts).tolist(),
                  "acc_sum": (np.nan_to_num(acc) * counts).tolist()},
    }


def _fit_ours(model, X_tr, y_tr, X_te, y_te):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X_tr, y_tr)
    fit_s = time.perf_counter() - t0
    marginals = model.predict_marginals(X_te)
    y_pred = model.predict(X_te)
    return _scores(y_te, y_pred, marginals, model.classes_, fit_s)


def run_gp(X_tr, y_tr, X_te, y_te, params, seed):
    gp = GPStructTagger(random_state=seed, **params)
    scores = _fit_ours(gp, X_tr, y_tr, X_te, y_te)
    # what fit chose from the training fold: the prior variance (cv) and the
    # posterior temperature (weight-space form), the evidence for the rules
    kernel = getattr(gp, "kernel_", None)
    scores["_choice"] = {
        "sigma2": float(getattr(kernel, "variance", np.nan)),
        "temperature": float(getattr(gp, "temperature_", 1.0)),
    }
    return scores


def run_crf(X_tr, y_tr, X_te, y_te, c2, params, seed):
    params = {"n_top": None, **params}
    crf = RandomizedCRFTagger(c2=c2, random_state=seed, **params)
    return _fit_ours(crf, X_tr, y_tr, X_te, y_te)


def run_crfsuite(X_tr, y_tr, X_te, y_te, c2, F_tr=None, F_te=None):
    import sklearn_crfsuite

    F_tr = _crfsuite_features(X_tr) if F_tr is None else F_tr
    F_te = _crfsuite_features(X_te) if F_te is None else F_te
    s_tr = [[str(v) for v in t] for t in y_tr]
    s_te = [[str(v) for v in t] for t in y_te]
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.0, c2=c2, max_iterations=1000)
    t0 = time.perf_counter()
    crf.fit(F_tr, s_tr)
    fit_s = time.perf_counter() - t0
    labels = list(crf.classes_)
    marginals = [np.array([[tok.get(lab, 0.0) for lab in labels] for tok in seq],
                          dtype=float).reshape(len(seq), len(labels))
                 for seq in crf.predict_marginals(F_te)]
    return _scores(s_te, crf.predict(F_te), marginals, labels, fit_s)


def _model_names(models, c2s):
    names = []
    if "gp" in models:
        names.append("GPStructTagger")
    if "crf" in models:
        names += [f"RandomizedCRFTagger exact c2={c2}" for c2 in c2s]
    if "crfsuite" in models:
        names += [f"sklearn-crfsuite c2={c2}" for c2 in c2s]
    return names


def _mean_row(task, features, model, per_fold):
    row = {"task": task, "features": features, "model": model}
    for m in METRICS:
        row[m] = float(np.mean([r[m] for r in per_fold]))
    row["folds"] = len(per_fold)
    return row


def _pooled_curve(per_fold):
    count = np.sum([r["_bins"]["count"] for r in per_fold], axis=0)
    conf = np.sum([r["_bins"]["conf_sum"] for r in per_fold], axis=0)
    acc = np.sum([r["_bins"]["acc_sum"] for r in per_fold], axis=0)
    ok = count > 0
    return conf[ok] / count[ok], acc[ok] / count[ok], count[ok]


def _plot(task, features, results, names, section="default"):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed (the 'plot' extra): no reliability "
              f"diagram for {task} / {features}.")
        return None
    fig, (ax, ax_hist) = plt.subplots(
        2, 1, figsize=(5.5, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="calibrated")
    edges = np.linspace(0, 1, N_BINS + 1)
    for name in names:
        if not results.get(name):
            continue
        conf, acc, count = _pooled_curve(results[name])
        ax.plot(conf, acc, marker="o", markersize=3, label=name)
        ax_hist.stairs(np.sum([r["_bins"]["count"] for r in results[name]], axis=0),
                       edges, label=name)
    ax.set_ylabel("accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{task}, {features} features: reliability ({N_BINS} bins)")
    ax.legend(fontsize=7, loc="upper left")
    ax_hist.set_yscale("log")
    ax_hist.set_xlabel("confidence (max token marginal)")
    ax_hist.set_ylabel("tokens")
    fig.tight_layout()
    path = plot_path("calibration", section, f"_{task}_{features}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path.name}")
    return path.name


def _comparison(task, features, means, c2s):
    """crfsuite's best-error c2 and GP vs the two CRFs at that c2."""
    suite = {c2: means.get(f"sklearn-crfsuite c2={c2}") for c2 in c2s}
    suite = {c2: r for c2, r in suite.items() if r is not None}
    if not suite:
        return None, []
    best = min(suite, key=lambda c2: suite[c2]["error %"])
    lines = [f"{task} / {features}: sklearn-crfsuite's best-error c2 is {best} "
             f"({suite[best]['error %']:.2f} %)."]
    gp = means.get("GPStructTagger")
    peers = [("sklearn-crfsuite", suite[best]),
             ("RandomizedCRFTagger exact", means.get(f"RandomizedCRFTagger exact c2={best}"))]
    if gp is None:
        return best, lines
    for peer_name, peer in peers:
        if peer is None:
            continue
        parts = []
        for m in ("error %", "log loss", "Brier", "ECE %", "error % at 80 % coverage"):
            # 80 % coverage: "no higher"; the others: strictly lower to win
            ok = gp[m] <= peer[m] if m.startswith("error % at") else gp[m] < peer[m]
            parts.append(f"{m} {gp[m]:.3g} vs {peer[m]:.3g} ({'GP better' if ok else 'GP not better'})")
        lines.append(f"{task} / {features}, GP vs {peer_name} c2={best}: " + "; ".join(parts))
    return best, lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["basenp", "chunking", "basenp_large"])
    parser.add_argument("--features", nargs="+", default=["gpstruct", "crfpp"])
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--models", nargs="+", choices=["gp", "crf", "crfsuite"],
                        default=["gp", "crf", "crfsuite"])
    parser.add_argument("--c2", nargs="+", type=float, default=[0.01, 0.1, 1.0])
    parser.add_argument("--quick", action="store_true",
                        help="fold 0 of basenp, gpstruct features only")
    parser.add_argument("--gp-params", default="{}", help="JSON dict of GPStructTagger params")
    parser.add_argument("--crf-params", default="{}",
                        help="JSON dict of RandomizedCRFTagger params (besides c2)")
    parser.add_argument("--n-jobs", type=int, default=None)
    add_name_argument(parser, "calibration")
    args = parser.parse_args(argv)
    section = section_key("calibration", args.name)
    if args.quick:
        args.tasks, args.features, args.folds = ["basenp"], ["gpstruct"], [0]
    gp_params = json.loads(args.gp_params)
    crf_params = json.loads(args.crf_params)
    if args.n_jobs is not None:
        gp_params.setdefault("n_jobs", args.n_jobs)
        crf_params.setdefault("n_jobs", args.n_jobs)
    names = _model_names(args.models, args.c2)

    rows, per_fold_rows, notes, best_c2, plots = [], [], [], {}, {}
    for task in args.tasks:
        for features in args.features:
            bunch = load_benchmark(task, features=features)
            results = {name: [] for name in names}
            for k in args.folds:
                train, test = bunch.folds[k]
                X_tr, y_tr, X_te, y_te = _fold_data(bunch, train, test)
                fold = {}
                if "gp" in args.models:
                    fold["GPStructTagger"] = run_gp(X_tr, y_tr, X_te, y_te, gp_params, seed=k)
                for c2 in args.c2 if "crf" in args.models else ():
                    fold[f"RandomizedCRFTagger exact c2={c2}"] = run_crf(
                        X_tr, y_tr, X_te, y_te, c2, crf_params, seed=k)
                if "crfsuite" in args.models:
                    F_tr, F_te = _crfsuite_features(X_tr), _crfsuite_features(X_te)
                    for c2 in args.c2:
                        fold[f"sklearn-crfsuite c2={c2}"] = run_crfsuite(
                            X_tr, y_tr, X_te, y_te, c2, F_tr, F_te)
                for name, r in fold.items():
                    results[name].append(r)
                    per_fold_rows.append({"task": task, "features": features, "model": name,
                                          "fold": k, **{m: r[m] for m in METRICS},
                                          **r.get("_choice", {})})
                    print(f"{task} {features} fold {k} {name}: "
                          + ", ".join(f"{m} {r[m]:.3g}" for m in METRICS), flush=True)
            means = {}
            for name in names:
                if results[name]:
                    means[name] = _mean_row(task, features, name, results[name])
                    rows.append(means[name])
            best, lines = _comparison(task, features, means, args.c2)
            choices = [r["_choice"] for r in results.get("GPStructTagger", [])]
            if choices:
                lines.append(f"{task} / {features}: GPStructTagger's (sigma^2, T) per fold: "
                             + ", ".join(f"({c['sigma2']:g}, {c['temperature']:g})"
                                         for c in choices))
            if best is not None:
                best_c2[f"{task}/{features}"] = best
            for line in lines:
                print(line)
            notes.extend(lines)
            # the diagram shows the GP and the two CRFs at crfsuite's best c2
            shown = names if best is None else [
                n for n in names if "c2=" not in n or n.endswith(f"c2={best}")]
            plots[f"{task}/{features}"] = _plot(task, features, results, shown,
                                                 section=section)

    notes.append(f"ECE over {N_BINS} equal-width bins of the max marginal; error % at 80 % "
                 "coverage: error of the argmax of the marginals over the 80 % of test "
                 "tokens with the highest max marginal.")
    notes.append("A test label unseen in a training fold gets marginal 0 (log loss -log 1e-15).")
    notes.append(f"GPStructTagger params: {gp_params or 'defaults'}; RandomizedCRFTagger "
                 f"params besides c2: {crf_params or 'defaults'} (n_top=None: exact mode).")
    columns = ["task", "features", "model", *METRICS, "folds"]
    write_results("calibration", rows, columns,
                  title="Calibration of the token marginals (mean over folds)",
                  notes=notes,
                  extra={"per_fold": per_fold_rows, "folds": args.folds,
                         "best_crfsuite_c2": best_c2, "plots": plots,
                         "gp_params": gp_params, "crf_params": crf_params},
                  section=section)


if __name__ == "__main__":
    main()
