"""Reader of CoNLL-U files (Universal Dependencies treebanks) for tagging.

:func:`load_conllu` turns the word lines of a treebank into the column
sequences that :class:`skgpstruct.features.CRFppTemplate` featurises and
the tag sequences (UPOS, XPOS, FEATS, UPOS + FEATS or any function of the
token) of morphological tagging.
"""

import os
import re

from .._input.text import _as_path_list, _read_text, _split_lines

__all__ = ["load_conllu"]

# The ten fields of a CoNLL-U word line, in file order.
_COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel",
            "deps", "misc")
_COLUMN_INDEX = {name: i for i, name in enumerate(_COLUMNS)}
_TAGS = ("upos", "xpos", "feats", "upos_feats")

# Multiword-token ranges ("3-4") and empty nodes ("5.1"): skipped lines.
_SKIPPED_ID = re.compile(r"[1-9][0-9]*-[1-9][0-9]*|[0-9]+\.[1-9][0-9]*")

_HINT = "CoNLL-U files are UTF-8; pass encoding= for another encoding."


def _column_indices(columns):
    """Field indices of the column names ``columns`` (case-insensitive)."""
    if isinstance(columns, str):
        columns = (columns,)
    try:
        columns = tuple(columns)
    except TypeError:
        raise TypeError(
            "columns must be a sequence of column names, got "
            f"{type(columns).__name__}."
        ) from None
    if not columns:
        raise ValueError(
            f"columns is empty: give at least one of {', '.join(_COLUMNS)}."
        )
    indices = []
    for name in columns:
        key = name.lower() if isinstance(name, str) else None
        if key not in _COLUMN_INDEX:
            raise ValueError(
                f"Unknown CoNLL-U column {name!r} in columns; the columns are "
                f"{', '.join(_COLUMNS)} (case-insensitive)."
            )
        indices.append(_COLUMN_INDEX[key])
    return tuple(indices)


def _check_tag(tag):
    """``tag`` as a lower-case name of ``_TAGS`` or the callable itself."""
    if callable(tag):
        return tag
    key = tag.lower() if isinstance(tag, str) else None
    if key not in _TAGS:
        raise ValueError(
            f"tag must be one of {', '.join(repr(t) for t in _TAGS)} or a "
            f"callable, got {tag!r}."
        )
    return key


def load_conllu(path, tag="upos_feats", columns=("form",), encoding="utf-8"):
    """Read sentences of CoNLL-U files (Universal Dependencies treebanks).

    Each word line has ten TAB-separated fields, ``ID FORM LEMMA UPOS XPOS
    FEATS HEAD DEPREL DEPS MISC``; a blank line ends a sentence; lines
    starting with ``#`` are comments. Multiword-token lines (ID ``3-4``) and
    empty nodes (ID ``5.1``) are skipped, so that a sentence is the sequence
    of its syntactic words, the units that carry UPOS and FEATS. A sentence
    never spans two files.

    Lenient on layout, strict on content:

    * accepted: LF, CRLF and lone-CR line ends (mixed too); a byte-order
      mark at the start of a file; several blank lines, or lines of spaces
      and tabs only, between sentences, before the first or after the last
      one; a missing final blank line or line end (the end of a file ends
      its last sentence); comment lines anywhere; a file of a list that
      holds no sentence (it adds none);
    * refused with a :class:`ValueError` naming the file and the 1-based
      line: a line that is neither blank nor a comment and does not have
      exactly 10 TAB-separated fields; an empty field; an ID that is
      neither a positive integer without leading zeros nor a range ``3-4``
      nor a decimal ``5.1``; word IDs of a sentence that do not run 1, 2,
      3, ...; a sentence of multiword-token or empty-node lines only; bytes
      that ``encoding`` cannot decode; refused naming the files: no sentence
      at all.

    Fields are never stripped nor split on spaces: a FORM or LEMMA may hold
    spaces (as UD allows), and the fields are returned exactly as in the
    file.

    Parameters
    ----------
    path : str, path-like or list of them
        The file to read, or several files whose sentences are concatenated
        in the given order.
    tag : {"upos", "xpos", "feats", "upos_feats"} or callable, \
default="upos_feats"
        The label of each word: its UPOS, its XPOS, its FEATS string (``"_"``
        when it has no feature) or ``"upos_feats"``, the UPOS and the FEATS
        joined by ``"|"`` (``"NOUN|Case=Nom|Number=Sing"``; just the UPOS,
        ``"PUNCT"``, when FEATS is ``"_"``), the usual joint tag of
        morphological tagging. A callable receives the word as a dict mapping
        the ten column names (``"id"``, ``"form"``, ..., ``"misc"``) to the
        raw strings of the file and must return a str.
    columns : sequence of str, default=("form",)
        The fields that make up the input of each word, in this order, among
        ``"id"``, ``"form"``, ``"lemma"``, ``"upos"``, ``"xpos"``,
        ``"feats"``, ``"head"``, ``"deprel"``, ``"deps"`` and ``"misc"``
        (case-insensitive; a single str is one name). Column ``k`` of the
        tuples is read by ``%x[row,k]`` in a
        :class:`~skgpstruct.features.CRFppTemplate` template.
    encoding : str, default="utf-8"
        Text encoding of the files (UD's files are UTF-8).

    Returns
    -------
    X_columns : list of list of tuple of str
        One entry per sentence, one tuple per word holding the requested
        fields (the input of :class:`~skgpstruct.features.CRFppTemplate`,
        as :func:`load_crfpp` returns it). No sentence is empty.
    y : list of list of str
        The tags of each sentence, as long as the corresponding entry of
        ``X_columns``.

    Raises
    ------
    ValueError
        For an unknown ``tag`` or column name, a malformed line (the
        message names the file and the 1-based line number), or if no
        sentence is found (the message names the files). Undecodable bytes
        raise a :class:`UnicodeDecodeError`, which is a :class:`ValueError`
        too, naming the file and the line.
    TypeError
        If ``tag`` is a callable that returns something other than a str
        (the message names the file and the line of the word).

    Notes
    -----
    The tag set of a tagger trained on these labels is the set of tags of
    its training sentences: a tag that occurs only in the test sentences
    (frequent with the joint ``"upos_feats"`` tags of a rich morphology)
    can never be predicted and counts as an error.

    The HEAD, DEPREL, DEPS and MISC fields are read (and can be asked for
    in ``columns``) but not checked beyond being non-empty; the sentence
    structure is not validated as UD's own validator does.

    Examples
    --------
    >>> import tempfile, os
    >>> text = ("# text = Jó reggelt!\\n"
    ...         "1\\tJó\\tjó\\tADJ\\t_\\tDegree=Pos\\t2\\tamod\\t_\\t_\\n"
    ...         "2\\treggelt\\treggel\\tNOUN\\t_\\tCase=Acc\\t0\\troot\\t_\\t_\\n"
    ...         "3\\t!\\t!\\tPUNCT\\t_\\t_\\t2\\tpunct\\t_\\t_\\n\\n")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     fname = os.path.join(d, "tiny.conllu")
    ...     with open(fname, "w", encoding="utf-8") as f:
    ...         _ = f.write(text)
    ...     X_columns, y = load_conllu(fname)
    ...     X_lemma, y_upos = load_conllu(fname, tag="upos",
    ...                                   columns=("form", "lemma"))
    >>> X_columns
    [[('Jó',), ('reggelt',), ('!',)]]
    >>> y
    [['ADJ|Degree=Pos', 'NOUN|Case=Acc', 'PUNCT']]
    >>> X_lemma[0][1], y_upos[0]
    (('reggelt', 'reggel'), ['ADJ', 'NOUN', 'PUNCT'])
    """
    tag = _check_tag(tag)
    indices = _column_indices(columns)
    paths = _as_path_list(path)
    X_columns, y = [], []
    for p in paths:
        _read_file(p, encoding, tag, indices, X_columns, y)
    if not X_columns:
        names = ", ".join(os.fspath(p) for p in paths)
        raise ValueError(
            f"No sentence found in {names}: empty, or blank and comment "
            "lines only."
        )
    return X_columns, y


def _read_file(fname, encoding, tag, indices, X_columns, y):
    """Append the sentences of one file to ``X_columns`` and ``y``."""
    text = _read_text(fname, encoding, _HINT)
    single = indices[0] if len(indices) == 1 else None
    x_seq, y_seq = [], []
    n_words = 0  # ID the previous word line had (0: none yet)
    block_start = None  # line of the first word / skipped line of a sentence
    for lineno, line in enumerate(_split_lines(text), start=1):
        if not line or line[0] == "#":
            if not line and block_start is not None:
                _end_sentence(fname, block_start, x_seq, y_seq, X_columns, y)
                x_seq, y_seq, n_words, block_start = [], [], 0, None
            continue
        fields = line.split("\t")
        if len(fields) != 10 or "" in fields:
            if not line.strip(" \t"):  # whitespace only: a blank line
                if block_start is not None:
                    _end_sentence(fname, block_start, x_seq, y_seq, X_columns, y)
                    x_seq, y_seq, n_words, block_start = [], [], 0, None
                continue
            _raise_fields(fname, lineno, fields)
        if block_start is None:
            block_start = lineno
        word_id = fields[0]
        if not (word_id.isdigit() and word_id.isascii()) or word_id[0] == "0":
            if _SKIPPED_ID.fullmatch(word_id):
                continue
            raise ValueError(
                f"{os.fspath(fname)}, line {lineno}: ID {word_id!r} is not a "
                "positive integer (without leading zeros), a multiword-token "
                "range such as '3-4' or an empty node such as '5.1'."
            )
        n_words += 1
        if int(word_id) != n_words:
            raise ValueError(
                f"{os.fspath(fname)}, line {lineno}: ID {word_id}, expected "
                f"{n_words}; the word IDs of a sentence must run 1, 2, 3, ... "
                "(a blank line ends a sentence)."
            )
        if single is not None:
            x_seq.append((fields[single],))
        else:
            x_seq.append(tuple([fields[i] for i in indices]))
        if tag == "upos_feats":
            feats = fields[5]
            y_seq.append(fields[3] if feats == "_" else f"{fields[3]}|{feats}")
        elif tag == "upos":
            y_seq.append(fields[3])
        elif tag == "feats":
            y_seq.append(fields[5])
        elif tag == "xpos":
            y_seq.append(fields[4])
        else:
            label = tag(dict(zip(_COLUMNS, fields)))
            if not isinstance(label, str):
                raise TypeError(
                    f"{os.fspath(fname)}, line {lineno}: the tag callable "
                    f"returned a {type(label).__name__} ({label!r}); it must "
                    "return a str."
                )
            y_seq.append(label)
    if block_start is not None:
        _end_sentence(fname, block_start, x_seq, y_seq, X_columns, y)


def _end_sentence(fname, block_start, x_seq, y_seq, X_columns, y):
    """Append a finished sentence; refuse one without a word line."""
    if not x_seq:
        raise ValueError(
            f"{os.fspath(fname)}, line {block_start}: the sentence starting "
            "here has multiword-token or empty-node lines but no word line "
            "(integer ID)."
        )
    X_columns.append(x_seq)
    y.append(y_seq)


def _raise_fields(fname, lineno, fields):
    """The ValueError of a line without 10 non-empty TAB-separated fields."""
    where = f"{os.fspath(fname)}, line {lineno}"
    if len(fields) != 10:
        raise ValueError(
            f"{where}: {len(fields)} TAB-separated field(s), expected 10 "
            f"({' '.join(c.upper() for c in _COLUMNS)}); fields are separated "
            "by single TABs, not spaces."
        )
    k = fields.index("")
    raise ValueError(
        f"{where}: field {k + 1} ({_COLUMNS[k].upper()}) is empty; CoNLL-U "
        "writes '_' for an unspecified field."
    )
