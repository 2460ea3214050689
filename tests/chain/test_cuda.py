"""CUDA kernels (:mod:`skgpstruct.chain.cuda`) against the CPU kernels, brute
force and finite differences, and RandomizedCRFTagger(device="cuda") against
device="cpu".

They run under numba's CUDA simulator, which executes every GPU thread in
Python: sizes are tiny, and several cases share one launch (chains of one
batch). One test compiles every kernel for a real GPU (typing and lowering to
LLVM, which needs no GPU) in a subprocess without the simulator.

numba chooses between the real CUDA target and the simulator once, when
``numba.cuda`` is first imported, from ``numba.core.config.ENABLE_CUDASIM``
(``NUMBA_ENABLE_CUDASIM``, read when numba is imported or its configuration
reloaded). So the flag is set below, before this module imports
``numba.cuda``: pytest imports the test modules (collection) before running
any test, and nothing imports ``numba.cuda`` at import time but
``skgpstruct.chain.cuda``, whose doctests are collected after ``tests/``.
This holds whether the file runs alone or with the whole suite. An explicit
``NUMBA_ENABLE_CUDASIM`` wins (``NUMBA_ENABLE_CUDASIM=0`` runs the tests on a
real GPU); if ``numba.cuda`` was imported earlier without the simulator, the
tests run on a GPU if one is usable and are skipped otherwise.
"""

import os
import sys

if "NUMBA_ENABLE_CUDASIM" not in os.environ and "numba.cuda" not in sys.modules:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from numba.core import config as _numba_config

    # Re-read the NUMBA_* variables now (numba's compiler would do it at its
    # next compilation anyway, on seeing the environment change).
    _numba_config.reload_config()

# Imports after the simulator switch (hence E402).
import itertools  # noqa: E402
import subprocess  # noqa: E402
import textwrap  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numba.cuda  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from joblib import Parallel  # noqa: E402
from numba.core import config as numba_config  # noqa: E402
from numpy.testing import assert_allclose, assert_array_equal  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

if not (numba_config.ENABLE_CUDASIM or numba.cuda.is_available()):
    pytest.skip(
        "numba.cuda was imported without the CUDA simulator and no GPU is usable",
        allow_module_level=True,
    )

from skgpstruct import RandomizedCRFTagger, chain  # noqa: E402
from skgpstruct._input.sequences import SequenceData  # noqa: E402
from skgpstruct.chain import _cuda_device
from skgpstruct.chain.randomized import _cuda as _cuda_randomized
from skgpstruct.chain.randomized import _batch_kernels as _rdp_batch  # noqa: E402
from skgpstruct.chain import cuda as chain_cuda  # noqa: E402
from skgpstruct.chain import randomized as rdp  # noqa: E402
from skgpstruct.datasets import make_chain_data  # noqa: E402

# Agreement with the CPU kernels: float64 to 1e-10; float32 to 1e-4 (the
# potentials are O(1), float32 rounding is ~1e-7 relative per operation).
TOL = {np.float64: dict(rtol=1e-10, atol=1e-10), np.float32: dict(rtol=1e-4, atol=1e-4)}


def ragged_problem(rng, lengths, V, *, per_chain=False, p_forbid=0.0, dtype=np.float64):
    """Random stacked potentials, start / end, and labels on allowed paths."""
    lengths = np.asarray(lengths)
    n, N = lengths.size, int(lengths.sum())
    U = rng.standard_normal((N, V)).astype(dtype)
    B = rng.standard_normal((n, V, V) if per_chain else (V, V)).astype(dtype)
    if p_forbid:
        B[rng.random(B.shape) < p_forbid] = -np.inf
    start = rng.standard_normal(V).astype(dtype)
    end = rng.standard_normal(V).astype(dtype)
    y = rng.integers(0, V, N)
    return dict(U=U, lengths=lengths, B=B, start=start, end=end), y


def cpu(kw, y):
    """The CPU ragged functions on the same (float64-cast) values."""
    kw64 = {k: (v.astype(np.float64) if k != "lengths" else v) for k, v in kw.items()}
    return dict(
        log_z=[chain.log_partition(u, b, kw64["start"], kw64["end"])
               for u, b in per_chain_inputs(kw64)],
        marginals=chain.marginals_ragged(**kw64),
        grad=chain.log_likelihood_grad_ragged(y=y, **kw64),
        viterbi=chain.viterbi_ragged(**kw64),
    )


def per_chain_inputs(kw):
    offsets = np.r_[0, np.cumsum(kw["lengths"])]
    for n, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        yield kw["U"][a:b], (kw["B"][n] if kw["B"].ndim == 3 else kw["B"])


def assert_matches_cpu(kw, y, dtype):
    tol = TOL[dtype]
    ref = cpu(kw, y)
    log_z = chain_cuda.log_partition_ragged(**kw)
    assert log_z.dtype == dtype
    assert_allclose(log_z, ref["log_z"], **tol)
    unary, pairwise = chain_cuda.marginals_ragged(**kw)
    assert unary.dtype == dtype and pairwise.shape == (len(kw["lengths"]),) + kw["B"].shape[-2:]
    assert_allclose(unary, ref["marginals"][0], **tol)
    assert_allclose(pairwise, ref["marginals"][1], **tol)
    values, gU, gB = chain_cuda.log_likelihood_grad_ragged(y=y, **kw)
    assert gB.shape == kw["B"].shape
    for got, want in zip((values, gU, gB), ref["grad"]):
        assert_allclose(got, want, **tol)
    paths, scores = chain_cuda.viterbi_ragged(**kw)
    assert paths.dtype == np.int64
    assert_array_equal(paths, ref["viterbi"][0])
    assert_allclose(scores, ref["viterbi"][1], **tol)


# ------------------------------------------------------------ exact kernels
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("per_chain", [False, True])
def test_exact_matches_cpu_kernels(dtype, per_chain):
    """Ragged chains (one of length 1), start / end and -inf transitions."""
    rng = np.random.default_rng(11 + per_chain)
    kw, y = ragged_problem(rng, [1, 4, 2], 3, per_chain=per_chain, p_forbid=0.2,
                           dtype=dtype)
    assert np.isneginf(kw["B"]).any()
    assert_matches_cpu(kw, y, dtype)


def test_one_label_and_forbidden_chain():
    """V = 1 (one path per chain), and a chain whose every path is forbidden
    (log Z = -inf, marginals 0, value -inf, Viterbi score -inf)."""
    rng = np.random.default_rng(12)
    kw, y = ragged_problem(rng, [1, 3, 2], 1)
    assert_matches_cpu(kw, y, np.float64)
    kw, y = ragged_problem(rng, [2, 3], 2)
    kw["U"][3] = -np.inf  # a whole position of the second chain
    ref = cpu(kw, y)
    assert ref["log_z"][1] == -np.inf
    assert_matches_cpu(kw, y, np.float64)


def test_viterbi_ties_go_to_lowest_label():
    """Tied labels: the lowest index wins, as on the CPU (first chain: all
    paths tie; second: labels 1 and 2 tie at its first position)."""
    U = np.zeros((5, 3))
    U[2] = [0.0, 1.0, 1.0]
    paths, scores = chain_cuda.viterbi_ragged(U, [2, 3], np.zeros((3, 3)))
    assert_array_equal(paths, [0, 0, 1, 0, 0])
    assert_array_equal(paths, chain.viterbi_ragged(U, [2, 3], np.zeros((3, 3)))[0])
    assert_array_equal(scores, [0.0, 1.0])


def brute_force(U, B, start, end):
    """log Z, unary / pairwise marginals and the best path by enumeration."""
    T, V = U.shape
    Uf = U.copy()
    Uf[0] += start
    Uf[-1] += end
    paths = list(itertools.product(range(V), repeat=T))
    scores = np.array([sum(Uf[t, p[t]] for t in range(T))
                       + sum(B[p[t - 1], p[t]] for t in range(1, T)) for p in paths])
    m = scores.max()
    log_z = m + np.log(np.exp(scores - m).sum())
    prob = np.exp(scores - log_z)
    unary, pairwise = np.zeros((T, V)), np.zeros((V, V))
    for p, w in zip(paths, prob):
        for t in range(T):
            unary[t, p[t]] += w
            if t:
                pairwise[p[t - 1], p[t]] += w
    return log_z, unary, pairwise, np.array(paths[int(np.argmax(scores))]), m


def test_per_chain_B_matches_brute_force():
    """Per-chain transitions with -inf entries and per-chain start / end,
    against enumeration of all paths."""
    rng = np.random.default_rng(13)
    lengths, V = [1, 2, 3], 3
    kw, _ = ragged_problem(rng, lengths, V, per_chain=True, p_forbid=0.3)
    kw["start"] = rng.standard_normal((3, V))
    kw["end"] = rng.standard_normal((3, V))
    log_z = chain_cuda.log_partition_ragged(**kw)
    unary, pairwise = chain_cuda.marginals_ragged(**kw)
    paths, scores = chain_cuda.viterbi_ragged(**kw)
    offsets = np.r_[0, np.cumsum(lengths)]
    for n, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
        lz, un, pw, path, best = brute_force(kw["U"][a:b], kw["B"][n], kw["start"][n],
                                             kw["end"][n])
        assert_allclose(log_z[n], lz, rtol=1e-12)
        assert_allclose(unary[a:b], un, atol=1e-12)
        assert_allclose(unary[a:b].sum(axis=1), 1.0, atol=1e-12)
        assert_allclose(pairwise[n], pw, atol=1e-12)
        assert_array_equal(paths[a:b], path)
        assert_allclose(scores[n], best, rtol=1e-12)


def test_log_likelihood_grad_by_finite_differences(assert_grad_fd):
    """grad_U and per-chain grad_B against central differences of the value,
    by the shared assert_grad_fd: the gradients are those of chain 0 of a
    launch with a second chain (its own U, B and labels), the values those of
    chain 0 alone with (U, B) moved by +-h, one launch each. h = 1e-5:
    truncation O(h^2) ~ 1e-10, rounding ~ 1e-16 / h ~ 1e-11, hence atol 1e-8
    (rtol 1e-7, assert_allclose's default)."""
    rng = np.random.default_rng(14)
    T, V, h = 2, 2, 1e-5
    U0, B0 = rng.standard_normal((T, V)), rng.standard_normal((V, V))
    y0 = rng.integers(0, V, T)
    U1, B1, y1 = rng.standard_normal((3, V)), rng.standard_normal((V, V)), rng.integers(0, V, 3)
    _, gU, gB = chain_cuda.log_likelihood_grad_ragged(
        np.concatenate([U0, U1]), [T, 3], np.stack([B0, B1]), np.concatenate([y0, y1]))

    def value(x):
        U, B = x[: T * V].reshape(T, V), x[T * V :].reshape(1, V, V)
        return chain_cuda.log_likelihood_grad_ragged(U, [T], B, y0)[0][0]

    x0 = np.concatenate([U0.ravel(), B0.ravel()])
    assert_grad_fd(value, x0, np.concatenate([gU[:T].ravel(), gB[0].ravel()]),
                   h=h, rtol=1e-7, atol=1e-8)


def test_strided_threads_and_global_memory(monkeypatch):
    """Fewer threads than labels (the strided loops) and no staging in shared
    memory (E, F, B and the sub-lattice edges read from global memory)."""
    monkeypatch.setattr(_cuda_device, "_MAX_THREADS", 2)
    monkeypatch.setattr(_cuda_device, "_SMEM_BUDGET", 0)
    rng = np.random.default_rng(15)
    kw, y = ragged_problem(rng, [2, 3], 5, p_forbid=0.1)
    ref = cpu(kw, y)
    for got, want in zip(chain_cuda.log_likelihood_grad_ragged(y=y, **kw), ref["grad"]):
        assert_allclose(got, want, **TOL[np.float64])
    paths, scores = chain_cuda.viterbi_ragged(**kw)
    assert_array_equal(paths, ref["viterbi"][0])
    assert_allclose(scores, ref["viterbi"][1], **TOL[np.float64])
    assert_rdp_matches_cpu(rng, [2, 3], 6, 2, 2, code=3, lowrank=False, dtype=np.float64)


def test_underflow_fallbacks():
    """The scaled sums underflow (forward, backward) or overflow (pairwise)
    when the maxima of the scores sit ~1500 apart; the exact fallbacks must
    give the brute-force answer (the case of test_exact's fallback test,
    twice in one batch, shared and float32-free)."""
    U1 = np.array([[0.0, -1500.0], [0.0, -np.inf]])
    B = np.array([[-1500.0, 0.0], [0.0, 0.0]])
    U = np.concatenate([U1, U1])
    log_z = chain_cuda.log_partition_ragged(U, [2, 2], B)
    assert_allclose(log_z, -1500 + np.log(2), rtol=1e-15)
    unary, pairwise = chain_cuda.marginals_ragged(U, [2, 2], B)
    assert_allclose(unary, np.tile([[0.5, 0.5], [1.0, 0.0]], (2, 1)), atol=1e-14)
    assert_allclose(pairwise, np.tile([[0.5, 0.0], [0.5, 0.0]], (2, 1, 1)), atol=1e-14)
    rng = np.random.default_rng(16)  # potentials of magnitude 1e3: finite, exact
    kw, y = ragged_problem(rng, [3, 4], 3)
    kw["U"] *= 1e3
    kw["B"] *= 1e3
    ref = cpu(kw, y)
    for got, want in zip(chain_cuda.log_likelihood_grad_ragged(y=y, **kw), ref["grad"]):
        assert_allclose(got, want, rtol=1e-12, atol=1e-10)


def test_device_arrays_device_chains_and_to_host():
    """Device inputs, DeviceChains with labels, and results left on the
    device give the same numbers as host inputs."""
    rng = np.random.default_rng(17)
    kw, y = ragged_problem(rng, [2, 1, 3], 3, per_chain=True)
    chains = chain_cuda.DeviceChains(kw["lengths"], y)
    assert_array_equal(chains.offsets, [0, 2, 3, 6])
    dev = dict(U=numba.cuda.to_device(kw["U"]), lengths=chains,
               B=numba.cuda.to_device(kw["B"]), start=kw["start"], end=kw["end"])
    values, gU, gB = chain_cuda.log_likelihood_grad_ragged(to_host=False, **dev)
    assert all(hasattr(a, "copy_to_host") for a in (values, gU, gB))
    host = chain_cuda.log_likelihood_grad_ragged(y=y, **kw)
    for got, want in zip((values, gU, gB), host):
        assert_array_equal(got.copy_to_host(), want)


U3 = np.zeros((3, 2))
B2 = np.zeros((2, 2))


@pytest.mark.parametrize("call, err, match", [
    (lambda: chain_cuda.log_partition_ragged(np.full((3, 2), np.nan), [3], B2),
     ValueError, "NaN"),
    (lambda: chain_cuda.log_partition_ragged(U3, [3], np.full((2, 2), np.inf)),
     ValueError, r"\+inf"),
    (lambda: chain_cuda.log_partition_ragged(U3, [2], B2), ValueError, "sum to 2"),
    (lambda: chain_cuda.log_partition_ragged(U3, [3], np.zeros((3, 3))), ValueError,
     "shape"),
    (lambda: chain_cuda.log_partition_ragged(U3, [1, 2], np.zeros((3, 2, 2))), ValueError,
     "shape"),
    (lambda: chain_cuda.viterbi_ragged(U3, [3], B2, start=np.zeros(3)), ValueError,
     "start"),
    (lambda: chain_cuda.log_likelihood_grad_ragged(U3, [3], B2, [0, 2, 1]), ValueError,
     "outside"),
    (lambda: chain_cuda.log_likelihood_grad_ragged(U3, [3], B2), ValueError, "y is None"),
    (lambda: chain_cuda.log_partition_ragged(U3, [0, 3], B2), ValueError, "positive"),
    (lambda: chain_cuda.marginals_ragged(U3.astype(np.float32), [3],
                                         numba.cuda.to_device(B2)), TypeError, "dtype"),
    (lambda: chain_cuda.log_partition_ragged(U3.astype(np.float32), [3],
                                             np.full((2, 2), 1e39)), ValueError,
     "too large"),
])
def test_bad_input_raises(call, err, match):
    with pytest.raises(err, match=match):
        call()


# ----------------------------------------------------------- randomized DP
def assert_rdp_matches_cpu(rng, lengths, N, k1, k2, *, code, lowrank, dtype,
                           rank=2, mutate=None, mutate_b=None):
    """The CUDA randomized pass against the CPU kernel on the same uniforms."""
    lengths = np.asarray(lengths)
    n_tok = int(lengths.sum())
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    U = rng.standard_normal((n_tok, N))
    y = rng.integers(0, N, n_tok)
    if mutate is not None:
        mutate(U, y)
    empty = np.zeros((0, 0))
    if lowrank:
        left, right = rng.standard_normal((N, rank)), rng.standard_normal((N, rank))
        B, spec = empty, rdp.LowRankTransitions(left, right)
    else:
        left = right = empty
        B = spec = rng.standard_normal((N, N))
        if mutate_b is not None:
            mutate_b(B)
    q_global = rdp.make_proposal(np.zeros((1, N)), spec, "global")[0]
    uniforms = rng.random((n_tok, k2))
    shift = 0.0 if lowrank else float(B.max())
    expB = empty if lowrank else np.exp(B - shift)

    def grads(dt):
        return (np.zeros((n_tok, N), dt), empty.astype(dt) if lowrank else np.zeros((N, N), dt),
                np.zeros((N, rank), dt) if lowrank else empty.astype(dt),
                np.zeros((N, rank), dt) if lowrank else empty.astype(dt))

    g_cpu = grads(np.float64)
    loss_cpu = _rdp_batch.rdp_loss_grad_ragged(
        U, offsets, y, B, left, right, lowrank, code, q_global, k1, uniforms, expB, shift,
        1 << 22, *g_cpu)
    cast = (lambda a: a.astype(dtype))
    loss, *g_gpu = _cuda_randomized.rdp_loss_grad_ragged(
        cast(U), lengths, y, cast(B), cast(left), cast(right), lowrank, code,
        cast(q_global), k1, uniforms)
    tol = TOL[dtype]
    assert_allclose(loss, loss_cpu, **tol)
    for got, want in zip(g_gpu, g_cpu):
        assert_allclose(got, want, **tol)
    return loss, g_gpu


@pytest.mark.parametrize("code, lowrank, dtype", [
    (0, False, np.float64), (1, False, np.float64), (2, True, np.float64),
    (3, True, np.float64), (3, False, np.float32), (1, True, np.float32),
])
def test_rdp_matches_cpu_kernel(code, lowrank, dtype):
    """Every proposal kind, dense and low-rank transitions, both precisions;
    one sequence of length 1."""
    rng = np.random.default_rng(20 + code)
    loss, (gU, *_) = assert_rdp_matches_cpu(rng, [3, 1, 4], 7, 2, 3, code=code,
                                            lowrank=lowrank, dtype=dtype)
    assert np.all(np.isfinite(loss)) and np.abs(gU).sum() > 0


def test_rdp_local_proposal_floor():
    """A state far below the best unary score that the transitions make
    likely: the "local" proposal's floor keeps it reachable, on the GPU as on
    the CPU (without it the two passes differ by the state's whole mass)."""
    rng = np.random.default_rng(32)

    def far(U, y):
        U[:, 0] += 800.0

    def into_one(B):
        B[:, 1] += 900.0

    loss, _ = assert_rdp_matches_cpu(rng, [3, 4], 6, 2, 3, code=1, lowrank=False,
                                     dtype=np.float64, mutate=far, mutate_b=into_one)
    assert np.all(np.isfinite(loss))


def test_rdp_no_mass_left_and_no_path():
    """Positions where the proposal has no mass outside the deterministic
    states (sampled slots carry weight 0), and a sequence whose sub-lattice
    has no path (loss +inf, nothing added to the gradients)."""
    rng = np.random.default_rng(30)

    def mutate(U, y):
        U[0:3, 2:] = -np.inf  # only states 0, 1 have local proposal mass
        y[0:3] = rng.integers(0, 2, 3)
        U[4] = -np.inf  # a whole position of the second sequence

    loss, (gU, gB, _, _) = assert_rdp_matches_cpu(rng, [3, 2], 6, 2, 2, code=1,
                                                  lowrank=False, dtype=np.float64,
                                                  mutate=mutate)
    assert np.isfinite(loss[0]) and loss[1] == np.inf
    assert np.all(gU[3:5] == 0)


def test_rdp_device_chains_and_bad_input():
    rng = np.random.default_rng(31)
    N, n_tok = 5, 4
    U, y = rng.standard_normal((n_tok, N)), rng.integers(0, N, n_tok)
    B, empty = rng.standard_normal((N, N)), np.zeros((0, 0))
    args = (B, empty, empty, False, 1, np.full(N, 1 / N), 2, rng.random((n_tok, 1)))
    out1 = _cuda_randomized.rdp_loss_grad_ragged(U, [1, 3], y, *args)
    out2 = _cuda_randomized.rdp_loss_grad_ragged(U, chain_cuda.DeviceChains([1, 3], y), None,
                                                 *args)
    for a, b in zip(out1, out2):
        assert_array_equal(a, b)
    with pytest.raises(ValueError, match="k1"):
        _cuda_randomized.rdp_loss_grad_ragged(U, [4], y, B, empty, empty, False, 1,
                                              np.full(N, 1 / N), 6, rng.random((n_tok, 0)))
    with pytest.raises(ValueError, match="uniforms"):
        _cuda_randomized.rdp_loss_grad_ragged(U, [4], y, *args[:-1], rng.random((1, 1)))


@pytest.mark.parametrize("transitions", ["full", "low_rank"])
def test_backend_randomized_pass_matches_cpu(transitions):
    """randomized_loss_grad_ragged on device="cuda" equals device="cpu"."""
    rng = np.random.default_rng(32)
    N, lengths = 6, [3, 1, 4]
    U, y = rng.standard_normal((8, N)), rng.integers(0, N, 8)
    B = rng.standard_normal((N, N))
    if transitions == "low_rank":
        B = rdp.LowRankTransitions(rng.standard_normal((N, 2)), rng.standard_normal((N, 2)))
    results = [rdp.randomized_loss_grad_ragged(U, lengths, y, B, 2, 2, seeds=[4, 5, 6],
                                               device=device) for device in ("cpu", "cuda")]
    (l0, g0, t0), (l1, g1, t1) = results
    assert type(t1) is type(t0)
    for got, want in ((l1, l0), (g1, g0), (np.asarray(t1), np.asarray(t0))):
        assert_allclose(got, want, **TOL[np.float64])


# ------------------------------------------------------------- estimator
def _objective_estimator(transitions, device, n_top, n_sampled):
    est = RandomizedCRFTagger(transitions=transitions, rank=2, c2=0.3)
    est.classes_ = np.arange(5)
    est.n_features_in_ = 4
    est._n_top_, est._n_sampled_ = n_top, n_sampled
    est.exact_ = n_top is None
    est.device_ = device
    return est


@pytest.mark.parametrize("transitions", ["full", "low_rank"])
@pytest.mark.parametrize("n_top, n_sampled", [(None, 0), (2, 2)])
def test_tagger_loss_and_gradient_on_cuda(transitions, n_top, n_sampled):
    """The tagger's minibatch loss and gradient, exact and randomized, are the
    same on the GPU as on the CPU."""
    rng = np.random.default_rng(40)
    X, y = make_chain_data(n_sequences=4, n_classes=5, n_features=4, length=(1, 4),
                           random_state=2)
    data = SequenceData.from_sequences(X, y)
    seeds = rng.integers(0, 2**31 - 1, size=4)
    results = []
    for device in ("cpu", "cuda"):
        est = _objective_estimator(transitions, device, n_top, n_sampled)
        theta = np.random.default_rng(41).normal(scale=0.5, size=est._layout()[-1])
        results.append(est._loss_grad(theta, data, np.arange(4), seeds, Parallel(n_jobs=1)))
    assert results[1][0] == pytest.approx(results[0][0], rel=1e-10)
    assert_allclose(results[1][1], results[0][1], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_top, n_sampled, max_iter", [(None, 0, 2), (1, 1, 2)])
def test_tagger_fit_on_cuda_matches_cpu(n_top, n_sampled, max_iter):
    """device="cuda" under the simulator: same parameters, marginals and
    paths as device="cpu" (exact: L-BFGS; randomized: Adam, same seeds)."""
    X, y = make_chain_data(n_sequences=5, n_classes=3, n_features=4, length=(2, 4),
                           random_state=3)
    fits = {}
    for device in ("cpu", "cuda"):
        est = RandomizedCRFTagger(n_top=n_top, n_sampled=n_sampled, max_iter=max_iter,
                                  batch_size=3, c2=0.1, device=device, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits[device] = est.fit(X, y)
    cpu_est, gpu_est = fits["cpu"], fits["cuda"]
    assert gpu_est.device_ == "cuda" and cpu_est.device_ == "cpu"
    assert gpu_est.exact_ == (n_top is None)
    assert not hasattr(gpu_est, "_backend")
    assert_allclose(gpu_est.coef_, cpu_est.coef_, rtol=1e-8, atol=1e-10)
    assert_allclose(gpu_est.transition_, cpu_est.transition_, rtol=1e-8, atol=1e-10)
    for got, want in zip(gpu_est.predict_marginals(X[:3]), cpu_est.predict_marginals(X[:3])):
        assert_allclose(got, want, rtol=1e-8, atol=1e-10)
    for got, want in zip(gpu_est.predict(X[:3]), cpu_est.predict(X[:3])):
        assert_array_equal(got, want)


def test_adagrad_fit_on_cuda_is_one_launch_per_minibatch():
    """optimizer="adagrad" on device="cuda": a minibatch of more than 32
    sequences is one chunk and no threads (it used to be split into
    32-sequence chunks run on n_jobs threads: concurrent simulated kernels,
    an AssertionError with n_jobs=2); the model matches the CPU's."""
    X, y = make_chain_data(n_sequences=40, n_classes=3, n_features=4, length=(2, 3),
                           random_state=3)
    fits = {}
    for device in ("cpu", "cuda"):
        est = RandomizedCRFTagger(optimizer="adagrad", batch_size=40, max_iter=1, n_jobs=2,
                                  c2=0.1, device=device, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits[device] = est.fit(X, y)
    assert_allclose(fits["cuda"].coef_, fits["cpu"].coef_, rtol=1e-8, atol=1e-10)


def test_gpstruct_fit_on_cuda_runs_its_chunks_in_one_thread():
    """GPStructTagger(device="cuda", n_jobs=2) over more than one chunk of
    sequences (32 in the weight-space form): the chunks run one after another
    (they used to run on n_jobs threads: concurrent simulated kernels, an
    AssertionError), and the model equals the CPU's."""
    from skgpstruct import GPStructTagger

    X, y = make_chain_data(n_sequences=34, n_classes=2, n_features=4, length=(2, 2),
                           random_state=3)
    fits = {}
    for device in ("cpu", "cuda"):
        est = GPStructTagger(n_samples=2, max_iter=1, n_jobs=2, device=device,
                             random_state=0, kernel_variance=1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits[device] = est.fit(X, y)
    assert fits["cuda"].approximation_ == "features"
    assert_allclose(fits["cuda"].coef_, fits["cpu"].coef_, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("approximation, attrs", [
    ("inducing", ("q_mu_", "q_sqrt_")), ("features", ("coef_", "coef_var_"))])
def test_gpstruct_fit_on_cuda_matches_cpu(approximation, attrs):
    """GPStructTagger(device="cuda") under the simulator: the CRF likelihood's
    batched calls run on the GPU kernels and the fit equals device="cpu"
    (both forms of the posterior)."""
    from skgpstruct import GPStructTagger
    from skgpstruct.likelihoods import CRFLikelihood

    X, y = make_chain_data(n_sequences=4, n_classes=2, n_features=3, length=(2, 3),
                           random_state=5)
    fits = {}
    for device in ("cpu", "cuda"):
        est = GPStructTagger(n_inducing=4, n_samples=2, n_predict_samples=4, max_iter=3,
                             device=device, random_state=0, kernel_variance=1.0,
                             approximation=approximation)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits[device] = est.fit(X, y)
    assert fits["cuda"].device_ == "cuda" and fits["cpu"].device_ == "cpu"
    assert fits["cpu"].elbo_history_[-1] > fits["cpu"].elbo_history_[0]  # it moved
    for attr in attrs:
        assert_allclose(getattr(fits["cuda"], attr), getattr(fits["cpu"], attr),
                        rtol=1e-8, atol=1e-10)
    for got, want in zip(fits["cuda"].predict_marginals(X), fits["cpu"].predict_marginals(X)):
        assert_allclose(got, want, rtol=1e-8, atol=1e-10)
    # the likelihood's batched call itself, against the CPU one
    rng = np.random.default_rng(0)
    F, B, Y = rng.normal(size=(2, 3, 4, 3)), rng.normal(size=(2, 3, 3, 3)), rng.integers(0, 3, (2, 4))
    for got, want in zip(CRFLikelihood(device="cuda").log_prob_grad_many(F, B, Y),
                         CRFLikelihood().log_prob_grad_many(F, B, Y)):
        assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# ------------------------------------------------- compiles for a real GPU
_TYPECHECK = textwrap.dedent("""
    import types as pytypes
    import numpy as np
    import numba.cuda.dispatcher as dispatcher
    from numba import typeof, types
    from numba.cuda.compiler import compile_cuda

    CC = (7, 0)
    # device functions ask the (absent) GPU for its compute capability
    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=CC)
    from skgpstruct.chain import _cuda_device as dev, cuda as cc
    from skgpstruct.chain.randomized import _cuda as _cuda_randomized
    from skgpstruct.chain.randomized._cuda_kernels import rdp_kernels

    seen = {}

    def launch(kernel, blocks, threads, shared, *args):
        sig = tuple(typeof(a) for a in args)
        if (kernel.py_func, sig) not in seen:
            seen[kernel.py_func, sig] = compile_cuda(kernel.py_func, types.void, sig, cc=CC)

    dev._launch = launch
    dev._to_device = np.ascontiguousarray
    dev._empty = lambda shape, dtype: np.zeros(shape, dtype)
    dev._to_host = lambda d: d
    dev._is_device = lambda x: False
    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float64):
        U, y = rng.standard_normal((5, 3)).astype(dt), rng.integers(0, 3, 5)
        for B in (np.zeros((3, 3), dt), np.zeros((2, 3, 3), dt)):
            cc.log_partition_ragged(U, [2, 3], B)
            cc.marginals_ragged(U, [2, 3], B)
            cc.log_likelihood_grad_ragged(U, [2, 3], B, y)
            cc.viterbi_ragged(U, [2, 3], B)
        U = rng.standard_normal((5, 6)).astype(dt)
        e, L = np.zeros((0, 0), dt), np.zeros((6, 2), dt)
        for low in (False, True):
            _cuda_randomized.rdp_loss_grad_ragged(
                U, [2, 3], y, e if low else np.zeros((6, 6), dt), L, L, low,
                3, np.full(6, 1 / 6, dt), 2, rng.random((5, 2)))
    names = sorted({f.__name__ for f, _ in seen})
    # no double precision inside float32 kernels or their device functions
    f32 = [c for (f, sig), c in seen.items()
           if any(getattr(t, "dtype", None) == types.float32 for t in sig)]
    f32 += [c for d in vars(rdp_kernels(np.float32)).values()
            for c in getattr(d, "overloads", {}).values()]
    doubles = sorted({v for c in f32 for v, t in c.fndesc.typemap.items()
                      if t == types.float64})
    print("compiled", names, "float64 in float32 kernels:", doubles)
""")


@pytest.fixture(scope="module", autouse=True)
def typecheck_process():
    """The compilation subprocess, started with the module so that it runs
    while the simulator tests do (it takes ~15 s)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", _TYPECHECK], env=env, cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def test_kernels_compile_for_a_real_gpu(typecheck_process):
    """The simulator runs the kernels as Python; this types and lowers every
    kernel with numba's CUDA compiler (which needs no GPU) for both
    precisions, as the public functions launch them, and checks that the
    float32 kernels do no float64 arithmetic."""
    stdout, stderr = typecheck_process.communicate(timeout=300)
    assert typecheck_process.returncode == 0, stderr[-3000:]
    assert ("compiled ['fb', 'fill', 'marginals', 'prep_exp', 'rdp_fb', 'rdp_select', "
            "'sum_chains', 'viterbi'] float64 in float32 kernels: []") in stdout
