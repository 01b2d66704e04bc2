"""``gpu_gaps``: per process and device, GPU idle stretches longer than ``gap`` ms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.analyze import gpu_activity
from engine.analysis.nsys.analyze.common import (
    _GAP_COLUMNS,
    RuleResult,
    _by_duration,
    _int_col,
    _limit,
    _missing_note,
    _nothing,
    _time_window,
    empty_rule_frame,
    gaps_text,
)
from engine.analysis.nsys.analyze.gpu_activity import gpu_ops
from engine.analysis.nsys.analyze.registry import rule

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


def _fast_gaps(trace: Trace, window: tuple[int | None, int | None], gs: list[gpu_activity.Group],
               threshold_ns: float, rows: int) -> pd.DataFrame:
    """gpu_gaps' table from the sorted starts and ends (same rows and order as the general path)."""
    import pandas as pd

    from engine.analysis.nsys.analyze.copy_calls import top_rows

    g = gpu_activity.gaps(gs, threshold_ns)
    pick = top_rows([g["pos"], g["group"], g["start"], g["pid"]], -g["dur"], rows)
    wanted = [(int(g["pid"][i]), int(g["dev"][i]), int(g["start"][i])) for i in pick.tolist()]
    ctx = gpu_activity.gap_contexts(trace, window, wanted)
    return pd.DataFrame({
        "Row#": pd.array(np.arange(1, len(pick) + 1), dtype="Int64"),
        "Duration (ns)": pd.array(g["dur"][pick], dtype="Int64"),
        "Start (ns)": pd.array(g["start"][pick], dtype="Int64"),
        "PID": pd.array(g["pid"][pick], dtype="Int64"),
        "Device ID": pd.array(g["dev"][pick], dtype="Int64"),
        "Context ID": pd.array([ctx.get(w) for w in wanted], dtype="Int64"),
    })


@rule("gpu_gaps", title="GPU Gaps", options={"gap": "minimum gap duration in ms (default 500)"},
      defaults={"gap": 500})
def gpu_gaps(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The gpu_gaps rule: GPU idle gaps longer than the threshold, per process and device."""
    import pandas as pd

    window = _time_window(trace, opts)
    threshold_ns = opts["gap"] * 1e6
    table = empty_rule_frame(_GAP_COLUMNS)
    gs = gpu_activity.groups(trace, window)
    ops = gpu_ops(trace, window) if gs is None else pd.DataFrame()
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
