"""Memory guard: refuse a fit whose arrays would not fit, before allocating them.

A GPStructTagger fit allocates arrays whose size grows fast with its
settings: the Cholesky factors of the posterior, ``K V M (M + 1) / 2``
entries mean-field and ``K (V M) (V M + 1) / 2`` coupled, each held several
times by L-BFGS (its history of ``2 * 20`` vectors the size of the
parameters, plus the iterate, the gradient and their unpacked copies); the
marginal covariances of a length bucket, ``K V T^2`` per sequence in the
inducing-point form; and the samples of the transition weights,
``K S V^2`` per sequence. :func:`check_fit_memory` estimates the peak from
these counts and raises :class:`MemoryBudgetError` (a MemoryError) with
what to lower when it exceeds :func:`memory_budget`.

The budget is the environment variable ``SKGPSTRUCT_MEMORY_BUDGET`` (in
GiB) when set, else 75 % of the machine's physical memory.
"""

import os

__all__ = ["MemoryBudgetError", "memory_budget", "check_fit_memory"]

_GIB = 1024.0 ** 3
#: Float64 copies of the parameter vector L-BFGS keeps: 2 x maxcor (20)
#: history vectors, plus x, gradient, the unpacked parameters, the
#: gradients in parameter form and scipy's work arrays.
LBFGS_COPIES = 48
#: Arrays of the shape of one bucket's covariances alive at once during an
#: evaluation (covariances, their Cholesky factors, the backward pass).
COVARIANCE_COPIES = 4


class MemoryBudgetError(MemoryError):
    """A fit would need more memory than :func:`memory_budget`."""


def memory_budget():
    """Bytes a fit may use.

    Returns
    -------
    budget : float
        ``SKGPSTRUCT_MEMORY_BUDGET`` GiB if that environment variable is set,
        else 75 % of the physical memory (8 GiB where it cannot be read).

    Raises
    ------
    ValueError
        If ``SKGPSTRUCT_MEMORY_BUDGET`` is not a positive number.
    """
    env = os.environ.get("SKGPSTRUCT_MEMORY_BUDGET")
    if env is not None:
        try:
            value = float(env)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise ValueError("SKGPSTRUCT_MEMORY_BUDGET must be a positive number of "
                             f"GiB, got {env!r}.")
        return value * _GIB
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        physical = 8 * _GIB / 0.75
    return 0.75 * float(physical)


def _gib(n_bytes):
    return f"{n_bytes / _GIB:.3g} GiB"


def check_fit_memory(*, approximation, posterior, n_components, n_classes,
                     n_inducing, max_length, n_samples):
    """Raise if a GPStructTagger fit would exceed the memory budget.

    Parameters
    ----------
    approximation : {"features", "inducing"}
    posterior : {"mean_field", "coupled"}
    n_components : int
        Mixture components ``K``.
    n_classes : int
        Labels ``V``.
    n_inducing : int
        Inducing points ``M`` (inducing form; ignored otherwise).
    max_length : int
        Longest training sequence ``T``.
    n_samples : int
        Samples per sequence ``S``.

    Returns
    -------
    estimate : float
        The estimated peak in bytes (when within the budget).

    Raises
    ------
    MemoryBudgetError
        When the estimate exceeds :func:`memory_budget`; the message says
        which part is too large and what to lower.
    """
    K, V, M, T, S = (int(n_components), int(n_classes), int(n_inducing),
                     int(max_length), int(n_samples))
    parts = []
    if approximation == "inducing":
        d = V * M if posterior == "coupled" else M
        blocks = K if posterior == "coupled" else K * V
        n_params = blocks * d * (d + 1) / 2
        advice = ("lower n_inducing (the coupled posterior has (n_inducing * "
                  "n_classes)^2 / 2 entries; posterior='mean_field' has "
                  "n_classes * n_inducing^2 / 2)" if posterior == "coupled"
                  else "lower n_inducing or n_components")
        parts.append((8.0 * LBFGS_COPIES * n_params,
                      f"the posterior's Cholesky factors ({n_params:.3g} parameters, "
                      f"held {LBFGS_COPIES} times by the optimiser)", advice))
        width = T * V if posterior == "coupled" else T
        per_seq = K * (1 if posterior == "coupled" else V) * width * width
        parts.append((8.0 * COVARIANCE_COPIES * per_seq,
                      f"the marginal covariances of a sequence of {T} tokens",
                      "split the longest sequences or use approximation='features'"))
    parts.append((8.0 * COVARIANCE_COPIES * K * S * V * V,
                  f"the {S} samples of the {V} x {V} transition weights of a sequence",
                  "lower n_samples, or use RandomizedCRFTagger for large label sets"))
    total = sum(p[0] for p in parts)
    budget = memory_budget()
    if total > budget:
        n_bytes, what, advice = max(parts, key=lambda p: p[0])
        raise MemoryBudgetError(
            f"This fit needs about {_gib(total)}, above the memory budget of "
            f"{_gib(budget)} (75 % of this machine's memory, or "
            f"SKGPSTRUCT_MEMORY_BUDGET in GiB): {what} take {_gib(n_bytes)}; "
            f"{advice}."
        )
    return total
