"""``cuda_api_sync``: cudaDeviceSynchronize* and cudaStreamSynchronize* calls: the CPU waits for the GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.analyze import copy_calls
from engine.analysis.nsys.analyze.apicalls import api_calls
from engine.analysis.nsys.analyze.common import (
    _API_COLUMNS,
    RuleResult,
    _by_duration,
    _in_window,
    _int_col,
    _limit,
    _missing_note,
    _nothing,
    _time_window,
    api_sync_text,
    sync_call,
)
from engine.analysis.nsys.analyze.copy_tables import (
    names_like,
)
from engine.analysis.nsys.analyze.registry import rule

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


@rule("cuda_api_sync", title="CUDA Synchronization APIs")
def cuda_api_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The rule: synchronization calls, longest first."""
    import pandas as pd

    window = _time_window(trace, opts)
    fast = copy_calls.api_sync(trace, sync_call, window, opts["rows"])
    if fast is not None:
        table, n, total_ns, longest, counts = fast
        if n == 0:
            return _nothing("cuda_api_sync", _API_COLUMNS, opts,
                            "No cudaDeviceSynchronize or cudaStreamSynchronize call was found"
                            + _missing_note(trace, ["api"]) + ".")
        return _api_sync_result(table, n, total_ns, longest, counts, opts)
    api = _in_window(api_calls(trace, sync_call), window)
    names = api["name"]
    calls = api[names_like(names, "cudaDeviceSynchronize") | names_like(names, "cudaStreamSynchronize")]
    if calls.empty:
        return _nothing("cuda_api_sync", _API_COLUMNS, opts,
                        "No cudaDeviceSynchronize or cudaStreamSynchronize call was found"
                        + _missing_note(trace, ["api"]) + ".")
    table = pd.DataFrame({
        "Duration (ns)": _int_col(calls["end"]) - _int_col(calls["start"]),
        "Start (ns)": _int_col(calls["start"]),
        "PID": _int_col(calls["pid"]),
        "TID": _int_col(calls["tid"]),
        "API Name": calls["name"].astype("object"),
    })
    per_name = calls["baseName"].fillna(calls["name"]).value_counts()
    return _api_sync_result(
        _limit(_by_duration(table), opts["rows"]).reset_index(drop=True), len(calls),
        float(table["Duration (ns)"].sum()), float(table["Duration (ns)"].max()),
        {str(k): int(v) for k, v in per_name.items()}, opts)


def _api_sync_result(table: pd.DataFrame, n: int, total_ns: float, longest: float,
                     counts: dict[str, int], opts: dict[str, Any]) -> RuleResult:

    explanation, fix = api_sync_text(n, total_ns, longest, counts)
    return RuleResult("cuda_api_sync", table, explanation, fix, opts)
