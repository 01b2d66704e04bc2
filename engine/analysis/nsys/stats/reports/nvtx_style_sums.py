"""``nvtx_pushpop_sum`` and ``nvtx_startend_sum``: the NVTX ranges of one style grouped by name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.group_stats import grouped, time_rows
from engine.analysis.nsys.stats.nvtx_ranges import PUSHPOP, STARTEND
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.table import SummaryTable
from engine.analysis.nsys.stats.trace_tables import (
    durations,
    usable,
)
from engine.reports.nsys.columns import has_null
from engine.reports.nsys.nvtx_text_codes import name_exprs, range_names
from engine.reports.nsys.schema import DURATION
from engine.reports.nsys.schema import NVTX as _NVTX
from engine.reports.nsys.stats_reads import export_of, has_nvtx, nvtx_where

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace


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
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if isinstance(trace, NsysSqliteTrace):
        table = style_sum_table(trace, "nvtx_pushpop_sum")
        if table is not None:
            return table
    return general_style_sum(trace, "nvtx_pushpop_sum")


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
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if isinstance(trace, NsysSqliteTrace):
        table = style_sum_table(trace, "nvtx_startend_sum")
        if table is not None:
            return table
    return general_style_sum(trace, "nvtx_startend_sum")


_STYLE_WHERE = {"nvtx_pushpop_sum": nvtx_where(PUSHPOP), "nvtx_startend_sum": nvtx_where(STARTEND)}


def style_sum_table(trace: NsysSqliteTrace, report: str) -> SummaryTable | None:
    """``nvtx_pushpop_sum`` / ``nvtx_startend_sum`` without pandas (None: the general path).

    The ranges of that style that ended, grouped by ``domain:text`` name: numpy segment
    statistics of their durations, most total time first, ties by name.
    """
    import sqlite3


    if not trace.has_sqlite_table(_NVTX):
        return None
    if not {"start", "end", "eventType"} <= set(trace.column_names(_NVTX)):
        return None
    where = _STYLE_WHERE[report] + ' AND "end" IS NOT NULL'
    try:
        extra, texts = name_exprs(trace, where)
        cols = trace.column_store().read_where(_NVTX, {"duration": DURATION, **extra}, where)
        if has_null(cols["duration"]):
            return None
        # domains named as the nvtx table names them (textId string first)
        named = (range_names(trace, where, cols, texts, domain_id_first=True)
                 if len(cols["duration"]) else None)
    except sqlite3.Error:
        return None
    if named is None:
        return None
    return time_rows(grouped(named[1], named[0], cols["duration"]), report)


def _style_ranges(trace: Trace, styles: tuple[int, ...]) -> pd.DataFrame | None:
    """Closed NVTX ranges of the given event types with their ``domain:text`` label."""
    import pandas as pd

    export = export_of(trace)
    if export is not None and not has_nvtx(export, styles, ended=True):
        return None  # none of these styles: skip loading every event
    nvtx = usable(trace, "nvtx")
    if nvtx is None:
        return None
    etype = pd.to_numeric(nvtx["eventType"])
    ranges = nvtx[etype.isin(list(styles)) & nvtx["end"].notna()]
    if ranges.empty:
        return None
    ranges = ranges.assign(label=ranges["domain"].fillna("").astype(str) + ":"
                           + ranges["text"].fillna("").astype(str))
    return ranges


def general_style_sum(trace: Trace, report: str) -> SummaryTable:
    """The report from the trace's NVTX table (other traces; exports with NULLs or odd names).

    The same grouping as :func:`style_sum_table` (numpy segment statistics by name), over the
    labels and durations of the trace's table.
    """
    import numpy as np
    import pandas as pd

    ranges = _style_ranges(trace, PUSHPOP if report == "nvtx_pushpop_sum" else STARTEND)
    if ranges is None:
        return time_rows([], report)
    codes, labels = pd.factorize(ranges["label"].to_numpy())
    return time_rows(grouped([str(x) for x in labels], codes.astype(np.int64), durations(ranges).to_numpy()),
                     report)
