"""``cuda_memcpy_sync``: cudaMemcpy calls without Async that block the CPU thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.analyze import copy_calls
from engine.analysis.nsys.analyze.common import (
    _H2D,
    _MEMCPY_COLUMNS,
    SMALL_H2D_BYTES,
    RuleResult,
    _fmt_mb,
    _fmt_ms,
    _int_col,
    _missing_note,
    _nothing,
    _plural,
    _time_window,
)
from engine.analysis.nsys.analyze.copy_tables import (
    copy_table,
    found_rows,
    has_async,
    memcpy_calls,
    names_like,
)
from engine.analysis.nsys.analyze.registry import rule
from engine.reports.nsys.schema import MEMCPY

if TYPE_CHECKING:
    from engine.reports.base import Trace


def _sync_memcpy_call(name: str) -> bool:
    low = name.lower()
    return low.startswith("cudamemcpy") and "async" not in low


@rule("cuda_memcpy_sync", title="CUDA Synchronous Memcpy")
def cuda_memcpy_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The rule: synchronous copies that block the CPU, longest first."""
    import pandas as pd

    lacks_green = _lacks_green_context(trace)
    f = None if lacks_green else copy_calls.copies(
        trace, "memcpy", _sync_memcpy_call,
        f'NOT coalesce("copyKind" = {_H2D} AND "bytes" <= {SMALL_H2D_BYTES}, 0) '
        'AND NOT coalesce("srcDeviceId" = "dstDeviceId", 0)',
        _time_window(trace, opts), opts["rows"])
    if f is None:
        m = memcpy_calls(trace, opts)
        if not m.empty:
            small_h2d = (_int_col(m["copyKind"]) == _H2D) & (pd.to_numeric(m["bytes"]) <= SMALL_H2D_BYTES)
            src, dst = _int_col(m["srcDeviceId"]), _int_col(m["dstDeviceId"])
            same_device = (src == dst).fillna(False)
            m = m[
                names_like(m["apiName"], "cudaMemcpy") & ~has_async(m["apiName"])
                & ~small_h2d.fillna(False) & ~same_device
            ]
        f = found_rows(m)
    if f.n == 0:
        return _nothing("cuda_memcpy_sync", _MEMCPY_COLUMNS, opts,
                        "No synchronous cudaMemcpy call that blocks the CPU was found"
                        + _missing_note(trace, ["memcpy", "api"]) + ".")
    total_ns = f.total_ns
    n = f.n
    pageable = f.pageable
    explanation = (
        f"{_plural(n, 'synchronous cudaMemcpy call')} took {_fmt_ms(total_ns)} of copy time on the "
        f"GPU ({_fmt_mb(f.total_bytes)}"
        + (f", {pageable} of them with pageable host memory" if pageable else "")
        + "); each one blocks the calling CPU thread until the copy finishes, so the CPU cannot "
        "queue further work and copies cannot overlap kernels."
    )
    fix = (
        "Use pinned host memory (cudaMallocHost / cudaHostAlloc) and cudaMemcpyAsync on a "
        "non-default stream, synchronising once when the results are needed (PyTorch: "
        "pin_memory() and .to(device, non_blocking=True))."
    )
    if lacks_green:
        # nsys 2025.3 reports nothing for exports without the greenContextId column (schema 3.0,
        # nsys 2022.x). Agree with its table, and tell the user what it leaves out.
        return RuleResult(
            "cuda_memcpy_sync", copy_table(f.top.iloc[:0], _MEMCPY_COLUMNS, opts["rows"]),
            "nsys 2025.3 reports no rows for this older export (schema "
            f"{trace.info.schema_version}, no green-context column). Kernelscope found in it: "
            + explanation,
            fix, opts)
    return RuleResult("cuda_memcpy_sync", copy_table(f.top, _MEMCPY_COLUMNS, opts["rows"]),
                      explanation, fix, opts)


def _lacks_green_context(trace: Trace) -> bool:
    """True for nsys exports whose memcpy table has no greenContextId (nsys 2022.x, schema 3.0)."""
    columns = getattr(trace, "column_names", None)
    if columns is None:
        return False
    cols = columns(MEMCPY)
    return bool(cols) and "greenContextId" not in cols
