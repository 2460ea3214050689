"""``skgpstruct eval``'s input: the gold and predicted labels of a tagged
file, or of a labelled file and a file of predictions.

A file printed by ``skgpstruct tag -v1`` / ``-v2`` (or ``crf_test``'s)
starts every sentence with a ``# <p>`` line, and its prediction is a
``<label>/<p>`` column, followed under ``-v2`` by one such column per
label. Such a file is recognised as a whole: every sentence starts with a
``# <p>`` line and every token line ends in ``<label>/<p>`` columns. A
``#`` token of a plain file (a gold label that is a number) stays a token.
N-best output (``-n``: ``# <k> <p>`` lines, each sentence printed once per
path) is refused: it holds several predictions per sentence.
"""

from ._common import CLIError, check_column_counts, read_columns, read_input

__all__ = ["read_eval_input"]


def _number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _header(cols):
    """The fields after ``#`` of a ``# <p>`` / ``# <k> <p>`` line, else None."""
    if cols[0] != "#" or len(cols) not in (2, 3) or not all(map(_number, cols[1:])):
        return None
    return cols[1:]


def _is_scored(col):
    """Whether a column is ``<label>/<p>``, as ``tag -v1`` prints labels."""
    label, sep, p = col.rpartition("/")
    return bool(sep and label and _number(p))


def _n_scored(cols):
    """How many of the last columns are ``<label>/<p>``."""
    n = 0
    while n < len(cols) and _is_scored(cols[-1 - n]):
        n += 1
    return n


class _Labels:
    """One file of ``eval``'s input: its sentences' token lines, and which
    column holds the prediction (``-v1`` / ``-v2`` output: the first
    ``<label>/<p>`` column of the line's last ones, its ``/<p>`` cut off;
    else the last column)."""

    def __init__(self, path, encoding):
        self.source = "<stdin>" if path == "-" else str(path)
        sentences = read_columns(read_input(path, encoding), self.source)
        heads = [_header(s[0][1]) for s in sentences]
        self.scored = False
        if all(h is not None and len(s) > 1 for h, s in zip(heads, sentences)):
            if all(len(h) == 2 and float(h[0]).is_integer() for h in heads):
                raise CLIError(
                    f"{self.source}, line {sentences[0][0][0]}: n-best output (a "
                    "'# <k> <p>' line before each path); eval scores one prediction "
                    "per sentence: tag without -n."
                )
            if all(len(h) == 1 for h in heads) and all(
                    _n_scored(cols) for s in sentences for _, cols in s[1:]):
                sentences = [s[1:] for s in sentences]
                self.scored = True
        check_column_counts(sentences, self.source)
        self.sentences = sentences
        # -v2 adds a label/p column per label after the prediction: the
        # prediction is the first of the run of label/p columns every line
        # ends with (the fewest over the file, in case a gold label has a /)
        self.column = -1
        if self.scored:
            self.column = -min(_n_scored(cols) for s in sentences for _, cols in s)
        self.n_columns = len(sentences[0][0][1])

    def predicted(self):
        labels = [[cols[self.column] for _, cols in s] for s in self.sentences]
        if self.scored:
            labels = [[c.rpartition("/")[0] for c in s] for s in labels]
        return labels

    def before_prediction(self, k):
        """The ``k``-th column before the prediction, per sentence and token."""
        return [[cols[self.column - k] for _, cols in s] for s in self.sentences]


def read_eval_input(gold_path, pred_path=None, encoding="utf-8"):
    """Gold and predicted labels of ``skgpstruct eval``'s input.

    One file: its last two columns are the gold and the predicted label
    (``skgpstruct tag`` / ``crf_test`` on labelled data, as conlleval reads
    it); with ``tag -v1`` / ``-v2`` output, the gold label and the label of
    the prediction's ``<label>/<p>`` column. Two files: the last column of
    each (the prediction's label, for ``-v1`` / ``-v2`` output), with the
    same sentences and tokens (the first columns must agree when both files
    have a column besides the labels). Every token line of a file has the
    same number of columns.

    Parameters
    ----------
    gold_path : str or path-like
        The file (``"-"`` for stdin).
    pred_path : str or path-like, default=None
        The file of predictions, if separate.
    encoding : str, default="utf-8"
        The files' text encoding.

    Returns
    -------
    y_true, y_pred : list of list of str
        The gold and predicted labels, per sentence and token.

    Raises
    ------
    CLIError
        For n-best output, a file whose token lines differ in their number
        of columns, a single file with one column, or two files whose
        sentences or tokens differ.
    """
    gold = _Labels(gold_path, encoding)
    if pred_path is None:
        if gold.n_columns + gold.column < 1:
            line = gold.sentences[0][0][0]
            raise CLIError(
                f"{gold.source}, line {line}: no column before the prediction; with "
                "one file the last two columns are the gold and the predicted label."
            )
        return gold.before_prediction(1), gold.predicted()
    if gold.scored:
        raise CLIError(
            f"{gold.source} is tag -v1 / -v2 output: give the labelled file as GOLD "
            "and the predictions as PRED."
        )
    pred = _Labels(pred_path, encoding)
    if len(pred.sentences) != len(gold.sentences):
        raise CLIError(f"{gold.source} has {len(gold.sentences)} sentences but "
                       f"{pred.source} has {len(pred.sentences)}.")
    for k, (g, p) in enumerate(zip(gold.sentences, pred.sentences)):
        if len(g) != len(p):
            raise CLIError(
                f"sentence {k + 1} has {len(g)} tokens in {gold.source} (line {g[0][0]}) "
                f"but {len(p)} in {pred.source} (line {p[0][0]})."
            )
    if gold.n_columns > 1 and pred.n_columns + pred.column > 0:
        for g, p in zip(gold.sentences, pred.sentences):
            for (g_line, g_cols), (p_line, p_cols) in zip(g, p):
                if g_cols[0] != p_cols[0]:
                    raise CLIError(
                        f"{gold.source}, line {g_line} has the token {g_cols[0]!r} but "
                        f"{pred.source}, line {p_line} has {p_cols[0]!r}: the files "
                        "must hold the same sentences."
                    )
    return gold.predicted(), pred.predicted()
