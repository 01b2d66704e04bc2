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
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from gui.documents import OpenReports
from gui.views.base import ReportView
from gui.widgets.axes import style_axes
from gui.widgets.labels import MUTED, WrapLabel, heading
from gui.widgets.telemetry_plots import (
    AXIS_WIDTH_PX,
    GPU_STYLES,
    PERCENT_PLOTS,
    PLOTS,
    Y_MARGIN,
    Series,
    gpu_styles_text,
    metric_color,
    unavailable_text,
    value_text,
    y_top,
)

REPLAY_ENV = "KERNELSCOPE_TELEMETRY_REPLAY"
SPEED_ENV = "KERNELSCOPE_TELEMETRY_SPEED"
REFRESH_MS = 100  # 10 Hz
class TelemetryView(ReportView):
    """Live telemetry plots with a source selector and a record button."""

    key = "telemetry"

    def __init__(self, reports: OpenReports | None = None, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent, title_size=None, margins=(10, 8, 10, 6), spacing=4)
        self.sampler: Any = None
        self.recorder: Any = None
        self._rec_lock = threading.Lock()
        self._inbox: deque[Any] = deque()
        self._series: dict[int, Series] = {}
        self._curves: dict[tuple[str, str, int], pg.PlotDataItem] = {}
        self._t0_ns: int | None = None
        self._ended = threading.Event()
        self._busy = False
        self.gaps = 0

        from engine.system.nvml import nvml_available

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
        self._y_tops: dict[str, float] = {}
        #: plot key -> the title text shown now (tests read it)
        self.titles: dict[str, str] = {}
        for i, key in enumerate(PLOTS):
            self.plots[key] = self._make_plot(i, key)
            self._set_title(key, {})

        for col in (0, 1):
            self.plots_widget.ci.layout.setColumnStretchFactor(col, 1)
        lay = self.vbox
        lay.addLayout(top)
        lay.addWidget(self.status)
        self.pages = QStackedWidget()
        self.empty = self._build_empty_state()
        self.pages.addWidget(self.plots_widget)
        self.pages.addWidget(self.empty)
        lay.addWidget(self.pages, 1)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self._on_tick)

        if not self.nvml_ok:
            self.source_combo.setCurrentIndex(1)
        self._show_idle_status()
        replay = os.environ.get(REPLAY_ENV)
        if replay:
            self.start_replay(replay, speed=float(os.environ.get(SPEED_ENV, "0")))

    def _make_plot(self, i: int, key: str) -> pg.PlotItem:
        """Plot ``key`` in cell ``i`` of the 2-column grid: time since the first sample in s, our y range."""
        p = self.plots_widget.addPlot(row=i // 2, col=i % 2)
        p.showGrid(x=True, y=True, alpha=0.25)
        # seconds since the first sample, whatever the length: no pyqtgraph SI prefix ("ks")
        p.setLabel("bottom", "time since the first sample (s)")
        p.getAxis("bottom").enableAutoSIPrefix(False)
        p.setDownsampling(mode="peak")
        p.setClipToView(True)
        p.setMenuEnabled(False)
        style_axes(p)
        left = p.getAxis("left")
        left.enableAutoSIPrefix(False)
        left.setWidth(AXIS_WIDTH_PX)
        p.setPreferredWidth(300)  # equal columns: the grid otherwise sizes them by the titles
        # y: our own range (0 to the top of the data, or 0-100 %); x follows the data.
        p.enableAutoRange(x=True, y=False)
        p.setYRange(0, 100 if key in PERCENT_PLOTS else 1, padding=Y_MARGIN)
        return p

    def _build_empty_state(self) -> QWidget:
        """Without NVML and before any replay: one sentence and the two ways on, no empty plots."""
        page = QWidget()
        outer = QVBoxLayout(page)
        outer.addStretch(1)
        self.empty_title = heading("No GPU to sample on this machine", 4)
        self.empty_title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        outer.addWidget(self.empty_title)
        self.empty_text = QLabel("")
        self.empty_text.setObjectName("telemetryEmptyText")
        self.empty_text.setWordWrap(True)
        self.empty_text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_text.setStyleSheet(f"color: {MUTED};")
        self.empty_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.empty_text, 4)
        row.addStretch(1)
        outer.addLayout(row)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.open_recording_button = QPushButton("Open recording…")
        self.open_recording_button.setToolTip("Replay a telemetry recording (.csv or .parquet), e.g. one "
                                              "recorded beside a session or with Record…")
        self.open_recording_button.clicked.connect(self.open_recording)
        self.remote_button = QPushButton("Sample a remote host…")
        self.remote_button.clicked.connect(self._choose_remote)
        buttons.addWidget(self.open_recording_button)
        buttons.addWidget(self.remote_button)
        buttons.addStretch(1)
        outer.addLayout(buttons)
        outer.addStretch(2)
        return page

    # -- status ------------------------------------------------------------------------------------
    def _show_idle_status(self) -> None:
        if self.nvml_ok:
            self.status.setText(f"{self.nvml_reason} Press Start to sample this machine's GPUs at 10 Hz.")
            self.pages.setCurrentWidget(self.plots_widget)
            return
        self.empty_text.setText(f"{unavailable_text(self.nvml_reason)} Replay a recording of another "
                                "machine's GPUs, or sample a remote host over SSH.")
        self.status.setText("")
        self.status.hide()
        self.pages.setCurrentWidget(self.empty)

    def showing_empty_state(self) -> bool:
        return self.pages.currentWidget() is self.empty

    def _on_source_changed(self) -> None:
        remote = self.source_combo.currentData() == "remote"
        self.host_edit.setVisible(remote)
        if remote:
            self.pages.setCurrentWidget(self.plots_widget)
            self.status.show()
            self.status.setText("Enter the host (user@host[:port]) and press Start; the host needs "
                                "Kernelscope and nvidia-ml-py.")

    def _choose_remote(self) -> None:
        self.source_combo.setCurrentIndex(self.source_combo.findData("remote"))
        self.host_edit.setFocus()

    def open_recording(self) -> None:
        """Ask for a recording and replay it in real time."""
        path, _ = QFileDialog.getOpenFileName(self, "Replay a telemetry recording", "",
                                              "Recordings (*.csv *.parquet *.pq);;All files (*)")
        if path:
            self.source_combo.setCurrentIndex(self.source_combo.findData("replay"))
            self.start_replay(path, speed=1.0)

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
                self.open_recording()
            else:
                from engine.system.ssh import parse_target
                from engine.telemetry.remote import RemoteSource

                target = parse_target(self.host_edit.text())
                self.start_source(RemoteSource.over_ssh(target), target.display)
        except Exception as exc:  # noqa: BLE001 - KernelscopeError sentences and the rest, shown
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.status.show()
        self.status.setText(str(exc))
        self.sig_message.emit(f"Telemetry: {exc}")
        self._busy = False
        self.sig_ready.emit()

    def start_replay(self, path: str | Path, speed: float = 1.0) -> None:
        """Replay a recording (ours or the fixture format) at ``speed`` (0 = as fast as possible)."""
        from engine.system.errors import KernelscopeError
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
        self.pages.setCurrentWidget(self.plots_widget)
        self.status.show()
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
        from engine.system.errors import KernelscopeError
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
        self._y_tops.clear()
        for plot_key in self.plots:
            self._set_title(plot_key, {})

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
                    series = self._series[s.gpu] = Series()
                series.append(t, s)
        if n:
            self._redraw()
        return n

    def _curve(self, key: str, field: str, legend: str, gpu: int, index: int) -> pg.PlotDataItem:
        curve = self._curves.get((key, field, gpu))
        if curve is None:
            pen = pg.mkPen(metric_color(index), width=1.5, style=GPU_STYLES[gpu % len(GPU_STYLES)])
            name = f"GPU {gpu} {legend}" if len(self._series) > 1 or gpu else legend
            curve = self.plots[key].plot([], [], pen=pen, name=name, connect="finite")
            curve.setDownsampling(auto=True, method="peak")
            curve.setClipToView(True)
            self._curves[(key, field, gpu)] = curve
        return curve

    def _redraw(self) -> None:
        shown: dict[str, list[np.ndarray]] = {key: [] for key in PLOTS}
        #: plot -> metric index -> [(gpu, latest value)]
        latest: dict[str, dict[int, list[tuple[int, float]]]] = {key: {} for key in PLOTS}
        for gpu, series in sorted(self._series.items()):
            n = series.n
            for key, (_, _, metrics) in PLOTS.items():
                for i, (field, legend, scale) in enumerate(metrics):
                    y = series.v[field][:n]
                    if (key, field, gpu) not in self._curves and not np.isfinite(y).any():
                        continue  # NA so far: no legend entry for a metric this source lacks
                    ys = y * scale
                    self._curve(key, field, legend, gpu, i).setData(series.t[:n], ys)
                    shown[key].append(ys)
                    latest[key].setdefault(i, []).append((gpu, float(ys[-1]) if n else math.nan))
        for key, p in self.plots.items():
            top = y_top(key, shown[key])
            if self._y_tops.get(key) != top:  # only when it changes: no relayout per tick
                self._y_tops[key] = top
                # 7 % margins: a tick label must fit inside the plot's height or pyqtgraph drops it
                p.setYRange(-Y_MARGIN * top, top * (1 + Y_MARGIN), padding=0)
            self._set_title(key, latest[key])

    def _set_title(self, key: str, latest: dict[int, list[tuple[int, float]]]) -> None:
        """'Power (W) — ■ draw 689 W  ■ limit 700 W': the legend and the current readings in one row
        above the plot (a legend inside the plot would hide data)."""
        title, unit, metrics = PLOTS[key]
        parts = []
        for i, readings in sorted(latest.items()):
            values = " / ".join(value_text(v, unit) for _, v in readings)
            parts.append(f"<span style='color:{metric_color(i)}'>■ {metrics[i][1]} {values}</span>")
        text = f"<b>{title} ({unit})</b>" + (" — " + " &nbsp; ".join(parts) if parts else "")
        if self.titles.get(key) != text:
            self.titles[key] = text
            self.plots[key].setTitle(text, color="#2c3e50", size="10pt")

    def _on_tick(self) -> None:
        self._drain()
        if self._ended.is_set() and not self._inbox:
            self.timer.stop()
            self._ended.clear()
            ngpu = len(self._series)
            total = sum(s.n for s in self._series.values())
            self.status.setText(
                f"{self.label}: ended; {total} samples from {ngpu} GPU{'s' if ngpu != 1 else ''}"
                + (f", {self.gaps} gaps" if self.gaps else "") + "." + self._styles_note()
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
                                + (f", {self.gaps} gaps" if self.gaps else "") + "." + self._styles_note())

    def _styles_note(self) -> str:
        gpus = sorted(self._series)
        text = gpu_styles_text(gpus)
        if not text:
            return ""
        return f" Curves: {text}; readings in the titles are GPU {' / '.join(map(str, gpus))}."

    def curve_data(self, key: str, field: str, gpu: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
        """The (x, y) a curve holds now (tests and tools), or None when it was never drawn."""
        curve = self._curves.get((key, field, gpu))
        if curve is None:
            return None
        x, y = curve.getOriginalDataset()
        return np.asarray(x), np.asarray(y)
