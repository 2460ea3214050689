"""Word-form features without a template: :class:`WordFeatures`.

Each token's word form gives the usual part-of-speech / morphology features
(lowercased form, prefixes and suffixes, word shape, orthographic flags) and
its neighbours' forms within a window. The names are generated once per
distinct form and turned into column ids (a learned vocabulary, or feature
hashing), and the CSR arrays are built directly from those ids.
"""

import unicodedata
from collections import Counter
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.utils import murmurhash3_32
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from ._common import (
    _check_float_dtype,
    _check_sequence,
    _check_sequence_list,
    _SequenceFeatures,
    _vocabulary_from_counts,
)

__all__ = ["WordFeatures"]

# Longest run of one shape character kept in the word shape ("Elephant" ->
# "Xxxxx", as spaCy's ``shape_``); the short shape keeps runs of length 1.
_SHAPE_MAX_RUN = 4
# Suffixes of the neighbours' forms: lengths 1..3 (at most affix_length).
_NEIGHBOUR_SUFFIX = 3


def _char_class(c):
    """Shape character of ``c``: X (upper), x (other letter), d (digit), or c."""
    if c.isupper():
        return "X"
    if c.isalpha():
        return "x"
    if c.isdigit():
        return "d"
    if unicodedata.category(c)[0] == "M":  # combining marks belong to letters
        return "x"
    return c


def _shapes(form):
    """Word shape (runs cut at 4) and short shape (runs cut at 1) of ``form``."""
    shape, short = [], []
    prev, run = None, 0
    for c in form:
        k = _char_class(c)
        if k == prev:
            run += 1
        else:
            prev, run = k, 1
            short.append(k)
        if run <= _SHAPE_MAX_RUN:
            shape.append(k)
    return "".join(shape), "".join(short)


def _token_names(form, affix_length, bias):
    """Names of the features of a token given by its form alone."""
    low = form.lower()
    names = ["w=" + low]
    n = min(affix_length, len(low))
    names += [f"p{k}={low[:k]}" for k in range(1, n + 1)]
    names += [f"s{k}={low[-k:]}" for k in range(1, n + 1)]
    shape, short = _shapes(form)
    names.append("shape=" + shape)
    names.append("short_shape=" + short)
    if form.isdigit():
        names.append("all_digits")
    if any(c.isdigit() for c in form):
        names.append("has_digit")
    if "-" in form:
        names.append("has_hyphen")
    if form.istitle():
        names.append("is_title")
    if form.isupper():
        names.append("is_upper")
    if form.islower():
        names.append("is_lower")
    if form and all(unicodedata.category(c)[0] == "P" for c in form):
        names.append("is_punct")
    if bias:
        names.append("bias")
    return names


def _neighbour_names(form, offset, n_suffix):
    """Names of the features a token gets from its neighbour at ``offset``."""
    low = form.lower()
    pre = f"{offset:+d}:"
    names = [pre + "w=" + low]
    names += [f"{pre}s{k}={low[-k:]}" for k in range(1, min(n_suffix, len(low)) + 1)]
    return names


def _edge_name(offset):
    """Name of the feature for a neighbour position outside the sentence."""
    return f"{offset:+d}:BOS" if offset < 0 else f"{offset:+d}:EOS"


class WordFeatures(_SequenceFeatures, auto_wrap_output_keys=None):
    """Binary word-form features of tokens and their neighbours.

    For taggers without a CRF++ template: every token of ``X`` (a list of
    sentences, each a list of tokens) gets the features below of its word
    form; the forms are Unicode (``str.lower``, ``str.isupper``, ... apply to
    any script). A token is a str (its form) or a tuple / list of str columns
    (as :func:`~skgpstruct.datasets.load_crfpp` returns them, or ``(form,)``
    1-tuples) of which element ``column`` is the form.

    Features of token ``t`` with form ``f`` and ``low = f.lower()``:

    * ``w=<low>``: the lowercased form;
    * ``p<k>=<low[:k]>`` and ``s<k>=<low[-k:]>`` for ``k = 1 ..
      min(affix_length, len(low))``: prefixes and suffixes;
    * ``shape=<shape>``: each character mapped to ``X`` (upper case), ``x``
      (any other letter, or a combining mark), ``d`` (digit) or kept as it is
      (punctuation, symbols), then every run of the same character cut to
      its first 4, as spaCy's ``Token.shape_`` (``"Word"`` -> ``Xxxx``,
      ``"Elephant"`` -> ``Xxxxx``, ``"12345"`` -> ``dddd``, ``"U.S."`` ->
      ``X.X.``);
    * ``short_shape=<shape>``: the same with every run cut to 1 (``Xx``,
      ``d``, ``X.X.``);
    * flags, present when true: ``all_digits`` (``f.isdigit()``),
      ``has_digit``, ``has_hyphen`` (``"-"`` in ``f``), ``is_title``,
      ``is_upper``, ``is_lower`` (``str.istitle`` / ``isupper`` /
      ``islower``), ``is_punct`` (every character in a Unicode ``P*``
      category), ``is_first`` and ``is_last`` (first / last token of the
      sentence), and ``bias`` (every token) if ``bias=True``;
    * for each offset ``d`` in ``-window .. window`` other than 0, with
      ``D`` written ``-1``, ``+1``, ``-2``, ...: ``D:w=<low>`` and
      ``D:s<k>=<low[-k:]>`` (``k = 1 .. min(3, affix_length, len(low))``) of
      the token ``t + d``, or ``D:BOS`` (``d < 0``) / ``D:EOS`` (``d > 0``)
      when ``t + d`` lies outside the sentence.

    Parameters
    ----------
    column : int, default=0
        Element of a tuple / list token that holds the word form. A token
        given as a str is a single column, so needs ``column=0``.
    window : int, default=1
        Neighbours on each side whose forms and suffixes are features of a
        token; 0 for none.
    affix_length : int, default=4
        Longest prefix and suffix of the token's own form; 0 for none.
    bias : bool, default=False
        Add the constant feature ``bias`` to every token (the skgpstruct
        taggers have their own intercepts).
    min_freq : int, default=1
        Keep only features occurring at least this many times (counted over
        tokens) in the data passed to ``fit``. Must be 1 with hashing.
    n_features : int or None, default=None
        None: learn a vocabulary in ``fit`` (features unseen there are
        dropped by ``transform``). An int: feature hashing, as
        :class:`~sklearn.feature_extraction.FeatureHasher`: the name is
        hashed with ``murmurhash3_32(name, seed=0, positive=True)`` and
        taken modulo ``n_features`` (no alternating sign); names colliding at
        one token give one 1 (OR, not a sum), so the output stays binary. The
        transformer is then stateless: ``transform`` needs no ``fit``.
    dtype : float32, float64 or longdouble, default=np.float64
        Dtype of the output matrices.

    Attributes
    ----------
    vocabulary_ : dict or None
        Feature name -> column index (names in sorted order); None with
        hashing.
    feature_counts_ : ndarray of int64 or None
        Occurrences of each kept feature in the training data, one per
        output column (``n_features_out_`` of them); None with hashing.
    n_features_out_ : int
        Number of output columns (``len(vocabulary_)`` or ``n_features``).

    See Also
    --------
    CRFppTemplate : Features from a CRF++ template over column sequences.
    SequenceVectorizer : Features from dicts (sklearn-crfsuite's format).
    sklearn.feature_extraction.FeatureHasher : Feature hashing of flat samples.

    Notes
    -----
    Every feature name of a token is distinct, so the output is binary in
    either mode. :meth:`get_feature_names_out` gives the feature names with a
    vocabulary and the placeholders ``hash_0``, ``hash_1``, ... (one per
    bucket) with hashing, where a bucket has no single name.

    Examples
    --------
    >>> X = [["The", "cat", "sat"], ["Ügyész", "ő", "."]]
    >>> vec = WordFeatures(window=0, affix_length=2).fit(X)
    >>> (x,) = vec.transform([["The", "dog"]])
    >>> x.shape == (2, len(vec.vocabulary_))
    True
    >>> names = vec.get_feature_names_out()
    >>> names[x[0].indices].tolist()
    ['is_first', 'is_title', 'p1=t', 'p2=th', 's1=e', 's2=he', 'shape=Xxx', 'short_shape=Xx', 'w=the']
    >>> names[x[1].indices].tolist()  # w=dog, p1=d, ... were not seen in fit
    ['is_last', 'is_lower', 'shape=xxx', 'short_shape=x']
    >>> hashed = WordFeatures(n_features=2**10).transform([["Ügyész", "ő"]])
    >>> hashed[0].shape
    (2, 1024)
    """

    _parameter_constraints: dict = {
        "column": [Interval(Integral, 0, None, closed="left")],
        "window": [Interval(Integral, 0, None, closed="left")],
        "affix_length": [Interval(Integral, 0, None, closed="left")],
        "bias": ["boolean"],
        "min_freq": [Interval(Integral, 1, None, closed="left")],
        "n_features": [
            None, Interval(Integral, 1, np.iinfo(np.int32).max, closed="both"),
        ],
        "dtype": "no_validation",
    }
    _input_tag = "string"

    def __init__(self, *, column=0, window=1, affix_length=4, bias=False,
                 min_freq=1, n_features=None, dtype=np.float64):
        self.column = column
        self.window = window
        self.affix_length = affix_length
        self.bias = bias
        self.min_freq = min_freq
        self.n_features = n_features
        self.dtype = dtype

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = self.n_features is None
        return tags

    # ----------------------------------------------------------- reading X
    def _read(self, X, fitting):
        """Check the sequences; return, per sequence, the list of word forms."""
        X = _check_sequence_list(X, "tokens (word forms or tuples of str)")
        col = self.column
        out = []
        for n, seq in enumerate(X):
            _check_sequence(n, seq, "tokens (word forms or tuples of str columns)")
            if len(seq) == 0:
                raise ValueError(
                    f"Sequence {n} of X is empty: every sequence needs at least "
                    "one token."
                )
            forms = []
            for t, tok in enumerate(seq):
                if isinstance(tok, str):
                    if col != 0:
                        raise ValueError(
                            f"Token {t} of sequence {n} is a str (a single "
                            f"column) but column={col}; give tokens as tuples "
                            "of columns or use column=0."
                        )
                    forms.append(tok)
                    continue
                if not isinstance(tok, (tuple, list, np.ndarray)):
                    raise TypeError(
                        f"Token {t} of sequence {n} must be a str (the word "
                        "form) or a tuple of str columns, got a "
                        f"{type(tok).__name__}."
                    )
                if len(tok) <= col:
                    raise ValueError(
                        f"Token {t} of sequence {n} has {len(tok)} column(s); "
                        f"the word form is read from column {col} (numbered "
                        "from 0)."
                    )
                form = tok[col]
                if not isinstance(form, str):
                    raise TypeError(
                        f"Token {t} of sequence {n}: the word form (column "
                        f"{col}) must be a str, got a {type(form).__name__} "
                        f"({form!r})."
                    )
                forms.append(form)
            out.append(forms)
        return out

    def _check_hashing(self):
        if self.n_features is not None and self.min_freq != 1:
            raise ValueError(
                f"min_freq={self.min_freq} needs a vocabulary; with feature "
                f"hashing (n_features={self.n_features}) it must be 1."
            )

    # -------------------------------------------------------------- fitting
    def _fit_read(self, X):
        """Set the fitted attributes; count the features if learning a vocabulary."""
        self._check_hashing()
        if self.n_features is not None:
            self.vocabulary_ = None
            self.feature_counts_ = None
            self.n_features_out_ = int(self.n_features)
            return
        affix, bias, window = self.affix_length, self.bias, self.window
        n_suffix = min(_NEIGHBOUR_SUFFIX, affix)
        form_counts = Counter(f for forms in X for f in forms)
        context = Counter()  # (offset, neighbour form or None outside)
        for forms in X:
            T = len(forms)
            for d in range(1, window + 1):
                # Offset -d: positions t >= d see forms[t - d]; t < d see BOS.
                context.update((-d, f) for f in forms[:max(T - d, 0)])
                context.update((d, f) for f in forms[min(d, T):])
                context[(-d, None)] += min(d, T)
                context[(d, None)] += min(d, T)
        counts = Counter()
        for form, c in form_counts.items():
            for name in _token_names(form, affix, bias):
                counts[name] += c
        for (d, form), c in context.items():
            if form is None:
                counts[_edge_name(d)] += c
            else:
                for name in _neighbour_names(form, d, n_suffix):
                    counts[name] += c
        counts["is_first"] = counts["is_last"] = len(X)
        self.vocabulary_, self.feature_counts_ = _vocabulary_from_counts(counts, self.min_freq)
        self.n_features_out_ = len(self.vocabulary_)

    # ---------------------------------------------------------- transforming
    def _transform_read(self, X):
        """CSR matrices of the word-form sequences, ids cached per form."""
        affix, bias, window = self.affix_length, self.bias, self.window
        n_suffix = min(_NEIGHBOUR_SUFFIX, affix)
        dtype = np.dtype(self.dtype)
        if self.n_features is None:
            vocab = self.vocabulary_
            width = len(vocab)

            def ids_of(names):
                return [j for j in map(vocab.get, names) if j is not None]
        else:
            width = int(self.n_features)

            def ids_of(names):
                return [murmurhash3_32(s, seed=0, positive=True) % width
                        for s in names]

        own = {}
        neighbours = {d: {} for d in range(-window, window + 1) if d}
        edges = {d: ids_of([_edge_name(d)]) for d in neighbours}
        first, last = ids_of(["is_first"]), ids_of(["is_last"])
        out = []
        for forms in X:
            T = len(forms)
            indices = []
            indptr = [0]
            extend = indices.extend
            for t, form in enumerate(forms):
                ids = own.get(form)
                if ids is None:
                    ids = own[form] = ids_of(_token_names(form, affix, bias))
                extend(ids)
                if t == 0:
                    extend(first)
                if t == T - 1:
                    extend(last)
                for d, cache in neighbours.items():
                    u = t + d
                    if 0 <= u < T:
                        other = forms[u]
                        ids = cache.get(other)
                        if ids is None:
                            ids = cache[other] = ids_of(
                                _neighbour_names(other, d, n_suffix))
                        extend(ids)
                    else:
                        extend(edges[d])
                indptr.append(len(indices))
            indices = np.array(indices, dtype=np.int64)
            x = sp.csr_matrix(
                (np.ones(indices.shape[0], dtype=dtype), indices,
                 np.array(indptr, dtype=np.int64)),
                shape=(T, width),
            )
            x.sum_duplicates()  # sorts the indices; hash collisions add up ...
            x.data[:] = 1       # ... and are OR'ed back to 1
            out.append(x)
        return out

    def transform(self, X):
        """Binary features of each sequence; unseen features are dropped.

        Parameters
        ----------
        X : list of list of str or tuple of str
            Sentences of tokens, each a word form or a tuple of str columns
            holding it in ``column``.

        Returns
        -------
        Xt : list of csr_matrix of shape (T_n, n_features_out)
            Row ``t`` of sequence ``n`` has a 1 in the column of every
            feature of its token (known to the vocabulary, or its hash bucket).

        Raises
        ------
        NotFittedError
            Without hashing, if the transformer is not fitted (or was fitted
            with hashing).
        """
        if self.n_features is None:
            self._check_vocabulary()
            _check_float_dtype(self.dtype)  # set_params may have changed it
        else:  # stateless: check the parameters fit would have checked
            self._validate_params()
            _check_float_dtype(self.dtype)
            self._check_hashing()
        return self._transform_read(self._read(X, fitting=False))

    def get_feature_names_out(self, input_features=None):
        """Feature names, one per output column.

        Parameters
        ----------
        input_features : None
            Ignored (the input has no columns of its own).

        Returns
        -------
        feature_names_out : ndarray of str objects of shape (n_features_out,)
            The vocabulary's names in column order; with hashing the
            placeholders ``hash_0``, ..., ``hash_<n_features - 1>`` (a bucket
            holds every name hashed to it, which are not kept).
        """
        if self.n_features is not None:
            self._validate_params()
            return np.array([f"hash_{i}" for i in range(self.n_features)],
                            dtype=object)
        self._check_vocabulary()
        return super().get_feature_names_out(input_features)

    def _check_vocabulary(self):
        """NotFittedError unless fitted with a vocabulary (not with hashing)."""
        check_is_fitted(self, "vocabulary_")
        if self.vocabulary_ is None:
            raise NotFittedError(
                "This WordFeatures was fitted with feature hashing (n_features "
                "set): it has no vocabulary; fit it again to learn one."
            )
