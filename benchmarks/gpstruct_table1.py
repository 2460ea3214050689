"""The GPstruct papers' Table 1 protocol: GPStructTagger vs sklearn-crfsuite.

For each task (``basenp``, ``chunking``, ``basenp_large``) and feature path
(``gpstruct``: the papers' binary features; ``crfpp``: the CRF++ files
featurised by the task's template with ``CRFppTemplate``), on the five folds
of ``folds.json`` (the papers' five-fold protocol): token error rate in percent (mean and
std over folds) and fit / predict seconds per fold, for GPStructTagger with
its default parameters (or those given with ``--gp-params``; a second row
predicts from the same fits with the other decoder: ``decode="auto"``
decodes the gpstruct paths' integer labels by the marginals, and chooses
for the crfpp paths' span tags (``B``/``I``/``O``) between Viterbi and the
marginals' argmax in each fit's own validation; the rows count the folds of
each decoder) and for
sklearn-crfsuite (L-BFGS, c2 in 0.01 / 0.1 / 1, on the same features) in the
same run; chunk F1 (conlleval's) beside the error where the labels are
span tags. Results go to the section ``default`` of
``benchmarks/results/gpstruct_table1.{md,json}`` (``--name KEY``: the
section ``KEY``).

Usage::

    python benchmarks/gpstruct_table1.py [--tasks basenp chunking basenp_large]
        [--features gpstruct crfpp] [--folds 0 1 2 3 4] [--no-crfsuite]
        [--gp-params '{"n_inducing": 300}'] [--n-jobs 2] [--name SECTION]
"""

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_name_argument, section_key, write_results  # noqa: E402

from skgpstruct import GPStructTagger  # noqa: E402
from skgpstruct.datasets import load_benchmark  # noqa: E402
from skgpstruct.features import CRFppTemplate  # noqa: E402
from skgpstruct.metrics import chunk_f1_score, is_span_tagging, token_error_rate  # noqa: E402

#: The defaults before the weight-space form (issue 12), for --baseline.
BASELINE = {"approximation": "inducing", "kernel_variance": 3.0,
            "transition_prior_var": 1.0}

PAPERS = {  # Table 1 of the GPstruct papers, token error %
    "basenp": "SVM 5.91, CRF 5.92, GP-ESS 4.81, gp-var-b 5.17, gp-var-s 5.27, gp-var-p 5.37",
    "chunking": "SVM 9.79, CRF 8.29, GP-ESS 8.77, gp-var-b 8.76, gp-var-s 10.02, gp-var-p 9.58",
    "basenp_large": "CRF 4.50-5.13, gp-var-s 5.14",
}


def _crfsuite_features(X):
    """CSR token rows to python-crfsuite's list of {feature: value} dicts."""
    out = []
    for x in X:
        x = sp.csr_matrix(x)
        seq = []
        for i in range(x.shape[0]):
            row = slice(x.indptr[i], x.indptr[i + 1])
            seq.append({f"f{j}": float(v) for j, v in zip(x.indices[row], x.data[row])})
        out.append(seq)
    return out


def _fold_data(bunch, train, test):
    X_tr = [bunch.X[i] for i in train]
    X_te = [bunch.X[i] for i in test]
    y_tr = [np.asarray(bunch.y[i]) for i in train]
    y_te = [np.asarray(bunch.y[i]) for i in test]
    if bunch.features == "crfpp":
        feats = CRFppTemplate(bunch.template)
        X_tr = feats.fit_transform(X_tr)
        X_te = feats.transform(X_te)
    return X_tr, y_tr, X_te, y_te


def _scores(y_te, pred):
    err = 100.0 * token_error_rate(y_te, pred)
    span = is_span_tagging(np.unique(np.concatenate(y_te)))
    return err, (100.0 * chunk_f1_score(y_te, pred) if span else float("nan"))


def run_gp(X_tr, y_tr, X_te, y_te, params, seed):
    """Fit once; score ``predict`` with the fitted decoder (``decode_``) and
    with the other one. Each result: (error %, F1, fit s, predict s, decoder)."""
    gp = GPStructTagger(random_state=seed, **params)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gp.fit(X_tr, y_tr)
    fit_s = time.perf_counter() - t0
    out = []
    first = gp.decode_
    for dec in (first, "viterbi" if first == "marginal" else "marginal"):
        gp.set_params(decode=dec)
        t0 = time.perf_counter()
        pred = gp.predict(X_te)
        pred_s = time.perf_counter() - t0
        out.append((*_scores(y_te, pred), fit_s, pred_s, dec))
    return out


def _decoders(results):
    """``"marginal x4, viterbi x1"``: the decoders of the folds' results."""
    names = [r[4] for r in results]
    return ", ".join(f"{d} x{names.count(d)}" for d in sorted(set(names)))


def run_crfsuite(X_tr, y_tr, X_te, y_te, c2):
    import sklearn_crfsuite

    F_tr, F_te = _crfsuite_features(X_tr), _crfsuite_features(X_te)
    s_tr = [[str(v) for v in t] for t in y_tr]
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.0, c2=c2, max_iterations=1000)
    t0 = time.perf_counter()
    crf.fit(F_tr, s_tr)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = crf.predict(F_te)
    pred_s = time.perf_counter() - t0
    return (*_scores([[str(v) for v in t] for t in y_te], pred), fit_s, pred_s)


def _summary(model, task, features, results):
    err = np.array([r[0] for r in results])
    f1 = np.array([r[1] for r in results])
    return {
        "task": task, "features": features, "model": model,
        "error % mean": float(err.mean()), "error % std": float(err.std(ddof=1)) if len(err) > 1 else 0.0,
        "chunk F1 mean": None if np.isnan(f1).any() else float(f1.mean()),
        "fit s (median)": float(np.median([r[2] for r in results])),
        "predict s (median)": float(np.median([r[3] for r in results])),
        "folds": len(results), "per fold": [round(float(e), 3) for e in err],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["basenp", "chunking", "basenp_large"])
    parser.add_argument("--features", nargs="+", default=["gpstruct", "crfpp"])
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--gp-params", default="{}", help="JSON dict of GPStructTagger params")
    parser.add_argument("--c2", nargs="+", type=float, default=[0.01, 0.1, 1.0])
    parser.add_argument("--no-crfsuite", action="store_true")
    parser.add_argument("--n-jobs", type=int, default=None)
    add_name_argument(parser, "gpstruct_table1")
    parser.add_argument("--baseline", nargs="*", default=[], metavar="TASK/FEATURES",
                        help="also fit the previous defaults (inducing-point form, "
                             "variance 3, 500 inducing points) on these task/features "
                             "pairs, e.g. basenp/gpstruct: the before/after ratio")
    args = parser.parse_args(argv)
    section = section_key("gpstruct_table1", args.name)
    gp_params = json.loads(args.gp_params)
    if args.n_jobs is not None:
        gp_params["n_jobs"] = args.n_jobs
    rows = []
    for task in args.tasks:
        for features in args.features:
            bunch = load_benchmark(task, features=features)
            gp_res, gp_vit, crf_res = [], [], {c2: [] for c2 in args.c2}
            base = f"{task}/{features}" in args.baseline
            base_res = []
            for k in args.folds:
                train, test = bunch.folds[k]
                X_tr, y_tr, X_te, y_te = _fold_data(bunch, train, test)
                own, other = run_gp(X_tr, y_tr, X_te, y_te, gp_params, seed=k)
                gp_res.append(own)
                gp_vit.append(other)
                print(f"{task} {features} fold {k}: GPStructTagger error "
                      f"{own[0]:.2f}% F1 {own[1]:.2f} ({own[4]}; {other[4]} "
                      f"{other[0]:.2f}%, F1 {other[1]:.2f}) fit {own[2]:.1f}s",
                      flush=True)
                if base:
                    old = dict(BASELINE, n_jobs=gp_params.get("n_jobs"))
                    base_res.append(run_gp(X_tr, y_tr, X_te, y_te, old, seed=k)[0])
                    print(f"    previous defaults: {base_res[-1][0]:.2f}% fit "
                          f"{base_res[-1][2]:.1f}s", flush=True)
                if not args.no_crfsuite:
                    for c2 in args.c2:
                        crf_res[c2].append(run_crfsuite(X_tr, y_tr, X_te, y_te, c2))
                        print(f"    crfsuite c2={c2}: {crf_res[c2][-1][0]:.2f}%", flush=True)
            label = "GPStructTagger" + (f" {gp_params}" if gp_params else "")
            rows.append(_summary(f"{label} (decode_: {_decoders(gp_res)})", task,
                                 features, gp_res))
            rows.append(_summary(f"{label}, the other decoder ({_decoders(gp_vit)}; "
                                 "same fits)", task, features, gp_vit))
            if base:
                rows.append(_summary("GPStructTagger, previous defaults "
                                     "(inducing, variance 3)", task, features, base_res))
                ratio = rows[-1]["fit s (median)"] / rows[-3]["fit s (median)"]
                rows[-1]["model"] += f" [fit {ratio:.1f}x slower]"
            if not args.no_crfsuite:
                for c2 in args.c2:
                    rows.append(_summary(f"sklearn-crfsuite c2={c2}", task, features, crf_res[c2]))
    columns = ["task", "features", "model", "error % mean", "error % std",
               "chunk F1 mean", "fit s (median)", "predict s (median)", "folds", "per fold"]
    notes = [f"Papers' Table 1, {t}: {PAPERS[t]}" for t in args.tasks]
    notes.append("gpstruct features: labels -1 mapped to 0 as pygpstruct does.")
    notes.append("CRF++ (crf_learn defaults, template path, 5-fold means, measured "
                 "for issue 12, not in this run): basenp 4.17, chunking 8.77, "
                 "basenp_large 3.59.")
    write_results("gpstruct_table1", rows, columns,
                  title="GPstruct Table 1 protocol: token error % over the folds",
                  notes=notes, extra={"gp_params": gp_params, "folds": args.folds},
                  section=section)


if __name__ == "__main__":
    main()
