"""Active learning on CoNLL-2000 chunking: random sentences, CRF MNLP, GP path
mutual information (BALD) and token-level partial annotation.

Protocol
--------
The pool is CoNLL-2000's training set (8,936 sentences, 211,727 tokens), the
test set its test set, the features sklearn-crfsuite's tutorial feature dicts
(``_conll.tutorial_features``). Cost is counted in annotated tokens, as a
fraction of the pool's tokens. Each seed draws one random order of the pool's
sentences; every strategy starts from the same labelled set, the first
sentences of that order up to ``BUDGETS[0]`` (1 %) of the pool's tokens. At
each budget of ``--budgets`` (1, 2, 4, 8, 12, 16, 25 %) the strategy's
tagger(s) are fitted on what is labelled and scored on the test set (chunk F1,
conlleval's rule; token error %), then the strategy acquires up to the next
budget: sentences in the order of its score (ties by pool position) until the
annotated tokens reach the budget (the last sentence may overshoot; the curves
use the tokens actually annotated).

Each strategy's tagger is the one it would train, as ``_standard_gp`` builds
them for the standard tasks: ``GPStructTagger`` is ``Pipeline([SequenceVectorizer(),
GPStructTagger(n_jobs=J, random_state=seed)])`` at its defaults (it chooses its
prior variance and temperature on its own labelled sentences), the CRF
``Pipeline([SequenceVectorizer(), RandomizedCRFTagger(c1=0, c2=C2,
max_iter=100)])`` (exact; ``--c2``, default 1, the value chosen on the dev
split of the full training set in ``standard_tasks.py``). The vectorizer is
refitted on the labelled sentences each round. Strategies:

* ``random``: the next sentences of the seed's order; both taggers are fitted
  on the same labelled sets;
* ``crf_mnlp``: maximum normalised log-probability (Shen et al., ICLR 2018
  (arXiv 2017)): the sentences whose best path (Viterbi) has the lowest
  ``log p(y* | x) / T`` under the CRF (``predict_path_proba(log=True)``);
* ``gp_bald``: the largest mutual information between the label path and the
  GP's posterior (``predict_uncertainty(kind="mutual_information",
  per="path")``);
* ``gp_bald_norm``: ``gp_bald``'s score divided by the sentence's length,
  the information per annotated token: the cost is counted in tokens, and
  the path mutual information grows with the length (as the log-probability
  that MNLP normalises);
* ``gp_partial``: token-level partial annotation. Sentences are taken in the
  ``gp_bald`` order (a sentence with some tokens still unlabelled stays a
  candidate); in each, only the ``ceil(--partial-fraction * unlabelled)``
  (at least one) unlabelled tokens with the largest token mutual information
  (``per="token"``) are labelled, the others are passed to ``fit`` as
  ``None`` (unknown: the likelihood marginalises them). Both scores of a
  sentence with annotated tokens are taken given them (``allowed=`` with
  those labels forced: the posterior predictive given what is known). Its
  whole-sentence counterpart with the same sentence score is ``gp_bald``.

Optional rows (``--strategies``): ``crf_entropy``, the largest total token
entropy of the CRF's marginals (Settles and Craven, EMNLP 2008); ``gp_epig``,
the expected predictive information gain (``predict_information_gain``)
about the tokens of ``--epig-target`` pool sentences drawn by the seed.
Scores are computed on chunks of ``SCORE_CHUNK`` sentences (each sentence's
score depends on that sentence and the model only).

Full-pool F1: each tagger fitted once on the whole pool (GP ``random_state=0``)
and scored on the test set; stored in the section with the pool's settings and
reused by later invocations (``--full-pool`` recomputes it). A strategy's
target is 99 % of its own tagger's full-pool F1; its tokens to target, per
seed, is the first crossing of its F1 curve, interpolated linearly in the
annotated fraction between the two budgets around it. A seed whose curve never
reaches it is censored: it counts as the final annotated fraction (about 25 %)
in the means and paired t statistics, and the row says how many seeds reached
it; a comparison whose winning side has a censored seed does not pass.

Seeds run as separate invocations (``--seeds 0 1``) that add their curves to
the section (a seed's strategy run again is replaced); every invocation, and
``--report`` alone, recomputes the report from all stored seeds: F1 per budget
(mean +- standard error over seeds), tokens to target, and the paired t
statistics over seeds of the issue's acceptance (best GP strategy against
random with the GP and against CRF MNLP; ``gp_partial`` against ``gp_bald``).
A section's settings (budgets, pool, test, c2, partial fraction) are fixed by
its first run; another setting needs ``--name`` or ``--fresh``. A seed's
strategies can also be split over invocations (``--seeds 0 --strategies
gp_partial``): every strategy of a seed starts from the same labelled set.

Usage::

    python benchmarks/active_learning.py --full-pool            # once (optional)
    python benchmarks/active_learning.py --seeds 0              # one seed: ~1.5 h, 2 cores
    python benchmarks/active_learning.py --seeds 0 --strategies gp_epig   # optional rows
    python benchmarks/active_learning.py --seeds 1 ...          # up to --seeds 4
    python benchmarks/active_learning.py --seeds 2 & python benchmarks/active_learning.py --seeds 3
                                                 # side by side (a lock keeps both)
    python benchmarks/active_learning.py --report               # merge / re-render
    python benchmarks/active_learning.py --seeds 0 --max-sentences 300 \\
        --max-test 200 --n-jobs 1 --name smoke                  # a smoke run

Results: a section of ``benchmarks/results/active_learning.{md,json}`` and the
figure ``active_learning[_SECTION].png`` (F1 against annotated tokens, mean
+- standard error bands).
"""

import argparse
import math
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _active_learning_report import (CRF, GP, OPTIONAL, STRATEGIES, TAGGERS,  # noqa: E402
                                     report)
from _common import (RUN, _locked, add_name_argument, machine_info,  # noqa: E402
                     plot_path, provenance, read_results, section_key)
from _conll import TASKS, read_columns  # noqa: E402
from _standard_gp import MAX_ITER, featurize, make_crf_l2, make_gp  # noqa: E402

from skgpstruct.datasets import get_data_home  # noqa: E402
from skgpstruct.metrics import chunk_f1_score, flat_accuracy_score  # noqa: E402

SCRIPT = "active_learning"
BUDGETS = (0.01, 0.02, 0.04, 0.08, 0.12, 0.16, 0.25)
CRF_C2 = 1.0
PARTIAL_FRACTION = 0.25
EPIG_TARGET = 300
SCORE_CHUNK = 1000
#: sentences whose token mutual information gp_partial computes at a time
PARTIAL_BATCH = 256


# -------------------------------------------------------------------- data
def load(max_sentences=None, max_test=None):
    """``(X_pool, y_pool, X_test, y_test)``: feature dicts and label lists of
    the first ``max_sentences`` training and ``max_test`` test sentences."""
    home = Path(get_data_home())
    train, test = (read_columns(home / f) for f in TASKS["conll2000"])
    return (*featurize(train[:max_sentences]), *featurize(test[:max_test]))


def partial_supported():
    """Whether ``fit`` of both taggers accepts ``None`` (unknown) labels."""
    from skgpstruct import GPStructTagger, RandomizedCRFTagger

    X0 = np.eye(3)
    y0 = [["a", None, "b"], ["a", "b", "b"]]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            GPStructTagger(kernel_variance=1.0, temperature=0.5, max_iter=1,
                           n_predict_samples=8).fit([X0, X0], y0)
            RandomizedCRFTagger(max_iter=1).fit([X0, X0], y0)
    except (ValueError, TypeError):
        return False
    return True


def make(tagger, seed, n_jobs, c2):
    """A fresh pipeline of ``tagger`` (see the module docstring)."""
    if tagger == GP:
        return make_gp(n_jobs).set_params(gp__random_state=seed)
    return make_crf_l2(n_jobs, MAX_ITER, c2=c2)


def labelled_set(X, y, masks):
    """The sentences with a labelled token; unlabelled tokens' labels None."""
    Xl, yl = [], []
    for x, labels, m in zip(X, y, masks):
        if m.any():
            Xl.append(x)
            yl.append(list(labels) if m.all()
                      else [lab if k else None for lab, k in zip(labels, m)])
    return Xl, yl


def fit_score(pipe, Xl, yl, Xt, yt):
    """Fit, then test chunk F1 and token error (%) and the fit's seconds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter reached, sequences skipped
        start = time.perf_counter()
        pipe.fit(Xl, yl)
        fit_s = time.perf_counter() - start
    pred = pipe.predict(Xt)
    return {"F1": 100 * chunk_f1_score(yt, pred),
            "token error": 100 * (1 - flat_accuracy_score(yt, pred)), "fit s": fit_s}


def full_pool(data, n_jobs, c2):
    """Each tagger fitted on the whole pool (GP ``random_state=0``)."""
    Xp, yp, Xt, yt = data
    out = {}
    for tagger in (GP, CRF):
        out[tagger] = fit_score(make(tagger, 0, n_jobs, c2), Xp, yp, Xt, yt)
        print(f"full pool {tagger}: F1 {out[tagger]['F1']:.2f} "
              f"({out[tagger]['fit s']:.0f} s)", flush=True)
    return out


# ----------------------------------------------------------- acquisition
def _chunked(fn, F):
    """``fn`` over chunks of :data:`SCORE_CHUNK` sequences, concatenated."""
    out = []
    for s in range(0, len(F), SCORE_CHUNK):
        out.extend(fn(F[s:s + SCORE_CHUNK]))
    return out


def known_constraint(y, mask):
    """``allowed=`` entry of a sentence: its annotated labels forced, the
    others free (None when nothing is annotated)."""
    return None if not mask.any() else [lab if k else None for lab, k in zip(y, mask)]


def sentence_scores(strategy, pipe, X_cand, X_target=None, allowed=None):
    """Each candidate's score under ``strategy`` (larger: acquired first);
    ``allowed``: the candidates' annotated labels (gp_partial), the score
    given them."""
    F = pipe[:-1].transform(X_cand)
    tagger = pipe[-1]
    if strategy == "crf_mnlp":
        logp = np.asarray(_chunked(lambda f: tagger.predict_path_proba(f, log=True), F))
        return -logp / np.array([len(x) for x in X_cand])
    if strategy == "crf_entropy":
        fn = (lambda f: tagger.predict_uncertainty(f, kind="entropy", per="sequence"))
    elif strategy == "gp_bald":
        fn = (lambda f: tagger.predict_uncertainty(f, kind="mutual_information",
                                                   per="path"))
    elif strategy == "gp_bald_norm":  # per annotated token, as MNLP normalises
        mi = _chunked(lambda f: tagger.predict_uncertainty(
            f, kind="mutual_information", per="path"), F)
        return np.asarray(mi, dtype=np.float64) / np.array([len(x) for x in X_cand])
    elif strategy == "gp_partial":  # given the labels already annotated
        out = []
        for s in range(0, len(F), SCORE_CHUNK):
            out.extend(tagger.predict_uncertainty(
                F[s:s + SCORE_CHUNK], kind="mutual_information", per="path",
                allowed=allowed[s:s + SCORE_CHUNK]))
        return np.asarray(out, dtype=np.float64)
    elif strategy == "gp_epig":
        Ft = pipe[:-1].transform(X_target)
        fn = (lambda f: tagger.predict_information_gain(f, Ft))
    else:
        raise ValueError(f"unknown strategy {strategy!r}")
    return np.asarray(_chunked(fn, F), dtype=np.float64)


def _top_tokens(mi, free, fraction):
    """Mask of the ``ceil(fraction * free.sum())`` (at least 1) free tokens
    with the largest ``mi`` (ties: earlier token)."""
    k = max(1, math.ceil(fraction * int(free.sum())))
    idx = np.flatnonzero(free)
    order = idx[np.lexsort((idx, -np.asarray(mi)[idx]))][:k]
    new = np.zeros_like(free)
    new[order] = True
    return new


def acquire(order, masks, target, partial=None):
    """Label along ``order`` (pool positions, best first) until ``target``
    tokens are annotated: whole sentences, or with ``partial = (pipe, X,
    fraction, y)`` the top-mutual-information tokens of each (:func:`_top_tokens`;
    the token mutual information given the sentence's annotated labels,
    computed :data:`PARTIAL_BATCH` sentences at a time). Changes ``masks``."""
    total = sum(int(m.sum()) for m in masks)
    step = PARTIAL_BATCH if partial else max(len(order), 1)
    for start in range(0, len(order), step):
        if total >= target:
            return
        batch, mis = order[start:start + step], None
        if partial:
            pipe, X, fraction, y = partial
            F = pipe[:-1].transform([X[i] for i in batch])
            mis = pipe[-1].predict_uncertainty(
                F, kind="mutual_information", per="token",
                allowed=[known_constraint(y[i], masks[i]) for i in batch])
        for j, i in enumerate(batch):
            if total >= target:
                return
            new = ~masks[i] if mis is None else _top_tokens(mis[j], ~masks[i], fraction)
            masks[i] |= new
            total += int(new.sum())


def next_order(strategy, pipes, data, masks, perm, seed, args):
    """The candidates (pool positions with an unlabelled token), best first."""
    X = data[0]
    cand = np.array([i for i in range(len(X)) if not masks[i].all()], dtype=np.int64)
    if strategy == "random":
        return [int(i) for i in perm if not masks[i].all()]
    target = None
    if strategy == "gp_epig":
        rng = np.random.default_rng([seed, 1])
        pick = rng.choice(len(X), size=min(args.epig_target, len(X)), replace=False)
        target = [X[i] for i in sorted(pick)]
    allowed = ([known_constraint(data[1][i], masks[i]) for i in cand]
               if strategy == "gp_partial" else None)
    scores = sentence_scores(strategy, pipes[TAGGERS[strategy][0]], [X[i] for i in cand],
                             target, allowed)
    return [int(i) for i in cand[np.lexsort((cand, -scores))]]


def start_masks(lengths, perm, target):
    """Whole sentences along ``perm`` until ``target`` tokens: all strategies'
    starting labelled set."""
    masks = [np.zeros(n, dtype=bool) for n in lengths]
    total = 0
    for i in perm:
        if total >= target:
            break
        masks[i][:] = True
        total += lengths[i]
    return masks


def run_strategy(strategy, data, seed, args):
    """One strategy's curve on one seed (see the module docstring)."""
    X, y, Xt, yt = data
    lengths = [len(s) for s in y]
    n_tokens = sum(lengths)
    perm = np.random.default_rng(seed).permutation(len(X))
    masks = start_masks(lengths, perm, args.budgets[0] * n_tokens)
    curve = {"tokens": [], "sentences": [], "fit s": [], "acquire s": [],
             **{t: {"F1": [], "token error": []} for t in TAGGERS[strategy]}}
    start = time.perf_counter()
    for r in range(len(args.budgets)):
        Xl, yl = labelled_set(X, y, masks)
        pipes, fit_s = {}, 0.0
        for tagger in TAGGERS[strategy]:
            pipes[tagger] = make(tagger, seed, args.n_jobs, args.c2)
            scores = fit_score(pipes[tagger], Xl, yl, Xt, yt)
            fit_s += scores.pop("fit s")
            for k, v in scores.items():
                curve[tagger][k].append(v)
        curve["tokens"].append(int(sum(int(m.sum()) for m in masks)))
        curve["sentences"].append(len(Xl))
        curve["fit s"].append(fit_s)
        first = TAGGERS[strategy][0]
        print(f"seed {seed} {strategy:11s} {curve['tokens'][-1] / n_tokens:6.2%} "
              f"{first} F1 {curve[first]['F1'][-1]:.2f} (fit {fit_s:.0f} s)", flush=True)
        if r + 1 == len(args.budgets):
            break
        t0 = time.perf_counter()
        order = next_order(strategy, pipes, data, masks, perm, seed, args)
        partial = ((pipes[GP], X, args.partial_fraction, y) if strategy == "gp_partial"
                   else None)
        acquire(order, masks, args.budgets[r + 1] * n_tokens, partial)
        curve["acquire s"].append(time.perf_counter() - t0)
    curve["seconds"] = time.perf_counter() - start
    return curve


# ----------------------------------------------------------------- storage
def settings(args, data):
    """What a section's seeds must share."""
    return {"budgets": list(args.budgets), "max_sentences": args.max_sentences,
            "max_test": args.max_test, "c2": args.c2,
            "partial_fraction": args.partial_fraction, "epig_target": args.epig_target,
            "pool_sentences": len(data[1]), "pool_tokens": sum(len(s) for s in data[1]),
            "test_sentences": len(data[3])}


def results_lock():
    """An exclusive lock (``_common._locked``'s handle, on a lock file of its
    own: ``write_section`` takes the json's; closing it releases the lock),
    held while an invocation reads, merges and rewrites the results: seeds
    run side by side (``--seeds 1`` and ``--seeds 2`` at once) neither read
    a file half written nor drop each other's curves."""
    return _locked(Path(tempfile.gettempdir()) / f"skgpstruct-benchmark-{SCRIPT}.lock")


def stored_section(section):
    """The section's payload, or an empty one."""
    with results_lock():
        return read_results(SCRIPT)["sections"].get(section, {})


def save(section, config, full, runs, fresh=False):
    """Merge ``runs`` into the stored section (read again under
    :func:`results_lock`, so that invocations running side by side keep
    each other's seeds; none with ``fresh``) and rewrite it with the
    report."""
    with results_lock():
        stored = {} if fresh else read_results(SCRIPT)["sections"].get(section, {})
        merged = stored.get("runs", {}) if stored.get("settings") == config else {}
        for seed, strategies in runs.items():
            merged.setdefault(seed, {}).update(strategies)
        payload = {"settings": config, "full_pool": full, "runs": merged,
                   "machine": machine_info()}
        report(SCRIPT, section, payload, plot_path(SCRIPT, section))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[],
                        help="seeds to run and add to the section")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES),
                        choices=STRATEGIES + OPTIONAL)
    parser.add_argument("--budgets", nargs="+", type=float, default=list(BUDGETS),
                        help="annotated fractions of the pool's tokens, increasing")
    parser.add_argument("--c2", type=float, default=CRF_C2, help="the CRF's L2 penalty")
    parser.add_argument("--partial-fraction", type=float, default=PARTIAL_FRACTION,
                        help="gp_partial: share of a chosen sentence's unlabelled tokens "
                             "labelled")
    parser.add_argument("--epig-target", type=int, default=EPIG_TARGET,
                        help="gp_epig: pool sentences whose tokens are the target")
    parser.add_argument("--max-sentences", type=int, default=None,
                        help="first N training sentences as the pool (a smoke run)")
    parser.add_argument("--max-test", type=int, default=None,
                        help="first N test sentences (a smoke run)")
    parser.add_argument("--n-jobs", type=int, default=2, help="threads of the fits")
    parser.add_argument("--full-pool", action="store_true",
                        help="(re)compute the full-pool F1 of both taggers")
    parser.add_argument("--report", action="store_true",
                        help="only re-render the report from the stored seeds")
    parser.add_argument("--fresh", action="store_true",
                        help="drop the section's stored seeds and full-pool F1 first")
    add_name_argument(parser, SCRIPT)
    args = parser.parse_args(argv)
    if any(b <= 0 or b > 1 for b in args.budgets) or args.budgets != sorted(args.budgets):
        parser.error("--budgets: increasing fractions in (0, 1]")
    if not (args.seeds or args.full_pool or args.report):
        parser.error("nothing to do: give --seeds, --full-pool or --report")
    return args


def main(argv=None):
    args = parse_args(argv)
    section = section_key(SCRIPT, args.name)
    stored = {} if args.fresh else stored_section(section)
    if args.report:
        if not stored:
            sys.exit(f"no section {section!r} in benchmarks/results/{SCRIPT}.json")
        report(SCRIPT, section, stored, plot_path(SCRIPT, section))
        return 0
    data = load(args.max_sentences, args.max_test)
    config = settings(args, data)
    if stored and stored.get("settings") != config:
        sys.exit(f"section {section!r} was run with other settings "
                 f"({stored.get('settings')}); use --name or --fresh")
    strategies = list(args.strategies)
    if "gp_partial" in strategies and args.seeds and not partial_supported():
        print("fit does not accept None labels yet: gp_partial skipped", flush=True)
        strategies.remove("gp_partial")
    full = stored.get("full_pool")
    if full is None or args.full_pool:
        full = full_pool(data, args.n_jobs, args.c2)
    runs = {}
    save(section, config, full, runs, args.fresh)  # the full-pool F1 first
    for seed in args.seeds:
        for strategy in strategies:
            curve = run_strategy(strategy, data, seed, args)
            curve["provenance"] = provenance()
            runs.setdefault(str(seed), {})[strategy] = curve
            save(section, config, full, runs)
    if RUN.get("dirty"):
        print("note: the working tree had uncommitted changes (see the provenance)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
