"""Model files of the command line: a dict of the fitted pipeline and its
metadata written by :func:`skgpstruct.save` (no pickles: a model file from
someone else is safe to open), and the version rule applied when one is
loaded.

A model file holds a dict with the keys

* ``MODEL_KEY`` (``"skgpstruct_model"``): the layout of the dict, an int
  (:data:`FILE_FORMAT`);
* ``"version"``: ``skgpstruct.__version__`` of the package that wrote it;
* ``"pipeline"``: the fitted :class:`~sklearn.pipeline.Pipeline`
  (features, then the tagger);
* ``"tagger"`` (``"crf"`` / ``"gp"``), ``"format"`` (``"crfpp"`` /
  ``"conllu"``), ``"encoding"``, ``"template"`` (the template's text, or
  None for the default :class:`~skgpstruct.features.WordFeatures`),
  ``"classes"`` (the labels, as str), ``"n_columns"`` (input columns per
  token, the label excluded), ``"conllu_tag"`` and ``"conllu_columns"``
  (CoNLL-U only), ``"unknown_label"`` (``train --unknown-label``'s token,
  or None), ``"command"`` (the training command line) and
  ``"created"`` (ISO 8601 time, UTC).

**Version rule**: a model is read only by a package whose ``major.minor``
version equals that of the package that wrote it (``0.1.0`` reads models of
``0.1.3`` and of ``0.1.0.dev0``, not those of ``0.2.0``), because the fitted
estimators' attributes may change between minor versions. The pickle-based
files of earlier versions are refused with a message that says to retrain.
"""

import os
from datetime import datetime, timezone

from .._model_files import _major_minor
from ._common import CLIError, relay_warnings

__all__ = ["FILE_FORMAT", "MODEL_KEY", "load_model", "major_minor", "save_model"]

MODEL_KEY = "skgpstruct_model"
FILE_FORMAT = 1


def major_minor(version):
    """``(major, minor)`` of a version string, or None if it has none.

    Parameters
    ----------
    version : str

    Returns
    -------
    major_minor : tuple of int or None

    Examples
    --------
    >>> major_minor("0.1.0.dev0"), major_minor("12.3"), major_minor("x")
    ((0, 1), (12, 3), None)
    """
    return _major_minor(version)


def save_model(path, pipeline, **metadata):
    """Write a fitted pipeline and its metadata as a model file.

    Parameters
    ----------
    path : str or path-like
        The model file (overwritten).
    pipeline : sklearn.pipeline.Pipeline
        Fitted features and tagger.
    **metadata
        The other keys of the model dict (module docstring); ``version``,
        ``created`` and the format key are added here.

    Returns
    -------
    model : dict
        What was written.
    """
    from .. import __version__, save

    model = {
        MODEL_KEY: FILE_FORMAT,
        "version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **metadata,
        "pipeline": pipeline,
    }
    try:
        save(model, path)
    except ValueError as exc:  # ModelFileError: nothing safe to write
        raise CLIError(str(exc)) from None
    return model


def check_model_path(path):
    """Refuse a model path that :func:`save_model` could not write.

    ``skgpstruct train`` calls it before the fit, so that a typo in the path
    does not cost a fit.

    Parameters
    ----------
    path : str or path-like
        The model file to write.

    Raises
    ------
    CLIError
        If ``path`` is a directory, its directory does not exist, or the file
        (or, for a new file, its directory) is not writable.
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        raise CLIError(f"{name} is a directory; MODEL is the model file to write.")
    parent = os.path.dirname(name) or os.curdir
    if not os.path.isdir(parent):
        raise CLIError(f"{name}: no such directory {parent!r}.")
    if not os.access(name if os.path.exists(name) else parent, os.W_OK):
        raise CLIError(f"{name}: permission denied (cannot write the model there).")


def load_model(path):
    """Read a model file written by :func:`save_model`, checking its version.

    Parameters
    ----------
    path : str or path-like
        The model file.

    Returns
    -------
    model : dict
        The model dict (module docstring).

    Raises
    ------
    CLIError
        If the file cannot be read as a model, is no skgpstruct model, or was
        written by a package of another ``major.minor`` version (module
        docstring).
    """
    from .. import __version__, load

    name = os.fspath(path)
    if os.path.isdir(path):
        raise CLIError(f"{name} is a directory, not a model file.")
    if not os.path.isfile(path):
        raise CLIError(f"{name}: no such model file.")
    try:
        with relay_warnings("tag"):
            model = load(path)
    except ValueError as exc:  # ModelFileError: refused, nothing was run
        raise CLIError(f"{exc} To make a model file: 'skgpstruct train'.") from None
    if not isinstance(model, dict) or MODEL_KEY not in model:
        raise CLIError(
            f"{name} is a skgpstruct model file but not a command-line one (no "
            f"{MODEL_KEY!r} header); train one with 'skgpstruct train'."
        )
    written = model.get("version")
    if major_minor(written) is None or major_minor(written) != major_minor(__version__):
        raise CLIError(
            f"{name} was written by skgpstruct {written}, this is skgpstruct "
            f"{__version__}: a model is read only by the same major.minor "
            "version; retrain it with this version."
        )
    if model[MODEL_KEY] != FILE_FORMAT or "pipeline" not in model:
        raise CLIError(
            f"{name}: model file layout {model[MODEL_KEY]!r} is not the one this "
            f"version reads ({FILE_FORMAT}); retrain it with this version."
        )
    return model
