"""Where did the time go? The host-vs-GPU breakdown, per thread, process, GPU and stream.

``summarize(trace)`` returns a typed :class:`~engine.analysis.summary_model.Summary` (schema
``kernelscope.summary/2``, documented in the README; ``to_json()`` gives the JSON): the capture's
wall span; CUDA API time by category and per thread; GPU busy time per GPU (union over its
streams) split into kernels, memcpy by direction and host memory kind, memset; GPU idle; one row
per process; achieved bandwidth per direction x memory kind; and the steps found by structure
(:mod:`engine.analysis.steps`) with per-step, warm-up and one-time API costs. Every share of wall
or busy time is a union, so none exceeds 100 % (see ``summary_model``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis import summary_model as sm
from engine.analysis.calls import CATEGORY_ORDER, ApiCalls, api_calls, api_category, small_codes
from engine.analysis.copy_kinds import bandwidth_rows, copy_kinds, host_kind, with_unions
from engine.analysis.file_backed import filled, gathered, hand_back
from engine.analysis.ops import copy_columns, gpu_op_columns, memset_bytes
from engine.analysis.ranges import nvtx_span
from engine.analysis.steps import (
    Steps,
    pandas_order,
    pid_key,
    range_names,
    ranges_table,
    running_sums_by,
    steps_per_process,
)
from engine.analysis.summary_model import SCHEMA, Summary
from engine.analysis.summary_text import format_summary as format_summary  # re-exported
from engine.analysis.sums import code_sums, int_sums, label_rows, masked_sum
from engine.analysis.sums import sum_count as sum_count  # re-exported: the rules import it from here
from engine.analysis.tables import UNION_CHUNK as _UNION_CHUNK
from engine.analysis.tables import disjoint_sorted, table_records, trace_cache
from engine.analysis.tables import union_sorted as _union_sorted
from engine.reports.base import NULL

if TYPE_CHECKING:

    from engine.reports.base import Trace

#: API categories in display order, with a short human label.
API_CATEGORIES: dict[str, str] = {
    "allocation": "memory allocation / free",
    "copies": "memcpy / memset calls",
    "synchronization": "synchronization",
    "launches": "kernel and graph launches",
    "setup": "context, stream and module setup",
    "other": "other CUDA API calls",
}

def interval_union_ns(starts: np.ndarray, ends: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Total length of the union of [start, end) intervals, and the merged blocks.

    Returns:
        (union length in ns, block starts, block ends), blocks sorted by start.

    """
    if len(starts) == 0:
        empty = np.array([], dtype=np.int64)
        return 0, empty, empty
    s = np.asarray(starts, dtype=np.int64)
    if len(s) > 1 and not bool((s[1:] >= s[:-1]).all()):  # sorted already (the usual case): no copies
        order = np.argsort(s, kind="stable")
        s = s[order]
        e = np.maximum.accumulate(np.asarray(ends, dtype=np.int64)[order])
        del order
    else:
        e = np.maximum.accumulate(np.asarray(ends, dtype=np.int64))
    # A new block starts where an interval begins after everything before it ended.
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    block_idx = np.flatnonzero(new)
    block_starts = s[block_idx]
    block_ends = np.append(e[block_idx[1:] - 1], e[-1])
    return int((block_ends - block_starts).sum()), block_starts, block_ends


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def _union(starts: Any, ends: Any) -> int:
    return interval_union_ns(np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))[0]


_NVTX_COLUMNS = ["start", "end", "eventType", "text", "domain", "pid", "tid"]


def capture_window(trace: Trace) -> tuple[int, int]:
    """The capture's (start, end) in ns: the span of everything the trace recorded."""
    starts: list[int] = []
    ends: list[int] = []
    calls, ops = api_calls(trace), gpu_op_columns(trace)
    for s_col, e_col in ((calls.start, calls.end), (ops.start, ops.end)):  # integer columns, NULL < 0
        first, last = _known_extreme(s_col, np.min), _known_extreme(e_col, np.max)
        starts += [first] if first is not None else []
        ends += [last] if last is not None else []
    span = nvtx_span(trace)  # an nsys export: from the columnar cache
    if span is not None:
        starts += [span[0]] if span[0] is not None else []
        ends += [span[1]] if span[1] is not None else []
    for name in ("cpu_ops",) if span is not None else ("nvtx", "cpu_ops"):
        if not trace.has(name):  # (an nsys export has no CPU operators: no empty table built)
            continue
        if name == "cpu_ops":  # (a Kineto trace's 8M operators: no table made)
            cols = trace.columns(name, ["start", "end"])
            first, last = _known_extreme(cols["start"], np.min), _known_extreme(cols["end"], np.max)
            starts += [first] if first is not None else []
            ends += [last] if last is not None else []
            continue
        # nvtx is read whole by the reader whatever the columns: take the step detection's too
        # (steps.ranges_table), so that it finds them cached instead of reading the table again
        df = trace.table(name, _NVTX_COLUMNS)
        if len(df):
            st = df["start"].dropna()
            en = df["end"].dropna()
            if len(st):
                starts.append(int(st.min()))
            if len(en):
                ends.append(int(en.max()))
    if not starts:
        return 0, 0
    return min(starts), max(ends or starts)


def busy_cum(trace: Trace, pid: str | None, bs: np.ndarray, be: np.ndarray) -> np.ndarray:
    """``GpuOps.busy_cum(pid)``: 0, then the running busy time of its blocks ``bs``, ``be`` (``blocks(pid)``).

    Built a chunk at a time into a file mapping (``steps.running_sums_by``; 35M blocks: 0.28 GB
    and no full-length temporaries), once per trace and process.
    """
    def make() -> np.ndarray:
        return running_sums_by(len(bs), lambda lo, hi: np.asarray(be[lo:hi], dtype=np.int64) - bs[lo:hi])

    out: np.ndarray = trace_cache(trace, f"summary_busy_cum:{'' if pid is None else pid}", make)
    return out


def _known_extreme(a: np.ndarray, pick: Any) -> int | None:
    """``pick`` (np.min or np.max) of the values of ``a`` that are not NULL; None when there are none.

    A chunk at a time, the mapped pages read handed back after each (two 69M-call columns: 1.1 GB).
    """
    found: list[int] = []
    for lo in range(0, len(a), _UNION_CHUNK):
        c = a[lo:lo + _UNION_CHUNK]
        if int(c.min()) == NULL:
            c = c[c != NULL]
        if len(c):
            found.append(int(pick(c)))
        hand_back()
    return int(pick(found)) if found else None


def busy_between(block_starts: np.ndarray, block_ends: np.ndarray, a: np.ndarray, b: np.ndarray,
                 cum: np.ndarray | None = None) -> np.ndarray:
    """Busy time inside each window [a, b) given disjoint sorted busy blocks (vectorised).

    ``cum``: the blocks' cumulative busy time (``GpuOps.busy_cum``) when the caller has it.
    """
    bs = np.asarray(block_starts, dtype=np.int64)
    be = np.asarray(block_ends, dtype=np.int64)
    if cum is None:
        cum = np.concatenate([[0], np.cumsum(be - bs)])

    def f(t: np.ndarray) -> np.ndarray:  # busy time before t
        t = np.asarray(t, dtype=np.int64)
        if not len(t):
            return np.zeros(0, dtype=np.int64)
        # blocks that start at or before t, searched among those between the chunk's extremes
        lo = int(np.searchsorted(bs, t.min(), side="right"))
        i = lo + np.searchsorted(bs[lo:int(np.searchsorted(bs, t.max(), side="right"))], t, side="right")
        j = np.maximum(i - 1, 0)
        partial = np.clip(t - bs[j], 0, be[j] - bs[j])
        res: np.ndarray = np.where(i > 0, cum[j] + partial, 0)
        return res

    if not len(bs):
        return np.zeros(len(a), dtype=np.int64)
    a, b = np.asarray(a), np.asarray(b)
    out: np.ndarray = np.empty(len(a), dtype=np.int64)
    for lo in range(0, len(a), _WINDOW_CHUNK):  # a chunk of windows at a time: small temporaries
        out[lo:lo + _WINDOW_CHUNK] = f(b[lo:lo + _WINDOW_CHUNK]) - f(a[lo:lo + _WINDOW_CHUNK])
        if len(a) > _WINDOW_CHUNK:  # the mapped blocks' pages read leave this process's RSS
            hand_back()
    return out


#: windows per step of :func:`busy_between`
_WINDOW_CHUNK = 1 << 20


# -- host --------------------------------------------------------------------------------------------
def _start_order(start: np.ndarray) -> np.ndarray | None:
    """The stable sort order of ``start``; None when it is sorted already (no copies needed)."""
    if len(start) < 2 or bool((start[1:] >= start[:-1]).all()):
        return None
    out: np.ndarray = np.argsort(start, kind="stable")
    return out


class _Calls:
    """The valid calls (start and end known) of a trace, sorted by start once, with their codes."""

    def __init__(self, calls: ApiCalls) -> None:
        v = calls.valid
        self.calls = calls
        self.start = calls.start if v is None else calls.start[v]
        self.end = calls.end if v is None else calls.end[v]
        self.n = len(self.start)
        self._valid = v
        self.pid = self._pick(calls.pid)
        self.name = self._pick(calls.name)
        self.category = self._pick(calls.category)
        # a column of 69M durations is 0.55 GB: written to a file mapping a chunk at a time (file_backed)
        self.dur = filled(self.n, np.result_type(self.end, self.start),
                          lambda lo, hi: self.end[lo:hi] - self.start[lo:hi])
        self.order = _start_order(self.start)
        self.s_sorted = self.sorted_col(self.start)
        self.e_sorted = self.sorted_col(self.end)
        # no two calls overlap (one thread, say): every union below is a sum of durations
        self.disjoint = disjoint_sorted(self.s_sorted, self.e_sorted)

    def union(self, mask: np.ndarray | None = None) -> int:
        """Union of the valid calls (those where ``mask``, in start order, holds)."""
        if self.disjoint:
            return int(self.dur.sum()) if mask is None else masked_sum(self.sorted_col(self.dur), mask)
        return _union_sorted(self.s_sorted, self.e_sorted, mask)

    def sorted_col(self, col: np.ndarray) -> np.ndarray:
        """A column of the valid calls in start order."""
        return col if self.order is None else _in_order(col, self.order)

    def _pick(self, a: np.ndarray) -> np.ndarray:
        return a if self._valid is None else a[self._valid]

    def tid(self) -> np.ndarray:
        """Thread codes of the valid calls."""
        return self._pick(self.calls.tid)

    def groups(self, codes: np.ndarray) -> list[tuple[int, int, int, int]]:
        """(code, calls, summed duration, union) per code, in order of first appearance."""
        if not self.n:
            return []
        c, uniq = small_codes(codes)
        res = _groups_sorted(self.sorted_col(c), self.s_sorted, self.e_sorted, list(range(len(uniq))),
                             self.disjoint)
        return [(int(uniq[j]), n, d, u) for j, n, d, u in res]


def _in_order(col: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``col[order]``, a big one built a chunk at a time into a file mapping (``file_backed.filled``)."""
    return gathered(col, order)


def _host(d: _Calls, wall_ns: int) -> sm.Host:
    if not d.n:
        return sm.Host(0, 0, 0, 0, None, (), ())
    total = int(d.dur.sum())
    # Sorted by start once: the unions below take subsets of these, already in order.
    union = total if d.disjoint else d.union()
    cats = []
    seen = np.zeros(d.n, dtype=bool)
    cat_sorted = None if d.disjoint else d.sorted_col(d.category)
    covered = 0
    names = d.calls.names
    # per name once (a name has one category): code 0 is "no name", name j is code j + 1
    name_sums, name_counts = code_sums(d.name + 1, d.dur, len(names) + 1)
    name_cat = np.array([CATEGORY_ORDER.index(c) for c in ["other", *map(api_category, names)]],
                        dtype=np.int64)
    for cat, label in API_CATEGORIES.items():
        code = CATEGORY_ORDER.index(cat)
        mine = name_cat == code
        n_cat = int(name_counts[mine].sum())
        if not n_cat:
            continue
        by_name = label_rows(np.where(mine, name_sums, 0)[1:], np.where(mine, name_counts, 0)[1:], names)
        cat_total = int(name_sums[mine].sum())
        if cat_sorted is None:  # unions of calls that never overlap: their durations
            cat_union, now = cat_total, covered + cat_total
        else:
            in_cat_sorted = cat_sorted == code
            seen |= in_cat_sorted
            cat_union, now = d.union(in_cat_sorted), d.union(seen)
        attributed, covered = now - covered, now
        cats.append(sm.ApiCategory(
            cat, label, cat_total, cat_union, attributed, n_cat, _pct(cat_total, total),
            _pct(cat_union, wall_ns),
            tuple(sm.TopCall(str(n), s, c) for n, s, c in by_name[:5]),
        ))
    threads = []
    ntid = max(len(d.calls.tids), 1)
    if len(d.calls.tids) == 1 and len(d.calls.pids) == 1:  # one thread: the calls' own numbers
        groups = [(0, d.n, total, union)]
    else:
        keys = d.tid() if len(d.calls.pids) == 1 else d.pid.astype(np.int64) * ntid + d.tid()
        groups = d.groups(keys)
    for key, n, dsum, u in groups:
        threads.append(sm.ThreadRow(d.calls.pids[key // ntid], d.calls.tids[key % ntid], n, dsum, u,
                                    _pct(u, wall_ns)))
    threads.sort(key=lambda t: -t.union_ns)
    return sm.Host(total, union, d.n, len(threads), _pct(union, wall_ns), tuple(cats), tuple(threads))


# -- GPU ---------------------------------------------------------------------------------------------
class _Ops:
    """Every GPU operation (``ops.gpu_op_columns``) with its part code and bytes, sorted by start once."""

    def __init__(self, trace: Trace) -> None:
        o = gpu_op_columns(trace)
        self.trace = trace
        self.o = o
        self.n = o.n
        self.labels: list[str] = ["kernels"]
        part = np.zeros(o.n, dtype=np.int16)
        # bytes per (GPU code, part code): copies and memsets only (their tables, not a column per op)
        self.bytes_by: dict[tuple[int, int], float] = {}
        mc_rows = o.kind == 1
        if mc_rows.any():
            cc = copy_columns(trace)
            if cc is not None and cc.n == int(mc_rows.sum()):  # integer columns: no copies table
                codes, uniq = cc.codes, cc.kinds
                nbytes = cc.nbytes.astype(float)
            else:
                mc = trace.table("memcpy", ["operation", "srcKindName", "dstKindName", "bytes"])
                codes, uniq = copy_kinds(trace, mc)
                nbytes = mc["bytes"].astype(float).fillna(0).to_numpy()
            lut = np.array([self._code(f"memcpy {op} ({host_kind(op, a, b)})") for op, a, b in uniq],
                           dtype=np.int16)
            part[mc_rows] = lut[codes]
            self._add_bytes(o.dev[mc_rows], lut[codes], nbytes)
            del nbytes
        ms_rows = o.kind == 2
        if ms_rows.any():
            code = self._code("memset")
            part[ms_rows] = code
            self._add_bytes(o.dev[ms_rows], np.full(int(ms_rows.sum()), code, dtype=np.int16),
                            memset_bytes(trace))
        self.part = part
        self.order = o.order
        # the sorted columns (35M operations: 0.6 GB) go to file mappings as they are built (file_backed)
        self.s = o.sorted_start
        self.e = o.sorted_end
        self.part_s = self.sorted_col(part)
        # no two operations overlap (one stream, say): every union below is a sum of durations
        self.disjoint = disjoint_sorted(self.s, self.e)

    def union(self, s: np.ndarray, e: np.ndarray) -> int:
        """Union of some of the operations (``s``, ``e``: a start-ordered selection of them)."""
        return int((e - s).sum()) if self.disjoint else _union_sorted(s, e)

    def _add_bytes(self, dev: np.ndarray, part: np.ndarray, nbytes: np.ndarray) -> None:
        k = 1 << 15
        key = dev.astype(np.int64) * k + part
        sums = np.bincount(key, weights=nbytes)  # integer bytes: float sums exact below 2**53
        for j in np.flatnonzero(np.bincount(key)):
            d, p = divmod(int(j), k)
            self.bytes_by[(d, p)] = self.bytes_by.get((d, p), 0.0) + float(sums[j])

    def part_bytes(self, dev: int | None, part: int) -> int:
        """Bytes of the copies/memsets of one part, on one GPU (all GPUs: None)."""
        return int(sum(v for (d, p), v in self.bytes_by.items() if p == part and (dev is None or d == dev)))

    def _code(self, label: str) -> int:
        if label not in self.labels:
            self.labels.append(label)
        return self.labels.index(label)

    def sorted_col(self, col: np.ndarray) -> np.ndarray:
        """A column in start order."""
        return col if self.order is None else _in_order(col, self.order)


def _groups_sorted(codes_s: np.ndarray, s: np.ndarray, e: np.ndarray, first: list[int],
                   disjoint: bool = False) -> list[tuple[int, int, int, int]]:
    """(code, count, summed duration, union) per code of ``first`` (in that order).

    ``codes_s``, ``s``, ``e``: rows sorted by start. A few codes: one masked, chunked union each
    (no copy of the columns); many: one stable sort by code gives each code's rows as one slice,
    still in start order. ``disjoint``: no two rows overlap (``disjoint_sorted``), so each union
    is the summed duration.
    """
    if not len(first):
        return []
    k = int(codes_s.max()) + 1 if len(codes_s) else 0
    counts = np.bincount(codes_s, minlength=k)
    sums = np.zeros(k, dtype=np.int64)
    for lo in range(0, len(s), _UNION_CHUNK):
        sl = slice(lo, lo + _UNION_CHUNK)
        sums += int_sums(codes_s[sl], e[sl] - s[sl], k)
    if disjoint:
        return [(c, int(counts[c]), int(sums[c]), int(sums[c])) for c in first]
    if len(first) <= _MASKED_GROUPS:
        return [(c, int(counts[c]), int(sums[c]), _union_sorted(s, e, codes_s == c)) for c in first]
    by = np.argsort(codes_s.astype(np.int16) if k < 1 << 15 else codes_s, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    ss, es = s[by], e[by]
    return [(c, int(counts[c]), int(sums[c]),
             _union_sorted(ss[bounds[c]:bounds[c + 1]], es[bounds[c]:bounds[c + 1]])) for c in first]


#: up to this many groups, each group's union is a masked pass (beyond: one sort by group)
_MASKED_GROUPS = 16


def _first_codes(codes: np.ndarray) -> list[int]:
    """The distinct codes in order of first appearance."""
    return [int(u) for u in small_codes(codes)[1]] if len(codes) else []


def _parts(ops: _Ops, sel: np.ndarray | None, dev: int | None, busy: int, wall_ns: int
           ) -> tuple[sm.GpuPart, ...]:
    """Busy time per part (kernels, copies by kind, memsets) of the operations ``sel`` (all: None).

    ``sel``: the operations of GPU ``dev`` (start order), or None with ``dev`` for every operation
    of a one-GPU trace, or None with ``dev`` None for all.
    """
    if sel is None:
        ps, s, e = ops.part_s, ops.s, ops.e
        first = _first_codes(ops.part)
    else:
        ps, s, e = ops.part_s[sel], ops.s[sel], ops.e[sel]
        picked = np.flatnonzero(sel) if ops.order is None else np.sort(ops.order[sel])
        first = _first_codes(ops.part[picked])  # in row order, as groupby sees them
    rows = _groups_sorted(ps, s, e, first, ops.disjoint)
    rows.sort(key=lambda r: -r[2])
    out = []
    seen = None if ops.disjoint else np.zeros(len(s), dtype=bool)
    covered = 0
    for code, count, total, u in rows:
        if seen is None:  # operations that never overlap: the parts' union grows by this part's
            now = covered + total
        else:
            seen |= ps == code
            now = _union_sorted(s, e, seen)
        name = ops.labels[code]
        has_bytes = name != "kernels"
        nbytes = ops.part_bytes(dev, code) if has_bytes else None
        out.append(sm.GpuPart(name, total, u, now - covered, count, nbytes, _pct(u, busy), _pct(u, wall_ns),
                              _pct(now - covered, busy)))
        covered = now
    return tuple(out)


def _gpu(trace: Trace, ops: _Ops, wall_ns: int) -> sm.Gpu:
    if not ops.n:
        return sm.Gpu(0, wall_ns, _pct(0, wall_ns), 0, 0, (), ())
    busy = ops.union(ops.s, ops.e)
    names = {pid_key(g["id"]): (None if g["name"] is None else str(g["name"]))
             for g in table_records(trace, "gpus", ["id", "name"])}
    o = ops.o
    dev_s = ops.sorted_col(o.dev)
    str_s = ops.sorted_col(o.stream)
    devices = []
    one = len(o.devs) == 1  # one GPU: its columns as they are, no copies
    for dev_code in sorted(set(_first_codes(dev_s)), key=lambda c: o.devs[c]):
        sel = None if one else dev_s == dev_code
        s, e = (ops.s, ops.e) if sel is None else (ops.s[sel], ops.e[sel])
        b = busy if one else ops.union(s, e)
        st_codes = str_s if sel is None else str_s[sel]
        first = _first_codes(o.stream if one else o.stream[o.dev == dev_code])
        streams = [sm.StreamRow(o.streams[c], u, n, _pct(u, b))
                   for c, n, _d, u in _groups_sorted(st_codes, s, e, first, ops.disjoint)]
        streams.sort(key=lambda r: -r.busy_ns)
        dev = o.devs[dev_code]
        devices.append(sm.DeviceRow(dev, names.get(dev), b, max(wall_ns - b, 0), _pct(b, wall_ns),
                                    _parts(ops, sel, dev_code, b, wall_ns), tuple(streams)))
    # one GPU: the whole trace's parts are that GPU's (same rows, same busy time, same bytes)
    parts = devices[0].parts if one else _parts(ops, None, None, busy, wall_ns)
    return sm.Gpu(busy, max(wall_ns - busy, 0), _pct(busy, wall_ns), sum(d.busy_ns for d in devices),
                  len(devices), parts, tuple(devices))


def _processes(trace: Trace, api: _Calls, ops: _Ops, wall_ns: int, host: sm.Host, gpu: sm.Gpu
               ) -> tuple[sm.ProcessRow, ...]:
    """One row per process; with one process, its unions are the host's and the GPUs' (not redone)."""
    names = {pid_key(p["pid"]): (None if p["name"] is None else str(p["name"]))
             for p in table_records(trace, "processes", ["pid", "name"])}
    if len(api.calls.pids) == 1 and api.n:  # every valid call is this process's
        per_api = {api.calls.pids[0]: (api.n, host.union_ns)}
    else:
        per_api = {api.calls.pids[c]: (n, u) for c, n, _d, u in api.groups(api.pid)}
    o = ops.o
    if len(o.pids) == 1 and ops.n:
        per_ops = {o.pids[0]: (0, gpu.busy_ns)}
    else:
        pid_s = ops.sorted_col(o.pid) if ops.n else o.pid
        per_ops = {o.pids[c]: (c, u)
                   for c, _n, _d, u in _groups_sorted(pid_s, ops.s, ops.e, _first_codes(o.pid), ops.disjoint)}
    keys = list(dict.fromkeys([*per_api, *per_ops]))
    out = []
    for pk in keys:
        if pk == "" and len(keys) > 1:
            continue
        n_api, au = per_api.get(pk, (0, 0))
        code, ob = per_ops.get(pk, (-1, 0))
        mine = o.pid == code if code >= 0 else None
        out.append(sm.ProcessRow(
            str(pk), names.get(str(pk)), n_api, au, _pct(au, wall_ns), ob, _pct(ob, wall_ns),
            int((o.kind[mine] == 0).sum()) if mine is not None else 0,
            tuple(sorted(o.devs[int(d)] for d in np.flatnonzero(np.bincount(o.dev[mine]))))
            if mine is not None else ()))
    out.sort(key=lambda p: (-p.gpu_busy_ns, -p.api_union_ns))
    return tuple(out)


# -- iterations --------------------------------------------------------------------------------------
def _costs(sums: np.ndarray, counts: np.ndarray, n: int | None) -> tuple[sm.ApiCost, ...]:
    """API time per category (``sums``/``counts`` by CATEGORY_ORDER code) of some calls, most first.

    Per step too when ``n`` is given.
    """
    return tuple(sm.ApiCost(str(c), s, k, s // n if n else None)
                 for c, s, k in label_rows(sums, counts, CATEGORY_ORDER))


def _iterations(trace: Trace, api: _Calls, ops: _Ops, range_name: str | None,
                phases: tuple[sm.Phase, ...]) -> sm.Iterations | None:
    every = steps_per_process(trace, range_name=range_name)
    if not every:
        return None
    st: Steps = every[0]
    durs = np.asarray(st.durations_ns, dtype=np.int64)
    ss, se = st.window(steady_only=True)
    n_steady = len(ss)
    code = api.calls.pid_code(st.pid)
    mine = api.pid == code if api.n and code >= 0 else None
    if mine is not None and mine.any():
        if len(api.calls.pids) == 1:  # one process: its columns as they are
            t, cat, dur = api.start, api.category, api.dur
        else:
            t, cat, dur = api.start[mine], api.category[mine], api.dur[mine]
        in_any, in_steady = st.locate_host(t)  # host calls: the step the host was issuing
        # one pass over the calls: code = category x 3 + (0 steady, 1 warm-up, 2 outside the steps)
        phase = (~in_any).astype(np.int8) * 2 + (in_any & ~in_steady)
        del in_any, in_steady
        sums, counts = code_sums(cat.astype(np.int8) * 3 + phase, dur, 3 * len(CATEGORY_ORDER))
        del phase
        per_it, warm, once = (_costs(sums[p::3], counts[p::3], n)
                              for p, n in enumerate((n_steady, st.warmup_count or None, None)))
    else:
        per_it = warm = once = ()
    bs, be = ops.o.blocks(st.pid)
    busy_each = busy_between(bs, be, ss, se, busy_cum(trace, st.pid, bs, be))
    # the median step's busy time, as the step is the median (a stalled step's extra work is not
    # spread over the others)
    busy_steady = float(np.median(busy_each)) if len(busy_each) else 0.0
    rest = durs[1:]
    return sm.Iterations(
        range=st.range_name, source=st.source, chosen_by=st.chosen_by, pid=st.pid, count=st.count,
        warmup_count=st.warmup_count, total_ns=int(durs.sum()), first_ns=int(durs[0]),
        median_ns=float(np.median(durs)), steady_median_ns=st.steady_median_ns,
        median_after_first_ns=float(np.median(rest)) if len(rest) else None,
        first_iteration_extra_ns=first_step_extra_ns(durs),
        gpu_busy_per_step_ns=busy_steady if n_steady else 0.0,
        api_per_iteration=per_it, api_warmup=warm, api_one_time=once, phases=phases,
        processes=tuple(sm.ProcessSteps(
            p.pid, p.range_name, p.count, p.warmup_count, p.steady_median_ns,
            # the steps' own process: the median just taken (the same windows and blocks)
            (busy_steady if n_steady else None) if p is st else _busy_per_step(ops, p)) for p in every),
        candidates=tuple(range_names(trace)),
        method=st.method, confidence=st.confidence, why=st.why,
        host_steady_median_ns=st.host_steady_median_ns,
        outlier_steps=tuple(int(i) for i in np.flatnonzero(st.outlier_mask)),
    )


def first_step_extra_ns(durations: np.ndarray) -> int | None:
    """The first step minus the others' median: 0 when it was not slower (no time), None for one step."""
    return max(int(durations[0] - np.median(durations[1:])), 0) if len(durations) > 1 else None


def _steady_host_windows(st: Steps) -> tuple[np.ndarray, np.ndarray]:
    """Each steady step's host-side window (the GPU's where the host's are not known).

    A phase is a host range (NVTX, a Kineto annotation): it belongs to the step the host was
    issuing, so it is measured against the steps' host windows, like the API calls.
    """
    hs, he = st.host_starts, st.host_ends
    if hs is None or he is None or len(hs) != st.count:
        s, e = st.starts_ns, st.ends_ns
    else:
        s = np.asarray(hs, dtype=np.int64)
        e = np.maximum(np.asarray(he, dtype=np.int64), s)
    steady = ~st.warmup_flags
    return (s[steady], e[steady]) if steady.any() else (s, e)


def _busy_per_step(ops: _Ops, st: Steps) -> float | None:
    """The median GPU busy time of one process's steady steps (its own GPU work only)."""
    ss, se = st.window(steady_only=True)
    if not len(ss):
        return None
    bs, be = ops.o.blocks(st.pid)
    each = busy_between(bs, be, ss, se, busy_cum(ops.trace, st.pid, bs, be))
    return float(np.median(each)) if len(each) else None


def _phases(trace: Trace, st: Steps) -> tuple[sm.Phase, ...]:
    """The other ranges of the steps' process that start inside a step (forward, backward ...).

    Per steady step, a phase's time is the union of its instances inside that step's host window
    (overlapping instances count once), so it never exceeds the step: ``per_iteration_ns`` is the
    median of it over the steady steps, ``steady_ns`` its sum. ``count``, ``total_ns``,
    ``median_ns`` and ``first_ns`` describe the instances that start in a step, warm-up included.
    """
    r = ranges_table(trace)
    if not len(r):
        return ()
    mine = np.flatnonzero((r.pid == r.code(r.pids, st.pid)) & (r.name != r.code(r.names, st.range_name)))
    rows = mine[st.contains_host(r.start[mine])]
    ws, we = _steady_host_windows(st)
    out = []
    codes, all_codes = r.name[rows], r.name[mine]
    for code in sorted(set(codes.tolist()), key=lambda c: r.names[c]):  # groupby("name") order
        count, total, first, median = _instances(r.start, r.end, rows[codes == code])
        every = mine[all_codes == code]
        _, us, ue = interval_union_ns(r.start[every], r.end[every])
        del every
        each = busy_between(us, ue, ws, we)  # the phase's union inside each steady step
        del us, ue
        out.append(sm.Phase(str(r.names[code]), count, total, int(np.median(each)), first, median,
                            int(each.sum())))
    out.sort(key=lambda p: -p.total_ns)
    return tuple(out)


def _instances(start: np.ndarray, end: np.ndarray, g: np.ndarray) -> tuple[int, int, int, float]:
    """(count, summed duration, the first instance's duration, median duration) of rows ``g``.

    The first instance is ``sort_values("start")``'s first row: the only earliest start, else the
    one pandas' sort puts first among the tied (its quicksort, run only then).
    """
    s, e = start[g], end[g]
    d = e - s
    del e
    i = int(np.argmin(s))
    if int((s == s[i]).sum()) > 1:
        i = int(pandas_order(s)[0])
    return len(g), int(d.sum()), int(d[i]), float(np.median(d))


def summarize(trace: Trace, *, range_name: str | None = None) -> Summary:
    """Compute the breakdown of a trace (schema ``kernelscope.summary/2``).

    Args:
        trace: any loaded trace (nsys sqlite/.nsys-rep or Kineto).
        range_name: the step range to use instead of the one found by structure.

    Returns:
        The typed summary; its ``findings`` are empty here (``findings.overview`` fills them from
        the findings engine).

    """
    start, end = capture_window(trace)
    wall_ns = end - start
    gpu_list = tuple(
        sm.GpuInfo(**{k: sm.strict(row.get(k)) for k in ("id", "name", "smCount", "memoryBandwidth",
                                                        "totalMemory", "computeMajor", "computeMinor")})
        for row in table_records(trace, "gpus"))
    # the steps first (cached per trace): their launch sorts run before the columns below are held
    every = steps_per_process(trace, range_name=range_name)
    # the steps' phases (host ranges) next, before the calls' and operations' sorted columns are held
    phases = _phases(trace, every[0]) if every else ()
    api = _Calls(api_calls(trace))
    ops = _Ops(trace)
    host, gpu = _host(api, wall_ns), _gpu(trace, ops, wall_ns)
    return Summary(
        schema=SCHEMA,
        report=sm.ReportMeta(str(trace.info.path), trace.info.kind, trace.info.product_version,
                             trace.info.schema_version, gpu_list),
        missing=tuple(trace.missing_report()),
        wall=sm.Wall(start, end, wall_ns),
        host=host,
        gpu=gpu,
        processes=_processes(trace, api, ops, wall_ns, host, gpu),
        bandwidth=with_unions(bandwidth_rows(trace), gpu.parts),
        iterations=(its := _iterations(trace, api, ops, range_name, phases)),
        no_steps="" if its is not None else _no_steps(trace, range_name),
    )


def _no_steps(trace: Trace, range_name: str | None) -> str:
    """Why there are no steps, in one sentence."""
    if range_name is not None:
        return f"no steps: no repeating range {range_name!r} in this report"
    from engine.analysis.stepfind import no_steps_reason

    return no_steps_reason(trace)
