"""The chunked unions and the dense-key join of engine/analysis/tables.py against plain references.

The summary of a 10M-kernel report walks its columns a chunk at a time (union_sorted, blocks_sorted)
and joins 20M calls through a table addressed by key (match_first): every chunk size and both join
paths must give what the one-pass numpy versions and a pandas merge give.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import engine.analysis.tables as tables
from engine.analysis.summary import interval_union_ns


def _reference_blocks(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _, bs, be = interval_union_ns(s, e)
    return bs, be


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 21])
def test_chunked_unions_equal_one_pass(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(tables, "UNION_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    for _ in range(200):
        n = int(rng.integers(0, 80))
        s = np.sort(rng.integers(0, 300, n)).astype(np.int64)
        e = s + rng.integers(0, 40, n)
        mask = rng.random(n) < 0.6
        bs, be = tables.blocks_sorted(s, e)
        rs, re_ = _reference_blocks(s, e)
        assert bs.tolist() == rs.tolist() and be.tolist() == re_.tolist()
        assert tables.union_sorted(s, e) == interval_union_ns(s, e)[0]
        assert tables.union_sorted(s, e, mask) == interval_union_ns(s[mask], e[mask])[0]


@pytest.mark.parametrize("chunk", [1, 2, 5, 1 << 21])
def test_union_with_odd_rows_and_the_disjoint_shortcut(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Rows ending before they start count as the merged blocks count them (the old walk did too);
    where disjoint_sorted holds, every subset's union is its summed durations."""
    monkeypatch.setattr(tables, "UNION_CHUNK", chunk)
    rng = np.random.default_rng(100 + chunk)
    disjoint_seen = overlapping_seen = 0
    for _ in range(300):
        n = int(rng.integers(1, 60))
        s = np.sort(rng.integers(0, 500, n)).astype(np.int64)
        if rng.random() < 0.5:  # back to back, no overlap (gaps of 0 or more)
            e = np.append(s[1:], s[-1] + 5) - rng.integers(0, 3, n) * (rng.random(n) < 0.5)
            e = np.maximum(e, s)
        else:
            e = s + rng.integers(-10, 40, n)
        mask = rng.random(n) < 0.5
        want = interval_union_ns(s, e)[0]
        blocks = tables.blocks_sorted(s, e)
        assert tables.union_sorted(s, e) == want == int((blocks[1] - blocks[0]).sum())
        assert tables.union_sorted(s, e, mask) == interval_union_ns(s[mask], e[mask])[0]
        if tables.disjoint_sorted(s, e):
            disjoint_seen += 1
            assert want == int((e - s).sum())
            assert tables.union_sorted(s, e, mask) == int((e - s)[mask].sum())
        else:
            overlapping_seen += 1
            assert bool((e < s).any()) or bool((s[1:] < np.maximum.accumulate(e)[:-1]).any())
    assert disjoint_seen > 50 and overlapping_seen > 50


@pytest.mark.parametrize("dense", [True, False])
def test_match_first_equals_pandas_merge(dense: bool) -> None:
    rng = np.random.default_rng(7)
    n_right, n_left = 5000, 3000
    spread = 3000 if dense else 10**12  # dense keys use the addressed table, sparse ones a sort
    rp = rng.integers(0, 3, n_right)
    rc = rng.integers(0, spread, n_right)  # duplicates: the first row per key must win
    lp = rng.integers(-2, 4, n_left)
    picked = rng.integers(0, n_right, n_left)
    lp = np.where(rng.random(n_left) < 0.7, rp[picked], lp)  # most left keys exist on the right
    lc = np.where(rng.random(n_left) < 0.9, rc[picked], rng.integers(0, spread, n_left))
    idx, distinct = tables.match_first_counted((lp, lc), (rp, rc))
    r = pd.DataFrame({"p": rp, "c": rc, "i": np.arange(n_right)}).drop_duplicates(["p", "c"])
    j = pd.DataFrame({"p": lp, "c": lc}).merge(r, how="left", on=["p", "c"])
    want = j["i"].fillna(-1).astype(np.int64).to_numpy()
    assert idx.tolist() == want.tolist()
    assert distinct == len(r)
    assert 1000 < (idx >= 0).sum() < n_left  # the join found rows, and missed some


def test_unique_first_and_median_equal_numpys() -> None:
    """The summary's stand-ins for np.unique (return_index/counts) and np.median (same floats)."""
    from engine.analysis.sums import median

    rng = np.random.default_rng(11)
    for n in (0, 1, 2, 7, 500):
        for hi in (1, 3, 10**12):
            v = rng.integers(0, hi, n)
            got = tables.unique_first(v)
            want = np.unique(v, return_index=True, return_counts=True)
            assert [g.tolist() for g in got] == [w.tolist() for w in want]
            if n:
                assert median(v) == float(np.median(v))
                f = rng.random(n) * 10.0 ** rng.integers(-3, 9)
                assert median(f) == float(np.median(f))
