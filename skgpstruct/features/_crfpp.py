"""CRF++ feature templates: :class:`CRFppTemplate` and its template parser.

The template lines ``U01:%x[-1,0]/%x[0,0]`` are parsed once
(:func:`_parse_template`) and expanded over column sequences, as
:func:`skgpstruct.datasets.load_crfpp` returns them, exactly as CRF++ does,
into binary features.
"""

import os
import re
import warnings
from collections import Counter
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval

from .._input.text import _read_text
from ._common import (
    _check_sequence,
    _check_sequence_list,
    _SequenceFeatures,
    _vocabulary_from_counts,
)

__all__ = ["CRFppTemplate"]

# CRF++ 0.58 (feature.cpp, kMaxContextSize): a macro's row offset must lie in
# [-8, 8]; positions before the sentence read "_B-1", "_B-2", ... (nearest
# first) and positions after it "_B+1", "_B+2", ...
_CRFPP_MAX_CONTEXT = 8
_MACRO = re.compile(r"%x\[(-?[0-9]+),([0-9]+)\]")


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


def _parse_template(text, source=None):
    """Split a CRF++ template into compiled unigram and raw bigram lines.

    Parameters
    ----------
    text : str
        The template. Lines end at LF (a CR before it is dropped); a leading
        byte-order mark (U+FEFF) is skipped.
    source : str, default=None
        The template's file name, for the error messages ("<source>, line 3");
        without it they read "Template line 3".

    Returns
    -------
    unigrams : list of (str, tuple, tuple)
        ``(line, literals, macros)``: the feature string of a position is
        ``literals[0] + v_1 + literals[1] + ... + v_k + literals[k]`` with
        ``v_i`` the value of macro ``macros[i] = (row, col)``.
    bigrams : list of str

    Raises
    ------
    ValueError
        For a malformed line (naming it) or a template without unigram line.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    unigrams, bigrams = [], []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip() or line[0] == "#":
            continue
        where = (f"Template line {lineno}" if source is None
                 else f"{source}, line {lineno}")
        if line[0] == "B":
            bigrams.append(line)
            continue
        if line[0] != "U":
            raise ValueError(
                f"{where} ({line!r}): a template line must "
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
                    f"{where} ({line!r}), character {pos + 1}: "
                    "'%' must start a macro %x[row,col] (row an integer, "
                    "col a non-negative integer, no spaces); CRF++ rejects "
                    "anything else."
                )
            row, col = int(m.group(1)), int(m.group(2))
            if abs(row) > _CRFPP_MAX_CONTEXT:
                raise ValueError(
                    f"{where} ({line!r}): row offset {row} is "
                    f"outside CRF++'s range [-{_CRFPP_MAX_CONTEXT}, "
                    f"{_CRFPP_MAX_CONTEXT}]."
                )
            literals.append(line[start:pos])
            macros.append((row, col))
            start = m.end()
        unigrams.append((line, tuple(literals), tuple(macros)))
    if not unigrams:
        raise ValueError(
            ("The template" if source is None else f"{source}: the template")
            + " has no unigram (U) line, so it defines no token feature."
        )
    return unigrams, bigrams


def _check_column_sequences(X, n_columns_needed, reader=None):
    """Validate column sequences; return a list of lists of tuples of str.

    ``reader`` is the template line that reads the last column needed, named
    in the error message of a token with too few columns.
    """
    X = _check_sequence_list(X, "tokens (tuples of str columns)")
    out = []
    for n, seq in enumerate(X):
        _check_sequence(n, seq, "tokens (tuples of str columns)")
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
                    f"the template reads column {n_columns_needed - 1}"
                    f"{'' if reader is None else f' in {reader!r}'} "
                    "(columns are numbered from 0, the label excluded)."
                )
            tokens.append(tok)
        out.append(tokens)
    return out


class CRFppTemplate(_SequenceFeatures, auto_wrap_output_keys=None):
    """Binary token features from a CRF++ feature template.

    ``X`` is a list of sentences, each a list of tokens, each token a tuple of
    its str columns without the label (as
    :func:`~skgpstruct.datasets.load_crfpp` returns them) or a single str (one
    column). Each unigram template line ``U<id>:<text>`` produces, at every position
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
        ``#`` are skipped; other lines must start with ``U`` or ``B``. Lines
        end at LF or CRLF; a leading byte-order mark is skipped. A macro
        ``%x[row,col]`` needs ``-8 <= row <= 8`` (rows beyond the sentence
        read ``_B-k`` / ``_B+k``); ``col`` must be a column of every token
        (else ``fit`` / ``transform`` raise a ValueError).
    min_freq : int, default=1
        Keep only features occurring at least this many times in the data
        passed to ``fit`` (CRF++'s ``crf_learn -f``; occurrences are counted
        over all positions and template lines).
    dtype : float32, float64 or longdouble, default=np.float64
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
    kept in ``bigram_templates_`` and otherwise ignored; ``fit`` warns about
    a bigram line with macros, whose token-dependent label-pair features the
    models do not have.

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
    _input_tag = "string"

    def __init__(self, template, *, min_freq=1, dtype=np.float64):
        self.template = template
        self.min_freq = min_freq
        self.dtype = dtype

    @classmethod
    def from_file(cls, path, *, encoding="utf-8", **kwargs):
        """Build the transformer from a CRF++ template file.

        The file is read and its lines checked now, so that an error names
        the file and the line. LF, CRLF and lone-CR line ends are accepted
        (the text keeps LF only, as Python's text mode gives it), and so is a
        byte-order mark at the start (skipped).

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

        Raises
        ------
        ValueError
            If a line is malformed (see ``template``; the message names the
            file and the 1-based line) or the file has no unigram line.
        UnicodeDecodeError
            If the file holds bytes that ``encoding`` cannot decode (a
            ValueError too; the message names the file and the line).
        """
        hint = "pass the file's encoding as encoding=."
        text = _read_text(path, encoding, hint)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        _parse_template(text, source=os.fspath(path))
        return cls(text, **kwargs)

    def _read(self, X, fitting):
        """Check the column sequences and expand the template over them.

        When fitting, the template is parsed first (:meth:`_prepare`).
        """
        n_columns = self._prepare() if fitting else self.n_columns_
        reader = getattr(self, "_column_reader", None)
        return self._expand(_check_column_sequences(X, n_columns, reader))

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
        """Parse the template into the private compiled form.

        Returns the number of token columns the template reads.
        """
        unigrams, bigrams = _parse_template(self.template)
        self._unigrams, self._bigrams = unigrams, bigrams
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
        self._n_columns = 1 + max(
            (c for _, _, macros in unigrams for _, c in macros), default=-1
        )
        self._column_reader = next(
            (line for line, _, macros in unigrams
             if any(c == self._n_columns - 1 for _, c in macros)),
            None,
        )
        return self._n_columns

    def _fit_read(self, expanded):
        """Set the fitted attributes from the expanded training sequences."""
        self.unigram_templates_ = [line for line, _, _ in self._unigrams]
        self.bigram_templates_ = self._bigrams
        conditioned = [line for line in self._bigrams if _MACRO.search(line)]
        if conditioned:
            warnings.warn(
                f"Bigram template line(s) with macros ({', '.join(map(repr, conditioned))})"
                " are ignored: the taggers' transition potentials depend on the label "
                "pair only, as a plain 'B' line's. Move token features to U lines.",
                UserWarning, stacklevel=3)
        self.n_columns_ = self._n_columns
        counts = Counter()
        for per_line in expanded:
            for strings in per_line:
                counts.update(strings)
        self.vocabulary_, self.feature_counts_ = _vocabulary_from_counts(counts, self.min_freq)

    def _transform_read(self, expanded):
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
        return self._transform_checked(X)
