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
    _op_pids,
    _time_window,
    sync_call,
)
from engine.analysis.nsys.analyze.gpu_activity import low_records
from engine.reports.base import Trace


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


#: rule name -> its pandas reference
ORACLES: dict[str, Callable[[Trace, dict[str, Any]], pd.DataFrame]] = {
    "gpu_gaps": gpu_gaps,
    "gpu_time_util": gpu_time_util,
    "cuda_api_sync": cuda_api_sync,
}
