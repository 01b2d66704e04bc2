"""``cuda_gpu_mem_time_sum`` and ``cuda_gpu_mem_size_sum``: memory copies and memsets by operation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import COLUMNS, STAT_COLS, SUM_COLS
from engine.analysis.nsys.stats.group_stats import Groups, time_rows
from engine.analysis.nsys.stats.named_durations import memop_groups
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.table import SummaryTable

if TYPE_CHECKING:
    from engine.reports.base import Trace

_MB_COLS = ("Total (MB)", "Count", "Avg (MB)", "Med (MB)", "Min (MB)", "Max (MB)", "StdDev (MB)", "Operation")


@report("cuda_gpu_mem_time_sum", title="GPU Memory Operations Summary (by Time): memcpy/memset durations",
        columns=(*SUM_COLS, "Count", *STAT_COLS, "Operation"), needs=("memcpy", "memset"), shares_reads=True)
def cuda_gpu_mem_time_sum(trace: Trace, csv: bool) -> SummaryTable:
    """Per operation ("[CUDA memcpy Host-to-Device]", "[CUDA memset]"...): durations' statistics."""
    return time_rows(memop_groups(trace, "duration"), "cuda_gpu_mem_time_sum")


@report("cuda_gpu_mem_size_sum", title="GPU Memory Operations Summary (by Size): memcpy/memset sizes in MB",
        columns=_MB_COLS, needs=("memcpy", "memset"), shares_reads=True)
def cuda_gpu_mem_size_sum(trace: Trace, csv: bool) -> SummaryTable:
    """Per operation: sizes' statistics in MB (bytes / 1e6, as nsys prints them), by total."""
    return size_table(memop_groups(trace, "bytes"))


def size_table(groups: Groups) -> SummaryTable:
    """cuda_gpu_mem_size_sum from byte statistics, rows by total size, descending."""
    rows = [
        (total / 1e6, count, mean / 1e6, median / 1e6, vmin / 1e6, vmax / 1e6, std / 1e6, name)
        for name, (total, count, mean, median, vmin, vmax, std) in groups
    ]
    rows.sort(key=lambda r: -r[0])
    return SummaryTable("cuda_gpu_mem_size_sum", [list(c) for c in zip(*rows, strict=True)] if rows
                        else [[] for _ in COLUMNS["cuda_gpu_mem_size_sum"]])
