"""Findings from an NVML telemetry recording (``engine.telemetry.recording.read_recording``).

A sample counts as busy when NVML's GPU utilization is at least :data:`BUSY_UTIL_PCT`; idle GPUs
lower their clocks on purpose, which is not throttling.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.findings.model import Evidence, Finding, Gain, fmt_time, pct

if TYPE_CHECKING:
    import pandas as pd

BUSY_UTIL_PCT = 5.0
LOW_CLOCK_FRACTION = 0.9
POWER_CAP_FRACTION = 0.97
_POWER_REASONS = ("SwPowerCap", "HwPowerBrakeSlowdown", "SwPowerCapping")
_THERMAL_REASONS = ("SwThermalSlowdown", "HwThermalSlowdown", "HwSlowdown")
_SRC = "telemetry recording"


def _period_ns(df: pd.DataFrame) -> float:
    t = np.sort(df["timestamp_ns"].dropna().unique().astype(np.float64))
    return float(np.median(np.diff(t))) if len(t) > 1 else 0.0


def rule_throttled_clocks(df: pd.DataFrame) -> list[Finding]:
    """SM clock well below the highest clock seen, while the GPU is busy."""
    d = df.dropna(subset=["sm_clock_mhz", "util_gpu_pct"])
    if not len(d):
        return []
    max_clk = float(d["sm_clock_mhz"].max())
    busy = d[d["util_gpu_pct"] >= BUSY_UTIL_PCT]
    if not len(busy) or max_clk <= 0:
        return []
    low = busy[busy["sm_clock_mhz"] < LOW_CLOCK_FRACTION * max_clk]
    if not len(low):
        return []
    period = _period_ns(df)
    deficit = float((1 - busy["sm_clock_mhz"] / max_clk).clip(lower=0).sum()) * period
    busy_ns = len(busy) * period
    reasons = sorted({r for v in low.get("throttle_reasons", []) if isinstance(v, str)
                      for r in v.split(";") if r and r != "none"})
    share = pct(len(low), len(busy)) or 0.0
    return [Finding(
        id="telemetry.throttled-clocks",
        title="SM clocks dropped while the GPU was busy",
        severity="warning" if share >= 20 else "info",
        source="telemetry",
        summary=(
            f"{len(low)} of {len(busy)} busy samples ran the SMs below {LOW_CLOCK_FRACTION:.0%} of the "
            f"highest clock seen ({max_clk:.0f} MHz), lowest {low['sm_clock_mhz'].min():.0f} MHz"
            + (f"; NVML reasons: {', '.join(reasons)}" if reasons else
               "; this recording has no throttle reasons, so the cause (power, thermal, "
               "application clocks) is unknown") + "."
        ),
        evidence=[
            Evidence("busy samples", len(busy), "samples", f"{_SRC}: util_gpu_pct ≥ {BUSY_UTIL_PCT:.0f}"),
            Evidence("busy samples with low SM clock", len(low), "samples", f"{_SRC}: sm_clock_mhz"),
            Evidence("highest SM clock", max_clk, "MHz", f"{_SRC}: sm_clock_mhz"),
            Evidence("lowest busy SM clock", float(low["sm_clock_mhz"].min()), "MHz",
                     f"{_SRC}: sm_clock_mhz"),
            Evidence("sample period", period, "ns", f"{_SRC}: timestamp_ns"),
        ],
        fix="Check cooling and the power limit (nvidia-smi -q -d PERFORMANCE,POWER); for benchmarks, "
            "lock clocks (nvidia-smi -lgc) or compare runs at equal clocks.",
        fix_cuda="nvidia-smi -q -d PERFORMANCE   # shows the active clock event reasons",
        fix_torch="",
        gain=Gain(round(deficit / 1e9, 9), pct(deficit, busy_ns),
                  f"Σ over busy samples (1 − clock / {max_clk:.0f} MHz) × sample period "
                  f"{fmt_time(period)} = {fmt_time(deficit)} (percent: of busy time; assumes "
                  "clock-bound work)", "upper bound"),
        verify="Record telemetry during the next run: busy samples stay at the top clock.",
    )]


def rule_power_cap(df: pd.DataFrame) -> list[Finding]:
    """Power at the limit, or a power-cap clock reason."""
    d = df.dropna(subset=["power_w"])
    if not len(d):
        return []
    at_cap = np.zeros(len(d), dtype=bool)
    if "power_limit_w" in d and d["power_limit_w"].notna().any():
        at_cap |= (d["power_w"] >= POWER_CAP_FRACTION * d["power_limit_w"]).fillna(False).to_numpy()
    if "throttle_reasons" in d:
        at_cap |= d["throttle_reasons"].map(
            lambda v: isinstance(v, str) and any(r in v.split(";") for r in _POWER_REASONS)).to_numpy(bool)
    n = int(at_cap.sum())
    if not n:
        return []
    lim = d["power_limit_w"].dropna()
    return [Finding(
        id="telemetry.power-cap",
        title="The GPU reached its power limit",
        severity="warning",
        source="telemetry",
        summary=(f"{n} of {len(d)} samples were at the power limit"
                 + (f" ({lim.max():.0f} W)" if len(lim) else "") + "; the driver lowers clocks there."),
        evidence=[Evidence("samples at the power cap", n, "samples", f"{_SRC}: power_w / throttle_reasons"),
                  Evidence("peak power", float(d["power_w"].max()), "W", f"{_SRC}: power_w")]
                 + ([Evidence("power limit", float(lim.max()), "W", f"{_SRC}: power_limit_w")]
                    if len(lim) else []),
        fix="Expected for dense tensor-core work; for fair comparisons keep the power limit equal "
            "between runs, and check that no other job shares the GPU.",
        gain=Gain(None, None, "not a code change: power-capped clocks are a property of the run"),
        verify="Compare runs only at the same power limit (kernelscope compare warns otherwise).",
    )]


def process_pids(v: object) -> set[tuple[int, str]]:
    """The (pid, name) pairs of a telemetry row's process list."""
    if not isinstance(v, str) or not v.strip():
        return set()
    try:
        items = json.loads(v)
    except json.JSONDecodeError:
        return set()
    return {(int(p[0]), str(p[1])) for p in items if isinstance(p, list) and p}


def rule_other_processes(df: pd.DataFrame, own_pids: set[int] | None = None) -> list[Finding]:
    """Processes other than the profiled one used the GPU during the run."""
    if "processes" not in df:
        return []
    seen: set[tuple[int, str]] = set()
    for v in df["processes"]:
        seen |= process_pids(v)
    if not seen:
        return []
    others = {p for p in seen if own_pids is None or p[0] not in own_pids}
    if own_pids is None and len(seen) < 2:
        return []
    if not others:
        return []
    names = ", ".join(f"{n} (pid {p})" for p, n in sorted(others))
    return [Finding(
        id="telemetry.other-processes",
        title="Other processes used the GPU during the run",
        severity="warning",
        source="telemetry",
        summary=f"Besides the profiled program, the GPU ran {names}; timings may be slowed and noisy.",
        evidence=[Evidence("other processes", len(others), "processes", f"{_SRC}: processes")],
        fix="Profile on an otherwise idle GPU (check nvidia-smi), or pin jobs to separate GPUs / MIG slices.",
        gain=Gain(None, None, "not computable: depends on what the other processes did"),
        verify="Record telemetry during the next run: only the profiled process appears.",
    )]


def telemetry_findings(df: pd.DataFrame, own_pids: set[int] | None = None) -> list[Finding]:
    """Run the telemetry rules on a recording DataFrame."""
    return rule_throttled_clocks(df) + rule_power_cap(df) + rule_other_processes(df, own_pids)
