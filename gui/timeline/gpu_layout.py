"""How a big report's GPU rows fall into lanes, and each lane's kinds' unions, kept for the next open (no Qt).

The first stage of a big report's timeline (``gui.timeline.columnar.ColumnarTimeline.load_gpu``)
reads every kernel, copy and memset once to find its (device, stream) lane, to check the ends
(missing, or before the start), whether each lane's events are in start order, and each kind's
union (block totals: :mod:`gui.timeline.sparse`). At 35M GPU operations that is a second of CPU
and ~800 MB read from the cached columns before the first paint; on a busy 2-core machine, or
with the columns out of the page cache, many more. None of it changes while the report does not,
so :class:`GpuLayout` keeps it beside the report's cached columns
(:meth:`engine.reports.nsys.timeline_reads.TimelineReads.keep`: the same report identity) as a few
arrays: the groups of each kind, one row per (lane, kind) part, and the unions' arrays packed
end to end. On a later open the first paint reads these (megabytes) and the columns only where
it draws.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gui.timeline import model as tm
from gui.timeline import sparse

#: the name of the kept arrays beside the columns (TimelineReads.keep)
NAME = "gpu-layout"
#: dense unions (overlapping or touching events) kept when of at most this many intervals in all
DENSE_KEEP_MAX = 4_000_000
#: a part's union type in :attr:`GpuLayout.parts`
_NONE, _SPARSE, _DENSE = 0, 1, 2

Groups = dict[tuple[int, int], "np.ndarray | None"]


class GpuLayout:
    """What the first stage works out from the GPU columns besides the columns themselves.

    Attributes:
        rows: kind -> rows of its table (the columns must still have as many to use the rest).
        fixed: kind -> True when some end was missing or before its start (the ends are worked out).
        groups: kind -> {(device, stream): its rows in table order, or None for all of them}.
        in_order: (lane index, kind) -> True when that part's starts are in order.
        unions: (lane index, kind) -> that part's union (see ``gui.timeline.columnar._union``).

    """

    def __init__(self) -> None:
        self.rows: dict[int, int] = {}
        self.fixed: dict[int, bool] = {}
        self.groups: dict[int, Groups] = {}
        self.in_order: dict[tuple[int, int], bool] = {}
        self.unions: dict[tuple[int, int], tm.Union] = {}
        #: (lane index, kind) -> the part noted (its order may be checked after the note)
        self._parts: dict[tuple[int, int], Any] = {}

    def lane_unions(self, lane: int) -> dict[int, tm.Union]:
        """The unions known of lane ``lane``'s parts, by kind."""
        return {k: u for (i, k), u in self.unions.items() if i == lane}

    def note(self, lane: int, parts: list[Any], unions: dict[int, tm.Union]) -> None:
        """Record lane ``lane``'s parts (``columnar._Part``: kind, starts, ``in_order``) and unions.

        A part's order is read when the layout is turned into arrays (the merge after the first
        paint may have checked it by then).
        """
        for p in parts:
            self._parts[(lane, p.kind)] = p
            u = unions.get(p.kind)
            if u is not None and len(p.starts) >= sparse.MIN_EVENTS:
                self.unions[(lane, p.kind)] = u

    # -- arrays kept on disk -----------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The layout as named arrays (what :meth:`from_arrays` reads back)."""
        for key, p in self._parts.items():
            if p.in_order is not None:
                self.in_order[key] = bool(p.in_order)
        out: dict[str, np.ndarray] = {
            "stride": np.array([sparse.STRIDE], dtype=np.int64),  # the block totals' block size
            "kinds": np.array([[k, n, int(self.fixed.get(k, True))] for k, n in sorted(self.rows.items())],
                              dtype=np.int64).reshape(-1, 3)}
        for k, groups in self.groups.items():
            keys = list(groups)
            out[f"groups{k}"] = np.array(keys, dtype=np.int64).reshape(-1, 2)
            if len(keys) > 1:  # each group's rows, end to end
                rows = [np.asarray(groups[g]) for g in keys]
                out[f"order{k}"] = np.concatenate(rows).astype(np.int32 if self.rows[k] < 2**31 else np.int64)
                out[f"bounds{k}"] = np.cumsum([0, *[len(r) for r in rows]]).astype(np.int64)
        parts, packed = self._packed_unions()
        out["parts"] = np.array(parts, dtype=np.int64).reshape(-1, 6)
        out.update(packed)
        return out

    def _packed_unions(self) -> tuple[list[list[int]], dict[str, np.ndarray]]:
        """One row per part (lane, kind, in order, union type, offsets) and the unions' arrays."""
        cols: dict[str, list[np.ndarray]] = {"sparse_cum": [], "sparse_first": [], "sparse_last": [],
                                             "dense_starts": [], "dense_ends": [], "dense_cum": []}
        at = {"sparse": 0, "dense": 0}
        dense_left = DENSE_KEEP_MAX
        rows = []
        for key in sorted(set(self.in_order) | set(self.unions)):
            lane, kind = key
            u = self.unions.get(key)
            kind_of, lo, n = _NONE, 0, 0
            if isinstance(u, sparse.SparseUnion):
                kind_of, lo, n = _SPARSE, at["sparse"], len(u.block_first)
                cols["sparse_cum"].append(np.asarray(u.block_cum[1:]))
                cols["sparse_first"].append(np.asarray(u.block_first))
                cols["sparse_last"].append(np.asarray(u.block_last))
                at["sparse"] += n
            elif u is not None and len(u[0]) <= dense_left:
                kind_of, lo, n = _DENSE, at["dense"], len(u[0])
                cols["dense_starts"].append(np.asarray(u[0]))
                cols["dense_ends"].append(np.asarray(u[1]))
                cols["dense_cum"].append(np.asarray(u[2][1:]))
                at["dense"] += n
                dense_left -= n
            rows.append([lane, kind, int(self.in_order.get(key, -1)), kind_of, lo, lo + n])
        packed = {name: np.concatenate(a) if a else np.zeros(0, dtype=np.int64) for name, a in cols.items()}
        return rows, packed

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], columns: dict[int, dict[str, np.ndarray]]
                    ) -> GpuLayout | None:
        """The layout kept as ``arrays``, for the GPU ``columns`` read now (kind -> its columns).

        None when it does not fit them (other kinds, other row counts, arrays missing): the caller
        works it out again.
        """
        try:
            if np.asarray(arrays["stride"]).tolist() != [sparse.STRIDE]:
                return None
            kinds = np.asarray(arrays["kinds"]).reshape(-1, 3)
            layout = cls()
            layout.rows = {int(k): int(n) for k, n, _ in kinds.tolist()}
            layout.fixed = {int(k): bool(f) for k, _, f in kinds.tolist()}
            if layout.rows != {k: len(c["start"]) for k, c in columns.items()}:
                return None
            for k in layout.rows:
                keys = [(int(d), int(s)) for d, s in np.asarray(arrays[f"groups{k}"]).tolist()]
                if len(keys) == 1:
                    layout.groups[k] = {keys[0]: None}
                else:
                    order, bounds = arrays[f"order{k}"], np.asarray(arrays[f"bounds{k}"]).tolist()
                    layout.groups[k] = {g: order[bounds[i]:bounds[i + 1]] for i, g in enumerate(keys)}
            for lane, kind, in_order, kind_of, lo, hi in np.asarray(arrays["parts"]).tolist():
                if in_order >= 0:
                    layout.in_order[(lane, kind)] = bool(in_order)
                if kind_of != _NONE:
                    layout.unions[(lane, kind)] = _union_of(arrays, kind_of, lo, hi)
        except (KeyError, ValueError, IndexError):
            return None
        return layout

    def bind(self, lane: int, kind: int, starts: np.ndarray, ends: np.ndarray) -> None:
        """Give a kept sparse union of part (``lane``, ``kind``) the part's own columns."""
        u = self.unions.get((lane, kind))
        if isinstance(u, sparse.SparseUnion):
            if len(u.block_first) != -(-len(starts) // sparse.STRIDE):
                del self.unions[(lane, kind)]  # not this part's (cannot happen with the rows checked)
                return
            u.starts, u.ends = starts, ends


def _union_of(arrays: dict[str, np.ndarray], kind_of: int, lo: int, hi: int) -> tm.Union:
    """A part's union from the packed arrays (a sparse one gets its columns in :meth:`GpuLayout.bind`)."""
    if kind_of == _SPARSE:
        cum = np.zeros(hi - lo + 1, dtype=np.int64)
        cum[1:] = arrays["sparse_cum"][lo:hi]
        empty = np.zeros(0, dtype=np.int64)
        # in memory, as the union worked out here holds them (1/32 of the columns: read whole by
        # the first paint's coverage anyway, and then looked up by every frame)
        first, last = np.array(arrays["sparse_first"][lo:hi]), np.array(arrays["sparse_last"][lo:hi])
        return sparse.SparseUnion(empty, empty, cum, first, last)
    cum = np.zeros(hi - lo + 1, dtype=np.int64)
    cum[1:] = arrays["dense_cum"][lo:hi]
    return arrays["dense_starts"][lo:hi], arrays["dense_ends"][lo:hi], cum
