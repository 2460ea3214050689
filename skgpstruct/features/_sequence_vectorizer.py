"""sklearn-crfsuite's feature dicts: :class:`SequenceVectorizer`.

Sequences of feature dicts (the input of ``sklearn_crfsuite.CRF``) become
numeric feature matrices with
:class:`~sklearn.feature_extraction.DictVectorizer`'s conventions.
"""

import math
from array import array
from collections.abc import Mapping
from numbers import Number, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval

from ._common import _check_sequence, _check_sequence_list, _SequenceFeatures

__all__ = ["SequenceVectorizer"]


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


class _Entries:
    """The read form of :class:`SequenceVectorizer`: flat ``array`` buffers
    of the entries' codes and values, per-token counts, per-sequence
    lengths, and in a fit the names in order of first appearance (``names``,
    name -> provisional code) and their vocabulary codes (``recode``)."""

    def __init__(self, fitting):
        self.codes, self.values = array("q"), array("d")
        self.counts, self.lengths = [], []
        self.names = {} if fitting else None
        self.recode = None

    def __len__(self):
        return len(self.lengths)


def _token_entries(token, sep, n, t, names, values):
    """Append the (name, value) entries of token ``t`` of sequence ``n`` to
    ``names`` and ``values``: the plain str / bool / int / float values of a
    dict directly, anything else as :func:`_token_items` reads it (the same
    names, values and errors)."""
    if type(token) is dict:
        for key, value in token.items():
            kind = type(value)
            if type(key) is str:
                if kind is str:
                    names.append(key + sep + value)
                    values.append(1.0)
                    continue
                if kind is bool:
                    names.append(key)
                    values.append(1.0 if value else 0.0)
                    continue
                if kind is int or (kind is float and math.isfinite(value)):
                    names.append(key)
                    values.append(float(value))
                    continue
            items = []
            _add_mapping(items, {key: value}, "", sep, f"Token {t} of sequence {n}")
            for name, v in items:
                names.append(name)
                values.append(v)
        return
    for name, v in _token_items(token, sep, f"Token {t} of sequence {n}"):
        names.append(name)
        values.append(v)


class SequenceVectorizer(_SequenceFeatures, auto_wrap_output_keys=None):
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
    dtype : float32, float64 or longdouble, default=np.float64
        Dtype of the output.
    separator : str, default="="
        Joins a name and a string value (and nested names).
    sparse : bool, default=True
        Return CSR matrices; dense ndarrays if False.
    sort : bool, default=True
        Order the features by name; otherwise in order of first appearance.
    min_freq : float, default=0
        Keep only the features that occur more than ``min_freq`` times in
        the training tokens (an occurrence: one entry of a token, whatever
        its value), as CRFsuite's ``feature.minfreq`` cut-off (which counts
        attribute-label pairs; here the attribute alone). 0 keeps every
        feature.

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
    >>> vec = SequenceVectorizer()
    >>> Xt = vec.fit_transform(X)
    >>> Xt[0].toarray()
    array([[2., 1., 1., 0.],
           [7., 0., 0., 1.]])
    >>> vec.get_feature_names_out().tolist()
    ['len', 'upper', 'word=He', 'word=reckons']
    """

    _parameter_constraints: dict = {
        "dtype": "no_validation",
        "separator": [str],
        "sparse": ["boolean"],
        "sort": ["boolean"],
        "min_freq": [Interval(Real, 0, None, closed="left")],
    }
    _input_tag = "dict"

    def __init__(self, *, dtype=np.float64, separator="=", sparse=True, sort=True,
                 min_freq=0):
        self.dtype = dtype
        self.separator = separator
        self.sparse = sparse
        self.sort = sort
        self.min_freq = min_freq

    def _read(self, X, fitting):
        """Check the sequences; return their entries as :class:`_Entries`:
        each entry's feature code (in a fit: in the order of first
        appearance, :meth:`_fit_read` maps them to the vocabulary's; else
        the vocabulary's, -1 for a name it lacks) and value, each token's
        number of entries and each sequence's number of tokens. A
        sequence's names are encoded when it is read, so that only one
        sequence's strings are alive at a time."""
        X = _check_sequence_list(X, "feature dicts")
        sep = self.separator
        read = _Entries(fitting)
        vocab = read.names if fitting else self.vocabulary_
        names = []
        for n, seq in enumerate(X):
            _check_sequence(n, seq, "feature dicts", (str, bytes, Mapping))
            for t, tok in enumerate(seq):
                before = len(names)
                _token_entries(tok, sep, n, t, names, read.values)
                read.counts.append(len(names) - before)
            read.lengths.append(len(seq))
            if fitting:
                read.codes.extend([vocab.setdefault(name, len(vocab)) for name in names])
            else:
                read.codes.extend([vocab.get(name, -1) for name in names])
            names.clear()
        return read

    def _fit_read(self, read):
        """Set the vocabulary from the training entries."""
        if not read.names:
            raise ValueError("No feature found in X: every token is empty.")
        names = list(read.names)
        if self.min_freq > 0:
            freq = np.bincount(np.frombuffer(read.codes, dtype=np.int64),
                               minlength=len(names))
            names = [name for name, f in zip(names, freq) if f > self.min_freq]
            if not names:
                raise ValueError(
                    f"min_freq={self.min_freq} drops every feature: none occurs more "
                    f"than {self.min_freq} times in the training tokens."
                )
        if self.sort:
            names.sort()
        self.feature_names_ = names
        self.vocabulary_ = {f: i for i, f in enumerate(names)}
        vocab = self.vocabulary_
        read.recode = np.fromiter((vocab.get(name, -1) for name in read.names),
                                  dtype=np.int64, count=len(read.names))

    def _transform_read(self, read):
        codes = np.frombuffer(read.codes, dtype=np.int64)
        if read.recode is not None:
            codes = read.recode[codes]
        counts, lengths = read.counts, read.lengths
        known = codes >= 0
        token = np.repeat(np.arange(len(counts)), counts)[known]
        indptr = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(np.bincount(token, minlength=len(counts)), out=indptr[1:])
        values = np.frombuffer(read.values, dtype=np.float64).astype(np.dtype(self.dtype))
        X = sp.csr_matrix((values[known], codes[known], indptr),
                          shape=(len(counts), len(self.vocabulary_)))
        X.sum_duplicates()
        X.eliminate_zeros()
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        out = []
        for a, b in zip(offsets[:-1], offsets[1:]):
            x = X[a:b]
            out.append(x if self.sparse else x.toarray())
        return out

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
        return self._transform_checked(X)
