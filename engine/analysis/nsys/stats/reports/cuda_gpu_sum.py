"""``cuda_api_gpu_sum`` and ``cuda_gpu_sum``: API calls, kernels and memory operations in one summary.

Each category's groups (those of ``cuda_api_sum``, ``cuda_gpu_kern_sum``, ``cuda_gpu_mem_time_sum``)
in name order, then all rows by total, descending (a stable sort: ties keep category order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import STAT_COLS, SUM_COLS
from engine.analysis.nsys.stats.group_stats import Groups, time_rows
from engine.analysis.nsys.stats.named_durations import api_groups, kernel_groups, memop_groups
from engine.analysis.nsys.stats.registry import report

if TYPE_CHECKING:
    from engine.analysis.nsys.stats.table import SummaryTable
    from engine.reports.base import Trace

_COLUMNS = (*SUM_COLS, "Instances", *STAT_COLS, "Category", "Operation")


def _combined(categories: list[tuple[str, Groups]], name: str) -> SummaryTable:
    return time_rows([((c, label), st) for c, groups in categories for label, st in groups], name)


@report("cuda_api_gpu_sum",
        title="CUDA Summary (API/Kernels/MemOps): API calls, kernels and memory operations",
        columns=_COLUMNS, needs=("api", "kernels", "memcpy", "memset"), shares_reads=True)
def cuda_api_gpu_sum(trace: Trace, csv: bool) -> SummaryTable:
    """CUDA_API, CUDA_KERNEL and MEMORY_OPER groups, by total."""
    return _combined([("CUDA_API", api_groups(trace)), ("CUDA_KERNEL", kernel_groups(trace)),
                      ("MEMORY_OPER", memop_groups(trace, "duration"))], "cuda_api_gpu_sum")


@report("cuda_gpu_sum", title="GPU Summary (Kernels/MemOps): kernels and memory operations together",
        columns=_COLUMNS, needs=("kernels", "memcpy", "memset"), shares_reads=True)
def cuda_gpu_sum(trace: Trace, csv: bool) -> SummaryTable:
    """CUDA_KERNEL and MEMORY_OPER groups, by total."""
    return _combined([("CUDA_KERNEL", kernel_groups(trace)),
                      ("MEMORY_OPER", memop_groups(trace, "duration"))], "cuda_gpu_sum")
