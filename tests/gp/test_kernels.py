"""Tests of skgpstruct.gp.kernels: values, gradients, sparse input, sklearn API."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    DotProduct,
    WhiteKernel,
)

from skgpstruct.gp.kernels import (
    LinearKernel,
    RBFKernel,
    kernel_gradient_contract,
)

# Central differences with step H in theta: truncation error ~H^2 |K'''| ~ 1e-12
# and round-off ~eps |K| / H ~ 1e-11, both far below rtol=1e-6 at the
# well-conditioned points used here (unit-scale inputs, moderate theta).
H = 1e-5
RTOL = 1e-6
ATOL = 1e-9


def _data(n=6, m=4, d=5, seed=0, density=0.5):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d)) * (rng.random((n, d)) < density)
    Y = rng.random((m, d)) * (rng.random((m, d)) < density)
    return X, Y


def _kernels():
    return [
        LinearKernel(variance=1.7),
        LinearKernel(variance=0.6, bias=0.3, bias_bounds=(1e-3, 1e3)),
        RBFKernel(length_scale=0.8, variance=1.3),
        RBFKernel(length_scale=np.array([0.5, 1.0, 1.5, 2.0, 0.7]), variance=0.9),
    ]


def _sklearn_equivalent(kernel):
    """Dense sklearn kernel with the same values; theta order may differ."""
    if isinstance(kernel, LinearKernel):
        sigma0 = np.sqrt(kernel.bias / kernel.variance)
        bounds = "fixed" if kernel.bias_bounds == "fixed" else (1e-5, 1e5)
        return ConstantKernel(kernel.variance) * DotProduct(sigma0, bounds)
    return ConstantKernel(kernel.variance) * RBF(kernel.length_scale)


def _fd_grad(kernel, X, Y):
    theta = kernel.theta
    out = []
    for i in range(theta.size):
        step = np.zeros_like(theta)
        step[i] = H
        Kp = kernel.clone_with_theta(theta + step)(X, Y)
        Km = kernel.clone_with_theta(theta - step)(X, Y)
        out.append((Kp - Km) / (2 * H))
    return np.stack(out, axis=-1)


@pytest.mark.parametrize("kernel", _kernels(), ids=repr)
@pytest.mark.parametrize("sparse", [False, True])
def test_values_match_sklearn(kernel, sparse):
    X, Y = _data()
    ref = _sklearn_equivalent(kernel)
    Xin, Yin = (sp.csr_matrix(X), sp.csr_matrix(Y)) if sparse else (X, Y)
    assert_allclose(kernel(Xin), ref(X), rtol=1e-12, atol=1e-14)
    assert_allclose(kernel(Xin, Yin), ref(X, Y), rtol=1e-12, atol=1e-14)
    assert_allclose(kernel(Xin, Y), ref(X, Y), rtol=1e-12, atol=1e-14)
    assert_allclose(kernel.diag(Xin), np.diag(ref(X)), rtol=1e-12)


@pytest.mark.parametrize("kernel", _kernels(), ids=repr)
def test_sparse_and_dense_agree(kernel):
    X, Y = _data(n=9, m=7, d=5, seed=3, density=0.3)
    Xs, Ys = sp.csr_matrix(X), sp.csc_matrix(Y)  # csc is converted to csr
    G = np.random.default_rng(1).standard_normal((9, 7))
    K, dK = kernel(X, Y, eval_gradient=True)
    Ks, dKs = kernel(Xs, Ys, eval_gradient=True)
    assert_allclose(Ks, K, rtol=1e-12, atol=1e-15)
    assert_allclose(dKs, dK, rtol=1e-12, atol=1e-15)
    assert_allclose(
        kernel.gradient_contract(Xs, Ys, G),
        kernel.gradient_contract(X, Y, G),
        rtol=1e-12,
    )


@pytest.mark.parametrize("kernel", _kernels(), ids=repr)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("cross", [False, True])
def test_gradient_matches_finite_differences(kernel, sparse, cross):
    X, Y = _data(seed=5)
    if sparse:
        X, Y = sp.csr_matrix(X), sp.csr_matrix(Y)
    Yarg = Y if cross else None
    K, dK = kernel(X, Yarg, eval_gradient=True)
    assert dK.shape == K.shape + (kernel.n_dims,)
    assert_allclose(dK, _fd_grad(kernel, X, Yarg), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kernel", _kernels(), ids=repr)
def test_gradient_matches_sklearn_when_Y_is_None(kernel):
    X, _ = _data(seed=7)
    ref = _sklearn_equivalent(kernel)
    _, dK = kernel(X, eval_gradient=True)
    _, dK_ref = ref(X, eval_gradient=True)
    # sklearn's theta: (constant, then the other kernel's); ours is
    # alphabetical: LinearKernel (bias, variance), RBFKernel (length_scale, variance)
    if isinstance(kernel, LinearKernel) and kernel.n_dims == 1:
        assert_allclose(dK, dK_ref, rtol=1e-10, atol=1e-14)
    elif isinstance(kernel, LinearKernel):
        # d/dlog(sigma0) = 2 d/dlog(bias) at fixed variance, and
        # d/dlog(constant) = d/dlog(variance) + d/dlog(bias)
        assert_allclose(dK[..., 0], dK_ref[..., 1] / 2, rtol=1e-10, atol=1e-14)
        assert_allclose(dK[..., 1] + dK[..., 0], dK_ref[..., 0], rtol=1e-10)
    else:
        assert_allclose(dK[..., -1], dK_ref[..., 0], rtol=1e-10)
        assert_allclose(dK[..., :-1], dK_ref[..., 1:], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("kernel", _kernels(), ids=repr)
@pytest.mark.parametrize("sparse", [False, True])
def test_gradient_contract(kernel, sparse):
    X, Y = _data(n=8, m=5, seed=11)
    if sparse:
        X, Y = sp.csr_matrix(X), sp.csr_matrix(Y)
    rng = np.random.default_rng(2)
    G = rng.standard_normal((8, 5))
    _, dK = kernel(X, Y, eval_gradient=True)
    expected = np.einsum("ab,abp->p", G, dK)
    assert_allclose(kernel.gradient_contract(X, Y, G), expected, rtol=1e-12)
    assert_allclose(kernel_gradient_contract(kernel, X, Y, G), expected, rtol=1e-12)
    G2 = rng.standard_normal((8, 8))
    _, dK2 = kernel(X, eval_gradient=True)
    assert_allclose(
        kernel.gradient_contract(X, None, G2),
        np.einsum("ab,abp->p", G2, dK2),
        rtol=1e-12,
    )


def test_fixed_hyperparameters_are_excluded():
    k = LinearKernel(variance=2.0, bias=0.5)  # bias fixed by default
    assert k.theta.shape == (1,) and k.bounds.shape == (1, 2)
    X, Y = _data()
    _, dK = k(X, Y, eval_gradient=True)
    assert dK.shape == (6, 4, 1)
    assert_allclose(dK[..., 0], 2.0 * X @ Y.T)
    k2 = RBFKernel(variance_bounds="fixed", length_scale_bounds="fixed")
    assert k2.theta.shape == (0,)
    assert k2(X, Y, eval_gradient=True)[1].shape == (6, 4, 0)
    assert k2.gradient_contract(X, Y, np.ones((6, 4))).shape == (0,)
    both = LinearKernel(bias=1.0, bias_bounds=(1e-2, 1e2))
    assert_allclose(both.theta, [0.0, 0.0])  # (log bias, log variance)
    assert [h.name for h in both.hyperparameters] == ["bias", "variance"]


def test_theta_rejects_non_positive_free_hyperparameter():
    with pytest.raises(ValueError, match="bias_bounds='fixed'"):
        LinearKernel(bias=0.0, bias_bounds=(1e-5, 1.0)).theta


def test_clone_get_set_params_and_theta_roundtrip():
    k = RBFKernel(length_scale=2.0, variance=3.0, variance_bounds=(1e-2, 1e2))
    params = k.get_params()
    assert params["length_scale"] == 2.0 and params["variance_bounds"] == (1e-2, 1e2)
    c = clone(k)
    assert c is not k and c == k and repr(c) == repr(k)
    c.set_params(length_scale=0.5)
    assert c.length_scale == 0.5 and k.length_scale == 2.0
    assert_allclose(c.theta, np.log([0.5, 3.0]))
    c.theta = np.log([4.0, 5.0])
    assert c.length_scale == pytest.approx(4.0) and c.variance == pytest.approx(5.0)
    assert_allclose(c.bounds, np.log([[1e-5, 1e5], [1e-2, 1e2]]))
    with pytest.raises(ValueError, match="Invalid parameter"):
        c.set_params(lengthscale=1.0)
    lin = clone(LinearKernel(variance=2.0))
    assert lin.get_params()["bias_bounds"] == "fixed"


def test_nested_params_and_gpr_fit_with_sklearn():
    # kernel__* is settable and sklearn's GP fits with our kernel (theta,
    # bounds and eval_gradient are used by its optimiser).
    rng = np.random.default_rng(0)
    X = rng.random((20, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(20)
    gpr = GaussianProcessRegressor(
        kernel=RBFKernel() + WhiteKernel(0.1), random_state=0
    )
    gpr.set_params(kernel__k1__length_scale=0.5)
    assert gpr.kernel.k1.length_scale == 0.5
    ref = GaussianProcessRegressor(
        kernel=ConstantKernel(1.0) * RBF(0.5) + WhiteKernel(0.1), optimizer=None
    ).fit(X, y)
    ours = clone(gpr).set_params(optimizer=None).fit(X, y)
    assert ours.log_marginal_likelihood_value_ == pytest.approx(
        ref.log_marginal_likelihood_value_, rel=1e-10
    )
    fitted = gpr.fit(X, y)
    assert fitted.log_marginal_likelihood_value_ >= ours.log_marginal_likelihood_value_


@pytest.mark.parametrize("sparse", [False, True])
def test_contract_recurses_into_sum_and_product(sparse):
    X, Y = _data(n=5, m=3, seed=17)
    Xin, Yin = (sp.csr_matrix(X), sp.csr_matrix(Y)) if sparse else (X, Y)
    kernel = ConstantKernel(1.5) * LinearKernel(0.7) + RBFKernel(0.9, 1.1)
    G = np.random.default_rng(6).standard_normal((5, 3))
    fd = np.einsum("ab,abp->p", G, _fd_grad(kernel, X, Y))
    assert_allclose(kernel_gradient_contract(kernel, Xin, Yin, G), fd, rtol=RTOL)


@pytest.mark.parametrize("max_elements", [2**24, 0], ids=["analytic", "finite-diff"])
@pytest.mark.parametrize("cross", [False, True])
def test_contract_falls_back_for_sklearn_kernels(max_elements, cross):
    X, Y = _data(n=5, m=4, seed=19)
    kernel = ConstantKernel(2.0) * RBF([0.7, 1.1, 0.9, 1.3, 0.8]) + WhiteKernel(0.2)
    Yarg = Y if cross else None
    G = np.random.default_rng(8).standard_normal((5, 4 if cross else 5))
    expected = np.einsum("ab,abp->p", G, _fd_grad(kernel, X, Yarg))
    got = kernel_gradient_contract(kernel, X, Yarg, G, max_elements=max_elements)
    assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    if not cross:
        # WhiteKernel's k(X) has noise on the diagonal: its gradient counts
        assert abs(got[-1]) > 1e-3


def test_sklearn_white_kernel_alone_uses_fallback():
    X, Y = _data(n=3, m=2, seed=23)
    G = np.ones((3, 2))
    assert_allclose(kernel_gradient_contract(WhiteKernel(0.5), X, Y, G), [0.0])
    assert_allclose(
        kernel_gradient_contract(WhiteKernel(0.5), X, None, np.eye(3)), [1.5]
    )


def test_input_errors():
    X, Y = _data()
    k = LinearKernel()
    with pytest.raises(ValueError, match="different numbers of features"):
        k(X, Y[:, :3])
    with pytest.raises(ValueError, match="G must have shape"):
        k.gradient_contract(X, Y, np.ones((4, 6)))
    with pytest.raises(ValueError, match="NaN|infinity"):
        k(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="3 length scales"):
        RBFKernel(length_scale=[1.0, 2.0, 3.0])(X)
    with pytest.raises(ValueError, match="variance"):
        LinearKernel(variance=-1.0)(X)
    with pytest.raises(ValueError, match="length_scale must be positive"):
        RBFKernel(length_scale=0.0)(X)
    with pytest.raises(TypeError, match="None"):
        k(None)


def test_rbf_distances_are_clipped_and_diagonal_exact():
    # nearly identical rows: the norm expansion could go slightly negative
    X = np.array([[1e8, 1.0], [1e8, 1.0 + 1e-8]])
    K = RBFKernel(length_scale=1.0)(sp.csr_matrix(X))
    assert np.all(K <= 1.0) and np.all(np.diag(K) == 1.0)


def test_linear_kernel_on_binary_sparse_tokens_is_overlap_count():
    rng = np.random.default_rng(0)
    X = sp.random(50, 200, density=0.05, format="csr", random_state=1)
    X.data[:] = 1.0
    Z = X[rng.choice(50, 10, replace=False)]
    K = LinearKernel()(X, Z)
    overlap = np.array([[len(set(x.indices) & set(z.indices)) for z in Z] for x in X])
    assert_allclose(K, overlap)


def test_sparse_support_check():
    """``_check_sparse_support`` refuses sparse features exactly for kernels
    with a part that is one of scikit-learn's dense-only kernels, and the
    kernels it lets through do evaluate on sparse input."""
    from sklearn.gaussian_process.kernels import Matern

    from skgpstruct.gp._sparse_support import _check_sparse_support

    X = sp.random(6, 4, density=0.5, format="csr", random_state=0)
    takes = [LinearKernel(), RBFKernel(), ConstantKernel(2.0) * LinearKernel(),
             LinearKernel() + WhiteKernel(0.1), LinearKernel() ** 2,
             ConstantKernel(1.0) * (RBFKernel() + LinearKernel())]
    for kernel in takes:
        _check_sparse_support(kernel, X)
        assert kernel(X).shape == (6, 6) and kernel(X, X[:2]).shape == (6, 2)
    refused = [(RBF(), "RBF"), (Matern(), "Matern"), (DotProduct(), "DotProduct"),
               (ConstantKernel(2.0) * RBF(), "RBF"), (LinearKernel() + Matern(), "Matern"),
               (RBF() ** 2, "RBF")]
    for kernel, name in refused:
        _check_sparse_support(kernel, X.toarray())  # dense: fine
        with pytest.raises(ValueError):  # scikit-learn's own, unrelated message
            kernel(X)
        with pytest.raises(ValueError, match=f"scikit-learn's {name}, which needs dense"):
            _check_sparse_support(kernel, X)
