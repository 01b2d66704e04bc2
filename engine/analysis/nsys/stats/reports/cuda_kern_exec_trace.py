"""``cuda_kern_exec_trace``: each kernel with its launch call (API, queue and kernel times), by API start.

One set of rows (:func:`kern_exec_rows`, numpy columns through ``trace.columns`` on any trace: an
nsys export's columnar cache or a Kineto trace's tables) gives both outputs: the CSV rendered a chunk
of rows at a time without pandas, and the table of the other formats and the window
(:meth:`KernExecRows.to_frame`). Same bytes. Only the calls that share a correlation id with a
kernel are read (the ``kernel_launches`` filter of ``api``: one call in seven on a launch-bound
report); each kernel is joined with its calls of the same process and correlation id by a binary
search over packed ``(process, correlationId)`` keys, sorted once; only the pairs and their order are
held (24 bytes a row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.stats.catalog import _API_SUFFIX, COLUMNS
from engine.analysis.nsys.stats.column_source import TraceColumnSource, factorize, lookup
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
from engine.reports.trace_columns import NULL
from engine.system.arrays import distinct

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace

_KERNEL = ["start", "end", "correlationId", "globalPid", "deviceId", "nameId", "gridShape", "blockShape"]
_CALL = ["start", "end", "correlationId", "globalTid", "pid", "tid", "nameId"]


@report(
    "cuda_kern_exec_trace",
    title="CUDA Kernel Launch & Exec Time Trace: each kernel with its launch call",
    columns=(
        "API Start (ns)", "API Dur (ns)", "Queue Start (ns)", "Queue Dur (ns)", "Kernel Start (ns)",
        "Kernel Dur (ns)", "Total Dur (ns)", "PID", "TID", "DevId", "API Function", "GridXYZ", "BlockXYZ",
        "Kernel Name",
    ),
    needs=("kernels", "api"),
)
def cuda_kern_exec_trace(trace: Trace, csv: bool) -> Any:
    """The rendered CSV where asked for, else the table (both from :func:`kern_exec_rows`)."""
    rows = kern_exec_rows(trace)
    if rows is None:
        return empty_frame("cuda_kern_exec_trace")
    if csv and not any("\n" in t for t in rows.call_names):
        return rows.csv()
    return rows.to_frame()  # a text column before the last holds a newline: the csv module writes it


@dataclass
class KernExecRows:
    """The report's rows: kernel row ``k_rows[i]`` with call row ``a_rows[i]``, in print order.

    Labels: the kernels' names (``name_ids`` -> ``names``), the calls' base names (``call_ids`` ->
    ``call_names``), the grid and block :class:`Shapes`.
    """

    ks: TraceColumnSource
    calls: TraceColumnSource
    k_rows: npt.NDArray[np.int64]
    a_rows: npt.NDArray[np.int64]
    name_ids: npt.NDArray[np.int64]
    names: list[str]
    call_ids: npt.NDArray[np.int64]
    call_names: list[str]
    grid: Shapes
    block: Shapes

    def __len__(self) -> int:
        return len(self.k_rows)

    def _columns(self, kr: npt.NDArray[np.int64], ar: npt.NDArray[np.int64]) -> list[IntColumn | TextColumn]:
        k, a = self.ks.column, self.calls.column
        a_start, a_end = np.asarray(a("start")[ar]), np.asarray(a("end")[ar])
        k_start, k_end = np.asarray(k("start")[kr]), np.asarray(k("end")[kr])
        pid, tid = np.asarray(a("pid")[ar]), np.asarray(a("tid")[ar])
        dev = np.asarray(k("deviceId")[kr])
        queue = k_start - a_end
        not_queued = queue < 0

        def text(ids: npt.NDArray[np.int64], uniq: npt.NDArray[np.int64], labels: list[str]) -> TextColumn:
            return TextColumn(lookup(uniq, np.arange(len(uniq), dtype=np.int64), ids), labels)

        return [
            IntColumn(a_start), IntColumn(a_end - a_start),
            IntColumn(a_end, not_queued), IntColumn(queue, not_queued),
            IntColumn(k_start), IntColumn(k_end - k_start),
            IntColumn(np.maximum(a_end, k_end) - a_start),
            IntColumn(pid, pid == NULL), IntColumn(tid, tid == NULL), IntColumn(dev, dev == NULL),
            text(np.asarray(a("nameId")[ar]), self.call_ids, self.call_names),
            self.grid.column(self.ks, kr), self.block.column(self.ks, kr),
            text(np.asarray(k("nameId")[kr]), self.name_ids, self.names),
        ]

    def csv(self) -> RenderedReport:
        """The CSV, ``_CHUNK`` rows at a time."""
        return streamed_csv("cuda_kern_exec_trace", len(self.k_rows),
                            lambda lo, hi: self._columns(self.k_rows[lo:hi], self.a_rows[lo:hi]), _CHUNK)

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (numbers Int64, empty fields missing)."""
        return columns_frame(self._columns(self.k_rows, self.a_rows), COLUMNS["cuda_kern_exec_trace"])


def kern_exec_rows(trace: Trace) -> KernExecRows | None:
    """Each kernel with its launch calls, by the call's start (see :class:`KernExecRows`).

    None where the trace has no kernel, no launch call or no pair of them.
    """
    if not (trace.has("kernels") and trace.has("api")):
        return None
    launches = trace.columns_async("api", _CALL, where="kernel_launches")  # read while the kernels are
    ks = TraceColumnSource(trace, "kernels", _KERNEL)
    calls = TraceColumnSource(trace, "api", _CALL, started=launches)
    if not ks.rows or not calls.rows:
        return None
    k_gpid, a_gtid = np.asarray(ks.column("globalPid")), np.asarray(calls.column("globalTid"))
    if (k_gpid == NULL).any() or (a_gtid == NULL).any():  # Kineto: correlation ids suffice
        k_proc, a_proc = np.zeros(ks.rows, np.int64), np.zeros(calls.rows, np.int64)
    else:
        k_proc, a_proc = k_gpid >> 24, a_gtid >> 24
    del k_gpid, a_gtid
    k_rows, a_rows = _pairs(k_proc, np.asarray(ks.column("correlationId")), a_proc,
                            np.asarray(calls.column("correlationId")))
    if not len(k_rows):
        return None
    order = np.argsort(np.asarray(calls.column("start"))[a_rows], kind="stable")
    k_rows, a_rows = k_rows[order], a_rows[order]
    del order
    strings = trace.strings()
    name_ids = _ids(ks.column("nameId"))
    names = [str(strings.get(i, "")) for i in name_ids.tolist()]
    call_ids = _ids(calls.column("nameId"))
    call_names = [_API_SUFFIX.sub("", str(strings.get(i, f"<unknown {i}>"))) for i in call_ids.tolist()]
    return KernExecRows(ks, calls, k_rows, a_rows, name_ids, names, call_ids, call_names,
                        Shapes(trace, ks, "grid"), Shapes(trace, ks, "block"))


def _ids(col: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The distinct ids of a column, sorted, without :data:`NULL`."""
    uniq = distinct(col)
    out: npt.NDArray[np.int64] = uniq[uniq != NULL].astype(np.int64)
    return out


class Shapes:
    """The '%4d %4d %4d' texts of the kernels' grid or block shapes, and which kernel has which.

    Each kernel's code is its packed shape's place among the distinct ``packed`` ones; where a shape
    does not pack (a dimension missing or out of range: never from CUDA), every kernel's code is
    held instead (``codes``), over the distinct dimensions (a missing one printed as 0, as nsys does).
    """

    def __init__(self, trace: Trace, ks: TraceColumnSource, prefix: str) -> None:
        packed = ks.column(f"{prefix}Shape")
        self.packed = distinct(packed).astype(np.int64)
        self.codes: npt.NDArray[np.int64] | None = None
        if len(self.packed) and self.packed[0] == NULL:
            dims = trace.columns("kernels", [f"{prefix}{a}" for a in "XYZ"])
            xyz = np.stack([np.where(d == NULL, 0, d) for d in dims.values()], axis=1).astype(np.int64)
            uniq, inverse = np.unique(xyz, axis=0, return_inverse=True)
            self.codes = inverse.reshape(-1).astype(np.int64)
            self.labels = [f"{x:4d} {y:4d} {z:4d}" for x, y, z in uniq.tolist()]
        else:
            self.labels = [f"{s >> 32:4d} {(s >> 16) & 0xFFFF:4d} {s & 0xFFFF:4d}"
                           for s in self.packed.tolist()]
        self.prefix = prefix

    def column(self, ks: TraceColumnSource, kr: npt.NDArray[np.int64]) -> TextColumn:
        """The text column of kernel rows ``kr``."""
        if self.codes is not None:
            return TextColumn(self.codes[kr], self.labels)
        codes = lookup(self.packed, np.arange(len(self.packed), dtype=np.int64),
                       np.asarray(ks.column(f"{self.prefix}Shape")[kr]))
        return TextColumn(codes, self.labels)


def _pairs(k_proc: npt.NDArray[np.int64], k_corr: npt.NDArray[np.int64], a_proc: npt.NDArray[np.int64],
           a_corr: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(kernel row, call row) of every kernel and call with equal (process, correlationId).

    Kernels in table order, each kernel's calls in table order (an inner merge's order).
    """
    ok_k, ok_a = k_corr != NULL, a_corr != NULL
    n_k = int(ok_k.sum())
    _procs, pcode = factorize(np.concatenate([k_proc[ok_k], a_proc[ok_a]]))
    corr = np.concatenate([k_corr[ok_k], a_corr[ok_a]]).astype(np.int64)
    if len(corr) and (corr.min() < 0 or corr.max() >= 1 << 40):  # not packable: their codes instead
        _uniq, corr = factorize(corr)
    key = (pcode.astype(np.int64) << 40) | corr
    del pcode, corr
    key_k, key_a = key[:n_k], key[n_k:]
    calls = np.flatnonzero(ok_a)
    order = np.argsort(key_a, kind="stable")
    sk = key_a[order]
    del key_a
    lo = np.searchsorted(sk, key_k, side="left")
    cnt = np.searchsorted(sk, key_k, side="right") - lo
    del sk, key_k
    total = int(cnt.sum())
    k_rows = np.repeat(np.flatnonzero(ok_k), cnt)
    first = np.cumsum(cnt) - cnt
    a_rows = calls[order[np.repeat(lo, cnt) + (np.arange(total, dtype=np.int64) - np.repeat(first, cnt))]]
    return k_rows, a_rows


def kern_exec_trace_csv(trace: Trace) -> RenderedReport | None:
    """``cuda_kern_exec_trace`` as CSV chunks (None: no kernel with its launch call)."""
    rows = kern_exec_rows(trace)
    return rows.csv() if rows is not None else None
