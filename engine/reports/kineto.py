"""Read PyTorch profiler (Kineto) Chrome traces (``.json`` / ``.json.gz``) into the common tables.

The trace is streamed into columns once (:mod:`engine.reports.kineto_stream`, never one dict per
event) and kept in the column cache (:mod:`engine.reports.kineto_store`), so a second open maps
the arrays. Each table is built from those columns with numpy, per distinct name or value where a
name has to be parsed (copy kinds, API base names), never per event in Python.

Kineto writes complete events (``ph: "X"``) with ``ts``/``dur`` in microseconds (fractional, ns
resolution). We convert to integer ns relative to the earliest time any event records
(:func:`engine.reports.kineto_columns.time_origin`), like nsys's session-relative times, so no time
is negative, and keep the absolute base in ``base_ts_us``/``base_time_ns``.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.reports.base import TABLES, ReportInfo, Trace
from engine.reports.kineto_columns import NULL, KinetoColumns, time_origin
from engine.reports.kineto_stream import TraceFormatError
from engine.system.arrays import distinct
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import pandas as pd

_COPY_KINDS = {"HtoD": 1, "DtoH": 2, "HtoA": 3, "AtoH": 4, "AtoA": 5, "AtoD": 6, "DtoA": 7,
               "DtoD": 8, "HtoH": 9, "PtoP": 10}
_COPY_LABELS = {1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
                5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array",
                8: "Device-to-Device", 9: "Host-to-Host", 10: "Peer-to-Peer"}
_MEM_KINDS = {"Pageable": 0, "Pinned": 1, "Device": 2, "Array": 3, "Managed": 4}
_MEMCPY_RE = re.compile(r"Memcpy (\w+) \((\w+) -> (\w+)\)")
_MEMSET_RE = re.compile(r"Memset \((\w+)\)")
API_CATS = ("cuda_runtime", "cuda_driver", "Runtime", "Driver")
CPU_CATS = ("cpu_op", "user_annotation", "python_function", "Operator")


def read_trace_columns(path: Path, workers: int | None = None) -> KinetoColumns:
    """The trace's columns (cached); raise ReportError with a clear sentence for a bad file."""
    from engine.reports.kineto_store import columns_of

    try:
        cols = columns_of(path, workers=workers)
    except FileNotFoundError as exc:
        raise ReportError(
            f"{path} no longer exists (it was moved or deleted while being opened); check the "
            "path and open it again."
        ) from exc
    except PermissionError as exc:
        raise ReportError(f"{path} cannot be read: permission denied; check its permissions.") from exc
    except TraceFormatError as exc:
        if "no traceEvents" not in str(exc):
            raise ReportError(
                f"{path} is not valid JSON ({exc}); the trace may be truncated: save it again with "
                "torch.profiler's export_chrome_trace."
            ) from exc
        cols = None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise ReportError(
            f"{path} could not be read or decompressed ({exc}); the file may be truncated: copy "
            "it again or save the trace again with torch.profiler's export_chrome_trace."
        ) from exc
    if cols is None or not cols.n:
        raise ReportError(
            f"{path} is JSON but not a Chrome/PyTorch profiler trace (no traceEvents with complete "
            "events); export one with torch.profiler's export_chrome_trace."
        )
    return cols


def _ints(a: Any) -> Any:
    """An int column as a table built from Python rows would hold it (NaN / None where absent)."""
    null = a == NULL
    if not null.any():
        return np.asarray(a, dtype=np.int64)
    if null.all():
        return np.full(len(a), None, dtype=object)
    out = a.astype(np.float64)
    out[null] = np.nan
    return out


def _pick(values: Sequence[Any], codes: Any) -> Any:
    """``values[codes]`` with the dtype pandas infers for those values (str, int, object...)."""
    import pandas as pd

    codes = np.asarray(codes, dtype=np.int64)
    used = np.flatnonzero(np.bincount(codes, minlength=len(values))) if len(codes) else codes
    remap = np.zeros(max(len(values), 1), dtype=np.int64)
    remap[used] = np.arange(len(used))
    lut = pd.Series([values[i] for i in used.tolist()])
    return lut.array.take(remap[codes])


def _const(value: Any, n: int) -> Any:
    return np.full(n, None, dtype=object) if value is None else _pick([value], np.zeros(n, dtype=np.int64))


class KinetoTrace(Trace):
    """A PyTorch profiler trace mapped onto the nsys-like tables."""

    def __init__(self, path: Path, *, workers: int | None = None) -> None:
        super().__init__(ReportInfo(path=Path(path), kind="kineto"))
        self.events = read_trace_columns(Path(path), workers)
        #: the document's top-level keys other than its events (deviceProperties, distributedInfo...)
        self.meta: dict[str, Any] = self.events.meta
        schema = self.meta.get("schemaVersion")
        # Traces from other Chrome-trace writers (or hand-trimmed ones) carry no schema version.
        self.info.product_version = (f"Kineto schema {schema}" if schema is not None
                                     else "a Chrome/PyTorch profiler trace with no Kineto schema version")
        self.base_ts_us = time_origin(self.events)
        self.base_time_ns = self.meta.get("baseTimeNanoseconds")

    # -- public columns --------------------------------------------------------------------------
    def args_of(self, table: str, names: Sequence[str]) -> dict[str, Any]:
        """The Kineto ``args`` ``names`` of each row of ``table`` (kernels, memcpy, memset, api, cpu_ops).

        Int args are int64 arrays (:data:`engine.reports.kineto_columns.NULL` where absent), text args
        object arrays of their text ("" where absent); only the args the stream keeps are known.
        """
        c = self.events
        i = self.rows(_TABLE_CATS[table])
        out: dict[str, Any] = {}
        for n in names:
            if n in c.ints:
                out[n] = np.asarray(c.ints[n][i])
            else:
                out[n] = np.asarray(c.text_values, dtype=object)[np.asarray(c.texts[n][i])]
        return out

    def columns_async(self, table: str, names: Sequence[str], *, where: Any = None) -> Any:
        """:meth:`Trace.columns`; events' times (start, end, duration) straight from the events' columns.

        No table is made for them (the 8M host ranges of a 4 GB trace).
        """
        from engine.reports.trace_columns import ReadyColumns, check_names

        if where is None and table in _TABLE_CATS and set(names) <= _TIMES and table not in self.missing:
            check_names(table, names, TABLES)
            start, end = self.times_ns(self.rows(_TABLE_CATS[table]))
            got = {"start": start, "end": end, "duration": end - start}
            return ReadyColumns({n: got[n] for n in names})
        return super().columns_async(table, names, where=where)

    def coded_text_ids(self, table: str, column: str, text_ids: Any) -> Any:
        """The ids of a column of the events' names (``nameId``, ``shortNameId``, ``textId``); else None.

        The same ids as from the column of texts (``TextIds.ids``: new texts numbered in order of their
        first row), without making 3M strings for the 3M kernels of a 4 GB trace.
        """
        if (table, column) not in _NAME_COLUMNS:
            return None
        i = self.rows(_TABLE_CATS[table])
        codes = np.asarray(self.events.name[i], dtype=np.int64)
        used, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # the names in order of their first row
        names = self.events.names
        ids = text_ids.ids_of([names[int(k)] for k in used[order].tolist()])
        lut = np.empty(len(used), dtype=np.int64)
        lut[order] = ids
        return lut[inverse.reshape(-1)]

    def rows(self, cats: Sequence[str]) -> Any:
        """Indices (into the complete events) of the events of the categories ``cats``, in file order."""
        c = self.events
        codes = [k for k, v in enumerate(c.cats) if v in cats]
        if not codes:
            return np.zeros(0, dtype=np.int64)
        if len(codes) == 1:
            return np.flatnonzero(np.asarray(c.cat) == codes[0])
        return np.flatnonzero(np.isin(c.cat, codes))

    def times_ns(self, i: Any) -> tuple[Any, Any]:
        """Start and end (ns from the trace's origin) of the complete events ``i``."""
        c = self.events
        start = np.round((np.asarray(c.ts[i]) - self.base_ts_us) * 1000.0).astype(np.int64)
        return start, start + np.round(np.asarray(c.dur[i]) * 1000.0).astype(np.int64)

    def _probe(self, name: str) -> None:
        """Whether ``name`` was captured, told from the categories and keys (no table is built)."""
        if name in self.missing or name in self._cache:
            return
        if name in ("nvtx", "gpus") or getattr(self, f"_load_{name}", None) is None:
            self.table(name)  # cheap: missing, small, or marks the reason

    def row_count(self, name: str) -> int | None:
        """Rows of ``name`` counted from the categories (tables of events), else by reading it."""
        if name in _TABLE_CATS and name != "nvtx":
            return len(self.rows(_TABLE_CATS[name]))
        return super().row_count(name)

    # -- tables ------------------------------------------------------------------------------------
    def _frame(self, name: str, cols: dict[str, Callable[[], Any]], want: list[str]) -> pd.DataFrame:
        """The columns ``want`` of a table, each made only when asked for.

        A 10M-row table then costs only the columns its readers use.
        """
        import pandas as pd

        return pd.DataFrame({c: cols[c]() for c in want}, columns=want)

    def _empty(self, name: str) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame.from_records([], columns=list(TABLES[name][0]))

    def _load(self, name: str, columns: list[str]) -> pd.DataFrame | None:
        loader = getattr(self, f"_load_{name}", None)
        if loader is None:
            self._mark_missing(name, f"{TABLES[name][1]} are not part of PyTorch profiler traces")
            return None
        result: pd.DataFrame | None = loader(columns)
        return result

    def _gpu_common(self, i: Any) -> dict[str, Callable[[], Any]]:
        """The columns kernels, copies and memsets share (times, device, stream, ids, process)."""
        c, n = self.events, len(i)
        times = _Once(lambda: self.times_ns(i))
        return {"start": lambda: times()[0], "end": lambda: times()[1],
                "deviceId": lambda: _ints(c.ints["device"][i]),
                "contextId": lambda: _ints(c.ints["context"][i]),
                "streamId": lambda: _ints(c.ints["stream"][i]),
                "correlationId": lambda: _ints(c.ints["correlation"][i]), "pid": lambda: self._gpu_pid(i),
                "globalPid": lambda: _const(None, n), "greenContextId": lambda: _const(None, n)}

    def _gpu_pid(self, i: Any) -> Any:
        """Kineto puts the device index in a GPU event's "pid"; the process is the launcher's.

        The launcher is the runtime/driver call with the GPU event's correlation id (the last one
        with that id, as a dict keeps it), None when there is none.
        """
        c = self.events
        r = self.rows(API_CATS)
        corr = np.asarray(c.ints["correlation"][r])[::-1]  # reversed: np.unique keeps the first = last
        keys, first = np.unique(corr, return_index=True)
        pid_of = np.asarray(c.pid[r])[::-1][first]
        want = np.asarray(c.ints["correlation"][i])
        pos = np.clip(np.searchsorted(keys, want), 0, max(len(keys) - 1, 0))
        hit = (keys[pos] == want) if len(keys) else np.zeros(len(want), dtype=bool)
        codes = np.where(hit, pid_of[pos] if len(keys) else 0, len(c.pids))
        return _pick([*c.pids, None], codes)

    def _dims(self, arg: str, i: Any) -> list[Any]:
        """The three components of a ``grid`` / ``block`` arg (None where it is absent)."""
        c = self.events
        values, codes = c.text_values, np.asarray(c.texts[arg][i])
        parsed = {k: _parse_list(values[k]) for k in distinct(codes).tolist()}
        return [_pick([parsed[k][d] if k in parsed else None for k in range(max(parsed, default=0) + 1)],
                      codes) for d in range(3)]

    def _names(self, i: Any) -> tuple[list[str], Any]:
        c = self.events
        return c.names, np.asarray(c.name[i])

    def _host(self, i: Any) -> dict[str, Callable[[], Any]]:
        """start, end, pid and tid of host events."""
        c = self.events
        times = _Once(lambda: self.times_ns(i))
        return {"start": lambda: times()[0], "end": lambda: times()[1],
                "pid": lambda: _pick(c.pids, c.pid[i]), "tid": lambda: _pick(c.tids, c.tid[i])}

    def _load_kernels(self, want: list[str]) -> pd.DataFrame:
        c = self.events
        i = self.rows(("kernel",))
        if not len(i):
            return self._empty("kernels")
        n = len(i)
        names = _Once(lambda: _pick(*self._names(i)))
        grid = _Once(lambda: self._dims("grid", i))
        block = _Once(lambda: self._dims("block", i))

        def none() -> Any:
            return _const(None, n)

        return self._frame("kernels", {
            **self._gpu_common(i), "name": names, "shortName": names, "mangledName": none,
            "gridX": lambda: grid()[0], "gridY": lambda: grid()[1], "gridZ": lambda: grid()[2],
            "blockX": lambda: block()[0], "blockY": lambda: block()[1], "blockZ": lambda: block()[2],
            "registersPerThread": lambda: _ints(c.ints["registers per thread"][i]),
            "staticSharedMemory": none,
            "dynamicSharedMemory": lambda: _ints(c.ints["shared memory"][i]), "localMemoryTotal": none,
            "graphNodeId": none}, want)

    def _load_memcpy(self, want: list[str]) -> pd.DataFrame:
        c = self.events
        i = self.rows(("gpu_memcpy", "Memcpy"))
        if not len(i):
            return self._empty("memcpy")
        names, codes = self._names(i)
        kinds = {}
        for k in distinct(codes).tolist():
            m = _MEMCPY_RE.match(names[k])
            kinds[k] = ((_COPY_KINDS.get(m.group(1), 0), m.group(2), m.group(3)) if m
                        else (0, "Unknown", "Unknown"))
        top = max(kinds) + 1

        def per(f: Any) -> Callable[[], Any]:
            return lambda: _pick([f(kinds[k]) if k in kinds else None for k in range(top)], codes)

        def none() -> Any:
            return _const(None, len(i))

        return self._frame("memcpy", {
            **self._gpu_common(i), "bytes": lambda: _ints(c.ints["bytes"][i]),
            "copyKind": per(lambda x: x[0]),
            "operation": per(lambda x: _COPY_LABELS.get(x[0], "Unknown")),
            "srcKind": per(lambda x: _MEM_KINDS.get(x[1], 7)),
            "dstKind": per(lambda x: _MEM_KINDS.get(x[2], 7)),
            "srcKindName": per(lambda x: x[1]), "dstKindName": per(lambda x: x[2]),
            "srcDeviceId": none, "dstDeviceId": none}, want)

    def _load_memset(self, want: list[str]) -> pd.DataFrame:
        c = self.events
        i = self.rows(("gpu_memset", "Memset"))
        if not len(i):
            return self._empty("memset")
        names, codes = self._names(i)
        kind_name = {}
        for k in distinct(codes).tolist():
            m = _MEMSET_RE.match(names[k])
            kind_name[k] = m.group(1) if m else "Unknown"
        top = max(kind_name) + 1
        label = [kind_name.get(k) for k in range(top)]
        return self._frame("memset", {
            **self._gpu_common(i), "bytes": lambda: _ints(c.ints["bytes"][i]),
            "memKind": lambda: _pick([None if v is None else _MEM_KINDS.get(v, 7) for v in label], codes),
            "memKindName": lambda: _pick(label, codes), "value": lambda: _const(None, len(i))}, want)

    def _load_api(self, want: list[str]) -> pd.DataFrame:
        c = self.events
        i = self.rows(API_CATS)
        if not len(i):
            return self._empty("api")
        names, codes = self._names(i)

        def base() -> Any:
            return _pick([re.sub(r"_v\d{4}$", "", x) for x in names], codes)

        def event_class() -> Any:
            driver = np.array([x in ("cuda_driver", "Driver") for x in c.cats], dtype=np.int64)
            return driver[np.asarray(c.cat[i])]

        return self._frame("api", {
            **self._host(i), "globalTid": lambda: _const(None, len(i)),
            "correlationId": lambda: _ints(c.ints["correlation"][i]), "name": lambda: _pick(names, codes),
            "baseName": base, "eventClass": event_class, "returnValue": lambda: _const(None, len(i))}, want)

    def _load_cpu_ops(self, want: list[str]) -> pd.DataFrame:
        c = self.events
        i = self.rows(CPU_CATS)
        if not len(i):
            return self._empty("cpu_ops")
        return self._frame("cpu_ops", {
            **self._host(i), "name": lambda: _pick(*self._names(i)),
            "correlationId": lambda: _ints(c.ints["External id"][i])}, want)

    def _load_nvtx(self, want: list[str]) -> pd.DataFrame | None:
        # torch.profiler records record_function / NVTX-like user annotations as user_annotation.
        i = self.rows(("user_annotation",))
        if not len(i):
            self._mark_missing("nvtx", "the trace has no user annotations (record_function ranges)")
            return None
        n = len(i)

        def none() -> Any:
            return _const(None, n)

        return self._frame("nvtx", {
            **self._host(i), "eventType": lambda: np.full(n, 59, dtype=np.int64),
            "text": lambda: _pick(*self._names(i)), "domainId": lambda: np.zeros(n, dtype=np.int64),
            "domain": lambda: _const("", n), "globalTid": none, "category": none}, want)

    def _load_gpus(self, want: list[str]) -> pd.DataFrame | None:
        import pandas as pd

        props = self.meta.get("deviceProperties") or []
        if not props:
            self._mark_missing("gpus", "the trace has no deviceProperties")
            return None
        rows = [{
            "id": p.get("id"), "name": p.get("name"), "smCount": p.get("numSms"),
            "memoryBandwidth": None, "clockRate": None, "totalMemory": p.get("totalGlobalMem"),
            "l2CacheSize": None, "computeMajor": p.get("computeMajor"),
            "computeMinor": p.get("computeMinor"), "uuid": None, "busLocation": None,
        } for p in props]
        return pd.DataFrame.from_records(rows, columns=list(TABLES["gpus"][0]))

    def _load_processes(self, want: list[str]) -> pd.DataFrame:
        import pandas as pd

        rows = [{"globalPid": None, "pid": pid, "name": name} for pid, name in self.events.processes]
        return pd.DataFrame.from_records(rows, columns=list(TABLES["processes"][0]))

    def _load_threads(self, want: list[str]) -> pd.DataFrame:
        import pandas as pd

        rows = [{"globalTid": None, "pid": pid, "tid": tid, "name": name}
                for pid, tid, name in self.events.threads]
        return pd.DataFrame.from_records(rows, columns=list(TABLES["threads"][0]))


class _Once:
    """A value made on its first call and kept (columns that share a computation)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make: Callable[[], Any] | None = make
        self._value: Any = None

    def __call__(self) -> Any:
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value


#: the columns :meth:`KinetoTrace.columns_async` reads from the events' times
_TIMES = {"start", "end", "duration"}
#: the (table, column)s whose texts are the events' names (``coded_text_ids``)
_NAME_COLUMNS = {("kernels", "name"), ("kernels", "shortName"), ("api", "name"), ("cpu_ops", "name"),
                 ("nvtx", "text")}
_TABLE_CATS = {"kernels": ("kernel",), "memcpy": ("gpu_memcpy", "Memcpy"), "memset": ("gpu_memset", "Memset"),
               "api": API_CATS, "cpu_ops": CPU_CATS, "nvtx": ("user_annotation",)}


def _parse_list(text: str) -> list[Any]:
    """A ``grid`` / ``block`` arg's three values from its text ("" or unreadable: three None)."""
    if not text:
        return [None, None, None]
    try:
        v = json.loads(text)
    except ValueError:
        import ast

        try:
            v = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return [None, None, None]
    return list(v) + [None] * (3 - len(v)) if isinstance(v, list) else [None, None, None]
