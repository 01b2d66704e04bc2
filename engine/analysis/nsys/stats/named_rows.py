"""Rows of an nsys export's own tables (OS runtime, OpenMP, unified memory, NVTX) as DataFrames."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
