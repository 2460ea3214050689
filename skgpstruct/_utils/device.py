"""Choice of the device the dynamic programmes run on.

The estimators take ``device`` in ``{"cpu", "cuda", "auto"}`` and resolve it
once in ``fit`` with :func:`resolve_device`. numba.cuda is imported only
here, inside the function, so that ``import skgpstruct`` never loads it.
"""

import importlib
import warnings

__all__ = ["resolve_device", "cuda_status"]

_HOW_TO = (
    'install numba\'s CUDA target with `pip install "skgpstruct[cuda]"` and an '
    "NVIDIA driver for the GPU; or, to run the CUDA kernels in numba's "
    "simulator (slow, for testing), set the environment variable "
    "NUMBA_ENABLE_CUDASIM=1 before numba is imported."
)


def _cuda_check():
    """``(available, gpu_seen, reason)``: :func:`cuda_status` plus whether
    numba.cuda saw a GPU whose compiler target then failed to load."""
    try:
        cuda = importlib.import_module("numba.cuda")
        available = bool(cuda.is_available())
    except Exception as exc:  # ImportError, driver errors, ...
        return False, False, f"numba.cuda could not be used ({type(exc).__name__}: {exc})"
    if not available:
        return False, False, "numba.cuda.is_available() is False (no usable GPU or driver)"
    config = importlib.import_module("numba.core.config")
    if not getattr(config, "ENABLE_CUDASIM", False):
        # The CUDA target's lowering is imported at the first compilation,
        # not with numba.cuda: a numba-cuda built for an older NumPy fails
        # only there (numba-cuda 0.30 with NumPy 2.5: no np.row_stack).
        try:
            importlib.import_module("numba.cuda.cudaimpl")
        except Exception as exc:
            return False, True, (
                "numba.cuda sees a GPU but cannot load its compiler target "
                f"({type(exc).__name__}: {exc}); numba-cuda and NumPy are "
                "probably of versions that do not go together: upgrade "
                "numba-cuda, or install a NumPy release it supports"
            )
    return True, True, ""


def cuda_status():
    """Whether numba.cuda can run kernels here, and why not.

    numba.cuda must import, ``numba.cuda.is_available()`` must be True and,
    on a real GPU (not the simulator), the CUDA compiler target must load
    (``numba.cuda.cudaimpl``, which numba imports only at the first kernel
    compilation).

    Returns
    -------
    available : bool
        False if numba.cuda cannot be imported, its check raises or is
        False, or its compiler target cannot be loaded.
    reason : str
        Empty when available, else what went wrong.

    Examples
    --------
    >>> from skgpstruct._utils.device import cuda_status
    >>> available, reason = cuda_status()
    >>> isinstance(available, bool)
    True
    """
    available, _, reason = _cuda_check()
    return available, reason


def resolve_device(device):
    """Resolve a ``device`` parameter to ``"cpu"`` or ``"cuda"``.

    Parameters
    ----------
    device : {"cpu", "cuda", "auto"}
        ``"auto"`` is ``"cuda"`` when :func:`cuda_status` says numba.cuda
        can run kernels and ``"cpu"`` otherwise (with a ``RuntimeWarning``
        when numba.cuda sees a GPU that it cannot compile for).

    Returns
    -------
    device : {"cpu", "cuda"}

    Raises
    ------
    RuntimeError
        For ``"cuda"`` without a usable GPU; the message says how to get one
        working.
    ValueError
        For any other value.

    Examples
    --------
    >>> from skgpstruct._utils.device import resolve_device
    >>> resolve_device("cpu")
    'cpu'
    >>> resolve_device("auto") in ("cpu", "cuda")
    True
    """
    if device == "cpu":
        return "cpu"
    if device not in ("cuda", "auto"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'auto', got {device!r}.")
    available, gpu_seen, reason = _cuda_check()
    if available:
        return "cuda"
    if device == "auto":
        if gpu_seen:  # a GPU the user may expect to be used
            warnings.warn(f'device="auto" runs on the CPU: {reason}.', RuntimeWarning,
                          stacklevel=3)
        return "cpu"
    raise RuntimeError(f'device="cuda" needs a usable NVIDIA GPU: {reason}. To fix it, {_HOW_TO}')
