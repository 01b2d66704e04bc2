"""The ``nsys stats`` summary reports, computed from the common tables of any trace.

Each report returns a pandas DataFrame whose columns are named exactly as Nsight Systems 2025.3
prints them, with numeric values kept numeric; :func:`to_csv` then reproduces ``nsys stats
--format csv`` text byte for byte (checked against NVIDIA's own output in
tests/engine/analysis/test_nsys_stats.py).

The formulas are the public ones (see docs/FORMATS.md): durations are ``end - start``; per group the
total, count, mean, median (mean of the two middle values for an even count), min, max and sample
standard deviation (0 for a single row); ``Time (%)`` is a group's total over the sum of all the
report's totals; rows are sorted by total, descending, ties by name ascending.

Everything is vectorised (one groupby per report), so a trace with hundreds of thousands of kernels
and API calls is summarised in well under a second. :func:`fast_reports` computes the five core
reports of an nsys SQLite export without pandas (whose import alone costs more than the work):
column-wise reads in threads and numpy segment statistics, printing the same bytes; the CLI uses it.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.nsys_sqlite import NsysSqliteTrace, SummaryColumns

#: Report name (nsys 2024+ spelling) -> one-line description.
REPORTS: dict[str, str] = {
    "cuda_api_sum": "CUDA API Summary: runtime and driver calls grouped by name",
    "cuda_gpu_kern_sum": "CUDA GPU Kernel Summary: kernel executions grouped by name",
    "cuda_gpu_mem_time_sum": "GPU Memory Operations Summary (by Time): memcpy/memset durations",
    "cuda_gpu_mem_size_sum": "GPU Memory Operations Summary (by Size): memcpy/memset sizes in MB",
    "nvtx_sum": "NVTX Range Summary: push/pop and start/end ranges grouped by name and style",
    "cuda_api_gpu_sum": "CUDA Summary (API/Kernels/MemOps): API calls, kernels and memory operations",
    "cuda_kern_exec_sum": "CUDA Kernel Launch & Exec Time Summary: API, queue and kernel times",
    "cuda_gpu_sum": "GPU Summary (Kernels/MemOps): kernels and memory operations together",
    "cuda_gpu_trace": "CUDA GPU Trace: one row per kernel, memcpy and memset, by start time",
}

#: nsys 2022.x report names (``nsys stats --help-reports`` of 2022.4) -> current names.
ALIASES: dict[str, str] = {
    "cudaapisum": "cuda_api_sum",
    "gpukernsum": "cuda_gpu_kern_sum",
    "gpumemtimesum": "cuda_gpu_mem_time_sum",
    "gpumemsizesum": "cuda_gpu_mem_size_sum",
    "nvtxsum": "nvtx_sum",
    "apigpusum": "cuda_api_gpu_sum",
    "kernexecsum": "cuda_kern_exec_sum",
    "gpusum": "cuda_gpu_sum",
    "gputrace": "cuda_gpu_trace",
}

_STAT_COLS = ("Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)")
_SUM_COLS = ("Time (%)", "Total Time (ns)")

COLUMNS: dict[str, tuple[str, ...]] = {
    "cuda_api_sum": (*_SUM_COLS, "Num Calls", *_STAT_COLS, "Name"),
    "cuda_gpu_kern_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Name"),
    "cuda_gpu_mem_time_sum": (*_SUM_COLS, "Count", *_STAT_COLS, "Operation"),
    "cuda_gpu_mem_size_sum": (
        "Total (MB)", "Count", "Avg (MB)", "Med (MB)", "Min (MB)", "Max (MB)", "StdDev (MB)",
        "Operation",
    ),
    "nvtx_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Style", "Range"),
    "cuda_api_gpu_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Category", "Operation"),
    "cuda_kern_exec_sum": (
        "PID", "TID", "DevId", "Count", "QCount",
        *(f"{p}{s} (ns)" for p in "TAQK" for s in ("Avg", "Med", "Min", "Max", "StdDev")),
        "API Name", "Kernel Name",
    ),
    "cuda_gpu_sum": (*_SUM_COLS, "Instances", *_STAT_COLS, "Category", "Operation"),
    # nsys 2025.3 columns. The Debian nsys 2022.4 `gputrace` differs: no GreenCtx column,
    # "Throughput (MBps)", memcpy names "[CUDA memcpy HtoD]" instead of "...Host-to-Device]", and its
    # throughput formula is the same as 2025.3's (bytes/1e6 * (1e9 // duration)).
    "cuda_gpu_trace": (
        "Start (ns)", "Duration (ns)", "CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ",
        "Reg/Trd", "StcSMem (MB)", "DymSMem (MB)", "Bytes (MB)", "Throughput (MB/s)", "SrcMemKd",
        "DstMemKd", "Device", "Ctx", "GreenCtx", "Strm", "Name",
    ),
}

# nsys strips the 4-digit CUDA-version suffix of runtime entry points (cudaMemcpy_v3020 ->
# cudaMemcpy) but keeps other suffixes: the fixtures' oracles show cudaEventRecordWithFlags_v11010,
# cudaStreamIsCapturing_v10000 and cuGetProcAddress_v2 printed as is.
_API_SUFFIX = re.compile(r"_v\d{4}$")

_NVTX_STYLES = {59: "PushPop", 60: "StartEnd"}


def columns_needed(names: Sequence[str]) -> dict[str, list[str]]:
    """The big-table columns that the given reports read (for prefetching)."""
    need: dict[str, list[str]] = {}
    core = {"cuda_api_sum": {"api": ["start", "end", "name"]},
            "cuda_gpu_kern_sum": {"kernels": ["start", "end", "name"]}}
    for n in names:
        for table, cols in core.get(n, {}).items():
            need.setdefault(table, [])
            need[table] += [c for c in cols if c not in need[table]]
    return need


def resolve_report_name(name: str) -> str:
    """Return the current report name for ``name`` (a current name or an nsys 2022 alias).

    Args:
        name: a report name such as ``"cuda_gpu_kern_sum"`` or ``"gpukernsum"`` (case-insensitive).

    Returns:
        The name as a key of :data:`REPORTS`.

    Raises:
        KernelscopeError: the name is not a known report.

    """
    key = name.strip().lower()
    if key in REPORTS:
        return key
    if key in ALIASES:
        return ALIASES[key]
    raise KernelscopeError(
        f"Unknown report {name!r}; choose one of {', '.join(REPORTS)} "
        f"(or the nsys 2022 names {', '.join(ALIASES)})."
    )


# -- helpers ------------------------------------------------------------------------------------
def _empty(report: str) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS[report]})


def _usable(trace: Trace, table: str, columns: list[str] | None = None) -> pd.DataFrame | None:
    """Return the table (only ``columns`` if given) if it was captured and has rows, else None."""
    df = trace.table(table, columns)
    if table in trace.missing or df.empty:
        return None
    return df


def _durations(df: pd.DataFrame) -> pd.Series:
    import pandas as pd

    dur: pd.Series = pd.to_numeric(df["end"]) - pd.to_numeric(df["start"])
    return dur.astype("int64")


def _group_stats(keys: pd.DataFrame, values: pd.Series) -> pd.DataFrame:
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


def _time_summary(stats: pd.DataFrame, count_col: str, label_cols: dict[str, str]) -> pd.DataFrame:
    """Shape ``_group_stats`` output as a time summary (Time (%), Total Time, ..., labels)."""
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
    return _sort_desc(out, "Total Time (ns)")


def _sort_desc(df: pd.DataFrame, col: str) -> pd.DataFrame:
    # Stable, so equal totals keep the key order the groupby produced.
    return df.sort_values(col, ascending=False, kind="mergesort").reset_index(drop=True)


def _api_names(api: pd.DataFrame) -> pd.Series:
    names = api["name"].astype(str)
    uniq = names.unique()
    mapping = {n: _API_SUFFIX.sub("", n) for n in uniq}
    result: pd.Series = names.map(mapping)
    return result


def _memop_frame(trace: Trace) -> pd.DataFrame | None:
    """Memcpy and memset rows as (start, end, bytes, label) with nsys's operation labels."""
    import pandas as pd

    parts = []
    memcpy = _usable(trace, "memcpy")
    if memcpy is not None:
        parts.append(pd.DataFrame({
            "start": memcpy["start"], "end": memcpy["end"], "bytes": memcpy["bytes"],
            "label": "[CUDA memcpy " + memcpy["operation"].fillna("Unknown").astype(str) + "]",
        }))
    memset = _usable(trace, "memset")
    if memset is not None:
        parts.append(pd.DataFrame({
            "start": memset["start"], "end": memset["end"], "bytes": memset["bytes"],
            "label": "[CUDA memset]",
        }))
    if not parts:
        return None
    return pd.concat(parts, ignore_index=True)


# -- the reports --------------------------------------------------------------------------------
def _api_stats(trace: Trace) -> pd.DataFrame | None:
    import pandas as pd

    api = _usable(trace, "api", ["start", "end", "name"])
    if api is None:
        return None
    return _group_stats(pd.DataFrame({"name": _api_names(api)}), _durations(api))


def _kernel_stats(trace: Trace) -> pd.DataFrame | None:
    import pandas as pd

    k = _usable(trace, "kernels", ["start", "end", "name"])
    if k is None:
        return None
    return _group_stats(pd.DataFrame({"name": k["name"].fillna("").astype(str)}), _durations(k))


def _memop_stats(trace: Trace) -> pd.DataFrame | None:
    import pandas as pd

    ops = _memop_frame(trace)
    if ops is None:
        return None
    return _group_stats(pd.DataFrame({"name": ops["label"]}), _durations(ops))


def _cuda_api_sum(trace: Trace) -> pd.DataFrame:
    stats = _api_stats(trace)
    if stats is None:
        return _empty("cuda_api_sum")
    return _time_summary(stats, "Num Calls", {"Name": "name"})


def _cuda_gpu_kern_sum(trace: Trace) -> pd.DataFrame:
    stats = _kernel_stats(trace)
    if stats is None:
        return _empty("cuda_gpu_kern_sum")
    return _time_summary(stats, "Instances", {"Name": "name"})


def _cuda_gpu_mem_time_sum(trace: Trace) -> pd.DataFrame:
    stats = _memop_stats(trace)
    if stats is None:
        return _empty("cuda_gpu_mem_time_sum")
    return _time_summary(stats, "Count", {"Operation": "name"})


def _cuda_gpu_mem_size_sum(trace: Trace) -> pd.DataFrame:
    import pandas as pd

    ops = _memop_frame(trace)
    if ops is None:
        return _empty("cuda_gpu_mem_size_sum")
    nbytes = pd.to_numeric(ops["bytes"]).astype("float64")
    stats = _group_stats(pd.DataFrame({"name": ops["label"]}), nbytes / 1e6)
    out = pd.DataFrame({
        "Total (MB)": stats["sum"],
        "Count": stats["count"],
        "Avg (MB)": stats["mean"],
        "Med (MB)": stats["median"],
        "Min (MB)": stats["min"],
        "Max (MB)": stats["max"],
        "StdDev (MB)": stats["std"],
        "Operation": stats["name"],
    })
    return _sort_desc(out, "Total (MB)")


def _nvtx_sum(trace: Trace) -> pd.DataFrame:
    import pandas as pd

    nvtx = _usable(trace, "nvtx")
    if nvtx is None:
        return _empty("nvtx_sum")
    etype = pd.to_numeric(nvtx["eventType"])
    ranges = nvtx[etype.isin(list(_NVTX_STYLES)) & nvtx["end"].notna()]
    if ranges.empty:
        return _empty("nvtx_sum")
    keys = pd.DataFrame({
        "range": ranges["domain"].fillna("").astype(str) + ":" + ranges["text"].fillna("").astype(str),
        "style": pd.to_numeric(ranges["eventType"]).map(_NVTX_STYLES),
    })
    stats = _group_stats(keys, _durations(ranges))
    return _time_summary(stats, "Instances", {"Style": "style", "Range": "range"})


def _combined(parts: Sequence[tuple[str, pd.DataFrame | None]], report: str) -> pd.DataFrame:
    import pandas as pd

    frames = []
    for category, stats in parts:
        if stats is not None:
            frames.append(stats.assign(category=category))
    if not frames:
        return _empty(report)
    stats = pd.concat(frames, ignore_index=True)
    return _time_summary(stats, "Instances", {"Category": "category", "Operation": "name"})


def _cuda_api_gpu_sum(trace: Trace) -> pd.DataFrame:
    return _combined(
        [("CUDA_API", _api_stats(trace)), ("CUDA_KERNEL", _kernel_stats(trace)),
         ("MEMORY_OPER", _memop_stats(trace))],
        "cuda_api_gpu_sum",
    )


def _cuda_gpu_sum(trace: Trace) -> pd.DataFrame:
    return _combined(
        [("CUDA_KERNEL", _kernel_stats(trace)), ("MEMORY_OPER", _memop_stats(trace))],
        "cuda_gpu_sum",
    )


def _global_pid(df: pd.DataFrame, gid_col: str) -> pd.Series | None:
    """Return nsys globalPid (host and pid bits) from a globalPid/globalTid column, or None."""
    import pandas as pd

    gid = pd.to_numeric(df[gid_col], errors="coerce")
    if df.empty or gid.isna().any():
        return None
    key: pd.Series = (gid // (1 << 24)).astype("int64")  # drop the tid bits of a globalTid
    return key


def _cuda_kern_exec_sum(trace: Trace) -> pd.DataFrame:
    import numpy as np
    import pandas as pd

    k = _usable(trace, "kernels")
    api = _usable(trace, "api")
    if k is None or api is None:
        return _empty("cuda_kern_exec_sum")
    # A kernel and its launch share correlationId within one process (nsys: join on globalPid
    # too). Kineto traces have no globalPid, and their GPU events carry the device as "pid", but
    # their correlation ids are unique within the trace, so correlationId alone joins them.
    k_proc = _global_pid(k, "globalPid")
    a_proc = _global_pid(api, "globalTid")
    if k_proc is None or a_proc is None:
        k_proc = pd.Series(0, index=k.index)
        a_proc = pd.Series(0, index=api.index)
    left = pd.DataFrame({
        "proc": k_proc,
        "corr": pd.to_numeric(k["correlationId"]),
        "k_start": pd.to_numeric(k["start"]).astype("int64"),
        "k_end": pd.to_numeric(k["end"]).astype("int64"),
        "dev": k["deviceId"],
        "kname": k["name"].fillna("").astype(str),
    })
    right = pd.DataFrame({
        "proc": a_proc,
        "corr": pd.to_numeric(api["correlationId"]),
        "a_start": pd.to_numeric(api["start"]).astype("int64"),
        "a_end": pd.to_numeric(api["end"]).astype("int64"),
        "pid": api["pid"],
        "tid": api["tid"],
        "aname": _api_names(api),
    })
    right = right[right["corr"].notna()]
    j = left.merge(right, on=["proc", "corr"], how="inner")
    if j.empty:
        return _empty("cuda_kern_exec_sum")
    j["T"] = np.maximum(j["a_end"], j["k_end"]) - j["a_start"]
    j["A"] = j["a_end"] - j["a_start"]
    q = j["k_start"] - j["a_end"]
    j["Q"] = q.where(q > 0)  # only positive queue times count
    j["K"] = j["k_end"] - j["k_start"]
    keys = ["pid", "tid", "dev", "aname", "kname"]
    g = j.groupby(keys, sort=True, dropna=False)
    agg = g[["T", "A", "Q", "K"]].agg(["sum", "count", "median", "min", "max", "std"])
    agg = agg.reset_index()
    out = pd.DataFrame({
        "PID": agg["pid"].to_numpy(),
        "TID": agg["tid"].to_numpy(),
        "DevId": agg["dev"].to_numpy(),
        "Count": agg[("T", "count")].astype("int64").to_numpy(),
        "QCount": agg[("Q", "count")].astype("int64").to_numpy(),
    })
    for p in "TAQK":
        count = agg[(p, "count")].astype("float64")
        mean = (agg[(p, "sum")] / count).where(count > 0)
        out[f"{p}Avg (ns)"] = mean.to_numpy()
        out[f"{p}Med (ns)"] = agg[(p, "median")].astype("float64").to_numpy()
        out[f"{p}Min (ns)"] = agg[(p, "min")].astype("Int64").to_numpy()
        out[f"{p}Max (ns)"] = agg[(p, "max")].astype("Int64").to_numpy()
        # nsys prints 0.0 for the stddev of one value and of no values (QCount 0).
        out[f"{p}StdDev (ns)"] = agg[(p, "std")].astype("float64").fillna(0.0).to_numpy()
    out["API Name"] = agg["aname"].to_numpy()
    out["Kernel Name"] = agg["kname"].to_numpy()
    for col in ("PID", "TID", "DevId"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("Int64")
    return _sort_desc(out, "TAvg (ns)")


def _cuda_gpu_trace(trace: Trace) -> pd.DataFrame:
    import numpy as np
    import pandas as pd

    na = np.nan  # numeric "missing", keeps the concatenated columns numeric (fast)
    parts = []
    k = _usable(trace, "kernels")
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
    memcpy = _usable(trace, "memcpy")
    if memcpy is not None:
        parts.append(pd.DataFrame({
            "start": memcpy["start"], "end": memcpy["end"], "corr": memcpy["correlationId"],
            "bytes": memcpy["bytes"], "src": memcpy["srcKindName"], "dst": memcpy["dstKindName"],
            "dev": memcpy["deviceId"], "ctx": memcpy["contextId"],
            "green": memcpy["greenContextId"], "strm": memcpy["streamId"],
            "name": "[CUDA memcpy " + memcpy["operation"].fillna("Unknown").astype(str) + "]",
            "order": 1,
        }))
    memset = _usable(trace, "memset")
    if memset is not None:
        parts.append(pd.DataFrame({
            "start": memset["start"], "end": memset["end"], "corr": memset["correlationId"],
            "bytes": memset["bytes"], "src": memset["memKindName"], "dst": None,
            "dev": memset["deviceId"], "ctx": memset["contextId"],
            "green": memset["greenContextId"], "strm": memset["streamId"],
            "name": "[CUDA memset]", "order": 2,
        }))
    if not parts:
        return _empty("cuda_gpu_trace")
    rows = pd.concat(parts, ignore_index=True)
    for col in ("GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ", "Reg/Trd", "stc", "dym"):
        if col not in rows:  # no kernels captured
            rows[col] = np.nan
    start = pd.to_numeric(rows["start"]).astype("int64")
    dur = pd.to_numeric(rows["end"]).astype("int64") - start
    order = np.lexsort((rows["order"].to_numpy(dtype="int64"), start.to_numpy()))
    rows = rows.iloc[order].reset_index(drop=True)
    start = start.iloc[order].reset_index(drop=True)
    dur = dur.iloc[order].reset_index(drop=True)

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

    gpus = trace.table("gpus")
    gpu_names: dict[Any, str] = {}
    if "gpus" not in trace.missing and not gpus.empty:
        gpu_names = {
            int(i): str(n) for i, n in zip(gpus["id"], gpus["name"], strict=False)
            if pd.notna(i) and pd.notna(n)
        }
    dev = ints("dev")
    dev_names = {d: (f"{gpu_names[d]} ({d})" if d in gpu_names else f"GPU {d}")
                 for d in dev.dropna().unique()}
    device = dev.map(dev_names, na_action="ignore").astype("object")

    out = pd.DataFrame({
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
        "Device": device,
        "Ctx": ints("ctx"),
        # Green context 0 means "none": nsys prints an empty field.
        "GreenCtx": ints("green").mask(lambda g: g == 0),
        "Strm": ints("strm"),
        "Name": rows["name"],
    })
    return out


_BUILDERS: dict[str, Callable[[Trace], pd.DataFrame]] = {
    "cuda_api_sum": _cuda_api_sum,
    "cuda_gpu_kern_sum": _cuda_gpu_kern_sum,
    "cuda_gpu_mem_time_sum": _cuda_gpu_mem_time_sum,
    "cuda_gpu_mem_size_sum": _cuda_gpu_mem_size_sum,
    "nvtx_sum": _nvtx_sum,
    "cuda_api_gpu_sum": _cuda_api_gpu_sum,
    "cuda_kern_exec_sum": _cuda_kern_exec_sum,
    "cuda_gpu_sum": _cuda_gpu_sum,
    "cuda_gpu_trace": _cuda_gpu_trace,
}


def run_report(trace: Trace, name: str) -> pd.DataFrame:
    """Compute one ``nsys stats`` report over a trace.

    Args:
        trace: an opened trace (nsys export or Kineto JSON), see ``engine.reports.open_report``.
        name: a report name or nsys 2022 alias (see :data:`REPORTS`, :data:`ALIASES`).

    Returns:
        A DataFrame with nsys 2025.3's column names, numeric columns numeric, rows in nsys's
        order. Empty (with those columns) when the trace lacks the data the report needs.

    Raises:
        KernelscopeError: ``name`` is not a known report.

    """
    report = resolve_report_name(name)
    df = _BUILDERS[report](trace)
    return df[list(COLUMNS[report])]


# -- the five core reports without pandas --------------------------------------------------------
#: Reports :func:`fast_reports` computes straight from an nsys SQLite export.
FAST_REPORTS = ("cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum",
                "nvtx_sum")


_FAST_TABLES: dict[str, set[str]] = {
    "cuda_api_sum": {"api"}, "cuda_gpu_kern_sum": {"kernels"}, "cuda_gpu_mem_time_sum": {"memcpy", "memset"},
    "cuda_gpu_mem_size_sum": {"memcpy", "memset"}, "nvtx_sum": set(),
}


class SummaryTable:
    """A computed report as plain columns (what :func:`fast_reports` returns; no pandas needed).

    ``data`` holds one list per column of :data:`COLUMNS` ``[report]``; ``numeric`` says which
    columns are numbers (right-aligned in tables). :func:`to_csv` and :func:`format_table` accept
    it as they accept a DataFrame and print the same text; :meth:`to_frame` gives the DataFrame.
    """

    def __init__(self, report: str, data: list[list[Any]]) -> None:
        self.report = report
        self.columns: tuple[str, ...] = COLUMNS[report]
        self.data = data
        self.numeric = tuple(c not in _TEXT_COLS for c in self.columns)

    @property
    def empty(self) -> bool:
        """True when the report has no rows."""
        return not self.data or not self.data[0]

    def __len__(self) -> int:
        return len(self.data[0]) if self.data else 0

    def to_frame(self) -> pd.DataFrame:
        """The same table as :func:`run_report` returns (numbers numeric, nsys column names)."""
        import pandas as pd

        if self.empty:
            return _empty(self.report)
        return pd.DataFrame({c: v for c, v in zip(self.columns, self.data, strict=True)})


_TEXT_COLS = frozenset({"Name", "Operation", "Style", "Range", "Category", "API Name", "Kernel Name"})


def _segment_stats(
    codes: npt.NDArray[np.int64], values: npt.NDArray[np.int64], n_groups: int
) -> list[tuple[int, int, float, float, int, int, float]]:
    """Per group code 0..n_groups-1: (sum, count, mean, median, min, max, sample stddev).

    Values are sorted within their group with one sort: when the codes and the value range fit
    in 63 bits, of ``code * span + value`` (a plain int64 sort), else a lexsort. Sums are
    exact (int64); the mean is sum / count in doubles; an even count's median is the mean of the
    two middle values; the stddev is two-pass over doubles, 0 for a single value. A group with no
    values gets None.
    """
    import numpy as np

    counts = np.bincount(codes, minlength=n_groups)
    vmin, vmax = int(values.min()), int(values.max())
    span = vmax - vmin + 1
    if n_groups * span < 2**62 and max(-vmin, vmax) < 2**62:  # one int64 sort: group, then value
        key = codes * span
        key += values
        key.sort()
        base = np.repeat(np.arange(n_groups, dtype=np.int64) * span, counts)
        s_vals = key - base  # the values, sorted within each group
    else:  # pragma: no cover - needs durations of centuries or billions of names
        s_vals = values[np.lexsort((values, codes))]
    present = np.flatnonzero(counts)
    cnt = counts[present]
    ends = np.cumsum(counts)[present]
    starts = ends - cnt
    sums = np.add.reduceat(s_vals, starts)
    mean = sums / cnt  # int64 / int64: both as doubles, like the DataFrame path
    lo, hi = starts + (cnt - 1) // 2, starts + cnt // 2
    median = (s_vals[lo].astype(np.float64) + s_vals[hi].astype(np.float64)) / 2.0
    dev = s_vals.astype(np.float64)
    dev -= np.repeat(mean, cnt)
    dev *= dev
    ss = np.add.reduceat(dev, starts)
    std = np.sqrt(ss / np.maximum(cnt - 1, 1))
    std[cnt == 1] = 0.0
    out: list[Any] = [None] * n_groups
    rows = zip(present.tolist(), sums.tolist(), cnt.tolist(), mean.tolist(), median.tolist(),
               s_vals[starts].tolist(), s_vals[ends - 1].tolist(), std.tolist(), strict=True)
    for g, *stats in rows:
        out[g] = tuple(stats)
    return out


def _grouped(
    labels: Sequence[str], codes: npt.NDArray[np.int64], values: npt.NDArray[np.int64]
) -> list[tuple[str, tuple[int, int, float, float, int, int, float]]]:
    """(label, stats) per distinct label, labels ascending; ``codes`` index ``labels`` per row.

    Codes whose labels are equal (two string ids with one name) are merged first.
    """
    import numpy as np

    if not len(values):
        return []
    names = sorted(set(labels))
    rank = {n: i for i, n in enumerate(names)}
    lut = np.array([rank[n] for n in labels], dtype=np.int64)
    stats = _segment_stats(lut[codes], values, len(names))
    return [(n, st) for n, st in zip(names, stats, strict=True) if st is not None]


def _time_rows(
    groups: list[tuple[Any, tuple[int, int, float, float, int, int, float]]], report: str,
) -> SummaryTable:
    """A time summary (Time (%), Total Time, count, stats, labels...) sorted by total, descending.

    ``groups`` come in label order, which breaks ties (Python's sort is stable, like the
    DataFrame path's mergesort). A label may be a tuple for reports with several label columns.
    """
    grand = float(sum(st[0] for _, st in groups))
    order = sorted(range(len(groups)), key=lambda i: -groups[i][1][0])
    n_labels = len(COLUMNS[report]) - 8
    data: list[list[Any]] = [[] for _ in range(8 + n_labels)]
    for i in order:
        label, (total, count, mean, median, vmin, vmax, std) = groups[i]
        pct = total / grand * 100.0 if grand else 0.0
        for col, v in zip(data, (pct, total, count, mean, median, vmin, vmax, std), strict=False):
            col.append(v)
        labels = label if isinstance(label, tuple) else (label,)
        for j, lab in enumerate(labels):
            data[8 + j].append(lab)
    return SummaryTable(report, data)


def _id_groups(
    cols: dict[str, npt.NDArray[np.int64]], name_of: Callable[[int], str | None],
) -> list[tuple[str, tuple[int, int, float, float, int, int, float]]] | None:
    """Group durations by the name of their ``nameId``; None when an id has no name."""
    import numpy as np

    ids = cols["nameId"]
    if int(ids.min()) < 0:
        return None
    small = int(ids.max()) <= 4 * len(ids) + 1_000_000  # StringIds ids are: count, don't sort
    if small:
        present = np.flatnonzero(np.bincount(ids))
    else:
        present, inverse = np.unique(ids, return_inverse=True)
    labels: list[str] = []
    for i in present.tolist():
        name = name_of(i)
        if name is None:
            return None
        labels.append(name)
    names = sorted(set(labels))  # codes in name order: ties in total then keep name order
    rank = {n: i for i, n in enumerate(names)}
    ranks = np.array([rank[n] for n in labels], dtype=np.int64)
    if small:
        lut = np.zeros(int(present[-1]) + 1, dtype=np.int64)
        lut[present] = ranks
        codes = lut[ids]
    else:
        codes = ranks[inverse]
    stats = _segment_stats(codes, cols["duration"], len(names))
    return [(n, st) for n, st in zip(names, stats, strict=True) if st is not None]


def _memop_groups(
    trace: NsysSqliteTrace, memcpy: dict[str, npt.NDArray[np.int64]] | None,
    memset: dict[str, npt.NDArray[np.int64]] | None, value: str,
) -> list[tuple[str, tuple[int, int, float, float, int, int, float]]]:
    import numpy as np

    from engine.reports.nsys_sqlite import COPY_KIND_LABELS

    labels: list[str] = []
    codes, values = [], []
    if memcpy is not None:
        kinds = trace.enum_labels("ENUM_CUDA_MEMCPY_OPER", COPY_KIND_LABELS)
        present = np.unique(memcpy["copyKind"])
        labels += [f"[CUDA memcpy {kinds.get(k, 'Unknown')}]" for k in present.tolist()]
        codes.append(np.searchsorted(present, memcpy["copyKind"]))
        values.append(memcpy[value])
    if memset is not None:
        codes.append(np.full(len(memset[value]), len(labels), dtype=np.int64))
        labels.append("[CUDA memset]")
        values.append(memset[value])
    return _grouped(labels, np.concatenate(codes), np.concatenate(values))


def fast_reports(trace: Trace, names: Sequence[str]) -> dict[str, SummaryTable]:
    """Compute the five core reports of an nsys SQLite export without pandas (the cold CLI path).

    Each big table is read once, column-wise, in background threads (all reads start before
    numpy is imported), and shared by the reports that use it; groups are sorted once and
    summarised with numpy segment reductions. The text is the same as :func:`run_report` +
    :func:`to_csv` (checked on every fixture in tests/engine/analysis/test_nsys_stats.py).

    Args:
        trace: an opened trace; only :class:`~engine.reports.nsys_sqlite.NsysSqliteTrace` has a
            fast path.
        names: report names (current spelling, see :func:`resolve_report_name`).

    Returns:
        Report name -> table, for the reports it could compute; the others (other reports,
        other readers, NULL times or names that the general path handles) are left out.

    """
    from engine.reports.nsys_sqlite import NsysSqliteTrace

    wanted = [n for n in dict.fromkeys(names) if n in FAST_REPORTS]
    if not isinstance(trace, NsysSqliteTrace) or not wanted:
        return {}
    tables = {t for n in wanted for t in _FAST_TABLES[n]}
    # Start every big read first: they run while numpy is imported and the small tables are read.
    reads: dict[str, SummaryColumns | None] = {
        t: trace.read_summary_columns(t) for t in ("api", "kernels", "memcpy", "memset") if t in tables
    }
    out: dict[str, SummaryTable] = {}
    if "nvtx_sum" in wanted:
        ranges = trace.nvtx_ranges()
        if ranges is not None:
            out["nvtx_sum"] = _nvtx_table(ranges)
    cols = {t: (r.result() if r is not None else None) for t, r in reads.items()}
    failed = {t for t, r in reads.items() if r is not None and cols[t] is None}
    wanted = [n for n in wanted if not failed & _FAST_TABLES[n]]  # NULLs: the general path
    strings = trace.strings()
    if "cuda_api_sum" in wanted:
        api = cols.get("api")
        groups = _id_groups(api, lambda i: _API_SUFFIX.sub("", strings.get(i, f"<unknown {i}>"))) \
            if api is not None else []
        if groups is not None:
            out["cuda_api_sum"] = _time_rows(groups, "cuda_api_sum")
    if "cuda_gpu_kern_sum" in wanted:
        k = cols.get("kernels")
        groups = _id_groups(k, strings.get) if k is not None else []
        if groups is not None:
            out["cuda_gpu_kern_sum"] = _time_rows(groups, "cuda_gpu_kern_sum")
    memcpy, memset = cols.get("memcpy"), cols.get("memset")
    if "cuda_gpu_mem_time_sum" in wanted:
        groups = _memop_groups(trace, memcpy, memset, "duration") if memcpy or memset else []
        out["cuda_gpu_mem_time_sum"] = _time_rows(groups, "cuda_gpu_mem_time_sum")
    if "cuda_gpu_mem_size_sum" in wanted:
        groups = _memop_groups(trace, memcpy, memset, "bytes") if memcpy or memset else []
        out["cuda_gpu_mem_size_sum"] = _size_table(groups)
    return out


def _size_table(groups: list[tuple[str, tuple[int, int, float, float, int, int, float]]]) -> SummaryTable:
    """cuda_gpu_mem_size_sum from byte statistics (MB = bytes / 1e6, as nsys prints them)."""
    rows = [
        (total / 1e6, count, mean / 1e6, median / 1e6, vmin / 1e6, vmax / 1e6, std / 1e6, name)
        for name, (total, count, mean, median, vmin, vmax, std) in groups
    ]
    rows.sort(key=lambda r: -r[0])
    return SummaryTable("cuda_gpu_mem_size_sum", [list(c) for c in zip(*rows, strict=True)] if rows
                        else [[] for _ in COLUMNS["cuda_gpu_mem_size_sum"]])


def _nvtx_table(ranges: list[tuple[int, int, str]]) -> SummaryTable:
    import numpy as np

    keys = sorted({(name, _NVTX_STYLES[etype]) for etype, _, name in ranges})
    if not keys:
        return SummaryTable("nvtx_sum", [[] for _ in COLUMNS["nvtx_sum"]])
    rank = {k: i for i, k in enumerate(keys)}
    codes = np.array([rank[(name, _NVTX_STYLES[e])] for e, _, name in ranges], dtype=np.int64)
    values = np.array([d for _, d, _ in ranges], dtype=np.int64)
    stats = _segment_stats(codes, values, len(keys))
    groups = [((style, name), st) for (name, style), st in zip(keys, stats, strict=True) if st is not None]
    return _time_rows(groups, "nvtx_sum")


# -- output ---------------------------------------------------------------------------------------
def _decimals(column: str) -> int | None:
    """Digits after the point nsys prints for a column; None for integer/text columns."""
    if column.endswith(("(MB)", "(MB/s)")):
        return 3
    if column == "Time (%)" or any(s in column for s in ("Avg (", "Med (", "StdDev (")):
        return 1
    return None


def _round_half_up(x: float, decimals: int) -> str:
    """Format ``x`` with ``decimals`` digits, ties away from zero, on the double's exact value.

    This is what the nsys 2025.3 oracles show: 1804230.25 prints "1804230.3" (Python's '%.1f'
    would give "1804230.2", ties to even), while 5237820.55, stored as 5237820.5499999998, prints
    "5237820.5" (rounding the shortest repr "5237820.55" would give "5237820.6").
    """
    text = f"{x:.{decimals}f}"
    scaled = abs(x) * 10.0**decimals
    # Only an exact binary tie can differ from '%.Nf'; check candidates exactly with Decimal.
    if abs(scaled - math.floor(scaled) - 0.5) <= 1e-6 * max(1.0, scaled * 1e-9):
        exact = Decimal(x).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
        text = f"{exact:f}"
    return text


def _format_column(series: pd.Series, column: str) -> list[str]:
    """Render one column as nsys does: fixed decimals for statistics, plain ints, '' for null."""
    import numpy as np
    import pandas as pd
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    decimals = _decimals(column)
    if decimals is not None:
        values = pd.to_numeric(series, errors="coerce").astype("float64").to_numpy()
        fmt = f"{{:.{decimals}f}}".format
        out = ["" if v != v else fmt(v) for v in values.tolist()]
        # Only exact binary ties can print differently from '%.Nf': redo candidates exactly.
        scaled = np.abs(values) * 10.0**decimals
        near = np.abs(scaled - np.floor(scaled) - 0.5) <= 1e-6 * np.maximum(1.0, scaled * 1e-9)
        for i in np.flatnonzero(near).tolist():
            out[i] = _round_half_up(float(values[i]), decimals)
        return out
    if is_numeric_dtype(series.dtype) and not is_bool_dtype(series.dtype):
        missing = series.isna().to_numpy()
        ints = series.fillna(0).astype("int64").to_numpy().astype(str)
        return np.where(missing, "", ints).tolist()  # type: ignore[no-any-return]
    result = []
    for v in series.tolist():
        if v is None or (not isinstance(v, str) and pd.isna(v)):
            result.append("")
        elif isinstance(v, float) and v.is_integer():
            result.append(str(int(v)))
        else:
            result.append(str(v))
    return result


def _format_list(values: list[Any], column: str, numeric: bool) -> list[str]:
    """:func:`_format_column` for a :class:`SummaryTable` column (plain Python values)."""
    decimals = _decimals(column)
    if decimals is not None:
        fmt = f"{{:.{decimals}f}}".format
        out = []
        for v in values:
            if v is None or v != v:
                out.append("")
                continue
            x = float(v)
            scaled = abs(x) * 10.0**decimals
            near = abs(scaled - math.floor(scaled) - 0.5) <= 1e-6 * max(1.0, scaled * 1e-9)
            out.append(_round_half_up(x, decimals) if near else fmt(x))
        return out
    if numeric:
        return ["" if v is None else str(int(v)) for v in values]
    return ["" if v is None else str(v) for v in values]


def _formatted(df: pd.DataFrame | SummaryTable) -> list[list[str]]:
    if isinstance(df, SummaryTable):
        cols = [_format_list(v, c, num) for v, c, num in zip(df.data, df.columns, df.numeric, strict=True)]
    else:
        cols = [_format_column(df[c], str(c)) for c in df.columns]
    return [list(r) for r in zip(*cols, strict=True)] if cols else []


def to_csv(df: pd.DataFrame | SummaryTable) -> str:
    """Render a report as ``nsys stats --format csv`` does.

    Args:
        df: a DataFrame returned by :func:`run_report` (or a :class:`SummaryTable`).

    Returns:
        The CSV text: header and rows with nsys's number formatting, newline (LF) line endings, fields
        quoted only when needed (csv module defaults); an empty string when there are no rows
        (nsys writes an empty file then).

    """
    if df.empty:
        return ""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([str(c) for c in df.columns])
    writer.writerows(_formatted(df))
    return buf.getvalue()


def format_table(df: pd.DataFrame | SummaryTable, max_width: int | None = None) -> str:
    """Render a report as an aligned text table for terminals (like nsys's column output).

    Args:
        df: a DataFrame returned by :func:`run_report` (or a :class:`SummaryTable`).
        max_width: truncate text cells longer than this (with "..."); None keeps them whole.

    Returns:
        Header, a dashed rule and one line per row; numbers right-aligned, text left-aligned.
        A one-line note when the report is empty.

    """
    if df.empty:
        return "(no data for this report)\n"
    headers = [str(c) for c in df.columns]
    rows = _formatted(df)
    if isinstance(df, SummaryTable):
        numeric = list(df.numeric)
    else:
        from pandas.api.types import is_numeric_dtype

        numeric = [is_numeric_dtype(df[c].dtype) for c in df.columns]
    if max_width is not None and max_width > 3:
        rows = [
            [v if num or len(v) <= max_width else v[: max_width - 3] + "..."
             for v, num in zip(r, numeric, strict=True)]
            for r in rows
        ]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)]) + "\n"
