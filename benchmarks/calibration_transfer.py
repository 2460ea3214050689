"""Calibration on a task the defaults were not chosen on: UD Hungarian UPOS.

GPStructTagger's prior variance and posterior temperature are chosen inside
``fit`` by a rule (``skgpstruct._gpstruct.posterior_cv.cv_posterior``); this script
checks it on data that played no part in choosing that rule: the 17 UPOS
tags of the Universal Dependencies Hungarian-Szeged treebank, another
language and another task than the GPstruct folds of ``calibration.py``.

Protocol: the first ``--n-train`` training sentences (default 300; all with
``--n-train 0``), :class:`skgpstruct.features.WordFeatures` fitted on them
and applied to dev and test (the same CSR features for every model);
GPStructTagger with its defaults (``random_state=0``); the exact
RandomizedCRFTagger (``n_top=None``) and sklearn-crfsuite (L-BFGS,
``c1=0``, as ``ud_morph.py`` gives it the features) at each ``--c2``, each
CRF's c2 chosen by dev token error. Every model is scored on the test
sentences with ``calibration.py``'s metrics: token error, log loss, Brier,
ECE (15 bins), error at 80 % coverage, fit seconds. Results go to the
section ``default`` of ``benchmarks/results/calibration_transfer.{md,json}``
(``--name KEY``: the section ``KEY``, e.g. ``n100`` for ``--n-train 100``).

Usage::

    python benchmarks/calibration_transfer.py [--n-train 300] [--c2 0.01 0.1 1]
        [--name SECTION]
"""

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_name_argument, section_key, write_results  # noqa: E402
from calibration import METRICS, run_crf, run_crfsuite, run_gp  # noqa: E402
from ud_morph import featurize, load_split, to_crfsuite  # noqa: E402


def _best_on_dev(fits):
    """The test scores of the c2 whose dev error is the lowest (ties: the
    first), and that c2."""
    c2 = min(fits, key=lambda c: fits[c][0]["error %"])
    return fits[c2][1], c2


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-train", type=int, default=300)
    parser.add_argument("--c2", nargs="+", type=float, default=[0.01, 0.1, 1.0])
    add_name_argument(parser, "calibration_transfer")
    args = parser.parse_args(argv)
    section = section_key("calibration_transfer", args.name)
    warnings.simplefilter("ignore")

    data = load_split("upos", quick=False)
    if args.n_train > 0:
        data["train"] = tuple(part[: args.n_train] for part in data["train"])
    feats, names = featurize(data)
    y = {split: [np.asarray(t) for t in data[split][1]] for split in data}
    X_tr, X_dev, X_te = feats["train"], feats["dev"], feats["test"]
    n_tokens = sum(len(t) for t in y["train"])
    print(f"train: {len(X_tr)} sentences, {n_tokens} tokens, {names.size} features")

    results, choices = {}, {}
    gp = run_gp(X_tr, y["train"], X_te, y["test"], {}, seed=0)
    results["GPStructTagger"] = gp
    choices["GPStructTagger"] = gp.pop("_choice")
    print("GPStructTagger:", {m: round(gp[m], 4) for m in METRICS}, choices["GPStructTagger"])

    fits = {}
    for c2 in args.c2:
        dev = run_crf(X_tr, y["train"], X_dev, y["dev"], c2, {}, seed=0)
        test = run_crf(X_tr, y["train"], X_te, y["test"], c2, {}, seed=0)
        fits[c2] = (dev, test)
    results["RandomizedCRFTagger exact"], choices["RandomizedCRFTagger exact"] = _best_on_dev(fits)

    F = {split: [to_crfsuite(x, names) for x in feats[split]] for split in feats}
    fits = {}
    for c2 in args.c2:
        dev = run_crfsuite(X_tr, y["train"], X_dev, y["dev"], c2, F["train"], F["dev"])
        test = run_crfsuite(X_tr, y["train"], X_te, y["test"], c2, F["train"], F["test"])
        fits[c2] = (dev, test)
    results["sklearn-crfsuite"], choices["sklearn-crfsuite"] = _best_on_dev(fits)

    chosen = {name: (f"sigma^2 = {c['sigma2']:g}, T = {c['temperature']:g}"
                     if isinstance(c, dict) else f"c2 = {c:g}") for name, c in choices.items()}
    rows = [{"model": name, "chosen": chosen[name],
             **{m: float(r[m]) for m in METRICS}} for name, r in results.items()]
    notes = [
        f"UD Hungarian-Szeged, UPOS (17 tags), the first {len(X_tr)} training sentences "
        f"({n_tokens} tokens), WordFeatures fitted on them; scored on the "
        f"{len(X_te)} test sentences.",
        "chosen: GPStructTagger's (sigma^2, T) chosen inside fit; each CRF's c2 "
        f"of {args.c2} with the lowest dev token error.",
        "ECE over 15 equal-width bins of the max marginal; error % at 80 % coverage: "
        "error of the argmax of the marginals over the 80 % most confident test tokens.",
    ]
    write_results("calibration_transfer", rows, ["model", "chosen"] + METRICS,
                  title="Calibration on a task the defaults were not chosen on: "
                        "UD Hungarian UPOS", notes=notes, section=section)


if __name__ == "__main__":
    main()
