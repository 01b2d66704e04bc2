"""``osrt_sum``: OS runtime calls grouped by function (captures with ``--trace=osrt``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.group_stats import time_rows
from engine.analysis.nsys.stats.named_durations import call_groups
from engine.analysis.nsys.stats.registry import report

if TYPE_CHECKING:
    from engine.analysis.nsys.stats.table import SummaryTable
    from engine.reports.base import Trace


@report(
    "osrt_sum",
    title="OS Runtime Summary: OS runtime calls grouped by function (--trace=osrt)",
    columns=(
        "Time (%)", "Total Time (ns)", "Num Calls", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
        "StdDev (ns)", "Name",
    ),
    needs=(),
)
def osrt_sum(trace: Trace, csv: bool) -> SummaryTable:
    """OS runtime calls (event class 27: the calls) grouped by function name."""
    return time_rows(call_groups(trace, "osrt"), "osrt_sum")
