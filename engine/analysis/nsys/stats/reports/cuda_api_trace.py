"""``cuda_api_trace``: one row per CUDA runtime and driver call, by start time.

On an nsys export the CSV is rendered without pandas, a chunk of rows at a time
(:func:`api_trace_csv`); the table (window, JSON, other traces) is :func:`api_trace_frame`. Same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import _API_SUFFIX, COLUMNS
from engine.analysis.nsys.stats.column_source import ColumnSource
from engine.analysis.nsys.stats.csv_columns import _CHUNK, FixedColumn, IntColumn, TextColumn, _quoted, _rows
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.rendered import RenderedReport
from engine.analysis.nsys.stats.trace_tables import (
    api_names,
    durations,
    empty_frame,
    usable,
)
from engine.reports.nsys.columns import has_null
from engine.reports.nsys.schema import NULL, RUNTIME
from engine.reports.nsys.stats_reads import thread_names

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace


@report(
    "cuda_api_trace",
    title="CUDA API Trace: one row per runtime and driver call, by start time",
    columns=(
        "Start (ns)", "Duration (ns)", "Name", "Result", "CorrID", "Pid", "Tid", "T-Pri", "Thread Name",
    ),
    needs=("api",),
)
def cuda_api_trace(trace: Trace, csv: bool) -> Any:
    """The rendered CSV where asked for on an export, else the table."""
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if csv and isinstance(trace, NsysSqliteTrace):
        table = api_trace_csv(trace)
        if table is not None:
            return table
    return api_trace_frame(trace)


def api_trace_csv(trace: NsysSqliteTrace) -> RenderedReport | None:
    """``cuda_api_trace`` as CSV chunks, or None where the general path must handle it (NULLs).

    The same bytes as :func:`api_trace_frame` + ``to_csv``: rows by
    start (stable), names without their ``_vNNNN`` suffix, the thread's priority and name from
    thread names (their first row per thread). Only the row order is held; 69M calls of a 10M-kernel
    report are read two columns per pass and formatted a chunk at a time.
    """
    import sqlite3

    import numpy as np


    table = RUNTIME
    if not trace.has_sqlite_table(table):
        return None
    have = set(trace.column_names(table))
    need = ("start", "end", "nameId", "correlationId", "globalTid")
    if not set(need) <= have:
        return None
    exprs = {c: f'"{c}"' for c in need}
    exprs["returnValue"] = '"returnValue"' if "returnValue" in have else "NULL"
    try:
        src = ColumnSource(trace, table, exprs, per_pass=2)
    except sqlite3.Error:
        return None
    if not src.rows:
        return RenderedReport("cuda_api_trace", 0, lambda: iter(()))
    if any(has_null(src.column(c)) for c in ("start", "end", "nameId", "globalTid")):
        return None
    order = np.argsort(src.column("start"), kind="stable")
    strings = trace.strings()
    name_ids = np.unique(src.column("nameId"))
    names = [_API_SUFFIX.sub("", str(strings.get(int(i), f"<unknown {int(i)}>")))
             for i in name_ids.tolist()]
    gtids = np.unique(src.column("globalTid"))
    prio, tname = thread_info(trace)
    gl = gtids.tolist()
    pri_vals = np.array([int(str(prio[g])) if prio.get(g) is not None else 0 for g in gl], np.int64)
    pri_null = np.array([prio.get(g) is None for g in gl], dtype=bool)
    thread_labels = sorted({str(tname[g]) for g in gl if tname.get(g) is not None})
    thread_code = np.array([thread_labels.index(str(tname[g])) if tname.get(g) is not None else -1
                            for g in gl], dtype=np.int64)
    if any("\n" in t for t in names):
        return None  # a text column before the last one holds a newline: the general path

    def chunks() -> Iterator[bytes]:

        yield ",".join(_quoted(h).decode() for h in COLUMNS["cuda_api_trace"]).encode() + b"\n"
        for lo in range(0, len(order), _CHUNK):
            idx = order[lo:lo + _CHUNK]
            start = np.asarray(src.column("start")[idx])
            gtid = np.asarray(src.column("globalTid")[idx])
            g = np.searchsorted(gtids, gtid)
            ret = np.asarray(src.column("returnValue")[idx])
            corr = np.asarray(src.column("correlationId")[idx])
            cols: list[IntColumn | FixedColumn | TextColumn] = [
                IntColumn(start), IntColumn(np.asarray(src.column("end")[idx]) - start),
                TextColumn(np.searchsorted(name_ids, np.asarray(src.column("nameId")[idx])), names),
                IntColumn(ret, ret == NULL), IntColumn(corr, corr == NULL),
                IntColumn((gtid >> 24) & 0xFFFFFF), IntColumn(gtid & 0xFFFFFF),
                IntColumn(pri_vals[g], pri_null[g]),
                TextColumn(thread_code[g], thread_labels),
            ]
            yield _rows(cols[:-1], 0, len(idx), cols[-1])  # type: ignore[arg-type]

    return RenderedReport("cuda_api_trace", len(order), chunks)


def api_trace_frame(trace: Trace) -> pd.DataFrame:
    """One row per CUDA API call, by start time, with its thread's name and priority."""
    import pandas as pd

    api = usable(trace, "api", ["start", "end", "name", "returnValue", "correlationId", "pid",
                                 "tid", "globalTid"])
    if api is None:
        return empty_frame("cuda_api_trace")
    prio, tname = thread_info(trace)
    gtid = pd.to_numeric(api["globalTid"], errors="coerce")
    out = pd.DataFrame({
        "Start (ns)": pd.to_numeric(api["start"]).astype("int64"),
        "Duration (ns)": durations(api),
        "Name": api_names(api),
        "Result": pd.to_numeric(api["returnValue"], errors="coerce").astype("Int64"),
        "CorrID": pd.to_numeric(api["correlationId"], errors="coerce").astype("Int64"),
        "Pid": pd.to_numeric(api["pid"], errors="coerce").astype("Int64"),
        "Tid": pd.to_numeric(api["tid"], errors="coerce").astype("Int64"),
        "T-Pri": pd.to_numeric(gtid.map(prio), errors="coerce").astype("Int64"),
        "Thread Name": gtid.map(tname).astype("object"),
    })
    return out.sort_values("Start (ns)", kind="stable").reset_index(drop=True)


def thread_info(trace: Trace) -> tuple[dict[int, object], dict[int, object]]:
    """Each thread's (globalTid's) priority and name: the first row of the export's thread names."""
    prio: dict[int, object] = {}
    tname: dict[int, object] = {}
    for g, p, n in thread_names(trace):
        if g is not None and int(str(g)) not in prio:
            prio[int(str(g))], tname[int(str(g))] = p, n
    return prio, tname
