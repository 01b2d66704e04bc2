"""Summary view: where the time went, host CUDA API vs GPU, with the findings in plain sentences."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui import format as fmt
from gui.documents import OpenReports
from gui.format import KIND_LABELS, producer
from gui.views.base import ReportView
from gui.widgets.axes import style_axes, tick_font
from gui.widgets.labels import MUTED, StatCard, WrapLabel, heading, muted, swatch
from gui.workers import LoadedReport
from gui.workers.latest import LatestCall

if TYPE_CHECKING:
    from engine.analysis.summary_model import GpuPart, Iterations, Summary, TopFinding

API_COLORS = {
    "allocation": "#e8871e",
    "copies": "#2f6fba",
    "synchronization": "#c0392b",
    "launches": "#2e9e5b",
    "setup": "#8e5cb5",
    "other": "#8a94a0",
}
_GPU_PALETTE = ["#1f77b4", "#17becf", "#6a5acd", "#3b8ea5", "#4c72b0", "#55a868"]
KERNEL_COLOR = "#2e9e5b"
MEMSET_COLOR = "#d4a017"
IDLE_COLOR = "#dfe3e8"


def gpu_part_colors(parts: tuple[GpuPart, ...] | list[GpuPart]) -> dict[str, str]:
    colors: dict[str, str] = {}
    i = 0
    for p in parts:
        name = p.part
        if name == "kernels":
            colors[name] = KERNEL_COLOR
        elif name == "memset":
            colors[name] = MEMSET_COLOR
        else:
            colors[name] = _GPU_PALETTE[i % len(_GPU_PALETTE)]
            i += 1
    return colors


def _time_unit(span_ns: float) -> tuple[str, float]:
    """The unit of a time axis spanning ``span_ns``.

    The one :func:`gui.format.duration` writes that span in: an 8 s capture reads 0-8 s, never
    0-8000 ms, below a header that says "8.00 s".
    """
    if span_ns >= 1e9:
        return "s", 1e9
    if span_ns >= 1e6:
        return "ms", 1e6
    if span_ns >= 1e3:
        return "µs", 1e3
    return "ns", 1.0


class BreakdownChart(QWidget):
    """Two horizontal stacked bars on one time axis: CUDA API time by category, GPU busy by part."""

    ROW_API, ROW_GPU = 1.0, 0.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        import pyqtgraph as pg  # heavy: imported when the view is built, not at startup

        self._pg = pg
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMinimumHeight(170)
        self.plot.setMaximumHeight(200)
        item = self.plot.getPlotItem()
        item.setMenuEnabled(False)
        item.hideButtons()
        item.setMouseEnabled(x=False, y=False)
        item.showGrid(x=True, y=False, alpha=0.25)
        style_axes(item, tick_font(self.font()))
        item.getAxis("left").setTicks([[(self.ROW_API, "CUDA API"), (self.ROW_GPU, "GPU")]])
        item.getAxis("left").setWidth(80)
        # our unit is in the label: no pyqtgraph SI scale on top of it ("(ms) (x0.001)")
        item.getAxis("bottom").enableAutoSIPrefix(False)
        lay.addWidget(self.plot)
        self.segments: dict[str, list[tuple[str, float, float]]] = {"api": [], "gpu": []}
        self._items: list[Any] = []

    def clear(self) -> None:
        for it in self._items:
            self.plot.removeItem(it)
        self._items.clear()
        self.segments = {"api": [], "gpu": []}

    def set_summary(self, s: Summary) -> None:
        """One bar for the CUDA API (categories in flight), one per GPU (parts + idle = the capture).

        Overlapping time is given to one segment only (``attributed_ns``), so no bar is longer than
        the capture: several threads' calls or several streams' work are never stacked twice.
        """
        pg = self._pg
        self.clear()
        span = float(s.wall.span_ns or 0)
        devices = s.gpu.devices
        rows = [(1.0 + len(devices) - 1, "CUDA API")] + [
            (float(len(devices) - 1 - i), f"GPU {d.device}") for i, d in enumerate(devices)]
        unit, scale = _time_unit(max(span, 1.0))
        x_max = max(span, 1.0) / scale
        label_min = 0.07 * x_max  # segments narrower than this get no text inside

        def add_row(key: str, y: float, segs: list[tuple[str, float, str]]) -> None:
            x = 0.0
            x0s, widths, brushes = [], [], []
            for label, ns, color in segs:
                w = ns / scale
                if w <= 0:
                    continue
                x0s.append(x)
                widths.append(w)
                brushes.append(pg.mkBrush(color))
                self.segments.setdefault(key, []).append((label, x, w))
                if w >= label_min:
                    text = pg.TextItem(fmt.duration(ns), color=_text_color(color), anchor=(0.5, 0.5))
                    text.setPos(x + w / 2, y)
                    text.setZValue(10)  # above the bars
                    self.plot.addItem(text)
                    self._items.append(text)
                x += w
            if widths:
                bars = pg.BarGraphItem(x0=x0s, y=[y] * len(widths), width=widths, height=0.62,
                                       brushes=brushes, pen=pg.mkPen("w", width=1))
                self.plot.addItem(bars)
                self._items.append(bars)

        add_row("api", rows[0][0], [
            (c.label, float(c.attributed_ns), API_COLORS.get(c.category, "#999")) for c in s.host.categories])
        colors = gpu_part_colors(s.gpu.parts)
        for (y, _), d in zip(rows[1:], devices, strict=True):
            key = "gpu" if len(devices) == 1 else f"gpu {d.device}"
            segs: list[tuple[str, float, str]] = [
                (p.part, float(p.attributed_ns), colors.get(p.part, "#999")) for p in d.parts]
            add_row(key, y, [*segs, ("idle", float(d.idle_ns), IDLE_COLOR)])
        if not devices:
            self.segments["gpu"] = []
        item = self.plot.getPlotItem()
        item.getAxis("left").setTicks([[(y, label) for y, label in rows]])
        self.plot.setMinimumHeight(120 + 50 * len(rows))
        self.plot.setMaximumHeight(150 + 60 * len(rows))
        if span > 0:
            line = pg.InfiniteLine(pos=span / scale, angle=90,
                                   pen=pg.mkPen("#34495e", width=1.5, style=Qt.PenStyle.DashLine),
                                   label=f"capture {fmt.duration(span)}",
                                   labelOpts={"position": 0.93, "color": "#34495e",
                                              "anchors": [(1, 0.5), (1, 0.5)]})
            self.plot.addItem(line)
            self._items.append(line)
        item.setLabel("bottom", f"time ({unit})")
        item.setXRange(0, x_max * 1.02, padding=0)
        item.setYRange(-0.55, rows[0][0] + 0.55, padding=0)


def _text_color(bg: str) -> str:
    c = QColor(bg)
    luminance = 0.299 * c.red() + 0.587 * c.green() + 0.114 * c.blue()
    return "#1b2631" if luminance > 150 else "#ffffff"


class Legend(QWidget):
    """Swatch, name, time, share and count for each bar segment; readable at any chart size."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setHorizontalSpacing(12)
        self.grid.setVerticalSpacing(4)
        self.title = title
        self.rows: list[tuple[str, str, str, str]] = []

    def set_rows(self, header: tuple[str, str, str], rows: list[tuple[str, str, str, str, str]]) -> None:
        while self.grid.count():
            taken = self.grid.takeAt(0)
            w = taken.widget() if taken is not None else None
            if w is not None:
                w.hide()  # deleteLater waits for the event loop; never paint the old rows meanwhile
                w.deleteLater()
        self.rows = [(name, t, share, n) for _, name, t, share, n in rows]
        t = heading(self.title, 1)
        self.grid.addWidget(t, 0, 0, 1, 2)
        for col, text in enumerate(header, start=2):
            h = muted(text, wrap=False)
            h.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.grid.addWidget(h, 0, col)
        for r, (color, name, tm, share, n) in enumerate(rows, start=1):
            self.grid.addWidget(swatch(color), r, 0)
            self.grid.addWidget(QLabel(name), r, 1)
            for col, text in enumerate((tm, share, n), start=2):
                lab = QLabel(text)
                lab.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.grid.addWidget(lab, r, col)
        self.grid.setColumnStretch(1, 1)
        for r in range(self.grid.rowCount()):
            self.grid.setRowStretch(r, 0)
        self.grid.setRowStretch(len(rows) + 1, 1)  # rows packed at the top, both legends align


def _right(text: str) -> QTableWidgetItem:
    it = QTableWidgetItem(text)
    it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return it


class SummaryView(ReportView):
    """Headline numbers, the breakdown chart, findings, copy bandwidth, iterations, what is missing."""

    key = "summary"  # sig_ready: the summary of the current report is shown (after "Summarizing…")

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent, layout=False)
        self.reports: OpenReports = reports
        self.summary: Summary | None = None
        self._ranges = LatestCall(self)  # recomputes summary + findings for another step range
        self._ranges.sig_result.connect(self._on_range_done)
        self._ranges.sig_error.connect(self._on_range_error)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        self._scroll = scroll
        outer.addWidget(scroll)
        # Nsight Compute reports have no timeline to summarize: one sentence instead of the page.
        self.ncu_notice = QLabel()
        self.ncu_notice.setObjectName("NcuNotice")
        self.ncu_notice.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.ncu_notice.setWordWrap(True)
        self.ncu_notice.setStyleSheet("#NcuNotice { background: white; color: #5f6b7a; font-size: 13pt; }")
        self.ncu_notice.hide()
        outer.addWidget(self.ncu_notice)
        body = QWidget()
        body.setObjectName("SummaryBody")
        body.setStyleSheet("#SummaryBody { background: white; }")
        scroll.setWidget(body)
        lay = QVBoxLayout(body)
        lay.setContentsMargins(20, 14, 20, 14)
        lay.setSpacing(10)

        self.title = heading("", 5)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.subtitle = WrapLabel(muted=True)
        lay.addWidget(self.title)
        lay.addWidget(self.subtitle)

        lay.addLayout(self._cards())

        # The answer first (findings), then the picture (chart), then the details.
        lay.addWidget(heading("Findings", 2))
        self.findings_box = QVBoxLayout()
        self.findings_box.setSpacing(4)
        lay.addLayout(self.findings_box)

        self._add_breakdown(lay)

        lay.addLayout(self._details_row())
        lay.addStretch(1)

        self.finding_labels: list[QLabel] = []
        reports.sig_current_changed.connect(self._on_current_changed)
        reports.sig_summary_ready.connect(self._on_summary_ready)
        reports.sig_summary_progress.connect(self._on_summary_progress)
        self._on_current_changed(reports.current)

    def _cards(self) -> QHBoxLayout:
        """The headline numbers: capture span, CUDA API time, GPU busy and idle, kernels."""
        cards = QHBoxLayout()
        cards.setSpacing(10)
        self.card_span = StatCard("Capture span")
        self.card_api = StatCard("CUDA API time")
        self.card_busy = StatCard("GPU busy")
        self.card_idle = StatCard("GPU idle")
        self.card_kernels = StatCard("Kernels")
        for c in (self.card_span, self.card_api, self.card_busy, self.card_idle, self.card_kernels):
            c.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
            cards.addWidget(c)
        return cards

    def _add_breakdown(self, lay: QVBoxLayout) -> None:
        """Where the time went: the chart, its two legends and the per-GPU/process rows."""
        lay.addWidget(heading("Where the time went", 2))
        self.chart = BreakdownChart()
        lay.addWidget(self.chart)
        legends = QHBoxLayout()
        legends.setSpacing(40)
        self.api_legend = Legend("CUDA API time by category")
        self.gpu_legend = Legend("GPU time by activity")
        legends.addWidget(self.api_legend, 1)
        legends.addWidget(self.gpu_legend, 1)
        lay.addLayout(legends)
        # Several GPUs or processes: one row each, with totals that say what they add.
        self.devices_label = WrapLabel()
        lay.addWidget(self.devices_label)
        lay.addSpacing(6)

    def _details_row(self) -> QHBoxLayout:
        """Three columns: achieved copy bandwidth, iterations (with the step range), what is missing."""
        columns = QHBoxLayout()
        columns.setSpacing(30)
        col_iter, col_bw, col_missing = QVBoxLayout(), QVBoxLayout(), QVBoxLayout()
        for col in (col_iter, col_bw, col_missing):
            col.setSpacing(6)  # nested layouts would inherit the 30 px between columns
        columns.addLayout(col_bw, 4)
        columns.addLayout(col_iter, 3)
        self._columns, self._col_iter = columns, col_iter
        columns.addLayout(col_missing, 3)

        self.iter_heading = heading("Iterations", 2)
        self.iter_text = WrapLabel()
        col_iter.addWidget(self.iter_heading)
        range_row = QHBoxLayout()
        self.range_label = QLabel("Step range:")
        range_row.addWidget(self.range_label)
        self.range_combo = QComboBox()
        self.range_combo.setEditable(True)  # a range name, or marker:TEXT
        self.range_combo.setToolTip("The steps: found from the GPU's repeating work (NVTX ranges only name "
                                    "them), or pick a repeating NVTX range, or type marker:TEXT to start a "
                                    "step at each GPU operation named like TEXT; the steps and the findings "
                                    "are computed again (CLI: --range).")
        self.range_combo.activated.connect(self._on_range_picked)
        range_row.addWidget(self.range_combo, 1)
        col_iter.addLayout(range_row)
        col_iter.addWidget(self.iter_text)
        col_iter.addStretch(1)

        col_bw.addWidget(heading("Achieved copy bandwidth", 2))
        self.bandwidth = QTableWidget(0, 6)
        self.bandwidth.setHorizontalHeaderLabels(
            ["Direction", "Memory", "Copies", "Bytes", "Time (sum)", "Rate"])
        self.bandwidth.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)  # compact rows
        self.bandwidth.verticalHeader().hide()
        self.bandwidth.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.bandwidth.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.bandwidth.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        hh = self.bandwidth.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setStretchLastSection(True)
        self.bandwidth.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.bandwidth.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.bandwidth_empty = muted("No memory copies in this capture.")
        col_bw.addWidget(self.bandwidth)
        col_bw.addWidget(self.bandwidth_empty)
        col_bw.addStretch(1)

        col_missing.addWidget(heading("Not in this capture", 2))
        self.missing_label = WrapLabel(muted=True)
        col_missing.addWidget(self.missing_label)
        col_missing.addStretch(1)
        return columns

    def is_busy(self) -> bool:
        """True while the current report is still being summarized."""
        rep = self.reports.current
        return rep is not None and not rep.is_ncu and not rep.summary_ready and not rep.summary_error

    def _on_summary_ready(self, report: LoadedReport) -> None:
        if report is self.reports.current:
            self._on_current_changed(report)
            self.sig_ready.emit()

    def _on_summary_progress(self, report: LoadedReport) -> None:
        if report is self.reports.current and not report.summary_ready and not report.summary_error:
            self.ncu_notice.setText(summarizing_text(report))

    # -- slots ---------------------------------------------------------------------------------
    def _on_current_changed(self, report: LoadedReport | None) -> None:
        if report is None:
            self.summary = None
            self.title.setText("No report open")
            self.subtitle.setText("Open a report with File ▸ Open… or drop one on the window.")
            return
        self._scroll.setVisible(not report.is_ncu)
        self.ncu_notice.setVisible(report.is_ncu)
        if report.is_ncu:
            self.summary = None
            self.ncu_notice.setText(ncu_notice_text(report.name))
            return
        if report.summary_error or not report.summary_ready:
            self._scroll.setVisible(False)
            self.ncu_notice.setVisible(True)
            self.summary = None
            self.title.setText(report.name)
            self.ncu_notice.setText(report.summary_error or summarizing_text(report))
            return
        self.set_summary(report.summary, report.name)

    def set_summary(self, s: Summary, name: str) -> None:
        self.summary = s
        rep = s.report
        self.title.setText(name)
        bits = [KIND_LABELS.get(rep.kind, rep.kind)]
        if rep.product_version:
            bits.append(f"written by {producer(rep.kind, rep.product_version)}")
        # each GPU model once, with how many the report lists ("2 × NVIDIA H100 80GB HBM3 (132 SMs)")
        bits += fmt.distinct([f"{g.name or 'GPU'}" + (f" ({g.smCount} SMs)" if g.smCount else "")
                              for g in rep.gpus])
        bits.append(str(rep.path))
        self.subtitle.setText("  ·  ".join(bits))

        span = s.wall.span_ns
        host, gpu = s.host, s.gpu
        self.card_span.set(fmt.duration(span), "first to last recorded event")
        threads = (f" · Σ {fmt.duration(host.total_ns)} over {host.thread_count} threads"
                   if host.thread_count > 1 else "")
        self.card_api.set(fmt.duration(host.union_ns),
                          f"{fmt.count(host.calls)} calls · in flight {fmt.percent(host.pct_of_wall)} "
                          f"of capture{threads}")
        if gpu.device_count > 1:
            self.card_busy.set(fmt.duration(gpu.busy_ns),
                               f"any of {gpu.device_count} GPUs: {fmt.percent(gpu.busy_pct_of_wall)} of "
                               f"capture · Σ over GPUs {fmt.duration(gpu.busy_sum_ns)}")
        else:
            self.card_busy.set(fmt.duration(gpu.busy_ns), f"{fmt.percent(gpu.busy_pct_of_wall)} of capture")
        idle_pct = None if gpu.busy_pct_of_wall is None else round(100.0 - gpu.busy_pct_of_wall, 2)
        self.card_idle.set(fmt.duration(gpu.idle_ns), f"{fmt.percent(idle_pct)} of capture"
                           + (" (no GPU busy)" if gpu.device_count > 1 else ""))
        kern = s.part("kernels")
        if kern:
            self.card_kernels.set(fmt.duration(kern.union_ns),
                                  f"{fmt.count(kern.count)} launches · {fmt.percent(kern.pct_of_busy)} of "
                                  "GPU busy")
        else:
            self.card_kernels.set("none", "no kernels were recorded")

        self.chart.set_summary(s)
        self.api_legend.set_rows(("in flight", "% of capture", "calls"), [
            (API_COLORS.get(c.category, "#999"), c.label, fmt.duration(c.union_ns),
             fmt.percent(c.pct_of_wall), fmt.count(c.calls))
            for c in host.categories
        ])
        colors = gpu_part_colors(gpu.parts)
        gpu_rows = [
            (colors[p.part], p.part, fmt.duration(p.union_ns), fmt.percent(p.pct_of_busy), fmt.count(p.count))
            for p in gpu.parts
        ]
        gpu_rows.append((IDLE_COLOR, "idle (nothing on the GPU)" if gpu.device_count <= 1 else
                         "idle (no GPU busy)", fmt.duration(gpu.idle_ns), fmt.percent(idle_pct), ""))
        self.gpu_legend.set_rows(("time", "% of busy", "count"), gpu_rows)
        self.devices_label.setText(devices_text(s))
        self.devices_label.setVisible(bool(devices_text(s)))

        self._set_findings(s.findings)
        self._set_iterations(s.iterations)
        self._set_bandwidth([b.to_json() for b in s.bandwidth])
        missing = s.missing
        self.missing_label.setText("\n".join(f"• {_sentence(m)}" for m in missing) if missing
                                   else "Everything Kernelscope reads was captured.")

    def _set_findings(self, findings: tuple[TopFinding, ...]) -> None:
        for lab in self.finding_labels:
            self.findings_box.removeWidget(lab)
            lab.hide()
            lab.deleteLater()
        self.finding_labels = []
        texts = [f"[{f.severity}] {f.title}: {f.gain}" for f in findings]
        shown: list[TopFinding | None] = list(findings) or [None]
        for f, text in zip(shown, texts or ["Nothing stands out in this capture."], strict=False):
            lab = WrapLabel(f"•  {text}")
            if f is not None:
                lab.setToolTip(f.text)
            self.findings_box.addWidget(lab)
            self.finding_labels.append(lab)

    def _set_iterations(self, it: Iterations | None) -> None:
        why = getattr(self.summary, "no_steps", "") if self.summary is not None else ""
        self.iter_heading.setVisible(bool(it) or bool(why))
        self.iter_text.setVisible(bool(it) or bool(why))
        self.range_label.setVisible(bool(it))
        self.range_combo.setVisible(bool(it))
        self._columns.setStretchFactor(self._col_iter, 3 if it or why else 0)  # no empty gap without them
        if not it:
            if why:  # honest when nothing repeats: say why, and that findings speak of the capture
                self.iter_text.setText(why[0].upper() + why[1:] + ".")
            return
        self.range_combo.blockSignals(True)
        self.range_combo.clear()
        # the steps found from the GPU's work first, then the NVTX ranges a user may pick instead
        for name in dict.fromkeys((it.range, *(it.candidates or ()))):
            self.range_combo.addItem(name)
        self.range_combo.setCurrentText(it.range)
        self.range_combo.blockSignals(False)
        self.iter_text.setText(iterations_html(it))

    def _on_range_picked(self, index: int) -> None:
        rep = self.reports.current
        name = self.range_combo.itemText(index)
        if rep is None or self.summary is None or self.summary.iterations is None:
            return
        if name == self.summary.iterations.range:
            return
        rep.set_range(name)
        self.iter_text.setText(f"Finding the steps of {name}…")
        self._ranges.request((id(rep), name), rep.ensure_summary)

    def _on_range_done(self, key: Any, _summary: Any) -> None:
        rep = self.reports.current
        if rep is not None and key[0] == id(rep):
            self.reports.sig_summary_ready.emit(rep)  # this view and the others show the new steps

    def _on_range_error(self, key: Any, msg: str) -> None:
        self.iter_text.setText(msg)

    def _set_bandwidth(self, rows: list[dict[str, Any]]) -> None:
        self.bandwidth.setRowCount(len(rows))
        for r, b in enumerate(rows):
            self.bandwidth.setItem(r, 0, QTableWidgetItem(str(b["direction"])))
            self.bandwidth.setItem(r, 1, QTableWidgetItem(str(b["memory"])))
            self.bandwidth.setItem(r, 2, _right(fmt.count(b["count"])))
            self.bandwidth.setItem(r, 3, _right(fmt.nbytes(b["bytes"])))
            rate = b.get("bytes_per_s")  # unrounded (gb_per_s keeps 3 decimals: 0.003 for 3.1 MB/s)
            self.bandwidth.setItem(r, 4, _right(fmt.duration(b.get("total_ns"))))
            # each rate in its own unit: 8-byte copies read '3.1 MB/s', not '0.00' GB/s
            self.bandwidth.setItem(r, 5, _right(fmt.rate(rate)))
        self.bandwidth.setVisible(bool(rows))
        self.bandwidth_empty.setVisible(not rows)
        # Fit the table to its rows so the page, not the table, scrolls.
        h = self.bandwidth.horizontalHeader().height() + 2 * self.bandwidth.frameWidth()
        h += sum(self.bandwidth.rowHeight(r) for r in range(len(rows)))
        self.bandwidth.setFixedHeight(h + 2)

    # -- for tests and screenshots ----------------------------------------------------------------
    def headline_texts(self) -> dict[str, str]:
        return {
            "span": self.card_span.value.text(),
            "api": self.card_api.value.text(),
            "busy": self.card_busy.value.text(),
            "idle": self.card_idle.value.text(),
            "kernels": self.card_kernels.value.text(),
        }


def devices_text(s: Summary) -> str:
    """One line per GPU and per process when there are several (shares are unions; sums say so)."""
    lines = []
    if s.gpu.device_count > 1:
        lines.append(f"<b>{s.gpu.device_count} GPUs</b>, busy time summed over them "
                     f"{fmt.duration(s.gpu.busy_sum_ns)} (a sum, not a share of the capture):")
        for d in s.gpu.devices:
            lines.append(f"&nbsp;&nbsp;GPU {d.device} {d.name or ''}: busy {fmt.duration(d.busy_ns)} "
                         f"({fmt.percent(d.busy_pct_of_wall)} of capture), {len(d.streams)} stream(s)")
    if len(s.processes) > 1:
        lines.append(f"<b>{len(s.processes)} processes</b> (CUDA API and GPU busy: unions within each):")
        for p in s.processes:
            lines.append(f"&nbsp;&nbsp;pid {p.pid} {p.name or ''}: CUDA API {fmt.duration(p.api_union_ns)} "
                         f"({fmt.percent(p.api_pct_of_wall)}), GPU busy {fmt.duration(p.gpu_busy_ns)} "
                         f"({fmt.percent(p.gpu_busy_pct_of_wall)}) on GPU {', '.join(p.devices) or '–'}")
    return "<br>".join(lines)


def iterations_html(it: Iterations) -> str:
    """The steps in a few lines: the range, warm-up vs steady, per-step and one-time API costs."""
    warm = f", {it.warmup_count} warm-up" if it.warmup_count else ""
    lines = [
        f"<b>{it.count}</b> steps of <b>{it.range}</b>{warm} (pid {it.pid}): the first took "
        f"{fmt.duration(it.first_ns)}, the steady median {fmt.duration(it.steady_median_ns)} on the GPU, "
        f"GPU busy {fmt.duration(it.gpu_busy_per_step_ns)} per step."
    ]
    from engine.analysis.step_model import METHOD_WORDS

    how = METHOD_WORDS.get(getattr(it, "method", ""), "")
    if how:
        lines.append(f"How: {how} (confidence {getattr(it, 'confidence', 1.0):.0%}).")
    host = getattr(it, "host_steady_median_ns", None)
    if host is not None and it.steady_median_ns and host < 0.8 * it.steady_median_ns:
        lines.append(f"The host runs ahead: its side of a step takes {fmt.duration(host)}; the job's pace "
                     f"is the GPU's {fmt.duration(it.steady_median_ns)}.")
    outliers = getattr(it, "outlier_steps", ())
    if outliers:
        lines.append(f"Outlier steps (over 1.5× the median): {', '.join(map(str, outliers[:10]))}"
                     f"{' …' if len(outliers) > 10 else ''}.")
    per = ", ".join(f"{a.category} {fmt.duration(a.per_iteration_ns)}" for a in it.api_per_iteration)
    warmup = ", ".join(f"{a.category} {fmt.duration(a.total_ns)}" for a in it.api_warmup)
    once = ", ".join(f"{a.category} {fmt.duration(a.total_ns)}" for a in it.api_one_time)
    if per:
        lines.append(f"CUDA API per steady step: {per}.")
    if warmup:
        lines.append(f"In the warm-up steps: {warmup}.")
    if once:
        lines.append(f"One-time CUDA API outside the steps: {once}.")
    if len(it.processes) > 1:
        lines.append("Per process: " + "; ".join(
            f"pid {p.pid} {p.count} steps, median {fmt.duration(p.steady_median_ns)}" for p in it.processes))
    return "<br>".join(lines)


def ncu_notice_text(name: str) -> str:
    """What the timeline views say about an Nsight Compute report."""
    return (f"{name} is an Nsight Compute report: its kernels were profiled one at a time, so "
            "there is no timeline to summarize.\nSee the Kernels view (and Roofline) for its kernels, "
            "their sections, rule results and estimated speedups.")


def summarizing_text(report: LoadedReport) -> str:
    """What the Summary view says while the report's summary is computed (with its progress)."""
    doing = f"\n{report.summary_progress}" if report.summary_progress else ""
    return f"Summarizing… (the other views can be used meanwhile){doing}"


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


__all__ = ["SummaryView", "MUTED"]
