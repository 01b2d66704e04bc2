"""``nvtx_sum``: push/pop and start/end NVTX ranges grouped by name and style."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import _NVTX_STYLES, COLUMNS, STAT_COLS, SUM_COLS
from engine.analysis.nsys.stats.group_stats import segment_stats, time_rows
from engine.analysis.nsys.stats.named_durations import Ranges, nvtx_ranges
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.table import SummaryTable

if TYPE_CHECKING:
    from engine.reports.base import Trace


@report("nvtx_sum", title="NVTX Range Summary: push/pop and start/end ranges grouped by name and style",
        columns=(*SUM_COLS, "Instances", *STAT_COLS, "Style", "Range"), needs=("nvtx",), shares_reads=True)
def nvtx_sum(trace: Trace, csv: bool) -> SummaryTable:
    """Per (range name, style) of the ranges that ended: durations' statistics."""
    return range_table(nvtx_ranges(trace))


def range_table(ranges: Ranges) -> SummaryTable:
    """The summary of ranges given as (eventType, name, durations), keys sorted by (name, style)."""
    import numpy as np

    keys = sorted({(name, _NVTX_STYLES[etype]) for etype, name, _ in ranges})
    if not keys:
        return SummaryTable("nvtx_sum", [[] for _ in COLUMNS["nvtx_sum"]])
    rank = {k: i for i, k in enumerate(keys)}
    codes = np.concatenate([np.full(len(d), rank[(name, _NVTX_STYLES[e])], dtype=np.int64)
                            for e, name, d in ranges])
    values = np.concatenate([d for _, _, d in ranges])
    stats = segment_stats(codes, values, len(keys))
    groups = [((style, name), st) for (name, style), st in zip(keys, stats, strict=True) if st is not None]
    return time_rows(groups, "nvtx_sum")
