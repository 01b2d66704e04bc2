"""The rules over GPU activity: idle gaps and time utilisation per process and device."""

from __future__ import annotations

from collections.abc import Callable
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
    _fmt_ms,
    _in_window,
    _int_col,
    _limit,
    _missing_note,
    _nothing,
    _op_pids,
    _plural,
    _time_window,
    empty_rule_frame,
)


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
    total = float(table["Duration (ns)"].sum())
    explanation = (
        f"{_plural(len(table), 'GPU gap')} longer than {opts['gap']:g} ms left the GPU idle for "
        f"{_fmt_ms(total)} in total (longest {_fmt_ms(float(table['Duration (ns)'].max()))}, "
        f"starting at {int(table['Start (ns)'].iloc[0]) / 1e9:.3f} s); no GPU work was queued then, "
        "typically because the CPU was busy with setup, I/O, allocation or synchronisation."
    )
    fix = (
        "Look at what the CPU threads do during these gaps (NVTX ranges, OS runtime calls): move "
        "setup, data loading and allocation out of the loop or onto other threads, prefetch the "
        "next inputs while the GPU computes, and avoid host synchronisation that drains the queue."
    )
    return RuleResult("gpu_gaps", table, explanation, fix, opts)


def _coverage(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total busy time of all [start, end) intervals before each time ``t`` (overlaps add up)."""
    s = np.sort(starts)
    e = np.sort(ends)
    cs = np.concatenate(([0], np.cumsum(s)))
    ce = np.concatenate(([0], np.cumsum(e)))
    ns = np.searchsorted(s, t, side="left")
    ne = np.searchsorted(e, t, side="left")
    covered: np.ndarray = (ns * t - cs[ns]) - (ne * t - ce[ne])
    return covered


def _low_records(lo: int, hi: int, chunks: int, threshold: float,
                 coverage: Callable[[np.ndarray], np.ndarray], pid: Any, dev: Any, ctx: Any
                 ) -> list[dict[str, Any]]:
    """The runs of ``chunks`` equal pieces of [lo, hi] whose busy share is under ``threshold`` %.

    ``coverage(edges)`` gives the busy time up to each edge; consecutive low pieces are one record.
    """
    records: list[dict[str, Any]] = []
    span = hi - lo
    if span <= 0:
        return records
    size = -(-span // chunks)
    active = -(-span // size)
    edges = lo + size * np.arange(active + 1, dtype=np.int64)
    edges[-1] = min(int(edges[-1]), hi)
    busy = np.diff(coverage(edges)).astype(np.float64)
    dur = np.diff(edges).astype(np.float64)
    idx = np.flatnonzero(busy / dur * 100.0 < threshold)
    if idx.size == 0:
        return records
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    for run in np.split(idx, breaks):
        first, last = int(run[0]), int(run[-1])
        records.append({
            "chunk": first, "pid": pid, "dev": dev,
            "In-Use (%)": float(busy[run].sum() / dur[run].sum() * 100.0),
            "Duration (ns)": int(edges[last + 1] - edges[first]),
            "Start (ns)": int(edges[first]),
            "PID": pid, "Device ID": dev, "Context ID": ctx,
        })
    return records


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
    explanation = (
        f"{_plural(len(table), 'stretch')} of GPU time, {_fmt_ms(low_ns)} in total, had the GPU in "
        f"use less than {opts['threshold']:g}% of the time (lowest {worst['In-Use (%)']:.1f}% over "
        f"{_fmt_ms(float(worst['Duration (ns)']))} from {int(worst['Start (ns)']) / 1e9:.3f} s); "
        f"about {_fmt_ms(idle_ns)} of idle GPU time there is throughput lost while the GPU waits "
        "for the CPU to submit work."
    )
    fix = (
        "Find what the CPU does in those stretches: overlap data preparation and copies with "
        "compute (pinned memory, async copies, prefetching), batch small kernels or capture them "
        "in a CUDA graph to cut launch overhead, and remove unneeded synchronisation."
    )
    return RuleResult("gpu_time_util", table, explanation, fix, opts)


