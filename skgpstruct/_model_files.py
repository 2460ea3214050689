"""Model files that are safe to open: :func:`save` and :func:`load`.

A model file is a ZIP archive holding

* ``skgpstruct-model.json``: the format's name and version, the versions of
  skgpstruct and scikit-learn that wrote it, the time, and the model as a
  tree of JSON values;
* ``arrays/<i>.npy``: the tree's numeric and string arrays, in NumPy's
  ``.npy`` format, read back with ``allow_pickle=False``.

Nothing in it is a pickle, and loading executes no code from the file: the
tree names its objects' classes, and :func:`load` builds only the classes of
:data:`TRUSTED_TYPES` (the package's estimators, transformers, kernels and
likelihoods, scikit-learn's ``Pipeline`` and the kernel sums, products and
constants that ``kernel_`` may hold), by setting the state the file gives on
an instance made without calling its constructor, as unpickling does. Any
other name, an array holding Python objects, an entry the format does not
have or a damaged archive is refused with a :class:`ModelFileError` before
anything is built. :func:`save` refuses, at save time, what the format cannot
hold safely: an object of any other class (a user-defined kernel, a foreign
transformer, a subclass of a trusted class), a function, labels that are not
plain strings, numbers or booleans.

**Version rule**: a file is read by a package whose ``major.minor`` version
equals the writer's (the fitted attributes may change between minor
versions; retrain, or load with the old version and keep the training data),
and whose format version is at least the file's.
"""

import io
import json
import math
import re
import zipfile
import zlib
from datetime import datetime, timezone
from numbers import Number

import numpy as np
import scipy.sparse as sp

__all__ = ["FORMAT", "FORMAT_VERSION", "ModelFileError", "TRUSTED_TYPES", "load", "save"]

FORMAT = "skgpstruct-model"
#: Version of the layout of the tree and the archive.
FORMAT_VERSION = 1
_HEADER = "skgpstruct-model.json"
_PLAIN = (type(None), bool, int, float, str)
_PY_TYPES = {"bool": bool, "int": int, "float": float, "str": str, "complex": complex}


class ModelFileError(ValueError):
    """A file that :func:`load` does not open, or a model :func:`save`
    cannot write safely; the message says why and what to do."""


def _trusted_types():
    from sklearn.gaussian_process import kernels as skk
    from sklearn.pipeline import Pipeline

    from . import GPStructTagger, RandomizedCRFTagger, likelihoods
    from .calibration import TemperatureScaledTagger
    from .crfsuite import CRF, TrainingLog
    from .features import CRFppTemplate, SequenceVectorizer, WordFeatures
    from .gp.kernels import LinearKernel, RBFKernel

    classes = [GPStructTagger, RandomizedCRFTagger, TemperatureScaledTagger, CRF,
               TrainingLog, CRFppTemplate, SequenceVectorizer, WordFeatures,
               LinearKernel, RBFKernel, likelihoods.CRFLikelihood,
               likelihoods.PseudoLikelihood, likelihoods.RandomizedCRFLikelihood,
               Pipeline, skk.ConstantKernel, skk.Product, skk.Sum, skk.WhiteKernel]
    return {f"{c.__module__}.{c.__qualname__}": c for c in classes}


#: ``{"module.Class": class}``: the only classes a model file may hold
#: (filled on first use).
TRUSTED_TYPES = {}


def _trusted():
    if not TRUSTED_TYPES:
        TRUSTED_TYPES.update(_trusted_types())
    return TRUSTED_TYPES


def _version():
    from . import __version__
    return __version__


def _major_minor(version):
    """``(major, minor)`` of a version string, or None if it has none."""
    m = re.match(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    return None if m is None else (int(m.group(1)), int(m.group(2)))


# ----------------------------------------------------------------- saving
class _Writer:
    """Turns a model into the JSON tree, collecting its arrays."""

    def __init__(self):
        self.arrays = []

    def array(self, a, where):
        if a.dtype.kind not in "biufcUS":
            raise ModelFileError(f"{where}: an array of dtype {a.dtype} cannot be saved "
                                 "safely (numbers, booleans and strings only).")
        self.arrays.append(a if a.flags.c_contiguous else a.copy(order="C"))
        return {"$array": len(self.arrays) - 1}

    def encode(self, obj, where):
        kind = type(obj)
        if kind in (type(None), bool, int, str):
            return obj
        if kind is float:
            return obj if math.isfinite(obj) else {"$float": repr(obj)}
        if kind is list:
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if kind is tuple:
            return {"$tuple": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        if kind in (set, frozenset):
            return {"$" + kind.__name__: [self.encode(v, f"{where}{{}}") for v in obj]}
        if kind is dict:
            if all(type(k) is str for k in obj):
                return {"$dict": {k: self.encode(v, f"{where}[{k!r}]") for k, v in obj.items()}}
            return {"$items": [[self.encode(k, f"{where}.key"),
                                self.encode(v, f"{where}[{k!r}]")] for k, v in obj.items()]}
        if isinstance(obj, np.ndarray) and kind is np.ndarray:
            if obj.dtype == object:
                return {"$objects": [self.encode(v, f"{where}[{i}]")
                                     for i, v in enumerate(obj.ravel().tolist())],
                        "shape": list(obj.shape)}
            return self.array(obj, where)
        if isinstance(obj, np.generic) and obj.dtype.kind in "biufcUS":
            return {"$scalar": self.array(np.asarray(obj), where)["$array"]}
        if sp.issparse(obj) and obj.format in ("csr", "csc"):
            return {"$sparse": obj.format, "matrix": isinstance(obj, sp.spmatrix),
                    "shape": list(obj.shape), "data": self.array(obj.data, where),
                    "indices": self.array(obj.indices, where),
                    "indptr": self.array(obj.indptr, where)}
        if isinstance(obj, np.dtype):
            return {"$dtype": obj.str}
        if isinstance(obj, type):
            if issubclass(obj, np.generic):
                return {"$dtype_type": np.dtype(obj).str}
            if obj.__name__ in _PY_TYPES and _PY_TYPES[obj.__name__] is obj:
                return {"$pytype": obj.__name__}
        if kind is np.random.RandomState:
            name, keys, pos, has_gauss, cached = obj.get_state()
            return {"$random_state": [name, self.array(keys, where), pos, has_gauss, cached]}
        return self.instance(obj, where)

    def instance(self, obj, where):
        kind = type(obj)
        name = f"{kind.__module__}.{kind.__qualname__}"
        if _trusted().get(name) is not kind:
            raise ModelFileError(
                f"{where} is an object of type {name}, which skgpstruct's model files do not hold (they "
                "hold only the package's estimators, transformers, kernels and "
                "likelihoods, scikit-learn Pipelines of them, numbers, strings and "
                "arrays, so that loading one cannot run code). Use the package's "
                "classes, or joblib / pickle for files you will only open yourself."
            )
        state = obj.__getstate__() if hasattr(obj, "__getstate__") else vars(obj)
        state = {} if state is None else state
        if not isinstance(state, dict):
            raise ModelFileError(f"{where}: {name} has a state that is not a dict.")
        classes = state.get("classes_")
        if classes is not None:
            bad = [c for c in np.asarray(classes, dtype=object).ravel().tolist()
                   if not isinstance(c, (str, Number)) or isinstance(c, complex)]
            if bad:
                raise ModelFileError(
                    f"{where}.classes_ holds the label {bad[0]!r} of type "
                    f"{type(bad[0]).__name__}: model files hold labels that are str, "
                    "int, float or bool. Map the labels to strings before fitting."
                )
        return {"$object": name,
                "state": {k: self.encode(v, f"{where}.{k}") for k, v in state.items()}}


def save(model, path):
    """Write a model to a file that :func:`load` reads without unpickling.

    Parameters
    ----------
    model : estimator, Pipeline or dict
        A GPStructTagger, RandomizedCRFTagger, TemperatureScaledTagger,
        :class:`skgpstruct.crfsuite.CRF`, one of the package's transformers,
        a Pipeline of those, or a dict (str keys) of such values, numbers,
        strings and arrays; fitted or not.
    path : str or path-like
        The file to write (overwritten); ``.skg`` is the usual suffix.

    Raises
    ------
    ModelFileError
        If the model holds something the format cannot hold safely (a
        user-defined kernel or transformer, a function, labels that are not
        str / int / float / bool); nothing is written then.

    See Also
    --------
    load : Read it back.

    Examples
    --------
    >>> import os, tempfile
    >>> import skgpstruct
    >>> from skgpstruct import RandomizedCRFTagger
    >>> from skgpstruct.datasets import make_chain_data
    >>> X, y = make_chain_data(n_sequences=20, n_classes=3, random_state=0)
    >>> crf = RandomizedCRFTagger().fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "crf.skg")
    >>> skgpstruct.save(crf, path)
    >>> back = skgpstruct.load(path)
    >>> all((a == b).all() for a, b in zip(back.predict(X), crf.predict(X)))
    True
    """
    import sklearn

    writer = _Writer()
    root = writer.encode(model, "model")
    header = {"format": FORMAT, "format_version": FORMAT_VERSION,
              "skgpstruct_version": _version(), "sklearn_version": sklearn.__version__,
              "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "n_arrays": len(writer.arrays), "root": root}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(_HEADER, json.dumps(header))
        for i, a in enumerate(writer.arrays):
            buf = io.BytesIO()
            np.save(buf, a, allow_pickle=False)
            zf.writestr(f"arrays/{i}.npy", buf.getvalue())


# ---------------------------------------------------------------- loading
_OLD_PICKLE = (
    "{path} is a pickle-based model file (written by skgpstruct before its safe "
    "format, or by joblib / pickle). skgpstruct.load does not open pickles, because "
    "unpickling a file can run any code it holds. Retrain the model (skgpstruct train "
    "..., or fit in Python) and save it with skgpstruct.save; or, only if you trust "
    "where the file comes from, open it with joblib.load and save it again with "
    "skgpstruct.save."
)


class _Reader:
    def __init__(self, zf, n_arrays, path):
        self.zf, self.n_arrays, self.path = zf, n_arrays, path

    def fail(self, msg):
        raise ModelFileError(f"{self.path}: {msg}")

    def array(self, index):
        if type(index) is not int or not 0 <= index < self.n_arrays:
            self.fail(f"array reference {index!r} is out of range: the file is corrupted.")
        try:
            data = self.zf.read(f"arrays/{index}.npy")
            return np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as exc:
            if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                self.fail(f"array {index} holds Python objects, i.e. a pickle, which "
                          "model files never hold: refused, nothing was run.")
            self.fail(f"array {index} is damaged ({exc}).")
        except (KeyError, zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            self.fail(f"array {index} cannot be read ({exc}): the file is truncated or "
                      "corrupted.")

    def decode(self, node):
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is list:
            return [self.decode(v) for v in node]
        if type(node) is not dict or not node:
            self.fail(f"unexpected value {node!r:.80} in the model tree.")
        tag = next(iter(node))
        handler = _TAGS.get(tag)
        if handler is None:
            self.fail(f"unknown entry {tag!r} in the model tree: the file is corrupted or "
                      "was written by a newer skgpstruct.")
        return handler(self, node)

    def instance(self, node):
        name = node.get("$object")
        cls = _trusted().get(name) if isinstance(name, str) else None
        if cls is None:
            self.fail(f"it asks for an object of type {name!r}, which is not one of the "
                      "types skgpstruct's model files hold: refused, nothing was run.")
        state = node.get("state")
        if type(state) is not dict:
            self.fail(f"the state of a {name} is not a mapping.")
        state = {k: self.decode(v) for k, v in state.items()}
        obj = cls.__new__(cls)
        if getattr(cls, "__setstate__", None) is not None:
            obj.__setstate__(state)
        else:
            obj.__dict__.update(state)
        return obj


def _sparse(r, node):
    fmt = node["$sparse"]
    if fmt not in ("csr", "csc"):
        r.fail(f"unknown sparse format {fmt!r}.")
    cls = {"csr": (sp.csr_matrix, sp.csr_array), "csc": (sp.csc_matrix, sp.csc_array)}[fmt]
    parts = (r.array(node["data"]["$array"]), r.array(node["indices"]["$array"]),
             r.array(node["indptr"]["$array"]))
    return cls[0 if node.get("matrix") else 1](parts, shape=tuple(node["shape"]))


def _objects(r, node):
    items = [r.decode(v) for v in node["$objects"]]
    out = np.empty(len(items), dtype=object)
    for i, v in enumerate(items):
        out[i] = v
    return out.reshape(tuple(node["shape"]))


def _random_state(r, node):
    name, keys, pos, has_gauss, cached = node["$random_state"]
    rs = np.random.RandomState()
    rs.set_state((name, r.array(keys["$array"]), pos, has_gauss, cached))
    return rs


def _pytype(r, node):
    name = node["$pytype"]
    if name not in _PY_TYPES:
        r.fail(f"unknown type {name!r}.")
    return _PY_TYPES[name]


def _dtype(r, text):
    if not isinstance(text, str):
        r.fail("a dtype is not a string.")
    dtype = np.dtype(text)
    if dtype.kind not in "biufcUS":
        r.fail(f"dtype {text!r} is not one model files hold.")
    return dtype


_TAGS = {
    "$float": lambda r, n: float(n["$float"]) if n["$float"] in ("nan", "inf", "-inf")
    else r.fail("bad float."),
    "$tuple": lambda r, n: tuple(r.decode(v) for v in n["$tuple"]),
    "$set": lambda r, n: {r.decode(v) for v in n["$set"]},
    "$frozenset": lambda r, n: frozenset(r.decode(v) for v in n["$frozenset"]),
    "$dict": lambda r, n: {k: r.decode(v) for k, v in n["$dict"].items()},
    "$items": lambda r, n: {r.decode(k): r.decode(v) for k, v in n["$items"]},
    "$array": lambda r, n: r.array(n["$array"]),
    "$scalar": lambda r, n: r.array(n["$scalar"])[()],
    "$objects": _objects,
    "$sparse": _sparse,
    "$dtype": lambda r, n: _dtype(r, n["$dtype"]),
    "$dtype_type": lambda r, n: _dtype(r, n["$dtype_type"]).type,
    "$pytype": _pytype,
    "$random_state": _random_state,
    "$object": _Reader.instance,
}


def _open(path):
    name = str(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise ModelFileError(f"{name}: cannot be read ({exc}).") from None
    if head[:1] == b"\x80" or head[:1] == b"\x78" or head[:2] in (b"\x1f\x8b", b"BZ"):
        raise ModelFileError(_OLD_PICKLE.format(path=name))
    if head[:2] != b"PK":
        raise ModelFileError(f"{name} is not a skgpstruct model file (not a ZIP archive).")
    try:
        zf = zipfile.ZipFile(path)
        bad = zf.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise ModelFileError(f"{name} is truncated or corrupted ({exc}); save the model "
                             "again.") from None
    if bad is not None:
        zf.close()
        raise ModelFileError(f"{name} is corrupted (entry {bad} fails its checksum).")
    return zf


def _check_header(header, names, name):
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ModelFileError(f"{name} is not a skgpstruct model file.")
    version = header.get("format_version")
    if type(version) is not int or version > FORMAT_VERSION:
        raise ModelFileError(
            f"{name} has model-file format {version!r}; this skgpstruct ({_version()}) "
            f"reads format {FORMAT_VERSION} and older. Upgrade skgpstruct to open it.")
    writer = header.get("skgpstruct_version")
    if _major_minor(writer) != _major_minor(_version()):
        raise ModelFileError(
            f"{name} was written by skgpstruct {writer}; this is {_version()}, and a model "
            "is read only by the same major.minor version (the fitted attributes change "
            "between minor versions). Retrain the model with this version, or load it "
            f"with skgpstruct {writer}.")
    n_arrays = header.get("n_arrays")
    expected = {_HEADER} | {f"arrays/{i}.npy" for i in range(n_arrays or 0)}
    if type(n_arrays) is not int or set(names) != expected:
        extra = sorted(set(names) - expected)
        raise ModelFileError(f"{name} has entries the format does not have "
                             f"({extra[:3]} ...) or lacks some: refused.")
    return n_arrays


def load(path):
    """Read a model written by :func:`save`, without unpickling anything.

    Parameters
    ----------
    path : str or path-like
        The model file.

    Returns
    -------
    model : object
        What was saved.

    Raises
    ------
    ModelFileError
        If the file is not a model file (an old pickle-based ``.skg`` or a
        joblib / pickle file included: the message says how to retrain), is
        truncated or corrupted, was written by another ``major.minor``
        version of skgpstruct or a newer format, or asks for a type the
        format does not hold or for a pickled array; nothing from the file
        is run.

    See Also
    --------
    save : Write one.
    """
    name = str(path)
    with _open(path) as zf:
        try:
            header = json.loads(zf.read(_HEADER).decode("utf-8"))
        except KeyError:
            raise ModelFileError(f"{name} is not a skgpstruct model file "
                                 f"(no {_HEADER}).") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ModelFileError(f"{name}: its header is damaged ({exc}).") from None
        n_arrays = _check_header(header, zf.namelist(), name)
        reader = _Reader(zf, n_arrays, name)
        try:
            return reader.decode(header.get("root"))
        except ModelFileError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ModelFileError(f"{name}: the model tree is damaged ({exc!r}).") from None
