"""Four ``nsys analyze`` rules as numpy rows, for the findings: no pandas, no table (issue 16).

``rule_rows(trace, name)`` gives what the findings read of ``run(trace, name, {"rows": -1})`` (the
rows' count, starts and durations, the explanation and the fix) for ``cuda_api_sync``,
``gpu_gaps``, ``gpu_time_util`` and ``cuda_memset_sync`` on an nsys export, from the columnar
cache: the synchronization calls from the API calls' name codes (``analysis.calls``, already read
for the summary: no scan of the calls table of its own), the gaps and low-use stretches from
``gpu_activity``'s sorted starts and ends, the synchronous memsets from ``copy_calls``' join. It is None
where only the rule itself can say (another trace kind, NULLs, memsets found): callers then run the
rule. Same rows and the same sentences as the rules (they share ``common``'s texts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.analyze import copy_calls, gpu_activity
from engine.analysis.nsys.analyze.common import (
    _resolve_options,
    api_sync_text,
    gaps_text,
    pinned_or_managed,
    sync_call,
    sync_memset_call,
    util_text,
)
from engine.analysis.tables import unique_first

if TYPE_CHECKING:
    from engine.reports.base import Trace


@dataclass(frozen=True)
class RuleRows:
    """What a rule found, as the findings use it: ``n`` rows with their starts and durations."""

    n: int
    start: np.ndarray
    dur: np.ndarray
    explanation: str
    fix: str


_EMPTY = np.zeros(0, dtype=np.int64)
#: a call's version suffix (cudaStreamSynchronize_v3020), as the rule strips it
_SUFFIX = re.compile(r"_v\d{4}$")


def rule_rows(trace: Trace, name: str) -> RuleRows | None:
    """The rows of rule ``name`` (default options, every row); None: run the rule instead."""
    opts = _resolve_options(name, {"rows": -1})
    if opts.get("start") is not None or opts.get("end") is not None or opts.get("nvtx"):
        return None
    try:
        if name == "cuda_api_sync":
            return _api_sync(trace)
        if name == "gpu_gaps":
            return _gaps(trace, float(opts["gap"]))
        if name == "gpu_time_util":
            return _util(trace, int(opts["chunks"]), float(opts["threshold"]))
        if name == "cuda_memset_sync":
            return _memset_sync(trace)
    except Exception:  # noqa: BLE001 - any read problem: the rule's own path says what it finds
        return None
    return None


def _nothing() -> RuleRows:
    return RuleRows(0, _EMPTY, _EMPTY, "", "")


def _api_sync(trace: Trace) -> RuleRows | None:
    """cuda_api_sync from the API calls' columns (the calls whose base name passes the rule's test)."""
    from engine.analysis.calls import api_calls

    calls = api_calls(trace)
    if not calls.from_columns or calls.valid is not None or "" in calls.pids:
        return None  # NULL times or threads: the rule's read says what nsys counts
    full = [n for n in trace.strings().values() if sync_call(str(n))]
    bases = {_SUFFIX.sub("", str(n)) for n in full}
    if len(bases) < len(full):
        return None  # two ids with one base name: counted per id by the rule
    lut = np.array([sync_call(n) for n in calls.names] + [False], dtype=bool)
    rows = np.flatnonzero(lut[calls.name])
    if not len(rows):
        return _nothing()
    start = np.asarray(calls.start)[rows]
    dur = np.asarray(calls.end)[rows] - start
    codes = np.asarray(calls.name)[rows]
    uniq, first, cnt = unique_first(codes)
    counts = {calls.names[int(uniq[j])]: int(cnt[j]) for j in np.lexsort((first, -cnt)).tolist()}
    explanation, fix = api_sync_text(len(rows), float(dur.sum()), float(dur.max()), counts)
    return RuleRows(len(rows), start, dur, explanation, fix)


def _gaps(trace: Trace, gap_ms: float) -> RuleRows | None:
    g = gpu_activity.gaps(gpu_activity.groups(trace, (None, None)), gap_ms * 1e6)
    if not len(g["dur"]):
        return _nothing()
    pick = gpu_activity.gap_order(g, -1)
    explanation, fix = gaps_text(len(pick), gap_ms, float(int(g["dur"].sum())), float(int(g["dur"].max())),
                                 int(g["start"][pick[0]]))
    return RuleRows(len(pick), g["start"], g["dur"], explanation, fix)


def _util(trace: Trace, chunks: int, threshold: float) -> RuleRows | None:
    records: list[dict[str, Any]] = []
    for g in gpu_activity.groups(trace, (None, None)):
        if len(g.starts):
            records += gpu_activity.low_records(int(g.starts[0]), int(g.ends[-1]), chunks, threshold,
                                           partial(gpu_activity.coverage, g), g.pid, g.dev, g.last_ctx)
    if not records:
        return _nothing()
    # the rule's order: by first chunk (then process, device), then by the printed in-use share
    records.sort(key=lambda r: (r["chunk"], r["pid"] is None, r["pid"] or 0, r["dev"] is None, r["dev"] or 0))
    pct = np.array([r["In-Use (%)"] for r in records], dtype=np.float64)
    order = np.argsort(np.round(pct, 1), kind="stable")
    pct = pct[order]
    dur = np.array([r["Duration (ns)"] for r in records], dtype=np.int64)[order]
    start = np.array([r["Start (ns)"] for r in records], dtype=np.int64)[order]
    idle_ns = float((np.maximum(100.0 - pct, 0) / 100.0 * dur).sum())
    explanation, fix = util_text(len(records), threshold, float(int(dur.sum())), idle_ns, float(pct[0]),
                                 float(dur[0]), int(start[0]))
    return RuleRows(len(records), start, dur, explanation, fix)


def _memset_sync(trace: Trace) -> RuleRows | None:
    """No synchronous memset on pinned or managed memory: nothing; some: the rule's own path."""
    if not (trace.has("memset") and trace.has("api")):
        return _nothing()  # no memsets (or calls): the rule finds none
    j = copy_calls.joined(trace, "memset", sync_memset_call, pinned_or_managed, (None, None))
    if j.total:
        return None
    return _nothing()
