"""What every file reader of :mod:`skgpstruct.datasets` shares: the path
argument (one path or a list), reading a file's text with a clear error
that names the line of a bad byte, the lines of a text whatever its line
ends, and the column separator (blanks or tabs).
"""

import codecs
import os
import re


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


class _FileDecodeError(UnicodeDecodeError):
    """A :class:`UnicodeDecodeError` whose message names the file and the line.

    It stays a :class:`UnicodeDecodeError` (hence a :class:`ValueError`), with
    the usual ``encoding``, ``object``, ``start``, ``end`` and ``reason``.
    """

    def __str__(self):
        return getattr(self, "message", None) or super().__str__()


def _split_lines(text):
    """Lines of ``text``, ending at LF, CRLF or a lone CR (universal newlines).

    Unlike :meth:`str.splitlines`, form feeds, vertical tabs, U+0085, U+2028
    and the like stay inside the lines. A final line end yields a final
    empty string.
    """
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _read_text(fname, encoding, hint):
    """The decoded text of a file, without a leading byte-order mark.

    A UTF-8 byte-order mark is skipped when ``encoding`` is UTF-8 or ASCII,
    and a leading U+FEFF of the decoded text in any encoding (UTF-16's
    codecs consume their own mark). Undecodable bytes raise
    :class:`_FileDecodeError` naming the file, the line and ``hint``.
    """
    with open(fname, "rb") as f:
        data = f.read()
    if data.startswith(codecs.BOM_UTF8) and codecs.lookup(encoding).name in (
        "utf-8", "ascii",
    ):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        lines = _split_lines(data[:err.start].decode(encoding, errors="replace"))
        exc = _FileDecodeError(err.encoding, err.object, err.start, err.end,
                               err.reason)
        exc.detail = (  # the message without the hint (the CLI gives its own)
            f"{os.fspath(fname)}, line {len(lines)}: cannot decode "
            f"{data[err.start:err.end]!r} (character {len(lines[-1]) + 1} of "
            f"the line) as {encoding} ({err.reason})"
        )
        exc.message = f"{exc.detail}; {hint}"
        raise exc from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text
