"""The timeline of a big Nsight Systems export, built in stages from its columnar cache (no Qt).

:func:`gui.timeline.model.build_model` reads whole tables into pandas (names as Python strings),
which at 10M kernels and 20M CUDA API calls costs minutes and several GB. Here the lanes come from
the integer columns of :class:`engine.reports.nsys.columns.ColumnStore` (read from SQLite once, in
threads that run without Python's lock, then memory-mapped on every later open and shared with the
engine's summary and reports, so the app holds no second copy of the kernel table):

1. :meth:`ColumnarTimeline.load_gpu`: kernels, copies and memsets per GPU stream (painted first; a
   stream of several kinds from 2M events is drawn from each kind's union, its events merged by the
   next stage: :mod:`gui.timeline.coarse`);
2. :meth:`ColumnarTimeline.load_api`: CUDA API calls per CPU thread (first, the GPU lanes are merged
   and their arrays built in memory move to file mappings, :func:`gui.timeline.sparse.spill`: after
   the first paint);
3. :meth:`ColumnarTimeline.load_rest`: NVTX ranges and GPU metrics (through the trace's tables,
   as the pandas path does).

After each stage :meth:`ColumnarTimeline.model` gives a :class:`~gui.timeline.model.TimelineModel`
with the lanes so far, the same lanes (keys, labels, events, names) the pandas path builds. A lane
that is a whole table already in start order keeps the mapped columns themselves (no copy); names
are StringIds ids mapped to codes through a lookup table. The row of a hovered or clicked event is
read from SQLite by rowid (``NsysSqliteTrace.rows_by_id``), not kept in memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from engine.reports.nsys.timeline_reads import NULL, TimelineReads, cuda_events_over, keep_row_counts, pid_tid
from engine.system.arrays import distinct
from gui.timeline import coarse, gpu_layout, sparse
from gui.timeline import model as tm
from gui.timeline.lane_parts import Gathered
from gui.timeline.lane_parts import Part as _Part
from gui.timeline.style import color_index

#: NVTX events above which the NVTX lanes are left out (they are read through pandas)
NVTX_MAX = 2_000_000
def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        from engine.system.errors import Cancelled

        raise Cancelled


def factor(a: np.ndarray, release: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values in order, each row's index into them) of an integer column, fast for ids.

    Ids go through a lookup table a chunk at a time (no sort, no int64 copy of the column); with
    ``release`` each chunk's mapped pages are handed back once read (gui.timeline.sparse).
    """
    n = len(a)
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16)
    chunks = [(i, min(i + sparse.CHUNK, n)) for i in range(0, n, sparse.CHUNK)]

    def done(i: int, j: int) -> None:
        if release:
            sparse.release(a, i, j)

    lo, hi = int(a[0]), int(a[0])
    for i, j in chunks:
        lo, hi = min(lo, int(a[i:j].min())), max(hi, int(a[i:j].max()))
        done(i, j)
    if lo == hi:
        return np.array([lo], dtype=np.int64), np.zeros(n, dtype=np.int16)
    if lo >= 0 and hi < (1 << 26):  # ids: a lookup table instead of a sort
        seen = np.zeros(hi + 1, dtype=bool)
        for i, j in chunks:
            seen[a[i:j]] = True
            done(i, j)
        present = np.flatnonzero(seen)
        lut = np.zeros(hi + 1, dtype=_code_type(len(present)))
        lut[present] = np.arange(len(present))
        codes = np.empty(n, dtype=lut.dtype)
        for i, j in chunks:
            codes[i:j] = lut[a[i:j]]
            done(i, j)
        return present.astype(np.int64), codes
    uniq, inv = np.unique(np.asarray(a), return_inverse=True)
    done(0, n)
    return uniq.astype(np.int64), inv.reshape(-1).astype(_code_type(len(uniq)))


def _factor_released(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`factor` of a column, its mapped pages handed back as it goes (the codes are kept)."""
    return factor(a, release=True)


def _code_type(n: int) -> type[np.signedinteger[Any]]:
    """int16 for codes of fewer than 32,767 distinct values (half the memory), else int32."""
    return np.int16 if n < (1 << 15) - 1 else np.int32


def _sorted(a: np.ndarray) -> bool:
    """True when ``a`` is in order (checked a chunk at a time, mapped pages handed back)."""
    for i in range(0, len(a), sparse.CHUNK):
        c = a[i:i + sparse.CHUNK + 1]
        ok = bool(np.all(c[1:] >= c[:-1]))
        sparse.release(a, i, i + sparse.CHUNK)
        if not ok:
            return False
    return True


def _in_order(p: _Part) -> bool:
    """True when part ``p``'s starts are in order (checked once, or known from the kept layout)."""
    if p.in_order is None:
        p.in_order = _sorted(p.starts)
    return p.in_order


def _rows(p: _Part) -> np.ndarray:
    return np.arange(len(p.starts), dtype=np.int32) if p.rows is None else p.rows.astype(np.int32)


def _merge(parts: list[_Part]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, kinds, rows, codes) of parts in kind order, stably sorted by start."""
    if len(parts) > 1 and all(_in_order(p) for p in parts):
        return _merge_sorted(parts)
    st = np.concatenate([p.starts for p in parts])
    en = np.concatenate([p.ends for p in parts])
    nm = np.concatenate([p.codes for p in parts])
    kd = np.concatenate([np.full(len(p.starts), p.kind, dtype=np.int8) for p in parts])
    rows = np.concatenate([_rows(p) for p in parts])
    if not _sorted(st):
        order = np.argsort(st, kind="stable")  # runs already sorted: a merge (timsort)
        st, en, kd, rows, nm = st[order], en[order], kd[order], rows[order], nm[order]
    return st, en, kd, rows, nm


def _merge_sorted(parts: list[_Part]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_merge` of parts each already in start order, without a sort or a concatenation.

    Each event's place in the merge is its index in its part plus, in every other part, the events
    that come before it: those with an earlier start, and on an equal start those of a part
    earlier in the list (a stable sort of the parts in list order) -- one ``searchsorted`` per pair
    of parts. Each part is then written straight into its places: at 35M events the arrays of the
    concatenation and the argsort's 280 MB of indices are never made.
    """
    n = sum(len(p.starts) for p in parts)
    st = np.empty(n, dtype=np.result_type(*[p.starts for p in parts]))
    en = np.empty(n, dtype=np.result_type(*[p.ends for p in parts]))
    nm = np.empty(n, dtype=np.result_type(*[p.codes for p in parts]))
    kd = np.empty(n, dtype=np.int8)
    rows = np.empty(n, dtype=np.int32)
    for i, p in enumerate(parts):
        for a in range(0, len(p.starts), sparse.CHUNK):  # a chunk at a time: small temporaries
            b = min(a + sparse.CHUNK, len(p.starts))
            ps = p.starts[a:b]
            dest = np.arange(a, b, dtype=np.int64)
            for j, q in enumerate(parts):
                if j != i and len(q.starts):
                    dest += np.searchsorted(q.starts, ps, side="right" if j < i else "left")
            st[dest], en[dest], nm[dest] = ps, p.ends[a:b], p.codes[a:b]
            kd[dest] = p.kind
            rows[dest] = np.arange(a, b, dtype=np.int32) if p.rows is None else p.rows[a:b]
    return st, en, kd, rows, nm


def _merged(key: str, label: str, group: str, parts: list[_Part], unions: dict[int, tm.Union]) -> tm.Lane:
    """The lane of ``parts`` merged into start order, with each kind's union ``unions``."""
    st, en, kd, rows, nm = _merge(parts)
    return tm.Lane(key, label, group, st, en, kd, rows, nm, given_union=unions)


def exact(lane: tm.Lane) -> tm.Lane:
    """``lane`` with its events merged when it is a :class:`~gui.timeline.coarse.CoarseLane`."""
    if not isinstance(lane, coarse.CoarseLane):
        return lane
    return _lane(lane.key, lane.label, lane.group, lane.parts, lane.union)


def _lane(key: str, label: str, group: str, parts: list[_Part], known: dict[int, tm.Union] | None = None,
          coarse_first: bool = False) -> tm.Lane:
    """One lane from its parts, sorted by start (ties in kind order, as a stable sort of the
    parts in kind order gives); a single part already in order is not copied.

    ``known``: the parts' unions by kind where worked out before (the kept layout). With
    ``coarse_first`` (the GPU stage), a lane from :data:`~gui.timeline.coarse.COARSE_MIN_EVENTS`
    events is drawn from its kinds' unions first and made by :func:`exact` after the first paint.
    """
    known = known or {}

    def union_of(p: _Part, read: bool = True) -> tm.Union:
        got = known.get(p.kind)
        if got is None:
            return _union(p.starts, p.ends)
        if read and isinstance(got, sparse.SparseUnion) and isinstance(got.starts, Gathered):
            got.starts, got.ends = p.starts, p.ends  # the part's events, gathered now, for the frames
        return got

    if coarse_first and sum(len(p) for p in parts) >= coarse.COARSE_MIN_EVENTS:
        # each kind's union from its own part (mapped, block totals), not from copies of the merge;
        # the order of the events is checked, and their names worked out, by the next stage
        return coarse.CoarseLane(key, label, group, parts, {p.kind: union_of(p, read=False) for p in parts})
    if len(parts) == 1 and _in_order(parts[0]):
        p = parts[0]
        kd: np.ndarray = np.broadcast_to(np.int8(p.kind), (len(p.starts),))
        given = {p.kind: union_of(p)} if len(p.starts) >= sparse.MIN_EVENTS else None  # (as tm.Lane's own)
        return tm.Lane(key, label, group, p.starts, p.ends, kd, p.rows, p.codes, given_union=given)
    big = max(parts, key=lambda p: len(p.starts))
    small = [p for p in parts if p is not big]
    if not _in_order(big) or sum(len(p.starts) for p in small) * 8 > len(big.starts):
        return _merged(key, label, group, parts, {p.kind: union_of(p) for p in parts})
    # a few copies among many kernels: insert them (one pass) instead of sorting everything
    s_st, s_en, s_kd, s_rows, s_nm = _merge(small)
    before = s_kd < big.kind  # on equal starts these come first
    pos = np.where(before, np.searchsorted(big.starts, s_st, side="left"),
                   np.searchsorted(big.starts, s_st, side="right"))
    codes = big.codes.astype(np.result_type(big.codes, s_nm), copy=False)
    # each kind's union from its own part (the big one mapped, block totals): no per-kind copies
    union: dict[int, tm.Union] = {big.kind: union_of(big)}
    for k in distinct(s_kd).tolist():
        sel = s_kd == k
        union[int(k)] = tm.union_intervals(s_st[sel], s_en[sel])
    # kinds and rows are read one event at a time (the event under the pointer): kept as the few
    # inserted values and where they went, not as arrays of every event (no 50 MB to build)
    order = np.argsort(pos, kind="stable")  # as np.insert places them: by position, then given order
    dest = np.empty(len(pos), dtype=np.int64)
    dest[order] = pos[order] + np.arange(len(pos))
    n = len(big.starts) + len(pos)
    keep = _kept(n, dest)
    lane_kinds = Spliced(n, dest, s_kd, fill=big.kind)
    lane_rows = Spliced(n, dest, s_rows.astype(np.int32), fill=None if big.rows is None else big.rows)
    lane = tm.Lane(key, label, group, _splice(big.starts, dest, s_st, keep),
                   _splice(big.ends, dest, s_en, keep), lane_kinds, lane_rows,  # type: ignore[arg-type]
                   _splice(codes, dest, s_nm, keep), given_union=union)
    for a in (big.starts, big.ends, big.codes):
        sparse.release(a, 0, len(a))
    return lane


class Spliced:
    """A lane's column where a few values were inserted into a regular one, read an event at a time.

    Event ``i`` is ``values[k]`` when ``i == dest[k]`` (``dest`` sorted: where each inserted value
    went), else the ``i - k``-th value of the column it was inserted into, ``k`` being the number
    of inserted values before ``i``: the constant ``fill``, that position itself (``fill`` None:
    rows of a table in order), or ``fill[i - k]`` (an array). ``np.asarray`` gives every event.
    """

    def __init__(self, n: int, dest: np.ndarray, values: np.ndarray,
                 fill: int | np.ndarray | None) -> None:
        self.n, self.dest, self.values, self.fill = n, dest, values, fill
        self.dtype = values.dtype

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        i = int(i)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        k = int(np.searchsorted(self.dest, i))
        if k < len(self.dest) and int(self.dest[k]) == i:
            return self.values[k]
        j = i - k
        if self.fill is None:
            return self.dtype.type(j)
        if isinstance(self.fill, np.ndarray):
            return self.fill[j]
        return self.dtype.type(self.fill)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        base_n = self.n - len(self.dest)
        if self.fill is None:
            base = np.arange(base_n, dtype=self.dtype)
        elif isinstance(self.fill, np.ndarray):
            base = np.asarray(self.fill, dtype=self.dtype)
        else:
            base = np.full(base_n, self.fill, dtype=self.dtype)
        out = _splice(base, self.dest, self.values, _kept(self.n, self.dest))
        return out if dtype is None else out.astype(dtype, copy=False)


def _kept(n: int, dest: np.ndarray) -> np.ndarray:
    """Which of ``n`` places keep the column's own values (not one of the inserted at ``dest``)."""
    keep = np.ones(n, dtype=bool)
    keep[dest] = False
    return keep


def _splice(base: np.ndarray, dest: np.ndarray, values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``base`` with ``values`` inserted at places ``dest`` of the result (``keep``: the others).

    What ``np.insert(base, pos, values)`` gives for the ``dest`` its positions place them at, in
    ``base``'s type, with the places worked out once for every column of a lane.
    """
    out = np.empty(len(keep), dtype=base.dtype)
    out[dest] = values
    out[keep] = base
    return out


def _union(starts: np.ndarray, ends: np.ndarray) -> tm.Union:
    """The union of one kind's intervals: block totals when big, sorted and disjoint, else dense."""
    su = sparse.scan(starts, ends) if len(starts) >= sparse.MIN_EVENTS else None
    if su is not None:
        return su
    if not _sorted(starts):
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    return tm.union_intervals(starts, ends)


class ColumnarTimeline:
    """The lanes of one big nsys SQLite trace, loaded stage by stage (see the module docstring).

    Args:
        trace: an ``engine.reports.nsys.sqlite_trace.NsysSqliteTrace`` (its column store, its
            ``rows_by_id`` for the rows under the pointer, its tables for NVTX and GPU metrics).

    """

    def __init__(self, trace: Any) -> None:
        self.trace = trace
        #: the engine's column reads of this trace (tables, SQL, cache, rows by position)
        self.reads = TimelineReads(trace)
        self.lanes: dict[str, list[tm.Lane]] = {"api": [], "gpu": [], "nvtx": [], "metric": []}
        self.names: list[np.ndarray] = []
        self.colors: list[np.ndarray] = []
        self.n_names = 0
        self.missing: dict[str, str] = {}
        self.tables: dict[str, Any] = {}
        self.loaded: list[str] = []
        self._lock = threading.Lock()
        #: the GPU lanes' layout worked out by the first stage, kept beside the columns by the next
        self._layout_to_keep: gpu_layout.GpuLayout | None = None

    # -- stages ------------------------------------------------------------------------------------
    def cached(self, stage: str) -> bool:
        """True when every column stage ``stage`` ("gpu" or "api") reads is in the cache already."""
        return self.reads.cached(stage)

    def load_gpu(self, cancel: threading.Event | None = None) -> None:
        """Kernels, memcpy and memset: one lane per (device, stream).

        What the lanes need besides the columns (the groups, the ends' check, the order, the
        unions: :class:`~gui.timeline.gpu_layout.GpuLayout`) comes from the arrays an earlier open
        kept beside the cached columns; without them it is worked out here and kept by the next
        stage (after the first paint).
        """
        kinds = (tm.KIND_KERNEL, tm.KIND_MEMCPY, tm.KIND_MEMSET)
        pending = {k: self._read(k) for k in kinds}
        data: dict[int, dict[str, np.ndarray]] = {}
        for k in kinds:
            p = pending[k]
            if p is not None:
                data[k] = p.result()
                _check(cancel)
        data = {k: c for k, c in data.items() if len(c["start"])}
        kept = self.reads.kept(gpu_layout.NAME)
        layout = None if kept is None else gpu_layout.GpuLayout.from_arrays(kept, data)
        fresh = layout is None
        if layout is None:
            layout = gpu_layout.GpuLayout()
            layout.rows = {k: len(c["start"]) for k, c in data.items()}
            layout.groups = {k: self._groups(c, cancel) for k, c in data.items()}
        times = {k: self._times(c, layout.fixed.get(k)) for k, c in data.items()}
        layout.fixed = {k: fixed for k, (_st, _en, fixed) in times.items()}
        pairs = sorted({pair for groups in layout.groups.values() for pair in groups})
        kind_codes: dict[int, np.ndarray] = {}

        def codes(k: int, rows: np.ndarray | None) -> Callable[[], np.ndarray]:
            def work() -> np.ndarray:  # a kind's codes once, when a lane first needs them
                if k not in kind_codes:
                    kind_codes[k] = self._codes(k, data[k])
                return kind_codes[k] if rows is None else kind_codes[k][rows]
            return work

        lanes = []
        for i, (d, s) in enumerate(pairs):
            parts = []
            for k in kinds:
                rows = layout.groups.get(k, {}).get((d, s), "absent")
                if isinstance(rows, str):
                    continue
                st, en, _fixed = times[k]
                if rows is not None and fresh:
                    st, en = st[rows], en[rows]
                # with the layout kept, a stream's rows of a shared table are gathered by the merge
                part = _Part(k, rows, st, en, codes(k, rows), layout.in_order.get((i, k)),
                             gather_later=not fresh)
                layout.bind(i, k, *part.views())
                parts.append(part)
            if parts:
                ds, ss = _text(d), _text(s)
                lane = _lane(f"gpu:{ds}:{ss}", f"GPU {ds} · stream {ss}", "gpu", parts, layout.lane_unions(i),
                             coarse_first=True)
                lanes.append(lane)
                if fresh:
                    layout.note(i, parts, lane.union)
                _check(cancel)
        self.lanes["gpu"] = lanes  # moved to file mappings by the next stage (after the first paint)
        self._layout_to_keep = layout if fresh else None
        self.loaded.append("gpu")

    @staticmethod
    def _groups(c: dict[str, np.ndarray], cancel: threading.Event | None) -> gpu_layout.Groups:
        """A GPU table's rows by (device, stream): each group's rows in table order (None: all)."""
        (ud, cd), (us, cs) = _factor_released(c["deviceId"]), _factor_released(c["streamId"])
        if len(ud) == 1 and len(us) == 1:
            return {(int(ud[0]), int(us[0])): None}
        g = cd.astype(np.int64) * len(us) + cs
        ug, cg = factor(g)
        order = np.argsort(cg.astype(np.int16) if len(ug) < 32_000 else cg, kind="stable")
        bounds = np.searchsorted(cg[order], np.arange(len(ug) + 1))
        _check(cancel)
        return {(int(ud[v // len(us)]), int(us[v % len(us)])): order[bounds[i]:bounds[i + 1]]
                for i, v in enumerate(ug.tolist())}

    def load_api(self, cancel: threading.Event | None = None) -> None:
        """CUDA API calls: one lane per CPU thread (and the GPU lanes' arrays moved to files)."""
        pending = self._read(tm.KIND_API)
        gpu = self.lanes["gpu"]
        if self._layout_to_keep is not None:  # for the next open's first paint, before the merges
            for ln in gpu:  # (a window closed during them keeps it too)
                for part in getattr(ln, "parts", ()):
                    _in_order(part)  # known to the layout, and to the merge then
            self.reads.keep(gpu_layout.NAME, self._layout_to_keep.to_arrays())
            self._layout_to_keep = None
        keep_row_counts(self.trace)  # the next open counts no big table (big10m's syncs: 0.75 s)
        for i, ln in enumerate(gpu):  # in place: the model shown holds these lanes
            gpu[i] = self._spill(exact(ln))  # a lane drawn from its unions so far is merged now
            _check(cancel)
        lanes: list[tm.Lane] = []
        if pending is not None:
            c = pending.result()
            _check(cancel)
            if len(c["start"]):
                st, en, _fixed = self._times(c)
                codes = self._codes(tm.KIND_API, c)
                g = np.asarray(c["globalTid"])
                ug, cg = factor(g)
                if len(ug) == 1:
                    groups: list[tuple[int, np.ndarray | None]] = [(int(ug[0]), None)]
                else:
                    order = np.argsort(cg.astype(np.int16) if len(ug) < 32_000 else cg, kind="stable")
                    bounds = np.searchsorted(cg[order], np.arange(len(ug) + 1))
                    groups = [(int(v), order[bounds[i]:bounds[i + 1]]) for i, v in enumerate(ug.tolist())]
                # lanes in (pid, tid) order, as the pandas path gives them
                keyed = sorted(((pid_tid(v), rows) for v, rows in groups), key=lambda kv: kv[0])
                for (pid, tid), rows in keyed:
                    part = (_Part(tm.KIND_API, None, st, en, codes) if rows is None
                            else _Part(tm.KIND_API, rows, st[rows], en[rows], codes[rows]))
                    lanes.append(_lane(f"api:{_text(pid)}:{_text(tid)}",
                                       f"Thread {_text(tid)} · CUDA API", "api", [part]))
                    _check(cancel)
        self.lanes["api"] = [self._spill(ln) for ln in lanes]
        self.loaded.append("api")

    def load_rest(self, cancel: threading.Event | None = None) -> None:
        """NVTX ranges and GPU metrics, from the trace's tables (as the pandas path reads them)."""
        import pandas as pd

        for name in ("nvtx", "gpu_metrics"):
            n = self.trace.row_count(name) or 0
            if name == "nvtx" and n > NVTX_MAX:  # read through pandas: a few GB at 20M ranges
                self.missing[name] = (f"NVTX: {n:,} events, more than the timeline reads "
                                      f"({NVTX_MAX:,}); `kernelscope stats -r nvtx_sum` sums them up.")
                self.tables[name] = pd.DataFrame({c: pd.Series(dtype=object) for c in tm.COLUMNS[name]})
                continue
            self.tables[name] = self.trace.table(name, columns=tm.COLUMNS[name])
            if name in self.trace.missing:
                self.missing[name] = tm._missing_sentence(name, self.trace.missing[name])
            _check(cancel)
        nvtx = self.tables["nvtx"]
        if len(nvtx):
            c, uniq = pd.factorize(nvtx["text"].fillna("").astype(str))
            codes = np.asarray(c, dtype=np.int32) + self._add_names(
                np.asarray(uniq, dtype=object), tm.KIND_NVTX)
            st = np.asarray(nvtx["start"], dtype=np.float64).astype(np.int64)
            en = np.asarray(nvtx["end"], dtype=np.float64)
            en = np.maximum(np.where(np.isnan(en), st, en).astype(np.int64), st)
            self.lanes["nvtx"] = tm.nvtx_lanes(nvtx, (st, en), codes, lambda: _check(cancel))
        self.lanes["metric"] = tm.metric_lanes(self.tables["gpu_metrics"]) + tm.memory_lanes(self.trace)
        self.loaded.append("rest")

    # -- the model -----------------------------------------------------------------------------------
    def model(self, pending: str = "") -> tm.TimelineModel:
        """The lanes loaded so far as a TimelineModel (``pending``: what is still loading)."""
        lanes = [*self.lanes["api"], *self.lanes["gpu"], *self.lanes["nvtx"], *self.lanes["metric"]]
        names = np.concatenate(self.names) if self.names else np.zeros(0, dtype=object)
        colors = np.concatenate(self.colors) if self.colors else np.zeros(0, dtype=np.int8)
        t_min, t_max, a_min, a_max = tm.spans(lanes)
        missing = [self.missing[n] for n in tm.COLUMNS if n in self.missing]
        return tm.TimelineModel(lanes, names, colors, dict(self.tables), t_min, t_max, missing,
                                activity_min=a_min, activity_max=a_max,
                                row_source=self.row, launch_of=self.launch_index, pending=pending)

    def row(self, table: str, row: int) -> dict[str, Any]:
        """Row ``row`` (position in rowid order) of big table ``table``, resolved as trace.table gives it."""
        rowid = self.reads.rowid(table, row)
        df = self.trace.rows_by_id(table, [rowid], tm.COLUMNS[table])
        return {k: tm._py(v) for k, v in df.iloc[0].items()}

    def launch_index(self, row: int) -> int:
        """Launches of kernels of the same base name before kernels-table ``row`` (start order).

        What ``ncu_order`` holds in the pandas model, counted by SQLite for the one row asked (a
        scan of the kernel table: only done for the ncu link, when an ncu report is open).
        """
        return self.reads.launch_index(row)

    # -- helpers ---------------------------------------------------------------------------------------
    def _spill(self, lane: tm.Lane) -> tm.Lane:
        """A big lane's arrays built in memory moved to file mappings (gui.timeline.sparse.spill,
        next to the report's cached columns): resident then only where drawn, like the columns."""
        if len(lane) < sparse.MIN_EVENTS:
            return lane
        where = self.reads.cache_dir
        moved: dict[int, np.ndarray] = {}

        def move(a: np.ndarray | None) -> Any:
            if a is None or not isinstance(a, np.ndarray):  # (a Spliced column is small)
                return a
            if id(a) not in moved:
                moved[id(a)] = sparse.spill(a, where)
            return moved[id(a)]

        for name in ("starts", "ends", "kinds", "rows", "names", "run_max_end"):
            setattr(lane, name, move(getattr(lane, name)))
        for k, u in list(lane.union.items()):
            if isinstance(u, sparse.SparseUnion):
                u.starts, u.ends = move(u.starts), move(u.ends)
            else:
                lane.union[k] = (move(u[0]), move(u[1]), move(u[2]))
        return lane

    def _read(self, kind: int) -> Any:
        """Start reading a table's columns (None when the table was not captured)."""
        name = tm.KIND_TABLES[kind]
        pending = self.reads.read(name)
        if pending is None:
            self.missing[name] = tm._missing_sentence(name, self.trace.missing[name])
        return pending

    @staticmethod
    def _times(c: dict[str, np.ndarray], fixed: bool | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
        """(start, end, fixed) int64; a missing end is the start, an end before the start is the start.

        ``fixed`` (known from the kept layout) says whether any end needs that; None: checked here.
        """
        st, en = c["start"], c["end"]
        if fixed is None:
            fixed = False
            for i in range(0, len(st), sparse.CHUNK):  # a chunk at a time, mapped pages handed back
                s, e = st[i:i + sparse.CHUNK], en[i:i + sparse.CHUNK]
                fixed = fixed or bool((e == NULL).any()) or bool((e < s).any())
                for col in (st, en):
                    sparse.release(col, i, i + sparse.CHUNK)
        if fixed:
            en = np.maximum(np.where(en == NULL, st, en), st)
        return st, en, fixed

    def _add_names(self, names: np.ndarray, kind: int) -> int:
        """Append names to the model's name table; returns the code of the first."""
        with self._lock:
            off = self.n_names
            self.names.append(names)
            self.colors.append(np.array([color_index(kind, str(u)) for u in names], dtype=np.int8))
            self.n_names += len(names)
        return off

    def _codes(self, kind: int, c: dict[str, np.ndarray]) -> np.ndarray:
        """Each row's code into the model's names."""
        n = len(c["start"])
        strings = self.reads.strings()
        if kind == tm.KIND_MEMSET:
            off = self._add_names(np.array(["[CUDA memset]"], dtype=object), kind)
            return np.full(n, off, dtype=_code_type(off + 1))
        if kind == tm.KIND_MEMCPY:
            labels = self.reads.copy_labels()
            uniq, codes = _factor_released(c["copyKind"])
            names = [f"[CUDA memcpy {labels.get(v, 'nan') if v != NULL else 'nan'}]" for v in uniq.tolist()]
        else:
            uniq, codes = _factor_released(c["nameId"])
            miss = "<unknown {}>" if kind == tm.KIND_API else ""
            names = ["" if v == NULL else strings.get(v, miss.format(v)) for v in uniq.tolist()]
        # equal names (two ids of one string) share one code, as pandas' factorize of the names does
        text = np.array(names, dtype=object)
        distinct, remap = np.unique(text.astype(str), return_inverse=True) if len(text) else (text, text)
        off = self._add_names(np.asarray(distinct, dtype=object), kind)
        lut = (np.asarray(remap).reshape(-1) + off).astype(_code_type(off + len(distinct)))
        out: np.ndarray = lut[codes]
        return out


#: CUDA events (API calls, kernels, copies, memsets) above which an nsys report's timeline is read
#: here, in stages (below it, the pandas path of gui.timeline.model)
BIG_EVENTS = 200_000


def is_big(trace: Any, rows: dict[str, int | None], min_events: int | None = None) -> bool:
    """True when ``trace`` is an nsys SQLite report with more than ``min_events`` (default
    :data:`BIG_EVENTS`) CUDA events."""
    return cuda_events_over(trace, rows, BIG_EVENTS if min_events is None else min_events)


def prefetch_gpu(trace: Any) -> tuple[ColumnarTimeline, Future[None]] | None:
    """Start reading the GPU lanes of ``trace`` in a thread (while the window builds its views).

    Returns the timeline and a future that is done (or holds the error) once its GPU stage is;
    None when the columns are not cached yet (a first open parses them holding Python's lock
    for seconds, which would stall the window's start instead).
    """
    timeline = ColumnarTimeline(trace)
    if not timeline.cached("gpu"):
        return None
    done: Future[None] = Future()

    def run() -> None:
        try:
            timeline.load_gpu()
        except BaseException as exc:  # noqa: BLE001 - handed to the stage that waits for it
            done.set_exception(exc)
        else:
            done.set_result(None)

    threading.Thread(target=run, name="ks-timeline-prefetch", daemon=True).start()
    return timeline, done


def _text(v: int) -> str:
    return "?" if v == NULL else str(v)


def build_columnar(trace: Any, cancel: threading.Event | None = None) -> tm.TimelineModel:
    """Every stage at once (tests, scripts): the full columnar model of ``trace``."""
    tl = ColumnarTimeline(trace)
    tl.load_gpu(cancel)
    tl.load_api(cancel)
    tl.load_rest(cancel)
    return tl.model()
