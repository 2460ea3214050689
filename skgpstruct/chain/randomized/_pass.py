"""Host side of the randomized training pass, shared by the CPU and CUDA backends.

:func:`prepare` turns the public arguments of
:func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged` into the
arrays the kernels read (the proposal code and global vector, the
deterministic slot count, the uniforms of every sequence drawn from its own
seed, ``exp(B - max B)`` for dense transitions); :func:`cpu_pass` runs the
numba kernel :func:`skgpstruct.chain.randomized._batch_kernels.rdp_loss_grad_ragged` on
them and :func:`finish` checks and packs the results; :func:`loss_grad_cpu`
is the whole CPU pass.
"""

from typing import NamedTuple

import numpy as np

from ._batch_kernels import proposal_code, rdp_loss_grad_ragged, seeded_uniforms
from ..._input.arrays import check_labels, check_lengths
from ._types import (_EMPTY2, LowRankTransitions, _check_sizes, _check_transitions,
                     _check_unary)
from .proposals import make_proposal

# Largest T * K^2 for which the CPU pass keeps a sequence's sub-lattice edge
# weights between its forward and backward sweeps (32 MB).
_STORE_EDGES = 1 << 22
_SEED_LIMIT = 2**32 - 1


class TrainingInputs(NamedTuple):
    """Kernel arguments of one randomized training pass (see :func:`prepare`)."""

    offsets: np.ndarray
    lowrank: bool
    B: np.ndarray
    left: np.ndarray
    right: np.ndarray
    code: int
    q_global: np.ndarray
    k1: int
    uniforms: np.ndarray
    expB: np.ndarray
    shift_B: float


def _uniforms(offsets, k2, seeds):
    """Uniforms of the sampled slots; sequence ``n`` draws its rows from
    ``RandomState(seeds[n])`` (:func:`~skgpstruct.chain.randomized._batch_kernels.seeded_uniforms`,
    the same numbers), so the draw does not depend on the batching."""
    seeds = np.asarray(seeds)
    n_seq = offsets.shape[0] - 1
    if seeds.dtype.kind not in "iu" or seeds.shape != (n_seq,):
        raise ValueError(
            f"seeds must be {n_seq} integers (one per sequence), got dtype {seeds.dtype} "
            f"and shape {seeds.shape}."
        )
    if n_seq and (seeds.min() < 0 or seeds.max() > _SEED_LIMIT):
        raise ValueError(f"seeds must be between 0 and {_SEED_LIMIT} (RandomState's range).")
    uniforms = np.empty((offsets[-1], k2))
    seeded_uniforms(offsets, seeds.astype(np.int64), uniforms)
    return uniforms


def _scaled_exp(B):
    """``(exp(B - shift), shift)`` with ``shift`` the largest finite entry."""
    finite = np.isfinite(B)
    if not finite.any():
        return np.zeros_like(B), 0.0
    shift = float(B[finite].max())
    return np.exp(B - shift), shift


def prepare(shape, lengths, transitions, n_top, n_sampled, proposal, seeds):
    """Check the arguments and build the kernel inputs (:class:`TrainingInputs`).

    ``shape`` is ``(n_tokens, n_states)`` of ``U``. With the gold label
    forced, ``max(n_top, 1)`` deterministic slots are kept; when they and the
    sampled ones would cover every state, all states are summed (uniform
    proposal, no sampled slot), as in
    :func:`~skgpstruct.chain.randomized.randomized_marginals`.
    """
    n_tokens, N = shape
    offsets = check_lengths(lengths, n_tokens)
    lowrank, B, left, right = _check_transitions(transitions, N)
    code = proposal_code(proposal)
    k1, k2 = _check_sizes(N, n_top, n_sampled, forced=True)
    if k1 == N:  # every state summed: the ranking is irrelevant
        code = 0
    spec = (left, right) if lowrank else B
    if code >= 2:
        q_global = make_proposal(np.zeros((1, N)), spec, "global")[0]
    else:
        q_global = np.zeros(N)
    expB, shift_B = (_EMPTY2, 0.0) if lowrank else _scaled_exp(B)
    return TrainingInputs(offsets, lowrank, B, left, right, code, q_global, k1,
                          _uniforms(offsets, k2, seeds), expB, shift_B)


def cpu_pass(U, y, p):
    """Run the numba pass: ``(losses, grad_U, grad_B, grad_left, grad_right)``."""
    N = U.shape[1]
    gU = np.zeros_like(U)
    gB = _EMPTY2 if p.lowrank else np.zeros((N, N))
    gL = np.zeros_like(p.left) if p.lowrank else _EMPTY2
    gR = np.zeros_like(p.right) if p.lowrank else _EMPTY2
    losses = rdp_loss_grad_ragged(
        U, p.offsets, y, p.B, p.left, p.right, p.lowrank, p.code, p.q_global, p.k1,
        p.uniforms, p.expB, p.shift_B, _STORE_EDGES, gU, gB, gL, gR)
    return losses, gU, gB, gL, gR


def finish(lowrank, losses, gU, gB, gL, gR):
    """Refuse non-finite losses; the transition gradient in the layout of the
    transitions (a matrix, or :class:`LowRankTransitions` of gradients).

    A loss of ``+inf`` means a gold path of score ``-inf`` (short of an
    overflow): the gold labels are forced onto the sub-lattice, so a
    sub-lattice without any path (``log Z-hat = -inf``) also has a forbidden
    gold path, while a forbidden gold path can leave ``log Z-hat`` finite.
    """
    if not np.all(np.isfinite(losses)):
        forbidden = losses == np.inf
        seqs = np.flatnonzero(forbidden if forbidden.any() else ~np.isfinite(losses))
        which = f"sequence(s) {seqs[:10].tolist()}{' ...' if seqs.size > 10 else ''}"
        if forbidden.any():
            raise ValueError(
                f"the gold path of {which} has score -inf (it uses a -inf unary or "
                "transition potential), so its log-likelihood is -inf and the "
                "randomized loss is undefined (+inf); when no path at all is "
                "allowed, log Z-hat is -inf on a training sub-lattice as well (or, "
                "with finite potentials near the float range, it overflowed)."
            )
        raise ValueError(
            f"the randomized loss of {which} is not finite (the potentials "
            "overflow): the randomized loss is undefined."
        )
    return losses, gU, (LowRankTransitions(gL, gR) if lowrank else gB)


def loss_grad_cpu(U, lengths, y, transitions, n_top, n_sampled, *, proposal, seeds):
    """:func:`skgpstruct.chain.randomized.randomized_loss_grad_ragged` on the
    CPU: check, :func:`prepare`, :func:`cpu_pass`, :func:`finish`."""
    U = _check_unary(U)
    p = prepare(U.shape, lengths, transitions, n_top, n_sampled, proposal, seeds)
    y = check_labels(y, U.shape[0], U.shape[1])
    return finish(p.lowrank, *cpu_pass(U, y, p))
