"""Loaders under malformed and fuzzed input: load_crfpp, load_gpstruct and
CRFppTemplate.from_file either parse a file in a documented way or raise a
ValueError naming the file and the line; nothing else escapes.

All files are built in temporary folders (no shared data).
"""

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from skgpstruct.datasets import load_crfpp, load_gpstruct
from skgpstruct.features import CRFppTemplate

BOM = b"\xef\xbb\xbf"

# ---------------------------------------------------------------------------
# load_crfpp: table of malformed inputs
# ---------------------------------------------------------------------------

TWO_SENTENCES = (
    [[("a", "X"), ("b", "Y")], [("c", "Z")]],
    [["B", "I"], ["O"]],
)

CRFPP_ACCEPTED = [
    ("lf", b"a X B\nb Y I\n\nc Z O\n", TWO_SENTENCES),
    ("crlf", b"a X B\r\nb Y I\r\n\r\nc Z O\r\n", TWO_SENTENCES),
    ("lone_cr", b"a X B\rb Y I\r\rc Z O\r", TWO_SENTENCES),
    ("mixed_line_ends", b"a X B\r\nb Y I\n\rc Z O", TWO_SENTENCES),
    ("bom", BOM + b"a X B\nb Y I\n\nc Z O\n", TWO_SENTENCES),
    ("bom_crlf", BOM + b"a X B\r\nb Y I\r\n\r\nc Z O\r\n", TWO_SENTENCES),
    ("no_final_newline", b"a X B\nb Y I\n\nc Z O", TWO_SENTENCES),
    ("trailing_blanks", b"a X B \t\nb Y I\t\n \t\nc Z O  \n", TWO_SENTENCES),
    ("leading_blanks", b"\ta X B\n  b Y I\n\n c Z O\n", TWO_SENTENCES),
    ("tabs_and_space_runs", b"a\tX  B\nb \t Y\tI\n\nc\t\tZ O\n", TWO_SENTENCES),
    (
        "blank_lines_around",
        b"\n\n \n\t\na X B\nb Y I\n\n\n \t \n\nc Z O\n\n\n",
        TWO_SENTENCES,
    ),
    ("trailing_whitespace_lines", b"a X B\nb Y I\n\nc Z O\n   \n\t\n", TWO_SENTENCES),
    # Only spaces and tabs separate columns: other whitespace, a NUL byte and
    # a U+FEFF that does not start the file belong to the columns.
    (
        "other_whitespace_in_columns",
        b"a\x0cb X B\nc\x00 Y\xe3\x80\x80Z I\n\xef\xbb\xbfd W O\n",
        (
            [[("a\x0cb", "X"), ("c\x00", "Y\u3000Z"), ("\ufeffd", "W")]],
            [["B", "I", "O"]],
        ),
    ),
    ("one_token", b"a X B", ([[("a", "X")]], [["B"]])),
    ("two_columns", b"a B\n\nb O\n", ([[("a",)], [("b",)]], [["B"], ["O"]])),
]


@pytest.mark.parametrize(
    "content, expected",
    [pytest.param(c, e, id=i) for i, c, e in CRFPP_ACCEPTED],
)
def test_load_crfpp_accepts(tmp_path, content, expected):
    fname = tmp_path / "ok.data"
    fname.write_bytes(content)
    X, y = load_crfpp(fname)
    assert (X, y) == expected


CRFPP_REFUSED = [
    ("empty", b"", r"No sequence found in .*empty\.data: empty"),
    ("blank_lines_only", b"\n\n", r"No sequence found in .*empty\.data"),
    ("whitespace_lines_only", b" \n\t\r\n  \r", r"No sequence found in .*empty\.data"),
    ("bom_only", BOM, r"No sequence found in .*empty\.data"),
    ("bom_and_crlf_only", BOM + b"\r\n\r\n", r"No sequence found in .*empty\.data"),
    (
        "ragged_fewer",
        b"a X B\nb I\n",
        r"bad\.data, line 2: 2 columns, but line 1 of .*bad\.data has 3",
    ),
    (
        "ragged_more_next_sentence",
        b"a X B\n\nb Y Z I\n",
        r"bad\.data, line 3: 4 columns, but line 1 of .*bad\.data has 3",
    ),
    (
        "ragged_after_bom_crlf_blank",
        BOM + b"\r\n\r\na X B\r\n\r\nb Y Z I\r\n",
        r"bad\.data, line 5: 4 columns, but line 3 of .*bad\.data has 3",
    ),
    (
        "ragged_lone_cr_counts_as_line_end",
        b"a X B\rb Y I\r\rc Z\r",
        r"bad\.data, line 4: 2 columns, but line 1",
    ),
    ("single_column", b"a\nb\n", r"bad\.data, line 1: 1 column; a token line"),
    ("single_column_later", b"a X B\n\nc\n", r"bad\.data, line 3: 1 column"),
    (
        "undecodable_byte",
        b"a X B\n\nb \xff I\n",
        r"bad\.data, line 3: cannot decode b'\\xff' \(character 3 of the line\) "
        r"as utf-8",
    ),
    (
        "undecodable_after_bom_crlf",
        BOM + b"a X B\r\nb Y I\r\n\r\nc\xc3 Z O\r\n",
        r"bad\.data, line 4: cannot decode b'\\xc3' \(character 2",
    ),
    (
        "truncated_utf8_at_end",
        b"a X B\nb Y \xe3\x80",
        r"bad\.data, line 2: cannot decode",
    ),
]


@pytest.mark.parametrize(
    "content, match",
    [pytest.param(c, m, id=i) for i, c, m in CRFPP_REFUSED],
)
def test_load_crfpp_refuses(tmp_path, content, match):
    name = "empty.data" if match.startswith("No sequence") else "bad.data"
    fname = tmp_path / name
    fname.write_bytes(content)
    with pytest.raises(ValueError, match=match):
        load_crfpp(fname)


def test_load_crfpp_decode_error_is_a_unicode_error_naming_the_line(tmp_path):
    fname = tmp_path / "latin.data"
    fname.write_bytes("a X B\n\ncaf\u00e9 N O\n".encode("latin-1"))
    with pytest.raises(UnicodeDecodeError) as info:
        load_crfpp(fname)
    assert isinstance(info.value, ValueError)
    assert re.search(r"latin\.data, line 3: .*encoding=", str(info.value))
    # With the right encoding the file reads.
    X, y = load_crfpp(fname, encoding="latin-1")
    assert X == [[("a", "X")], [("caf\u00e9", "N")]] and y == [["B"], ["O"]]


def test_load_crfpp_file_list_edge_cases(tmp_path):
    # An empty file in a list adds no sentence; a sentence never spans files;
    # the ragged check runs across files and names both.
    (tmp_path / "1.data").write_bytes(BOM + b"a X B\r\nb Y I")
    (tmp_path / "2.data").write_bytes(b"\n\n")
    (tmp_path / "3.data").write_bytes(b"c Z O\n")
    X, y = load_crfpp([tmp_path / n for n in ("1.data", "2.data", "3.data")])
    assert (X, y) == TWO_SENTENCES
    (tmp_path / "4.data").write_bytes(b"\nd O\n")
    with pytest.raises(
        ValueError, match=r"4\.data, line 2: 2 columns, but line 1 of .*1\.data has 3"
    ):
        load_crfpp([tmp_path / "1.data", tmp_path / "4.data"])
    with pytest.raises(ValueError, match=r"No sequence found in .*2\.data, .*2\.data"):
        load_crfpp([tmp_path / "2.data", tmp_path / "2.data"])


# ---------------------------------------------------------------------------
# CRFppTemplate: template files and %x[row,col] out of range
# ---------------------------------------------------------------------------

SENTENCE = [("a", "X"), ("b", "Y")]

TEMPLATE_ACCEPTED = [
    ("crlf_bom", BOM + b"# t\r\nU00:%x[0,0]\r\n\r\nB\r\n", ["U00:a", "U00:b"]),
    ("lone_cr", b"U00:%x[0,0]\rU01:%x[0,1]\r", ["U00:a", "U00:b", "U01:X", "U01:Y"]),
    ("no_final_newline", b"U00:%x[0,1]", ["U00:X", "U00:Y"]),
    ("blank_and_whitespace_lines", b"\n  \n\t\nU00:%x[0,0]\n \t\n", ["U00:a", "U00:b"]),
    # Rows beyond the sentence read CRF++'s padding, up to 8 either way.
    (
        "rows_beyond_sentence",
        b"U00:%x[-2,1]\nU01:%x[3,0]\nU02:%x[8,0]/%x[-8,1]\n",
        [
            "U00:_B-1", "U00:_B-2", "U01:_B+2", "U01:_B+3",
            "U02:_B+7/_B-8", "U02:_B+8/_B-7",
        ],
    ),
]


@pytest.mark.parametrize(
    "content, names",
    [pytest.param(c, n, id=i) for i, c, n in TEMPLATE_ACCEPTED],
)
def test_template_file_accepts(tmp_path, content, names):
    fname = tmp_path / "template"
    fname.write_bytes(content)
    vec = CRFppTemplate.from_file(fname).fit([SENTENCE])
    assert vec.get_feature_names_out().tolist() == names


def test_template_rows_beyond_sentence_exact_matrix(tmp_path):
    fname = tmp_path / "template"
    fname.write_bytes(b"U00:%x[-2,1]\nU01:%x[3,0]\n")
    Xt = CRFppTemplate.from_file(fname).fit_transform([SENTENCE])
    # Columns U00:_B-1, U00:_B-2, U01:_B+2, U01:_B+3.
    np.testing.assert_array_equal(Xt[0].toarray(), [[0, 1, 1, 0], [1, 0, 0, 1]])


TEMPLATE_REFUSED = [
    (
        "row_offset_beyond_crfpp_range",
        b"U00:%x[0,0]\nU01:%x[9,0]\n",
        r"tpl, line 2 \('U01:%x\[9,0\]'\): row offset 9 is outside CRF\+\+'s range",
    ),
    (
        "negative_row_beyond_range_after_crlf_bom",
        BOM + b"# c\r\n\r\nU01:%x[-12,0]\r\n",
        r"tpl, line 3 \('U01:%x\[-12,0\]'\): row offset -12",
    ),
    (
        "malformed_macro",
        b"U00:%x[0,0]\n\nU02:%x[0]\n",
        r"tpl, line 3 \('U02:%x\[0\]'\), character 5: '%' must start a macro",
    ),
    ("negative_column", b"U00:%x[0,-1]\n", r"tpl, line 1 .*character 5: '%'"),
    ("leading_space", b"\n U00:%x[0,0]\n", r"tpl, line 2 .*must start with 'U'"),
    ("empty_file", b"", r"tpl: the template has no unigram \(U\) line"),
    ("comments_and_bigram_only", b"# c\r\nB\r\n", r"tpl: the template has no unigram"),
    ("bom_only", BOM, r"tpl: the template has no unigram"),
    ("undecodable", b"U00:%x[0,0]\nU01:\xff\n", r"tpl, line 2: cannot decode b'\\xff'"),
]


@pytest.mark.parametrize(
    "content, match",
    [pytest.param(c, m, id=i) for i, c, m in TEMPLATE_REFUSED],
)
def test_template_file_refuses(tmp_path, content, match):
    fname = tmp_path / "tpl"
    fname.write_bytes(content)
    with pytest.raises(ValueError, match=match):
        CRFppTemplate.from_file(fname)


def test_template_column_beyond_the_columns_is_an_error(tmp_path):
    data = tmp_path / "train.data"
    data.write_bytes(b"a X B\nb Y I\n\nc Z O\n")
    X, _ = load_crfpp(data)
    template = tmp_path / "template"
    template.write_bytes(b"U00:%x[0,0]\nU01:%x[1,2]\n")
    vec = CRFppTemplate.from_file(template)
    with pytest.raises(
        ValueError,
        match=r"Token 0 of sequence 0 has 2 column\(s\) but the template reads "
        r"column 2 in 'U01:%x\[1,2\]' \(columns are numbered from 0, the label "
        r"excluded\)",
    ):
        vec.fit(X)
    fitted = CRFppTemplate("U00:%x[0,1]").fit(X)
    with pytest.raises(ValueError, match=r"Token 1 of sequence 0 has 1 column"):
        fitted.transform([[("a", "X"), ("b",)]])


# ---------------------------------------------------------------------------
# load_gpstruct: table of malformed inputs
# ---------------------------------------------------------------------------

GP_BASE = {
    "1.x": b"1\t2\t1\n2\t1\t1\n",
    "1.y": b"0\n1\n",
    "2.x": b"1\t3\t1\n",
    "2.y": b"2\n",
}
GP_BASE_X = [[[0, 1, 0], [1, 0, 0]], [[0, 0, 1]]]
GP_BASE_Y = [[0, 1], [2]]


def _gp_dir(tmp_path, changes):
    d = tmp_path / "gp"
    d.mkdir()
    files = {**GP_BASE, **changes}
    for name, content in files.items():
        if content is not None:
            (d / name).write_bytes(content)
    return d


GP_ACCEPTED = [
    ("base", {}, GP_BASE_X, GP_BASE_Y),
    (
        "crlf_bom",
        {"1.x": BOM + b"1\t2\t1\r\n2\t1\t1\r\n", "1.y": BOM + b"0\r\n1\r\n"},
        GP_BASE_X, GP_BASE_Y,
    ),
    ("lone_cr", {"1.x": b"1\t2\t1\r2\t1\t1\r", "1.y": b"0\r1"}, GP_BASE_X, GP_BASE_Y),
    (
        "spaces_blanks_no_final_newline",
        {"1.x": b"\n 1  2 1 \n\n\t2\t1\t1.0\t\n \n", "1.y": b"\n0 \n\n 1"},
        GP_BASE_X, GP_BASE_Y,
    ),
    ("values_as_floats", {"2.x": b"1\t3\t1e0\n"}, GP_BASE_X, GP_BASE_Y),
    (
        "empty_x_is_a_sequence_without_features",
        {"2.x": b""},
        [[[0, 1], [1, 0]], [[0, 0]]], GP_BASE_Y,
    ),
    ("blank_x_too", {"2.x": b" \r\n\n"}, [[[0, 1], [1, 0]], [[0, 0]]], GP_BASE_Y),
    (
        "repeated_pair_adds_values",
        {"1.x": b"1\t2\t1\n1\t2\t1\n2\t1\t1\n"},
        [[[0, 2, 0], [1, 0, 0]], [[0, 0, 1]]], GP_BASE_Y,
    ),
    ("signed_labels", {"1.y": b"+0\n-1\n"}, GP_BASE_X, [[0, -1], [2]]),
]


@pytest.mark.parametrize(
    "changes, X_expected, y_expected",
    [pytest.param(c, x, y, id=i) for i, c, x, y in GP_ACCEPTED],
)
def test_load_gpstruct_accepts(tmp_path, changes, X_expected, y_expected):
    X, y = load_gpstruct(_gp_dir(tmp_path, changes))
    assert all(sp.isspmatrix_csr(x) and x.dtype == np.float64 for x in X)
    assert [x.toarray().tolist() for x in X] == X_expected
    assert all(s.dtype == np.int64 for s in y)
    assert [s.tolist() for s in y] == y_expected


GP_REFUSED = [
    ("x_two_fields", {"1.x": b"1\t2\t1\n2\t1\n"}, {},
     r"1\.x, line 2: 2 field\(s\), expected 3 numbers per line"),
    ("x_four_fields", {"2.x": b"\n\n1 3 1 1\n"}, {},
     r"2\.x, line 3: 4 field\(s\), expected 3"),
    ("x_token_zero", {"1.x": b"1\t2\t1\r\n0\t1\t1\r\n"}, {},
     r"1\.x, line 2: token index '0' is not an integer >= 1 \(indices are 1-based"),
    ("x_feature_float", {"2.x": b"1\t1.5\t1\n"}, {},
     r"2\.x, line 1: feature index '1\.5' is not an integer >= 1"),
    ("x_feature_negative", {"2.x": b"1\t-3\t1\n"}, {},
     r"2\.x, line 1: feature index '-3'"),
    ("x_index_too_long", {"2.x": b"1\t1234567890123456\t1\n"}, {},
     r"2\.x, line 1: feature index '1234567890123456' .*at most 15 digits"),
    ("x_value_nan", {"2.x": b"1\t3\tnan\n"}, {},
     r"2\.x, line 1: value 'nan' is not a finite number"),
    ("x_value_overflow", {"2.x": b"1\t3\t1e999\n"}, {},
     r"2\.x, line 1: value '1e999' is not a finite number"),
    ("x_text", {"1.x": BOM + b"1\t2\t1\nfoo\n"}, {},
     r"1\.x, line 2: 1 field\(s\), expected 3"),
    ("x_form_feed_is_not_a_separator", {"2.x": b"1\x0c3\t1\n"}, {},
     r"2\.x, line 1: 2 field\(s\)"),
    ("x_non_ascii", {"1.x": b"1\t2\t1\n2\t1\t1\xc3\xa9\n"}, {},
     r"1\.x, line 2: cannot decode b'\\xc3' \(character 6 of the line\) as ascii"),
    ("x_token_beyond_labels", {"2.x": b"1\t3\t1\n\n2\t3\t1\n"}, {},
     r"2\.x, line 3 refers to token 2, but .*2\.y has 1 label\(s\)"),
    ("x_feature_beyond_n_features", {"2.x": b"\n1\t3\t1\n"}, {"n_features": 2},
     r"2\.x, line 2: feature index 3 exceeds n_features=2"),
    ("all_x_empty", {"1.x": b"", "2.x": b"\n"}, {},
     r"No active feature in any \.x file of .*gp"),
    ("y_empty", {"2.y": b""}, {}, r"2\.y is empty"),
    ("y_blank_only", {"2.y": BOM + b"\r\n \r\n"}, {}, r"2\.y is empty"),
    ("y_float", {"1.y": b"0\n1.0\n"}, {},
     r"1\.y, line 2: label '1\.0' is not an integer"),
    ("y_two_per_line", {"1.y": b"0 1\n"}, {},
     r"1\.y, line 1: 2 fields, expected 1 number per line"),
    ("y_too_long", {"2.y": b"12345678901234567890\n"}, {},
     r"2\.y, line 1: label '12345678901234567890' is not an integer"),
    ("y_non_ascii", {"2.y": b"\xff\n"}, {}, r"2\.y, line 1: cannot decode b'\\xff'"),
    ("leading_zero_name", {"01.x": b"1\t1\t1\n"}, {},
     r"01\.x: the \.x files must be named 1\.x, 2\.x, \.\.\. without leading zeros"),
    ("gap", {"4.x": b"1\t1\t1\n"}, {}, r"numbered 1\.\.N without gaps; missing: \[3\]"),
]


@pytest.mark.parametrize(
    "changes, kwargs, match",
    [pytest.param(c, k, m, id=i) for i, c, k, m in GP_REFUSED],
)
def test_load_gpstruct_refuses(tmp_path, changes, kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_gpstruct(_gp_dir(tmp_path, changes), **kwargs)


def test_load_gpstruct_missing_y_stays_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"2\.y is missing"):
        load_gpstruct(_gp_dir(tmp_path, {"2.y": None}))


# ---------------------------------------------------------------------------
# Fuzz: random mutations of valid files
# ---------------------------------------------------------------------------

_INSERTIONS = [
    b" ", b"\t", b"  ", b"\t \t", b"\n", b"\r", b"\r\n", b"\n\n", BOM, b"\xff",
    b"\xc3", b"\xc3\xa9", b"\xe3\x80\x80", b"\x00", b"\x0c", b"\x0b", b"x",
    b"0", b"1", b"9", b"-", b"+", b".", b"e", b"%", b"%x[", b"]", b",", b"#",
    b"U", b"B", b"nan",
]


@st.composite
def _mutated(draw, base):
    """``base`` after a few random edits: byte insertions and deletions,
    duplicated or dropped lines, CRLF or CR line ends, a BOM, separators
    swapped between tab and spaces, the final line end removed."""
    data = bytes(base)
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(
            ["insert", "delete", "dup_line", "drop_line", "crlf", "cr", "bom",
             "sep", "chop_end"]
        ))
        if op == "insert":
            i = draw(st.integers(0, len(data)))
            data = data[:i] + draw(st.sampled_from(_INSERTIONS)) + data[i:]
        elif op == "delete" and data:
            i = draw(st.integers(0, len(data) - 1))
            j = draw(st.integers(i + 1, min(len(data), i + 4)))
            data = data[:i] + data[j:]
        elif op in ("dup_line", "drop_line"):
            lines = data.split(b"\n")
            k = draw(st.integers(0, len(lines) - 1))
            if op == "dup_line":
                lines.insert(k, lines[k])
            else:
                del lines[k]
            data = b"\n".join(lines)
        elif op in ("crlf", "cr"):
            ends = [m.start() for m in re.finditer(b"\n", data)]
            if ends:
                i = draw(st.sampled_from(ends))
                new = b"\r\n" if op == "crlf" else b"\r"
                data = data[:i] + new + data[i + 1:]
        elif op == "bom":
            data = BOM + data
        elif op == "sep":
            seps = [m.start() for m in re.finditer(b"[ \t]", data)]
            if seps:
                i = draw(st.sampled_from(seps))
                sep = draw(st.sampled_from([b"\t", b" ", b"  \t"]))
                data = data[:i] + sep + data[i + 1:]
        elif op == "chop_end":
            data = data.rstrip(b"\r\n")
    return data


_FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=200)

CRFPP_VALID = b"He PRP B\nreckons VBZ O\n\nThe DT B\ncurrent JJ I\naccount NN I\n\n"


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@_FUZZ
@given(content=_mutated(CRFPP_VALID))
def test_fuzz_load_crfpp(fuzz_dir, content):
    fname = fuzz_dir / "fuzz.data"
    fname.write_bytes(content)
    try:
        X, y = load_crfpp(fname)
    except ValueError as exc:
        assert "fuzz.data" in str(exc)
        return
    assert isinstance(X, list) and isinstance(y, list)
    assert len(X) == len(y) > 0
    widths = {len(tok) for x in X for tok in x}
    assert len(widths) == 1 and widths.pop() >= 1
    for x, labels in zip(X, y):
        assert len(x) == len(labels) > 0
        assert all(isinstance(tok, tuple) for tok in x)
        assert all(isinstance(v, str) and v for tok in x for v in tok)
        assert all(isinstance(lab, str) and lab for lab in labels)


TEMPLATE_VALID = b"# t\nU00:%x[-1,0]\nU01:%x[0,0]/%x[0,1]\nU02:%x[1,1]\n\nB\n"
TEMPLATE_X = [[("He", "PRP"), ("reckons", "VBZ")], [("It", "PRP")]]


@_FUZZ
@given(content=_mutated(TEMPLATE_VALID))
def test_fuzz_template_file(fuzz_dir, content):
    fname = fuzz_dir / "fuzz.template"
    fname.write_bytes(content)
    try:
        with warnings.catch_warnings():  # a mutated B line may hold a macro
            warnings.filterwarnings("ignore", "Bigram template line", UserWarning)
            Xt = CRFppTemplate.from_file(fname).fit_transform(TEMPLATE_X)
    except ValueError:
        return
    assert [x.shape[0] for x in Xt] == [2, 1]
    assert all(sp.isspmatrix_csr(x) for x in Xt)
    assert all(set(np.unique(x.data)) <= {1.0} for x in Xt)


@_FUZZ
@given(
    name=st.sampled_from(sorted(GP_BASE)),
    content=st.data(),
)
def test_fuzz_load_gpstruct(fuzz_dir, name, content):
    d = fuzz_dir / "gp"
    d.mkdir(exist_ok=True)
    for other, valid in GP_BASE.items():
        (d / other).write_bytes(valid)
    (d / name).write_bytes(content.draw(_mutated(GP_BASE[name])))
    try:
        X, y = load_gpstruct(d)
    except ValueError as exc:
        assert str(d) in str(exc)
        return
    assert len(X) == len(y) == 2
    n_features = {x.shape[1] for x in X}
    assert len(n_features) == 1 and n_features.pop() >= 1
    for x, labels in zip(X, y):
        assert sp.isspmatrix_csr(x) and x.dtype == np.float64
        assert labels.dtype == np.int64 and labels.ndim == 1
        assert x.shape[0] == labels.shape[0] > 0
        assert np.all(np.isfinite(x.data))
