"""Proximal AdaGrad with lazy (just-in-time) L2 / L1 on rows of sparse features.

A linear model over a large sparse vocabulary (a CRF's unary weights ``W``,
one row per feature, one column per label) gets, from a minibatch, a
gradient whose rows are zero for every feature absent from the minibatch.
Adam or SGD with an L2 term in the gradient still touch every row at every
step (the L2 term is dense), so a step costs O(n_features x n_labels)
whatever the minibatch; at 34,000 features x 444 labels that is most of a
training epoch.

Proximal AdaGrad (Duchi, Hazan and Singer, JMLR 2011, FOBOS with AdaGrad's
per-coordinate steps) handles the L2 term by its proximal step instead::

    G += g ** 2;  h = eps + sqrt(G)
    theta = (theta - lr * g / h) / (1 + lr * decay / h)

A row with a zero gradient keeps its ``G``, so the steps it misses are the
proximal division alone, k times over: ``theta / (1 + lr * decay / h) ** k``.
:class:`ProximalAdaGrad` applies those missed divisions when a row is next
touched (and :meth:`ProximalAdaGrad.synchronize` to every row), so its lazy
steps give the dense algorithm's iterates, up to rounding, at the cost of the
rows a minibatch touches. ``decay`` is the weight of ``decay / 2 ||theta||^2``
(the gradient of the L2 term), as in :class:`skgpstruct.optim.Adam`.

An L1 term ``l1 ||theta||_1`` joins the proximal step (the composite map of
``l1 |x| + decay / 2 x^2`` with step ``lr / h``, soft-thresholding then
division)::

    theta = soft(theta - lr * g / h, lr * l1 / h) / (1 + lr * decay / h)

which sets weights exactly to 0 (FOBOS / proximal AdaGrad's sparsity). The
missed steps of an untouched row are then ``|x| -> (|x| - a) / (1 + b)``
k times, clipped at 0, which has the closed form of :func:`_catch_up`, so
the lazy steps still give the dense iterates up to rounding.

The kernels are compiled with ``error_model="numpy"``: a division by zero
(impossible here, ``h >= epsilon > 0``) would give inf / NaN instead of
raising, which lets LLVM vectorise the loops' square roots and divisions
(about 4x on the catch-up loop; IEEE operations, so the same results).
"""

import math
from typing import NamedTuple

import numpy as np
from numba import njit

__all__ = ["ProximalAdaGrad", "RowSparseGradient"]

# numba raises a float to an integer power up to this by squarings, above it
# with math.pow (numba.cpython.numbers.int_power_impl); _catch_up does the same
_SQUARING_LIMIT = 0x10000
# Fewest coordinates per thread when a step's rows are shared among threads:
# the vectorised kernels take about 2 ms per million, a joblib dispatch about
# as long, so a default minibatch of a large model (hu_szeged: 1.8 million
# coordinates) stays on one thread and only synchronize is shared.
_SPLIT_COORDINATES = 1 << 20


@njit(cache=True, nogil=True, error_model="numpy")
def _catch_up(params, G, last, rows, out, n_cols, t, lr, decay, l1, eps):
    """Apply to each row of ``rows`` the proximal maps of the steps it
    missed (``t - last[row]``); then ``last[row] = t``. When ``out`` has
    ``n_cols`` columns, ``out[k]`` receives row ``rows[k]`` brought up to
    date (a gather in the same pass; ``out`` of 0 columns: none).

    A missed step maps ``x`` to ``soft(x, a) / (1 + b)`` (``a = lr l1 / h``,
    ``b = lr decay / h``, ``h`` fixed while the row is untouched), so ``|x|``
    follows ``u -> (u - a) / (1 + b)`` until it reaches 0, where it stays;
    the unclipped recursion decreases monotonically (to ``-a / b``), so k
    steps give ``max(0, r^k |x| - a (1 - r^k) / b)``, ``r = 1 / (1 + b)``
    (``max(0, |x| - k a)`` when ``b = 0``), the sign of ``x`` kept."""
    gather = out.shape[1] == n_cols
    f_row = np.empty(n_cols)
    pow_row = np.empty(n_cols)
    for k in range(rows.shape[0]):
        r = rows[k]
        missed = t - last[r]
        base = r * n_cols
        if missed > 0 and l1 > 0.0:
            for j in range(n_cols):
                i = base + j
                x = params[i]
                if x == 0.0 or G[i] == 0.0:  # no gradient yet: no step
                    continue
                h = eps + math.sqrt(G[i])
                a = lr * l1 / h
                if decay > 0.0:
                    b = lr * decay / h
                    log_r = -math.log1p(b)
                    # a (1 - r^k) / b, accurate for small b
                    u = math.exp(missed * log_r) * abs(x) + a * math.expm1(missed * log_r) / b
                else:
                    u = abs(x) - missed * a
                params[i] = math.copysign(u, x) if u > 0.0 else 0.0
        elif missed > 0 and decay > 0.0:
            # row views: contiguous loops that LLVM vectorises
            p = params[base:base + n_cols]
            g_acc = G[base:base + n_cols]
            c = lr * decay
            if missed == 1:  # the common case: no power
                for j in range(n_cols):
                    h = eps + math.sqrt(g_acc[j])
                    # no gradient yet (G = 0): no step size, no step
                    p[j] *= h / (h + c) if g_acc[j] > 0.0 else 1.0
            else:
                # p *= f ** missed, f = h / (h + c), with numba's own
                # algorithm for a float to an integer power (squarings up to
                # 2**16, math.pow above), a row at a time so that it vectorises
                for j in range(n_cols):
                    h = eps + math.sqrt(g_acc[j])
                    f_row[j] = h / (h + c) if g_acc[j] > 0.0 else 1.0
                    pow_row[j] = 1.0
                e = missed
                if e > _SQUARING_LIMIT:
                    for j in range(n_cols):
                        pow_row[j] = math.pow(f_row[j], float(e))
                    e = 0
                while e != 0:
                    if e & 1:
                        for j in range(n_cols):
                            pow_row[j] *= f_row[j]
                    e >>= 1
                    if e != 0:
                        for j in range(n_cols):
                            f_row[j] *= f_row[j]
                for j in range(n_cols):
                    p[j] *= pow_row[j]
        if gather:
            p = params[base:base + n_cols]
            o = out[k]
            for j in range(n_cols):
                o[j] = p[j]
        last[r] = t


@njit(inline="always")
def _soft_threshold(z, threshold):
    """``sign(z) max(|z| - threshold, 0)``."""
    if z > threshold:
        return z - threshold
    if z < -threshold:
        return z + threshold
    return 0.0


@njit(inline="always")
def _prox_step(x, g, h, lr, decay, l1):
    """One coordinate's proximal step, ``soft(x - lr g / h, lr l1 / h) /
    (1 + lr decay / h)`` with one division (``l1 = 0``: no thresholding)."""
    z = x * h - lr * g
    if l1 > 0.0:
        z = _soft_threshold(z, lr * l1)
    return z / (h + lr * decay)


@njit(cache=True, nogil=True, error_model="numpy")
def _step_rows(params, G, last, rows, grad_rows, n_cols, t, scale, lr, decay, l1, eps):
    """One proximal AdaGrad step on ``rows`` (already caught up to step
    ``t - 1``) with their gradient ``grad_rows`` (len(rows), n_cols)."""
    c = lr * decay
    for k in range(rows.shape[0]):
        r = rows[k]
        base = r * n_cols
        # row views: contiguous loops that LLVM vectorises
        p = params[base:base + n_cols]
        g_acc = G[base:base + n_cols]
        g_row = grad_rows[k]
        if l1 > 0.0:
            for j in range(n_cols):
                g = scale * g_row[j]
                g_acc[j] += g * g
                if g_acc[j] == 0.0:  # no gradient yet: no step size, no step
                    continue
                h = eps + math.sqrt(g_acc[j])
                p[j] = _prox_step(p[j], g, h, lr, decay, l1)
        else:  # _prox_step without thresholding
            for j in range(n_cols):
                g = scale * g_row[j]
                g_acc[j] += g * g
                h = eps + math.sqrt(g_acc[j])
                p[j] = (p[j] * h - lr * g) / (h + c) if g_acc[j] > 0.0 else p[j]
        last[r] = t


@njit(cache=True, nogil=True, error_model="numpy")
def _step_dense(params, G, grad, start, scale, lr, decay, l1, lo, hi, eps):
    """One proximal AdaGrad step on ``params[start:start + len(grad)]``, no
    decay (and no L1) on ``params[lo:hi]``."""
    for k in range(grad.shape[0]):
        i = start + k
        g = scale * grad[k]
        G[i] += g * g
        if G[i] == 0.0:  # no gradient yet: no step size, no step
            continue
        h = eps + math.sqrt(G[i])
        if lo <= i < hi:  # the undecayed slice: no L2, no L1
            params[i] = _prox_step(params[i], g, h, lr, 0.0, 0.0)
        else:
            params[i] = _prox_step(params[i], g, h, lr, decay, l1)


class RowSparseGradient(NamedTuple):
    """A gradient whose row block is zero outside ``rows``.

    Attributes
    ----------
    rows : ndarray of int64 of shape (n_touched,)
        Sorted, distinct rows of the row block with a (possibly) non-zero
        gradient.
    grad_rows : ndarray of shape (n_touched, n_cols)
        Their gradient.
    grad_rest : ndarray of shape (n_params - n_rows * n_cols,)
        The gradient of the parameters after the row block (dense).
    """

    rows: np.ndarray
    grad_rows: np.ndarray
    grad_rest: np.ndarray


class ProximalAdaGrad:
    """AdaGrad with a proximal L2 (and L1) step, lazy on the rows of a sparse block.

    The parameters are one flat vector whose first ``n_rows * n_cols``
    entries are a row-major block (the rows that minibatch gradients leave
    mostly zero) and the rest dense. Every coordinate steps as ::

        G += g ** 2;  h = epsilon + sqrt(G)
        theta = soft(theta - lr * g / h, lr * l1 / h) / (1 + lr * weight_decay / h)

    (``weight_decay = l1 = 0`` on the ``undecayed`` slice), ``g = scale *
    grad``, ``soft(z, a) = sign(z) max(|z| - a, 0)``.

    Parameters
    ----------
    learning_rate : float
        AdaGrad's step size ``lr``.
    n_rows, n_cols : int
        Shape of the row block at the start of the parameter vector (0 rows:
        no block, every step dense).
    weight_decay : float, default=0.0
        L2 coefficient, the weight of ``weight_decay / 2 * ||theta||^2``
        (the same meaning as :class:`skgpstruct.optim.Adam`'s), applied by
        the proximal step.
    l1 : float, default=0.0
        L1 coefficient, the weight of ``l1 * ||theta||_1``, applied by the
        proximal step (soft-thresholding: exact zeros).
    undecayed : (int, int) or None, default=None
        ``(lo, hi)``: a slice after the row block without decay nor L1 (a
        bias).
    epsilon : float, default=1e-8
        Added to ``sqrt(G)``. A coordinate that has never had a gradient
        (``G = 0``) has no step size and is left as it is: the proximal map
        with ``h = epsilon`` would divide it by ``1 + lr * weight_decay /
        epsilon`` (or threshold it by ``lr * l1 / epsilon``), erasing the
        weights a warm start begins from. A cold start is unaffected (such
        a coordinate is 0 either way).
    parallel : joblib.Parallel or None, default=None
        Threads (``prefer="threads"``) that share the rows of a step, in
        contiguous parts of at least a million coordinates, one per job (the
        kernels release the GIL). Every coordinate gets the same arithmetic
        whatever the split.

    Notes
    -----
    :meth:`step` with a :class:`RowSparseGradient` updates the rows it names
    (after :meth:`catch_up` of those rows, which :meth:`step` also does) and
    the dense rest; the other rows are stale until :meth:`catch_up` or
    :meth:`synchronize`. After :meth:`synchronize` the parameters equal the
    dense algorithm's (:meth:`step` with a full gradient) up to rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.optim.proximal import ProximalAdaGrad
    >>> x = np.array([1.0, -2.0])
    >>> opt = ProximalAdaGrad(0.5, n_rows=0, n_cols=0)
    >>> for _ in range(200):
    ...     _ = opt.step(x, x)  # gradient of ||x||^2 / 2
    >>> bool(np.abs(x).max() < 1e-3)
    True
    """

    fixed_blocks = False  # minibatches may be reshuffled every epoch

    def __init__(self, learning_rate, *, n_rows, n_cols, weight_decay=0.0, l1=0.0,
                 undecayed=None, epsilon=1e-8, parallel=None):
        self.learning_rate = learning_rate
        self.n_rows = int(n_rows)
        self.n_cols = int(n_cols)
        self.weight_decay = weight_decay
        self.l1 = l1
        self.undecayed = (0, 0) if undecayed is None else tuple(int(i) for i in undecayed)
        self.epsilon = epsilon
        self.parallel = parallel
        self.t = 0
        self._G = None
        self._last = np.zeros(self.n_rows, dtype=np.int64)

    def _state(self, params):
        if self._G is None:
            self._G = np.zeros(params.shape)
        return self._G

    def _args(self):
        return (float(self.learning_rate), float(self.weight_decay), float(self.l1),
                float(self.epsilon))

    def _split(self, kernel, rows, *args, grad_rows=None):
        """Run ``kernel`` on contiguous parts of ``rows`` (and of the
        row-aligned ``grad_rows``, an input or output), on the threads of
        ``parallel`` when it has several."""
        n_jobs = 1 if self.parallel is None else self.parallel.n_jobs
        n_jobs = rows.shape[0] if n_jobs is None or n_jobs < 0 else n_jobs
        n_parts = max(1, min(int(n_jobs), rows.shape[0] * self.n_cols // _SPLIT_COORDINATES))
        if n_parts == 1:
            parts = [(rows, grad_rows)]
        else:
            cuts = np.linspace(0, rows.shape[0], n_parts + 1).astype(np.int64)
            parts = [(rows[a:b], None if grad_rows is None else grad_rows[a:b])
                     for a, b in zip(cuts[:-1], cuts[1:])]

        def run(part_rows, part_grad):
            if part_grad is None:
                kernel(*args[:3], part_rows, *args[3:])
            else:
                kernel(*args[:3], part_rows, part_grad, *args[3:])

        if len(parts) == 1:
            run(*parts[0])
        else:
            from joblib import delayed

            self.parallel(delayed(run)(r, g) for r, g in parts)

    def catch_up(self, params, rows, *, gather=False):
        """Bring ``rows`` of the block up to date (the proximal maps of the
        steps they missed), in place.

        Parameters
        ----------
        params : ndarray of float64 of shape (n_params,)
            Updated in place.
        rows : array-like of int
            Rows of the block, distinct.
        gather : bool, default=False
            Also return those rows, up to date, as an array (the same pass).

        Returns
        -------
        params or rows : ndarray
            ``params``, or with ``gather`` the ``(len(rows), n_cols)`` array of
            the rows.
        """
        lr, decay, l1, eps = self._args()
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        out = np.empty((rows.shape[0], self.n_cols if gather else 0))
        self._split(_catch_up, rows, params, self._state(params), self._last, self.n_cols,
                    self.t, lr, decay, l1, eps, grad_rows=out)
        return out if gather else params

    def synchronize(self, params):
        """Bring every row up to date; return ``params``."""
        return self.catch_up(params, np.arange(self.n_rows))

    def step(self, params, grad, *, scale=1.0, block=None):
        """One step in place; return ``params``.

        Parameters
        ----------
        params : ndarray of float64 of shape (n_params,)
            Updated in place.
        grad : ndarray of shape (n_params,) or RowSparseGradient
            The gradient: dense (every row steps) or row-sparse (only its
            rows and the dense rest step).
        scale : float, default=1.0
            Factor of ``grad``.
        block : int, default=None
            Ignored (the minibatch index of SAGA's interface).

        Returns
        -------
        params : ndarray
        """
        lr, decay, l1, eps = self._args()
        G = self._state(params)
        n_block = self.n_rows * self.n_cols
        lo, hi = self.undecayed
        if isinstance(grad, RowSparseGradient):
            rows = np.ascontiguousarray(grad.rows, dtype=np.int64)
            rest = np.ascontiguousarray(grad.grad_rest, dtype=np.float64)
            grad_rows = np.ascontiguousarray(grad.grad_rows, dtype=np.float64)
        else:
            rows = np.arange(self.n_rows)
            grad = np.asarray(grad, dtype=np.float64)
            grad_rows = grad[:n_block].reshape(self.n_rows, self.n_cols)
            rest = np.ascontiguousarray(grad[n_block:])
        if rest.shape[0] != params.shape[0] - n_block:
            raise ValueError(
                f"the dense part of the gradient has {rest.shape[0]} entries; "
                f"expected {params.shape[0] - n_block}."
            )
        self.catch_up(params, rows)
        self.t += 1
        self._split(_step_rows, rows, params, G, self._last, self.n_cols, self.t,
                    float(scale), lr, decay, l1, eps, grad_rows=grad_rows)
        _step_dense(params, G, rest, n_block, float(scale), lr, decay, l1, lo, hi, eps)
        return params
