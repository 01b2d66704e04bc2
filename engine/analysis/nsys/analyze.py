"""Expert-system rules over a trace, agreeing with ``nsys analyze`` (Nsight Systems 2025.3).

Each rule looks for one pattern that wastes time (synchronous copies, pageable memory, host
synchronisation, idle GPU stretches), returns the offending records as a table with the columns
``nsys analyze -r <rule> --format csv`` prints, and says in plain words what it found and how to fix
it. The behaviour was worked out from NVIDIA's documented rule descriptions, the oracle CSVs made by
nsys 2025.3 and experiments with ``nsys analyze`` on the fixtures; the code is our own.

What nsys does, in short (the details that decide the output):

* Memory-copy rules join each GPU copy with its runtime call (same ``correlationId`` and process).
  ``cuda_memcpy_async`` takes ``cudaMemcpy*Async*`` calls whose copy has a pageable side;
  ``cuda_memcpy_sync`` takes ``cudaMemcpy*`` calls without ``Async`` except host-to-device copies of
  at most 64,000 bytes (nsys's "64 KB" is decimal) and copies whose source and destination device are
  the same. Driver calls (``cuMemcpy*``) are not considered. Sorted by GPU duration, longest first.
* ``cuda_memset_sync``: ``cudaMemset*`` calls without ``Async`` on pinned or managed memory.
* ``cuda_api_sync``: ``cudaDeviceSynchronize*`` and ``cudaStreamSynchronize*`` calls (not the
  driver's ``cuCtxSynchronize``/``cuStreamSynchronize``, not event synchronisation).
* ``gpu_gaps``: per process and device, idle stretches between GPU operations (kernels, copies,
  memsets) strictly longer than ``gap`` ms; the context shown is that of the operation before the
  gap. Sorted by duration, longest first.
* ``gpu_time_util``: per process and device, the span from the first operation's start to the last
  one's end is cut into ``chunks`` chunks of ``ceil(span / chunks)`` ns (the last one clipped to the
  span); busy time of overlapping operations adds up; chunks under ``threshold`` % are kept, and
  consecutive ones are merged into one row whose percentage is busy time over merged duration. The
  ``rows`` limit takes merged rows in order of their first chunk's index, and the result is then
  sorted by in-use percentage as printed (0.1 %), lowest first, ties in chunk order. The context
  shown is that of the operation that ends last in the group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    from engine.reports.base import Trace

#: Rule name -> one-line description (names as ``nsys analyze`` 2023+ spells them).
RULES: dict[str, str] = {
    "cuda_memcpy_async": "CUDA Async Memcpy with Pageable Memory",
    "cuda_memcpy_sync": "CUDA Synchronous Memcpy",
    "cuda_memset_sync": "CUDA Synchronous Memset",
    "cuda_api_sync": "CUDA Synchronization APIs",
    "gpu_gaps": "GPU Gaps",
    "gpu_time_util": "GPU Time Utilization",
}

#: Older (nsys 2022.x) rule names accepted as aliases.
ALIASES: dict[str, str] = {
    "cuda-async-memcpy": "cuda_memcpy_async",
    "cuda-sync-memcpy": "cuda_memcpy_sync",
    "cuda-sync-memset": "cuda_memset_sync",
    "cuda-sync-api": "cuda_api_sync",
    "gpu-starv": "gpu_gaps",
    "gpu-low-util": "gpu_time_util",
}

_COMMON_OPTIONS = {
    "rows": "maximum number of rows returned (default 50; a negative value means no limit)",
    "start": "start time in ns: only records starting at or after it",
    "end": "end time in ns: only records ending at or before it",
    "nvtx": "range[@domain]: only records inside the first NVTX range with that text",
}

#: Rule name -> {option: help}.
RULE_OPTIONS: dict[str, dict[str, str]] = {
    "cuda_memcpy_async": dict(_COMMON_OPTIONS),
    "cuda_memcpy_sync": dict(_COMMON_OPTIONS),
    "cuda_memset_sync": dict(_COMMON_OPTIONS),
    "cuda_api_sync": dict(_COMMON_OPTIONS),
    "gpu_gaps": {**_COMMON_OPTIONS, "gap": "minimum gap duration in ms (default 500)"},
    "gpu_time_util": {
        **_COMMON_OPTIONS,
        "threshold": "report chunks whose in-use percentage is below this (default 50)",
        "chunks": "number of equal chunks per process and device, 1 to 1000 (default 30)",
    },
}

_DEFAULTS: dict[str, Any] = {"rows": 50, "gap": 500, "threshold": 50, "chunks": 30}

#: Host-to-device copies of at most this many bytes return early even from pageable memory.
SMALL_H2D_BYTES = 64_000

_MEMCPY_COLUMNS = [
    "Duration (ns)", "Start (ns)", "Src Kind", "Dst Kind", "Bytes (MB)", "PID", "Device ID",
    "Context ID", "Green Context ID", "Stream ID", "API Name",
]
_MEMSET_COLUMNS = [
    "Duration (ns)", "Start (ns)", "Memory Kind", "Bytes (MB)", "PID", "Device ID", "Context ID",
    "Green Context ID", "Stream ID", "API Name",
]
_API_COLUMNS = ["Duration (ns)", "Start (ns)", "PID", "TID", "API Name"]
_GAP_COLUMNS = ["Row#", "Duration (ns)", "Start (ns)", "PID", "Device ID", "Context ID"]
_UTIL_COLUMNS = [
    "Row#", "In-Use (%)", "Duration (ns)", "Start (ns)", "PID", "Device ID", "Context ID",
]
#: Float columns and the number of decimals nsys prints.
_DECIMALS = {"Bytes (MB)": 3, "In-Use (%)": 1}
_PINNED, _MANAGED, _PAGEABLE = 1, 4, 0
_H2D = 1


@dataclass
class RuleResult:
    """What one rule found.

    Attributes:
        name: the rule's name (a key of :data:`RULES`).
        table: the offending records, with nsys's column names; empty (with columns) if none.
        explanation: a plain sentence saying what was found and why it costs time.
        fix: a concrete way to remove the problem; empty when nothing was found.
        options: the option values the rule ran with.

    """

    name: str
    table: pd.DataFrame
    explanation: str
    fix: str
    options: dict[str, Any] = field(default_factory=dict)


# -- option handling -----------------------------------------------------------------------------
def canonical_rule_name(name: str) -> str:
    """Return the rule's canonical name, accepting nsys 2022 aliases (``gpu-starv`` ...).

    Raises:
        KernelscopeError: the rule is unknown.

    """
    key = name.strip()
    key = ALIASES.get(key, key)
    if key not in RULES:
        raise KernelscopeError(
            f"Unknown rule {name!r}; the rules are: {', '.join(RULES)}."
        )
    return key


def parse_rule_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split an nsys-style rule spec ``rule[:key=value...]`` into its name and options.

    Example: ``parse_rule_spec("gpu_gaps:gap=100")`` returns ``("gpu_gaps", {"gap": "100"})``.
    Values stay strings; :func:`run_rule` converts and checks them.

    Raises:
        KernelscopeError: the rule or an option is unknown, or an option has no ``=value``.

    """
    name, *parts = spec.strip().split(":")
    rule = canonical_rule_name(name)
    options: dict[str, str] = {}
    for part in parts:
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise KernelscopeError(
                f"Rule option {part!r} in {spec!r} is not of the form key=value "
                f"(for example {rule}:rows=10)."
            )
        _check_option_name(rule, key)
        options[key] = value.strip()
    return rule, options


def _check_option_name(rule: str, key: str) -> None:
    if key not in RULE_OPTIONS[rule]:
        raise KernelscopeError(
            f"Rule {rule} has no option {key!r}; its options are: "
            f"{', '.join(RULE_OPTIONS[rule])}."
        )


def _number(rule: str, key: str, value: Any, *, integer: bool) -> float:
    try:
        num = float(value)
        if math.isnan(num) or (integer and num != int(num)):
            raise ValueError
    except (TypeError, ValueError):
        kind = "an integer" if integer else "a number"
        raise KernelscopeError(
            f"Option {key}={value!r} of rule {rule} must be {kind}."
        ) from None
    return num


def _resolve_options(rule: str, options: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in _DEFAULTS.items() if k in RULE_OPTIONS[rule]}
    for key, value in options.items():
        _check_option_name(rule, key)
        if value is None:
            continue
        if key == "nvtx":
            out[key] = str(value)
        elif key in ("rows", "start", "end"):
            out[key] = int(_number(rule, key, value, integer=True))
        elif key == "chunks":
            chunks = int(_number(rule, key, value, integer=True))
            if not 1 <= chunks <= 1000:
                raise KernelscopeError(
                    f"Option chunks={value} of rule {rule} must be between 1 and 1000."
                )
            out[key] = chunks
        else:  # gap (ms), threshold (%)
            out[key] = _number(rule, key, value, integer=False)
    return out


def _time_window(trace: Trace, opts: dict[str, Any]) -> tuple[int | None, int | None]:
    """The [start, end] filter: explicit times win over the NVTX range's times."""
    start, end = opts.get("start"), opts.get("end")
    spec = opts.get("nvtx")
    if spec:
        text, _, domain = spec.partition("@")
        nvtx = trace.table("nvtx")
        hit = nvtx[(nvtx["text"] == text) & (nvtx["domain"].fillna("") == domain)]
        hit = hit[hit["end"].notna()].sort_values("start", kind="stable")
        if hit.empty:
            raise KernelscopeError(
                f"No NVTX range {spec!r} was found in this trace; check the range text "
                "(and add @domain for ranges outside the default domain)."
            )
        first = hit.iloc[0]
        start = int(first["start"]) if start is None else start
        end = int(first["end"]) if end is None else end
    return start, end


def _in_window(df: pd.DataFrame, window: tuple[int | None, int | None]) -> pd.DataFrame:
    start, end = window
    if start is not None:
        df = df[df["start"] >= start]
    if end is not None:
        df = df[df["end"] <= end]
    return df


def _limit(df: pd.DataFrame, rows: int) -> pd.DataFrame:
    return df if rows < 0 else df.head(rows)


# -- shared data preparation -----------------------------------------------------------------------
def _int_col(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce").astype("Int64")


def _op_pids(ops: pd.DataFrame, api: pd.DataFrame) -> pd.Series:
    """The process of each GPU op: from globalPid (nsys), else from its API call (Kineto).

    Kineto puts GPU activity in a per-device "pid" lane, so the launching process is found through
    the runtime call with the same correlation id.
    """
    pid = _int_col(ops["pid"])
    no_gpid = ops["globalPid"].isna()
    if no_gpid.any() and not api.empty:
        calls = api[api["correlationId"].notna()]
        corr = _int_col(calls["correlationId"])
        first = ~corr.duplicated()
        by_corr = pd.Series(_int_col(calls["pid"])[first].to_numpy(), index=corr[first].to_numpy())
        mapped = _int_col(_int_col(ops["correlationId"]).map(by_corr))
        pid = pid.where(~(no_gpid & mapped.notna()).to_numpy(), mapped)
    return pid


def _with_api(ops: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Join GPU ops with their API call on (correlationId, process); Kineto: correlationId only."""
    ops = ops.copy()
    ops["correlationId"] = _int_col(ops["correlationId"])
    calls = api[["correlationId", "pid", "name"]].copy()
    calls["correlationId"] = _int_col(calls["correlationId"])
    calls["pid"] = _int_col(calls["pid"])
    calls = calls.rename(columns={"name": "apiName", "pid": "apiPid"})
    if ops["globalPid"].notna().all():
        ops["pid"] = _int_col(ops["pid"])
        calls = calls.drop_duplicates(["correlationId", "apiPid"])
        merged = ops.merge(
            calls, left_on=["correlationId", "pid"], right_on=["correlationId", "apiPid"],
            how="inner",
        )
    else:
        calls = calls.drop_duplicates("correlationId")
        merged = ops.merge(calls, on="correlationId", how="inner")
        merged["pid"] = merged["apiPid"]
    return merged


def _green(s: pd.Series) -> pd.Series:
    """Print no green context (empty field) when the id is 0 or absent."""
    g = _int_col(s)
    return g.where(g != 0)


def _mb(nbytes: pd.Series) -> pd.Series:
    return (pd.to_numeric(nbytes, errors="coerce") / 1e6).round(3)


def _by_duration(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["Duration (ns)", "Start (ns)"], ascending=[False, True], kind="stable")


def _fmt_ms(ns: float) -> str:
    """A duration for people: ms, or µs below 0.1 ms."""
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e5 else f"{ns / 1e3:,.1f} µs"


def _fmt_mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.1f} MB" if nbytes < 1e9 else f"{nbytes / 1e9:,.2f} GB"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


def _missing_note(trace: Trace, tables: list[str]) -> str:
    notes = [trace.missing[t] for t in tables if t in trace.missing]
    return f" (note: {'; '.join(notes)})" if notes else ""


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
    return _limit(_by_duration(table), rows).reset_index(drop=True)


def _memcpy_calls(trace: Trace, opts: dict[str, Any]) -> pd.DataFrame:
    memcpy = _in_window(trace.table("memcpy"), _time_window(trace, opts))
    if memcpy.empty:
        return memcpy.assign(apiName=pd.Series(dtype="object"))
    return _with_api(memcpy, trace.table("api"))


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


def _rule_cuda_memcpy_async(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    m = _memcpy_calls(trace, opts)
    if not m.empty:
        pageable = (_int_col(m["srcKind"]) == _PAGEABLE) | (_int_col(m["dstKind"]) == _PAGEABLE)
        m = m[_names_like(m["apiName"], "cudaMemcpy") & _has_async(m["apiName"]) & pageable.fillna(False)]
    if m.empty:
        return _nothing("cuda_memcpy_async", _MEMCPY_COLUMNS, opts,
                        "No asynchronous cudaMemcpy*Async call touched pageable host memory"
                        + _missing_note(trace, ["memcpy", "api"]) + ".")
    total_ns = float((m["end"] - m["start"]).sum())
    n = len(m)
    explanation = (
        f"{_plural(n, 'cudaMemcpyAsync call')} copied {_fmt_mb(float(m['bytes'].sum()))} to or from "
        f"pageable host memory, taking {_fmt_ms(total_ns)} of copy time on the GPU; with pageable "
        "memory the driver stages the data through a pinned buffer, so these copies are not "
        "asynchronous: the CPU thread blocks and the copies cannot overlap kernels."
    )
    fix = (
        "Allocate the host buffers as pinned memory (cudaMallocHost / cudaHostAlloc, or "
        "tensor.pin_memory() in PyTorch) and keep cudaMemcpyAsync on a non-default stream, so "
        "copies run asynchronously and overlap compute."
    )
    return RuleResult("cuda_memcpy_async", _copy_table(m, _MEMCPY_COLUMNS, opts["rows"]),
                      explanation, fix, opts)


def _rule_cuda_memcpy_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    m = _memcpy_calls(trace, opts)
    if not m.empty:
        small_h2d = (_int_col(m["copyKind"]) == _H2D) & (pd.to_numeric(m["bytes"]) <= SMALL_H2D_BYTES)
        src, dst = _int_col(m["srcDeviceId"]), _int_col(m["dstDeviceId"])
        same_device = (src == dst).fillna(False)
        m = m[
            _names_like(m["apiName"], "cudaMemcpy") & ~_has_async(m["apiName"])
            & ~small_h2d.fillna(False) & ~same_device
        ]
    if m.empty:
        return _nothing("cuda_memcpy_sync", _MEMCPY_COLUMNS, opts,
                        "No synchronous cudaMemcpy call that blocks the CPU was found"
                        + _missing_note(trace, ["memcpy", "api"]) + ".")
    total_ns = float((m["end"] - m["start"]).sum())
    n = len(m)
    pageable = int(((_int_col(m["srcKind"]) == _PAGEABLE) | (_int_col(m["dstKind"]) == _PAGEABLE))
                   .fillna(False).sum())
    explanation = (
        f"{_plural(n, 'synchronous cudaMemcpy call')} took {_fmt_ms(total_ns)} of copy time on the "
        f"GPU ({_fmt_mb(float(m['bytes'].sum()))}"
        + (f", {pageable} of them with pageable host memory" if pageable else "")
        + "); each one blocks the calling CPU thread until the copy finishes, so the CPU cannot "
        "queue further work and copies cannot overlap kernels."
    )
    fix = (
        "Use pinned host memory (cudaMallocHost / cudaHostAlloc) and cudaMemcpyAsync on a "
        "non-default stream, synchronising once when the results are needed (PyTorch: "
        "pin_memory() and .to(device, non_blocking=True))."
    )
    if _lacks_green_context(trace):
        # nsys 2025.3 reports nothing for exports without the greenContextId column (schema 3.0,
        # nsys 2022.x). Agree with its table, and tell the user what it leaves out.
        return RuleResult(
            "cuda_memcpy_sync", _copy_table(m.iloc[:0], _MEMCPY_COLUMNS, opts["rows"]),
            "nsys 2025.3 reports no rows for this older export (schema "
            f"{trace.info.schema_version}, no green-context column). Kernelscope found in it: "
            + explanation,
            fix, opts)
    return RuleResult("cuda_memcpy_sync", _copy_table(m, _MEMCPY_COLUMNS, opts["rows"]),
                      explanation, fix, opts)


def _lacks_green_context(trace: Trace) -> bool:
    """True for nsys exports whose memcpy table has no greenContextId (nsys 2022.x, schema 3.0)."""
    columns = getattr(trace, "columns", None)
    if columns is None:
        return False
    cols = columns("CUPTI_ACTIVITY_KIND_MEMCPY")
    return bool(cols) and "greenContextId" not in cols


def _rule_cuda_memset_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    memset = _in_window(trace.table("memset"), _time_window(trace, opts))
    m = _with_api(memset, trace.table("api")) if not memset.empty else memset
    if not m.empty:
        kind = _int_col(m["memKind"])
        m = m[
            _names_like(m["apiName"], "cudaMemset") & ~_has_async(m["apiName"])
            & kind.isin([_PINNED, _MANAGED]).fillna(False)
        ]
    if m.empty:
        return _nothing("cuda_memset_sync", _MEMSET_COLUMNS, opts,
                        "No synchronous cudaMemset on pinned or managed memory was found"
                        + _missing_note(trace, ["memset", "api"]) + ".")
    total_ns = float((m["end"] - m["start"]).sum())
    explanation = (
        f"{_plural(len(m), 'synchronous cudaMemset call')} on pinned or managed memory took "
        f"{_fmt_ms(total_ns)} on the GPU; on such memory cudaMemset blocks the CPU thread until "
        "the GPU has finished."
    )
    fix = (
        "Use cudaMemsetAsync on a stream (or set the buffer on the device inside a kernel), and "
        "synchronise only when the host needs the result."
    )
    return RuleResult("cuda_memset_sync", _copy_table(m, _MEMSET_COLUMNS, opts["rows"]),
                      explanation, fix, opts)


def _rule_cuda_api_sync(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    api = _in_window(trace.table("api"), _time_window(trace, opts))
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
    total_ns = float(table["Duration (ns)"].sum())
    counts = calls["baseName"].fillna(calls["name"]).value_counts()
    which = ", ".join(f"{c} {n}" for n, c in counts.items())
    explanation = (
        f"{_plural(len(calls), 'synchronization call')} ({which}) blocked the CPU for "
        f"{_fmt_ms(total_ns)} in total, longest {_fmt_ms(float(table['Duration (ns)'].max()))}; "
        "while the CPU waits it cannot launch more work, and the GPU idles once its queue drains."
    )
    fix = (
        "Remove synchronisations that are not needed; where the host needs a result, wait on a "
        "cudaEvent for just that work (cudaStreamWaitEvent between streams) instead of the whole "
        "device, and keep enough work queued ahead (in PyTorch avoid .item() / .cpu() inside loops)."
    )
    return RuleResult("cuda_api_sync", _limit(_by_duration(table), opts["rows"]).reset_index(drop=True),
                      explanation, fix, opts)


def _gpu_ops(trace: Trace, window: tuple[int | None, int | None]) -> pd.DataFrame:
    """All GPU operations (kernels, copies, memsets) with integer start/end, pid, device, context."""
    api = trace.table("api")
    parts = []
    for name in ("kernels", "memcpy", "memset"):
        df = trace.table(name)
        if df.empty:
            continue
        parts.append(pd.DataFrame({
            "start": pd.to_numeric(df["start"]).astype("int64"),
            "end": pd.to_numeric(df["end"]).astype("int64"),
            "pid": _op_pids(df, api),
            "deviceId": _int_col(df["deviceId"]),
            "contextId": _int_col(df["contextId"]),
        }))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in
                             ("start", "end", "pid", "deviceId", "contextId")})
    return _in_window(pd.concat(parts, ignore_index=True), window)


def _rule_gpu_gaps(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    ops = _gpu_ops(trace, _time_window(trace, opts))
    threshold_ns = opts["gap"] * 1e6
    table = _empty(_GAP_COLUMNS)
    if not ops.empty:
        ops = ops.sort_values(["pid", "deviceId", "start", "end"], kind="stable",
                              na_position="last").reset_index(drop=True)
        keys = [ops["pid"].fillna(-1), ops["deviceId"].fillna(-1)]
        # The GPU is idle from the latest end so far (ops may overlap) to the next op's start.
        busy_until = ops["end"].groupby(keys).cummax()
        prev_end = busy_until.groupby(keys).shift(1)
        # The context of the op that reached that latest end.
        reached = ops["end"] == busy_until
        prev_ctx = ops["contextId"].where(reached).groupby(keys).ffill().groupby(keys).shift(1)
        gap = ops["start"] - prev_end
        hit = gap.notna() & (gap > 0) & (gap > threshold_ns)
        found = pd.DataFrame({
            "Duration (ns)": _int_col(gap[hit]),
            "Start (ns)": _int_col(prev_end[hit]),
            "PID": ops["pid"][hit],
            "Device ID": ops["deviceId"][hit],
            "Context ID": _int_col(prev_ctx[hit]),
        })
        found = _limit(_by_duration(found), opts["rows"]).reset_index(drop=True)
        found.insert(0, "Row#", pd.Series(np.arange(1, len(found) + 1), dtype="Int64"))
        table = found if not found.empty else table
    if table.empty:
        return _nothing("gpu_gaps", _GAP_COLUMNS, opts,
                        f"No GPU was idle for more than {opts['gap']:g} ms between operations"
                        + _missing_note(trace, ["kernels", "memcpy", "memset"]) + ".")
    total = float(table["Duration (ns)"].sum())
    explanation = (
        f"{_plural(len(table), 'GPU gap')} longer than {opts['gap']:g} ms left the GPU idle for "
        f"{_fmt_ms(total)} in total (longest {_fmt_ms(float(table['Duration (ns)'].max()))}, "
        f"starting at {int(table['Start (ns)'].iloc[0]) / 1e9:.3f} s); no GPU work was queued then, "
        "typically because the CPU was busy with setup, I/O, allocation or synchronisation."
    )
    fix = (
        "Look at what the CPU threads do during these gaps (NVTX ranges, OS runtime calls): move "
        "setup, data loading and allocation out of the loop or onto other threads, prefetch the "
        "next inputs while the GPU computes, and avoid host synchronisation that drains the queue."
    )
    return RuleResult("gpu_gaps", table, explanation, fix, opts)


def _coverage(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total busy time of all [start, end) intervals before each time ``t`` (overlaps add up)."""
    s = np.sort(starts)
    e = np.sort(ends)
    cs = np.concatenate(([0], np.cumsum(s)))
    ce = np.concatenate(([0], np.cumsum(e)))
    ns = np.searchsorted(s, t, side="left")
    ne = np.searchsorted(e, t, side="left")
    covered: np.ndarray = (ns * t - cs[ns]) - (ne * t - ce[ne])
    return covered


def _util_records(ops: pd.DataFrame, chunks: int, threshold: float) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for (pid, dev), g in ops.groupby(["pid", "deviceId"], sort=True, dropna=False):
        lo, hi = int(g["start"].min()), int(g["end"].max())
        span = hi - lo
        if span <= 0:
            continue
        size = -(-span // chunks)
        active = -(-span // size)
        edges = lo + size * np.arange(active + 1, dtype=np.int64)
        edges[-1] = min(int(edges[-1]), hi)
        busy_at = _coverage(g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64), edges)
        busy = np.diff(busy_at).astype(np.float64)
        dur = np.diff(edges).astype(np.float64)
        low = busy / dur * 100.0 < threshold
        # Context of the op that ends last (what nsys shows for the whole process/device).
        ctx = g["contextId"].iloc[int(np.argmax(g["end"].to_numpy()))]
        idx = np.flatnonzero(low)
        if idx.size == 0:
            continue
        # Runs of consecutive low chunks become one record.
        breaks = np.flatnonzero(np.diff(idx) != 1) + 1
        for run in np.split(idx, breaks):
            first, last = int(run[0]), int(run[-1])
            records.append({
                "chunk": first, "pid": pid, "dev": dev,
                "In-Use (%)": float(busy[run].sum() / dur[run].sum() * 100.0),
                "Duration (ns)": int(edges[last + 1] - edges[first]),
                "Start (ns)": int(edges[first]),
                "PID": pid, "Device ID": dev, "Context ID": ctx,
            })
    return records


def _rule_gpu_time_util(trace: Trace, opts: dict[str, Any]) -> RuleResult:
    ops = _gpu_ops(trace, _time_window(trace, opts))
    records = _util_records(ops, opts["chunks"], opts["threshold"]) if not ops.empty else []
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
    explanation = (
        f"{_plural(len(table), 'stretch')} of GPU time, {_fmt_ms(low_ns)} in total, had the GPU in "
        f"use less than {opts['threshold']:g}% of the time (lowest {worst['In-Use (%)']:.1f}% over "
        f"{_fmt_ms(float(worst['Duration (ns)']))} from {int(worst['Start (ns)']) / 1e9:.3f} s); "
        f"about {_fmt_ms(idle_ns)} of idle GPU time there is throughput lost while the GPU waits "
        "for the CPU to submit work."
    )
    fix = (
        "Find what the CPU does in those stretches: overlap data preparation and copies with "
        "compute (pinned memory, async copies, prefetching), batch small kernels or capture them "
        "in a CUDA graph to cut launch overhead, and remove unneeded synchronisation."
    )
    return RuleResult("gpu_time_util", table, explanation, fix, opts)


def _nothing(name: str, columns: list[str], opts: dict[str, Any], sentence: str) -> RuleResult:
    return RuleResult(name, _empty(columns), sentence, "", opts)


_RUNNERS = {
    "cuda_memcpy_async": _rule_cuda_memcpy_async,
    "cuda_memcpy_sync": _rule_cuda_memcpy_sync,
    "cuda_memset_sync": _rule_cuda_memset_sync,
    "cuda_api_sync": _rule_cuda_api_sync,
    "gpu_gaps": _rule_gpu_gaps,
    "gpu_time_util": _rule_gpu_time_util,
}


# -- public entry points ---------------------------------------------------------------------------
def run_rule(trace: Trace, name: str, **options: Any) -> RuleResult:
    """Run one expert rule on a trace.

    Args:
        trace: an opened report (nsys SQLite export or PyTorch profiler trace).
        name: a rule name from :data:`RULES` (nsys 2022 names such as ``gpu-starv`` work too).
        **options: rule options as nsys names them (``rows``, ``start``, ``end``, ``nvtx``, and
            ``gap`` for gpu_gaps, ``threshold``/``chunks`` for gpu_time_util); values may be
            strings, as :func:`parse_rule_spec` returns them.

    Returns:
        The rule's findings; ``result.table`` is empty when nothing was found.

    Raises:
        KernelscopeError: unknown rule or option, or an option value that does not fit.

    """
    rule = canonical_rule_name(name)
    opts = _resolve_options(rule, options)
    return _RUNNERS[rule](trace, opts)


def _cell(value: Any, column: str) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if column in _DECIMALS:
        return f"{float(value):.{_DECIMALS[column]}f}"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    text = str(value)
    if any(ch in text for ch in ',"\n'):
        text = '"' + text.replace('"', '""') + '"'
    return text


def to_csv(result: RuleResult) -> str:
    """Format a result exactly as ``nsys analyze --format csv`` does.

    Returns:
        The header and one line per row, each ending in a newline; an empty string when the rule
        found nothing (nsys then writes an empty file).

    """
    table = result.table
    if table.empty:
        return ""
    columns = list(table.columns)
    lines = [",".join(columns)]
    for row in table.itertuples(index=False, name=None):
        lines.append(",".join(_cell(v, c) for v, c in zip(row, columns, strict=True)))
    return "\n".join(lines) + "\n"
