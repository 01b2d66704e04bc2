"""What the rules share: names and options, the time window, the API join and result helpers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.analyze.registry import RuleField, registry
from engine.analysis.nsys.analyze.registry import RuleResult as RuleResult  # re-exported
from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.trace_columns import Where

#: Rule name -> one-line description (each rule module's ``title``; names as ``nsys analyze`` 2023+
#: spells them).
RULES: RuleField = RuleField(lambda r: r.title)
#: Rule name -> {option: help} (the common options and the rule's own).
RULE_OPTIONS: RuleField = RuleField(lambda r: r.options)

#: Older (nsys 2022.x) rule names accepted as aliases.
ALIASES: dict[str, str] = {
    "cuda-async-memcpy": "cuda_memcpy_async",
    "cuda-sync-memcpy": "cuda_memcpy_sync",
    "cuda-sync-memset": "cuda_memset_sync",
    "cuda-sync-api": "cuda_api_sync",
    "gpu-starv": "gpu_gaps",
    "gpu-low-util": "gpu_time_util",
}

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
    Values stay strings; :func:`engine.analysis.nsys.analyze.run` converts and checks them.

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
    out: dict[str, Any] = dict(registry()[rule].defaults)
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
    import pandas as pd

    return pd.to_numeric(s, errors="coerce").astype("Int64")


def _by_duration(df: pd.DataFrame) -> pd.DataFrame:
    """Longest first; ties by PID, then start (as nsys analyze orders multi-process reports)."""
    keys = [c for c in ("Duration (ns)", "PID", "Start (ns)") if c in df.columns]
    return df.sort_values(keys, ascending=[k == "Start (ns)" or k == "PID" for k in keys],
                          kind="stable")


def _fmt_ms(ns: float) -> str:
    """A duration for people: ms, or µs below 0.1 ms."""
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e5 else f"{ns / 1e3:,.1f} µs"


def _fmt_mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.1f} MB" if nbytes < 1e9 else f"{nbytes / 1e9:,.2f} GB"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def empty_rule_frame(columns: list[str]) -> pd.DataFrame:
    """An empty result table with the rule's columns."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


def _missing_note(trace: Trace, tables: list[str]) -> str:
    notes = [trace.missing[t] for t in tables if t in trace.missing]
    return f" (note: {'; '.join(notes)})" if notes else ""



def _nothing(name: str, columns: list[str], opts: dict[str, Any], sentence: str) -> RuleResult:
    return RuleResult(name, empty_rule_frame(columns), sentence, "", opts)


def sync_call(name: str) -> bool:
    """cuda_api_sync's calls: cudaDeviceSynchronize* and cudaStreamSynchronize* (case-insensitive)."""
    return name.lower().startswith(("cudadevicesynchronize", "cudastreamsynchronize"))


def sync_memset_call(name: str) -> bool:
    """cuda_memset_sync's calls: cudaMemset* without Async (case-insensitive)."""
    low = name.lower()
    return low.startswith("cudamemset") and "async" not in low


# -- what the rules say (shared by the rules' tables and the findings' pandas-free rows) ------------
def api_sync_text(n: int, total_ns: float, longest: float, counts: dict[str, int]) -> tuple[str, str]:
    """cuda_api_sync's (explanation, fix)."""
    which = ", ".join(f"{c} {name}" for name, c in counts.items())
    explanation = (
        f"{_plural(n, 'synchronization call')} ({which}) blocked the CPU for "
        f"{_fmt_ms(total_ns)} in total, longest {_fmt_ms(longest)}; "
        "while the CPU waits it cannot launch more work, and the GPU idles once its queue drains."
    )
    fix = (
        "Remove synchronisations that are not needed; where the host needs a result, wait on a "
        "cudaEvent for just that work (cudaStreamWaitEvent between streams) instead of the whole "
        "device, and keep enough work queued ahead (in PyTorch avoid .item() / .cpu() inside loops)."
    )
    return explanation, fix


def gaps_text(n: int, gap_ms: float, total: float, longest: float, first_start: int) -> tuple[str, str]:
    """gpu_gaps' (explanation, fix): ``first_start`` is the first (longest) row's start."""
    explanation = (
        f"{_plural(n, 'GPU gap')} longer than {gap_ms:g} ms left the GPU idle for "
        f"{_fmt_ms(total)} in total (longest {_fmt_ms(longest)}, "
        f"starting at {first_start / 1e9:.3f} s); no GPU work was queued then, "
        "typically because the CPU was busy with setup, I/O, allocation or synchronisation."
    )
    fix = (
        "Look at what the CPU threads do during these gaps (NVTX ranges, OS runtime calls): move "
        "setup, data loading and allocation out of the loop or onto other threads, prefetch the "
        "next inputs while the GPU computes, and avoid host synchronisation that drains the queue."
    )
    return explanation, fix


def util_text(n: int, threshold: float, low_ns: float, idle_ns: float, worst_pct: float, worst_ns: float,
              worst_start: int) -> tuple[str, str]:
    """gpu_time_util's (explanation, fix): ``worst_*`` of the first row (lowest in-use share)."""
    explanation = (
        f"{_plural(n, 'stretch')} of GPU time, {_fmt_ms(low_ns)} in total, had the GPU in "
        f"use less than {threshold:g}% of the time (lowest {worst_pct:.1f}% over "
        f"{_fmt_ms(worst_ns)} from {worst_start / 1e9:.3f} s); "
        f"about {_fmt_ms(idle_ns)} of idle GPU time there is throughput lost while the GPU waits "
        "for the CPU to submit work."
    )
    fix = (
        "Find what the CPU does in those stretches: overlap data preparation and copies with "
        "compute (pinned memory, async copies, prefetching), batch small kernels or capture them "
        "in a CUDA graph to cut launch overhead, and remove unneeded synchronisation."
    )
    return explanation, fix


def nullable_ints(values: Any) -> pd.api.extensions.ExtensionArray:
    """An Int64 column from integers read by ``trace.columns``: :data:`NULL` becomes a missing value."""
    import pandas as pd

    from engine.reports.trace_columns import NULL

    v = np.asarray(values, dtype=np.int64)
    return pd.arrays.IntegerArray(v.copy(), v == NULL)


def window_filter(window: tuple[int | None, int | None], other: Where | None = None) -> Where | None:
    """The rows of the rule's [start, end] window (and ``other``'s), a ``trace.columns`` filter.

    None where nothing is filtered.
    """
    from engine.reports.trace_columns import Where, ends_by, starts_from

    start, end = window
    clauses = (other.clauses if other is not None else ()) \
        + (starts_from(start).clauses if start is not None else ()) \
        + (ends_by(end).clauses if end is not None else ())
    return Where(clauses) if clauses else None


def call_names(trace: Trace, test: Callable[[str], bool]) -> dict[int, str]:
    """The API calls' name ids (``trace.strings()``) whose name passes ``test``, with the names.

    A trace that gives its texts ids as its columns are read (not an nsys export: its strings are
    the export's) has the calls' name ids read first.
    """
    from engine.reports.base import Trace as BaseTrace

    if getattr(type(trace), "strings", None) is BaseTrace.strings and trace.has("api"):
        trace.columns("api", ["nameId"])
    return {int(i): str(n) for i, n in trace.strings().items() if test(str(n))}


def pinned_or_managed(ops: dict[str, Any]) -> npt.NDArray[np.bool_]:
    """cuda_memset_sync's memsets: those on pinned or managed memory."""
    return np.isin(ops["memKind"], [_PINNED, _MANAGED])
