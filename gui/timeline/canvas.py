"""The timeline canvas: one widget that paints every lane for the visible time range.

There is no item per event. Each paint asks the model which events of each lane fall in view:
when a lane has few, they are drawn as rectangles (labelled where wide enough); when it has many,
the lane's busy fraction per pixel column is drawn as one filled path per event kind. A frame
therefore costs about the same at any zoom level, on a 400,000-kernel report too.

Mouse: wheel zooms around the pointer, Shift+wheel (or a horizontal wheel) and left-drag pan,
right-drag (or Shift+left-drag) zooms to the dragged time range, click selects an event,
double-click shows everything. Keys: Home / 0 fit, + / - zoom, arrows pan.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QResizeEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import QScrollBar, QSizePolicy, QToolTip, QWidget

from gui.timeline import model as tm
from gui.timeline import sparse
from gui.timeline.style import GROUP_TINT, KIND_COLORS, PALETTE, tooltip_text

GUTTER = 260  # px for lane labels
AXIS_H = 28
LANE_H = 24
METRIC_H = 34
LANE_GAP = 4
#: a lane with at most this many events in view is drawn event by event
DETAIL_MAX = 2000
#: coverage of a big lane may interpolate inside blocks of events narrower than this fraction of
#: a pixel column (gui.timeline.sparse): under a pixel of a bar, no mapped pages read at overview
COVERAGE_TOL = 1 / 64
LABEL_MIN_PX = 46
MIN_SPAN_NS = 50.0


def nice_step(span: float, target_ticks: int) -> float:
    """A 1/2/5 x 10^k step that cuts ``span`` into about ``target_ticks`` pieces."""
    if span <= 0:
        return 1.0
    raw = span / max(target_ticks, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return float(m * mag)
    return float(10 * mag)


_TICK_UNITS = (("s", 1e9, 1e8), ("ms", 1e6, 1e5), ("µs", 1e3, 100.0))


def tick_label(t_ns: float, step: float) -> str:
    """A tick's time in the unit that suits the tick step, with the decimals the step needs."""
    chosen = next(((u, sc) for u, sc, min_step in _TICK_UNITS if step >= min_step), None)
    if chosen is None:
        return f"{t_ns:,.0f} ns"
    unit, scale = chosen
    decimals = 0  # as many as the step needs: 0.2 ms steps -> 1, 0.25 ms -> 2
    while decimals < 6 and abs(round(step / scale, decimals) - step / scale) > 1e-9 * step / scale:
        decimals += 1
    return f"{t_ns / scale:,.{decimals}f} {unit}"


def pixel_runs(x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Snap spans (sorted by x0) to whole pixels, at least one wide, and merge the ones that touch.

    Thousands of sub-pixel events become at most one rectangle per pixel column, which the raster
    engine fills far faster than as many separate (or path) rectangles.
    """
    a = np.floor(x0).astype(np.int64)
    b = np.maximum(np.ceil(x1).astype(np.int64), a + 1)
    if not len(a):
        return a, b
    run = np.maximum.accumulate(b)
    new = np.ones(len(a), dtype=bool)
    new[1:] = a[1:] > run[:-1]
    idx = np.flatnonzero(new)
    return a[idx], np.maximum.reduceat(b, idx)


def rect_list(x0: np.ndarray, x1: np.ndarray, y0: np.ndarray | int, h: np.ndarray | int) -> list[QRect]:
    """QRects from integer arrays (y0 and h may be scalars)."""
    n = len(x0)
    ys = np.broadcast_to(np.asarray(y0, dtype=np.int64), (n,)).tolist()
    hs = np.broadcast_to(np.asarray(h, dtype=np.int64), (n,)).tolist()
    return [QRect(a, y, b - a, hh) for a, b, y, hh in zip(x0.tolist(), x1.tolist(), ys, hs, strict=True)]


class TimelineCanvas(QWidget):
    """Paints the lanes of a :class:`gui.timeline.model.TimelineModel` for the visible range."""

    sig_range_changed = Signal(float, float)
    sig_event_clicked = Signal(object)  # event dict (model.event), or None when empty space
    sig_painted = Signal(float)  # ms the last paint took

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(400, 160)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self.model: tm.TimelineModel | None = None
        self.t0 = 0.0
        self.t1 = 1.0
        self.v_offset = 0
        self.hover: tuple[int, int] | None = None  # (lane index, event index)
        self.selected: tuple[int, int] | None = None
        self.hover_text = ""
        self._press: QPointF | None = None
        self._last_pos: QPointF | None = None
        self._press_range: tuple[float, float] = (0.0, 1.0)
        self._band: tuple[float, float] | None = None  # box zoom, in px
        self._dragging = False
        #: per lane key: "detail" or "coverage" and the events in view, from the last paint
        self.draw_stats: dict[str, tuple[str, int]] = {}
        #: per lane key and kind: the coverage fractions drawn in the last paint
        self.last_coverage: dict[tuple[str, int], np.ndarray] = {}
        self.last_paint_ms = 0.0
        #: drawn while there is nothing to show (set_message)
        self.message = ""
        self._fit_range = (0.0, 0.0)  # the range fit() showed last
        #: the step ruler: (starts, ends, state) of the steps (0 steady, 1 warm-up, 2 outlier), or None
        self.steps: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.detail_max = DETAIL_MAX
        #: lane key -> the events [lo, hi) drawn one by one in the last frame
        self._detail: dict[str, tuple[int, int]] = {}
        self.paint_count = 0
        self._brushes = {i: QBrush(QColor(c)) for i, c in enumerate(PALETTE)}
        self._kind_brushes = {k: QBrush(QColor(c)) for k, c in KIND_COLORS.items()}
        self._pale_brushes = {k: QBrush(_alpha(c, 70)) for k, c in KIND_COLORS.items()}
        self._metric_brush = QBrush(QColor("#3b8ea5"))
        self._font = QFont(self.font())
        self._small = QFont(self.font())
        self._small.setPointSizeF(max(self.font().pointSizeF() - 1.5, 7.5))
        self.vbar = QScrollBar(Qt.Orientation.Vertical, self)
        self.vbar.valueChanged.connect(self._on_vscroll)
        self.vbar.hide()

    # -- model and range -----------------------------------------------------------------------------
    def set_model(self, model: tm.TimelineModel | None, keep_range: bool = False) -> None:
        """Show ``model``; with ``keep_range`` (more lanes of the same report) the visible range stays."""
        keep = model is not None and keep_range
        self.message = ""
        self.model = model
        self.hover = self.selected = None
        self.draw_stats.clear()
        self.last_coverage.clear()
        if not keep:
            self.v_offset = 0
        if model is not None:
            if keep and (self.t0, self.t1) != self._fit_range:  # the user zoomed or panned: keep it
                t0, t1 = self.t0, self.t1
                self.t0 = self.t1 = 0.0  # set_range clamps to the model and announces the range
                self.set_range(t0, t1)
            else:
                self.fit()
        self._update_vbar()
        self.update()

    def set_steps(self, starts: np.ndarray | None, ends: np.ndarray | None = None,
                  state: np.ndarray | None = None) -> None:
        """Draw these steps as a ruler under the time axis and as faint lines across the lanes."""
        if starts is None or ends is None or not len(starts):
            self.steps = None
        else:
            st = np.zeros(len(starts), dtype=np.int8) if state is None else np.asarray(state, dtype=np.int8)
            self.steps = (np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64), st)
        self.update()

    def show_steady_steps(self, n: int = 3) -> bool:
        """Zoom to the first ``n`` steady steps (after the warm-up); False without steps."""
        if self.steps is None:
            return False
        s, e, state = self.steps
        steady = np.flatnonzero(state != 1)
        if not len(steady):
            return False
        i0 = int(steady[0])
        i1 = int(steady[min(n, len(steady)) - 1])
        a, b = float(s[i0]), float(e[i1])
        pad = (b - a) * 0.02
        self.set_range(a - pad, b + pad)
        return True

    def _paint_steps(self, p: QPainter, w: int) -> None:
        """The step ruler: a band under the axis per step (steady in two blues, warm-up grey, outliers
        red), "step k" where it fits, and a faint line across the lanes at each step's start."""
        if self.steps is None:
            return
        s, e, state = self.steps
        lo = int(np.searchsorted(e, self.t0, side="left"))
        hi = int(np.searchsorted(s, self.t1, side="right"))
        if hi - lo > 2000:  # too many to draw one by one: the band only
            p.fillRect(QRectF(GUTTER, AXIS_H - 14, w, 13), QColor("#9db8d9"))
            return
        fm = QFontMetrics(self._small)
        p.setFont(self._small)
        colors = {0: (QColor("#7fa3cf"), QColor("#b5cbe6")), 1: (QColor("#b8bec6"),) * 2,
                  2: (QColor("#d9534f"),) * 2}
        line = QPen(QColor(47, 111, 186, 60), 1, Qt.PenStyle.DashLine)
        for i in range(lo, hi):
            x0 = max(self.x_at(float(s[i])), GUTTER)
            x1 = min(self.x_at(float(e[i])), GUTTER + w)
            if x1 <= x0:
                continue
            p.fillRect(QRectF(x0, AXIS_H - 14, max(x1 - x0 - 1, 1), 13), colors[int(state[i])][i % 2])
            if hi - lo <= 200:
                p.setPen(line)
                p.drawLine(QPointF(x0, AXIS_H), QPointF(x0, self.height()))
            label = {1: f"warm-up {i}", 2: f"step {i} (outlier)"}.get(int(state[i]), f"step {i}")
            if x1 - x0 > fm.horizontalAdvance(label) + 8 and hi - lo <= 200:
                p.setPen(QColor("#ffffff") if int(state[i]) == 2 else QColor("#1d2b3a"))
                p.drawText(QRectF(x0 + 3, AXIS_H - 14, x1 - x0 - 4, 13), Qt.AlignmentFlag.AlignVCenter, label)
        p.setFont(self._font)

    def set_message(self, text: str) -> None:
        """A sentence drawn in the middle of the empty canvas (what is being read) until a model."""
        self.message = text
        self.update()

    def _source(self) -> tm.TimelineModel | None:
        return self.model

    def lanes(self) -> list[Any]:
        """The lanes drawn (the model's)."""
        src = self._source()
        return list(src.lanes) if src is not None else []

    def fit(self) -> None:
        """Show all CUDA and NVTX activity (with a small margin); zoom out for the metrics around it."""
        src = self._source()
        if src is None:
            return
        a, b = src.activity_min, src.activity_max
        pad = (b - a) * 0.01
        self.set_range(a - pad, b + pad)
        self._fit_range = (self.t0, self.t1)

    def visible_range(self) -> tuple[float, float]:
        return self.t0, self.t1

    def set_range(self, t0: float, t1: float) -> None:
        """Show [t0, t1] ns (clamped to a little beyond the capture, at least 50 ns wide)."""
        if t1 < t0:
            t0, t1 = t1, t0
        if t1 - t0 < MIN_SPAN_NS:
            mid = (t0 + t1) / 2
            t0, t1 = mid - MIN_SPAN_NS / 2, mid + MIN_SPAN_NS / 2
        src = self._source()
        if src is not None:
            full = src.t_max - src.t_min
            lo, hi = src.t_min - full * 0.05, src.t_max + full * 0.05
            span = min(t1 - t0, hi - lo)
            t0 = min(max(t0, lo), hi - span)
            t1 = t0 + span
        if (t0, t1) != (self.t0, self.t1):
            self.t0, self.t1 = float(t0), float(t1)
            self.sig_range_changed.emit(self.t0, self.t1)
            if self._last_pos is not None and self._press is None:
                self._update_hover(self._last_pos)  # the event under a still pointer changed
            self.update()

    def zoom(self, factor: float, at_t: float | None = None) -> None:
        """Zoom in (factor > 1) or out (< 1) keeping time ``at_t`` (default: the centre) in place."""
        t0, t1 = self.t0, self.t1
        c = (t0 + t1) / 2 if at_t is None else at_t
        self.set_range(c - (c - t0) / factor, c + (t1 - c) / factor)

    def pan(self, fraction: float) -> None:
        """Move the view by ``fraction`` of its width (positive: later in time)."""
        d = (self.t1 - self.t0) * fraction
        self.set_range(self.t0 + d, self.t1 + d)

    # -- geometry ----------------------------------------------------------------------------------------
    def plot_width(self) -> int:
        return max(self.width() - GUTTER - (self.vbar.width() if self.vbar.isVisible() else 0), 10)

    def t_at(self, x: float) -> float:
        return self.t0 + (x - GUTTER) / self.plot_width() * (self.t1 - self.t0)

    def x_at(self, t: float) -> float:
        return GUTTER + (t - self.t0) / (self.t1 - self.t0) * self.plot_width()

    def lane_height(self, lane: tm.Lane) -> int:
        return METRIC_H if lane.is_metric else LANE_H

    def lane_tops(self) -> list[int]:
        """Top y of each lane in content coordinates (before scrolling)."""
        tops, y = [], AXIS_H + LANE_GAP
        prev = None
        for ln in self.lanes():
            if prev is not None and ln.group != prev:
                y += 8  # a little air between groups
            tops.append(y)
            y += self.lane_height(ln) + LANE_GAP
            prev = ln.group
        self._content_h = y
        return tops

    def lane_at(self, y: float) -> int | None:
        lanes = self.lanes()
        if not lanes or y < AXIS_H or y >= self.height():
            return None
        for i, top in enumerate(self.lane_tops()):
            ln = lanes[i]
            top -= self.v_offset
            if top <= y < top + self.lane_height(ln):
                return i
        return None

    def event_at(self, x: float, y: float) -> tuple[int, int] | None:
        """(lane index, event index) under the pointer, or None."""
        if self.model is None:
            return None
        i = self.lane_at(y)
        if i is None or x < GUTTER:
            return None
        ln = self.model.lanes[i]
        t = self.t_at(x)
        if ln.is_metric:
            j = ln.sample_at(t)
        else:
            j = ln.event_at(t, tol=2.0 * (self.t1 - self.t0) / self.plot_width())
        return None if j is None else (i, j)

    def _update_vbar(self) -> None:
        self.lane_tops()
        h = getattr(self, "_content_h", 0)
        over = h - self.height()
        if over > 0:
            self.vbar.setRange(0, over)
            self.vbar.setPageStep(self.height())
            self.vbar.setSingleStep(LANE_H)
            self.vbar.setGeometry(self.width() - 14, AXIS_H, 14, self.height() - AXIS_H)
            self.vbar.show()
        else:
            self.vbar.hide()
            self.vbar.setValue(0)
            self.v_offset = 0

    def _on_vscroll(self, v: int) -> None:
        self.v_offset = v
        self.update()

    # -- painting ----------------------------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        t_start = time.perf_counter()
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("#ffffff"))
        lanes = self.lanes()
        if self._source() is None:
            if self.message:
                p.setPen(QColor("#5f6b7a"))
                p.drawText(self.rect().adjusted(20, 0, -20, 0),
                           Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.message)
            p.end()
            return
        p.setFont(self._font)
        w = self.plot_width()
        tops = self.lane_tops()
        stats: dict[str, tuple[str, int]] = {}
        self.last_coverage.clear()
        self._detail.clear()
        fm = QFontMetrics(self._small)
        # lanes
        for i, ln in enumerate(lanes):
            top = tops[i] - self.v_offset
            h = self.lane_height(ln)
            if top + h < AXIS_H or top > self.height():
                continue
            tint = QColor(GROUP_TINT.get(ln.group, "#f4f6f8"))
            p.fillRect(QRectF(GUTTER, top, w, h), tint)
            p.save()
            p.setClipRect(QRectF(GUTTER, max(top, AXIS_H), w, h))
            if ln.is_metric:
                self._paint_metric(p, ln, top, h, w)
                stats[ln.key] = ("coverage", 0)
            else:
                stats[ln.key] = self._paint_intervals(p, ln, top, h, w, fm)
            self._paint_marks(p, i, ln, top, h)
            p.restore()
        # gutter labels (drawn over anything that spilled left)
        p.fillRect(QRectF(0, AXIS_H, GUTTER - 1, self.height() - AXIS_H), QColor("#fafbfc"))
        p.setPen(QColor("#dde3ea"))
        p.drawLine(GUTTER - 1, AXIS_H, GUTTER - 1, self.height())
        fm_big = QFontMetrics(self._font)
        for i, ln in enumerate(lanes):
            top = tops[i] - self.v_offset
            h = self.lane_height(ln)
            if top + h < AXIS_H or top > self.height():
                continue
            p.fillRect(QRectF(6, top + 4, 4, h - 8), QColor(_GROUP_SWATCH.get(ln.group, "#888")))
            p.setPen(QColor("#2c3e50"))
            if ln.sublabel:
                p.setFont(self._small)
                text = fm.elidedText(ln.label, Qt.TextElideMode.ElideRight, GUTTER - 22)
                p.drawText(QRectF(16, top + 1, GUTTER - 20, h / 2), Qt.AlignmentFlag.AlignVCenter, text)
                p.setPen(QColor("#5f6b7a"))
                text = fm.elidedText(ln.sublabel, Qt.TextElideMode.ElideRight, GUTTER - 22)
                p.drawText(QRectF(16, top + h / 2 - 1, GUTTER - 20, h / 2), Qt.AlignmentFlag.AlignVCenter,
                           text)
                p.setFont(self._font)
            else:
                text = fm_big.elidedText(ln.label, Qt.TextElideMode.ElideMiddle, GUTTER - 22)
                p.drawText(QRectF(16, top, GUTTER - 20, h), Qt.AlignmentFlag.AlignVCenter, text)
        self._paint_axis(p, w)
        self._paint_steps(p, w)
        if self._band is not None:
            a, b = sorted(self._band)
            p.fillRect(QRectF(a, AXIS_H, b - a, self.height() - AXIS_H), QColor(47, 111, 186, 50))
            p.setPen(QPen(QColor("#2f6fba"), 1))
            p.drawLine(QPointF(a, AXIS_H), QPointF(a, self.height()))
            p.drawLine(QPointF(b, AXIS_H), QPointF(b, self.height()))
        p.end()
        self._release_pages(lanes, stats)
        self.draw_stats = stats
        self.paint_count += 1
        self.last_paint_ms = (time.perf_counter() - t_start) * 1e3
        self.sig_painted.emit(self.last_paint_ms)

    def _release_pages(self, lanes: list[Any], stats: dict[str, tuple[str, int]]) -> None:
        """Hand back the pages of big lanes' mapped arrays this frame does not need again: all of
        them for a lane drawn as coverage or not shown, all but the events drawn one by one."""
        for ln in lanes:
            if len(ln) < sparse.MIN_EVENTS or ln.is_metric:
                continue
            ln.release_pages(*self._detail.get(ln.key, (0, 0)))

    def _paint_axis(self, p: QPainter, w: int) -> None:
        p.fillRect(QRectF(0, 0, self.width(), AXIS_H), QColor("#f5f7fa"))
        p.setPen(QColor("#dde3ea"))
        p.drawLine(0, AXIS_H - 1, self.width(), AXIS_H - 1)
        base = 0.0  # times are since the start of the capture, as in the tables and the details
        span = self.t1 - self.t0
        step = nice_step(span, max(w // 120, 2))
        first = math.ceil((self.t0 - base) / step) * step
        p.setFont(self._small)
        fm = QFontMetrics(self._small)
        grid = QPen(QColor(0, 0, 0, 22), 1)
        text_pen = QPen(QColor("#2c3e50"))
        n = 0
        t = first
        while t <= self.t1 - base and n < 200:
            x = self.x_at(base + t)
            if x >= GUTTER:
                p.setPen(grid)
                p.drawLine(QPointF(x, AXIS_H), QPointF(x, self.height()))
                p.setPen(text_pen)
                p.drawLine(QPointF(x, AXIS_H - 6), QPointF(x, AXIS_H - 1))
                label = tick_label(t, step)
                if x + 3 + fm.horizontalAdvance(label) <= GUTTER + w:
                    # with a step ruler the ticks' labels keep to the top half of the axis
                    rect = (QRectF(x + 3, 1, 160, 13) if self.steps is not None
                            else QRectF(x + 3, 2, 160, AXIS_H - 6))
                    p.drawText(rect, Qt.AlignmentFlag.AlignVCenter, label)
            t += step
            n += 1
        p.setPen(QColor("#5f6b7a"))
        p.drawText(QRectF(8, 2, GUTTER - 12, AXIS_H - 4), Qt.AlignmentFlag.AlignVCenter,
                   "Time since capture start")  # the shown span is in the view's header
        p.setFont(self._font)

    def _paint_intervals(self, p: QPainter, ln: tm.Lane, top: float, h: float, w: int,
                         fm: QFontMetrics) -> tuple[str, int]:
        assert self.model is not None
        lo, hi = ln.visible_slice(self.t0, self.t1)
        n = hi - lo
        if n == 0:
            return ("detail", 0)
        scale = w / (self.t1 - self.t0)
        if n <= self.detail_max:
            self._detail[ln.key] = (lo, hi)
            s = ln.starts[lo:hi]
            e = ln.ends[lo:hi]
            x0 = GUTTER + (s - self.t0) * scale
            x1 = GUTTER + (e - self.t0) * scale
            x0 = np.maximum(x0, GUTTER - 2.0)
            x1 = np.minimum(x1, GUTTER + w + 2.0)
            widths = np.maximum(x1 - x0, 1.0)
            inside = (x1 >= GUTTER - 1) & (x0 <= GUTTER + w + 1)
            colors = self.model.name_colors[ln.names[lo:hi]]
            y0, hh = top + 2, h - 4
            p.setPen(Qt.PenStyle.NoPen)
            for c in np.unique(colors[inside]).tolist():
                sel = np.flatnonzero(inside & (colors == c))
                ra, rb = pixel_runs(x0[sel], x0[sel] + widths[sel])
                p.setBrush(self._brushes[c])
                p.drawRects(rect_list(ra, rb, int(y0), int(hh)))
            wide = np.flatnonzero(inside & (widths >= LABEL_MIN_PX))
            if len(wide):
                p.setFont(self._small)
                p.setPen(QColor("#ffffff"))
                for k in wide[:400].tolist():
                    name = str(self.model.names[ln.names[lo + k]])
                    vis0 = max(float(x0[k]), GUTTER)
                    vis1 = min(float(x0[k] + widths[k]), GUTTER + w)
                    if vis1 - vis0 < LABEL_MIN_PX:
                        continue
                    text = fm.elidedText(name, Qt.TextElideMode.ElideRight, int(vis1 - vis0 - 6))
                    p.drawText(QRectF(vis0 + 3, y0, vis1 - vis0 - 6, hh), Qt.AlignmentFlag.AlignVCenter, text)
                p.setFont(self._font)
            return ("detail", n)
        # aggregated: the busy fraction of each pixel column as a bar, per kind
        n_bins = int(w)
        kinds = [k for k in ln.union if k >= 0]
        base_y = int(top + h - 1)
        p.setPen(Qt.PenStyle.NoPen)
        for k in kinds:
            self.last_coverage[(ln.key, k)] = tm.coverage(ln.union[k], self.t0, self.t1, n_bins,
                                                          COVERAGE_TOL)
        # a pale full-height band where a kind has any event, then every kind's busy fraction solid
        # on the bands (a band drawn after another kind's bar would veil it: 21k copies hid the
        # bars of 10M kernels)
        for k in kinds:
            cov = self.last_coverage[(ln.key, k)]
            p.setBrush(self._pale_brushes[k])
            p.drawRects(self._bars(np.where(cov > 0, h - 3, 0).astype(np.int64), base_y))
        for k in sorted(kinds, key=lambda k: -float(self.last_coverage[(ln.key, k)].sum())):
            cov = self.last_coverage[(ln.key, k)]  # the busiest kind first, the rarer ones on top
            height = np.where(cov > 0, np.maximum(np.rint(cov * (h - 3)), 2), 0).astype(np.int64)
            p.setBrush(self._kind_brushes[k])
            p.drawRects(self._bars(height, base_y))
        return ("coverage", n)

    @staticmethod
    def _bars(height: np.ndarray, base_y: int) -> list[QRect]:
        """One rectangle per run of pixel columns with the same non-zero bar height."""
        if not len(height):
            return []
        change = np.flatnonzero(np.diff(height)) + 1
        starts = np.concatenate(([0], change))
        ends = np.concatenate((change, [len(height)]))
        hs = height[starts]
        keep = hs > 0
        starts, ends, hs = starts[keep] + GUTTER, ends[keep] + GUTTER, hs[keep]
        return rect_list(starts, ends, base_y - hs, hs)

    def _paint_metric(self, p: QPainter, ln: tm.Lane, top: float, h: float, w: int) -> None:
        n_bins = int(w)
        mx = tm.metric_envelope(ln, self.t0, self.t1, n_bins)
        self.last_coverage[(ln.key, -2)] = mx
        frac = np.nan_to_num(np.clip(mx / ln.value_max, 0.0, 1.0))
        height = np.rint(frac * (h - 3)).astype(np.int64)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(self._metric_brush)
        p.drawRects(self._bars(height, int(top + h - 1)))

    def _paint_marks(self, p: QPainter, i: int, ln: tm.Lane, top: float, h: float) -> None:
        for sel, color in ((self.selected, "#111111"), (self.hover, "#f39c12")):
            if sel is None or sel[0] != i or ln.is_metric:
                continue
            j = sel[1]
            x0 = self.x_at(float(ln.starts[j]))
            x1 = max(self.x_at(float(ln.ends[j])), x0 + 1)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.setPen(QPen(QColor(color), 2))
            p.drawRect(QRectF(x0 - 1, top + 1, x1 - x0 + 2, h - 2))

    # -- events ------------------------------------------------------------------------------------------
    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._update_vbar()

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt override
        if self._source() is None:
            return
        d = event.angleDelta()
        x = event.position().x()
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier and self.vbar.isVisible():
            self.vbar.setValue(self.vbar.value() - d.y() // 2)
        elif d.x() != 0 or event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            delta = d.x() if d.x() != 0 else d.y()
            self.pan(-delta / 120 * 0.1)
        elif d.y() != 0:
            at = self.t_at(x) if x >= GUTTER else None
            self.zoom(1.25 ** (d.y() / 120), at)
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        self._press = event.position()
        self._press_range = (self.t0, self.t1)
        self._dragging = False
        event.accept()

    def _box_mode(self, event: QMouseEvent) -> bool:
        return bool(event.buttons() & Qt.MouseButton.RightButton
                    or event.modifiers() & Qt.KeyboardModifier.ShiftModifier)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        pos = event.position()
        if self._press is not None and event.buttons():
            dx = pos.x() - self._press.x()
            if abs(dx) > 3:
                self._dragging = True
            if self._dragging:
                if self._box_mode(event):
                    self._band = (max(self._press.x(), GUTTER), max(pos.x(), GUTTER))
                    self.update()
                else:
                    t0, t1 = self._press_range
                    dt = dx / self.plot_width() * (t1 - t0)
                    self.set_range(t0 - dt, t1 - dt)
            return
        self._last_pos = QPointF(pos)
        self._update_hover(pos)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        pos = event.position()
        if self._band is not None:
            a, b = sorted(self._band)
            self._band = None
            if b - a > 3:
                self.set_range(self.t_at(a), self.t_at(b))
            self.update()
        elif not self._dragging and event.button() == Qt.MouseButton.LeftButton:
            self.click_at(pos.x(), pos.y())
        self._press = None
        self._dragging = False
        event.accept()

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if self.event_at(event.position().x(), event.position().y()) is None:
            self.fit()
        event.accept()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        k = event.key()
        if k in (Qt.Key.Key_Home, Qt.Key.Key_0):
            self.fit()
        elif k in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom(1.5)
        elif k == Qt.Key.Key_Minus:
            self.zoom(1 / 1.5)
        elif k == Qt.Key.Key_Left:
            self.pan(-0.1)
        elif k == Qt.Key.Key_Right:
            self.pan(0.1)
        else:
            super().keyPressEvent(event)

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip:
            # Qt asks after the pointer rested: show the hovered event's facts.
            if self.hover_text and QGuiApplication.platformName() != "offscreen":
                QToolTip.showText(e.globalPos(), self.hover_text, self)  # type: ignore[attr-defined]
            else:
                QToolTip.hideText()
                e.ignore()
            return True
        return super().event(e)

    def leaveEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        self._last_pos = None
        self.hover_text = ""
        if self.hover is not None:
            self.hover = None
            self.update()
        super().leaveEvent(event)

    def click_at(self, x: float, y: float) -> dict[str, Any] | None:
        """Select the event at (x, y) and emit it (None when there is none)."""
        hit = self.event_at(x, y)
        self.selected = hit
        self.update()
        rec = None
        if hit is not None and self.model is not None:
            rec = self.model.event(self.model.lanes[hit[0]], hit[1])
        self.sig_event_clicked.emit(rec)
        return rec

    def _update_hover(self, pos: QPointF) -> None:
        hit = self.event_at(pos.x(), pos.y())
        if hit != self.hover:
            self.hover = hit
            self.update()
        if hit is None or self.model is None:
            self.hover_text = ""
            if QToolTip.isVisible():
                QToolTip.hideText()
            return
        rec = self.model.event(self.model.lanes[hit[0]], hit[1])
        text = tooltip_text(rec)
        if text != self.hover_text and QToolTip.isVisible() and QGuiApplication.platformName() != "offscreen":
            QToolTip.showText(self.mapToGlobal(pos.toPoint()), text, self)  # follow the pointer
        self.hover_text = text


def _alpha(color: str, a: int) -> QColor:
    c = QColor(color)
    c.setAlpha(a)
    return c


_GROUP_SWATCH = {"api": "#8e5cb5", "gpu": "#3a7bd5", "nvtx": "#e8871e", "metric": "#3b8ea5"}
