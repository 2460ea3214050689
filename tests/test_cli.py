"""The command line: ``demo``, ``train``, ``tag`` (crf_test's output), model
files and exit statuses (``eval``: ``test_cli_eval.py``)."""

import io
import math
import subprocess
import sys
import warnings

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

import skgpstruct
from skgpstruct._cli import load_model
from skgpstruct._cli._tag import read_tag_input
from skgpstruct.chain import log_partition
from skgpstruct.cli import demo, main

# --------------------------------------------------------------------- demo


def test_demo_reports_crf_beating_per_token_model():
    buf = io.StringIO()
    errors = demo(n_sequences=120, n_classes=4, n_features=10, random_state=0, out=buf)
    text = buf.getvalue()
    assert "linear-chain CRF" in text and "logistic regression" in text
    crf = errors["linear-chain CRF (exact, L-BFGS, Viterbi)"]
    assert crf < errors["per-token logistic regression"]
    gp = errors["GPStructTagger (30 inducing points, L-BFGS)"]
    assert gp < errors["per-token logistic regression"]
    assert all(0 <= e <= 100 for e in errors.values())


def test_main_runs_demo(capsys):
    assert main(["demo", "--n-sequences", "40", "--n-classes", "3"]) == 0
    assert "token error" in capsys.readouterr().out


def test_module_entry_point_version():
    res = subprocess.run(
        [sys.executable, "-m", "skgpstruct", "--version"], capture_output=True, text=True
    )
    assert res.returncode == 0
    assert res.stdout.strip() == f"skgpstruct {skgpstruct.__version__}"


from ._cli_helpers import TEMPLATE, TRAIN, files, parse_blocks, run  # noqa: F401


# ----------------------------------------------------------------- usage


def test_help_has_examples(capsys):
    status, out, _ = run(["--help"], capsys)
    assert status == 0
    for word in ("train", "tag", "eval", "demo", "examples:", "exit status"):
        assert word in out
    for command in ("train", "tag", "eval"):
        status, out, _ = run([command, "--help"], capsys)
        assert status == 0 and "examples:" in out


def test_version_in_process(capsys):
    status, out, _ = run(["--version"], capsys)
    assert status == 0 and skgpstruct.__version__ in out


@pytest.mark.parametrize("argv", [
    [],
    ["nonsense"],
    ["tag", "file.txt"],                       # -m missing
    ["tag", "-m", "m.skg", "-v", "3", "f"],
    ["tag", "-m", "m.skg", "-n", "-1", "f"],
    ["train", "only_one_arg"],
    ["train", "--tagger", "gp", "--c2", "1", "a", "b"],
    ["train", "--tagger", "gp", "--c1", "1", "a", "b"],
    ["train", "--c1", "-1", "a", "b"],
    ["train", "--max-iter", "0", "a", "b"],
    ["eval"],
    ["demo", "--n-sequences", "1"],
])
def test_usage_errors_exit_2(argv, capsys):
    status, out, err = run(argv, capsys)
    assert status == 2
    assert "usage:" in err and "Traceback" not in err


@pytest.mark.parametrize("argv,message", [
    (["train", "--max-iter", "abc", "a", "b"], "--max-iter: must be an integer >= 1, got 'abc'"),
    (["train", "--c2", "x", "a", "b"], "--c2: must be a number >= 0, got 'x'"),
    (["tag", "-m", "m", "-n", "1.5", "f"], "--nbest: must be an integer >= 0, got '1.5'"),
    (["demo", "--n-sequences", "1"], "--n-sequences: must be an integer >= 2, got '1'"),
])
def test_bad_numbers_say_what_is_expected(argv, message, capsys):
    status, _, err = run(argv, capsys)
    assert status == 2 and message in err and "_positive" not in err


def test_demo_help_documents_its_options(capsys):
    status, out, _ = run(["demo", "--help"], capsys)
    assert status == 0
    for option in ("--n-sequences N", "--n-classes N", "--n-features N", "--random-state N"):
        assert option in out
    assert out.count("default:") == 4
    with pytest.raises(ValueError, match="n_sequences must be >= 2"):
        demo(n_sequences=1)


# ---------------------------------------------------------- train and tag


def test_train_c1_is_crfsuites_l1(files, tmp_path):
    # --c1 reaches the tagger: many weights exactly 0 (OWL-QN), none without
    d = files
    status = main(["train", "--template", str(d / "template"), "--c1", "1.0",
                   "--max-iter", "30", "--random-state", "0", str(d / "train.data"),
                   str(tmp_path / "l1.skg")])
    assert status == 0
    l1 = load_model(tmp_path / "l1.skg")["pipeline"][-1]
    plain = load_model(d / "m.skg")["pipeline"][-1]
    assert l1.c1 == 1.0 and plain.c1 == 0.0
    assert np.mean(l1.coef_ == 0) > 0.5 > np.mean(plain.coef_ == 0)


def test_model_file_metadata(files):
    model = load_model(files / "m.skg")
    assert model["version"] == skgpstruct.__version__
    assert model["template"] == TEMPLATE
    assert model["classes"] == ["B", "I", "O"]
    assert model["n_columns"] == 2 and model["format"] == "crfpp"
    assert model["tagger"] == "crf"
    assert model["command"].startswith("skgpstruct train --template")
    assert model["created"].endswith("+00:00")
    assert type(model["pipeline"][-1]).__name__ == "RandomizedCRFTagger"


def test_tag_output_layout(files, capsys):
    status, out, err = run(["tag", "-m", str(files / "m.skg"), str(files / "train.data")],
                           capsys)
    assert status == 0 and err == ""
    assert out.endswith("\n\n")
    blocks = parse_blocks(out)
    assert [len(rows) for _, rows in blocks] == [6, 8, 5]
    model = load_model(files / "m.skg")
    from skgpstruct.datasets import load_crfpp

    X, _ = load_crfpp(files / "train.data")
    expected = model["pipeline"].predict(X)
    for (header, rows), x, pred in zip(blocks, X, expected):
        assert header is None
        # every input column (the gold label too), then the prediction
        assert all(len(r) == 4 for r in rows)
        assert [tuple(r[:2]) for r in rows] == x
        assert [r[3] for r in rows] == list(pred)
    # the training data is learnt
    assert all(r[2] == r[3] for _, rows in blocks for r in rows)


def test_tag_stdin_without_gold_column(files, capsys, monkeypatch):
    text = "\n".join(" ".join(line.split()[:2]) for line in TRAIN.split("\n"))
    status, out, _ = run(["tag", "-m", str(files / "m.skg"), "-"], capsys,
                         stdin=text.encode(), monkeypatch=monkeypatch)
    assert status == 0
    rows = [r for _, rs in parse_blocks(out) for r in rs]
    assert len(rows) == 19 and all(len(r) == 3 for r in rows)
    status, full, _ = run(["tag", "-m", str(files / "m.skg"), str(files / "train.data")],
                          capsys)
    assert [r[2] for r in rows] == [r[3] for _, rs in parse_blocks(full) for r in rs]


def _potentials(model, X):
    tagger = model["pipeline"][-1]
    data = tagger._check_X(model["pipeline"][:-1].transform(X))
    U, B = tagger._decode_potentials(data)
    return data.split(U), B


def test_tag_v1_v2_layout_and_probabilities(files, capsys):
    model = load_model(files / "m.skg")
    classes = model["classes"]
    status, out1, _ = run(["tag", "-m", str(files / "m.skg"), "-v1",
                           str(files / "train.data")], capsys)
    status2, out2, _ = run(["tag", "-m", str(files / "m.skg"), "-v", "2",
                            str(files / "train.data")], capsys)
    assert status == status2 == 0
    from skgpstruct.datasets import load_crfpp

    X, _ = load_crfpp(files / "train.data")
    marginals = model["pipeline"].predict_proba(X)
    unaries, B = _potentials(model, X)
    for (h1, rows1), (h2, rows2), m, u in zip(parse_blocks(out1), parse_blocks(out2),
                                              marginals, unaries):
        assert len(h1) == 1 and h1 == h2
        labels = [r[3].split("/")[0] for r in rows1]
        path = np.array([classes.index(lab) for lab in labels])
        score = u[np.arange(len(path)), path].sum() + B[path[:-1], path[1:]].sum()
        assert_allclose(float(h1[0]), math.exp(score - log_partition(u, B)), rtol=1e-5)
        for t, (r1, r2) in enumerate(zip(rows1, rows2)):
            assert len(r1) == 4 and len(r2) == 4 + len(classes)
            assert r1 == r2[:4]
            assert_allclose(float(r1[3].split("/")[1]), m[t, path[t]], rtol=1e-5)
            assert [f.split("/")[0] for f in r2[4:]] == classes
            assert_allclose([float(f.split("/")[1]) for f in r2[4:]], m[t], rtol=1e-5,
                            atol=1e-12)


def test_tag_nbest(files, capsys):
    model = load_model(files / "m.skg")
    tiny = "He PRP\nreckons VBZ\nthe DT\n\nIt PRP\n"
    (files / "tiny.data").write_text(tiny)
    status, out, _ = run(["tag", "-m", str(files / "m.skg"), "-n", "100",
                          str(files / "tiny.data")], capsys)
    assert status == 0
    blocks = parse_blocks(out)
    # all 27 + 3 paths, numbered from 0 per sentence, best first
    assert len(blocks) == 27 + 3
    for first, count in ((0, 27), (27, 3)):
        headers = [b[0] for b in blocks[first:first + count]]
        assert [int(h[0]) for h in headers] == list(range(count))
        probs = np.array([float(h[1]) for h in headers])
        assert np.all(np.diff(probs) <= 1e-6)
        assert_allclose(probs.sum(), 1.0, rtol=1e-4)
        paths = {tuple(r[-1] for r in b[1]) for b in blocks[first:first + count]}
        assert len(paths) == count
    # the best path is the prediction; -n 2 -v1 prints marginals too
    status, plain, _ = run(["tag", "-m", str(files / "m.skg"), str(files / "tiny.data")],
                           capsys)
    assert [r[-1] for r in parse_blocks(plain)[0][1]] == [r[-1] for r in blocks[0][1]]
    status, out, _ = run(["tag", "-m", str(files / "m.skg"), "-n", "2", "-v1",
                          str(files / "tiny.data")], capsys)
    blocks = parse_blocks(out)
    assert [b[0][0] for b in blocks] == ["0", "1", "0", "1"]
    assert all("/" in r[-1] for _, rows in blocks for r in rows)
    assert model["classes"] == ["B", "I", "O"]


def test_gp_tagger_train_and_nbest(files, capsys, tmp_path):
    status, _, err = run(["train", "--tagger", "gp", "--max-iter", "3", "--random-state",
                          "0", str(files / "train.data"), str(tmp_path / "g.skg")], capsys)
    assert status == 0
    assert "ConvergenceWarning" in err  # relayed as one line, not raised
    model = load_model(tmp_path / "g.skg")
    assert model["template"] is None and model["tagger"] == "gp"
    assert type(model["pipeline"][0]).__name__ == "WordFeatures"
    status, out, _ = run(["tag", "-m", str(tmp_path / "g.skg"), "-n", "2", "-v2",
                          str(files / "train.data")], capsys)
    assert status == 0
    blocks = parse_blocks(out)
    assert len(blocks) == 6 and all(len(r) == 4 + 3 for _, rows in blocks for r in rows)
    # -v1: the posterior predictive probability of the printed path (that
    # of predict_path_proba, averaged over the posterior draws)
    status, out, _ = run(["tag", "-m", str(tmp_path / "g.skg"), "-v1",
                          str(files / "train.data")], capsys)
    assert status == 0
    pipe = model["pipeline"]
    _, X = read_tag_input(files / "train.data", model)[:2]
    Xf = pipe[:-1].transform(X)
    expected = pipe[-1].predict_path_proba(Xf)
    heads = [float(h[0]) for h, _ in parse_blocks(out)]
    assert_allclose(heads, expected, rtol=1e-5)


CONLLU = """\
# sent_id = 1
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\tNumber=Sing\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\t_

1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\tNumber=Sing\t3\tnsubj\t_\t_
3-4\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
3\tdo\tdo\tAUX\tVBP\t_\t5\taux\t_\t_
4\tn't\tnot\tPART\tRB\t_\t5\tadvmod\t_\t_
5\tsleep\tsleep\tVERB\tVB\t_\t0\troot\t_\t_
"""


def test_conllu_train_and_tag(capsys, tmp_path):
    (tmp_path / "t.conllu").write_text(CONLLU)
    status, _, _ = run(["train", "--format", "conllu", "--max-iter", "20",
                        str(tmp_path / "t.conllu"), str(tmp_path / "c.skg")], capsys)
    assert status == 0
    model = load_model(tmp_path / "c.skg")
    assert model["format"] == "conllu" and model["conllu_tag"] == "upos"
    status, out, _ = run(["tag", "-m", str(tmp_path / "c.skg"), str(tmp_path / "t.conllu")],
                         capsys)
    assert status == 0
    rows = [r for _, rs in parse_blocks(out) for r in rs]
    # form, gold UPOS, prediction; the multiword token line is skipped
    assert [r[:2] for r in rows[:3]] == [["The", "DET"], ["dog", "NOUN"], ["barks", "VERB"]]
    assert len(rows) == 8 and all(len(r) == 3 for r in rows)


# ------------------------------------------------------------ bad input


def _rewrite(src, dst, **changes):
    model = skgpstruct.load(src)
    model.update(changes)
    skgpstruct.save(model, dst)


def test_version_rule(files, capsys, tmp_path):
    major, minor = skgpstruct.__version__.split(".")[:2]
    _rewrite(files / "m.skg", tmp_path / "patch.skg", version=f"{major}.{minor}.99")
    status, _, _ = run(["tag", "-m", str(tmp_path / "patch.skg"), str(files / "train.data")],
                       capsys)
    assert status == 0
    for bad in (f"{major}.{int(minor) + 1}.0", f"{int(major) + 1}.{minor}.0", "unknown"):
        _rewrite(files / "m.skg", tmp_path / "old.skg", version=bad)
        status, out, err = run(["tag", "-m", str(tmp_path / "old.skg"),
                                str(files / "train.data")], capsys)
        assert status == 1 and out == ""
        assert f"written by skgpstruct {bad}" in err and "major.minor" in err
        assert err.count("\n") == 1 and "Traceback" not in err


def test_refuses_files_that_are_not_models(files, capsys, tmp_path):
    joblib.dump({"pipeline": None}, tmp_path / "dict.skg")  # the old pickle-based files
    joblib.dump([1, 2], tmp_path / "list.skg")
    skgpstruct.save({"pipeline": None}, tmp_path / "safe_dict.skg")
    skgpstruct.save([1, 2], tmp_path / "safe_list.skg")
    (tmp_path / "text.skg").write_text("not a model\n")
    (tmp_path / "empty.skg").write_bytes(b"")
    for name in ("dict.skg", "list.skg", "safe_dict.skg", "safe_list.skg", "text.skg",
                 "empty.skg", "missing.skg"):
        status, out, err = run(["tag", "-m", str(tmp_path / name),
                                str(files / "train.data")], capsys)
        assert status == 1 and out == ""
        assert name in err and err.count("\n") == 1
        assert "model" in err and "Traceback" not in err


@pytest.mark.parametrize("text,message", [
    ("He PRP B X\n", "line 1: 4 column(s)"),
    ("He PRP B\nreckons VBZ\n", "line 2: 2 column(s), but line 1 has 3"),
    ("He\n", "line 1: 1 column(s)"),
    ("\n\n  \n", "no sentence"),
    (b"He PRP \xff\n", "line 1: cannot decode"),
])
def test_tag_refuses_bad_input(files, capsys, tmp_path, text, message):
    path = tmp_path / "bad.data"
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    status, out, err = run(["tag", "-m", str(files / "m.skg"), str(path)], capsys)
    assert status == 1 and out == ""
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("template,message", [
    (None, "no such template file"),
    ("X00:%x[0,0]\n", "must start with 'U'"),
    ("U00:%x[0,0]\n\n# c\nU01:%x[0,7]\n",  # named by its line, before the fit
     "tpl, line 4 ('U01:%x[0,7]') reads column 7, but the tokens of"),
    ("U00:%x[9,0]\n", "outside CRF++'s range"),
    ("B\n", "no unigram"),
])
def test_train_refuses_bad_templates(files, capsys, tmp_path, template, message):
    tpl = tmp_path / "tpl"
    if template is not None:
        tpl.write_text(template)
    status, _, err = run(["train", "--template", str(tpl), str(files / "train.data"),
                          str(tmp_path / "x.skg")], capsys)
    assert status == 1 and message in err and err.count("\n") == 1
    assert not (tmp_path / "x.skg").exists()


@pytest.mark.parametrize("text,message", [
    ("He PRP B\nreckons O\n", "line 2: 2 columns"),
    ("He PRP B\n\nIt PRP B\n", "single label"),
    ("", "No sequence found"),
])
def test_train_refuses_bad_data(capsys, tmp_path, text, message):
    (tmp_path / "t.data").write_text(text)
    status, _, err = run(["train", str(tmp_path / "t.data"), str(tmp_path / "x.skg")],
                         capsys)
    assert status == 1 and message in err and err.count("\n") == 1


def test_train_checks_the_model_path_before_the_fit(files, capsys, tmp_path, monkeypatch):
    from skgpstruct._cli import _train

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before the model path was checked")

    monkeypatch.setattr(_train, "build_pipeline", no_fit)
    for model, message in [(tmp_path / "nodir" / "m.skg", "no such directory"),
                           (tmp_path, "is a directory; MODEL is the model file")]:
        status, _, err = run(["train", str(files / "train.data"), str(model)], capsys)
        assert status == 1 and message in err and err.count("\n") == 1


def test_tag_with_a_directory_as_model(files, capsys, tmp_path):
    status, _, err = run(["tag", "-m", str(tmp_path), str(files / "train.data")], capsys)
    assert status == 1 and "is a directory, not a model file" in err


def test_gp_train_is_repeatable_without_a_seed(files, capsys, tmp_path):
    """The command line's seed defaults to 0 (the estimator's is None)."""
    coefs = []
    for name in ("a.skg", "b.skg"):
        status, _, _ = run(["train", "--tagger", "gp", "--max-iter", "2",
                            str(files / "train.data"), str(tmp_path / name)], capsys)
        assert status == 0
        tagger = load_model(tmp_path / name)["pipeline"][-1]
        assert tagger.random_state == 0
        coefs.append(tagger.coef_)
    assert_array_equal(coefs[0], coefs[1])


def test_train_warns_about_what_it_ignores(files, capsys, tmp_path):
    status, _, err = run(["train", "--conllu-tag", "xpos", "--max-iter", "3",
                          str(files / "train.data"), str(tmp_path / "m.skg")], capsys)
    assert status == 0
    assert err.startswith("skgpstruct train: warning: --conllu-tag and --conllu-columns "
                          "apply to --format conllu only")
    (tmp_path / "tpl").write_text(TEMPLATE + "B01:%x[0,0]\n")
    status, _, err = run(["train", "--template", str(tmp_path / "tpl"), "--max-iter", "3",
                          str(files / "train.data"), str(tmp_path / "m.skg")], capsys)
    assert status == 0 and "UserWarning: Bigram template line(s) with macros" in err


def test_train_decoding_errors_point_to_the_option(files, capsys, tmp_path):
    (tmp_path / "t.data").write_bytes("Né NN B\nx NN O\n".encode("latin-1"))
    (tmp_path / "tpl").write_bytes("U00:%x[0,0]\n# é\n".encode("latin-1"))
    for argv in (["train", str(tmp_path / "t.data"), str(tmp_path / "m.skg")],
                 ["train", "--template", str(tmp_path / "tpl"), str(files / "train.data"),
                  str(tmp_path / "m.skg")]):
        status, _, err = run(argv, capsys)
        assert status == 1 and "line " in err and err.count("\n") == 1
        assert err.rstrip().endswith("pass the file's encoding with --encoding.")
    status, _, _ = run(["train", "--encoding", "latin-1", "--max-iter", "3",
                        str(tmp_path / "t.data"), str(tmp_path / "m.skg")], capsys)
    assert status == 0


def test_train_from_stdin_and_missing_file(capsys, monkeypatch, tmp_path):
    status, _, err = run(["train", "--max-iter", "5", "-", str(tmp_path / "s.skg")],
                         capsys, stdin=TRAIN.encode(), monkeypatch=monkeypatch)
    assert status == 0 and (tmp_path / "s.skg").is_file()
    status, _, err = run(["train", "-", str(tmp_path / "s.skg")], capsys,
                         stdin=b"He PRP B\nreckons O\n", monkeypatch=monkeypatch)
    assert status == 1 and "<stdin>, line 2" in err
    status, _, err = run(["train", str(tmp_path / "nope"), str(tmp_path / "s.skg")], capsys)
    assert status == 1 and "No such file" in err


# ------------------------------------------------ acceptance: CRF++ basenp


def test_basenp_matches_python_pipeline(shared_dir, capsys, tmp_path):
    from sklearn.pipeline import make_pipeline

    from skgpstruct import RandomizedCRFTagger
    from skgpstruct.datasets import load_crfpp
    from skgpstruct.features import CRFppTemplate

    d = shared_dir / "data" / "crfpp" / "basenp"
    params = {"c2": 1.0, "max_iter": 15, "random_state": 0}
    status, _, _ = run(["train", "--template", str(d / "template"), "--c2", "1.0",
                        "--max-iter", "15", "--random-state", "0", str(d / "train.data"),
                        str(tmp_path / "m.skg")], capsys)
    assert status == 0
    status, out, _ = run(["tag", "-m", str(tmp_path / "m.skg"), "-v2", str(d / "test.data")],
                         capsys)
    assert status == 0

    X_train, y_train = load_crfpp(d / "train.data")
    X_test, y_test = load_crfpp(d / "test.data")
    pipe = make_pipeline(CRFppTemplate.from_file(d / "template"),
                         RandomizedCRFTagger(**params))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe.fit(X_train, y_train)
    pred, marginals = pipe.predict(X_test), pipe.predict_proba(X_test)
    classes = pipe[-1].classes_.tolist()

    blocks = parse_blocks(out)
    assert len(blocks) == len(X_test)
    for (header, rows), x, y, p, m in zip(blocks, X_test, y_test, pred, marginals):
        assert 0 < float(header[0]) <= 1
        assert [tuple(r[:2]) for r in rows] == x and [r[2] for r in rows] == y
        assert [r[3].split("/")[0] for r in rows] == list(p)
        printed = np.array([[float(f.split("/")[1]) for f in r[4:]] for r in rows])
        assert_allclose(printed, m, rtol=5e-6, atol=5e-7)
        assert [f.split("/")[0] for f in rows[0][4:]] == classes


def test_tag_output_is_written_only_after_tagging_succeeds(files, tmp_path, capsys):
    """``tag -o`` used to open (and empty) its output before anything was
    checked: a bad model emptied an earlier result, and ``-o`` naming the
    input destroyed the input. Now the output is replaced only on success,
    and it may be the input file itself."""
    previous = tmp_path / "previous.txt"
    previous.write_text("an earlier result\n")
    status, _, err = run(["tag", "-m", str(files / "train.data"), "-o", str(previous),
                          str(files / "train.data")], capsys)
    assert status == 1 and "not a skgpstruct model" in err
    assert previous.read_text() == "an earlier result\n"
    status, _, err = run(["tag", "-m", str(files / "m.skg"), "--encoding", "nosuch", "-o",
                          str(tmp_path / "new.txt"), str(files / "train.data")], capsys)
    assert status == 1 and "unknown encoding" in err and "Traceback" not in err
    assert not (tmp_path / "new.txt").exists()
    data = tmp_path / "data.txt"
    data.write_text((files / "train.data").read_text())
    status, expected, _ = run(["tag", "-m", str(files / "m.skg"), str(data)], capsys)
    assert status == 0
    status, _, _ = run(["tag", "-m", str(files / "m.skg"), "-o", str(data), str(data)], capsys)
    assert status == 0 and data.read_text() == expected


def test_train_with_an_unknown_encoding_is_a_one_line_error(files, tmp_path, capsys):
    status, _, err = run(["train", "--encoding", "nosuch", str(files / "train.data"),
                          str(tmp_path / "m.skg")], capsys)
    assert status == 1 and err.strip() == "skgpstruct train: error: unknown encoding: nosuch"
