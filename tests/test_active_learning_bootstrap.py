"""Checks of ``benchmarks/active_learning_bootstrap.py`` on hand-made curves."""

import numpy as np
import pytest

from ._bench_helpers import load_script

SIZES = [20, 40, 60, 80, 100]


@pytest.fixture(scope="module")
def alb():
    return load_script("active_learning_bootstrap")


def test_first_reach(alb):
    curves = np.array([[9.0, 6.0, 5.0, 5.5, 4.0],
                       [9.0, 6.0, 5.5, 5.1, 5.05],
                       [9.0, 4.0, 4.0, 4.0, 4.0]])
    out = alb.first_reach(SIZES, curves, np.array([5.0, 5.0, 5.0]))
    assert out.tolist() == [60.0, np.inf, 40.0]  # at most the target; never; the first size


def test_summarise_by_hand(alb):
    random = np.array([[9, 8, 7, 6, 5.0], [9, 8, 7, 6, 5.2]])
    curves = np.array([[9, 6, 5.1, 5, 5.0], [9, 6, 5.3, 5, 5.0]])
    row = alb.summarise(SIZES, random, curves, at=60, n_boot=4000, seed=0)
    assert row["runs"] == 2
    assert row["error % at 60"] == 5.2 and row["random at 100"] == 5.1
    # paired: 5.1 - 5.0 and 5.3 - 5.2, both +0.1, standard error 0
    assert row["paired diff."] == "+0.100 +- 0.000"
    assert row["reaches at"] == 80  # the mean curve is 5.2 at 60, 5.0 at 80
    # at 60, run 0 alone: 5.1 > 5.0; run 1 alone: 5.3 > 5.2; both: 5.2 > 5.1
    assert row["P(reach <= 60)"] == 0.0
    curves[0, 2] = 4.8  # run 0 alone: 4.8 <= 5.0; both: 5.05 <= 5.1; run 1 alone fails
    row = alb.summarise(SIZES, random, curves, at=60, n_boot=4000, seed=0)
    # resamples (0, 0), (0, 1), (1, 0) pass and (1, 1) fails: 3/4 expected
    assert abs(row["P(reach <= 60)"] - 0.75) < 4 * np.sqrt(0.75 * 0.25 / 4000)
    assert row["reaches at"] == 60
