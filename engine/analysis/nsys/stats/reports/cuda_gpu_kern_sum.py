"""``cuda_gpu_kern_sum``: kernel executions grouped by kernel name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import STAT_COLS, SUM_COLS
from engine.analysis.nsys.stats.group_stats import time_rows
from engine.analysis.nsys.stats.named_durations import kernel_groups
from engine.analysis.nsys.stats.registry import report

if TYPE_CHECKING:
    from engine.analysis.nsys.stats.table import SummaryTable
    from engine.reports.base import Trace


@report("cuda_gpu_kern_sum", title="CUDA GPU Kernel Summary: kernel executions grouped by name",
        columns=(*SUM_COLS, "Instances", *STAT_COLS, "Name"), needs=("kernels",), shares_reads=True)
def cuda_gpu_kern_sum(trace: Trace, csv: bool) -> SummaryTable:
    """Per kernel name: total, count and statistics of the kernels' durations."""
    return time_rows(kernel_groups(trace), "cuda_gpu_kern_sum")
