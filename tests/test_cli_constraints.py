"""The command line's constraints and partial labels: ``skgpstruct train
--unknown-label TOKEN`` (a label equal to TOKEN is unknown) and ``skgpstruct
tag --allowed FILE`` (the labels each token may take), against the Python
API (``fit`` with None labels, ``allowed=``)."""

import itertools
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

from skgpstruct._cli import load_model
from skgpstruct._cli._constraints import mark_unknown, read_allowed
from skgpstruct._cli._train import build_pipeline
from skgpstruct.datasets import load_crfpp

from ._cli_helpers import TEMPLATE, TRAIN, files, parse_blocks, run  # noqa: F401

TINY = "He PRP\nreckons VBZ\nthe DT\n\nIt PRP\n"


def _tag(files, capsys, *options, data="tiny.data"):
    (files / "tiny.data").write_text(TINY)
    status, out, err = run(["tag", "-m", str(files / "m.skg"), *options,
                            str(files / data)], capsys)
    assert status == 0 and "Traceback" not in err, err
    return parse_blocks(out)


def _write(files, name, text):
    (files / name).write_text(text)
    return str(files / name)


# ------------------------------------------------------ train --unknown-label


def _partial_train(token):
    """TRAIN with the labels of a few tokens replaced by ``token``, and the
    positions replaced."""
    lines, hidden, k = [], [], 0
    for line in TRAIN.split("\n"):
        if line and k in (1, 4, 9, 15):
            line = line.rsplit(" ", 1)[0] + " " + token
            hidden.append(k)
        k += bool(line)
        lines.append(line)
    return "\n".join(lines), hidden


def test_unknown_label_trains_like_fit_with_none(files, capsys, tmp_path):
    text, hidden = _partial_train("?")
    train = _write(tmp_path, "partial.data", text)
    args = ["train", "--template", str(files / "template"), "--max-iter", "30",
            "--random-state", "0"]
    status, _, err = run([*args, "--unknown-label", "?", train, str(tmp_path / "p.skg")],
                         capsys)
    assert status == 0 and "Traceback" not in err
    model = load_model(tmp_path / "p.skg")
    assert model["classes"] == ["B", "I", "O"] and model["unknown_label"] == "?"
    # the same fit in Python, None at the hidden positions
    X, y = load_crfpp(files / "train.data")
    flat = [label for labels in y for label in labels]
    for k in hidden:
        flat[k] = None
    lengths = np.cumsum([0] + [len(labels) for labels in y])
    y_none = [flat[a:b] for a, b in zip(lengths[:-1], lengths[1:])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        expected = build_pipeline(TEMPLATE, "crf", max_iter=30, random_state=0).fit(X, y_none)
    assert_allclose(model["pipeline"][-1].coef_, expected[-1].coef_, rtol=1e-6, atol=1e-9)
    # without the option "?" is a fourth label, and the model another one
    status, _, _ = run([*args, train, str(tmp_path / "q.skg")], capsys)
    assert status == 0
    assert load_model(tmp_path / "q.skg")["classes"] == ["?", "B", "I", "O"]
    assert load_model(tmp_path / "q.skg")["unknown_label"] is None


def test_unknown_label_with_conllu(capsys, tmp_path):
    from .test_cli import CONLLU

    text = CONLLU.replace("\tDET\tDT\t", "\t?\tDT\t", 1)
    _write(tmp_path, "t.conllu", text)
    status, _, err = run(["train", "--format", "conllu", "--max-iter", "10",
                          "--unknown-label", "?", "-v", str(tmp_path / "t.conllu"),
                          str(tmp_path / "c.skg")], capsys)
    assert status == 0
    assert "(1 with an unknown label)" in err
    assert "?" not in load_model(tmp_path / "c.skg")["classes"]


def test_unknown_label_matching_nothing_or_everything(files, capsys, tmp_path):
    status, _, err = run(["train", "--max-iter", "5", "--unknown-label", "nosuch",
                          str(files / "train.data"), str(tmp_path / "m.skg")], capsys)
    assert status == 0
    assert "warning: no label of" in err and "'nosuch'" in err
    every = "\n".join(line.rsplit(" ", 1)[0] + " ?" if line else line
                      for line in TRAIN.split("\n"))
    status, _, err = run(["train", "--unknown-label", "?", _write(tmp_path, "a.data", every),
                          str(tmp_path / "n.skg")], capsys)
    assert status == 1 and "every label is --unknown-label '?'" in err
    assert "Traceback" not in err and not (tmp_path / "n.skg").exists()


def test_mark_unknown_default_changes_nothing():
    y = [["B", "?"], ["O"]]
    assert mark_unknown(y, None) == (y, 0)
    assert mark_unknown(y, "?") == ([["B", None], ["O"]], 1)


# ------------------------------------------------------------ tag --allowed


def test_allowed_forces_a_label(files, capsys):
    plain = _tag(files, capsys)
    assert plain[0][1][1][-1] != "I"  # "reckons" is not tagged I without the constraint
    allowed = _write(files, "force.txt", "*\nI\n*\n\n*\n")
    blocks = _tag(files, capsys, "--allowed", allowed)
    assert blocks[0][1][1][-1] == "I"
    # the Python API's constrained prediction; sentence 2 unconstrained
    model = load_model(files / "m.skg")
    X = [[tuple(line.split())] for line in TINY.split("\n") if line]
    X = [X[0] + X[1] + X[2], X[3]]
    expected = model["pipeline"].predict(X, allowed=[[None, "I", None], None])
    assert [[r[-1] for r in rows] for _, rows in blocks] == [list(p) for p in expected]
    assert blocks[1] == plain[1]
    # -v1: the forced token's marginal is 1, the path probability conditional
    blocks = _tag(files, capsys, "-v1", "--allowed", allowed)
    assert blocks[0][1][1][-1] == "I/1"
    Xf = model["pipeline"][:-1].transform(X)
    p = model["pipeline"][-1].predict_path_proba(Xf, expected,
                                                 allowed=[[None, "I", None], None])
    assert_allclose([float(h[0]) for h, _ in blocks], p, rtol=1e-5)


def test_allowed_stars_change_nothing(files, capsys):
    stars = _write(files, "stars.txt", "*\n*\n*\n\n*\n")
    for options in ((), ("-v2",), ("-n", "3")):
        assert _tag(files, capsys, *options, "--allowed", stars) == _tag(files, capsys,
                                                                          *options)


def test_allowed_sets_and_nbest(files, capsys):
    # sentence 1: any, I, B or O (tab and space separated); sentence 2: O or I
    allowed = _write(files, "sets.txt", "*\nI\n  B\tO \n\nO\tI\t\n")
    blocks = _tag(files, capsys, "-n", "100", "--allowed", allowed)
    ok = [[set("BIO"), {"I"}, {"B", "O"}], [{"O", "I"}]]
    counts = [int(np.prod([len(s) for s in sets])) for sets in ok]
    assert len(blocks) == sum(counts) == 6 + 2  # every allowed path, no other
    first = 0
    for sets, count in zip(ok, counts):
        group = blocks[first:first + count]
        first += count
        assert [int(h[0]) for h, _ in group] == list(range(count))
        probs = [float(h[1]) for h, _ in group]
        assert probs == sorted(probs, reverse=True)
        assert_allclose(sum(probs), 1.0, rtol=1e-4)
        paths = [tuple(r[-1] for r in rows) for _, rows in group]
        assert set(paths) == set(itertools.product(*[sorted(s) for s in sets]))
    # the plain prediction and the marginals respect the sets too
    blocks = _tag(files, capsys, "-v2", "--allowed", allowed)
    for (_, rows), sets in zip(blocks, ok):
        for row, s in zip(rows, sets):
            assert row[2].split("/")[0] in s
            assert all(float(f.split("/")[1]) == 0 for f in row[3:]
                       if f.split("/")[0] not in s)


def test_allowed_from_stdin(files, capsys, monkeypatch):
    (files / "tiny.data").write_text(TINY)
    status, out, _ = run(["tag", "-m", str(files / "m.skg"), "--allowed", "-",
                          str(files / "tiny.data")], capsys,
                         stdin=b"*\r\nI\r\n*\r\n\r\n*\r\n", monkeypatch=monkeypatch)
    assert status == 0 and parse_blocks(out)[0][1][1][-1] == "I"


@pytest.mark.parametrize("text,message", [
    ("*\nI\n\n*\n", "line 2: sentence 1 has 2 token line(s), but sentence 1 of"),
    ("*\nI\n*\n*\n\n*\n", "line 4: sentence 1 has 4 token line(s), but sentence 1 of"),
    ("*\n*\n*\n\n*\nB\n", "line 6: sentence 2 has 2 token line(s), but sentence 2 of"),
    ("*\n*\n*\n\n*\n\nB\n", "line 7: sentence 3 begins, but"),
    ("*\n*\n*\n", "line 4: the file ends after 1 sentence(s), but"),
    ("", "line 1: the file ends after 0 sentence(s), but"),
    ("*\nQ\n*\n\n*\n", "line 2 (sentence 1, token 2): 'Q' is not a label of the "
                       "model (B, I, O)"),
    ("*\n*\n*\n\nB\tnope\n", "line 5 (sentence 2, token 1): 'nope' is not a label"),
    ("*\nB\t*\n*\n\n*\n", "line 2: '*' (any label) must stand alone"),
])
def test_allowed_errors(files, capsys, text, message):
    (files / "tiny.data").write_text(TINY)
    allowed = _write(files, "bad.txt", text)
    status, out, err = run(["tag", "-m", str(files / "m.skg"), "--allowed", allowed,
                            str(files / "tiny.data")], capsys)
    assert status == 1 and out == "" and "Traceback" not in err
    assert err.startswith("skgpstruct tag: error: ") and len(err.strip().split("\n")) == 1
    assert f"bad.txt, {message}" in err or f"bad.txt: {message}" in err, err


def test_allowed_and_input_cannot_both_be_stdin(files, capsys, monkeypatch):
    status, _, err = run(["tag", "-m", str(files / "m.skg"), "--allowed", "-", "-"],
                         capsys, stdin=b"He PRP\n", monkeypatch=monkeypatch)
    assert status == 1 and "cannot both be '-'" in err


def test_read_allowed_entries(tmp_path):
    path = _write(tmp_path, "a.txt", "*\nB\nB\tI\tB\n\n\n*\n")
    allowed, lines = read_allowed(path, [3, 1])
    assert allowed == [[None, "B", ["B", "I"]], None]  # an all-'*' sentence: None
    assert lines == [[1, 2, 3], [6]]


def test_allowed_with_the_gp_tagger(files, capsys, tmp_path):
    status, _, _ = run(["train", "--tagger", "gp", "--max-iter", "3", "--random-state",
                        "0", str(files / "train.data"), str(tmp_path / "g.skg")], capsys)
    assert status == 0
    (files / "tiny.data").write_text(TINY)
    allowed = _write(files, "gp.txt", "O\n*\nB\tI\n\nI\n")
    for options, n_paths in ((("-v1",), [1, 1]), (("-n", "5"), [5, 1])):
        status, out, err = run(["tag", "-m", str(tmp_path / "g.skg"), *options,
                                "--allowed", allowed, str(files / "tiny.data")], capsys)
        assert status == 0, err
        blocks = parse_blocks(out)
        assert len(blocks) == sum(n_paths)  # sentence 2 has one allowed path
        for k, (_, rows) in enumerate(blocks):
            labels = [r[-1].split("/")[0] for r in rows]
            if k < n_paths[0]:
                assert labels[0] == "O" and labels[2] in ("B", "I")
            else:
                assert labels == ["I"]
    model = load_model(tmp_path / "g.skg")
    X = [[("He", "PRP"), ("reckons", "VBZ"), ("the", "DT")], [("It", "PRP")]]
    best = model["pipeline"][-1].predict_nbest(model["pipeline"][:-1].transform(X), 5,
                                               allowed=[["O", None, ["B", "I"]], ["I"]])
    assert [len(seq) for seq in best] == [5, 1]
    assert [float(h[1]) for h, _ in blocks] == pytest.approx(
        [p for seq in best for _, p in seq], rel=1e-5)
    assert_array_equal([r[-1] for _, rows in blocks for r in rows],
                       np.concatenate([labels for seq in best for labels, _ in seq]))


def test_help_documents_the_options(capsys):
    status, out, _ = run(["tag", "--help"], capsys)
    assert status == 0 and "--allowed FILE" in out and "'*'" in out
    status, out, _ = run(["train", "--help"], capsys)
    assert status == 0 and "--unknown-label TOKEN" in out
