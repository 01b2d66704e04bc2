"""``nvtx_pushpop_sum`` and ``nvtx_startend_sum``: the NVTX ranges of one style grouped by name.

One path on any trace (:func:`style_sum_table`): the ended ranges' durations through
``trace.columns`` (filters ``pushpop_ranges`` and ``startend_ranges``), their ``domain:text`` names
through ``trace.nvtx_names``, numpy segment statistics per name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.group_stats import grouped, time_rows
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.table import SummaryTable
from engine.reports.trace_columns import NULL

if TYPE_CHECKING:
    from engine.reports.base import Trace

#: report -> the ranges it groups (a named filter of ``trace.columns("nvtx", ...)``)
_STYLE_RANGES = {"nvtx_pushpop_sum": "pushpop_ranges", "nvtx_startend_sum": "startend_ranges"}


@report(
    "nvtx_pushpop_sum",
    title="NVTX Push/Pop Range Summary",
    columns=(
        "Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
        "StdDev (ns)", "Range",
    ),
    needs=("nvtx",),
)
def nvtx_pushpop_sum(trace: Trace, csv: bool) -> Any:
    """NVTX push/pop ranges grouped by name."""
    return style_sum_table(trace, "nvtx_pushpop_sum")


@report(
    "nvtx_startend_sum",
    title="NVTX Start/End Range Summary",
    columns=(
        "Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
        "StdDev (ns)", "Range",
    ),
    needs=("nvtx",),
)
def nvtx_startend_sum(trace: Trace, csv: bool) -> Any:
    """NVTX start/end ranges grouped by name."""
    return style_sum_table(trace, "nvtx_startend_sum")


def style_sum_table(trace: Trace, report: str) -> SummaryTable:
    """The ranges of the report's style that ended, grouped by ``domain:text`` name.

    Numpy segment statistics of their durations, most total time first, ties by name; a range
    without a start is left out.
    """
    import numpy as np

    where = _STYLE_RANGES[report]
    dur = np.asarray(trace.columns("nvtx", ["duration"], where=where)["duration"], dtype=np.int64)
    if not len(dur):
        return time_rows([], report)
    code, pairs = trace.nvtx_names(where)
    timed = dur != NULL
    names = [f"{'' if d is None else d}:{'' if x is None else x}" for d, x in pairs]
    return time_rows(grouped(names, code[timed], dur[timed]), report)
