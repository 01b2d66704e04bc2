"""Telemetry view: replay of the real H200 recording into the curves, recording from the view,
multi-GPU colours through the pynvml stand-in (no GPU here), no sampler left running, screenshots."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.telemetry.recording import read_recording
from tests.conftest import FIXTURES, REPO
from tests.gui.conftest import SCREENSHOTS, screenshot

H200 = FIXTURES / "telemetry" / "telemetry_h200.csv"
# the offscreen platform cannot propagate size hints of a top-level widget (a platform note, not ours)
pytestmark = [pytest.mark.skipif(not H200.is_file(), reason="shared fixtures missing"),
              pytest.mark.qt_log_ignore("propagateSizeHints")]
WAIT_MS = 30_000


@pytest.fixture
def view(qtbot, monkeypatch):
    monkeypatch.delenv("KERNELSCOPE_TELEMETRY_REPLAY", raising=False)
    from gui.views.telemetry_view import TelemetryView

    v = TelemetryView(None)
    qtbot.addWidget(v)
    v.resize(1600, 1000)
    v.show()
    yield v
    v.shutdown()
    assert not v.sampler_running()


def _replay(qtbot, view, path: Path = H200, speed: float = 0) -> None:
    with qtbot.waitSignal(view.sig_ready, timeout=WAIT_MS):
        view.start_replay(path, speed=speed)
    assert not view.is_busy() and not view.sampler_running()


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(np.isnan(a), np.isnan(b)) and np.allclose(a[~np.isnan(a)], b[~np.isnan(b)]))


def test_no_nvml_here_is_one_clean_empty_state(qtbot, view) -> None:
    """Without NVML: one sentence (the engine's reason, said once, no CLI flag) and an "Open
    recording…" button instead of six empty plots; a replay then shows the plots."""
    assert not view.nvml_ok
    assert view.showing_empty_state() and not view.plots_widget.isVisible()
    text = view.empty_text.text()
    assert text.count("unavailable") <= 1 and "--replay" not in text and "NVML is not available" not in text
    reason = view.nvml_reason.split(": ", 1)[1]
    assert text.lower().startswith(reason[:20].lower())  # the engine's reason, once
    assert view.status.text() == "" and not view.status.isVisible()
    assert view.open_recording_button.isVisible() and view.open_recording_button.text() == "Open recording…"
    assert view.source_combo.currentData() == "replay"
    screenshot(view, "telemetry_no_nvml")
    _replay(qtbot, view)
    assert not view.showing_empty_state() and view.plots_widget.isVisible()


def test_replay_fills_the_curves_with_the_recordings_values(qtbot, view) -> None:
    _replay(qtbot, view)
    rec = read_recording(H200)
    t = (rec["timestamp_ns"] - rec["timestamp_ns"].iloc[0]).to_numpy() / 1e9
    for key, field, scale in [("util", "util_gpu_pct", 1), ("power", "power_w", 1),
                              ("memory", "mem_used_bytes", 2**-30), ("clocks", "sm_clock_mhz", 1),
                              ("pcie", "pcie_tx_bytes_per_s", 1e-9), ("gpm", "gpm_sm_util_pct", 1),
                              ("gpm", "gpm_dram_bw_util_pct", 1)]:
        got = view.curve_data(key, field)
        assert got is not None, field
        x, y = got
        assert np.allclose(x, t), field
        assert _same(y, rec[field].astype("float64").to_numpy() * scale), field
    assert np.isnan(view.curve_data("gpm", "gpm_dram_bw_util_pct")[1]).any()  # NVML's nan cells stay NA
    assert view.curve_data("power", "power_limit_w") is None  # not in this recording: no curve
    assert "127 samples from 1 GPU" in view.status.text()
    assert max(view.curve_data("gpm", "gpm_sm_util_pct")[1]) > 40
    # each metric of a plot has its own colour; the titles carry the legend and the last reading
    for key in ("util", "clocks", "pcie", "gpm"):
        colours = [c.opts["pen"].color().name() for (k, _f, _g), c in view._curves.items() if k == key]
        assert len(colours) >= 2 and len(set(colours)) == len(colours), key
    last = rec.iloc[-1]
    assert f"draw {last['power_w']:,.0f} W" in view.titles["power"]
    assert f"SM {last['sm_clock_mhz']:,.0f} MHz" in view.titles["clocks"]
    assert f"memory {last['mem_clock_mhz']:,.0f} MHz" in view.titles["clocks"]
    assert "limit" not in view.titles["power"]  # no power-limit column in this recording
    # y axes: 0 to above the largest value (percentages 0-100), with room for the edge labels
    for key, field, scale in [("power", "power_w", 1), ("clocks", "mem_clock_mhz", 1),
                              ("pcie", "pcie_rx_bytes_per_s", 1e-9)]:
        lo, hi = view.plots[key].viewRange()[1]
        peak = float(np.nanmax(rec[field].astype("float64"))) * scale
        assert lo < 0 < peak < hi < peak * 1.3, key
        ax = view.plots[key].getAxis("left")
        ticks = [v for _spacing, vs in ax.tickValues(lo, hi, ax.height()) for v in vs]
        assert len([v for v in ticks if lo <= v <= hi]) >= 3, key  # several labelled values, not "0" alone
    assert view.plots["util"].viewRange()[1][0] < 0 and view.plots["util"].viewRange()[1][1] > 100
    screenshot(view, "telemetry_replay_h200")


def test_record_while_replaying_and_read_back(qtbot, view, tmp_path: Path) -> None:
    out = tmp_path / "rec.csv"
    assert view.start_recording(out)
    _replay(qtbot, view)
    assert view.recorder is None and not view.record_button.isChecked()  # closed at the end
    back = read_recording(out)
    rec = read_recording(H200)
    assert len(back) == len(rec) == 127
    assert list(back["timestamp_ns"]) == list(rec["timestamp_ns"])
    assert list(back["power_w"]) == list(rec["power_w"])
    assert _same(back["gpm_sm_util_pct"].to_numpy(dtype=float), rec["gpm_sm_util_pct"].to_numpy(dtype=float))


def test_bad_recording_is_a_sentence(qtbot, view, tmp_path: Path) -> None:
    bad = tmp_path / "foreign.csv"
    bad.write_text("a,b\n1,2\n")
    messages: list[str] = []
    view.sig_message.connect(messages.append)
    view.start_replay(bad)
    assert "is not a Kernelscope telemetry recording" in view.status.text()
    assert messages and not view.sampler_running()


def test_two_gpus_live_from_the_stand_in_one_colour_each(qtbot, view, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "tests" / "data" / "fake_nvml"))
    monkeypatch.setenv("FAKE_NVML_GPUS", "2")
    monkeypatch.setenv("FAKE_NVML_COSTS", "")
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    import pynvml

    from engine.telemetry.sources import NvmlSource

    try:
        view.start_source(NvmlSource(lib=pynvml), "stand-in", period_s=0.05)
        qtbot.waitUntil(lambda: all(view.curve_data("util", "util_gpu_pct", g) is not None
                                    and len(view.curve_data("util", "util_gpu_pct", g)[0]) >= 8
                                    for g in (0, 1)), timeout=WAIT_MS)
        assert view.timer.isActive() and view.timer.interval() <= 100  # >= 10 Hz
        # one colour per metric, one dash per GPU
        pens = {g: view._curves[("util", "util_gpu_pct", g)].opts["pen"] for g in (0, 1)}
        assert pens[0].color().name() == pens[1].color().name()
        assert pens[0].style() != pens[1].style()
        assert view._curves[("util", "util_mem_pct", 0)].opts["pen"].color() != pens[0].color()
        assert "GPU 0 solid, GPU 1 dashed" in view.status.text()
        view.stop()
        d0, d1 = (view.curve_data("power", "power_w", g)[1][-1] for g in (0, 1))
        assert f"draw {d0:,.0f} W / {d1:,.0f} W" in view.titles["power"]  # both GPUs' last readings
        # GPU 1 of the stand-in reports the recording 10 rows later than GPU 0
        rec = read_recording(H200)["power_w"].to_numpy()
        y0, y1 = view.curve_data("power", "power_w", 0)[1], view.curve_data("power", "power_w", 1)[1]
        assert math.isclose(y0[0], rec[1]) and math.isclose(y1[0], rec[11])
        screenshot(view, "telemetry_two_gpus_standin")
    finally:
        view.stop()
        sys.modules.pop("pynvml", None)
    assert not view.sampler_running() and not view.timer.isActive()


def test_screenshot_cli_with_replay_env(tmp_path: Path) -> None:
    out = SCREENSHOTS / "telemetry_view_cli.png"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    env = {"KERNELSCOPE_TELEMETRY_REPLAY": str(H200), "QT_QPA_PLATFORM": "offscreen",
           "KERNELSCOPE_CONFIG": str(tmp_path / "cfg"), "KERNELSCOPE_CACHE": str(tmp_path / "cache"),
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "gui.app", "--screenshot", str(out), "--view", "telemetry"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert (img.width(), img.height()) == (1600, 1000)
