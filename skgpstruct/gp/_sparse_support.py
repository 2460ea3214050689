"""Which kernels take scipy.sparse token features.

The kernels of :mod:`skgpstruct.gp.kernels` do; most of scikit-learn's own
(``RBF``, ``Matern``, ``DotProduct``, ...) fail on them with messages that do
not say why ("Unsupported dtype object"). :func:`_check_sparse_support` says
why, before they are evaluated.
"""

import scipy.sparse as sp

__all__ = []


#: scikit-learn kernels that evaluate on scipy.sparse features (they read
#: only the number of rows), and its operators, which do when their parts do.
_SKLEARN_SPARSE_SAFE = ("ConstantKernel", "WhiteKernel")
_SKLEARN_OPERATORS = ("Sum", "Product", "Exponentiation")


def _dense_only_part(kernel):
    """The first part of ``kernel`` that is one of scikit-learn's own kernels
    needing dense features (``RBF``, ``Matern``, ``DotProduct``, ...), or
    None. This package's kernels, ``ConstantKernel``, ``WhiteKernel`` and
    kernels defined elsewhere (which may well take sparse input) are not."""
    cls = type(kernel)
    if not cls.__module__.startswith("sklearn.gaussian_process"):
        return None
    if cls.__name__ in _SKLEARN_OPERATORS:
        parts = [kernel.kernel] if cls.__name__ == "Exponentiation" else [kernel.k1, kernel.k2]
        for part in parts:
            found = _dense_only_part(part)
            if found is not None:
                return found
        return None
    return None if cls.__name__ in _SKLEARN_SPARSE_SAFE else kernel


def _check_sparse_support(kernel, X):
    """Raise when ``X`` is sparse and ``kernel`` has a part, one of
    scikit-learn's own kernels, that needs dense features (it would fail in
    scikit-learn with an unrelated message: "Unsupported dtype object", or a
    column-count mismatch).

    Parameters
    ----------
    kernel : Kernel
    X : ndarray or sparse matrix
        Token features, stacked.

    Raises
    ------
    ValueError
        Naming the kernel and what to do instead.
    """
    if not sp.issparse(X):
        return
    part = _dense_only_part(kernel)
    if part is not None:
        raise ValueError(
            f"The kernel {kernel} includes scikit-learn's {type(part).__name__}, which "
            "needs dense features, and the sequences are (some of them) scipy.sparse "
            "matrices: pass dense arrays (x.toarray() for each sequence), or use "
            "skgpstruct.gp.kernels.LinearKernel / RBFKernel, which take sparse input."
        )
