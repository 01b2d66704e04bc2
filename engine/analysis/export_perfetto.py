"""The timeline as Perfetto / Chrome trace-event JSON, streamed (optionally gzip-compressed).

:func:`write_perfetto` writes the same events as :func:`engine.analysis.export.perfetto_trace`
without building them as Python objects: for an nsys SQLite export the columns come from the
columnar cache (:class:`~engine.reports.columns.ColumnStore`, memory-mapped once cached), are
formatted ``_CHUNK`` rows at a time with one ``%`` template per kind, and are compressed (zlib
releases the GIL) in a writer thread while the next chunk is formatted. A name ending in ``.gz``
gives a gzip file, which ui.perfetto.dev opens as it is. Other traces (Kineto) go through
``perfetto_trace``, streamed event by event.
"""

from __future__ import annotations

import json
import queue
import re
import sqlite3
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from engine.system.atomic import atomic_write
from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.base import Trace
    from engine.reports.nsys_sqlite import NsysSqliteTrace

    Arr = npt.NDArray[np.int64]

#: Rows formatted per chunk (a few tens of MB of text).
_CHUNK = 100_000
try:
    import pyarrow.compute  # type: ignore[import-untyped]  # noqa: F401 - the C formatter
    _ARROW = True
except ImportError:  # pragma: no cover - pyarrow is optional
    _ARROW = False
#: Ids, kinds and small counts: kept as int32 in the cache (half the pages; int64 where one is wider)
_NARROW = frozenset({"nameId", "corr", "deviceId", "streamId", "copyKind", "eventType", "textId", "inline",
                     "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"})
#: Tables above this many rows are read one column at a time and then memory-mapped.
_ONE_BY_ONE_ROWS = 20_000_000


def write_perfetto(trace: Trace, path: Path) -> int:
    """Write the trace's timeline to ``path`` (gzip when it ends in ``.gz``); the number of events.

    Raises:
        KernelscopeError: the file cannot be written (one sentence).

    """
    from engine.reports.nsys_sqlite import NsysSqliteTrace

    fast = _SqliteEvents.open(trace) if isinstance(trace, NsysSqliteTrace) else None
    parts, counter = (fast.parts(), fast) if fast is not None else _generic_parts(trace)
    try:
        atomic_write(path, lambda fh: _stream(parts, fh, path.name.endswith(".gz")),
                     binary=True, shared=True, fsync=False)
    except OSError as exc:
        raise KernelscopeError(f"Could not write {path} ({exc.strerror}); choose another -o path.") from exc
    return counter.count


def _stream(parts: Iterator[str | bytes | memoryview], fh: IO[bytes], gz: bool) -> None:
    """Encode (and compress) ``parts`` into ``fh``; compression overlaps the next part's formatting."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31) if gz else None  # wbits 31: the gzip container
    q: queue.Queue[bytes | memoryview | None] = queue.Queue(maxsize=2)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            while (b := q.get()) is not None:
                if not errors:
                    fh.write(comp.compress(b) if comp is not None else b)
            if comp is not None and not errors:
                fh.write(comp.flush())
        except BaseException as exc:  # noqa: BLE001 - re-raised by the producer
            errors.append(exc)
            while q.get() is not None:  # drain so the producer never blocks
                pass

    t = threading.Thread(target=writer, name="ks-perfetto-writer", daemon=True)
    t.start()
    try:
        for text in parts:
            if errors:
                break
            q.put(text.encode() if isinstance(text, str) else text)
    finally:
        q.put(None)
        t.join()
    if errors:
        raise errors[0]


class _Counted:
    count = 0


def _generic_parts(trace: Trace) -> tuple[Iterator[str], _Counted]:
    from engine.analysis.export import perfetto_trace

    counted = _Counted()

    def parts() -> Iterator[str]:
        doc = perfetto_trace(trace)
        events = doc.pop("traceEvents")
        counted.count = len(events)
        yield '{"traceEvents":[\n'
        for i in range(0, len(events), _CHUNK):
            sep = ",\n" if i else ""
            yield sep + ",\n".join(json.dumps(e, separators=(",", ":")) for e in events[i:i + _CHUNK])
        yield "\n]," + json.dumps(doc, separators=(",", ":"))[1:]

    return parts(), counted


def _arrow_rows(pieces: list[Any]) -> memoryview | bytes:
    """The rows' text, joined element-wise by pyarrow (no Python per row)."""
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    cols: list[Any] = []
    for p in pieces:
        if isinstance(p, str):
            cols.append(p)
        elif p[0] == "s":
            cols.append(pa.array(p[1], type=pa.string()))
        elif p[0] == "d":
            cols.append(pc.cast(pa.array(np.asarray(p[1], dtype=np.int64)), pa.string()))
        else:  # "us": exact decimal microseconds of integer ns
            v = np.asarray(p[1], dtype=np.int64)
            a = np.abs(v)
            frac = pc.utf8_lpad(pc.cast(pa.array(a % 1000), pa.string()), 3, "0")
            whole = pc.cast(pa.array(a // 1000), pa.string())
            sign = pa.array(np.where(v < 0, "-", ""), type=pa.string()) if (v < 0).any() else ""
            cols += [sign, whole, ".", frac]
    joined = pc.binary_join_element_wise(*cols, "")
    if isinstance(joined, pa.ChunkedArray):
        joined = joined.combine_chunks()
    if not len(joined):
        return b""
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32 if joined.type == pa.string() else np.int64)
    lo, hi = int(offsets[joined.offset]), int(offsets[joined.offset + len(joined)])
    return memoryview(joined.buffers()[2])[lo:hi]  # no copy: the writer thread reads it


def _python_rows(pieces: list[Any]) -> str:
    """The rows' text with one ``%`` template per row (where pyarrow is not installed)."""
    fmt = {"d": "%d", "us": "%.3f", "s": "%s"}
    tmpl = "".join(p.replace("%", "%%") if isinstance(p, str) else fmt[p[0]] for p in pieces)
    cols = [(p[1] / 1000.0 if p[0] == "us" else p[1]).tolist() for p in pieces if not isinstance(p, str)]
    return "".join(tmpl % t for t in zip(*cols, strict=True))


def _js(s: object) -> str:
    return json.dumps(str(s))


class _SqliteEvents(_Counted):
    """The events of an nsys SQLite export, formatted from cached integer columns."""

    def __init__(self, trace: NsysSqliteTrace) -> None:
        self.trace = trace
        self.store = trace.column_store()

    @classmethod
    def open(cls, trace: NsysSqliteTrace) -> _SqliteEvents | None:
        """The fast path, or None where it does not apply (NULLs, missing columns: the general path)."""
        ev = cls(trace)
        try:
            return ev if ev._read() else None
        except (sqlite3.Error, _Fallback):
            return None

    # -- reading ---------------------------------------------------------------------------------
    def _cols(self, table: str, exprs: dict[str, str]) -> dict[str, Arr] | None:
        """Integer columns of a table (None when absent); huge tables one column at a time, mapped."""
        from engine.reports.columns import has_null

        if not self.trace.has_sqlite_table(table):
            return None
        have = set(self.trace.columns(table))
        if not all(c in have for e in exprs.values() for c in re.findall(r'"(\w+)"', e)):
            raise _Fallback
        (n,), = self.trace.rows(f"SELECT count(*) FROM {table}")
        if int(str(n)) > _ONE_BY_ONE_ROWS:
            out: dict[str, Arr] = {}
            for name, expr in exprs.items():
                self.store.read(table, {name: expr}, _NARROW)  # cached, then memory-mapped
                got = self.store.cached(table, name, expr)
                out[name] = got if got is not None else self.store.read(table, {name: expr}, _NARROW)[name]
        else:
            out = self.store.read(table, exprs, _NARROW)
        for name, arr in out.items():
            if name not in ("end", "textId") and has_null(arr):
                raise _Fallback
        return out

    def _read(self) -> bool:
        import numpy as np

        from engine.analysis.export import GPU_PID_BASE
        from engine.reports.columns import NULL

        se = {"start": '"start"', "end": '"end"'}
        gpu = {**se, "deviceId": '"deviceId"', "streamId": '"streamId"', "gpid": '"globalPid"'}
        self.api = self._cols("CUPTI_ACTIVITY_KIND_RUNTIME", {
            **se, "nameId": '"nameId"', "gtid": '"globalTid"', "corr": '"correlationId"'})
        self.kern = self._cols("CUPTI_ACTIVITY_KIND_KERNEL", {
            **gpu, "nameId": 'coalesce("demangledName", "shortName")', "corr": '"correlationId"',
            **{g: f'"{g}"' for g in ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")}})
        self.mc = self._cols("CUPTI_ACTIVITY_KIND_MEMCPY", {
            **gpu, "corr": '"correlationId"', "bytes": '"bytes"', "copyKind": '"copyKind"'})
        self.ms = self._cols("CUPTI_ACTIVITY_KIND_MEMSET", {**gpu, "bytes": '"bytes"'})
        self.nv = self._cols("NVTX_EVENTS", {
            **se, "eventType": '"eventType"', "textId": '"textId"', "gtid": '"globalTid"',
            "rowid": "rowid", "inline": '"text" IS NOT NULL'}) if self._nvtx_ok() else None
        for cols in (self.api, self.kern, self.mc):
            if cols is not None and len(cols["corr"]) and (
                    int(cols["corr"].min()) < 0 or int(cols["corr"].max()) >= 2**32):
                return False
        starts = [int(c["start"].min()) for c in (self.api, self.kern, self.mc, self.ms, self.nv)
                  if c is not None and len(c["start"])]
        self.t0 = min(starts) if starts else 0
        self.gpu_base = GPU_PID_BASE
        self.null = NULL
        self._np = np
        return True

    def _nvtx_ok(self) -> bool:
        have = set(self.trace.columns("NVTX_EVENTS"))
        return not self.trace.has_sqlite_table("NVTX_EVENTS") or {"textId", "text", "globalTid"} <= have

    # -- names -----------------------------------------------------------------------------------
    def _names(self, ids: Arr, name: Any) -> _Lazy:
        """JSON-quoted names of ``ids``, made per chunk (each distinct id looked up once)."""
        np = self._np
        ids = np.asarray(ids)
        top = int(ids.max()) if len(ids) else 0
        # ids are small (StringIds rows, kinds): a count per id finds the distinct ones without a sort
        uniq = (np.flatnonzero(np.bincount(ids, minlength=top + 1)) if len(ids) and int(ids.min()) >= 0
                and top < 1 << 26 else np.unique(ids))
        quoted = np.array([_js(name(int(u))) for u in uniq.tolist()], dtype=object)
        return _Lazy(lambda rows: quoted[np.searchsorted(uniq, ids[rows])], len(ids))

    def _nvtx_texts(self, nv: dict[str, Arr], rows: Arr) -> Any:
        np = self._np
        s = self.trace.strings()
        tid = np.asarray(nv["textId"])[rows]
        texts = self._names(tid, lambda i: s.get(i, ""))[slice(None)]
        known = np.array([int(i) in s for i in np.unique(tid).tolist()])
        if nv["inline"][rows].any():
            need = np.flatnonzero((np.asarray(nv["inline"])[rows] != 0)
                                  & ~known[np.searchsorted(np.unique(tid), tid)])
            if len(need):
                rowids = np.asarray(nv["rowid"])[rows][need]
                quoted: dict[object, str] = {}
                from engine.reports.nsys_sqlite import connect_readonly

                con = connect_readonly(Path(self.trace.info.sqlite_path or self.trace.info.path))
                cur = con.execute("SELECT rowid, text FROM NVTX_EVENTS WHERE text IS NOT NULL")
                while batch := cur.fetchmany(50_000):  # in batches: bounded memory at 10M
                    ids = np.array([r for r, _ in batch], dtype=np.int64)
                    at = np.minimum(np.searchsorted(rowids, ids), len(rowids) - 1)
                    hit = rowids[at] == ids
                    vals = [quoted.get(t) or quoted.setdefault(t, _js(t)) for _, t in batch]
                    texts[need[at[hit]]] = np.array(vals, dtype=object)[hit]
                con.close()
        return texts

    # -- events ----------------------------------------------------------------------------------
    def _x(self, cat: str, names: Any, c: dict[str, Arr], rows: Any, pid: Any, tid: Any,
           args: list[Any]) -> Iterator[str | bytes | memoryview]:
        np = self._np
        start = np.asarray(c["start"])[rows]
        end = np.asarray(c["end"])[rows]
        t0 = self.t0
        return self._render([
            ',\n{"ph":"X","cat":"' + cat + '","name":', ("s", names), ',"ts":',
            ("us", _Lazy(lambda r: start[r] - t0, len(start))), ',"dur":',
            ("us", _Lazy(lambda r: end[r] - start[r], len(start))), ',"pid":', ("d", pid), ',"tid":',
            ("d", tid), *args, "}"], len(start))

    def _render(self, pieces: list[Any], n: int) -> Iterator[str | bytes | memoryview]:
        """Rows of JSON text, each starting with a comma and a newline, ``_CHUNK`` rows per piece.

        ``pieces`` are literal strings and (kind, column) pairs: ``d`` an integer, ``us`` ns written
        as microseconds with three decimals (the exact value), ``s`` text (object array). With
        pyarrow every chunk is formatted in C (element-wise joins of string columns); without it,
        one ``%`` template per row.
        """
        self.count += n
        for i in range(0, n, _CHUNK):
            sl = slice(i, i + _CHUNK)
            chunk = [p if isinstance(p, str) else (p[0], p[1][sl]) for p in pieces]
            yield _arrow_rows(chunk) if _ARROW else _python_rows(chunk)

    def parts(self) -> Iterator[str | bytes | memoryview]:
        """The document, in pieces: metadata, CPU slices, NVTX, GPU slices, flows."""
        from engine.analysis.export import FLOW_CAT, FLOW_NAME, NVTX_STARTEND_TID
        from engine.reports.nsys_sqlite import COPY_KIND_LABELS

        np = self._np
        strings = self.trace.strings()
        empty = np.zeros(0, dtype=np.int64)
        pieces: list[Iterator[str | bytes | memoryview]] = []
        seen: list[Arr] = []
        used: list[Arr] = []  # (pid << 32 | tid) of every event

        def key(p: Arr, t: Arr) -> Arr:
            k: Arr = (p.astype(np.int64) << 32) | (t.astype(np.int64) & 0xFFFFFFFF)
            return k

        api = self.api
        if api is not None and len(api["start"]):
            g = np.asarray(api["gtid"])
            # pid / tid per slice, never as whole columns (69M rows at 10M kernels)
            a_pid = _Lazy(lambda r, g=g: (g[r] >> 24) & 0xFFFFFF, len(g))  # g bound now (reused below)
            a_tid = _Lazy(lambda r, g=g: g[r] & 0xFFFFFF, len(g))

            def api_name(i: int) -> str:
                return re.sub(r"_v\d{4}$", "", strings.get(i, f"<unknown {i}>"))

            for i in range(0, len(g), 10 * _CHUNK):
                sl = slice(i, i + 10 * _CHUNK)
                seen.append(np.unique(a_pid[sl]))
                used.append(np.unique(key(a_pid[sl], a_tid[sl])))
            pieces.append(self._x("cuda_api", self._names(api["nameId"], api_name), api, slice(None),
                                  a_pid, a_tid, [',"args":{"correlationId":', ("d", np.asarray(api["corr"])),
                                                 "}"]))
        else:
            a_pid = a_tid = _Lazy(lambda r: empty[r], 0)
        nv = self.nv
        if nv is not None and len(nv["start"]):
            et, g = np.asarray(nv["eventType"]), np.asarray(nv["gtid"])
            ended = np.asarray(nv["end"]) != self.null
            for etype in (59, 60):
                rows = np.flatnonzero(ended & (et == etype))
                if not len(rows):
                    continue
                pid = (g[rows] >> 24) & 0xFFFFFF
                tid = g[rows] & 0xFFFFFF if etype == 59 else np.full(len(rows), NVTX_STARTEND_TID)
                seen.append(np.unique(pid))
                used.append(np.unique(key(pid, tid)))
                pieces.append(self._x("nvtx", self._nvtx_texts(nv, rows), nv, rows, pid, tid, []))
            marks = np.flatnonzero(et == 34)
            if len(marks):
                pid, tid = (g[marks] >> 24) & 0xFFFFFF, g[marks] & 0xFFFFFF
                used.append(np.unique(key(pid, tid)))
                pieces.append(self._marks(self._nvtx_texts(nv, marks),
                                          np.asarray(nv["start"])[marks], pid, tid))
        gpu_parts: list[tuple[str, dict[str, Arr]]] = []
        if self.kern is not None and len(self.kern["start"]):
            k = self.kern
            grid = self._triples(k, "grid")
            block = self._triples(k, "block")
            gpu_parts.append(("kernel", k))
            pieces.append(self._gpu("kernel", self._names(k["nameId"], lambda i: strings.get(i)), k, [
                ',"args":{"correlationId":', ("d", np.asarray(k["corr"])), ',"grid":"', ("s", grid),
                '","block":"', ("s", block), '"}'], seen, used))
        if self.mc is not None and len(self.mc["start"]):
            m = self.mc
            ops = self.trace.enum_labels("ENUM_CUDA_MEMCPY_OPER", COPY_KIND_LABELS)
            gpu_parts.append(("memcpy", m))
            pieces.append(self._gpu("memcpy", self._names(
                m["copyKind"], lambda i: f"[CUDA memcpy {ops.get(i, 'nan')}]"), m,
                [',"args":{"bytes":', ("d", np.asarray(m["bytes"])), ',"correlationId":',
                 ("d", np.asarray(m["corr"])), "}"], seen, used))
        if self.ms is not None and len(self.ms["start"]):
            s = self.ms
            pieces.append(self._gpu("memset", np.full(len(s["start"]), _js("[CUDA memset]"), dtype=object), s,
                                    [',"args":{"bytes":', ("d", np.asarray(s["bytes"])), "}"], seen, used))
        if api is not None and len(api["start"]):
            pieces.append(self._flows(gpu_parts, a_pid, a_tid, FLOW_CAT, FLOW_NAME))

        yield '{"traceEvents":[\n'
        meta = self._meta(seen, used)
        self.count += len(meta)
        yield ",\n".join(meta)
        first = not meta
        for piece in pieces:
            for text in piece:
                if text:  # every row starts with ",\n": not the document's first
                    yield text[2:] if first else text
                    first = False
        other = {"source": str(self.trace.info.path), "producer": "kernelscope", "time_origin_ns": self.t0}
        yield '\n],"displayTimeUnit":"ns","otherData":' + json.dumps(other, separators=(",", ":")) + "}"

    def _triples(self, k: dict[str, Arr], what: str) -> Any:
        np = self._np
        xyz = np.stack([np.asarray(k[f"{what}{a}"]) for a in "XYZ"], axis=1)
        uniq, inv = np.unique(xyz, axis=0, return_inverse=True)
        text = np.array([f"({x},{y},{z})" for x, y, z in uniq.tolist()], dtype=object)
        return text[inv.reshape(-1)]

    def _gpu(self, cat: str, names: Any, c: dict[str, Arr], args: list[Any],
             seen: list[Arr], used: list[Arr]) -> Iterator[str | bytes | memoryview]:
        np = self._np
        pid = self.gpu_base + np.asarray(c["deviceId"]).astype(np.int64)
        tid = np.asarray(c["streamId"]).astype(np.int64)
        seen.append(np.unique(pid))
        used.append(np.unique((pid << 32) | (tid & 0xFFFFFFFF)))
        return self._x(cat, names, c, slice(None), pid, tid, args)

    def _marks(self, texts: Any, start: Arr, pid: Arr, tid: Arr) -> Iterator[str | bytes | memoryview]:
        return self._render([',\n{"ph":"i","s":"t","cat":"nvtx","name":', ("s", texts), ',"ts":',
                             ("us", start - self.t0), ',"pid":', ("d", pid), ',"tid":', ("d", tid), "}"],
                            len(start))

    def _flows(self, gpu_parts: list[tuple[str, dict[str, Arr]]], a_pid: _Lazy, a_tid: _Lazy,
               cat: str, name: str) -> Iterator[str | bytes | memoryview]:
        """``s``/``f`` pairs from each call to the GPU work of the same process and correlationId."""
        np = self._np
        assert self.api is not None
        a_corr = np.asarray(self.api["corr"]).astype(np.int64)
        akey = (a_pid[slice(None)].astype(np.int64) << 32) | a_corr
        del a_corr
        uniq, first = np.unique(akey, return_index=True)  # the first call of each key, as setdefault
        a_start = np.asarray(self.api["start"])
        fid = 0
        head = f'"cat":"{cat}","name":"{name}","id":'
        for kind, c in gpu_parts:
            g = np.asarray(c["gpid"])
            corr = np.asarray(c["corr"]).astype(np.int64)
            gkey = (((g >> 24) & 0xFFFFFF) << 32) | corr
            if not len(uniq):
                return
            pos = np.minimum(np.searchsorted(uniq, gkey), len(uniq) - 1)
            rows = np.flatnonzero(uniq[pos] == gkey)
            call = first[pos[rows]]
            ids = np.arange(fid + 1, fid + 1 + len(rows), dtype=np.int64)
            fid += len(rows)
            args = [',"args":{"correlationId":', ("d", corr[rows]), ',"to":"' + kind + '"}}']
            yield from self._render([
                    ',\n{"ph":"s",' + head, ("d", ids), ',"ts":', ("us", a_start[call] - self.t0),
                    ',"pid":', ("d", a_pid[call]), ',"tid":', ("d", a_tid[call]), *args,
                    ',\n{"ph":"f","bp":"e",' + head, ("d", ids), ',"ts":',
                    ("us", np.asarray(c["start"])[rows] - self.t0),
                    ',"pid":', ("d", self.gpu_base + np.asarray(c["deviceId"])[rows].astype(np.int64)),
                    ',"tid":', ("d", np.asarray(c["streamId"])[rows]), *args], len(rows))
            self.count += len(rows)  # two events per row

    def _meta(self, seen: list[Arr], used: list[Arr]) -> list[str]:
        np, base = self._np, self.gpu_base
        # The small tables straight from SQLite (no pandas: its import alone is ~80 MB).
        procs = self._small("PROCESSES", "pid", "name")
        pnames = {int(str(p)): str(n) for p, n in procs if p is not None}
        gpus = self._small("TARGET_INFO_GPU", "id", "name")
        gnames = {int(str(i)): str(n) for i, n in gpus if i is not None}
        out: list[str] = []
        pids = np.unique(np.concatenate(seen)).tolist() if seen else []
        for pid in pids:
            if pid >= base:
                dev = pid - base
                label = f"GPU {dev}" + (f" {gnames[dev]}" if dev in gnames else "")
            else:
                label = pnames.get(pid, f"process {pid}")
            out.append(f'{{"ph":"M","name":"process_name","pid":{pid},"tid":0,"args":{{"name":{_js(label)}}}}}')
        pairs = np.unique(np.concatenate(used)) if used else np.zeros(0, dtype=np.int64)
        for k in pairs[(pairs >> 32) >= base].tolist():
            pid, tid = k >> 32, k & 0xFFFFFFFF
            out.append(f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{tid},'
                       f'"args":{{"name":"stream {tid}"}}}}')
        strings = self.trace.strings()
        have = set(pairs.tolist())
        for g, nid in self._small("ThreadNames", "globalTid", "nameId"):
            if g is None:
                continue
            p, t = (int(str(g)) >> 24) & 0xFFFFFF, int(str(g)) & 0xFFFFFF
            if ((p << 32) | t) in have:  # a name missing from StringIds reads "nan", as the tables give
                n = strings.get(nid, "nan") if isinstance(nid, int) else "nan"
                out.append(f'{{"ph":"M","name":"thread_name","pid":{p},"tid":{t},'
                           f'"args":{{"name":{_js(n)}}}}}')
        return out

    def _small(self, table: str, *cols: str) -> list[tuple[object, ...]]:
        """Rows of a small table (none when it or a column is absent)."""
        if not self.trace.has_sqlite_table(table) or not set(cols) <= set(self.trace.columns(table)):
            return []
        return self.trace.rows(f"SELECT {', '.join(cols)} FROM {table}")


class _Lazy:
    """A column computed slice by slice (``lazy[rows]``), never whole: bounded memory."""

    def __init__(self, make: Any, n: int) -> None:
        self._make, self._n = make, n

    def __getitem__(self, rows: Any) -> Any:
        return self._make(rows)

    def __len__(self) -> int:
        return self._n


class _Fallback(Exception):
    """The export has NULLs or lacks a column: the general path handles it."""
