"""The randomized training pass: loss and gradient of many labelled sequences.

:class:`~skgpstruct.RandomizedCRFTagger` minimises, over the training
sequences, ``log Z-hat_n - score_n(y_n)`` where ``log Z-hat_n`` is the
randomized estimate of the log-partition function on a sub-lattice that
keeps the gold labels. :func:`randomized_loss_grad_ragged` computes these
losses and their gradient for sequences stacked in one array, on the CPU
(one serial, ``nogil`` numba call, :mod:`skgpstruct.chain.randomized._batch_kernels`) or
the GPU (:mod:`skgpstruct.chain.randomized._cuda`), as ``device`` says (a
name, resolved as :func:`skgpstruct.chain.backend.get_backend` resolves it,
or a backend of that module, which then runs it with its device caches).
"""

from ..._utils.device import resolve_device
from . import _pass

__all__ = ["randomized_loss_grad_ragged"]


def randomized_loss_grad_ragged(U, lengths, y, transitions, n_top, n_sampled, *,
                                proposal="local+global", seeds, device="cpu"):
    """Randomized negative log-likelihood of stacked sequences and its gradient.

    For every sequence ``n`` (rows ``U_n`` of ``U``, labels ``y_n``) the loss
    is ``log Z-hat_n - score_n(y_n)``, with ``log Z-hat_n`` the randomized
    estimate of :func:`~skgpstruct.chain.randomized.randomized_marginals` on
    a sub-lattice drawn with ``force=y_n`` and ``random_state=seeds[n]``:
    the result equals, sequence by sequence, that function's ``log_partition``
    minus the gold score, and its gradients minus the gold one-hot and pair
    counts (to rounding: the sums are taken in scaled linear space, or in
    log space where potentials spanning hundreds of nats could underflow
    them).

    Parameters
    ----------
    U : array-like of shape (n_tokens, n_states)
        Unary potentials of all sequences stacked (finite or -inf).
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths, summing to ``n_tokens``.
    y : array-like of int of shape (n_tokens,)
        Gold labels, forced onto the sub-lattice.
    transitions : array-like of shape (n_states, n_states) or LowRankTransitions
        Full transitions ``B``, or ``(left, right)`` with ``B = left @ right.T``.
    n_top : int
        States of highest proposal kept per position; the gold label takes
        one of the ``max(n_top, 1)`` deterministic slots.
    n_sampled : int
        States sampled per position from the rest. When the deterministic
        and sampled slots would cover every state, every state is summed.
    proposal : {"uniform", "local", "global", "local+global"}, default="local+global"
        Proposal kind, see :func:`~skgpstruct.chain.randomized.make_proposal`.
    seeds : array-like of int of shape (n_sequences,)
        Sequence ``n`` draws its uniforms from ``RandomState(seeds[n])``, so
        the result does not depend on how sequences are batched.
    device : {"cpu", "cuda", "auto"} or backend, default="cpu"
        Where the pass runs, see :func:`skgpstruct.chain.backend.get_backend`.

    Returns
    -------
    losses : ndarray of shape (n_sequences,)
        ``log Z-hat_n - score_n(y_n)``.
    grad_U : ndarray of shape (n_tokens, n_states)
        Gradient of ``losses.sum()`` with respect to ``U``.
    grad_transitions : ndarray of shape (n_states, n_states) or LowRankTransitions
        Gradient of ``losses.sum()`` with respect to ``transitions``, in
        their layout (``(grad_left, grad_right)`` for low rank).

    Raises
    ------
    ValueError
        If a sequence's gold path has score ``-inf`` (a ``-inf`` potential
        on it: its log-likelihood is ``-inf`` and the loss ``+inf``), which
        includes a sub-lattice carrying no path (``log Z-hat = -inf``), or
        on invalid input.

    See Also
    --------
    skgpstruct.chain.randomized.randomized_marginals : one sequence at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.chain.randomized import randomized_loss_grad_ragged
    >>> rng = np.random.default_rng(0)
    >>> U, B = rng.normal(size=(7, 20)), rng.normal(size=(20, 20))
    >>> y = rng.integers(0, 20, 7)
    >>> losses, gU, gB = randomized_loss_grad_ragged(U, [3, 4], y, B, 2, 3,
    ...                                              seeds=[11, 12])
    >>> losses.shape, gU.shape, gB.shape
    ((2,), (7, 20), (20, 20))
    >>> np.allclose(gU.sum(axis=1), 0.0)  # marginals minus the gold one-hot
    True
    """
    if hasattr(device, "randomized_loss_grad_ragged"):  # a backend (chain.backend)
        return device.randomized_loss_grad_ragged(
            U, lengths, y, transitions, n_top, n_sampled, proposal=proposal, seeds=seeds)
    if resolve_device(device) == "cuda":
        from .._cuda_device import DeviceChains
        from . import _cuda

        return _cuda.loss_grad_ragged(U, lengths, DeviceChains(lengths, y), transitions,
                                      n_top, n_sampled, proposal=proposal, seeds=seeds)
    return _pass.loss_grad_cpu(U, lengths, y, transitions, n_top, n_sampled,
                               proposal=proposal, seeds=seeds)
