"""``gpu_gaps``: per process and device, GPU idle stretches longer than ``gap`` ms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.analyze import gpu_activity
from engine.analysis.nsys.analyze.common import (
    _GAP_COLUMNS,
    RuleResult,
    _missing_note,
    _nothing,
    _time_window,
    gaps_text,
    nullable_ints,
)
from engine.analysis.nsys.analyze.registry import rule

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


def _gaps_table(trace: Trace, window: tuple[int | None, int | None], threshold_ns: float,
                rows: int) -> pd.DataFrame:
    """The gaps, longest first (ties: process, a missing one last, then start, then group order)."""
    import pandas as pd

    g = gpu_activity.gaps(gpu_activity.groups(trace, window), threshold_ns)
    pick = gpu_activity.gap_order(g, rows)
    wanted = [(int(g["pid"][i]), int(g["dev"][i]), int(g["start"][i])) for i in pick.tolist()]
    ctx = gpu_activity.gap_contexts(trace, window, wanted)
    return pd.DataFrame({
        "Row#": pd.array(np.arange(1, len(pick) + 1), dtype="Int64"),
        "Duration (ns)": pd.array(g["dur"][pick], dtype="Int64"),
        "Start (ns)": pd.array(g["start"][pick], dtype="Int64"),
        "PID": nullable_ints(g["pid"][pick]),
        "Device ID": nullable_ints(g["dev"][pick]),
        "Context ID": pd.array([ctx.get(w) for w in wanted], dtype="Int64"),
    })


@rule("gpu_gaps", title="GPU Gaps", options={"gap": "minimum gap duration in ms (default 500)"},
      defaults={"gap": 500})
def gpu_gaps(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The gpu_gaps rule: GPU idle gaps longer than the threshold, per process and device."""
    table = _gaps_table(trace, _time_window(trace, opts), opts["gap"] * 1e6, opts["rows"])
    if table.empty:
        return _nothing("gpu_gaps", _GAP_COLUMNS, opts,
                        f"No GPU was idle for more than {opts['gap']:g} ms between operations"
                        + _missing_note(trace, ["kernels", "memcpy", "memset"]) + ".")
    explanation, fix = gaps_text(len(table), opts["gap"], float(table["Duration (ns)"].sum()),
                                 float(table["Duration (ns)"].max()), int(table["Start (ns)"].iloc[0]))
    return RuleResult("gpu_gaps", table, explanation, fix, opts)
