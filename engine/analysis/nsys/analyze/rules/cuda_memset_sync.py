"""``cuda_memset_sync``: cudaMemset calls without Async on pinned or managed memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.analyze import copy_calls
from engine.analysis.nsys.analyze.apicalls import api_calls
from engine.analysis.nsys.analyze.common import (
    _MANAGED,
    _MEMSET_COLUMNS,
    _PINNED,
    RuleResult,
    _fmt_ms,
    _in_window,
    _int_col,
    _missing_note,
    _nothing,
    _plural,
    _time_window,
    _with_api,
    sync_memset_call,
)
from engine.analysis.nsys.analyze.copy_tables import (
    copy_table,
    found_rows,
    has_async,
    memory_call,
    names_like,
)
from engine.analysis.nsys.analyze.registry import rule

if TYPE_CHECKING:
    from engine.reports.base import Trace


@rule("cuda_memset_sync", title="CUDA Synchronous Memset")
def cuda_memset_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The rule: synchronous memsets on pinned or managed memory, longest first."""
    window = _time_window(trace, opts)
    f = copy_calls.copies(trace, "memset", sync_memset_call,
                          f'"memKind" IN ({_PINNED}, {_MANAGED})', window, opts["rows"])
    if f is None:
        memset = _in_window(trace.table("memset"), window)
        m = _with_api(memset, api_calls(trace, memory_call)) \
            if not memset.empty else memset
        if not m.empty:
            kind = _int_col(m["memKind"])
            m = m[
                names_like(m["apiName"], "cudaMemset") & ~has_async(m["apiName"])
                & kind.isin([_PINNED, _MANAGED]).fillna(False)
            ]
        f = found_rows(m)
    if f.n == 0:
        return _nothing("cuda_memset_sync", _MEMSET_COLUMNS, opts,
                        "No synchronous cudaMemset on pinned or managed memory was found"
                        + _missing_note(trace, ["memset", "api"]) + ".")
    total_ns = f.total_ns
    explanation = (
        f"{_plural(f.n, 'synchronous cudaMemset call')} on pinned or managed memory took "
        f"{_fmt_ms(total_ns)} on the GPU; on such memory cudaMemset blocks the CPU thread until "
        "the GPU has finished."
    )
    fix = (
        "Use cudaMemsetAsync on a stream (or set the buffer on the device inside a kernel), and "
        "synchronise only when the host needs the result."
    )
    return RuleResult("cuda_memset_sync", copy_table(f.top, _MEMSET_COLUMNS, opts["rows"]),
                      explanation, fix, opts)
