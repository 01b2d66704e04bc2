"""``cuda_memcpy_async``: cudaMemcpy*Async calls with a pageable side (not asynchronous then)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.analyze import copy_calls
from engine.analysis.nsys.analyze.common import (
    _MEMCPY_COLUMNS,
    _PAGEABLE,
    RuleResult,
    _fmt_mb,
    _fmt_ms,
    _missing_note,
    _nothing,
    _plural,
    _time_window,
)
from engine.analysis.nsys.analyze.registry import rule

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.base import Trace


def _pageable(ops: dict[str, Any]) -> npt.NDArray[np.bool_]:
    """Copies with a pageable side."""
    out: npt.NDArray[np.bool_] = (ops["srcKind"] == _PAGEABLE) | (ops["dstKind"] == _PAGEABLE)
    return out


def _async_memcpy_call(name: str) -> bool:
    low = name.lower()
    return low.startswith("cudamemcpy") and "async" in low


@rule("cuda_memcpy_async", title="CUDA Async Memcpy with Pageable Memory")
def cuda_memcpy_async(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    """The rule: pageable asynchronous copies, longest first."""
    window = _time_window(trace, opts)
    f = copy_calls.copies(trace, "memcpy", _async_memcpy_call, _pageable, window, opts["rows"],
                          _MEMCPY_COLUMNS)
    if f.n == 0:
        return _nothing("cuda_memcpy_async", _MEMCPY_COLUMNS, opts,
                        "No asynchronous cudaMemcpy*Async call touched pageable host memory"
                        + _missing_note(trace, ["memcpy", "api"]) + ".")
    total_ns = f.total_ns
    n = f.n
    explanation = (
        f"{_plural(n, 'cudaMemcpyAsync call')} copied {_fmt_mb(f.total_bytes)} to or from "
        f"pageable host memory, taking {_fmt_ms(total_ns)} of copy time on the GPU; with pageable "
        "memory the driver stages the data through a pinned buffer, so these copies are not "
        "asynchronous: the CPU thread blocks and the copies cannot overlap kernels."
    )
    fix = (
        "Allocate the host buffers as pinned memory (cudaMallocHost / cudaHostAlloc, or "
        "tensor.pin_memory() in PyTorch) and keep cudaMemcpyAsync on a non-default stream, so "
        "copies run asynchronously and overlap compute."
    )
    return RuleResult("cuda_memcpy_async", f.table, explanation, fix, opts)
