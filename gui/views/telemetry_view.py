"""Telemetry view: live scrolling plots of NVML/GPM readings, from this machine, a host, or a recording.

Sampling runs on the engine's :class:`~engine.telemetry.sampler.Sampler` thread; its callback only
appends the snapshot to a deque (and writes it to the recording, when recording). A QTimer on the
GUI thread drains the deque at 10 Hz into numpy buffers and calls ``setData`` on long-lived curves
(peak downsampling, clip to view); no plot item is created per sample.

``KERNELSCOPE_TELEMETRY_REPLAY=FILE`` (and optionally ``KERNELSCOPE_TELEMETRY_SPEED``, default 0 =
as fast as possible) starts a replay when the view is built: that is how
``kernelscope-gui --screenshot out.png --view telemetry`` shows data on a machine without a GPU.
"""

from __future__ import annotations

import math
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from gui.documents import OpenReports
from gui.views.common import WrapLabel, heading

REPLAY_ENV = "KERNELSCOPE_TELEMETRY_REPLAY"
SPEED_ENV = "KERNELSCOPE_TELEMETRY_SPEED"
REFRESH_MS = 100  # 10 Hz
CAPACITY = 20_000  # samples kept per GPU (33 min at 10 Hz)
GPU_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]
STYLES = [Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine, Qt.PenStyle.DashDotLine]

#: plot key -> (title, unit label, [(GpuSample field, legend name, scale)])
PLOTS: dict[str, tuple[str, str, list[tuple[str, str, float]]]] = {
    "util": ("Utilization", "%", [("util_gpu_pct", "GPU", 1.0), ("util_mem_pct", "memory", 1.0)]),
    "memory": ("Memory used", "GiB", [("mem_used_bytes", "used", 2.0**-30)]),
    "clocks": ("Clocks", "MHz", [("sm_clock_mhz", "SM", 1.0), ("mem_clock_mhz", "memory", 1.0)]),
    "power": ("Power", "W", [("power_w", "draw", 1.0), ("power_limit_w", "limit", 1.0)]),
    "pcie": ("PCIe", "MB/s", [("pcie_tx_bytes_per_s", "TX", 1e-6), ("pcie_rx_bytes_per_s", "RX", 1e-6)]),
    "gpm": ("GPM (Hopper+)", "%", [("gpm_sm_util_pct", "SM util", 1.0),
                                   ("gpm_sm_occupancy_pct", "SM occupancy", 1.0),
                                   ("gpm_tensor_util_pct", "tensor", 1.0),
                                   ("gpm_dram_bw_util_pct", "DRAM BW", 1.0)]),
}
FIELDS = [f for _, _, metrics in PLOTS.values() for f, _, _ in metrics]


class _Series:
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


class TelemetryView(QWidget):
    """Live telemetry plots with a source selector and a record button."""

    sig_message = Signal(str)
    sig_ready = Signal()

    def __init__(self, reports: OpenReports | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.reports = reports
        self.sampler: Any = None
        self.recorder: Any = None
        self._rec_lock = threading.Lock()
        self._inbox: deque[Any] = deque()
        self._series: dict[int, _Series] = {}
        self._curves: dict[tuple[str, str, int], pg.PlotDataItem] = {}
        self._t0_ns: int | None = None
        self._ended = threading.Event()
        self._busy = False
        self.gaps = 0

        from engine.telemetry.nvml import nvml_available

        self.nvml_ok, reason = nvml_available()
        self.nvml_reason = reason

        top = QHBoxLayout()
        top.addWidget(heading("Telemetry", 2))
        self.source_combo = QComboBox()
        self.source_combo.addItem("This machine (NVML)", "local")
        self.source_combo.addItem("Replay a recording", "replay")
        self.source_combo.addItem("Remote host (SSH)", "remote")
        self.source_combo.currentIndexChanged.connect(self._on_source_changed)
        top.addWidget(self.source_combo)
        self.host_edit = QLineEdit()
        self.host_edit.setPlaceholderText("user@host[:port]")
        self.host_edit.setVisible(False)
        top.addWidget(self.host_edit)
        self.start_button = QPushButton("Start")
        self.start_button.clicked.connect(self._on_start_clicked)
        top.addWidget(self.start_button)
        self.record_button = QPushButton("Record…")
        self.record_button.setCheckable(True)
        self.record_button.toggled.connect(self._on_record_toggled)
        top.addWidget(self.record_button)
        top.addStretch(1)

        self.status = WrapLabel("", muted=True)
        self.plots_widget = pg.GraphicsLayoutWidget()
        self.plots_widget.setBackground("w")
        self.plots: dict[str, pg.PlotItem] = {}
        for i, (key, (title, unit, _)) in enumerate(PLOTS.items()):
            p = self.plots_widget.addPlot(row=i // 2, col=i % 2, title=f"{title} ({unit})")
            p.showGrid(x=True, y=True, alpha=0.25)
            p.setLabel("bottom", "time", units="s")
            p.setDownsampling(mode="peak")
            p.setClipToView(True)
            p.addLegend(offset=(5, 5), labelTextSize="8pt")
            self.plots[key] = p

        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addWidget(self.plots_widget, 1)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self._on_tick)

        if not self.nvml_ok:
            self.source_combo.setCurrentIndex(1)
        self._show_idle_status()
        replay = os.environ.get(REPLAY_ENV)
        if replay:
            self.start_replay(replay, speed=float(os.environ.get(SPEED_ENV, "0")))

    # -- status ------------------------------------------------------------------------------------
    def _show_idle_status(self) -> None:
        if self.nvml_ok:
            self.status.setText(f"{self.nvml_reason} Press Start to sample this machine's GPUs at 10 Hz.")
        else:
            self.status.setText(
                f"NVML is not available on this machine: {self.nvml_reason} Replay a recording "
                f"(e.g. one made with `kernelscope telemetry --record`), or sample a remote host."
            )

    def _on_source_changed(self) -> None:
        self.host_edit.setVisible(self.source_combo.currentData() == "remote")

    # -- starting and stopping ---------------------------------------------------------------------
    def _on_start_clicked(self) -> None:
        if self.sampler is not None:
            self.stop()
            return
        kind = self.source_combo.currentData()
        try:
            if kind == "local":
                if not self.nvml_ok:
                    self.status.setText(f"NVML is not available on this machine: {self.nvml_reason}")
                    return
                from engine.telemetry.sources import NvmlSource

                self.start_source(NvmlSource(), "this machine")
            elif kind == "replay":
                path, _ = QFileDialog.getOpenFileName(self, "Replay a telemetry recording", "",
                                                      "Recordings (*.csv *.parquet *.pq);;All files (*)")
                if path:
                    self.start_replay(path, speed=1.0)
            else:
                from engine.sessions.ssh import parse_target
                from engine.telemetry.remote import RemoteSource

                target = parse_target(self.host_edit.text())
                self.start_source(RemoteSource.over_ssh(target), target.display)
        except Exception as exc:  # noqa: BLE001 - KernelscopeError sentences and the rest, shown
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.status.setText(str(exc))
        self.sig_message.emit(f"Telemetry: {exc}")
        self._busy = False
        self.sig_ready.emit()

    def start_replay(self, path: str | Path, speed: float = 1.0) -> None:
        """Replay a recording (ours or the fixture format) at ``speed`` (0 = as fast as possible)."""
        from engine.errors import KernelscopeError
        from engine.telemetry.sources import ReplaySource

        try:
            source = ReplaySource(path, speed=speed)
        except KernelscopeError as exc:
            self._fail(exc)
            return
        self.start_source(source, f"replay of {Path(path).name}" + (f" at {speed:g}x" if speed else ""))

    def start_source(self, source: Any, label: str, period_s: float = 0.1) -> None:
        """Start sampling ``source`` on the sampler's thread (the previous source is stopped)."""
        from engine.telemetry.sampler import Sampler

        self.stop(keep_recording=True)  # a recording started before Start records the new stream
        self._clear()
        self._ended.clear()
        sampler = Sampler(source, period_s=period_s, ring_size=64)
        sampler.subscribe(self._on_snapshot)  # runs on the sampler thread
        try:
            sampler.start()
        except Exception as exc:  # noqa: BLE001 - TelemetryError sentences
            self._fail(exc)
            return
        self.sampler = sampler
        self.label = label
        self._busy = True
        threading.Thread(target=self._watch_end, args=(sampler,), daemon=True,
                         name="telemetry-view-end").start()
        self.start_button.setText("Stop")
        self.status.setText(f"Sampling {label}…")
        self.sig_message.emit(f"Telemetry: sampling {label}.")
        self.timer.start()

    def _watch_end(self, sampler: Any) -> None:
        sampler.wait()
        if sampler is self.sampler:
            self._ended.set()

    def stop(self, keep_recording: bool = False) -> None:
        """Stop sampling (joins the sampler thread) and finish any recording unless told not to."""
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            sampler.stop()
        self._drain()
        if not keep_recording:
            self.stop_recording()
        self.timer.stop()
        self.start_button.setText("Start")

    def shutdown(self) -> None:
        """Window closing: stop the sampler thread and the timer."""
        self.stop()

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        self.shutdown()
        super().closeEvent(event)

    def is_busy(self) -> bool:
        """True while a replay is still being drawn (the screenshot waits for sig_ready)."""
        return self._busy

    def sampler_running(self) -> bool:
        """Whether the sampling thread is alive."""
        return self.sampler is not None and self.sampler.running

    # -- recording ---------------------------------------------------------------------------------
    def _on_record_toggled(self, on: bool) -> None:
        if on and self.recorder is None:
            path, _ = QFileDialog.getSaveFileName(self, "Record telemetry to", "telemetry.csv",
                                                  "CSV (*.csv);;Parquet (*.parquet)")
            if not path or not self.start_recording(path):
                self.record_button.setChecked(False)
        elif not on:
            self.stop_recording()

    def start_recording(self, path: str | Path) -> bool:
        """Write every following snapshot to ``path`` (.csv, or .parquet with pyarrow)."""
        from engine.errors import KernelscopeError
        from engine.telemetry.recording import Recorder

        try:
            rec = Recorder(path)
        except KernelscopeError as exc:
            self._fail(exc)
            return False
        with self._rec_lock:
            self.recorder = rec
        self.record_button.blockSignals(True)
        self.record_button.setChecked(True)
        self.record_button.setText("Recording…")
        self.record_button.blockSignals(False)
        self.sig_message.emit(f"Telemetry: recording to {rec.path}.")
        return True

    def stop_recording(self) -> Path | None:
        """Finish the recording file; returns its path (None if not recording)."""
        with self._rec_lock:
            rec, self.recorder = self.recorder, None
        self.record_button.blockSignals(True)
        self.record_button.setChecked(False)
        self.record_button.setText("Record…")
        self.record_button.blockSignals(False)
        if rec is None:
            return None
        try:
            rec.close()
        except Exception as exc:  # noqa: BLE001
            self._fail(exc)
            return None
        self.sig_message.emit(f"Telemetry: wrote {rec.rows_written} rows to {rec.path}.")
        return Path(rec.path)

    # -- data flow ---------------------------------------------------------------------------------
    def _on_snapshot(self, snap: Any) -> None:
        """Sampler thread: hand over, and record (file work stays off the GUI thread)."""
        self._inbox.append(snap)
        with self._rec_lock:
            if self.recorder is not None:
                try:
                    self.recorder.write(snap)
                except Exception:  # noqa: BLE001 - reported when the recording is closed
                    pass

    def _clear(self) -> None:
        self._inbox.clear()
        self._series.clear()
        self._t0_ns = None
        self.gaps = 0
        for key, curve in self._curves.items():
            self.plots[key[0]].removeItem(curve)
        self._curves.clear()
        for p in self.plots.values():
            if p.legend is not None:
                p.legend.clear()

    def _drain(self) -> int:
        n = 0
        while self._inbox:
            snap = self._inbox.popleft()
            n += 1
            if self._t0_ns is None:
                self._t0_ns = snap.timestamp_ns
            t = (snap.timestamp_ns - self._t0_ns) / 1e9
            if snap.gap:
                self.gaps += 1
                self.sig_message.emit(f"Telemetry gap: {snap.gap_reason}")
            for s in snap.gpus:
                series = self._series.get(s.gpu)
                if series is None:
                    series = self._series[s.gpu] = _Series()
                series.append(t, s)
        if n:
            self._redraw()
        return n

    def _curve(self, key: str, field: str, legend: str, gpu: int, style: int) -> pg.PlotDataItem:
        curve = self._curves.get((key, field, gpu))
        if curve is None:
            pen = pg.mkPen(GPU_COLORS[gpu % len(GPU_COLORS)], width=1.5, style=STYLES[style % len(STYLES)])
            name = f"GPU {gpu} {legend}" if len(self._series) > 1 or gpu else legend
            curve = self.plots[key].plot([], [], pen=pen, name=name, connect="finite")
            curve.setDownsampling(auto=True, method="peak")
            curve.setClipToView(True)
            self._curves[(key, field, gpu)] = curve
        return curve

    def _redraw(self) -> None:
        for gpu, series in sorted(self._series.items()):
            n = series.n
            for key, (_, _, metrics) in PLOTS.items():
                for i, (field, legend, scale) in enumerate(metrics):
                    y = series.v[field][:n]
                    if (key, field, gpu) not in self._curves and not np.isfinite(y).any():
                        continue  # NA so far: no legend entry for a metric this source lacks
                    self._curve(key, field, legend, gpu, i).setData(series.t[:n], y * scale)

    def _on_tick(self) -> None:
        self._drain()
        if self._ended.is_set() and not self._inbox:
            self.timer.stop()
            self._ended.clear()
            ngpu = len(self._series)
            total = sum(s.n for s in self._series.values())
            self.status.setText(
                f"{self.label}: ended; {total} samples from {ngpu} GPU{'s' if ngpu != 1 else ''}"
                + (f", {self.gaps} gaps" if self.gaps else "") + "."
            )
            self.start_button.setText("Start")
            self.sampler = None
            if self.recorder is not None:
                self.stop_recording()
            self._busy = False
            self.sig_ready.emit()
        elif self.sampler is not None and self._series:
            last = max(s.n for s in self._series.values())
            self.status.setText(f"Sampling {self.label}: {last} samples"
                                + (f", {self.gaps} gaps" if self.gaps else "") + ".")

    def curve_data(self, key: str, field: str, gpu: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
        """The (x, y) a curve holds now (tests and tools), or None when it was never drawn."""
        curve = self._curves.get((key, field, gpu))
        if curve is None:
            return None
        x, y = curve.getOriginalDataset()
        return np.asarray(x), np.asarray(y)
