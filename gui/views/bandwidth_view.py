"""Bandwidth view: the achieved rate of every memory copy over time and as a histogram, against
the ceilings (measured by ``kernelscope calibrate`` when available, else the GPU's specification)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QSplitter, QVBoxLayout, QWidget

from gui import format as fmt
from gui.documents import OpenReports
from gui.views.base import ReportView
from gui.widgets.axes import LogAxis, style_plot, tick_font
from gui.widgets.labels import WrapLabel, swatch
from gui.widgets.table import ReadOnlyTable
from gui.workers import LoadedReport

if TYPE_CHECKING:
    import pandas as pd

    from engine.analysis.bandwidth import BandwidthAnalysis
    from engine.reports.base import Trace

#: (direction, memory) -> colour; pageable in warm colours, pinned in cool ones.
KIND_COLORS = {
    ("Host-to-Device", "Pageable"): "#e8871e",
    ("Host-to-Device", "Pinned"): "#1f5fa8",
    ("Device-to-Host", "Pageable"): "#c0392b",
    ("Device-to-Host", "Pinned"): "#17a2b8",
    ("Device-to-Device", "Device"): "#2e9e5b",
    ("Peer-to-Peer", "Device"): "#8e5cb5",
}
OTHER_COLOR = "#8a94a0"
MIN_BAR_DECADES = 0.06  # the thinnest histogram bar, in decades of the rate axis
CEILING_COLOR = {"calibration": "#2c3e50", "spec": "#7f8c8d"}


def kind_color(direction: str, memory: str) -> str:
    return KIND_COLORS.get((direction, memory), OTHER_COLOR)


def compute(trace: Trace) -> BandwidthAnalysis:
    """The analysis the view shows (runs in a worker thread)."""
    from engine.analysis.bandwidth import analyze

    return analyze(trace)


def scale_for(largest: float, units: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    """The (scale, unit) of ``units`` (largest first) that the ``largest`` value reaches; the last
    one otherwise: 4 bytes read '4 B', not '4e-06 MB'."""
    for scale, unit in units:
        if largest >= scale:
            return scale, unit
    return units[-1]


TIME_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns"))


def table_frame(stats: pd.DataFrame) -> pd.DataFrame:
    """The per-kind statistics as the table shows them, each cell in its own unit.

    Raw numbers (bytes, ns, bytes/s) that :data:`TABLE_FORMATS` writes (4 B beside 14.1 GB, never
    "4.88e-07 GB"); "Time (sum)" adds the copies' durations (overlapping copies count twice; the
    rates are over it), "Time (union)" is the time at least one ran (the Summary's GPU part).
    "% of ceiling" is blank for a kind whose copies are all latency-bound; "Rating" says so with
    their per-copy latency, or that device copies stay in L2 (see engine.analysis.bandwidth).
    """
    import pandas as pd

    def gbs(col: str) -> Any:
        return stats[col].astype(float) * 1e9

    return pd.DataFrame({
        "Direction": stats["direction"].astype(str),
        "Memory": stats["memory"].astype(str),
        "Copies": stats["count"].astype("int64"),
        "Bytes": stats["bytes"].astype("int64"),
        "Time (sum)": stats["total_ns"].astype(float),
        "Time (union)": stats["union_ns"].astype(float) if "union_ns" in stats else math.nan,
        "Achieved": gbs("gb_per_s"),
        "Median": gbs("median_gb_per_s"),
        "P10": gbs("p10_gb_per_s"),
        "P90": gbs("p90_gb_per_s"),
        "Ceiling": gbs("ceiling_gb_per_s"),
        "Ceiling from": stats["ceiling_source"].astype(str),
        "% of ceiling": stats["pct_of_ceiling"].astype(float),
        "Rating": [rating_text(r) for r in stats.to_dict("records")],
    })


def rating_text(row: Mapping[Any, Any]) -> str:
    """A kind's rating in a few words: 'latency-bound, 2.4 µs per copy', 'L2-resident', 'bandwidth',
    'mixed: 168 in L2, 340 latency-bound' (the note under the table says what each means)."""
    if row.get("rating") == "latency-bound":
        return f"latency-bound, {fmt.duration(row.get('latency_ns'))} per copy"
    if row.get("rating") == "L2-resident":
        return "L2-resident"
    if row.get("rating") != "mixed":
        return "bandwidth"
    extra = []
    if row.get("l2_resident"):
        extra.append(f"{row['l2_resident']:,} in L2")
    if row.get("latency_bound"):
        extra.append(f"{row['latency_bound']:,} latency-bound")
    return "mixed: " + ", ".join(extra)


#: how the table writes each column's raw value
TABLE_FORMATS = {
    "Bytes": fmt.nbytes, "Time (sum)": fmt.duration, "Time (union)": fmt.duration, "Achieved": fmt.rate,
    "Median": fmt.rate,
    "P10": fmt.rate, "P90": fmt.rate, "Ceiling": fmt.rate,
    "% of ceiling": lambda p: fmt.percent(p, 1 if p >= 0.1 else 3),
}


class BandwidthView(ReportView):
    key = "bandwidth"

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent)
        import pyqtgraph as pg  # heavy: imported when the view is built

        self._pg = pg
        self.analysis: BandwidthAnalysis | None = None
        self._calls = self.latest_call(self._on_result, self._on_error)
        lay = self.vbox
        self.notes = WrapLabel(muted=True)
        lay.addWidget(self.notes)
        lay.addWidget(self.stack, 1)

        body = QWidget()
        blay = QVBoxLayout(body)
        blay.setContentsMargins(0, 0, 0, 0)
        self.legend = QHBoxLayout()
        self.legend.setSpacing(6)
        blay.addLayout(self.legend)
        plots = QSplitter(Qt.Orientation.Horizontal)
        font = tick_font(self.font())
        # Rates are plotted in GB/s; the axis labels decades in engineering units ("10 GB/s").
        self.scatter_plot = pg.PlotWidget(background="w",
                                          axisItems={"left": LogAxis("left", unit="B/s", scale=1e9)})
        self.hist_plot = pg.PlotWidget(background="w")
        for p in (self.scatter_plot, self.hist_plot):
            style_plot(p.getPlotItem(), font)
            p.getPlotItem().setLogMode(x=False, y=True)
        self.scatter_plot.setLabel("left", "achieved rate")
        self.scatter_plot.setLabel("bottom", "time since capture start (s)")
        self.time_unit = "s"
        self.scatter_plot.getPlotItem().getAxis("bottom").enableAutoSIPrefix(False)
        self.scatter_plot.setTitle("Every copy: bytes ÷ duration", color="#2c3e50")
        self.hist_plot.setLabel("bottom", "copies")
        self.hist_plot.setTitle("Histogram", color="#2c3e50")
        self.hist_plot.setYLink(self.scatter_plot)
        self.hist_plot.getPlotItem().hideAxis("left")
        plots.addWidget(self.scatter_plot)
        plots.addWidget(self.hist_plot)
        plots.setStretchFactor(0, 3)
        plots.setStretchFactor(1, 1)

        self.table = ReadOnlyTable()
        self.table.source.header_labels = {"Time (sum)": "Time\n(sum)", "Time (union)": "Time\n(union)",
                                           "Ceiling from": "Ceiling\nfrom", "% of ceiling": "% of\nceiling"}
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.model, self.proxy = self.table.source, self.table.proxy
        blay.addWidget(plots, 1)
        blay.addWidget(self.table)
        self.rating_text = WrapLabel(muted=True)  # latency-bound and L2-resident copies, in words
        blay.addWidget(self.rating_text)
        self.ceiling_text = WrapLabel(muted=True)
        blay.addWidget(self.ceiling_text)
        self._body = self.stack.add_page(body)

        #: for tests: kind -> (x seconds, y GB/s) drawn; ceiling label -> GB/s; histogram counts.
        self.drawn: dict[str, tuple[Any, Any]] = {}
        self.ceiling_lines: dict[str, float] = {}
        self.hist_counts: dict[str, Any] = {}
        self._scatters: dict[str, Any] = {}

        self.start_following()

    # -- slots ------------------------------------------------------------------------------------
    def on_report(self, report: LoadedReport | None) -> None:
        self.analysis = None
        self.set_title("Copy bandwidth", report)
        if report is None:
            self.notes.setText("")
            self.show_placeholder("Open an Nsight Systems report or a PyTorch trace to see its "
                                   "copy bandwidth.")
            return
        if report.is_ncu:
            self.notes.setText("")
            self.show_placeholder(f"{report.name} is an Nsight Compute report: it has no memory copies "
                                   "on a timeline. See the Kernels and Roofline views.")
            self.sig_ready.emit()
            return
        self.notes.setText("Computing…")
        self._calls.request(id(report), compute, report.trace)

    def _on_result(self, key: Any, analysis: BandwidthAnalysis) -> None:
        if not self.current_is(key):
            return
        self.show_analysis(analysis)
        self.sig_ready.emit()

    def _on_error(self, key: Any, msg: str) -> None:
        self.sig_message.emit(f"Bandwidth: {msg}")
        self.show_placeholder(msg)
        self.sig_ready.emit()

    # -- drawing ----------------------------------------------------------------------------------
    def show_analysis(self, a: BandwidthAnalysis) -> None:
        self.analysis = a
        self.notes.setText(" ".join(a.notes))
        if not len(a.transfers):
            self.show_placeholder(a.notes[0] if a.notes else "This report has no memory copies.")
            return
        self.stack.show_page(self._body)
        self._draw_scatter(a)
        self._draw_histogram(a)
        self._draw_ceilings(a)
        self.table.set_frame(table_frame(a.stats), TABLE_FORMATS)
        # the numbers fit their contents; the rating takes the rest, elided (the notes below say it
        # whole): no column is cut at the table's edge behind a scroll bar
        self.table.fit_columns("Direction", "Rating", 110, 140)
        self.table.fit_height()  # a handful of kinds: the plots get the rest
        notes = [f"<b>{html.escape(str(k))}</b>: {html.escape(str(n))}"
                 for k, n in zip(a.stats["kind"], a.stats["note"], strict=True) if n]
        self.rating_text.setText("<br>".join(notes))
        self.rating_text.setVisible(bool(notes))
        present = set(zip(a.stats["direction"], a.stats["memory"], strict=True))
        by_detail: dict[str, list[str]] = {}
        for c in a.ceilings:
            if (c.direction, c.memory) in present:
                by_detail.setdefault(f"{c.label} from {c.detail}", []).append(f"{c.direction} · {c.memory}")
        lines = [f"{what} ({', '.join(kinds)})" for what, kinds in by_detail.items()]
        self.ceiling_text.setText("Ceilings: " + "; ".join(lines) + "." if lines else
                                  "No ceilings: the GPU is not in Kernelscope's specification data "
                                  "and there is no calibration.")

    def _draw_scatter(self, a: BandwidthAnalysis) -> None:
        pg = self._pg
        plot = self.scatter_plot
        plot.clear()
        self.drawn.clear()
        self._scatters.clear()
        while self.legend.count():
            item = self.legend.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None:
                w.hide()
                w.deleteLater()
        x = a.transfers
        # One time origin in every view: the capture start (trace time 0, as the Timeline counts it);
        # the axis runs from it to the last copy's end, in a unit that suits that span.
        span_ns = max(float(x["end"].max()), 1000.0)
        scale, unit = scale_for(span_ns, TIME_UNITS)
        self.time_unit = unit
        plot.setLabel("bottom", f"time since capture start ({unit})")
        span = span_ns / scale
        plot.getPlotItem().setXRange(-0.02 * span, 1.02 * span, padding=0)
        for (direction, memory), g in x.groupby(["direction", "memory"], sort=True):
            kind = f"{direction} · {memory}"
            color = kind_color(str(direction), str(memory))
            g = g[g["gb_per_s"].notna() & (g["gb_per_s"] > 0)]
            xs = g["start"].to_numpy(dtype=float) / 1e9
            ys = g["gb_per_s"].to_numpy(dtype=float)
            self.drawn[kind] = (xs, ys)
            tips = [f"{kind}\n{fmt.nbytes(b)} in {fmt.duration(d)}\n{fmt.rate(r * 1e9)}\n"
                    f"{fmt.duration(s * 1e9)} after capture start"
                    for b, d, r, s in zip(g["bytes"], g["duration_ns"], ys, xs, strict=True)]
            # The rate axis is in log mode; bars, lines and scatter points are placed in log10 space.
            sc = pg.ScatterPlotItem(x=xs * 1e9 / scale, y=np.log10(ys), data=tips, size=9,
                                    pen=pg.mkPen("w", width=0.5), brush=pg.mkBrush(color), hoverable=True,
                                    hoverBrush=pg.mkBrush("#f1c40f"),
                                    tip=lambda x, y, data: data, name=kind)
            plot.addItem(sc)
            self._scatters[kind] = sc
            self.legend.addWidget(swatch(color))
            n = len(g)
            self.legend.addWidget(QLabel(f"{kind} ({n} cop{'y' if n == 1 else 'ies'})"))
            self.legend.addSpacing(14)
        self.legend.addStretch(1)

    def _draw_histogram(self, a: BandwidthAnalysis) -> None:
        pg = self._pg
        plot = self.hist_plot
        plot.clear()
        self.hist_counts.clear()
        h = a.histogram
        if not len(h):
            return
        base: Any = None  # kinds stack: bars of one bin sit end to end
        for kind, g in h.groupby("kind", sort=True):
            direction, memory = str(g["direction"].iloc[0]), str(g["memory"].iloc[0])
            counts = g["count"].to_numpy(dtype=float)
            self.hist_counts[str(kind)] = counts
            lo = np.log10(g["lo_gb_per_s"].to_numpy(dtype=float))
            hi = np.log10(g["hi_gb_per_s"].to_numpy(dtype=float))
            keep = counts > 0
            if int(keep.sum()) == 1:
                # Copies of one rate (a single copy, say) fill one bin a thousandth of a decade tall:
                # draw that bar at least MIN_BAR_DECADES tall, centred on its bin, so it is seen.
                grow = np.maximum(MIN_BAR_DECADES - (hi - lo), 0) / 2
                lo, hi = lo - grow, hi + grow
            if base is None:
                base = np.zeros(len(counts))
            # Horizontal bars on the rate axis (log10 space: the axis is in log mode).
            bars = pg.BarGraphItem(x0=base[keep], y0=lo[keep], width=counts[keep],
                                   height=(hi - lo)[keep],
                                   brush=pg.mkBrush(kind_color(direction, memory) + "c0"),
                                   pen=pg.mkPen("w", width=0.5))
            plot.addItem(bars)
            base = base + counts
        # At most ~5 labelled counts on the narrow axis (1, 2, 5, 10, ... apart).
        top = float(base.max()) if base is not None and len(base) else 1.0
        step = next(m * 10 ** e for e in range(0, 12) for m in (1, 2, 5) if top / (m * 10 ** e) <= 5)
        plot.getAxis("bottom").setTickSpacing(major=step, minor=step)

    def _draw_ceilings(self, a: BandwidthAnalysis) -> None:
        pg = self._pg
        self.ceiling_lines.clear()
        present = set(zip(a.stats["direction"], a.stats["memory"], strict=True))
        seen: dict[tuple[str, float], list[str]] = {}
        for c in a.ceilings:
            if (c.direction, c.memory) not in present:
                continue
            seen.setdefault((c.source, c.gb_per_s), []).append(f"{c.direction} · {c.memory}")
            self.ceiling_lines[f"{c.direction} · {c.memory}"] = c.gb_per_s
        top = max([float(np.nanmax(y)) for _, y in self.drawn.values() if len(y)] or [1.0])
        for (source, gbs), kinds in seen.items():
            label = next(c.label for c in a.ceilings if c.source == source and c.gb_per_s == gbs)
            who = "all copies" if len(kinds) == len(present) else ", ".join(kinds)
            pen = pg.mkPen(CEILING_COLOR.get(source, "#7f8c8d"), width=1.5,
                           style=Qt.PenStyle.DashLine if source == "spec" else Qt.PenStyle.SolidLine)
            line = pg.InfiniteLine(pos=math.log10(gbs), angle=0, pen=pen,
                                   label=f"{label} — {who}",
                                   labelOpts={"position": 0.02, "color": CEILING_COLOR.get(source),
                                              "anchors": [(0, 1), (0, 1)]})
            self.scatter_plot.addItem(line)
            self.hist_plot.addItem(pg.InfiniteLine(pos=math.log10(gbs), angle=0, pen=pen))
            top = max(top, gbs)
        lows = [float(np.nanmin(y)) for _, y in self.drawn.values() if len(y)]
        bottom = min(lows) if lows else 0.1
        # room above the highest ceiling for its label
        self.scatter_plot.getPlotItem().setYRange(math.log10(bottom) - 0.15, math.log10(top) + 0.35,
                                                  padding=0)

    # -- for tests --------------------------------------------------------------------------------
    def table_rows(self) -> list[dict[str, str]]:
        return self.table.rows_text()

