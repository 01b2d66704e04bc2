"""The ``nsys stats`` summary reports, computed from the common tables of any trace.

Each report returns a pandas DataFrame whose columns are named exactly as Nsight Systems 2025.3
prints them, with numeric values kept numeric; :func:`to_csv` then reproduces ``nsys stats
--format csv`` text byte for byte (checked against NVIDIA's own output in
tests/engine/analysis/test_nsys_stats.py).

The formulas are the public ones (see docs/FORMATS.md): durations are ``end - start``; per group the
total, count, mean, median (mean of the two middle values for an even count), min, max and sample
standard deviation (0 for a single row); ``Time (%)`` is a group's total over the sum of all the
report's totals; rows are sorted by total, descending, ties by name ascending.

Everything is vectorised (one groupby per report), so a trace with hundreds of thousands of kernels
and API calls is summarised in well under a second. :func:`fast_reports` computes the five core
reports of an nsys SQLite export without pandas (whose import alone costs more than the work):
column-wise reads in threads and numpy segment statistics, printing the same bytes; the CLI uses it.

The package: :mod:`.catalog` (names and columns), :mod:`.frames` (the DataFrame reports),
:mod:`.fast` (the pandas-free core reports), :mod:`.output` (CSV and text tables).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats import frames, more, nvtx
from engine.analysis.nsys.stats.catalog import (
    ALIASES,
    COLUMNS,
    REPORTS,
    columns_needed,
    resolve_report_name,
)
from engine.analysis.nsys.stats.fast import FAST_REPORTS, SummaryTable
from engine.analysis.nsys.stats.output import format_table, to_csv

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

__all__ = [
    "ALIASES", "COLUMNS", "FAST_REPORTS", "REPORTS", "SummaryTable", "columns_needed", "fast_reports",
    "format_table", "resolve_report_name", "run_report", "to_csv",
]


_BUILDERS: dict[str, Callable[[Trace], pd.DataFrame]] = {
    "cuda_api_sum": frames._cuda_api_sum,
    "cuda_gpu_kern_sum": frames._cuda_gpu_kern_sum,
    "cuda_gpu_mem_time_sum": frames._cuda_gpu_mem_time_sum,
    "cuda_gpu_mem_size_sum": frames._cuda_gpu_mem_size_sum,
    "nvtx_sum": frames._nvtx_sum,
    "cuda_api_gpu_sum": frames._cuda_api_gpu_sum,
    "cuda_kern_exec_sum": frames._cuda_kern_exec_sum,
    "cuda_gpu_sum": frames._cuda_gpu_sum,
    "cuda_gpu_trace": frames._cuda_gpu_trace,
    "cuda_api_trace": more.cuda_api_trace,
    "cuda_kern_exec_trace": more.cuda_kern_exec_trace,
    "cuda_gpu_kern_gb_sum": more.cuda_gpu_kern_gb_sum,
    "nvtx_pushpop_sum": more.nvtx_pushpop_sum,
    "nvtx_startend_sum": more.nvtx_startend_sum,
    "nvtx_pushpop_trace": more.nvtx_pushpop_trace,
    "nvtx_kern_sum": nvtx.nvtx_kern_sum,
    "nvtx_gpu_proj_trace": nvtx.nvtx_gpu_proj_trace,
    "nvtx_gpu_proj_sum": nvtx.nvtx_gpu_proj_sum,
    "osrt_sum": more.osrt_sum,
    "openmp_sum": more.openmp_sum,
    "um_sum": more.um_sum,
    "um_total_sum": more.um_total_sum,
    "um_cpu_page_faults_sum": more.um_cpu_page_faults_sum,
    "mpi_event_sum": more.mpi_event_sum,
    "mpi_event_trace": more.mpi_event_trace,
}


def fast_reports(trace: Trace, names: Sequence[str], *, csv: bool = False) -> dict[str, Any]:
    """The reports among ``names`` that an nsys SQLite export gives without pandas.

    The newer reports and those empty on the capture (:func:`.newer.newer_reports`), then the
    core reports and the GPU / API traces (:func:`.fast.fast_reports`); the others are left out
    (the general path, :func:`run_report`, computes them). Same bytes as that path.
    """
    from engine.analysis.nsys.stats import fast
    from engine.analysis.nsys.stats.newer import newer_reports
    from engine.analysis.nsys.stats.nvtxfast import nvtx_sum_groups

    out = newer_reports(trace, names, csv=csv)
    out.update(fast.fast_reports(trace, [n for n in names if n not in out], csv=csv,
                                 nvtx_groups=nvtx_sum_groups))
    return out


def run_report(trace: Trace, name: str) -> pd.DataFrame:
    """Compute one ``nsys stats`` report over a trace.

    Args:
        trace: an opened trace (nsys export or Kineto JSON), see ``engine.reports.open_report``.
        name: a report name or nsys 2022 alias (see :data:`REPORTS`, :data:`ALIASES`).

    Returns:
        A DataFrame with nsys 2025.3's column names, numeric columns numeric, rows in nsys's
        order. Empty (with those columns) when the trace lacks the data the report needs.

    Raises:
        KernelscopeError: ``name`` is not a known report.

    """
    report = resolve_report_name(name)
    df = _BUILDERS[report](trace)
    return df[list(COLUMNS[report])]
