"""``cuda_api_sum``: CUDA runtime and driver calls grouped by name (nsys strips ``_vNNNN`` suffixes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import STAT_COLS, SUM_COLS
from engine.analysis.nsys.stats.group_stats import time_rows
from engine.analysis.nsys.stats.named_durations import api_groups
from engine.analysis.nsys.stats.registry import report

if TYPE_CHECKING:
    from engine.analysis.nsys.stats.table import SummaryTable
    from engine.reports.base import Trace


@report("cuda_api_sum", title="CUDA API Summary: runtime and driver calls grouped by name",
        columns=(*SUM_COLS, "Num Calls", *STAT_COLS, "Name"), needs=("api",), shares_reads=True)
def cuda_api_sum(trace: Trace, csv: bool) -> SummaryTable:
    """Per API name: total, count and statistics of the calls' durations."""
    return time_rows(api_groups(trace), "cuda_api_sum")
