"""Telemetry on an nsys timeline, and the sampling groups of NvmlSource.

The nsys reports are the real H200 exports; NVML is the stand-in in tests/data/fake_nvml (which
replays the real H200 recording), since no GPU exists here.
"""

from __future__ import annotations

import csv
import sqlite3
import sys
from pathlib import Path

import pytest

from engine.telemetry.align import align_to_report, align_to_session, session_start_utc_ns
from engine.telemetry.errors import RecordingError, TelemetryError
from engine.telemetry.recording import Recorder, read_recording
from engine.telemetry.sources import NvmlSource, ReplaySource, SamplingRates
from tests.conftest import FIXTURES, NSYS_DIR, REPO

H200 = FIXTURES / "telemetry" / "telemetry_h200.csv"
REPORT = NSYS_DIR / "host_overhead_gpumetrics.sqlite"
pytestmark = pytest.mark.skipif(not (H200.is_file() and REPORT.is_file()), reason="shared fixtures missing")
FAKE_DIR = REPO / "tests" / "data" / "fake_nvml"


def _utc_epoch_ns(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return int(con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0])


def _t_column() -> list[float]:
    with open(H200, newline="") as f:
        return [float(r["t"]) for r in csv.DictReader(f)]


def test_session_start_is_the_reports_utc_epoch() -> None:
    for report in sorted(NSYS_DIR.glob("*.sqlite")):
        assert session_start_utc_ns(report) == _utc_epoch_ns(report)
    assert session_start_utc_ns(REPORT) == 1795654038906226929  # 2026-11-26T00:47:18Z


def test_fixture_recording_started_with_the_session_maps_one_to_one() -> None:
    rec = read_recording(H200)
    assert rec.attrs["relative_time"]
    start = _utc_epoch_ns(REPORT)
    out = align_to_report(rec, REPORT)
    assert list(out["session_time_ns"]) == [round(t * 1e9) for t in _t_column()]
    assert list(out["timestamp_ns"]) == [start + round(t * 1e9) for t in _t_column()]
    assert out.attrs["session_start_utc_ns"] == start and not out.attrs["relative_time"]
    assert rec.attrs["relative_time"] and int(rec["timestamp_ns"].iloc[0]) == 3_000_000  # input untouched


def test_absolute_recording_lands_where_its_wall_clock_says(tmp_path: Path) -> None:
    # A recording that started 2.5 s after the session (e.g. the sampler was launched a bit late):
    # replay the fixture onto that wall-clock start, record it in our format, read it back, align.
    start = _utc_epoch_ns(REPORT)
    src = ReplaySource(H200, speed=0, start_ns=start + 2_500_000_000)
    src.open()
    path = tmp_path / "abs.csv"
    with Recorder(path) as rec:
        while (s := src.read()) is not None:
            rec.write(s)
    back = read_recording(path)
    assert not back.attrs["relative_time"]
    out = align_to_session(back, start)
    assert list(out["session_time_ns"]) == [2_500_000_000 + round(t * 1e9) for t in _t_column()]
    assert list(out["power_w"]) == list(read_recording(H200)["power_w"])
    with pytest.raises(TelemetryError, match="already has wall-clock timestamps"):
        align_to_session(back, start, recording_start_utc_ns=start)


def test_replay_start_ns_only_for_relative_recordings(tmp_path: Path) -> None:
    src = ReplaySource(H200, speed=0, start_ns=10**18)
    src.open()
    assert src.read().timestamp_ns == 10**18 + 3_000_000  # first row t=0.003
    path = tmp_path / "ours.csv"
    with Recorder(path) as rec:
        rec.write(src.read())
    with pytest.raises(RecordingError, match="already has wall-clock"):
        ReplaySource(path, start_ns=5)


def test_report_without_session_start_is_a_sentence(tmp_path: Path) -> None:
    class NoStart:
        def session_start_utc_ns(self) -> None:
            return None

    with pytest.raises(TelemetryError, match="no session start time"):
        session_start_utc_ns(NoStart())


# -- sampling groups (the CPU-cost plan) -----------------------------------------------------------
@pytest.fixture
def fake_pynvml(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(FAKE_DIR))
    monkeypatch.setenv("FAKE_NVML_COSTS", "")
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    import pynvml

    assert getattr(pynvml, "FAKE", False)
    yield pynvml
    sys.modules.pop("pynvml", None)


def test_groups_are_read_at_their_rates(fake_pynvml, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("engine.telemetry.sources.time.monotonic", lambda: clock[0])
    src = NvmlSource(lib=fake_pynvml, rates=SamplingRates(gpm_s=0.2, medium_s=1.0, slow_s=5.0))
    src.open()
    fake_pynvml.CALLS.clear()
    snaps = []
    for i in range(100):  # 10 s at 10 Hz, with 0.3 ms of jitter either way
        clock[0] = 1000.0 + i * 0.1 + (0.0003 if i % 2 else -0.0003)
        snaps.append(src.read())
    src.close()
    calls = fake_pynvml.CALLS
    assert calls["nvmlDeviceGetUtilizationRates"] == calls["nvmlDeviceGetPowerUsage"] == 100
    assert calls["nvmlGpmSampleGet"] == 50  # every other tick: 200 ms windows, never 100/200 mixed
    assert calls["nvmlDeviceGetTemperature"] == calls["nvmlDeviceGetCurrentClocksEventReasons"] == 10
    assert calls["nvmlDeviceGetTotalEnergyConsumption"] == calls["nvmlDeviceGetComputeRunningProcesses"] == 2
    assert calls["nvmlDeviceGetPcieThroughput"] == 2 * 10  # GPM gives no PCIe here: legacy, once a second
    # the values are the recording's, and the repeated groups repeat the last reading (never NA)
    rows = read_recording(H200)
    g = [s.gpus[0] for s in snaps]
    assert [x.power_w for x in g[:5]] == list(rows["power_w"].iloc[1:6])
    assert all(x.temp_c is not None and x.energy_j is not None and x.throttle_reasons is not None for x in g)
    # GPM: read i took its window end from row i + 1 on even ticks; odd ticks repeat the last window
    gpm = list(rows["gpm_sm_util_pct"])
    assert g[0].gpm_sm_util_pct is None  # one sample is not a window yet
    for i in range(2, 100):
        want = gpm[(i if i % 2 else i + 1) % len(gpm)]
        assert g[i].gpm_sm_util_pct == (None if want != want else want), i
    assert max(x.gpm_sm_util_pct or 0 for x in g) > 10


def test_gpm_window_never_below_100_ms() -> None:
    with pytest.raises(ValueError, match="at least 0.1 s"):
        SamplingRates(gpm_s=0.05)
