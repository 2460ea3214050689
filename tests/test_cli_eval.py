"""``skgpstruct eval``: conlleval's chunks and the input it reads (one file
or two; plain, ``-v1`` / ``-v2`` output)."""

import pytest
from numpy.testing import assert_allclose

from skgpstruct._cli import chunk_scores, conlleval_chunks

from ._cli_helpers import TRAIN, files, run  # noqa: F401



@pytest.mark.parametrize("tags,chunks", [
    ([], []),
    (["O", "O"], []),
    (["B-NP", "I-NP", "O"], [(0, 2, "NP")]),
    (["I-NP", "I-NP"], [(0, 2, "NP")]),                  # IOB1: I starts a chunk
    (["O", "I-NP", "B-NP", "I-NP"], [(1, 2, "NP"), (2, 4, "NP")]),
    (["B-NP", "I-VP", "I-VP"], [(0, 1, "NP"), (1, 3, "VP")]),  # type change
    (["B-NP", "B-NP", "O", "I-PP"], [(0, 1, "NP"), (1, 2, "NP"), (3, 4, "PP")]),
    (["B", "I", "O", "I", "B"], [(0, 2, ""), (3, 4, ""), (4, 5, "")]),
    (["B-A-B", "I-A-B"], [(0, 2, "A-B")]),                # hyphen inside a type
])
def test_conlleval_chunks(tags, chunks):
    assert conlleval_chunks(tags) == chunks


def test_chunk_scores_by_hand():
    gold = [["B-NP", "I-NP", "O", "B-VP"], ["B-NP", "O"]]
    pred = [["B-NP", "I-NP", "O", "B-NP"], ["I-NP", "O"]]
    s = chunk_scores(gold, pred)
    # gold chunks: NP(0,2) VP(3,4) | NP(0,1); predicted: NP(0,2) NP(3,4) | NP(0,1)
    assert s["overall"]["found_gold"] == 3 and s["overall"]["found_pred"] == 3
    assert s["overall"]["correct"] == 2
    assert_allclose(s["overall"]["precision"], 200 / 3)
    assert_allclose(s["overall"]["f1"], 200 / 3)
    assert s["per_type"]["NP"]["correct"] == 2 and s["per_type"]["NP"]["found_pred"] == 3
    assert_allclose(s["per_type"]["NP"]["recall"], 100.0)
    assert_allclose(s["per_type"]["NP"]["f1"], 80.0)
    assert s["per_type"]["VP"]["f1"] == 0.0 and s["per_type"]["VP"]["found_gold"] == 1


EVAL = """\
Rockwell NNP B-NP B-NP
International NNP I-NP O
Corp. NNP I-NP I-NP
said VBD B-VP B-VP

It PRP B-NP B-NP
signed VBD B-VP I-VP
"""


def test_eval_one_file_by_hand(capsys, tmp_path):
    (tmp_path / "r.txt").write_text(EVAL)
    status, out, err = run(["eval", str(tmp_path / "r.txt")], capsys)
    assert status == 0 and err == ""
    # 6 tokens, 4 right (not International, signed); gold chunks NP(0,3)
    # VP(3,4) | NP VP (4); found NP(0,1) NP(2,3) [I after O] VP(3,4) | NP
    # VP [I-VP after B-NP: a type change] (5); correct VP(3,4) | NP VP (3)
    assert "6 tokens, 2 sentences; token accuracy: 66.67%" in out
    assert "processed 6 tokens with 4 phrases; found: 5 phrases; correct: 3." in out
    p, r = 60.0, 75.0
    assert f"precision:  {p:5.2f}%; recall:  {r:5.2f}%; FB1:  {2 * p * r / (p + r):5.2f}" \
        in out
    assert "NP: precision:  33.33%; recall:  50.00%; FB1:  40.00  3" in out
    assert "VP: precision: 100.00%; recall: 100.00%; FB1: 100.00  2" in out
    assert "B-NP" in out and "f1-score" in out  # sklearn's per-label report


def test_eval_two_files_and_tag_output(files, capsys, tmp_path):
    status, out, _ = run(["tag", "-m", str(files / "m.skg"), str(files / "train.data")],
                         capsys)
    status, empty, _ = run(["tag", "-m", str(files / "m.skg"), "-o",
                            str(tmp_path / "pred.txt"), str(files / "train.data")], capsys)
    assert status == 0 and empty == "" and (tmp_path / "pred.txt").read_text() == out
    status1, one, _ = run(["eval", str(tmp_path / "pred.txt")], capsys)
    status2, two, _ = run(["eval", str(files / "train.data"), str(tmp_path / "pred.txt")],
                          capsys)
    assert status1 == status2 == 0 and one == two
    assert "token accuracy: 100.00%" in one and "FB1: 100.00" in one
    (tmp_path / "short.txt").write_text("He B\n")
    status, _, err = run(["eval", str(files / "train.data"), str(tmp_path / "short.txt")],
                         capsys)
    assert status == 1 and "3 sentences" in err


@pytest.mark.parametrize("verbose", ["-v1", "-v2"])
def test_eval_reads_verbose_tag_output(files, capsys, tmp_path, verbose):
    """-v1 / -v2 output: the '# p' lines skipped, the label/p prediction's
    label scored (not the whole column, nor -v2's last label/p column)."""
    (tmp_path / "test.data").write_text(TRAIN.replace("B\n", "I\n", 2))
    scores = {}
    for v in ("-v0", verbose):
        out_file = tmp_path / f"pred{v}.txt"
        run(["tag", "-m", str(files / "m.skg"), v, "-o", str(out_file),
             str(tmp_path / "test.data")], capsys)
        status, one, err = run(["eval", str(out_file)], capsys)
        status2, two, _ = run(["eval", str(tmp_path / "test.data"), str(out_file)], capsys)
        assert status == status2 == 0 and err == "" and one == two
        scores[v] = one
    assert "token accuracy: 100.00%" not in scores["-v0"]  # the two changed labels
    assert scores[verbose] == scores["-v0"]
    # the verbose file as GOLD of two files: its last column is no gold label
    status, _, err = run(["eval", str(out_file), str(tmp_path / "test.data")], capsys)
    assert status == 1 and "give the labelled file as GOLD" in err


def test_eval_refuses_nbest_output(files, capsys, tmp_path):
    run(["tag", "-m", str(files / "m.skg"), "-n", "2", "-o", str(tmp_path / "nbest.txt"),
         str(files / "train.data")], capsys)
    status, out, err = run(["eval", str(tmp_path / "nbest.txt")], capsys)
    assert status == 1 and out == "" and "n-best output" in err and "line 1" in err


def test_eval_checks_the_columns_and_tokens(files, capsys, tmp_path):
    (tmp_path / "ragged.txt").write_text("a X B B\nb X I\n")
    status, _, err = run(["eval", str(tmp_path / "ragged.txt")], capsys)
    assert status == 1 and "ragged.txt, line 2: 3 column(s), but line 1 has 4" in err
    gold = files / "train.data"
    other = tmp_path / "other.txt"  # the same labels on other tokens
    other.write_text("\n".join(" ".join(["w" + c[0]] + c[1:]) if c else ""
                               for c in (line.split() for line in TRAIN.split("\n"))))
    status, _, err = run(["eval", str(gold), str(other)], capsys)
    assert status == 1 and "must hold the same sentences" in err and "line 1" in err
    # a file of labels only is not compared token by token
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(line.split()[-1] if line else ""
                                for line in TRAIN.split("\n")))
    status, out, _ = run(["eval", str(gold), str(labels)], capsys)
    assert status == 0 and "token accuracy: 100.00%" in out


def test_eval_hash_token_with_a_numeric_label_is_a_token(capsys, tmp_path):
    """'# 3' is a crf_test header only when the file is -v1 output; in a
    plain file it is the token '#' with the label 3."""
    (tmp_path / "g.txt").write_text("# 3 3\nx 4 5\n\n# 3 4\n")
    status, out, err = run(["eval", str(tmp_path / "g.txt")], capsys)
    assert status == 0 and "3 tokens, 2 sentences; token accuracy: 33.33%" in out


def test_eval_non_iob_tags(capsys, tmp_path):
    (tmp_path / "pos.txt").write_text("the DT DT\ndog NN VB\n")
    status, out, _ = run(["eval", str(tmp_path / "pos.txt")], capsys)
    assert status == 0 and "50.00%" in out and "not scored" in out
