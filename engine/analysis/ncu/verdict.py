"""A bottleneck verdict per kernel: memory-bound, compute-bound, latency-bound or launch-bound.

The thresholds follow Nsight Compute's own SOLBottleneck rule: a unit above 60 % of its peak is
"high", so the larger of compute (SM) and memory throughput decides between compute- and
memory-bound; when both are below 60 % the kernel is latency-bound (warps wait, see the stall
reasons) unless it is too small to fill the GPU (blocks for at most half the SMs) or so short
(under 5 us) that launch overhead dominates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.reports.ncu import VERDICT_KEYS, top_stalls

if TYPE_CHECKING:
    from engine.reports.ncu import NcuReport

#: A unit at or above this % of its peak is busy (ncu's SOLBottleneck threshold).
HIGH_PCT = 60.0
#: Kernels shorter than this are dominated by launch overhead (a launch costs a few microseconds).
SHORT_NS = 5_000.0

#: A grid with at most this fraction of the SM count leaves most SMs idle: "too small". (A
#: persistent kernel with 128 blocks on 132 SMs is not small; 8 blocks on 132 SMs is.)
SMALL_GRID_FRACTION = 0.5

MEMORY_BOUND = "memory-bound"
COMPUTE_BOUND = "compute-bound"
LATENCY_BOUND = "latency-bound"
LAUNCH_BOUND = "launch-bound"
UNKNOWN = "unknown"

@dataclass(frozen=True)
class Verdict:
    """What bounds a kernel, why, and the numbers that say so."""

    kind: str  # memory-bound | compute-bound | latency-bound | launch-bound | unknown
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)


def _get(m: Mapping[str, Any], key: str) -> Any:
    for name in VERDICT_KEYS[key]:
        if name in m:
            v = m[name]
            if v is None:
                continue
            if isinstance(v, str):
                return v
            try:
                f = float(v)
            except (TypeError, ValueError):
                continue
            if not math.isnan(f):
                return f
    return None


def verdict(row_or_metrics: Mapping[str, Any]) -> Verdict:
    """The bottleneck of one kernel.

    Args:
        row_or_metrics: A :func:`engine.analysis.ncu.sections.kernel_table` row, the mapping
            :func:`kernel_metrics` returns, or ncu metric names → values (base units).

    Returns:
        The verdict with a one-sentence reason and the numbers it rests on.
    """
    m = row_or_metrics
    sm, mem = _get(m, "sm_pct"), _get(m, "mem_pct")
    dram, dur = _get(m, "dram_pct"), _get(m, "duration_ns")
    units = {"DRAM": dram, "L1/TEX": _get(m, "l1_pct"), "L2": _get(m, "l2_pct")}
    blocks, sms, waves = _get(m, "blocks"), _get(m, "sms"), _get(m, "waves")
    occ, tocc = _get(m, "achieved_occ"), _get(m, "theoretical_occ")
    stall, stall_cycles = _get(m, "top_stall"), _get(m, "top_stall_cycles")
    numbers = {k: v for k, v in {
        "sm_throughput_pct": sm, "memory_throughput_pct": mem, "dram_throughput_pct": dram,
        "l1_throughput_pct": units["L1/TEX"], "l2_throughput_pct": units["L2"],
        "duration_ns": dur, "grid_blocks": blocks, "sm_count": sms, "waves_per_sm": waves,
        "achieved_occupancy_pct": occ, "theoretical_occupancy_pct": tocc,
        "top_stall": stall, "top_stall_cycles": stall_cycles,
    }.items() if v is not None}

    if sm is None or mem is None:
        return Verdict(UNKNOWN, "Compute and memory throughput were not collected; profile with "
                       "`ncu --section SpeedOfLight` (or `--set full`).", numbers)
    if dur is not None and dur < SHORT_NS:
        return Verdict(LAUNCH_BOUND, f"It runs {dur / 1000:.2f} us, less than the "
                       f"{SHORT_NS / 1000:.0f} us a launch costs: fuse it with its neighbours or "
                       "launch it in a CUDA graph.", numbers)
    if max(sm, mem) >= HIGH_PCT:
        if mem >= sm:
            busy = sorted(((v, k) for k, v in units.items() if v is not None), reverse=True)
            where = f" (busiest: {busy[0][1]} at {busy[0][0]:.1f} %)" if busy else ""
            return Verdict(MEMORY_BOUND, f"Memory throughput is {mem:.1f} % of peak{where}, above "
                           f"compute at {sm:.1f} %: reduce or coalesce memory traffic, reuse data in "
                           "shared memory or L2.", numbers)
        return Verdict(COMPUTE_BOUND, f"Compute (SM) throughput is {sm:.1f} % of peak, above memory "
                       f"at {mem:.1f} %: use cheaper or tensor-core instructions, or do less work.",
                       numbers)
    if blocks is not None and sms is not None and blocks <= SMALL_GRID_FRACTION * sms:
        return Verdict(LAUNCH_BOUND, f"Too small: {blocks:.0f} blocks for {sms:.0f} SMs leaves SMs idle "
                       f"(compute {sm:.1f} %, memory {mem:.1f} %): give it more blocks or batch "
                       "launches.", numbers)
    extra = []
    if stall is not None:
        cyc = f" ({stall_cycles:.2f} cycles per instruction)" if stall_cycles is not None else ""
        extra.append(f"warps mostly wait on {str(stall).replace('_', ' ')}{cyc}")
    if occ is not None:
        extra.append(f"achieved occupancy {occ:.1f} %"
                     + (f" of a theoretical {tocc:.1f} %" if tocc is not None else ""))
    detail = (": " + ", ".join(extra)) if extra else ""
    return Verdict(LATENCY_BOUND, f"Compute ({sm:.1f} %) and memory ({mem:.1f} %) are both below "
                   f"{HIGH_PCT:.0f} % of peak{detail}; hide latency with more eligible warps or more "
                   "independent work per thread.", numbers)


def kernel_metrics(report: NcuReport, kernel_id: int) -> dict[str, Any]:
    """The inputs of :func:`verdict` for one kernel of a report (missing ones left out)."""
    out: dict[str, Any] = {}
    for names in VERDICT_KEYS.values():
        for name in names[1:]:
            v = report.value(kernel_id, name)
            if v is not None:
                out[names[0]] = v
                break
    stalls = top_stalls(report, kernel_id, 1)
    if stalls:
        out["top_stall"], out["top_stall_cycles"] = stalls[0]
    if "duration_ns" not in out:
        k = [r for r in report.kernel_records() if int(r["ID"]) == kernel_id]
        if k and not math.isnan(float(k[0]["duration_ns"])):
            out["duration_ns"] = float(k[0]["duration_ns"])
    return out
