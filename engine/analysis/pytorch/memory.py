"""GPU memory over time: allocated and reserved bytes per device, from what the recording holds.

- a Kineto trace recorded with ``profile_memory=True``: every caching-allocator event carries the
  device's *allocated* (tensors) and *reserved* (segments held by the allocator) totals;
- an nsys report recorded with ``--cuda-memory-usage=true``: the driver-level allocations
  (``cudaMalloc``, which is what PyTorch's allocator *reserves*), counted from the capture start;
- a ``torch.cuda.memory._snapshot()`` pickle (:mod:`engine.analysis.pytorch.snapshot`): allocations
  and segments with their stacks, replayed from the state at the dump.

The peak of the allocated curve is what ``torch.cuda.max_memory_allocated()`` reports for the same
window (when the program reset the peak at the window's start).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from engine.analysis.tables import trace_cache
from engine.system.arrays import distinct

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.base import Trace
    from engine.reports.torch_snapshot import SnapshotTrace

_CUDA_DEVICE_TYPE = 1  # c10::DeviceType::CUDA in Kineto's "[memory]" events


@dataclass
class MemoryCurve:
    """One device's memory over time (a step function: each value holds until the next time).

    Attributes:
        time_ns: when each value starts (ns from the trace start).
        allocated: bytes in live tensors (None when the source does not know it).
        reserved: bytes held from the driver (the allocator's segments, or cudaMalloc's total).
        events: allocator (or driver) events per time: +1 allocation, -1 free, 0 other.

    """

    device: int
    time_ns: npt.NDArray[np.int64]
    allocated: npt.NDArray[np.int64] | None
    reserved: npt.NDArray[np.int64] | None
    events: npt.NDArray[np.int8]

    def _peak(self, series: npt.NDArray[np.int64] | None) -> tuple[int, int]:
        if series is None or not len(series):
            return 0, -1
        i = int(np.argmax(series))
        return int(series[i]), i

    @property
    def peak_allocated(self) -> int:
        """The highest allocated total (0 when not known)."""
        return self._peak(self.allocated)[0]

    @property
    def peak_reserved(self) -> int:
        """The highest reserved total (0 when not known)."""
        return self._peak(self.reserved)[0]

    @property
    def peak_index(self) -> int:
        """Where the allocated (else reserved) curve peaks."""
        return self._peak(self.allocated if self.allocated is not None else self.reserved)[1]

    def to_json(self) -> dict[str, Any]:
        """The curve's summary (sample count, peaks and the peak's time) as a JSON-ready dict."""
        i = self.peak_index
        out: dict[str, Any] = {
            "device": self.device, "samples": len(self.time_ns),
            "peak_allocated_bytes": self.peak_allocated if self.allocated is not None else None,
            "peak_reserved_bytes": self.peak_reserved if self.reserved is not None else None,
            "peak_time_ns": int(self.time_ns[i]) if i >= 0 else None,
        }
        if self.allocated is not None and self.reserved is not None and i >= 0:
            out["reserved_at_peak_bytes"] = int(self.reserved[i])
        return out


@dataclass
class MemoryTimeline:
    """The curves of one recording, and what they measure.

    Attributes:
        source: "kineto", "nsys" or "snapshot".
        measures: a sentence saying what the numbers are.

    """

    source: str
    measures: str
    curves: list[MemoryCurve] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when no curve has a sample."""
        return not any(len(c.time_ns) for c in self.curves)

    def to_json(self) -> dict[str, Any]:
        """The source, what it measures, the notes and each device's summary as a JSON-ready dict."""
        return {"source": self.source, "measures": self.measures, "notes": self.notes,
                "devices": [c.to_json() for c in self.curves]}


def memory_timeline(trace: Trace) -> MemoryTimeline:
    """The memory curves of a Kineto trace or an nsys report (cached per trace)."""
    out: MemoryTimeline = trace_cache(trace, "pytorch.memory", lambda: _build(trace))
    return out


def _build(trace: Trace) -> MemoryTimeline:
    if trace.info.kind == "kineto":
        return _from_kineto(trace)
    if trace.info.kind == "snapshot":
        return from_snapshot(cast("SnapshotTrace", trace).columns_)
    return _from_nsys(trace)


def _from_kineto(trace: Any) -> MemoryTimeline:
    """The ``[memory]`` events of the CUDA devices, per device in time order (from the trace's columns)."""
    m = trace.events.memory
    cuda = np.flatnonzero(np.asarray(m["device_type"]) == _CUDA_DEVICE_TYPE)
    dev_of = np.asarray(m["device"])[cuda].astype(np.int64)
    tl = MemoryTimeline("kineto", "PyTorch's caching allocator: allocated = bytes in live tensors, "
                        "reserved = bytes the allocator holds from the driver.")
    for dev in distinct(dev_of).tolist():
        mine = cuda[dev_of == dev]
        mine = mine[np.argsort(np.asarray(m["ts"])[mine], kind="stable")]
        ts = np.asarray(m["ts"])[mine]
        tl.curves.append(MemoryCurve(
            device=int(dev), time_ns=np.round((ts - trace.base_ts_us) * 1000.0).astype(np.int64),
            allocated=np.asarray(m["allocated"])[mine].astype(np.int64),
            reserved=np.asarray(m["reserved"])[mine].astype(np.int64),
            events=np.sign(np.asarray(m["bytes"])[mine]).astype(np.int8)))
    if not len(cuda):
        tl.notes.append("The trace has no GPU memory events: record it with "
                        "torch.profiler.profile(profile_memory=True).")
    return tl


def _from_nsys(trace: Trace) -> MemoryTimeline:
    tl = MemoryTimeline("nsys", "Device memory obtained from the driver (cudaMalloc and friends), counted "
                        "from the capture's start: what PyTorch's allocator reserves, plus library "
                        "workspaces; allocations made before the capture are not included.")
    if not trace.has("memory_usage"):
        tl.notes.append("The report has no memory usage events: record it with nsys profile "
                        "--cuda-memory-usage=true.")
        return tl
    df = trace.table("memory_usage", ["start", "deviceId", "bytes", "memKind", "memoryOperationType"])
    df = df[df["memKind"].isin([2, 5])]  # device memory (dynamic and static)
    for dev, part in df.sort_values("start", kind="stable").groupby("deviceId", sort=True):
        sign = np.where(part["memoryOperationType"].to_numpy() == 1, -1, 1).astype(np.int64)
        delta = part["bytes"].to_numpy(np.int64) * sign
        tl.curves.append(MemoryCurve(device=int(cast(int, dev)), time_ns=part["start"].to_numpy(np.int64),
                                     allocated=None, reserved=np.cumsum(delta), events=sign.astype(np.int8)))
    return tl


def step_churn(curve: MemoryCurve, windows: list[tuple[int, int]]) -> list[int]:
    """Changes of the reserved total (segments taken from or given back to the driver) per window."""
    if curve.reserved is None or not len(curve.time_ns):
        return [0] * len(windows)
    changed = np.flatnonzero(np.diff(curve.reserved) != 0) + 1
    times = curve.time_ns[changed]
    return [int(np.count_nonzero((times >= a) & (times < b))) for a, b in windows]


_ALLOC, _FREE_DONE, _SEG_ALLOC, _SEG_FREE, _SEG_MAP, _SEG_UNMAP = 0, 2, 3, 4, 5, 6
_BLOCK = 512  # kMinBlockSize of the CUDA caching allocator


def _deltas(cols: Any, mine: Any) -> tuple[Any, Any]:
    act, size = cols.action[mine], cols.size[mine].astype(np.int64)
    # the trace has requested sizes; the allocator's totals count blocks, rounded up to 512 bytes
    block = (size + _BLOCK - 1) // _BLOCK * _BLOCK
    alloc = np.where(act == _ALLOC, block, np.where(act == _FREE_DONE, -block, 0))
    seg = np.where((act == _SEG_ALLOC) | (act == _SEG_MAP), size,
                   np.where((act == _SEG_FREE) | (act == _SEG_UNMAP), -size, 0))
    return alloc, seg


def from_snapshot(cols: Any) -> MemoryTimeline:
    """The curves of a memory snapshot: the events replayed back from the state at the dump."""
    tl = MemoryTimeline("snapshot", "PyTorch's caching allocator (memory snapshot): allocated = bytes in "
                        "live blocks, reserved = bytes in segments; replayed back from the state at "
                        "the dump.")
    if not cols.n:
        tl.notes.append("The snapshot has no allocator events: call "
                        "torch.cuda.memory._record_memory_history() before the code to look at, "
                        "then _dump_snapshot().")
    t0 = int(np.min(cols.time_us)) if cols.n else 0
    for dev in sorted(set(distinct(cols.device).tolist()) | set(cols.end_reserved)):
        mine = np.flatnonzero(np.asarray(cols.device) == dev)
        alloc, seg = _deltas(cols, mine)
        allocated = int(cols.end_allocated.get(dev, 0)) - int(alloc.sum()) + np.cumsum(alloc)
        reserved = int(cols.end_reserved.get(dev, 0)) - int(seg.sum()) + np.cumsum(seg)
        tl.curves.append(MemoryCurve(
            device=int(dev), time_ns=(np.asarray(cols.time_us[mine], dtype=np.int64) - t0) * 1000,
            allocated=allocated, reserved=reserved, events=np.sign(alloc).astype(np.int8)))
        low = min(int(allocated.min(initial=0)), int(reserved.min(initial=0)))
        if low < 0:
            tl.notes.append(f"GPU {dev}: replaying the events back from the dump gives "
                            f"{low / 2**20:,.1f} MiB "
                            "at some point: events are missing from the trace (the history's max_entries "
                            "was reached, or it was started mid-run); the curve's shape holds, its level "
                            "does not.")
    return tl


def alive_at_peak(cols: Any, curve: MemoryCurve, *, limit: int = 50) -> list[dict[str, Any]]:
    """The blocks alive at the allocated curve's peak, grouped by the stack that allocated them."""
    k = curve.peak_index
    if k < 0 or curve.allocated is None:
        return []
    mine = np.flatnonzero(np.asarray(cols.device) == curve.device)
    act = np.asarray(cols.action[mine])
    addr = np.asarray(cols.addr[mine])
    idx = np.arange(len(mine))
    ev = np.flatnonzero((act == _ALLOC) | (act == _FREE_DONE))
    order = ev[np.lexsort((idx[ev], addr[ev]))]  # by address, then time
    alive = []
    for pos, i in enumerate(order.tolist()):
        if act[i] != _ALLOC or i > k:
            continue
        nxt = order[pos + 1] if pos + 1 < len(order) else -1
        freed_before = nxt >= 0 and addr[nxt] == addr[i] and act[nxt] == _FREE_DONE and nxt <= k
        if not freed_before:
            alive.append(i)
    groups: dict[int, list[int]] = {}
    for i in alive:
        groups.setdefault(int(cols.stack[mine[i]]), []).append(-(-int(cols.size[mine[i]]) // _BLOCK) * _BLOCK)
    rows = [{"where": cols.stacks[s], "blocks": len(v), "bytes": int(sum(v))} for s, v in groups.items()]
    rows.sort(key=lambda r: -r["bytes"])
    known = sum(r["bytes"] for r in rows)
    before = int(curve.allocated[k]) - known
    if before > 0:
        rows.append({"where": "(allocated before the recording started)", "blocks": 0, "bytes": before})
        rows.sort(key=lambda r: -r["bytes"])
    return rows[:limit]
