"""The engine's tables (pandas DataFrames) built from an Nsight Systems SQLite export.

:class:`ExportTables` reads the columns a table is made of (only those asked for, for the big
event tables: kernels, memcpy, memset, api) and derives the text ones: names through StringIds,
labels through the export's ENUM tables (else nsys's known values), process and thread ids from
``globalPid``/``globalTid``. Big tables are read column-wise, INTEGER columns through the columnar
cache; :meth:`ExportTables.prefetch` starts such reads in threads.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.base import NULL, TABLES, decode_global_tid
from engine.reports.nsys import schema
from engine.reports.nsys.sqlite_file import connect_readonly
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.nsys.export_source import ExportSource

# Fallback labels, used only if a database lacks its ENUM_* tables (values as nsys stores them).
COPY_KIND_LABELS = {
    0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array",
    4: "Array-to-Host", 5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array",
    8: "Device-to-Device", 9: "Host-to-Host", 10: "Peer-to-Peer", 11: "Unified Host-to-Device",
    12: "Unified Device-to-Host", 13: "Unified Device-to-Device",
}
_MEM_KIND_LABELS = {
    0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
    6: "Managed Static", 7: "Unknown",
}
_SYNC_TYPE_LABELS = {
    0: "Unknown", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync",
}
_MEM_OPER_LABELS = {0: "Allocation", 1: "Deallocation"}

_COLUMNAR_MIN_ROWS = 20_000

#: Resolved columns of the big tables -> the raw SQLite columns they are computed from.
_DERIVED: dict[str, dict[str, list[str]]] = {
    "kernels": {
        "name": ["demangledName", "shortName"], "shortName": ["shortName"],
        "mangledName": ["mangledName"], "pid": ["globalPid"],
    },
    "memcpy": {
        "operation": ["copyKind"], "srcKindName": ["srcKind"], "dstKindName": ["dstKind"],
        "pid": ["globalPid"],
    },
    "memset": {"memKindName": ["memKind"], "pid": ["globalPid"]},
    "api": {"name": ["nameId"], "baseName": ["nameId"], "pid": ["globalTid"], "tid": ["globalTid"]},
}

#: tables whose loader keeps every row of the export's table, so ``count(*)`` is their row count
COUNTED = frozenset({*_DERIVED, "sync", "nvtx", "memory_usage", "gpus", "processes", "threads",
                      "gpu_metrics"})


def _sources(name: str, columns: list[str]) -> list[str]:
    """Stored columns of big table ``name`` that ``columns`` (some derived) come from, once each."""
    sources: list[str] = []
    for c in columns:
        for src in _DERIVED[name].get(c, [c]):
            if src not in sources:
                sources.append(src)
    return sources


class _ColumnFuture:
    """One column of a background read of several columns."""

    def __init__(self, fut: Future[dict[str, object]], col: str) -> None:
        self._fut, self._col = fut, col

    def result(self) -> object:
        return self._fut.result()[self._col]


def _read_int_columns(rows: Callable[[str], list[Any]], table: str, cols: list[str],
                      n_rows: int) -> dict[str, object]:
    """Read INTEGER columns of a table column-wise (see :meth:`ExportTables.select`)."""
    import numpy as np

    aggs = ", ".join(f"group_concat(coalesce(\"{c}\", {NULL}), ',')" for c in cols)
    row = rows(f"SELECT {aggs} FROM {table}")[0]
    out: dict[str, object] = {}
    for c, text in zip(cols, row, strict=True):
        arr = np.fromstring(text or "", dtype=np.int64, sep=",")
        if len(arr) != n_rows:  # pragma: no cover - defensive: never seen
            raise ReportError(f"Column {table}.{c} could not be read; export the report again.")
        null = arr == NULL
        out[c] = np.where(null, np.nan, arr) if null.any() else arr
    return out


def _map_ids(ids: pd.Series, strings: dict[int, str], missing: str | None = None) -> pd.Series:
    """Map string ids through StringIds, touching each distinct id once."""
    uniq = ids.dropna().unique()
    lookup = {i: strings.get(int(i), missing.format(i) if missing else None) for i in uniq}
    return _lookup(ids, lookup)


def _lookup(values: pd.Series, labels: Mapping[Any, Any]) -> pd.Series:
    """``values.map(labels)`` (missing keys and NaN give NaN), one dict lookup per distinct value.

    ``Series.map`` with a dict costs ~0.5 s per million rows; a few distinct codes are mapped once
    and spread with numpy.
    """
    import numpy as np
    import pandas as pd

    if len(values) < 10_000:
        return values.map(labels)
    codes, uniq = pd.factorize(values, use_na_sentinel=True)
    mapped = np.array([labels.get(u, np.nan) for u in uniq.tolist()] + [np.nan], dtype=object)
    return pd.Series(mapped[codes], index=values.index, dtype=object)


class ExportTables:
    """The pandas tables of one export (see the module docstring); the trace's ``_load`` asks it."""

    def __init__(self, trace: ExportSource) -> None:
        self._trace = trace
        self._prefetched: dict[tuple[str, str], _ColumnFuture] = {}

    def load(self, name: str, t: str, columns: list[str]) -> pd.DataFrame:
        """At least ``columns`` of the engine's table ``name`` from the export's table ``t``."""
        if name in _DERIVED:  # the big tables: read only the columns asked for
            return self.load_subset(name, t, columns)
        loader = getattr(self, f"_load_{name}")
        df: pd.DataFrame = loader(t)
        return df[list(TABLES[name][0])] if set(TABLES[name][0]) <= set(df.columns) else df

    def int_columns(self, table: str) -> set[str]:
        """Columns declared INTEGER (nsys declares every id, time and count column so)."""
        return {
            str(r[1]) for r in self._trace.rows(f"PRAGMA table_info({table})")
            if "INT" in str(r[2]).upper()
        }

    def select(self, table: str, wanted: list[str]) -> pd.DataFrame:
        """SELECT the wanted columns that exist; absent ones are filled with NULL.

        Large tables are read column-wise: SQLite joins each INTEGER column into one text
        (``group_concat``) that numpy parses in C. That is 3-4x faster than building a Python
        tuple per row, which dominates the cost of opening a 400k-kernel report. All aggregates of
        one SELECT walk the same rows in the same order, so the columns stay aligned; NULLs are
        replaced by a sentinel (group_concat would skip them) and become NaN afterwards.
        """
        import pandas as pd

        have = set(self._trace.column_names(table))
        present = [c for c in wanted if c in have]
        n_rows = int(str(self._trace.rows(f"SELECT count(*) FROM {table}")[0][0]))
        if n_rows < _COLUMNAR_MIN_ROWS or not present:
            parts = [f'"{c}"' if c in have else f'NULL AS "{c}"' for c in wanted]
            return self._trace.query(f"SELECT {', '.join(parts)} FROM {table}")
        ints = [c for c in present if c in self.int_columns(table)]
        others = [c for c in present if c not in ints]
        data: dict[str, object] = {}
        pending = [c for c in ints if (table, c) not in self._prefetched]
        for c in ints:
            if (table, c) in self._prefetched:
                data[c] = self._prefetched.pop((table, c)).result()
        if pending:
            data.update(self.cached_int_columns(table, pending, n_rows))
        if others:
            cols = ", ".join(f'"{c}"' for c in others)
            rows = self._trace.rows(f"SELECT {cols} FROM {table}")
            for i, c in enumerate(others):
                data[c] = [r[i] for r in rows]
        return pd.DataFrame({c: data.get(c, pd.Series([None] * n_rows, dtype=object)) for c in wanted})

    def cached_int_columns(self, table: str, cols: list[str], n_rows: int) -> dict[str, object]:
        """INTEGER columns through the columnar cache (read once, then mapped by every command).

        NULLs become NaN as in :func:`_read_int_columns`.
        """
        import numpy as np

        try:
            got = self._trace.column_store().read(table, {c: f'"{c}"' for c in cols})
        except sqlite3.Error:
            return _read_int_columns(self._trace.rows, table, cols, n_rows)
        out: dict[str, object] = {}
        for c in cols:
            arr = got[c]
            if len(arr) != n_rows:  # pragma: no cover - the export changed under us
                return _read_int_columns(self._trace.rows, table, cols, n_rows)
            null = arr == NULL
            out[c] = np.where(null, np.nan, arr) if null.any() else np.asarray(arr)
        return out

    def prefetch(self, columns: dict[str, list[str]]) -> None:
        """Start reading these columns of big tables in background threads.

        Each thread has its own read-only connection; SQLite runs without Python's lock, so the
        reads overlap each other and whatever the caller does next (importing pandas, say).
        Later :meth:`table` calls pick the results up.
        """
        jobs: list[tuple[str, list[str], int]] = []
        for name, cols in columns.items():
            t = schema.TABLES.get(name)
            if t is None or not self._trace.has_sqlite_table(t) or name not in _DERIVED:
                continue
            n_rows = int(str(self._trace.rows(f"SELECT count(*) FROM {t}")[0][0]))
            if n_rows < _COLUMNAR_MIN_ROWS:
                continue
            ints = self.int_columns(t)
            srcs: list[str] = []
            for c in cols:
                for src in _DERIVED[name].get(c, [c]):
                    if src in ints and src not in srcs and (t, src) not in self._prefetched:
                        srcs.append(src)
            if srcs:
                jobs.append((t, srcs, n_rows))
        if not jobs:
            return
        path = Path(self._trace.info.sqlite_path or self._trace.info.path)

        def read(t: str, cols: list[str], n: int) -> dict[str, object]:
            con = connect_readonly(path)
            try:
                return _read_int_columns(lambda sql: con.execute(sql).fetchall(), t, cols, n)
            finally:
                con.close()

        pool = ThreadPoolExecutor(max_workers=min(len(jobs), 4), thread_name_prefix="ks-prefetch")
        for t, cols, n in jobs:
            fut = pool.submit(read, t, cols, n)
            for c in cols:
                self._prefetched[(t, c)] = _ColumnFuture(fut, c)
        pool.shutdown(wait=False)

    def load_subset(self, name: str, t: str, columns: list[str]) -> pd.DataFrame:
        """``columns`` of big table ``name`` (stored ones read, derived ones computed from theirs)."""
        import numpy as np
        import pandas as pd

        derived = _DERIVED[name]
        raw = self.select(t, _sources(name, columns))
        out: dict[str, object] = {}
        for c in columns:
            if c not in derived:
                out[c] = raw[c].to_numpy()
                continue
            out[c] = self.derive(name, c, raw)
            if getattr(out[c], "dtype", None) is np.dtype(object):
                # Keep names as Python strings: pandas 3 would copy millions of them into Arrow
                # (and back to objects for every factorize/map), ~10 s on a 400k-kernel report.
                out[c] = pd.Series(out[c], index=raw.index, dtype=object)
        return pd.DataFrame(out, index=raw.index)

    def rows_by_id(self, name: str, rowids: list[int], columns: list[str]) -> pd.DataFrame:
        """Resolved ``columns`` of big table ``name`` (kernels, memcpy, memset, api) for these rowids only.

        The values ``table(name, columns)`` gives for those rows, in rowid order, without reading
        the rest (the timeline of a big report shows the one row under the pointer).
        """
        import pandas as pd

        t = schema.TABLES[name]
        derived = _DERIVED[name]
        sources = _sources(name, columns)
        have = set(self._trace.column_names(t))
        parts = [f'"{c}"' if c in have else f'NULL AS "{c}"' for c in sources]
        marks = ", ".join("?" * len(rowids))
        raw = self._trace.query(f"SELECT {', '.join(parts)} FROM {t} WHERE rowid IN ({marks}) ORDER BY rowid",
                         tuple(int(r) for r in rowids))
        out = {c: self.derive(name, c, raw) if c in derived else raw[c].to_numpy() for c in columns}
        return pd.DataFrame(out, index=raw.index)

    def derive(self, table: str, col: str, raw: pd.DataFrame) -> object:
        """Compute a resolved column (names, labels, pid/tid) from its raw source columns."""
        if col in ("pid", "tid"):
            src = raw["globalTid"] if "globalTid" in raw else raw["globalPid"]
            pid, tid = decode_global_tid(src)
            return (pid if col == "pid" else tid).to_numpy()
        s = self._trace.strings()
        if table == "kernels":
            if col == "name":
                demangled = _map_ids(raw["demangledName"], s)
                return demangled.where(demangled.notna(), _map_ids(raw["shortName"], s)).to_numpy()
            return _map_ids(raw[col], s).to_numpy()  # shortName, mangledName
        if table == "memcpy":
            if col == "operation":
                return _lookup(raw["copyKind"], self._trace.copy_kind_labels())
            kinds = self._trace.memory_kind_labels()
            return _lookup(raw["srcKind" if col == "srcKindName" else "dstKind"], kinds).to_numpy()
        if table == "memset":
            return _lookup(raw["memKind"], self._trace.memory_kind_labels()).to_numpy()
        if table == "api":
            names = _map_ids(raw["nameId"], s, missing="<unknown {}>")
            if col == "name":
                return names.to_numpy()
            uniq = names.unique()
            return _lookup(names, {n: re.sub(r"_v\d{4}$", "", str(n)) for n in uniq}).to_numpy()
        raise KeyError(col)  # pragma: no cover

    def _load_sync(self, t: str) -> pd.DataFrame:
        cols = [
            "start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
            "syncType",
        ]
        df = self.select(t, cols)
        labels = self._trace.enum_labels(schema.ENUM_SYNC_TYPE, _SYNC_TYPE_LABELS)
        df["syncTypeName"] = df["syncType"].map(labels)
        return df

    def _load_nvtx(self, t: str) -> pd.DataFrame:
        cols = ["start", "end", "eventType", "text", "textId", "domainId", "globalTid", "category"]
        df = self.select(t, cols)
        s = self._trace.strings()
        from_id = df.pop("textId").map(s)
        df["text"] = from_id.where(from_id.notna(), df["text"])
        # Domain names come from the domain-create events (eventType 75).
        created = df[df["eventType"] == schema.NVTX_DOMAIN_CREATE]
        domains = dict(zip(created["domainId"], created["text"], strict=False))
        df["domain"] = [domains.get(d, "") for d in df["domainId"]]
        df["pid"], df["tid"] = decode_global_tid(df["globalTid"])
        return df

    def _load_memory_usage(self, t: str) -> pd.DataFrame:
        cols = [
            "start", "globalPid", "deviceId", "address", "bytes", "memKind",
            "memoryOperationType", "name", "correlationId",
        ]
        df = self.select(t, cols)
        kinds = self._trace.memory_kind_labels()
        opers = self._trace.enum_labels(schema.ENUM_DEV_MEM_EVENT_OPER, _MEM_OPER_LABELS)
        df["memKindName"] = df["memKind"].map(kinds)
        df["operationName"] = df["memoryOperationType"].map(opers)
        df["pid"] = decode_global_tid(df["globalPid"])[0]
        return df

    def _load_gpus(self, t: str) -> pd.DataFrame:
        return self.select(t, list(TABLES["gpus"][0]))

    def _load_gpu_metrics(self, t: str) -> pd.DataFrame:
        df = self.select(t, ["timestamp", "typeId", "metricId", "value"])
        if self._trace.has_sqlite_table(schema.GPU_METRIC_INFO):
            names = self._trace.query(
                f"SELECT DISTINCT typeId, metricId, metricName FROM {schema.GPU_METRIC_INFO}"
            )
            df = df.merge(names, on=["typeId", "metricId"], how="left")
        else:
            df["metricName"] = None
        df["gpu"] = df["typeId"] & 0xFF
        return df

    def _load_processes(self, t: str) -> pd.DataFrame:
        return self.select(t, ["globalPid", "pid", "name"])

    def _load_threads(self, t: str) -> pd.DataFrame:
        df = self.select(t, ["globalTid", "nameId"])
        df["name"] = df.pop("nameId").map(self._trace.strings())
        df["pid"], df["tid"] = decode_global_tid(df["globalTid"])
        return df
