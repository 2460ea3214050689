"""Reader of the GPstruct papers' featurised files (pygpstruct's ``<i>.x`` /
``<i>.y`` files): :func:`load_gpstruct`, with the strict checks of their
fields (:mod:`skgpstruct.datasets._loaders` holds the CRF++ reader and the
benchmark loader that uses both).
"""

import math
import os
import re
from numbers import Integral
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .._input.text import _COLUMN_SEP, _read_text, _split_lines

__all__ = ["load_gpstruct"]


# Number of features of the GPstruct papers' files, as pygpstruct hard-codes
# them (src/dataset_chain.py, ``n_features_x``). The largest feature index that
# occurs in the files is smaller (6435 for basenp, 29750 for chunking): the
# last columns are never active, so they change no linear kernel, but keeping
# them reproduces the papers' D exactly.
_PYGPSTRUCT_N_FEATURES = {"basenp": 6438, "chunking": 29764}


_GPSTRUCT_X_NAME = re.compile(r"^([0-9]+)\.x$")

# Fields of the featurised files. Indices: decimal integers of at most 15
# digits (exact in float64); labels: signed integers of at most 18 digits
# (int64); values: decimal numbers (no nan / inf spelled out).
_GP_INDEX = r"[0-9]{1,15}"
_GP_LABEL = r"[+-]?[0-9]{1,18}"
_GP_VALUE = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_GP_INDEX_RE = re.compile(_GP_INDEX)
_GP_LABEL_RE = re.compile(_GP_LABEL)
_GP_VALUE_RE = re.compile(_GP_VALUE)


def _whole_file_pattern(line):
    """A pattern matching a whole LF-separated text of ``line`` or blank lines."""
    body = rf"(?:[ \t]*{line}[ \t]*|[ \t]*)"
    return re.compile(rf"(?:{body}\n)*{body}")


_GP_FILE_RE = {
    "x": _whole_file_pattern(rf"{_GP_INDEX}[ \t]+{_GP_INDEX}[ \t]+{_GP_VALUE}"),
    "y": _whole_file_pattern(_GP_LABEL),
}
_GP_HINT = "the GPstruct files hold ASCII numbers only."


def _gp_lines(fname):
    """The (line number, fields) pairs of the non-blank lines of a file."""
    text = _read_text(fname, "ascii", _GP_HINT)
    out = []
    for lineno, line in enumerate(_split_lines(text), start=1):
        line = line.strip(" \t")
        if line:
            out.append((lineno, _COLUMN_SEP.split(line)))
    return out


def _gp_line_check(fname, lineno, fields, kind):
    """Raise a ValueError naming the line if its fields are malformed."""
    where = f"{os.fspath(fname)}, line {lineno}"
    if kind == "y":
        if len(fields) != 1:
            raise ValueError(
                f"{where}: {len(fields)} fields, expected 1 number per line "
                "(the label of one token)."
            )
        if not _GP_LABEL_RE.fullmatch(fields[0]):
            raise ValueError(
                f"{where}: label {fields[0]!r} is not an integer (of at most "
                "18 digits)."
            )
        return
    if len(fields) != 3:
        raise ValueError(
            f"{where}: {len(fields)} field(s), expected 3 numbers per line "
            "(token feature value)."
        )
    for what, field in zip(("token", "feature"), fields):
        if not _GP_INDEX_RE.fullmatch(field) or int(field) < 1:
            raise ValueError(
                f"{where}: {what} index {field!r} is not an integer >= 1 "
                "(indices are 1-based, of at most 15 digits)."
            )
    if not _GP_VALUE_RE.fullmatch(fields[2]) or not math.isfinite(float(fields[2])):
        raise ValueError(f"{where}: value {fields[2]!r} is not a finite number.")


def _read_numbers(fname, kind):
    """The rows of a ``.x`` (kind ``"x"``, (n, 3) float64) or ``.y`` file
    (kind ``"y"``, (n,) int64), blank lines skipped.

    A regular expression over the whole file and one NumPy conversion read a
    well-formed file; anything else is read line by line, so that the error
    names the first malformed line.
    """
    text = _read_text(fname, "ascii", _GP_HINT)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if _GP_FILE_RE[kind].fullmatch(text):
        if kind == "y":
            return np.array(text.split()).astype(np.int64)
        values = np.array(text.split(), dtype=np.float64).reshape(-1, 3)
        if np.all(values[:, :2] >= 1) and np.all(np.isfinite(values[:, 2])):
            return values
    rows = []
    for lineno, fields in _gp_lines(fname):
        _gp_line_check(fname, lineno, fields, kind)
        rows.append(fields)
    # Unreachable for a file the pattern refused; kept as the reference reader.
    if kind == "y":
        return np.array([f[0] for f in rows]).astype(np.int64)
    return np.array(rows, dtype=np.float64).reshape(-1, 3)


def _gp_line_number(fname, row):
    """1-based line number of data row ``row`` (0-based) of a file."""
    return _gp_lines(fname)[row][0]


def load_gpstruct(directory, n_sequences=None, *, n_features=None,
                  map_negative_labels=None):
    """Read the binary features of the GPstruct papers (pygpstruct's files).

    The directory holds ``<i>.x`` and ``<i>.y`` for i = 1..N (sentence i-1 of
    the corresponding CRF++ file). ``<i>.x`` has one line per active feature,
    ``token feature value`` (token and feature 1-based); ``<i>.y`` one integer
    label per token.

    Lenient on layout, strict on content:

    * accepted: fields separated by runs of spaces or tabs; LF, CRLF and
      lone-CR line ends; a UTF-8 byte-order mark; spaces and tabs at the
      start or end of a line; blank lines anywhere (ignored); a missing final
      line end; a ``.x`` file without lines (a sequence without active
      features: tokens without a line are rows of zeros); a ``(token,
      feature)`` pair given twice (its values are added);
    * refused with a :class:`ValueError` naming the file and the 1-based
      line: a ``.x`` line that is not three fields ``token feature value``
      with token and feature decimal integers >= 1 (at most 15 digits) and
      value a finite decimal number (``1``, ``1.0``, ``1e0``; not ``nan`` or
      ``inf``); a ``.y`` line that is not one decimal integer (``-1``, ``+2``;
      not ``1.0``); a token index beyond the labels of the ``.y`` file; a
      feature index beyond ``n_features``; a byte outside ASCII. A ``.y``
      file without a label is refused naming the file.

    Parameters
    ----------
    directory : str or path-like
        The folder with the ``.x`` / ``.y`` files.
    n_sequences : int, default=None
        Return only sequences 1..n_sequences (all by default).
    n_features : int, default=None
        Number of columns of every matrix. By default, the largest feature
        index over *all* ``.x`` files of the directory (whatever
        ``n_sequences`` is), so that all subsets share one feature space.
        pygpstruct fixes it to 6438 (basenp) and 29764 (chunking), a few
        columns more than occur in the files; :func:`load_benchmark` passes
        those values.
    map_negative_labels : int, default=None
        If given, labels below 0 are replaced by this value. pygpstruct
        replaces them by 0 (chunking has 19 tokens labelled -1); ``None``
        keeps the labels as in the files.

    Returns
    -------
    X : list of csr_matrix of shape (T_n, n_features)
        float64 binary features, one matrix per sequence; T_n >= 1 is the
        number of labels of ``<n>.y``.
    y : list of ndarray of int64 of shape (T_n,)
        The labels.

    Raises
    ------
    FileNotFoundError
        If the directory holds no ``.x`` file or a ``.y`` file is missing.
    ValueError
        If the files are not numbered 1..N, a file is malformed, a token index
        exceeds the number of labels, or a feature index exceeds
        ``n_features`` (the message names the file and the line), or a
        ``.y`` file holds no label. Undecodable (non-ASCII) bytes raise a
        :class:`UnicodeDecodeError`, which is a :class:`ValueError`.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with open(os.path.join(d, "1.x"), "w") as f:
    ...         _ = f.write("1\\t2\\t1\\n2\\t3\\t1\\n")
    ...     with open(os.path.join(d, "1.y"), "w") as f:
    ...         _ = f.write("0\\n-1\\n")
    ...     X, y = load_gpstruct(d, map_negative_labels=0)
    >>> X[0].toarray()
    array([[0., 1., 0.],
           [0., 0., 1.]])
    >>> y[0]
    array([0, 0])
    """
    directory = Path(directory)
    n_files = _count_gpstruct_files(directory)
    _check_gpstruct_args(directory, n_files, n_sequences, n_features,
                         map_negative_labels)
    n_return = n_files if n_sequences is None else n_sequences
    # Only the .x files beyond n_return need reading when n_features is
    # unknown (for the maximum index), never their .y files.
    n_read_x = n_files if n_features is None else n_return
    entries, n_features = _read_gpstruct_x(directory, n_read_x, n_features)
    X, y = [], []
    for i in range(1, n_return + 1):
        xname, yname = directory / f"{i}.x", directory / f"{i}.y"
        labels = _read_gpstruct_y(yname, map_negative_labels)
        n_tokens = labels.shape[0]
        ijv = entries[i - 1]
        rows = ijv[:, 0].astype(np.int64) - 1
        cols = ijv[:, 1].astype(np.int64) - 1
        if rows.size and rows.max() >= n_tokens:
            k = int(np.flatnonzero(rows >= n_tokens)[0])
            raise ValueError(
                f"{xname}, line {_gp_line_number(xname, k)} refers to token "
                f"{rows[k] + 1}, but {yname} has {n_tokens} label(s)."
            )
        x = sp.csr_matrix(
            (ijv[:, 2], (rows, cols)), shape=(n_tokens, n_features),
            dtype=np.float64,
        )
        x.sum_duplicates()
        X.append(x)
        y.append(labels)
    return X, y


def _count_gpstruct_files(directory):
    """Number N of ``<i>.x`` files of ``directory``, checked to be 1..N."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory.")
    numbers = []
    for name in os.listdir(directory):
        m = _GPSTRUCT_X_NAME.match(name)
        if m:
            if m.group(1) != str(int(m.group(1))):
                raise ValueError(
                    f"{directory / name}: the .x files must be named 1.x, "
                    "2.x, ... without leading zeros."
                )
            numbers.append(int(m.group(1)))
    numbers.sort()
    if not numbers:
        raise FileNotFoundError(f"No <i>.x file in {directory}.")
    n_files = len(numbers)
    if numbers != list(range(1, n_files + 1)):
        missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
        raise ValueError(
            f"The .x files of {directory} must be numbered 1..N without gaps; "
            f"missing: {missing[:10]}{' ...' if len(missing) > 10 else ''}"
            f"{' (0.x is not allowed)' if numbers[0] == 0 else ''}."
        )
    return n_files


def _is_int(value):
    return isinstance(value, Integral) and not isinstance(value, bool)


def _check_gpstruct_args(directory, n_files, n_sequences, n_features,
                         map_negative_labels):
    """The argument checks of :func:`load_gpstruct`."""
    if n_sequences is not None:
        if not _is_int(n_sequences):
            raise TypeError(
                f"n_sequences must be an int or None, got {n_sequences!r}."
            )
        if not 1 <= n_sequences <= n_files:
            raise ValueError(
                f"n_sequences must be in [1, {n_files}] ({n_files} sequences "
                f"in {directory}), got {n_sequences}."
            )
    if n_features is not None and (not _is_int(n_features) or n_features < 1):
        raise ValueError(f"n_features must be a positive int, got {n_features!r}.")
    if map_negative_labels is not None and not _is_int(map_negative_labels):
        raise TypeError(
            f"map_negative_labels must be an int or None, got "
            f"{map_negative_labels!r}."
        )


def _read_gpstruct_x(directory, n_read, n_features):
    """The ``(token, feature, value)`` rows of ``1.x`` .. ``<n_read>.x``.

    Returns the list of (n_i, 3) arrays and ``n_features`` (the largest
    feature index when None, else checked against it).
    """
    entries = []
    max_feature = 0
    for i in range(1, n_read + 1):
        fname = directory / f"{i}.x"
        ijv = _read_numbers(fname, "x")
        if ijv.size:
            if n_features is not None and ijv[:, 1].max() > n_features:
                k = int(np.flatnonzero(ijv[:, 1] > n_features)[0])
                raise ValueError(
                    f"{fname}, line {_gp_line_number(fname, k)}: feature index "
                    f"{int(ijv[k, 1])} exceeds n_features={n_features}."
                )
            max_feature = max(max_feature, int(ijv[:, 1].max()))
        entries.append(ijv)
    if n_features is None:
        n_features = max_feature
        if n_features == 0:
            raise ValueError(
                f"No active feature in any .x file of {directory}: all are "
                "empty or hold blank lines only."
            )
    return entries, n_features


def _read_gpstruct_y(yname, map_negative_labels):
    """The int64 labels of one ``<i>.y`` file, negatives mapped if asked."""
    if not yname.is_file():
        raise FileNotFoundError(f"{yname} is missing (its .x file exists).")
    labels = _read_numbers(yname, "y")
    if labels.size == 0:
        raise ValueError(
            f"{yname} is empty (or blank lines only): a sequence needs at "
            "least one label."
        )
    if map_negative_labels is not None:
        labels[labels < 0] = map_negative_labels
    return labels
