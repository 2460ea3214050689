"""What a fit logs and shows (``verbose``): the ``"skgpstruct"`` logger,
the tqdm bar on a terminal, the once-per-process numba note and
``loss_curve_``, for both estimators and both kinds of optimiser."""

import contextlib
import io
import logging
import re
import sys

import numpy as np
import pytest

from skgpstruct import GPStructTagger, RandomizedCRFTagger
from skgpstruct._tagging import base as _base
from skgpstruct._utils import fit_log as _logging
from skgpstruct._tagging.base import ConvergenceMonitor
from skgpstruct.datasets import make_chain_data

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

MAX_ITER = 3
GP = dict(n_inducing=8, n_samples=2, n_predict_samples=4)
# (estimator, optimiser kind): constructor arguments, unit, label, sign
CASES = {
    "crf-lbfgs": (RandomizedCRFTagger, dict(optimizer="lbfgs"), "iter", "loss", 1.0),
    "crf-adam": (RandomizedCRFTagger, dict(optimizer="adam", batch_size=10), "epoch",
                 "loss", 1.0),
    "gp-lbfgs": (GPStructTagger, dict(optimizer="lbfgs", **GP), "iter", "ELBO", -1.0),
    "gp-adam": (GPStructTagger, dict(optimizer="adam", batch_size=10, **GP), "epoch",
                "ELBO", -1.0),
}
_ITER = re.compile(r"^(iter|epoch) (\d+): (ELBO|loss) (\S+)$")


@pytest.fixture(scope="module")
def data():
    return make_chain_data(n_sequences=20, n_classes=3, n_features=5, random_state=0)[:2]


def _make(name, verbose, **kw):
    cls, params, *_ = CASES[name]
    return cls(**params, max_iter=MAX_ITER, tol=0.0, verbose=verbose, random_state=0, **kw)


def _records(caplog):
    return [r for r in caplog.records if r.name == "skgpstruct"]


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True


@contextlib.contextmanager
def no_user_logging():
    """No handler on the root logger: pytest's own (added for the test's
    call) removed, and put back before pytest takes them off."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()
    try:
        yield
    finally:
        root.handlers[:] = saved


@pytest.fixture
def package_logger_untouched():
    """The package logger has its NullHandler only and no level, after."""
    yield
    logger = logging.getLogger("skgpstruct")
    assert logger.level == logging.NOTSET
    assert all(isinstance(h, logging.NullHandler) for h in logger.handlers)


# ------------------------------------------------------------- verbose=0
@pytest.mark.parametrize("name", sorted(CASES))
def test_verbose_0_is_silent(name, data, caplog, capfd):
    caplog.set_level(logging.DEBUG, logger="skgpstruct")
    _make(name, 0).fit(*data)
    assert _records(caplog) == []
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_verbose_0_is_silent_on_a_terminal(data, monkeypatch):
    tty = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    with no_user_logging():
        _make("crf-lbfgs", 0).fit(*data)
    assert tty.getvalue() == ""


# ------------------------------------------------------ levels, loss_curve_
@pytest.mark.parametrize("verbose", [1, 2, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_records_and_levels(package_logger_untouched, name, verbose, data, caplog, capsys):
    caplog.set_level(logging.DEBUG, logger="skgpstruct")
    _, _, unit, label, sign = CASES[name]
    est = _make(name, verbose).fit(*data)
    assert capsys.readouterr().out == ""  # nothing printed
    records = _records(caplog)
    messages = [r.getMessage() for r in records]
    n_tokens = sum(len(s) for s in data[1])
    assert messages[0] == (f"{type(est).__name__}: fitting 20 sequences ({n_tokens} "
                           f"tokens, 3 labels, 5 features) with optimizer="
                           f"{est.optimizer!r}")
    assert re.fullmatch(rf"{type(est).__name__}: fit done in \S+ s", messages[-1])
    iters = [(r, _ITER.match(m)) for r, m in zip(records, messages) if _ITER.match(m)]
    level = logging.INFO if verbose >= 2 else logging.DEBUG
    assert [r.levelno for r, _ in iters] == [level] * est.n_iter_
    assert [m.group(1) for _, m in iters] == [unit] * est.n_iter_
    assert [int(m.group(2)) for _, m in iters] == list(range(1, est.n_iter_ + 1))
    assert {m.group(3) for _, m in iters} == {label}
    np.testing.assert_allclose([float(m.group(4)) for _, m in iters],
                               sign * np.array(est.loss_curve_), rtol=1e-5)
    others = [r for r in records if not _ITER.match(r.getMessage())]
    assert {r.levelno for r in others} == {logging.INFO}
    optimizer = "L-BFGS" if unit == "iter" else "Adam"
    assert any(m.startswith(f"{optimizer} reached max_iter={MAX_ITER}")
               or m.startswith(f"{optimizer} converged after") for m in messages)


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_curve(name, data):
    est = _make(name, 0).fit(*data)
    assert isinstance(est.loss_curve_, list)
    assert len(est.loss_curve_) == est.n_iter_ >= 1
    assert all(isinstance(v, float) for v in est.loss_curve_)
    if isinstance(est, GPStructTagger):
        np.testing.assert_array_equal(est.loss_curve_, [-v for v in est.elbo_history_])
    else:
        np.testing.assert_array_equal(est.loss_curve_, est.loss_history_)
        assert est.loss_curve_ is not est.loss_history_  # not an alias


@pytest.mark.parametrize("cls", [GPStructTagger, RandomizedCRFTagger])
def test_loss_curve_before_fit_says_not_fitted(cls):
    """Before fit, ``loss_curve_`` is absent (``hasattr`` is False, as for
    every fitted attribute) with a NotFittedError that names it (it used to
    be an AttributeError naming ``elbo_history_`` / ``loss_history_``)."""
    from sklearn.exceptions import NotFittedError

    est = cls()
    assert not hasattr(est, "loss_curve_")
    with pytest.raises(NotFittedError, match="not fitted yet: loss_curve_"):
        est.loss_curve_


# ------------------------------------------------------- where records go
@pytest.mark.parametrize("verbose", [1, 2])
def test_records_on_stderr_without_user_logging(package_logger_untouched, verbose, data,
                                                capsys):
    with no_user_logging():
        est = _make("crf-lbfgs", verbose).fit(*data)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith("RandomizedCRFTagger: fitting 20 sequences")
    assert re.fullmatch(r"RandomizedCRFTagger: fit done in \S+ s", lines[-1])
    iters = [line for line in lines if _ITER.match(line)]
    assert len(iters) == (est.n_iter_ if verbose >= 2 else 0)
    assert "%|" not in err  # stderr is not a terminal: no bar


def test_user_handlers_get_the_records_not_stderr(package_logger_untouched, data, caplog,
                                                  capsys):
    """With a handler configured (caplog's, on the root) and the root at
    WARNING, a verbose fit's INFO records reach that handler and nothing
    is written to stderr."""
    assert logging.getLogger().getEffectiveLevel() >= logging.WARNING
    _make("gp-lbfgs", 1).fit(*data)
    assert capsys.readouterr().err == ""
    messages = [r.getMessage() for r in _records(caplog)]
    assert messages[0].startswith("GPStructTagger: fitting")
    assert not any(_ITER.match(m) for m in messages)  # DEBUG at verbose=1


def test_explicit_logger_level_is_respected(data, caplog):
    caplog.set_level(logging.WARNING, logger="skgpstruct")
    _make("crf-lbfgs", 2).fit(*data)
    assert _records(caplog) == []
    assert logging.getLogger("skgpstruct").level == logging.WARNING


def test_nested_and_failing_fits_restore_the_logger(package_logger_untouched, capsys):
    logger = logging.getLogger("skgpstruct")
    with no_user_logging():
        with _logging.fit_logging("A", 1):
            with _logging.fit_logging("B", 2):
                assert logger.level == logging.INFO
            assert logger.level == logging.INFO  # the outer fit still runs
            logger.info("still visible")
        assert logger.level == logging.NOTSET
        logger.warning("not ours")  # no handler of the package's left
    err = capsys.readouterr().err
    assert "still visible" in err and "not ours" not in err

    est = RandomizedCRFTagger(verbose=1)

    def boom(*args):
        raise RuntimeError("boom")

    est._fit = boom
    X, y = make_chain_data(n_sequences=5, random_state=0)[:2]
    with pytest.raises(RuntimeError, match="boom"):
        est.fit(X, y)


# ------------------------------------------------------------------- bar
@pytest.mark.parametrize("name", sorted(CASES))
def test_bar_on_a_terminal(name, data, monkeypatch):
    tty = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    est = _make(name, 1).fit(*data)
    _, _, unit, label, _ = CASES[name]
    shown = tty.getvalue()
    assert f"{type(est).__name__}:" in shown and "%|" in shown
    assert f"{est.n_iter_}/{MAX_ITER} [" in shown and f"{unit}/s" in shown
    assert f"{label}=" in shown  # the objective in the bar's postfix


@pytest.mark.parametrize("name", ["crf-lbfgs", "gp-adam"])
def test_no_bar_when_stderr_is_not_a_terminal(name, data, capfd):
    _make(name, 2).fit(*data)
    assert "%|" not in capfd.readouterr().err


def test_report_only_loops_get_a_bar_closed_by_fit(monkeypatch):
    """An optimiser loop that only calls ``monitor.report`` (as OWL-QN)
    gets its bar on the first report, closed when ``fit`` ends."""
    tty = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    est = RandomizedCRFTagger(max_iter=4, verbose=1)
    with _logging.fit_logging("RandomizedCRFTagger", 1):
        monitor = est._monitor()
        monitor.unit = "iter"
        for value in [3.0, 2.0]:
            monitor.report(value)
        bar = monitor._bar
        assert bar is not None and not bar.disable
    assert monitor._bar is None
    assert "2/4" in tty.getvalue()


# -------------------------------------------------------------- monitor
@pytest.mark.parametrize("values, iters, converged, expected", [
    ([3.0, 2.0, 2.0, 2.0], 4, True, "Adam converged after 4 epochs; loss 2"),
    ([3.0, 2.0], 2, False, "Adam reached max_iter=2 epochs without converging; loss 2"),
    ([3.0, 1.0, 2.0], 3, False, "Adam stopped after 3 epochs (interrupted); loss 1"),
])
def test_monitor_outcome(values, iters, converged, expected, caplog):
    caplog.set_level(logging.INFO, logger="skgpstruct")
    monitor = ConvergenceMonitor(tol=1e-3, max_iter=2 if iters == 2 else 10, verbose=1)
    monitor.start("Adam")
    for v in values:
        monitor.report(v)
    monitor.converged = converged
    monitor.finish()
    assert caplog.records[-1].getMessage() == expected
    assert caplog.records[-1].levelno == logging.INFO


def test_monitor_sign_and_silence(caplog):
    caplog.set_level(logging.DEBUG, logger="skgpstruct")
    monitor = ConvergenceMonitor(tol=0.0, max_iter=5, verbose=2, label="ELBO", sign=-1.0)
    monitor.report(12.5)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "epoch 1: ELBO -12.5")]
    caplog.clear()
    quiet = ConvergenceMonitor(tol=0.0, max_iter=5)
    quiet.start("L-BFGS")
    quiet.report(1.0)
    quiet.finish()
    assert caplog.records == []


def test_no_print_in_the_fit_loop():
    import inspect

    assert "print(" not in inspect.getsource(_base)


# ------------------------------------------------------------- numba note
def test_numba_note_once_per_process(data, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="skgpstruct")
    monkeypatch.setitem(_logging._state, "first_fit", True)

    def notes():
        return [r for r in _records(caplog) if "numba" in r.getMessage()]

    _make("crf-lbfgs", 1).fit(*data)
    assert len(notes()) == 1 and notes()[0].levelno == logging.INFO
    assert "compiles" in notes()[0].getMessage() and "cache" in notes()[0].getMessage()
    _make("crf-lbfgs", 1).fit(*data)
    assert len(notes()) == 1
    # a silent first fit uses up the note: the kernels are compiled by then
    monkeypatch.setitem(_logging._state, "first_fit", True)
    caplog.clear()
    _make("crf-lbfgs", 0).fit(*data)
    _make("crf-lbfgs", 1).fit(*data)
    assert notes() == []
