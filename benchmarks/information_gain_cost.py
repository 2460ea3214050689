"""Cost of GPStructTagger.predict_information_gain (EPIG) in both forms,
against the path mutual information (BALD) of ``predict_uncertainty``.

On fold 0 of base NP (the papers' features; ``folds.json``), the GP is fitted
on ``--n-labelled`` of the fold's 150 training sentences (the first of
``RandomState(0).permutation``), as in an active-learning round, and the
rest of them are the unlabelled pool. Fitted in the weight-space form (the
linear kernel's default) and in the inducing-point form
(``approximation="inducing"``, the same linear kernel, ``--n-inducing``
points), each scores the pool by

* ``bald``: ``predict_uncertainty(pool, "mutual_information", per="path")``,
  the peer, run in the same process;
* ``epig (pool)``: ``predict_information_gain(pool)``, the pool its own target;
* ``epig (test)``: ``predict_information_gain(pool, X_target=test)``, the
  target the fold's first ``--n-target`` test sentences.

The table gives each call's median wall time over ``--repeats`` calls after
a warm-up (JIT compilation out), its ratio to ``bald``'s time for the same
model, and the Spearman rank correlation of its scores with ``bald``'s and
with the same call of the other form. Results go to the section ``default``
of ``benchmarks/results/information_gain_cost.{md,json}`` (``--name KEY``:
the section ``KEY``).

Usage::

    python benchmarks/information_gain_cost.py [--n-labelled 60] [--n-inducing 500]
        [--n-target 50] [--repeats 3] [--n-jobs 1] [--name SECTION]
"""

import argparse
import os
import sys
import warnings

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_name_argument, section_key, time_call, write_results  # noqa: E402
from gpstruct_table1 import _fold_data  # noqa: E402

from skgpstruct import GPStructTagger  # noqa: E402
from skgpstruct.datasets import load_benchmark  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-labelled", type=int, default=60)
    parser.add_argument("--n-inducing", type=int, default=500)
    parser.add_argument("--n-target", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=1)
    add_name_argument(parser, "information_gain_cost")
    args = parser.parse_args(argv)
    section = section_key("information_gain_cost", args.name)

    b = load_benchmark("basenp", features="gpstruct")
    X, y, X_te, _ = _fold_data(b, *b.folds[0])
    order = np.random.RandomState(0).permutation(len(X))
    lab, pool = order[:args.n_labelled], order[args.n_labelled:]
    X_lab, y_lab = [X[i] for i in lab], [y[i] for i in lab]
    X_pool, X_target = [X[i] for i in pool], X_te[:args.n_target]

    forms = {
        "features": GPStructTagger(random_state=0, n_jobs=args.n_jobs),
        "inducing": GPStructTagger(approximation="inducing", n_inducing=args.n_inducing,
                                   random_state=0, n_jobs=args.n_jobs),
    }
    calls = {
        "bald": lambda gp: gp.predict_uncertainty(X_pool, "mutual_information", per="path"),
        "epig (pool)": lambda gp: gp.predict_information_gain(X_pool),
        "epig (test)": lambda gp: gp.predict_information_gain(X_pool, X_target=X_target),
    }
    scores, times = {}, {}
    for form, gp in forms.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings of the inducing fit
            gp.fit(X_lab, y_lab)
        for call, fn in calls.items():
            times[form, call], _ = time_call(lambda: fn(gp), repeats=args.repeats)
            scores[form, call] = np.asarray(fn(gp))
            print(f"{form:9s} {call:12s} {times[form, call]:.3f} s", flush=True)

    rows = []
    for form in forms:
        other = "inducing" if form == "features" else "features"
        for call in calls:
            rows.append({
                "form": form, "score": call, "median s": round(times[form, call], 3),
                "time / bald": round(times[form, call] / times[form, "bald"], 2),
                "Spearman with bald": round(float(spearmanr(
                    scores[form, call], scores[form, "bald"])[0]), 3),
                "Spearman with the other form": round(float(spearmanr(
                    scores[form, call], scores[other, call])[0]), 3),
            })
    n_tok = sum(x.shape[0] for x in X_pool)
    notes = [
        f"Fold 0 of basenp (papers' features): {args.n_labelled} labelled sentences, "
        f"a pool of {len(X_pool)} ({n_tok} tokens), target: the pool or the first "
        f"{args.n_target} test sentences ({sum(x.shape[0] for x in X_target)} tokens).",
        f"GPStructTagger defaults (n_predict_samples {forms['features'].n_predict_samples}); "
        f"the inducing form: "
        f"approximation='inducing', n_inducing={args.n_inducing}, the linear kernel; "
        f"n_jobs={args.n_jobs}. Median of {args.repeats} calls after one warm-up.",
    ]
    write_results("information_gain_cost", rows, list(rows[0]),
                  title="Cost of predict_information_gain against the path mutual information",
                  notes=notes, section=section)


if __name__ == "__main__":
    main()
