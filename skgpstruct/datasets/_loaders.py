"""Loaders of sequence-labelling files: CRF++ columns, the GPstruct papers' files.

:func:`load_crfpp` and :func:`load_gpstruct` read one format each;
:func:`load_benchmark` puts them together with the folds of ``folds.json``
found under :func:`get_data_home`.
"""

import codecs
import json
import math
import os
import re
from numbers import Integral
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

__all__ = ["get_data_home", "load_benchmark", "load_crfpp", "load_gpstruct"]

# Number of features of the GPstruct papers' files, as pygpstruct hard-codes
# them (src/dataset_chain.py, ``n_features_x``). The largest feature index that
# occurs in the files is smaller (6435 for basenp, 29750 for chunking): the
# last columns are never active, so they change no linear kernel, but keeping
# them reproduces the papers' D exactly.
_PYGPSTRUCT_N_FEATURES = {"basenp": 6438, "chunking": 29764}

_BENCHMARK_FEATURES = ("crfpp", "gpstruct")


# --------------------------------------------------------------------------
# CRF++ column format
# --------------------------------------------------------------------------


def _as_path_list(path):
    if isinstance(path, (str, os.PathLike)):
        return [path]
    try:
        paths = list(path)
    except TypeError:
        raise TypeError(
            "path must be a str, a path-like object or a list of them, got "
            f"{type(path).__name__}."
        ) from None
    if not paths:
        raise ValueError("path is an empty list: give at least one file.")
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(
                "path must be a str, a path-like object or a list of them; "
                f"the list holds a {type(p).__name__}."
            )
    return paths


_COLUMN_SEP = re.compile(r"[ \t]+")


class _FileDecodeError(UnicodeDecodeError):
    """A :class:`UnicodeDecodeError` whose message names the file and the line.

    It stays a :class:`UnicodeDecodeError` (hence a :class:`ValueError`), with
    the usual ``encoding``, ``object``, ``start``, ``end`` and ``reason``.
    """

    def __str__(self):
        return getattr(self, "message", None) or super().__str__()


def _split_lines(text):
    """Lines of ``text``, ending at LF, CRLF or a lone CR (universal newlines).

    Unlike :meth:`str.splitlines`, form feeds, vertical tabs, U+0085, U+2028
    and the like stay inside the lines. A final line end yields a final
    empty string.
    """
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _read_text(fname, encoding, hint):
    """The decoded text of a file, without a leading byte-order mark.

    A UTF-8 byte-order mark is skipped when ``encoding`` is UTF-8 or ASCII,
    and a leading U+FEFF of the decoded text in any encoding (UTF-16's
    codecs consume their own mark). Undecodable bytes raise
    :class:`_FileDecodeError` naming the file, the line and ``hint``.
    """
    with open(fname, "rb") as f:
        data = f.read()
    if data.startswith(codecs.BOM_UTF8) and codecs.lookup(encoding).name in (
        "utf-8", "ascii",
    ):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        lines = _split_lines(data[:err.start].decode(encoding, errors="replace"))
        exc = _FileDecodeError(err.encoding, err.object, err.start, err.end,
                               err.reason)
        exc.message = (
            f"{os.fspath(fname)}, line {len(lines)}: cannot decode "
            f"{data[err.start:err.end]!r} (character {len(lines[-1]) + 1} of "
            f"the line) as {encoding} ({err.reason}); {hint}"
        )
        raise exc from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def load_crfpp(path, encoding="utf-8"):
    """Read sequences in CRF++'s column format.

    One token a line, its columns separated by spaces or tabs (runs count as
    one separator, as in CRF++), the last column being the label; a blank line
    ends a sentence. A sentence never spans two files.

    Lenient on layout, strict on content:

    * accepted: LF, CRLF and lone-CR line ends (mixed too); a byte-order mark
      at the start of a file; spaces and tabs at the start or end of a line
      (ignored); several blank lines, or lines of spaces and tabs only,
      between sentences, before the first or after the last one (one ends a
      sentence, the others are ignored); a missing final line end (the end
      of a file ends its last sentence); a file of a list that holds no
      sentence (it adds none);
    * refused with a :class:`ValueError` naming the file and the 1-based
      line: a token line with a number of columns different from the first
      token line (over all files), a token line with a single column (no
      column besides the label), and bytes that ``encoding`` cannot decode;
      refused naming the files: no sentence at all (empty files or blank
      lines only).

    Parameters
    ----------
    path : str, path-like or list of them
        The file to read, or several files whose sequences are concatenated in
        the given order (as ``folds.json`` numbers them).
    encoding : str, default="utf-8"
        Text encoding of the files, e.g. ``"euc_jp"`` for the Japanese
        named-entity data of CRF++.

    Returns
    -------
    X_columns : list of list of tuple of str
        One entry per sequence, one tuple per token holding its columns
        without the label (the input of
        :class:`~skgpstruct.features.CRFppTemplate`). No sequence is empty
        and every tuple has the same length (at least 1).
    y : list of list of str
        The labels (last column) of each sequence, as long as the
        corresponding entry of ``X_columns``.

    Raises
    ------
    ValueError
        If a line has a different number of columns from the first token line
        or a single column (the message names the file and the 1-based line
        number), or if no sequence is found.
    UnicodeDecodeError
        If a file holds bytes that ``encoding`` cannot decode (a
        :class:`ValueError` too; the message names the file and the line).

    Notes
    -----
    CRF++ ends a sentence at a line that starts with a space or a tab; here
    such a line is read as a token line with its leading whitespace removed,
    and only lines that are empty or hold nothing but whitespace end a
    sentence. Whitespace other than spaces and tabs (such as the ideographic
    space U+3000, a form feed or a NUL byte) belongs to the columns, as in
    CRF++.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     fname = os.path.join(d, "train.data")
    ...     with open(fname, "w") as f:
    ...         _ = f.write("He PRP B\\nreckons VBZ O\\n\\nIt PRP B\\n")
    ...     X_columns, y = load_crfpp(fname)
    >>> X_columns
    [[('He', 'PRP'), ('reckons', 'VBZ')], [('It', 'PRP')]]
    >>> y
    [['B', 'O'], ['B']]
    """
    paths = _as_path_list(path)
    X_columns, y = [], []
    n_columns = None
    first_line = None  # (file, line) that fixed n_columns, for error messages
    hint = "pass the files' encoding as encoding=, e.g. encoding=\"euc_jp\"."
    for p in paths:
        text = _read_text(p, encoding, hint)
        x_seq, y_seq = [], []
        for lineno, line in enumerate(_split_lines(text), start=1):
            line = line.strip(" \t")
            if not line:
                if x_seq:
                    X_columns.append(x_seq)
                    y.append(y_seq)
                    x_seq, y_seq = [], []
                continue
            cols = _COLUMN_SEP.split(line)
            if len(cols) < 2:
                raise ValueError(
                    f"{os.fspath(p)}, line {lineno}: 1 column; a token line "
                    "needs at least one column besides the label (the last "
                    "column)."
                )
            if n_columns is None:
                n_columns = len(cols)
                first_line = (p, lineno)
            elif len(cols) != n_columns:
                raise ValueError(
                    f"{os.fspath(p)}, line {lineno}: {len(cols)} columns, "
                    f"but line {first_line[1]} of {os.fspath(first_line[0])} "
                    f"has {n_columns}; every token line must have the same "
                    "number of columns."
                )
            x_seq.append(tuple(cols[:-1]))
            y_seq.append(cols[-1])
        if x_seq:
            X_columns.append(x_seq)
            y.append(y_seq)
    if not X_columns:
        names = ", ".join(os.fspath(p) for p in paths)
        raise ValueError(
            f"No sequence found in {names}: empty, or blank lines only."
        )
    return X_columns, y


# --------------------------------------------------------------------------
# GPstruct papers' featurised files
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# Benchmark data (folds.json)
# --------------------------------------------------------------------------


def get_data_home(data_home=None):
    """Folder of the benchmark data (``folds.json``, ``crfpp/``, ``gpstruct/``).

    Parameters
    ----------
    data_home : str or path-like, default=None
        Returned as a :class:`~pathlib.Path` when given. Otherwise the
        environment variable ``SKGPSTRUCT_DATA`` if set, else ``shared/data``
        beside the repository of a source checkout (``<repo>/../shared/data``).

    Returns
    -------
    data_home : pathlib.Path
        The folder; it need not exist (see :func:`load_benchmark`).
    """
    if data_home is not None:
        return Path(data_home)
    env = os.environ.get("SKGPSTRUCT_DATA")
    if env:
        return Path(env)
    return (Path(__file__).resolve().parents[2] / ".." / "shared" / "data").resolve()


def load_benchmark(task, *, features="crfpp", data_home=None):
    """Load a task of the GPstruct benchmark suite with its five folds.

    The tasks, files and folds are those of ``folds.json`` (DESIGN.md
    section 7): ``"basenp"`` (first 300 sentences, 150 train / 150 test per
    fold), ``"chunking"`` (first 100, 50 / 50) and ``"basenp_large"`` (all
    823, 500 / 323). Sequences are numbered from 0 over the task's listed
    CRF++ files in order.

    Parameters
    ----------
    task : str
        A key of ``folds.json``.
    features : {"crfpp", "gpstruct"}, default="crfpp"
        ``"crfpp"``: the raw CRF++ columns (featurise them with
        ``CRFppTemplate(bunch.template)``), string labels.
        ``"gpstruct"``: the papers' own binary features as CSR matrices with
        pygpstruct's number of features (6438 for basenp, 29764 for chunking;
        the largest index found otherwise) and integer labels, -1 mapped to 0
        as pygpstruct does (19 tokens of chunking).
    data_home : str or path-like, default=None
        The data folder; see :func:`get_data_home`.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With keys

        X : list
            The task's first ``n_sequences`` sequences: lists of column
            tuples (``"crfpp"``) or csr_matrix of shape (T_n, n_features)
            (``"gpstruct"``).
        y : list
            Label sequences: lists of str (``"crfpp"``) or int64 arrays
            (``"gpstruct"``).
        folds : list of tuple of ndarray
            Five ``(train_indices, test_indices)`` pairs into ``X``; it can be
            passed as ``cv=`` to :func:`~sklearn.model_selection.cross_validate`
            or :class:`~sklearn.model_selection.GridSearchCV`.
        template : str or None
            The text of the task's CRF++ template (``"crfpp"`` only).
        task, features, n_sequences, encoding
            As described above.

    Raises
    ------
    FileNotFoundError
        If the data folder or a file is missing.
    ValueError
        For an unknown task or ``features`` value.

    Examples
    --------
    Needs the benchmark data, hence skipped as a doctest:

    >>> from skgpstruct.features import CRFppTemplate
    >>> data = load_benchmark("basenp")  # doctest: +SKIP
    >>> len(data.X), [len(test) for _, test in data.folds]  # doctest: +SKIP
    (300, [150, 150, 150, 150, 150])
    >>> train, test = data.folds[0]  # doctest: +SKIP
    >>> features = CRFppTemplate(data.template)  # doctest: +SKIP
    >>> X_train = features.fit_transform([data.X[i] for i in train])  # doctest: +SKIP

    With a tagger ``tagger``, ``cross_val_score(make_pipeline(features,
    tagger), data.X, data.y, cv=data.folds)`` runs the five folds.
    """
    if features not in _BENCHMARK_FEATURES:
        raise ValueError(
            f"features must be one of {_BENCHMARK_FEATURES}, got {features!r}."
        )
    home = get_data_home(data_home)
    folds_file = home / "folds.json"
    if not folds_file.is_file():
        raise FileNotFoundError(
            f"{folds_file} not found: pass data_home= or set SKGPSTRUCT_DATA "
            "to the folder holding folds.json, crfpp/ and gpstruct/."
        )
    with open(folds_file, encoding="utf-8") as f:
        spec = json.load(f)
    if task not in spec:
        raise ValueError(f"Unknown task {task!r}; folds.json has {sorted(spec)}.")
    spec = spec[task]
    n_sequences = int(spec["n_sequences_used"])
    folds = [
        (np.asarray(fold["train"], dtype=np.int64),
         np.asarray(fold["test"], dtype=np.int64))
        for fold in spec["folds"]
    ]
    for k, (train, test) in enumerate(folds):
        for idx in (train, test):
            if idx.size and (idx.min() < 0 or idx.max() >= n_sequences):
                raise ValueError(
                    f"folds.json, task {task!r}, fold {k}: index out of "
                    f"[0, {n_sequences})."
                )
    template = None
    if features == "crfpp":
        task_dir = home / "crfpp" / spec["directory"]
        X, y = load_crfpp(
            [task_dir / name for name in spec["files"]], encoding=spec["encoding"]
        )
        if len(X) < n_sequences:
            raise ValueError(
                f"Task {task!r} uses {n_sequences} sequences but its files "
                f"hold {len(X)}."
            )
        X, y = X[:n_sequences], y[:n_sequences]
        template_file = task_dir / "template"
        if template_file.is_file():
            template = template_file.read_text(encoding=spec["encoding"])
    else:
        gp_dir = spec["gpstruct_dir"]
        X, y = load_gpstruct(
            home / "gpstruct" / gp_dir,
            n_sequences=n_sequences,
            n_features=_PYGPSTRUCT_N_FEATURES.get(gp_dir),
            map_negative_labels=0,
        )
    return Bunch(
        X=X, y=y, folds=folds, template=template, task=task,
        features=features, n_sequences=n_sequences, encoding=spec["encoding"],
    )
