"""Where one gradient evaluation of the exact CRF goes, against its floors.

On CoNLL-2000 chunking and CoNLL-2002 Spanish NER (``<data home>/conll2000``,
``conll2002``; the data home is :func:`skgpstruct.datasets.get_data_home`)
with sklearn-crfsuite's tutorial features (word, lower case, suffixes, shape
flags, POS and its prefix, the same of the neighbours) through
:class:`~skgpstruct.features.SequenceVectorizer`, one evaluation of the
objective that ``RandomizedCRFTagger(c2=0.1)`` minimises
(:class:`skgpstruct._tagging.exact_objective.ExactCRFObjective`, the
features no training token uses dropped, as the fit does) is split into its
parts, each timed alone (median of ``--repeats``) on the same arrays, all
sequences, ``n_jobs=1``, BLAS on one thread as in a fit:

* ``unary``: the feature product ``U = X W + b`` (the fused kernel's
  ``csr_unary`` over all tokens);
* ``forward-backward``: the chain pass (unaries, then the loss and its
  gradients in ``U`` and ``B`` per chunk of 128 sequences) minus ``unary``;
* ``scatter``: the weights' gradient ``2 c2 W - X^T dU``;
* ``rest``: the objective's total minus the three (sums of the chunks'
  parts, the transitions' gradient, the penalty's value);
* ``previous objective``: ``crf_loss_grad`` plus ``penalty`` (scipy's
  products, a CSR subset per chunk), what fits evaluated before;
* ``L-BFGS step``, ``OWL-QN step``: what the optimiser spends per iteration
  besides the objective (a fit of ``--lbfgs-iter`` iterations, minus its
  evaluations): scipy's L-BFGS-B (20 pairs), and
  :func:`~skgpstruct.optim.owlqn.minimize_owlqn` with ``c1 = 0.1`` (the
  tutorial's; 6 pairs) and with ``c1 = 0`` (20 pairs).

Each part stands beside its **floor**: the same number of multiply-adds in
the same loop shape, measured in this script by a minimal numba loop (warm,
single thread): a CSR row times a label block (``nnz x V`` multiply-adds)
for the product and the scatter, and per token three ``V x V`` mat-vecs
(forward, backward, pairwise marginals: ``3 V^2`` multiply-adds, no ``exp``
or ``log``) for the chain pass. The ratio says how far each part is from
what its arithmetic costs.

Usage::

    python benchmarks/crf_gradient_profile.py [--tasks conll2000 conll2002]
        [--repeats 7] [--lbfgs-iter 20] [--max-sentences N]

Results: ``benchmarks/results/crf_gradient_profile.{md,json}``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_name_argument, time_call, write_results  # noqa: E402
from _conll import TASKS, read_columns, tutorial_features  # noqa: E402

from skgpstruct._input.sequences import SequenceData  # noqa: E402
from skgpstruct._tagging.crf_objective import CRFSpec, crf_loss_grad, penalty, unpack  # noqa: E402
from skgpstruct._tagging.exact_objective import ExactCRFObjective  # noqa: E402
from skgpstruct._utils.parallel import small_blas  # noqa: E402
from skgpstruct.chain._crf_training_kernels import csr_unary, scatter_weights  # noqa: E402
from skgpstruct._tagging.crf_solver import training_data  # noqa: E402
from skgpstruct.chain.backend import get_backend  # noqa: E402
from skgpstruct.datasets import get_data_home  # noqa: E402
from skgpstruct.features import SequenceVectorizer  # noqa: E402
from skgpstruct.optim import minimize_lbfgs  # noqa: E402
from skgpstruct.optim.owlqn import minimize_owlqn  # noqa: E402

SCRIPT = "crf_gradient_profile"


def load(task, max_sentences=None):
    """``SequenceData`` of a task's training sentences (labels encoded)."""
    sents = read_columns(Path(get_data_home()) / TASKS[task][0])[:max_sentences]
    X = SequenceVectorizer().fit_transform(
        [[tutorial_features(s, i) for i in range(len(s))] for s in sents])
    labels = sorted({t[-1] for s in sents for t in s})
    code = {lab: k for k, lab in enumerate(labels)}
    y = np.array([code[t[-1]] for s in sents for t in s], dtype=np.int64)
    data = SequenceData(sp.vstack(X).tocsr(), np.array([len(s) for s in sents]), y, None)
    spec = CRFSpec(np.arange(len(labels)), c2=0.1)
    return training_data(data, spec)[0], spec


@njit(cache=True, nogil=True)
def _csr_times_block(indptr, indices, values, W, out):
    """Floor of the product: ``out[t] += x_t[k] * W[k]`` over the CSR rows."""
    V = W.shape[1]
    for t in range(indptr.size - 1):
        for p in range(indptr[t], indptr[t + 1]):
            k, x = indices[p], values[p]
            for v in range(V):
                out[t, v] += x * W[k, v]


@njit(cache=True, nogil=True)
def _three_matvecs(B, U, out):
    """Floor of the chain pass: three ``V x V`` mat-vecs per token."""
    T, V = U.shape
    a = np.ones(V)
    b = np.ones(V)
    for t in range(T):
        for i in range(V):
            s1, s2, s3 = 0.0, 0.0, 0.0
            for j in range(V):
                s1 += B[j, i] * a[j]
                s2 += B[i, j] * b[j]
                s3 += B[i, j] * U[t, j]
            out[t, i] = s1 + s2 + s3
        a[:] = out[t] * 1e-3
        b[:] = U[t] * 1e-3


def profile(task, repeats, lbfgs_iter, max_sentences):
    data, spec = load(task, max_sentences)
    X, n, V = data.X_flat, data.n_sequences, spec.n_labels
    D = X.shape[1]
    rng = np.random.default_rng(0)
    theta = 0.01 * rng.standard_normal(D * V + V + V * V)
    W, b, B = unpack(spec, theta, D)
    backend = get_backend("cpu")
    idx, seeds = np.arange(n), np.zeros(n, dtype=np.int64)
    objective = ExactCRFObjective(spec, data)
    csr = objective._X
    U = np.empty((X.shape[0], V))
    gW = np.empty((D, V))
    B = np.ascontiguousarray(B)

    def previous():
        loss, grad = crf_loss_grad(spec, theta, data, idx, seeds, None, backend)
        return loss + penalty(spec, theta, D)[0], grad + penalty(spec, theta, D)[1]

    parts = {
        "objective (total)": lambda: objective(theta),
        "unary": lambda: csr_unary(*csr, W, b, objective._allowed, 0, X.shape[0], U),
        "chain pass": lambda: objective.chain_pass(W, b, B),
        "scatter": lambda: scatter_weights(*csr, objective._gU, W, 0.2, 0, D, gW),
        "previous objective": previous,
    }
    t = {name: time_call(fn, repeats=repeats)[0] for name, fn in parts.items()}
    t["forward-backward"] = t["chain pass"] - t["unary"]
    t["rest"] = t["objective (total)"] - t["chain pass"] - t["scatter"]
    out = np.zeros((X.shape[0], V))
    floor_product = time_call(lambda: _csr_times_block(X.indptr, X.indices, X.data, W, out),
                              repeats=repeats)[0]
    U = np.asarray(X @ W) + b
    floor_chain = time_call(lambda: _three_matvecs(np.exp(B), U, out), repeats=repeats)[0]
    evals = {"n": 0}

    def counted(x):
        evals["n"] += 1
        return objective(x)

    def step_time(minimize, **kw):
        """Seconds per iteration of ``minimize`` besides its evaluations."""
        evals["n"] = 0
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            minimize(counted, np.zeros_like(theta), max_iter=lbfgs_iter, tol=0.0, **kw)
        fit = time.perf_counter() - start
        return (fit - evals["n"] * t["objective (total)"]) / lbfgs_iter, \
            evals["n"] / lbfgs_iter

    step, per_iter = step_time(minimize_lbfgs)
    # OWL-QN (c1 = 0.1, the tutorial's), and L-BFGS by the same code (c1 = 0)
    l1 = np.full(theta.size, 0.1)
    l1[D * V:D * V + V] = 0.0
    owlqn_step, owlqn_per_iter = step_time(lambda f, x0, **kw: minimize_owlqn(f, x0, l1, **kw))
    plain_step, _ = step_time(lambda f, x0, **kw: minimize_owlqn(f, x0, 0.0, memory=20, **kw))
    floors = {"unary": floor_product, "forward-backward": floor_chain,
              "scatter": floor_product}
    rows = []
    for name in ("objective (total)", "unary", "forward-backward", "scatter", "rest",
                 "previous objective"):
        floor = floors.get(name)
        row = {"task": task, "part": name, "ms": 1e3 * t[name]}
        if floor is not None:
            row.update({"floor ms": 1e3 * floor, "x floor": t[name] / floor})
        rows.append(row)
    rows.append({"task": task, "part": "objective: floors summed",
                 "ms": 1e3 * (2 * floor_product + floor_chain)})
    rows.append({"task": task, "part": "scipy L-BFGS-B step (per iteration)", "ms": 1e3 * step})
    rows.append({"task": task, "part": "OWL-QN step, 6 pairs (per iteration)",
                 "ms": 1e3 * owlqn_step})
    rows.append({"task": task, "part": "L-BFGS step of minimize_owlqn, 20 pairs",
                 "ms": 1e3 * plain_step})
    info = {"task": task, "sentences": n, "tokens": int(X.shape[0]), "features": D,
            "labels": V, "nnz": int(X.nnz), "evaluations per iteration (L-BFGS)": per_iter,
            "evaluations per iteration (OWL-QN)": owlqn_per_iter,
            "multiply-adds: product": int(X.nnz) * V,
            "multiply-adds: chain (3 V^2 per token)": 3 * V * V * int(X.shape[0])}
    return rows, info


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--lbfgs-iter", type=int, default=20)
    parser.add_argument("--max-sentences", type=int, default=None)
    add_name_argument(parser, SCRIPT)
    args = parser.parse_args()
    rows, infos = [], []
    for task in args.tasks:
        with small_blas():  # BLAS on one thread, as fit runs the objective
            r, info = profile(task, args.repeats, args.lbfgs_iter, args.max_sentences)
        rows += r
        infos.append(info)
        print(info, file=sys.stderr, flush=True)
    notes = [", ".join(f"{k} {v}" for k, v in info.items()) for info in infos]
    notes.append("Floors: minimal numba loops of the same multiply-adds (a CSR row times "
                 "a label block; three V x V mat-vecs per token, no exp / log), warm, "
                 "single thread. All parts n_jobs=1, BLAS limited to one thread (as fit runs them).")
    write_results(SCRIPT, rows, ["task", "part", "ms", "floor ms", "x floor"],
                  title="One gradient evaluation of the exact CRF, part by part",
                  notes=notes, extra={"tasks": infos}, section=args.name)


if __name__ == "__main__":
    main()
