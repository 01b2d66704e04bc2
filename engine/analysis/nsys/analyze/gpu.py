"""The rules over GPU activity: idle gaps and time utilisation per process and device."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from engine.reports.base import Trace

from engine.analysis.nsys.analyze import fastgpu
from engine.analysis.nsys.analyze.common import (
    _GAP_COLUMNS,
    _UTIL_COLUMNS,
    RuleResult,
    _by_duration,
    _in_window,
    _int_col,
    _limit,
    _missing_note,
    _nothing,
    _op_pids,
    _time_window,
    empty_rule_frame,
    gaps_text,
    util_text,
)
from engine.analysis.nsys.analyze.fastgpu import coverage_of as _coverage
from engine.analysis.nsys.analyze.fastgpu import low_records as _low_records


def _gpu_ops(trace: Trace, window: tuple[int | None, int | None]) -> pd.DataFrame:
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


def _fast_gaps(trace: Trace, window: tuple[int | None, int | None], gs: list[fastgpu.Group],
               threshold_ns: float, rows: int) -> pd.DataFrame:
    """gpu_gaps' table from the sorted starts and ends (same rows and order as the general path)."""
    from engine.analysis.nsys.analyze.fastcopies import top_rows

    g = fastgpu.gaps(gs, threshold_ns)
    pick = top_rows([g["pos"], g["group"], g["start"], g["pid"]], -g["dur"], rows)
    wanted = [(int(g["pid"][i]), int(g["dev"][i]), int(g["start"][i])) for i in pick.tolist()]
    ctx = fastgpu.gap_contexts(trace, window, wanted)
    return pd.DataFrame({
        "Row#": pd.array(np.arange(1, len(pick) + 1), dtype="Int64"),
        "Duration (ns)": pd.array(g["dur"][pick], dtype="Int64"),
        "Start (ns)": pd.array(g["start"][pick], dtype="Int64"),
        "PID": pd.array(g["pid"][pick], dtype="Int64"),
        "Device ID": pd.array(g["dev"][pick], dtype="Int64"),
        "Context ID": pd.array([ctx.get(w) for w in wanted], dtype="Int64"),
    })


def rule_gpu_gaps(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The gpu_gaps rule: GPU idle gaps longer than the threshold, per process and device."""
    window = _time_window(trace, opts)
    threshold_ns = opts["gap"] * 1e6
    table = empty_rule_frame(_GAP_COLUMNS)
    gs = fastgpu.groups(trace, window)
    ops = _gpu_ops(trace, window) if gs is None else pd.DataFrame()
    if gs is not None:
        found = _fast_gaps(trace, window, gs, threshold_ns, opts["rows"])
        table = found if not found.empty else table
    elif not ops.empty:
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
        hit = gap.notna() & (gap > 0) & (gap > threshold_ns)
        found = pd.DataFrame({
            "Duration (ns)": _int_col(gap[hit]),
            "Start (ns)": _int_col(prev_end[hit]),
            "PID": ops["pid"][hit],
            "Device ID": ops["deviceId"][hit],
            "Context ID": _int_col(prev_ctx[hit]),
        })
        found = _limit(_by_duration(found), opts["rows"]).reset_index(drop=True)
        found.insert(0, "Row#", pd.Series(np.arange(1, len(found) + 1), dtype="Int64"))
        table = found if not found.empty else table
    if table.empty:
        return _nothing("gpu_gaps", _GAP_COLUMNS, opts,
                        f"No GPU was idle for more than {opts['gap']:g} ms between operations"
                        + _missing_note(trace, ["kernels", "memcpy", "memset"]) + ".")
    explanation, fix = gaps_text(len(table), opts["gap"], float(table["Duration (ns)"].sum()),
                                 float(table["Duration (ns)"].max()), int(table["Start (ns)"].iloc[0]))
    return RuleResult("gpu_gaps", table, explanation, fix, opts)


def _util_records(ops: pd.DataFrame, chunks: int, threshold: float) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for (pid, dev), g in ops.groupby(["pid", "deviceId"], sort=True, dropna=False):
        s, e = g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64)
        # Context of the op that ends last (what nsys shows for the whole process/device).
        ctx = g["contextId"].iloc[int(np.argmax(g["end"].to_numpy()))]
        records += _low_records(int(s.min()), int(e.max()), chunks, threshold,
                                partial(_coverage, s, e), pid, dev, ctx)
    return records


def _fast_util_records(gs: list[fastgpu.Group], chunks: int, threshold: float) -> list[dict[str, Any]]:
    """:func:`_util_records` from the sorted starts and ends of each (pid, device)."""
    records: list[dict[str, Any]] = []
    for g in gs:
        if len(g.starts):
            records += _low_records(int(g.starts[0]), int(g.ends[-1]), chunks, threshold,
                                    partial(fastgpu.coverage, g), g.pid, g.dev, g.last_ctx)
    return records


def rule_gpu_time_util(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The gpu_time_util rule: time windows where GPU utilisation is below the threshold."""
    window = _time_window(trace, opts)
    gs = fastgpu.groups(trace, window)
    if gs is not None:
        records = _fast_util_records(gs, opts["chunks"], opts["threshold"])
    else:
        ops = _gpu_ops(trace, window)
        records = _util_records(ops, opts["chunks"], opts["threshold"]) if not ops.empty else []
    if not records:
        return _nothing("gpu_time_util", _UTIL_COLUMNS, opts,
                        f"No stretch of GPU time was less than {opts['threshold']:g}% in use "
                        f"(checked in {opts['chunks']} chunks per process and device)"
                        + _missing_note(trace, ["kernels", "memcpy", "memset"]) + ".")
    found = pd.DataFrame.from_records(records)
    # nsys keeps the first `rows` records by chunk position, then orders them by in-use %.
    found = found.sort_values(["chunk", "pid", "dev"], kind="stable")
    found = _limit(found, opts["rows"])
    # Rows that print the same percentage keep their chunk order (as nsys's output shows).
    found["rounded"] = found["In-Use (%)"].round(1)
    found = found.sort_values("rounded", kind="stable").reset_index(drop=True)
    table = pd.DataFrame({
        "Row#": pd.array(np.arange(1, len(found) + 1), dtype="Int64"),
        "In-Use (%)": found["In-Use (%)"].round(1),
        "Duration (ns)": _int_col(found["Duration (ns)"]),
        "Start (ns)": _int_col(found["Start (ns)"]),
        "PID": _int_col(found["PID"]),
        "Device ID": _int_col(found["Device ID"]),
        "Context ID": _int_col(found["Context ID"]),
    })
    low_ns = float(found["Duration (ns)"].sum())
    idle_ns = float(((100.0 - found["In-Use (%)"]).clip(lower=0) / 100.0 * found["Duration (ns)"]).sum())
    worst = found.iloc[0]
    explanation, fix = util_text(len(table), opts["threshold"], low_ns, idle_ns, float(worst["In-Use (%)"]),
                                 float(worst["Duration (ns)"]), int(worst["Start (ns)"]))
    return RuleResult("gpu_time_util", table, explanation, fix, opts)


