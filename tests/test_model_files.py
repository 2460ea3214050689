"""skgpstruct.save / skgpstruct.load: model files read without unpickling."""

import io
import json
import pickle
import zipfile

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

import skgpstruct
from skgpstruct import GPStructTagger, RandomizedCRFTagger, crfsuite
from skgpstruct.calibration import TemperatureScaledTagger
from skgpstruct.datasets import make_chain_data
from skgpstruct.exceptions import ModelFileError
from skgpstruct.features import CRFppTemplate, SequenceVectorizer, WordFeatures
from skgpstruct.gp.kernels import LinearKernel

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _payload_ran(path):
    with open(path, "w") as fh:
        fh.write("the payload ran")


class Payload:
    """Unpickling this runs ``_payload_ran(path)``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (_payload_ran, (self.path,))


@pytest.fixture(scope="module")
def chains():
    X, y = make_chain_data(n_sequences=40, n_classes=3, random_state=0)
    return X[:30], y[:30], X[30:]


@pytest.fixture(scope="module")
def words():
    rng = np.random.default_rng(0)
    vocab = {"D": ["the", "a"], "N": ["cat", "dog", "idea"], "V": ["ran", "saw"]}
    X, y = [], []
    for _ in range(30):
        tags = ["D", "N", "V", "D", "N"][: rng.integers(3, 6)]
        X.append([[str(rng.choice(vocab[t]))] for t in tags])
        y.append(tags)
    return X, y


def _same(a, b, X):
    for p, q in zip(a.predict(X), b.predict(X), strict=True):
        np.testing.assert_array_equal(p, q)
    if hasattr(a, "predict_proba"):
        for p, q in zip(a.predict_proba(X), b.predict_proba(X), strict=True):
            np.testing.assert_array_equal(p, q)


def _roundtrip(model, tmp_path, name="model.skg"):
    path = tmp_path / name
    skgpstruct.save(model, path)
    return skgpstruct.load(path)


@pytest.mark.parametrize("make", [
    lambda: RandomizedCRFTagger(c2=0.1),
    lambda: RandomizedCRFTagger(c1=0.05, c2=0.1),
    lambda: RandomizedCRFTagger(n_top=1, n_sampled=1, optimizer="adagrad", max_iter=3,
                                random_state=0),
    lambda: RandomizedCRFTagger(transitions="low_rank", rank=2, optimizer="adam",
                                max_iter=3, random_state=0),
    lambda: GPStructTagger(random_state=0),
    lambda: GPStructTagger(approximation="inducing", n_inducing=8, random_state=0),
    lambda: TemperatureScaledTagger(RandomizedCRFTagger(), cv=2),
], ids=["crf", "crf-l1", "randomized", "low-rank", "gp", "gp-inducing", "temperature"])
def test_round_trip_gives_identical_predictions(make, chains, tmp_path):
    X, y, X_te = chains
    model = make().fit(X, y)
    back = _roundtrip(model, tmp_path)
    assert type(back) is type(model)
    assert back.get_params(deep=False).keys() == model.get_params(deep=False).keys()
    _same(model, back, X_te)
    if isinstance(model, GPStructTagger):
        for p, q in zip(model.predict_uncertainty(X_te), back.predict_uncertainty(X_te)):
            np.testing.assert_array_equal(p, q)


def test_round_trip_of_pipelines_and_the_drop_in(words, tmp_path):
    X, y = words
    dicts = [[{"w": tok[0], "bias": 1.0} for tok in seq] for seq in X]
    models = [
        (make_pipeline(SequenceVectorizer(), RandomizedCRFTagger()).fit(dicts, y), dicts),
        (make_pipeline(CRFppTemplate("U00:%x[0,0]\nU01:%x[-1,0]\nB"),
                       RandomizedCRFTagger()).fit(X, y), X),
        (make_pipeline(WordFeatures(), GPStructTagger(random_state=0)).fit(X, y), X),
        (crfsuite.CRF(c1=0.1, c2=0.1).fit(dicts, y), dicts),
        (crfsuite.CRF(tagger="gp", random_state=0).fit(dicts, y), dicts),
    ]
    for i, (model, data) in enumerate(models):
        back = _roundtrip(model, tmp_path, f"m{i}.skg")
        if isinstance(model, crfsuite.CRF):
            assert list(back.predict(data)) == list(model.predict(data))
            assert back.predict_marginals(data)[0] == model.predict_marginals(data)[0]
            assert [it["loss"] for it in back.training_log_.iterations] == [
                it["loss"] for it in model.training_log_.iterations]
            if model.tagger == "crf":
                assert back.training_log_ == model.training_log_
                assert back.state_features_ == model.state_features_
        else:
            _same(model, back, data)


def test_unfitted_estimators_and_dicts(tmp_path):
    model = GPStructTagger(kernel=LinearKernel(variance=2.0), n_samples=7,
                           random_state=np.random.RandomState(3))
    back = _roundtrip(model, tmp_path)
    assert back.kernel.variance == 2.0 and back.n_samples == 7
    assert back.random_state.randint(1000) == np.random.RandomState(3).randint(1000)
    assert clone(back).get_params()["n_samples"] == 7
    data = {"a": [1, 2.5, float("nan"), None, "x"], "t": (1, "b"), "s": {1, 2},
            "k": {(1, 2): np.float32(3.5)}, "arr": np.arange(4), "str": np.array(["a", "bc"]),
            "obj": np.array(["a", 3], dtype=object), "dtype": np.float32}
    out = _roundtrip(data, tmp_path, "d.skg")
    assert out["a"][:2] == [1, 2.5] and np.isnan(out["a"][2]) and out["a"][3:] == [None, "x"]
    assert out["t"] == (1, "b") and out["s"] == {1, 2}
    assert out["k"] == {(1, 2): 3.5} and type(out["k"][(1, 2)]) is np.float32
    np.testing.assert_array_equal(out["arr"], np.arange(4))
    assert out["str"].tolist() == ["a", "bc"] and out["obj"].tolist() == ["a", 3]
    assert out["dtype"] is np.float32


# ------------------------------------------------------- refused at save
class MyKernel(LinearKernel):
    pass


@pytest.mark.parametrize("model, match", [
    (GPStructTagger(kernel=MyKernel()), "MyKernel"),
    (make_pipeline(FunctionTransformer(), RandomizedCRFTagger()), "FunctionTransformer"),
    ({"f": len}, "builtin_function_or_method"),
    ({"f": lambda x: x}, "function"),
])
def test_save_refuses_what_it_cannot_hold_safely(model, match, tmp_path):
    path = tmp_path / "m.skg"
    with pytest.raises(ModelFileError, match=match):
        skgpstruct.save(model, path)
    assert not path.exists()


def test_save_refuses_object_labels(chains, tmp_path):
    X, y, _ = chains
    crf = RandomizedCRFTagger().fit(X, y)
    labels = np.empty(3, dtype=object)
    labels[:] = [(0, "a"), (1, "b"), (2, "c")]
    crf.classes_ = labels  # labels fit would not take: save checks again
    with pytest.raises(ModelFileError, match="label .* of type tuple"):
        skgpstruct.save(crf, tmp_path / "m.skg")
    crf.classes_ = np.array(["a", "b", "c"], dtype=object)  # plain str: fine
    assert _roundtrip(crf, tmp_path).classes_.tolist() == ["a", "b", "c"]


# -------------------------------------------------------- refused at load
def _rewrite(path, out, *, header=None, extra=None, replace=None):
    """Copy the model file ``path`` to ``out``, editing its header / entries."""
    with zipfile.ZipFile(path) as zf:
        entries = {n: zf.read(n) for n in zf.namelist()}
    if header is not None:
        head = json.loads(entries["skgpstruct-model.json"])
        header(head)
        entries["skgpstruct-model.json"] = json.dumps(head).encode()
    entries.update(replace or {})
    entries.update(extra or {})
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return out


@pytest.fixture
def saved(chains, tmp_path):
    X, y, _ = chains
    path = tmp_path / "crf.skg"
    skgpstruct.save(RandomizedCRFTagger().fit(X, y), path)
    return path


def test_a_pickled_array_is_refused_and_its_payload_does_not_run(saved, tmp_path):
    marker = tmp_path / "ran.txt"
    buf = io.BytesIO()
    np.save(buf, np.array([Payload(str(marker))], dtype=object), allow_pickle=True)
    # the payload is real: unpickling it the usual way does run it
    np.load(io.BytesIO(buf.getvalue()), allow_pickle=True)
    assert marker.exists()
    marker.unlink()
    bad = _rewrite(saved, tmp_path / "bad.skg", replace={"arrays/0.npy": buf.getvalue()})
    with pytest.raises(ModelFileError, match="holds Python objects"):
        skgpstruct.load(bad)
    assert not marker.exists()


def test_a_pickle_file_is_refused_and_its_payload_does_not_run(tmp_path):
    marker = tmp_path / "ran.txt"
    path = tmp_path / "model.skg"
    path.write_bytes(pickle.dumps({"pipeline": Payload(str(marker))}))
    with pytest.raises(ModelFileError, match="pickle-based model file.*Retrain"):
        skgpstruct.load(path)
    assert not marker.exists()
    import joblib

    joblib.dump({"pipeline": Payload(str(marker))}, path, compress=3)  # the old .skg
    with pytest.raises(ModelFileError, match="pickle-based"):
        skgpstruct.load(path)
    assert not marker.exists()


@pytest.mark.parametrize("name", ["os.system", "builtins.eval", "subprocess.Popen",
                                  "skgpstruct.crfsuite._estimator.warnings"])
def test_an_untrusted_type_is_refused(saved, tmp_path, name):
    def edit(head):
        head["root"]["$object"] = name
    bad = _rewrite(saved, tmp_path / "bad.skg", header=edit)
    with pytest.raises(ModelFileError, match="not one of the types"):
        skgpstruct.load(bad)


def test_unknown_entries_and_tags_are_refused(saved, tmp_path):
    bad = _rewrite(saved, tmp_path / "extra.skg", extra={"payload.pkl": b"\x80\x04."})
    with pytest.raises(ModelFileError, match="entries the format does not have"):
        skgpstruct.load(bad)

    def edit(head):
        head["root"]["state"]["c2"] = {"$pickle": "gASV"}
    bad = _rewrite(saved, tmp_path / "tag.skg", header=edit)
    with pytest.raises(ModelFileError, match="unknown entry '\\$pickle'"):
        skgpstruct.load(bad)


def test_truncated_and_corrupted_files(saved, tmp_path):
    data = saved.read_bytes()
    cut = tmp_path / "cut.skg"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="truncated or corrupted"):
        skgpstruct.load(cut)
    # flip bytes inside the compressed arrays: the checksum catches it
    with zipfile.ZipFile(saved) as zf:
        info = zf.getinfo("arrays/0.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 4
    flipped = bytearray(data)
    for k in range(start, start + 8):
        flipped[k] ^= 0xFF
    bad = tmp_path / "flipped.skg"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(ModelFileError):
        skgpstruct.load(bad)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(ModelFileError, match="not a skgpstruct model file"):
        skgpstruct.load(other)
    with pytest.raises(ModelFileError, match="cannot be read"):
        skgpstruct.load(tmp_path / "missing.skg")


def test_versions(saved, tmp_path):
    def old(head):
        head["skgpstruct_version"] = "0.0.3"
    with pytest.raises(ModelFileError, match="skgpstruct 0.0.3.*Retrain"):
        skgpstruct.load(_rewrite(saved, tmp_path / "old.skg", header=old))

    def newer(head):
        head["format_version"] = 99
    with pytest.raises(ModelFileError, match="format 99.*Upgrade"):
        skgpstruct.load(_rewrite(saved, tmp_path / "new.skg", header=newer))
    assert isinstance(skgpstruct.load(saved), RandomizedCRFTagger)
