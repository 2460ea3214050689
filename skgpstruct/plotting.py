"""Plots of a fitted tagger: training curve, token marginals, calibration.

matplotlib is optional (``pip install "skgpstruct[plot]"``); it is imported
when a function is called, not with this module. Every function draws on
``ax`` (by default on a new figure's axes) and returns the Axes.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

__all__ = ["plot_marginals", "plot_reliability_diagram", "plot_training_curve"]

#: The optimisers whose ``loss_curve_`` has one value per epoch.
_EPOCH_OPTIMIZERS = frozenset({"adam", "sgd", "saga", "adagrad"})


def _pyplot():
    """matplotlib.pyplot, or an ImportError that says how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "skgpstruct.plotting needs matplotlib, which is not installed; "
            "install the plot extra: pip install \"skgpstruct[plot]\" "
            "(or pip install matplotlib)."
        ) from exc
    return plt


def _axes(ax):
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots()
    return ax


def _curve_unit(estimator):
    """``"epoch"`` or ``"iteration"``: what one value of ``loss_curve_`` is."""
    optimizer = getattr(estimator, "optimizer", None)
    if optimizer == "auto":  # RandomizedCRFTagger: L-BFGS when exact, else Adam
        optimizer = "lbfgs" if getattr(estimator, "exact_", True) else "adam"
    return "epoch" if optimizer in _EPOCH_OPTIMIZERS else "iteration"


def _tagger_of(estimator):
    """The tagger inside ``estimator``: a Pipeline's last step, the fitted
    tagger (or Pipeline) of a TemperatureScaledTagger, else itself."""
    if hasattr(estimator, "temperature_range"):  # a TemperatureScaledTagger
        check_is_fitted(estimator, "estimator_")
        estimator = estimator.estimator_
    return estimator[-1] if isinstance(estimator, Pipeline) else estimator


def _featurises(estimator):
    """Whether ``estimator`` takes raw input (a Pipeline, or one wrapped)."""
    return isinstance(estimator, Pipeline) or isinstance(
        getattr(estimator, "estimator", None), Pipeline)


def plot_training_curve(estimator, ax=None):
    """Plot the objective a fitted tagger minimised, per iteration / epoch.

    Draws ``estimator.loss_curve_``: the penalised training loss of a
    :class:`~skgpstruct.RandomizedCRFTagger`, the negative ELBO of a
    :class:`~skgpstruct.GPStructTagger` (lower is better for both), one
    value per L-BFGS iteration or per epoch of a stochastic optimiser.

    Parameters
    ----------
    estimator : RandomizedCRFTagger or GPStructTagger
        A fitted tagger (any estimator with a ``loss_curve_`` list), a
        Pipeline ending in one, or a fitted
        :class:`~skgpstruct.calibration.TemperatureScaledTagger` (its
        tagger's final fit is drawn).
    ax : matplotlib.axes.Axes, default=None
        Where to draw (None: a new figure).

    Returns
    -------
    ax : matplotlib.axes.Axes

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``estimator`` has no ``loss_curve_`` (not fitted).
    ImportError
        If matplotlib is not installed.

    Examples
    --------
    >>> from skgpstruct import RandomizedCRFTagger
    >>> from skgpstruct.datasets import make_chain_data
    >>> from skgpstruct.plotting import plot_training_curve
    >>> X, y = make_chain_data(n_sequences=20, random_state=0)[:2]
    >>> crf = RandomizedCRFTagger(random_state=0).fit(X, y)
    >>> ax = plot_training_curve(crf)  # doctest: +SKIP
    >>> ax.figure.savefig("training_curve.png")  # doctest: +SKIP
    """
    estimator = _tagger_of(estimator)
    check_is_fitted(estimator, "loss_curve_")
    curve = np.asarray(estimator.loss_curve_, dtype=np.float64)
    if curve.ndim != 1:
        raise ValueError(f"loss_curve_ must be a list of floats, got shape {curve.shape}.")
    ax = _axes(ax)
    unit = _curve_unit(estimator)
    steps = np.arange(1, curve.shape[0] + 1)
    ax.plot(steps, curve, marker="o" if curve.shape[0] <= 50 else None, markersize=3)
    ax.set_xlabel(unit)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    is_gp = hasattr(estimator, "elbo_history_")
    ax.set_ylabel("negative ELBO" if is_gp else "training loss (penalised)")
    ax.set_title(f"{type(estimator).__name__}: {curve.shape[0]} {unit}s")
    ax.grid(True, alpha=0.3)
    return ax


def _one_sentence(X):
    """Check that ``X`` is one sequence, of shape (T, n_features)."""
    if sp.issparse(X):
        return X
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(
            "X_one_sentence must be one sequence of shape (T, n_features), got an "
            f"array of shape {X.shape}; pass X[i], not X or [X[i]]."
        )
    return X


def _label_index(values, labels, name):
    """Row of each of ``values`` in ``labels``; a ValueError names an unknown one."""
    index = {label: i for i, label in enumerate(np.asarray(labels).tolist())}
    rows = []
    for value in np.asarray(values).tolist():
        if value not in index:
            raise ValueError(f"{name} has the label {value!r}, which is not one of "
                             f"the labels {list(index)}.")
        rows.append(index[value])
    return np.asarray(rows, dtype=np.intp)


def plot_marginals(estimator_or_marginals, X_one_sentence=None, y_true=None, *,
                   tokens=None, labels=None, ax=None):
    """Heatmap of one sentence's token marginals, with the gold and predicted paths.

    Rows are the labels (``classes_``), columns the tokens; the colour of a
    cell is ``p(y_t = label | x)``. The predicted path (the estimator's
    ``predict``, by its ``decode``; the argmax of each column when
    marginals are given) is marked with crosses, the gold path
    (``y_true``) with circles.

    Parameters
    ----------
    estimator_or_marginals : fitted tagger, or array-like of shape (T, n_classes)
        A fitted tagger, a Pipeline ending in one or a fitted
        :class:`~skgpstruct.calibration.TemperatureScaledTagger` (its
        marginals and ``predict`` of ``X_one_sentence`` are drawn), or one
        sentence's marginals, e.g. ``estimator.predict_marginals(X)[i]``.
    X_one_sentence : array-like or sparse matrix of shape (T, n_features), default=None
        The sentence's token features (needed with an estimator, unused
        with marginals); for a Pipeline, the sentence as its first step
        reads it (e.g. a list of feature dicts).
    y_true : array-like of shape (T,), default=None
        Its gold labels (None: no gold path).
    tokens : list of str of shape (T,), default=None
        The words, as tick labels (None: the positions 0, 1, ...).
    labels : array-like of shape (n_classes,), default=None
        With marginals only: the labels of their columns (None: 0, 1, ...).
        An estimator's are its ``classes_``.
    ax : matplotlib.axes.Axes, default=None
        Where to draw (None: a new figure).

    Returns
    -------
    ax : matplotlib.axes.Axes

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If the estimator is not fitted.
    ValueError
        If the shapes disagree (``X_one_sentence`` not one 2-D sequence,
        marginals not 2-D, ``y_true`` or ``tokens`` not of length T,
        ``labels`` not one per column) or ``y_true`` has an unknown label.
    TypeError
        If ``estimator_or_marginals`` is neither a tagger nor an array of
        numbers (e.g. ``predict_marginals(X, output="dict")[i]``).

    Examples
    --------
    >>> from skgpstruct import RandomizedCRFTagger
    >>> from skgpstruct.datasets import make_chain_data
    >>> from skgpstruct.plotting import plot_marginals
    >>> X, y = make_chain_data(n_sequences=20, random_state=0)[:2]
    >>> crf = RandomizedCRFTagger(random_state=0).fit(X, y)
    >>> ax = plot_marginals(crf, X[0], y[0])  # doctest: +SKIP
    >>> p = crf.predict_marginals(X[:1])[0]
    >>> ax = plot_marginals(p, y_true=y[0], labels=crf.classes_)  # doctest: +SKIP
    """
    source = estimator_or_marginals
    if hasattr(source, "predict_marginals") or isinstance(source, Pipeline):
        check_is_fitted(source, "classes_")
        if X_one_sentence is None:
            raise ValueError("X_one_sentence is required with an estimator.")
        if labels is not None:
            raise ValueError("labels is for marginals; an estimator's labels are its "
                             "classes_.")
        X = X_one_sentence if _featurises(source) else _one_sentence(X_one_sentence)
        labels = np.asarray(source.classes_)
        marginals_of = getattr(source, "predict_marginals", None) or source.predict_proba
        marginals = np.asarray(marginals_of([X])[0], dtype=np.float64)
        predicted = _label_index(source.predict([X])[0], labels, "predict")
    else:
        try:
            marginals = np.asarray(source, dtype=np.float64)
        except ValueError:  # ragged: several sentences' marginals
            raise ValueError(
                "marginals must be one sentence's, of shape (T, n_classes); pass "
                "predict_marginals(X)[i]."
            ) from None
        except TypeError:
            raise TypeError(
                "estimator_or_marginals must be a fitted tagger, a Pipeline ending in "
                "one, or one sentence's marginals as an array of shape (T, n_classes) "
                "(predict_marginals(X)[i], with output='array'); got a "
                f"{type(source).__name__}."
            ) from None
        if marginals.ndim != 2:
            raise ValueError(
                "marginals must be one sentence's, of shape (T, n_classes), got an "
                f"array of shape {marginals.shape}; pass predict_marginals(X)[i]."
            )
        labels = np.arange(marginals.shape[1]) if labels is None else np.asarray(labels)
        if labels.shape != (marginals.shape[1],):
            raise ValueError(f"labels has {labels.size} entries for "
                             f"{marginals.shape[1]} columns of marginals.")
        predicted = marginals.argmax(axis=1)
    T = marginals.shape[0]
    if T == 0:
        raise ValueError("the sentence has no tokens.")
    gold = None
    if y_true is not None:
        y_true = np.asarray(y_true)
        if y_true.shape != (T,):
            raise ValueError(f"y_true has shape {y_true.shape}, expected ({T},): one "
                             "label per token.")
        gold = _label_index(y_true, labels, "y_true")
    if tokens is None:
        tokens = [str(t) for t in range(T)]
    else:
        tokens = [str(t) for t in tokens]
        if len(tokens) != T:
            raise ValueError(f"tokens has {len(tokens)} entries for {T} tokens.")

    ax = _axes(ax)
    image = ax.imshow(marginals.T, aspect="auto", cmap="Blues", vmin=0.0, vmax=1.0,
                      interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label="marginal probability")
    positions = np.arange(T)
    if gold is not None:
        ax.scatter(positions, gold, marker="o", s=90, facecolors="none",
                   edgecolors="tab:red", linewidths=1.5, label="gold")
    ax.scatter(positions, predicted, marker="x", s=40, color="tab:orange",
               linewidths=1.5, label="predicted")
    ax.set_xticks(positions)
    ax.set_xticklabels(tokens, rotation=90 if T > 10 else 0)
    ax.set_yticks(np.arange(len(labels)))
    ax.set_yticklabels([str(label) for label in labels.tolist()])
    ax.set_xlabel("token")
    ax.set_ylabel("label")
    ax.legend(loc="upper right", fontsize="small", framealpha=0.8)
    ax.set_title("Token marginals")
    return ax


def plot_reliability_diagram(y_true, marginals, n_bins=15, ax=None, *, labels=None):
    """Reliability diagram of the token marginals' top-label confidence.

    Bars: the accuracy of the tokens in each of ``n_bins`` equal-width
    confidence bins (:func:`skgpstruct.metrics.reliability_curve`), each
    with its number of tokens above it; the diagonal is perfect
    calibration. The title gives the expected calibration error
    (:func:`skgpstruct.metrics.expected_calibration_error`).

    Parameters
    ----------
    y_true : list of array-like of shape (T_n,)
        Gold label sequences.
    marginals : list of array-like of shape (T_n, n_classes)
        Token marginals (``predict_marginals``), columns in the order of
        ``labels``.
    n_bins : int, default=15
        Number of bins on ``[0, 1]``.
    ax : matplotlib.axes.Axes, default=None
        Where to draw (None: a new figure).
    labels : array-like of shape (n_classes,), default=None
        The labels of the columns (the estimator's ``classes_``). None: the
        sorted distinct labels of ``y_true``, which must then be
        ``n_classes`` of them (as ``classes_`` of a tagger fitted on them).

    Returns
    -------
    ax : matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If ``y_true`` and ``marginals`` do not line up, ``n_bins`` is not a
        positive integer, or ``labels`` is None and cannot be inferred.

    Examples
    --------
    >>> from skgpstruct import RandomizedCRFTagger
    >>> from skgpstruct.datasets import make_chain_data
    >>> from skgpstruct.plotting import plot_reliability_diagram
    >>> X, y = make_chain_data(n_sequences=40, random_state=0)[:2]
    >>> crf = RandomizedCRFTagger(random_state=0).fit(X[:20], y[:20])
    >>> ax = plot_reliability_diagram(  # doctest: +SKIP
    ...     y[20:], crf.predict_marginals(X[20:]), labels=crf.classes_)
    """
    from .metrics._sequence import expected_calibration_error, reliability_curve

    y_true, marginals = list(y_true), list(marginals)
    if labels is None:
        labels = _infer_labels(y_true, marginals)
    confidence, accuracy, counts = reliability_curve(y_true, marginals, labels=labels,
                                                     n_bins=n_bins)
    ece = expected_calibration_error(y_true, marginals, labels=labels, n_bins=n_bins)
    ax = _axes(ax)
    n_bins = counts.shape[0]
    width = 1.0 / n_bins
    left = np.arange(n_bins) * width
    full = counts > 0
    ax.bar(left[full], accuracy[full], width=width, align="edge", color="tab:blue",
           edgecolor="black", alpha=0.8, label="accuracy")
    ax.plot([0.0, 1.0], [0.0, 1.0], linestyle="--", color="gray", zorder=3,
            label="perfect calibration")
    for x, acc, count in zip(left[full], accuracy[full], counts[full]):
        ax.text(x + width / 2, acc + 0.01, str(int(count)), ha="center", va="bottom",
                fontsize="x-small")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.08)
    ax.set_xlabel("confidence (largest token marginal)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"Reliability diagram (ECE = {ece:.3f}, {int(counts.sum())} tokens)")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def _infer_labels(y_true, marginals):
    """The sorted distinct labels of ``y_true``, if one per column of marginals."""
    flat = [np.asarray(a).ravel() for a in y_true]
    distinct = np.unique(np.concatenate(flat)) if flat else np.array([])
    widths = {np.shape(p)[-1] for p in marginals if np.ndim(p) == 2}
    if len(widths) != 1 or distinct.size != widths.pop():
        raise ValueError(
            "cannot tell the labels of the marginals' columns from y_true (it has "
            f"{distinct.size} distinct labels); pass labels=estimator.classes_."
        )
    return distinct
