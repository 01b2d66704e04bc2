"""What the Telemetry view plots: the plots and their metrics, one GPU's sample buffer, and the small
texts around them (current readings, GPU line styles, the no-NVML sentence). No widgets here."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from PySide6.QtCore import Qt

from gui.widgets.axes import eng

CAPACITY = 20_000  # samples kept per GPU (33 min at 10 Hz)
#: one colour per metric of a plot (the n-th metric of every plot has the n-th colour)
METRIC_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"]
#: GPUs are told apart by the dash of their curves: GPU 0 solid, GPU 1 dashed, ...
GPU_STYLES = [Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine, Qt.PenStyle.DashDotLine]
GPU_STYLE_NAMES = ["solid", "dashed", "dotted", "dash-dot"]
Y_MARGIN = 0.07
AXIS_WIDTH_PX = 58  # the same left-axis width in every plot: labels never clipped, plots aligned

#: plot key -> (title, unit label, [(GpuSample field, legend name, scale)])
PLOTS: dict[str, tuple[str, str, list[tuple[str, str, float]]]] = {
    "util": ("Utilization", "%", [("util_gpu_pct", "GPU", 1.0), ("util_mem_pct", "memory", 1.0)]),
    "memory": ("Memory used", "GiB", [("mem_used_bytes", "used", 2.0**-30)]),
    "clocks": ("Clocks", "MHz", [("sm_clock_mhz", "SM", 1.0), ("mem_clock_mhz", "memory", 1.0)]),
    "power": ("Power", "W", [("power_w", "draw", 1.0), ("power_limit_w", "limit", 1.0)]),
    "pcie": ("PCIe", "GB/s", [("pcie_tx_bytes_per_s", "TX", 1e-9), ("pcie_rx_bytes_per_s", "RX", 1e-9)]),
    "gpm": ("GPM", "%", [("gpm_sm_util_pct", "SM", 1.0),
                         ("gpm_sm_occupancy_pct", "occupancy", 1.0),
                         ("gpm_tensor_util_pct", "tensor", 1.0),
                         ("gpm_dram_bw_util_pct", "DRAM BW", 1.0)]),
}
FIELDS = [f for _, _, metrics in PLOTS.values() for f, _, _ in metrics]
#: plots whose y axis is a percentage: always 0-100 so a glance compares them
PERCENT_PLOTS = {key for key, (_, unit, _) in PLOTS.items() if unit == "%"}


def metric_color(index: int) -> str:
    """The colour of the ``index``-th metric of a plot."""
    return METRIC_COLORS[index % len(METRIC_COLORS)]


def value_text(value: float, unit: str) -> str:
    """A current reading as the plot title shows it: '689 W', '1.92 GiB', '—' when NA."""
    if not math.isfinite(value):
        return "—"
    if unit in ("%", "MHz", "W"):
        return f"{value:,.0f} {unit}"
    if unit == "GB/s":  # PCIe idles at kB/s: '714 kB/s', not '0.000714 GB/s'
        return eng(value * 1e9, "B/s")
    return f"{value:,.0f} {unit}" if abs(value) >= 100 else f"{value:.3g} {unit}"  # never '1e+03'


def gpu_styles_text(gpus: list[int]) -> str:
    """'GPU 0 solid, GPU 1 dashed' for several GPUs; '' for one."""
    if len(gpus) < 2:
        return ""
    return ", ".join(f"GPU {g} {GPU_STYLE_NAMES[g % len(GPU_STYLE_NAMES)]}" for g in gpus)


def y_top(key: str, values: list[np.ndarray]) -> float:
    """The top of a plot's y range: 100 for percentages, else the largest value plus 12 % (≥ a floor)."""
    if key in PERCENT_PLOTS:
        return 100.0
    peaks = [float(np.nanmax(v)) for v in values if len(v) and np.isfinite(v).any()]
    top = max(peaks, default=0.0)
    return top * 1.12 if top > 0 else 1.0


class Series:
    """One GPU's samples: times (s from the stream start) and one column per field (NaN = NA)."""

    def __init__(self) -> None:
        self.n = 0
        self.t = np.empty(CAPACITY)
        self.v = {f: np.empty(CAPACITY) for f in FIELDS}

    def append(self, t: float, sample: Any) -> None:
        if self.n == CAPACITY:  # keep the newer half
            half = CAPACITY // 2
            self.t[:half] = self.t[half:]
            for arr in self.v.values():
                arr[:half] = arr[half:]
            self.n = half
        i = self.n
        self.t[i] = t
        for f, arr in self.v.items():
            x = getattr(sample, f)
            arr[i] = math.nan if x is None else float(x)
        self.n += 1


def unavailable_text(reason: str) -> str:
    """The engine's NVML sentence for the window: without the CLI's ``--replay FILE`` hint (the
    view offers its own button) and without repeating that telemetry is unavailable."""
    from engine.system.nvml import UNAVAILABLE_HINT

    text = reason.replace(f", {UNAVAILABLE_HINT}", ".").replace(f" {UNAVAILABLE_HINT}", "")
    for prefix in ("Telemetry is unavailable: ", "NVML is not available: "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text[:1].upper() + text[1:]
