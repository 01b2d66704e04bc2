"""Immutable telemetry values: one :class:`GpuSample` per GPU, gathered into a :class:`Snapshot`.

Every metric is Optional: ``None`` means NA (the GPU, the driver or the recording does not have it),
never zero. Units are in the field names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuSample:
    """One GPU's readings at one instant.

    Attributes:
        timestamp_ns: Wall-clock time of the reading, nanoseconds since the Unix epoch
            (``time.time_ns()``), so it lines up with nsys/ncu sessions recorded at the same time.
        gpu: NVML device index.
        util_gpu_pct / util_mem_pct: NVML utilization rates (percent over the driver's window).
        processes: ``(pid, name, used_bytes)`` per process on the GPU; ``used_bytes`` may be None.
        throttle_reasons: names of the active clock-event (throttle) reasons, e.g. ``"GpuIdle"``.
        gpm_*: Hopper-and-newer GPU Performance Monitoring metrics over the last window of
            at least 100 ms (None where GPM is unsupported).
    """

    timestamp_ns: int
    gpu: int
    uuid: str | None = None
    name: str | None = None
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None
    temp_c: float | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    throttle_reasons: tuple[str, ...] | None = None
    ecc_errors: int | None = None
    processes: tuple[tuple[int, str, int | None], ...] | None = None
    gpm_sm_util_pct: float | None = None
    gpm_sm_occupancy_pct: float | None = None
    gpm_tensor_util_pct: float | None = None
    gpm_dram_bw_util_pct: float | None = None
    gpm_graphics_util_pct: float | None = None
    gpm_pcie_tx_bytes_per_s: float | None = None
    gpm_pcie_rx_bytes_per_s: float | None = None
    gpm_nvlink_tx_bytes_per_s: float | None = None
    gpm_nvlink_rx_bytes_per_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (tuples kept as tuples)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


SAMPLE_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(GpuSample))


@dataclass(frozen=True)
class Snapshot:
    """All selected GPUs at one sampling tick.

    Attributes:
        timestamp_ns: Wall-clock time of the tick (nanoseconds since the Unix epoch).
        gpus: One sample per GPU that answered, in index order.
        gap: True when sampling failed (driver gone, GPU lost, ...): ``gpus`` may then be partial
            or empty, and ``gap_reason`` says why. The stream continues after a gap.
        gap_reason: One sentence, or None when ``gap`` is False.
    """

    timestamp_ns: int
    gpus: tuple[GpuSample, ...] = ()
    gap: bool = False
    gap_reason: str | None = None

    def gpu(self, index: int) -> GpuSample | None:
        """The sample of GPU ``index``, or None if it is not in this snapshot."""
        for s in self.gpus:
            if s.gpu == index:
                return s
        return None

    def select(self, indices: frozenset[int] | None) -> Snapshot:
        """This snapshot restricted to GPU ``indices`` (None keeps all)."""
        if indices is None:
            return self
        return dataclasses.replace(self, gpus=tuple(s for s in self.gpus if s.gpu in indices))


def parse_gpu_selection(gpus: str | int | Iterable[int] | None) -> frozenset[int] | None:
    """Turn ``"all"``, ``3``, ``"0,2"`` or ``[0, 2]`` into a set of indices (None = all).

    Raises:
        ValueError: if the text is neither ``all`` nor comma-separated non-negative integers.
    """
    if gpus is None:
        return None
    if isinstance(gpus, int):
        return frozenset({gpus})
    if isinstance(gpus, str):
        text = gpus.strip().lower()
        if text in ("", "all"):
            return None
        try:
            out = frozenset(int(p) for p in text.split(",") if p.strip())
        except ValueError:
            raise ValueError(f"--gpu takes 'all' or GPU indices like 0 or 0,2, not {gpus!r}.") from None
    else:
        out = frozenset(int(i) for i in gpus)
    if any(i < 0 for i in out):
        raise ValueError(f"GPU indices are 0 or more, not {sorted(out)}.")
    return out
