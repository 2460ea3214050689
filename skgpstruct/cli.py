"""Command line: ``skgpstruct train``, ``tag``, ``eval`` and ``demo``.

The console script ``skgpstruct`` (and ``python -m skgpstruct``) runs
:func:`main`:

* ``skgpstruct train [options] TRAIN MODEL`` fits a tagger on a CRF++ column
  file (the last column is the label) or a CoNLL-U file, with the features
  of a CRF++ template (``--template``) or, without one, the word-form
  features of :class:`~skgpstruct.features.WordFeatures` (column 0), and
  saves the fitted pipeline and its metadata with :func:`skgpstruct.save`
  (no pickles), as CRF++'s ``crf_learn``; ``--unknown-label TOKEN`` makes a
  label equal to TOKEN unknown (partial labels);
* ``skgpstruct tag -m MODEL [-v 0|1|2] [-n N] [--allowed FILE] FILE`` prints
  the labelled file in the layout of CRF++'s ``crf_test``; ``--allowed``
  restricts the labels of chosen tokens;
* ``skgpstruct eval GOLD [PRED]`` prints the token accuracy, per-label
  precision / recall / F1 and conlleval's chunk scores;
* ``skgpstruct demo`` fits the taggers on synthetic data and compares them.

Exit status: 0 on success, 2 for a usage error (argparse), 1 for bad data
or a bad model file; errors are one line on stderr. A model file is read
only by a package of the same ``major.minor`` version as the one that wrote
it (see :mod:`skgpstruct._cli._model`); model files hold no pickles, so a
file from someone else is safe to open.

The demo is the package's main job on built-in data: it draws sequences from
a random linear-chain model (:func:`skgpstruct.datasets.make_chain_data`),
trains linear-chain CRFs on them (:class:`~skgpstruct.RandomizedCRFTagger`,
exact and with randomized dynamic programming) and the Bayesian
:class:`~skgpstruct.GPStructTagger`, and prints their token error next to a
per-token logistic regression, which sees the same features but no
transitions.
"""

import argparse
import shlex
import sys
import time
import warnings

import numpy as np

__all__ = ["main", "demo"]


def demo(n_sequences=400, n_classes=5, n_features=20, random_state=0, out=None):
    """Fit linear-chain CRFs on synthetic data and compare them with a per-token model.

    Parameters
    ----------
    n_sequences : int, default=400
        Number of sequences drawn (half train, half test).
    n_classes : int, default=5
        Number of labels.
    n_features : int, default=20
        Number of token features.
    random_state : int, default=0
        Seed of the data and of the taggers.
    out : file-like, default=None
        Where to print (``sys.stdout`` if None).

    Returns
    -------
    errors : dict
        Token error rate (percent) of each model, by name.

    Raises
    ------
    ValueError
        If ``n_sequences < 2`` (one to train, one to test), or for
        :func:`~skgpstruct.datasets.make_chain_data`'s bad parameters.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    from skgpstruct import GPStructTagger, RandomizedCRFTagger
    from skgpstruct.datasets import make_chain_data
    from skgpstruct.metrics import token_error_rate

    out = sys.stdout if out is None else out
    if n_sequences < 2:
        raise ValueError(f"n_sequences must be >= 2 (half train, half test), got "
                         f"{n_sequences}.")
    X, y = make_chain_data(
        n_sequences=n_sequences,
        n_classes=n_classes,
        n_features=n_features,
        random_state=random_state,
    )
    n_train = n_sequences // 2
    X_tr, y_tr, X_te, y_te = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    n_tokens = sum(len(s) for s in y_tr)
    print(
        f"make_chain_data: {n_train} training / {n_sequences - n_train} test "
        f"sequences, {n_tokens} training tokens, {n_classes} labels, "
        f"{n_features} features",
        file=out,
    )

    # Per-token baseline: same features, no transitions.
    t0 = time.perf_counter()
    logreg = LogisticRegression(max_iter=1000).fit(
        np.concatenate(X_tr), np.concatenate(y_tr)
    )
    t_lr = time.perf_counter() - t0
    pred_lr = [logreg.predict(x) for x in X_te]

    rows = [("per-token logistic regression", pred_lr, t_lr)]
    crf = RandomizedCRFTagger(c2=0.1, random_state=random_state)
    t0 = time.perf_counter()
    crf.fit(X_tr, y_tr)
    t_crf = time.perf_counter() - t0
    rows.append(("linear-chain CRF (exact, L-BFGS, Viterbi)", crf.predict(X_te), t_crf))
    # Marginal decoding with the exact chain kernels on the fitted potentials.
    pred_marg = [
        crf.classes_[m.argmax(axis=1)] for m in crf.predict_marginals(X_te)
    ]
    rows.append(("linear-chain CRF (max marginals)", pred_marg, float("nan")))
    k = max(1, n_classes // 2)
    rdp_crf = RandomizedCRFTagger(
        n_top=k, n_sampled=1, c2=0.1, max_iter=30, random_state=random_state
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rdp_crf.fit(X_tr, y_tr)
    rows.append(
        (f"randomized-DP CRF ({k} top + 1 sampled of {n_classes}, Adam)",
         rdp_crf.predict(X_te), time.perf_counter() - t0)
    )
    gp = GPStructTagger(n_inducing=30, tol=1e-4, random_state=random_state)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(X_tr, y_tr)
    rows.append(
        ("GPStructTagger (30 inducing points, L-BFGS)", gp.predict(X_te),
         time.perf_counter() - t0)
    )
    errors = {}
    print(f"{'model':<52}{'token error %':>14}{'fit s':>8}", file=out)
    for name, pred, seconds in rows:
        errors[name] = 100.0 * token_error_rate(y_te, pred)
        fit_s = "" if seconds != seconds else f"{seconds:.2f}"
        print(f"{name:<52}{errors[name]:>14.2f}{fit_s:>8}", file=out)
    return errors


_EPILOG = """\
examples:
  skgpstruct train --template template train.data model.skg
  skgpstruct train --format conllu --tagger gp train.conllu model.skg
  skgpstruct train --unknown-label '?' partial.data model.skg
  skgpstruct tag -m model.skg test.data > result.txt
  skgpstruct tag -m model.skg -v2 - < test.data
  skgpstruct tag -m model.skg -n 5 test.data
  skgpstruct tag -m model.skg --allowed allowed.txt test.data
  skgpstruct eval result.txt
  skgpstruct eval test.data predictions.txt

exit status: 0 on success, 2 for a usage error, 1 for bad data or a bad
model file (one-line message on stderr). A model is read only by skgpstruct
of the same major.minor version as the one that wrote it.
"""

_TRAIN_EPILOG = """\
TRAIN is a CRF++ column file (one token a line, columns separated by spaces
or tabs, the label last, a blank line between sentences) or, with
--format conllu, a CoNLL-U file; '-' reads stdin. Without --template the
features are WordFeatures of column 0 (the word form). With --unknown-label
TOKEN a label equal to TOKEN is unknown: the tagger fits the known labels
and sums over the unknown ones (partial annotation); by default every label
is known.

examples:
  skgpstruct train --template template train.data model.skg
  skgpstruct train --c2 1.0 --max-iter 200 train.data model.skg
  skgpstruct train --format conllu --conllu-tag upos_feats train.conllu model.skg
  skgpstruct train --unknown-label '?' --template template partial.data model.skg
"""

_TAG_EPILOG = """\
Output (as CRF++'s crf_test): each token line's columns, TAB, the predicted
label; a blank line after each sentence. -v1 prints '# <p>' before each
sentence (p: probability of the printed path) and label/<marginal>; -v2 adds
<label>/<marginal> for every label. -n N prints the N best paths, each after
'# <k> <p>'. A token line may hold the model's input columns only, or one
more (the gold label, printed too, so that 'skgpstruct eval' can score it).

--allowed FILE constrains the labels: FILE has one line per token of the
input and a blank line between sentences, as the input (same encoding); a
line holds the labels the token may take, separated by tabs (one label
forces it), or '*' for any label. The prediction, the N best paths (-n),
the path probabilities and the marginals are then those of the allowed
paths, renormalised. A label the model does not know is an error.

examples:
  skgpstruct tag -m model.skg test.data
  cat test.data | skgpstruct tag -m model.skg -v1 -
  skgpstruct tag -m model.skg -n 3 test.data
  skgpstruct tag -m model.skg --allowed allowed.txt -v1 test.data
"""

_EVAL_EPILOG = """\
With one file, its last two columns are the gold and the predicted label
(the output of 'skgpstruct tag' on labelled data, as conlleval reads it);
with two, the last column of each, and the same tokens in both. Output of
tag -v1 / -v2 is read too (its label/<p> prediction column; the '# <p>'
lines skipped); n-best output (-n) is refused.

examples:
  skgpstruct tag -m model.skg test.data | skgpstruct eval -
  skgpstruct eval test.data predictions.txt
"""


def _int_at_least(low):
    """An argparse type: an integer ``>= low``, with a message that says so."""
    def check(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value
    return check


_non_negative = _int_at_least(0)
_positive = _int_at_least(1)


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def build_parser(prog="skgpstruct"):
    """The argument parser of :func:`main`.

    Parameters
    ----------
    prog : str, default="skgpstruct"
        The program name shown in usage and errors.

    Returns
    -------
    parser : argparse.ArgumentParser
    """
    from . import __version__
    from ._cli._train import CONLLU_TAGS

    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=raw, epilog=_EPILOG,
        description="skgpstruct: sequence labelling with uncertainty and at scale "
                    "(a CRF++ / crfsuite-style command line).",
    )
    parser.add_argument("--version", action="version", version=f"skgpstruct {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="fit a tagger on a labelled file and save it",
                       formatter_class=raw, epilog=_TRAIN_EPILOG)
    p.add_argument("train", metavar="TRAIN", help="training data ('-': stdin)")
    p.add_argument("model", metavar="MODEL", help="model file to write")
    p.add_argument("--tagger", choices=("crf", "gp"), default="crf",
                   help="RandomizedCRFTagger (crf, default) or GPStructTagger (gp)")
    p.add_argument("--template", metavar="FILE",
                   help="CRF++ feature template (default: WordFeatures on column 0)")
    p.add_argument("--format", dest="fmt", choices=("crfpp", "conllu"), default="crfpp",
                   help="format of TRAIN (default: crfpp)")
    p.add_argument("--conllu-tag", choices=CONLLU_TAGS,
                   help="label of a CoNLL-U word (default: upos)")
    p.add_argument("--conllu-columns", metavar="NAMES",
                   help="comma-separated CoNLL-U fields that are the token's "
                        "columns (default: form)")
    p.add_argument("--c1", type=_non_negative_float, metavar="X",
                   help="L1 penalty of the crf tagger, as crfsuite's c1 (default: 0; "
                        "> 0 trains with OWL-QN)")
    p.add_argument("--c2", type=_non_negative_float, metavar="X",
                   help="L2 penalty of the crf tagger (default: its own, 0.1)")
    p.add_argument("--max-iter", type=_positive, metavar="N",
                   help="optimiser iterations (default: the tagger's)")
    p.add_argument("--n-jobs", type=int, metavar="N", help="joblib threads")
    p.add_argument("--random-state", type=int, default=0, metavar="N",
                   help="seed of the tagger's random draws (default: 0, so that "
                        "training twice gives the same model, as crf_learn does)")
    p.add_argument("--unknown-label", metavar="TOKEN",
                   help="a label value that means 'unknown' (partial labels: the "
                        "token's label is not used); default: none, every label "
                        "is known")
    p.add_argument("--encoding", default="utf-8", help="text encoding (default: utf-8)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="log the fit on stderr (-vv: every iteration)")

    p = sub.add_parser("tag", help="label a file with a saved model (crf_test output)",
                       formatter_class=raw, epilog=_TAG_EPILOG)
    p.add_argument("input", metavar="FILE", help="file to label ('-': stdin)")
    p.add_argument("-m", "--model", required=True, metavar="MODEL", help="model file")
    p.add_argument("-v", "--verbose", type=int, choices=(0, 1, 2), default=0,
                   metavar="{0,1,2}", help="1: path and label probabilities; "
                   "2: also every label's marginal")
    p.add_argument("-n", "--nbest", type=_non_negative, default=0, metavar="N",
                   help="print the N best paths of each sentence")
    p.add_argument("--allowed", metavar="FILE",
                   help="labels each token may take: one line per token of the input "
                        "(labels separated by tabs, '*': any), a blank line between "
                        "sentences; the output is conditional on them")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--encoding", help="text encoding (default: the model's)")

    p = sub.add_parser("eval", help="accuracy, per-label and chunk (conlleval) scores",
                       formatter_class=raw, epilog=_EVAL_EPILOG)
    p.add_argument("gold", metavar="GOLD", help="labelled file ('-': stdin)")
    p.add_argument("pred", metavar="PRED", nargs="?",
                   help="predictions (default: the last two columns of GOLD)")
    p.add_argument("--encoding", default="utf-8", help="text encoding (default: utf-8)")

    p = sub.add_parser("demo", help="fit on built-in synthetic data and report")
    p.add_argument("--n-sequences", type=_int_at_least(2), default=400, metavar="N",
                   help="sequences drawn, half to train and half to test (default: 400)")
    p.add_argument("--n-classes", type=_int_at_least(2), default=5, metavar="N",
                   help="labels (default: 5)")
    p.add_argument("--n-features", type=_positive, default=20, metavar="N",
                   help="token features (default: 20)")
    p.add_argument("--random-state", type=int, default=0, metavar="N",
                   help="seed of the data and the taggers (default: 0)")
    return parser


def _run(args, parser, argv):
    from ._cli import evaluate, tag, train

    if args.command == "demo":
        demo(n_sequences=args.n_sequences, n_classes=args.n_classes,
             n_features=args.n_features, random_state=args.random_state)
    elif args.command == "train":
        if args.tagger == "gp" and (args.c1 is not None or args.c2 is not None):
            parser.error("--c1 and --c2 are options of --tagger crf only")
        if args.fmt != "conllu" and (args.conllu_tag or args.conllu_columns):
            print(f"{parser.prog} train: warning: --conllu-tag and --conllu-columns "
                  "apply to --format conllu only; ignored.", file=sys.stderr)
        columns = tuple(c.strip() for c in (args.conllu_columns or "form").split(",")
                        if c.strip())
        train(args.train, args.model, tagger=args.tagger, template=args.template,
              fmt=args.fmt, c1=args.c1, c2=args.c2, max_iter=args.max_iter,
              n_jobs=args.n_jobs,
              random_state=args.random_state, verbose=args.verbose,
              encoding=args.encoding, conllu_tag=args.conllu_tag or "upos",
              conllu_columns=columns, unknown_label=args.unknown_label,
              command=shlex.join([parser.prog.split()[-1], *argv]))
    elif args.command == "tag":
        if args.output is None:
            tag(args.model, args.input, verbose=args.verbose, nbest=args.nbest,
                encoding=args.encoding, allowed=args.allowed)
        else:
            import codecs
            import io

            codecs.lookup(args.encoding or "utf-8")  # a bad name: before any work
            # tag into memory first: the output file (which may be the input
            # file, or an earlier result) is only replaced once tagging has
            # succeeded
            buffer = io.StringIO()
            tag(args.model, args.input, verbose=args.verbose, nbest=args.nbest,
                encoding=args.encoding, allowed=args.allowed, out=buffer)
            with open(args.output, "w", encoding=args.encoding or "utf-8") as out:
                out.write(buffer.getvalue())
    elif args.command == "eval":
        evaluate(args.gold, args.pred, encoding=args.encoding)
    return 0


def _silence_stdout():
    """Point stdout at the null device, so that the interpreter's last flush
    of a closed pipe raises nothing (Python's documented recipe)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (tests)
        pass


def main(argv=None, prog="skgpstruct"):
    """Entry point of the ``skgpstruct`` console script and ``python -m skgpstruct``.

    Parameters
    ----------
    argv : list of str, default=None
        Command-line arguments (``sys.argv[1:]`` if None).
    prog : str, default="skgpstruct"
        The program name in messages.

    Returns
    -------
    status : int
        Process exit status: 0 on success (and for ``--help`` /
        ``--version``), 2 for a usage error, 1 for bad data or a bad model
        file, whose one-line message goes to stderr.
    """
    from ._cli import CLIError
    from ._cli._common import one_line
    from ._utils.memory import MemoryBudgetError

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    args = None
    try:
        args = parser.parse_args(argv)
        return _run(args, parser, argv)
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    except BrokenPipeError:  # e.g. `skgpstruct tag ... | head`: stop quietly
        _silence_stdout()
        return 1
    except (CLIError, ValueError, LookupError, OSError, MemoryBudgetError) as exc:
        command = getattr(args, "command", None)
        where = prog if command is None else f"{prog} {command}"
        print(f"{where}: error: {one_line(exc)}", file=sys.stderr)
        return 1
