"""``skgpstruct train``: read labelled sentences, featurise, fit, save."""

import contextlib
import os
import sys

from .._input.text import _FileDecodeError
from ..features._crfpp import _MACRO
from ._common import CLIError, input_path, relay_warnings
from ._constraints import mark_unknown
from ._model import check_model_path, save_model

__all__ = ["CONLLU_TAGS", "build_pipeline", "load_training_data", "train"]

CONLLU_TAGS = ("upos", "xpos", "feats", "upos_feats")


def load_training_data(path, fmt="crfpp", *, encoding="utf-8", conllu_tag="upos",
                       conllu_columns=("form",), unknown_label=None):
    """Labelled sentences of a CRF++ column file or a CoNLL-U file.

    Parameters
    ----------
    path : str or path-like
        The file, or ``"-"`` for stdin.
    fmt : {"crfpp", "conllu"}, default="crfpp"
        CRF++ columns (:func:`skgpstruct.datasets.load_crfpp`: the last
        column is the label) or CoNLL-U
        (:func:`skgpstruct.datasets.load_conllu`).
    encoding : str, default="utf-8"
        Text encoding of the file.
    conllu_tag : str, default="upos"
        The CoNLL-U label (``tag`` of :func:`~skgpstruct.datasets.load_conllu`).
    conllu_columns : sequence of str, default=("form",)
        The CoNLL-U fields that are the token's columns.
    unknown_label : str or None, default=None
        A label value that means "unknown": such labels are returned as
        None (partial labels). For CoNLL-U, the label as read (with
        ``conllu_tag="upos_feats"`` the joint tag). None: every label is
        known.

    Returns
    -------
    X_columns : list of list of tuple of str
        The columns of each token (the label excluded).
    y : list of list of str or None
        The labels (None: unknown).
    """
    from ..datasets import load_conllu, load_crfpp

    if fmt not in ("crfpp", "conllu"):
        raise ValueError(f"unknown format {fmt!r}; expected 'crfpp' or 'conllu'.")
    with input_path(path) as fname, _encoding_hint():
        if fmt == "crfpp":
            X, y = load_crfpp(fname, encoding=encoding)
        else:
            X, y = load_conllu(fname, tag=conllu_tag, columns=tuple(conllu_columns),
                               encoding=encoding)
    return X, mark_unknown(y, unknown_label)[0]


@contextlib.contextmanager
def _encoding_hint():
    """The loaders' undecodable-bytes errors, with the command line's hint
    (``--encoding``, not the Python argument ``encoding=``)."""
    try:
        yield
    except _FileDecodeError as exc:
        raise CLIError(f"{exc.detail}; pass the file's encoding with --encoding.") \
            from None


def _check_template_columns(template_path, template_text, n_columns, train_path):
    """Refuse a template that reads a column the training file lacks, naming
    the template's line (the features would fail later, naming a token)."""
    for lineno, line in enumerate(template_text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.startswith("U"):
            continue
        for m in _MACRO.finditer(line):
            col = int(m.group(2))
            if col >= n_columns:
                raise CLIError(
                    f"{os.fspath(template_path)}, line {lineno} ({line!r}) reads "
                    f"column {col}, but the tokens of {os.fspath(train_path)} have "
                    f"{n_columns} column(s) besides the label (numbered from 0)."
                )


def build_pipeline(template=None, tagger="crf", *, c1=None, c2=None, max_iter=None,
                   n_jobs=None, random_state=None, verbose=0):
    """The unfitted pipeline that ``skgpstruct train`` fits.

    Parameters
    ----------
    template : str or None, default=None
        Text of a CRF++ template (:class:`~skgpstruct.features.CRFppTemplate`),
        or None for :class:`~skgpstruct.features.WordFeatures` on column 0.
    tagger : {"crf", "gp"}, default="crf"
        :class:`~skgpstruct.RandomizedCRFTagger` or
        :class:`~skgpstruct.GPStructTagger`.
    c1, c2 : float or None, default=None
        L1 and L2 penalties of the CRF, as CRFsuite's (its defaults if None);
        not for ``"gp"``.
    max_iter, n_jobs, random_state, verbose : default=None, None, None, 0
        The taggers' parameters of these names (their defaults if None).

    Returns
    -------
    pipeline : sklearn.pipeline.Pipeline
        Steps ``"features"`` and ``"tagger"``.

    Examples
    --------
    >>> build_pipeline(tagger="crf", c2=1.0, max_iter=5)
    Pipeline(steps=[('features', WordFeatures()),
                    ('tagger', RandomizedCRFTagger(c2=1.0, max_iter=5))])
    """
    from sklearn.pipeline import Pipeline

    from .. import GPStructTagger, RandomizedCRFTagger
    from ..features import CRFppTemplate, WordFeatures

    params = {"n_jobs": n_jobs, "random_state": random_state, "verbose": verbose}
    if max_iter is not None:
        params["max_iter"] = max_iter
    if tagger == "crf":
        for name, value in (("c1", c1), ("c2", c2)):
            if value is not None:
                params[name] = value
        estimator = RandomizedCRFTagger(**params)
    elif tagger == "gp":
        if c1 is not None or c2 is not None:
            raise ValueError("c1 and c2 are parameters of the crf tagger only.")
        estimator = GPStructTagger(**params)
    else:
        raise ValueError(f"unknown tagger {tagger!r}; expected 'crf' or 'gp'.")
    features = WordFeatures() if template is None else CRFppTemplate(template)
    return Pipeline([("features", features), ("tagger", estimator)])


def _check_unknown(y, unknown_label, train_path, err):
    """The number of unknown labels; a warning on ``err`` when there is none,
    an error when every label is unknown."""
    if unknown_label is None:
        return 0
    n_unknown = sum(label is None for labels in y for label in labels)
    source = "<stdin>" if train_path == "-" else os.fspath(train_path)
    if n_unknown == sum(len(labels) for labels in y):
        raise CLIError(f"{source}: every label is --unknown-label {unknown_label!r}; "
                       "a tagger needs some known labels.")
    if not n_unknown:
        print(f"skgpstruct train: warning: no label of {source} is --unknown-label "
              f"{unknown_label!r}; every label is known.", file=err)
    return n_unknown


def train(train_path, model_path, *, tagger="crf", template=None, fmt="crfpp",
          c1=None, c2=None, max_iter=None, n_jobs=None, random_state=None, verbose=0,
          encoding="utf-8", conllu_tag="upos", conllu_columns=("form",),
          unknown_label=None, command=None, err=None):
    """Fit a tagger on a labelled file and save it (``skgpstruct train``).

    Parameters
    ----------
    train_path : str or path-like
        Training data, ``"-"`` for stdin (see :func:`load_training_data`).
    model_path : str or path-like
        The model file to write (:func:`skgpstruct._cli.save_model`).
    tagger : {"crf", "gp"}, default="crf"
        See :func:`build_pipeline`.
    template : str or path-like or None, default=None
        A CRF++ template file; None for the default word features.
    fmt : {"crfpp", "conllu"}, default="crfpp"
        Format of ``train_path``.
    c1, c2, max_iter, n_jobs, random_state, verbose
        See :func:`build_pipeline`.
    encoding : str, default="utf-8"
        Encoding of the data and the template.
    conllu_tag, conllu_columns, unknown_label
        See :func:`load_training_data`; a label equal to ``unknown_label``
        is unknown (the tagger fits the others).
    command : str, default=None
        The command line, stored in the model.
    err : file-like, default=None
        Where the warnings, and with ``verbose`` a summary, go
        (``sys.stderr`` if None).

    Returns
    -------
    model : dict
        The saved model dict.
    """
    from ..features import CRFppTemplate

    err = sys.stderr if err is None else err
    check_model_path(model_path)
    template_text = None
    if template is not None:
        if not os.path.isfile(template):
            raise CLIError(f"{os.fspath(template)}: no such template file.")
        with _encoding_hint():
            template_text = CRFppTemplate.from_file(template, encoding=encoding).template
    X, y = load_training_data(train_path, fmt, encoding=encoding, conllu_tag=conllu_tag,
                              conllu_columns=conllu_columns, unknown_label=unknown_label)
    n_unknown = _check_unknown(y, unknown_label, train_path, err)
    if template_text is not None:
        _check_template_columns(template, template_text, len(X[0][0]),
                                "<stdin>" if train_path == "-" else train_path)
    pipe = build_pipeline(template_text, tagger, c1=c1, c2=c2, max_iter=max_iter,
                          n_jobs=n_jobs, random_state=random_state, verbose=verbose)
    with relay_warnings("train", err):
        pipe.fit(X, y)
    classes = [str(c) for c in pipe[-1].classes_]
    model = save_model(
        model_path, pipe, tagger=tagger, format=fmt, encoding=encoding,
        template=template_text, classes=classes, n_columns=len(X[0][0]),
        conllu_tag=conllu_tag if fmt == "conllu" else None,
        conllu_columns=list(conllu_columns) if fmt == "conllu" else None,
        unknown_label=unknown_label, command=command,
    )
    if not verbose:
        return model
    n_tokens = sum(len(s) for s in y)
    unknown = f" ({n_unknown} with an unknown label)" if unknown_label is not None else ""
    print(f"skgpstruct train: {len(y)} sentences, {n_tokens} tokens{unknown}, "
          f"{len(classes)} labels, {pipe[-1].n_features_in_} features; "
          f"model written to {os.fspath(model_path)}", file=err)
    return model
