"""``cuda_gpu_trace``: one row per kernel, memcpy and memset, by start time.

One set of rows (:func:`gpu_trace_rows`: numpy columns through ``trace.columns`` on any trace, an
nsys export's columnar cache or a Kineto trace's tables) gives both outputs: the CSV, formatted by
:mod:`..csv_columns` a chunk of rows at a time (the text of a 10M-kernel report is streamed to its
file in bounded memory; only the row order is held), and the table of the other formats and the
window (:meth:`GpuTraceRows.to_frame`, from the same columns). Same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.column_source import TraceColumnSource, lookup
from engine.analysis.nsys.stats.csv_columns import (
    _CHUNK,
    FixedColumn,
    IntColumn,
    TextColumn,
    columns_frame,
    streamed_csv,
)
from engine.analysis.nsys.stats.kind_labels import kind_labels
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.rendered import RenderedReport
from engine.analysis.nsys.stats.table import empty_frame
from engine.reports.trace_columns import NULL
from engine.system.arrays import distinct

if TYPE_CHECKING:

    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace

_COMMON = ("start", "end", "correlationId", "deviceId", "contextId", "greenContextId", "streamId")
_KERNEL = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
           "staticSharedMemory", "dynamicSharedMemory")
#: each table's columns read (kernels: their name's id)
_TABLES = {
    "kernels": (*_COMMON, *_KERNEL, "nameId"),
    "memcpy": (*_COMMON, "bytes", "copyKind", "srcKind", "dstKind"),
    "memset": (*_COMMON, "bytes", "memKind"),
}


@report(
    "cuda_gpu_trace",
    title="CUDA GPU Trace: one row per kernel, memcpy and memset, by start time",
    # nsys 2025.3 columns. The Debian nsys 2022.4 `gputrace` differs: no GreenCtx column,
    # "Throughput (MBps)", memcpy names "[CUDA memcpy HtoD]" instead of "...Host-to-Device]", and its
    # throughput formula is the same as 2025.3's (bytes/1e6 * (1e9 // duration)).
    columns=(
        "Start (ns)", "Duration (ns)", "CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ", "Reg/Trd",
        "StcSMem (MB)", "DymSMem (MB)", "Bytes (MB)", "Throughput (MB/s)", "SrcMemKd", "DstMemKd", "Device",
        "Ctx", "GreenCtx", "Strm", "Name",
    ),
    needs=("kernels", "memcpy", "memset"),
)
def cuda_gpu_trace(trace: Trace, csv: bool) -> Any:
    """The rendered CSV where asked for, else the table (both from :func:`gpu_trace_rows`)."""
    rows = gpu_trace_rows(trace)
    if rows is None:
        return empty_frame("cuda_gpu_trace")
    if csv and not any("\n" in t for t in [*rows.kind_names, *rows.dev_labels]):
        return rows.csv()
    return rows.to_frame()  # a text column before the last holds a newline: the csv module writes it


@dataclass
class GpuTraceRows:
    """The report's rows: each table's columns, the print order over their concatenation, labels."""

    srcs: dict[str, TraceColumnSource]
    offsets: npt.NDArray[np.int64]
    order: npt.NDArray[np.intp]
    labels: list[str]
    name_lut: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]
    kind_ids: list[int]
    kind_names: list[str]
    dev_arr: npt.NDArray[np.int64]
    dev_labels: list[str]

    def __len__(self) -> int:
        return len(self.order)

    def _columns(self, idx: npt.NDArray[np.intp]) -> list[IntColumn | FixedColumn | TextColumn]:
        return _chunk(self.srcs, list(self.srcs), self.offsets, idx, self.labels, self.name_lut,
                      self.kind_ids, self.kind_names, self.dev_arr, self.dev_labels)

    def csv(self) -> RenderedReport:
        """The CSV, ``_CHUNK`` rows at a time."""
        return streamed_csv("cuda_gpu_trace", len(self.order),
                            lambda lo, hi: self._columns(self.order[lo:hi]), _CHUNK)

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (numbers numeric, empty fields missing)."""
        return columns_frame(self._columns(self.order), COLUMNS["cuda_gpu_trace"])


def gpu_trace_rows(trace: Trace) -> GpuTraceRows | None:
    """The kernels', copies' and memsets' rows by start, then kernels, copies, memsets, then table order.

    None where the trace has none of them.
    """
    srcs = {}
    for name, cols in _TABLES.items():
        if trace.has(name):
            src = TraceColumnSource(trace, name, cols)
            if src.rows:
                srcs[name] = src
    if not srcs:
        return None
    names = list(srcs)
    offsets = np.cumsum([0] + [srcs[n].rows for n in names])
    start_all = np.concatenate([np.asarray(srcs[n].column("start")) for n in names])
    kinds_all = np.concatenate([np.full(srcs[n].rows, ("kernels", "memcpy", "memset").index(n),
                                        np.int8) for n in names])
    order = np.lexsort((kinds_all, start_all))
    del start_all, kinds_all

    # Labels, each over the distinct values of a whole column (one pass, before the chunks).
    labels: list[str] = []
    name_lut: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    if "kernels" in srcs:
        strings = trace.strings()
        uniq = distinct(srcs["kernels"].column("nameId"))
        uniq = uniq[uniq != NULL]
        name_lut["kernels"] = (uniq, np.arange(len(uniq), dtype=np.int64))
        labels += [str(strings.get(int(i), "")) for i in uniq.tolist()]
    if "memcpy" in srcs:
        copy_labels = kind_labels(trace, "copy_kind_labels", "memcpy", [("copyKind", "operation")])
        uniq = distinct(srcs["memcpy"].column("copyKind"))
        name_lut["memcpy"] = (uniq, np.arange(len(uniq), dtype=np.int64) + len(labels))
        labels += [f"[CUDA memcpy {copy_labels.get(int(k), 'Unknown')}]" for k in uniq.tolist()]
    if "memset" in srcs:
        name_lut["memset"] = (np.zeros(1, np.int64), np.full(1, len(labels), np.int64))
        labels.append("[CUDA memset]")
    mem_labels = kind_labels(trace, "memory_kind_labels", "memcpy",
                         [("srcKind", "srcKindName"), ("dstKind", "dstKindName")])
    mem_labels = {**kind_labels(trace, "memory_kind_labels", "memset", [("memKind", "memKindName")]),
                  **mem_labels}
    kind_ids = sorted(mem_labels)
    gpus = _gpu_names(trace)
    dev_ids = sorted(set().union(*(distinct(s.column("deviceId")).tolist() for s in srcs.values()))
                     - {NULL})
    return GpuTraceRows(srcs, offsets, order, labels, name_lut, kind_ids, [mem_labels[k] for k in kind_ids],
                        np.array(dev_ids, dtype=np.int64),
                        [f"{gpus[d]} ({d})" if d in gpus else f"GPU {d}" for d in dev_ids])


def gpu_trace_csv(trace: Trace) -> RenderedReport | None:
    """``cuda_gpu_trace`` as CSV chunks (None: no GPU operation)."""
    rows = gpu_trace_rows(trace)
    return rows.csv() if rows is not None else None


def _gpu_names(trace: Trace) -> dict[int, str]:
    """GPU id -> its name, from the trace's GPU descriptions (empty where there are none)."""
    from engine.reports.nsys.stats_reads import export_of, gpu_names

    export = export_of(trace)
    if export is not None:
        return gpu_names(export)  # no pandas on an export
    if not trace.has("gpus"):
        return {}
    gpus = trace.table("gpus", ["id", "name"])
    return {int(i): str(n) for i, n in zip(gpus["id"].tolist(), gpus["name"].tolist(), strict=True)
            if i is not None and n is not None and i == i and n == n}


def _chunk(srcs: dict[str, TraceColumnSource], names: list[str], offsets: npt.NDArray[np.int64],
           idx: npt.NDArray[np.intp], labels: list[str],
           name_lut: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
           kind_ids: list[int], kind_names: list[str], dev_arr: npt.NDArray[np.int64],
           dev_labels: list[str]) -> list[IntColumn | FixedColumn | TextColumn]:
    """One chunk of rows (``idx``: positions in the tables' concatenation) as columns."""
    n = len(idx)
    which = np.searchsorted(offsets, idx, side="right") - 1
    sel = {name: (which == i, idx[which == i] - offsets[i]) for i, name in enumerate(names)}

    def col(name: str) -> npt.NDArray[np.int64]:
        out = np.full(n, NULL, np.int64)
        for t, (mask, rows) in sel.items():
            if name in srcs[t].exprs and mask.any():
                arr = srcs[t].column(name)
                out[mask] = arr[rows]
                del arr
        return out

    def ints(name: str, zero_null: bool = False) -> IntColumn:
        v = col(name)
        null = v == NULL
        if zero_null:
            null |= v == 0
        return IntColumn(v, null if null.any() else None)

    def mb(v: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return np.where(v == NULL, np.nan, v.astype(np.float64) / 1e6)

    start, end = col("start"), col("end")
    no_dur = (start == NULL) | (end == NULL)
    dur = np.where(no_dur, NULL, end - start)
    nbytes = mb(col("bytes"))
    dur_f = dur.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        throughput = np.where(dur_f > 0, nbytes * (1e9 // dur_f), np.nan)
    name_codes = np.full(n, -1, np.int64)
    key = {"kernels": "nameId", "memcpy": "copyKind", "memset": None}
    for t, (mask, _) in sel.items():
        if mask.any():
            uniq, codes = name_lut[t]
            k = key[t]
            vals = col(k)[mask] if k else np.zeros(int(mask.sum()), np.int64)
            name_codes[mask] = lookup(uniq, codes, vals)
    kind_arr = np.array(kind_ids, dtype=np.int64)
    kind_codes = np.arange(len(kind_ids), dtype=np.int64)
    src_v = col("srcKind")
    if "memset" in sel:
        src_v = np.where(sel["memset"][0], col("memKind"), src_v)
    kern = sel["kernels"][0] if "kernels" in sel else np.zeros(n, bool)
    cols: list[IntColumn | FixedColumn | TextColumn] = [
        IntColumn(start, start == NULL), IntColumn(dur, no_dur), ints("correlationId"),
        *(ints(c) for c in ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
                            "registersPerThread")),
        FixedColumn(np.where(kern, mb(col("staticSharedMemory")), np.nan), 3),
        FixedColumn(np.where(kern, mb(col("dynamicSharedMemory")), np.nan), 3),
        FixedColumn(nbytes, 3), FixedColumn(throughput, 3),
        TextColumn(lookup(kind_arr, kind_codes, src_v), kind_names),
        TextColumn(lookup(kind_arr, kind_codes, col("dstKind")), kind_names),
        TextColumn(lookup(dev_arr, np.arange(len(dev_arr), dtype=np.int64), col("deviceId")),
                   dev_labels),
        ints("contextId", zero_null=True), ints("greenContextId", zero_null=True),
        ints("streamId", zero_null=True),
        TextColumn(name_codes, labels),
    ]
    return cols
