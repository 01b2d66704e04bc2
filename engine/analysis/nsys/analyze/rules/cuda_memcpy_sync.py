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
    _missing_note,
    _nothing,
    _plural,
    _time_window,
)
from engine.analysis.nsys.analyze.registry import rule
from engine.reports.nsys.schema import MEMCPY
from engine.reports.trace_columns import NULL

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.base import Trace


def _blocking(ops: dict[str, Any]) -> npt.NDArray[np.bool_]:
    """Copies that block the CPU: not host-to-device copies of at most 64,000 bytes, not within a device."""
    nbytes, src = ops["bytes"], ops["srcDeviceId"]
    small_h2d = (ops["copyKind"] == _H2D) & (nbytes != NULL) & (nbytes <= SMALL_H2D_BYTES)
    same_device = (src != NULL) & (src == ops["dstDeviceId"])
    out: npt.NDArray[np.bool_] = ~small_h2d & ~same_device
    return out


def _sync_memcpy_call(name: str) -> bool:
    low = name.lower()
    return low.startswith("cudamemcpy") and "async" not in low


@rule("cuda_memcpy_sync", title="CUDA Synchronous Memcpy")
def cuda_memcpy_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The rule: synchronous copies that block the CPU, longest first."""
    lacks_green = _lacks_green_context(trace)
    f = copy_calls.copies(trace, "memcpy", _sync_memcpy_call, _blocking, _time_window(trace, opts),
                          opts["rows"], _MEMCPY_COLUMNS)
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
            "cuda_memcpy_sync", f.table.iloc[:0],
            "nsys 2025.3 reports no rows for this older export (schema "
            f"{trace.info.schema_version}, no green-context column). Kernelscope found in it: "
            + explanation,
            fix, opts)
    return RuleResult("cuda_memcpy_sync", f.table, explanation, fix, opts)


def _lacks_green_context(trace: Trace) -> bool:
    """True for nsys exports whose memcpy table has no greenContextId (nsys 2022.x, schema 3.0)."""
    columns = getattr(trace, "column_names", None)
    if columns is None:
        return False
    cols = columns(MEMCPY)
    return bool(cols) and "greenContextId" not in cols
