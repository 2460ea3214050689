"""Tests of skgpstruct.datasets.load_conllu: the CoNLL-U reader."""

import re
from collections import Counter

import pytest
from sklearn.pipeline import make_pipeline

from skgpstruct import RandomizedCRFTagger
from skgpstruct.datasets import get_data_home, load_conllu
from skgpstruct.features import CRFppTemplate


def _line(*fields):
    return "\t".join(fields) + "\n"


def _word(i, form, upos, feats="_", lemma=None, xpos="_", misc="_"):
    return _line(str(i), form, form.lower() if lemma is None else lemma, upos,
                 xpos, feats, "0" if i == 1 else "1", "dep", "_", misc)


# Two sentences: comments, a multiword token (2-3), an empty node (3.1),
# "_" FEATS, an XPOS, a FORM with a space, and comments between sentences.
TINY = (
    "# newdoc id = d1\n"
    "# sent_id = 1\n"
    "# text = Dáme si kávé\n"
    + _word(1, "Dáme", "VERB", "Mood=Imp|Number=Plur", xpos="VB")
    + _line("2-3", "sikávé", "_", "_", "_", "_", "_", "_", "_", "_")
    + _word(2, "si", "PRON", "Case=Dat", xpos="PRP")
    + _word(3, "kávé", "NOUN", "Case=Acc|Number=Sing", xpos="NN")
    + _line("3.1", "chceme", "chtít", "VERB", "_", "_", "_", "_", "2:dep", "_")
    + _word(4, ".", "PUNCT", xpos="PUNCT", misc="SpaceAfter=No")
    + "\n"
    + "# sent_id = 2\n"
    + _word(1, "New York", "PROPN", "Number=Sing", lemma="New York", xpos="NNP")
    + _word(2, "!", "PUNCT")
    + "\n"
)

FORMS = [[("Dáme",), ("si",), ("kávé",), (".",)], [("New York",), ("!",)]]
UPOS = [["VERB", "PRON", "NOUN", "PUNCT"], ["PROPN", "PUNCT"]]
UPOS_FEATS = [
    ["VERB|Mood=Imp|Number=Plur", "PRON|Case=Dat", "NOUN|Case=Acc|Number=Sing",
     "PUNCT"],
    ["PROPN|Number=Sing", "PUNCT"],
]
FEATS = [["Mood=Imp|Number=Plur", "Case=Dat", "Case=Acc|Number=Sing", "_"],
         ["Number=Sing", "_"]]
XPOS = [["VB", "PRP", "NN", "PUNCT"], ["NNP", "_"]]


def _write(path, text, encoding="utf-8", newline=""):
    with open(path, "w", encoding=encoding, newline=newline) as f:
        f.write(text)
    return path


def _where(path, lineno):
    """Pattern of the 'file, line N:' start of an error message."""
    return re.escape(f"{path}, line {lineno}:")


# ---------------------------------------------------------------------------
# Accepted input
# ---------------------------------------------------------------------------


def test_default_reads_forms_and_upos_feats(tmp_path):
    X, y = load_conllu(_write(tmp_path / "tiny.conllu", TINY))
    assert X == FORMS
    assert y == UPOS_FEATS
    assert all(isinstance(t, tuple) and len(t) == 1 for s in X for t in s)


@pytest.mark.parametrize("tag, expected", [
    ("upos", UPOS), ("xpos", XPOS), ("feats", FEATS),
    ("upos_feats", UPOS_FEATS), ("UPOS", UPOS),
])
def test_tag_options(tmp_path, tag, expected):
    X, y = load_conllu(_write(tmp_path / "tiny.conllu", TINY), tag=tag)
    assert X == FORMS
    assert y == expected


def test_tag_callable_gets_the_raw_fields(tmp_path):
    seen = []

    def tag(word):
        seen.append(word)
        return word["lemma"] + "/" + word["misc"]

    _, y = load_conllu(_write(tmp_path / "tiny.conllu", TINY), tag=tag)
    assert y == [["dáme/_", "si/_", "kávé/_", "./SpaceAfter=No"],
                 ["New York/_", "!/_"]]
    # Only word lines reach the callable, with the ten fields as strings.
    assert len(seen) == 6
    assert list(seen[0]) == ["id", "form", "lemma", "upos", "xpos", "feats",
                             "head", "deprel", "deps", "misc"]
    assert seen[0] == {"id": "1", "form": "Dáme", "lemma": "dáme",
                       "upos": "VERB", "xpos": "VB",
                       "feats": "Mood=Imp|Number=Plur", "head": "0",
                       "deprel": "dep", "deps": "_", "misc": "_"}


@pytest.mark.parametrize("columns, first", [
    (("form",), ("Dáme",)),
    (("form", "lemma"), ("Dáme", "dáme")),
    (("Lemma", "FORM", "upos"), ("dáme", "Dáme", "VERB")),
    (("id", "xpos", "feats", "head", "deprel", "deps", "misc"),
     ("1", "VB", "Mood=Imp|Number=Plur", "0", "dep", "_", "_")),
    ("lemma", ("dáme",)),
])
def test_columns_choices(tmp_path, columns, first):
    X, y = load_conllu(_write(tmp_path / "tiny.conllu", TINY), columns=columns)
    assert X[0][0] == first
    assert [len(s) for s in X] == [4, 2]
    assert all(len(t) == len(first) for s in X for t in s)
    assert y == UPOS_FEATS


def test_list_of_paths_concatenates_in_order(tmp_path):
    f1 = _write(tmp_path / "1.conllu", TINY)
    f2 = _write(tmp_path / "2.conllu", _word(1, "Egy", "DET"))
    empty = _write(tmp_path / "empty.conllu", "# just a comment\n\n")
    X, y = load_conllu([f2, str(f1), empty, f2], tag="upos")
    assert X == [[("Egy",)]] + FORMS + [[("Egy",)]]
    assert y == [["DET"]] + UPOS + [["DET"]]


def test_crlf_bom_blank_lines_and_no_final_newline(tmp_path):
    text = "\n\n" + TINY.replace("\n\n", "\n\n\n \t\n")
    text = text.rstrip("\n")  # no final blank line nor line end
    fname = tmp_path / "crlf.conllu"
    fname.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    X, y = load_conllu(fname)
    assert X == FORMS
    assert y == UPOS_FEATS
    # Lone CRs too, and a BOM in UTF-16 (its codec consumes it).
    fname.write_bytes(text.replace("\n", "\r").encode("utf-16"))
    assert load_conllu(fname, encoding="utf-16") == (FORMS, UPOS_FEATS)


def test_fields_are_not_stripped(tmp_path):
    text = _line("1", " a b ", "a b", "X", "_", "_", "0", "root", "_", "x ")
    X, _ = load_conllu(_write(tmp_path / "sp.conllu", text),
                       columns=("form", "misc"))
    assert X == [[(" a b ", "x ")]]


def test_comment_inside_a_sentence_is_skipped(tmp_path):
    text = _word(1, "a", "X") + "# note\n" + _word(2, "b", "Y")
    X, y = load_conllu(_write(tmp_path / "c.conllu", text), tag="upos")
    assert X == [[("a",), ("b",)]]
    assert y == [["X", "Y"]]


# ---------------------------------------------------------------------------
# Refused input: the message names the file and the 1-based line
# ---------------------------------------------------------------------------

_GOOD = _word(1, "a", "X")


@pytest.mark.parametrize("text, lineno, match", [
    # wrong field count: 9, 11, spaces instead of tabs
    (_GOOD + "2\tb\tb\tX\t_\t_\t1\tdep\t_\n", 2, "9 TAB-separated field"),
    (_GOOD + _line("2", "b", "b", "X", "_", "_", "1", "dep", "_", "_", "x"), 2,
     "11 TAB-separated field"),
    ("# c\n" + _GOOD.replace("\t", " "), 2, "1 TAB-separated field"),
    # bad IDs
    (_GOOD + _line("x", "b", "b", "X", "_", "_", "1", "dep", "_", "_"), 2,
     "ID 'x' is not a positive integer"),
    (_line("0", "b", "b", "X", "_", "_", "1", "dep", "_", "_"), 1, "ID '0'"),
    (_line("01", "b", "b", "X", "_", "_", "1", "dep", "_", "_"), 1, "ID '01'"),
    (_line("-1", "b", "b", "X", "_", "_", "1", "dep", "_", "_"), 1, "ID '-1'"),
    (_line("1-", "b", "b", "X", "_", "_", "1", "dep", "_", "_"), 1, "ID '1-'"),
    (_line("1.0", "b", "b", "X", "_", "_", "1", "dep", "_", "_"), 1, "ID '1.0'"),
    (_line("١", "b", "b", "X", "_", "_", "1", "dep", "_", "_"), 1, "ID '١'"),
    # IDs not running 1, 2, 3, ...
    (_GOOD + _word(3, "c", "X"), 2, "ID 3, expected 2"),
    (_word(2, "b", "X"), 1, "ID 2, expected 1"),
    (_GOOD + "\n" + _GOOD + _GOOD, 4, "ID 1, expected 2"),
    # an empty field
    (_GOOD + _line("2", "b", "b", "", "_", "_", "1", "dep", "_", "_"), 2,
     r"field 4 \(UPOS\) is empty"),
    (_line("1", "", "b", "X", "_", "_", "1", "dep", "_", "_"), 1,
     r"field 2 \(FORM\) is empty"),
    # a sentence of skipped lines only
    ("# c\n" + _line("1-2", "ab", "_", "_", "_", "_", "_", "_", "_", "_")
     + "\n" + _GOOD, 2, "no word line"),
])
def test_malformed_line_names_file_and_line(tmp_path, text, lineno, match):
    fname = _write(tmp_path / "bad.conllu", text)
    with pytest.raises(ValueError, match=_where(fname, lineno) + ".*" + match):
        load_conllu(fname)


def test_error_in_second_file_names_that_file(tmp_path):
    f1 = _write(tmp_path / "ok.conllu", TINY)
    f2 = _write(tmp_path / "bad.conllu", "# c\n\n" + _word(2, "b", "X"))
    with pytest.raises(ValueError, match=_where(f2, 3) + ".*expected 1"):
        load_conllu([f1, f2])


@pytest.mark.parametrize("text", ["", "\n\n", "# only\n# comments\n", " \t\n"])
def test_no_sentence_names_the_files(tmp_path, text):
    f1 = _write(tmp_path / "e1.conllu", text)
    f2 = _write(tmp_path / "e2.conllu", "")
    with pytest.raises(ValueError, match=re.escape(f"No sentence found in {f1}")):
        load_conllu(f1)
    with pytest.raises(ValueError, match=re.escape(f"in {f1}, {f2}:")):
        load_conllu([f1, f2])


def test_undecodable_bytes_name_file_and_line(tmp_path):
    fname = tmp_path / "latin1.conllu"
    fname.write_bytes(_GOOD.encode() + _word(2, "café", "X").encode("latin-1"))
    with pytest.raises(UnicodeDecodeError, match=_where(fname, 2) + ".*decode"):
        load_conllu(fname)
    X, _ = load_conllu(fname, encoding="latin-1")
    assert X == [[("a",), ("café",)]]


@pytest.mark.parametrize("value", [None, 3, b"X", ["X"]])
def test_tag_callable_returning_a_non_str(tmp_path, value):
    fname = _write(tmp_path / "tiny.conllu", TINY)
    with pytest.raises(TypeError, match=_where(fname, 4) + ".*must return a str"):
        load_conllu(fname, tag=lambda word: value)
    # the error names the line of the word where it happens
    with pytest.raises(TypeError, match=_where(fname, 13)):
        load_conllu(fname, tag=lambda w: w["upos"] if w["form"] != "!" else value)


@pytest.mark.parametrize("columns", [("form", "gloss"), ("FORM", None), ()])
def test_unknown_column(tmp_path, columns):
    fname = _write(tmp_path / "tiny.conllu", TINY)
    match = ("id, form, lemma, upos, xpos, feats, head, deprel, deps, misc"
             if columns else "columns is empty")
    with pytest.raises(ValueError, match=match):
        load_conllu(fname, columns=columns)


@pytest.mark.parametrize("tag", ["pos", "upos+feats", None, 3])
def test_unknown_tag(tmp_path, tag):
    fname = _write(tmp_path / "tiny.conllu", TINY)
    with pytest.raises(ValueError, match="'upos', 'xpos', 'feats', 'upos_feats'"):
        load_conllu(fname, tag=tag)


def test_bad_path_argument(tmp_path):
    with pytest.raises(ValueError, match="empty list"):
        load_conllu([])
    with pytest.raises(TypeError, match="path must be"):
        load_conllu(3)
    with pytest.raises(FileNotFoundError):
        load_conllu(tmp_path / "missing.conllu")


# ---------------------------------------------------------------------------
# With the features and a tagger
# ---------------------------------------------------------------------------


def test_output_feeds_crfpp_template_and_tagger(tmp_path):
    sentences = (
        _word(1, "a", "DET", "Definite=Def") + _word(2, "kutya", "NOUN", "Case=Nom")
        + _word(3, ".", "PUNCT") + "\n"
        + _word(1, "a", "DET", "Definite=Def") + _word(2, "macska", "NOUN", "Case=Nom")
        + _word(3, ".", "PUNCT") + "\n"
        + _word(1, "kutya", "NOUN", "Case=Nom") + _word(2, ".", "PUNCT") + "\n"
    )
    X, y = load_conllu(_write(tmp_path / "train.conllu", sentences * 3))
    features = CRFppTemplate("U00:%x[0,0]\nU01:%x[-1,0]\nB\n")
    Xf = features.fit_transform(X)
    assert [x.shape[0] for x in Xf] == [len(s) for s in X]
    model = make_pipeline(CRFppTemplate("U00:%x[0,0]\nU01:%x[-1,0]\n"),
                          RandomizedCRFTagger(random_state=0, max_iter=50))
    model.fit(X, y)
    pred = model.predict(X)
    assert [list(p) for p in pred] == y
    # columns=("form", "lemma") gives two columns to %x[0,1]
    X2, _ = load_conllu(tmp_path / "train.conllu", columns=("form", "lemma"))
    vec = CRFppTemplate("U00:%x[0,0]/%x[0,1]\n").fit(X2)
    assert vec.n_columns_ == 2
    assert "U00:kutya/kutya" in vec.vocabulary_


# ---------------------------------------------------------------------------
# The real treebank (UD Hungarian-Szeged), when the data is there
# ---------------------------------------------------------------------------

_UD_DIR = get_data_home() / "ud" / "hu_szeged"


@pytest.mark.skipif(not (_UD_DIR / "hu_szeged-ud-train.conllu").is_file(),
                    reason="UD Hungarian-Szeged not found under get_data_home()")
@pytest.mark.parametrize("split, n_sentences, n_tokens, n_tags", [
    ("train", 910, 20166, 444), ("dev", 441, 11418, None),
    ("test", 449, 10448, None),
])
def test_hu_szeged(split, n_sentences, n_tokens, n_tags):
    X, y = load_conllu(_UD_DIR / f"hu_szeged-ud-{split}.conllu")
    assert len(X) == len(y) == n_sentences
    assert sum(len(s) for s in X) == sum(len(s) for s in y) == n_tokens
    assert all(len(a) == len(b) for a, b in zip(X, y))
    tags = Counter(t for s in y for t in s)
    if n_tags is not None:
        assert len(tags) == n_tags
    assert all(len(t) == 1 for s in X for t in s)
    upos = {t.split("|", 1)[0] for t in tags}
    assert upos <= {"ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN",
                    "NUM", "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM",
                    "VERB", "X"}
