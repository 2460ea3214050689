"""Morphological tagging of UD Hungarian-Szeged: RDP against exact CRFs.

What it measures
----------------
Joint UPOS + FEATS tagging (``load_conllu(tag="upos_feats")``, some 440
labels in training) of the Universal Dependencies Hungarian Szeged treebank
(``<data home>/ud/hu_szeged/hu_szeged-ud-{train,dev,test}.conllu``; the
data home is :func:`skgpstruct.datasets.get_data_home`, i.e. the
``SKGPSTRUCT_DATA`` environment variable or ``shared/data`` beside the
checkout). With ``--upos`` the same rows run on the 17 UPOS tags as the
small-label reference (a second table). For every row: token accuracy on
dev and test, fit and predict seconds, and peak memory.

Protocol
--------
* Features: :class:`skgpstruct.features.WordFeatures` with its defaults,
  fitted on the training sentences and applied to dev and test: the same
  CSR matrices for every model. sklearn-crfsuite gets each token as the
  dict ``{feature name: value}`` of its non-zero columns (names from
  ``get_feature_names_out``), so it sees exactly the same features.
* Rows (models):

  - ``crfsuite``: ``sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0, c2=c2,
    max_iterations=100)``;
  - ``exact``: ``RandomizedCRFTagger(c2=c2)``: exact forward-backward,
    L-BFGS, ``max_iter=100``;
  - ``rdpP_full`` / ``rdpP_lowrank`` (P in 5, 10, 20):
    ``RandomizedCRFTagger(n_top=K1, n_sampled=K2, c2=c2,
    transitions="full" | "low_rank", optimizer=RDP_OPTIMIZER,
    learning_rate=RDP_LR, random_state=0)`` with ``K = round(P% of the
    training labels)`` (at least 2), ``K1 = ceil(K / 2)`` top states and
    ``K2 = K - K1`` sampled ones;
  - ``logreg``: per-token ``sklearn.linear_model.LogisticRegression``
    (lbfgs, ``max_iter=100``) on the stacked token features, the floor
    without transitions; its grid is over ``C`` in {0.1, 1, 10}.

* Model selection: each row is fitted on train for every c2 of
  ``--c2-grid`` (default 0.01 0.1 1); the c2 with the best dev token
  accuracy is kept (ties: the first), and its test accuracy, fit seconds,
  predict seconds (on test) and peak memory are reported. The dev accuracy
  of every c2 goes to the json.
* Token accuracy: the share of tokens whose predicted tag equals the gold
  one; a test tag never seen in training is always an error (the notes
  give how many test tokens carry one).
* Each (row, c2) fit runs in a fresh subprocess of this script (``--_one``);
  its peak resident set (``ru_maxrss`` of ``os.wait4``) is the peak memory,
  data loading and featurisation included. The child times fit and
  predict with ``time.perf_counter``; skgpstruct rows first fit a
  20-sentence subset with ``max_iter=1`` (and predict two sentences) so
  that numba compilation is not counted.

Results are merged into the section ``default`` (``quick`` with
``--quick``) of ``benchmarks/results/ud_morph.json`` (keyed by task,
``"upos_feats"`` or ``"upos"``, and row id: running some rows updates only
those; each row keeps the machine and the commit it ran on), and that
section of ``ud_morph.md`` (plus ``ud_morph.png``, test accuracy against fit
seconds, if matplotlib is installed) is regenerated from the whole section.
No number is written by hand: all come from running this script.

Usage::

    python benchmarks/ud_morph.py [--rows exact rdp10_full ...]
        [--c2-grid 0.01 0.1 1] [--upos] [--quick]
        [--rdp-optimizer adagrad] [--rdp-lr 0.5] [--rdp-epochs 20]
    python benchmarks/ud_morph.py --merge OTHER.json   # add rows run elsewhere

A row id with ``@cuda`` (``exact@cuda``) fits with ``device="cuda"`` (run it
on a GPU machine, then ``--merge`` its json here); with ``~jN``
(``rdp10_full~j2``) with ``n_jobs=N`` threads (the same model as the row
without it: only the fit time differs).

``--quick`` is a smoke run: 150 training sentences, 100 dev and 100 test
sentences, c2 = 0.1 only, 10 iterations, rows exact, rdp10_full,
rdp10_lowrank, logreg and crfsuite; it writes ``ud_morph_quick.{md,json}``.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine_info  # noqa: E402
from _ud_morph_report import ALL_ROWS, NOTES, _fmt_c2, merge, save  # noqa: E402

# Optimiser and learning rate of the RDP rows (exact mode uses L-BFGS).
RDP_OPTIMIZER = "adagrad"
RDP_LR = 0.5
# Epochs of the randomized rows (AdaGrad); the exact rows and crfsuite run up
# to MAX_ITER L-BFGS iterations.
RDP_EPOCHS = 20

MAX_ITER = 100
QUICK_MAX_ITER = 10
QUICK_SIZES = (150, 100, 100)  # train, dev, test sentences
QUICK_ROWS = ("exact", "rdp10_full", "rdp10_lowrank", "logreg", "crfsuite")
DEFAULT_C2_GRID = (0.01, 0.1, 1.0)
LOGREG_C_GRID = (0.1, 1.0, 10.0)
WARMUP_SENTENCES = 20
TREEBANK = ("ud", "hu_szeged")


# ---------------------------------------------------------------- data
def _data_dir():
    from skgpstruct.datasets import get_data_home

    home = get_data_home()
    folder = home.joinpath(*TREEBANK)
    paths = {s: folder / f"hu_szeged-ud-{s}.conllu" for s in ("train", "dev", "test")}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        sys.exit(
            "ud_morph: the UD Hungarian-Szeged treebank is missing: "
            + ", ".join(missing)
            + ". Set SKGPSTRUCT_DATA to the data folder holding "
            "ud/hu_szeged/hu_szeged-ud-{train,dev,test}.conllu "
            f"(now: {home})."
        )
    return paths


def load_split(task, quick):
    """Sentences and tags of train, dev and test (cut for ``--quick``)."""
    from skgpstruct.datasets import load_conllu

    paths = _data_dir()
    out = {}
    for i, split in enumerate(("train", "dev", "test")):
        X, y = load_conllu(paths[split], tag=task)
        if quick:
            X, y = X[:QUICK_SIZES[i]], y[:QUICK_SIZES[i]]
        out[split] = (X, y)
    return out


def featurize(data):
    """WordFeatures fitted on train: lists of CSR matrices and the names."""
    from skgpstruct.features import WordFeatures

    wf = WordFeatures()
    X_train = wf.fit_transform(data["train"][0])
    feats = {"train": X_train}
    for split in ("dev", "test"):
        feats[split] = wf.transform(data[split][0])
    return feats, np.asarray(wf.get_feature_names_out(), dtype=object)


def to_crfsuite(x, names):
    """One sentence's CSR features as sklearn-crfsuite's list of dicts."""
    x = x.tocsr()
    return [
        {names[j]: float(v) for j, v in zip(x.indices[x.indptr[i]:x.indptr[i + 1]],
                                            x.data[x.indptr[i]:x.indptr[i + 1]])}
        for i in range(x.shape[0])
    ]


def token_accuracy(y_true, y_pred):
    """Share of tokens whose predicted tag is the gold one."""
    t = np.concatenate([np.asarray(s, dtype=object) for s in y_true])
    p = np.concatenate([np.asarray(s, dtype=object) for s in y_pred])
    return float(np.mean(t == p))


def unseen_stats(data):
    """Test (and dev) tokens whose tag never occurs in training."""
    seen = {t for s in data["train"][1] for t in s}
    out = {"n_train_labels": len(seen)}
    for split in ("train", "dev", "test"):
        X, y = data[split]
        out[f"n_{split}_sentences"] = len(X)
        out[f"n_{split}_tokens"] = sum(len(s) for s in y)
    for split in ("dev", "test"):
        tags = [t for s in data[split][1] for t in s]
        n = sum(t not in seen for t in tags)
        out[f"unseen_{split}_tokens"] = n
        out[f"unseen_{split}_share"] = n / len(tags)
        out[f"unseen_{split}_labels"] = len({t for t in tags if t not in seen})
    return out


# ---------------------------------------------------------------- rows
def rdp_sizes(percent, n_labels):
    """K (at least 2), K1 = ceil(K / 2) top states, K2 = K - K1 sampled."""
    K = max(2, int(round(percent / 100.0 * n_labels)))
    K = min(K, n_labels)
    K1 = int(math.ceil(K / 2))
    return K, K1, K - K1


def parse_row(row):
    """(kind, percent, transitions) of a row id (``ROW@cuda``: the same row
    with ``device="cuda"``, skgpstruct rows only)."""
    row, _, jobs = row.partition("~j")
    if jobs and not jobs.isdigit():
        raise ValueError(f"'~jN' takes a number of jobs, got {row}~j{jobs}")
    row, _, device = row.partition("@")
    if device and (device != "cuda" or row in ("crfsuite", "logreg")):
        raise ValueError(f"only skgpstruct rows take '@cuda', got {row}@{device}")
    if row in ("crfsuite", "exact", "logreg"):
        return row, None, "full" if row != "logreg" else "none"
    if row.startswith("rdp"):
        p, _, tr = row[3:].partition("_")
        if p.isdigit() and tr in ("full", "lowrank"):
            return "rdp", int(p), "full" if tr == "full" else "low_rank"
    raise ValueError(f"unknown row {row!r}; rows look like {', '.join(ALL_ROWS)}")


def make_model(row, c2, n_labels, args, max_iter):
    """The estimator of ``row`` and its table description."""
    kind, percent, transitions = parse_row(row)
    if kind == "crfsuite":
        import sklearn_crfsuite

        model = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.0, c2=c2,
                                     max_iterations=max_iter)
        return model, {"optimizer": "lbfgs (crfsuite)", "transitions": "full (seen)",
                       "K": "all"}
    if kind == "logreg":
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=c2, solver="lbfgs", max_iter=max_iter)
        return model, {"optimizer": "lbfgs", "transitions": "none", "K": "-"}
    from skgpstruct import RandomizedCRFTagger

    base, _, jobs = row.partition("~j")
    device = "cuda" if "@cuda" in base else "cpu"
    n_jobs = int(jobs) if jobs else None
    if kind == "exact":
        model = RandomizedCRFTagger(c2=c2, max_iter=max_iter, device=device, n_jobs=n_jobs)
        return model, {"optimizer": "lbfgs", "transitions": "full", "K": "all"}
    K, K1, K2 = rdp_sizes(percent, n_labels)
    model = RandomizedCRFTagger(
        n_top=K1, n_sampled=K2, c2=c2, transitions=transitions,
        optimizer=args.rdp_optimizer, learning_rate=args.rdp_lr,
        max_iter=min(max_iter, args.rdp_epochs), random_state=0, device=device,
        n_jobs=n_jobs)
    tr = transitions if transitions == "full" else f"low_rank (r={model.rank})"
    return model, {"optimizer": f"{args.rdp_optimizer} (lr {args.rdp_lr:g})",
                   "transitions": tr, "K": f"{K} ({K1}+{K2})"}


def run_one(row, c2, args):
    """Child process: fit ``row`` at ``c2``, write the measurements as json."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    # An iteration cap reached is recorded ("iterations" vs "max_iter" in
    # the json), not printed.
    warnings.simplefilter("ignore", ConvergenceWarning)
    task = "upos" if args.upos else "upos_feats"
    max_iter = QUICK_MAX_ITER if args.quick else MAX_ITER
    data = load_split(task, args.quick)
    feats, names = featurize(data)
    y_tr, y_dev, y_te = data["train"][1], data["dev"][1], data["test"][1]
    n_labels = len({t for s in y_tr for t in s})
    kind = parse_row(row)[0]
    model, desc = make_model(row, c2, n_labels, args, max_iter)

    if kind == "crfsuite":
        X_tr = [to_crfsuite(x, names) for x in feats["train"]]
        X_dev = [to_crfsuite(x, names) for x in feats["dev"]]
        X_te = [to_crfsuite(x, names) for x in feats["test"]]
        t0 = time.perf_counter()
        model.fit(X_tr, y_tr)
        t1 = time.perf_counter()
        pred_te = model.predict(X_te)
        t2 = time.perf_counter()
        pred_dev = model.predict(X_dev)
        n_iter = model.training_log_.last_iteration.get("num")
        n_model_labels = len(model.classes_)
    elif kind == "logreg":
        import scipy.sparse as sp

        def stack(X):
            return sp.vstack(X, format="csr")

        def unstack(pred, X):
            cuts = np.cumsum([0] + [x.shape[0] for x in X])
            return [list(pred[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]

        Z_tr = stack(feats["train"])
        z_tr = np.asarray([t for s in y_tr for t in s], dtype=object)
        t0 = time.perf_counter()
        model.fit(Z_tr, z_tr)
        t1 = time.perf_counter()
        pred_te = unstack(model.predict(stack(feats["test"])), feats["test"])
        t2 = time.perf_counter()
        pred_dev = unstack(model.predict(stack(feats["dev"])), feats["dev"])
        n_iter = int(np.max(model.n_iter_))
        n_model_labels = len(model.classes_)
    else:
        # Warm-up (numba compilation, caches): same settings on a subset,
        # one iteration; an RDP row keeps K below the subset's labels so
        # the randomized kernels are the ones compiled.
        from sklearn.base import clone

        warm = clone(model).set_params(max_iter=1)
        if kind == "rdp":
            warm.set_params(n_top=1, n_sampled=1)
        Xw, yw = feats["train"][:WARMUP_SENTENCES], y_tr[:WARMUP_SENTENCES]
        warm.fit(Xw, yw)
        warm.predict(feats["dev"][:2])
        del warm
        t0 = time.perf_counter()
        model.fit(feats["train"], y_tr)
        t1 = time.perf_counter()
        pred_te = model.predict(feats["test"])
        t2 = time.perf_counter()
        pred_dev = model.predict(feats["dev"])
        n_iter = int(model.n_iter_)
        n_model_labels = len(model.classes_)

    result = {
        "row": row,
        "c2": c2,
        "dev acc": token_accuracy(y_dev, pred_dev),
        "test acc": token_accuracy(y_te, pred_te),
        "fit s": t1 - t0,
        "predict s": t2 - t1,
        "iterations": n_iter,
        "labels": n_model_labels,
        "n_features": len(names),
        "max_iter": max_iter,
        **desc,
    }
    with open(args._out, "w") as f:
        json.dump(result, f)


def spawn(row, c2, args, tmpdir):
    """Run ``row`` at ``c2`` in a fresh process; its result and peak MiB."""
    out = os.path.join(tmpdir, f"{row}_{c2:g}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--_one", row, repr(c2),
           "--_out", out, "--rdp-optimizer", args.rdp_optimizer,
           "--rdp-lr", repr(args.rdp_lr), "--rdp-epochs", str(args.rdp_epochs)]
    if args.upos:
        cmd.append("--upos")
    if args.quick:
        cmd.append("--quick")
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or not os.path.exists(out):
        return {"row": row, "c2": c2, "error": f"exit status {proc.returncode}"}
    with open(out) as f:
        result = json.load(f)
    result["peak MiB"] = usage.ru_maxrss / 1024.0  # KiB on Linux
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", default=None,
                        help=f"rows to run (default all: {' '.join(ALL_ROWS)})")
    parser.add_argument("--c2-grid", nargs="+", type=float, default=None,
                        help="c2 values tried on dev (default 0.01 0.1 1)")
    parser.add_argument("--upos", action="store_true",
                        help="tag UPOS (17 tags) instead of UPOS + FEATS")
    parser.add_argument("--quick", action="store_true", help="smoke run (see above)")
    parser.add_argument("--rdp-optimizer", default=RDP_OPTIMIZER)
    parser.add_argument("--rdp-lr", type=float, default=RDP_LR)
    parser.add_argument("--rdp-epochs", type=int, default=RDP_EPOCHS,
                        help="epochs of the randomized rows (default %(default)s)")
    parser.add_argument("--merge", metavar="JSON",
                        help="copy the rows of another results file (e.g. @cuda rows run on a "
                             "GPU machine) into this one and re-render; runs nothing")
    parser.add_argument("--_one", nargs=2, metavar=("ROW", "C2"), help=argparse.SUPPRESS)
    parser.add_argument("--_out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._one:
        run_one(args._one[0], float(args._one[1]), args)
        return 0

    if args.merge:
        return merge(args.merge, args.quick)

    task = "upos" if args.upos else "upos_feats"
    rows = args.rows or (list(QUICK_ROWS) if args.quick else list(ALL_ROWS))
    for r in rows:
        parse_row(r)  # refuse unknown rows early
    c2_grid = args.c2_grid or ([0.1] if args.quick else list(DEFAULT_C2_GRID))

    data = load_split(task, args.quick)
    stats = unseen_stats(data)
    del data

    entry = {"data": stats, "rows": {}}
    machines = {}
    info = machine_info()
    if any("@cuda" in r for r in rows):
        from numba import cuda

        name = cuda.get_current_device().name
        info["gpu"] = name.decode() if isinstance(name, bytes) else name

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ud_morph_") as tmpdir:
        for r in rows:
            grid = list(LOGREG_C_GRID) if r == "logreg" else c2_grid
            per = []
            for c2 in grid:
                res = spawn(r, c2, args, tmpdir)
                per.append(res)
                if "error" in res:
                    print(f"{task} {r} c2={c2:g}: FAILED ({res['error']})", flush=True)
                else:
                    print(f"{task} {r} {_fmt_c2(r, c2)}: dev {100 * res['dev acc']:.2f} % "
                          f"test {100 * res['test acc']:.2f} % fit {res['fit s']:.2f} s "
                          f"predict {res['predict s']:.2f} s peak "
                          f"{res['peak MiB']:.0f} MiB", flush=True)
            ok = [p for p in per if "error" not in p]
            row_entry = {"per_c2": per,
                         "dev acc per c2": {f"{p['c2']:g}": p.get("dev acc") for p in per}}
            if ok:
                row_entry["best"] = max(ok, key=lambda p: p["dev acc"])  # first on ties
            machines[f"{task}/{r}"] = info
            entry["rows"][r] = row_entry
    elapsed = time.perf_counter() - start

    save({task: entry}, machines, args.quick, notes=NOTES + ([
        f"--quick: first {QUICK_SIZES[0]} training sentences, {QUICK_SIZES[1]} dev, "
        f"{QUICK_SIZES[2]} test; max_iter / max_iterations {QUICK_MAX_ITER}."
    ] if args.quick else [f"max_iter / max_iterations {MAX_ITER}."]))
    print(f"ud_morph: {len(rows)} rows in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
