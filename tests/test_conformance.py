"""An sklearn conformance suite of our own, for both taggers.

sklearn's ``check_estimator`` cannot run its data checks on ``X`` given as a
list of per-sequence 2-D arrays, so this module runs the equivalents on
sequence data, parametrised over GPStructTagger (weight-space form, and the
inducing-point form) and RandomizedCRFTagger, with small fast settings:

- a fit is repeatable: fitting twice (a new instance, the same instance
  again, a clone) gives bit-identical fitted attributes and predictions;
- pickle and joblib round trips (also memory-mapped, read-only) keep
  ``predict``, ``predict_marginals`` and ``score`` bit for bit;
- containers: list, tuple and 1-D object array of sequences are accepted;
  a generator / iterator, and a single 2-D array (dense or sparse) instead
  of a list of sequences, are refused with a TypeError that says what to
  pass;
- features: CSR / CSC / COO matrices, sparse arrays and mixed dense /
  sparse lists give the model of the dense input; float32, int, uint8 and
  bool features give the model of their float64 cast; Fortran order,
  strided views, read-only arrays and joblib memmaps give that of C-ordered
  arrays;
- single-token sequences in a batch, a label missing from one
  cross-validation training fold, and one 10,000-token sequence (the CRF
  and the weight-space GP; the inducing-point GP's per-sequence ``T x T``
  covariances make that infeasible, see ``test_one_long_sequence``);
- ``fit`` / ``predict`` / ``score`` leave ``X`` and ``y`` untouched (also a
  non-canonical CSR matrix, which validation used to canonicalise in place);
- features too large for the potentials (1e300, or finite entries whose sum
  overflows) are refused at the start of ``fit`` and ``predict`` with an
  error that says to scale them (:data:`skgpstruct._input.validation.MAX_TOKEN_L1_NORM`).

Not repeated here (tested elsewhere): sklearn's data-free checks, clone's
parameters and unfitted state, pickling of a sparse / string-label fit,
``n_jobs`` 1 vs 2 and the same ``random_state`` giving the same model
(``tests/test_sklearn_api.py``); repeated and batch-independent GP
predictions and ``n_jobs`` at prediction (``tests/test_determinism.py``);
the validation errors of empty / ragged / NaN / mis-shaped input
(``tests/test_validation.py``).

Where results are compared bit for bit, the reason is that every fit is
seeded by ``random_state`` and sums over sequences run in a fixed order
(fixed chunks), so the same input in the same process gives the same
floating-point operations. Sparse and dense inputs give different
summation orders in the matrix products (``~1e-16`` relative), which
L-BFGS amplifies over its iterations; those are compared to a tolerance
(except for the weight-space GP, which converts every input to CSR and is
bit-identical).
"""

import copy
import pickle
import warnings

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold, cross_val_score

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct._input.validation import MAX_TOKEN_L1_NORM, check_X_sequences
from skgpstruct.datasets import make_chain_data

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

_GP = dict(kernel_variance=3.0, max_iter=5, n_samples=4, n_predict_samples=8,
           random_state=0)

# name -> (estimator factory, tolerance of sparse-vs-dense comparisons:
# None = bit-identical, else (rtol, atol)).
CASES = {
    "gp": (lambda **kw: GPStructTagger(**{**_GP, **kw}), None),
    # inducing="random": k-means clusters sparse input on a random
    # projection by design (gp/inducing.py), so only "random" picks the same
    # inducing points for sparse and dense input
    "gp-inducing": (lambda **kw: GPStructTagger(**{
        **_GP, "approximation": "inducing", "inducing": "random",
        "n_inducing": 8, **kw}), (1e-7, 1e-9)),
    "crf": (lambda **kw: RandomizedCRFTagger(**{"max_iter": 5, "random_state": 0,
                                                **kw}), (1e-10, 1e-12)),
}


@pytest.fixture(params=sorted(CASES))
def case(request):
    make, tol = CASES[request.param]
    return dict(name=request.param, make=make, tol=tol)


@pytest.fixture(scope="module")
def data():
    """12 training and 6 test sequences of 1 to 6 tokens (three of the
    training sequences have a single token), 3 labels, 4 features."""
    X, y = make_chain_data(n_sequences=18, n_classes=3, n_features=4, length=(1, 6),
                           random_state=0)
    return X[:12], y[:12], X[12:], y[12:]


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


# --------------------------------------------------------------- comparisons
def _assert_same(a, b, tol=None, where="model"):
    """Recursive equality of fitted state: bit for bit with ``tol=None``,
    else floats to ``(rtol, atol)`` (and a sparse attribute may then equal
    a dense one)."""
    if sp.issparse(a) or sp.issparse(b):
        if tol is None:
            assert type(a) is type(b), where
            a, b = a.tocsr(), b.tocsr()
            for part in ("indptr", "indices", "data"):
                np.testing.assert_array_equal(getattr(a, part), getattr(b, part),
                                              err_msg=where)
        else:
            a = a.toarray() if sp.issparse(a) else a
            b = b.toarray() if sp.issparse(b) else b
            np.testing.assert_allclose(a, b, rtol=tol[0], atol=tol[1], err_msg=where)
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, where
        if tol is None or a.dtype.kind not in "fc":
            assert a.dtype == b.dtype, where
            np.testing.assert_array_equal(a, b, err_msg=where)
        else:
            np.testing.assert_allclose(a, b, rtol=tol[0], atol=tol[1], err_msg=where)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), where
        for key in a:
            _assert_same(a[key], b[key], tol, f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            _assert_same(u, v, tol, f"{where}[{i}]")
    elif hasattr(a, "get_params"):  # estimators and kernels
        assert type(a) is type(b), where
        _assert_same(a.get_params(deep=False), b.get_params(deep=False), tol,
                     f"{where}.params")
    elif isinstance(a, float) and tol is not None:
        np.testing.assert_allclose(a, b, rtol=tol[0], atol=tol[1], err_msg=where)
    else:
        assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"


#: Wall-clock seconds, not model state.
WALL_CLOCK = {"_iteration_times"}


def _assert_same_model(a, b, tol=None):
    """Same fitted state: every attribute in ``vars`` (parameters, fitted
    attributes and the private fitted state) but wall-clock times."""
    assert sorted(vars(a)) == sorted(vars(b))
    for key in vars(a):
        if key not in WALL_CLOCK:
            _assert_same(vars(a)[key], vars(b)[key], tol, key)


def _assert_same_predictions(a, b, X, y=None, tol=None, X_b=None):
    """Same ``predict`` (labels exactly), ``predict_marginals`` (bit for bit
    or to ``tol``) and ``score`` on ``X`` (``X_b`` for ``b``, if given)."""
    X_b = X if X_b is None else X_b
    for p, q in zip(a.predict(X), b.predict(X_b), strict=True):
        np.testing.assert_array_equal(p, q)
    for p, q in zip(a.predict_marginals(X), b.predict_marginals(X_b), strict=True):
        if tol is None:
            np.testing.assert_array_equal(p, q)
        else:
            np.testing.assert_allclose(p, q, rtol=tol[0], atol=tol[1])
    if y is not None:
        assert a.score(X, y) == b.score(X_b, y)


# ------------------------------------------------------------ repeatability
def test_fit_twice_gives_the_same_model(case, data):
    """A new instance, the same instance refitted and a clone of a fitted
    one all give bit-identical models and predictions."""
    X, y, X_te, y_te = data
    a = _fit(case["make"](), X, y)
    b = _fit(case["make"](), X, y)
    _assert_same_model(a, b)
    _assert_same_predictions(a, b, X_te, y_te)
    _fit(b, X, y)  # the same instance again (warm_start=False: from scratch)
    _assert_same_model(a, b)
    c = _fit(clone(a), X, y)
    _assert_same_model(a, c)
    _assert_same_predictions(a, c, X_te, y_te)


def test_pickle_and_joblib_round_trips(case, data, tmp_path):
    X, y, X_te, y_te = data
    est = _fit(case["make"](), X, y)
    path = tmp_path / "est.joblib"
    joblib.dump(est, path)
    copies = {
        "pickle": pickle.loads(pickle.dumps(est)),
        "joblib": joblib.load(path),
        # fitted arrays as read-only memmaps: prediction must not write them
        "joblib-mmap": joblib.load(path, mmap_mode="r"),
    }
    for kind, back in copies.items():
        assert type(back) is type(est), kind
        _assert_same_model(est, back)
        _assert_same_predictions(est, back, X_te, y_te)


# --------------------------------------------------------------- containers
def test_list_tuple_and_object_array_of_sequences(case, data):
    X, y, X_te, y_te = data
    ref = _fit(case["make"](), X, y)
    as_tuple = _fit(case["make"](), tuple(X), tuple(y))
    _assert_same_model(ref, as_tuple)
    X_obj = np.empty(len(X), dtype=object)
    X_obj[:] = X
    y_obj = np.empty(len(y), dtype=object)
    y_obj[:] = y
    as_array = _fit(case["make"](), X_obj, y_obj)
    _assert_same_model(ref, as_array)
    X_te_obj = np.empty(len(X_te), dtype=object)
    X_te_obj[:] = X_te
    _assert_same_predictions(ref, ref, X_te, y_te, X_b=tuple(X_te))
    _assert_same_predictions(ref, ref, X_te, y_te, X_b=X_te_obj)


def test_iterators_are_refused(case, data):
    X, y, X_te, y_te = data
    match = r"iterator.*pass a list"
    bad_fits = {
        "generator X": ((x for x in X), y),
        "generator y": (X, (t for t in y)),
        "iterators": (iter(X), iter(y)),
        "map": (map(np.asarray, X), y),
    }
    for what, (X_bad, y_bad) in bad_fits.items():
        est = case["make"]()
        with pytest.raises(TypeError, match=match):
            est.fit(X_bad, y_bad)
        assert not hasattr(est, "classes_"), what  # refused before fitting
    fitted = _fit(case["make"](), X, y)
    for method in ("predict", "predict_marginals"):
        with pytest.raises(TypeError, match=match):
            getattr(fitted, method)(x for x in X_te)
    with pytest.raises(TypeError, match=match):
        fitted.score(iter(X_te), y_te)
    with pytest.raises(TypeError, match="list"):
        fitted.predict({0: X_te[0]})  # a dict is not a list of sequences


def test_a_single_array_is_refused(case, data):
    X, y, X_te, _ = data
    flat, flat_y = np.vstack(X), np.concatenate(y)
    for X_bad in (flat, sp.csr_matrix(flat), sp.csr_array(flat)):
        with pytest.raises(TypeError, match=r"list of sequences.*wrap a single "
                                            r"sequence as \[X\]"):
            case["make"]().fit(X_bad, [flat_y])
    with pytest.raises(TypeError, match=r"list of sequences.*list\(X\)"):
        case["make"]().fit(np.stack([x[:1] for x in X]), [t[:1] for t in y])
    with pytest.raises(TypeError, match="list of label sequences"):
        case["make"]().fit(X, flat_y)
    fitted = _fit(case["make"](), X, y)
    for method in ("predict", "predict_marginals"):
        with pytest.raises(TypeError, match=r"wrap a single sequence as \[X\]"):
            getattr(fitted, method)(X_te[0])


# ----------------------------------------------------------------- features
_SPARSE_FORMATS = {
    "csr_matrix": sp.csr_matrix,
    "csc_matrix": sp.csc_matrix,
    "coo_matrix": sp.coo_matrix,
    "csr_array": sp.csr_array,
    "csc_array": sp.csc_array,
}


@pytest.mark.parametrize("fmt", [*_SPARSE_FORMATS, "mixed"])
def test_sparse_input_gives_the_dense_model(case, data, fmt):
    X, y, X_te, y_te = data

    def convert(seqs):
        if fmt == "mixed":  # dense and sparse sequences in one list
            return [sp.csr_matrix(x) if i % 2 else x for i, x in enumerate(seqs)]
        return [_SPARSE_FORMATS[fmt](x) for x in seqs]

    dense = _fit(case["make"](), X, y)
    sparse = _fit(case["make"](), convert(X), y)
    _assert_same_model(dense, sparse, case["tol"])
    _assert_same_predictions(dense, sparse, X_te, tol=case["tol"])
    _assert_same_predictions(dense, dense, X_te, tol=case["tol"], X_b=convert(X_te))


def _cast(x, dtype):
    if dtype is bool:
        return x > 0.3
    if np.issubdtype(dtype, np.integer):
        return np.rint(np.abs(x) * 4).astype(dtype)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.uint8, bool],
                         ids=lambda d: np.dtype(d).name)
def test_feature_dtypes_give_the_model_of_their_float64_cast(case, data, dtype):
    X, y, X_te, y_te = data
    X_dt = [_cast(x, dtype) for x in X]
    X_te_dt = [_cast(x, dtype) for x in X_te]
    assert X_dt[0].dtype == np.dtype(dtype)
    est = _fit(case["make"](), X_dt, y)
    ref = _fit(case["make"](), [x.astype(np.float64) for x in X_dt], y)
    _assert_same_model(est, ref)
    _assert_same_predictions(est, ref, X_te_dt, y_te,
                             X_b=[x.astype(np.float64) for x in X_te_dt])
    # and as sparse matrices of that dtype
    sparse = _fit(case["make"](), [sp.csr_matrix(x) for x in X_dt], y)
    assert sp.csr_matrix(X_dt[0]).dtype == np.dtype(dtype)
    _assert_same_model(est, sparse, case["tol"])


def _read_only(x):
    x = x.copy()
    x.flags.writeable = False
    return x


def _memmaps(seqs, path):
    joblib.dump(seqs, path)
    return joblib.load(path, mmap_mode="r")


def test_memory_layouts_and_read_only_arrays(case, data, tmp_path):
    """Fortran order, strided views, read-only arrays and joblib memmaps give
    the model of C-ordered arrays, bit for bit."""
    X, y, X_te, y_te = data
    ref = _fit(case["make"](), X, y)
    wide = [np.repeat(x, 2, axis=1) for x in X]  # columns 0, 2, 4, ... are x
    mapped = _memmaps(X, tmp_path / "X.joblib")
    assert isinstance(mapped[0], np.memmap) and not mapped[0].flags.writeable
    layouts = {
        "fortran": [np.asfortranarray(x) for x in X],
        "strided": [w[:, ::2] for w in wide],
        "read-only": [_read_only(x) for x in X],
        "memmap": mapped,
    }
    for kind, X_alt in layouts.items():
        est = _fit(case["make"](), X_alt, y)
        _assert_same_model(ref, est)
    X_te_ro = [_read_only(np.asfortranarray(x)) for x in X_te]
    _assert_same_predictions(ref, ref, X_te, y_te, X_b=X_te_ro)
    _assert_same_predictions(ref, ref, X_te, y_te,
                             X_b=_memmaps(X_te, tmp_path / "X_te.joblib"))


def _non_canonical_csr(x):
    """``x`` as a CSR matrix with unsorted indices, a duplicate entry (that
    sums to the right value) and an explicit zero."""
    csr = sp.csr_matrix(x)
    rows = np.repeat(np.arange(x.shape[0]), np.diff(csr.indptr))
    data, cols = csr.data.copy(), csr.indices.copy()
    data[0] /= 2.0  # split the first entry into two halves
    rows = np.r_[rows[::-1], rows[0], 0]
    cols = np.r_[cols[::-1], cols[0], (cols[0] + 1) % x.shape[1]]
    data = np.r_[data[::-1], data[0], 0.0]
    order = np.argsort(rows, kind="stable")  # rows in order, columns not
    indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=x.shape[0]))]
    out = sp.csr_matrix((data[order], cols[order], indptr), shape=x.shape)
    assert not out.has_canonical_format
    np.testing.assert_allclose(out.toarray(), x, rtol=1e-15)
    return out


def test_read_only_and_memmapped_sparse_input(case, data, tmp_path):
    X, y, X_te, y_te = data
    ref = _fit(case["make"](), [sp.csr_matrix(x) for x in X], y)
    read_only = []
    for i, x in enumerate(X):
        m = _non_canonical_csr(x) if i % 2 else sp.csr_matrix(x)
        for part in (m.data, m.indices, m.indptr):
            part.flags.writeable = False
        read_only.append(m)
    est = _fit(case["make"](), read_only, y)
    _assert_same_model(ref, est, case["tol"])
    mapped = _memmaps([_non_canonical_csr(x) for x in X], tmp_path / "Xs.joblib")
    assert not mapped[0].data.flags.writeable
    est = _fit(case["make"](), mapped, y)
    _assert_same_model(ref, est, case["tol"])
    # canonicalised, the memmapped matrices equal the canonical ones exactly
    _assert_same_predictions(ref, ref, [sp.csr_matrix(x) for x in X_te], y_te,
                             X_b=_memmaps([_non_canonical_csr(x) for x in X_te],
                                          tmp_path / "Xs_te.joblib"))


# ------------------------------------------------------------ odd sequences
def test_single_token_sequences(case, data):
    X, y, X_te, y_te = data
    assert sum(len(t) == 1 for t in y) >= 3  # the fixture's training data
    est = _fit(case["make"](), X, y)
    batch = [x[:1] for x in X_te[:3]] + X_te + [X_te[0][-1:]]
    labels = est.predict(batch)
    marginals = est.predict_marginals(batch)
    for x, p, m in zip(batch, labels, marginals, strict=True):
        assert p.shape == (x.shape[0],) and set(p) <= set(est.classes_)
        assert m.shape == (x.shape[0], len(est.classes_))
        np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-12)
    # alone, a single-token sequence gets what it gets in the batch: bit for
    # bit in the weight-space GP (per-sequence moments); the CRF's potentials
    # and the inducing form's moments come from one BLAS product over the
    # batch, whose rounding depends on the batch's size (1 ulp seen)
    tol = None if case["name"] == "gp" else (0, 1e-12)
    for i in (0, len(batch) - 1):
        np.testing.assert_array_equal(est.predict([batch[i]])[0], labels[i])
        _assert_same(est.predict_marginals([batch[i]])[0], marginals[i], tol)
    # training data of single tokens only: no transition is ever observed
    firsts = [(x[:1], t[:1]) for x, t in zip(X + X_te, y + y_te)]
    X1, y1 = [f[0] for f in firsts], [f[1] for f in firsts]
    assert len(np.unique(np.concatenate(y1))) >= 2
    only = _fit(case["make"](), X1, y1)
    assert all(np.all(np.isfinite(m)) for m in only.predict_marginals(X_te))
    assert set(np.concatenate(only.predict(X_te))) <= set(only.classes_)


def test_label_missing_from_a_cv_training_fold(case, data):
    """A label that occurs in one sequence only: the folds whose training
    part lacks it fit on the other labels, predict only those, and score."""
    X, y, X_te, y_te = data
    X_all, names = X + X_te, np.array(["A", "B", "C"])
    y_all = [names[t] for t in y + y_te]
    y_all[0] = np.array(["RARE"] + list(y_all[0][1:]))
    cv = KFold(3)
    missing = 0
    for train, test in cv.split(X_all):
        est = _fit(case["make"](), [X_all[i] for i in train], [y_all[i] for i in train])
        missing += "RARE" not in est.classes_
        pred = est.predict([X_all[i] for i in test])
        assert set(np.concatenate(pred)) <= set(est.classes_)
        assert 0.0 <= est.score([X_all[i] for i in test], [y_all[i] for i in test]) <= 1.0
    assert missing == 1  # fold 0 holds the rare sequence in its test part
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        scores = cross_val_score(case["make"](), X_all, y_all, cv=cv,
                                 error_score="raise")
    assert scores.shape == (3,) and np.all((scores >= 0) & (scores <= 1))


_LONG_GP_REASON = (
    "the inducing-point form of GPStructTagger forms a dense T x T covariance "
    "per sequence and label (its Ktilde, gp/terms.py) and factorises it: "
    "O(T^2) memory and O(T^3) time, tens of minutes and ~20 GiB for 10,000 "
    "tokens (not run; the weight-space form samples long sequences without it, "
    "gp/_weight_space_long.py)"
)


@pytest.mark.parametrize("name, length", [
    ("crf", 10_000),
    ("gp", 10_000),
    pytest.param("gp-inducing", 10_000,
                 marks=pytest.mark.xfail(run=False, reason=_LONG_GP_REASON)),
    ("gp", 300),
    ("gp-inducing", 300),
])
def test_one_long_sequence(name, length):
    """Fit on one long sequence (and a few short ones) and predict it:
    finite marginals that sum to 1 at every token (no underflow along the
    chain), labels within ``classes_``, better than chance, a finite log
    probability of the predicted path."""
    X, y = make_chain_data(n_sequences=1, n_classes=3, n_features=3,
                           length=(length, length), random_state=0)
    X_short, y_short = make_chain_data(n_sequences=4, n_classes=3, n_features=3,
                                       length=(2, 5), random_state=0)
    est = _fit(CASES[name][0](max_iter=3), X + X_short, y + y_short)
    (pred,) = est.predict(X)
    (marg,) = est.predict_marginals(X)
    assert pred.shape == (length,) and set(pred) <= set(est.classes_)
    assert marg.shape == (length, 3) and np.all(np.isfinite(marg))
    np.testing.assert_allclose(marg.sum(axis=1), 1.0, rtol=1e-10)
    assert est.score(X, y) > 0.5
    # the log probability of the whole predicted path: finite (a path of
    # thousands of tokens has a probability that underflows, not its log)
    (log_p,) = est.predict_path_proba(X, log=True)
    assert np.isfinite(log_p) and log_p <= 0.0


# --------------------------------------------------------- inputs untouched
def _snapshot(seqs):
    return copy.deepcopy(seqs)


def _assert_untouched(before, after):
    assert type(before) is type(after) and len(before) == len(after)
    for i, (b, a) in enumerate(zip(before, after)):
        assert type(b) is type(a), i
        if sp.issparse(b):
            assert a.format == b.format and a.shape == b.shape, i
            assert a.has_canonical_format == b.has_canonical_format, i
            parts = ("data", "indices", "indptr") if b.format in ("csr", "csc") \
                else ("data", "row", "col")
            for part in parts:
                u, v = getattr(b, part), getattr(a, part)
                assert u.dtype == v.dtype, (i, part)
                np.testing.assert_array_equal(u, v, err_msg=f"{i}.{part}")
        elif isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape, i
            assert a.flags.c_contiguous == b.flags.c_contiguous, i
            assert a.flags.f_contiguous == b.flags.f_contiguous, i
            np.testing.assert_array_equal(a, b, err_msg=str(i))
        else:
            assert a == b, i


def test_fit_and_predict_do_not_modify_their_inputs(case, data):
    X, y, X_te, y_te = data
    X_in = [
        x if i % 5 == 0 else
        np.asfortranarray(x) if i % 5 == 1 else
        _non_canonical_csr(x) if i % 5 == 2 else
        sp.csc_matrix(x) if i % 5 == 3 else
        sp.coo_matrix(x)
        for i, x in enumerate(X)
    ]
    X_in[-1] = _cast(X[-1], np.int64)
    X_in[-2] = X[-2].tolist()  # a nested list is a sequence too
    y_in = [t.copy() for t in y]  # int labels: arrays, and one list
    y_in[1] = y_in[1].tolist()
    X_te_in = [sp.csr_matrix(x) if i % 2 else x for i, x in enumerate(X_te)]
    y_te_in = [t.copy() for t in y_te]
    before = [_snapshot(v) for v in (X_in, y_in, X_te_in, y_te_in)]
    ids = [[id(s) for s in v] for v in (X_in, y_in, X_te_in, y_te_in)]
    est = _fit(case["make"](), X_in, y_in)
    est.predict(X_te_in)
    est.predict_marginals(X_te_in)
    est.score(X_te_in, y_te_in)
    est.predict_uncertainty(X_te_in)
    for b, a, i in zip(before, (X_in, y_in, X_te_in, y_te_in), ids):
        _assert_untouched(b, a)
        assert [id(s) for s in a] == i  # the same sequence objects, in order


# --------------------------------------------------- extreme feature values
def _scaled(seqs, factor, sparse=False):
    out = [x * factor for x in seqs]
    return [sp.csr_matrix(x) for x in out] if sparse else out


_TOO_LARGE = r"features too large for the potentials.*Scale the features.*MaxAbsScaler"


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_too_large_features_are_refused_at_the_start(case, data, sparse):
    """Features scaled by 1e300 (or 1e20), or finite entries whose sum
    overflows, raise a ValueError saying the features are too large and to
    scale them, before anything is fitted (and in predict, before any
    potential is computed), instead of "U contains NaN" from deep inside."""
    X, y, X_te, y_te = data
    overflow = [x.copy() for x in X]
    overflow[3][0, :2] = [1e308, 1e308]  # finite, but the sum overflows
    for X_bad in (_scaled(X, 1e300, sparse), _scaled(X, 1e20, sparse),
                  _scaled(overflow, 1.0, sparse)):
        est = case["make"]()
        with pytest.raises(ValueError, match=_TOO_LARGE) as info:
            est.fit(X_bad, y)
        assert "NaN" not in str(info.value)
        assert not hasattr(est, "classes_")  # refused in validation
    fitted = _fit(case["make"](), X, y)
    state = copy.deepcopy(vars(fitted))
    for method in ("predict", "predict_marginals", "predict_uncertainty"):
        with pytest.raises(ValueError, match=_TOO_LARGE):
            getattr(fitted, method)(_scaled(X_te, 1e300, sparse))
    with pytest.raises(ValueError, match=_TOO_LARGE):
        fitted.score(_scaled(X_te, 1e300, sparse), y_te)
    _assert_same(vars(fitted), state)  # a refused call changes nothing


def test_token_norm_limit():
    """The limit is on ``sum_d |x_td|`` of a token: at the limit accepted,
    just above refused; spread over features or tokens it counts per token."""
    d = 4
    at = np.full((2, d), MAX_TOKEN_L1_NORM / d)
    check_X_sequences([at])
    check_X_sequences([sp.csr_matrix(-at)])
    above = at.copy()
    above[1, 0] *= 1.0 + 1e-9
    with pytest.raises(ValueError, match="Sequence 1 of X .* token 1 "):
        check_X_sequences([at, above])
    with pytest.raises(ValueError, match="token 1 "):
        check_X_sequences([sp.csr_matrix(-above)])
    # large single entries are fine when each token's sum stays in bounds
    check_X_sequences([np.diag(np.full(d, MAX_TOKEN_L1_NORM))])
