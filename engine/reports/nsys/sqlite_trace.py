"""Read an Nsight Systems SQLite export (schema 3.0 from nsys 2022.4 up to 3.2x from 2026.x).

The export only creates tables that have rows, and columns come and go between versions, so every
query is built from what ``sqlite_master`` and ``PRAGMA table_info`` say exists. The database is
opened read-only (``mode=ro``); the user's file is never modified.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.base import TABLES, ReportInfo, Trace, decode_global_tid
from engine.reports.nsys.columns import ColumnStore, PendingColumns, has_null
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.trace_columns import ColumnsRead, Where

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
_NULL = -(2**62)  # stands for SQL NULL in column-wise reads

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
_COUNTED = frozenset({*_DERIVED, "sync", "nvtx", "memory_usage", "gpus", "processes", "threads",
                      "gpu_metrics"})


def _sources(name: str, columns: list[str]) -> list[str]:
    """Stored columns of big table ``name`` that ``columns`` (some derived) come from, once each."""
    sources: list[str] = []
    for c in columns:
        for src in _DERIVED[name].get(c, [c]):
            if src not in sources:
                sources.append(src)
    return sources


#: Integer columns the pandas-free summaries read (``read_summary_columns``): name -> SQL
#: expression over the export's table. A kernel's name is its demangled name, else its short name.
_SUMMARY_EXPRS: dict[str, dict[str, str]] = {
    "api": {"duration": '"end" - "start"', "nameId": '"nameId"'},
    "kernels": {
        "duration": '"end" - "start"', "nameId": 'coalesce("demangledName", "shortName")',
    },
    "memcpy": {"duration": '"end" - "start"', "bytes": '"bytes"', "copyKind": '"copyKind"'},
    "memset": {"duration": '"end" - "start"', "bytes": '"bytes"'},
}
_SUMMARY_RAW: dict[str, list[str]] = {
    "api": ["start", "end", "nameId"],
    "kernels": ["start", "end", "demangledName", "shortName"],
    "memcpy": ["start", "end", "bytes", "copyKind"],
    "memset": ["start", "end", "bytes"],
}


class SummaryColumns:
    """A column-wise read of integer expressions (see ``read_summary_columns``).

    :meth:`result` waits for it and returns {name: int64 array}, or None when a value is NULL (or
    SQLite could not read it), in which case callers use the general, pandas-based path.
    """

    def __init__(self, pending: PendingColumns | None, names: list[str]) -> None:
        self._pending, self._names = pending, names

    def result(self) -> dict[str, npt.NDArray[np.int64]] | None:
        """Wait for the read; the columns in row order, or None (see the class docstring)."""
        if self._pending is None:
            return None
        try:
            cols = self._pending.result()
        except sqlite3.Error:
            return None
        if any(has_null(cols[n]) for n in self._names):
            return None
        return {n: cols[n] for n in self._names}


class _ColumnFuture:
    """One column of a background read of several columns."""

    def __init__(self, fut: Future[dict[str, object]], col: str) -> None:
        self._fut, self._col = fut, col

    def result(self) -> object:
        return self._fut.result()[self._col]


def _read_int_columns(
    con: sqlite3.Connection, table: str, cols: list[str], n_rows: int
) -> dict[str, object]:
    """Read INTEGER columns of a table column-wise (see NsysSqliteTrace._select)."""
    import numpy as np

    aggs = ", ".join(f"group_concat(coalesce(\"{c}\", {_NULL}), ',')" for c in cols)
    row = con.execute(f"SELECT {aggs} FROM {table}").fetchone()
    out: dict[str, object] = {}
    for c, text in zip(cols, row, strict=True):
        arr = np.fromstring(text or "", dtype=np.int64, sep=",")
        if len(arr) != n_rows:  # pragma: no cover - defensive: never seen
            raise ReportError(f"Column {table}.{c} could not be read; export the report again.")
        null = arr == _NULL
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


_NSYS_TABLES = {
    "kernels": "CUPTI_ACTIVITY_KIND_KERNEL",
    "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
    "memset": "CUPTI_ACTIVITY_KIND_MEMSET",
    "api": "CUPTI_ACTIVITY_KIND_RUNTIME",
    "sync": "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "nvtx": "NVTX_EVENTS",
    "memory_usage": "CUDA_GPU_MEMORY_USAGE_EVENTS",
    "gpus": "TARGET_INFO_GPU",
    "gpu_metrics": "GPU_METRICS",
    "processes": "PROCESSES",
    "threads": "ThreadNames",
}

_NOT_CAPTURED_HINT = {
    "kernels": "no CUDA kernels were recorded (trace with --trace=cuda; an nsys older than the "
    "driver also records none)",
    "memcpy": "no CUDA memory copies were recorded",
    "memset": "no CUDA memsets were recorded",
    "api": "no CUDA API calls were recorded (trace with --trace=cuda)",
    "sync": "no CUDA synchronization events were recorded",
    "nvtx": "no NVTX ranges were recorded (trace with --trace=nvtx)",
    "memory_usage": "CUDA memory usage was not recorded (profile with --cuda-memory-usage=true)",
    "gpus": "GPU information is not in this export",
    "gpu_metrics": "GPU metrics were not recorded (profile with --gpu-metrics-devices=all)",
    "processes": "the process list is not in this export",
    "threads": "thread names are not in this export",
    "cpu_ops": "CPU operators exist only in PyTorch profiler traces",
}


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only (never creates or modifies it) and check it is a readable SQLite DB."""
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, check_same_thread=False)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ReportError(
            f"{path} is not a readable SQLite database ({exc}); it may be truncated or corrupt: "
            "export it again with `nsys export --type sqlite`."
        ) from exc
    return con


class NsysSqliteTrace(Trace):
    """A trace backed by an nsys SQLite export."""

    def __init__(self, sqlite_path: Path, info: ReportInfo | None = None) -> None:
        sqlite_path = Path(sqlite_path)
        if info is None:
            info = ReportInfo(path=sqlite_path, kind="nsys-sqlite")
        info.sqlite_path = sqlite_path
        super().__init__(info)
        self.not_applicable = frozenset({"cpu_ops"})
        if not sqlite_path.exists():
            raise ReportError(
                f"{sqlite_path} no longer exists (it was moved or deleted while being opened); "
                "check the path and open it again."
            )
        if not _is_sqlite(sqlite_path):
            raise ReportError(
                f"{sqlite_path} is not an SQLite file; open an nsys .sqlite export, an .nsys-rep "
                "or a PyTorch profiler .json trace."
            )
        self._con = connect_readonly(sqlite_path)
        try:
            self._tables = {
                r[0] for r in self._con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.DatabaseError as exc:
            raise ReportError(
                f"{sqlite_path} is damaged ({exc}); export the report again with nsys."
            ) from exc
        self._columns: dict[str, list[str]] = {}
        self._strings: dict[int, str] | None = None
        self._prefetched: dict[tuple[str, str], _ColumnFuture] = {}
        self._store: ColumnStore | None = None
        self._read_metadata()

    # -- metadata ------------------------------------------------------------------------------
    def _read_metadata(self) -> None:
        meta_table = next(
            (t for t in ("META_DATA_EXPORT", "EXPORT_META_DATA") if t in self._tables), None
        )
        if meta_table is None:
            raise ReportError(
                f"{self.info.path} is an SQLite database but not an Nsight Systems export (it has "
                "no export metadata table); open a file made by `nsys export --type sqlite`."
            )
        try:
            meta = dict(self._con.execute(f"SELECT name, value FROM {meta_table}").fetchall())
        except sqlite3.DatabaseError as exc:
            raise ReportError(
                f"{self.info.path} has an unreadable export metadata table ({exc}); export it again."
            ) from exc
        self.metadata: dict[str, str] = {str(k): str(v) for k, v in meta.items()}
        self.info.product_version = self.metadata.get("EXPORT_PRODUCT_VERSION")
        self.info.schema_version = self.metadata.get("EXPORT_SCHEMA_VERSION")

    @property
    def schema_version_tuple(self) -> tuple[int, ...]:
        """Schema version as a tuple of ints, e.g. (3, 20, 3); (0,) when unknown."""
        try:
            return tuple(int(p) for p in (self.info.schema_version or "0").split("."))
        except ValueError:
            return (0,)

    def session_start_utc_ns(self) -> int | None:
        """Wall-clock epoch ns of the session start (timestamps in the tables are relative to it)."""
        if "TARGET_INFO_SESSION_START_TIME" not in self._tables:
            return None
        row = self._con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def system_env(self, name: str) -> str | None:
        """The first value of ``name`` in the export's TARGET_INFO_SYSTEM_ENV (None when absent)."""
        if "TARGET_INFO_SYSTEM_ENV" not in self._tables:
            return None
        row = self._con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = ? LIMIT 1",
                                (name,)).fetchone()
        return None if row is None else str(row[0])

    # -- helpers -------------------------------------------------------------------------------
    def column_names(self, table: str) -> list[str]:
        """Column names of an SQLite table (empty list if the table does not exist)."""
        if table not in self._columns:
            if table not in self._tables:
                self._columns[table] = []
            else:
                self._columns[table] = [
                    r[1] for r in self._con.execute(f"PRAGMA table_info({table})")
                ]
        return self._columns[table]

    def has_sqlite_table(self, table: str) -> bool:
        """True when the export contains SQLite table ``table``."""
        return table in self._tables

    def sqlite_tables(self) -> list[str]:
        """Names of the export's SQLite tables (the export creates only tables with rows)."""
        return sorted(self._tables)

    def query(self, sql: str, params: tuple[object, ...] = ()) -> pd.DataFrame:
        """Run a read-only SQL query and return a DataFrame."""
        import pandas as pd

        cur = self._con.execute(sql, params)
        names = [d[0] for d in cur.description]
        return pd.DataFrame.from_records(cur.fetchall(), columns=names)

    def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """Run a read-only SQL query and return its rows as tuples (no pandas)."""
        return list(self._con.execute(sql, params).fetchall())

    def strings(self) -> dict[int, str]:
        """The StringIds table as a dict."""
        if self._strings is None:
            if "StringIds" in self._tables:
                self._strings = dict(self._con.execute("SELECT id, value FROM StringIds").fetchall())
            else:
                self._strings = {}
        return self._strings

    def enum_labels(self, table: str, fallback: dict[int, str]) -> dict[int, str]:
        """Labels of an ENUM_* table ({id: label}), falling back to known values."""
        if table in self._tables and "label" in self.column_names(table):
            return {int(i): str(lbl) for i, lbl in self._con.execute(f"SELECT id, label FROM {table}")}
        return dict(fallback)

    def copy_kind_labels(self) -> dict[int, str]:
        """``copyKind`` -> the copy's label ("Host-to-Device", ...): the ``memcpy`` table's ``operation``."""
        return self.enum_labels("ENUM_CUDA_MEMCPY_OPER", COPY_KIND_LABELS)

    def memory_kind_labels(self) -> dict[int, str]:
        """``srcKind``/``dstKind``/``memKind`` -> the memory's label ("Pageable", "Device", ...)."""
        return self.enum_labels("ENUM_CUDA_MEM_KIND", _MEM_KIND_LABELS)

    def _int_columns(self, table: str) -> set[str]:
        """Columns declared INTEGER (nsys declares every id, time and count column so)."""
        return {
            r[1] for r in self._con.execute(f"PRAGMA table_info({table})")
            if "INT" in str(r[2]).upper()
        }

    def _select(self, table: str, wanted: list[str]) -> pd.DataFrame:
        """SELECT the wanted columns that exist; absent ones are filled with NULL.

        Large tables are read column-wise: SQLite joins each INTEGER column into one text
        (``group_concat``) that numpy parses in C. That is 3-4x faster than building a Python
        tuple per row, which dominates the cost of opening a 400k-kernel report. All aggregates of
        one SELECT walk the same rows in the same order, so the columns stay aligned; NULLs are
        replaced by a sentinel (group_concat would skip them) and become NaN afterwards.
        """
        import pandas as pd

        have = set(self.column_names(table))
        present = [c for c in wanted if c in have]
        n_rows = self._con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        if n_rows < _COLUMNAR_MIN_ROWS or not present:
            parts = [f'"{c}"' if c in have else f'NULL AS "{c}"' for c in wanted]
            return self.query(f"SELECT {', '.join(parts)} FROM {table}")
        ints = [c for c in present if c in self._int_columns(table)]
        others = [c for c in present if c not in ints]
        data: dict[str, object] = {}
        pending = [c for c in ints if (table, c) not in self._prefetched]
        for c in ints:
            if (table, c) in self._prefetched:
                data[c] = self._prefetched.pop((table, c)).result()
        if pending:
            data.update(self._cached_int_columns(table, pending, n_rows))
        if others:
            cols = ", ".join(f'"{c}"' for c in others)
            rows = self._con.execute(f"SELECT {cols} FROM {table}").fetchall()
            for i, c in enumerate(others):
                data[c] = [r[i] for r in rows]
        return pd.DataFrame({c: data.get(c, pd.Series([None] * n_rows, dtype=object)) for c in wanted})

    def _cached_int_columns(self, table: str, cols: list[str], n_rows: int) -> dict[str, object]:
        """INTEGER columns through the columnar cache (read once, then mapped by every command).

        NULLs become NaN as in :func:`_read_int_columns`.
        """
        import numpy as np

        try:
            got = self.column_store().read(table, {c: f'"{c}"' for c in cols})
        except sqlite3.Error:
            return _read_int_columns(self._con, table, cols, n_rows)
        out: dict[str, object] = {}
        for c in cols:
            arr = got[c]
            if len(arr) != n_rows:  # pragma: no cover - the export changed under us
                return _read_int_columns(self._con, table, cols, n_rows)
            null = arr == _NULL
            out[c] = np.where(null, np.nan, arr) if null.any() else np.asarray(arr)
        return out

    def _missing_or_none(self, name: str) -> None:
        why = _NOT_CAPTURED_HINT.get(name, f"{name} was not captured")
        if name == "kernels" and "CUPTI_ACTIVITY_KIND_RUNTIME" not in self._tables:
            # No CUDA call at all: the program did not get as far as the GPU (or did not run); do not
            # guess at an nsys/driver mismatch, which shows as launches without kernels.
            why = ("no CUDA kernels were recorded, and no CUDA API calls either: the program made no CUDA "
                   "call (check that it ran: its exit status and output are in the session log)")
        self._mark_missing(name, why)

    def prefetch(self, columns: dict[str, list[str]]) -> None:
        """Start reading these columns of big tables in background threads.

        Each thread has its own read-only connection; SQLite runs without Python's lock, so the
        reads overlap each other and whatever the caller does next (importing pandas, say).
        Later :meth:`table` calls pick the results up.
        """
        jobs: list[tuple[str, list[str], int]] = []
        for name, cols in columns.items():
            t = _NSYS_TABLES.get(name)
            if t is None or t not in self._tables or name not in _DERIVED:
                continue
            n_rows = self._con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            if n_rows < _COLUMNAR_MIN_ROWS:
                continue
            ints = self._int_columns(t)
            srcs: list[str] = []
            for c in cols:
                for src in _DERIVED[name].get(c, [c]):
                    if src in ints and src not in srcs and (t, src) not in self._prefetched:
                        srcs.append(src)
            if srcs:
                jobs.append((t, srcs, n_rows))
        if not jobs:
            return
        path = Path(self.info.sqlite_path or self.info.path)

        def read(t: str, cols: list[str], n: int) -> dict[str, object]:
            con = connect_readonly(path)
            try:
                return _read_int_columns(con, t, cols, n)
            finally:
                con.close()

        pool = ThreadPoolExecutor(max_workers=min(len(jobs), 4), thread_name_prefix="ks-prefetch")
        for t, cols, n in jobs:
            fut = pool.submit(read, t, cols, n)
            for c in cols:
                self._prefetched[(t, c)] = _ColumnFuture(fut, c)
        pool.shutdown(wait=False)

    def columns_async(self, table: str, names: Sequence[str], *,
                      where: str | Where | None = None) -> ColumnsRead:
        """:meth:`~engine.reports.base.Trace.columns`, read in the background from the columnar cache.

        See :mod:`engine.reports.nsys.column_reads` (each column's SQL: :mod:`engine.reports.nsys.schema`).
        """
        from engine.reports.nsys.column_reads import read_columns_async

        return read_columns_async(self, table, names, where)

    def columns_cached(self, table: str, names: Sequence[str]) -> dict[str, npt.NDArray[Any]] | None:
        """The columns mapped from the columnar cache when every one is cached, else None (no read)."""
        from engine.reports.nsys.column_reads import cached_columns

        return cached_columns(self, table, names)

    def has_columns(self, table: str, names: Sequence[str]) -> bool:
        """True when the export has table ``table`` and stores every one of these columns (their sources)."""
        from engine.reports.nsys.column_reads import stores_columns

        return stores_columns(self, table, names)

    def prefetch_columns(self, table: str, names: Sequence[str]) -> None:
        """Start reading these columns in the background; a later :meth:`columns` of them waits for this."""
        from engine.reports.nsys.column_reads import prefetch_columns

        prefetch_columns(self, table, names)

    def column_store(self) -> ColumnStore:
        """The columnar cache of this export (see :mod:`engine.reports.nsys.columns`)."""
        if self._store is None:
            self._store = ColumnStore(Path(self.info.sqlite_path or self.info.path))
        return self._store

    def read_summary_columns(self, name: str) -> SummaryColumns | None:
        """Start reading what the pandas-free summaries need of a big table, column-wise.

        For ``api`` and ``kernels``: ``duration`` (end - start) and ``nameId`` (a StringIds id);
        ``memcpy`` adds ``bytes`` and ``copyKind``, ``memset`` ``bytes``. The columns come from
        the export's :class:`~engine.reports.nsys.columns.ColumnStore` (read once in threads, then
        memory-mapped from the cache), so the caller's own work overlaps the read.

        Returns:
            A handle whose ``result()`` gives the columns (None there when a value is NULL or the
            table lacks a column: callers fall back), or None when the table was not captured or
            has no rows (the reports are empty).

        """
        t = _NSYS_TABLES[name]
        if t not in self._tables:
            return None
        exprs = _SUMMARY_EXPRS[name]
        if not set(_SUMMARY_RAW[name]) <= set(self.column_names(t)):
            return SummaryColumns(None, list(exprs))
        try:
            if self._con.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is None:
                return None  # no rows
        except sqlite3.Error:
            return SummaryColumns(None, list(exprs))
        narrow = frozenset({"nameId", "copyKind"})  # ids and kinds: int32 (half the memory)
        return SummaryColumns(self.column_store().read_async(t, exprs, narrow), list(exprs))

    def nvtx_range_groups(self) -> list[tuple[int, str, npt.NDArray[np.int64]]] | None:
        """NVTX ranges that ended, grouped: (eventType, "domain:text", durations); see :mod:`.nvtx_ranges`."""
        from engine.reports.nsys.nvtx_ranges import range_groups

        return range_groups(self)

    def nvtx_inline_texts(self, first: int, last: int) -> tuple[npt.NDArray[np.int64], str] | None:
        """NVTX events with inline text among rowids ``first``..``last`` (see :mod:`.nvtx_ranges`)."""
        from engine.reports.nsys.nvtx_ranges import inline_texts

        return inline_texts(self, first, last)

    def stored_rows(self, table: str, names: Sequence[str],
                    limit: int | None = None) -> list[tuple[object, ...]]:
        """A small table's rows as the export stores them, no pandas (see :mod:`.column_reads`)."""
        from engine.reports.nsys.column_reads import stored_rows

        return stored_rows(self, table, names, limit)

    def nvtx_range_columns(self, names: Sequence[str]) -> tuple[
            dict[str, npt.NDArray[Any]], npt.NDArray[np.int64], list[tuple[Any, Any]]] | None:
        """The closed NVTX ranges' columns, each one's name code and the codes' (domain, text) pairs.

        See :func:`engine.reports.nsys.nvtx_ranges.range_columns`; None where the export does not fit.
        """
        from engine.reports.nsys.nvtx_ranges import range_columns

        return range_columns(self, names)

    def _probe(self, name: str) -> None:
        # The export creates a table only when it has rows: the schema alone answers.
        if name == "cpu_ops" or _NSYS_TABLES[name] not in self._tables:
            self._missing_or_none(name)

    def row_count(self, name: str) -> int | None:
        """Rows of a table; the big event tables are counted in SQLite without reading them."""
        if name in _COUNTED and self.has(name):  # one row per row of the export's table
            return self.column_store().row_count(_NSYS_TABLES[name])
        return super().row_count(name)

    # -- table loaders -------------------------------------------------------------------------
    def _load(self, name: str, columns: list[str]) -> pd.DataFrame | None:
        if name == "cpu_ops":
            self._missing_or_none(name)
            return None
        sqlite_table = _NSYS_TABLES[name]
        if sqlite_table not in self._tables:
            self._missing_or_none(name)
            return None
        if name in _DERIVED:  # the big tables: read only the columns asked for
            return self._load_subset(name, sqlite_table, columns)
        loader = getattr(self, f"_load_{name}")
        df: pd.DataFrame = loader(sqlite_table)
        return df[list(TABLES[name][0])] if set(TABLES[name][0]) <= set(df.columns) else df

    def _load_subset(self, name: str, t: str, columns: list[str]) -> pd.DataFrame:
        import numpy as np
        import pandas as pd

        derived = _DERIVED[name]
        raw = self._select(t, _sources(name, columns))
        out: dict[str, object] = {}
        for c in columns:
            if c not in derived:
                out[c] = raw[c].to_numpy()
                continue
            out[c] = self._derive(name, c, raw)
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

        t = _NSYS_TABLES[name]
        derived = _DERIVED[name]
        sources = _sources(name, columns)
        have = set(self.column_names(t))
        parts = [f'"{c}"' if c in have else f'NULL AS "{c}"' for c in sources]
        marks = ", ".join("?" * len(rowids))
        raw = self.query(f"SELECT {', '.join(parts)} FROM {t} WHERE rowid IN ({marks}) ORDER BY rowid",
                         tuple(int(r) for r in rowids))
        out = {c: self._derive(name, c, raw) if c in derived else raw[c].to_numpy() for c in columns}
        return pd.DataFrame(out, index=raw.index)

    def _derive(self, table: str, col: str, raw: pd.DataFrame) -> object:
        """Compute a resolved column (names, labels, pid/tid) from its raw source columns."""
        if col in ("pid", "tid"):
            src = raw["globalTid"] if "globalTid" in raw else raw["globalPid"]
            pid, tid = decode_global_tid(src)
            return (pid if col == "pid" else tid).to_numpy()
        s = self.strings()
        if table == "kernels":
            if col == "name":
                demangled = _map_ids(raw["demangledName"], s)
                return demangled.where(demangled.notna(), _map_ids(raw["shortName"], s)).to_numpy()
            return _map_ids(raw[col], s).to_numpy()  # shortName, mangledName
        if table == "memcpy":
            if col == "operation":
                return _lookup(raw["copyKind"], self.enum_labels("ENUM_CUDA_MEMCPY_OPER", COPY_KIND_LABELS))
            kinds = self.enum_labels("ENUM_CUDA_MEM_KIND", _MEM_KIND_LABELS)
            return _lookup(raw["srcKind" if col == "srcKindName" else "dstKind"], kinds).to_numpy()
        if table == "memset":
            kinds = self.enum_labels("ENUM_CUDA_MEM_KIND", _MEM_KIND_LABELS)
            return _lookup(raw["memKind"], kinds).to_numpy()
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
        df = self._select(t, cols)
        labels = self.enum_labels("ENUM_CUPTI_SYNC_TYPE", _SYNC_TYPE_LABELS)
        df["syncTypeName"] = df["syncType"].map(labels)
        return df

    def _load_nvtx(self, t: str) -> pd.DataFrame:
        cols = ["start", "end", "eventType", "text", "textId", "domainId", "globalTid", "category"]
        df = self._select(t, cols)
        s = self.strings()
        from_id = df.pop("textId").map(s)
        df["text"] = from_id.where(from_id.notna(), df["text"])
        # Domain names come from the domain-create events (eventType 75).
        created = df[df["eventType"] == 75]
        domains = dict(zip(created["domainId"], created["text"], strict=False))
        df["domain"] = [domains.get(d, "") for d in df["domainId"]]
        df["pid"], df["tid"] = decode_global_tid(df["globalTid"])
        return df

    def _load_memory_usage(self, t: str) -> pd.DataFrame:
        cols = [
            "start", "globalPid", "deviceId", "address", "bytes", "memKind",
            "memoryOperationType", "name", "correlationId",
        ]
        df = self._select(t, cols)
        kinds = self.enum_labels("ENUM_CUDA_MEM_KIND", _MEM_KIND_LABELS)
        opers = self.enum_labels("ENUM_CUDA_DEV_MEM_EVENT_OPER", _MEM_OPER_LABELS)
        df["memKindName"] = df["memKind"].map(kinds)
        df["operationName"] = df["memoryOperationType"].map(opers)
        df["pid"] = decode_global_tid(df["globalPid"])[0]
        return df

    def _load_gpus(self, t: str) -> pd.DataFrame:
        return self._select(t, list(TABLES["gpus"][0]))

    def _load_gpu_metrics(self, t: str) -> pd.DataFrame:
        df = self._select(t, ["timestamp", "typeId", "metricId", "value"])
        if "TARGET_INFO_GPU_METRICS" in self._tables:
            names = self.query(
                "SELECT DISTINCT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS"
            )
            df = df.merge(names, on=["typeId", "metricId"], how="left")
        else:
            df["metricName"] = None
        df["gpu"] = df["typeId"] & 0xFF
        return df

    def _load_processes(self, t: str) -> pd.DataFrame:
        return self._select(t, ["globalPid", "pid", "name"])

    def _load_threads(self, t: str) -> pd.DataFrame:
        df = self._select(t, ["globalTid", "nameId"])
        df["name"] = df.pop("nameId").map(self.strings())
        df["pid"], df["tid"] = decode_global_tid(df["globalTid"])
        return df

    def close(self) -> None:
        """Close the SQLite connection."""
        self._con.close()
