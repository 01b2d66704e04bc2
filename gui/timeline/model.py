"""Timeline rows as sorted numpy arrays, built once per report off the GUI thread.

No Qt here: the canvas asks this module what to draw for a visible time range at screen
resolution. A row is either a lane of intervals (CUDA API calls of one CPU thread, the kernels /
copies / memsets of one GPU stream, one nesting level of NVTX ranges of one thread) or a lane of
samples (one GPU metric of one GPU).

Level of detail: when a lane has more intervals in view than the canvas can draw one by one,
the canvas draws the fraction of each pixel column that the lane is busy (:func:`coverage`).
That is computed exactly from the union of the lane's intervals and its running total, so one
frame costs O(pixels · log n) whatever the zoom, instead of O(events).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import Any, ClassVar

import numpy as np

from gui.timeline import sparse

#: the merged intervals of a lane's kind: (starts, ends, busy ns before each), or block totals
Union = tuple[np.ndarray, np.ndarray, np.ndarray] | sparse.SparseUnion

#: event kinds inside a GPU stream lane (index into KIND_NAMES)
KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_API, KIND_NVTX = range(5)
KIND_NAMES = ("kernel", "memcpy", "memset", "api", "nvtx")
KIND_TABLES = ("kernels", "memcpy", "memset", "api", "nvtx")

#: the columns the timeline reads from each table (what the tooltips and details show)
COLUMNS: dict[str, list[str]] = {
    "kernels": [
        "start", "end", "deviceId", "streamId", "correlationId", "pid", "name", "shortName",
        "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
        "staticSharedMemory", "dynamicSharedMemory",
    ],
    "memcpy": [
        "start", "end", "deviceId", "streamId", "correlationId", "pid", "bytes", "operation",
        "srcKindName", "dstKindName",
    ],
    "memset": ["start", "end", "deviceId", "streamId", "correlationId", "pid", "bytes", "memKindName"],
    "api": ["start", "end", "pid", "tid", "correlationId", "name"],
    "nvtx": ["start", "end", "eventType", "text", "domain", "pid", "tid"],
    "gpu_metrics": ["timestamp", "gpu", "metricName", "value"],
}

#: NVTX event types drawn as ranges (push/pop, start/end) and marks (instants)
NVTX_RANGE_TYPES = (59, 60)
NVTX_MARK_TYPE = 34


@dataclass
class Lane:
    """One row of the timeline: intervals sorted by start (or metric samples sorted by time)."""

    key: str
    label: str
    group: str  # "api", "gpu", "nvtx", "metric"
    starts: np.ndarray  # int64 ns (metric lanes: sample times)
    ends: np.ndarray  # int64 ns (metric lanes: the next sample's time)
    kinds: np.ndarray  # int8 KIND_* of each event (metric lanes: empty)
    #: int32 position of each event in its source table (trace.table(KIND_TABLES[kind])); None:
    #: event i is row i (a lane that is a whole table in order, in the columnar model)
    rows: np.ndarray | None
    names: np.ndarray  # int16/int32 code into TimelineModel.names
    values: np.ndarray | None = None  # metric lanes: sample values
    value_max: float = 1.0  # metric lanes: top of the lane's scale
    unit: str = ""
    sublabel: str = ""  # second line under the label (metric lanes: GPU and scale)
    # derived, for fast queries
    run_max_end: np.ndarray = field(init=False, repr=False)
    #: per event kind: the merged intervals and their running busy total (for coverage); a big
    #: lane of disjoint intervals keeps block totals instead (gui.timeline.sparse)
    union: dict[int, Union] = field(init=False, repr=False)
    #: the unions, when the builder has them per kind already (the columnar model's mixed lanes)
    given_union: InitVar[dict[int, Union] | None] = None
    #: True for a lane drawn from its kinds' unions until merged (gui.timeline.coarse.CoarseLane):
    #: coverage at every zoom, no events one by one
    coarse: ClassVar[bool] = False

    def __post_init__(self, given_union: dict[int, Union] | None = None) -> None:
        kd = self.kinds
        if given_union is not None:
            e = self.ends
            only = next(iter(given_union.values())) if len(given_union) == 1 else None
            if isinstance(only, sparse.SparseUnion) and len(only) == len(e):
                self.run_max_end = e  # block totals of the lane's own events: sorted and disjoint
            elif len(e) < 2 or bool(np.all(e[1:] >= e[:-1])):
                self.run_max_end = e
            else:
                self.run_max_end = np.maximum.accumulate(e)
            self.union = given_union
            return
        one_kind = len(kd) > 0 and kd.strides == (0,)  # broadcast: one kind (the columnar model)
        if self.values is None and one_kind and len(self.starts) >= sparse.MIN_EVENTS:
            su = sparse.scan(self.starts, self.ends)  # chunk by chunk, mapped pages handed back
            if su is not None:
                self.run_max_end = self.ends  # disjoint and sorted: the ends are in order
                self.union = {int(kd[0]): su}
                return
        e = self.ends
        monotonic = len(e) < 2 or bool(np.all(e[1:] >= e[:-1]))
        self.run_max_end = e if monotonic else np.maximum.accumulate(e)  # shared when already sorted
        self.union = {}
        if self.values is None:
            if one_kind:  # no scan of the kinds
                present = [int(kd[0])]
            else:
                present = np.flatnonzero(np.bincount(kd, minlength=len(KIND_NAMES))).tolist()
            for k in present:
                if len(present) == 1:  # one kind (every lane but GPU streams): no selection copy
                    self.union[int(k)] = union_intervals(self.starts, self.ends)
                else:
                    sel = self.kinds == k
                    self.union[int(k)] = union_intervals(self.starts[sel], self.ends[sel])

    def __len__(self) -> int:
        return len(self.starts)

    def release_pages(self, lo: int = 0, hi: int = 0) -> None:
        """Hand back the resident pages of the lane's mapped arrays, but those of events [lo, hi)
        (drawn one by one, kept for the next frame): see gui.timeline.sparse.release."""
        own = (self.starts, self.ends, self.kinds, self.rows, self.names, self.run_max_end)
        for arr in own:
            sparse.release_outside(arr, lo, hi)
        for u in self.union.values():  # block totals read only a few blocks' events per frame
            if isinstance(u, sparse.SparseUnion):
                for arr in u.arrays():
                    if not any(arr is a for a in own):
                        sparse.release_outside(arr, 0, 0)

    @property
    def is_metric(self) -> bool:
        return self.values is not None

    def visible_slice(self, t0: float, t1: float) -> tuple[int, int]:
        """Index range [lo, hi) of the events that may overlap [t0, t1] (sorted by start)."""
        if not len(self.starts):
            return 0, 0
        # integer queries: a float one would make numpy convert the whole int64 array each time
        lo = int(np.searchsorted(self.run_max_end, math.ceil(t0), side="left"))
        hi = int(np.searchsorted(self.starts, math.floor(t1), side="right"))
        return lo, max(lo, hi)

    def event_at(self, t: float, tol: float) -> int | None:
        """Index of the event under time ``t`` (within ``tol`` ns); the shortest wins when nested."""
        if self.is_metric or not len(self.starts):
            return None
        lo, hi = self.visible_slice(t - tol, t + tol)
        if hi <= lo:
            return None
        lo = max(lo, hi - 20_000)  # a long event early on must not make a hover scan everything
        s = self.starts[lo:hi]
        e = self.ends[lo:hi]
        hit = np.nonzero((e >= t - tol) & (s <= t + tol))[0]
        if not len(hit):
            return None
        inside = hit[(s[hit] <= t) & (e[hit] >= t)]
        pick = inside if len(inside) else hit
        best = pick[np.argmin((e[pick] - s[pick]) + np.abs((s[pick] + e[pick]) / 2 - t) * 1e-9)]
        return lo + int(best)

    def sample_at(self, t: float) -> int | None:
        """Index of the metric sample in effect at time ``t``."""
        if not self.is_metric or not len(self.starts):
            return None
        i = int(np.searchsorted(self.starts, math.floor(t), side="right")) - 1
        return i if 0 <= i < len(self.starts) else None


@dataclass
class TimelineModel:
    """Everything the canvas draws for one report."""

    lanes: list[Lane]
    names: np.ndarray  # object array of event names (codes in Lane.names)
    name_colors: np.ndarray  # int8 palette index of each name (gui.timeline.style.PALETTE)
    tables: dict[str, Any]  # table name -> the DataFrame the lane rows index into
    t_min: int
    t_max: int
    missing: list[str]  # sentences: what this report lacks for the timeline
    #: kernels-table row -> its launch index among kernels of the same short name (for the ncu link)
    ncu_order: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: span of the CUDA and NVTX events (GPU metrics are sampled over the whole capture)
    activity_min: int = 0
    activity_max: int = 1
    #: (table, row) -> the row as a dict, for tables not held in ``tables`` (the columnar model
    #: of a big report reads one row from SQLite when an event is hovered or clicked)
    row_source: Callable[[str, int], dict[str, Any]] | None = None
    #: kernels-table row -> launch index (computed on demand where ``ncu_order`` is not kept)
    launch_of: Callable[[int], int] | None = None
    #: a sentence when lanes are still loading (a partial model of a big report), else ""
    pending: str = ""

    def launch_index(self, row: int) -> int:
        """Launch index of kernels-table ``row`` among kernels of the same base name (ncu link)."""
        if self.launch_of is not None:
            return self.launch_of(row)
        return int(self.ncu_order[row]) if row < len(self.ncu_order) else 0

    def counts(self) -> dict[str, int]:
        """Events per group: api, gpu (kernels + memcpy + memset), nvtx, metric samples."""
        out = {"api": 0, "gpu": 0, "nvtx": 0, "metric": 0}
        for ln in self.lanes:
            out[ln.group] += len(ln)
        return out

    def lane(self, key: str) -> Lane:
        return next(ln for ln in self.lanes if ln.key == key)

    def event(self, lane: Lane, i: int) -> dict[str, Any]:
        """The source-table row of event ``i`` of ``lane`` as a dict, plus kind and name."""
        if lane.is_metric:
            assert lane.values is not None
            return {"kind": "metric", "name": lane.label, "start": int(lane.starts[i]),
                    "end": int(lane.ends[i]), "value": float(lane.values[i]), "unit": lane.unit}
        kind = int(lane.kinds[i])
        table = KIND_TABLES[kind]
        row = i if lane.rows is None else int(lane.rows[i])
        if table in self.tables:
            rec = {k: _py(v) for k, v in self.tables[table].iloc[row].items()}
        else:
            assert self.row_source is not None
            rec = self.row_source(table, row)
        rec["kind"] = KIND_NAMES[kind]
        rec["row"] = row
        rec["name"] = str(self.names[lane.names[i]])
        rec["start"], rec["end"] = int(lane.starts[i]), int(lane.ends[i])
        rec["lane"] = lane.label
        return rec


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


def union_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge overlapping intervals (sorted by start) -> (starts, ends, covered ns before each)."""
    if not len(starts):
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(1, dtype=np.int64)
    # ends in order (the usual lane: no nesting) are their own running maximum: no copy
    run = ends if bool(np.all(ends[1:] >= ends[:-1])) else np.maximum.accumulate(ends)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > run[:-1]
    if bool(new.all()):  # no two intervals overlap or touch: the union is the intervals themselves
        del run, new
        cum = np.zeros(len(starts) + 1, dtype=np.int64)
        np.subtract(ends, starts, out=cum[1:])
        np.cumsum(cum[1:], out=cum[1:])
        return starts, ends, cum
    idx = np.flatnonzero(new)
    us = starts[idx]
    ue = np.maximum.reduceat(ends, idx)
    cum = np.zeros(len(us) + 1, dtype=np.int64)
    np.cumsum(ue - us, out=cum[1:])
    return us, ue, cum


def covered_before(union: Union, x: np.ndarray, tol_ns: float = 0.0) -> np.ndarray:
    """Busy ns of the merged intervals before each time in ``x`` (a sorted float64 array);
    block totals may be interpolated over blocks up to ``tol_ns`` wide (see SparseUnion)."""
    if isinstance(union, sparse.SparseUnion):
        return union.covered_before(x, tol_ns)
    us, ue, cum = union
    if not len(us):
        return np.zeros(len(x))
    # x is sorted: search only the merged intervals that start inside [x[0], x[-1]]
    # us <= x  <=>  us <= floor(x) for integer us; int64 queries avoid a float copy of us
    xi = np.floor(x).astype(np.int64)
    base = int(np.searchsorted(us, xi[0], side="right"))
    top = int(np.searchsorted(us, xi[-1], side="right"))
    k = base + np.searchsorted(us[base:top], xi, side="right") - 1
    kc = np.clip(k, 0, len(us) - 1)
    s_k = us[kc]
    part = np.clip(x - s_k, 0, ue[kc] - s_k)  # only the intervals looked up (not all 21M of them)
    return np.where(k >= 0, cum[kc] + part, 0.0)


def coverage(union: Union, t0: float, t1: float, n_bins: int, tol: float = 0.0) -> np.ndarray:
    """Fraction (0..1) of each of ``n_bins`` equal columns of [t0, t1] that the intervals cover.

    ``tol`` > 0 (a fraction of a column) lets a lane of block totals interpolate inside blocks
    narrower than that instead of reading their events: each fraction is then off by less than
    ``2 * tol`` (the canvas draws bars of ~20 pixels with ``tol`` = 1/64: under a pixel).
    """
    edges = np.linspace(t0, t1, n_bins + 1)
    width = (t1 - t0) / n_bins
    busy = np.diff(covered_before(union, edges, tol * width))
    return np.clip(busy / width, 0.0, 1.0) if width > 0 else np.zeros(n_bins)


def metric_envelope(lane: Lane, t0: float, t1: float, n_bins: int) -> np.ndarray:
    """Per-column maximum of a metric lane's step function over [t0, t1] (NaN before the first
    sample and after the last one's period).

    A sample holds its value until the next one, so a column's maximum is the larger of the value
    in effect when the column starts and every sample taken inside it; the last sample holds for
    one sampling period (``ends[-1]``), not for the rest of the capture.
    """
    assert lane.values is not None
    edges = np.linspace(t0, t1, n_bins + 1)
    v = lane.values
    eff = np.searchsorted(lane.starts, np.floor(edges[:-1]).astype(np.int64), side="right") - 1
    out = np.where(eff >= 0, v[np.clip(eff, 0, None)], np.nan) if len(v) else np.full(n_bins, np.nan)
    if len(v):
        out[edges[:-1] >= lane.ends[-1]] = np.nan  # no sample any more
    lo = int(np.searchsorted(lane.starts, math.floor(t0), side="right"))
    hi = int(np.searchsorted(lane.starts, math.floor(t1), side="right"))
    if hi > lo:
        col = np.searchsorted(edges, lane.starts[lo:hi], side="right") - 1
        col = np.clip(col, 0, n_bins - 1)
        first = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
        within = np.maximum.reduceat(v[lo:hi], first)
        out[col[first]] = np.fmax(out[col[first]], within)
    return out


# -- building -------------------------------------------------------------------------------------


def _ints(s: Any) -> np.ndarray:
    return np.asarray(s, dtype=np.float64).astype(np.int64)


def _label_int(v: Any) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "?" if math.isnan(f) else str(int(f))


def _lane_from(key: str, label: str, group: str, parts: list[tuple[int, np.ndarray]],
               times: dict[str, tuple[np.ndarray, np.ndarray]], codes: dict[str, np.ndarray]) -> Lane:
    """Concatenate (kind, source rows) parts into one lane sorted by start."""
    def cat(arrays: list[np.ndarray]) -> np.ndarray:
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)

    st = cat([times[KIND_TABLES[k]][0][r] for k, r in parts])
    en = cat([times[KIND_TABLES[k]][1][r] for k, r in parts])
    kd = cat([np.full(len(r), k, dtype=np.int8) for k, r in parts])
    rw = cat([r.astype(np.int32) for _k, r in parts])
    nm = cat([codes[KIND_TABLES[k]][r] for k, r in parts])
    if len(st) > 1 and not bool(np.all(st[1:] >= st[:-1])):
        order = np.argsort(st, kind="stable")
        st, en, kd, rw, nm = st[order], en[order], kd[order], rw[order], nm[order]
    return Lane(key, label, group, st, en, kd, rw, nm)


def _groups(*keys: np.ndarray) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """Rows of each distinct combination of integer keys, in key order (one pass, no pandas)."""
    n = len(keys[0])
    if n == 0:
        return []
    stacked = np.stack(keys, axis=1)
    if bool(np.all(stacked == stacked[0])):  # the usual case: one thread, one stream
        return [(tuple(int(v) for v in stacked[0]), np.arange(n))]
    uniq, inv = np.unique(stacked, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(len(uniq) + 1))
    return [(tuple(int(v) for v in uniq[i]), order[bounds[i]:bounds[i + 1]]) for i in range(len(uniq))]


def _checker(cancel: Any) -> Callable[[], None]:
    """A function that raises the engine's ``Cancelled`` once ``cancel`` (an Event or None) is set."""
    def check() -> None:
        if cancel is not None and cancel.is_set():
            from engine.system.errors import Cancelled

            raise Cancelled

    return check


def _read_tables(trace: Any, check: Callable[[], None]) -> tuple[dict[str, Any], list[str]]:
    """The timeline's tables of ``trace`` (only the columns it draws and shows) and what is missing."""
    tables: dict[str, Any] = {}
    missing: list[str] = []
    prefetch = getattr(trace, "prefetch", None)
    if prefetch is not None:  # nsys SQLite: read the big integer columns in parallel threads
        prefetch(COLUMNS)
    for name in COLUMNS:
        # only the columns the timeline draws and shows (a big report's other columns, such as
        # mangled names, are never read); rows are addressed by position
        df = trace.table(name, columns=COLUMNS[name])
        if name in trace.missing:
            missing.append(_missing_sentence(name, trace.missing[name]))
        tables[name] = df
        check()
    return tables, missing


def _name_codes(tables: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """One name table for every event: (names, their colours, each table's codes into them)."""
    import pandas as pd

    from gui.timeline.style import color_index

    name_parts: list[np.ndarray] = []
    color_parts: list[np.ndarray] = []
    codes: dict[str, np.ndarray] = {}
    offset = 0
    for kind, table in enumerate(KIND_TABLES):  # factorize each table's names, then offset the codes
        df = tables[table]
        if table == "kernels":
            src = df["name"]
        elif table == "memcpy":
            src = "[CUDA memcpy " + df["operation"].astype(str) + "]"
        elif table == "memset":
            src = pd.Series(["[CUDA memset]"] * len(df), dtype=object)
        elif table == "api":
            src = df["name"]
        else:
            src = df["text"]
        c, uniq = pd.factorize(src.fillna("").astype(str) if len(src) else src)
        codes[table] = np.asarray(c, dtype=np.int32) + offset
        name_parts.append(np.asarray(uniq, dtype=object))
        color_parts.append(np.array([color_index(kind, str(u)) for u in uniq], dtype=np.int8))
        offset += len(uniq)
    return np.concatenate(name_parts), np.concatenate(color_parts), codes


def _event_times(tables: dict[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Start and end of every event as int64 (a missing end: an instant)."""
    times: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for table in KIND_TABLES:
        df = tables[table]
        st = _ints(df["start"]) if len(df) else np.zeros(0, dtype=np.int64)
        en = np.asarray(df["end"], dtype=np.float64) if len(df) else np.zeros(0)
        en = np.where(np.isnan(en), st, en).astype(np.int64)
        times[table] = (st, np.maximum(en, st))
    return times


def _cuda_lanes(tables: dict[str, Any], times: dict[str, tuple[np.ndarray, np.ndarray]],
                codes: dict[str, np.ndarray], check: Callable[[], None]) -> list[Lane]:
    """CUDA API calls per CPU thread, then kernels, memcpy and memset per (device, stream)."""
    lanes: list[Lane] = []
    api = tables["api"]
    api_groups = _groups(_int_key(api["pid"]), _int_key(api["tid"])) if len(api) else []
    for (pid, tid), rows in api_groups:
        label = f"Thread {_key_text(tid)} · CUDA API"
        lanes.append(_lane_from(f"api:{_key_text(pid)}:{_key_text(tid)}", label, "api",
                                [(KIND_API, rows)], times, codes))
        check()
    frames = [(KIND_KERNEL, tables["kernels"]), (KIND_MEMCPY, tables["memcpy"]),
              (KIND_MEMSET, tables["memset"])]
    keyed = {k: (_int_key(df["deviceId"]), _int_key(df["streamId"])) for k, df in frames if len(df)}
    pairs = np.concatenate([np.stack(v, axis=1) for v in keyed.values()]) if keyed else np.zeros((0, 2))
    for dev, stream in [g for g, _r in _groups(pairs[:, 0], pairs[:, 1])] if len(pairs) else []:
        parts = []
        for k, (d, st) in keyed.items():
            rows = np.flatnonzero((d == dev) & (st == stream))
            if len(rows):
                parts.append((k, rows))
        lanes.append(_lane_from(f"gpu:{_key_text(dev)}:{_key_text(stream)}",
                                f"GPU {_key_text(dev)} · stream {_key_text(stream)}", "gpu", parts,
                                times, codes))
        check()
    return lanes


def spans(lanes: list[Lane]) -> tuple[int, int, int, int]:
    """(t_min, t_max) of every lane and (activity_min, activity_max) of the CUDA and NVTX events.

    The activity span is what "show all" fits (GPU metrics are sampled over the whole capture).
    """
    lo = [int(ln.starts[0]) for ln in lanes if len(ln)]
    hi = [int(ln.run_max_end[-1]) for ln in lanes if len(ln)]
    t_min, t_max = (min(lo), max(hi)) if lo else (0, 1)
    t_max = max(t_max, t_min + 1)
    act = [ln for ln in lanes if len(ln) and not ln.is_metric]
    a_min = min(int(ln.starts[0]) for ln in act) if act else t_min
    a_max = max(int(ln.run_max_end[-1]) for ln in act) if act else t_max
    return t_min, t_max, a_min, max(a_max, a_min + 1)


def build_model(trace: Any, cancel: Any = None) -> TimelineModel:
    """Read the trace's tables once and build every lane (runs in a worker thread).

    The window asks :func:`gui.timeline.kept_model.timeline_model`, which keeps a PyTorch
    (Kineto) trace's lanes on disk for the next open.

    Args:
        trace: an engine ``Trace``.
        cancel: optional ``threading.Event``; building stops early (raising the engine's
            ``Cancelled``) when it is set.

    """
    from engine.analysis.ncu_match import launch_order

    check = _checker(cancel)
    tables, missing = _read_tables(trace, check)
    names, name_colors, codes = _name_codes(tables)
    check()
    times = _event_times(tables)
    check()
    lanes = _cuda_lanes(tables, times, codes, check)
    lanes += nvtx_lanes(tables["nvtx"], times["nvtx"], codes["nvtx"], check)
    lanes += metric_lanes(tables["gpu_metrics"])
    lanes += memory_lanes(trace)
    check()
    t_min, t_max, a_min, a_max = spans(lanes)
    # launch order of each kernel among kernels of the same short name (for the ncu link)
    return TimelineModel(lanes, names, name_colors, tables, t_min, t_max, missing,
                         launch_order(tables["kernels"]), a_min, a_max)


def nvtx_lanes(nvtx: Any, times: tuple[np.ndarray, np.ndarray], codes: np.ndarray,
               check: Callable[[], None] = lambda: None) -> list[Lane]:
    """NVTX lanes: one per nesting level of each thread's ranges, marks on level 0.

    Args:
        nvtx: the trace's ``nvtx`` table (COLUMNS["nvtx"]).
        times: (start, end) int64 of every row (a missing end: the start).
        codes: each row's code into the model's names.
        check: called between threads (raises to stop).

    """
    lanes: list[Lane] = []
    if not len(nvtx):
        return lanes
    keep = np.flatnonzero(nvtx["eventType"].isin([*NVTX_RANGE_TYPES, NVTX_MARK_TYPE]).to_numpy())
    pid_k, tid_k = _int_key(nvtx["pid"])[keep], _int_key(nvtx["tid"])[keep]
    n_st, n_en = times
    nv_times = {"nvtx": times}
    nv_codes = {"nvtx": codes}
    for (pid, tid), sub in _groups(pid_k, tid_k) if len(keep) else []:
        rows = keep[sub]
        depth = nesting_depth(n_st[rows], n_en[rows])
        for level in range(int(depth.max()) + 1):
            suffix = "" if level == 0 else f" · level {level + 1}"
            lanes.append(_lane_from(f"nvtx:{_key_text(pid)}:{_key_text(tid)}:{level}",
                                    f"Thread {_key_text(tid)} · NVTX{suffix}", "nvtx",
                                    [(KIND_NVTX, rows[depth == level])], nv_times, nv_codes))
        check()
    return lanes


def metric_lanes(gm: Any) -> list[Lane]:
    """GPU metric lanes: one per (gpu, metric), the [Throughput %] ones first."""
    lanes: list[Lane] = []
    if not len(gm):
        return lanes
    groups = sorted(gm.groupby(["gpu", "metricName"], sort=True, dropna=False),
                    key=lambda kv: ("%" not in str(kv[0][1]), kv[0][0], str(kv[0][1])))
    for (gpu, metric), g in groups:
        g = g.sort_values("timestamp", kind="stable")
        t = _ints(g["timestamp"])
        v = np.asarray(g["value"], dtype=np.float64)
        nxt = np.empty_like(t)
        if len(t) > 1:
            nxt[:-1] = t[1:]
            nxt[-1] = t[-1] + (t[-1] - t[-2])
        elif len(t):
            nxt[:] = t
        unit = _metric_unit(str(metric))
        top = 100.0 if unit == "%" else float(np.nanmax(v)) if len(v) and np.isfinite(v).any() else 1.0
        top = max(top, 1e-12)
        if not np.nanmax(np.abs(v), initial=0.0):
            scale = "always 0"
        elif unit == "%":
            scale = "0–100 %"
        else:
            scale = f"0–{top:,.4g}"
        lanes.append(Lane(f"metric:{_label_int(gpu)}:{metric}", str(metric),
                          "metric", t, nxt, np.zeros(0, dtype=np.int8),
                          g.index.to_numpy(), np.zeros(0, dtype=np.int32), values=v,
                          value_max=top, unit=unit, sublabel=f"GPU {_label_int(gpu)} · {scale}"))
    return lanes


def memory_lanes(trace: Any) -> list[Lane]:
    """GPU memory over time as metric lanes (MiB).

    Allocated and reserved from a Kineto trace (``profile_memory``); the driver's allocations from
    an nsys report (``--cuda-memory-usage``).
    """
    import pandas as pd

    kind = getattr(getattr(trace, "info", None), "kind", "")
    if kind != "kineto" and not (kind in ("nsys-sqlite", "nsys-rep") and trace.has("memory_usage")):
        return []
    from engine.analysis.pytorch.memory import memory_timeline

    frames = []
    for c in memory_timeline(trace).curves:
        for series, what in ((c.allocated, "allocated"), (c.reserved, "reserved" if kind == "kineto"
                                                             else "from cudaMalloc")):
            if series is not None and len(series):
                frames.append(pd.DataFrame({"timestamp": c.time_ns, "gpu": c.device,
                                            "metricName": f"GPU memory {what} [MiB]",
                                            "value": np.asarray(series, dtype=np.float64) / 2**20}))
    if not frames:
        return []
    lanes = metric_lanes(pd.concat(frames, ignore_index=True))
    for ln in lanes:
        ln.key = "memory" + ln.key[len("metric"):]
    return lanes


_NO_ID = -(1 << 62)


def _int_key(s: Any) -> np.ndarray:
    """An id column as int64 (missing ids become a sentinel that prints as '?')."""
    v = np.asarray(s, dtype=np.float64)
    return np.where(np.isnan(v), _NO_ID, np.nan_to_num(v)).astype(np.int64)


def _key_text(v: int) -> str:
    return "?" if v == _NO_ID else str(v)


def _metric_unit(name: str) -> str:
    if "%" in name:
        return "%"
    if "[" in name and name.endswith("]"):
        return name[name.rindex("[") + 1:-1]
    return ""


def nesting_depth(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Depth of each range inside the ranges of the same thread that enclose it (0 = outermost)."""
    order = np.lexsort((-ends, starts))
    depth = np.zeros(len(starts), dtype=np.int64)
    open_ends: list[int] = []
    for i in order.tolist():
        s, e = int(starts[i]), int(ends[i])
        while open_ends and open_ends[-1] <= s:
            open_ends.pop()
        depth[i] = len(open_ends)
        if e > s:
            open_ends.append(e)
    return depth


def _missing_sentence(table: str, why: str) -> str:
    what = {"kernels": "kernels", "memcpy": "memory copies", "memset": "memsets",
            "api": "CUDA API calls", "nvtx": "NVTX ranges", "gpu_metrics": "GPU metrics"}[table]
    return f"No {what}: {why}."
