"""Soak test: both estimators with default parameters on many random problems.

For each seed ``0 .. n_seeds - 1`` a problem is drawn from
:func:`skgpstruct.datasets.make_chain_data` with sizes drawn from the seed:
2 to 50 labels, 2 to 60 features, 5 to 40 sequences of lengths from 1 up to
30 tokens (single-token sequences included), dense (Gaussian features) or
sparse (binary, CSR) half of the time each, a noise level from 0.05 to 1.
``GPStructTagger(random_state=seed)`` and ``RandomizedCRFTagger(random_state=seed)``,
otherwise with their defaults, are fitted on the first 75 % of the
sequences and predict the rest (``predict``, ``predict_marginals``,
``score``). A run fails on any exception, on NaN / inf / negative
marginals or rows not summing to 1 (1e-6), or on a prediction outside
``classes_``. Warnings (ConvergenceWarning at max_iter, JitterWarning) are
counted, not failures.

The table gives, per estimator: runs, failures, NaN, warnings by kind, fit
time median / 90th percentile / max (spread across problem sizes, not a
speed benchmark), and the mean test accuracy. Failing seeds are listed with
their error. Results go to ``benchmarks/results/soak.{md,json}``.

Usage::

    python benchmarks/soak.py [--n-seeds 100] [--start 0] [--n-jobs 2]

``--n-jobs`` runs that many seeds at once in separate processes (the fit
times are then those of a shared machine).
"""

import argparse
import sys
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results  # noqa: E402

from skgpstruct import GPStructTagger, RandomizedCRFTagger  # noqa: E402
from skgpstruct.datasets import make_chain_data  # noqa: E402


def problem(seed):
    """The problem of ``seed``: ``(X_train, y_train, X_test, y_test, spec)``."""
    rng = np.random.RandomState(10_000 + seed)
    n_classes = int(rng.randint(2, 51))
    sparse = bool(rng.rand() < 0.5)
    n_features = int(rng.randint(2, 61))
    n_sequences = int(rng.randint(5, 41))
    max_len = int(rng.randint(1, 31))
    noise = float(np.round(rng.uniform(0.05, 1.0), 3))
    kw = dict(n_sequences=n_sequences, n_classes=n_classes, n_features=n_features,
              length=(1, max_len), noise=noise, sparse=sparse, random_state=seed)
    if sparse:
        kw["n_active"] = int(min(n_features, rng.randint(1, 6)))
    X, y = make_chain_data(**kw)[:2]
    n_train = max(1, int(round(0.75 * n_sequences)))
    if n_train == n_sequences:
        n_train -= 1
    spec = dict(seed=seed, labels=n_classes, features=n_features, sequences=n_sequences,
                max_len=max_len, sparse=sparse, noise=noise)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:], spec


def check_outputs(est, X_test, y_test):
    """Predictions and marginals of a fitted estimator; raises on a bad one."""
    pred = est.predict(X_test)
    marg = est.predict_marginals(X_test)
    classes = set(est.classes_.tolist())
    for p, m, x in zip(pred, marg, X_test):
        if len(p) != x.shape[0] or m.shape != (x.shape[0], len(est.classes_)):
            raise AssertionError("output shapes do not match the input")
        if not set(np.asarray(p).tolist()) <= classes:
            raise AssertionError("a prediction outside classes_")
        if not np.all(np.isfinite(m)):
            raise FloatingPointError("non-finite marginals")
        if np.any(m < 0) or not np.allclose(m.sum(axis=1), 1.0, atol=1e-6):
            raise AssertionError("marginals not a distribution")
    return est.score(X_test, y_test)


def run(name, make, seed, X_tr, y_tr, X_te, y_te):
    """One fit + predict: a record with the outcome."""
    rec = {"estimator": name, "seed": seed}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        try:
            est = make(seed).fit(X_tr, y_tr)
            rec["fit_s"] = time.perf_counter() - t0
            rec["accuracy"] = float(check_outputs(est, X_te, y_te))
            rec["status"] = "ok"
        except FloatingPointError as exc:
            rec["status"], rec["error"] = "nan", repr(exc)
        except Exception as exc:  # the point of the soak: report every failure
            rec["status"], rec["error"] = "failed", repr(exc)
            rec["traceback"] = traceback.format_exc(limit=4)
    rec["warnings"] = sorted(Counter(type(w.message).__name__ for w in caught).items())
    return rec


def _warm_up():
    """Numba compilation (and first-call costs) out of the timings, once per
    process."""
    global _WARM
    if _WARM:
        return
    X, y = make_chain_data(n_sequences=4, random_state=0)[:2]
    for make in ESTIMATORS.values():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make(0).set_params(max_iter=2).fit(X, y).predict_marginals(X)
    _WARM = True


_WARM = False


def soak_seed(seed):
    """Both estimators on the problem of ``seed``: their records."""
    _warm_up()
    X_tr, y_tr, X_te, y_te, spec = problem(seed)
    records = []
    for name, make in ESTIMATORS.items():
        rec = run(name, make, seed, X_tr, y_tr, X_te, y_te)
        rec.update({k: v for k, v in spec.items() if k != "seed"})
        records.append(rec)
        status = rec["status"] if rec["status"] != "ok" else f"{rec['fit_s']:.2f}s"
        print(f"seed {seed:3d} {name:20s} V={spec['labels']:2d} D={spec['features']:2d} "
              f"N={spec['sequences']:2d} T<={spec['max_len']:2d} "
              f"{'sparse' if spec['sparse'] else 'dense '} {status}", flush=True)
    return records


ESTIMATORS = {
    "GPStructTagger": lambda seed: GPStructTagger(random_state=seed),
    "RandomizedCRFTagger": lambda seed: RandomizedCRFTagger(random_state=seed),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-seeds", type=int, default=100)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=1)
    args = parser.parse_args(argv)
    seeds = range(args.start, args.start + args.n_seeds)
    if args.n_jobs == 1:
        per_seed = [soak_seed(seed) for seed in seeds]
    else:
        per_seed = Parallel(n_jobs=args.n_jobs, backend="loky")(
            delayed(soak_seed)(seed) for seed in seeds)
    records = [rec for recs in per_seed for rec in recs]
    rows, notes = [], []
    for name in ESTIMATORS:
        recs = [r for r in records if r["estimator"] == name]
        fit = np.array([r["fit_s"] for r in recs if "fit_s" in r])
        acc = [r["accuracy"] for r in recs if "accuracy" in r]
        warn = Counter()
        for r in recs:
            for kind, count in r["warnings"]:
                warn[kind] += 1 if count else 0
        rows.append({
            "estimator": name,
            "runs": len(recs),
            "failures": sum(r["status"] == "failed" for r in recs),
            "NaN": sum(r["status"] == "nan" for r in recs),
            "runs with warnings": ", ".join(f"{k} {v}" for k, v in sorted(warn.items()))
            or "none",
            "fit s median / p90 / max": (f"{np.median(fit):.2f} / "
                                         f"{np.percentile(fit, 90):.2f} / {fit.max():.2f}"
                                         if fit.size else "-"),
            "mean test accuracy": f"{np.mean(acc):.3f}" if acc else "-",
        })
        for r in recs:
            if r["status"] != "ok":
                notes.append(f"{name} seed {r['seed']}: {r['status']}: {r.get('error')}")
    columns = list(rows[0])
    notes.insert(0, f"seeds {args.start}..{args.start + args.n_seeds - 1}; sizes drawn per "
                    "seed (see the module docstring); defaults except random_state.")
    write_results("soak", rows, columns,
                  title="Soak: both estimators, defaults, random problems",
                  notes=notes, extra={"records": records})
    failed = sum(r["status"] != "ok" for r in records)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
