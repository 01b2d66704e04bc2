"""SQL over an nsys export that the ``nsys stats`` reports and ``nsys analyze`` rules need.

The reports and rules (``engine.analysis.nsys``) name no export table and write no SQL: they ask
here, or read columns through the trace. Each function takes an opened
:class:`~engine.reports.nsys.sqlite_trace.NsysSqliteTrace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.reports.nsys.schema import (
    DURATION,
    GPU_INFO,
    KERNEL,
    MEMCPY,
    MEMSET,
    NVTX,
    OSRT,
    RUNTIME,
    STRINGS,
    TABLES,
    THREAD_NAMES,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

UM_CPU_FAULTS = "CUDA_UM_CPU_PAGE_FAULT_EVENTS"
UM_GPU_FAULTS = "CUDA_UM_GPU_PAGE_FAULT_EVENTS"
MPI_TABLES = ("MPI_P2P_EVENTS", "MPI_COLLECTIVES_EVENTS", "MPI_START_WAIT_EVENTS", "MPI_OTHER_EVENTS",
              "MPI_RANKS")
OPENMP_PREFIX = "OPENMP_EVENT_KIND_"
#: copyKind of unified memory migrations (host to device, device to host).
UM_HTOD, UM_DTOH = 11, 12

#: An export's tables of host calls that nsys summarises by name: family -> (table, the calls'
#: ``eventClass``; other classes in the table are not calls).
CALL_TABLES: dict[str, tuple[str, int]] = {
    "osrt": (OSRT, 27),  # TRACE_PROCESS_EVENT_OS_RUNTIME
    "vulkan": ("VULKAN_API", 53),  # TRACE_PROCESS_EVENT_VULKAN_API
}


def call_columns(trace: Trace, family: str) -> dict[str, npt.NDArray[np.int64]] | None:
    """``duration`` and ``nameId`` of the calls of a :data:`CALL_TABLES` family, in table order.

    None when the trace is no nsys export or the export has no such table (the calls were not
    traced); NULL values read as :data:`~engine.reports.nsys.schema.NULL`. Read through the columnar
    cache (kept for the next run).
    """
    table, event_class = CALL_TABLES[family]
    export = export_of(trace)
    if export is None or not export.has_sqlite_table(table):
        return None
    have = set(export.column_names(table))
    where = f"eventClass = {event_class}" if "eventClass" in have else "1"
    name = '"nameId"' if "nameId" in have else "NULL"
    return export.column_store().read_where(table, {"duration": DURATION, "nameId": name}, where)


# -- is it there? -----------------------------------------------------------------------------
def export_of(trace: Trace) -> NsysSqliteTrace | None:
    """The trace as an nsys export, or None for other traces (Kineto)."""
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    return trace if isinstance(trace, NsysSqliteTrace) else None


def has_table(trace: Trace, name: str) -> bool:
    """True when an nsys export has the engine table ``name`` (``kernels``, ``api``...) or export table."""
    export = export_of(trace)
    return export is not None and export.has_sqlite_table(TABLES.get(name, name))


def has_row(trace: NsysSqliteTrace, table: str, where: str) -> bool:
    """True when the export table (engine or export name) has a row where ``where`` holds (LIMIT 1)."""
    t = TABLES.get(table, table)
    return trace.has_sqlite_table(t) and bool(trace.rows(f"SELECT 1 FROM {t} WHERE {where} LIMIT 1"))


def nvtx_where(types: Sequence[int], *, ended: bool = False) -> str:
    """SQL selecting NVTX events of these ``eventType`` values (``ended``: only those with an end)."""
    where = f"eventType IN ({', '.join(str(int(t)) for t in types)})"
    if ended:
        where += ' AND "end" IS NOT NULL'
    return where


def has_nvtx(trace: NsysSqliteTrace, types: Sequence[int], *, ended: bool = False) -> bool:
    """True when the export has an NVTX event of these types (that ended)."""
    return has_row(trace, NVTX, nvtx_where(types, ended=ended))


def has_migrations_column(trace: NsysSqliteTrace) -> bool:
    """True when the export's copies record a virtual address (unified memory migrations can show)."""
    return trace.has_sqlite_table(MEMCPY) and "virtualAddress" in trace.column_names(MEMCPY)


def has_migrations(trace: NsysSqliteTrace) -> bool:
    """True when a unified memory migration is among the copies (one scan of the copy kinds)."""
    if not has_migrations_column(trace):
        return False
    return has_row(trace, MEMCPY, f"copyKind IN ({UM_HTOD}, {UM_DTOH})")


def has_um_faults(trace: NsysSqliteTrace, cpu: bool = True, gpu: bool = True) -> bool:
    """True when the export has unified memory page faults (of the CPU, the GPU)."""
    return (cpu and trace.has_sqlite_table(UM_CPU_FAULTS)) or (gpu and trace.has_sqlite_table(UM_GPU_FAULTS))


def has_openmp(trace: Trace) -> bool:
    """True when an nsys export has OpenMP events."""
    export = export_of(trace)
    return export is not None and any(n.startswith(OPENMP_PREFIX) for n in export.sqlite_tables())


def has_mpi(trace: Trace) -> bool:
    """True when an nsys export has MPI data."""
    export = export_of(trace)
    return export is not None and any(export.has_sqlite_table(t) for t in MPI_TABLES)


def has_gpu_ops(trace: NsysSqliteTrace) -> bool:
    """True when the export has kernels, copies or memsets."""
    return any(trace.has_sqlite_table(t) for t in (KERNEL, MEMCPY, MEMSET))


# -- rows as DataFrames (the reports that read the export's own tables) ------------------------------
def query_rows(trace: Trace, table: str, sql: str) -> pd.DataFrame | None:
    """Run ``sql`` over an nsys export that has ``table`` with rows; None otherwise (or no rows)."""
    export = export_of(trace)
    if export is None or not export.has_sqlite_table(table):
        return None
    df = export.query(sql)
    return None if df.empty else df


def openmp_events(trace: Trace) -> list[pd.DataFrame]:
    """(start, end, name) of the events of every OpenMP table, table by table (sorted by table name)."""
    export = export_of(trace)
    if export is None:
        return []
    tables = sorted(t for t in export.sqlite_tables() if t.startswith(OPENMP_PREFIX))
    return [df for t in tables
            if (df := query_rows(trace, t, f'SELECT t."start", t."end", s.value AS name FROM {t} AS t '
                                           f"LEFT JOIN {STRINGS} AS s ON s.id = t.nameId")) is not None]


def thread_names(trace: Trace) -> list[tuple[Any, Any, Any]]:
    """(globalTid, priority, name) of each row of the export's thread names (none for other traces)."""
    export = export_of(trace)
    if export is None or not export.has_sqlite_table(THREAD_NAMES):
        return []
    rows = export.rows(f"SELECT t.globalTid, t.priority, s.value FROM {THREAD_NAMES} AS t "
                       f"LEFT JOIN {STRINGS} AS s ON s.id = t.nameId")
    return [(g, p, n) for g, p, n in rows]


def um_cpu_faults_by_instruction(trace: Trace) -> pd.DataFrame | None:
    """CPU page faults counted per (instruction, source file, line): n, addr, file, line."""
    export = export_of(trace)
    if export is None:
        return None
    has = set(export.column_names(UM_CPU_FAULTS)) if export.has_sqlite_table(UM_CPU_FAULTS) else set()
    src = "e.sourceFile" if "sourceFile" in has else "NULL"
    line = "e.sourceLine" if "sourceLine" in has else "NULL"
    return query_rows(trace, UM_CPU_FAULTS,
                      f"SELECT count(*) AS n, i.value AS addr, f.value AS file, {line} AS line "
                      f"FROM {UM_CPU_FAULTS} AS e LEFT JOIN {STRINGS} AS i ON i.id = e.CpuInstruction "
                      f"LEFT JOIN {STRINGS} AS f ON f.id = {src} GROUP BY e.CpuInstruction, {src}, {line}")


def um_parts(trace: Trace) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
    """(CPU faults: address; GPU faults: address, n; UM migrations: address, kind, bytes, dur)."""
    cpu = query_rows(trace, UM_CPU_FAULTS, f"SELECT address FROM {UM_CPU_FAULTS}")
    gpu = query_rows(trace, UM_GPU_FAULTS, f"SELECT address, numberOfPageFaults AS n FROM {UM_GPU_FAULTS}")
    mig = None
    export = export_of(trace)
    if export is not None and has_migrations_column(export):
        mig = query_rows(trace, MEMCPY,
                         f'SELECT virtualAddress AS address, copyKind AS kind, bytes, {DURATION} AS dur '
                         f"FROM {MEMCPY} WHERE copyKind IN ({UM_HTOD}, {UM_DTOH})")
    return cpu, gpu, mig


def nvtx_events(trace: Trace, *, end_tid: bool = False, text_id: bool = False) -> pd.DataFrame | None:
    """Every NVTX event as a DataFrame (None: no NVTX table, or no rows).

    Columns id (rowid), start, end, eventType, text, domainId, globalTid and stext (the ``textId``'s
    string); with ``end_tid`` the ending thread (endTid), with ``text_id`` the textId.
    """
    export = export_of(trace)
    if export is None or not export.has_sqlite_table(NVTX):
        return None
    end = ("e.endGlobalTid" if "endGlobalTid" in export.column_names(NVTX) else "NULL") + " AS endTid, "
    return query_rows(trace, NVTX,
                      'SELECT e.rowid AS id, e."start", e."end", e.eventType, e.text, '
                      + ("e.textId, " if text_id else "") + "e.domainId, e.globalTid, "
                      + (end if end_tid else "") + f"s.value AS stext FROM {NVTX} AS e "
                      f"LEFT JOIN {STRINGS} AS s ON s.id = e.textId")


def kernel_launches(trace: Trace) -> pd.DataFrame | None:
    """Each kernel with its launch call: kid (rowid), kdur, kname, the call's a_start/a_end, gtid."""
    return query_rows(trace, KERNEL,
                      'SELECT k.rowid AS kid, k."end" - k."start" AS kdur, s.value AS kname, '
                      'r."start" AS a_start, r."end" AS a_end, r.globalTid AS gtid '
                      f"FROM {KERNEL} AS k "
                      f"LEFT JOIN {STRINGS} AS s ON s.id = coalesce(k.demangledName, k.shortName) "
                      f"LEFT JOIN {RUNTIME} AS r ON r.correlationId = k.correlationId "
                      "AND (r.globalTid & -16777216) = k.globalPid")


def gpu_op_launches(trace: Trace) -> list[pd.DataFrame]:
    """Kernels, copies and memsets joined with their calls: start, end, corr, a_start, a_end, gtid."""
    parts = []
    for table in (KERNEL, MEMCPY, MEMSET):
        df = query_rows(trace, table,
                        f'SELECT o."start", o."end", r.correlationId AS corr, r."start" AS a_start, '
                        f'r."end" AS a_end, r.globalTid AS gtid FROM {table} AS o '
                        f"JOIN {RUNTIME} AS r ON r.correlationId = o.correlationId "
                        "AND (r.globalTid & -16777216) = o.globalPid")
        if df is not None:
            parts.append(df)
    return parts


def gpu_names(trace: NsysSqliteTrace) -> dict[int, str]:
    """GPU id -> its name, from the capture's GPU descriptions (empty where there are none)."""
    if not trace.has_sqlite_table(GPU_INFO):
        return {}
    if not {"id", "name"} <= set(trace.column_names(GPU_INFO)):
        return {}
    rows = trace.rows(f"SELECT id, name FROM {GPU_INFO}")
    return {int(str(i)): str(n) for i, n in rows if i is not None and n is not None}
