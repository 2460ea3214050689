"""Paired differences over cross-validation folds, for the tests and for
``benchmarks/calibration_paired.py`` (which compares GPStructTagger with the
plain CRFs on the folds of ``benchmarks/calibration.py``)."""

import numpy as np


def paired(gp_rows, peer_rows, metric):
    """Mean, standard error and t of the per-fold ``gp - peer``, and the
    number of folds where it is positive; rows are matched by fold.

    Parameters
    ----------
    gp_rows, peer_rows : list of dict
        One row per fold, each with a ``"fold"`` key and ``metric``; any
        order.
    metric : str

    Returns
    -------
    mean, se, t : float
        Of the differences over the folds both have (``t = mean / se``;
        0 or +-inf when every difference is the same).
    worse : int
        Folds where ``gp - peer > 0``.
    n : int
        Folds compared.
    """
    peer = {r["fold"]: r[metric] for r in peer_rows}
    d = np.array([r[metric] - peer[r["fold"]] for r in gp_rows if r["fold"] in peer])
    if d.size < 2:
        raise ValueError(f"{metric}: fewer than two folds in common.")
    se = float(d.std(ddof=1) / np.sqrt(d.size))
    mean = float(d.mean())
    t = mean / se if se > 0 else (0.0 if mean == 0 else np.sign(mean) * np.inf)
    return mean, se, float(t), int(np.sum(d > 0)), int(d.size)
