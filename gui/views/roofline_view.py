"""Roofline view (Nsight Compute): kernels as points on a log-log chart of FLOP/s against
arithmetic intensity, under the memory and compute ceilings, one precision at a time."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from gui.documents import OpenReports
from gui.views.base import ReportView
from gui.widgets.axes import LogAxis, style_plot, tick_font
from gui.widgets.labels import WrapLabel, swatch
from gui.workers import LoadedReport

if TYPE_CHECKING:
    from engine.analysis.ncu.roofline import Roofline
    from engine.reports.ncu import NcuReport

LEVEL_STYLE = {"DRAM": ("#c0392b", "o"), "L2": ("#2f6fba", "s"), "L1": ("#2e9e5b", "t")}
#: how many kernels get their name beside their point (the highest FLOP/s first)
TOP_LABELS = 5
MISSING_METRICS = ("No roofline: this report has no FLOP and byte counters for its kernels.\n"
                   "Profile with `ncu --set full` (or `--section SpeedOfLight_RooflineChart`) to draw one.")


def short_kernel(name: str, n: int = 32) -> str:
    """A kernel's label on the chart: no return type, template arguments or parameters, at most
    ``n`` characters (elided in the middle, where long generated names differ least)."""
    base = name.split("(", 1)[0].strip()
    if base.startswith("void "):
        base = base[5:]
    depth, out = 0, []
    for ch in base:  # drop <...> at any depth
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    text = "".join(out).strip() or name
    if len(text) > n:
        head = (n - 1) // 2
        text = text[:head] + "…" + text[len(text) - (n - 1 - head):]
    return text


def precision_key(precision: str, path: str) -> str:
    """'FP32', or 'Tensor FP16' for tensor points: the name of the matching compute ceiling."""
    return f"{precision} {path}".strip() if path else precision


def calibration_ceilings(gpu_name: str | None) -> dict[str, float]:
    """Measured ceilings for the roofline from a calibration of the same GPU model, if stored."""
    if not gpu_name:
        return {}
    try:
        from engine.system.calibration import load_calibration

        cal = load_calibration(None)
    except Exception:  # noqa: BLE001 - no calibration module, no GPU, damaged file: the report's peaks
        return None or {}
    if cal is None or getattr(cal, "gpu_name", None) != gpu_name:
        return {}
    fields = {"DRAM": "dram_bytes_per_s", "FP32": "fp32_flop_per_s", "Tensor BF16": "bf16_flop_per_s",
              "Tensor FP16": "fp16_flop_per_s", "Tensor TF32": "tf32_flop_per_s"}
    return {k: float(v) for k, f in fields.items() if (v := getattr(cal, f, None))}


def compute(ncu: NcuReport, gpu_name: str | None) -> Roofline:
    """The report's roofline (runs in a worker thread)."""
    from engine.analysis.ncu.roofline import roofline

    return roofline(ncu, calibration_ceilings(gpu_name) or None)


def _si(v: float, unit: str) -> str:
    for p, s in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= s:
            return f"{v / s:,.2f} {p}{unit}"
    return f"{v:,.2f} {unit}"


class RooflineView(ReportView):
    key = "roofline"

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(reports, parent)
        import pyqtgraph as pg

        self._pg = pg
        self.result: Roofline | None = None
        self._calls = self.latest_call(self._on_result, self._on_error)
        lay = self.vbox
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Precision:"))
        self.precision = QComboBox()
        self.precision.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        bar.addWidget(self.precision)
        bar.addSpacing(20)
        bar.addWidget(QLabel("Memory level:"))
        self.level = QComboBox()
        self.level.addItem("All levels", "")
        for lv in LEVEL_STYLE:
            self.level.addItem(lv, lv)
        bar.addWidget(self.level)
        bar.addSpacing(20)
        #: level -> its legend entry (swatch and name); shown only for a level with points or a roof
        self.legend: dict[str, QWidget] = {}
        for lv, (color, _sym) in LEVEL_STYLE.items():
            entry = QWidget()
            el = QHBoxLayout(entry)
            el.setContentsMargins(0, 0, 8, 0)
            el.addWidget(swatch(color))
            el.addWidget(QLabel(lv))
            entry.hide()
            bar.addWidget(entry)
            self.legend[lv] = entry
        bar.addStretch(1)
        lay.addLayout(bar)
        self.notes = WrapLabel(muted=True)
        lay.addWidget(self.notes)

        lay.addWidget(self.stack, 1)
        self.plot = pg.PlotWidget(background="w", axisItems={"left": LogAxis("left", unit="FLOP/s"),
                                                             "bottom": LogAxis("bottom")})
        item = self.plot.getPlotItem()
        style_plot(item, tick_font(self.font()))
        item.setLogMode(x=True, y=True)
        item.setLabel("bottom", "arithmetic intensity (FLOP/byte)")
        item.setLabel("left", "performance (FLOP/s)")
        for name in ("left", "bottom"):
            item.getAxis(name).enableAutoSIPrefix(False)
        self.stack.add_page(self.plot)
        self.points_text = WrapLabel()
        lay.addWidget(self.points_text)

        #: for tests: the points drawn (log10 x, log10 y, kernel id, level) and the ceilings drawn
        self.drawn_points: list[tuple[float, float, int, str]] = []
        self.drawn_ceilings: dict[str, float] = {}
        #: kernel id -> the label beside its point; the compute peak's pen style
        self.labels: dict[int, str] = {}
        self.peak_style = Qt.PenStyle.SolidLine
        self.precision.currentIndexChanged.connect(lambda _i: self._draw())
        self.level.currentIndexChanged.connect(lambda _i: self._draw())
        self.start_following()

    # -- slots ------------------------------------------------------------------------------------
    def on_report(self, report: LoadedReport | None) -> None:
        self.result = None
        self.set_title("Roofline", report)
        if report is None:
            self._show_placeholder("Open an Nsight Compute report (.ncu-rep) to see its roofline.")
            return
        if self.wrong_kind(report):
            self.notes.setText("")
            self._show_placeholder(
                f"{report.name} is not an Nsight Compute report. A roofline needs per-kernel FLOP and "
                "byte counters: profile with `ncu --set full -o report ./app` and open the .ncu-rep.")
            self.sig_ready.emit()
            return
        gpus = report.summary.report.gpus
        name = gpus[0].name if gpus else None
        self.notes.setText("Computing…")
        self._calls.request(id(report), compute, report.ncu, name)

    def _on_result(self, key: Any, result: Roofline) -> None:
        if not self.current_is(key):
            return
        self.show_roofline(result)
        self.sig_ready.emit()

    def _on_error(self, key: Any, msg: str) -> None:
        self.sig_message.emit(f"Roofline: {msg}")
        self._show_placeholder(msg)
        self.sig_ready.emit()

    def _show_placeholder(self, text: str) -> None:
        self.show_placeholder(text)
        self.points_text.setText("")
        self._show_legend(set())

    def _show_legend(self, levels: set[str]) -> None:
        """Legend entries for the memory levels drawn (points or a roof), none for the others."""
        for lv, entry in self.legend.items():
            entry.setVisible(lv in levels)

    def shown_legend(self) -> list[str]:
        """The levels the legend names now (tests)."""
        return [lv for lv, entry in self.legend.items() if not entry.isHidden()]

    # -- drawing ----------------------------------------------------------------------------------
    def show_roofline(self, rf: Roofline) -> None:
        self.result = rf
        pts = rf.points
        keys: list[str] = []
        for p, path in zip(pts["precision"], pts["path"], strict=True):
            k = precision_key(str(p), str(path or ""))
            if k not in keys:
                keys.append(k)
        # Precisions with work first (FP64 points of an FP32 kernel are all zero).
        work = {k: bool(((pts["flops_per_s"] > 0) & (self._key_series(pts) == k)).any()) for k in keys}
        # The precision that did the most work first (the SDPA kernel: Tensor FP16, not FP32).
        peak = {k: float(pts.loc[self._key_series(pts) == k, "flops_per_s"].max()) for k in keys}
        keys.sort(key=lambda k: -peak[k])
        self.precision.blockSignals(True)
        self.precision.clear()
        for k in keys:
            self.precision.addItem(k if work[k] else f"{k} (no work)", k)
        self.precision.blockSignals(False)
        self.precision.setEnabled(bool(keys))
        if not keys:
            self.notes.setText("")  # no stale "Computing…" above the placeholder
            self._show_placeholder(MISSING_METRICS)
            self.stack.placeholder.setToolTip("\n".join(rf.notes))  # which kernels, in full
            self.precision.setEnabled(False)
            self.sig_message.emit("Roofline: the report has no FLOP and byte counters (hover the "
                                  "view's sentence for the kernels).")
            return
        self.stack.show_page(self.plot)
        self._draw()

    def _label_top(self, shown: Any) -> None:
        """Name the TOP_LABELS kernels with the most FLOP/s above their point (DRAM's, else the first
        level drawn); launches of one kernel at one place share a label ("name ×4")."""
        self.labels = {}
        if not len(shown):
            return
        order = {lv: i for i, lv in enumerate(LEVEL_STYLE)}
        pts = shown.assign(_lv=shown["level"].map(order).fillna(len(order)))
        anchor = pts.sort_values("_lv").drop_duplicates("id")
        anchor = anchor.sort_values("flops_per_s", ascending=False)
        placed: dict[tuple[str, float, float], list[int]] = {}
        for r in anchor.to_dict("records"):
            # launches of one kernel within ~10 % of each other on both axes share one label
            key = (short_kernel(str(r["kernel"])), round(math.log10(r["intensity_flop_per_byte"]), 1),
                   round(math.log10(r["flops_per_s"]), 1))
            if key not in placed and len(placed) == TOP_LABELS:
                continue
            placed.setdefault(key, []).append(int(r["id"]))
        for (text, _x, _y), ids in placed.items():
            label = text if len(ids) == 1 else f"{text} ×{len(ids)}"
            first = anchor[anchor["id"] == ids[0]].iloc[0]
            item = self._pg.TextItem(label, color="#2c3e50", anchor=(0.5, 1.3))
            item.setPos(math.log10(first["intensity_flop_per_byte"]), math.log10(first["flops_per_s"]))
            self.plot.addItem(item)
            for kid in ids:
                self.labels[kid] = label

    @staticmethod
    def _key_series(pts: Any) -> Any:
        return pts["precision"].astype(str).str.cat(pts["path"].fillna("").astype(str), sep=" ").str.strip()

    def select_precision(self, key: str) -> None:
        i = self.precision.findData(key)
        if i < 0:
            raise KeyError(key)
        self.precision.setCurrentIndex(i)

    def _draw_roofs(self, use: dict[str, tuple[float, str, str]], levels: list[str], key: str, xs: Any,
                    top: float, lo_x: float, y_lo: float) -> None:
        """The memory roofs of ``levels`` (one labelled line each) and the ``key`` compute peak."""
        pg = self._pg
        plot = self.plot
        compute_peak = use.get(key)
        for i, lv in enumerate(levels):
            bw, _kind, src = use[lv]
            color = LEVEL_STYLE[lv][0]
            ys = np.minimum(bw * xs, top)
            style = Qt.PenStyle.SolidLine if src == "report" else Qt.PenStyle.DashLine
            plot.plot(xs, ys, pen=pg.mkPen(color, width=2, style=style))  # PlotDataItem applies log10
            self.drawn_ceilings[lv] = bw
            label = pg.TextItem(f"{lv} {_si(bw, 'B/s')} ({src})", color=color, anchor=(0, 1), angle=0)
            lx = max(lo_x * 1.2, 10 ** (y_lo + 0.12 + 0.22 * i) / bw)  # staggered, one per level
            label.setPos(math.log10(lx), math.log10(bw * lx))
            plot.addItem(label)
        if compute_peak:
            v, _kind, src = compute_peak
            self.drawn_ceilings[key] = v
            # solid: the report's peak; dashed: a calibration (as for the memory roofs)
            style = Qt.PenStyle.SolidLine if src == "report" else Qt.PenStyle.DashLine
            self.peak_style = style
            line = pg.InfiniteLine(pos=math.log10(v), angle=0,
                                   pen=pg.mkPen("#2c3e50", width=1.5, style=style),
                                   label=f"{key} peak {_si(v, 'FLOP/s')} ({src})",
                                   labelOpts={"position": 0.97, "color": "#2c3e50",
                                              "anchors": [(1, 1), (1, 1)]})
            plot.addItem(line)

    def _draw(self) -> None:
        rf = self.result
        if rf is None or self.precision.count() == 0:
            return
        pg = self._pg
        key = self.precision.currentData()
        level = self.level.currentData()
        plot = self.plot
        plot.clear()
        self.drawn_points = []
        self.drawn_ceilings = {}
        pts = rf.points[self._key_series(rf.points) == key]
        if level:
            pts = pts[pts["level"] == level]
        shown = pts[(pts["flops_per_s"] > 0) & (pts["bytes_per_s"] > 0)]
        skipped = sorted(set(pts["kernel"]) - set(shown["kernel"]))

        ceil = rf.ceilings
        # Calibration rows replace the report's value of the same name.
        use: dict[str, tuple[float, str, str]] = {}
        for r in ceil.to_dict("records"):
            if r["name"] not in use or r["source"] == "calibration":
                use[r["name"]] = (float(r["value"]), str(r["kind"]), str(r["source"]))
        compute_peak = use.get(key)
        levels = [lv for lv in LEVEL_STYLE if (not level or lv == level) and lv in use]

        ai = shown["intensity_flop_per_byte"].to_numpy(dtype=float)
        fl = shown["flops_per_s"].to_numpy(dtype=float)
        lo_x = min([0.01, *(ai[ai > 0] / 3)])
        hi_x = max([1e4, *(ai * 3)])
        xs = np.logspace(math.log10(lo_x), math.log10(hi_x), 200)
        top = compute_peak[0] if compute_peak else max([1.0, *fl]) * 3
        ys_all = [math.log10(top)] + [math.log10(v) for v in fl if v > 0]
        y_lo = min(ys_all) - 1.0
        self._draw_roofs(use, levels, key, xs, top, lo_x, y_lo)

        for lv, g in shown.groupby("level", sort=False):
            color, sym = LEVEL_STYLE.get(str(lv), ("#8a94a0", "o"))
            x = np.log10(g["intensity_flop_per_byte"].to_numpy(dtype=float))
            y = np.log10(g["flops_per_s"].to_numpy(dtype=float))
            tips = [
                f"{r['kernel']}\nID {int(r['id'])} · {key} · {lv}\n"
                f"{_si(r['flops_per_s'], 'FLOP/s')} at {r['intensity_flop_per_byte']:,.3g} FLOP/byte\n"
                f"{_si(r['bytes_per_s'], 'B/s')} from {lv}\n"
                f"{r['pct_of_roof']:.1f} % of the roof ({r['bound'] or 'n/a'}-bound)"
                for r in g.to_dict("records")
            ]
            sc = pg.ScatterPlotItem(x=x, y=y, data=tips, size=11, symbol=sym,
                                    pen=pg.mkPen("w", width=0.8), brush=pg.mkBrush(color),
                                    hoverable=True, hoverBrush=pg.mkBrush("#f1c40f"),
                                    tip=lambda x, y, data: data)
            plot.addItem(sc)
            for xi, yi, kid in zip(x, y, g["id"], strict=True):
                self.drawn_points.append((float(xi), float(yi), int(kid), str(lv)))
        self._label_top(shown)
        self._show_legend(set(self.drawn_ceilings) | {p[3] for p in self.drawn_points})
        plot.getPlotItem().setXRange(math.log10(lo_x), math.log10(hi_x), padding=0.02)
        plot.getPlotItem().setYRange(y_lo, max(ys_all) + 0.3, padding=0)

        notes = list(rf.notes)
        if skipped:
            notes.append(f"No {key} work in {len(skipped)} kernel{'s' if len(skipped) != 1 else ''} "
                         f"({', '.join(s[:40] for s in skipped[:3])}{'…' if len(skipped) > 3 else ''}); "
                         "they are not drawn (log scale).")
        if not compute_peak:
            notes.append(f"The report has no {key} peak; the compute roof is not drawn.")
        self.notes.setText(" ".join(notes))
        kernels = shown.drop_duplicates("id")
        self.points_text.setText(
            f"{len(kernels)} kernel{'s' if len(kernels) != 1 else ''} drawn at {len(shown)} point"
            f"{'s' if len(shown) != 1 else ''} ({key}); the top {TOP_LABELS} by FLOP/s are named, hover "
            "a point for its numbers. Lines: memory roofs and the compute peak (solid: the report's peaks, "
            "dashed: calibration).")
