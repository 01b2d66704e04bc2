"""The trace's tables as the DataFrame-based reports read them (any trace: nsys export or Kineto).

A table is usable when it was captured and has rows; durations are ``end - start``; groups are
summarised as nsys summarises them (total, count, mean, median, min, max, sample stddev), sorted by
key so that ties in the total-descending sort keep name order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import _API_SUFFIX
from engine.analysis.nsys.stats.table import empty_frame

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

__all__ = ["api_names", "durations", "empty_frame", "global_pid", "group_stats", "sort_desc", "time_summary",
           "usable", "xyz"]


def usable(trace: Trace, table: str, columns: list[str] | None = None) -> pd.DataFrame | None:
    """Return the table (only ``columns`` if given) if it was captured and has rows, else None."""
    df = trace.table(table, columns)
    if table in trace.missing or df.empty:
        return None
    return df


def durations(df: pd.DataFrame) -> pd.Series:
    """``end - start`` of each row, as int64."""
    import pandas as pd

    dur: pd.Series = pd.to_numeric(df["end"]) - pd.to_numeric(df["start"])
    return dur.astype("int64")


def group_stats(keys: pd.DataFrame, values: pd.Series) -> pd.DataFrame:
    """Per-group total, count, mean, median, min, max and sample stddev of ``values``.

    Groups come out sorted by key (ascending), which then breaks ties in the total-descending sort.
    """
    frame = keys.copy()
    frame["_v"] = values.to_numpy()
    g = frame.groupby(list(keys.columns), sort=True, dropna=False)["_v"]
    out = g.agg(["sum", "count", "median", "min", "max", "std"])
    out["mean"] = out["sum"] / out["count"]
    out["std"] = out["std"].fillna(0.0)
    out = out.reset_index()
    out["count"] = out["count"].astype("int64")
    result: pd.DataFrame = out
    return result


def time_summary(stats: pd.DataFrame, count_col: str, label_cols: dict[str, str]) -> pd.DataFrame:
    """Shape ``group_stats`` output as a time summary (Time (%), Total Time, ..., labels)."""
    import pandas as pd

    total = stats["sum"].astype("int64")
    grand = float(total.sum())
    out = pd.DataFrame({
        "Time (%)": (total / grand * 100.0) if grand else total * 0.0,
        "Total Time (ns)": total,
        count_col: stats["count"],
        "Avg (ns)": stats["mean"].astype("float64"),
        "Med (ns)": stats["median"].astype("float64"),
        "Min (ns)": stats["min"].astype("int64"),
        "Max (ns)": stats["max"].astype("int64"),
        "StdDev (ns)": stats["std"].astype("float64"),
    })
    for col, src in label_cols.items():
        out[col] = stats[src].to_numpy()
    return sort_desc(out, "Total Time (ns)")


def sort_desc(df: pd.DataFrame, col: str) -> pd.DataFrame:
    """Rows by ``col``, descending; a stable sort."""
    # Stable, so equal totals keep the key order the groupby produced.
    return df.sort_values(col, ascending=False, kind="mergesort").reset_index(drop=True)


def api_names(api: pd.DataFrame) -> pd.Series:
    """API call names as nsys prints them: the 4-digit ``_vNNNN`` CUDA-version suffix dropped."""
    names = api["name"].astype(str)
    uniq = names.unique()
    mapping = {n: _API_SUFFIX.sub("", n) for n in uniq}
    result: pd.Series = names.map(mapping)
    return result


def global_pid(df: pd.DataFrame, gid_col: str) -> pd.Series | None:
    """Return nsys globalPid (host and pid bits) from a globalPid/globalTid column, or None."""
    import pandas as pd

    gid = pd.to_numeric(df[gid_col], errors="coerce")
    if df.empty or gid.isna().any():
        return None
    key: pd.Series = (gid // (1 << 24)).astype("int64")  # drop the tid bits of a globalTid
    return key


def xyz(df: pd.DataFrame, prefix: str) -> pd.Series:
    """'%4d %4d %4d' of a kernel's grid or block dimensions, as nsys prints GridXYZ/BlockXYZ."""
    import pandas as pd

    parts = [pd.to_numeric(df[f"{prefix}{a}"]).fillna(0).astype("int64").astype(str).str.rjust(4)
             for a in "XYZ"]
    out: pd.Series = parts[0] + " " + parts[1] + " " + parts[2]
    return out
