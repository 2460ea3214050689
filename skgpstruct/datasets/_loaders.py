"""Loaders of sequence-labelling files: CRF++ columns, the GPstruct papers' files.

:func:`load_crfpp` and :func:`load_gpstruct` (in ``_gpstruct_files``) read one
format each; :func:`load_benchmark` puts them together with the folds of
``folds.json`` found under :func:`get_data_home`.
"""

import json
import os
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ._gpstruct_files import _PYGPSTRUCT_N_FEATURES, load_gpstruct
from .._input.text import _COLUMN_SEP, _as_path_list, _read_text, _split_lines

__all__ = ["get_data_home", "load_benchmark", "load_crfpp", "load_gpstruct"]

_BENCHMARK_FEATURES = ("crfpp", "gpstruct")


# --------------------------------------------------------------------------
# CRF++ column format
# --------------------------------------------------------------------------


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

    The tasks, files and folds are those of ``folds.json`` (the
    papers' five-fold protocol): ``"basenp"`` (first 300 sentences, 150 train / 150 test per
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

    def indices(fold, k, key):
        idx = fold[key]
        # bool is an int subclass; floats and strings used to be converted
        if not isinstance(idx, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in idx):
            raise ValueError(
                f"{folds_file}, task {task!r}, fold {k}: {key!r} must be a list "
                "of integer sequence indices."
            )
        return np.asarray(idx, dtype=np.int64)

    folds = [(indices(fold, k, "train"), indices(fold, k, "test"))
             for k, fold in enumerate(spec["folds"])]
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
            # the shared reader: a byte-order mark skipped, errors naming the
            # file and the line (import here: features imports datasets)
            from ..features import CRFppTemplate

            template = CRFppTemplate.from_file(template_file,
                                               encoding=spec["encoding"]).template
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
