"""Throughput of batched linear-chain marginals.

For S samples of one chain (T = 30 positions, V labels; the shape of the
GPstruct inner loop, where each posterior sample of the potentials needs a
forward-backward pass) this times ``skgpstruct.chain.marginals`` (numba,
the scaled linear-space kernel of ``chain._linear_kernels``) against

* the log-space numba kernel it replaced and falls back to on extreme
  potentials (``chain._exact_kernels._fb_kernel``), called directly,

* the plain-numpy reference ``chain._reference.marginals_ref``, called once per
  sample (what the tests compare the kernels with),
* the same forward-backward in numpy vectorised over the S samples (a
  stronger numpy peer),
* torch-struct's ``LinearChainCRF(...).marginals`` and pytorch-crf's forward
  algorithm + autograd on the CPU, when torch is installed
  (``pip install torch==2.13.0 torch-struct pytorch-crf``).

With ``--large-V`` a second table times the exact training pass of
RandomizedCRFTagger on a treebank-sized label set: ``log_likelihood_grad_ragged``
on 32 sequences of 12 to 32 tokens (one chunk of ``_chunk_loss_grad``) with a
shared B and V = 444, single-threaded BLAS (as the callers run it): the
log-space kernel (``_exact_kernels._fb_ragged_kernel``), the linear-space
kernel one sequence at a time (``_linear_kernels._fb_ragged_kernel``) and the
public function (the linear-space pass over all sequences of the call with
matrix-matrix products, ``_linear_kernels._ll_grad_ragged_blas``).

Compilation is excluded (one warm-up call per kernel), every time is the
median of repeats, and ratios are taken against numba in the same run.
Results go to the section ``default`` of ``benchmarks/results/chain_kernels.{md,json}``.

Usage::

    python benchmarks/chain_kernels.py [--quick] [--large-V]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import markdown_table, time_call, write_results  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from skgpstruct import chain  # noqa: E402
from skgpstruct.chain import _exact_kernels, _reference
from skgpstruct.chain import _linear_space_kernels as _linear_kernels  # noqa: E402
from skgpstruct.chain.exact import _NO_LABELS  # noqa: E402


def log_space_marginals(U, B):
    """The log-space numba kernel (the one before the linear-space kernel)."""
    S, T, V = U.shape
    zeros = np.zeros((1, V))
    unary, pairwise = np.empty((S, T, V)), np.empty((S, V, V))
    _exact_kernels._fb_kernel(U, B[None], zeros, zeros, _NO_LABELS, unary, pairwise)
    return unary, pairwise


def _lse(a, axis):
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(a - m), axis=axis))


def numpy_batched_marginals(U, B):
    """Forward-backward in numpy, vectorised over the sample axis."""
    S, T, V = U.shape
    fwd = np.empty_like(U)
    bwd = np.empty_like(U)
    fwd[:, 0] = U[:, 0]
    for t in range(1, T):
        fwd[:, t] = _lse(fwd[:, t - 1, :, None] + B[None], axis=1) + U[:, t]
    bwd[:, T - 1] = 0.0
    for t in range(T - 2, -1, -1):
        bwd[:, t] = _lse(B[None] + (U[:, t + 1] + bwd[:, t + 1])[:, None, :], axis=2)
    logZ = _lse(fwd[:, T - 1], axis=1)
    unary = np.exp(fwd + bwd - logZ[:, None, None])
    pair = np.exp(
        fwd[:, :-1, :, None]
        + B[None, None]
        + (U[:, 1:] + bwd[:, 1:])[:, :, None, :]
        - logZ[:, None, None, None]
    ).sum(axis=1)
    return unary, pair


def reference_loop_marginals(U, B):
    out = [_reference.marginals_ref(U[s], B) for s in range(U.shape[0])]
    return np.stack([o[0] for o in out]), np.stack([o[1] for o in out])


def torch_peers():
    """Return {name: fn(U, B) -> unary marginals} for the installed torch libraries."""
    peers = {}
    try:
        import torch
    except ImportError:
        return peers, None
    torch.set_default_dtype(torch.float64)
    # torch-struct builds a Distribution without arg_constraints on every call
    warnings.filterwarnings("ignore", message=".*arg_constraints.*")
    try:
        import torch_struct

        def ts_marginals(Ut, Bt):
            S, T, V = Ut.shape
            # torch-struct edge potentials: (batch, T-1, C_t, C_{t-1})
            edge = Bt.T[None, None] + Ut[:, 1:, :, None]
            edge = edge.clone()
            edge[:, 0] += Ut[:, 0][:, None, :]
            m = torch_struct.LinearChainCRF(edge).marginals  # (S, T-1, V, V)
            unary = torch.cat([m[:, :1].sum(2), m.sum(3)], dim=1)
            return unary

        peers["torch-struct"] = ts_marginals
    except Exception as exc:  # pragma: no cover - depends on the environment
        print(f"torch-struct unavailable: {exc!r}")
    try:
        import torchcrf

        def pc_marginals(Ut, Bt):
            S, T, V = Ut.shape
            crf = torchcrf.CRF(V, batch_first=True).double()
            with torch.no_grad():
                crf.transitions.copy_(Bt)
                crf.start_transitions.zero_()
                crf.end_transitions.zero_()
            em = Ut.detach().clone().requires_grad_(True)
            mask = torch.ones(S, T, dtype=torch.bool)
            # log Z by pytorch-crf's forward algorithm; marginals = d log Z / d U
            logZ = crf._compute_normalizer(em.transpose(0, 1), mask.transpose(0, 1))
            (grad,) = torch.autograd.grad(logZ.sum(), em)
            return grad

        peers["pytorch-crf (autograd)"] = pc_marginals
    except Exception as exc:  # pragma: no cover
        print(f"pytorch-crf unavailable: {exc!r}")
    return peers, torch


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, small S only")
    parser.add_argument("--large-V", action="store_true",
                        help="add the V = 444 ragged training-pass table")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 7
    sizes_S = [64] if args.quick else [64, 1024]
    T = 30
    rng = np.random.default_rng(0)
    peers, torch = torch_peers()
    rows = []
    slow, skipped = {}, []
    for S in sizes_S:
        for V in (3, 14, 45):
            U = rng.normal(size=(S, T, V))
            B = rng.normal(size=(V, V))
            ref_u, ref_p = numpy_batched_marginals(U, B)
            nb_u, nb_p = chain.marginals(U, B)
            assert np.allclose(nb_u, ref_u, atol=1e-10) and np.allclose(nb_p, ref_p, atol=1e-9)
            lg_u, lg_p = log_space_marginals(U, B)
            assert np.allclose(nb_u, lg_u, rtol=1e-10, atol=1e-12)
            assert np.allclose(nb_p, lg_p, rtol=1e-10, atol=1e-12)
            t_nb, _ = time_call(lambda: chain.marginals(U, B), repeats=repeats, min_time=0.2)
            t_lg, _ = time_call(lambda: log_space_marginals(U, B), repeats=repeats, min_time=0.2)
            t_np, _ = time_call(lambda: numpy_batched_marginals(U, B), repeats=repeats)
            # the per-sample reference is slow: fewer repeats at large S
            t_ref, _ = time_call(
                lambda: reference_loop_marginals(U, B), repeats=max(1, repeats // 2)
            )
            row = {
                "S": S, "T": T, "V": V,
                "numba ms": 1e3 * t_nb,
                "log-space numba ms": 1e3 * t_lg,
                "log-space / numba": t_lg / t_nb,
                "numpy ref (loop) ms": 1e3 * t_ref,
                "numpy batched ms": 1e3 * t_np,
                "ref / numba": t_ref / t_nb,
                "batched / numba": t_np / t_nb,
                "samples/s numba": S / t_nb,
            }
            if torch is not None:
                Ut, Bt = torch.from_numpy(U), torch.from_numpy(B)
                for name, fn in peers.items():
                    # skip a peer whose projected call time (from the
                    # smallest S) exceeds a minute; the table says so
                    small = slow.get((name, V))
                    if small is not None and small * S / sizes_S[0] > 60.0:
                        row[f"{name} ms"] = float("nan")
                        row[f"{name} / numba"] = float("nan")
                        skipped.append(f"{name} at S={S}, V={V}: projected "
                                       f"{small * S / sizes_S[0]:.0f} s per call, not run")
                        continue
                    t0 = time.perf_counter()
                    got = fn(Ut, Bt).detach().numpy()  # also the warm-up call
                    once = time.perf_counter() - t0
                    assert np.allclose(got, ref_u, atol=1e-8), name
                    # slow peers (seconds per call) get fewer repeats
                    reps = repeats if once < 1.0 else (3 if once < 10.0 else 1)
                    t_pe, _ = time_call(lambda: fn(Ut, Bt), repeats=reps, warmup=0)
                    slow.setdefault((name, V), t_pe)
                    row[f"{name} ms"] = 1e3 * t_pe
                    row[f"{name} / numba"] = t_pe / t_nb
            rows.append(row)
            print(row, flush=True)
    columns = ["S", "T", "V", "numba ms", "log-space numba ms", "log-space / numba",
               "numpy ref (loop) ms", "ref / numba",
               "numpy batched ms", "batched / numba"]
    for name in peers:
        columns += [f"{name} ms", f"{name} / numba"]
    notes = [
        "Median wall time of one call computing unary and summed pairwise marginals "
        "for all S samples (float64), warm-up excluded.",
        "Ratios > 1 mean numba is faster. numba runs single-threaded; torch uses its "
        f"default intra-op threads ({torch.get_num_threads() if torch else 'n/a'}).",
        "Every peer's marginals are checked against numba's before timing.",
        "numba is the scaled linear-space kernel (chain._linear_kernels); log-space "
        "numba is the log-space kernel it falls back to on extreme potentials "
        "(chain._exact_kernels._fb_kernel), timed in the same run: their ratio is "
        "the linear-space speed-up.",
    ] + skipped
    if torch is None:
        notes.append("torch is not installed in this environment: no torch peers.")
    more, extra = large_V_table(repeats) if args.large_V else (None, None)
    write_results(
        "chain_kernels", rows, columns,
        title="Batched linear-chain marginals: numba vs numpy vs torch", notes=notes,
        more_markdown=more, extra=extra,
    )


def large_V_table(repeats):
    """Second table: the ragged training pass at V = 444, for the results
    written by :func:`main`: ``(markdown, {"large_V": ...})``."""
    rng = np.random.default_rng(1)
    rows = []
    for V in (14, 45, 444):
        lengths = rng.integers(12, 33, 32)
        N = int(lengths.sum())
        U = rng.normal(size=(N, V))
        B = 0.3 * rng.normal(size=(V, V))
        y = rng.integers(0, V, N)
        offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        zeros = np.zeros(V)

        def log_space():
            gU, gB = np.empty((N, V)), np.empty((1, V, V))
            return _exact_kernels._fb_ragged_kernel(U, offsets, B[None], zeros, zeros, y,
                                                    gU, gB), gU, gB[0]

        def one_by_one():
            gU, gB = np.empty((N, V)), np.empty((1, V, V))
            fell = np.empty(len(lengths), dtype=np.int8)
            return _linear_kernels._fb_ragged_kernel(U, offsets, B[None], zeros, zeros, y,
                                                     gU, gB, fell), gU, gB[0]

        def public():
            return chain.log_likelihood_grad_ragged(U, lengths, B, y)

        with threadpool_limits(limits=1):
            want = log_space()
            for got in (one_by_one(), public()):
                for a, b in zip(got, want):
                    assert np.allclose(a, b, rtol=1e-10, atol=1e-10)
            t_log, _ = time_call(log_space, repeats=repeats, min_time=0.5)
            t_one, _ = time_call(one_by_one, repeats=repeats, min_time=0.5)
            t_pub, _ = time_call(public, repeats=repeats, min_time=0.5)
        row = {
            "sequences": len(lengths), "tokens": N, "V": V,
            "log-space ms": 1e3 * t_log,
            "linear one-by-one ms": 1e3 * t_one,
            "linear BLAS (public) ms": 1e3 * t_pub,
            "log-space / one-by-one": t_log / t_one,
            "log-space / BLAS": t_log / t_pub,
        }
        rows.append(row)
        print(row, flush=True)
    columns = list(rows[0])
    title = "Ragged training pass (log_likelihood_grad_ragged, shared B), single thread"
    notes = [
        "One chunk of RandomizedCRFTagger's exact training pass: 32 sequences of "
        "12-32 tokens, U ~ N(0, 1), B ~ N(0, 0.3^2), shared B, gradients of the "
        "summed log-likelihood; BLAS limited to 1 thread (threadpoolctl).",
        "Median wall time of one call, warm-up excluded; all three are checked "
        "against each other before timing (rtol = atol = 1e-10).",
    ]
    text = f"## {title}\n\n" + markdown_table(rows, columns) + "\n\n"
    text += "\n".join(f"- {n}" for n in notes) + "\n"
    return text, {"large_V": {"title": title, "rows": rows, "notes": notes}}


if __name__ == "__main__":
    main()
