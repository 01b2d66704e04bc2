"""``cuda_api_trace``: one row per CUDA runtime and driver call, by start time.

One set of rows (:func:`api_trace_rows`, numpy columns through ``trace.columns`` on any trace: an
nsys export's columnar cache or a Kineto trace's table) gives both outputs: the CSV rendered a chunk
of rows at a time without pandas (:func:`api_trace_csv`), and the table of the other formats and
the window (:meth:`ApiTraceRows.to_frame`). Same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.stats.catalog import _API_SUFFIX, COLUMNS
from engine.analysis.nsys.stats.column_source import TraceColumnSource
from engine.analysis.nsys.stats.csv_columns import (
    _CHUNK,
    IntColumn,
    TextColumn,
    columns_frame,
    streamed_csv,
)
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.rendered import RenderedReport
from engine.analysis.nsys.stats.table import empty_frame
from engine.reports.nsys.stats_reads import thread_names
from engine.reports.trace_columns import NULL
from engine.system.arrays import distinct

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace

_READ = ["start", "end", "nameId", "returnValue", "correlationId", "pid", "tid", "globalTid"]


@report(
    "cuda_api_trace",
    title="CUDA API Trace: one row per runtime and driver call, by start time",
    columns=(
        "Start (ns)", "Duration (ns)", "Name", "Result", "CorrID", "Pid", "Tid", "T-Pri", "Thread Name",
    ),
    needs=("api",),
)
def cuda_api_trace(trace: Trace, csv: bool) -> Any:
    """The rendered CSV where asked for, else the table (both from :func:`api_trace_rows`)."""
    rows = api_trace_rows(trace)
    if rows is None:
        return empty_frame("cuda_api_trace")
    if csv and not any("\n" in t for t in rows.names):
        return rows.csv()
    return rows.to_frame()  # a name holding a newline: the csv module writes the frame


@dataclass
class ApiTraceRows:
    """The report's rows: the calls' columns (``order`` puts them in print order) and their labels.

    ``names`` are the base names (no ``_vNNNN``) of the name ids ``name_ids``; ``thread`` indexes
    ``thread_labels`` per distinct globalTid ``gtids`` (-1: none); :data:`NULL` is an empty field.
    """

    cols: TraceColumnSource
    order: npt.NDArray[np.intp]
    name_ids: npt.NDArray[np.int64]
    names: list[str]
    gtids: npt.NDArray[np.int64]
    pri: npt.NDArray[np.int64]
    thread: npt.NDArray[np.int64]
    thread_labels: list[str]

    def __len__(self) -> int:
        return len(self.order)

    def _columns(self, idx: npt.NDArray[np.intp]) -> list[IntColumn | TextColumn]:
        c = self.cols.column
        start, end = np.asarray(c("start")[idx]), np.asarray(c("end")[idx])
        gt = np.asarray(c("globalTid")[idx])
        nid = np.asarray(c("nameId")[idx])
        n = len(self.gtids)
        g = np.minimum(np.searchsorted(self.gtids, gt), max(n - 1, 0))
        known = (gt != NULL) & (self.gtids[g] == gt) if n else np.zeros(len(gt), dtype=bool)
        g = np.where(known, g, n)  # the padded last entry: no thread name, no priority
        pri = np.append(self.pri, NULL)[g]
        out: list[IntColumn | TextColumn] = [
            IntColumn(start, start == NULL),
            IntColumn(end - start, (start == NULL) | (end == NULL)),
            TextColumn(np.where(nid == NULL, -1, np.searchsorted(self.name_ids, nid)), self.names),
        ]
        for name in ("returnValue", "correlationId", "pid", "tid"):
            v = np.asarray(c(name)[idx])
            out.append(IntColumn(v, v == NULL))
        out += [IntColumn(pri, pri == NULL), TextColumn(np.append(self.thread, -1)[g], self.thread_labels)]
        return out

    def csv(self) -> RenderedReport:
        """The CSV, ``_CHUNK`` rows at a time."""
        return streamed_csv("cuda_api_trace", len(self.order),
                            lambda lo, hi: self._columns(self.order[lo:hi]), _CHUNK)

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (numbers Int64, empty fields missing)."""
        return columns_frame(self._columns(self.order), COLUMNS["cuda_api_trace"])


def api_trace_rows(trace: Trace) -> ApiTraceRows | None:
    """The calls' rows (see :class:`ApiTraceRows`); None where the trace has none."""
    if not trace.has("api"):
        return None
    cols = TraceColumnSource(trace, "api", _READ)
    if not cols.rows:
        return None
    order = np.argsort(cols.column("start"), kind="stable")
    strings = trace.strings()
    name_id = cols.column("nameId")
    name_ids = distinct(name_id)
    named = name_ids[name_ids != NULL]
    names = [_API_SUFFIX.sub("", str(strings.get(int(i), f"<unknown {int(i)}>"))) for i in named.tolist()]
    del name_id
    gtid = cols.column("globalTid")
    gtids = distinct(gtid[gtid != NULL]).astype(np.int64)
    prio, tname = thread_info(trace)
    gl = gtids.tolist()
    pri = np.array([int(str(prio[g])) if prio.get(g) is not None else NULL for g in gl], np.int64)
    thread_labels = sorted({str(tname[g]) for g in gl if tname.get(g) is not None})
    where = {t: i for i, t in enumerate(thread_labels)}
    thread = np.array([where[str(tname[g])] if tname.get(g) is not None else -1 for g in gl], dtype=np.int64)
    return ApiTraceRows(cols, order, named, names, gtids, pri, thread, thread_labels)


def api_trace_csv(trace: Trace) -> RenderedReport | None:
    """``cuda_api_trace`` as CSV chunks (None: no calls)."""
    rows = api_trace_rows(trace)
    return rows.csv() if rows is not None else None


def thread_info(trace: Trace) -> tuple[dict[int, object], dict[int, object]]:
    """Each thread's (globalTid's) priority and name: the first row of the export's thread names."""
    prio: dict[int, object] = {}
    tname: dict[int, object] = {}
    for g, p, n in thread_names(trace):
        if g is not None and int(str(g)) not in prio:
            prio[int(str(g))], tname[int(str(g))] = p, n
    return prio, tname
