"""The Ranks view's heat map: each rank's wait per step (engine.analysis.ranks.heat), one image.

Rows are ranks (the straggler first, then the ranks that wait most; past a few, the others are one
folded row, their median, which a click on it unfolds), columns the steady steps lined up across
ranks, the colour the time the rank waited for another with nothing else to run. One image item
however many ranks and steps: pyqtgraph scales it to the pixels (pan and zoom stay smooth).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QRectF, Signal
from PySide6.QtWidgets import QWidget

from gui.widgets.axes import style_plot, tick_font

#: white (no wait) to the straggler red (the most wait in the picture)
COLORS = ((255, 255, 255), (245, 176, 65), (192, 57, 43))


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
        self.plot.setTitle("Wait per rank per step (ms with nothing else to run) — the straggler first",
                           color="#2c3e50")
        self.plot.setLabel("bottom", "steady steps, lined up across ranks (rank 0's step number)")
        self.image = pg.ImageItem()
        cmap = pg.ColorMap([0.0, 0.5, 1.0], [(*c, 255) for c in COLORS])
        self.image.setLookupTable(cmap.getLookupTable(nPts=256))
        self.image.setAutoDownsample(True)
        self.plot.addItem(self.image)
        self.plot.getPlotItem().setMouseEnabled(x=True, y=False)
        self.plot.scene().sigMouseClicked.connect(self._on_click)
        lay.addWidget(self.plot)
        #: for tests and the view: the row labels top to bottom, the fold row's index (-1: none), levels
        self.labels: list[str] = []
        self.fold_row = -1
        self.levels_ms: tuple[float, float] = (0.0, 0.0)
        self.steps: Any = None

    def set_rows(self, labels: list[str], wait_ns: Any, steps: Any, fold_row: int) -> None:
        """Show ``wait_ns`` (rows x steps, ns) with ``labels`` top to bottom; ``fold_row``: the folded row."""
        data = np.asarray(wait_ns, dtype=np.float64) / 1e6
        n_rows, n_cols = data.shape
        self.labels, self.fold_row, self.steps = labels, fold_row, steps
        # the scale tops at the 90th percentile: a few huge waits (a step around a stall) saturate
        # instead of washing out the steady wait the straggler causes
        top = float(np.percentile(data, 90)) if data.size else 0.0
        self.levels_ms = (0.0, max(top, 1e-3))
        # image x = step, y = row from the bottom: the first label is the top row (y = 0)
        self.image.setImage(data[::-1].T, levels=self.levels_ms, autoLevels=False)
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
        self.plot.setToolTip(f"Colour: 0 ms (white) to {self.levels_ms[1]:.2f} ms or more (red; the 90th "
                             "percentile of the picture), the time "
                             "the rank waited per step with nothing else to run."
                             + (" Click the last row to unfold it." if fold_row >= 0 else ""))

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
