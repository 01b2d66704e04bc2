"""Read an Nsight Systems SQLite export (schema 3.0 from nsys 2022.4 up to 3.2x from 2026.x).

The export only creates tables that have rows, and columns come and go between versions, so every
query is built from what ``sqlite_master`` and ``PRAGMA table_info`` say exists. The database is
opened read-only (``mode=ro``); the user's file is never modified.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import ReportError
from engine.reports.base import TABLES, ReportInfo, Trace, decode_global_tid

if TYPE_CHECKING:
    import pandas as pd

# Fallback labels, used only if a database lacks its ENUM_* tables (values as nsys stores them).
_COPY_KIND_LABELS = {
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

    # -- helpers -------------------------------------------------------------------------------
    def columns(self, table: str) -> list[str]:
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

    def query(self, sql: str, params: tuple[object, ...] = ()) -> pd.DataFrame:
        """Run a read-only SQL query and return a DataFrame."""
        import pandas as pd

        cur = self._con.execute(sql, params)
        names = [d[0] for d in cur.description]
        return pd.DataFrame.from_records(cur.fetchall(), columns=names)

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
        if table in self._tables and "label" in self.columns(table):
            return {int(i): str(lbl) for i, lbl in self._con.execute(f"SELECT id, label FROM {table}")}
        return dict(fallback)

    def _select(self, table: str, wanted: list[str]) -> pd.DataFrame:
        """SELECT the wanted columns that exist; absent ones are filled with NULL."""
        have = set(self.columns(table))
        parts = [f'"{c}"' if c in have else f'NULL AS "{c}"' for c in wanted]
        return self.query(f"SELECT {', '.join(parts)} FROM {table}")

    def _missing_or_none(self, name: str) -> None:
        self._mark_missing(name, _NOT_CAPTURED_HINT.get(name, f"{name} was not captured"))

    # -- table loaders -------------------------------------------------------------------------
    def _load(self, name: str) -> pd.DataFrame | None:
        if name == "cpu_ops":
            self._missing_or_none(name)
            return None
        sqlite_table = _NSYS_TABLES[name]
        if sqlite_table not in self._tables:
            self._missing_or_none(name)
            return None
        loader = getattr(self, f"_load_{name}")
        df: pd.DataFrame = loader(sqlite_table)
        return df[list(TABLES[name][0])] if set(TABLES[name][0]) <= set(df.columns) else df

    def _load_kernels(self, t: str) -> pd.DataFrame:
        cols = [
            "start", "end", "deviceId", "contextId", "greenContextId", "streamId",
            "correlationId", "globalPid", "demangledName", "shortName", "mangledName", "gridX",
            "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
            "staticSharedMemory", "dynamicSharedMemory", "localMemoryTotal", "graphNodeId",
        ]
        df = self._select(t, cols)
        s = self.strings()
        for c in ("demangledName", "shortName", "mangledName"):
            df[c] = df[c].map(s)
        df["name"] = df.pop("demangledName").fillna(df["shortName"])
        df["pid"] = decode_global_tid(df["globalPid"])[0]
        return df

    def _load_memcpy(self, t: str) -> pd.DataFrame:
        cols = [
            "start", "end", "deviceId", "contextId", "greenContextId", "streamId",
            "correlationId", "globalPid", "bytes", "copyKind", "srcKind", "dstKind",
            "srcDeviceId", "dstDeviceId",
        ]
        df = self._select(t, cols)
        ops = self.enum_labels("ENUM_CUDA_MEMCPY_OPER", _COPY_KIND_LABELS)
        kinds = self.enum_labels("ENUM_CUDA_MEM_KIND", _MEM_KIND_LABELS)
        df["operation"] = df["copyKind"].map(ops)
        df["srcKindName"] = df["srcKind"].map(kinds)
        df["dstKindName"] = df["dstKind"].map(kinds)
        df["pid"] = decode_global_tid(df["globalPid"])[0]
        return df

    def _load_memset(self, t: str) -> pd.DataFrame:
        cols = [
            "start", "end", "deviceId", "contextId", "greenContextId", "streamId",
            "correlationId", "globalPid", "bytes", "memKind", "value",
        ]
        df = self._select(t, cols)
        kinds = self.enum_labels("ENUM_CUDA_MEM_KIND", _MEM_KIND_LABELS)
        df["memKindName"] = df["memKind"].map(kinds)
        df["pid"] = decode_global_tid(df["globalPid"])[0]
        return df

    def _load_api(self, t: str) -> pd.DataFrame:
        cols = ["start", "end", "globalTid", "correlationId", "nameId", "eventClass", "returnValue"]
        df = self._select(t, cols)
        s = self.strings()
        # Map the few distinct ids, not every row, through the string table.
        ids = df.pop("nameId")
        df["name"] = ids.map({i: s.get(i, f"<unknown {i}>") for i in ids.unique()})
        df["baseName"] = df["name"].str.replace(r"_v\d{4}$", "", regex=True)
        df["pid"], df["tid"] = decode_global_tid(df["globalTid"])
        return df

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
