"""The rules over CUDA API calls: synchronous and pageable memcpy, synchronous memset, sync APIs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from engine.reports.base import Trace

from engine.analysis.nsys.analyze import fastcopies
from engine.analysis.nsys.analyze.apicalls import api_calls
from engine.analysis.nsys.analyze.common import (
    _API_COLUMNS,
    _H2D,
    _MANAGED,
    _MEMCPY_COLUMNS,
    _MEMSET_COLUMNS,
    _PAGEABLE,
    _PINNED,
    SMALL_H2D_BYTES,
    RuleResult,
    _by_duration,
    _fmt_mb,
    _fmt_ms,
    _green,
    _in_window,
    _int_col,
    _limit,
    _mb,
    _missing_note,
    _nothing,
    _plural,
    _time_window,
    _with_api,
    api_sync_text,
)
from engine.analysis.nsys.analyze.common import (
    sync_call as _sync_call,
)
from engine.analysis.nsys.analyze.common import (
    sync_memset_call as _sync_memset_call,
)


# -- rules -----------------------------------------------------------------------------------------
def _copy_table(merged: pd.DataFrame, columns: list[str], rows: int) -> pd.DataFrame:
    table = pd.DataFrame({
        "Duration (ns)": _int_col(merged["end"]) - _int_col(merged["start"]),
        "Start (ns)": _int_col(merged["start"]),
    })
    if "Src Kind" in columns:
        table["Src Kind"] = merged["srcKindName"].astype("object")
        table["Dst Kind"] = merged["dstKindName"].astype("object")
    else:
        table["Memory Kind"] = merged["memKindName"].astype("object")
    table["Bytes (MB)"] = _mb(merged["bytes"])
    table["PID"] = _int_col(merged["pid"])
    table["Device ID"] = _int_col(merged["deviceId"])
    table["Context ID"] = _int_col(merged["contextId"])
    table["Green Context ID"] = _green(merged["greenContextId"])
    table["Stream ID"] = _int_col(merged["streamId"])
    table["API Name"] = merged["apiName"].astype("object")
    # nsys keeps the join's order (API calls in table order) for equal durations.
    table = table.sort_values("Duration (ns)", ascending=False, kind="stable")
    return _limit(table, rows).reset_index(drop=True)


def _memory_call(name: str) -> bool:
    """cudaMemcpy* and cudaMemset* (case-insensitive, as SQLite's LIKE): what the copy rules keep."""
    return name.lower().startswith(("cudamemcpy", "cudamemset"))


def _memcpy_calls(trace: Trace, opts: dict[str, Any]) -> pd.DataFrame:
    memcpy = _in_window(trace.table("memcpy"), _time_window(trace, opts))
    if memcpy.empty:
        return memcpy.assign(apiName=pd.Series(dtype="object"))
    return _with_api(memcpy, api_calls(trace, _memory_call))


def _match_names(names: pd.Series, test: Any) -> pd.Series:
    """Apply a string test to the few distinct names, not to every row (800k calls stay fast)."""
    hits = [n for n in pd.unique(names.dropna()) if test(str(n))]
    return names.isin(hits)


def _names_like(names: pd.Series, prefix: str) -> pd.Series:
    """SQL-like ``prefix%``, case-insensitive as SQLite's LIKE."""
    low = prefix.lower()
    return _match_names(names, lambda n: n.lower().startswith(low))


def _has_async(names: pd.Series) -> pd.Series:
    return _match_names(names, lambda n: "async" in n.lower())


def _found(m: pd.DataFrame) -> fastcopies.Found:
    """The general path's joined rows as the fast path reports them."""
    pageable = 0
    if "srcKind" in m.columns and not m.empty:
        pageable = int(((_int_col(m["srcKind"]) == _PAGEABLE) | (_int_col(m["dstKind"]) == _PAGEABLE))
                       .fillna(False).sum())
    return fastcopies.Found(m, len(m), float((m["end"] - m["start"]).sum()) if len(m) else 0.0,
                            float(m["bytes"].sum()) if len(m) else 0.0, pageable)


def _async_memcpy_call(name: str) -> bool:
    low = name.lower()
    return low.startswith("cudamemcpy") and "async" in low


def _sync_memcpy_call(name: str) -> bool:
    low = name.lower()
    return low.startswith("cudamemcpy") and "async" not in low


def _rule_cuda_memcpy_async(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    window = _time_window(trace, opts)
    f = fastcopies.copies(trace, "memcpy", _async_memcpy_call,
                          f'"srcKind" = {_PAGEABLE} OR "dstKind" = {_PAGEABLE}', window, opts["rows"])
    if f is None:
        m = _memcpy_calls(trace, opts)
        if not m.empty:
            pageable = (_int_col(m["srcKind"]) == _PAGEABLE) | (_int_col(m["dstKind"]) == _PAGEABLE)
            m = m[_names_like(m["apiName"], "cudaMemcpy") & _has_async(m["apiName"])
                  & pageable.fillna(False)]
        f = _found(m)
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
    return RuleResult("cuda_memcpy_async", _copy_table(f.top, _MEMCPY_COLUMNS, opts["rows"]),
                      explanation, fix, opts)


def _rule_cuda_memcpy_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    lacks_green = _lacks_green_context(trace)
    f = None if lacks_green else fastcopies.copies(
        trace, "memcpy", _sync_memcpy_call,
        f'NOT coalesce("copyKind" = {_H2D} AND "bytes" <= {SMALL_H2D_BYTES}, 0) '
        'AND NOT coalesce("srcDeviceId" = "dstDeviceId", 0)',
        _time_window(trace, opts), opts["rows"])
    if f is None:
        m = _memcpy_calls(trace, opts)
        if not m.empty:
            small_h2d = (_int_col(m["copyKind"]) == _H2D) & (pd.to_numeric(m["bytes"]) <= SMALL_H2D_BYTES)
            src, dst = _int_col(m["srcDeviceId"]), _int_col(m["dstDeviceId"])
            same_device = (src == dst).fillna(False)
            m = m[
                _names_like(m["apiName"], "cudaMemcpy") & ~_has_async(m["apiName"])
                & ~small_h2d.fillna(False) & ~same_device
            ]
        f = _found(m)
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
            "cuda_memcpy_sync", _copy_table(f.top.iloc[:0], _MEMCPY_COLUMNS, opts["rows"]),
            "nsys 2025.3 reports no rows for this older export (schema "
            f"{trace.info.schema_version}, no green-context column). Kernelscope found in it: "
            + explanation,
            fix, opts)
    return RuleResult("cuda_memcpy_sync", _copy_table(f.top, _MEMCPY_COLUMNS, opts["rows"]),
                      explanation, fix, opts)


def _lacks_green_context(trace: Trace) -> bool:
    """True for nsys exports whose memcpy table has no greenContextId (nsys 2022.x, schema 3.0)."""
    columns = getattr(trace, "column_names", None)
    if columns is None:
        return False
    cols = columns("CUPTI_ACTIVITY_KIND_MEMCPY")
    return bool(cols) and "greenContextId" not in cols


def _rule_cuda_memset_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    window = _time_window(trace, opts)
    f = fastcopies.copies(trace, "memset", _sync_memset_call,
                          f'"memKind" IN ({_PINNED}, {_MANAGED})', window, opts["rows"])
    if f is None:
        memset = _in_window(trace.table("memset"), window)
        m = _with_api(memset, api_calls(trace, _memory_call)) \
            if not memset.empty else memset
        if not m.empty:
            kind = _int_col(m["memKind"])
            m = m[
                _names_like(m["apiName"], "cudaMemset") & ~_has_async(m["apiName"])
                & kind.isin([_PINNED, _MANAGED]).fillna(False)
            ]
        f = _found(m)
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
    return RuleResult("cuda_memset_sync", _copy_table(f.top, _MEMSET_COLUMNS, opts["rows"]),
                      explanation, fix, opts)


def _rule_cuda_api_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    window = _time_window(trace, opts)
    fast = fastcopies.api_sync(trace, _sync_call, window, opts["rows"])
    if fast is not None:
        table, n, total_ns, longest, counts = fast
        if n == 0:
            return _nothing("cuda_api_sync", _API_COLUMNS, opts,
                            "No cudaDeviceSynchronize or cudaStreamSynchronize call was found"
                            + _missing_note(trace, ["api"]) + ".")
        return _api_sync_result(table, n, total_ns, longest, counts, opts)
    api = _in_window(api_calls(trace, _sync_call), window)
    names = api["name"]
    calls = api[_names_like(names, "cudaDeviceSynchronize") | _names_like(names, "cudaStreamSynchronize")]
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
