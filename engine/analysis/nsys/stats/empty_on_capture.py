"""Reports that are empty on an nsys SQLite export, told from its schema without loading anything.

An export creates only the tables that have rows, so a capture without ``--trace=osrt`` has no
OS runtime table and its ``osrt_sum`` is empty; the same holds for unified memory, OpenMP, MPI,
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
from engine.reports.nsys import stats_reads as reads
from engine.reports.nsys.schema import NVTX_PUSH_POP, NVTX_START_END, NVTXT_PUSH_POP, NVTXT_START_END, OSRT

if TYPE_CHECKING:
    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace


#: NVTX event types: push/pop and start/end ranges (and their NVTXT twins).
_PUSHPOP, _STARTEND = (NVTX_PUSH_POP, NVTXT_PUSH_POP), (NVTX_START_END, NVTXT_START_END)
_RANGES = (*_PUSHPOP, *_STARTEND)


def _no_um_data(t: NsysSqliteTrace) -> bool:
    return not reads.has_um_faults(t) and not reads.has_migrations(t)


def _no_launches(t: NsysSqliteTrace, *gpu: str) -> bool:
    """No CUDA call, or none of the GPU tables ``gpu``."""
    return not reads.has_table(t, "api") or not any(reads.has_table(t, g) for g in gpu)


#: Report -> test that is True only when the general path would find no rows.
_EMPTY_WHEN: dict[str, Callable[[NsysSqliteTrace], bool]] = {
    "osrt_sum": lambda t: not reads.has_table(t, OSRT),
    "openmp_sum": lambda t: not reads.has_openmp(t),
    "um_cpu_page_faults_sum": lambda t: not reads.has_um_faults(t, gpu=False),
    "um_sum": _no_um_data,
    "um_total_sum": _no_um_data,
    "mpi_event_sum": lambda t: not reads.has_mpi(t),
    "mpi_event_trace": lambda t: not reads.has_mpi(t),
    "nvtx_pushpop_sum": lambda t: not reads.has_nvtx(t, _PUSHPOP, ended=True),
    "nvtx_startend_sum": lambda t: not reads.has_nvtx(t, _STARTEND, ended=True),
    "nvtx_pushpop_trace": lambda t: not reads.has_nvtx(t, _PUSHPOP),
    "nvtx_kern_sum": lambda t: not reads.has_table(t, "kernels") or not reads.has_nvtx(t, _RANGES),
    "nvtx_gpu_proj_trace": lambda t: not reads.has_table(t, "api") or not reads.has_gpu_ops(t)
    or not reads.has_nvtx(t, _RANGES),
    "nvtx_gpu_proj_sum": lambda t: not reads.has_table(t, "api") or not reads.has_gpu_ops(t)
    or not reads.has_nvtx(t, _RANGES),
    "cuda_gpu_kern_gb_sum": lambda t: not reads.has_table(t, "kernels"),
    "cuda_api_trace": lambda t: not reads.has_table(t, "api"),
    "cuda_kern_exec_trace": lambda t: _no_launches(t, "kernels"),
    "cuda_kern_exec_sum": lambda t: _no_launches(t, "kernels"),
    "cuda_gpu_trace": lambda t: not reads.has_gpu_ops(t),
}


def empty_reports(trace: Trace, names: Sequence[str]) -> dict[str, SummaryTable]:
    """The reports among ``names`` that are certainly empty on this trace, as empty tables.

    Args:
        trace: an opened trace; only an nsys SQLite export's schema proves anything (other
            traces: none is left out here).
        names: report names (current spelling).

    Returns:
        Report name -> an empty :class:`SummaryTable` (nsys's columns, no rows), for each report
        the schema (or one LIMIT 1 query) proves empty; the others are left out.

    """
    export = reads.export_of(trace)
    if export is None:
        return {}
    return {n: SummaryTable(n, [[] for _ in COLUMNS[n]]) for n in dict.fromkeys(names)
            if n in _EMPTY_WHEN and _EMPTY_WHEN[n](export)}
