"""The ELBO of GPStructTagger: the one objective that ``fit`` minimises.

The model (Galliani et al., AISTATS 2017) in the
whitened parametrisation: ``V`` labels, each with a GP over token features,
inducing inputs ``Z`` shared by the labels, a mixture posterior ``q(v)``
over whitened inducing values (:mod:`skgpstruct.gp.variational`) and a
diagonal Gaussian ``q(f_bin)`` over the transitions:

``ELBO = scale * sum_n ELL_n - KL(q(v) || p(v)) - KL(q(f_bin) || p(f_bin))``

with the expected log-likelihoods ``ELL_n`` of :mod:`skgpstruct.gp.ell`
(Monte Carlo, ``n_samples`` per sequence and component, from one seed per
sequence) and the KL terms of :mod:`skgpstruct.gp.kl`. With a minibatch,
``scale = n_sequences / batch_size`` makes it an unbiased estimate of the
full ELBO. :class:`ELBOObjective` evaluates its negative and gradient on one
flat vector (variational parameters and, optionally, kernel
hyperparameters), for L-BFGS-B and the stochastic optimisers alike; the
finite-difference tests check this very function.
"""


import numpy as np
from sklearn.gaussian_process.kernels import ConstantKernel, Product

from .._utils.parallel import chunk_blas_limits, chunked_sum
from .ell import _check_labels, _check_likelihood, _ell
from .kl import _mixture_kl, transition_kl
from .sampling import draw_normals
from .terms import (
    _check_offsets,
    _check_X,
    _rows,
    compute_gp_terms,
    inducing_cholesky,
    kernel_matrix_grads_to_theta,
    split_kernel_scale,
)

__all__ = ["ELBOObjective"]

#: Sequences per unit of parallel work: fixed, so that sums (and hence the
#: fitted model) do not depend on n_jobs. Large, because the ELBO's cost is
#: dominated by stacked (n_tokens, M) x (M, M) products that BLAS runs best
#: in big blocks (16 sequences per chunk made a basenp fit 2.5x slower).
CHUNK_SEQUENCES = 256
_HYPERPARAMETERS = ("none", "all", "scale")
_VARIATIONAL = ("q_mu", "q_sqrt", "weights")


class ELBOObjective:
    """Negative ELBO and its gradient on one flat parameter vector.

    Parameters
    ----------
    likelihood : Likelihood
        Structured likelihood object (:mod:`skgpstruct.likelihoods`).
    kernel : sklearn Kernel
        Kernel of the GPs. With ``hyperparameters="scale"`` it must be
        ``ConstantKernel(c) * base`` (:func:`~skgpstruct.gp.terms.split_kernel_scale`):
        the scale ``c`` is learned, ``base`` stays fixed.
    Z : {ndarray, sparse matrix} of shape (M, n_features)
        Inducing inputs.
    X_flat : {ndarray, sparse matrix} of shape (n_tokens, n_features)
        Tokens of all training sequences, stacked.
    lengths : array-like of int of shape (n_sequences,)
        Sequence lengths.
    y_flat : array-like of int of shape (n_tokens,)
        Encoded labels in ``[0, n_classes)``.
    layout : VariationalLayout
        Layout of the flat vector; its ``n_hyperparameters`` must be 0
        (``"none"``), ``kernel.n_dims`` (``"all"``) or 1 (``"scale"``).
    hyperparameters : {"none", "all", "scale"}, default="none"
        What the hyperparameter slice of the vector holds: nothing,
        ``kernel.theta`` (the kernel quantities are recomputed at every
        evaluation), or ``log(c)`` (the kernel quantities of ``base`` are
        computed once and scaled: ``c`` multiplies the kernel and the
        jitter).
    jitter : float, default=1e-4
        Added to the diagonals of the kernel matrices.
    transition_prior_var : float, default=1.0
        Prior variance of the transition potentials.
    n_samples : int, default=100
        Samples per sequence and mixture component.
    gradient : {"pathwise", "score"}, default="pathwise"
        Gradient estimator of the expected log-likelihood
        (:mod:`skgpstruct.gp.ell`).
    terms : GPTerms, default=None
        Precomputed :func:`~skgpstruct.gp.terms.compute_gp_terms` of all
        sequences for the fixed kernel (``"none"``) or ``base``
        (``"scale"``); None computes them. Unused with ``"all"``.

    Attributes
    ----------
    terms : GPTerms or None
        The fixed kernel quantities (None with ``"all"``).

    Examples
    --------
    >>> import numpy as np
    >>> from skgpstruct.gp import (ELBOObjective, LinearKernel, VariationalLayout,
    ...                            init_variational_params, inducing_cholesky)
    >>> from skgpstruct.likelihoods import CRFLikelihood
    >>> X, Z = np.eye(3), np.eye(3)
    >>> params = init_variational_params(
    ...     np.eye(3)[:, :2], kzz_cholesky=inducing_cholesky(LinearKernel(), Z))
    >>> layout = VariationalLayout(1, 2, 3, n_hyperparameters=1)
    >>> f = ELBOObjective(CRFLikelihood(), LinearKernel(), Z, X, [1, 2], [0, 1, 0],
    ...                   layout, hyperparameters="all", n_samples=4)
    >>> x = layout.pack(params, LinearKernel().theta)
    >>> value, grad = f(x, np.arange(2), seeds=np.array([0, 1]))
    >>> grad.shape == x.shape
    True
    """

    def __init__(self, likelihood, kernel, Z, X_flat, lengths, y_flat, layout, *,
                 hyperparameters="none", jitter=1e-4, transition_prior_var=1.0,
                 n_samples=100, gradient="pathwise", terms=None):
        if hyperparameters not in _HYPERPARAMETERS:
            raise ValueError(f"hyperparameters must be one of {_HYPERPARAMETERS}, "
                             f"got {hyperparameters!r}.")
        _check_likelihood(likelihood, gradient, True,
                          0.0 if hyperparameters == "scale" else None, False)
        self.likelihood, self.kernel, self.layout = likelihood, kernel, layout
        self.hyperparameters, self.gradient = hyperparameters, gradient
        self.jitter, self.n_samples = jitter, int(n_samples)
        self.transition_prior_var = transition_prior_var
        self.Z, self.X_flat = _check_X(Z, "Z"), _check_X(X_flat)
        self.offsets = _check_offsets(lengths, self.X_flat.shape[0])
        self.lengths = np.diff(self.offsets)
        self.y_flat = _check_labels(y_flat, self.X_flat.shape[0], layout.n_classes)
        self._base = kernel
        if hyperparameters == "scale":
            base, factor = split_kernel_scale(kernel)
            if not (isinstance(kernel, Product) and factor > 0):
                raise ValueError("hyperparameters='scale' needs a kernel "
                                 "ConstantKernel(c) * base.")
            if np.asarray(kernel.k1.bounds).size == 0:
                # its bounds would be empty, the box one entry short
                raise ValueError("hyperparameters='scale' learns c of "
                                 "ConstantKernel(c) * base, whose "
                                 "constant_value_bounds are 'fixed'; give it bounds.")
            self._base = base
        n_hyper = {"none": 0, "all": kernel.n_dims, "scale": 1}[hyperparameters]
        if layout.n_hyperparameters != n_hyper:
            raise ValueError(f"layout has {layout.n_hyperparameters} hyperparameters, "
                             f"hyperparameters={hyperparameters!r} needs {n_hyper}.")
        if hyperparameters != "all" and terms is None:
            terms = compute_gp_terms(self._base, self.X_flat, self.lengths, self.Z,
                                     jitter=jitter)
        self.terms = terms if hyperparameters != "all" else None

    def initial_hyperparameters(self):
        """The starting hyperparameter slice of the flat vector.

        Returns
        -------
        theta : ndarray of float64 of shape (n_hyperparameters,)
            ``kernel.theta`` (``"all"``), ``[log(c)]`` (``"scale"``) or
            empty (``"none"``).
        """
        if self.hyperparameters == "all":
            return np.asarray(self.kernel.theta, dtype=np.float64)
        if self.hyperparameters == "scale":
            return np.array([np.log(split_kernel_scale(self.kernel)[1])])
        return np.zeros(0)

    def hyperparameter_bounds(self):
        """The box of the hyperparameters.

        Returns
        -------
        bounds : ndarray of float64 of shape (n_hyperparameters, 2) or None
            ``(low, high)`` of each hyperparameter, in log space as
            ``kernel.bounds`` (sklearn's convention); None with ``"none"``.
        """
        if self.hyperparameters == "none":
            return None
        kernel = self.kernel if self.hyperparameters == "all" else self.kernel.k1
        return np.asarray(kernel.bounds, dtype=np.float64).reshape(-1, 2)

    def bounds(self):
        """L-BFGS-B box of the flat vector.

        Returns
        -------
        box : list of tuple
            ``(low, high)`` per entry: the variational parameters within
            :meth:`VariationalLayout.box` (``None`` for a free side), the
            hyperparameters within :meth:`hyperparameter_bounds`.
        """
        low, high = self.layout.box(self.transition_prior_var)
        box = [(None if np.isinf(lo) else float(lo), None if np.isinf(hi) else float(hi))
               for lo, hi in zip(low, high)]
        hyper = self.hyperparameter_bounds()
        if hyper is not None:
            start = self.layout.slices["hyperparameters"].start
            box[start:] = [tuple(b) for b in hyper]
        return box

    def unpack(self, x):
        """The model at a flat vector.

        Parameters
        ----------
        x : ndarray of float64 of shape (n_params,)
            The flat vector (variational parameters, then hyperparameters).

        Returns
        -------
        params : VariationalParams
            The variational parameters.
        kernel : sklearn Kernel
            The kernel with the hyperparameters of ``x`` (``kernel`` itself
            with ``"none"``).
        """
        params = self.layout.unpack(x)
        h = np.asarray(x, dtype=np.float64)[self.layout.slices["hyperparameters"]]
        if self.hyperparameters == "all":
            return params, self.kernel.clone_with_theta(h)
        if self.hyperparameters == "scale":
            bounds = self.kernel.k1.constant_value_bounds
            scale = ConstantKernel(float(np.exp(h[0])), constant_value_bounds=bounds)
            return params, Product(scale, self._base)
        return params, self.kernel

    def __call__(self, x, seq_idx, seeds, scale=1.0, parallel=None):
        """Negative ELBO estimate and its gradient at ``x``.

        Parameters
        ----------
        x : ndarray of shape (layout.size,)
            The flat vector.
        seq_idx : ndarray of int of shape (n_selected,)
            Sequences whose expected log-likelihoods are summed.
        seeds : ndarray of int of shape (n_selected,)
            One seed per selected sequence (:func:`draw_normals`).
        scale : float, default=1.0
            Multiplier of the summed expected log-likelihood (e.g.
            ``n_sequences / batch_size`` for a minibatch).
        parallel : joblib.Parallel, default=None
            Runs chunks of ``CHUNK_SEQUENCES`` sequences on threads; the
            sum is taken in chunk order and BLAS runs one thread whenever
            there are several chunks, whether ``parallel`` is given or not
            (:func:`~skgpstruct._utils.parallel.chunk_blas_limits`), so the result
            does not depend on ``n_jobs``.

        Returns
        -------
        neg_elbo : float
            ``-(scale * sum ELL - KL terms)``.
        neg_grad : ndarray of shape (layout.size,)
            Its gradient w.r.t. ``x``.
        """
        layout = self.layout
        params = layout.unpack(x)
        ell, g_ell = self._ell_sum(x, params, seq_idx, seeds, parallel)
        kl_u, g_u = _mixture_kl(params.q_mu, params.q_sqrt, params.weights,
                                return_grad=True)
        kl_b, g_b = transition_kl(params.m_bin, params.s_bin,
                                  self.transition_prior_var, return_grad=True)
        value = scale * ell - kl_u - kl_b
        grad = {key: scale * g_ell[key] - g_u[key] for key in _VARIATIONAL}
        for key in ("m_bin", "s_bin"):
            grad[key] = scale * g_ell[key] - g_b[key]
        if self.hyperparameters == "all":
            grad["hyperparameters"] = scale * g_ell["theta"]
        elif self.hyperparameters == "scale":
            grad["hyperparameters"] = scale * g_ell["log_scale"]
        flat = layout.pack_gradient(params, grad, check=False)
        return -value, -flat

    def _ell_sum(self, x, params, seq_idx, seeds, parallel):
        """Summed expected log-likelihood of ``seq_idx`` and its gradients
        (``"theta"`` or ``"log_scale"`` with the hyperparameters)."""
        h = x[self.layout.slices["hyperparameters"]]
        kernel, Lzz, log_scale = self._base, None, None
        if self.hyperparameters == "all":
            kernel = self.kernel.clone_with_theta(h)
            Lzz = inducing_cholesky(kernel, self.Z, self.jitter)
        elif self.hyperparameters == "scale":
            log_scale = float(h[0])
        learn_theta = self.hyperparameters == "all"
        K, V = self.layout.n_components, self.layout.n_classes

        def work(chunk, chunk_seeds):
            rows = _rows(self.offsets, chunk)
            lengths = self.lengths[chunk]
            X = self.X_flat if rows is None else self.X_flat[rows]
            if self.terms is None:
                terms = compute_gp_terms(kernel, X, lengths, self.Z,
                                         jitter=self.jitter, Lzz=Lzz)
            else:
                terms = self.terms.subset(chunk)
            y = self.y_flat if rows is None else self.y_flat[rows]
            eps, eps_bin = draw_normals(lengths, K, V, self.n_samples, chunk_seeds)
            values, grad = _ell(self.likelihood, terms, y, params, eps, eps_bin,
                                gradient=self.gradient, hyperparameters=learn_theta,
                                log_scale=log_scale)
            if learn_theta:
                grad["theta"] = kernel_matrix_grads_to_theta(
                    kernel, X, lengths, self.Z, grad)
                for key in ("Knz", "Knn", "Kzz"):
                    grad.pop(key)
            return float(np.sum(values)), grad

        with chunk_blas_limits(len(seq_idx), CHUNK_SEQUENCES):
            return chunked_sum(work, np.asarray(seq_idx), np.asarray(seeds),
                               chunk_size=CHUNK_SEQUENCES, parallel=parallel)
