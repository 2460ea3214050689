"""What the commands share: their error type, input files (or stdin) and
column files, and warnings relayed to stderr as one-line messages."""

import codecs
import contextlib
import os
import sys
import tempfile
import warnings

from .._input.text import _COLUMN_SEP

__all__ = ["CLIError", "check_column_counts", "input_path", "one_line", "read_columns",
           "read_input", "relay_warnings"]


class CLIError(Exception):
    """An expected failure of a command (bad data, bad model file).

    The command line prints its message as one line on stderr and exits
    with status 1, without a traceback.
    """


def _display(path):
    """How a path (or ``"-"``, stdin) is named in messages."""
    return "<stdin>" if path == "-" else os.fspath(path)


def read_input(path, encoding="utf-8"):
    """The decoded text of a file, or of stdin when ``path`` is ``"-"``.

    Parameters
    ----------
    path : str or path-like
        The file, or ``"-"`` for the standard input.
    encoding : str, default="utf-8"
        Text encoding. A UTF-8 byte-order mark is skipped.

    Returns
    -------
    text : str
        With LF line ends only (CRLF and lone CR converted).

    Raises
    ------
    CLIError
        If the bytes cannot be decoded (the message names the line).
    OSError
        If the file cannot be read.
    """
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise CLIError(
            f"{_display(path)}, line {line}: cannot decode the bytes as {encoding} "
            f"({err.reason}); pass the file's encoding with --encoding."
        ) from None
    except LookupError:
        raise CLIError(f"unknown encoding {encoding!r}.") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


@contextlib.contextmanager
def input_path(path):
    """A file name for ``path``: itself, or a temporary copy of stdin for ``"-"``.

    For the loaders of :mod:`skgpstruct.datasets`, which read named files.
    Errors raised inside the block with the temporary name in their message
    are re-raised as :class:`CLIError` naming ``<stdin>`` instead.

    Parameters
    ----------
    path : str or path-like
        A file, or ``"-"``.

    Yields
    ------
    fname : str or path-like
    """
    if path != "-":
        yield path
        return
    fd, tmp = tempfile.mkstemp(prefix="skgpstruct-stdin-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(sys.stdin.buffer.read())
        try:
            yield tmp
        except (ValueError, OSError, CLIError) as exc:
            raise CLIError(one_line(exc).replace(tmp, "<stdin>")) from None
    finally:
        os.unlink(tmp)


def one_line(exc):
    """The message of an exception on one line, for stderr.

    Parameters
    ----------
    exc : BaseException
        The exception.

    Returns
    -------
    message : str
        Its message with runs of whitespace (newlines too) collapsed; for an
        :class:`OSError` about a file, ``"<file>: <reason>"``; the class name
        when the message is empty.

    Examples
    --------
    >>> one_line(ValueError("two\\n  lines"))
    'two lines'
    """
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{os.fspath(exc.filename)}: {exc.strerror}"
    return text or type(exc).__name__


def read_columns(text, source):
    """Sentences of a column file: one token a line, a blank line between sentences.

    Columns are separated by runs of spaces and tabs, as in CRF++; spaces and
    tabs at the ends of a line are ignored.

    Parameters
    ----------
    text : str
        The file's text (LF line ends).
    source : str
        The file's name, for error messages.

    Returns
    -------
    sentences : list of list of (int, tuple of str)
        Per sentence, each token's 1-based line number and columns.
    """
    sentences, current = [], []
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.strip(" \t")
        if not line:
            if current:
                sentences.append(current)
                current = []
            continue
        current.append((lineno, tuple(_COLUMN_SEP.split(line))))
    if current:
        sentences.append(current)
    if not sentences:
        raise CLIError(f"{_display(source)}: no sentence (empty, or blank lines only).")
    return sentences


def check_column_counts(sentences, source):
    """Refuse a column file whose token lines differ in their number of columns.

    Parameters
    ----------
    sentences : list of list of (int, tuple of str)
        :func:`read_columns`' output.
    source : str
        The file's name, for the message.

    Raises
    ------
    CLIError
        Naming the first line whose count differs from the first line's.
    """
    first_line, first = sentences[0][0]
    for sentence in sentences:
        for lineno, cols in sentence:
            if len(cols) != len(first):
                raise CLIError(
                    f"{_display(source)}, line {lineno}: {len(cols)} column(s), but "
                    f"line {first_line} has {len(first)}; every token line must have "
                    "the same number of columns."
                )


@contextlib.contextmanager
def relay_warnings(command, stream=None):
    """Print the warnings raised inside the block as one line each on stderr.

    ``skgpstruct <command>: warning: <Category>: <message>``, each distinct
    message once, instead of Python's two-line form with the source line.

    Parameters
    ----------
    command : str
        The subcommand, for the prefix.
    stream : file-like, default=None
        Where to print (``sys.stderr`` if None).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    seen = set()
    stream = sys.stderr if stream is None else stream
    for w in caught:
        text = f"{w.category.__name__}: {' '.join(str(w.message).split())}"
        if text not in seen:
            seen.add(text)
            print(f"skgpstruct {command}: warning: {text}", file=stream)
