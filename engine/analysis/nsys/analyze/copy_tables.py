"""The copy rules' tables: GPU copies and memsets joined with their runtime calls, in nsys's columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

from engine.analysis.nsys.analyze import copy_calls
from engine.analysis.nsys.analyze.apicalls import api_calls
from engine.analysis.nsys.analyze.common import (
    _PAGEABLE,
    _green,
    _in_window,
    _int_col,
    _limit,
    _mb,
    _time_window,
    _with_api,
)


def copy_table(merged: pd.DataFrame, columns: list[str], rows: int) -> pd.DataFrame:
    """The rule's table of joined copies (or memsets): nsys's columns, longest first, ``rows`` of them."""
    import pandas as pd

    table = pd.DataFrame({
        "Duration (ns)": _int_col(merged["end"]) - _int_col(merged["start"]),
        "Start (ns)": _int_col(merged["start"]),
    })
    if "Src Kind" in columns:
        table["Src Kind"] = merged["srcKindName"].astype("object")
        table["Dst Kind"] = merged["dstKindName"].astype("object")
    else:
        table["Memory Kind"] = merged["memKindName"].astype("object")
    table["Bytes (MB)"] = _mb(merged["bytes"])
    table["PID"] = _int_col(merged["pid"])
    table["Device ID"] = _int_col(merged["deviceId"])
    table["Context ID"] = _int_col(merged["contextId"])
    table["Green Context ID"] = _green(merged["greenContextId"])
    table["Stream ID"] = _int_col(merged["streamId"])
    table["API Name"] = merged["apiName"].astype("object")
    # nsys keeps the join's order (API calls in table order) for equal durations.
    table = table.sort_values("Duration (ns)", ascending=False, kind="stable")
    return _limit(table, rows).reset_index(drop=True)


def memory_call(name: str) -> bool:
    """cudaMemcpy* and cudaMemset* (case-insensitive, as SQLite's LIKE): what the copy rules keep."""
    return name.lower().startswith(("cudamemcpy", "cudamemset"))


def memcpy_calls(trace: Trace, opts: dict[str, Any]) -> pd.DataFrame:
    """The copies in the rule's time window joined with their cudaMemcpy*/cudaMemset* calls."""
    import pandas as pd

    memcpy = _in_window(trace.table("memcpy"), _time_window(trace, opts))
    if memcpy.empty:
        return memcpy.assign(apiName=pd.Series(dtype="object"))
    return _with_api(memcpy, api_calls(trace, memory_call))


def _match_names(names: pd.Series, test: Any) -> pd.Series:
    """Apply a string test to the few distinct names, not to every row (800k calls stay fast)."""
    import pandas as pd

    hits = [n for n in pd.unique(names.dropna()) if test(str(n))]
    return names.isin(hits)


def names_like(names: pd.Series, prefix: str) -> pd.Series:
    """SQL-like ``prefix%``, case-insensitive as SQLite's LIKE."""
    low = prefix.lower()
    return _match_names(names, lambda n: n.lower().startswith(low))


def has_async(names: pd.Series) -> pd.Series:
    """Names with "async" in them (case-insensitive)."""
    return _match_names(names, lambda n: "async" in n.lower())


def found_rows(m: pd.DataFrame) -> copy_calls.Found:
    """The general path's joined rows as the fast path reports them."""
    pageable = 0
    if "srcKind" in m.columns and not m.empty:
        pageable = int(((_int_col(m["srcKind"]) == _PAGEABLE) | (_int_col(m["dstKind"]) == _PAGEABLE))
                       .fillna(False).sum())
    return copy_calls.Found(m, len(m), float((m["end"] - m["start"]).sum()) if len(m) else 0.0,
                            float(m["bytes"].sum()) if len(m) else 0.0, pageable)
