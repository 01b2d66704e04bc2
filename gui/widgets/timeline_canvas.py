"""The timeline canvas: one widget that paints every lane for the visible time range (its range,
lane geometry, mouse and keys here; the painting itself in :mod:`gui.widgets.timeline_paint`).

There is no item per event. Each paint asks the model which events of each lane fall in view:
when a lane has few, they are drawn as rectangles (labelled where wide enough); when it has many,
the lane's busy fraction per pixel column is drawn as one filled path per event kind. A frame
therefore costs about the same at any zoom level, on a 400,000-kernel report too.

Mouse: wheel zooms around the pointer, Shift+wheel (or a horizontal wheel) and left-drag pan,
right-drag (or Shift+left-drag) zooms to the dragged time range, click selects an event,
double-click shows everything. Keys: Home / 0 fit, + / - zoom, arrows pan.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
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
from gui.widgets.timeline_paint import (
    AXIS_H,
    GUTTER,
    paint_axis,
    paint_intervals,
    paint_labels,
    paint_marks,
    paint_metric,
    paint_steps,
)

LANE_H = 24
METRIC_H = 34
LANE_GAP = 4
#: a lane with at most this many events in view is drawn event by event
DETAIL_MAX = 2000
MIN_SPAN_NS = 50.0


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
        self.detail_slices: dict[str, tuple[int, int]] = {}
        self.paint_count = 0
        self.brushes = {i: QBrush(QColor(c)) for i, c in enumerate(PALETTE)}
        self.kind_brushes = {k: QBrush(QColor(c)) for k, c in KIND_COLORS.items()}
        self.pale_brushes = {k: QBrush(_alpha(c, 70)) for k, c in KIND_COLORS.items()}
        self.metric_brush = QBrush(QColor("#3b8ea5"))
        self.label_font = QFont(self.font())
        self.small_font = QFont(self.font())
        self.small_font.setPointSizeF(max(self.font().pointSizeF() - 1.5, 7.5))
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
        """Zoom to the first ``n`` steady steps in a row that are not outliers; False without steps.

        Where no ``n`` such steps follow each other, the first ``n`` steady ones (after the warm-up).
        """
        if self.steps is None:
            return False
        s, e, state = self.steps
        steady = np.flatnonzero(state != 1)
        if not len(steady):
            return False
        i0 = int(steady[0])
        i1 = int(steady[min(n, len(steady)) - 1])
        normal = (state == 0).astype(np.int64)
        if len(normal) >= n:
            run = np.convolve(normal, np.ones(n, dtype=np.int64), mode="valid")  # normal steps from each
            full = np.flatnonzero(run == n)
            if len(full):
                i0 = int(full[0])
                i1 = i0 + n - 1
        a, b = float(s[i0]), float(e[i1])
        pad = (b - a) * 0.02
        self.set_range(a - pad, b + pad)
        return True

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
        p.setFont(self.label_font)
        w = self.plot_width()
        tops = self.lane_tops()
        stats: dict[str, tuple[str, int]] = {}
        self.last_coverage.clear()
        self.detail_slices.clear()
        fm = QFontMetrics(self.small_font)
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
                paint_metric(self, p, ln, top, h, w)
                stats[ln.key] = ("coverage", 0)
            else:
                stats[ln.key] = paint_intervals(self, p, ln, top, h, w, fm)
            paint_marks(self, p, i, ln, top, h)
            p.restore()
        paint_labels(self, p, lanes, tops, fm)
        paint_axis(self, p, w)
        paint_steps(self, p, w)
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
            ln.release_pages(*self.detail_slices.get(ln.key, (0, 0)))

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

