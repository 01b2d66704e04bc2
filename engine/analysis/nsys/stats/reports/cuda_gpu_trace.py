"""``cuda_gpu_trace``: one row per kernel, memcpy and memset, by start time.

On an nsys export the CSV is rendered without pandas (:func:`gpu_trace_csv`): columns from the
columnar cache, formatted by :mod:`..csv_columns` a chunk of rows at a time, so the text of a
10M-kernel report is streamed to its file in bounded memory. The table itself (for the window,
JSON, and traces whose tables come from pandas) is :func:`gpu_trace_frame`; both print the same bytes
(tests/engine/analysis/test_nsys_stats_fast.py checks every fixture).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.column_source import ColumnSource, gpu_names, lookup
from engine.analysis.nsys.stats.csv_columns import _CHUNK, FixedColumn, IntColumn, TextColumn, _quoted, _rows
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.rendered import RenderedReport
from engine.analysis.nsys.stats.trace_tables import empty_frame, usable
from engine.reports.nsys.columns import has_null
from engine.reports.nsys.schema import KERNEL, MEMCPY, MEMSET, NULL

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

_COMMON = ("start", "end", "correlationId", "deviceId", "contextId", "greenContextId", "streamId")
_KERNEL = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
           "staticSharedMemory", "dynamicSharedMemory")
_TABLES = {
    "kernels": (KERNEL, (*_COMMON, *_KERNEL)),
    "memcpy": (MEMCPY, (*_COMMON, "bytes", "copyKind", "srcKind", "dstKind")),
    "memset": (MEMSET, (*_COMMON, "bytes", "memKind")),
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
    """The rendered CSV where asked for on an export (None there: NULL times), else the table."""
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if csv and isinstance(trace, NsysSqliteTrace):
        table = gpu_trace_csv(trace)
        if table is not None:
            return table
    return gpu_trace_frame(trace)


def _sources(trace: NsysSqliteTrace) -> dict[str, ColumnSource] | None:
    """The three GPU tables' column sources (absent columns read as NULL)."""
    out = {}
    for name, (table, cols) in _TABLES.items():
        if not trace.has_sqlite_table(table):
            continue
        have = set(trace.column_names(table))
        exprs = {c: f'"{c}"' if c in have else "NULL" for c in cols}
        if name == "kernels":
            if not {"demangledName", "shortName"} & have:
                return None
            exprs["nameId"] = 'coalesce("demangledName", "shortName")'
        out[name] = ColumnSource(trace, table, exprs)
    return out


def gpu_trace_csv(trace: NsysSqliteTrace) -> RenderedReport | None:
    """``cuda_gpu_trace`` as CSV, or None where the general path must handle it (NULL times).

    Rows are sorted by start, then kernels before copies before memsets, then table order
    (a stable sort), as :func:`gpu_trace_frame` sorts them.
    Only the row order (8 bytes a row) is held; each chunk of rows gathers its columns from the
    columnar cache and is formatted on its own.
    """
    import sqlite3

    import numpy as np


    try:
        srcs = _sources(trace)
    except sqlite3.Error:
        return None
    if srcs is None:
        return None
    srcs = {k: v for k, v in srcs.items() if v.rows}
    if not srcs:
        return RenderedReport("cuda_gpu_trace", 0, lambda: iter(()))
    if any(has_null(s.column("start")) or has_null(s.column("end")) for s in srcs.values()):
        return None
    names = list(srcs)
    offsets = np.cumsum([0] + [srcs[n].rows for n in names])
    start_all = np.concatenate([np.asarray(srcs[n].column("start")) for n in names])
    kinds_all = np.concatenate([np.full(srcs[n].rows, ("kernels", "memcpy", "memset").index(n),
                                        np.int8) for n in names])
    order = np.lexsort((kinds_all, start_all))
    del start_all, kinds_all

    # Labels, each over the distinct values of a whole column (one pass, before the chunks).
    strings = trace.strings()
    copy_labels = trace.copy_kind_labels()
    mem_labels = trace.memory_kind_labels()
    labels: list[str] = []
    name_lut: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    if "kernels" in srcs:
        uniq = np.unique(srcs["kernels"].column("nameId"))
        if (uniq == NULL).any() or any(int(i) not in strings for i in uniq.tolist()):
            return None
        name_lut["kernels"] = (uniq, np.arange(len(uniq), dtype=np.int64))
        labels += [strings[int(i)] for i in uniq.tolist()]
    if "memcpy" in srcs:
        uniq = np.unique(srcs["memcpy"].column("copyKind"))
        name_lut["memcpy"] = (uniq, np.arange(len(uniq), dtype=np.int64) + len(labels))
        labels += [f"[CUDA memcpy {copy_labels.get(int(k), 'Unknown')}]" for k in uniq.tolist()]
    if "memset" in srcs:
        name_lut["memset"] = (np.zeros(1, np.int64), np.full(1, len(labels), np.int64))
        labels.append("[CUDA memset]")
    kind_ids = sorted(mem_labels)
    kind_names = [mem_labels[k] for k in kind_ids]
    gpus = gpu_names(trace)
    dev_ids = sorted(set().union(*(np.unique(s.column("deviceId")).tolist() for s in srcs.values()))
                     - {NULL})
    dev_arr = np.array(dev_ids, dtype=np.int64)
    dev_labels = [f"{gpus[d]} ({d})" if d in gpus else f"GPU {d}" for d in dev_ids]
    if any("\n" in t for t in [*kind_names, *dev_labels]):
        return None  # a text column before the last one holds a newline: the general path

    def chunks() -> Iterator[bytes]:
        yield ",".join(_quoted(h).decode() for h in COLUMNS["cuda_gpu_trace"]).encode() + b"\n"
        for lo in range(0, len(order), _CHUNK):
            idx = order[lo:lo + _CHUNK]
            yield _chunk(srcs, names, offsets, idx, labels, name_lut, kind_ids, kind_names,
                         dev_arr, dev_labels)

    return RenderedReport("cuda_gpu_trace", len(order), chunks)


def _chunk(srcs: dict[str, ColumnSource], names: list[str], offsets: npt.NDArray[np.int64],
           idx: npt.NDArray[np.intp], labels: list[str],
           name_lut: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
           kind_ids: list[int], kind_names: list[str], dev_arr: npt.NDArray[np.int64],
           dev_labels: list[str]) -> bytes:
    """One chunk of rows (``idx``: positions in the tables' concatenation) as CSV bytes."""
    import numpy as np

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

    start = col("start")
    dur = col("end") - start
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
        IntColumn(start), IntColumn(dur), ints("correlationId"),
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
    return _rows(cols[:-1], 0, n, cols[-1])  # type: ignore[arg-type]


def gpu_trace_frame(trace: Trace) -> pd.DataFrame:
    """The report as a DataFrame (numbers numeric, nsys's columns), rows by start then kind."""
    rows = _gpu_rows(trace)
    if rows is None:
        return empty_frame("cuda_gpu_trace")
    return _frame(trace, rows)


def _gpu_rows(trace: Trace) -> pd.DataFrame | None:
    """Kernels, copies and memsets as one frame of raw columns, sorted by start (kernels first)."""
    import numpy as np
    import pandas as pd

    na = np.nan  # numeric "missing", keeps the concatenated columns numeric (fast)
    parts = []
    k = usable(trace, "kernels")
    if k is not None:
        parts.append(pd.DataFrame({
            "start": k["start"], "end": k["end"], "corr": k["correlationId"],
            "GrdX": k["gridX"], "GrdY": k["gridY"], "GrdZ": k["gridZ"],
            "BlkX": k["blockX"], "BlkY": k["blockY"], "BlkZ": k["blockZ"],
            "Reg/Trd": k["registersPerThread"],
            "stc": k["staticSharedMemory"], "dym": k["dynamicSharedMemory"], "bytes": na,
            "src": None, "dst": None, "dev": k["deviceId"], "ctx": k["contextId"],
            "green": k["greenContextId"], "strm": k["streamId"], "name": k["name"], "order": 0,
        }))
    memcpy = usable(trace, "memcpy")
    if memcpy is not None:
        parts.append(pd.DataFrame({
            "start": memcpy["start"], "end": memcpy["end"], "corr": memcpy["correlationId"],
            "bytes": memcpy["bytes"], "src": memcpy["srcKindName"], "dst": memcpy["dstKindName"],
            "dev": memcpy["deviceId"], "ctx": memcpy["contextId"],
            "green": memcpy["greenContextId"], "strm": memcpy["streamId"],
            "name": "[CUDA memcpy " + memcpy["operation"].fillna("Unknown").astype(str) + "]",
            "order": 1,
        }))
    memset = usable(trace, "memset")
    if memset is not None:
        parts.append(pd.DataFrame({
            "start": memset["start"], "end": memset["end"], "corr": memset["correlationId"],
            "bytes": memset["bytes"], "src": memset["memKindName"], "dst": None,
            "dev": memset["deviceId"], "ctx": memset["contextId"],
            "green": memset["greenContextId"], "strm": memset["streamId"],
            "name": "[CUDA memset]", "order": 2,
        }))
    if not parts:
        return None
    rows = pd.concat(parts, ignore_index=True)
    for col in ("GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ", "Reg/Trd", "stc", "dym"):
        if col not in rows:  # no kernels captured
            rows[col] = np.nan
    start = pd.to_numeric(rows["start"]).astype("int64")
    order = np.lexsort((rows["order"].to_numpy(dtype="int64"), start.to_numpy()))
    return rows.iloc[order].reset_index(drop=True)


def _frame(trace: Trace, rows: pd.DataFrame) -> pd.DataFrame:
    """Nsys's columns of the sorted rows: MB, MB/s, the device's name, 0 ids as empty fields."""
    import pandas as pd

    start = pd.to_numeric(rows["start"]).astype("int64")
    dur = pd.to_numeric(rows["end"]).astype("int64") - start

    def ints(col: str) -> pd.Series:
        s: pd.Series = pd.to_numeric(rows[col], errors="coerce").astype("Int64")
        return s

    def mb(col: str) -> pd.Series:
        s: pd.Series = pd.to_numeric(rows[col], errors="coerce").astype("float64") / 1e6
        return s

    nbytes = pd.to_numeric(rows["bytes"], errors="coerce").astype("float64")
    dur_f = dur.astype("float64")
    # nsys 2025.3 (checked against its gputrace output for host_overhead_naive, see
    # tests/data/oracles_nsys2025) computes MB/s as MB x whole transfers-per-second:
    # bytes/1e6 * (1e9 // duration_ns), integer division, like 2022.4 did.
    throughput = (nbytes / 1e6 * (1e9 // dur_f)).where(dur_f > 0)
    return pd.DataFrame({
        "Start (ns)": start,
        "Duration (ns)": dur,
        "CorrId": ints("corr"),
        "GrdX": ints("GrdX"), "GrdY": ints("GrdY"), "GrdZ": ints("GrdZ"),
        "BlkX": ints("BlkX"), "BlkY": ints("BlkY"), "BlkZ": ints("BlkZ"),
        "Reg/Trd": ints("Reg/Trd"),
        "StcSMem (MB)": mb("stc"),
        "DymSMem (MB)": mb("dym"),
        "Bytes (MB)": nbytes / 1e6,
        "Throughput (MB/s)": throughput,
        "SrcMemKd": rows["src"],
        "DstMemKd": rows["dst"],
        "Device": _device_names(trace, ints("dev")),
        # Context, green context and stream 0 mean "none" (unified-memory migrations have no
        # context or stream): nsys prints an empty field.
        "Ctx": ints("ctx").mask(lambda g: g == 0),
        "GreenCtx": ints("green").mask(lambda g: g == 0),
        "Strm": ints("strm").mask(lambda g: g == 0),
        "Name": rows["name"],
    })


def _device_names(trace: Trace, dev: pd.Series) -> pd.Series:
    """"NVIDIA H200 (0)" for a device the capture describes, "GPU 0" otherwise."""
    import pandas as pd

    gpus = trace.table("gpus")
    gpu_names: dict[Any, str] = {}
    if "gpus" not in trace.missing and not gpus.empty:
        gpu_names = {
            int(i): str(n) for i, n in zip(gpus["id"], gpus["name"], strict=False)
            if pd.notna(i) and pd.notna(n)
        }
    dev_names = {d: (f"{gpu_names[d]} ({d})" if d in gpu_names else f"GPU {d}")
                 for d in dev.dropna().unique()}
    out: pd.Series = dev.map(dev_names, na_action="ignore").astype("object")
    return out
