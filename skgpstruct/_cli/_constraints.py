"""Constraints and unknown labels on the command line: ``skgpstruct tag
--allowed FILE`` and ``skgpstruct train --unknown-label TOKEN``.

An allowed file has the layout of the input it constrains: one line per
token, a blank line between sentences. A line holds the labels the token may
take, separated by tabs (or spaces, as the columns of a CRF++ file): one
label forces it, several make a set, and ``*`` alone allows any label. The
taggers then condition on the constraint (their ``allowed=`` argument):
the prediction is the best allowed path, the marginals and path
probabilities are those of the distribution restricted to the allowed paths
and renormalised, and ``-n N`` lists allowed paths only.

In a training file a label equal to ``--unknown-label``'s token becomes
``None``, a token whose label is unknown (partial labels: the tagger fits
the known labels, summing over those it does not know).
"""

import contextlib
import re

from ._common import CLIError, _display, read_columns, read_input

__all__ = ["ANY_LABEL", "allowed_errors", "mark_unknown", "read_allowed"]

ANY_LABEL = "*"

# the taggers' messages about one token of allowed= (skgpstruct._input.constraints)
_TOKEN_ERROR = re.compile(r"allowed\[(\d+)\]\[(\d+)\] (.*)", re.DOTALL)
_NOT_A_LABEL = re.compile(r"holds (.*), not a label of classes_", re.DOTALL)


def _allowed_sentences(text, source):
    """Sentences of an allowed file (:func:`~._common.read_columns`' layout:
    per sentence, each line's number and fields; none for a file of blank
    lines, which :func:`_check_counts` then refuses by the input's count);
    and the number of the file's last line."""
    lines = text.split("\n")
    if not any(line.strip(" \t") for line in lines):
        return [], len(lines)
    return read_columns(text, source), len(lines)


def _entry(fields, source, lineno):
    """The ``allowed=`` entry of one line: None, a label or a list of labels."""
    if fields == (ANY_LABEL,):
        return None
    if ANY_LABEL in fields:
        raise CLIError(f"{source}, line {lineno}: '{ANY_LABEL}' (any label) must stand "
                       "alone on its line.")
    if len(fields) == 1:
        return fields[0]
    return list(dict.fromkeys(fields))


def _check_counts(sentences, lengths, source, input_name, last_line):
    """Refuse an allowed file whose sentences or tokens are not the input's."""
    for k, (sentence, n_tokens) in enumerate(zip(sentences, lengths), start=1):
        if len(sentence) != n_tokens:
            where = sentence[min(n_tokens, len(sentence) - 1)][0]
            what = "more" if len(sentence) > n_tokens else "ends here, with fewer"
            raise CLIError(
                f"{source}, line {where}: sentence {k} has {len(sentence)} token "
                f"line(s), but sentence {k} of {input_name} has {n_tokens} ({what} "
                "lines than tokens); --allowed needs one line per token of the input "
                "and a blank line between sentences."
            )
    if len(sentences) > len(lengths):
        raise CLIError(
            f"{source}, line {sentences[len(lengths)][0][0]}: sentence "
            f"{len(lengths) + 1} begins, but {input_name} has only {len(lengths)} "
            "sentence(s)."
        )
    if len(sentences) < len(lengths):
        raise CLIError(
            f"{source}, line {last_line}: the file ends after {len(sentences)} "
            f"sentence(s), but {input_name} has {len(lengths)}; sentence "
            f"{len(sentences) + 1} has no allowed labels."
        )


def read_allowed(path, lengths, *, encoding="utf-8", input_name="the input"):
    """Read the constraint of ``skgpstruct tag --allowed``.

    Parameters
    ----------
    path : str or path-like
        The allowed file, or ``"-"`` for stdin (module docstring).
    lengths : sequence of int
        The number of tokens of each sentence of the input.
    encoding : str, default="utf-8"
        Text encoding (the input's).
    input_name : str, default="the input"
        How the input is named in messages.

    Returns
    -------
    allowed : list
        The taggers' ``allowed=``: per sentence None (no constraint) or one
        entry per token (None, a label or a list of labels).
    lines : list of list of int
        The 1-based line of each token's entry, for messages.

    Raises
    ------
    CLIError
        If the file has another number of sentences, or a sentence another
        number of lines, than the input (naming the sentence and the line),
        or a ``*`` beside labels.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write("*\\nB\\tI\\n\\nO\\n")
    >>> read_allowed(f.name, [2, 1])
    ([[None, ['B', 'I']], ['O']], [[1, 2], [4]])
    >>> os.unlink(f.name)
    """
    source = _display(path)
    sentences, last_line = _allowed_sentences(read_input(path, encoding), path)
    _check_counts(sentences, list(lengths), source, input_name, last_line)
    allowed = []
    for sentence in sentences:
        entries = [_entry(fields, source, lineno) for lineno, fields in sentence]
        allowed.append(None if all(e is None for e in entries) else entries)
    return allowed, [[lineno for lineno, _ in s] for s in sentences]


@contextlib.contextmanager
def allowed_errors(lines, source, classes):
    """Re-raise the taggers' errors about one token of ``allowed=`` as
    :class:`CLIError` naming the allowed file's line, sentence and token.

    Parameters
    ----------
    lines : list of list of int
        :func:`read_allowed`'s line numbers.
    source : str or path-like
        The allowed file (``"-"``: stdin).
    classes : sequence of str
        The model's labels, listed in the message about an unknown one.
    """
    try:
        yield
    except ValueError as exc:
        match = _TOKEN_ERROR.match(str(exc))
        if match is None:
            raise
        n, t, rest = int(match[1]), int(match[2]), " ".join(match[3].split())
        where = (f"{_display(source)}, line {lines[n][t]} (sentence {n + 1}, "
                 f"token {t + 1})")
        label = _NOT_A_LABEL.match(rest)
        if label is None:
            raise CLIError(f"{where}: {rest}") from None
        shown = ", ".join(str(c) for c in list(classes)[:20])
        more = ", ..." if len(classes) > 20 else ""
        raise CLIError(f"{where}: {label[1]} is not a label of the model "
                       f"({shown}{more}).") from None


def mark_unknown(y, token):
    """The labels with ``token`` replaced by None (unknown).

    Parameters
    ----------
    y : list of list of str
        The labels of each sentence.
    token : str or None
        The label value meaning "unknown"; None leaves ``y`` as it is.

    Returns
    -------
    y : list of list of str or None
        A new list when ``token`` is not None.
    n_unknown : int
        How many labels became None.

    Examples
    --------
    >>> mark_unknown([["B", "?"], ["?"]], "?")
    ([['B', None], [None]], 2)
    """
    if token is None:
        return y, 0
    out = [[None if label == token else label for label in labels] for labels in y]
    return out, sum(label is None for labels in out for label in labels)
