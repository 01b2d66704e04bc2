"""The reports as pandas DataFrames, computed from the common tables of any trace (nsys or Kineto).

The formulas are the public ones (see docs/FORMATS.md): durations are ``end - start``;
per group the total, count, mean, median (mean of the two middle values for an even count), min,
max and sample standard deviation (0 for a single row); ``Time (%)`` is a group's total over the
sum of all the report's totals; rows are sorted by total, descending, ties by name ascending.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import _API_SUFFIX, _NVTX_STYLES, COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


# -- helpers ------------------------------------------------------------------------------------
def empty_frame(report: str) -> pd.DataFrame:
    """An empty frame with the report's columns (what nsys prints for a report with no rows)."""
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


def _time_summary(stats: pd.DataFrame, count_col: str, label_cols: dict[str, str]) -> pd.DataFrame:
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
    return group_stats(pd.DataFrame({"name": _api_names(api)}), _durations(api))


def _kernel_stats(trace: Trace) -> pd.DataFrame | None:
    import pandas as pd

    k = _usable(trace, "kernels", ["start", "end", "name"])
    if k is None:
        return None
    return group_stats(pd.DataFrame({"name": k["name"].fillna("").astype(str)}), _durations(k))


def _memop_stats(trace: Trace) -> pd.DataFrame | None:
    import pandas as pd

    ops = _memop_frame(trace)
    if ops is None:
        return None
    return group_stats(pd.DataFrame({"name": ops["label"]}), _durations(ops))


def _cuda_api_sum(trace: Trace) -> pd.DataFrame:
    stats = _api_stats(trace)
    if stats is None:
        return empty_frame("cuda_api_sum")
    return _time_summary(stats, "Num Calls", {"Name": "name"})


def _cuda_gpu_kern_sum(trace: Trace) -> pd.DataFrame:
    stats = _kernel_stats(trace)
    if stats is None:
        return empty_frame("cuda_gpu_kern_sum")
    return _time_summary(stats, "Instances", {"Name": "name"})


def _cuda_gpu_mem_time_sum(trace: Trace) -> pd.DataFrame:
    stats = _memop_stats(trace)
    if stats is None:
        return empty_frame("cuda_gpu_mem_time_sum")
    return _time_summary(stats, "Count", {"Operation": "name"})


def _cuda_gpu_mem_size_sum(trace: Trace) -> pd.DataFrame:
    import pandas as pd

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
    return _sort_desc(out, "Total (MB)")


def _nvtx_sum(trace: Trace) -> pd.DataFrame:
    import pandas as pd

    nvtx = _usable(trace, "nvtx")
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
    stats = group_stats(keys, _durations(ranges))
    return _time_summary(stats, "Instances", {"Style": "style", "Range": "range"})


def _combined(parts: Sequence[tuple[str, pd.DataFrame | None]], report: str) -> pd.DataFrame:
    import pandas as pd

    frames = []
    for category, stats in parts:
        if stats is not None:
            frames.append(stats.assign(category=category))
    if not frames:
        return empty_frame(report)
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

    k = _usable(trace, "kernels", ["globalPid", "correlationId", "start", "end", "deviceId", "name"])
    api = _usable(trace, "api", ["globalTid", "correlationId", "start", "end", "pid", "tid", "name"])
    if k is None or api is None:
        return empty_frame("cuda_kern_exec_sum")
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
        return empty_frame("cuda_kern_exec_sum")
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
        return empty_frame("cuda_gpu_trace")
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
        # Context, green context and stream 0 mean "none" (unified-memory migrations have no
        # context or stream): nsys prints an empty field.
        "Ctx": ints("ctx").mask(lambda g: g == 0),
        "GreenCtx": ints("green").mask(lambda g: g == 0),
        "Strm": ints("strm").mask(lambda g: g == 0),
        "Name": rows["name"],
    })
    return out

