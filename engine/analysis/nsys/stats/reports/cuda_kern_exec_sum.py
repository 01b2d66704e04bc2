"""``cuda_kern_exec_sum``: API, queue and kernel times per launching thread, device, API and kernel name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.trace_tables import (
    api_names,
    empty_frame,
    global_pid,
    sort_desc,
    usable,
)

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


@report(
    "cuda_kern_exec_sum",
    title="CUDA Kernel Launch & Exec Time Summary: API, queue and kernel times",
    columns=(
        "PID", "TID", "DevId", "Count", "QCount", "TAvg (ns)", "TMed (ns)", "TMin (ns)", "TMax (ns)",
        "TStdDev (ns)", "AAvg (ns)", "AMed (ns)", "AMin (ns)", "AMax (ns)", "AStdDev (ns)", "QAvg (ns)",
        "QMed (ns)", "QMin (ns)", "QMax (ns)", "QStdDev (ns)", "KAvg (ns)", "KMed (ns)", "KMin (ns)",
        "KMax (ns)", "KStdDev (ns)", "API Name", "Kernel Name",
    ),
    needs=("kernels", "api"),
)
def cuda_kern_exec_sum(trace: Trace, csv: bool) -> pd.DataFrame:
    """Each kernel joined with its launch call, grouped (see :func:`kern_exec_frame`)."""
    return kern_exec_frame(trace)


def kern_exec_frame(trace: Trace) -> pd.DataFrame:
    """Each kernel with its launch call (same process and correlation id), grouped; by TAvg."""
    import numpy as np
    import pandas as pd

    k = usable(trace, "kernels", ["globalPid", "correlationId", "start", "end", "deviceId", "name"])
    api = usable(trace, "api", ["globalTid", "correlationId", "start", "end", "pid", "tid", "name"])
    if k is None or api is None:
        return empty_frame("cuda_kern_exec_sum")
    # A kernel and its launch share correlationId within one process (nsys: join on globalPid
    # too). Kineto traces have no globalPid, and their GPU events carry the device as "pid", but
    # their correlation ids are unique within the trace, so correlationId alone joins them.
    k_proc = global_pid(k, "globalPid")
    a_proc = global_pid(api, "globalTid")
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
        "aname": api_names(api),
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
    return sort_desc(out, "TAvg (ns)")
