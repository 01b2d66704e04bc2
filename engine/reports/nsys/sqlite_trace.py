"""Read an Nsight Systems SQLite export (schema 3.0 from nsys 2022.4 up to 3.2x from 2026.x).

The export only creates tables that have rows, and columns come and go between versions, so every
query is built from what ``sqlite_master`` and ``PRAGMA table_info`` say exists. The database is
opened read-only (``mode=ro``); the user's file is never modified.

Columns are read one way, by the engine's names: ``trace.columns("kernels", ["start", "end",
"nameId"])`` (and ``columns_async``, ``prefetch_columns``, ``columns_cached``, ``has_columns``)
gives numpy arrays through the export's columnar cache, NULL as :data:`engine.reports.base.NULL`;
the SQL of each column and named filter is in :mod:`engine.reports.nsys.schema`. ``table(name)``
gives the same data as pandas DataFrames with the text columns resolved
(:mod:`engine.reports.nsys.export_tables`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.base import ReportInfo, Trace
from engine.reports.nsys import column_reads, nvtx_ranges, schema
from engine.reports.nsys.columns import ColumnStore
from engine.reports.nsys.export_tables import _MEM_KIND_LABELS as _MEM_KIND_LABELS  # re-exported
from engine.reports.nsys.export_tables import COPY_KIND_LABELS as COPY_KIND_LABELS  # re-exported
from engine.reports.nsys.export_tables import COUNTED, ExportTables
from engine.reports.nsys.sqlite_file import connect_readonly as connect_readonly  # re-exported
from engine.reports.nsys.sqlite_file import is_sqlite
from engine.reports.nsys.summary_columns import SummaryColumns, read_summary_columns
from engine.reports.trace_columns import resolve_where
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.trace_columns import ColumnsRead, NvtxNames, Where


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
        if not is_sqlite(sqlite_path):
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
        self._store: ColumnStore | None = None
        self._export_tables = ExportTables(self)
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
        return self.enum_labels(schema.ENUM_MEMCPY_OPER, COPY_KIND_LABELS)

    def memory_kind_labels(self) -> dict[int, str]:
        """``srcKind``/``dstKind``/``memKind`` -> the memory's label ("Pageable", "Device", ...)."""
        return self.enum_labels(schema.ENUM_MEM_KIND, _MEM_KIND_LABELS)

    def _missing_or_none(self, name: str) -> None:
        why = _NOT_CAPTURED_HINT.get(name, f"{name} was not captured")
        if name == "kernels" and schema.RUNTIME not in self._tables:
            # No CUDA call at all: the program did not get as far as the GPU (or did not run); do not
            # guess at an nsys/driver mismatch, which shows as launches without kernels.
            why = ("no CUDA kernels were recorded, and no CUDA API calls either: the program made no CUDA "
                   "call (check that it ran: its exit status and output are in the session log)")
        self._mark_missing(name, why)

    def columns_async(self, table: str, names: Sequence[str], *,
                      where: str | Where | None = None) -> ColumnsRead:
        """:meth:`~engine.reports.base.Trace.columns`, read in the background from the columnar cache.

        See :mod:`engine.reports.nsys.column_reads` (each column's SQL: :mod:`engine.reports.nsys.schema`).
        """
        return column_reads.read_columns_async(self, table, names, where)

    def columns_cached(self, table: str, names: Sequence[str]) -> dict[str, npt.NDArray[Any]] | None:
        """The columns mapped from the columnar cache when every one is cached, else None (no read)."""
        return column_reads.cached_columns(self, table, names)

    def has_columns(self, table: str, names: Sequence[str]) -> bool:
        """True when the export has table ``table`` and stores every one of these columns (their sources)."""
        return column_reads.stores_columns(self, table, names)

    def prefetch_columns(self, table: str, names: Sequence[str]) -> None:
        """Start reading these columns in the background; a later :meth:`columns` of them waits for this."""
        column_reads.prefetch_columns(self, table, names)

    def column_store(self) -> ColumnStore:
        """The columnar cache of this export (see :mod:`engine.reports.nsys.columns`)."""
        if self._store is None:
            self._store = ColumnStore(Path(self.info.sqlite_path or self.info.path))
        return self._store

    def nvtx_inline_texts(self, first: int, last: int) -> tuple[npt.NDArray[np.int64], str] | None:
        """NVTX events with inline text among rowids ``first``..``last`` (see :mod:`.nvtx_ranges`)."""
        return nvtx_ranges.inline_texts(self, first, last)

    def stored_rows(self, table: str, names: Sequence[str],
                    limit: int | None = None) -> list[tuple[object, ...]]:
        """A small table's rows as the export stores them, no pandas (see :mod:`.column_reads`)."""
        return column_reads.stored_rows(self, table, names, limit)

    def nvtx_range_columns(self, names: Sequence[str]) -> tuple[
            dict[str, npt.NDArray[Any]], npt.NDArray[np.int64], list[tuple[Any, Any]]] | None:
        """The closed NVTX ranges' columns, each one's name code and the codes' (domain, text) pairs.

        See :func:`engine.reports.nsys.nvtx_ranges.range_columns`; None where the export does not fit.
        """
        return nvtx_ranges.range_columns(self, names)

    def nvtx_names(self, where: str | Where | None, *, domain_by_text: bool = False) -> NvtxNames:
        """Each NVTX row's (domain, text) as a code, from a cached code column (see :mod:`.nvtx_ranges`)."""
        return nvtx_ranges.range_names(self, resolve_where("nvtx", where), domain_by_text=domain_by_text)

    def _probe(self, name: str) -> None:
        # The export creates a table only when it has rows: the schema alone answers.
        if name == "cpu_ops" or schema.TABLES[name] not in self._tables:
            self._missing_or_none(name)

    def row_count(self, name: str) -> int | None:
        """Rows of a table; the big event tables are counted in SQLite without reading them."""
        if name in COUNTED and self.has(name):  # one row per row of the export's table
            return self.column_store().row_count(schema.TABLES[name])
        return super().row_count(name)

    # -- table loaders -------------------------------------------------------------------------
    def _load(self, name: str, columns: list[str]) -> pd.DataFrame | None:
        if name == "cpu_ops":
            self._missing_or_none(name)
            return None
        sqlite_table = schema.TABLES[name]
        if sqlite_table not in self._tables:
            self._missing_or_none(name)
            return None
        return self._export_tables.load(name, sqlite_table, columns)

    def prefetch(self, columns: dict[str, list[str]]) -> None:
        """Start reading these columns of the big tables in background threads; :meth:`table` picks them up.

        See :meth:`engine.reports.nsys.export_tables.ExportTables.prefetch`.
        """
        self._export_tables.prefetch(columns)

    def rows_by_id(self, name: str, rowids: list[int], columns: list[str]) -> pd.DataFrame:
        """Resolved ``columns`` of big table ``name`` (kernels, memcpy, memset, api) for these rowids only.

        The values ``table(name, columns)`` gives for those rows, in rowid order, without reading
        the rest (the timeline of a big report shows the one row under the pointer).
        """
        return self._export_tables.rows_by_id(name, rowids, columns)

    def read_summary_columns(self, name: str) -> SummaryColumns | None:
        """What the pandas-free summaries read of a big table (see :mod:`.summary_columns`)."""
        return read_summary_columns(self, name)

    def close(self) -> None:
        """Close the SQLite connection."""
        self._con.close()
