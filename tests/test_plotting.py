"""skgpstruct.plotting: each plot saves a PNG of the requested size, and
bad input is refused (shapes, unfitted estimators, missing matplotlib)."""

import builtins
import contextlib
import sys
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from skgpstruct import GPStructTagger, RandomizedCRFTagger  # noqa: E402
from skgpstruct import plotting  # noqa: E402
from skgpstruct.datasets import make_chain_data  # noqa: E402
from skgpstruct.plotting import (  # noqa: E402
    plot_marginals,
    plot_reliability_diagram,
    plot_training_curve,
)

FIGSIZE, DPI = (4.0, 3.0), 50  # a 200 x 150 pixel PNG


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def data():
    X, y = make_chain_data(n_sequences=30, n_classes=3, n_features=5, random_state=0)[:2]
    return X[:20], y[:20], X[20:], y[20:]


@pytest.fixture(scope="module")
def crf(data):
    return RandomizedCRFTagger(random_state=0).fit(data[0], data[1])


@pytest.fixture(scope="module")
def gp(data):
    with _no_convergence_warning():
        return GPStructTagger(n_inducing=8, n_samples=2, n_predict_samples=4,
                              max_iter=5, random_state=0).fit(data[0], data[1])


@contextlib.contextmanager
def _no_convergence_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def _ax():
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    return ax


def _check_png(ax, tmp_path, name):
    path = tmp_path / f"{name}.png"
    ax.figure.savefig(path, dpi=DPI)
    image = mpimg.imread(path)
    assert image.shape[:2] == (int(FIGSIZE[1] * DPI), int(FIGSIZE[0] * DPI))
    assert image.std() > 0  # something was drawn


# ---------------------------------------------------------- training curve
@pytest.mark.parametrize("which", ["crf", "gp"])
def test_training_curve_png(which, request, tmp_path):
    est = request.getfixturevalue(which)
    ax = plot_training_curve(est, ax=_ax())
    line = ax.get_lines()[0]
    np.testing.assert_array_equal(line.get_ydata(), est.loss_curve_)
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, est.n_iter_ + 1))
    assert ax.get_xlabel() == "iteration"
    assert ax.get_ylabel() == ("negative ELBO" if which == "gp" else
                               "training loss (penalised)")
    _check_png(ax, tmp_path, f"curve_{which}")


def test_training_curve_new_figure_and_epochs(data):
    est = RandomizedCRFTagger(optimizer="adam", max_iter=3, tol=0.0, random_state=0)
    with _no_convergence_warning():
        est.fit(data[0], data[1])
    ax = plot_training_curve(est)
    assert ax.get_xlabel() == "epoch" and len(ax.get_lines()[0].get_ydata()) == 3


def test_training_curve_not_fitted():
    with pytest.raises(NotFittedError):
        plot_training_curve(RandomizedCRFTagger())


# --------------------------------------------------------------- marginals
@pytest.mark.parametrize("which", ["crf", "gp"])
def test_marginals_png(which, request, data, tmp_path):
    est = request.getfixturevalue(which)
    X, y = data[2][0], data[3][0]
    T = len(y)
    tokens = [f"w{t}" for t in range(T)]
    ax = plot_marginals(est, X, y, tokens=tokens, ax=_ax())
    image = ax.get_images()[0]
    np.testing.assert_allclose(image.get_array(), est.predict_marginals([X])[0].T)
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert [t.get_text() for t in ax.get_yticklabels()] == [str(c) for c in est.classes_]
    gold, predicted = ax.collections[:2]
    index = {c: i for i, c in enumerate(est.classes_.tolist())}
    np.testing.assert_array_equal(gold.get_offsets()[:, 1], [index[v] for v in y.tolist()])
    np.testing.assert_array_equal(predicted.get_offsets()[:, 1],
                                  [index[v] for v in est.predict([X])[0].tolist()])
    _check_png(ax, tmp_path, f"marginals_{which}")


def test_marginals_from_an_array(crf, data, tmp_path):
    X, y = data[2][1], data[3][1]
    p = crf.predict_marginals([X])[0]
    ax = plot_marginals(p, y_true=y, labels=crf.classes_, ax=_ax())
    predicted = ax.collections[-1]
    np.testing.assert_array_equal(predicted.get_offsets()[:, 1], p.argmax(axis=1))
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(t) for t in range(len(y))]
    _check_png(ax, tmp_path, "marginals_array")
    # no gold path, default labels, a new figure
    ax = plot_marginals(p)
    assert len(ax.collections) == 1
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "2"]


def test_marginals_bad_input(crf, data):
    X, y = data[2][0], data[3][0]
    with pytest.raises(NotFittedError):
        plot_marginals(RandomizedCRFTagger(), X, y)
    with pytest.raises(ValueError, match="one sequence"):
        plot_marginals(crf, [X], y)  # a list of sentences, not one
    with pytest.raises(ValueError, match="required"):
        plot_marginals(crf)
    with pytest.raises(ValueError, match="y_true has shape"):
        plot_marginals(crf, X, y[:-1])
    with pytest.raises(ValueError, match="tokens has"):
        plot_marginals(crf, X, y, tokens=["a"])
    with pytest.raises(ValueError, match="not one of the labels"):
        plot_marginals(crf, X, np.full(len(y), 99))
    with pytest.raises(ValueError):  # wrong number of features
        plot_marginals(crf, X[:, :2], y)
    p = crf.predict_marginals([X])[0]
    with pytest.raises(ValueError, match=r"shape \(T, n_classes\)"):
        plot_marginals(p[None])
    with pytest.raises(ValueError, match="labels has"):
        plot_marginals(p, labels=["a", "b"])
    with pytest.raises(ValueError, match="labels is for marginals"):
        plot_marginals(crf, X, labels=crf.classes_)
    with pytest.raises(TypeError, match="output='array'"):
        plot_marginals(crf.predict_marginals([X], output="dict")[0])
    with pytest.raises(ValueError, match=r"shape \(T, n_classes\)"):
        plot_marginals(crf.predict_marginals(data[2][:2]))  # two sentences'


def test_pipelines_and_temperature_scaled_taggers(data, tmp_path):
    """Both plots reach the tagger inside a Pipeline (raw input: feature
    dicts) and inside a TemperatureScaledTagger (the scaled marginals)."""
    from sklearn.pipeline import make_pipeline

    from skgpstruct.calibration import TemperatureScaledTagger
    from skgpstruct.features import SequenceVectorizer

    words = [[{f"x{j}": float(v) for j, v in enumerate(row)} for row in x]
             for x in data[0]]
    y = data[1]
    pipe = make_pipeline(SequenceVectorizer(), RandomizedCRFTagger(random_state=0))
    pipe.fit(words, y)
    scaled = TemperatureScaledTagger(pipe, cv=2).fit(words, y)
    for est, tagger in ((pipe, pipe[-1]), (scaled, scaled.estimator_[-1])):
        ax = plot_training_curve(est, ax=_ax())
        np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), tagger.loss_curve_)
        ax = plot_marginals(est, words[0], y[0], ax=_ax())
        np.testing.assert_allclose(ax.get_images()[0].get_array(),
                                   est.predict_proba([words[0]])[0].T)
    with pytest.raises(NotFittedError):
        plot_training_curve(TemperatureScaledTagger(pipe))
    with pytest.raises(NotFittedError):
        plot_marginals(make_pipeline(SequenceVectorizer(), RandomizedCRFTagger()),
                       words[0])


# ------------------------------------------------------------- reliability
def test_reliability_png(crf, data, tmp_path):
    from skgpstruct.metrics import expected_calibration_error, reliability_curve

    X, y = data[2], data[3]
    p = crf.predict_marginals(X)
    ax = plot_reliability_diagram(y, p, n_bins=10, ax=_ax(), labels=crf.classes_)
    _, accuracy, counts = reliability_curve(y, p, labels=crf.classes_, n_bins=10)
    heights = [bar.get_height() for bar in ax.patches]
    np.testing.assert_allclose(heights, accuracy[counts > 0])
    assert [t.get_text() for t in ax.texts] == [str(c) for c in counts[counts > 0]]
    ece = expected_calibration_error(y, p, labels=crf.classes_, n_bins=10)
    assert f"ECE = {ece:.3f}" in ax.get_title()
    diagonal = ax.get_lines()[0]
    np.testing.assert_array_equal(diagonal.get_xdata(), diagonal.get_ydata())
    _check_png(ax, tmp_path, "reliability")
    # labels inferred from y_true (all three seen), default bins, new figure
    ax = plot_reliability_diagram(y, p)
    assert len(ax.patches) == np.count_nonzero(
        reliability_curve(y, p, labels=crf.classes_)[2])


def test_reliability_bad_input(crf, data):
    X, y = data[2], data[3]
    p = crf.predict_marginals(X)
    with pytest.raises(ValueError, match="sequences"):
        plot_reliability_diagram(y[:-1], p, labels=crf.classes_)
    with pytest.raises(ValueError):
        plot_reliability_diagram(y, [q[:, :2] for q in p], labels=crf.classes_)
    with pytest.raises(ValueError, match="n_bins"):
        plot_reliability_diagram(y, p, n_bins=0, labels=crf.classes_)
    with pytest.raises(ValueError, match="pass labels"):
        plot_reliability_diagram([np.zeros(len(s), dtype=int) for s in y], p)


# -------------------------------------------------------- no matplotlib
def test_missing_matplotlib_says_which_extra(crf, monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kw):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.delitem(sys.modules, "matplotlib.pyplot")
    with pytest.raises(ImportError, match=r"skgpstruct\[plot\]"):
        plot_training_curve(crf)
    assert plotting.__name__ == "skgpstruct.plotting"
