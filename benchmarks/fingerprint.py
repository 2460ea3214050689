"""Fingerprints of fitted models and predictions: the check of a
behaviour-preserving change.

Fits both estimators in 12 configurations (exact CRF dense / sparse, OWL-QN,
randomized Adam, randomized proximal AdaGrad with L1, low-rank transitions,
beam decoding; the GP with its defaults on sparse and dense features, where
the prior variance and temperature are chosen by its internal validation,
the inducing-point form, the coupled posterior, Adam on minibatches) plus
``TemperatureScaledTagger`` around two of them, on data from
:func:`skgpstruct.datasets.make_chain_data`, and hashes (SHA-256, first 16
hex digits) every fitted attribute (the public ones, ending in ``_``) and
every prediction on held-out sequences: ``predict``, ``predict_marginals``,
``predict_path_proba``, ``predict_uncertainty`` and, for the GP,
``predict_information_gain``. A change that leaves all of them identical
leaves the models and predictions bit for bit as they were, on this machine
(the hashes depend on the BLAS and the CPU: compare runs of one machine).

Usage::

    python benchmarks/fingerprint.py [CASE ...]          # write the section
    python benchmarks/fingerprint.py --check [CASE ...]  # compare with it

``--check`` writes nothing: it recomputes the hashes and compares them with
those of ``results/fingerprint.json`` (section ``--name``, default
``default``), prints every difference and exits with status 1 if there is
one. It imports only the public API, so it runs against an older checkout
too (``PYTHONPATH=<checkout> python benchmarks/fingerprint.py --check``).
"""

import argparse
import hashlib
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_name_argument, read_section, section_key, write_results  # noqa: E402

from skgpstruct import GPStructTagger, RandomizedCRFTagger  # noqa: E402
from skgpstruct.calibration import TemperatureScaledTagger  # noqa: E402
from skgpstruct.datasets import make_chain_data  # noqa: E402

SCRIPT = "fingerprint"


def digest(obj):
    """SHA-256 (16 hex digits) of arrays, numbers, strings and nested
    lists / tuples / dicts (dtype and shape included)."""
    h = hashlib.sha256()

    def feed(o):
        if isinstance(o, (list, tuple)):
            h.update(b"[")
            for x in o:
                feed(x)
            h.update(b"]")
        elif isinstance(o, dict):
            for k in sorted(o, key=str):
                h.update(str(k).encode())
                feed(o[k])
        elif sp.issparse(o):
            feed(o.toarray())
        elif isinstance(o, np.ndarray):
            if o.dtype == object:
                feed(list(o))
            else:
                h.update(str(o.dtype).encode())
                h.update(str(o.shape).encode())
                h.update(np.ascontiguousarray(o).tobytes())
        elif isinstance(o, (bool, int, float, np.bool_, np.integer, np.floating)):
            h.update(np.float64(o).tobytes())
        elif o is None:
            h.update(b"None")
        elif isinstance(o, str):
            h.update(o.encode())
        else:
            h.update(repr(type(o)).encode())

    feed(obj)
    return h.hexdigest()[:16]


def fitted_digests(est):
    """Digest of every public fitted attribute of ``est``."""
    return {k: digest(v) for k, v in sorted(vars(est).items())
            if k.endswith("_") and not k.startswith("_")
            and (isinstance(v, (np.ndarray, list, tuple, float, int, dict, str))
                 or sp.issparse(v))}


def prediction_digests(est, X, gp=False):
    """Digests of the predictions of ``est`` on ``X`` (an error's type
    stands for a method that refuses)."""
    names = ["predict", "predict_marginals", "predict_path_proba", "predict_uncertainty"]
    if gp:
        names.append("predict_information_gain")
    out = {}
    for name in names:
        if not hasattr(est, name):
            continue
        try:
            out[name] = digest(getattr(est, name)(X))
        except Exception as exc:  # noqa: BLE001 (a refusal is part of the behaviour)
            out[name] = "error " + type(exc).__name__
    return out


def cases():
    """``name -> (estimator, X, y)``: 40 training and 20 held-out sequences."""
    X, y = make_chain_data(n_sequences=60, n_classes=4, n_features=12, random_state=0)
    Xs, ys = make_chain_data(n_sequences=60, n_classes=5, n_features=40, sparse=True,
                             random_state=1)
    ys = [np.array(["ABCDE"[v] for v in t]) for t in ys]
    few = dict(random_state=0, n_predict_samples=32)
    return {
        "crf_exact": (RandomizedCRFTagger(c2=0.05), X, y),
        "crf_exact_sparse": (RandomizedCRFTagger(), Xs, ys),
        "crf_owlqn": (RandomizedCRFTagger(c1=0.1), Xs, ys),
        "crf_adam": (RandomizedCRFTagger(n_top=2, n_sampled=1, random_state=0, max_iter=5),
                     Xs, ys),
        "crf_adagrad": (RandomizedCRFTagger(n_top=2, n_sampled=1, optimizer="adagrad",
                                            c1=0.01, learning_rate=0.5, random_state=0,
                                            max_iter=5), Xs, ys),
        "crf_lowrank": (RandomizedCRFTagger(transitions="low_rank", rank=2, random_state=0,
                                            max_iter=20), X, y),
        "crf_beam": (RandomizedCRFTagger(beam_size=2), X, y),
        "gp_default": (GPStructTagger(**few), Xs, ys),
        "gp_default_dense": (GPStructTagger(**few), X, y),
        "gp_inducing": (GPStructTagger(approximation="inducing", kernel_variance=3.0,
                                       n_inducing=20, max_iter=30, **few), X, y),
        "gp_coupled": (GPStructTagger(posterior="coupled", kernel_variance=2.0,
                                      temperature=1.0, max_iter=30, **few), X, y),
        "gp_adam": (GPStructTagger(optimizer="adam", batch_size=16, kernel_variance=2.0,
                                   temperature=1.0, random_state=0, max_iter=5,
                                   n_predict_samples=16, n_samples=20), Xs, ys),
    }


#: Cases also fitted inside TemperatureScaledTagger (suffix ``_temp``).
TEMPERATURE_SCALED = ("crf_exact", "gp_default_dense")


def fingerprints(only=()):
    """``{case: {"fitted": {...}, "predictions": {...}}}``."""
    out = {}
    for name, (est, X, y) in cases().items():
        if only and name not in only:
            continue
        est.fit(X[:40], y[:40])
        gp = isinstance(est, GPStructTagger)
        out[name] = {"fitted": fitted_digests(est),
                     "predictions": prediction_digests(est, X[40:], gp)}
        if name in TEMPERATURE_SCALED:
            ts = TemperatureScaledTagger(est).fit(X[:40], y[:40])
            out[name + "_temp"] = {"fitted": {"temperature_": digest(ts.temperature_)},
                                   "predictions": prediction_digests(ts, X[40:])}
        print(f"{name}: done", file=sys.stderr, flush=True)
    return out


def compare(new, old):
    """Lines naming every digest of ``new`` that differs from (or is
    missing in) ``old``."""
    lines = []
    for case, parts in new.items():
        if case not in old:
            lines.append(f"{case}: not in the stored results")
            continue
        for part, values in parts.items():
            for key, value in values.items():
                stored = old[case].get(part, {}).get(key)
                if stored != value:
                    lines.append(f"{case} {part} {key}: {stored} -> {value}")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help="cases to run (default: all)")
    parser.add_argument("--check", action="store_true",
                        help="compare with the stored section instead of writing it")
    add_name_argument(parser, SCRIPT)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    new = fingerprints(args.cases)
    if args.check:
        stored = read_section(SCRIPT, section_key(SCRIPT, args.name))  # KeyError if none
        diffs = compare(new, stored["fingerprints"])
        n = sum(len(v) for parts in new.values() for v in parts.values())
        print(f"{n - len(diffs)} of {n} digests identical over {len(new)} cases")
        for line in diffs:
            print(line)
        sys.exit(1 if diffs else 0)
    rows = [{"case": case,
             "fitted attributes": len(parts["fitted"]),
             "predictions": len(parts["predictions"]),
             "digest of all": digest(parts)}
            for case, parts in new.items()]
    write_results(SCRIPT, rows, ["case", "fitted attributes", "predictions", "digest of all"],
                  title="Fingerprints of fitted models and predictions",
                  notes=["Each digest: SHA-256 (16 hex digits) of the case's fitted "
                         "attributes and predictions; the json holds one per attribute "
                         "and prediction. `python benchmarks/fingerprint.py --check` "
                         "compares a later tree (or, with PYTHONPATH, an older checkout) "
                         "with these, on the same machine."],
                  extra={"fingerprints": new}, section=args.name)


if __name__ == "__main__":
    main()
