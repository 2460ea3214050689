"""The package logger and what ``fit`` shows when ``verbose``.

All the output of a fit goes through the logger ``"skgpstruct"`` (a
:class:`logging.NullHandler` is attached to it here, as libraries should),
and nothing at all is logged when ``verbose=0``. With ``verbose >= 1`` a fit
logs at INFO its start (sequences, tokens, labels, features, optimiser), a
note on numba's compilation the first time in a process, the optimiser's
outcome (converged, ``max_iter`` reached or interrupted, with the final
objective) and its time; the objective of every iteration / epoch is logged
at DEBUG with ``verbose=1`` and at INFO with ``verbose >= 2``. A tqdm bar
over the iterations / epochs is drawn on stderr for every optimiser when
``verbose`` and stderr is a terminal (or in a Jupyter notebook).

How the records reach the screen (:func:`fit_logging`, for the duration of
a verbose fit only):

- if the ``"skgpstruct"`` logger has no level of its own (the usual case),
  it is set to INFO, so that the INFO records are made whatever the root
  logger's level (WARNING by default);
- if no handler other than a NullHandler is found from ``"skgpstruct"`` up
  to the root (the user configured no logging), a handler that writes
  ``"%(message)s"`` lines to ``sys.stderr`` (through ``tqdm.write``, so that
  a bar stays intact) is attached to the ``"skgpstruct"`` logger;
- otherwise the records go to the user's handlers, with the user's format
  and levels (so ``logging.basicConfig(level="DEBUG")`` also shows the
  iterations of a ``verbose=1`` fit).

Both are undone when the (last concurrent) verbose fit ends. Python's
``logging.lastResort`` cannot do this: it is used only when no handler at
all is found, and the package's NullHandler counts as one; it also lets
only WARNING and above through.
"""

import logging
import sys
import threading
import time
from contextlib import contextmanager

__all__ = ["fit_logging", "iteration_level", "logger", "progress_bar"]

logger = logging.getLogger("skgpstruct")
logger.addHandler(logging.NullHandler())

_NUMBA_NOTE = (
    "skgpstruct: the first fit in a process compiles its numba kernels, which "
    "can take tens of seconds; they are cached on disk (njit(cache=True): "
    "__pycache__, or NUMBA_CACHE_DIR), so later processes load them from the "
    "cache and later fits in this process reuse them."
)


def iteration_level(verbose):
    """Level of the per-iteration records: DEBUG for ``verbose=1``, INFO above."""
    return logging.INFO if verbose >= 2 else logging.DEBUG


def _tqdm():
    from tqdm.auto import tqdm

    return tqdm


class _StderrHandler(logging.Handler):
    """Writes records to the current ``sys.stderr`` with ``tqdm.write``
    (which clears and redraws a bar on the same stream)."""

    def emit(self, record):
        try:
            _tqdm().write(self.format(record), file=sys.stderr)
        except Exception:  # pragma: no cover - logging's own convention
            self.handleError(record)


_handler = _StderrHandler(logging.INFO)
_handler.setFormatter(logging.Formatter("%(message)s"))

_lock = threading.Lock()
_users = 0  # verbose fits running (threads), guarded by _lock
_undo = {}  # what the first of them changed on the logger
_state = {"first_fit": True}
_local = threading.local()


def _user_has_handler():
    """Whether a handler other than a NullHandler (and ours) would receive
    the package's records: one on ``"skgpstruct"`` or, through
    propagation, on an ancestor (the root's, after ``basicConfig``)."""
    current = logger
    while current is not None:
        if any(h is not _handler and not isinstance(h, logging.NullHandler)
               for h in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def _acquire():
    global _users
    with _lock:
        if _users == 0:
            _undo.clear()
            if logger.level == logging.NOTSET:
                logger.setLevel(logging.INFO)
                _undo["level"] = logging.NOTSET
            if not _user_has_handler():
                logger.addHandler(_handler)
                _undo["handler"] = True
        _users += 1


def _release():
    global _users
    with _lock:
        _users -= 1
        if _users == 0:
            if _undo.pop("handler", False):
                logger.removeHandler(_handler)
            if "level" in _undo:
                logger.setLevel(_undo.pop("level"))


def first_fit():
    """True the first time it is called in the process, False after."""
    with _lock:
        first, _state["first_fit"] = _state["first_fit"], False
    return first


class FitLog:
    """What one fit logs (see :func:`fit_logging`).

    Attributes
    ----------
    name : str
        The estimator's class name.
    verbose : int
    monitors : list of ConvergenceMonitor
        Those made during the fit; their bars are closed when it ends.
    """

    def __init__(self, name, verbose, start):
        self.name = name
        self.verbose = verbose
        self.start = start
        self.monitors = []

    def info(self, msg, *args):
        if self.verbose:
            logger.info(msg, *args)

    def begin(self, n_sequences, n_tokens, n_classes, n_features, optimizer):
        """Log the start of the fit (and, once per process, the numba note)."""
        first = first_fit()
        if not self.verbose:
            return
        self.info("%s: fitting %d sequences (%d tokens, %d labels, %d features) "
                  "with optimizer=%r", self.name, n_sequences, n_tokens, n_classes,
                  n_features, optimizer)
        if first:
            logger.info(_NUMBA_NOTE)

    def end(self):
        """Log the fit's time."""
        self.info("%s: fit done in %.3g s", self.name, time.perf_counter() - self.start)


def current_fit():
    """The :class:`FitLog` of the fit running in this thread, or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextmanager
def fit_logging(name, verbose, start=None):
    """Context of one ``fit``: makes the records of a verbose fit visible
    (see the module's docstring) and closes the bars of its monitors.

    Parameters
    ----------
    name : str
        The estimator's class name.
    verbose : int or bool
        The estimator's ``verbose`` (0 / False: nothing is logged).
    start : float, default=None
        ``time.perf_counter()`` at the start of ``fit`` (default: now).

    Yields
    ------
    log : FitLog
    """
    verbose = int(verbose or 0)
    log = FitLog(name, verbose, time.perf_counter() if start is None else start)
    if not hasattr(_local, "stack"):
        _local.stack = []
    _local.stack.append(log)
    if verbose:
        _acquire()
    try:
        yield log
    finally:
        _local.stack.pop()
        for monitor in log.monitors:
            monitor.close()
        if verbose:
            _release()


def _bar_visible():
    """Whether a bar would be seen: stderr is a terminal, or tqdm.auto
    picked its notebook widget (whose stream is never a terminal)."""
    if any(c.__module__ == "tqdm.notebook" for c in _tqdm().__mro__):
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def progress_bar(total, desc, unit):
    """A tqdm bar on stderr, or None when it would not be seen (stderr not
    a terminal: a log file, a pipe, pytest's capture)."""
    if not _bar_visible():
        return None
    # disable=False, not None: visibility is decided above (tqdm's None would
    # hide the notebook widget, whose stream is not a terminal)
    return _tqdm()(total=total, desc=desc, unit=unit, file=sys.stderr, disable=False,
                   dynamic_ncols=True)
