"""GPStructTagger on dense features: dense columns against pair matrices.

The weight-space form (the default) builds each sequence's covariances
``X_n diag(s_v) X_n^T`` from a pair matrix of ``sum_d c_d^2`` entries
(``c_d``: the tokens with feature ``d``). Dense features (embeddings) make
that ``T^2 D`` entries a sequence; the dense columns of such a sequence now
take a dense product instead (:mod:`skgpstruct.gp._dense_pairs`). This
script measures the shipped code against a peer in the same process that
keeps every sequence on the pair matrix (what the code did before), and
checks that both give the same model to rounding.

Two tables:

* per multiply-add, one bucket of 32 sequences: the covariances and their
  gradient w.r.t. ``s`` by the pair matrix against the dense product, over
  ``T``, ``D`` and ``V``, at the same multiply-adds (the rule's evidence:
  a column every token has costs both paths ``T^2`` multiply-adds);
* whole calls: ``GPStructTagger().fit`` (defaults, the validation inside
  ``fit`` included) and ``predict_marginals`` on synthetic dense features
  (:func:`skgpstruct.datasets.make_chain_data`), alone and beside sparse
  one-hot features, with the peak of traced memory (tracemalloc, a separate
  run) and the largest difference of the fitted ``coef_`` and marginals.

Median of ``--repeats`` runs after a warm-up call (numba compilation).

Usage::

    python benchmarks/dense_features.py [--repeats 3] [--quick]

Results go to ``benchmarks/results/dense_features.{md,json}``.
"""

import argparse
import sys
import tracemalloc
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, time_call, write_results  # noqa: E402

from skgpstruct import GPStructTagger  # noqa: E402
from skgpstruct.datasets import make_chain_data  # noqa: E402
from skgpstruct.gp import _dense_pairs  # noqa: E402
from skgpstruct.gp.weight_space import _Blocks  # noqa: E402

SHIPPED = _dense_pairs.dense_columns


@contextmanager
def _pair_matrix_only():
    """The peer: every sequence on its pair matrix alone."""
    _dense_pairs.dense_columns = lambda X, T: [np.zeros(0, int)] * (X.shape[0] // T)
    try:
        yield
    finally:
        _dense_pairs.dense_columns = SHIPPED


def _kernel_rows(repeats, quick):
    """Covariances and their backward pass for one bucket, both paths."""
    rng = np.random.default_rng(0)
    shapes = [(20, 100, 10), (40, 300, 5)] if quick else [
        (20, 50, 5), (20, 100, 10), (30, 50, 40), (40, 300, 5), (40, 300, 20)]
    rows = []
    for T, D, V in shapes:
        lengths = np.full(32, T)
        offsets = np.r_[0, np.cumsum(lengths)]
        X = sp.csr_matrix(rng.standard_normal((offsets[-1], D)))
        s = rng.random((D, V)) + 0.1
        db = rng.standard_normal((1, offsets[-1], V))

        def run(blocks):
            _, Sig = blocks.moments(s, s, 1e-4)
            return blocks.backward(db, Sig, V)[1]

        times, grads = {}, {}
        for label in ("dense", "pair matrix"):
            with nullcontext() if label == "dense" else _pair_matrix_only():
                blocks = _Blocks(X, offsets)
            grads[label] = run(blocks)
            times[label], _ = time_call(lambda: run(blocks), repeats=max(repeats, 5))
        rel = float(np.max(np.abs(grads["dense"] - grads["pair matrix"]))
                    / np.max(np.abs(grads["pair matrix"])))
        rows.append({"T": T, "D": D, "V": V, "dense (ms)": 1e3 * times["dense"],
                     "pair matrix (ms)": 1e3 * times["pair matrix"],
                     "speed-up per multiply-add": times["pair matrix"] / times["dense"],
                     "largest relative difference": rel})
    return rows


def _data(n_sequences, n_dense, n_sparse, seed=0):
    """Synthetic sequences with ``n_dense`` dense features and, if
    ``n_sparse``, as many one-hot features (``n_active`` 4 a token) beside."""
    X, y = make_chain_data(n_sequences=n_sequences, n_classes=5, n_features=n_dense,
                           length=(10, 40), noise=1.0, random_state=seed)[:2]
    if n_sparse:
        # one-hot features from the labels' groups of n_sparse / 5, 4 a token
        rng = np.random.default_rng(seed)
        group = n_sparse // 5
        Xs = [sp.csr_matrix((np.ones(4 * len(t)),
                             (np.repeat(np.arange(len(t)), 4),
                              (t[:, None] * group
                               + rng.integers(0, group, (len(t), 4))).ravel())),
                            shape=(len(t), n_sparse)) for t in y]
        X = [sp.hstack([sp.csr_matrix(a), b]).tocsr() for a, b in zip(X, Xs)]
    return X, y


def _peak_mb(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


def _call_rows(repeats, quick):
    n = 64 if quick else 128
    cases = [(f"{n} sequences, 300 dense features", 300, 0),
             (f"{n} sequences, 100 dense + 1000 one-hot (4 a token)", 100, 1000)]
    rows = []
    for name, n_dense, n_sparse in cases:
        X, y = _data(2 * n, n_dense, n_sparse)
        X_tr, y_tr, X_te = X[:n], y[:n], X[n:]
        out = {}
        for label in ("dense", "pair matrix"):
            with nullcontext() if label == "dense" else _pair_matrix_only():
                fit = lambda: GPStructTagger(random_state=0).fit(X_tr, y_tr)  # noqa: E731
                model = fit()
                pred = lambda: model.predict_marginals(X_te)  # noqa: E731
                marg = np.concatenate(pred())
                t_fit, _ = time_call(fit, repeats=repeats, warmup=0)
                t_pred, _ = time_call(pred, repeats=repeats, warmup=0)
                mem_fit, mem_pred = _peak_mb(fit), _peak_mb(pred)
            out[label] = dict(model=model, marg=marg, t_fit=t_fit, t_pred=t_pred,
                              mem_fit=mem_fit, mem_pred=mem_pred)
        a, b = out["dense"], out["pair matrix"]
        for what, t, m in (("fit", "t_fit", "mem_fit"), ("predict_marginals", "t_pred",
                                                         "mem_pred")):
            rows.append({
                "workload": f"{what}, {name}",
                "dense (s)": a[t], "pair matrix (s)": b[t], "speed-up": b[t] / a[t],
                "peak MB dense": a[m], "peak MB pair matrix": b[m],
                "memory ratio": b[m] / a[m],
                "largest |coef_ difference|": float(np.max(np.abs(a["model"].coef_
                                                                  - b["model"].coef_))),
                "largest |marginal difference|": float(np.max(np.abs(a["marg"]
                                                                     - b["marg"]))),
                "same (sigma^2, T)": "yes" if (
                    a["model"].kernel_.variance == b["model"].kernel_.variance
                    and a["model"].temperature_ == b["model"].temperature_) else "NO",
            })
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    GPStructTagger(random_state=0).fit(*_data(8, 10, 0))  # numba warm-up
    kernel = _kernel_rows(args.repeats, args.quick)
    calls = _call_rows(args.repeats, args.quick)
    kernel_cols = ["T", "D", "V", "dense (ms)", "pair matrix (ms)",
                   "speed-up per multiply-add", "largest relative difference"]
    call_cols = ["workload", "dense (s)", "pair matrix (s)", "speed-up", "peak MB dense",
                 "peak MB pair matrix", "memory ratio", "largest |coef_ difference|",
                 "largest |marginal difference|", "same (sigma^2, T)"]
    write_results(
        "dense_features", calls, call_cols,
        title="GPStructTagger on dense features: dense columns vs pair matrices",
        notes=[
            "Whole calls: GPStructTagger() defaults (the validation inside fit "
            "included), lengths 10 to 40, 5 labels; median of "
            f"{args.repeats} runs; peak MB: tracemalloc's peak over one call, a "
            "separate run; 'pair matrix': the peer in the same process that keeps "
            "every sequence on its pair matrix (the code before the dense path).",
            "Per multiply-add (one bucket of 32 dense sequences; covariances and "
            "their gradient w.r.t. s; both paths do T^2 D V multiply-adds here):\n\n"
            + markdown_table(kernel, kernel_cols) + "\n",
            "python benchmarks/dense_features.py" + (" --quick" if args.quick else ""),
        ],
        extra={"repeats": args.repeats, "kernel": kernel})


if __name__ == "__main__":
    main()
