"""chunked_sum: chunk-order sums that do not depend on n_jobs."""

import numpy as np
import pytest
from joblib import Parallel

from skgpstruct._utils.parallel import chunked_sum


def _work(chunk, seeds):
    x = np.sin(chunk * 1.3 + seeds)
    return float(x.sum()), x.sum() * np.arange(3.0), {"a": np.full(2, x.min())}


@pytest.mark.parametrize("n_jobs", [1, 2, 3])
def test_chunked_sum_equals_sequential_sum_in_chunk_order(n_jobs):
    idx = np.arange(23)[::-1]
    seeds = np.arange(23) * 0.5
    with Parallel(n_jobs=n_jobs, prefer="threads") as parallel:
        value, vec, d = chunked_sum(_work, idx, seeds, chunk_size=4, parallel=parallel)
    parts = [_work(idx[i : i + 4], seeds[i : i + 4]) for i in range(0, 23, 4)]
    expect = 0.0
    for p in parts:
        expect += p[0]
    assert value == expect  # bit-identical: same order
    np.testing.assert_array_equal(vec, sum(p[1] for p in parts))
    np.testing.assert_allclose(d["a"], sum(p[2]["a"] for p in parts))


def test_chunked_sum_does_not_modify_the_first_result():
    first = np.ones(2)
    out = chunked_sum(lambda c, s: (first,), np.arange(4), np.zeros(4), chunk_size=2)
    np.testing.assert_array_equal(out[0], [2.0, 2.0])
    np.testing.assert_array_equal(first, [1.0, 1.0])


def test_chunked_sum_rejects_mismatched_or_empty_input():
    with pytest.raises(ValueError, match="same length"):
        chunked_sum(_work, np.arange(3), np.zeros(2), chunk_size=2)
    with pytest.raises(ValueError, match="at least one"):
        chunked_sum(_work, np.arange(0), np.zeros(0), chunk_size=2)
