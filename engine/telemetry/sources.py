"""Where snapshots come from: live NVML (:class:`NvmlSource`) or a recording (:class:`ReplaySource`).

A source is driven by exactly one thread (the :class:`~engine.telemetry.sampler.Sampler`'s):
``open`` once, then ``read`` repeatedly, then ``close``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engine.system.nvml import UNAVAILABLE_HINT, Nvml, init_failure_sentence, load_pynvml, nvml_available
from engine.telemetry.errors import RecordingError, TelemetryError, TelemetryUnavailable
from engine.telemetry.snapshot import GpuSample, Snapshot

GPM_MIN_WINDOW_S = 0.1  # NVML wants GPM samples at least 100 ms apart


@dataclass(frozen=True)
class SamplingRates:
    """How often each group of NVML readings is refreshed (seconds); the rest repeat the last value.

    The sampler's period only sets how often the fast group (utilization, memory, SM clock, power)
    is read. The groups are refreshed when their period has passed, less a small tolerance so a
    group on a multiple of the sampler's period does not slip one tick on timer jitter.

    Attributes:
        gpm_s: GPM window (Hopper and newer); at least 0.1 s, as NVML asks. Each window costs
            ~1.7 ms of CPU in ``nvmlGpmMetricsGet`` on an H200 (measured), so the default 1 s
            window keeps GPM under 0.2 % of a core; the values are averages over the window.
        medium_s: temperature, memory clock, clock-event (throttle) reasons, power limit.
        slow_s: energy (~4 ms of CPU per call on an H200; the counter is cumulative, so reading
            it seldom loses nothing), ECC counts, the process list.
        pcie_s: legacy ``nvmlDeviceGetPcieThroughput`` (each call blocks ~20 ms), only where GPM
            does not give the PCIe rates.
    """

    gpm_s: float = 1.0
    medium_s: float = 1.0
    slow_s: float = 10.0
    pcie_s: float = 1.0

    def __post_init__(self) -> None:
        if self.gpm_s < GPM_MIN_WINDOW_S:
            raise ValueError(f"GPM windows must be at least {GPM_MIN_WINDOW_S} s, not {self.gpm_s}.")
        for name in ("medium_s", "slow_s", "pcie_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}.")


def _due(now: float, last: float, period: float) -> bool:
    """Whether a group read at ``last`` is due again at ``now`` (tolerating 10 ms of timer jitter)."""
    return now - last >= period - min(0.01, period / 4)

# GpuSample field -> pynvml GPM metric constant; PCIe/NVLink rates are MiB/s in NVML.
GPM_METRICS: dict[str, tuple[str, float]] = {
    "gpm_sm_util_pct": ("NVML_GPM_METRIC_SM_UTIL", 1.0),
    "gpm_sm_occupancy_pct": ("NVML_GPM_METRIC_SM_OCCUPANCY", 1.0),
    "gpm_tensor_util_pct": ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", 1.0),
    "gpm_dram_bw_util_pct": ("NVML_GPM_METRIC_DRAM_BW_UTIL", 1.0),
    "gpm_graphics_util_pct": ("NVML_GPM_METRIC_GRAPHICS_UTIL", 1.0),
    "gpm_pcie_tx_bytes_per_s": ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", 2.0**20),
    "gpm_pcie_rx_bytes_per_s": ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", 2.0**20),
    "gpm_nvlink_tx_bytes_per_s": ("NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", 2.0**20),
    "gpm_nvlink_rx_bytes_per_s": ("NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", 2.0**20),
}


class Source(Protocol):
    """What the sampler needs from a source of snapshots."""

    #: True if ``read`` keeps its own clock (a replay); False if the sampler schedules reads.
    paced: bool

    def open(self, gpus: frozenset[int] | None) -> None:
        """Prepare to read GPUs ``gpus`` (None = all). Raises TelemetryError with a sentence."""

    def read(self, stop: threading.Event) -> Snapshot | None:
        """The next snapshot, or None when the source is exhausted. May raise on failure."""

    def close(self) -> None:
        """Release resources. Never raises."""


class _Gpu:
    """Per-GPU state kept by NvmlSource between reads."""

    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.uuid: str | None = None
        self.name: str | None = None
        self.gpm_ids: dict[str, tuple[int, float]] = {}
        self.gpm_samples: list[Any] = []  # two alternating NVML sample buffers
        self.gpm_prev: int | None = None  # index of the buffer holding the previous sample
        self.gpm_prev_t = 0.0
        self.gpm_values: dict[str, float | None] = {}
        self.medium_t = self.slow_t = self.pcie_t = -1e18
        self.medium: dict[str, Any] = {}
        self.slow: dict[str, Any] = {}
        self.pcie: tuple[float | None, float | None] = (None, None)
        self.pcie_from_gpm = False  # True once GPM has given a PCIe rate: no legacy calls then


def _text(v: Any) -> str | None:
    if v is None:
        return None
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


class NvmlSource:
    """Live readings from NVML, every call through :class:`~engine.system.nvml.Nvml`.

    Each tick reads the fast group (utilization, memory, SM clock, power); the other readings are
    refreshed at the slower :class:`SamplingRates` and repeated in between, which is what keeps a
    10 Hz sampler under 1 % of a core. GPM metrics (Hopper and newer) are read only on GPUs where
    ``nvmlGpmQueryDeviceSupport`` says so, over windows of at least 100 ms. PCIe rates come from GPM
    where it gives them; elsewhere from ``nvmlDeviceGetPcieThroughput`` (each call blocks ~20 ms).

    Args:
        lib: The ``pynvml`` module, or a stand-in for tests; None loads ``pynvml``.
        rates: How often the slower groups are refreshed.
    """

    paced = False

    def __init__(self, lib: Any | None = None, rates: SamplingRates | None = None) -> None:
        self.nvml = Nvml(lib if lib is not None else load_pynvml())
        self.rates = rates or SamplingRates()
        self._gpus: list[_Gpu] = []
        self._wanted: frozenset[int] | None = None
        self._open = False
        self._throttle_names: list[tuple[int, str]] = []
        self._proc_names: dict[int, str] = {}
        self._const: dict[str, Any] = {}

    def open(self, gpus: frozenset[int] | None = None) -> None:
        """Initialise NVML (once) and find the GPUs.

        Raises:
            TelemetryUnavailable: no driver, no GPU, no permission, or a requested GPU is missing.
        """
        lib = self.nvml.lib
        if lib is None:
            raise TelemetryUnavailable(nvml_available(None)[1])
        try:
            lib.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - turned into the sentence nvml_available gives
            raise TelemetryUnavailable(init_failure_sentence(exc)) from exc
        self._open = True
        self._wanted = gpus
        count = self.nvml.query("nvmlDeviceGetCount", default=0) or 0
        if not count:
            self.close()
            raise TelemetryUnavailable(
                "Telemetry is unavailable: the NVIDIA driver is loaded but reports no GPU. "
                f"Check that `nvidia-smi` lists one, {UNAVAILABLE_HINT}"
            )
        missing = sorted(i for i in (gpus or ()) if i >= count)
        if missing:
            self.close()
            raise TelemetryUnavailable(
                f"GPU {', '.join(map(str, missing))} does not exist: this machine has {count} GPU(s) "
                f"(indices 0-{count - 1}); pick one with --gpu."
            )
        self._const = {
            "clock_sm": self.nvml.const("NVML_CLOCK_SM", 1),
            "clock_mem": self.nvml.const("NVML_CLOCK_MEM", 2),
            "temp_gpu": self.nvml.const("NVML_TEMPERATURE_GPU", 0),
        }
        self._throttle_names = self._reason_names()
        self._gpus = []
        for i in range(count):
            if gpus is not None and i not in gpus:
                continue
            self._gpus.append(self._init_gpu(i))
        self.nvml.take_fatal()

    def _reason_names(self) -> list[tuple[int, str]]:
        lib = self.nvml.lib
        seen: dict[int, str] = {}
        for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
            for attr in sorted(dir(lib)):
                if not attr.startswith(prefix):
                    continue
                name = attr[len(prefix):]
                bit = getattr(lib, attr)
                # single bits only ("All", "None" and combined masks are not reasons)
                if isinstance(bit, int) and bit > 0 and bit & (bit - 1) == 0 and bit not in seen:
                    seen[bit] = name
        return sorted(seen.items())

    def _init_gpu(self, index: int) -> _Gpu:
        q = self.nvml.query
        g = _Gpu(index, q("nvmlDeviceGetHandleByIndex", index))
        if g.handle is None:
            return g
        g.uuid = _text(q("nvmlDeviceGetUUID", g.handle))
        g.name = _text(q("nvmlDeviceGetName", g.handle))
        support = q("nvmlGpmQueryDeviceSupport", g.handle)
        if support is not None and bool(getattr(support, "isSupportedDevice", False)):
            for field, (const, scale) in GPM_METRICS.items():
                mid = self.nvml.const(const)
                if mid is not None:
                    g.gpm_ids[field] = (int(mid), scale)
            bufs = [q("nvmlGpmSampleAlloc") for _ in range(2)]
            if all(b is not None for b in bufs):
                g.gpm_samples = bufs
            else:
                g.gpm_ids = {}
        return g

    def close(self) -> None:
        """Free GPM buffers and shut NVML down (reference-counted by NVML). Never raises."""
        for g in self._gpus:
            for buf in g.gpm_samples:
                self.nvml.query("nvmlGpmSampleFree", buf)
            g.gpm_samples = []
        self._gpus = []
        if self._open:
            self._open = False
            self.nvml.query("nvmlShutdown")

    def read(self, stop: threading.Event | None = None) -> Snapshot:
        """Read every selected GPU now; a GPU or driver failure gives a gap snapshot."""
        ts = time.time_ns()
        samples = []
        lost: list[str] = []
        for g in self._gpus:
            if g.handle is None:  # handle could not be had at open: try again (GPU may be back)
                g.handle = self.nvml.query("nvmlDeviceGetHandleByIndex", g.index)
                if g.handle is None:
                    lost.append(f"GPU {g.index}: {self.nvml.take_fatal() or 'no handle'}")
                    continue
            s = self._read_gpu(g, ts)
            fatal = self.nvml.take_fatal()
            if fatal:
                lost.append(f"GPU {g.index}: {fatal}")
                g.medium_t = g.slow_t = g.pcie_t = -1e18  # re-read everything once it is back
                g.gpm_prev = None
            else:
                samples.append(s)
        if lost:
            return Snapshot(ts, tuple(samples), gap=True,
                            gap_reason=f"NVML failed mid-run ({'; '.join(lost)}); sampling continues.")
        return Snapshot(ts, tuple(samples))

    def _read_gpu(self, g: _Gpu, ts: int) -> GpuSample:
        q, h, c, rates = self.nvml.query, g.handle, self._const, self.rates
        util = q("nvmlDeviceGetUtilizationRates", h)
        mem = q("nvmlDeviceGetMemoryInfo", h)
        power_mw = q("nvmlDeviceGetPowerUsage", h)
        sm_clock = q("nvmlDeviceGetClockInfo", h, c["clock_sm"])
        now = time.monotonic()
        if _due(now, g.medium_t, rates.medium_s):
            g.medium_t = now
            g.medium = self._read_medium(g)
        if _due(now, g.slow_t, rates.slow_s):
            g.slow_t = now
            g.slow = self._read_slow(g)
        if g.gpm_ids and g.gpm_samples:
            self._read_gpm(g, now)
        tx, rx = g.gpm_values.get("gpm_pcie_tx_bytes_per_s"), g.gpm_values.get("gpm_pcie_rx_bytes_per_s")
        if tx is not None or rx is not None:
            g.pcie_from_gpm = True
        elif not g.pcie_from_gpm:
            if _due(now, g.pcie_t, rates.pcie_s):
                g.pcie_t = now
                g.pcie = self._read_pcie(g)
            tx, rx = g.pcie
        medium, slow = g.medium, g.slow
        gv = g.gpm_values
        return GpuSample(
            timestamp_ns=ts,
            gpu=g.index,
            uuid=g.uuid,
            name=g.name,
            util_gpu_pct=None if util is None else float(util.gpu),
            util_mem_pct=None if util is None else float(util.memory),
            mem_used_bytes=None if mem is None else int(mem.used),
            mem_total_bytes=None if mem is None else int(mem.total),
            sm_clock_mhz=sm_clock,
            mem_clock_mhz=medium.get("mem_clock_mhz"),
            power_w=None if power_mw is None else power_mw / 1000.0,
            power_limit_w=medium.get("power_limit_w"),
            energy_j=slow.get("energy_j"),
            temp_c=medium.get("temp_c"),
            pcie_tx_bytes_per_s=tx,
            pcie_rx_bytes_per_s=rx,
            throttle_reasons=medium.get("throttle_reasons"),
            ecc_errors=slow.get("ecc_errors"),
            processes=slow.get("processes"),
            gpm_sm_util_pct=gv.get("gpm_sm_util_pct"),
            gpm_sm_occupancy_pct=gv.get("gpm_sm_occupancy_pct"),
            gpm_tensor_util_pct=gv.get("gpm_tensor_util_pct"),
            gpm_dram_bw_util_pct=gv.get("gpm_dram_bw_util_pct"),
            gpm_graphics_util_pct=gv.get("gpm_graphics_util_pct"),
            gpm_pcie_tx_bytes_per_s=gv.get("gpm_pcie_tx_bytes_per_s"),
            gpm_pcie_rx_bytes_per_s=gv.get("gpm_pcie_rx_bytes_per_s"),
            gpm_nvlink_tx_bytes_per_s=gv.get("gpm_nvlink_tx_bytes_per_s"),
            gpm_nvlink_rx_bytes_per_s=gv.get("gpm_nvlink_rx_bytes_per_s"),
        )

    def _read_medium(self, g: _Gpu) -> dict[str, Any]:
        q, h, c = self.nvml.query, g.handle, self._const
        reasons = q("nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None:
            reasons = q("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        limit_mw = q("nvmlDeviceGetEnforcedPowerLimit", h)
        return {
            "mem_clock_mhz": q("nvmlDeviceGetClockInfo", h, c["clock_mem"]),
            "temp_c": _float(q("nvmlDeviceGetTemperature", h, c["temp_gpu"])),
            "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
            "throttle_reasons": None if reasons is None else tuple(
                name for bit, name in self._throttle_names if int(reasons) & bit),
        }

    def _read_pcie(self, g: _Gpu) -> tuple[float | None, float | None]:
        q, h = self.nvml.query, g.handle
        out: list[float | None] = []
        for const, default in (("NVML_PCIE_UTIL_TX_BYTES", 0), ("NVML_PCIE_UTIL_RX_BYTES", 1)):
            kib = q("nvmlDeviceGetPcieThroughput", h, self.nvml.const(const, default))
            out.append(None if kib is None else kib * 1024.0)  # NVML: KiB/s
        return out[0], out[1]

    def _read_slow(self, g: _Gpu) -> dict[str, Any]:
        q, h, lib = self.nvml.query, g.handle, self.nvml.lib
        energy_mj = q("nvmlDeviceGetTotalEnergyConsumption", h)  # ~3.5 ms of CPU on an H200
        ecc = q("nvmlDeviceGetTotalEccErrors", h, getattr(lib, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                getattr(lib, "NVML_VOLATILE_ECC", 0))
        procs: dict[int, int | None] = {}
        got_any = False
        for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            plist = q(fn, h)
            if plist is None:
                continue
            got_any = True
            for p in plist:
                used = getattr(p, "usedGpuMemory", None)
                procs[int(p.pid)] = None if used is None else int(used)
        processes = None
        if got_any:
            processes = tuple((pid, self._proc_name(pid), used) for pid, used in sorted(procs.items()))
        return {
            "ecc_errors": None if ecc is None else int(ecc),
            "processes": processes,
            "energy_j": None if energy_mj is None else energy_mj / 1000.0,
        }

    def _proc_name(self, pid: int) -> str:
        name = self._proc_names.get(pid)
        if name is None:
            name = _text(self.nvml.query("nvmlSystemGetProcessName", pid)) or ""
            if len(self._proc_names) > 4096:
                self._proc_names.clear()
            self._proc_names[pid] = name
        return name

    def _read_gpm(self, g: _Gpu, now: float) -> None:
        """Take a GPM sample if the window since the last one is >= 100 ms, and compute metrics."""
        q = self.nvml.query
        window = max(self.rates.gpm_s - 0.01, GPM_MIN_WINDOW_S - 0.002)  # 2 ms of timer jitter at most
        if g.gpm_prev is not None and now - g.gpm_prev_t < window:
            return  # too soon: keep the last window's values
        cur = 0 if g.gpm_prev in (None, 1) else 1
        if q("nvmlGpmSampleGet", g.handle, g.gpm_samples[cur]) is None:
            g.gpm_values = {}
            g.gpm_prev = None
            return
        if g.gpm_prev is not None:
            g.gpm_values = self._gpm_metrics(g, g.gpm_samples[g.gpm_prev], g.gpm_samples[cur])
        g.gpm_prev, g.gpm_prev_t = cur, now

    def _gpm_metrics(self, g: _Gpu, s1: Any, s2: Any) -> dict[str, float | None]:
        lib = self.nvml.lib
        mg = lib.c_nvmlGpmMetricsGet_t()
        mg.version = lib.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(g.gpm_ids)
        mg.sample1, mg.sample2 = s1, s2
        fields = list(g.gpm_ids)
        for i, f in enumerate(fields):
            mg.metrics[i].metricId = g.gpm_ids[f][0]
        if self.nvml.query("nvmlGpmMetricsGet", mg) is None:
            return {}
        out: dict[str, float | None] = {}
        for i, f in enumerate(fields):
            m = mg.metrics[i]
            out[f] = None if m.nvmlReturn != 0 else float(m.value) * g.gpm_ids[f][1]
        return out


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


class ReplaySource:
    """Replays a recording (ours, CSV or Parquet, or the fixture CSV format).

    Snapshots keep the recorded (wall-clock) timestamps, so a replay lines up with nsys/ncu
    sessions recorded at the same time. ``speed`` 1.0 replays in real time, 10 ten times faster,
    and 0 as fast as possible.

    Args:
        path: The recording.
        speed: Replay speed.
        start_ns: Only for a recording with times relative to its start (the fixture format): its
            wall-clock start in epoch ns, added to every timestamp.

    Raises:
        RecordingError: (from the constructor) the file is missing, corrupt or foreign, or
            ``start_ns`` is given for a recording that already has wall-clock times.
    """

    paced = True

    def __init__(self, path: str | Path, speed: float = 1.0, start_ns: int | None = None) -> None:
        if not speed >= 0:
            raise RecordingError(f"--speed must be 0 (as fast as possible) or more, not {speed}.")
        from engine.telemetry.recording import read_recording

        self.path = Path(path)
        self.speed = float(speed)
        self.frame = read_recording(self.path)
        if start_ns is not None:
            from engine.telemetry.align import absolute_times

            try:
                self.frame = absolute_times(self.frame, start_ns)
            except TelemetryError as exc:
                raise RecordingError(f"{self.path}: {exc}") from exc
        self.relative_time = bool(self.frame.attrs.get("relative_time"))
        self._snaps: list[Snapshot] | None = None
        self._pos = 0
        self._t0_mono = 0.0
        self._t0_ns = 0

    def snapshots(self, gpus: frozenset[int] | None = None) -> list[Snapshot]:
        """All snapshots of the recording at once, restricted to ``gpus`` (None = all)."""
        from engine.telemetry.recording import row_to_sample

        out: list[Snapshot] = []
        records = self.frame.to_dict("records")
        i = 0
        try:
            while i < len(records):
                ts = int(records[i]["timestamp_ns"])
                j = i
                samples = []
                gap, reason = False, None
                while j < len(records) and int(records[j]["timestamp_ns"]) == ts:
                    r = records[j]
                    gap = gap or bool(r["gap"] == 1)
                    reason = reason or (None if _na(r["gap_reason"]) else str(r["gap_reason"]))
                    if not _na(r["gpu"]) and (gpus is None or int(r["gpu"]) in gpus):
                        samples.append(row_to_sample(r))
                    j += 1
                out.append(Snapshot(ts, tuple(samples), gap=gap, gap_reason=reason if gap else None))
                i = j
        except (ValueError, TypeError, KeyError, IndexError, json.JSONDecodeError) as exc:
            raise RecordingError(
                f"The recording {self.path} is corrupt near timestamp_ns {records[i]['timestamp_ns']} "
                f"({type(exc).__name__}: {exc})."
            ) from exc
        return out

    def open(self, gpus: frozenset[int] | None = None) -> None:
        """Build the snapshots for ``gpus`` and restart the replay clock."""
        self._snaps = self.snapshots(gpus)
        self._pos = 0

    def read(self, stop: threading.Event | None = None) -> Snapshot | None:
        """The next recorded snapshot, after waiting (on ``stop``) until its replay time."""
        if self._snaps is None:
            raise TelemetryError("ReplaySource.read() called before open().")
        if self._pos >= len(self._snaps):
            return None
        snap = self._snaps[self._pos]
        if self._pos == 0:
            self._t0_mono, self._t0_ns = time.monotonic(), snap.timestamp_ns
        elif self.speed > 0:
            due = self._t0_mono + (snap.timestamp_ns - self._t0_ns) / 1e9 / self.speed
            delay = due - time.monotonic()
            if delay > 0:
                if stop is not None:
                    if stop.wait(delay):
                        return None
                else:
                    time.sleep(delay)
        self._pos += 1
        return snap

    def close(self) -> None:
        """Nothing to release (the recording was read at construction)."""

    def __len__(self) -> int:
        return len(self._snaps if self._snaps is not None else self.snapshots())


def _na(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(v != v)  # NaN
    except (TypeError, ValueError):  # pd.NA compares to NA
        return True
