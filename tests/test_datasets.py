"""Tests of skgpstruct.datasets: CRF++ and GPstruct readers, benchmark folds,
synthetic chains."""

import json
import time
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp
from sklearn.model_selection import check_cv

from skgpstruct.datasets import (
    get_data_home,
    load_benchmark,
    load_crfpp,
    load_gpstruct,
    make_chain_data,
)

# ---------------------------------------------------------------------------
# load_crfpp
# ---------------------------------------------------------------------------


def _write(path, text, encoding="utf-8", newline=None):
    with open(path, "w", encoding=encoding, newline=newline) as f:
        f.write(text)
    return path


def test_load_crfpp_basic_format(tmp_path):
    # Tabs and runs of spaces separate columns; several blank lines between
    # sentences, leading blank lines and no final blank line are accepted.
    fname = _write(
        tmp_path / "a.data",
        "\n\nHe\tPRP  B\nreckons VBZ\tO\n\n\n \t\nThe DT B\ncurrent  JJ I",
    )
    X, y = load_crfpp(fname)
    assert X == [[("He", "PRP"), ("reckons", "VBZ")], [("The", "DT"), ("current", "JJ")]]
    assert y == [["B", "O"], ["B", "I"]]


def test_load_crfpp_crlf_and_trailing_blank_lines(tmp_path):
    text = "a X B\r\nb Y I\r\n\r\nc Z O\r\n\r\n\r\n"
    fname = tmp_path / "crlf.data"
    fname.write_bytes(text.encode("ascii"))
    X, y = load_crfpp(fname)
    assert X == [[("a", "X"), ("b", "Y")], [("c", "Z")]]
    assert y == [["B", "I"], ["O"]]


def test_load_crfpp_ragged_columns_names_file_and_line(tmp_path):
    fname = _write(tmp_path / "ragged.data", "a X B\nb Y I\n\nc O\n")
    with pytest.raises(ValueError, match=r"ragged\.data, line 4: 2 columns.*line 1"):
        load_crfpp(fname)


def test_load_crfpp_encoding_euc_jp(tmp_path):
    # Japanese tokens; the second token holds an ideographic space (U+3000),
    # which CRF++ does not treat as a separator.
    text = "東京 名詞 B-LOC\n都\u3000庁 名詞 I-LOC\nへ 助詞 O\n\n行く 動詞 O\n"
    fname = _write(tmp_path / "ja.data", text, encoding="euc_jp")
    X, y = load_crfpp(fname, encoding="euc_jp")
    assert X == [
        [("東京", "名詞"), ("都\u3000庁", "名詞"), ("へ", "助詞")],
        [("行く", "動詞")],
    ]
    assert y == [["B-LOC", "I-LOC", "O"], ["O"]]
    with pytest.raises(UnicodeDecodeError):
        load_crfpp(fname)  # the default utf-8 cannot read EUC-JP bytes


def test_load_crfpp_list_of_paths_concatenates_in_order(tmp_path):
    f1 = _write(tmp_path / "1.data", "a X B\n\nb Y I\n")
    f2 = _write(tmp_path / "2.data", "c Z O\n")
    X, y = load_crfpp([f1, str(f2)])
    assert X == [[("a", "X")], [("b", "Y")], [("c", "Z")]]
    assert y == [["B"], ["I"], ["O"]]
    X2, _ = load_crfpp([f2, f1])
    assert X2 == [[("c", "Z")], [("a", "X")], [("b", "Y")]]
    f3 = _write(tmp_path / "3.data", "d W V O\n")
    with pytest.raises(ValueError, match=r"3\.data, line 1: 4 columns"):
        load_crfpp([f1, f3])


def test_load_crfpp_bad_input(tmp_path):
    empty = _write(tmp_path / "empty.data", "\n\n")
    with pytest.raises(ValueError, match="No sequence"):
        load_crfpp(empty)
    with pytest.raises(ValueError, match="empty list"):
        load_crfpp([])
    with pytest.raises(TypeError, match="path"):
        load_crfpp(3)
    with pytest.raises(TypeError, match="path"):
        load_crfpp([empty, 3])
    with pytest.raises(FileNotFoundError):
        load_crfpp(tmp_path / "missing.data")


def test_load_crfpp_shared_files(shared_dir):
    for task, labels in [("basenp", {"B", "I", "O"}), ("chunking", None)]:
        X, y = load_crfpp(shared_dir / "data" / "crfpp" / task / "test.data")
        assert len(X) == len(y) == 823
        assert all(len(x) == len(s) > 0 for x, s in zip(X, y))
        assert {len(tok) for x in X for tok in x} == {2}
        if labels is not None:
            assert {lab for s in y for lab in s} == labels
    assert X[0][:2] == [("Rockwell", "NNP"), ("International", "NNP")]


# ---------------------------------------------------------------------------
# load_gpstruct
# ---------------------------------------------------------------------------


def _gpstruct_dir(tmp_path, files):
    d = tmp_path / "gp"
    d.mkdir()
    for name, text in files.items():
        _write(d / name, text)
    return d


def test_load_gpstruct_small(tmp_path):
    d = _gpstruct_dir(
        tmp_path,
        {
            "1.x": "1\t2\t1\n2\t1\t1\n2\t3\t1\n",
            "1.y": "0\n1\n",
            "2.x": "1\t5\t1\n3\t4\t1\n",
            "2.y": "2\n-1\n0\n",
        },
    )
    X, y = load_gpstruct(d)
    # One feature space for the whole directory: the largest index is 5.
    assert [x.shape for x in X] == [(2, 5), (3, 5)]
    assert all(sp.isspmatrix_csr(x) and x.dtype == np.float64 for x in X)
    np.testing.assert_array_equal(
        X[0].toarray(), [[0, 1, 0, 0, 0], [1, 0, 1, 0, 0]]
    )
    # The token without a feature line (token 2 of file 2) is an empty row.
    np.testing.assert_array_equal(
        X[1].toarray(), [[0, 0, 0, 0, 1], [0, 0, 0, 0, 0], [0, 0, 0, 1, 0]]
    )
    assert [s.dtype for s in y] == [np.int64, np.int64]
    np.testing.assert_array_equal(y[1], [2, -1, 0])

    X1, y1 = load_gpstruct(d, n_sequences=1)
    assert len(X1) == 1 and X1[0].shape == (2, 5)  # n_features from all files
    _, ym = load_gpstruct(d, map_negative_labels=0)
    np.testing.assert_array_equal(ym[1], [2, 0, 0])
    X7, _ = load_gpstruct(d, n_features=7)
    assert X7[0].shape == (2, 7)


def test_load_gpstruct_errors(tmp_path):
    d = _gpstruct_dir(
        tmp_path, {"1.x": "1\t2\t1\n", "1.y": "0\n", "3.x": "1\t1\t1\n", "3.y": "0\n"}
    )
    with pytest.raises(ValueError, match="without gaps"):
        load_gpstruct(d)
    (d / "3.x").rename(d / "2.x")
    (d / "3.y").unlink()
    with pytest.raises(FileNotFoundError, match=r"2\.y"):
        load_gpstruct(d)
    _write(d / "2.y", "0\n")
    with pytest.raises(ValueError, match="exceeds n_features=1"):
        load_gpstruct(d, n_features=1)
    with pytest.raises(ValueError, match=r"n_sequences must be in \[1, 2\]"):
        load_gpstruct(d, n_sequences=3)
    with pytest.raises(TypeError, match="map_negative_labels"):
        load_gpstruct(d, map_negative_labels=0.5)
    _write(d / "2.x", "2\t1\t1\n")  # token 2 but only one label
    with pytest.raises(ValueError, match="refers to token 2"):
        load_gpstruct(d)
    _write(d / "2.x", "1\t1\n")
    with pytest.raises(ValueError, match="3 number"):
        load_gpstruct(d)
    _write(d / "2.x", "0\t1\t1\n")
    with pytest.raises(ValueError, match="1-based"):
        load_gpstruct(d)
    with pytest.raises(FileNotFoundError):
        load_gpstruct(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="No <i>.x"):
        load_gpstruct(tmp_path)


@pytest.fixture(scope="module")
def gp_basenp(shared_dir):
    return load_gpstruct(shared_dir / "data" / "gpstruct" / "basenp")


def _parse_x_by_hand(fname):
    rows, cols = [], []
    with open(fname) as f:
        for line in f:
            tok, feat, val = line.split("\t")
            assert float(val) == 1.0
            rows.append(int(tok) - 1)
            cols.append(int(feat) - 1)
    return rows, cols


def test_load_gpstruct_shared_basenp(shared_dir, gp_basenp):
    X, y = gp_basenp
    d = shared_dir / "data" / "gpstruct" / "basenp"
    assert len(X) == len(y) == 823
    # The largest feature index in the files (pygpstruct's D, 6438, is a few
    # columns larger; load_benchmark uses that).
    assert {x.shape[1] for x in X} == {6435}
    for i in (0, 1, 411, 822):
        rows, cols = _parse_x_by_hand(d / f"{i + 1}.x")
        dense = np.zeros(X[i].shape)
        dense[rows, cols] = 1.0
        np.testing.assert_array_equal(X[i].toarray(), dense)
        np.testing.assert_array_equal(
            y[i], np.loadtxt(d / f"{i + 1}.y", dtype=np.int64, ndmin=1)
        )
    # Sentence i of the GPstruct files is sentence i of CRF++'s test.data and
    # the label ids are B=0, O=1, I=2 (data README).
    _, y_crf = load_crfpp(shared_dir / "data" / "crfpp" / "basenp" / "test.data")
    ids = {"B": 0, "O": 1, "I": 2}
    assert all(
        np.array_equal(a, [ids[lab] for lab in b]) for a, b in zip(y, y_crf)
    )


def test_load_gpstruct_is_fast(shared_dir, gp_basenp):
    t0 = time.perf_counter()
    load_gpstruct(shared_dir / "data" / "gpstruct" / "chunking")
    assert time.perf_counter() - t0 < 10.0  # ~1 s here; 823 files


# ---------------------------------------------------------------------------
# load_benchmark / get_data_home
# ---------------------------------------------------------------------------


def test_get_data_home(tmp_path, monkeypatch):
    assert get_data_home(tmp_path) == tmp_path
    monkeypatch.setenv("SKGPSTRUCT_DATA", str(tmp_path / "x"))
    assert get_data_home() == tmp_path / "x"
    monkeypatch.delenv("SKGPSTRUCT_DATA")
    home = get_data_home()
    assert home.parts[-2:] == ("shared", "data")


def test_load_benchmark_errors(tmp_path, shared_dir):
    with pytest.raises(FileNotFoundError, match="folds.json"):
        load_benchmark("basenp", data_home=tmp_path)
    with pytest.raises(ValueError, match="Unknown task"):
        load_benchmark("nope", data_home=shared_dir / "data")
    with pytest.raises(ValueError, match="features"):
        load_benchmark("basenp", features="words", data_home=shared_dir / "data")


def _task_home(tmp_path, template=b"U00:%x[0,0]\nB\n", folds=None):
    """A data home with one tiny CRF++ task 't' (no shared data needed)."""
    (tmp_path / "crfpp" / "t").mkdir(parents=True)
    (tmp_path / "crfpp" / "t" / "test.data").write_text("He PRP B\nreckons VBZ O\n\n")
    (tmp_path / "crfpp" / "t" / "template").write_bytes(template)
    spec = {"directory": "t", "files": ["test.data"], "encoding": "ascii",
            "gpstruct_dir": "t", "n_sequences_used": 1,
            "folds": folds or [{"train": [0], "test": [0]}]}
    (tmp_path / "folds.json").write_text(json.dumps({"t": spec}))
    return tmp_path


def test_load_benchmark_reads_the_template_with_the_shared_reader(tmp_path):
    # a byte-order mark is skipped (it was a bare UnicodeDecodeError)
    home = _task_home(tmp_path, b"\xef\xbb\xbfU00:%x[0,0]\nB\n")
    assert load_benchmark("t", data_home=home).template == "U00:%x[0,0]\nB\n"


def test_load_benchmark_malformed_template_names_the_file(tmp_path):
    home = _task_home(tmp_path, b"U00:%x[0,0]\nU01:%x[0\n")
    with pytest.raises(ValueError, match=r"template.*line 2"):
        load_benchmark("t", data_home=home)


@pytest.mark.parametrize("bad", [[0.9], [True], ["0"], 0])
def test_load_benchmark_refuses_fold_indices_that_are_not_ints(tmp_path, bad):
    # floats, booleans and numeric strings used to be converted silently
    home = _task_home(tmp_path, folds=[{"train": bad, "test": [0]}])
    with pytest.raises(ValueError, match="fold 0: 'train' must be a list of integer"):
        load_benchmark("t", data_home=home)


@pytest.mark.parametrize(
    "task, n_seq, n_train, n_test, words",
    [
        # the papers' Table 2 average training word counts.
        ("basenp", 300, 150, 150, 3739.8),
        ("chunking", 100, 50, 50, 1155.8),
    ],
)
def test_load_benchmark_tasks(shared_dir, task, n_seq, n_train, n_test, words):
    home = shared_dir / "data"
    crf = load_benchmark(task, data_home=home)
    gp = load_benchmark(task, features="gpstruct", data_home=home)
    with open(home / "folds.json") as f:
        spec = json.load(f)[task]
    for data in (crf, gp):
        assert len(data.X) == len(data.y) == n_seq == data.n_sequences
        assert len(data.folds) == 5
        for (train, test), raw in zip(data.folds, spec["folds"]):
            assert train.dtype == np.int64
            np.testing.assert_array_equal(train, raw["train"])
            np.testing.assert_array_equal(test, raw["test"])
            assert (len(train), len(test)) == (n_train, n_test)
            assert not set(train) & set(test)
        mean_words = np.mean(
            [sum(len(data.y[i]) for i in train) for train, _ in data.folds]
        )
        assert mean_words == pytest.approx(words, abs=1e-9)
        assert check_cv(data.folds).get_n_splits() == 5
    assert crf.template.startswith("# Unigram") and "U00:%x[-2,0]" in crf.template
    assert gp.template is None
    assert {x.shape[1] for x in gp.X} == {{"basenp": 6438, "chunking": 29764}[task]}
    assert all(s.min() >= 0 for s in gp.y)  # chunking's -1 labels mapped to 0
    # Same sentences in both views.
    assert [len(s) for s in crf.y] == [len(s) for s in gp.y]
    X_all, _ = load_crfpp(home / "crfpp" / spec["directory"] / "test.data")
    assert crf.X == X_all[:n_seq]


# ---------------------------------------------------------------------------
# make_chain_data
# ---------------------------------------------------------------------------


def test_make_chain_data_shapes_and_types():
    X, y = make_chain_data(50, 4, 7, length=(2, 9), random_state=0)
    assert len(X) == len(y) == 50
    for x, s in zip(X, y):
        assert isinstance(x, np.ndarray) and x.dtype == np.float64
        assert x.flags.c_contiguous and x.shape == (len(s), 7)
        assert s.dtype == np.int64 and 2 <= len(s) <= 9
        assert s.min() >= 0 and s.max() < 4
    lengths = {len(s) for s in y}
    assert min(lengths) == 2 and max(lengths) == 9  # both ends drawn
    X, y = make_chain_data(3, length=6, random_state=0)
    assert [len(s) for s in y] == [6, 6, 6]


def test_make_chain_data_deterministic():
    for sparse in (False, True):
        X1, y1 = make_chain_data(20, sparse=sparse, random_state=3)
        X2, y2 = make_chain_data(20, sparse=sparse, random_state=3)
        X3, y3 = make_chain_data(20, sparse=sparse, random_state=4)
        assert all(np.array_equal(a, b) for a, b in zip(y1, y2))
        dense = (lambda m: m.toarray()) if sparse else (lambda m: m)
        assert all(np.array_equal(dense(a), dense(b)) for a, b in zip(X1, X2))
        assert not all(
            len(a) == len(b) and np.array_equal(a, b) for a, b in zip(y1, y3)
        )
    rs = np.random.RandomState(0)
    make_chain_data(5, random_state=rs)  # a RandomState instance is accepted


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_sequences": 0}, "n_sequences"),
        ({"n_classes": 1}, "n_classes"),
        ({"n_features": 0}, "n_features"),
        ({"length": 0}, "length"),
        ({"length": (5, 3)}, "min <= max"),
        ({"length": (0, 3)}, "min <= max"),
        ({"length": (1, 2, 3)}, "length"),
        ({"length": (1.0, 3)}, "length"),
        ({"transition_strength": 1.5}, "transition_strength"),
        ({"n_successors": 0}, "n_successors"),
        ({"noise": -0.1}, "noise"),
        ({"noise": 1.5, "sparse": True}, "probability"),
        ({"n_active": 0}, "n_active"),
        ({"random_state": "a"}, "random_state"),
    ],
)
def test_make_chain_data_validation(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make_chain_data(**kwargs)


def test_make_chain_data_transition_statistics():
    # Empirical transition frequencies against the generating matrix
    # A = s * mean_j onehot(successors[i, j]) + (1 - s) / V.
    V, s = 4, 0.7
    X, y, params = make_chain_data(
        3000, V, 2, n_successors=2, transition_strength=s, return_params=True,
        random_state=1,
    )
    P = np.zeros((V, V))
    for j in range(params.successors.shape[1]):
        P[np.arange(V), params.successors[:, j]] += 0.5
    A = s * P + (1 - s) / V
    np.testing.assert_allclose(A.sum(axis=1), 1.0)
    np.testing.assert_allclose(A.sum(axis=0), 1.0)  # doubly stochastic
    counts = np.zeros((V, V))
    for seq in y:
        np.add.at(counts, (seq[:-1], seq[1:]), 1)
    n_from = counts.sum(axis=1, keepdims=True)
    freq = counts / n_from
    se = np.sqrt(A * (1 - A) / n_from)
    # k = 5: a 5-SE deviation has probability < 1e-6 per cell, negligible
    # over 16 cells and any seed.
    assert np.all(np.abs(freq - A) < 5 * se)
    # Uniform label marginal (uniform start, doubly stochastic A).
    labels = np.concatenate(y)
    p = np.bincount(labels, minlength=V) / labels.size
    assert np.all(np.abs(p - 1 / V) < 5 * np.sqrt((1 / V) * (1 - 1 / V) / labels.size))


def test_make_chain_data_dense_emissions():
    noise = 0.5
    X, y, params = make_chain_data(
        2000, 3, 5, noise=noise, return_params=True, random_state=2
    )
    means = params.means
    np.testing.assert_allclose(means @ means.T, np.eye(3), atol=1e-12)  # orthonormal
    Xf, yf = np.concatenate(X), np.concatenate(y)
    for c in range(3):
        xc = Xf[yf == c]
        # k = 5 standard errors (per coordinate), see the transition test.
        assert np.all(np.abs(xc.mean(axis=0) - means[c]) < 5 * noise / np.sqrt(len(xc)))
        resid = xc - means[c]
        # std of the sample variance of a normal: var * sqrt(2 / n).
        assert np.all(
            np.abs(resid.var(axis=0) - noise**2) < 5 * noise**2 * np.sqrt(2 / len(xc))
        )
    _, _, p_many = make_chain_data(5, 200, 10, return_params=True, random_state=0)
    np.testing.assert_allclose(np.linalg.norm(p_many.means, axis=1), 1.0)


def _chain_oracle_accuracies(X, y, params):
    """Token accuracy of the true model: per-token Bayes vs chain marginals.

    Sequences of equal length, processed together (log-space
    forward-backward, batched over sequences).
    """
    V = params.means.shape[0]
    P = np.zeros((V, V))
    k = params.successors.shape[1]
    for j in range(k):
        P[np.arange(V), params.successors[:, j]] += 1.0 / k
    s = params.transition_strength
    log_A = np.log(s * P + (1 - s) / V)
    x, lab = np.stack(X), np.stack(y)  # (N, T, D), (N, T)
    ll = -0.5 * ((x[:, :, None, :] - params.means) ** 2).sum(-1) / params.noise**2
    N, T, _ = ll.shape
    alpha = np.empty((N, T, V))
    beta = np.zeros((N, T, V))
    alpha[:, 0] = ll[:, 0] - np.log(V)
    for t in range(1, T):
        alpha[:, t] = ll[:, t] + logsumexp(alpha[:, t - 1, :, None] + log_A, axis=1)
    for t in range(T - 2, -1, -1):
        beta[:, t] = logsumexp(log_A + (ll[:, t + 1] + beta[:, t + 1])[:, None, :], axis=2)
    acc_token = np.mean(ll.argmax(axis=2) == lab)  # uniform marginal prior
    acc_chain = np.mean((alpha + beta).argmax(axis=2) == lab)
    return acc_token, acc_chain


def test_make_chain_data_defaults_need_transitions():
    # With the default model the true per-token classifier is right on about
    # 75% of the tokens and the true chain posterior on about 90%; with 4800
    # tokens both accuracies have a standard error below 0.007.
    X, y, params = make_chain_data(400, length=12, return_params=True, random_state=0)
    acc_token, acc_chain = _chain_oracle_accuracies(X, y, params)
    assert 0.65 < acc_token < 0.85
    assert acc_chain > acc_token + 0.08
    # Without transition structure the chain cannot help.
    X, y, params = make_chain_data(
        400, length=12, transition_strength=0.0, return_params=True, random_state=0
    )
    acc_token, acc_chain = _chain_oracle_accuracies(X, y, params)
    assert abs(acc_chain - acc_token) < 0.02


def test_make_chain_data_sparse():
    X, y, params = make_chain_data(
        200, 4, 40, sparse=True, n_active=3, return_params=True, random_state=0
    )
    groups = params.feature_groups
    assert sorted(np.concatenate(groups).tolist()) == list(range(40))  # partition
    for x, s in zip(X, y):
        assert sp.isspmatrix_csr(x) and x.dtype == np.float64 and x.shape == (len(s), 40)
        assert np.all(x.data == 1.0)
        nnz = np.diff(x.indptr)
        assert nnz.min() >= 1 and nnz.max() <= 3
    # noise = 0: every active feature belongs to the token's label group.
    X, y, params = make_chain_data(
        50, 4, 40, sparse=True, noise=0.0, return_params=True, random_state=0
    )
    for x, s in zip(X, y):
        for t in range(len(s)):
            row = x.indices[x.indptr[t]:x.indptr[t + 1]]
            assert set(row) <= set(params.feature_groups[s[t]])
    # More labels than features: labels share single features.
    X, y, params = make_chain_data(
        20, 30, 10, sparse=True, return_params=True, random_state=0
    )
    assert all(len(g) == 1 for g in params.feature_groups)
    assert X[0].shape[1] == 10


def test_make_chain_data_sparse_defaults_learnable():
    # A per-token logistic regression against one that also sees the
    # neighbouring tokens' features: the labels' chain structure makes the
    # window model clearly better.
    from sklearn.linear_model import LogisticRegression

    X, y = make_chain_data(500, 3, 30, sparse=True, random_state=0)

    def window(x):
        z = sp.csr_matrix((1, x.shape[1]))
        return sp.hstack([x, sp.vstack([z, x[:-1]]), sp.vstack([x[1:], z])]).tocsr()

    accs = []
    for feat in (lambda x: x, window):
        A = sp.vstack([feat(x) for x in X[:350]])
        B = sp.vstack([feat(x) for x in X[350:]])
        clf = LogisticRegression(max_iter=1000).fit(A, np.concatenate(y[:350]))
        accs.append(np.mean(clf.predict(B) == np.concatenate(y[350:])))
    assert 0.5 < accs[0] < 0.95
    assert accs[1] > accs[0] + 0.05


def test_make_chain_data_is_fast_and_scales_to_many_labels():
    t0 = time.perf_counter()
    make_chain_data(1000, random_state=0)
    assert time.perf_counter() - t0 < 1.0  # ~0.02 s here
    # 10,000 labels: nothing of size n_classes^2 (a dense float64 transition
    # matrix alone would take 800 MB).
    tracemalloc.start()
    t0 = time.perf_counter()
    X, y, params = make_chain_data(
        1000, 10_000, 20, return_params=True, random_state=0
    )
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 5.0
    assert peak < 50e6
    assert params.successors.shape == (10_000, 1)
    assert max(s.max() for s in y) < 10_000
    # Labels are spread over the whole label set.
    assert np.unique(np.concatenate(y)).size > 5000
    Xs, ys = make_chain_data(1000, 1000, 500, sparse=True, random_state=0)
    assert Xs[0].shape[1] == 500
