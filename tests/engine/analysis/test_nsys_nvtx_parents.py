"""nvtx_gpu_proj's parent search: the one-pass stack for nested ranges (400k push/pop ranges of one
thread: O(n log n), was pairwise O(n^2)) finds what the pairwise comparison finds, duplicates,
shared starts and zero-length ranges included; partially overlapping ranges take the pairwise path."""

from __future__ import annotations

import lzma
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.analysis.nsys.stats.nvtx_ranges import (
    _gpu_op_calls_columns,
    _gpu_op_calls_sql,
    _nested_parents,
    _pairwise_parents,
    _parents,
)
from engine.reports import open_report
from tests.conftest import NSYS_SQLITE, REPO


def _nested_ranges(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    out: list[tuple[int, int]] = []

    def fill(lo: int, hi: int, depth: int) -> None:
        t = lo
        while t < hi and len(out) < n:
            a = t + int(rng.integers(0, 3))
            b = min(hi, a + int(rng.integers(0, 20)))
            if a > b:
                break
            out.extend([(a, b)] * (2 if rng.random() < 0.15 else 1))  # duplicates too
            if depth < 4 and b - a > 2 and rng.random() < 0.7:
                fill(a + int(rng.integers(0, 2)), b - int(rng.integers(0, 2)), depth + 1)
            t = b + 1 + int(rng.integers(0, 3))

    fill(0, 10**6, 0)
    arr = np.array(out, dtype=np.int64)[rng.permutation(len(out))]  # any table order
    return arr[:, 0], arr[:, 1]


def test_stack_equals_pairwise_on_nested_ranges() -> None:
    rng = np.random.default_rng(16)
    dup_parents = 0
    for _ in range(200):
        s, e = _nested_ranges(rng, int(rng.integers(1, 300)))
        got = _nested_parents(s, e)
        assert got is not None
        want = _pairwise_parents(s, e)
        assert got.tolist() == want.tolist()
        dup_parents += int(sum(1 for i, p in enumerate(want.tolist())
                               if p >= 0 and s[p] == s[i] and e[p] == e[i]))
    assert dup_parents > 50  # the duplicate rule was exercised


def test_partial_overlap_takes_the_pairwise_path() -> None:
    s = np.array([0, 5, 6, 20], dtype=np.int64)
    e = np.array([10, 15, 7, 30], dtype=np.int64)
    assert _nested_parents(s, e) is None
    ranges = pd.DataFrame({"id": [11, 12, 13, 14], "start": s, "end": e, "globalTid": [1, 1, 1, 1]})
    # [6, 7] lies in both [0, 10] and [5, 15]: the tighter one (by length 10 = 10, first wins).
    assert _parents(ranges) == {11: None, 12: None, 13: 11, 14: None}


def test_threads_are_separate() -> None:
    ranges = pd.DataFrame({"id": [1, 2, 3], "start": [0, 1, 1], "end": [10, 2, 2],
                           "globalTid": [7, 7, 8]})
    assert _parents(ranges) == {1: None, 2: 1, 3: None}


def test_numpy_join_of_gpu_ops_and_calls_equals_sqlites(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """nvtx_gpu_proj's op/call join through the columnar cache gives SQLite's rows (as a multiset)."""
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))
    paths = list(NSYS_SQLITE)
    for xz in sorted((REPO / "tests" / "data" / "recordings" / "nsys").glob("*/*.sqlite.xz")):
        dest = tmp_path / xz.name[: -len(".xz")]
        dest.write_bytes(lzma.decompress(xz.read_bytes()))
        paths.append(dest)
    cols = ["start", "end", "corr", "a_start", "a_end", "gtid"]
    total = 0
    for path in paths:
        trace = open_report(path)
        want = _gpu_op_calls_sql(trace)
        got = _gpu_op_calls_columns(trace)
        assert got is not None, path.name
        if want is None:
            assert got.empty, path.name
            continue
        assert sorted(map(tuple, got[cols].to_numpy().tolist())) == \
            sorted(map(tuple, want[cols].astype("int64").to_numpy().tolist())), path.name
        total += len(want)
    assert total > 10_000
