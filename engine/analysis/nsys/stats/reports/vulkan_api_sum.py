"""``vulkan_api_sum``: Vulkan API calls grouped by name (captures with ``--trace=vulkan``).

As nsys summarises them: the calls (event class 53) of the export's Vulkan API table, grouped by
function name id, the name printed without its ``_vNNNN`` version suffix (so a function may show
twice, as nsys 2022.4 prints it); total, count and statistics of their durations, most total
time first. Empty for captures without Vulkan tracing and other traces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import STAT_COLS, SUM_COLS
from engine.analysis.nsys.stats.group_stats import time_rows
from engine.analysis.nsys.stats.named_durations import call_groups
from engine.analysis.nsys.stats.registry import report

if TYPE_CHECKING:
    from engine.analysis.nsys.stats.table import SummaryTable
    from engine.reports.base import Trace


@report("vulkan_api_sum", title="Vulkan API Summary: Vulkan API calls grouped by name (--trace=vulkan)",
        columns=(*SUM_COLS, "Num Calls", *STAT_COLS, "Name"))
def vulkan_api_sum(trace: Trace, csv: bool) -> SummaryTable:
    """Per Vulkan function: total, count and statistics of the calls' durations."""
    return time_rows(call_groups(trace, "vulkan", by_name_id=True), "vulkan_api_sum")
