"""``cuda_memset_sync``: cudaMemset calls without Async on pinned or managed memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.analyze import copy_calls
from engine.analysis.nsys.analyze.common import (
    _MEMSET_COLUMNS,
    RuleResult,
    _fmt_ms,
    _missing_note,
    _nothing,
    _plural,
    _time_window,
    pinned_or_managed,
    sync_memset_call,
)
from engine.analysis.nsys.analyze.registry import rule

if TYPE_CHECKING:
    from engine.reports.base import Trace


@rule("cuda_memset_sync", title="CUDA Synchronous Memset")
def cuda_memset_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The rule: synchronous memsets on pinned or managed memory, longest first."""
    window = _time_window(trace, opts)
    f = copy_calls.copies(trace, "memset", sync_memset_call, pinned_or_managed, window, opts["rows"],
                          _MEMSET_COLUMNS)
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
    return RuleResult("cuda_memset_sync", f.table, explanation, fix, opts)
