"""A coarse first look at a big Nsight Systems trace, from a few integer columns (no Qt, no pandas).

Building every lane of a 400,000-kernel report takes seconds (the columns have to come out of
SQLite and be sorted). The overview asks SQLite for much less: the lanes (GPU streams by device and
stream, CPU threads of CUDA API calls by ``globalTid``) and, per lane and event kind, the busy
nanoseconds in each of ``n_buckets`` equal buckets across the capture. The columns (start, end and
the lane keys) come from the report's columnar cache (:mod:`engine.reports.columns`): read from
SQLite once, in threads that run without Python's lock, then memory-mapped on every later open, so
the timeline shows real data while the full lanes are still being built. NVTX levels and GPU
metrics are left to the full model.

Busy time is credited exactly (:func:`busy_histogram`): an event's first bucket gets
``edge - start``, its last ``end - edge`` and the buckets in between their full width. Overlapping
events of one lane add up (a sum of durations, not their union), so a bucket may hold more than
its width; the canvas clips the drawn fraction at 1.

Lane keys and labels are the ones :func:`gui.timeline.model.build_model` gives, so the full lanes
replace these without the rows moving.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.system.errors import ReportError
from gui.timeline.model import KIND_API, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET

N_BUCKETS = 2000

#: timeline kind -> the nsys export's table (as engine.reports.nsys_sqlite._NSYS_TABLES names them)
_TABLES = {
    KIND_KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL",
    KIND_MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY",
    KIND_MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET",
    KIND_API: "CUPTI_ACTIVITY_KIND_RUNTIME",
}
_GPU_KINDS = (KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET)


@dataclass
class OverviewLane:
    """One lane of the overview: busy ns per bucket for each event kind in it."""

    key: str
    label: str
    group: str  # "api" or "gpu", as in the full model
    hist: dict[int, np.ndarray]  # KIND_* -> float64 busy ns per bucket
    n_events: int = 0
    sublabel: str = ""

    @property
    def is_metric(self) -> bool:
        return False

    def __len__(self) -> int:
        return self.n_events


@dataclass
class Overview:
    """The lanes of a trace at bucket resolution over [t_min, t_max]."""

    lanes: list[OverviewLane]
    t_min: int
    t_max: int
    n_buckets: int
    seconds: float = 0.0  # how long computing it took
    edges: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.edges = np.linspace(self.t_min, self.t_max, self.n_buckets + 1)

    @property
    def activity_min(self) -> int:
        return self.t_min

    @property
    def activity_max(self) -> int:
        return self.t_max

    def counts(self) -> dict[str, int]:
        """Events per group (api, gpu), as TimelineModel.counts gives them."""
        out = {"api": 0, "gpu": 0}
        for ln in self.lanes:
            out[ln.group] += ln.n_events
        return out

    def coverage(self, lane: OverviewLane, kind: int, t0: float, t1: float, n_bins: int) -> np.ndarray:
        """Fraction (0..1) of each of ``n_bins`` columns of [t0, t1] the kind is busy in the lane.

        Within a bucket the busy time is taken as spread evenly, so zoomed in beyond the bucket
        width the lane shows the bucket's mean (bucket resolution).
        """
        cum = np.zeros(self.n_buckets + 1)
        np.cumsum(lane.hist[kind], out=cum[1:])
        x = np.linspace(t0, t1, n_bins + 1)
        busy = np.diff(np.interp(x, self.edges, cum))
        width = (t1 - t0) / n_bins
        return np.clip(busy / width, 0.0, 1.0) if width > 0 else np.zeros(n_bins)


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in con.execute(f"PRAGMA table_info({table})")}


def build_overview(sqlite_path: str | Path, n_buckets: int = N_BUCKETS,
                   cancel: threading.Event | None = None) -> Overview:
    """Compute the overview of an nsys SQLite export (call from a worker thread).

    Args:
        sqlite_path: the export (opened read-only).
        n_buckets: how many equal buckets span the capture.
        cancel: optional event; the function stops (raising ``gui.workers.Cancelled``) when set.

    Raises:
        engine.system.errors.ReportError: the file is not a readable SQLite database.

    """
    import time

    from engine.reports.nsys_sqlite import connect_readonly

    t_start = time.perf_counter()
    path = Path(sqlite_path)
    connect_readonly(path).close()  # a clear sentence now if it is not a readable database
    return _build(path, n_buckets, cancel, t_start)


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        from gui.workers import Cancelled

        raise Cancelled


_NULL = -(1 << 62)  # stands for SQL NULL in the column reads; prints as "?" like the full model's


def _cache_name(expr: str) -> str:
    """The column's name in the cache: a plain column by its own name (as the engine caches it)."""
    return expr.strip('"') if expr.count('"') == 2 and expr[0] == '"' else "end_or_start"


def _lanes_of(k1: np.ndarray, k2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (k1, k2) pairs in order and each row's index into them."""
    if not len(k1):
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    if bool(np.all(k1 == k1[0])) and bool(np.all(k2 == k2[0])):  # the usual case: one lane
        return np.array([[k1[0], k2[0]]]), np.zeros(len(k1), dtype=np.int64)
    uniq, inv = np.unique(np.stack([k1, k2], axis=1), axis=0, return_inverse=True)
    return uniq, inv.reshape(-1)


def busy_histogram(starts: np.ndarray, ends: np.ndarray, lane: np.ndarray, n_lanes: int,
                   t_min: int, t_max: int, n: int) -> np.ndarray:
    """Busy ns of each lane in each of ``n`` equal buckets of [t_min, t_max], clipped exactly.

    An event's first bucket gets ``edge - start``, its last ``end - edge`` and the buckets in
    between their full width (a difference array of counts); one contained in a bucket, its duration.
    """
    span = t_max - t_min
    edges = np.linspace(t_min, t_max, n + 1)
    b0 = np.minimum((starts - t_min) * n // span, n - 1)
    b1 = np.minimum((ends - t_min) * n // span, n - 1)
    size = n_lanes * n
    i0 = lane * n + b0
    i1 = lane * n + b1
    same = b0 == b1
    s_f = starts.astype(np.float64)
    e_f = ends.astype(np.float64)
    first = np.where(same, e_f - s_f, edges[np.minimum(b0 + 1, n)] - s_f)
    hist: np.ndarray = np.bincount(i0, weights=first, minlength=size)
    cross = ~same
    if cross.any():
        hist += np.bincount(i1[cross], weights=e_f[cross] - edges[b1[cross]], minlength=size)
        wide = np.flatnonzero(b1 > b0 + 1)
        if len(wide):
            diff = np.bincount(i0[wide] + 1, minlength=size + 1)[:size].astype(np.float64)
            diff -= np.bincount(i1[wide], minlength=size)
            # the running count restarts in each lane (every +1 has its -1 inside the same lane)
            hist = hist + np.cumsum(diff) * (span / n)
    return hist.reshape(n_lanes, n)


def _build(path: Path, n: int, cancel: threading.Event | None, t_start: float) -> Overview:
    import time

    from engine.reports.nsys_sqlite import connect_readonly

    con = connect_readonly(path)
    try:
        have = {str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        reads: dict[int, list[str]] = {}
        ranges: dict[int, list[tuple[int, int]]] = {}
        for kind, t in _TABLES.items():
            keys = ["globalTid"] if kind == KIND_API else ["deviceId", "streamId"]
            if t in have and {"start", "end", *keys} <= _columns(con, t):
                reads[kind] = ['"start"', 'coalesce("end", "start")', *(f'"{k}"' for k in keys)]
                ranges[kind] = []
    finally:
        con.close()
    # Through the report's columnar cache (engine.reports.columns): read once, in threads that
    # run without Python's lock, then memory-mapped on every later open (and shared with the
    # engine's tables, which cache the same columns under the same names).
    from engine.reports.columns import ColumnStore

    store = ColumnStore(path)
    try:
        pending = {k: store.read_async(_TABLES[k], {_cache_name(e): e for e in reads[k]}) for k in ranges}
        got = {k: p.result() for k, p in pending.items()}
        cols = {k: [np.asarray(got[k][_cache_name(e)]) for e in reads[k]] for k in got}
    except sqlite3.Error as exc:
        raise ReportError(f"{path} has unreadable values ({exc}); export the report again.") from exc
    finally:
        store.close()
    _check(cancel)
    data: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for kind, c in cols.items():
        if not len(c[0]):
            continue
        if kind == KIND_API:  # globalTid -> (pid, tid), as engine.reports.base.decode_global_tid
            g = c[2]
            null = g == _NULL
            k1 = np.where(null, _NULL, (g // (1 << 24)) % (1 << 24))
            k2 = np.where(null, _NULL, g % (1 << 24))
        else:
            k1, k2 = c[2], c[3]
        data[kind] = (c[0], np.maximum(c[1], c[0]), k1, k2)
    lo = [int(d[0].min()) for d in data.values()]
    hi = [int(d[1].max()) for d in data.values()]
    t_min = min(lo) if lo else 0
    t_max = max(hi) if hi else 1
    if t_max <= t_min:
        t_max = t_min + 1

    lanes: list[OverviewLane] = []
    for group, kinds in (("api", (KIND_API,)), ("gpu", _GPU_KINDS)):
        present = [k for k in kinds if k in data]
        if not present:
            continue
        uniq, _inv = _lanes_of(np.concatenate([data[k][2] for k in present]),
                               np.concatenate([data[k][3] for k in present]))
        per_kind: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for k in present:
            st, en, k1, k2 = data[k]
            _u, inv = _lanes_of(k1, k2)
            # map this kind's lanes onto the group's lanes (both sorted)
            idx = np.array([int(np.flatnonzero((uniq[:, 0] == a) & (uniq[:, 1] == b))[0])
                            for a, b in _u.tolist()], dtype=np.int64)
            lane = idx[inv]
            per_kind[k] = (busy_histogram(st, en, lane, len(uniq), t_min, t_max, n),
                           np.bincount(lane, minlength=len(uniq)))
            _check(cancel)
        for i, (a, b) in enumerate(uniq.tolist()):
            ta, tb = ("?" if a == _NULL else str(a)), ("?" if b == _NULL else str(b))
            hist = {k: h[i] for k, (h, cnt) in per_kind.items() if cnt[i]}
            n_ev = sum(int(cnt[i]) for _h, cnt in per_kind.values())
            if group == "api":
                lanes.append(OverviewLane(f"api:{ta}:{tb}", f"Thread {tb} · CUDA API", "api", hist, n_ev))
            else:
                lanes.append(OverviewLane(f"gpu:{ta}:{tb}", f"GPU {ta} · stream {tb}", "gpu", hist, n_ev))
    return Overview(lanes, t_min, t_max, n, seconds=time.perf_counter() - t_start)
