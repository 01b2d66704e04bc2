"""GPU operations of any trace for gpu_gaps and gpu_time_util, in bounded memory (issue 16, 24).

Both rules only need, per process and device, the starts and the ends each sorted on their own:

* the GPU is idle between the ``i``-th smallest end and the ``i+1``-th smallest start exactly
  when that start is later (every op ends after it starts), and that end is the latest end of
  the ops before the gap (a running maximum of the ends in start order finds the same);
* the busy time before a moment ``t`` is ``sum(t - start) - sum(t - end)`` over the starts and
  ends before ``t``.

So the kernels', copies' and memsets' columns come through ``trace.columns`` (an nsys export's
columnar cache, or a Kineto trace's tables) one table at a time, and only two int64 arrays per
process and device are kept. The process of an op is its ``globalPid``'s; where it has none
(Kineto puts GPU activity in a per-device lane), that of the first runtime call with its
correlation id. The context of a gap (that of the op that reached the latest end: among the ops
ending then, the one that starts last, then the later in table order) is looked up afterwards for
the printed rows only. A missing process, device or context (:data:`NULL`) prints as an empty field.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.reports.trace_columns import NULL
from engine.system.arrays import distinct

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.base import Trace

#: the engine's tables of GPU operations, in the order their ops are taken
_TABLES = ("kernels", "memcpy", "memset")
_COLUMNS = ["start", "end", "pid", "globalPid", "deviceId", "contextId"]


@dataclass
class Group:
    """The ops of one (process, device): sorted starts and ends, the context of the last end.

    ``pid``, ``dev`` and ``last_ctx`` are None where the trace has no value.
    """

    pid: int | None
    dev: int | None
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    last_end: int = -(2**63)
    last_ctx: int | None = None
    parts_s: list[npt.NDArray[np.int64]] = field(default_factory=list)
    parts_e: list[npt.NDArray[np.int64]] = field(default_factory=list)

    @property
    def order(self) -> tuple[bool, int, bool, int]:
        """Sort key: by process, then device, a missing one last."""
        return (self.pid is None, self.pid or 0, self.dev is None, self.dev or 0)


_CACHE: weakref.WeakKeyDictionary[Trace, tuple[Any, list[Group]]] = weakref.WeakKeyDictionary()


def _value(v: int) -> int | None:
    return None if v == NULL else int(v)


def _tables(trace: Trace) -> list[str]:
    return [t for t in _TABLES if trace.has(t)]


def _call_pids(trace: Trace) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(sorted correlation ids, the process of the first call with each): Kineto's op -> process."""
    from engine.analysis.tables import unique_first

    api = trace.columns("api", ["correlationId", "pid"]) if trace.has("api") else None
    if api is None or not len(api["correlationId"]):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    keep = api["correlationId"] != NULL
    corr = np.asarray(api["correlationId"][keep], dtype=np.int64)
    uniq, first, _ = unique_first(corr)
    return uniq.astype(np.int64), np.asarray(api["pid"][keep], dtype=np.int64)[first]


def _read(trace: Trace, t: str, window: tuple[int | None, int | None],
          call_pids: list[Any]) -> dict[str, Any]:
    """One table's columns (window applied), the process of each op resolved as the module says."""
    cols = trace.columns(t, _COLUMNS)
    start, end = cols["start"], cols["end"]
    mask = (start != NULL) & (end != NULL)
    if window[0] is not None:
        mask &= start >= window[0]
    if window[1] is not None:
        mask &= end <= window[1]
    out = {k: np.asarray(v[mask]) if not mask.all() else np.asarray(v) for k, v in cols.items()}
    no_gpid = out["globalPid"] == NULL
    if no_gpid.any():
        if not call_pids:
            call_pids.extend(_call_pids(trace))
        corr_ids, pids = call_pids
        corr = trace.columns(t, ["correlationId"])["correlationId"]
        corr = np.asarray(corr[mask]) if not mask.all() else np.asarray(corr)
        pos = np.clip(np.searchsorted(corr_ids, corr), 0, max(len(corr_ids) - 1, 0))
        found = no_gpid & (corr != NULL) & (len(corr_ids) > 0)
        if len(corr_ids):
            found &= corr_ids[pos] == corr
            mapped = pids[pos]
            found &= mapped != NULL
            out["pid"] = np.where(found, mapped, out["pid"])
    return out


def _keys(cols: dict[str, Any]) -> list[tuple[int, int, Any]]:
    """(pid, device, row mask or None for all rows) per group present in a table."""
    pid, dev = cols["pid"], cols["deviceId"]
    if not len(pid):
        return []
    if pid.min() == pid.max() and dev.min() == dev.max():
        return [(int(pid[0]), int(dev[0]), None)]
    up, ip = np.unique(pid, return_inverse=True)
    ud, idv = np.unique(dev, return_inverse=True)
    key = ip.astype(np.int64) * len(ud) + idv
    return [(int(up[k // len(ud)]), int(ud[k % len(ud)]), key == k) for k in distinct(key).tolist()]


def groups(trace: Trace, window: tuple[int | None, int | None]) -> list[Group]:
    """The ops per (pid, device), in (pid, device) order (a missing one last)."""
    hit = _CACHE.get(trace)
    if hit is not None and hit[0] == window:
        return hit[1]
    found: dict[tuple[int, int], Group] = {}
    empty = np.zeros(0, dtype=np.int64)
    call_pids: list[Any] = []
    for t in _tables(trace):
        cols = _read(trace, t, window, call_pids)
        for pid, dev, sel in _keys(cols):
            g = found.setdefault((pid, dev), Group(_value(pid), _value(dev), empty, empty))
            s = cols["start"] if sel is None else cols["start"][sel]
            e = cols["end"] if sel is None else cols["end"][sel]
            g.parts_s.append(np.array(s, dtype=np.int64))
            g.parts_e.append(np.array(e, dtype=np.int64))
            j = int(np.argmax(e))
            if int(e[j]) > g.last_end:  # first op ending last, in table order
                ctx = cols["contextId"] if sel is None else cols["contextId"][sel]
                g.last_end, g.last_ctx = int(e[j]), _value(int(ctx[j]))
        del cols
    out = sorted(found.values(), key=lambda g: g.order)
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
    """Every idle stretch longer than ``threshold_ns``: duration, start, pid, device, order.

    A missing process or device is :data:`NULL`.
    """
    parts: list[tuple[Any, ...]] = []
    for k, g in enumerate(gs):
        if len(g.starts) < 2:
            continue
        gap = g.starts[1:] - g.ends[:-1]
        idx = np.flatnonzero((gap > 0) & (gap > threshold_ns))
        n = len(idx)
        parts.append((gap[idx], g.ends[idx], np.full(n, NULL if g.pid is None else g.pid),
                      np.full(n, NULL if g.dev is None else g.dev), np.full(n, k), idx))
    names = ("dur", "start", "pid", "dev", "group", "pos")
    if not parts:
        return {n: np.zeros(0, dtype=np.int64) for n in names}
    return {n: np.concatenate([p[i] for p in parts]).astype(np.int64) for i, n in enumerate(names)}


def gap_order(g: dict[str, npt.NDArray[np.int64]], rows: int) -> npt.NDArray[np.intp]:
    """The first ``rows`` of :func:`gaps` (all for -1), in the rule's order.

    Longest first, then by process (a missing one last), start, group and position.
    """
    from engine.analysis.nsys.analyze.copy_calls import top_rows

    pid_order = np.where(g["pid"] == NULL, np.iinfo(np.int64).max, g["pid"])
    return top_rows([g["pos"], g["group"], g["start"], pid_order], -g["dur"], rows)


def gap_contexts(trace: Trace, window: tuple[int | None, int | None],
                 wanted: list[tuple[int, int, int]]) -> dict[tuple[int, int, int], int | None]:
    """Context of the op that ended at each (pid, device, end): the latest start, then table order.

    Keys as :func:`gaps` gives them (:data:`NULL` for a missing pid or device); None: no context.
    """
    best: dict[tuple[int, int, int], tuple[int, int, int, int]] = {}
    values = np.array(sorted({w[2] for w in wanted}), dtype=np.int64)
    want = set(wanted)
    call_pids: list[Any] = []
    for ti, t in enumerate(_tables(trace)):
        cols = _read(trace, t, window, call_pids)
        rows = np.flatnonzero(np.isin(cols["end"], values))
        for r in rows.tolist():
            key = (int(cols["pid"][r]), int(cols["deviceId"][r]), int(cols["end"][r]))
            if key not in want:
                continue
            rank = (int(cols["start"][r]), ti, r, int(cols["contextId"][r]))
            if key not in best or rank[:3] > best[key][:3]:
                best[key] = rank
        del cols
    return {k: _value(v[3]) for k, v in best.items()}


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
