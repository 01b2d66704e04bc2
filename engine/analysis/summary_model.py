"""The summary's typed result (schema ``kernelscope.summary/2``): frozen dataclasses with ``to_json()``.

Shares of a whole are unions, so none exceeds 100 %: a thread's API time is the union of its calls,
a GPU's busy time is the union over its streams, a part's share of busy is the union of that part
on that GPU. Where a number adds up concurrent work (``total_ns`` of a part: its durations summed
over streams; ``busy_sum_ns``: busy time summed over GPUs; ``host.total_ns``: API time summed over
threads) its name and label say so, and it is never divided by wall or busy time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

SCHEMA = "kernelscope.summary/2"


def strict(value: Any) -> Any:
    """``value`` made strict-JSON-ready: NaN/Infinity → None, numpy scalars → Python, tuples → lists."""
    if isinstance(value, dict):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    if hasattr(value, "to_json") and callable(value.to_json):
        return strict(value.to_json())
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class _Json:
    """``to_json()`` for a frozen dataclass: its fields in order, strict JSON."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (strict: null, never NaN)."""
        return {f.name: strict(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class GpuInfo(_Json):
    """One GPU of the report (keys as nsys's TARGET_INFO_GPU)."""

    id: int | str | None
    name: str | None
    smCount: int | None  # noqa: N815 - nsys's column name
    memoryBandwidth: int | None  # noqa: N815
    totalMemory: int | None  # noqa: N815
    computeMajor: int | None  # noqa: N815
    computeMinor: int | None  # noqa: N815


@dataclass(frozen=True)
class ReportMeta(_Json):
    """Where the trace came from."""

    path: str
    kind: str
    product_version: str | None
    schema_version: str | None
    gpus: tuple[GpuInfo, ...]


@dataclass(frozen=True)
class Wall(_Json):
    """The capture's span: first to last recorded event."""

    start_ns: int
    end_ns: int
    span_ns: int


@dataclass(frozen=True)
class TopCall(_Json):
    """One API function inside a category."""

    name: str
    total_ns: int
    calls: int


@dataclass(frozen=True)
class ApiCategory(_Json):
    """CUDA API time of one category.

    ``total_ns`` is summed over calls and threads (its share is of the summed API time,
    ``pct_of_api``); ``union_ns`` is the time at least one such call was in flight, the number
    compared with wall (``pct_of_wall``); ``attributed_ns`` gives time when calls of several
    categories were in flight (on several threads) to the category listed first, so the
    categories add up to the host union (the stacked bar).
    """

    category: str
    label: str
    total_ns: int
    union_ns: int
    attributed_ns: int
    calls: int
    pct_of_api: float | None
    pct_of_wall: float | None
    top_calls: tuple[TopCall, ...]


@dataclass(frozen=True)
class ThreadRow(_Json):
    """CUDA API time of one CPU thread (union of its calls: at most the wall)."""

    pid: str
    tid: str
    calls: int
    total_ns: int
    union_ns: int
    pct_of_wall: float | None


@dataclass(frozen=True)
class Host(_Json):
    """CUDA API time: summed over threads (``total_ns``) and as a union (``union_ns`` ≤ wall)."""

    total_ns: int
    union_ns: int
    calls: int
    thread_count: int
    pct_of_wall: float | None
    categories: tuple[ApiCategory, ...]
    threads: tuple[ThreadRow, ...]


@dataclass(frozen=True)
class GpuPart(_Json):
    """Kernels, one copy direction × memory kind, or memsets.

    ``total_ns`` sums durations over streams (and GPUs); ``union_ns`` is the time at least one ran,
    compared with busy (``pct_of_busy``) and wall (``pct_of_wall``); ``attributed_ns`` gives
    overlapping time to the part listed first, so the parts of one GPU add up to its busy time
    (the stacked bar). Parts overlap (a copy under a kernel on another stream), so their
    ``pct_of_busy`` may add up to more than 100 %; their ``attributed_pct_of_busy`` (the stacked
    bar's shares) add up to 100 %.
    """

    part: str
    total_ns: int
    union_ns: int
    attributed_ns: int
    count: int
    bytes: int | None
    pct_of_busy: float | None
    pct_of_wall: float | None
    attributed_pct_of_busy: float | None = None


@dataclass(frozen=True)
class StreamRow(_Json):
    """Busy time of one stream of one GPU (union of its operations)."""

    stream: str
    busy_ns: int
    count: int
    pct_of_gpu_busy: float | None


@dataclass(frozen=True)
class DeviceRow(_Json):
    """One GPU: busy is the union over its streams; each part's share is its union on this GPU."""

    device: str
    name: str | None
    busy_ns: int
    idle_ns: int
    busy_pct_of_wall: float | None
    parts: tuple[GpuPart, ...]
    streams: tuple[StreamRow, ...]


@dataclass(frozen=True)
class Gpu(_Json):
    """GPU time, with one row per GPU.

    With several GPUs, ``busy_ns`` is the time any GPU was busy (a union) and ``busy_sum_ns`` the
    busy time summed over the GPUs (a sum: never a share of wall).
    """

    busy_ns: int
    idle_ns: int
    busy_pct_of_wall: float | None
    busy_sum_ns: int
    device_count: int
    parts: tuple[GpuPart, ...]
    devices: tuple[DeviceRow, ...]


@dataclass(frozen=True)
class ProcessRow(_Json):
    """One process: its API time (union over its threads) and its GPU busy time (union)."""

    pid: str
    name: str | None
    api_calls: int
    api_union_ns: int
    api_pct_of_wall: float | None
    gpu_busy_ns: int
    gpu_busy_pct_of_wall: float | None
    kernels: int
    devices: tuple[str, ...]


@dataclass(frozen=True)
class BandwidthRow(_Json):
    """Achieved copy rate of one direction × host memory kind.

    ``total_ns`` sums the copies' durations (concurrent copies each count: a sum, the time the
    rate ``bytes / total_ns`` is over); ``union_ns`` is the time at least one of them ran, the
    GPU part ``memcpy <direction> (<memory>)``'s ``union_ns`` (over every GPU).
    """

    direction: str
    memory: str
    count: int
    bytes: int
    total_ns: int
    bytes_per_s: float | None
    gb_per_s: float | None
    median_gb_per_s: float | None
    min_gb_per_s: float | None
    max_gb_per_s: float | None
    union_ns: int | None = None


@dataclass(frozen=True)
class ApiCost(_Json):
    """API time of one category inside the steady steps, the warm-up steps or outside the steps."""

    category: str
    total_ns: int
    calls: int
    per_iteration_ns: int | None


@dataclass(frozen=True)
class Phase(_Json):
    """Another range nested in the steps (forward, backward, upload ...).

    ``count``, ``total_ns`` (summed durations), ``first_ns`` and ``median_ns`` are of the instances
    that start in a step, warm-up included. Per steady step, the phase's time is the union of its
    instances inside that step's host window (at most the step): ``per_iteration_ns`` is its
    median over the steady steps, ``steady_ns`` its sum over them.
    """

    range: str
    count: int
    total_ns: int
    per_iteration_ns: int
    first_ns: int
    median_ns: float
    steady_ns: int = 0


@dataclass(frozen=True)
class ProcessSteps(_Json):
    """The steps of one process (multi-process reports have one per process)."""

    pid: str
    range: str
    count: int
    warmup_count: int
    steady_median_ns: float
    gpu_busy_per_step_ns: float | None = None  # median over its steady steps, its own GPU work


@dataclass(frozen=True)
class Iterations(_Json):
    """The steps (see :mod:`engine.analysis.steps`) and what the CUDA API spent in and around them."""

    range: str
    source: str
    chosen_by: str
    pid: str
    count: int
    warmup_count: int
    total_ns: int
    first_ns: int
    median_ns: float
    steady_median_ns: float
    median_after_first_ns: float | None
    #: the first step minus the median of the others, 0 when the first was not slower
    first_iteration_extra_ns: int | None
    gpu_busy_per_step_ns: float
    api_per_iteration: tuple[ApiCost, ...]
    api_warmup: tuple[ApiCost, ...]
    api_one_time: tuple[ApiCost, ...]
    phases: tuple[Phase, ...]
    processes: tuple[ProcessSteps, ...]
    candidates: tuple[str, ...]
    #: how the steps were found ("gpu", "gpu+nvtx", "nvtx"), how sure (0..1) and why, in words
    method: str = "nvtx"
    confidence: float = 1.0
    why: str = ""
    #: the host-side step (median of the steady steps; the host may run ahead of the GPU)
    host_steady_median_ns: float | None = None
    #: steady steps that took more than 1.5x the median (stalls)
    outlier_steps: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopFinding(_Json):
    """A finding of the findings engine, as the summary shows it (see ``findings.overview``)."""

    id: str
    title: str
    severity: str
    text: str
    gain: str


@dataclass(frozen=True)
class Summary(_Json):
    """Where the time went (schema ``kernelscope.summary/2``)."""

    schema: str
    report: ReportMeta
    missing: tuple[str, ...]
    wall: Wall
    host: Host
    gpu: Gpu
    processes: tuple[ProcessRow, ...]
    bandwidth: tuple[BandwidthRow, ...]
    iterations: Iterations | None
    findings: tuple[TopFinding, ...] = ()
    #: why there are no steps (a single pass, nothing repeats), "" when there are
    no_steps: str = ""

    def part(self, name: str) -> GpuPart | None:
        """The GPU part called ``name`` ("kernels", "memset", "memcpy …"), None if absent."""
        return next((p for p in self.gpu.parts if p.part == name), None)
