"""``gpu_time_util``: per process and device, chunks of the GPU time span under ``threshold`` % in use."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.analyze import gpu_activity
from engine.analysis.nsys.analyze.common import (
    _UTIL_COLUMNS,
    RuleResult,
    _int_col,
    _limit,
    _missing_note,
    _nothing,
    _time_window,
    util_text,
)
from engine.analysis.nsys.analyze.gpu_activity import low_records
from engine.analysis.nsys.analyze.registry import rule

if TYPE_CHECKING:
    from engine.reports.base import Trace


def _util_records(gs: list[gpu_activity.Group], chunks: int, threshold: float) -> list[dict[str, Any]]:
    """The low-use runs of each (pid, device), from its sorted starts and ends."""
    records: list[dict[str, Any]] = []
    for g in gs:
        if len(g.starts):
            records += low_records(int(g.starts[0]), int(g.ends[-1]), chunks, threshold,
                                    partial(gpu_activity.coverage, g), g.pid, g.dev, g.last_ctx)
    return records


@rule("gpu_time_util", title="GPU Time Utilization",
      options={"threshold": "report chunks whose in-use percentage is below this (default 50)",
               "chunks": "number of equal chunks per process and device, 1 to 1000 (default 30)"},
      defaults={"threshold": 50, "chunks": 30})
def gpu_time_util(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The gpu_time_util rule: time windows where GPU utilisation is below the threshold."""
    import pandas as pd

    window = _time_window(trace, opts)
    records = _util_records(gpu_activity.groups(trace, window), opts["chunks"], opts["threshold"])
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
