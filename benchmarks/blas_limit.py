"""Cost of the BLAS thread limit: one library scan per process against one per entry.

Small matrix products run under :func:`skgpstruct._utils.parallel.small_blas`, a
process-wide limit of BLAS to one thread. Setting it goes through a
threadpoolctl ``ThreadpoolController``, and making one scans every loaded
shared library (milliseconds, most of it system time). The ELBO's gradient
enters the limit several times per evaluation, so the limiter makes its
controller once, at its first use. This script times whole user calls with
the shipped limiter against a peer in the same process that makes a new
controller at every outermost entry (what the limiter did from ea9f057 until
this benchmark's commit), and checks that both give the same model.

Workloads (synthetic, from :func:`skgpstruct.datasets.make_chain_data`, so
the script needs no data files): ``GPStructTagger`` with its defaults (the
weight-space form, the validation inside ``fit`` included) on 20 and 150
sparse sequences and the inducing-point form on 150; ``predict_marginals``
of 300 sequences; ``RandomizedCRFTagger`` with its defaults. Median of
``--repeats`` runs each, after a warm-up run (numba compilation).

Usage::

    python benchmarks/blas_limit.py [--repeats 3]

Results go to ``benchmarks/results/blas_limit.{md,json}``.
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import time_call, write_results  # noqa: E402

from skgpstruct import GPStructTagger, RandomizedCRFTagger  # noqa: E402
from skgpstruct._utils import parallel as _parallel  # noqa: E402
from skgpstruct.datasets import make_chain_data  # noqa: E402


class _ScanEveryTime(_parallel._SmallBlas):
    """The peer: a new ThreadpoolController at every outermost entry."""

    def __enter__(self):
        with self._lock:
            if self._depth == 0:
                self._controller = None
        return super().__enter__()


def _workloads():
    X, y = make_chain_data(n_sequences=450, n_classes=5, n_features=300, length=(5, 30),
                           sparse=True, n_active=6, noise=0.5, random_state=0)[:2]
    X_train, y_train, X_test = X[:150], y[:150], X[150:]
    gp_fit = dict(random_state=0)
    inducing = dict(approximation="inducing", n_inducing=100, random_state=0)
    fitted = GPStructTagger(**gp_fit).fit(X_train, y_train)
    X_small, y_small = X[:20], y[:20]
    return [
        ("GPStructTagger().fit (weight space, validation included), 20 sequences",
         lambda: GPStructTagger(**gp_fit).fit(X_small, y_small), lambda m: m.coef_),
        ("GPStructTagger().fit (weight space, validation included), 150 sequences",
         lambda: GPStructTagger(**gp_fit).fit(X_train, y_train), lambda m: m.coef_),
        ("GPStructTagger(approximation='inducing', n_inducing=100).fit, 150 sequences",
         lambda: GPStructTagger(**inducing).fit(X_train, y_train), lambda m: m.q_mu_),
        ("GPStructTagger.predict_marginals, 300 sequences",
         lambda: fitted.predict_marginals(X_test), lambda m: np.concatenate(m)),
        ("RandomizedCRFTagger().fit, 150 sequences",
         lambda: RandomizedCRFTagger(random_state=0).fit(X_train, y_train),
         lambda m: m.coef_),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    shipped = _parallel._SMALL_BLAS
    peer = _ScanEveryTime()
    rows = []
    for name, call, result in _workloads():
        times, outputs = {}, {}
        for label, limiter in (("one scan", shipped), ("scan per entry", peer)):
            _parallel._SMALL_BLAS = limiter
            try:
                outputs[label] = result(call())
                times[label], _ = time_call(call, repeats=args.repeats, warmup=0)
            finally:
                _parallel._SMALL_BLAS = shipped
        same = bool(np.array_equal(outputs["one scan"], outputs["scan per entry"]))
        rows.append({
            "workload": name,
            "one scan (s)": times["one scan"],
            "scan per entry (s)": times["scan per entry"],
            "speed-up": times["scan per entry"] / times["one scan"],
            "same result": "yes" if same else "NO",
        })
    write_results(
        "blas_limit", rows,
        ["workload", "one scan (s)", "scan per entry (s)", "speed-up", "same result"],
        title="BLAS thread limit: one library scan per process vs one per entry",
        notes=[f"median of {args.repeats} runs after a warm-up run, both limiters in one "
               "process; 'same result': the fitted parameters or marginals are equal "
               "bit for bit",
               "python benchmarks/blas_limit.py"],
        extra={"repeats": args.repeats})


if __name__ == "__main__":
    main()
