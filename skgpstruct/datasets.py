"""Sequence-labelling data: CRF++ files, the GPstruct papers' files, synthetic chains.

* :func:`load_crfpp` reads CRF++'s column format (one token a line, the last
  column is the label, a blank line ends a sentence) into the column sequences
  that :class:`skgpstruct.features.CRFppTemplate` featurises.
* :func:`load_gpstruct` reads the binary features that the GPstruct papers used
  (pygpstruct's ``<i>.x`` / ``<i>.y`` files) into sparse matrices.
* :func:`load_benchmark` puts both together with the benchmark folds of
  ``folds.json`` (DESIGN.md section 7); :func:`get_data_home` says where that
  data is looked for.
* :func:`make_chain_data` draws sequences from a random linear-chain
  (HMM-style) model: the built-in data of the demo and of most tests.
"""

import json
import os
import re
from numbers import Integral, Real
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import Interval, validate_params

__all__ = [
    "get_data_home",
    "load_benchmark",
    "load_crfpp",
    "load_gpstruct",
    "make_chain_data",
]

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
    if n_sequences is not None:
        if not isinstance(n_sequences, Integral) or isinstance(n_sequences, bool):
            raise TypeError(
                f"n_sequences must be an int or None, got {n_sequences!r}."
            )
        if not 1 <= n_sequences <= n_files:
            raise ValueError(
                f"n_sequences must be in [1, {n_files}] ({n_files} sequences "
                f"in {directory}), got {n_sequences}."
            )
    if n_features is not None and (
        not isinstance(n_features, Integral) or isinstance(n_features, bool)
        or n_features < 1
    ):
        raise ValueError(f"n_features must be a positive int, got {n_features!r}.")
    if map_negative_labels is not None and (
        not isinstance(map_negative_labels, Integral)
        or isinstance(map_negative_labels, bool)
    ):
        raise TypeError(
            f"map_negative_labels must be an int or None, got "
            f"{map_negative_labels!r}."
        )
    n_return = n_files if n_sequences is None else n_sequences
    # Only the .x files beyond n_return need reading when n_features is
    # unknown (for the maximum index), never their .y files.
    n_read_x = n_files if n_features is None else n_return

    entries = []
    max_feature = 0
    for i in range(1, n_read_x + 1):
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

    X, y = [], []
    for i in range(1, n_return + 1):
        yname = directory / f"{i}.y"
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
    return (Path(__file__).resolve().parents[1] / ".." / "shared" / "data").resolve()


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


# --------------------------------------------------------------------------
# Synthetic chains
# --------------------------------------------------------------------------


def _check_length(length):
    if isinstance(length, Integral) and not isinstance(length, bool):
        if length < 1:
            raise ValueError(f"length must be >= 1, got {length}.")
        return int(length), int(length)
    if isinstance(length, tuple) and len(length) == 2 and all(
        isinstance(v, Integral) and not isinstance(v, bool) for v in length
    ):
        lo, hi = int(length[0]), int(length[1])
        if not 1 <= lo <= hi:
            raise ValueError(
                f"length=(min, max) needs 1 <= min <= max, got {length}."
            )
        return lo, hi
    raise TypeError(
        f"length must be an int or a (min, max) tuple of ints, got {length!r}."
    )


def _class_means(rng, n_classes, n_features):
    """Unit-norm class means, exactly orthonormal when that is cheap."""
    if n_classes <= min(n_features, 100):
        # QR of a Gaussian matrix: O(n_features n_classes^2), kept cheap.
        q, _ = np.linalg.qr(rng.standard_normal((n_features, n_classes)))
        return np.ascontiguousarray(q.T)
    # Random unit directions (nearly orthogonal when n_features is large).
    means = rng.standard_normal((n_classes, n_features))
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return means / norms


@validate_params(
    {
        "n_sequences": [Interval(Integral, 1, None, closed="left")],
        "n_classes": [Interval(Integral, 2, None, closed="left")],
        "n_features": [Interval(Integral, 1, None, closed="left")],
        "length": [Interval(Integral, 1, None, closed="left"), tuple],
        "transition_strength": [Interval(Real, 0, 1, closed="both")],
        "n_successors": [Interval(Integral, 1, None, closed="left")],
        "noise": [Interval(Real, 0, None, closed="left"), None],
        "sparse": ["boolean"],
        "n_active": [Interval(Integral, 1, None, closed="left")],
        "return_params": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_chain_data(
    n_sequences=100,
    n_classes=3,
    n_features=10,
    *,
    length=(5, 20),
    transition_strength=0.8,
    n_successors=1,
    noise=None,
    sparse=False,
    n_active=3,
    return_params=False,
    random_state=None,
):
    """Draw labelled sequences from a random linear-chain (HMM-style) model.

    Labels follow a Markov chain whose transition matrix is
    ``A = s * P + (1 - s) / n_classes`` with ``s = transition_strength`` and
    ``P`` the average of ``n_successors`` random permutation matrices: from
    label ``i`` the chain moves with probability ``s`` to one of ``i``'s
    preferred successors and otherwise to a uniformly drawn label. ``A`` is
    doubly stochastic, so with the uniform start every position's label is
    marginally uniform, and it is stored in O(n_classes * n_successors)
    memory (never as a dense matrix), which keeps ten thousand labels cheap.

    Token features depend on the token's label only:

    * dense (default): ``x_t = mu[y_t] + noise * eps``, ``eps`` standard
      normal, with unit-norm class means ``mu`` (orthonormal when
      ``n_classes <= min(n_features, 100)``), so that the difficulty hardly
      depends on ``n_features``;
    * ``sparse=True``: binary features. Every label owns a disjoint group of
      features (when ``n_classes <= n_features``; otherwise labels share
      one feature each). A token switches on ``n_active`` features, each drawn
      from its label's group with probability ``1 - noise`` and uniformly
      from all features otherwise (repeats count once).

    With the defaults a per-token classifier knowing the true model labels
    about 75% of the tokens correctly and the exact chain posterior about 90%.

    Parameters
    ----------
    n_sequences : int, default=100
        Number of sequences.
    n_classes : int, default=3
        Number of labels (at least 2).
    n_features : int, default=10
        Number of token features.
    length : int or tuple of (int, int), default=(5, 20)
        Length of every sequence, or the (min, max) range, both included,
        from which each sequence's length is drawn uniformly.
    transition_strength : float in [0, 1], default=0.8
        Probability of moving to a preferred successor; 0 makes the labels
        independent (transitions carry no information).
    n_successors : int, default=1
        Number of preferred successors of each label (random permutations;
        two of them may coincide).
    noise : float, default=None
        Dense: standard deviation of the Gaussian noise per feature
        (default 0.7). Sparse: probability in [0, 1] that an active feature is
        drawn at random rather than from the label's group (default 0.5).
    sparse : bool, default=False
        Return binary scipy CSR features instead of dense Gaussian ones.
    n_active : int, default=3
        Sparse only: feature draws per token.
    return_params : bool, default=False
        Also return the generating model.
    random_state : int, RandomState instance or None, default=None
        Seed; the output is deterministic for a given int.

    Returns
    -------
    X : list of ndarray (or csr_matrix if ``sparse``) of shape (T_n, n_features)
        float64 token features of each sequence.
    y : list of ndarray of int64 of shape (T_n,)
        Labels in ``[0, n_classes)``.
    params : :class:`~sklearn.utils.Bunch`
        Only if ``return_params``: ``startprob`` (uniform), ``successors``
        (n_classes, n_successors) so that ``A[i] = s * mean_j
        onehot(successors[i, j]) + (1 - s) / n_classes``,
        ``transition_strength``, ``noise``, and ``means`` (dense) or
        ``feature_groups`` (sparse: the sorted feature indices of each label's
        group) and ``n_active``.

    Examples
    --------
    >>> X, y = make_chain_data(n_sequences=2, n_classes=3, n_features=4,
    ...                        length=3, random_state=0)
    >>> [x.shape for x in X], y[0].dtype
    ([(3, 4), (3, 4)], dtype('int64'))
    >>> int(max(s.max() for s in y)) < 3
    True
    """
    lo, hi = _check_length(length)
    if noise is None:
        noise = 0.5 if sparse else 0.7
    if sparse and noise > 1:
        raise ValueError(
            f"With sparse=True, noise is a probability and must be in [0, 1]; "
            f"got {noise}."
        )
    rng = check_random_state(random_state)
    V, D, N = int(n_classes), int(n_features), int(n_sequences)

    # Label chain, all sequences at once, one time step after the other.
    successors = np.empty((V, n_successors), dtype=np.int64)
    for j in range(n_successors):
        successors[:, j] = rng.permutation(V)
    lengths = rng.randint(lo, hi + 1, size=N).astype(np.int64)
    T_max = int(lengths.max())
    labels = np.empty((N, T_max), dtype=np.int64)
    labels[:, 0] = rng.randint(V, size=N)
    for t in range(1, T_max):
        prev = labels[:, t - 1]
        follow = rng.random_sample(N) < transition_strength
        pick = rng.randint(n_successors, size=N)
        jump = rng.randint(V, size=N)
        labels[:, t] = np.where(follow, successors[prev, pick], jump)
    mask = np.arange(T_max)[None, :] < lengths[:, None]
    y_flat = labels[mask]  # row-major: sequence after sequence
    n_tokens = y_flat.shape[0]
    ends = np.cumsum(lengths)[:-1]
    y = [np.ascontiguousarray(s) for s in np.split(y_flat, ends)]

    params = Bunch(
        startprob=np.full(V, 1.0 / V),
        successors=successors,
        transition_strength=float(transition_strength),
        noise=float(noise),
    )
    if not sparse:
        means = _class_means(rng, V, D)
        X_flat = means[y_flat] + noise * rng.standard_normal((n_tokens, D))
        X = [np.ascontiguousarray(x) for x in np.split(X_flat, ends)]
        params.means = means
    else:
        # Label c owns the features perm[c], perm[c + V], perm[c + 2V], ...
        # (< D); when V > D, label c owns perm[c % D] alone.
        perm = rng.permutation(D).astype(np.int64)
        classes = np.arange(V, dtype=np.int64)
        group_size = np.where(classes < D, (D - classes + V - 1) // V, 1)
        n_slots = n_tokens * n_active
        slot_label = np.repeat(y_flat, n_active)
        u = (rng.random_sample(n_slots) * group_size[slot_label]).astype(np.int64)
        own = perm[(slot_label + V * u) % D]
        random_feature = rng.randint(D, size=n_slots)
        from_noise = rng.random_sample(n_slots) < noise
        cols = np.where(from_noise, random_feature, own)
        rows = np.repeat(np.arange(n_tokens, dtype=np.int64), n_active)
        X_flat = sp.csr_matrix(
            (np.ones(n_slots), (rows, cols)), shape=(n_tokens, D)
        )
        X_flat.sum_duplicates()
        X_flat.data[:] = 1.0
        starts = np.concatenate([[0], np.cumsum(lengths)])
        X = [X_flat[starts[n]:starts[n + 1]] for n in range(N)]
        params.n_active = int(n_active)
        if return_params:
            params.feature_groups = [
                np.sort(perm[np.arange(c, D, V)]) if c < D else perm[[c % D]]
                for c in range(V)
            ]
    if return_params:
        return X, y, params
    return X, y
