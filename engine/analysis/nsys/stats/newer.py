"""The newer reports of an nsys SQLite export without pandas, and those empty on a capture.

:func:`newer_reports` answers, before pandas is imported: the reports the export's schema shows
to be empty (:mod:`.empty`), ``cuda_kern_exec_trace`` and ``cuda_gpu_kern_gb_sum``
(:mod:`.kexec`), and ``nvtx_pushpop_trace``, ``nvtx_pushpop_sum``, ``nvtx_startend_sum`` and
``nvtx_kern_sum`` (:mod:`.nvtxfast`). Each prints the bytes of its DataFrame path; where one
cannot (NULLs, odd names), it is left to that path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace


def _builders(csv: bool) -> dict[str, Callable[[NsysSqliteTrace], Any]]:
    from engine.analysis.nsys.stats import kexec, nvtxfast

    out: dict[str, Callable[[NsysSqliteTrace], Any]] = {
        "cuda_gpu_kern_gb_sum": kexec.kern_gb_sum_table,
        "nvtx_pushpop_sum": lambda t: nvtxfast.style_sum_table(t, "nvtx_pushpop_sum"),
        "nvtx_startend_sum": lambda t: nvtxfast.style_sum_table(t, "nvtx_startend_sum"),
        "nvtx_kern_sum": nvtxfast.kern_sum_table,
    }
    if csv:  # rendered CSV, streamed by the command line
        out["cuda_kern_exec_trace"] = kexec.kern_exec_trace_csv
        out["nvtx_pushpop_trace"] = nvtxfast.pushpop_trace_csv
    return out


def newer_reports(trace: Trace, names: Sequence[str], *, csv: bool = False) -> dict[str, Any]:
    """The reports among ``names`` computed here (see the module), name -> table.

    Args:
        trace: an opened trace; only an nsys SQLite export has these paths.
        names: report names (current spelling).
        csv: the caller prints CSV (the traces then come back rendered, as ``CsvTable``).

    Returns:
        Report name -> table (an empty table for a report empty on this capture); the reports
        left out go to the general path.

    """
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if not isinstance(trace, NsysSqliteTrace):
        return {}
    from engine.analysis.nsys.stats.empty import empty_reports

    out: dict[str, Any] = dict(empty_reports(trace, names))
    builders = _builders(csv)
    for name in dict.fromkeys(names):
        if name in out or name not in builders:
            continue
        table = builders[name](trace)
        if table is not None:
            out[name] = table
    return out
