"""Telemetry: replay of the real H200 recording, recorder round trip, sampler thread, NVML without
a GPU, and NVML failures mid-run (through a stand-in for pynvml, since no GPU exists here)."""

from __future__ import annotations

import csv
import dataclasses
import math
import threading
from pathlib import Path
from typing import Any

import pytest

from engine.system.errors import KernelscopeError
from engine.system.nvml import Nvml, nvml_available
from engine.telemetry.errors import RecordingError, TelemetryUnavailable
from engine.telemetry.recording import Recorder, read_recording
from engine.telemetry.sampler import Sampler
from engine.telemetry.snapshot import GpuSample, Snapshot
from engine.telemetry.sources import NvmlSource, ReplaySource
from tests.conftest import FIXTURES

H200 = FIXTURES / "telemetry" / "telemetry_h200.csv"
pytestmark = pytest.mark.skipif(not H200.is_file(), reason="shared fixtures missing")
pynvml = pytest.importorskip("pynvml")


def _fixture_rows() -> list[dict[str, str]]:
    with open(H200, newline="") as f:
        return list(csv.DictReader(f))


def _num(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return None if math.isnan(v) else v


# -- replay of the real recording ------------------------------------------------------------------
def test_replay_fixture_values_equal_the_csv() -> None:
    rows = _fixture_rows()
    src = ReplaySource(H200, speed=0)
    src.open()
    snaps = []
    while (s := src.read()) is not None:
        snaps.append(s)
    assert len(snaps) == len(rows) == 127
    ts = [s.timestamp_ns for s in snaps]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    nan_seen = 0
    for row, snap in zip(rows, snaps, strict=True):
        assert not snap.gap and len(snap.gpus) == 1
        g = snap.gpus[0]
        assert g.gpu == 0 and g.timestamp_ns == snap.timestamp_ns == round(float(row["t"]) * 1e9)
        assert g.util_gpu_pct == float(row["util_gpu"])
        assert g.util_mem_pct == float(row["util_mem"])
        assert g.mem_used_bytes == int(row["mem_used_mb"]) * 2**20
        assert g.sm_clock_mhz == int(row["sm_mhz"]) and g.mem_clock_mhz == int(row["mem_mhz"])
        assert g.power_w == float(row["power_w"]) and g.temp_c == float(row["temp_c"])
        assert g.pcie_tx_bytes_per_s == int(row["pcie_tx_kbs"]) * 1024
        assert g.pcie_rx_bytes_per_s == int(row["pcie_rx_kbs"]) * 1024
        for ours, theirs in [("gpm_sm_occupancy_pct", "gpm_sm_occupancy"), ("gpm_sm_util_pct", "gpm_sm_util"),
                             ("gpm_tensor_util_pct", "gpm_any_tensor_util"),
                             ("gpm_dram_bw_util_pct", "gpm_dram_bw_util"),
                             ("gpm_graphics_util_pct", "gpm_graphics_util")]:
            assert getattr(g, ours) == _num(row[theirs])
            nan_seen += _num(row[theirs]) is None
        assert g.uuid is None and g.energy_j is None and g.processes is None  # not in this file: NA
    assert nan_seen > 0  # the recording has NVML's "nan" GPM cells, which must become NA
    assert max(s.gpus[0].gpm_sm_util_pct or 0 for s in snaps) > 40  # the workload shows up


def test_replay_speed_zero_through_sampler_keeps_order_and_ends() -> None:
    with Sampler(ReplaySource(H200, speed=0), ring_size=1000) as sampler:
        assert sampler.wait(timeout=30)
    assert sampler.count == 127 and not sampler.running
    ts = [s.timestamp_ns for s in sampler.history()]
    assert ts == sorted(ts) and len(ts) == 127


def test_replay_real_time_speed_is_stoppable() -> None:
    sampler = Sampler(ReplaySource(H200, speed=1.0)).start()
    sampler.stop()  # the 12 s replay must end promptly when asked
    assert not sampler.running and sampler.count < 127


def test_replay_gpu_selection() -> None:
    with Sampler(ReplaySource(H200, speed=0), gpus="1") as sampler:
        sampler.wait(timeout=30)
    assert sampler.count == 127 and all(s.gpus == () for s in sampler.history())


# -- recording round trip --------------------------------------------------------------------------
def _sample(ts: int, gpu: int, **kw: Any) -> GpuSample:
    return GpuSample(timestamp_ns=ts, gpu=gpu, **kw)


def test_recorder_csv_round_trip(tmp_path: Path) -> None:
    t = 1_760_000_000_123_456_789
    full = _sample(t, 0, uuid="GPU-abc", name="NVIDIA H200", util_gpu_pct=97.0, util_mem_pct=41.0,
                   mem_used_bytes=80 * 2**30, mem_total_bytes=141 * 2**30, sm_clock_mhz=1980,
                   mem_clock_mhz=3201, power_w=612.345, power_limit_w=700.0, energy_j=123456.789,
                   temp_c=61.0, pcie_tx_bytes_per_s=1.5e9, pcie_rx_bytes_per_s=2.0e6,
                   throttle_reasons=("SwPowerCap", "SwThermalSlowdown"), ecc_errors=0,
                   processes=((4242, "python, \"train\"", 2**33), (7, "", None)),
                   gpm_sm_util_pct=99.5, gpm_sm_occupancy_pct=48.25, gpm_tensor_util_pct=87.125,
                   gpm_dram_bw_util_pct=33.3, gpm_pcie_tx_bytes_per_s=1e6, gpm_nvlink_rx_bytes_per_s=0.0)
    bare = _sample(t, 1, throttle_reasons=())  # everything else NA
    snaps = [
        Snapshot(t, (full, bare)),
        Snapshot(t + 100_000_000, (), gap=True, gap_reason="NVML failed mid-run (GPU 0: lost)."),
        Snapshot(t + 200_000_000, (dataclasses.replace(full, timestamp_ns=t + 200_000_000),),
                 gap=True, gap_reason="GPU 1: lost"),
    ]
    path = tmp_path / "rec.csv"
    with Recorder(path) as rec:
        for s in snaps:
            rec.write(s)
    assert rec.rows_written == 4
    df = read_recording(path)
    assert len(df) == 4 and int(df["timestamp_ns"].iloc[0]) == t and not df.attrs["relative_time"]
    assert "bytes" in "".join(df.columns) and "mem_used_bytes" in df.columns
    header = path.read_text().splitlines()[0]
    assert header.startswith("timestamp_ns,gpu,uuid,name,util_gpu_pct")
    src = ReplaySource(path, speed=0)
    assert src.snapshots() == snaps  # exact: NA stays NA, empty throttle set stays empty


def test_parquet_without_pyarrow_is_one_sentence(tmp_path: Path) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(RecordingError, match="pyarrow"):
            Recorder(tmp_path / "x.parquet")
    else:
        snap = Snapshot(5, (_sample(5, 0, power_w=1.5, throttle_reasons=("GpuIdle",)),))
        with Recorder(tmp_path / "x.parquet") as rec:
            rec.write(snap)
        assert ReplaySource(tmp_path / "x.parquet").snapshots() == [snap]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "is empty"),
        (b"\x00\xff\xfe garbage \x89PNG\r\n", "not a readable CSV|not a Kernelscope"),
        (b"name,age\nbob,3\n", "not a Kernelscope telemetry recording"),
        (b"timestamp_ns,gpu,power_w\n1,0,12.5\n2,0,hot\n", "corrupt: column power_w"),
        (b"t,util_gpu\n0.1,5\nsoon,6\n", "corrupt: column t"),
        (b"timestamp_ns,gpu,processes\n1,0,[[1,\n", "corrupt"),
    ],
)
def test_corrupt_or_foreign_recording_is_a_clear_error(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(KernelscopeError, match=match) as info:
        ReplaySource(path).snapshots()
    assert str(info.value).endswith(".") and "\n" not in str(info.value)


def test_missing_recording(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="does not exist"):
        ReplaySource(tmp_path / "nope.csv")


# -- sampler ---------------------------------------------------------------------------------------
def test_sampler_ring_is_bounded_and_snapshots_immutable() -> None:
    seen: list[Snapshot] = []
    sampler = Sampler(ReplaySource(H200, speed=0), ring_size=10)
    sampler.subscribe(seen.append)
    with sampler:
        sampler.wait(timeout=30)
    assert len(sampler.history()) == 10 and len(sampler.history(3)) == 3 and len(seen) == 127
    assert sampler.history()[-1] is sampler.latest() is seen[-1]
    latest = sampler.latest()
    assert latest is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        latest.timestamp_ns = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        latest.gpus[0].power_w = 0.0  # type: ignore[misc]
    assert isinstance(latest.gpus, tuple)


def test_sampler_survives_a_failing_subscriber() -> None:
    def boom(_: Snapshot) -> None:
        raise RuntimeError("view broke")

    sampler = Sampler(ReplaySource(H200, speed=0))
    sampler.subscribe(boom)
    with sampler:
        sampler.wait(timeout=30)
    assert sampler.count == 127


# -- NVML on this GPU-less machine -----------------------------------------------------------------
def test_nvml_unavailable_here_is_a_sentence_not_an_exception() -> None:
    ok, reason = nvml_available()
    if ok:
        pytest.skip("this machine has a working NVIDIA driver")
    assert reason.startswith("Telemetry is unavailable: ") and reason.endswith("--replay FILE.")
    assert "libnvidia-ml.so.1" in reason
    with pytest.raises(TelemetryUnavailable) as info:
        Sampler(NvmlSource()).start()
    assert str(info.value) == reason


def test_wrapper_returns_na_not_exceptions() -> None:
    nvml = Nvml()
    assert nvml.query("nvmlDeviceGetCount") is None  # no driver: NA
    assert nvml.query("nvmlNoSuchFunction") is None
    assert nvml.query("nvmlDeviceGetPowerUsage", None) is None


def test_library_not_found_sentence() -> None:
    class NoLib:
        def nvmlInit(self) -> None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    ok, reason = nvml_available(NoLib())
    assert not ok and reason == (
        "Telemetry is unavailable: no NVIDIA driver (libnvidia-ml.so.1 not found). Install the NVIDIA "
        "driver, or replay a recording with --replay FILE.")


# -- a stand-in for pynvml with one GPU that can be lost -------------------------------------------
class FakeNvml:
    """Just enough of pynvml for one GPU; `lost` makes every device call fail like a GPU off the bus.

    Functions it does not define raise NotSupported, as NVML does for unsupported metrics.
    """

    def __init__(self) -> None:
        self.lost = False
        self.calls = 0
        self.inits = 0

    def __dir__(self) -> list[str]:
        return sorted(set(dir(pynvml)) | set(super().__dir__()))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("nvml") and not name.startswith(("nvmlClocks",)):
            def unsupported(*args: Any) -> Any:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return unsupported
        return getattr(pynvml, name)

    def _dev(self) -> None:
        self.calls += 1
        if self.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlDeviceGetHandleByIndex(self, i: int) -> object:
        self._dev()
        return ("handle", i)

    def nvmlDeviceGetName(self, h: object) -> str:
        return "Fake H200"

    def nvmlDeviceGetUtilizationRates(self, h: object) -> Any:
        self._dev()
        return pynvml.c_nvmlUtilization_t(gpu=77, memory=12)

    def nvmlDeviceGetPowerUsage(self, h: object) -> int:
        self._dev()
        return 250_500

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: object) -> int:
        self._dev()
        return int(pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonGpuIdle)


def test_fake_gpu_failure_mid_run_gives_gaps_and_the_stream_continues() -> None:
    fake = FakeNvml()
    src = NvmlSource(lib=fake)
    src.open()
    first = src.read()
    assert not first.gap and first.gpus[0].util_gpu_pct == 77.0 and first.gpus[0].power_w == 250.5
    assert first.gpus[0].name == "Fake H200" and first.gpus[0].temp_c is None  # unsupported: NA
    assert set(first.gpus[0].throttle_reasons or ()) == {"SwPowerCap", "GpuIdle"}
    fake.lost = True
    lost = src.read()
    assert lost.gap and lost.gpus == () and "GPU is lost" in (lost.gap_reason or "")
    fake.lost = False
    again = src.read()
    assert not again.gap and again.gpus[0].util_gpu_pct == 77.0
    src.close()
    assert fake.inits == 0  # every nvmlInit was matched by nvmlShutdown


def test_sampler_turns_source_exceptions_into_gaps_and_continues() -> None:
    class Flaky:
        paced = False

        def __init__(self) -> None:
            self.n = 0
            self.closed = threading.Event()

        def open(self, gpus: frozenset[int] | None) -> None:
            pass

        def read(self, stop: threading.Event) -> Snapshot:
            self.n += 1
            if self.n in (2, 3):
                raise OSError("driver went away")
            return Snapshot(self.n, (GpuSample(self.n, 0, power_w=1.0),))

        def close(self) -> None:
            self.closed.set()

    src = Flaky()
    got: list[Snapshot] = []
    done = threading.Event()

    def on_snapshot(s: Snapshot) -> None:
        got.append(s)
        if len(got) >= 6:
            done.set()

    sampler = Sampler(src, period_s=0.001)
    sampler.subscribe(on_snapshot)
    with sampler:
        assert done.wait(timeout=30)
    assert src.closed.is_set() and not sampler.running
    assert [s.gap for s in got[:5]] == [False, True, True, False, False]
    assert "driver went away" in (got[1].gap_reason or "")
