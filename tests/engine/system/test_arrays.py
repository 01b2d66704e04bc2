"""distinct gives what np.unique gives, on every kind of input the engine passes it."""

from __future__ import annotations

import numpy as np
import pytest

from engine.system.arrays import distinct

RNG = np.random.default_rng(26)


@pytest.mark.parametrize("values", [
    RNG.integers(0, 10**12, 200_000),               # wide range: sorted
    RNG.integers(0, 300, 200_000).astype(np.int32),  # codes: counted
    RNG.integers(-7, 7, 1000),                       # negative codes
    np.arange(100_000, dtype=np.int64) * 7,          # every value once, range 7x the count
    np.array([2**63 + 5, 3, 2**63 + 5], dtype=np.uint64),  # past int64
    np.array([9, 2, 9], dtype=np.uint16),
    np.array([True, False, True]),
    np.array([], dtype=np.int64),
    np.array([5]),
    np.array([[3, 1], [1, 3]]),                      # flattened, as np.unique does
    np.array([1.5, np.nan, 1.5, np.nan]),            # floats: numpy's own
    np.array(["b", "a", "b"]),
])
def test_distinct_is_np_unique(values: np.ndarray) -> None:
    got, want = distinct(values), np.unique(values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_distinct_of_many_wide_values_is_strictly_rising_and_whole() -> None:
    """2M int64 values over a range too wide to count: the sort path."""
    v = RNG.integers(0, 10**12, 2_000_000)
    u = distinct(v)
    assert len(u) == len(np.unique(np.sort(v)))
    assert (np.diff(u) > 0).all()
