"""The Perfetto events of an nsys SQLite export, streamed from the columnar cache with bounded memory.

:class:`SqliteEvents` gives the same events, in the same order and bytes, as the trace-event
document of :func:`engine.analysis.export.perfetto_trace`, without holding a table in memory:

- every integer column comes from ``trace.columns`` (the export's columnar cache) and is read a
  row range at a time from its ``.npy`` file (``pread``, no mapping held, so the
  resident set does not grow with the report);
- one scan per table first checks the columns (NULLs send the export down the general path), finds
  the time origin and the processes / threads / streams the metadata names;
- flow arrows join each kernel / memcpy to the first CUDA API call of the same process and
  ``correlationId`` through the GPU side only: the sorted distinct keys of the GPU rows (far fewer
  than the calls), one binary search per call chunk to note the matching call's start and thread,
  one per GPU chunk to write the arrows;
- rows are formatted a chunk at a time by :func:`~engine.analysis.export_perfetto_rows.format_rows`.

The one thing that grows with the report is that flow table: 21 bytes per distinct kernel / memcpy
key (the key, the call's start and thread, a flag), ~630 MB for 30M GPU rows; the calls, however
many, only pass through it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.export import FLOW_CAT, FLOW_NAME, GPU_PID_BASE, NVTX_STARTEND_TID
from engine.analysis.export_perfetto_rows import Vocab, distinct_texts, format_rows
from engine.reports.base import NULL, decode_global_tid
from engine.system.arrays import distinct
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    Ints = npt.NDArray[np.int64]

#: Rows formatted per chunk (a few tens of MB of text).
CHUNK = 100_000
#: Rows per chunk of the checking scans (integers only: a few MB per column).
SCAN = 1_000_000
#: Columns of a table not yet cached are read a few at a time, this many bytes of values per pass
#: (each pass scans the table once; 400k rows: all columns in one pass, 21M rows: one per pass).
_READ_BYTES = 1 << 28


def _js(s: object) -> str:
    return json.dumps(str(s))


def release_free_memory() -> None:
    """Return the C heap's free pages to the OS (glibc ``malloc_trim``; nothing elsewhere).

    Parsing a table's columns frees hundreds of MB in blocks that glibc keeps for reuse (its mmap
    threshold rises after the first big free); without this the export's peak RSS is that plus the
    formatting's own (big400k cold: 553 -> 438 MB).
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class Fallback(Exception):
    """The export has NULLs or lacks a column: the general path handles it."""


class Column:
    """One integer column, read a row range at a time (from its cache file where there is one)."""

    def __init__(self, arr: Any) -> None:
        self.n = len(arr)
        self.dtype = arr.dtype
        self._arr: Any = None
        self._fd = -1
        if isinstance(arr, np.memmap) and arr.filename:
            self._fd = os.open(arr.filename, os.O_RDONLY)
            self._offset = int(arr.offset)
        else:
            self._arr = arr

    def __getitem__(self, rows: slice) -> Any:
        a, b, _ = rows.indices(self.n)
        if self._arr is not None:
            return self._arr[a:b]
        size = self.dtype.itemsize
        data = os.pread(self._fd, (b - a) * size, self._offset + a * size)
        return np.frombuffer(data, dtype=self.dtype)

    def close(self) -> None:
        """Close the cache file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Table:
    """Columns of one table, read by row ranges."""

    def __init__(self, cols: dict[str, Column]) -> None:
        self.cols = cols
        self.n = next(iter(cols.values())).n

    def chunks(self, names: list[str], size: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """(first row, {name: values}) for consecutive row ranges of ``size`` (default ``CHUNK``) rows."""
        size = size or CHUNK
        for a in range(0, self.n, size):
            yield a, {k: self.cols[k][a:a + size] for k in names}

    def close(self) -> None:
        """Close the columns' files."""
        for c in self.cols.values():
            c.close()


def _pid(g: Any) -> Any:
    return decode_global_tid(np.asarray(g, dtype=np.int64))[0]


def _tid(g: Any) -> Any:
    return decode_global_tid(np.asarray(g, dtype=np.int64))[1]


def _distinct(k: Any) -> Any:
    """Distinct values (runs collapsed first: ids repeat in long runs)."""
    k = np.asarray(k, dtype=np.int64)
    if len(k) > 1:
        k = k[np.concatenate(([True], k[1:] != k[:-1]))]
    return distinct(k)


def _key(pid: Any, tid: Any) -> Any:
    return (np.asarray(pid, dtype=np.int64) << 32) | (np.asarray(tid, dtype=np.int64) & 0xFFFFFFFF)


def _gpu_pid(c: dict[str, Any]) -> Any:
    return GPU_PID_BASE + np.asarray(c["deviceId"], dtype=np.int64)


class _Calls:
    """Per distinct GPU key (pid << 32 | correlationId, sorted): the first CUDA API call with that key."""

    def __init__(self, keys: Ints) -> None:
        self.keys = keys
        self.ts = np.zeros(len(keys), dtype=np.int64)  # the call's start
        self.tid = np.zeros(len(keys), dtype=np.int32)  # and thread (its pid is the key's)
        self.claimed = np.zeros(len(keys), dtype=bool)

    def claim(self, akey: Ints, start: Ints, tid: Ints) -> None:
        """Note the first call (in table order) of each GPU key among these calls (the next chunk)."""
        keys, claimed = self.keys, self.claimed
        pos = np.minimum(np.searchsorted(keys, akey), len(keys) - 1)
        rows = np.flatnonzero(keys[pos] == akey)
        rows = rows[~claimed[pos[rows]]]
        if not len(rows):
            return
        groups, first = np.unique(pos[rows], return_index=True)  # first call of a key in this chunk
        rows = rows[first]
        self.ts[groups] = np.asarray(start)[rows]
        self.tid[groups] = np.asarray(tid)[rows]
        claimed[groups] = True


class SqliteEvents:
    """The events of an nsys SQLite export (see the module docstring); ``parts()`` yields the text."""

    def __init__(self, trace: NsysSqliteTrace) -> None:
        self.trace = trace
        self.count = 0
        self.tables: list[Table] = []
        self.seen: list[Ints] = []  # pids named in the metadata
        self.used: list[Ints] = []  # (pid << 32 | tid) of every event

    @classmethod
    def open(cls, trace: NsysSqliteTrace) -> SqliteEvents | None:
        """The fast path, or None where it does not apply (NULLs, missing columns: the general path)."""
        ev = cls(trace)
        try:
            if ev._read():
                return ev
        except (ReportError, Fallback):
            pass
        ev.close()
        return None

    def close(self) -> None:
        """Close the cache files."""
        for t in self.tables:
            t.close()
        self.tables = []

    # -- reading ---------------------------------------------------------------------------------
    def _table(self, kind: str, cols: dict[str, str]) -> Table | None:
        """A table's integer columns (this module's name -> the engine's), cached first.

        None when the table is absent or empty. Columns not cached yet are read a few per pass
        (<= ``_READ_BYTES`` of values), one table at a time, and their values are dropped as soon
        as the cache file is written (two tables read at once in two threads were no faster on two
        busy cores and peaked ~80 MB higher).
        """
        if not self.trace.has(kind):
            return None
        if not self.trace.has_columns(kind, list(cols.values())):
            raise Fallback
        n = self.trace.row_count(kind) or 0
        per = max(1, _READ_BYTES // (8 * max(1, n)))  # columns per pass over the table
        items = list(cols.items())
        return self._load(kind, [dict(items[i:i + per]) for i in range(0, len(items), per)])

    def _load(self, kind: str, groups: list[dict[str, str]]) -> Table | None:
        cols: dict[str, Column] = {}
        for group in groups:
            got = self.trace.columns(kind, list(group.values()))  # mapped from the file just written
            for name, col in group.items():
                cols[name] = Column(got[col])
            del got
        t = Table(cols)
        self.tables.append(t)
        return t if t.n else None

    def _read(self) -> bool:
        se = {"start": "start", "end": "end"}
        gpu = {**se, "deviceId": "deviceId", "streamId": "streamId", "gpid": "globalPid"}
        corr = {"corr": "correlationId"}
        self.api = self._table("api", {**se, "nameId": "nameId", "gtid": "globalTid", **corr})
        self.kern = self._table("kernels", {**gpu, "nameId": "nameId", **corr, "grid": "gridShape",
                                            "block": "blockShape"})
        self.mc = self._table("memcpy", {**gpu, **corr, "bytes": "bytes", "copyKind": "copyKind"})
        self.ms = self._table("memset", {**gpu, "bytes": "bytes"})
        nvtx = {**se, "eventType": "eventType", "textId": "textId", "gtid": "globalTid", "rowid": "rowid"}
        self.nv = self._table("nvtx", nvtx) if self._nvtx_ok() else None
        release_free_memory()  # the parsed columns are in their files now: give the heap back
        starts: list[int] = []
        for t in (self.api, self.kern, self.mc, self.ms, self.nv):
            if t is not None and not self._check(t, starts):
                return False
        self.t0 = min(starts) if starts else 0
        self._scan_meta()
        return True

    def _nvtx_ok(self) -> bool:
        return not self.trace.has("nvtx") or self.trace.has_columns("nvtx", ["textId", "text", "globalTid"])

    def _check(self, t: Table, starts: list[int]) -> bool:
        """No NULL (but in end / textId), correlation ids in [0, 2**32); notes the first start."""
        first = None
        for _, c in t.chunks(list(t.cols), SCAN):
            for name, v in c.items():
                if name not in ("end", "textId") and len(v) and int(v.min()) == NULL:
                    raise Fallback
            if "corr" in c and len(c["corr"]) and (int(c["corr"].min()) < 0 or int(c["corr"].max()) >= 2**32):
                return False
            s = int(c["start"].min())
            first = s if first is None else min(first, s)
        if first is not None:
            starts.append(first)
        return True

    def _scan_meta(self) -> None:
        """The pids and (pid, tid) pairs of every event, and the calls that flow arrows start from."""
        gpu = [t for t in (self.kern, self.mc, self.ms) if t is not None]
        for t in gpu:
            for _, c in t.chunks(["deviceId", "streamId"], SCAN):
                pid = GPU_PID_BASE + np.asarray(c["deviceId"], dtype=np.int64)
                self.seen.append(_distinct(pid))
                self.used.append(_distinct(_key(pid, c["streamId"])))
        if self.nv is not None:
            for _, c in self.nv.chunks(["eventType", "end", "gtid"], SCAN):
                et, g = np.asarray(c["eventType"]), np.asarray(c["gtid"])
                ended = np.asarray(c["end"]) != NULL
                for etype in (59, 60):
                    sel = ended & (et == etype)
                    if sel.any():
                        pid = _pid(g[sel])
                        self.seen.append(_distinct(pid))
                        tid = _tid(g[sel]) if etype == 59 else np.full(len(pid), NVTX_STARTEND_TID)
                        self.used.append(_distinct(_key(pid, tid)))
                sel = et == 34
                if sel.any():
                    self.used.append(_distinct(_key(_pid(g[sel]), _tid(g[sel]))))
        self.flows: _Calls | None = None
        if self.api is None:
            return
        self.flows = self._gpu_keys()
        for _, c in self.api.chunks(["gtid", "corr", "start"], SCAN):
            g = c["gtid"]
            pid = _pid(g)
            self.seen.append(_distinct(pid))
            self.used.append(_distinct(_key(pid, _tid(g))))
            if self.flows is not None:
                self.flows.claim(_key(pid, c["corr"]), c["start"], _tid(g))

    def _gpu_keys(self) -> _Calls | None:
        """Sorted distinct (pid << 32 | correlationId) of the kernels and copies (flow ends)."""
        parts = [t for t in (self.kern, self.mc) if t is not None]
        if not parts:
            return None
        keys = np.empty(sum(t.n for t in parts), dtype=np.int64)
        at = 0
        for t in parts:
            for _, c in t.chunks(["gpid", "corr"], SCAN):
                keys[at:at + len(c["corr"])] = _key(_pid(c["gpid"]), c["corr"])
                at += len(c["corr"])
        keys.sort()  # in place: the only full-size copy is the distinct keys below
        if len(keys) > 1:
            keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
        return _Calls(keys)

    # -- events ----------------------------------------------------------------------------------
    def _emit(self, pieces: list[Any], n: int) -> bytes | memoryview:
        self.count += n
        return format_rows(pieces, n)

    def _x(self, head: Vocab, codes: Any, c: dict[str, Any], pid: Any, tid: Any,
           args: list[Any], rows: Any = None) -> bytes | memoryview:
        """Complete ("X") events; ``head`` gives the text up to ``"ts":`` (category and name)."""
        start, end = np.asarray(c["start"], dtype=np.int64), np.asarray(c["end"], dtype=np.int64)
        if rows is not None:
            start, end = start[rows], end[rows]
        return self._emit([("v", head, codes), ("us", start - self.t0), ',"dur":', ("us", end - start),
                           ',"pid":', ("d", pid), ',"tid":', ("d", tid), *args, "}"], len(start))

    @staticmethod
    def _head(cat: str, name: Callable[[int], object]) -> Vocab:
        return Vocab(lambda i: ',\n{"ph":"X","cat":"' + cat + '","name":' + _js(name(i)) + ',"ts":')

    def parts(self) -> Iterator[str | bytes | memoryview]:
        """The document, in pieces: metadata, CPU slices, NVTX, GPU slices, flows."""
        try:
            yield '{"traceEvents":[\n'
            meta = self._meta()
            self.count += len(meta)
            yield ",\n".join(meta)
            first = not meta
            for text in self._events():
                if text:  # every row starts with ",\n": not the document's first
                    yield text[2:] if first else text
                    first = False
            other = {"source": str(self.trace.info.path), "producer": "kernelscope",
                     "time_origin_ns": self.t0}
            yield '\n],"displayTimeUnit":"ns","otherData":' + json.dumps(other, separators=(",", ":")) + "}"
        finally:
            self.close()

    def _events(self) -> Iterator[bytes | memoryview]:
        strings = self.trace.strings()
        if self.api is not None:
            head = self._head("cuda_api", lambda i: re.sub(r"_v\d{4}$", "", strings.get(i, f"<unknown {i}>")))
            for _, c in self.api.chunks(["start", "end", "nameId", "gtid", "corr"]):
                yield self._x(head, head.codes(c["nameId"]), c, _pid(c["gtid"]), _tid(c["gtid"]),
                              [',"args":{"correlationId":', ("d", c["corr"]), "}"])
        if self.nv is not None:
            yield from self._nvtx(strings)
        if self.kern is not None:
            head = self._head("kernel", lambda i: strings.get(i))
            grid = Vocab(lambda k: f',"grid":"({k >> 32},{(k >> 16) & 0xFFFF},{k & 0xFFFF})"')
            block = Vocab(lambda k: f',"block":"({k >> 32},{(k >> 16) & 0xFFFF},{k & 0xFFFF})"}}')
            for _, c in self.kern.chunks(["start", "end", "nameId", "deviceId", "streamId", "corr", "grid",
                                          "block"]):
                yield self._x(head, head.codes(c["nameId"]), c, _gpu_pid(c), c["streamId"], [
                    ',"args":{"correlationId":', ("d", c["corr"]), ("v", grid, grid.codes(c["grid"])),
                    ("v", block, block.codes(c["block"]))])
        if self.mc is not None:
            ops = self.trace.copy_kind_labels()
            head = self._head("memcpy", lambda i: f"[CUDA memcpy {ops.get(i, 'nan')}]")
            for _, c in self.mc.chunks(["start", "end", "copyKind", "deviceId", "streamId", "bytes", "corr"]):
                yield self._x(head, head.codes(c["copyKind"]), c, _gpu_pid(c), c["streamId"], [
                    ',"args":{"bytes":', ("d", c["bytes"]), ',"correlationId":', ("d", c["corr"]), "}"])
        if self.ms is not None:
            head = self._head("memset", lambda i: "[CUDA memset]")
            for _, c in self.ms.chunks(["start", "end", "deviceId", "streamId", "bytes"]):
                yield self._x(head, head.codes(np.zeros(len(c["start"]), dtype=np.int64)), c, _gpu_pid(c),
                              c["streamId"], [',"args":{"bytes":', ("d", c["bytes"]), "}"])
        if self.flows is not None:
            yield from self._flows(self.flows)

    def _nvtx(self, strings: dict[int, str]) -> Iterator[bytes | memoryview]:
        """Push/pop ranges, then start/end ranges (one row per process), then marks."""
        assert self.nv is not None
        known: list[bool] = []

        def text(i: int) -> str:
            known.append(i in strings)
            return _js(strings.get(i, ""))

        texts = Vocab(text)
        names = ["start", "end", "eventType", "textId", "gtid", "rowid"]
        for etype in (59, 60, 34):
            for _, c in self.nv.chunks(names):
                et = np.asarray(c["eventType"])
                sel = et == etype if etype == 34 else (et == etype) & (np.asarray(c["end"]) != NULL)
                rows = np.flatnonzero(sel)
                if not len(rows):
                    continue
                g = np.asarray(c["gtid"])[rows]
                codes = texts.codes(np.asarray(c["textId"])[rows])
                need = np.flatnonzero(~np.asarray(known, dtype=bool)[codes])  # inline text, if any
                name: Any = ("v", texts, codes)
                if len(need):  # inline text where StringIds has none: this chunk's rows from SQLite
                    name = self._inline(texts, codes, np.asarray(c["rowid"], dtype=np.int64)[rows], need)
                if etype == 34:
                    yield self._emit([',\n{"ph":"i","s":"t","cat":"nvtx","name":', name, ',"ts":',
                                      ("us", np.asarray(c["start"], dtype=np.int64)[rows] - self.t0),
                                      ',"pid":', ("d", _pid(g)), ',"tid":', ("d", _tid(g)), "}"], len(rows))
                    continue
                tid = _tid(g) if etype == 59 else np.full(len(rows), NVTX_STARTEND_TID)
                start = np.asarray(c["start"], dtype=np.int64)[rows]
                end = np.asarray(c["end"], dtype=np.int64)[rows]
                yield self._emit([',\n{"ph":"X","cat":"nvtx","name":', name, ',"ts":',
                                  ("us", start - self.t0), ',"dur":', ("us", end - start), ',"pid":',
                                  ("d", _pid(g)), ',"tid":', ("d", tid), "}"], len(rows))

    def _inline(self, texts: Vocab, codes: Any, rowids: Ints, need: Any) -> tuple[str, Vocab, Any]:
        """The names with the rows ``need`` set to their inline text where they have one (by rowid range)."""
        want = rowids[need]
        got = self.trace.nvtx_inline_texts(int(want.min()), int(want.max()))
        codes = np.array(codes, dtype=np.int64)
        if got is None:
            return ("v", texts, codes)
        ids, text = got
        inline, distinct = distinct_texts(text, "\0")
        at = np.minimum(np.searchsorted(ids, want), len(ids) - 1)
        hit = ids[at] == want
        codes[need[hit]] = len(texts.strings) + inline[at[hit]]
        chunk = Vocab(texts.make)
        chunk.strings = texts.strings + [_js(t) for t in distinct]
        return ("v", chunk, codes)

    def _flows(self, calls: _Calls) -> Iterator[bytes | memoryview]:
        """``s``/``f`` pairs from each call to the GPU work of the same process and correlationId."""
        keys, claimed, call_ts, call_tid = calls.keys, calls.claimed, calls.ts, calls.tid
        head = f'"cat":"{FLOW_CAT}","name":"{FLOW_NAME}","id":'
        fid = 0
        for kind, t in (("kernel", self.kern), ("memcpy", self.mc)):
            if t is None:
                continue
            for _, c in t.chunks(["gpid", "corr", "start", "deviceId", "streamId"]):
                corr = np.asarray(c["corr"], dtype=np.int64)
                gkey = _key(_pid(c["gpid"]), corr)
                pos = np.searchsorted(keys, gkey)  # every GPU key is there
                rows = np.flatnonzero(claimed[pos])
                if not len(rows):
                    continue
                call = pos[rows]
                ids = np.arange(fid + 1, fid + 1 + len(rows), dtype=np.int64)
                fid += len(rows)
                args = [',"args":{"correlationId":', ("d", corr[rows]), ',"to":"' + kind + '"}}']
                yield self._emit([
                    ',\n{"ph":"s",' + head, ("d", ids), ',"ts":', ("us", call_ts[call] - self.t0),
                    ',"pid":', ("d", gkey[rows] >> 32), ',"tid":', ("d", call_tid[call]), *args,
                    ',\n{"ph":"f","bp":"e",' + head, ("d", ids), ',"ts":',
                    ("us", np.asarray(c["start"], dtype=np.int64)[rows] - self.t0),
                    ',"pid":', ("d", GPU_PID_BASE + np.asarray(c["deviceId"], dtype=np.int64)[rows]),
                    ',"tid":', ("d", np.asarray(c["streamId"])[rows]), *args], len(rows))
                self.count += len(rows)  # two events per row

    # -- metadata --------------------------------------------------------------------------------
    def _meta(self) -> list[str]:
        base = GPU_PID_BASE
        # The small tables straight from SQLite (no pandas: its import alone is ~80 MB).
        pnames = {int(str(p)): str(n) for p, n in self._small("processes", "pid", "name") if p is not None}
        gpus = self._small("gpus", "id", "name")
        gnames = {int(str(i)): str(n) for i, n in gpus if i is not None}
        out: list[str] = []
        pids = distinct(np.concatenate(self.seen)).tolist() if self.seen else []
        for pid in pids:
            if pid >= base:
                dev = pid - base
                label = f"GPU {dev}" + (f" {gnames[dev]}" if dev in gnames else "")
            else:
                label = pnames.get(pid, f"process {pid}")
            out.append(f'{{"ph":"M","name":"process_name","pid":{pid},"tid":0,"args":{{"name":{_js(label)}}}}}')
        pairs = distinct(np.concatenate(self.used)) if self.used else np.zeros(0, dtype=np.int64)
        for k in pairs[(pairs >> 32) >= base].tolist():
            pid, tid = k >> 32, k & 0xFFFFFFFF
            out.append(f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},'
                       f'"args":{{"name":"stream {tid}"}}}}')
        strings = self.trace.strings()
        have = set(pairs.tolist())
        for g, nid in self._small("threads", "globalTid", "nameId"):
            if g is None:
                continue
            p, t = decode_global_tid(int(str(g)))
            if ((p << 32) | t) in have:  # a name missing from StringIds reads "nan", as the tables give
                n = strings.get(nid, "nan") if isinstance(nid, int) else "nan"
                out.append(f'{{"ph":"M","name":"thread_name","pid":{p},"tid":{t},'
                           f'"args":{{"name":{_js(n)}}}}}')
        return out

    def _small(self, table: str, *cols: str) -> list[tuple[object, ...]]:
        """Rows of a small table as the export stores them (none when it or a column is absent)."""
        if not self.trace.has_columns(table, cols):
            return []
        return self.trace.stored_rows(table, cols)
