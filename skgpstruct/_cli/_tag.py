"""``skgpstruct tag``: label a file with a saved model, in crf_test's layout.

For every sentence, each token line's input columns are printed (TAB
separated), then the predicted label; a blank line ends the sentence. With
``verbose >= 1`` a ``# <p>`` line comes first, ``p`` the probability of the
printed path, and each label is followed by ``/<marginal>``; ``verbose >= 2``
appends ``<label>/<marginal>`` for every label of ``classes_``. With
``nbest = N`` the ``N`` best paths are printed, each after a ``# <k> <p>``
line (``k`` from 0), as CRF++'s ``crf_test -n`` does. Probabilities are
printed as C++ streams print a double (``%g``: 6 significant digits).

The path probabilities are the tagger's ``predict_path_proba`` (for a
:class:`~skgpstruct.GPStructTagger` the posterior predictive probability,
averaged over the same posterior draws as its marginals), the marginals
``predict_marginals``: for either tagger they describe one distribution
(summing the probabilities of the paths with a label at a token gives its
marginal), except a RandomizedCRFTagger with ``beam_size``, whose marginals
are those of the chain restricted to the beam and its path probabilities the
full chain's. The N best paths are the tagger's ``predict_nbest``: searched
under its point potentials (the CRF's, or the GP tagger's posterior-mean
potentials), then scored as by ``predict_path_proba``, most probable first.

With ``allowed`` (``--allowed FILE``, :mod:`skgpstruct._cli._constraints`)
every one of these is conditional on the path lying in the allowed set: the
prediction and the N best paths are allowed paths, the probabilities and
marginals those of the allowed paths, renormalised.
"""

import contextlib
import sys

import numpy as np

from ._common import (CLIError, check_column_counts, input_path, read_columns, read_input,
                      relay_warnings)
from ._constraints import allowed_errors, read_allowed
from ._model import load_model

__all__ = ["predict_paths", "read_tag_input", "tag"]


def read_tag_input(path, model, encoding=None):
    """Sentences to label, in the format the model was trained on.

    CRF++ columns: every token line must have the model's ``n_columns``
    input columns (no gold label) or one more (the gold label, last), the
    same number throughout the file. CoNLL-U: each word's columns are the
    model's ``conllu_columns`` followed by its gold ``conllu_tag``.

    Parameters
    ----------
    path : str or path-like
        The file, or ``"-"`` for stdin.
    model : dict
        The model (:func:`~skgpstruct._cli.load_model`).
    encoding : str, default=None
        Text encoding (the model's if None).

    Returns
    -------
    printed : list of list of tuple of str
        The columns printed before the prediction, per sentence and token.
    X_columns : list of list of tuple of str
        The model's input columns.
    has_gold : bool
        Whether the last printed column is a gold label.
    """
    encoding = model.get("encoding", "utf-8") if encoding is None else encoding
    if model.get("format") == "conllu":
        from ..datasets import load_conllu

        with input_path(path) as fname:
            X, y = load_conllu(fname, tag=model["conllu_tag"],
                               columns=tuple(model["conllu_columns"]), encoding=encoding)
        printed = [[x + (g,) for x, g in zip(xs, ys)] for xs, ys in zip(X, y)]
        return printed, X, True
    source = "<stdin>" if path == "-" else str(path)
    sentences = read_columns(read_input(path, encoding), source)
    n = model["n_columns"]
    first_line, first = sentences[0][0]
    if len(first) not in (n, n + 1):
        raise CLIError(
            f"{source}, line {first_line}: {len(first)} column(s), but the model "
            f"reads {n} input column(s): a token line needs {n} (no gold label) or "
            f"{n + 1} (gold label last)."
        )
    check_column_counts(sentences, source)
    printed = [[cols for _, cols in s] for s in sentences]
    X = [[cols[:n] for cols in s] for s in printed]
    return printed, X, len(first) == n + 1


def predict_paths(model, X_columns, verbose=0, nbest=0, allowed=None):
    """Predicted paths, their probabilities and the marginals of sentences.

    Parameters
    ----------
    model : dict
        The model (:func:`~skgpstruct._cli.load_model`).
    X_columns : list of list of tuple of str
        The input columns of each sentence.
    verbose : {0, 1, 2}, default=0
        From 1 on, the probability of each path (the tagger's
        ``predict_path_proba``: for GPStructTagger averaged over its
        posterior draws) and the marginals.
    nbest : int, default=0
        If positive, the ``nbest`` best paths of each sentence (the tagger's
        ``predict_nbest``) instead of the tagger's prediction, each with its
        probability, most probable first.
    allowed : list, default=None
        The taggers' constraint ``allowed=`` (one entry per sentence,
        :func:`~skgpstruct._cli._constraints.read_allowed`): paths,
        probabilities and marginals are conditional on it.

    Returns
    -------
    results : list of dict
        Per sentence: ``"paths"`` (list of int64 arrays, label indices into
        ``classes``), ``"probs"`` (list of float, or None with ``verbose=0``
        and no ``nbest``) and ``"marginals"`` ((T, n_classes) array, or None
        with ``verbose=0``).
    classes : ndarray
        The labels.

    Raises
    ------
    ValueError
        From the tagger, for a label of ``allowed`` it does not know (naming
        the sequence and token, from 0).
    """
    pipe = model["pipeline"]
    tagger = pipe[-1]
    classes = np.asarray(tagger.classes_)
    needs = [name for name, wanted in (("predict_path_proba", verbose >= 1),
                                       ("predict_nbest", nbest > 0)) if wanted]
    if any(not hasattr(tagger, name) for name in needs):
        raise CLIError(
            f"{type(tagger).__name__} gives no path probabilities: -v1, -v2 and -n "
            "need a skgpstruct tagger."
        )
    kw = {} if allowed is None else {"allowed": allowed}
    index = {c: k for k, c in enumerate(classes.tolist())}

    def encode(labels):
        return np.array([index[c] for c in labels.tolist()], dtype=np.int64)

    with relay_warnings("tag"):
        Xf = pipe[:-1].transform(X_columns)
        marginals = tagger.predict_marginals(Xf, **kw) if verbose >= 1 else None
        if nbest:
            best = tagger.predict_nbest(Xf, nbest, **kw)
            paths = [[encode(labels) for labels, _ in seq] for seq in best]
            probs = [[p for _, p in seq] for seq in best]
        else:
            predicted = tagger.predict(Xf, **kw)
            paths = [[encode(p)] for p in predicted]
            probs = None
            if verbose >= 1:
                flat = tagger.predict_path_proba(Xf, predicted, **kw)
                probs = [[float(p)] for p in flat]
    return [{"paths": paths[k],
             "probs": None if probs is None else probs[k],
             "marginals": None if marginals is None else marginals[k]}
            for k in range(len(X_columns))], classes


def _write_path(out, printed, path, classes, marginals, verbose):
    for i, cols in enumerate(printed):
        k = path[i]
        line = "\t".join(cols) + "\t" + classes[k]
        if verbose >= 1:
            line += f"/{float(marginals[i, k]):g}"
        if verbose >= 2:
            line += "".join(f"\t{c}/{float(p):g}" for c, p in zip(classes, marginals[i]))
        out.write(line + "\n")
    out.write("\n")


def tag(model_path, path, *, verbose=0, nbest=0, encoding=None, allowed=None,
        out=None):
    """Label a file with a saved model and print crf_test's output.

    Parameters
    ----------
    model_path : str or path-like
        The model file.
    path : str or path-like
        The file to label, ``"-"`` for stdin (:func:`read_tag_input`).
    verbose : {0, 1, 2}, default=0
        crf_test's ``-v`` (module docstring).
    nbest : int, default=0
        crf_test's ``-n``: print the ``nbest`` best paths (0: the prediction).
    encoding : str, default=None
        Encoding of the input and of ``allowed`` (the model's if None).
    allowed : str or path-like, default=None
        A file of the labels each token may take (``--allowed``,
        :func:`~skgpstruct._cli._constraints.read_allowed`): one line per
        token of the input, a blank line between sentences, the labels
        separated by tabs, ``*`` for any label. The output is conditional
        on it.
    out : file-like, default=None
        Where to print (``sys.stdout`` if None).

    Returns
    -------
    n_sentences : int
        Number of sentences labelled.
    """
    out = sys.stdout if out is None else out
    if allowed is not None and allowed == "-" == path:
        raise CLIError("FILE and --allowed cannot both be '-' (stdin).")
    model = load_model(model_path)
    printed, X, _ = read_tag_input(path, model, encoding)
    constraint, errors = None, contextlib.nullcontext()
    if allowed is not None:
        constraint, lines = read_allowed(
            allowed, [len(x) for x in X],
            encoding=model.get("encoding", "utf-8") if encoding is None else encoding,
            input_name="<stdin>" if path == "-" else str(path))
        errors = allowed_errors(lines, allowed,
                                [str(c) for c in model["pipeline"][-1].classes_])
    with errors:
        results, classes = predict_paths(model, X, verbose, nbest, constraint)
    classes = [str(c) for c in classes.tolist()]
    for cols, res in zip(printed, results):
        if nbest:
            for k, (path, p) in enumerate(zip(res["paths"], res["probs"])):
                out.write(f"# {k} {p:g}\n")
                _write_path(out, cols, path, classes, res["marginals"], verbose)
            continue
        if verbose >= 1:
            out.write(f"# {res['probs'][0]:g}\n")
        _write_path(out, cols, res["paths"][0], classes, res["marginals"], verbose)
    return len(printed)
