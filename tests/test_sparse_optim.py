"""ProximalAdaGrad: its lazy row updates against the dense algorithm and a
plain-numpy reference, and RandomizedCRFTagger's row-sparse gradient and
``optimizer="adagrad"`` fits."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skgpstruct import RandomizedCRFTagger
from skgpstruct._input.sequences import SequenceData
from skgpstruct.optim.proximal import ProximalAdaGrad, RowSparseGradient
from skgpstruct.datasets import make_chain_data


def _reference_steps(x, grads, lr, decay, lo, hi, n_block, eps=1e-8, scale=1.0):
    """Dense proximal AdaGrad in numpy, written from its definition."""
    x = x.copy()
    G = np.zeros_like(x)
    d = np.full_like(x, decay)
    d[lo:hi] = 0.0
    for g in grads:
        g = scale * g
        G += g * g
        h = eps + np.sqrt(G)
        # a coordinate without a gradient yet (G = 0) has no step size: kept
        x = np.where(G > 0, (x - lr * g / h) / (1.0 + lr * d / h), x)
    return x


def _sparse_problem(seed, n_rows=9, n_cols=3, n_rest=5, n_steps=40):
    """Random start and gradients whose row block is zero outside a random
    subset of rows at every step (some rows never touched, some touched
    once)."""
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=n_rows * n_cols + n_rest)
    grads, touched = [], []
    for k in range(n_steps):
        rows = np.sort(rng.choice(n_rows - 2, size=rng.integers(0, 4), replace=False))
        if k == 7:
            rows = np.union1d(rows, [n_rows - 2])  # touched once only
        g = np.zeros_like(x0)
        block = rng.normal(size=(rows.shape[0], n_cols))
        g[: n_rows * n_cols].reshape(n_rows, n_cols)[rows] = block
        g[n_rows * n_cols:] = rng.normal(size=n_rest)
        grads.append(g)
        touched.append((rows, block, g[n_rows * n_cols:].copy()))
    return x0, grads, touched


@pytest.mark.parametrize("decay", [0.0, 0.3])
def test_dense_steps_match_the_numpy_reference(decay):
    x0, grads, _ = _sparse_problem(0)
    n_block = 27
    lo, hi = n_block + 1, n_block + 3
    opt = ProximalAdaGrad(0.7, n_rows=9, n_cols=3, weight_decay=decay, undecayed=(lo, hi))
    x = x0.copy()
    for g in grads:
        opt.step(x, g, scale=0.5)
    expected = _reference_steps(x0, grads, 0.7, decay, lo, hi, n_block, scale=0.5)
    np.testing.assert_allclose(x, expected, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lazy_row_steps_equal_the_dense_algorithm(seed):
    x0, grads, touched = _sparse_problem(seed)
    kwargs = dict(n_rows=9, n_cols=3, weight_decay=0.4, undecayed=(28, 30))
    dense, lazy = ProximalAdaGrad(0.6, **kwargs), ProximalAdaGrad(0.6, **kwargs)
    x_dense, x_lazy = x0.copy(), x0.copy()
    for k, (g, (rows, block, rest)) in enumerate(zip(grads, touched)):
        dense.step(x_dense, g)
        lazy.step(x_lazy, RowSparseGradient(rows, block, rest))
        if k == 20:
            # a row caught up mid-way equals the dense iterate
            lazy.catch_up(x_lazy, np.array([0, 4]))
            for r in (0, 4):
                np.testing.assert_allclose(x_lazy[3 * r : 3 * r + 3],
                                           x_dense[3 * r : 3 * r + 3], rtol=1e-12)
    # untouched rows are stale until synchronize ...
    assert not np.allclose(x_lazy, x_dense)
    lazy.synchronize(x_lazy)
    # ... after which the iterates agree up to rounding (a power instead of
    # repeated divisions)
    np.testing.assert_allclose(x_lazy, x_dense, rtol=1e-12, atol=1e-300)
    # the never-touched row kept G = 0: no step size, no step (it used to be
    # divided by 1 + lr decay / eps at each of the 40 steps, to 1e-296)
    np.testing.assert_array_equal(x_lazy[3 * 8 : 3 * 9], x0[3 * 8 : 3 * 9])
    assert np.abs(x0[3 * 8 : 3 * 9]).min() > 1e-3


def test_gradient_of_the_wrong_size_is_refused():
    opt = ProximalAdaGrad(0.1, n_rows=2, n_cols=2)
    with pytest.raises(ValueError, match="dense part"):
        opt.step(np.zeros(6), RowSparseGradient(np.array([0]), np.ones((1, 2)), np.ones(3)))


def _estimator_case(n_sequences, counts, transitions="full"):
    X, y = make_chain_data(n_sequences=n_sequences, n_classes=4, n_features=30,
                           random_state=3)
    data = SequenceData.from_sequences(X, y)
    est = RandomizedCRFTagger(transitions=transitions, rank=2, c2=0.3)
    est.classes_ = np.arange(4)
    est.n_features_in_ = 30
    est._n_top_, est._n_sampled_ = counts if counts else (None, 0)
    est.exact_ = counts is None
    theta = np.random.default_rng(0).normal(scale=0.5, size=est._layout()[-1])
    return data, est, theta


@pytest.mark.parametrize("counts", [None, (2, 1)])
@pytest.mark.parametrize("transitions", ["full", "low_rank"])
@pytest.mark.parametrize("n_sequences", [7, 75])  # one chunk, three chunks
def test_row_sparse_gradient_equals_the_dense_one(counts, transitions, n_sequences):
    data, est, theta = _estimator_case(n_sequences, counts, transitions)
    seeds = np.arange(n_sequences, dtype=np.int64) * 7 + 1
    idx = np.arange(n_sequences)
    loss, grad = est._loss_grad(theta, data, idx, seeds, None)
    s_loss, sparse = est._sparse_loss_grad(theta, data, seeds, 30, None)
    assert s_loss == pytest.approx(loss, rel=1e-12)
    dense = np.zeros_like(grad)
    dense[: 30 * 4].reshape(30, 4)[sparse.rows] = sparse.grad_rows
    dense[30 * 4 :] = sparse.grad_rest
    np.testing.assert_allclose(dense, grad, rtol=1e-12, atol=1e-12)
    # only features that occur in the data have rows
    X = data.X_flat
    used = np.flatnonzero((X != 0).any(axis=0)) if isinstance(X, np.ndarray) else np.unique(X.indices)
    np.testing.assert_array_equal(sparse.rows, used)


@pytest.fixture(scope="module")
def chain_data():
    X, y = make_chain_data(n_sequences=120, n_classes=5, n_features=40, random_state=2)
    return X[:80], y[:80], X[80:], y[80:]


# 64: two chunks per minibatch, whose row-sparse gradients are merged
@pytest.mark.parametrize("batch_size", [16, 64])
def test_adagrad_fit_is_accurate_and_independent_of_n_jobs(chain_data, batch_size):
    X_tr, y_tr, X_te, y_te = chain_data
    kwargs = dict(n_top=2, n_sampled=1, optimizer="adagrad", learning_rate=0.5,
                  max_iter=15, batch_size=batch_size, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one = RandomizedCRFTagger(**kwargs).fit(X_tr, y_tr)
        two = RandomizedCRFTagger(n_jobs=2, **kwargs).fit(X_tr, y_tr)
        exact = RandomizedCRFTagger(max_iter=50).fit(X_tr, y_tr)
    np.testing.assert_array_equal(one.coef_, two.coef_)
    assert one.score(X_te, y_te) > exact.score(X_te, y_te) - 0.03
    # the loss history is the epoch's loss plus the penalty at its end: it
    # falls from the first epoch
    assert one.loss_history_[-1] < one.loss_history_[0]


def test_adagrad_epoch_value_includes_the_penalty(chain_data):
    X_tr, y_tr, _, _ = chain_data
    kwargs = dict(optimizer="adagrad", learning_rate=0.5, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        big = RandomizedCRFTagger(c2=1e3, **kwargs).fit(X_tr, y_tr)
        small = RandomizedCRFTagger(c2=0.0, **kwargs).fit(X_tr, y_tr)
    # a huge penalty keeps the weights near 0 (a large loss) but its value
    # is then small too; with c2 = 0 the history is the data loss alone
    assert np.abs(big.coef_).max() < np.abs(small.coef_).max()
    penalty = 1e3 * (np.sum(big.coef_ ** 2) + np.sum(big.transition_ ** 2))
    assert big.loss_history_[-1] > penalty


def test_rows_split_over_threads_give_identical_steps(monkeypatch):
    from joblib import Parallel

    import skgpstruct.optim.proximal as sparse_optim

    # parts of 64 rows x 3 columns, so that these small steps are split
    monkeypatch.setattr(sparse_optim, "_SPLIT_COORDINATES", 64 * 3)
    calls = []
    kernel = sparse_optim._step_rows

    def spy(*args):
        calls.append(args[3].shape[0])
        return kernel(*args)

    monkeypatch.setattr(sparse_optim, "_step_rows", spy)
    rng = np.random.default_rng(5)
    n_rows, n_cols = 400, 3
    x0 = rng.normal(size=n_rows * n_cols + 2)
    kwargs = dict(n_rows=n_rows, n_cols=n_cols, weight_decay=0.2)
    one = ProximalAdaGrad(0.4, **kwargs)
    with Parallel(n_jobs=2, prefer="threads") as parallel:
        two = ProximalAdaGrad(0.4, parallel=parallel, **kwargs)
        x1, x2 = x0.copy(), x0.copy()
        for _ in range(15):
            rows = np.sort(rng.choice(n_rows, size=300, replace=False))  # > 2 x 64: split
            g = RowSparseGradient(rows, rng.normal(size=(300, n_cols)), rng.normal(size=2))
            one.step(x1, g)
            two.step(x2, g)
        one.synchronize(x1)
        two.synchronize(x2)
    np.testing.assert_array_equal(x1, x2)
    assert not np.array_equal(x1, x0)
    assert min(calls) < 300  # the two-thread optimiser did split its steps


@pytest.mark.parametrize("missed", [1, 2, 3, 5, 64, 1000, 65536, 65537, 200000])
def test_catch_up_power_is_numbas_scalar_power(missed):
    # The vectorised catch-up (row loops, the power by squarings) gives the
    # scalar x * (h / (h + c)) ** missed of numba bit for bit, and numpy's
    # real power to rounding; the gathered rows are the updated ones.
    from numba import njit

    from skgpstruct.optim.proximal import _catch_up

    @njit
    def scalar(x, G, lr, decay, eps, k):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            h = eps + np.sqrt(G[i])
            out[i] = x[i] * (h / (h + lr * decay)) ** k
        return out

    rng = np.random.default_rng(missed)
    n_rows, n_cols = 6, 37
    x = rng.normal(size=n_rows * n_cols)
    G = rng.random(n_rows * n_cols) * 10.0
    lr, decay, eps = 0.5, 1e-5, 1e-8
    rows = np.array([1, 2, 4], dtype=np.int64)
    last = np.zeros(n_rows, dtype=np.int64)
    last[2] = missed  # up to date: untouched
    params = x.copy()
    out = np.empty((3, n_cols))
    _catch_up(params, G, last, rows, out, n_cols, missed, lr, decay, 0.0, eps)
    expected = x.copy()
    for r in (1, 4):
        sl = slice(r * n_cols, (r + 1) * n_cols)
        expected[sl] = scalar(x[sl], G[sl], lr, decay, eps, np.int64(missed))
        h = eps + np.sqrt(G[sl])
        np.testing.assert_allclose(params[sl], x[sl] * (h / (h + lr * decay)) ** float(missed),
                                   rtol=1e-11)
    np.testing.assert_array_equal(params, expected)
    np.testing.assert_array_equal(out, params.reshape(n_rows, n_cols)[rows])
    np.testing.assert_array_equal(last[rows], missed)


@pytest.mark.parametrize("penalty", [dict(c2=0.1), dict(c1=0.01)])
def test_adagrad_warm_start_continues_from_the_fitted_weights(penalty):
    """A warm refit's new optimiser has G = 0 everywhere: the rows missing
    from its first minibatches used to get the proximal map with h = eps,
    which erased them (first warm epoch 143 against 54 at the end of the
    first fit, 178 cold)."""
    import scipy.sparse as sp

    rng = np.random.RandomState(0)
    X, y = [], []
    for _ in range(60):  # sparse word-like features, 10 per label
        labels = rng.randint(4, size=rng.randint(2, 6))
        A = np.zeros((labels.size, 40))
        A[np.arange(labels.size), 4 * rng.randint(10, size=labels.size) + labels] = 1.0
        X.append(sp.csr_matrix(A))
        y.append(labels)
    kw = dict(optimizer="adagrad", learning_rate=0.5, batch_size=4, tol=0, random_state=0,
              **penalty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = RandomizedCRFTagger(max_iter=30, warm_start=True, **kw).fit(X, y)
        last = crf.loss_curve_[-1]
        crf.set_params(max_iter=1).fit(X, y)
        cold = RandomizedCRFTagger(max_iter=1, **kw).fit(X, y)
    assert crf.loss_curve_[0] < 1.2 * last < cold.loss_curve_[0]
