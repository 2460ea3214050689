"""Loaders of sequence-labelling files: CRF++ columns, the GPstruct papers' files.

:func:`load_crfpp` and :func:`load_gpstruct` read one format each;
:func:`load_benchmark` puts them together with the folds of ``folds.json``
found under :func:`get_data_home`.
"""

import json
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


def load_crfpp(path, encoding="utf-8"):
    """Read sequences in CRF++'s column format.

    One token a line, its columns separated by spaces or tabs (runs count as
    one separator, as in CRF++), the last column being the label; a blank line
    ends a sentence. Windows line ends (CRLF), trailing blank lines and a
    missing final blank line are accepted.

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
        :class:`~skgpstruct.features.CRFppTemplate`).
    y : list of list of str
        The labels (last column) of each sequence.

    Raises
    ------
    ValueError
        If a line has a different number of columns from the first token line
        (the message names the file and the 1-based line number), or if no
        sequence is found.

    Notes
    -----
    CRF++ ends a sentence at a line that starts with a space or a tab; here
    such a line is read as a token line with its leading whitespace removed,
    and only lines that are empty or hold nothing but whitespace end a
    sentence. Whitespace other than spaces and tabs (such as the ideographic
    space U+3000) belongs to the columns, as in CRF++.

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
    for p in paths:
        x_seq, y_seq = [], []
        with open(p, encoding=encoding) as f:
            for lineno, line in enumerate(f, start=1):
                line = line.strip(" \t\r\n")
                if not line:
                    if x_seq:
                        X_columns.append(x_seq)
                        y.append(y_seq)
                        x_seq, y_seq = [], []
                    continue
                cols = _COLUMN_SEP.split(line)
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
        raise ValueError(f"No sequence found in {names}.")
    return X_columns, y


# --------------------------------------------------------------------------
# GPstruct papers' featurised files
# --------------------------------------------------------------------------

_GPSTRUCT_X_NAME = re.compile(r"^([0-9]+)\.x$")


def _read_numbers(fname, n_cols):
    with open(fname, encoding="ascii") as f:
        text = f.read()
    try:
        values = np.array(text.split(), dtype=np.float64)
    except ValueError:
        raise ValueError(f"{fname}: non-numeric entry.") from None
    if values.size % n_cols:
        raise ValueError(
            f"{fname}: expected {n_cols} number(s) per line, the file holds "
            f"{values.size} numbers in all."
        )
    return values.reshape(-1, n_cols)


def load_gpstruct(directory, n_sequences=None, *, n_features=None,
                  map_negative_labels=None):
    """Read the binary features of the GPstruct papers (pygpstruct's files).

    The directory holds ``<i>.x`` and ``<i>.y`` for i = 1..N (sentence i-1 of
    the corresponding CRF++ file). ``<i>.x`` has one line per active feature,
    ``token feature value`` (token and feature 1-based); ``<i>.y`` one integer
    label per token.

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
        float64 binary features, one matrix per sequence.
    y : list of ndarray of int64 of shape (T_n,)
        The labels.

    Raises
    ------
    FileNotFoundError
        If the directory holds no ``.x`` file or a ``.y`` file is missing.
    ValueError
        If the files are not numbered 1..N, a file is malformed, a token index
        exceeds the number of labels, or a feature index exceeds
        ``n_features``.

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
        yname = directory / f"{i}.y"
        labels = _read_gpstruct_y(yname, map_negative_labels)
        n_tokens = labels.shape[0]
        ijv = entries[i - 1]
        rows = ijv[:, 0].astype(np.int64) - 1
        cols = ijv[:, 1].astype(np.int64) - 1
        if rows.size and rows.max() >= n_tokens:
            raise ValueError(
                f"{directory / f'{i}.x'} refers to token {rows.max() + 1} but "
                f"{yname} has {n_tokens} labels."
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
    numbers = sorted(
        int(m.group(1))
        for m in (_GPSTRUCT_X_NAME.match(name) for name in os.listdir(directory))
        if m
    )
    if not numbers:
        raise FileNotFoundError(f"No <i>.x file in {directory}.")
    n_files = len(numbers)
    if numbers != list(range(1, n_files + 1)):
        missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
        raise ValueError(
            f"The .x files of {directory} must be numbered 1..N without gaps; "
            f"missing: {missing[:10]}{' ...' if len(missing) > 10 else ''}."
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
        ijv = _read_numbers(fname, 3)
        if ijv.size:
            idx = ijv[:, :2]
            if np.any(idx < 1) or np.any(idx != np.floor(idx)):
                raise ValueError(
                    f"{fname}: token and feature indices must be integers >= 1 "
                    "(1-based)."
                )
            max_feature = max(max_feature, int(ijv[:, 1].max()))
        entries.append(ijv)
    if n_features is None:
        n_features = max_feature
        if n_features == 0:
            raise ValueError(f"No active feature in any .x file of {directory}.")
    elif max_feature > n_features:
        raise ValueError(
            f"Feature index {max_feature} in {directory} exceeds "
            f"n_features={n_features}."
        )
    return entries, n_features


def _read_gpstruct_y(yname, map_negative_labels):
    """The int64 labels of one ``<i>.y`` file, negatives mapped if asked."""
    if not yname.is_file():
        raise FileNotFoundError(f"{yname} is missing (its .x file exists).")
    labels = _read_numbers(yname, 1).ravel()
    if labels.size == 0:
        raise ValueError(f"{yname} is empty.")
    if np.any(labels != np.floor(labels)):
        raise ValueError(f"{yname}: labels must be integers.")
    labels = labels.astype(np.int64)
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
        task, features, n_sequences, encoding : as described above.

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
