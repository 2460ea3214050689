"""Checks of the paired differences over folds (``tests/_paired.py``, which
``benchmarks/calibration_paired.py`` uses) on hand-made rows."""

import numpy as np
import pytest

from . import _paired


@pytest.fixture(scope="module")
def cp():
    return _paired


def test_paired_by_hand(cp):
    gp = [{"fold": f, "ECE %": v} for f, v in enumerate([1.0, 2.0, 3.0])]
    peer = [{"fold": f, "ECE %": v} for f, v in [(2, 2.0), (0, 1.5), (1, 1.0)]]  # any order
    mean, se, t, worse, n = cp.paired(gp, peer, "ECE %")
    # differences -0.5, +1.0, +1.0: mean 0.5, sd sqrt(0.75), SE 0.5
    assert n == 3 and worse == 2
    assert mean == pytest.approx(0.5) and se == pytest.approx(0.5) and t == pytest.approx(1.0)
    same = cp.paired(gp, gp, "ECE %")
    assert same[:3] == (0.0, 0.0, 0.0) and same[3] == 0
    with pytest.raises(ValueError, match="two folds"):
        cp.paired(gp, peer[:1], "ECE %")
    assert np.isinf(cp.paired(gp, [{"fold": r["fold"], "ECE %": r["ECE %"] - 1} for r in gp],
                              "ECE %")[2])
