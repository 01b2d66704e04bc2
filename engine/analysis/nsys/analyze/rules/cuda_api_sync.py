"""``cuda_api_sync``: cudaDeviceSynchronize* and cudaStreamSynchronize* calls: the CPU waits for the GPU."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.analyze.common import (
    _API_COLUMNS,
    RuleResult,
    _missing_note,
    _nothing,
    _time_window,
    api_sync_text,
    call_names,
    nullable_ints,
    sync_call,
    window_filter,
)
from engine.analysis.nsys.analyze.copy_calls import top_rows
from engine.analysis.nsys.analyze.registry import rule
from engine.reports.trace_columns import NULL, name_in

if TYPE_CHECKING:
    from engine.reports.base import Trace

#: a call's version suffix (cudaStreamSynchronize_v3020): counted by base name
_SUFFIX = re.compile(r"_v\d{4}$")


@rule("cuda_api_sync", title="CUDA Synchronization APIs")
def cuda_api_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The rule: synchronization calls, longest first (ties: process, start, table order)."""
    import pandas as pd

    names = call_names(trace, sync_call)
    where = window_filter(_time_window(trace, opts), name_in(names))
    cols = trace.columns("api", ["start", "end", "pid", "tid", "nameId"], where=where) if names else None
    if cols is None or not len(cols["start"]):
        return _nothing("cuda_api_sync", _API_COLUMNS, opts,
                        "No cudaDeviceSynchronize or cudaStreamSynchronize call was found"
                        + _missing_note(trace, ["api"]) + ".")
    start, end, pid = cols["start"], cols["end"], cols["pid"]
    dur = np.where((start == NULL) | (end == NULL), NULL, end - start)
    big = np.iinfo(np.int64).max  # a missing value sorts last
    pick = top_rows([np.arange(len(dur)), np.where(start == NULL, big, start),
                     np.where(pid == NULL, big, pid)], np.where(dur == NULL, big, -dur), opts["rows"])
    table = pd.DataFrame({
        "Duration (ns)": nullable_ints(dur[pick]),
        "Start (ns)": nullable_ints(start[pick]),
        "PID": nullable_ints(pid[pick]),
        "TID": nullable_ints(cols["tid"][pick]),
        "API Name": pd.Series([names[int(i)] for i in cols["nameId"][pick].tolist()], dtype="object"),
    })
    counts: dict[str, int] = {}
    uniq, first, cnt = np.unique(cols["nameId"], return_index=True, return_counts=True)
    for j in np.lexsort((first, -cnt)).tolist():
        base = _SUFFIX.sub("", names[int(uniq[j])])
        counts[base] = counts.get(base, 0) + int(cnt[j])
    timed = dur[dur != NULL]
    explanation, fix = api_sync_text(len(dur), float(timed.sum()), float(timed.max()) if len(timed) else 0.0,
                                     counts)
    return RuleResult("cuda_api_sync", table, explanation, fix, opts)
