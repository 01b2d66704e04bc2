"""The array nesting of host ranges against the one-range-at-a-time stack walk it replaces.

Random programs (properly nested call trees with zero-length and identical ranges, ranges that
overlap without nesting, and ranges thrown at random) and the real recordings of
tests/data/recordings/torch and the fixtures: the parents, operator parents and backward marks must
be the walk's, range for range.
"""

from __future__ import annotations

import lzma
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.pytorch import nesting
from tests.conftest import FIXTURES, REPO

REC = REPO / "tests" / "data" / "recordings" / "torch"


def walk(start: np.ndarray, end: np.ndarray, thread: np.ndarray,
         opish: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stack walk, one range at a time: the code the array passes replaced."""
    n = len(start)
    parent = np.full(n, -1, dtype=np.int64)
    op_parent = np.full(n, -1, dtype=np.int64)
    s_, e_, t_, o_ = start.tolist(), end.tolist(), thread.tolist(), opish.tolist()
    stack: list[int] = []
    op_stack: list[int] = []
    cur_thread = -1
    for i in range(n):
        if t_[i] != cur_thread:
            stack, op_stack, cur_thread = [], [], t_[i]
        s = s_[i]
        while stack and e_[stack[-1]] <= s and not (e_[stack[-1]] == s and s_[stack[-1]] == s):
            j = stack.pop()
            if op_stack and op_stack[-1] == j:
                op_stack.pop()
        if stack:
            parent[i] = stack[-1]
        if op_stack:
            op_parent[i] = op_stack[-1]
        stack.append(i)
        if o_[i]:
            op_stack.append(i)
    return parent, op_parent


def _sorted(start: np.ndarray, end: np.ndarray, thread: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.lexsort((-end, start, thread))
    return start[order], end[order], thread[order]


def _tree(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A properly nested call tree: ranges inside ranges, some of zero length, some identical."""
    starts, ends = [], []

    def grow(lo: int, hi: int, depth: int) -> None:
        t = lo
        while t < hi and len(starts) < n:
            if rng.random() < 0.1:
                starts.append(t)
                ends.append(t)  # zero length
                if rng.random() < 0.5:
                    starts.append(t)
                    ends.append(t)
                continue
            length = int(rng.integers(0, max(1, (hi - t) // 2) + 1))
            starts.append(t)
            ends.append(t + length)
            if rng.random() < 0.1:  # the same range twice (a dispatch layer)
                starts.append(t)
                ends.append(t + length)
            if depth < 12 and length > 2:
                grow(t + int(rng.integers(0, 2)), t + length, depth + 1)
            t += length + int(rng.integers(0, 3))

    grow(0, 10**9, 0)
    return np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def _check(start: np.ndarray, end: np.ndarray, thread: np.ndarray, opish: np.ndarray) -> None:
    """Compare with the walk."""
    want_parent, want_op = walk(start, end, thread, opish)
    got_parent, got_op = nesting.parents(start, end, thread, opish)
    np.testing.assert_array_equal(got_parent, want_parent)
    np.testing.assert_array_equal(got_op, want_op)
    mark = np.zeros(len(start), dtype=bool)
    mark[::7] = True
    back = mark.copy()
    for i, p in enumerate(want_op.tolist()):
        if p >= 0 and back[p]:
            back[i] = True
    np.testing.assert_array_equal(nesting.marked_below(mark, want_op), back)
    rng = np.random.default_rng(len(start))
    for tree in (want_parent, want_op):
        assert nesting.subtree_ends(tree) is not None  # a stack walk's order is a pre-order
        group = np.where(rng.random(len(start)) < 0.8, rng.integers(0, 4, len(start)), -1).astype(np.int64)
        np.testing.assert_array_equal(nesting.in_own_group(group, tree), own_group(group, tree))


def own_group(group: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Whether a range has an ancestor of its own group: up the parents one by one."""
    out = np.zeros(len(group), dtype=bool)
    g, par = group.tolist(), parent.tolist()
    for i in range(len(g)):
        a = par[i]
        while g[i] >= 0 and a >= 0 and not out[i]:
            out[i] = g[a] == g[i]
            a = par[a]
    return out


def test_in_own_group_of_a_tree_not_in_pre_order() -> None:
    # 0 -> 2 -> {1, 3}: range 1's parent comes after it, and 2's block [2, 3] misses its child 1
    parent = np.array([-1, 2, 0, 2], dtype=np.int64)
    assert nesting.subtree_ends(parent) is None
    group = np.array([5, 5, 7, 7], dtype=np.int64)
    np.testing.assert_array_equal(nesting.in_own_group(group, parent), [False, True, False, True])
    # children listed before a sibling's subtree ends: 0 -> {1, 2}, 1 -> 3
    parent = np.array([-1, 0, 0, 1], dtype=np.int64)
    assert nesting.subtree_ends(parent) is None
    group = np.array([1, 2, 1, 2], dtype=np.int64)
    np.testing.assert_array_equal(nesting.in_own_group(group, parent), own_group(group, parent))


@pytest.mark.parametrize("seed", range(12))
def test_properly_nested_trees_match_the_walk(seed: int) -> None:
    rng = np.random.default_rng(seed)
    parts = [_tree(rng, int(rng.integers(1, 3000))) for _ in range(3)]
    start = np.concatenate([p[0] for p in parts])
    end = np.concatenate([p[1] for p in parts])
    thread = np.concatenate([np.full(len(p[0]), k, dtype=np.int32) for k, p in enumerate(parts)])
    start, end, thread = _sorted(start, end, thread)
    opish = rng.random(len(start)) < 0.6
    _check(start, end, thread, opish)


@pytest.mark.parametrize("seed", range(12))
def test_ranges_that_overlap_without_nesting_match_the_walk(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    start, end = _tree(rng, 2000)
    # one range moved to end inside a later sibling: it overlaps it without nesting
    k = int(rng.integers(0, len(start)))
    end = end.copy()
    end[k] = end[k] + int(rng.integers(1, 10**8))
    thread = np.zeros(len(start), dtype=np.int32)
    start, end, thread = _sorted(start, end, thread)
    opish = rng.random(len(start)) < 0.5
    _check(start, end, thread, opish)


@pytest.mark.parametrize("seed", range(20))
def test_random_ranges_match_the_walk(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(1, 5000))
    start = rng.integers(0, int(rng.integers(1, 2000)), n).astype(np.int64)  # many equal starts
    length = np.where(rng.random(n) < 0.15, 0, rng.integers(0, 500, n)).astype(np.int64)
    length[rng.random(n) < 0.02] = -3  # a broken trace's negative duration: never anyone's parent
    thread = rng.integers(0, int(rng.integers(1, 5)), n).astype(np.int32)
    start, end, thread = _sorted(start, start + length, thread)
    _check(start, end, thread, rng.random(n) < 0.5)


def test_a_range_that_outlives_its_parent() -> None:
    # a root, a chain inside it, and one range that starts inside the chain and ends after it
    start = np.array([0, 1, 2, 3, 4, 5], dtype=np.int64)
    end = np.array([100, 50, 40, 30, 20, 60], dtype=np.int64)
    thread = np.zeros(6, dtype=np.int32)
    _check(start, end, thread, np.ones(6, dtype=bool))
    parent, _ = nesting.parents(start, end, thread, np.ones(6, dtype=bool))
    assert parent.tolist() == [-1, 0, 1, 2, 3, 4]  # the overlapping range's top: the one started last


def test_empty_and_single() -> None:
    for n in (0, 1):
        z = np.zeros(n, dtype=np.int64)
        _check(z, z, np.zeros(n, dtype=np.int32), np.ones(n, dtype=bool))


def _real_traces(tmp: Path) -> list[Path]:
    out = [FIXTURES / "torch" / "torch_sdpa_trace.json", FIXTURES / "nsys" / "torch_sdpa_gemm.sqlite"]
    for xz in sorted(REC.glob("*.json.xz")) + sorted(REC.glob("*nsys*.sqlite.xz")):
        f = tmp / xz.name[:-3]
        f.write_bytes(lzma.decompress(xz.read_bytes()))
        out.append(f)
    return out


def test_real_recordings_match_the_walk(tmp_path: Path) -> None:
    from engine.analysis.pytorch.events import ANNOTATION, OP, STEP, _build
    from engine.reports import open_report

    for path in _real_traces(tmp_path):
        ev = _build(open_report(path))
        assert ev.n, path.name
        opish = (ev.cat == OP) | (ev.cat == ANNOTATION) | (ev.cat == STEP)
        _check(ev.start, ev.end, ev.thread, opish)
