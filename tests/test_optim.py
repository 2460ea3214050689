"""skgpstruct.optim: the fused numba steps against plain numpy, convergence
of Adam / SGD / SAGA on a quadratic, SAGA's update, L-BFGS-B."""

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skgpstruct.optim import (
    SAGA,
    SGD,
    Adam,
    make_optimizer,
    minimize_lbfgs,
)
from skgpstruct.optim._steps import _adam_update, _sgd_update

N_PARAMS = 50
UNDECAYED = (10, 14)


def _assembled(params, grad, scale, decay, lo, hi):
    """``scale * grad + decay * params``, no decay on ``params[lo:hi]``."""
    mask = np.ones_like(params)
    mask[lo:hi] = 0.0
    return scale * grad + decay * mask * params


def _adam_reference(params, grad, m, v, t, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """The plain numpy Adam step (in place), Kingma and Ba's algorithm 1."""
    m *= beta1
    m += (1 - beta1) * grad
    v *= beta2
    v += (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    params -= lr * m_hat / (np.sqrt(v_hat) + eps)


def _sgd_reference(params, grad, velocity, lr, momentum):
    """The plain numpy heavy-ball step (in place)."""
    velocity *= momentum
    velocity -= lr * grad
    params += velocity


@pytest.mark.parametrize("scale, decay", [(0.25, 0.3), (1.0, 0.0)])
def test_fused_adam_kernel_matches_numpy_reference(rng, scale, decay):
    p_ref = rng.normal(size=N_PARAMS)
    p_fused = p_ref.copy()
    m_ref, v_ref = np.zeros(N_PARAMS), np.zeros(N_PARAMS)
    m, v = np.zeros(N_PARAMS), np.zeros(N_PARAMS)
    for t in range(1, 7):
        grad = rng.normal(size=N_PARAMS)
        g = _assembled(p_ref, grad, scale, decay, *UNDECAYED)
        _adam_reference(p_ref, g, m_ref, v_ref, t, 0.05)
        _adam_update(p_fused, grad, scale, decay, *UNDECAYED, m, v, 0.05, 0.9, 0.999,
                     1e-8, 1 - 0.9**t, 1 - 0.999**t)
        np.testing.assert_allclose(p_fused, p_ref, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(m, m_ref, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(v, v_ref, rtol=1e-13, atol=1e-15)
    assert not np.allclose(p_ref, 0)


@pytest.mark.parametrize("momentum", [0.9, 0.0])
@pytest.mark.parametrize("scale, decay", [(0.25, 0.3), (1.0, 0.0)])
def test_fused_sgd_kernel_matches_numpy_reference(rng, scale, decay, momentum):
    p_ref = rng.normal(size=N_PARAMS)
    p_fused = p_ref.copy()
    vel_ref, vel = np.zeros(N_PARAMS), np.zeros(N_PARAMS)
    for _ in range(6):
        grad = rng.normal(size=N_PARAMS)
        g = _assembled(p_ref, grad, scale, decay, *UNDECAYED)
        _sgd_reference(p_ref, g, vel_ref, 0.05, momentum)
        _sgd_update(p_fused, grad, scale, decay, *UNDECAYED, vel, 0.05, momentum)
        np.testing.assert_allclose(p_fused, p_ref, rtol=1e-13, atol=1e-15)
    assert not np.allclose(p_ref, 0)


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_optimizer_classes_match_reference_with_decay_and_undecayed_slice(rng, name):
    """make_optimizer's Adam / SGD (momentum 0.9) with an L2 decay and an
    undecayed slice equal the numpy reference fed the assembled gradient."""
    p_ref = rng.normal(size=N_PARAMS)
    p = p_ref.copy()
    opt = make_optimizer(name, 0.05, weight_decay=0.3, undecayed=UNDECAYED)
    m_ref, v_ref = np.zeros(N_PARAMS), np.zeros(N_PARAMS)
    for t in range(1, 7):
        grad = rng.normal(size=N_PARAMS)
        g = _assembled(p_ref, grad, 0.25, 0.3, *UNDECAYED)
        if name == "adam":
            _adam_reference(p_ref, g, m_ref, v_ref, t, 0.05)
        else:
            _sgd_reference(p_ref, g, m_ref, 0.05, 0.9)
        assert opt.step(p, grad, scale=0.25) is p
        np.testing.assert_allclose(p, p_ref, rtol=1e-13, atol=1e-15)
    assert opt.t == 6


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_scale_one_without_decay_is_bit_identical_to_numpy(rng, name):
    """GPStructTagger steps on a pre-divided gradient with scale 1 and no
    decay: the fused step is then exactly the plain numpy step (its fits
    are bit-identical to those of the former numpy optimisers)."""
    p_ref = rng.normal(size=N_PARAMS)
    p = p_ref.copy()
    opt = make_optimizer(name, 0.05)
    m_ref, v_ref = np.zeros(N_PARAMS), np.zeros(N_PARAMS)
    for t in range(1, 12):
        grad = rng.normal(size=N_PARAMS) / 7.0
        if name == "adam":
            _adam_reference(p_ref, grad, m_ref, v_ref, t, 0.05)
        else:
            _sgd_reference(p_ref, grad, m_ref, 0.05, 0.9)
        opt.step(p, grad)
        np.testing.assert_array_equal(p, p_ref)


def _quadratic(rng, n=5):
    """``f(x) = 0.5 (x - c)^T A (x - c)`` split into two blocks."""
    Q = rng.normal(size=(n, n))
    A = Q @ Q.T / n + np.eye(n)
    c = rng.normal(size=n)
    halves = [A / 3.0, 2.0 * A / 3.0]
    return c, [lambda x, H=H: H @ (x - c) for H in halves]


@pytest.mark.parametrize(
    "opt",
    [Adam(0.05), SGD(0.1), SGD(0.05, momentum=0.9), SAGA(0.05, n_blocks=2)],
    ids=["adam", "sgd", "sgd_momentum", "saga"],
)
def test_optimizers_converge_on_a_quadratic(rng, opt):
    c, block_grads = _quadratic(rng)
    x = np.zeros_like(c)
    for _ in range(2000):
        for b, grad in enumerate(block_grads):
            if isinstance(opt, SAGA):
                opt.step(x, grad(x), block=b)
            else:
                opt.step(x, grad(x) + block_grads[1 - b](x))
    np.testing.assert_allclose(x, c, atol=1e-3)


def test_saga_update_follows_its_formula(rng):
    """``x -= lr * (g_b - g_b_old + mean_old) * n_blocks`` once every block
    has been seen; before that the mean is over the blocks seen so far."""
    n_blocks, lr = 3, 0.1
    opt = SAGA(lr, n_blocks)
    x = rng.normal(size=4)
    table = np.zeros((n_blocks, 4))
    seen = np.zeros(n_blocks, dtype=bool)
    for block in [0, 2, 0, 1, 2, 1, 0]:
        grad = rng.normal(size=4)
        mean_old = table.mean(axis=0)
        was_seen = seen.copy()
        seen[block] = True
        if was_seen.all():
            direction = grad - table[block] + mean_old
        else:
            direction = grad - table[block] + mean_old * n_blocks / seen.sum()
        expected = x - lr * direction * n_blocks
        opt.step(x, grad, block=block)
        table[block] = grad
        np.testing.assert_allclose(x, expected, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="block"):
        opt.step(x, grad)


@pytest.mark.parametrize("cls", [SGD, Adam])
def test_fused_steps_refuse_what_their_kernels_cannot_index(cls):
    """The numba kernels index without bounds checks: a gradient of another
    length, parameters of another size than the optimiser's state (which a
    larger vector would overrun), or parameters that are not a 1-D float
    array were taken silently (or failed inside numba)."""
    opt = cls(0.1)
    with pytest.raises(ValueError, match="grad has shape"):
        opt.step(np.ones(3), np.ones(5))
    with pytest.raises(TypeError, match="1-D float ndarray"):
        opt.step([1.0, 2.0], [1.0, 1.0])
    with pytest.raises(TypeError, match="1-D float ndarray"):
        opt.step(np.array([1, 2]), np.ones(2))
    frozen = np.ones(2)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        opt.step(frozen, np.ones(2))
    assert opt.t == 0  # nothing refused counted as a step
    opt.step(np.ones(4), np.ones(4))
    with pytest.raises(ValueError, match="stepped on 4 before"):
        opt.step(np.ones(2), np.ones(2))


@pytest.mark.parametrize("cls", [SGD, Adam])
def test_undecayed_is_the_python_slice(cls):
    """``undecayed=(lo, hi)`` leaves ``params[lo:hi]`` undecayed, negative
    ends counting from the end as in Python (they used to leave the whole
    vector undecayed)."""
    x = np.ones(4)
    expected = np.ones(4)
    ref = cls(0.1, weight_decay=1.0)
    ref.step(expected, np.zeros(4))
    expected[-1] = 1.0
    cls(0.1, weight_decay=1.0, undecayed=(-1, 4)).step(x, np.zeros(4))
    np.testing.assert_array_equal(x, expected)
    y = np.ones(4)
    cls(0.1, weight_decay=1.0, undecayed=(2, 100)).step(y, np.zeros(4))
    np.testing.assert_array_equal(y[2:], 1.0)
    assert np.all(y[:2] < 1.0)


def test_saga_refuses_a_block_outside_its_range_and_mismatched_shapes():
    """A negative block used to stand silently for one counted from the end,
    a gradient of one entry was broadcast over every parameter."""
    opt = SAGA(0.1, n_blocks=2)
    x = np.ones(3)
    for block in (-1, 2, 1.0, True):
        with pytest.raises(ValueError, match=r"block must be an integer in range\(2\)"):
            opt.step(x, np.ones(3), block=block)
    with pytest.raises(ValueError, match="grad has shape"):
        opt.step(x, np.ones(1), block=0)
    np.testing.assert_array_equal(x, 1.0)
    assert opt.t == 0
    opt.step(x, np.ones(3), block=np.int64(1))
    with pytest.raises(ValueError, match="stepped on 3 before"):
        opt.step(np.ones(2), np.ones(2), block=0)


@pytest.mark.parametrize("make, match", [
    (lambda: SGD(0.0), r"learning_rate must be a real number in \(0, inf\)"),
    (lambda: Adam(-0.1), "learning_rate"),
    (lambda: SAGA(float("nan"), n_blocks=2), "learning_rate"),
    (lambda: SGD(0.1, momentum=1.0), r"momentum must be a real number in \[0, 1\)"),
    (lambda: SGD(0.1, momentum=-0.5), "momentum"),
    (lambda: Adam(0.1, beta1=1.5), "beta1"),
    (lambda: Adam(0.1, beta2=-0.1), "beta2"),
    (lambda: Adam(0.1, epsilon=-1e-8), "epsilon"),
    (lambda: SAGA(0.1, n_blocks=0), "n_blocks must be an integer >= 1"),
    (lambda: SAGA(0.1, n_blocks=2.7), "n_blocks"),
    (lambda: make_optimizer("sgd", -1.0), "learning_rate"),
])
def test_optimizers_refuse_hyperparameters_outside_their_documented_ranges(make, match):
    """Momentum 1.5, a negative learning rate and the like were taken
    silently (SAGA's n_blocks=2.7 truncated to 2, n_blocks=0 an
    IndexError at the first step)."""
    with pytest.raises(ValueError, match=match):
        make()


def test_make_optimizer_choices_and_errors():
    assert isinstance(make_optimizer("adam", 0.1), Adam)
    sgd = make_optimizer("sgd", 0.1)
    assert isinstance(sgd, SGD) and sgd.momentum == 0.9
    assert make_optimizer("saga", 0.1, n_blocks=3).n_blocks == 3
    assert make_optimizer("saga", 0.1, n_blocks=3).fixed_blocks
    assert not make_optimizer("adam", 0.1).fixed_blocks
    with pytest.raises(ValueError, match="number of blocks"):
        make_optimizer("saga", 0.1)
    with pytest.raises(ValueError, match="weight_decay"):
        make_optimizer("saga", 0.1, n_blocks=2, weight_decay=0.1)
    with pytest.raises(ValueError, match="Unknown optimizer"):
        make_optimizer("rmsprop", 0.1)


def _rosenbrock(x):
    a, b = x
    value = (1 - a) ** 2 + 100 * (b - a * a) ** 2
    grad = np.array([-2 * (1 - a) - 400 * a * (b - a * a), 200 * (b - a * a)])
    return value, grad


def test_minimize_lbfgs_refuses_max_iter_below_one_and_a_negative_tol():
    """max_iter=0 used to run one iteration (scipy's maxiter=0) and return a
    moved point."""
    x0 = np.array([-1.0, 1.0])
    for max_iter in (0, -3, 2.5):
        with pytest.raises(ValueError, match="max_iter must be an integer >= 1"):
            minimize_lbfgs(_rosenbrock, x0, max_iter=max_iter)
    with pytest.raises(ValueError, match="tol must be a real number"):
        minimize_lbfgs(_rosenbrock, x0, tol=-1e-6)


def test_minimize_lbfgs_with_bounds_and_history():
    seen = []
    x, n_iter, history = minimize_lbfgs(_rosenbrock, np.array([-1.0, 1.0]), max_iter=200,
                                        tol=1e-12, callback=seen.append)
    np.testing.assert_allclose(x, [1.0, 1.0], atol=1e-4)
    assert n_iter == len(history) == len(seen) and history == seen
    assert history[-1] < history[0]
    # The bound is active at the constrained optimum: a = 0.5, b = a^2.
    x, _, _ = minimize_lbfgs(_rosenbrock, np.array([-1.0, 1.0]), max_iter=200,
                             tol=1e-12, bounds=[(None, 0.5), (None, None)])
    np.testing.assert_allclose(x, [0.5, 0.25], atol=1e-4)


def test_minimize_lbfgs_warns_at_max_iter():
    with pytest.warns(ConvergenceWarning, match="L-BFGS reached max_iter=2 iterations"):
        _, n_iter, history = minimize_lbfgs(_rosenbrock, np.array([-1.0, 1.0]),
                                            max_iter=2)
    assert n_iter == 2 == len(history)


def test_lbfgs_warns_when_it_never_leaves_the_start():
    """A gradient that points uphill: the first line search fails, and the
    caller is told that the result is its starting point."""
    from sklearn.exceptions import ConvergenceWarning

    from skgpstruct.optim import minimize_lbfgs

    def fun(x):
        return float(x @ x), -2.0 * x

    with pytest.warns(ConvergenceWarning, match="before its first iteration"):
        x, n_iter, history = minimize_lbfgs(fun, np.ones(3))
    assert history == [] and np.array_equal(x, np.ones(3))
    # a consistent gradient: no warning (warnings are errors in the suite)
    x, _, history = minimize_lbfgs(lambda x: (float(x @ x), 2.0 * x), np.ones(3))
    assert len(history) >= 1 and np.allclose(x, 0.0)
