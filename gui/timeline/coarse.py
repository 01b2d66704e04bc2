"""A big GPU stream lane of several event kinds, drawn from each kind's union until it is merged (no Qt).

A stream of 10M kernels, 20M copies and 5M memsets is one lane of 35M events sorted by start; the
merge of its three tables costs seconds (``gui.timeline.columnar._merge``). What the canvas draws
zoomed out needs none of it: the busy fraction of each pixel column comes from each kind's union
(block totals over the kind's own sorted columns, :mod:`gui.timeline.sparse`), which the lane keeps
per kind anyway. :class:`CoarseLane` is that lane before its merge: the same key, label, unions and
time span as the merged lane, drawn as coverage at every zoom (exact: the unions are), with the
events in view counted on each kind's own columns. The next stage replaces it with the merged
lane (``ColumnarTimeline.load_api``), which then draws events one by one when zoomed in and answers
hovers and clicks.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from gui.timeline import model as tm
from gui.timeline import sparse

#: lanes of several kinds with at least this many events are merged after the first paint
COARSE_MIN_EVENTS = 2_000_000


def union_span(union: tm.Union) -> tuple[int, int]:
    """(first start, last end) of a kind's union (sorted and disjoint: the ends are in order)."""
    if isinstance(union, sparse.SparseUnion):
        return int(union.block_first[0]), int(union.block_last[-1])
    return int(union[0][0]), int(union[1][-1])


class CoarseLane(tm.Lane):
    """A lane drawn from its kinds' unions only; ``parts`` (``columnar._Part``) are merged later.

    ``starts`` and ``ends`` hold one interval, the lane's span (what ``tm.spans`` and "show all"
    read); ``len`` is the number of events of every part.
    """

    coarse: ClassVar[bool] = True

    def __init__(self, key: str, label: str, group: str, parts: list[Any],
                 unions: dict[int, tm.Union]) -> None:
        spans = [union_span(u) for u in unions.values()]
        first, last = min(s for s, _ in spans), max(e for _, e in spans)
        super().__init__(key, label, group, np.array([first], dtype=np.int64),
                         np.array([last], dtype=np.int64), np.array([parts[0].kind], dtype=np.int8),
                         None, np.zeros(1, dtype=np.int32), given_union=unions)
        self.parts = parts
        self.n_events = sum(len(p) for p in parts)  # (not read: the parts gather theirs when merged)

    def __len__(self) -> int:
        return self.n_events

    def visible_slice(self, t0: float, t1: float) -> tuple[int, int]:
        """(0, events that may overlap [t0, t1]): per kind, those starting in it and the one before.

        A kind of block totals is counted on its blocks' first starts (in memory: no page of its
        columns read, which with the report out of the page cache costs a disk read-ahead each):
        every event of the blocks that may hold one, at most a block too many at each side, and
        exact over the whole lane.
        """
        n = 0
        for p in self.parts:
            u = self.union.get(p.kind)
            if isinstance(u, sparse.SparseUnion) and len(u) == len(p):
                first = u.block_first
                b = int(np.searchsorted(first, math.ceil(t0), side="left"))
                hb = int(np.searchsorted(first, math.floor(t1), side="right"))
                n += max(min(hb * sparse.STRIDE, len(p)) - max((b - 1) * sparse.STRIDE, 0), 0)
                continue
            lo = max(int(np.searchsorted(p.starts, math.ceil(t0), side="left")) - 1, 0)
            hi = int(np.searchsorted(p.starts, math.floor(t1), side="right"))
            n += max(hi - lo, 0)
        return 0, n

    def event_at(self, t: float, tol: float) -> int | None:
        """None: the events are not in start order yet (no hover or click before the merge)."""
        return None

    def release_pages(self, lo: int = 0, hi: int = 0) -> None:
        """Hand back the pages a frame read of the kinds' mapped columns (see tm.Lane)."""
        for u in self.union.values():
            if isinstance(u, sparse.SparseUnion):
                for arr in u.arrays():
                    sparse.release_outside(arr, 0, 0)
        for p in self.parts:
            sparse.release_outside(p.starts_if_read, 0, 0)
