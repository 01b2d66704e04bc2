"""The Ranks view's heat map: each rank's wait per step (engine.analysis.ranks.heat), one image.

Rows are ranks (the straggler first, then the ranks that wait most; past a few, the others are one
folded row, their median, which a click on it unfolds), columns the steady steps lined up across
ranks, the colour the time the rank waited for another with nothing else to run, as a share of the
job's median step: a fixed scale (:data:`SCALE`), so a job whose ranks wait a few per cent of a step
stays pale and a straggler that makes the others wait a quarter of their step or more shows deep red,
whatever the other cells hold. One image item however many ranks and steps: pyqtgraph scales it to
the pixels (pan and zoom stay smooth).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QRectF, Signal
from PySide6.QtWidgets import QWidget

from gui.widgets.axes import style_plot, tick_font

#: the colour of a wait of each share of the median step: white (none), pale at a few per cent, orange at
#: 8 %, red at 15 %, deep red from a quarter of the step, darkest at half of it or more
SCALE = ((0.0, (255, 255, 255)), (0.04, (253, 235, 200)), (0.08, (245, 176, 65)), (0.15, (220, 85, 55)),
         (0.25, (170, 40, 30)), (0.5, (120, 20, 20)))
#: the share of the step the scale tops at (a larger wait has the top colour)
TOP_SHARE = SCALE[-1][0]
#: the heat map's title, beside its colour scale
TITLE = ("Wait per rank per step with nothing else to run, the straggler first — "
         "as a share of the median step{step}:")


#: steps drawn one column each up to this many; more: each column the median of a few
MAX_COLUMNS = 2000


def median_columns(data: Any, per_column: int) -> Any:
    """``data`` (rows x steps) with each run of ``per_column`` steps as its median (the last run shorter)."""
    if per_column <= 1:
        return data
    n_rows, n_cols = data.shape
    pad = -n_cols % per_column
    padded = np.concatenate([data, np.full((n_rows, pad), np.nan)], axis=1)
    return np.nanmedian(padded.reshape(n_rows, -1, per_column), axis=2)


def share_color(share: float) -> tuple[int, int, int]:
    """The heat map's colour of a wait of ``share`` of the median step (as the lookup table draws it)."""
    x = min(max(share, 0.0), TOP_SHARE)
    for (a, ca), (b, cb) in zip(SCALE, SCALE[1:], strict=False):
        if x <= b:
            t = (x - a) / (b - a)
            return (round(ca[0] + t * (cb[0] - ca[0])), round(ca[1] + t * (cb[1] - ca[1])),
                    round(ca[2] + t * (cb[2] - ca[2])))
    return SCALE[-1][1]


class WaitHeatMap(QWidget):
    """A heat map of wait per rank per step, with a fold row that unfolds on click."""

    #: the folded row was clicked (unfold / fold)
    sig_fold_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        import pyqtgraph as pg
        from PySide6.QtWidgets import QVBoxLayout

        self._pg = pg
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.plot = pg.PlotWidget(background="w")
        style_plot(self.plot.getPlotItem(), tick_font(self.font()))
        self.plot.setLabel("bottom", "steady steps, lined up across ranks (rank 0's step number)")
        self.image = pg.ImageItem()
        cmap = pg.ColorMap([x / TOP_SHARE for x, _c in SCALE], [(*c, 255) for _x, c in SCALE])
        self.image.setLookupTable(cmap.getLookupTable(nPts=256))
        self.image.setAutoDownsample(True)
        self.plot.addItem(self.image)
        self.plot.getPlotItem().setMouseEnabled(x=True, y=False)
        self.plot.scene().sigMouseClicked.connect(self._on_click)
        lay.addLayout(self._legend())  # the title, with the colour scale
        lay.addWidget(self.plot)
        #: for tests and the view: the row labels top to bottom, the fold row's index (-1: none), the
        #: median step (ns) the colours are shares of, each cell's share (rows x steps)
        self.labels: list[str] = []
        self.fold_row = -1
        self.step_ns = 0
        self.shares: Any = np.zeros((0, 0))
        self.per_column = 1  # steps a column of the image stands for
        self.steps: Any = None

    def _legend(self) -> Any:
        from PySide6.QtWidgets import QHBoxLayout, QLabel

        from gui.widgets.labels import swatch

        row = QHBoxLayout()
        row.setContentsMargins(6, 2, 6, 0)
        self.legend_title = QLabel(TITLE.format(step=""))
        self.legend_title.setStyleSheet("color: #2c3e50;")
        row.addWidget(self.legend_title)
        for share, color in SCALE:
            row.addWidget(swatch("#{:02x}{:02x}{:02x}".format(*color), 12))
            row.addWidget(QLabel(f"{share:.0%}" + (" or more" if share == TOP_SHARE else "")))
            row.addSpacing(6)
        row.addStretch(1)
        return row

    def set_rows(self, labels: list[str], wait_ns: Any, steps: Any, fold_row: int, step_ns: int) -> None:
        """Show ``wait_ns`` (rows x steps, ns) with ``labels`` top to bottom; ``fold_row``: the folded row;
        the colour of a cell: its wait over ``step_ns`` (the job's median step) on :data:`SCALE`."""
        self.step_ns = max(int(step_ns), 1)
        self.shares = np.asarray(wait_ns, dtype=np.float64) / self.step_ns
        n_rows, n_cols = self.shares.shape
        # past MAX_COLUMNS steps a column is the median of a few steps, not the mean pyqtgraph would take
        # of the steps a pixel holds: on the 64-rank job the job-wide pauses (every rank waits most of
        # such a step) coloured the straggler's row as red as the others'
        self.per_column = max(1, -(-n_cols // MAX_COLUMNS))
        data = median_columns(np.minimum(self.shares, TOP_SHARE), self.per_column)
        self.labels, self.fold_row, self.steps = labels, fold_row, steps
        # image x = step, y = row from the bottom: the first label is the top row (y = 0)
        self.image.setImage(data[::-1].T, levels=(0.0, TOP_SHARE), autoLevels=False)
        self.image.setAutoDownsample(self.per_column == 1)
        self.image.setRect(QRectF(-0.5, -n_rows + 0.5, n_cols, n_rows))
        ticks = [(-float(i), text) for i, text in enumerate(labels)]
        self.plot.getPlotItem().getAxis("left").setTicks([ticks])
        if steps is not None and len(steps):
            every = max(1, n_cols // 8)
            self.plot.getPlotItem().getAxis("bottom").setTicks(
                [[(float(k), str(int(steps[k]))) for k in range(0, n_cols, every)]])
        self.plot.getPlotItem().setYRange(-n_rows + 0.5, 0.5, padding=0.0)
        self.plot.getPlotItem().setXRange(-0.5, n_cols - 0.5, padding=0.0)
        self.plot.getPlotItem().setLimits(xMin=-0.5, xMax=n_cols - 0.5)
        step_ms = self.step_ns / 1e6
        unfold = " Click the last row to unfold it." if fold_row >= 0 else ""
        self.legend_title.setText(TITLE.format(step=f" ({step_ms:,.2f} ms)"))
        self.plot.setToolTip(
            f"Colour: the time the rank waited in the step with nothing else to run, as a share of the "
            f"job's median step ({step_ms:,.2f} ms): white none, pale a few per cent, orange 8 % "
            f"({0.08 * step_ms:,.2f} ms), red 15 % ({0.15 * step_ms:,.2f} ms), deep red from 25 % "
            f"({0.25 * step_ms:,.2f} ms), darkest from 50 % ({0.5 * step_ms:,.2f} ms)."
            + (f" Each column is the median of {self.per_column} steps." if self.per_column > 1 else "")
            + unfold)

    def row_at(self, y: float) -> int | None:
        """The row (0: top) at the plot's ``y``."""
        row = int(round(-y))
        return row if 0 <= row < len(self.labels) else None

    def _on_click(self, ev: Any) -> None:
        vb = self.plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(ev.scenePos()):
            return
        if self.fold_row >= 0 and self.row_at(vb.mapSceneToView(ev.scenePos()).y()) == self.fold_row:
            self.sig_fold_clicked.emit()
