"""Painting the timeline canvas: the axis, the step ruler, each lane's events or busy fraction, the
lanes' labels, and the selection marks (:class:`gui.widgets.timeline_canvas.TimelineCanvas` calls
these from its ``paintEvent`` with its painter and its current range).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
from PySide6.QtCore import QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QPainter, QPen

from engine.system.arrays import distinct
from gui.timeline import model as tm


class TimelineCanvas(Protocol):
    """What painting reads of :class:`gui.widgets.timeline_canvas.TimelineCanvas` (it imports this module)."""

    model: tm.TimelineModel | None
    t0: float
    t1: float
    v_offset: int
    hover: tuple[int, int] | None
    selected: tuple[int, int] | None
    last_coverage: dict[tuple[str, int], np.ndarray]
    steps: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    detail_max: int
    detail_slices: dict[str, tuple[int, int]]
    brushes: dict[int, QBrush]
    kind_brushes: dict[int, QBrush]
    pale_brushes: dict[int, QBrush]
    metric_brush: QBrush
    label_font: QFont
    small_font: QFont

    def x_at(self, t: float) -> float:
        """The x pixel of time ``t``."""

    def lane_height(self, lane: tm.Lane) -> int:
        """A lane's height in pixels."""

    def width(self) -> int:
        """The widget's width."""

    def height(self) -> int:
        """The widget's height."""

GUTTER = 260  # px for lane labels
AXIS_H = 28
#: coverage of a big lane may interpolate inside blocks of events narrower than this fraction of
#: a pixel column (gui.timeline.sparse): under a pixel of a bar, no mapped pages read at overview
COVERAGE_TOL = 1 / 64
LABEL_MIN_PX = 46
GROUP_SWATCH = {"api": "#8e5cb5", "gpu": "#3a7bd5", "nvtx": "#e8871e", "metric": "#3b8ea5"}


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


def bars(height: np.ndarray, base_y: int, below: np.ndarray | None = None) -> list[QRect]:
    """One rectangle per run of pixel columns with the same non-zero bar height (and, stacked on
    other bars, the same height ``below`` it)."""
    if not len(height):
        return []
    change = np.diff(height) != 0
    if below is not None:
        change |= np.diff(below) != 0
    cut = np.flatnonzero(change) + 1
    starts = np.concatenate(([0], cut))
    ends = np.concatenate((cut, [len(height)]))
    hs = height[starts]
    under = np.zeros(len(starts), dtype=np.int64) if below is None else below[starts]
    keep = hs > 0
    starts, ends, hs, under = starts[keep] + GUTTER, ends[keep] + GUTTER, hs[keep], under[keep]
    return rect_list(starts, ends, base_y - under - hs, hs)


def paint_axis(c: TimelineCanvas, p: QPainter, w: int) -> None:
    """The time axis: ticks, their labels and the grid lines across the lanes."""
    p.fillRect(QRectF(0, 0, c.width(), AXIS_H), QColor("#f5f7fa"))
    p.setPen(QColor("#dde3ea"))
    p.drawLine(0, AXIS_H - 1, c.width(), AXIS_H - 1)
    base = 0.0  # times are since the start of the capture, as in the tables and the details
    span = c.t1 - c.t0
    step = nice_step(span, max(w // 120, 2))
    first = math.ceil((c.t0 - base) / step) * step
    p.setFont(c.small_font)
    fm = QFontMetrics(c.small_font)
    grid = QPen(QColor(0, 0, 0, 22), 1)
    text_pen = QPen(QColor("#2c3e50"))
    n = 0
    t = first
    while t <= c.t1 - base and n < 200:
        x = c.x_at(base + t)
        if x >= GUTTER:
            p.setPen(grid)
            p.drawLine(QPointF(x, AXIS_H), QPointF(x, c.height()))
            p.setPen(text_pen)
            p.drawLine(QPointF(x, AXIS_H - 6), QPointF(x, AXIS_H - 1))
            label = tick_label(t, step)
            if x + 3 + fm.horizontalAdvance(label) <= GUTTER + w:
                # with a step ruler the ticks' labels keep to the top half of the axis
                rect = (QRectF(x + 3, 1, 160, 13) if c.steps is not None
                        else QRectF(x + 3, 2, 160, AXIS_H - 6))
                p.drawText(rect, Qt.AlignmentFlag.AlignVCenter, label)
        t += step
        n += 1
    p.setPen(QColor("#5f6b7a"))
    p.drawText(QRectF(8, 2, GUTTER - 12, AXIS_H - 4), Qt.AlignmentFlag.AlignVCenter,
               "Time since capture start")  # the shown span is in the view's header
    p.setFont(c.label_font)


def paint_steps(c: TimelineCanvas, p: QPainter, w: int) -> None:
    """The step ruler: a band under the axis per step, labelled where it fits.

    Steady steps are in two blues, warm-up grey, outliers red; a faint line crosses the lanes at each
    step's start.
    """
    if c.steps is None:
        return
    s, e, state = c.steps
    lo = int(np.searchsorted(e, c.t0, side="left"))
    hi = int(np.searchsorted(s, c.t1, side="right"))
    if hi - lo > 2000:  # too many to draw one by one: the band only
        p.fillRect(QRectF(GUTTER, AXIS_H - 14, w, 13), QColor("#9db8d9"))
        return
    fm = QFontMetrics(c.small_font)
    p.setFont(c.small_font)
    colors = {0: (QColor("#7fa3cf"), QColor("#b5cbe6")), 1: (QColor("#b8bec6"),) * 2,
              2: (QColor("#d9534f"),) * 2}
    line = QPen(QColor(47, 111, 186, 60), 1, Qt.PenStyle.DashLine)
    for i in range(lo, hi):
        x0 = max(c.x_at(float(s[i])), GUTTER)
        x1 = min(c.x_at(float(e[i])), GUTTER + w)
        if x1 <= x0:
            continue
        p.fillRect(QRectF(x0, AXIS_H - 14, max(x1 - x0 - 1, 1), 13), colors[int(state[i])][i % 2])
        if hi - lo <= 200:
            p.setPen(line)
            p.drawLine(QPointF(x0, AXIS_H), QPointF(x0, c.height()))
        label = {1: f"warm-up {i}", 2: f"step {i} (outlier)"}.get(int(state[i]), f"step {i}")
        if x1 - x0 > fm.horizontalAdvance(label) + 8 and hi - lo <= 200:
            p.setPen(QColor("#ffffff") if int(state[i]) == 2 else QColor("#1d2b3a"))
            p.drawText(QRectF(x0 + 3, AXIS_H - 14, x1 - x0 - 4, 13), Qt.AlignmentFlag.AlignVCenter, label)
    p.setFont(c.label_font)


def paint_intervals(c: TimelineCanvas, p: QPainter, ln: tm.Lane, top: float, h: float, w: int,
                    fm: QFontMetrics) -> tuple[str, int]:
    """One lane's events; returns (how it was drawn, events in view).

    Rectangles (labelled where wide enough) when few are in view, else the busy fraction of each
    pixel column per event kind.
    """
    assert c.model is not None
    lo, hi = ln.visible_slice(c.t0, c.t1)
    n = hi - lo
    if n == 0:
        return ("detail", 0)
    scale = w / (c.t1 - c.t0)
    if n <= c.detail_max and not ln.coarse:  # (a lane not merged yet: coverage, exact)
        c.detail_slices[ln.key] = (lo, hi)
        s = ln.starts[lo:hi]
        e = ln.ends[lo:hi]
        x0 = GUTTER + (s - c.t0) * scale
        x1 = GUTTER + (e - c.t0) * scale
        x0 = np.maximum(x0, GUTTER - 2.0)
        x1 = np.minimum(x1, GUTTER + w + 2.0)
        widths = np.maximum(x1 - x0, 1.0)
        inside = (x1 >= GUTTER - 1) & (x0 <= GUTTER + w + 1)
        colors = c.model.name_colors[ln.names[lo:hi]]
        y0, hh = top + 2, h - 4
        p.setPen(Qt.PenStyle.NoPen)
        for color in distinct(colors[inside]).tolist():
            sel = np.flatnonzero(inside & (colors == color))
            ra, rb = pixel_runs(x0[sel], x0[sel] + widths[sel])
            p.setBrush(c.brushes[color])
            p.drawRects(rect_list(ra, rb, int(y0), int(hh)))
        wide = np.flatnonzero(inside & (widths >= LABEL_MIN_PX))
        if len(wide):
            p.setFont(c.small_font)
            p.setPen(QColor("#ffffff"))
            for k in wide[:400].tolist():
                name = str(c.model.names[ln.names[lo + k]])
                vis0 = max(float(x0[k]), GUTTER)
                vis1 = min(float(x0[k] + widths[k]), GUTTER + w)
                if vis1 - vis0 < LABEL_MIN_PX:
                    continue
                text = fm.elidedText(name, Qt.TextElideMode.ElideRight, int(vis1 - vis0 - 6))
                p.drawText(QRectF(vis0 + 3, y0, vis1 - vis0 - 6, hh), Qt.AlignmentFlag.AlignVCenter, text)
            p.setFont(c.label_font)
        return ("detail", n)
    # aggregated: the busy fraction of each pixel column as a bar, per kind
    n_bins = int(w)
    kinds = [k for k in ln.union if k >= 0]
    base_y = int(top + h - 1)
    p.setPen(Qt.PenStyle.NoPen)
    for k in kinds:
        c.last_coverage[(ln.key, k)] = tm.coverage(ln.union[k], c.t0, c.t1, n_bins,
                                                      COVERAGE_TOL)
    # a pale full-height band where a kind has any event, then every kind's busy fraction solid
    # on the bands (a band drawn after another kind's bar would veil it: 21k copies hid the
    # bars of 10M kernels), stacked: the busiest kind at the bottom, each at least 2 pixels
    # where it has events (drawn over each other, big10m's 5M memsets hid its 10M kernels)
    for k in kinds:
        cov = c.last_coverage[(ln.key, k)]
        p.setBrush(c.pale_brushes[k])
        p.drawRects(bars(np.where(cov > 0, h - 3, 0).astype(np.int64), base_y))
    room = int(h - 3)
    below = np.zeros(n_bins, dtype=np.int64)
    for k in sorted(kinds, key=lambda k: -float(c.last_coverage[(ln.key, k)].sum())):
        cov = c.last_coverage[(ln.key, k)]
        height = np.where(cov > 0, np.maximum(np.rint(cov * room), 2), 0).astype(np.int64)
        height = np.minimum(height, np.maximum(room - below, 0))  # (never above the lane)
        p.setBrush(c.kind_brushes[k])
        p.drawRects(bars(height, base_y, below))
        below += height
    return ("coverage", n)


def paint_metric(c: TimelineCanvas, p: QPainter, ln: tm.Lane, top: float, h: float, w: int) -> None:
    """A metric lane: the per-column maximum of its samples as bars."""
    n_bins = int(w)
    mx = tm.metric_envelope(ln, c.t0, c.t1, n_bins)
    c.last_coverage[(ln.key, -2)] = mx
    frac = np.nan_to_num(np.clip(mx / ln.value_max, 0.0, 1.0))
    height = np.rint(frac * (h - 3)).astype(np.int64)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(c.metric_brush)
    p.drawRects(bars(height, int(top + h - 1)))


def paint_marks(c: TimelineCanvas, p: QPainter, i: int, ln: tm.Lane, top: float, h: float) -> None:
    """Outline the selected and the hovered event of lane ``i``."""
    for sel, color in ((c.selected, "#111111"), (c.hover, "#f39c12")):
        if sel is None or sel[0] != i or ln.is_metric:
            continue
        j = sel[1]
        x0 = c.x_at(float(ln.starts[j]))
        x1 = max(c.x_at(float(ln.ends[j])), x0 + 1)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QPen(QColor(color), 2))
        p.drawRect(QRectF(x0 - 1, top + 1, x1 - x0 + 2, h - 2))


def paint_labels(c: TimelineCanvas, p: QPainter, lanes: list[Any], tops: list[int], fm: QFontMetrics) -> None:
    """The lanes' labels in the gutter (drawn over anything that spilled left)."""
    p.fillRect(QRectF(0, AXIS_H, GUTTER - 1, c.height() - AXIS_H), QColor("#fafbfc"))
    p.setPen(QColor("#dde3ea"))
    p.drawLine(GUTTER - 1, AXIS_H, GUTTER - 1, c.height())
    fm_big = QFontMetrics(c.label_font)
    for i, ln in enumerate(lanes):
        top = tops[i] - c.v_offset
        h = c.lane_height(ln)
        if top + h < AXIS_H or top > c.height():
            continue
        p.fillRect(QRectF(6, top + 4, 4, h - 8), QColor(GROUP_SWATCH.get(ln.group, "#888")))
        p.setPen(QColor("#2c3e50"))
        if ln.sublabel:
            p.setFont(c.small_font)
            text = fm.elidedText(ln.label, Qt.TextElideMode.ElideRight, GUTTER - 22)
            p.drawText(QRectF(16, top + 1, GUTTER - 20, h / 2), Qt.AlignmentFlag.AlignVCenter, text)
            p.setPen(QColor("#5f6b7a"))
            text = fm.elidedText(ln.sublabel, Qt.TextElideMode.ElideRight, GUTTER - 22)
            p.drawText(QRectF(16, top + h / 2 - 1, GUTTER - 20, h / 2), Qt.AlignmentFlag.AlignVCenter,
                       text)
            p.setFont(c.label_font)
        else:
            text = fm_big.elidedText(ln.label, Qt.TextElideMode.ElideMiddle, GUTTER - 22)
            p.drawText(QRectF(16, top, GUTTER - 20, h), Qt.AlignmentFlag.AlignVCenter, text)
