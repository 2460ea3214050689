"""Transformers from token descriptions to sparse feature sequences.

* :class:`CRFppTemplate` expands CRF++ feature templates (``U01:%x[-1,0]``)
  over column sequences as :func:`skgpstruct.datasets.load_crfpp` returns
  them, exactly as CRF++ does, into binary features.
* :class:`SequenceVectorizer` turns sklearn-crfsuite's input (a list of
  sequences of feature dicts) into numeric features, with
  :class:`~sklearn.feature_extraction.DictVectorizer`'s conventions.

Both output one scipy CSR matrix of shape ``(T_n, n_features)`` per sequence
(the ``X`` of the skgpstruct estimators), so they can be the first step of a
:class:`~sklearn.pipeline.Pipeline` in front of a tagger.
"""

import math
import re
from collections import Counter
from collections.abc import Mapping
from numbers import Integral, Number
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

__all__ = ["CRFppTemplate", "SequenceVectorizer"]

# CRF++ 0.58 (feature.cpp, kMaxContextSize): a macro's row offset must lie in
# [-8, 8]; positions before the sentence read "_B-1", "_B-2", ... (nearest
# first) and positions after it "_B+1", "_B+2", ...
_CRFPP_MAX_CONTEXT = 8
_MACRO = re.compile(r"%x\[(-?[0-9]+),([0-9]+)\]")


def _check_float_dtype(dtype):
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(
            f"dtype must be a NumPy floating dtype, got {dtype!r}."
        ) from None
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a NumPy floating dtype, got {dtype}.")
    return dtype


def _check_sequence_list(X, what):
    """The outer list of sequences: a list-like, not a string or 2-D array."""
    if isinstance(X, (str, bytes)) or sp.issparse(X) or (
        isinstance(X, np.ndarray) and X.dtype != object
    ):
        raise TypeError(
            f"X must be a list of sequences, each a list of {what}; got a "
            f"{type(X).__name__}."
        )
    try:
        return list(X)
    except TypeError:
        raise TypeError(
            f"X must be a list of sequences, each a list of {what}; got a "
            f"{type(X).__name__}."
        ) from None


def _csr_from_ids(ids, n_features, dtype):
    """Binary CSR matrix from a (T, k) array of column ids (-1 = none).

    Each row gets a 1 in every distinct non-negative id it holds (sorted
    indices, no duplicates).
    """
    n_rows = ids.shape[0]
    if ids.shape[1] == 0 or n_rows == 0:
        return sp.csr_matrix((n_rows, n_features), dtype=dtype)
    ids = np.sort(ids, axis=1)
    keep = ids >= 0
    keep[:, 1:] &= ids[:, 1:] != ids[:, :-1]
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    indices = ids[keep]
    data = np.ones(indices.shape[0], dtype=dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_features))


# --------------------------------------------------------------------------
# CRF++ templates
# --------------------------------------------------------------------------


def _parse_template(text):
    """Split a CRF++ template into compiled unigram and raw bigram lines.

    Returns
    -------
    unigrams : list of (str, tuple, tuple)
        ``(line, literals, macros)``: the feature string of a position is
        ``literals[0] + v_1 + literals[1] + ... + v_k + literals[k]`` with
        ``v_i`` the value of macro ``macros[i] = (row, col)``.
    bigrams : list of str
    """
    unigrams, bigrams = [], []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip() or line[0] == "#":
            continue
        if line[0] == "B":
            bigrams.append(line)
            continue
        if line[0] != "U":
            raise ValueError(
                f"Template line {lineno} ({line!r}): a template line must "
                "start with 'U' (unigram) or 'B' (bigram), as in CRF++."
            )
        literals, macros = [], []
        start = 0
        while True:
            pos = line.find("%", start)
            if pos < 0:
                literals.append(line[start:])
                break
            m = _MACRO.match(line, pos)
            if m is None:
                raise ValueError(
                    f"Template line {lineno} ({line!r}), character {pos + 1}: "
                    "'%' must start a macro %x[row,col] (row an integer, "
                    "col a non-negative integer, no spaces); CRF++ rejects "
                    "anything else."
                )
            row, col = int(m.group(1)), int(m.group(2))
            if abs(row) > _CRFPP_MAX_CONTEXT:
                raise ValueError(
                    f"Template line {lineno} ({line!r}): row offset {row} is "
                    f"outside CRF++'s range [-{_CRFPP_MAX_CONTEXT}, "
                    f"{_CRFPP_MAX_CONTEXT}]."
                )
            literals.append(line[start:pos])
            macros.append((row, col))
            start = m.end()
        unigrams.append((line, tuple(literals), tuple(macros)))
    return unigrams, bigrams


def _check_column_sequences(X, n_columns_needed):
    """Validate column sequences; return a list of lists of tuples of str."""
    X = _check_sequence_list(X, "tokens (tuples of str columns)")
    out = []
    for n, seq in enumerate(X):
        if isinstance(seq, (str, bytes)) or not hasattr(seq, "__len__"):
            raise TypeError(
                f"Sequence {n} of X must be a list of tokens (tuples of str "
                f"columns), got a {type(seq).__name__}."
            )
        tokens = []
        for t, tok in enumerate(seq):
            if isinstance(tok, str):
                tok = (tok,)
            elif isinstance(tok, (tuple, list, np.ndarray)):
                tok = tuple(tok)
                for v in tok:
                    if not isinstance(v, str):
                        raise TypeError(
                            f"Token {t} of sequence {n} holds a "
                            f"{type(v).__name__} ({v!r}); columns must be str."
                        )
            else:
                raise TypeError(
                    f"Token {t} of sequence {n} must be a tuple of str columns "
                    f"(or one str), got a {type(tok).__name__}."
                )
            if len(tok) < n_columns_needed:
                raise ValueError(
                    f"Token {t} of sequence {n} has {len(tok)} column(s) but "
                    f"the template reads column {n_columns_needed - 1} "
                    "(columns are numbered from 0)."
                )
            tokens.append(tok)
        out.append(tokens)
    return out


class CRFppTemplate(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Binary token features from a CRF++ feature template.

    Each unigram template line ``U<id>:<text>`` produces, at every position
    ``t`` of a sentence, the string obtained by replacing each macro
    ``%x[row,col]`` by column ``col`` of token ``t + row``; rows before the
    sentence read ``_B-1``, ``_B-2``, ... (nearest first) and rows after it
    ``_B+1``, ``_B+2``, ..., as in CRF++ (``feature.cpp``). Every distinct
    string seen in training is one binary feature. For example, with template
    ``U05:%x[-1,0]/%x[0,0]`` the first token of ``He reckons`` yields
    ``U05:_B-1/He``.

    Parameters
    ----------
    template : str
        Text of a CRF++ template file. Empty lines and lines starting with
        ``#`` are skipped; other lines must start with ``U`` or ``B``.
    min_freq : int, default=1
        Keep only features occurring at least this many times in the data
        passed to ``fit`` (CRF++'s ``crf_learn -f``; occurrences are counted
        over all positions and template lines).
    dtype : NumPy floating dtype, default=np.float64
        Dtype of the output matrices.

    Attributes
    ----------
    vocabulary_ : dict
        Feature string -> column index (columns in sorted string order).
    feature_counts_ : ndarray of int64 of shape (n_features,)
        Occurrences of each kept feature in the training data.
    unigram_templates_ : list of str
        The unigram template lines used.
    bigram_templates_ : list of str
        The bigram (``B``) template lines, which are not expanded (see Notes).
    n_columns_ : int
        Number of token columns the template reads (its largest column index
        plus 1); tokens may have more.

    See Also
    --------
    skgpstruct.datasets.load_crfpp : Reads the column sequences.
    SequenceVectorizer : Features from dicts (sklearn-crfsuite's format).

    Notes
    -----
    Bigram template lines (``B``, ``B01:%x[0,0]``) define features of label
    pairs in CRF++. The skgpstruct models supply the transition potentials
    themselves (a plain ``B`` line is exactly those), so the bigram lines are
    kept in ``bigram_templates_`` and otherwise ignored.

    Differences from CRF++ that change no valid template's features: a
    template line that holds only whitespace is skipped (CRF++ rejects it),
    and the feature values are binary, so a string produced twice at one
    position (two template lines giving the same text) is one 1, whereas
    CRF++ would add its weight twice. A template line without macros, such as
    ``U``, is one constant feature, as in CRF++ (a per-label bias).

    Examples
    --------
    >>> template = "# a CRF++ template\\nU00:%x[-1,0]\\nU01:%x[0,0]/%x[0,1]\\nB\\n"
    >>> X_columns = [[("He", "PRP"), ("reckons", "VBZ")]]
    >>> vec = CRFppTemplate(template).fit(X_columns)
    >>> vec.get_feature_names_out().tolist()
    ['U00:He', 'U00:_B-1', 'U01:He/PRP', 'U01:reckons/VBZ']
    >>> vec.transform(X_columns)[0].toarray()
    array([[0., 1., 1., 0.],
           [1., 0., 0., 1.]])
    """

    _parameter_constraints: dict = {
        "template": [str],
        "min_freq": [Interval(Integral, 1, None, closed="left")],
        "dtype": "no_validation",
    }

    def __init__(self, template, *, min_freq=1, dtype=np.float64):
        self.template = template
        self.min_freq = min_freq
        self.dtype = dtype

    @classmethod
    def from_file(cls, path, *, encoding="utf-8", **kwargs):
        """Build the transformer from a CRF++ template file.

        Parameters
        ----------
        path : str or path-like
            The template file (read now; the text becomes ``template``).
        encoding : str, default="utf-8"
            Its text encoding.
        **kwargs
            Other parameters of :class:`CRFppTemplate`.

        Returns
        -------
        transformer : CRFppTemplate
        """
        return cls(Path(path).read_text(encoding=encoding), **kwargs)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        return tags

    def _expand(self, X):
        """Feature strings of every template line, position by position.

        Returns a list with, per sequence, a list with, per unigram line, the
        list of that line's strings at positions 0..T-1.
        """
        pad = self._max_offset
        bos = [f"_B-{k}" for k in range(pad, 0, -1)]
        eos = [f"_B+{k}" for k in range(1, pad + 1)]
        columns_used = sorted({c for _, _, macros in self._unigrams for _, c in macros})
        out = []
        for seq in X:
            T = len(seq)
            padded = {}
            for c in columns_used:
                padded[c] = bos + [tok[c] for tok in seq] + eos
            per_line = []
            for fmt, literal, macros in self._compiled:
                if not macros:
                    per_line.append([literal] * T)
                elif len(macros) == 1:
                    (r, c), = macros
                    head, tail = literal
                    per_line.append(
                        [head + v + tail for v in padded[c][pad + r:pad + r + T]]
                    )
                else:
                    cols = [padded[c][pad + r:pad + r + T] for r, c in macros]
                    per_line.append([fmt.format(*vals) for vals in zip(*cols)])
            out.append(per_line)
        return out

    def _prepare(self):
        """Parse the template into the private compiled form."""
        unigrams, bigrams = _parse_template(self.template)
        if not unigrams:
            raise ValueError(
                "The template has no unigram (U) line, so it defines no token "
                "feature."
            )
        self._unigrams = unigrams
        compiled = []
        for _, literals, macros in unigrams:
            if not macros:
                compiled.append((None, literals[0], macros))
            elif len(macros) == 1:
                compiled.append((None, literals, macros))
            else:
                fmt = "{}".join(
                    s.replace("{", "{{").replace("}", "}}") for s in literals
                )
                compiled.append((fmt, None, macros))
        self._compiled = compiled
        self._max_offset = max(
            (abs(r) for _, _, macros in unigrams for r, _ in macros), default=0
        )
        n_columns = 1 + max(
            (c for _, _, macros in unigrams for _, c in macros), default=-1
        )
        return unigrams, bigrams, n_columns

    def _fit_expanded(self, expanded):
        counts = Counter()
        for per_line in expanded:
            for strings in per_line:
                counts.update(strings)
        names = sorted(f for f, c in counts.items() if c >= self.min_freq)
        if not names:
            raise ValueError(
                f"No feature occurs at least min_freq={self.min_freq} times in "
                "the training data."
            )
        self.vocabulary_ = {f: i for i, f in enumerate(names)}
        self.feature_counts_ = np.array([counts[f] for f in names], dtype=np.int64)
        self._feature_names = np.array(names, dtype=object)

    def _transform_expanded(self, expanded):
        get = self.vocabulary_.get
        n_features = len(self.vocabulary_)
        dtype = np.dtype(self.dtype)
        n_lines = len(self._compiled)
        out = []
        for per_line in expanded:
            T = len(per_line[0]) if per_line else 0
            ids = np.empty((T, n_lines), dtype=np.int64)
            for j, strings in enumerate(per_line):
                ids[:, j] = [get(s, -1) for s in strings]
            out.append(_csr_from_ids(ids, n_features, dtype))
        return out

    def _setup_fit(self, X):
        _check_float_dtype(self.dtype)
        unigrams, bigrams, n_columns = self._prepare()
        X = _check_column_sequences(X, n_columns)
        if not X:
            raise ValueError("X is empty: at least one sequence is required.")
        self.unigram_templates_ = [line for line, _, _ in unigrams]
        self.bigram_templates_ = bigrams
        self.n_columns_ = n_columns
        return X

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Collect the features of the training sequences.

        Parameters
        ----------
        X : list of list of tuple of str
            Column sequences (one tuple of columns per token, without the
            label), as returned by :func:`~skgpstruct.datasets.load_crfpp`.
            A token may also be a single str (one column).
        y : None
            Ignored.

        Returns
        -------
        self : CRFppTemplate
        """
        X = self._setup_fit(X)
        self._fit_expanded(self._expand(X))
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None):
        """Fit and transform in one expansion of the templates.

        Parameters
        ----------
        X : list of list of tuple of str
            Column sequences.
        y : None
            Ignored.

        Returns
        -------
        Xt : list of csr_matrix of shape (T_n, n_features)
        """
        X = self._setup_fit(X)
        expanded = self._expand(X)
        self._fit_expanded(expanded)
        return self._transform_expanded(expanded)

    def transform(self, X):
        """Binary features of each sequence; unseen feature strings are ignored.

        Parameters
        ----------
        X : list of list of tuple of str
            Column sequences.

        Returns
        -------
        Xt : list of csr_matrix of shape (T_n, n_features)
            Row ``t`` of sequence ``n`` has a 1 in the column of every known
            feature string generated at position ``t``.
        """
        check_is_fitted(self, "vocabulary_")
        X = _check_column_sequences(X, self.n_columns_)
        return self._transform_expanded(self._expand(X))

    def get_feature_names_out(self, input_features=None):
        """Feature strings, one per output column.

        Parameters
        ----------
        input_features : None
            Ignored (the input has no columns of its own).

        Returns
        -------
        feature_names_out : ndarray of str objects of shape (n_features,)
        """
        check_is_fitted(self, "vocabulary_")
        return self._feature_names.copy()


# --------------------------------------------------------------------------
# Dict features (sklearn-crfsuite's format)
# --------------------------------------------------------------------------


def _add_mapping(items, mapping, prefix, sep, where):
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise TypeError(
                f"{where}: feature names must be str, got {type(key).__name__} "
                f"({key!r})."
            )
        name = prefix + key
        if isinstance(value, str):
            items.append((f"{name}{sep}{value}", 1.0))
        elif isinstance(value, (bool, np.bool_)):
            items.append((name, 1.0 if value else 0.0))
        elif isinstance(value, Number) and not isinstance(value, complex):
            try:
                v = float(value)
            except TypeError:
                raise TypeError(
                    f"{where}: feature {name!r} has a {type(value).__name__} "
                    "value that is not a real number."
                ) from None
            if not math.isfinite(v):
                raise ValueError(f"{where}: feature {name!r} has value {v}.")
            items.append((name, v))
        elif isinstance(value, Mapping):
            _add_mapping(items, value, name + sep, sep, where)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for v in value:
                if not isinstance(v, str):
                    raise TypeError(
                        f"{where}: feature {name!r} is a list holding a "
                        f"{type(v).__name__}; lists must hold str values."
                    )
                items.append((f"{name}{sep}{v}", 1.0))
        elif value is None:
            continue
        else:
            raise TypeError(
                f"{where}: feature {name!r} has a {type(value).__name__} value; "
                "supported are str, bool, int, float, dict and list of str."
            )


def _token_items(token, sep, where):
    items = []
    if isinstance(token, Mapping):
        _add_mapping(items, token, "", sep, where)
    elif isinstance(token, (list, tuple)):
        for name in token:
            if not isinstance(name, str):
                raise TypeError(
                    f"{where}: a token given as a list must hold str feature "
                    f"names, got a {type(name).__name__}."
                )
            items.append((name, 1.0))
    else:
        raise TypeError(
            f"{where} must be a dict of features (or a list of feature names), "
            f"got a {type(token).__name__}."
        )
    return items


class SequenceVectorizer(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Numeric features from sequences of feature dicts (sklearn-crfsuite's input).

    ``X`` is a list of sequences, each a list of tokens, each token a dict
    mapping feature names to values, as for ``sklearn_crfsuite.CRF``. The
    values follow :class:`~sklearn.feature_extraction.DictVectorizer`:

    * str ``v`` for name ``f``: a one-hot feature ``"f=v"`` with value 1;
    * bool, int or float: the feature ``f`` with that numeric value;
    * list (tuple, set) of str: one feature ``"f=v"`` per element, value 1
      each (repeats add up);
    * nested dict (python-crfsuite's nesting): ``{"f": {"g": value}}`` is read
      as ``{"f=g": value}``;
    * None: the feature is absent.

    A token may also be a list of feature names, each with value 1
    (python-crfsuite's other item form).

    Parameters
    ----------
    dtype : NumPy floating dtype, default=np.float64
        Dtype of the output.
    separator : str, default="="
        Joins a name and a string value (and nested names).
    sparse : bool, default=True
        Return CSR matrices; dense ndarrays if False.
    sort : bool, default=True
        Order the features by name; otherwise in order of first appearance.

    Attributes
    ----------
    vocabulary_ : dict
        Feature name -> column index.
    feature_names_ : list of str
        Feature names by column.

    See Also
    --------
    CRFppTemplate : Features from CRF++ templates over column sequences.
    sklearn.feature_extraction.DictVectorizer : The same for flat samples.

    Notes
    -----
    Features unseen in ``fit`` are ignored by ``transform``. Zero values (for
    instance ``False``) are features of the vocabulary but are not stored in
    the sparse output. python-crfsuite writes ``"f:v"`` for string values;
    pass ``separator=":"`` for the same names.

    Examples
    --------
    >>> X = [[{"word": "He", "upper": True, "len": 2},
    ...       {"word": "reckons", "upper": False, "len": 7}]]
    >>> vec = SequenceVectorizer().fit(X)
    >>> vec.get_feature_names_out().tolist()
    ['len', 'upper', 'word=He', 'word=reckons']
    >>> vec.transform(X)[0].toarray()
    array([[2., 1., 1., 0.],
           [7., 0., 0., 1.]])
    """

    _parameter_constraints: dict = {
        "dtype": "no_validation",
        "separator": [str],
        "sparse": ["boolean"],
        "sort": ["boolean"],
    }

    def __init__(self, *, dtype=np.float64, separator="=", sparse=True, sort=True):
        self.dtype = dtype
        self.separator = separator
        self.sparse = sparse
        self.sort = sort

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.dict = True
        return tags

    def _flatten(self, X):
        X = _check_sequence_list(X, "feature dicts")
        sep = self.separator
        out = []
        for n, seq in enumerate(X):
            if isinstance(seq, (str, bytes, Mapping)) or not hasattr(seq, "__len__"):
                raise TypeError(
                    f"Sequence {n} of X must be a list of feature dicts, got a "
                    f"{type(seq).__name__}."
                )
            out.append(
                [_token_items(tok, sep, f"Token {t} of sequence {n}")
                 for t, tok in enumerate(seq)]
            )
        return out

    def _fit_flat(self, flat):
        seen = {}
        for seq in flat:
            for items in seq:
                for name, _ in items:
                    seen.setdefault(name, None)
        if not seen:
            raise ValueError("No feature found in X: every token is empty.")
        names = sorted(seen) if self.sort else list(seen)
        self.feature_names_ = names
        self.vocabulary_ = {f: i for i, f in enumerate(names)}

    def _transform_flat(self, flat):
        vocab = self.vocabulary_
        n_features = len(vocab)
        dtype = np.dtype(self.dtype)
        out = []
        for seq in flat:
            indptr = [0]
            indices, values = [], []
            for items in seq:
                for name, value in items:
                    j = vocab.get(name)
                    if j is not None:
                        indices.append(j)
                        values.append(value)
                indptr.append(len(indices))
            x = sp.csr_matrix(
                (np.array(values, dtype=dtype),
                 np.array(indices, dtype=np.int64),
                 np.array(indptr, dtype=np.int64)),
                shape=(len(seq), n_features),
            )
            x.sum_duplicates()
            x.eliminate_zeros()
            out.append(x if self.sparse else x.toarray())
        return out

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Collect the feature names of the training sequences.

        Parameters
        ----------
        X : list of list of dict
            Sequences of feature dicts.
        y : None
            Ignored.

        Returns
        -------
        self : SequenceVectorizer
        """
        _check_float_dtype(self.dtype)
        flat = self._flatten(X)
        if not flat:
            raise ValueError("X is empty: at least one sequence is required.")
        self._fit_flat(flat)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None):
        """Fit and transform, reading the dicts once.

        Parameters
        ----------
        X : list of list of dict
            Sequences of feature dicts.
        y : None
            Ignored.

        Returns
        -------
        Xt : list of csr_matrix (or ndarray) of shape (T_n, n_features)
        """
        _check_float_dtype(self.dtype)
        flat = self._flatten(X)
        if not flat:
            raise ValueError("X is empty: at least one sequence is required.")
        self._fit_flat(flat)
        return self._transform_flat(flat)

    def transform(self, X):
        """Feature matrices of the sequences; unseen features are ignored.

        Parameters
        ----------
        X : list of list of dict
            Sequences of feature dicts.

        Returns
        -------
        Xt : list of csr_matrix of shape (T_n, n_features)
            ndarrays instead if ``sparse=False``.
        """
        check_is_fitted(self, "vocabulary_")
        return self._transform_flat(self._flatten(X))

    def get_feature_names_out(self, input_features=None):
        """Feature names, one per output column.

        Parameters
        ----------
        input_features : None
            Ignored.

        Returns
        -------
        feature_names_out : ndarray of str objects of shape (n_features,)
        """
        check_is_fitted(self, "vocabulary_")
        return np.array(self.feature_names_, dtype=object)
