"""Rows of an nsys export's own tables (OS runtime, OpenMP, unified memory, NVTX) as DataFrames."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.trace_tables import durations, empty_frame, group_stats, time_summary

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


def sql_rows(trace: Trace, table: str, sql: str) -> pd.DataFrame | None:
    """Run ``sql`` over an nsys export that has ``table`` with rows; None otherwise."""
    has = getattr(trace, "has_sqlite_table", None)
    query = getattr(trace, "query", None)
    if has is None or query is None or not has(table):
        return None
    df: pd.DataFrame = query(sql)
    return None if df.empty else df


def named_summary(trace: Trace, table: str, count_col: str, report: str, where: str = "") -> pd.DataFrame:
    """Durations of ``table`` grouped by their nameId's string (osrt_sum, openmp_sum)."""
    import pandas as pd

    df = sql_rows(trace, table, f'SELECT t."start", t."end", s.value AS name FROM {table} AS t '
                            f"LEFT JOIN StringIds AS s ON s.id = t.nameId {where}")
    if df is None:
        return empty_frame(report)
    stats = group_stats(pd.DataFrame({"name": df["name"].fillna("").astype(str)}), durations(df))
    return time_summary(stats, count_col, {"Name": "name"})
