"""Plot axes shared by the views: a log axis that labels decades with engineering units.

pyqtgraph's own log axis labels every minor tick as "8·10¹" / "9·10¹⁴", which is unreadable on a
bandwidth or roofline chart. :class:`LogAxis` labels decades ("10 GB/s", "100 TFLOP/s",
"1 PFLOP/s"), adds 2× and 5× labels when only a few decades are visible, thins the decades when
many are squeezed into a short axis, and keeps the other mantissas (2…9) as unlabelled minor ticks.

The tick choice (:func:`log_ticks`) and the label text (:func:`eng`) are plain functions, tested
without a plot. :func:`style_axes` and :func:`style_plot` give every chart of the app the same axis
pens, tick font, grid and (no) context menu.
"""

from __future__ import annotations

import math
from typing import Any

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetrics

AXIS_PEN = "#9aa5b1"
AXIS_TEXT = "#2c3e50"

_PREFIXES = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
             (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")]


def eng(value: float, unit: str = "") -> str:
    """``value`` in engineering notation: eng(1e10, "B/s") == "10 GB/s", eng(1e3) == "1k".

    Without a unit, values below 1000 are written as decimals ("0.1", "0.001", "50") and larger
    ones take k/M/G/T/P ("1k", "20M"); with a unit, the SI prefix goes before it ("500 MB/s").
    """
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip() if unit else f"{value:g}"
    value = float(f"{value:.6g}")  # 10**3 is 999.9999999999998 in floating point
    a = abs(value)
    if not unit and 1e-4 <= a < 1000:
        return f"{value:.4g}"
    for scale, prefix in _PREFIXES:
        if a >= scale * (1 - 1e-9):
            m = value / scale
            text = f"{m:.3g}"
            return f"{text} {prefix}{unit}" if unit else f"{text}{prefix}"
    return f"{value:.3g} {unit}".strip()


def log_ticks(lo: float, hi: float, size_px: float, min_px: float) -> tuple[list[float], list[float]]:
    """Labelled and unlabelled tick positions (log10 of the value) for a log axis.

    ``lo`` and ``hi`` are the visible range in log10 units, ``size_px`` the axis length in pixels
    and ``min_px`` the pixels one label needs. Decades are labelled; when few decades are visible
    (3.5 at most) and there is room, 2× and 5× are labelled too; when there is no room for every decade, every
    n-th decade is labelled and the others become minor ticks. A range inside one decade labels
    1…9 (as many as fit).
    """
    lo, hi = sorted((lo, hi))
    span = hi - lo
    if not (math.isfinite(lo) and math.isfinite(hi)) or span <= 0 or size_px <= 0:
        return [], []
    px_per_decade = size_px / span
    d0, d1 = math.floor(lo), math.ceil(hi)
    decades = [float(d) for d in range(d0, d1 + 1) if lo - 1e-9 <= d <= hi + 1e-9]

    def inside(values: list[float]) -> list[float]:
        return [v for v in values if lo - 1e-9 <= v <= hi + 1e-9]

    mantissas = [d + math.log10(m) for d in range(d0, d1 + 1) for m in range(1, 10)]
    if len(decades) < 2 and span < 1.5:
        # Less than about one decade visible: label the mantissas that fit.
        cands = inside(mantissas)
        for step in (1, 2, 5, 10):  # label 1..9, then 1,2,4,6,8 / 1,2,5 / 1 only
            pick = {1: range(1, 10), 2: (1, 2, 4, 6, 8), 5: (1, 2, 5), 10: (1,)}[step]
            labelled = inside([d + math.log10(m) for d in range(d0, d1 + 1) for m in pick])
            if len(labelled) <= 1 or min(b - a for a, b in zip(labelled, labelled[1:], strict=False)) * \
                    px_per_decade >= min_px:
                break
        minor = [v for v in cands if all(abs(v - x) > 1e-9 for x in labelled)]
        return labelled, minor
    if span <= 3.5 and px_per_decade * math.log10(2) >= min_px \
            and px_per_decade * (math.log10(5) - math.log10(2)) >= min_px:
        labelled = inside([d + math.log10(m) for d in range(d0, d1 + 1) for m in (1, 2, 5)])
    elif px_per_decade >= min_px:
        labelled = decades
    else:
        every = math.ceil(min_px / px_per_decade)
        labelled = [d for d in decades if d % every == 0]
        if len(labelled) < 2:
            labelled = decades[:: max(1, len(decades) - 1)]
    taken = set(round(v, 9) for v in labelled)
    if px_per_decade >= 40:
        minor = [v for v in inside(mantissas) if round(v, 9) not in taken]
    else:  # too dense for 2..9: the unlabelled decades only
        minor = [d for d in decades if round(d, 9) not in taken]
    return labelled, minor


class LogAxis(pg.AxisItem):  # type: ignore[misc]  # pyqtgraph is untyped
    """A log10 axis whose labels are values in engineering units ("10 GB/s", "1k").

    Put the plot (or this axis) in log mode as usual; positions are log10 of the value. ``scale``
    multiplies the plotted value before labelling it: a rate plotted in GB/s with
    ``unit="B/s", scale=1e9`` reads "10 GB/s" at 10.
    """

    def __init__(self, orientation: str, unit: str = "", scale: float = 1.0, **kwargs: Any) -> None:
        super().__init__(orientation, **kwargs)
        self.unit = unit
        self.value_scale = scale
        self.enableAutoSIPrefix(False)
        self._labelled: set[float] = set()

    def label_for(self, log_value: float) -> str:
        """The text of the tick at ``log_value`` (log10 of the plotted value)."""
        return eng(10.0 ** log_value * self.value_scale, self.unit)

    def _min_px(self) -> float:
        font = self.style.get("tickFont") or QFont()
        fm = QFontMetrics(font)
        if self.orientation in ("left", "right"):
            return fm.height() * 1.6
        return fm.horizontalAdvance(self.label_for(math.log10(200)) + "  ") + 12

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[Any]:  # noqa: N802,N803
        if not self.logMode:
            return list(super().tickValues(minVal, maxVal, size))
        labelled, minor = log_ticks(minVal, maxVal, size, self._min_px())
        self._labelled = {round(v, 9) for v in labelled}
        return [(1.0, labelled), (0.1, minor)]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:  # noqa: N802
        if not self.logMode:
            return list(super().tickStrings(values, scale, spacing))
        return [self.label_for(v) if round(v, 9) in self._labelled else "" for v in values]


class PlainAxis(pg.AxisItem):  # type: ignore[misc]  # pyqtgraph is untyped
    """A linear axis labelled with plain numbers and thousands separators ("1,500,000"), never "1.5e+06"."""

    def __init__(self, orientation: str, **kwargs: Any) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:  # noqa: N802
        digits = 0 if spacing * scale >= 1 else min(6, max(1, -math.floor(math.log10(spacing * scale))))
        return [f"{v * scale:,.{digits}f}" for v in values]


def tick_font(widget_font: QFont) -> QFont:
    """The tick-label font: the widget's, at least 9 pt."""
    font = QFont(widget_font)
    font.setPointSizeF(max(widget_font.pointSizeF(), 9.0))
    return font


def style_axes(item: Any, font: QFont | None = None, names: tuple[str, ...] = ("left", "bottom")) -> None:
    """Grey axis lines, dark tick labels (in ``font`` when given) on a pyqtgraph PlotItem.

    No automatic SI prefix: our axes put their unit in the label ("time since capture start (ms)"),
    and pyqtgraph's scale on top of it read "(ms) (x0.001)" for values under 1.
    """
    for name in names:
        ax = item.getAxis(name)
        ax.enableAutoSIPrefix(False)
        ax.setPen(pg.mkPen(AXIS_PEN))
        ax.setTextPen(pg.mkPen(AXIS_TEXT))
        if font is not None:
            ax.setStyle(tickFont=font)


def style_plot(item: Any, font: QFont | None = None, grid_alpha: float = 0.2) -> None:
    """A chart as the views draw it: no context menu, a faint grid, :func:`style_axes`."""
    item.setMenuEnabled(False)
    item.showGrid(x=True, y=True, alpha=grid_alpha)
    style_axes(item, font)
