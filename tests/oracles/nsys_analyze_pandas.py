"""``nsys analyze`` rules written with pandas: a reference to check the engine's numpy rules.

These were the rules' general path (whole tables as DataFrames, which Kineto traces took) before
each rule was written once over ``trace.columns`` (issue 24). They stay here, in tests only, as a
second implementation of the same behaviour: the tests compare the engine's rule tables with
them on every fixture and recording (beside NVIDIA's own ``nsys analyze`` outputs) and on a Kineto
trace. :data:`ORACLES` maps a rule name to its function (trace, resolved options -> the rule's
table, nsys's columns, ``rows`` applied).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from engine.analysis.nsys.analyze.common import (
    _by_duration,
    _in_window,
    _int_col,
    _limit,
    _time_window,
    sync_call,
)
from engine.analysis.nsys.analyze.gpu_activity import low_records
from engine.reports.base import Trace
from engine.reports.nsys.schema import MEMCPY


def _op_pids(ops: pd.DataFrame, api: pd.DataFrame) -> pd.Series:
    """The process of each GPU op: from globalPid (nsys), else from its API call (Kineto).

    Kineto puts GPU activity in a per-device "pid" lane, so the launching process is found through
    the runtime call with the same correlation id.
    """
    import pandas as pd

    pid = _int_col(ops["pid"])
    no_gpid = ops["globalPid"].isna()
    if no_gpid.any() and not api.empty:
        calls = api[api["correlationId"].notna()]
        corr = _int_col(calls["correlationId"])
        first = ~corr.duplicated()
        by_corr = pd.Series(_int_col(calls["pid"])[first].to_numpy(), index=corr[first].to_numpy())
        mapped = _int_col(_int_col(ops["correlationId"]).map(by_corr))
        pid = pid.where(~(no_gpid & mapped.notna()).to_numpy(), mapped)
    return pid


def _with_api(ops: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Join GPU ops with their API call on (correlationId, process); Kineto: correlationId only."""
    ops = ops.copy()
    ops["correlationId"] = _int_col(ops["correlationId"])
    calls = api[["correlationId", "pid", "name"]].copy()
    calls["correlationId"] = _int_col(calls["correlationId"])
    calls["pid"] = _int_col(calls["pid"])
    calls = calls.rename(columns={"name": "apiName", "pid": "apiPid"})
    if ops["globalPid"].notna().all():
        # nsys 2025.3 joins on correlationId alone: in a report of several processes a copy
        # matches the calls of every process with its id (its rows then repeat), in the order
        # of the calls, which is what equal durations keep (checked on a 2-process DDP report).
        ops["pid"] = _int_col(ops["pid"])
        calls["_call"] = range(len(calls))
        merged = ops.merge(calls, on="correlationId", how="inner")
        merged = merged.sort_values("_call", kind="stable").drop(columns="_call")
    else:
        calls = calls.drop_duplicates("correlationId")
        merged = ops.merge(calls, on="correlationId", how="inner")
        merged["pid"] = merged["apiPid"]
    return merged


def _green(s: pd.Series) -> pd.Series:
    """Print no green context (empty field) when the id is 0 or absent."""
    g = _int_col(s)
    return g.where(g != 0)


def _mb(nbytes: pd.Series) -> pd.Series:
    import pandas as pd

    return (pd.to_numeric(nbytes, errors="coerce") / 1e6).round(3)


def gpu_ops(trace: Trace, window: tuple[int | None, int | None]) -> pd.DataFrame:
    """All GPU operations (kernels, copies, memsets) with integer start/end, pid, device, context."""
    api: pd.DataFrame | None = None
    parts = []
    for name in ("kernels", "memcpy", "memset"):
        df = trace.table(name, ["start", "end", "pid", "globalPid", "deviceId", "contextId",
                                "correlationId"])
        if df.empty:
            continue
        if api is None and df["globalPid"].isna().any():  # Kineto: the process comes from the call
            api = trace.table("api")
        parts.append(pd.DataFrame({
            "start": pd.to_numeric(df["start"]).astype("int64"),
            "end": pd.to_numeric(df["end"]).astype("int64"),
            "pid": _op_pids(df, api if api is not None else df.iloc[:0]),
            "deviceId": _int_col(df["deviceId"]),
            "contextId": _int_col(df["contextId"]),
        }))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in
                             ("start", "end", "pid", "deviceId", "contextId")})
    return _in_window(pd.concat(parts, ignore_index=True), window)


def gpu_gaps(trace: Trace, opts: dict[str, Any]) -> pd.DataFrame:
    """GPU idle gaps longer than ``gap`` ms, per process and device: a running maximum of the ends."""
    ops = gpu_ops(trace, _time_window(trace, opts))
    ops = ops.sort_values(["pid", "deviceId", "start", "end"], kind="stable",
                          na_position="last").reset_index(drop=True)
    keys = [ops["pid"].fillna(-1), ops["deviceId"].fillna(-1)]
    # The GPU is idle from the latest end so far (ops may overlap) to the next op's start.
    busy_until = ops["end"].groupby(keys).cummax()
    prev_end = busy_until.groupby(keys).shift(1)
    # The context of the op that reached that latest end.
    reached = ops["end"] == busy_until
    prev_ctx = ops["contextId"].where(reached).groupby(keys).ffill().groupby(keys).shift(1)
    gap = ops["start"] - prev_end
    hit = gap.notna() & (gap > 0) & (gap > opts["gap"] * 1e6)
    found = pd.DataFrame({
        "Duration (ns)": _int_col(gap[hit]),
        "Start (ns)": _int_col(prev_end[hit]),
        "PID": ops["pid"][hit],
        "Device ID": ops["deviceId"][hit],
        "Context ID": _int_col(prev_ctx[hit]),
    })
    found = _limit(_by_duration(found), opts["rows"]).reset_index(drop=True)
    found.insert(0, "Row#", pd.Series(np.arange(1, len(found) + 1), dtype="Int64"))
    return found


def _coverage_of(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total busy time of all [start, end) intervals before each time ``t`` (overlaps add up)."""
    s = np.sort(starts)
    e = np.sort(ends)
    cs = np.concatenate(([0], np.cumsum(s)))
    ce = np.concatenate(([0], np.cumsum(e)))
    ns = np.searchsorted(s, t, side="left")
    ne = np.searchsorted(e, t, side="left")
    covered: np.ndarray = (ns * t - cs[ns]) - (ne * t - ce[ne])
    return covered


def gpu_time_util(trace: Trace, opts: dict[str, Any]) -> pd.DataFrame:
    """Runs of chunks under ``threshold`` % in use, per process and device (pandas groupby)."""
    ops = gpu_ops(trace, _time_window(trace, opts))
    records: list[dict[str, Any]] = []
    for (pid, dev), g in ops.groupby(["pid", "deviceId"], sort=True, dropna=False):
        s, e = g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64)
        ctx = g["contextId"].iloc[int(np.argmax(g["end"].to_numpy()))]
        records += low_records(int(s.min()), int(e.max()), opts["chunks"], opts["threshold"],
                               partial(_coverage_of, s, e), pid, dev, ctx)
    if not records:
        return pd.DataFrame()
    found = pd.DataFrame.from_records(records).sort_values(["chunk", "pid", "dev"], kind="stable")
    found = _limit(found, opts["rows"])
    found["rounded"] = found["In-Use (%)"].round(1)
    found = found.sort_values("rounded", kind="stable").reset_index(drop=True)
    return pd.DataFrame({
        "Row#": pd.array(np.arange(1, len(found) + 1), dtype="Int64"),
        "In-Use (%)": found["In-Use (%)"].round(1),
        "Duration (ns)": _int_col(found["Duration (ns)"]),
        "Start (ns)": _int_col(found["Start (ns)"]),
        "PID": _int_col(found["PID"]),
        "Device ID": _int_col(found["Device ID"]),
        "Context ID": _int_col(found["Context ID"]),
    })


def cuda_api_sync(trace: Trace, opts: dict[str, Any]) -> pd.DataFrame:
    """cudaDeviceSynchronize* / cudaStreamSynchronize* calls from the ``api`` table, longest first."""
    api = _in_window(trace.table("api"), _time_window(trace, opts))
    if api.empty:
        return api
    calls = api[api["name"].isin({n for n in pd.unique(api["name"].dropna()) if sync_call(str(n))})]
    table = pd.DataFrame({
        "Duration (ns)": _int_col(calls["end"]) - _int_col(calls["start"]),
        "Start (ns)": _int_col(calls["start"]),
        "PID": _int_col(calls["pid"]),
        "TID": _int_col(calls["tid"]),
        "API Name": calls["name"].astype("object"),
    })
    return _limit(_by_duration(table), opts["rows"]).reset_index(drop=True)


def _memory_calls(trace: Trace) -> pd.DataFrame:
    """The cudaMemcpy*/cudaMemset* calls of the ``api`` table."""
    api = trace.table("api")
    if api.empty:
        return api
    distinct = {n for n in pd.unique(api["name"].dropna())
                if str(n).lower().startswith(("cudamemcpy", "cudamemset"))}
    return api[api["name"].isin(distinct).to_numpy()].reset_index(drop=True)


def _names_like(names: pd.Series, test: Callable[[str], bool]) -> pd.Series:
    return names.isin([n for n in pd.unique(names.dropna()) if test(str(n).lower())])


def _copy_table(merged: pd.DataFrame, columns: list[str], rows: int) -> pd.DataFrame:
    """nsys's columns of joined copies (or memsets), longest first, ``rows`` of them."""
    if merged.empty:
        return pd.DataFrame()
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
    table = table.sort_values("Duration (ns)", ascending=False, kind="stable")
    return _limit(table, rows).reset_index(drop=True)


def _joined(trace: Trace, table: str, opts: dict[str, Any]) -> pd.DataFrame:
    ops = _in_window(trace.table(table), _time_window(trace, opts))
    return _with_api(ops, _memory_calls(trace)) if not ops.empty else ops


def cuda_memcpy_async(trace: Trace, opts: dict[str, Any]) -> pd.DataFrame:
    """cudaMemcpy*Async* calls whose copy has a pageable side."""
    m = _joined(trace, "memcpy", opts)
    if not m.empty:
        pageable = (_int_col(m["srcKind"]) == 0) | (_int_col(m["dstKind"]) == 0)
        m = m[_names_like(m["apiName"], lambda n: n.startswith("cudamemcpy") and "async" in n)
              & pageable.fillna(False)]
    return _copy_table(m, ["Src Kind"], opts["rows"])


def cuda_memcpy_sync(trace: Trace, opts: dict[str, Any]) -> pd.DataFrame:
    """cudaMemcpy* calls without Async, but small host-to-device copies and copies within a device."""
    m = _joined(trace, "memcpy", opts)
    if not m.empty:
        small_h2d = (_int_col(m["copyKind"]) == 1) & (pd.to_numeric(m["bytes"]) <= 64_000)
        same_device = (_int_col(m["srcDeviceId"]) == _int_col(m["dstDeviceId"])).fillna(False)
        m = m[_names_like(m["apiName"], lambda n: n.startswith("cudamemcpy") and "async" not in n)
              & ~small_h2d.fillna(False) & ~same_device]
    if "greenContextId" not in getattr(trace, "column_names", lambda t: ["greenContextId"])(MEMCPY):
        m = m.iloc[:0]  # nsys 2025.3 reports nothing on exports without green contexts
    return _copy_table(m, ["Src Kind"], opts["rows"])


def cuda_memset_sync(trace: Trace, opts: dict[str, Any]) -> pd.DataFrame:
    """cudaMemset* calls without Async on pinned or managed memory."""
    m = _joined(trace, "memset", opts)
    if not m.empty:
        m = m[_names_like(m["apiName"], lambda n: n.startswith("cudamemset") and "async" not in n)
              & _int_col(m["memKind"]).isin([1, 4]).fillna(False)]
    return _copy_table(m, ["Memory Kind"], opts["rows"])


#: rule name -> its pandas reference
ORACLES: dict[str, Callable[[Trace, dict[str, Any]], pd.DataFrame]] = {
    "gpu_gaps": gpu_gaps,
    "gpu_time_util": gpu_time_util,
    "cuda_api_sync": cuda_api_sync,
    "cuda_memcpy_async": cuda_memcpy_async,
    "cuda_memcpy_sync": cuda_memcpy_sync,
    "cuda_memset_sync": cuda_memset_sync,
}
