"""Reports that are empty on an nsys SQLite export, told from its schema without loading anything.

An export creates only the tables that have rows, so a capture without ``--trace=osrt`` has no
OSRT_API table and its ``osrt_sum`` is empty; the same holds for unified memory, OpenMP, MPI,
NVTX and the CUDA tables. :func:`empty_reports` answers those from ``sqlite_master`` (and, for
the reports over some rows of a table that exists, one ``LIMIT 1`` query), before pandas is even
imported: an empty report costs the start of the command, not the import of the DataFrame path.
It only answers where the general path is certain to find no rows; any doubt leaves the report
to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.table import SummaryTable

if TYPE_CHECKING:
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

_KERNEL, _RUNTIME = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"
_MEMCPY, _MEMSET = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"
_UM_FAULTS = ("CUDA_UM_CPU_PAGE_FAULT_EVENTS", "CUDA_UM_GPU_PAGE_FAULT_EVENTS")
_MPI = ("MPI_P2P_EVENTS", "MPI_COLLECTIVES_EVENTS", "MPI_START_WAIT_EVENTS", "MPI_OTHER_EVENTS",
        "MPI_RANKS")
#: NVTX_EVENTS event types: push/pop and start/end ranges (and their NVTXT twins).
_PUSHPOP, _RANGES = (59, 70), (59, 70, 60, 71)
_UM_KINDS = (11, 12)  # unified memory migrations among the copies (HtoD, DtoH)


def _none_of(trace: NsysSqliteTrace, tables: Sequence[str]) -> bool:
    return not any(trace.has_sqlite_table(t) for t in tables)


def _no_row(trace: NsysSqliteTrace, table: str, where: str) -> bool:
    """True when ``table`` is absent or has no row where ``where`` holds (one LIMIT 1 query)."""
    if not trace.has_sqlite_table(table):
        return True
    return not trace.rows(f"SELECT 1 FROM {table} WHERE {where} LIMIT 1")


def _no_nvtx(trace: NsysSqliteTrace, types: tuple[int, ...], closed: bool = False) -> bool:
    where = f"eventType IN ({', '.join(map(str, types))})" + (' AND "end" IS NOT NULL' if closed else "")
    return _no_row(trace, "NVTX_EVENTS", where)


def _no_migrations(trace: NsysSqliteTrace) -> bool:
    """No unified memory migration among the copies (one scan of the copy kinds, no numpy)."""
    if not trace.has_sqlite_table(_MEMCPY) or "virtualAddress" not in trace.column_names(_MEMCPY):
        return True
    return _no_row(trace, _MEMCPY, f"copyKind IN {_UM_KINDS}")


def _no_gpu_ops(trace: NsysSqliteTrace) -> bool:
    return _none_of(trace, (_KERNEL, _MEMCPY, _MEMSET))


#: Report -> test that is True only when the general path would find no rows.
_EMPTY_WHEN: dict[str, Callable[[NsysSqliteTrace], bool]] = {
    "osrt_sum": lambda t: not t.has_sqlite_table("OSRT_API"),
    "openmp_sum": lambda t: not any(n.startswith("OPENMP_EVENT_KIND_") for n in t.sqlite_tables()),
    "um_cpu_page_faults_sum": lambda t: not t.has_sqlite_table(_UM_FAULTS[0]),
    "um_sum": lambda t: _none_of(t, _UM_FAULTS) and _no_migrations(t),
    "um_total_sum": lambda t: _none_of(t, _UM_FAULTS) and _no_migrations(t),
    "mpi_event_sum": lambda t: _none_of(t, _MPI),
    "mpi_event_trace": lambda t: _none_of(t, _MPI),
    "nvtx_pushpop_sum": lambda t: _no_nvtx(t, _PUSHPOP, closed=True),
    "nvtx_startend_sum": lambda t: _no_nvtx(t, (60, 71), closed=True),
    "nvtx_pushpop_trace": lambda t: _no_nvtx(t, _PUSHPOP),
    "nvtx_kern_sum": lambda t: not t.has_sqlite_table(_KERNEL) or _no_nvtx(t, _RANGES),
    "nvtx_gpu_proj_trace": lambda t: not t.has_sqlite_table(_RUNTIME) or _no_gpu_ops(t)
    or _no_nvtx(t, _RANGES),
    "nvtx_gpu_proj_sum": lambda t: not t.has_sqlite_table(_RUNTIME) or _no_gpu_ops(t)
    or _no_nvtx(t, _RANGES),
    "cuda_gpu_kern_gb_sum": lambda t: not t.has_sqlite_table(_KERNEL),
    "cuda_api_trace": lambda t: not t.has_sqlite_table(_RUNTIME),
    "cuda_kern_exec_trace": lambda t: not (t.has_sqlite_table(_KERNEL) and t.has_sqlite_table(_RUNTIME)),
    "cuda_kern_exec_sum": lambda t: not (t.has_sqlite_table(_KERNEL) and t.has_sqlite_table(_RUNTIME)),
    "cuda_gpu_trace": _no_gpu_ops,
}


def empty_reports(trace: NsysSqliteTrace, names: Sequence[str]) -> dict[str, SummaryTable]:
    """The reports among ``names`` that are certainly empty on this export, as empty tables.

    Args:
        trace: an nsys SQLite export.
        names: report names (current spelling).

    Returns:
        Report name -> an empty :class:`SummaryTable` (nsys's columns, no rows), for each report
        the schema (or one LIMIT 1 query) proves empty; the others are left out.

    """
    return {n: SummaryTable(n, [[] for _ in COLUMNS[n]]) for n in dict.fromkeys(names)
            if n in _EMPTY_WHEN and _EMPTY_WHEN[n](trace)}
