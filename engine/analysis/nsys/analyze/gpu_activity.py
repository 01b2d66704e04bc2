"""GPU operations of a big nsys export for gpu_gaps and gpu_time_util, in bounded memory (issue 16).

The general path (:func:`gpu_ops`, for other traces) builds one DataFrame of every kernel, copy
and memset (35M rows at 10M kernels) and sorts it. Both rules only need, per process and device,
the starts and the ends each sorted on their own:

* the GPU is idle between the ``i``-th smallest end and the ``i+1``-th smallest start exactly
  when that start is later (every op ends after it starts), and that end is the latest end of
  the ops before the gap, which is what the general path finds with a running maximum;
* the busy time before a moment ``t`` is ``sum(t - start) - sum(t - end)`` over the starts and
  ends before ``t``.

So the columns come from the columnar cache one table at a time, and only two int64 arrays per
process and device are kept. The context of a gap (that of the op that reached the latest end:
among the ops ending then, the one that starts last, then the later in table order) is looked up
afterwards for the printed rows only.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.tables import unique_first
from engine.reports.nsys.columns import has_null
from engine.reports.nsys.schema import KERNEL, MEMCPY, MEMSET

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace

_TABLES = (KERNEL, MEMCPY, MEMSET)
_EXPRS = {"start": '"start"', "end": '"end"', "globalPid": '"globalPid"', "deviceId": '"deviceId"',
          "contextId": '"contextId"'}


@dataclass
class Group:
    """The ops of one (process, device): sorted starts and ends, the context of the last end."""

    pid: int
    dev: int
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    last_end: int = -(2**63)
    last_ctx: int = 0
    parts_s: list[npt.NDArray[np.int64]] = field(default_factory=list)
    parts_e: list[npt.NDArray[np.int64]] = field(default_factory=list)


_CACHE: weakref.WeakKeyDictionary[Trace, tuple[Any, list[Group]]] = weakref.WeakKeyDictionary()


def _tables(trace: Trace) -> list[str] | None:
    store = getattr(trace, "column_store", None)
    has = getattr(trace, "has_sqlite_table", None)
    if store is None or has is None:
        return None
    return [t for t in _TABLES if has(t)]


def _read(trace: Trace, t: str, window: tuple[int | None, int | None]) -> dict[str, Any] | None:
    """One table's columns (window applied), with pid and a (pid, device) key; None on NULLs."""
    cols = trace.column_store().read(  # type: ignore[attr-defined]
        t, _EXPRS, frozenset({"deviceId", "contextId"}))
    if any(has_null(cols[c]) for c in _EXPRS):
        return None
    start, end = cols["start"], cols["end"]
    mask = None
    if window[0] is not None:
        mask = start >= window[0]
    if window[1] is not None:
        m2 = end <= window[1]
        mask = m2 if mask is None else mask & m2
    out = {k: (v if mask is None else v[mask]) for k, v in cols.items()}
    out["pid"] = (out["globalPid"] >> 24) & 0xFFFFFF
    return out


def _keys(cols: dict[str, Any]) -> list[tuple[int, int, Any]]:
    """(pid, device, row mask or None for all rows) per group present in a table."""
    pid, dev = cols["pid"], cols["deviceId"]
    if not len(pid):
        return []
    if pid.min() == pid.max() and dev.min() == dev.max():
        return [(int(pid[0]), int(dev[0]), None)]
    key = (pid.astype(np.int64) << 32) | (dev.astype(np.int64) & 0xFFFFFFFF)
    return [(int(k >> 32), int(np.int32(k & 0xFFFFFFFF)), key == k) for k in unique_first(key)[0].tolist()]


def groups(trace: Trace, window: tuple[int | None, int | None]) -> list[Group] | None:
    """The ops per (pid, device), in (pid, device) order; None where the fast path does not apply."""
    tables = _tables(trace)
    if tables is None:
        return None
    hit = _CACHE.get(trace)
    if hit is not None and hit[0] == window:
        return hit[1]
    found: dict[tuple[int, int], Group] = {}
    empty = np.zeros(0, dtype=np.int64)
    try:
        for t in tables:
            cols = _read(trace, t, window)
            if cols is None:
                return None
            for pid, dev, sel in _keys(cols):
                g = found.setdefault((pid, dev), Group(pid, dev, empty, empty))
                s = cols["start"] if sel is None else cols["start"][sel]
                e = cols["end"] if sel is None else cols["end"][sel]
                g.parts_s.append(np.array(s, dtype=np.int64))
                g.parts_e.append(np.array(e, dtype=np.int64))
                j = int(np.argmax(e))
                if int(e[j]) > g.last_end:  # first op ending last, in table order
                    ctx = cols["contextId"] if sel is None else cols["contextId"][sel]
                    g.last_end, g.last_ctx = int(e[j]), int(ctx[j])
            del cols
    except Exception:  # noqa: BLE001 - any read problem (an older schema): the general path
        return None
    out = [found[k] for k in sorted(found)]
    for g in out:
        g.starts = np.concatenate(g.parts_s)
        g.parts_s.clear()
        g.starts.sort()
        g.ends = np.concatenate(g.parts_e)
        g.parts_e.clear()
        g.ends.sort()
    _CACHE[trace] = (window, out)
    return out


def gaps(gs: list[Group], threshold_ns: float) -> dict[str, npt.NDArray[np.int64]]:
    """Every idle stretch longer than ``threshold_ns``: duration, start, pid, device, order."""
    parts: list[tuple[Any, ...]] = []
    for k, g in enumerate(gs):
        if len(g.starts) < 2:
            continue
        gap = g.starts[1:] - g.ends[:-1]
        idx = np.flatnonzero((gap > 0) & (gap > threshold_ns))
        n = len(idx)
        parts.append((gap[idx], g.ends[idx], np.full(n, g.pid), np.full(n, g.dev),
                      np.full(n, k), idx))
    names = ("dur", "start", "pid", "dev", "group", "pos")
    if not parts:
        return {n: np.zeros(0, dtype=np.int64) for n in names}
    return {n: np.concatenate([p[i] for p in parts]).astype(np.int64) for i, n in enumerate(names)}


def gap_contexts(trace: Trace, window: tuple[int | None, int | None],
                 wanted: list[tuple[int, int, int]]) -> dict[tuple[int, int, int], int]:
    """Context of the op that ended at each (pid, device, end): the latest start, then table order."""
    best: dict[tuple[int, int, int], tuple[int, int, int, int]] = {}
    values = np.array(sorted({w[2] for w in wanted}), dtype=np.int64)
    want = set(wanted)
    for ti, t in enumerate(_tables(trace) or []):
        cols = _read(trace, t, window)
        if cols is None:
            continue
        rows = np.flatnonzero(np.isin(cols["end"], values))
        for r in rows.tolist():
            key = (int(cols["pid"][r]), int(cols["deviceId"][r]), int(cols["end"][r]))
            if key not in want:
                continue
            rank = (int(cols["start"][r]), ti, r, int(cols["contextId"][r]))
            if key not in best or rank[:3] > best[key][:3]:
                best[key] = rank
        del cols
    return {k: v[3] for k, v in best.items()}


def coverage(g: Group, t: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Busy time of the group's ops before each time in ``t`` (ascending); overlaps add up."""
    ns = np.searchsorted(g.starts, t, side="left")
    ne = np.searchsorted(g.ends, t, side="left")
    return (ns * t - _prefix(g.starts, ns)) - (ne * t - _prefix(g.ends, ne))


def _prefix(arr: npt.NDArray[np.int64], pos: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """``arr[:p].sum()`` for each ascending ``p`` in ``pos``, in one pass (int64 wraps alike)."""
    out = np.zeros(len(pos), dtype=np.int64)
    total = np.int64(0)
    prev = 0
    with np.errstate(over="ignore"):
        for i, p in enumerate(pos.tolist()):
            total = total + arr[prev:p].sum(dtype=np.int64)
            prev = p
            out[i] = total
    return out


def coverage_of(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total busy time of all [start, end) intervals before each time ``t`` (overlaps add up)."""
    s = np.sort(starts)
    e = np.sort(ends)
    cs = np.concatenate(([0], np.cumsum(s)))
    ce = np.concatenate(([0], np.cumsum(e)))
    ns = np.searchsorted(s, t, side="left")
    ne = np.searchsorted(e, t, side="left")
    covered: np.ndarray = (ns * t - cs[ns]) - (ne * t - ce[ne])
    return covered


def low_records(lo: int, hi: int, chunks: int, threshold: float,
                 coverage: Callable[[np.ndarray], np.ndarray], pid: Any, dev: Any, ctx: Any
                 ) -> list[dict[str, Any]]:
    """The runs of ``chunks`` equal pieces of [lo, hi] whose busy share is under ``threshold`` %.

    ``coverage(edges)`` gives the busy time up to each edge; consecutive low pieces are one record.
    """
    records: list[dict[str, Any]] = []
    span = hi - lo
    if span <= 0:
        return records
    size = -(-span // chunks)
    active = -(-span // size)
    edges = lo + size * np.arange(active + 1, dtype=np.int64)
    edges[-1] = min(int(edges[-1]), hi)
    busy = np.diff(coverage(edges)).astype(np.float64)
    dur = np.diff(edges).astype(np.float64)
    idx = np.flatnonzero(busy / dur * 100.0 < threshold)
    if idx.size == 0:
        return records
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    for run in np.split(idx, breaks):
        first, last = int(run[0]), int(run[-1])
        records.append({
            "chunk": first, "pid": pid, "dev": dev,
            "In-Use (%)": float(busy[run].sum() / dur[run].sum() * 100.0),
            "Duration (ns)": int(edges[last + 1] - edges[first]),
            "Start (ns)": int(edges[first]),
            "PID": pid, "Device ID": dev, "Context ID": ctx,
        })
    return records


def gpu_ops(trace: Trace, window: tuple[int | None, int | None]) -> pd.DataFrame:
    """All GPU operations (kernels, copies, memsets) with integer start/end, pid, device, context."""
    import pandas as pd

    from engine.analysis.nsys.analyze.common import _in_window, _int_col, _op_pids

    api: pd.DataFrame | None = None
    parts = []
    for name in ("kernels", "memcpy", "memset"):
        df = trace.table(name, ["start", "end", "pid", "globalPid", "deviceId", "contextId",
                                "correlationId"])
        if df.empty:
            continue
        if api is None and df["globalPid"].isna().any():  # Kineto: the process comes from the call
            api = trace.table("api")
        parts.append(pd.DataFrame({
            "start": pd.to_numeric(df["start"]).astype("int64"),
            "end": pd.to_numeric(df["end"]).astype("int64"),
            "pid": _op_pids(df, api if api is not None else df.iloc[:0]),
            "deviceId": _int_col(df["deviceId"]),
            "contextId": _int_col(df["contextId"]),
        }))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in
                             ("start", "end", "pid", "deviceId", "contextId")})
    return _in_window(pd.concat(parts, ignore_index=True), window)
