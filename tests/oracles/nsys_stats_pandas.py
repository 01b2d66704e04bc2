"""The core ``nsys stats`` summaries written with pandas: a reference to check the engine's numpy reports.

These were the engine's DataFrame path before each report was written once (issue 24). They stay
here, in tests only, as a second implementation of the same public formulas (docs/FORMATS.md) with
pandas' groupby: the tests compare the engine's reports with them on every fixture, beside NVIDIA's
own outputs. :data:`ORACLES` maps a report name to its function (trace -> DataFrame with nsys's
columns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from engine.analysis.nsys.stats.catalog import _NVTX_STYLES
from engine.analysis.nsys.stats.trace_tables import (
    api_names,
    durations,
    empty_frame,
    group_stats,
    sort_desc,
    time_summary,
    usable,
    xyz,
)
from engine.reports.base import Trace


def _memop_frame(trace: Trace) -> pd.DataFrame | None:
    """Memcpy and memset rows as (start, end, bytes, label) with nsys's operation labels."""
    parts = []
    memcpy = usable(trace, "memcpy")
    if memcpy is not None:
        parts.append(pd.DataFrame({
            "start": memcpy["start"], "end": memcpy["end"], "bytes": memcpy["bytes"],
            "label": "[CUDA memcpy " + memcpy["operation"].fillna("Unknown").astype(str) + "]",
        }))
    memset = usable(trace, "memset")
    if memset is not None:
        parts.append(pd.DataFrame({
            "start": memset["start"], "end": memset["end"], "bytes": memset["bytes"],
            "label": "[CUDA memset]",
        }))
    if not parts:
        return None
    return pd.concat(parts, ignore_index=True)



def _api_stats(trace: Trace) -> pd.DataFrame | None:
    api = usable(trace, "api", ["start", "end", "name"])
    if api is None:
        return None
    return group_stats(pd.DataFrame({"name": api_names(api)}), durations(api))


def _kernel_stats(trace: Trace) -> pd.DataFrame | None:
    k = usable(trace, "kernels", ["start", "end", "name"])
    if k is None:
        return None
    return group_stats(pd.DataFrame({"name": k["name"].fillna("").astype(str)}), durations(k))


def _memop_stats(trace: Trace) -> pd.DataFrame | None:
    ops = _memop_frame(trace)
    if ops is None:
        return None
    return group_stats(pd.DataFrame({"name": ops["label"]}), durations(ops))


def _cuda_api_sum(trace: Trace) -> pd.DataFrame:
    stats = _api_stats(trace)
    if stats is None:
        return empty_frame("cuda_api_sum")
    return time_summary(stats, "Num Calls", {"Name": "name"})


def _cuda_gpu_kern_sum(trace: Trace) -> pd.DataFrame:
    stats = _kernel_stats(trace)
    if stats is None:
        return empty_frame("cuda_gpu_kern_sum")
    return time_summary(stats, "Instances", {"Name": "name"})


def _cuda_gpu_mem_time_sum(trace: Trace) -> pd.DataFrame:
    stats = _memop_stats(trace)
    if stats is None:
        return empty_frame("cuda_gpu_mem_time_sum")
    return time_summary(stats, "Count", {"Operation": "name"})


def _cuda_gpu_mem_size_sum(trace: Trace) -> pd.DataFrame:
    ops = _memop_frame(trace)
    if ops is None:
        return empty_frame("cuda_gpu_mem_size_sum")
    nbytes = pd.to_numeric(ops["bytes"]).astype("float64")
    stats = group_stats(pd.DataFrame({"name": ops["label"]}), nbytes / 1e6)
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
    return sort_desc(out, "Total (MB)")


def _nvtx_sum(trace: Trace) -> pd.DataFrame:
    nvtx = usable(trace, "nvtx")
    if nvtx is None:
        return empty_frame("nvtx_sum")
    etype = pd.to_numeric(nvtx["eventType"])
    ranges = nvtx[etype.isin(list(_NVTX_STYLES)) & nvtx["end"].notna()]
    if ranges.empty:
        return empty_frame("nvtx_sum")
    keys = pd.DataFrame({
        "range": ranges["domain"].fillna("").astype(str) + ":" + ranges["text"].fillna("").astype(str),
        "style": pd.to_numeric(ranges["eventType"]).map(_NVTX_STYLES),
    })
    stats = group_stats(keys, durations(ranges))
    return time_summary(stats, "Instances", {"Style": "style", "Range": "range"})


def _combined(parts: Sequence[tuple[str, pd.DataFrame | None]], report: str) -> pd.DataFrame:
    frames = []
    for category, stats in parts:
        if stats is not None:
            frames.append(stats.assign(category=category))
    if not frames:
        return empty_frame(report)
    stats = pd.concat(frames, ignore_index=True)
    return time_summary(stats, "Instances", {"Category": "category", "Operation": "name"})


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


def _cuda_api_trace(trace: Trace) -> pd.DataFrame:
    """One row per CUDA API call, by start time, with its thread's name and priority."""
    from engine.analysis.nsys.stats.reports.cuda_api_trace import thread_info

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


def _cuda_kern_exec_trace(trace: Trace) -> pd.DataFrame:
    """Each kernel with its launch call (pandas merge on process and correlation id), by API start."""
    import numpy as np

    k = usable(trace, "kernels", ["start", "end", "correlationId", "globalPid", "deviceId", "name",
                                   "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"])
    api = usable(trace, "api", ["start", "end", "correlationId", "globalTid", "pid", "tid", "name"])
    if k is None or api is None:
        return empty_frame("cuda_kern_exec_trace")
    left = pd.DataFrame({
        "proc": pd.to_numeric(k["globalPid"], errors="coerce") // (1 << 24),
        "corr": pd.to_numeric(k["correlationId"]),
        "k_start": pd.to_numeric(k["start"]).astype("int64"),
        "k_end": pd.to_numeric(k["end"]).astype("int64"),
        "dev": pd.to_numeric(k["deviceId"], errors="coerce").astype("Int64"),
        "grid": xyz(k, "grid"), "block": xyz(k, "block"),
        "kname": k["name"].fillna("").astype(str),
    })
    right = pd.DataFrame({
        "proc": pd.to_numeric(api["globalTid"], errors="coerce") // (1 << 24),
        "corr": pd.to_numeric(api["correlationId"]),
        "a_start": pd.to_numeric(api["start"]).astype("int64"),
        "a_end": pd.to_numeric(api["end"]).astype("int64"),
        "pid": pd.to_numeric(api["pid"], errors="coerce").astype("Int64"),
        "tid": pd.to_numeric(api["tid"], errors="coerce").astype("Int64"),
        "aname": api_names(api),
    })
    if left["proc"].isna().any() or right["proc"].isna().any():  # Kineto: correlation ids suffice
        left["proc"], right["proc"] = 0, 0
    j = left.merge(right[right["corr"].notna()], on=["proc", "corr"], how="inner")
    if j.empty:
        return empty_frame("cuda_kern_exec_trace")
    queued = j["k_start"] - j["a_end"] >= 0
    out = pd.DataFrame({
        "API Start (ns)": j["a_start"],
        "API Dur (ns)": j["a_end"] - j["a_start"],
        "Queue Start (ns)": j["a_end"].where(queued).astype("Int64"),
        "Queue Dur (ns)": (j["k_start"] - j["a_end"]).where(queued).astype("Int64"),
        "Kernel Start (ns)": j["k_start"],
        "Kernel Dur (ns)": j["k_end"] - j["k_start"],
        "Total Dur (ns)": np.maximum(j["a_end"], j["k_end"]) - j["a_start"],
        "PID": j["pid"], "TID": j["tid"], "DevId": j["dev"],
        "API Function": j["aname"], "GridXYZ": j["grid"], "BlockXYZ": j["block"],
        "Kernel Name": j["kname"],
    })
    return out.sort_values("API Start (ns)", kind="stable").reset_index(drop=True)


def _cuda_gpu_trace(trace: Trace) -> pd.DataFrame:
    """The report as a DataFrame (numbers numeric, nsys's columns), rows by start then kind."""
    rows = _gpu_rows(trace)
    if rows is None:
        return empty_frame("cuda_gpu_trace")
    return _frame(trace, rows)


def _gpu_rows(trace: Trace) -> pd.DataFrame | None:
    """Kernels, copies and memsets as one frame of raw columns, sorted by start (kernels first)."""
    import numpy as np

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


ORACLES: dict[str, Callable[[Trace], pd.DataFrame]] = {
    "cuda_api_sum": _cuda_api_sum,
    "cuda_gpu_kern_sum": _cuda_gpu_kern_sum,
    "cuda_gpu_mem_time_sum": _cuda_gpu_mem_time_sum,
    "cuda_gpu_mem_size_sum": _cuda_gpu_mem_size_sum,
    "nvtx_sum": _nvtx_sum,
    "cuda_api_gpu_sum": _cuda_api_gpu_sum,
    "cuda_gpu_sum": _cuda_gpu_sum,
    "cuda_api_trace": _cuda_api_trace,  # trace reports: one row per call, per GPU operation
    "cuda_gpu_trace": _cuda_gpu_trace,
    "cuda_kern_exec_trace": _cuda_kern_exec_trace,
}


def pandas_report(trace: Trace, name: str) -> pd.DataFrame:
    """The pandas reference of core report ``name`` (see :data:`ORACLES`)."""
    return ORACLES[name](trace)
