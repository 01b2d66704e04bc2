"""Every GPU operation of a trace (kernels, copies, memsets) as numpy columns.

``gpu_op_columns(trace)`` (built once per trace) holds, in the order of ``steps.gpu_ops`` (the
kernels, then the copies, then the memsets, each in table order), each operation's start and
end, its kind, its process, GPU and stream as small integer codes with their labels (the texts
``steps.pid_keys`` gives), and ``launch``: the start of the API call that issued it (its own
start when that call is unknown). The columns are ``trace.columns(...)`` on every trace: an nsys
export answers from its columnar cache (only these columns, memory-mapped once cached), so a
10M-kernel report never becomes a DataFrame; other traces (Kineto) from their tables.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.calls import api_calls, small_codes
from engine.analysis.tables import (
    blocks_sorted,
    disjoint_sorted,
    match_first_counted,
    narrowed,
    pid_keys,
    trace_cache,
)
from engine.reports.base import NULL
from engine.system.arrays import distinct
from engine.system.errors import ReportError

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy.typing as npt

    from engine.reports.base import Trace

KINDS = ("kernels", "memcpy", "memset")
#: each operation's columns (``pid``: its process, from globalPid)
_COLS = ("start", "end", "deviceId", "streamId", "correlationId", "pid")
_SUMMARY_COLS = {"kernels": (), "memcpy": ("copyKind", "srcKind", "dstKind", "bytes"), "memset": ("bytes",)}


class GpuOps:
    """The GPU operations of one trace (see the module docstring).

    Attributes:
        start, end, launch: int64 ns.
        kind: int8 index into :data:`KINDS`.
        pid, dev, stream: int32 codes into ``pids``, ``devs``, ``streams`` (text labels).

    """

    def __init__(self, trace: Trace) -> None:
        self._trace = trace
        self._blocks: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
        self._cums: dict[str, npt.NDArray[np.int64]] = {}
        parts = [p for p in (self._part(k) for k in KINDS) if p is not None]
        self.counts = {k: 0 for k in KINDS}
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            self.start = self.end = z
            self.kind = np.zeros(0, dtype=np.int8)
            self.pid = self.dev = self.stream = np.zeros(0, dtype=np.int32)
            self.pids: tuple[str, ...] = ()
            self.devs: tuple[str, ...] = ()
            self.streams: tuple[str, ...] = ()
            self._corr_parts: list[Any] = []
            return
        for k, cols in parts:
            self.counts[k] = len(cols["start"])

        def cat(c: str) -> npt.NDArray[Any]:
            arrs = [np.asarray(p[1][c]) for p in parts]
            return np.concatenate(arrs) if len(arrs) > 1 else arrs[0]

        self.start = cat("start").astype(np.int64, copy=False)
        self.end = cat("end").astype(np.int64, copy=False)
        self.kind = np.concatenate([np.full(len(p[1]["start"]), KINDS.index(p[0]), dtype=np.int8)
                                    for p in parts])
        self.pid, self.pids = _labelled([p[1]["pid"] for p in parts])
        self.dev, self.devs = _labelled([p[1]["deviceId"] for p in parts])
        self.stream, self.streams = _labelled([p[1]["streamId"] for p in parts])
        # kept as the tables' columns (mapped from the cache): joined into one array only when asked
        self._corr_parts = [p[1]["correlationId"] for p in parts]

    def _part(self, kind: str) -> tuple[str, dict[str, Any]] | None:
        """One table's columns (``trace.columns``): keys as (values, None); None for an empty table."""
        trace = self._trace
        if not trace.has(kind):
            return None
        cols = _columns_of(trace, kind)
        if not len(cols["start"]):
            return None
        out: dict[str, Any] = {c: (cols[c], None) if c in ("pid", "deviceId", "streamId") else cols[c]
                               for c in _COLS}
        if trace.columns_cached(kind, ["correlationId"]) is not None:
            # mapped again on each use (not held: its pages leave with the join)
            out["correlationId"] = _Mapped(trace, kind, "correlationId")
        return kind, out

    @property
    def corr(self) -> npt.NDArray[np.int64]:
        """Correlation ids (-1 missing), built on each use (the joins run once)."""
        arrs = [c.load() if isinstance(c, _Mapped) else np.asarray(c) for c in self._corr_parts]
        if not arrs:
            return np.zeros(0, dtype=np.int64)
        out = np.concatenate(arrs) if len(arrs) > 1 else arrs[0]
        return np.where(out == NULL, -1, out) if len(out) and int(out.min()) == NULL else out

    @property
    def n(self) -> int:
        """Number of operations."""
        return len(self.start)

    @property
    def dur(self) -> npt.NDArray[np.int64]:
        """Durations (end - start), built on each use."""
        out: npt.NDArray[np.int64] = self.end - self.start
        return out

    @cached_property
    def order(self) -> npt.NDArray[np.int64] | None:
        """The stable sort of the operations by start; None when they are in start order already."""
        st = self.start
        if len(st) < 2 or bool((st[1:] >= st[:-1]).all()):
            return None
        out: npt.NDArray[np.int64] = np.argsort(st, kind="stable")
        return out.astype(np.int32) if len(out) < 2**31 else out

    def sorted_col(self, col: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A column (row for row with the operations) in start order."""
        return col if self.order is None else col[self.order]

    @cached_property
    def sorted_start(self) -> npt.NDArray[np.int64]:
        """Starts in start order, kept: the summary and the overlap rule both walk them.

        35M operations: built a chunk at a time into a file mapping (``file_backed.gathered``).
        """
        from engine.analysis.file_backed import gathered

        return self.start if self.order is None else gathered(self.start, self.order)

    @cached_property
    def sorted_end(self) -> npt.NDArray[np.int64]:
        """Ends in start order, kept (see :attr:`sorted_start`)."""
        from engine.analysis.file_backed import gathered

        return self.end if self.order is None else gathered(self.end, self.order)

    def blocks(self, pid: str | None = None) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The union of the operations (of process ``pid``) as sorted disjoint blocks (cached).

        Operations that never overlap (one stream) are their own blocks: touching ones may stay
        apart, which changes no busy time, first start or last end (what the callers read).
        """
        key = "" if pid is None else pid
        if key not in self._blocks:
            s, e = self.sorted_start, self.sorted_end
            if not (pid is None or len(self.pids) == 1 and self.pids[0] == pid):
                mine = self.sorted_col(self.of_pid(pid))
                s, e = s[mine], e[mine]
            self._blocks[key] = (s, e) if disjoint_sorted(s, e) else blocks_sorted(s, e)
        return self._blocks[key]

    def busy_cum(self, pid: str | None = None) -> npt.NDArray[np.int64]:
        """0, then the running sum of :meth:`blocks`' lengths (cached: each busy-time query reuses it)."""
        key = "" if pid is None else pid
        if key not in self._cums:
            bs, be = self.blocks(pid)
            self._cums[key] = np.concatenate([[0], np.cumsum(np.asarray(be, dtype=np.int64) - bs)])
        return self._cums[key]

    def pid_code(self, key: str) -> int:
        """The code of a process key, -1 when no operation has it."""
        try:
            return self.pids.index(key)
        except ValueError:
            return -1

    def of_pid(self, key: str) -> npt.NDArray[np.bool_]:
        """Which operations belong to the process ``key``."""
        out: npt.NDArray[np.bool_] = self.pid == self.pid_code(key)
        return out

    @cached_property
    def _calls_join(self) -> tuple[npt.NDArray[np.int64], bool]:
        """(each operation's API call row or -1, whether the calls' (process, correlation id) are unique)."""
        calls = api_calls(self._trace)
        if not (calls.n and self.n):
            return np.full(self.n, -1, dtype=np.int64), True
        lut = np.array([calls.pid_code(p) for p in self.pids] + [-2], dtype=np.int64)
        lut[lut == -1] = -2
        idx, distinct = match_first_counted((lut[self.pid], self.corr), (calls.pid, calls.corr))
        return (idx.astype(np.int32) if calls.n < 2**31 else idx), distinct == calls.n

    @property
    def call_row(self) -> npt.NDArray[np.int64]:
        """Row (in ``api_calls``) of the API call that issued each operation, -1 when unknown."""
        return self._calls_join[0]

    @property
    def calls_unique(self) -> bool:
        """True when no two API calls share a (process, correlation id)."""
        return self._calls_join[1]

    @property
    def launch(self) -> npt.NDArray[np.int64]:
        """Start of each operation's API call (process + correlation id), else its own start.

        Built on each use (the step detection asks twice), so it is not held afterwards. Where the
        calls' (process, correlation id) keys are unique, by a binary search on them (CUPTI hands
        correlation ids out in increasing order: a 400k-kernel report in 20 ms instead of the
        general join's 130 ms).
        """
        fast = self._launch_by_search()
        if fast is not None:
            return fast
        launch = self.start.copy()
        idx = self.call_row
        got = idx >= 0
        if got.any():
            launch[got] = api_calls(self._trace).start[idx[got]]
        return launch

    def _launch_by_search(self) -> npt.NDArray[np.int64] | None:
        """:attr:`launch` by binary search on the calls' unique keys; None where it does not apply.

        Where the calls' keys (process code x 2^40 + correlation id) rise strictly in table order
        (CUPTI's order), the operations are looked up a chunk at a time in each process's run of
        correlation ids, with no key column of all the calls or operations built (a 69M-call
        report: ~0.1 GB of temporaries instead of ~1.5 GB); otherwise by sorting the keys.
        """
        calls = api_calls(self._trace)
        if not calls.n:
            return self.start.copy()
        lut = np.array([calls.pid_code(p) for p in self.pids], dtype=np.int64)
        if (lut < 0).any():
            return None
        cpid, ccorr = calls.pid, calls.corr
        if _keys_rise(cpid, ccorr):
            return self._launch_in_chunks(lut, cpid, ccorr, calls.start)
        return self._launch_by_sorting(lut, cpid, ccorr, calls.start)

    def _launch_in_chunks(self, lut: npt.NDArray[np.int64], cpid: npt.NDArray[Any], ccorr: npt.NDArray[Any],
                          cstart: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """:meth:`_launch_by_search` where the calls' keys rise strictly (see :func:`_keys_rise`)."""
        # one run of calls per process code (the codes rise with the keys), correlation ids rising in it
        runs = [(int(np.searchsorted(cpid, p, side="left")), int(np.searchsorted(cpid, p, side="right")))
                for p in range(int(cpid[-1]) + 1)]
        out = self.start.copy()
        for lo, corr in self._corr_chunks():
            key = lut[self.pid[lo:lo + len(corr)]] * (1 << 40) + corr  # the sorted search's keys
            code, cid = key >> 40, key & ((1 << 40) - 1)
            del key
            one = int(code.min()) == int(code.max())
            for p in ([int(code[0])] if one else distinct(code).tolist()):
                if not 0 <= p < len(runs) or runs[p][0] == runs[p][1]:
                    continue
                a, b = runs[p]
                at = np.arange(len(cid)) if one else np.flatnonzero(code == p)
                want = cid if one else cid[at]
                a, b = narrowed(ccorr, a, b, want)  # the part of the run the chunk's ids fall in
                if a == b:
                    continue
                run = ccorr[a:b]
                j = np.minimum(np.searchsorted(run, want), b - a - 1)
                hit = run[j] == want
                out[at[hit] + lo] = cstart[j[hit] + a]
        return out

    def _corr_chunks(self) -> Iterator[tuple[int, npt.NDArray[np.int64]]]:
        """(first operation, its correlation ids (-1 missing)) a chunk of :data:`_CHUNK` at a time."""
        lo = 0
        for part in self._corr_parts:
            col = part.load() if isinstance(part, _Mapped) else np.asarray(part)
            for a in range(0, len(col), _CHUNK):
                c = np.asarray(col[a:a + _CHUNK], dtype=np.int64)
                yield lo + a, np.where(c == NULL, -1, c) if len(c) and int(c.min()) == NULL else c
            lo += len(col)

    def _launch_by_sorting(self, lut: npt.NDArray[np.int64], cpid: npt.NDArray[Any], ccorr: npt.NDArray[Any],
                           cstart: npt.NDArray[np.int64]) -> npt.NDArray[np.int64] | None:
        """:meth:`_launch_by_search` on the calls' keys sorted (None where two calls share a key)."""
        ckey = cpid.astype(np.int64) * (1 << 40) + ccorr
        order = None if bool((ckey[1:] >= ckey[:-1]).all()) else np.argsort(ckey, kind="stable")
        ks = ckey if order is None else ckey[order]
        if len(ks) > 1 and bool((ks[1:] == ks[:-1]).any()):
            return None  # several calls share a key: the general join picks the first
        okey = lut[self.pid].astype(np.int64) * (1 << 40) + self.corr
        i = np.minimum(np.searchsorted(ks, okey), len(ks) - 1)
        hit = ks[i] == okey
        rows = i if order is None else order[i]
        out = self.start.copy()
        out[hit] = cstart[rows[hit]]
        return out


#: rows per chunk of the launch join (~16 MB per int64 temporary)
_CHUNK = 1 << 21


def _keys_rise(cpid: npt.NDArray[Any], ccorr: npt.NDArray[Any]) -> bool:
    """True when the calls' keys rise strictly and split back into (code, id): ids in [0, 2^40).

    Checked a chunk at a time (no key column of all the calls).
    """
    if not len(ccorr) or int(ccorr.min()) < 0 or int(ccorr.max()) >= 1 << 40:
        return False
    last = None
    for a in range(0, len(ccorr), _CHUNK):
        k = cpid[a:a + _CHUNK].astype(np.int64) * (1 << 40) + ccorr[a:a + _CHUNK]
        if (last is not None and int(k[0]) <= last) or bool((k[1:] <= k[:-1]).any()):
            return False
        last = int(k[-1])
    return True


#: values parsed per scan of a table (a 20M-copy table: its six columns, without the extras)
_PASS_VALUES = 130_000_000


def _columns_of(trace: Trace, kind: str) -> dict[str, npt.NDArray[Any]]:
    """:data:`_COLS` of a table through ``trace.columns``.

    The nsys analyze rules' columns of this table are read in the same scan where the trace keeps
    what it reads (an export's columnar cache), and the summary's (copy kinds, bytes), read later.
    """
    extra = [c for c in ("globalPid", "contextId", *_SUMMARY_COLS[kind]) if trace.has_columns(kind, [c])]
    cols = _all_cached(trace, kind, extra)  # all cached: no count of its rows, no read
    if cols is not None:
        return cols
    return _read_passes(trace, kind, extra, trace.row_count(kind) or 0)


def _read_passes(trace: Trace, kind: str, extra: list[str], rows: int) -> dict[str, npt.NDArray[Any]]:
    """:data:`_COLS` (and ``extra``, while they fit) of a table, as few scans as :data:`_PASS_VALUES` allows.

    Each scan's columns come back mapped from their cache files, so one scan's arrays are all this
    process holds of them.
    """
    every = [*_COLS, *extra] if rows * (len(_COLS) + len(extra)) <= _PASS_VALUES else list(_COLS)
    per_pass = max(1, _PASS_VALUES // max(rows, 1))
    out: dict[str, npt.NDArray[Any]] = {}
    for lo in range(0, len(every), per_pass):
        out.update(trace.columns(kind, every[lo:lo + per_pass]))
    return out


def _all_cached(trace: Trace, kind: str, extra: list[str]) -> dict[str, npt.NDArray[Any]] | None:
    """:data:`_COLS` mapped from the cache when they and ``extra`` are all cached already, else None."""
    if trace.columns_cached(kind, extra) is None:
        return None
    return trace.columns_cached(kind, list(_COLS))


class _Mapped:
    """A cached column opened (memory-mapped) each time it is used."""

    def __init__(self, trace: Trace, kind: str, name: str) -> None:
        self._args = (trace, kind, name)

    def load(self) -> npt.NDArray[np.int64]:
        trace, kind, name = self._args
        arr: npt.NDArray[np.int64] = trace.columns(kind, [name])[name]  # read again if the file went away
        return arr


def _labelled(cols: list[tuple[Any, Any]]) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
    """Codes (first appearance first) and text labels of a key over the tables, as pid_keys gives."""
    if all(raw is not None for raw, _ in cols):
        vals = [np.asarray(raw) for raw, _ in cols]
        v = np.concatenate(vals) if len(vals) > 1 else vals[0]
        null = v == NULL
        if not null.any() and len(v) and int(v.min()) >= 0:
            codes, uniq = small_codes(v)
            return codes, tuple(str(int(u)) for u in uniq)
    import pandas as pd

    keys = np.concatenate([pid_keys(ser if raw is None else _with_nan(np.asarray(raw))) for raw, ser in cols])
    c, u = pd.factorize(keys)
    return c.astype(np.int32), tuple(str(x) for x in u)


def _with_nan(v: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Raw column values with NULL as NaN (as the table gives them)."""
    null = v == NULL
    return np.where(null, np.nan, v) if null.any() else v


def gpu_op_columns(trace: Trace) -> GpuOps:
    """The trace's :class:`GpuOps`, built once per trace."""
    out: GpuOps = trace_cache(trace, "gpu_op_columns", lambda: GpuOps(trace))
    return out


def memset_bytes(trace: Trace) -> npt.NDArray[np.float64]:
    """Bytes of each memset (NULL: 0) as floats, in table order (``trace.columns``)."""
    v = np.asarray(trace.columns("memset", ["bytes"])["bytes"])
    out: npt.NDArray[np.float64] = np.where(v == NULL, 0.0, v.astype(np.float64))
    return out


class CopyColumns:
    """The copies of an nsys export as integer columns, their kinds coded (see :func:`copy_columns`).

    Attributes:
        start, end, nbytes: int64 per copy in table order (``nbytes``: NULL as 0).
        codes: per copy, an index into ``kinds``.
        kinds: the distinct (operation, source kind, destination kind) labels as the ``memcpy``
            table's text gives them (``str`` of each: an unknown label reads "nan"), in order of
            first appearance; ``known``: whether each operation label exists (the table's NaN).

    """

    def __init__(self, start: npt.NDArray[np.int64], end: npt.NDArray[np.int64],
                 nbytes: npt.NDArray[np.int64], codes: npt.NDArray[Any],
                 kinds: list[tuple[str, str, str]], known: list[bool]) -> None:
        self.start, self.end, self.nbytes, self.codes = start, end, nbytes, codes
        self.kinds, self.known = kinds, known

    @property
    def n(self) -> int:
        """Number of copies."""
        return len(self.start)


_COPY_RAW = ("start", "end", "bytes", "copyKind", "srcKind", "dstKind")


def copy_columns(trace: Trace) -> CopyColumns | None:
    """The trace's copies as :class:`CopyColumns` (built once per trace), from ``trace.columns``.

    None when the trace has no labels for its integer copy and memory kinds (``copy_kind_labels``,
    ``memory_kind_labels``: an nsys export's enums; a Kineto trace's kinds are labelled by the
    ``memcpy`` table's text only), its copy table lacks one of the columns, or a start, end or kind
    is NULL: callers then use the ``memcpy`` table.
    """
    out: CopyColumns | None = trace_cache(trace, "copy_columns", lambda: _copy_columns(trace))
    return out


def _copy_columns(trace: Trace) -> CopyColumns | None:
    copy_labels = getattr(trace, "copy_kind_labels", None)
    memory_labels = getattr(trace, "memory_kind_labels", None)
    if copy_labels is None or memory_labels is None or not trace.has_columns("memcpy", _COPY_RAW):
        return None
    cols: dict[str, npt.NDArray[Any]] = {}
    try:
        for batch in (("start", "end"), ("bytes",), ("copyKind", "srcKind", "dstKind")):
            cols.update(trace.columns("memcpy", batch))  # mapped from the cache: not held twice
    except ReportError:
        return None
    kinds_raw = [np.asarray(cols[c]) for c in ("copyKind", "srcKind", "dstKind")]
    if any(len(cols[c]) and int(np.asarray(cols[c]).min()) < 0 for c in _COPY_RAW if c != "bytes"):
        return None  # a NULL (or negative) start, end or kind: the table's path
    his = [int(a.max()) + 1 if len(a) else 1 for a in kinds_raw]
    if his[0] * his[1] * his[2] >= 1 << 25:
        return None
    key = (kinds_raw[0].astype(np.int64) * his[1] + kinds_raw[1]) * his[2] + kinds_raw[2]
    codes, uniq = small_codes(key)
    del key
    opers: dict[int, str] = copy_labels()
    mems: dict[int, str] = memory_labels()
    kinds: list[tuple[str, str, str]] = []
    known: list[bool] = []
    for u in uniq.tolist():
        ck, rest = divmod(int(u), his[1] * his[2])
        sk, dk = divmod(rest, his[2])
        kinds.append((str(opers.get(ck, np.nan)), str(mems.get(sk, np.nan)), str(mems.get(dk, np.nan))))
        known.append(ck in opers)
    nbytes = np.asarray(cols["bytes"])
    if len(nbytes) and int(nbytes.min()) == NULL:
        nbytes = np.where(nbytes == NULL, 0, nbytes)
    return CopyColumns(np.asarray(cols["start"]), np.asarray(cols["end"]), nbytes, codes, kinds, known)
