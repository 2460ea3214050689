"""Partial labels against whole sentences on CoNLL-2000 at the same number of
labelled tokens: both taggers, paired over random draws.

Protocol
--------
The pool is CoNLL-2000's training set (211,727 tokens), the test set its test
set, the features sklearn-crfsuite's tutorial feature dicts. Each draw ``d``
(``--draws``, default 0 to 4; ``numpy.random.default_rng(d)``) labels
``--fraction`` (25 %) of the pool's tokens in two ways:

* ``partial``: in every sentence a random ``fraction`` of its tokens
  (``floor(fraction * T)`` plus one with probability of the remainder, so that
  the pool's total is about ``fraction``), the others passed to ``fit`` as
  ``None`` (unknown; the likelihood marginalises them; a sentence that drew
  no label is left out);
* ``whole``: whole sentences in a random order until they hold at least as
  many labelled tokens as ``partial``; ``partial`` then gets the difference
  (less than one sentence) as further random tokens, so that both arms hold
  exactly the same number of labelled tokens.

Both taggers are fitted on each arm, as ``_standard_gp`` builds them:
``Pipeline([SequenceVectorizer(), GPStructTagger(n_jobs=J,
random_state=d)])`` at its defaults and the exact ``RandomizedCRFTagger``
with ``c1=0, c2=--c2`` (1, ``standard_tasks.py``'s choice on CoNLL-2000),
``max_iter=100``. Test scores (``_standard_gp.scores``): chunk F1 (conlleval's
rule), token error %, log loss (nats) and ECE % (15 bins) of the marginals
(a test label unseen in training has marginal 0). The report gives, per
tagger and arm, the mean +- SE over draws, and per tagger and score the
paired difference ``partial - whole`` with its SE and t (mean / SE). The
claim checked: ``partial`` has the higher F1 for both taggers, t > 2 over at
least 5 draws.

Draws can run as separate invocations that add to the section (``--draws
0 1``, then ``--draws 2 3 4``); ``--report`` re-renders from the stored draws.
``--max-sentences`` / ``--max-test`` make a smoke run (use ``--name``).

Usage::

    python benchmarks/partial_labels.py [--draws 0 1 2 3 4] [--fraction 0.25]
        [--c2 1] [--n-jobs 2] [--max-sentences N] [--max-test N] [--report]
        [--fresh] [--name SECTION]

Results: a section of ``benchmarks/results/partial_labels.{md,json}``.
"""

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (add_name_argument, format_machine, machine_info,  # noqa: E402
                     markdown_table, provenance, read_results, section_key, write_section)
from _standard_gp import pipeline_marginals, scores  # noqa: E402
from active_learning import (CRF, CRF_C2, GP, labelled_set, load, make,  # noqa: E402
                             partial_supported)

SCRIPT = "partial_labels"
ARMS = ("partial", "whole")
METRICS = ("F1", "token error", "log loss", "ECE %")
MIN_DRAWS = 5
TITLE = "Partial labels against whole sentences, same labelled tokens (CoNLL-2000)"


def draw_masks(lengths, fraction, rng):
    """``{arm: list of bool masks}`` of one draw (see the module docstring)."""
    lengths = np.asarray(lengths)
    k = np.floor(fraction * lengths).astype(int)
    k += rng.random(len(lengths)) < fraction * lengths - k
    partial = []
    for n, ki in zip(lengths, k):
        m = np.zeros(n, dtype=bool)
        m[rng.choice(n, size=min(ki, n), replace=False)] = True
        partial.append(m)
    target = int(sum(int(m.sum()) for m in partial))
    whole, total = [np.zeros(n, dtype=bool) for n in lengths], 0
    for i in rng.permutation(len(lengths)):
        if total >= target:
            break
        whole[i][:] = True
        total += int(lengths[i])
    free = np.flatnonzero(~np.concatenate(partial))
    extra = np.zeros(int(lengths.sum()), dtype=bool)
    extra[rng.choice(free, size=total - target, replace=False)] = True
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    partial = [m | extra[offsets[i]:offsets[i + 1]] for i, m in enumerate(partial)]
    return {"partial": partial, "whole": whole}


def fit_scores(pipe, Xl, yl, Xt, yt):
    """Fit, then the test scores of :data:`METRICS` and the fit's seconds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter reached
        start = time.perf_counter()
        pipe.fit(Xl, yl)
        fit_s = time.perf_counter() - start
    _, marginals, labels = pipeline_marginals(pipe, Xt)
    s = scores(yt, pipe.predict(Xt), marginals, labels)
    return {"F1": s["F1"], "token error": 100 - s["token acc"], "log loss": s["log loss"],
            "ECE %": s["ECE %"], "fit s": fit_s}


def run_draw(draw, data, args):
    """Both arms and taggers of one draw."""
    X, y, Xt, yt = data
    masks = draw_masks([len(s) for s in y], args.fraction, np.random.default_rng(draw))
    out = {"provenance": provenance()}
    for arm in ARMS:
        Xl, yl = labelled_set(X, y, masks[arm])
        out[arm] = {"labelled tokens": int(sum(int(m.sum()) for m in masks[arm])),
                    "sentences": len(Xl)}
        for tagger in (GP, CRF):
            out[arm][tagger] = fit_scores(make(tagger, draw, args.n_jobs, args.c2),
                                          Xl, yl, Xt, yt)
            print(f"draw {draw} {arm:7s} {tagger}: " + ", ".join(
                f"{k} {v:.4g}" for k, v in out[arm][tagger].items()), flush=True)
    return out


# ------------------------------------------------------------------ report
def _mean_se(values):
    v = np.asarray(values, dtype=float)
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1
                             else float("nan"))


def _t(mean, se):
    if se > 0:
        return mean / se
    return float("nan") if mean == 0 or se != se else math.copysign(math.inf, mean)


def tables(runs):
    """``(score rows, paired rows)`` over the stored draws."""
    draws = sorted(runs, key=int)
    score_rows, paired_rows = [], []
    for tagger in (GP, CRF):
        for arm in ARMS:
            row = {"tagger": tagger, "arm": arm, "draws": len(draws),
                   "labelled tokens": round(float(np.mean(
                       [runs[d][arm]["labelled tokens"] for d in draws]))),
                   "sentences": round(float(np.mean([runs[d][arm]["sentences"]
                                                     for d in draws])))}
            for m in METRICS + ("fit s",):
                mean, se = _mean_se([runs[d][arm][tagger][m] for d in draws])
                row[m] = f"{mean:.4g}" + (f" ± {se:.2g}" if se == se else "")
            score_rows.append(row)
        for m in METRICS:
            diff = [runs[d]["partial"][tagger][m] - runs[d]["whole"][tagger][m]
                    for d in draws]
            mean, se = _mean_se(diff)
            paired_rows.append({"tagger": tagger, "score": m, "draws": len(draws),
                                "partial - whole": mean, "SE": se, "t": _t(mean, se),
                                "per draw": [float(v) for v in diff]})
    return score_rows, paired_rows


def verdict(paired_rows):
    """The claim: partial has the higher F1 for both taggers, t > 2, enough draws."""
    f1 = [r for r in paired_rows if r["score"] == "F1"]
    parts = [f"{r['tagger']} F1 {r['partial - whole']:+.3f} ± {r['SE']:.3f} "
             f"(t = {r['t']:.2f})" for r in f1]
    ok = all(r["t"] > 2 for r in f1) and all(r["draws"] >= MIN_DRAWS for r in f1)
    short = "" if all(r["draws"] >= MIN_DRAWS for r in f1) else (
        f" (fewer than {MIN_DRAWS} draws)")
    return (f"Partial labels spread over all sentences {'beat' if ok else 'do NOT beat'} "
            f"whole sentences at the same labelled tokens (F1, paired t > 2 for both "
            f"taggers){short}: " + "; ".join(parts) + ".")


def report(section, payload):
    """Write the section (json and md) from the stored draws."""
    cfg, runs = payload["settings"], payload["runs"]
    score_rows, paired_rows = tables(runs)
    pool = (f"the first {cfg['pool_sentences']} training sentences" if cfg["max_sentences"]
            else f"all {cfg['pool_sentences']} training sentences")
    notes = [verdict(paired_rows),
             f"Pool: {pool} ({cfg['pool_tokens']} tokens), {100 * cfg['fraction']:g} % "
             f"labelled in each arm; test: {cfg['test_sentences']} sentences. Draws: "
             + ", ".join(sorted(runs, key=int)) + ". Scores: mean ± SE over draws; "
             "sentences: those with a labelled token (fitted on).",
             f"Taggers: {GP} (Pipeline with SequenceVectorizer, defaults, random_state = "
             f"draw); {CRF} exact, c1 = 0, c2 = {cfg['c2']:g}, max_iter = 100. F1: chunks; "
             "token error and ECE (15 bins) in %; log loss in nats (a test label unseen "
             "in training has marginal 0: -log 1e-15)."]
    commits = sorted({str(r["provenance"].get("commit"))[:10]
                      + (" (dirty)" if r["provenance"].get("dirty") else "")
                      for r in runs.values()})
    notes.append("Draws ran from: " + ", ".join(commits) + ".")
    text = (f"# {TITLE}\n\n" + markdown_table(score_rows, ["tagger", "arm", "draws",
                                                            "labelled tokens", "sentences",
                                                            *METRICS, "fit s"])
            + "\n\n## Paired differences, partial - whole\n\n"
            + markdown_table(paired_rows, ["tagger", "score", "draws", "partial - whole",
                                           "SE", "t"])
            + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    public = dict(payload)
    public.update({"title": TITLE, "rows": score_rows, "paired": paired_rows,
                   "notes": notes})
    print(write_section(SCRIPT, section, public, text,
                        machine=format_machine(payload.get("machine", {}))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", nargs="+", type=int, default=list(range(MIN_DRAWS)))
    parser.add_argument("--fraction", type=float, default=0.25,
                        help="labelled share of the pool's tokens")
    parser.add_argument("--c2", type=float, default=CRF_C2, help="the CRF's L2 penalty")
    parser.add_argument("--n-jobs", type=int, default=2, help="threads of the fits")
    parser.add_argument("--max-sentences", type=int, default=None,
                        help="first N training sentences as the pool (a smoke run)")
    parser.add_argument("--max-test", type=int, default=None,
                        help="first N test sentences (a smoke run)")
    parser.add_argument("--report", action="store_true",
                        help="only re-render the report from the stored draws")
    parser.add_argument("--fresh", action="store_true", help="drop the stored draws first")
    add_name_argument(parser, SCRIPT)
    args = parser.parse_args(argv)
    section = section_key(SCRIPT, args.name)
    stored = {} if args.fresh else read_results(SCRIPT)["sections"].get(section, {})
    if args.report:
        if not stored.get("runs"):
            sys.exit(f"no draws stored in section {section!r}")
        report(section, stored)
        return 0
    if not partial_supported():
        sys.exit("fit does not accept None (unknown) labels yet: nothing to compare")
    data = load(args.max_sentences, args.max_test)
    config = {"fraction": args.fraction, "c2": args.c2, "max_sentences": args.max_sentences,
              "max_test": args.max_test, "pool_sentences": len(data[1]),
              "pool_tokens": sum(len(s) for s in data[1]), "test_sentences": len(data[3])}
    if stored and stored.get("settings") != config:
        sys.exit(f"section {section!r} was run with other settings "
                 f"({stored.get('settings')}); use --name or --fresh")
    fresh = args.fresh
    for draw in args.draws:
        result = run_draw(draw, data, args)
        # read again: invocations running side by side keep each other's draws
        again = {} if fresh else read_results(SCRIPT)["sections"].get(section, {})
        runs = again.get("runs", {}) if again.get("settings") == config else {}
        runs[str(draw)] = result
        report(section, {"settings": config, "runs": runs, "machine": machine_info()})
        fresh = False
    return 0


if __name__ == "__main__":
    sys.exit(main())
