"""Epoch time and accuracy of RandomizedCRFTagger as the label set grows.

For each task the tagger is trained with exact dynamic programming
(``n_top=None``) and with randomized DP on ``K = n_top + n_sampled`` states
per position, K = 1 %, 10 % and 20 % of the number of labels N, split
``n_top = max(1, K // 2)`` (the gold label takes one of these slots during
training) and ``n_sampled = max(1, K - n_top)`` (so K = 1 % of N = 100 is
rounded up to 2 states), proposal ``"local+global"``. Every mode uses the
same optimiser (Adam, learning rate 0.1, minibatches of 32 sequences,
c2 = 0.1) for the same number of epochs, so that the epoch times compare
like with like; the accuracy is the token accuracy on held-out sequences
with exact Viterbi decoding.

Tasks:

* ``make_chain_data`` with N = 100, 1,000 and 10,000 labels: sparse binary
  features (``sparse=True, noise=0.5, n_active=3``; ``n_features = 2 N``, so
  that every label owns two features, up to 2,000 at N = 10,000, where five
  labels share each feature), 400 training and 600 test sequences of
  length 5 to 20. Full transitions up to N = 1,000; at N = 10,000 an N x N
  matrix (and its gradient and Adam moments) would take gigabytes, so
  ``transitions="low_rank"`` with ``rank=32``. A per-token multinomial
  logistic regression on the same features (C = 1 / (2 c2)) is the
  baseline that ignores the chain (N <= 1,000).
* ``joint POS|chunk``: every sentence of the CRF++ chunking example
  (``train.data`` and ``test.data``, 900 sentences) labelled with the pair
  (POS tag, chunk tag), e.g. ``NN|I-NP``; 3 / 4 of the sentences (seeded
  shuffle) train, the rest test. Features: ``CRFppTemplate`` with the
  task's own template minus every line that reads the POS column
  (``%x[r,1]``), so the POS is never an input, i.e. the word unigram and
  bigram lines U00 to U06; features seen once in training are dropped
  (``min_freq=2``).

Timing: seconds per epoch is the median over repeats of a fresh one-epoch
``fit`` (``max_iter=1``; numba caches loaded beforehand), and the ratio is
the exact mode's epoch time over the mode's epoch time in the same run.
At N = 10,000 an epoch of exact DP costs O(T N^2) = 10^8 edge terms per
token (about an hour for 400 sequences here), and 400 sequences hold only
about 4,000 of the 10,000 labels (a tagger learns the labels it sees), so
every mode there is timed by loss-and-gradient passes of the tagger's
minibatch routine over the first training sequences (1 and 3 for exact,
2 and 8 for K = 20 %, 8 and 32 otherwise) with all 10,000 labels and
random parameters: the two passes give the cost per token and the set-up
cost of a pass (for exact low-rank mode, forming the 10,000 x 10,000
matrix ``left @ right.T`` and its gradient), and the epoch is estimated as
cost per token x the 400 training sequences' tokens + set-up x the 13
minibatches ("extrapolated"; the optimiser step, the same for every mode,
is left out). Accuracy is not
measured there (a task where all 10,000 labels can be learnt needs over
100,000 training tokens, beyond this benchmark's budget on two cores).
Results: the section ``default`` of ``benchmarks/results/rdp_scaling.{md,json}``
(``quick`` with ``--quick``).

Usage::

    python benchmarks/rdp_scaling.py [--quick]
"""

import argparse
import math
import os
import re
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import time_call, write_results  # noqa: E402

from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from skgpstruct import RandomizedCRFTagger  # noqa: E402
from skgpstruct._input.sequences import SequenceData  # noqa: E402
from skgpstruct.datasets import get_data_home, load_crfpp, make_chain_data  # noqa: E402
from skgpstruct.features import CRFppTemplate  # noqa: E402

FRACTIONS = (0.01, 0.10, 0.20)
COMMON = dict(c2=0.1, learning_rate=0.1, batch_size=32, random_state=0)
ACCEPT_N, ACCEPT_FRACTION = 1000, 0.10
ACCEPT_GAP, ACCEPT_SPEEDUP = 1.0, 10.0


# ----------------------------------------------------------------- tasks
def synthetic_task(n_classes, n_train, n_test, seed=0, length=(5, 20)):
    n_features = min(2 * n_classes, 2000)
    X, y = make_chain_data(
        n_sequences=n_train + n_test, n_classes=n_classes, n_features=n_features,
        length=length, sparse=True, noise=0.5, n_active=3, random_state=seed)
    return dict(
        name="make_chain_data", n_classes=n_classes, n_features=n_features,
        X_train=X[:n_train], y_train=y[:n_train],
        X_test=X[n_train:], y_test=y[n_train:],
        transitions="full" if n_classes <= 1000 else "low_rank",
    )


def strip_column(template, column):
    """Drop the template lines that read token column ``column``."""
    macro = re.compile(r"%x\[\s*-?\d+\s*,\s*(\d+)\s*\]")
    keep = []
    for line in template.splitlines():
        if any(int(c) == column for c in macro.findall(line)):
            continue
        keep.append(line)
    return "\n".join(keep) + "\n"


def joint_task(n_sentences=None, seed=0):
    home = get_data_home() / "crfpp" / "chunking"
    X_cols, y_chunk = load_crfpp([home / "train.data", home / "test.data"],
                                 encoding="ascii")
    y = [np.array([f"{tok[1]}|{c}" for tok, c in zip(s, lab)])
         for s, lab in zip(X_cols, y_chunk)]
    order = np.random.RandomState(seed).permutation(len(X_cols))
    if n_sentences is not None:
        order = order[:n_sentences]
    n_train = (3 * len(order)) // 4
    tr, te = order[:n_train], order[n_train:]
    template = strip_column((home / "template").read_text(encoding="ascii"), 1)
    feats = CRFppTemplate(template, min_freq=2)
    X_train = feats.fit_transform([X_cols[i] for i in tr])
    X_test = feats.transform([X_cols[i] for i in te])
    labels = set(np.concatenate([y[i] for i in tr]))
    return dict(
        name="joint POS|chunk (CRF++ chunking)", n_classes=len(labels),
        n_features=len(feats.vocabulary_),
        X_train=X_train, y_train=[y[i] for i in tr],
        X_test=X_test, y_test=[y[i] for i in te],
        transitions="full", template=template,
    )


# ----------------------------------------------------------------- modes
def split_k(fraction, n_classes):
    k = int(round(fraction * n_classes))
    n_top = max(1, k // 2)
    n_sampled = max(1, k - n_top)
    return n_top, n_sampled


def make_model(task, n_top=None, n_sampled=0, max_iter=1):
    kw = dict(COMMON)
    if task["transitions"] == "low_rank":
        kw.update(transitions="low_rank", rank=32)
    if n_top is None:
        return RandomizedCRFTagger(optimizer="adam", max_iter=max_iter, **kw)
    return RandomizedCRFTagger(n_top=n_top, n_sampled=n_sampled, max_iter=max_iter,
                               **kw)


def n_tokens(y):
    return int(sum(len(s) for s in y))


def fit_quiet(model, X, y):
    with warnings.catch_warnings():
        # fixed epoch budgets: reaching max_iter is intended
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def load_numba_caches(task, n_top):
    """Fit a 4-label toy problem with the same code path (the kernels are
    specialised on dtypes, not on sizes), so timings exclude JIT loading."""
    X, y = make_chain_data(n_sequences=4, n_classes=4, n_features=4, sparse=True,
                           random_state=0)
    toy = dict(task, n_classes=4)
    fit_quiet(make_model(toy, None if n_top is None else 1, 1), X, y)


def epoch_seconds(task, n_top, n_sampled, repeats):
    """Median seconds of a one-epoch fit on the training sequences."""
    X, y = task["X_train"], task["y_train"]
    load_numba_caches(task, n_top)
    return time_call(lambda: fit_quiet(make_model(task, n_top, n_sampled), X, y),
                     repeats=repeats, warmup=0)


def pass_seconds(task, n_top, n_sampled, n_sequences, seed=0):
    """Seconds and tokens of one training loss-and-gradient pass.

    The tagger's minibatch routine (``_chunk_loss_grad``, what every
    minibatch of an epoch runs before the optimiser step) on the first
    ``n_sequences`` training sequences, with all ``n_classes`` labels and
    small random parameters (a fit on a few sequences would only know the
    labels they contain).
    """
    model = make_model(task, n_top, n_sampled)
    N = task["n_classes"]
    model.classes_ = np.arange(N)
    model.n_features_in_ = task["n_features"]
    model._n_top_, model._n_sampled_ = n_top, n_sampled
    model.exact_ = n_top is None
    theta = 0.01 * np.random.RandomState(seed).standard_normal(model._layout()[-1])
    y = task["y_train"][:n_sequences]
    if not all(np.issubdtype(np.asarray(s).dtype, np.integer) for s in y):
        raise ValueError("pass timing needs integer labels in [0, n_classes)")
    data = SequenceData.from_sequences(task["X_train"][:n_sequences], y)
    data.y_flat = data.y_flat.astype(np.int64)
    seeds = np.arange(n_sequences)
    med, _ = time_call(lambda: model._chunk_loss_grad(theta, data, seeds),
                       repeats=1, warmup=0)
    return med, data.n_tokens


def extrapolated_epoch_seconds(task, n_top, n_sampled, sizes):
    """Epoch seconds from passes over two numbers of sequences.

    The two passes give the cost per token (slope) and the set-up cost of a
    pass (intercept: proposal vectors, gradient arrays, for exact low-rank
    mode the N x N matrix ``left @ right.T``); an epoch is one pass per
    minibatch, so ``slope * tokens + intercept * n_minibatches``.
    """
    load_numba_caches(task, n_top)
    (t1, n1), (t2, n2) = (pass_seconds(task, n_top, n_sampled, s) for s in sizes)
    slope = (t2 - t1) / (n2 - n1)
    intercept = max(t1 - slope * n1, 0.0)
    n_batches = math.ceil(len(task["y_train"]) / COMMON["batch_size"])
    return slope * n_tokens(task["y_train"]) + intercept * n_batches, slope, intercept


def accuracy(task, n_top, n_sampled, epochs):
    model = make_model(task, n_top, n_sampled, max_iter=epochs)
    t0 = time.perf_counter()
    fit_quiet(model, task["X_train"], task["y_train"])
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    acc = model.score(task["X_test"], task["y_test"])
    return 100.0 * acc, train_s, time.perf_counter() - t0


def per_token_baseline(task):
    from sklearn.linear_model import LogisticRegression

    Xtr = sp.vstack(task["X_train"]).tocsr()
    Xte = sp.vstack(task["X_test"]).tocsr()
    ytr, yte = np.concatenate(task["y_train"]), np.concatenate(task["y_test"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = LogisticRegression(C=1.0 / (2 * COMMON["c2"]), max_iter=300).fit(Xtr, ytr)
    return 100.0 * clf.score(Xte, yte)


# ----------------------------------------------------------------- runner
def run_task(task, plan, rows):
    N = task["n_classes"]
    label = f"{task['name']} N={N}"
    print(f"\n== {label}: {len(task['y_train'])} train / {len(task['y_test'])} test "
          f"sequences, {n_tokens(task['y_train'])} train tokens, "
          f"{task['n_features']} features, {task['transitions']} transitions",
          flush=True)
    modes = [("exact", None, 0)] + [
        (f"K={100 * f:g}%", *split_k(f, N)) for f in FRACTIONS]
    task_rows = []
    tokens = n_tokens(task["y_train"])
    for name, n_top, n_sampled in modes:
        key = "exact" if n_top is None else name
        subset = plan["subset"].get(key)
        row = dict(task=task["name"], N=N, transitions=task["transitions"], mode=name,
                   n_top="" if n_top is None else n_top,
                   n_sampled="" if n_top is None else n_sampled,
                   K=N if n_top is None else n_top + n_sampled)
        if subset is None:
            med, times = epoch_seconds(task, n_top, n_sampled, plan["repeats"])
            row.update(epoch_s=med, epoch_times=times, timing="full epoch")
        else:
            epoch_s, slope, intercept = extrapolated_epoch_seconds(
                task, n_top, n_sampled, subset)
            row.update(epoch_s=epoch_s, pass_s_per_token=slope, pass_setup_s=intercept,
                       timing="extrapolated: loss+gradient on {} and {} sequences".format(
                           *subset))
        row["ms / token"] = 1000.0 * row["epoch_s"] / tokens
        if key in plan["train"]:
            acc, train_s, pred_s = accuracy(task, n_top, n_sampled, plan["epochs"])
            row.update(accuracy=acc, train_s=train_s, predict_s=pred_s,
                       epochs=plan["epochs"])
        else:
            row.update(accuracy=float("nan"), epochs="")
        print(f"  {name:8s} K={row['K']:6d}  {row['epoch_s']:9.3f} s/epoch  "
              f"acc {row['accuracy']:.2f} %  ({row['timing']})", flush=True)
        task_rows.append(row)
    exact = task_rows[0]
    for row in task_rows:
        row["speedup"] = exact["epoch_s"] / row["epoch_s"]
        row["gap"] = exact["accuracy"] - row["accuracy"]
    if plan.get("baseline"):
        acc = per_token_baseline(task)
        task_rows.append(dict(task=task["name"], N=N, transitions="", mode="per-token LR",
                              accuracy=acc, epoch_s=float("nan"), speedup=float("nan"),
                              gap=exact["accuracy"] - acc, timing=""))
        print(f"  per-token logistic regression: acc {acc:.2f} %", flush=True)
    rows.extend(task_rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args(argv)
    all_modes = {"exact", "K=1%", "K=10%", "K=20%"}
    if args.quick:
        n_train, n_test, epochs, repeats = 40, 40, 2, 1
        tasks = [
            (lambda: synthetic_task(100, n_train, n_test),
             dict(train=all_modes, subset={}, baseline=True)),
            (lambda: synthetic_task(1000, n_train, n_test),
             dict(train=all_modes, subset={}, baseline=False)),
            (lambda: synthetic_task(10000, 20, 20, length=(3, 5)),
             dict(train=set(), subset={"exact": (1, 2), "K=1%": (1, 2),
                                       "K=10%": (1, 2), "K=20%": (1, 2)},
                  baseline=False)),
            (lambda: joint_task(n_sentences=120), dict(train=all_modes, subset={},
                                                       baseline=False)),
        ]
    else:
        n_train, n_test, epochs, repeats = 400, 600, 10, 3
        tasks = [
            (lambda: synthetic_task(100, n_train, n_test),
             dict(train=all_modes, subset={}, baseline=True)),
            (lambda: synthetic_task(1000, n_train, n_test),
             dict(train=all_modes, subset={}, baseline=True, repeats=1)),
            (lambda: synthetic_task(10000, n_train, n_test),
             dict(train=set(),
                  subset={"exact": (1, 3), "K=1%": (8, 32), "K=10%": (8, 32),
                          "K=20%": (2, 8)},
                  baseline=False)),
            (lambda: joint_task(), dict(train=all_modes, subset={}, baseline=False)),
        ]
    rows = []
    for make_task, plan in tasks:
        plan.setdefault("repeats", repeats)
        plan["epochs"] = epochs
        run_task(make_task(), plan, rows)

    acc_row = next(r for r in rows if r["task"] == "make_chain_data"
                   and r["N"] == ACCEPT_N and r["mode"] == f"K={100 * ACCEPT_FRACTION:g}%")
    ok = acc_row["gap"] <= ACCEPT_GAP and acc_row["speedup"] >= ACCEPT_SPEEDUP
    acceptance = (
        f"Acceptance (issue 4): make_chain_data N={ACCEPT_N}, K=10% of N: accuracy "
        f"{acc_row['gap']:.2f} points below exact (must be <= {ACCEPT_GAP}), epochs "
        f"{acc_row['speedup']:.1f}x faster (must be >= {ACCEPT_SPEEDUP}): "
        f"{'PASS' if ok else 'FAIL'}"
        + (" (quick run: not the acceptance configuration)" if args.quick else "")
    )
    print("\n" + acceptance)
    for r in rows:
        r["accuracy %"] = r.pop("accuracy", float("nan"))
        r["s / epoch"] = r.pop("epoch_s")
        r["speed-up vs exact"] = r.pop("speedup")
        r["points below exact"] = r.pop("gap")
    notes = [
        acceptance,
        f"Training: Adam, learning rate {COMMON['learning_rate']}, batch "
        f"{COMMON['batch_size']} sequences, c2 = {COMMON['c2']}, {epochs} epochs, "
        "random_state 0, for every mode (exact mode too); proposal local+global; "
        "n_top = max(1, K // 2) (gold forced into it), n_sampled = max(1, K - n_top).",
        "s / epoch: median of repeats of a one-epoch fit on the training "
        "sequences; 'extrapolated' rows (N = 10,000) time loss-and-gradient "
        "passes of the tagger's minibatch routine on the first a and b training "
        "sequences with all N labels, and estimate the epoch as (cost per token) x "
        "(epoch tokens) + (set-up per pass) x (minibatches), optimiser step "
        "excluded; exact DP there is O(T N^2) = 1e8 edge terms per token. No "
        "accuracy at N = 10,000: 400 sequences hold only ~4,000 of the labels.",
        "make_chain_data: sparse=True, noise=0.5, n_active=3, n_features = "
        "min(2 N, 2000), lengths 5-20, random_state 0; chance accuracy is 1/N "
        "(labels are marginally uniform). per-token LR: multinomial logistic "
        "regression on the token features alone, C = 1 / (2 c2).",
        "N = 10,000: low-rank transitions (rank 32): an N x N matrix with its "
        "gradient and Adam moments would take over 3 GB.",
        "joint POS|chunk: CRF++ chunking train.data + test.data (900 sentences), "
        "label POS|chunk, 3/4 train (seeded shuffle); features: the task template "
        "without its POS-column lines (U10-U22), i.e. word lines U00-U06, "
        "CRFppTemplate(min_freq=2).",
    ]
    columns = ["task", "N", "transitions", "mode", "n_top", "n_sampled", "s / epoch",
               "ms / token", "speed-up vs exact", "accuracy %", "points below exact", "timing"]
    write_results("rdp_scaling", rows, columns,
                  title="RandomizedCRFTagger: epoch time and accuracy vs exact DP",
                  notes=notes, extra={"acceptance_pass": bool(ok)},
                  section="quick" if args.quick else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
