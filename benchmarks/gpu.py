"""Throughput of the CUDA kernels against the numba CPU kernels.

Needs an NVIDIA GPU with numba's CUDA target (``pip install
"skgpstruct[cuda]"``). Without one, or under numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``), it says so and exits without measuring or
writing anything.

Measured (median of repeats, warm-up calls excluded: they compile the
kernels):

* exact dynamic programmes on S = 4096 chains of T = 50 positions, V in
  {14, 45, 200} labels (``--S``, ``--T``, ``--V``): marginals with a shared
  transition matrix, the log-likelihood gradient with one transition matrix
  per chain (how GPStructTagger batches samples x sequences) and Viterbi;
  numba CPU kernels (float64, one thread) against the CUDA kernels in
  float64 and float32, with inputs and outputs left on the GPU ("GPU") and
  with the host-to-device and device-to-host copies included ("GPU +
  copies");
* the randomized training pass (``rdp_loss_grad_ragged``: randomized forward,
  backward and gradient) at N = 10,000 labels with low-rank transitions
  (rank 32), 64 sequences of 20 tokens, K = 100 and 1,000 states per
  position (half kept, half sampled; ``--N``, ``--K``, ``--rdp-sequences``,
  ``--rdp-T``);
* one GPStructTagger fit on ``basenp_large`` (the papers' features, fold 0)
  with ``device="cuda"`` against ``device="cpu"`` (``--no-fit`` skips it),
  with the token error rate of both, so that a speed-up that changes the
  result is seen.

Every GPU result is compared with the CPU one (column ``max |diff|``).
Results: ``benchmarks/results/gpu.{md,json}``.

Usage::

    python benchmarks/gpu.py [--quick] [--no-fit] [--S 4096] [--T 50] [--V 14 45 200]
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import time_call, write_results  # noqa: E402

from skgpstruct import chain  # noqa: E402
from skgpstruct.chain.randomized import _batch_kernels as _rdp_batch  # noqa: E402
from skgpstruct.chain import randomized as rdp  # noqa: E402


def gpu_status():
    """(usable, reason): a real GPU, not the simulator."""
    from numba.core import config

    if config.ENABLE_CUDASIM:
        return False, "numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM)"
    from skgpstruct._utils.device import cuda_status

    return cuda_status()


def _sync():
    from numba import cuda

    cuda.synchronize()


def _cpu_time(fn, warm, repeats):
    """Median CPU time; ``warm`` compiles on a small input first, and a call
    over 10 s is timed once (the table says how many)."""
    warm()
    t0 = time.perf_counter()
    out = fn()
    once = time.perf_counter() - t0
    if once > 10.0 or repeats <= 1:
        return once, 1, out
    med, times = time_call(fn, repeats=repeats - 1, warmup=0)
    return float(np.median(times + [once])), len(times) + 1, out


def _gpu_time(fn, repeats):
    """Median GPU time of ``fn`` (synchronised), after one warm-up call."""

    def run():
        out = fn()
        _sync()
        return out

    med, _ = time_call(run, repeats=repeats, warmup=1)
    return med


def _max_diff(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both = np.isneginf(a) & np.isneginf(b)
    return float(np.max(np.abs(np.where(both, 0.0, a - b)), initial=0.0))


def exact_rows(S, T, V, repeats):
    from numba import cuda

    from skgpstruct.chain import cuda as chain_cuda

    rng = np.random.default_rng(V)
    lengths = np.full(S, T)
    U = rng.standard_normal((S * T, V))
    B = rng.standard_normal((V, V))
    B3 = rng.standard_normal((S, V, V))
    y = rng.integers(0, V, S * T)
    small = (U[: 2 * T], lengths[:2])
    rows = []
    cases = {
        "marginals (shared B)": (
            lambda: chain.marginals_ragged(U, lengths, B),
            lambda: chain.marginals_ragged(*small, B),
            lambda d: chain_cuda.marginals_ragged(d["U"], d["chains"], d["B"], to_host=False),
            lambda h: chain_cuda.marginals_ragged(h["U"], lengths, h["B"]),
            lambda out: out[0],
        ),
        "log-lik. gradient (B per chain)": (
            lambda: chain.log_likelihood_grad_ragged(U, lengths, B3, y),
            lambda: chain.log_likelihood_grad_ragged(*small, B3[:2], y[: 2 * T]),
            lambda d: chain_cuda.log_likelihood_grad_ragged(d["U"], d["chains"], d["B3"],
                                                            to_host=False),
            lambda h: chain_cuda.log_likelihood_grad_ragged(h["U"], lengths, h["B3"], y),
            lambda out: out[1],
        ),
        "Viterbi (shared B)": (
            lambda: chain.viterbi_ragged(U, lengths, B),
            lambda: chain.viterbi_ragged(*small, B),
            lambda d: chain_cuda.viterbi_ragged(d["U"], d["chains"], d["B"], to_host=False),
            lambda h: chain_cuda.viterbi_ragged(h["U"], lengths, h["B"]),
            lambda out: out[1],
        ),
    }
    for name, (cpu_fn, cpu_warm, gpu_dev, gpu_host, pick) in cases.items():
        t_cpu, n_cpu, ref = _cpu_time(cpu_fn, cpu_warm, repeats)
        print(f"{name} V={V}: CPU {t_cpu:.3f} s", flush=True)
        for dtype in (np.float64, np.float32):
            host = {"U": U.astype(dtype), "B": B.astype(dtype), "B3": B3.astype(dtype)}
            dev = {k: cuda.to_device(v) for k, v in host.items()}
            dev["chains"] = chain_cuda.DeviceChains(lengths, y)
            t_dev = _gpu_time(lambda: gpu_dev(dev), repeats)
            t_host = _gpu_time(lambda: gpu_host(host), repeats)
            diff = _max_diff(pick(gpu_host(host)), pick(ref))
            rows.append({
                "kernel": name, "size": f"S={S} T={T} V={V}", "dtype": np.dtype(dtype).name,
                "CPU ms": 1e3 * t_cpu, "CPU runs": n_cpu, "GPU ms": 1e3 * t_dev,
                "GPU + copies ms": 1e3 * t_host, "CPU / GPU": t_cpu / t_dev,
                "CPU / (GPU + copies)": t_cpu / t_host, "max |diff|": diff,
            })
            print(rows[-1], flush=True)
    return rows


def randomized_rows(N, K, n_seq, T, rank, repeats):
    from numba import cuda

    from skgpstruct.chain import cuda as chain_cuda
    from skgpstruct.chain.randomized import _cuda as _cuda_randomized

    rng = np.random.default_rng(K)
    n_tok = n_seq * T
    offsets = np.arange(0, n_tok + 1, T, dtype=np.int64)
    U = rng.standard_normal((n_tok, N))
    y = rng.integers(0, N, n_tok)
    left = 0.3 * rng.standard_normal((N, rank))
    right = 0.3 * rng.standard_normal((N, rank))
    k1 = K // 2
    k2 = K - k1
    code = _rdp_batch.proposal_code("local+global")
    q_global = rdp.make_proposal(np.zeros((1, N)), rdp.LowRankTransitions(left, right),
                                 "global")[0]
    uniforms = rng.random((n_tok, k2))
    empty = np.zeros((0, 0))

    def cpu_call(U_, off, y_, unif):
        gU, gL, gR = np.zeros_like(U_), np.zeros_like(left), np.zeros_like(right)
        loss = _rdp_batch.rdp_loss_grad_ragged(U_, off, y_, empty, left, right, True, code,
                                               q_global, k1, unif, empty, 0.0, 1 << 22, gU,
                                               empty, gL, gR)
        return loss, gU

    t_cpu, n_cpu, ref = _cpu_time(
        lambda: cpu_call(U, offsets, y, uniforms),
        lambda: cpu_call(U[:T], offsets[:2], y[:T], uniforms[:T]), repeats)
    print(f"randomized K={K}: CPU {t_cpu:.3f} s", flush=True)
    rows = []
    for dtype in (np.float64, np.float32):
        h = {"U": U.astype(dtype), "left": left.astype(dtype), "right": right.astype(dtype),
             "q": q_global.astype(dtype), "unif": uniforms.astype(dtype)}
        d = {k: cuda.to_device(v) for k, v in h.items()}
        chains = chain_cuda.DeviceChains(np.full(n_seq, T), y)
        dummy = cuda.to_device(np.zeros((1, 1), dtype))

        def on_device():
            return _cuda_randomized.rdp_loss_grad_ragged(
                d["U"], chains, None, dummy, d["left"], d["right"], True, code, d["q"], k1,
                d["unif"], to_host=False)

        def with_copies():
            loss, g, _, _, _ = _cuda_randomized.rdp_loss_grad_ragged(
                h["U"], np.full(n_seq, T), y, empty, h["left"], h["right"], True, code,
                h["q"], k1, h["unif"])
            return loss, g

        t_dev = _gpu_time(on_device, repeats)
        t_host = _gpu_time(with_copies, repeats)
        loss, g = with_copies()
        diff = max(_max_diff(loss, ref[0]), _max_diff(g, ref[1]))
        rows.append({
            "kernel": "randomized pass (low rank)",
            "size": f"N={N} K={K} ({k1}+{k2}) r={rank}, {n_seq}x{T} tokens",
            "dtype": np.dtype(dtype).name, "CPU ms": 1e3 * t_cpu, "CPU runs": n_cpu,
            "GPU ms": 1e3 * t_dev, "GPU + copies ms": 1e3 * t_host,
            "CPU / GPU": t_cpu / t_dev, "CPU / (GPU + copies)": t_cpu / t_host,
            "max |diff|": diff,
        })
        print(rows[-1], flush=True)
    return rows


def gpstruct_fit_notes():
    """One GPStructTagger fit per device on basenp_large fold 0."""
    from sklearn.utils._param_validation import InvalidParameterError

    from skgpstruct import GPStructTagger
    from skgpstruct.datasets import load_benchmark
    from skgpstruct.metrics import token_error_rate

    try:
        bunch = load_benchmark("basenp_large", features="gpstruct")
    except (OSError, ValueError) as exc:
        return [f"GPStructTagger fit not run: basenp_large unavailable ({exc})."], {}
    train, test = bunch.folds[0]
    X_tr, y_tr = [bunch.X[i] for i in train], [np.asarray(bunch.y[i]) for i in train]
    X_te, y_te = [bunch.X[i] for i in test], [np.asarray(bunch.y[i]) for i in test]
    try:  # before minutes of CPU fit: does this GPStructTagger take device="cuda"?
        GPStructTagger(device="cuda")._validate_params()
    except InvalidParameterError as exc:
        return [f"GPStructTagger fit not run: device='cuda' not accepted ({exc})."], {}
    out = {}
    for device in ("cpu", "cuda"):
        gp = GPStructTagger(device=device, random_state=0)
        t0 = time.perf_counter()
        gp.fit(X_tr, y_tr)
        fit_s = time.perf_counter() - t0
        err = 100.0 * token_error_rate(y_te, gp.predict(X_te))
        out[device] = {"fit s": fit_s, "error %": float(err)}
        print(f"GPStructTagger basenp_large fold 0, device={device}: fit {fit_s:.1f} s, "
              f"error {err:.2f} %", flush=True)
    note = (f"GPStructTagger fit on basenp_large (gpstruct features, fold 0, default "
            f"parameters, random_state=0): CPU {out['cpu']['fit s']:.1f} s (error "
            f"{out['cpu']['error %']:.2f} %), CUDA {out['cuda']['fit s']:.1f} s (error "
            f"{out['cuda']['error %']:.2f} %), speed-up "
            f"{out['cpu']['fit s'] / out['cuda']['fit s']:.2f}x (one fit each; the first "
            "CUDA fit includes kernel compilation).")
    return [note], {"gpstruct_fit": out}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--no-fit", action="store_true", help="skip the GPStructTagger fit")
    parser.add_argument("--S", type=int, default=4096)
    parser.add_argument("--T", type=int, default=50)
    parser.add_argument("--V", type=int, nargs="+", default=[14, 45, 200])
    parser.add_argument("--N", type=int, default=10_000)
    parser.add_argument("--K", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--rdp-sequences", type=int, default=64)
    parser.add_argument("--rdp-T", type=int, default=20)
    args = parser.parse_args(argv)
    usable, reason = gpu_status()
    if not usable:
        print(f"No GPU available: {reason}. Nothing measured, no results written.")
        return 0
    from numba import cuda

    device_name = cuda.get_current_device().name
    if isinstance(device_name, bytes):
        device_name = device_name.decode()
    repeats = 3 if args.quick else 7
    rows = []
    for V in args.V:
        rows += exact_rows(args.S, args.T, V, repeats)
    for K in args.K:
        rows += randomized_rows(args.N, K, args.rdp_sequences, args.rdp_T, 32, repeats)
    notes = [
        f"GPU: {device_name}. Median wall time per call, warm-up (compilation) "
        "excluded. CPU: numba kernels, float64, one thread (calls over 10 s timed "
        "once; 'CPU runs'). 'GPU': inputs already on the device, outputs left there "
        "(synchronised); 'GPU + copies': numpy in, numpy out.",
        "max |diff|: largest absolute difference between the GPU result (unary "
        "marginals, grad_U, Viterbi scores, or the randomized losses and grad_U) and "
        "the CPU one.",
    ]
    extra = {}
    if not args.no_fit:
        fit_notes, extra = gpstruct_fit_notes()
        notes += fit_notes
    columns = ["kernel", "size", "dtype", "CPU ms", "CPU runs", "GPU ms", "GPU + copies ms",
               "CPU / GPU", "CPU / (GPU + copies)", "max |diff|"]
    write_results("gpu", rows, columns, title="CUDA kernels vs numba CPU kernels",
                  notes=notes, extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
