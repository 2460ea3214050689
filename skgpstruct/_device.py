"""Choice of the device the dynamic programmes run on.

The estimators take ``device`` in ``{"cpu", "cuda", "auto"}`` and resolve it
once in ``fit`` with :func:`resolve_device`. numba.cuda is imported only
here, inside the function, so that ``import skgpstruct`` never loads it.
"""

import importlib

__all__ = ["resolve_device", "cuda_status"]

_HOW_TO = (
    'install numba\'s CUDA target with `pip install "skgpstruct[cuda]"` and an '
    "NVIDIA driver for the GPU; or, to run the CUDA kernels in numba's "
    "simulator (slow, for testing), set the environment variable "
    "NUMBA_ENABLE_CUDASIM=1 before numba is imported."
)


def cuda_status():
    """Whether numba.cuda can run kernels here, and why not.

    Returns
    -------
    available : bool
        ``numba.cuda.is_available()``; False if numba.cuda cannot be
        imported or the check raises.
    reason : str
        Empty when available, else what went wrong.

    Examples
    --------
    >>> from skgpstruct._device import cuda_status
    >>> available, reason = cuda_status()
    >>> isinstance(available, bool)
    True
    """
    try:
        cuda = importlib.import_module("numba.cuda")
        available = bool(cuda.is_available())
    except Exception as exc:  # ImportError, driver errors, ...
        return False, f"numba.cuda could not be used ({type(exc).__name__}: {exc})"
    if not available:
        return False, "numba.cuda.is_available() is False (no usable GPU or driver)"
    return True, ""


def resolve_device(device):
    """Resolve a ``device`` parameter to ``"cpu"`` or ``"cuda"``.

    Parameters
    ----------
    device : {"cpu", "cuda", "auto"}
        ``"auto"`` is ``"cuda"`` when ``numba.cuda.is_available()`` and
        ``"cpu"`` otherwise.

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
    >>> from skgpstruct._device import resolve_device
    >>> resolve_device("cpu")
    'cpu'
    >>> resolve_device("auto") in ("cpu", "cuda")
    True
    """
    if device == "cpu":
        return "cpu"
    if device not in ("cuda", "auto"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'auto', got {device!r}.")
    available, reason = cuda_status()
    if available:
        return "cuda"
    if device == "auto":
        return "cpu"
    raise RuntimeError(f'device="cuda" needs a usable NVIDIA GPU: {reason}. To fix it, {_HOW_TO}')
