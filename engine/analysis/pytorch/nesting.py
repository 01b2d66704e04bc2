"""The nesting of a program's host ranges, in numpy: each range's enclosing range and operator.

The ranges are sorted by thread, start and longest first (``events.TorchEvents``). A range's
``parent`` is the one a stack walk finds: the ranges of its thread are pushed in order, and the top
is popped while it has ended when the next one starts (one of zero length ending where the next
starts stays). Such a walk is one Python step per range: 10M ranges of a 4 GB trace took seconds,
and real traces do not nest properly (a ``ProfilerStep`` starts inside the Python frame that opens
it and outlives it), so no shortcut that assumes nesting will do. Here it is array passes, exact:

- the stack's top when range ``i`` starts is the last range before it that is still open then (a
  range that had ended would have been popped before any below it could be the top), so the parent
  is the last ``j < i`` with ``end[j] > start[i]`` (or ``j`` of zero length at ``start[i]``);
- starts are sorted, so range ``j`` is open for the ranges ``j + 1 .. d(j) - 1`` of its thread, ``d(j)``
  found by a binary search; the parent of ``i`` is the largest ``j`` whose span covers ``i``: each
  span is written as two power-of-two blocks into a table per block size, and the tables are folded
  from the largest blocks down (a range-maximum table built backwards, two levels in memory);
- the stack under the top is the top's parent chain, so the nearest enclosing operator is the first
  operator up the parents (pointer jumping); inside backward, by doubling up the operator parents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt


def parents(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64], thread: npt.NDArray[np.int32],
            opish: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(parent, op_parent)`` of ranges sorted by thread, start and longest first (-1: none).

    ``opish``: the ranges an ``op_parent`` may be (operators, annotations, steps).
    """
    parent = _open_until(start, end, thread)
    return parent, nearest_marked(parent, opish)


def _open_until(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64],
                thread: npt.NDArray[np.int32]) -> npt.NDArray[np.int64]:
    """Each range's parent: the last range before it on its thread still open at its start."""
    n = len(start)
    idx = np.arange(n, dtype=np.int64)
    until = idx + 1  # the first range (index) at whose start each range is closed
    cuts = np.flatnonzero(np.diff(thread)) + 1
    bounds = np.concatenate(([0], cuts, [n])).tolist()
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        s = start[lo:hi]
        base = int(s[0]) if hi > lo else 0
        # doubled times: a zero-length range stays open at its own end, one of length > 0 does not
        opened = 2 * (start[lo:hi] - base)
        closes = 2 * (end[lo:hi] - base) + (end[lo:hi] == s)
        until[lo:hi] = np.maximum(lo + np.searchsorted(opened, closes, side="left"), until[lo:hi])
    return _covering_max(idx + 1, until - 1)


def _covering_max(lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """For each position, the largest ``j`` with ``lo[j] <= position <= hi[j]`` (-1: none)."""
    n = len(lo)
    out = np.full(n, -1, dtype=np.int64)
    j = np.flatnonzero(lo <= hi)
    if not len(j):
        return out
    a, b = lo[j], hi[j]
    length = b - a + 1
    level = np.floor(np.log2(length)).astype(np.int64)
    level += (np.left_shift(1, level + 1) <= length).astype(np.int64)  # log2's rounding, both ways
    level -= (np.left_shift(1, level) > length).astype(np.int64)
    order = np.argsort(level.astype(np.int8), kind="stable")  # (a radix sort on 8 bits)
    cut = np.searchsorted(level[order], np.arange(int(level.max()) + 2))
    small = np.int32 if n < 2**31 else np.int64  # half the memory to pass over, where it fits
    jj = j.astype(small)
    # two tables in turn (not a fresh zero-filled one per level): table[p] is the max over the spans
    # that hold p .. p + size - 1
    table, spare = np.empty(n, dtype=small), np.empty(n, dtype=small)
    above = None
    for lv in range(int(level.max()), -1, -1):
        size = 1 << lv
        table.fill(-1)
        mine = order[cut[lv]:cut[lv + 1]]
        np.maximum.at(table, a[mine], jj[mine])  # a span's first block
        np.maximum.at(table, b[mine] - size + 1, jj[mine])  # and its last (the two may overlap)
        if above is not None:  # a block of twice the size is two of this one
            m = n - 2 * size + 1
            if m > 0:
                np.maximum(table[:m], above[:m], out=table[:m])
                np.maximum(table[size:size + m], above[:m], out=table[size:size + m])
        above, table = table, (spare if above is None else above)
    assert above is not None
    return above.astype(np.int64, copy=False)


def nearest_marked(parent: npt.NDArray[np.int64], marked: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Each range's nearest proper ancestor that is ``marked`` (-1: none), by pointer jumping."""
    a = parent.copy()
    while True:
        # a[i] is an ancestor of i with no marked range strictly between: skip an unmarked one
        todo = np.flatnonzero(a >= 0)
        todo = todo[~marked[a[todo]]]
        if not len(todo):
            return a
        a[todo] = a[a[todo]]


def marked_below(mark: npt.NDArray[np.bool_], parent: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """``mark`` spread down the tree: true where a range or any of its ancestors (by ``parent``) is marked."""
    out = mark.copy()
    a = parent.copy()
    live = np.flatnonzero(a >= 0)
    while len(live):
        # out[i] covers i and its ancestors up to a[i] (exclusive); take a[i]'s share and jump
        out[live] |= out[a[live]]
        a[live] = a[a[live]]
        live = live[a[live] >= 0]
    return out


def subtree_sums(values: npt.NDArray[np.int64], parent: npt.NDArray[np.int64],
                 depth: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.int64]:
    """Each range's value plus its descendants' (by ``parent``), one tree level at a time.

    ``depth``: :func:`depths` of ``parent`` when the caller has it.
    """
    out = np.asarray(values, dtype=np.int64).copy()
    depth = depths(parent) if depth is None else depth
    if not len(depth):
        return out
    order = np.argsort(depth, kind="stable")
    cuts = np.searchsorted(depth[order], np.arange(int(depth.max()) + 1), side="left")
    for d in range(int(depth.max()), 0, -1):  # the deepest level first: a level's sums are final
        rows = order[cuts[d]:cuts[d + 1] if d + 1 < len(cuts) else len(order)]
        np.add.at(out, parent[rows], out[rows])
    return out


def depths(parent: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Each range's number of ancestors (by ``parent``): list ranking, the jump doubling each round."""
    d = (parent >= 0).astype(np.int64)
    a = parent.copy()
    live = np.flatnonzero(a >= 0)
    while len(live):
        up = a[live]
        d[live] = d[live] + d[up]
        a[live] = a[up]
        live = live[a[live] >= 0]
    return d


def subtree_ends(parent: npt.NDArray[np.int64],
                 depth: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.int64] | None:
    """Each range's last descendant by index (itself if none); None unless the ranges are in pre-order.

    Pre-order: a stack walk's order (:func:`parents`), every subtree a block of indices. ``depth``:
    :func:`depths` of ``parent`` when the caller has it.
    """
    n = len(parent)
    idx = np.arange(n, dtype=np.int64)
    has = parent >= 0
    if (parent[has] >= idx[has]).any():
        return None
    end = idx + subtree_sums(np.ones(n, dtype=np.int64), parent, depth) - 1
    p = parent[has]
    # each range inside its parent's block, its own block too: then every block is exactly its subtree
    if ((idx[has] > end[p]) | (end[has] > end[p])).any():
        return None
    return end


def in_own_group(group: npt.NDArray[np.int64], parent: npt.NDArray[np.int64],
                 ends: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.bool_]:
    """Whether a range (``group`` >= 0) has an ancestor (by ``parent``) of its own group.

    In pre-order (:func:`subtree_ends`, or ``ends`` when the caller has them) an ancestor of ``i`` is
    an earlier range whose block reaches ``i``: a running maximum of the block ends over each group's
    ranges in index order. Otherwise, one level up each round.
    """
    ends = subtree_ends(parent) if ends is None else ends
    out = np.zeros(len(group), dtype=bool)
    if ends is None:
        return _in_own_group_by_levels(group, parent, out)
    rows = np.flatnonzero(group >= 0)
    if not len(rows):
        return out
    order = rows[np.argsort(group[rows], kind="stable")]  # by group, then by index
    base = group[order].astype(np.int64) * len(group)  # an earlier group's keys all lie below this
    reach = np.maximum.accumulate(base + ends[order])
    out[order[1:]] = reach[:-1] >= base[1:] + order[1:]
    return out


def _in_own_group_by_levels(group: npt.NDArray[np.int64], parent: npt.NDArray[np.int64],
                            out: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    live = np.flatnonzero((group >= 0) & (parent >= 0))
    anc = parent[live]
    while len(live):  # one level up each round, for the ranges not yet decided
        hit = group[anc] == group[live]
        out[live[hit]] = True
        keep = ~hit & (parent[anc] >= 0)
        live, anc = live[keep], parent[anc[keep]]
    return out


def chain_tops(parent: npt.NDArray[np.int64], kind: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """Each range's highest ancestor reached through parents of its own ``kind`` (itself if none)."""
    n = len(parent)
    idx = np.arange(n, dtype=np.int64)
    has = parent >= 0
    same = np.zeros(n, dtype=bool)
    same[has] = kind[parent[has]] == kind[has]
    a = np.where(same, parent, idx)
    while True:
        b = a[a]
        if np.array_equal(a, b):
            return a
        a = b
