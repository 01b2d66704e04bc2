"""The read-only, sortable table the views share: a QTableView over a :class:`DataFrameModel`
through a :class:`NumericSortProxy` (numbers sort as numbers, blanks last), compact rows, no row
numbers, nothing editable."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from gui.widgets.table_model import RAW_ROLE, DataFrameModel, NumericSortProxy


class ReadOnlyTable(QTableView):
    """A sortable table over ``model`` (a new :class:`DataFrameModel` by default).

    Args:
        model: The source model; the table owns a :class:`NumericSortProxy` over it.
        rows: Select whole rows (single selection) instead of cells (extended selection).
        sorting: Let a click on a header sort.
        elide: Elide long cells in the middle (kernel names differ at both ends) and never wrap.
    """

    def __init__(self, model: DataFrameModel | None = None, *, rows: bool = True, sorting: bool = True,
                 elide: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source = model if model is not None else DataFrameModel()
        self.proxy = NumericSortProxy(self)
        self.proxy.setSourceModel(self.source)
        self.setModel(self.proxy)
        self.setSortingEnabled(sorting)
        self.setAlternatingRowColors(True)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        if rows:
            self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
            self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        else:
            self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectItems)
            self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        if elide:
            self.setWordWrap(False)
            self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)  # compact rows
        self.verticalHeader().hide()
        hh = self.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(True)
        self._fit: tuple[str, str, int, int] | None = None

    def set_frame(self, df: Any, formats: dict[str, Any] | None = None) -> None:
        """Show ``df`` in the model's own order (no sort column chosen); ``formats``: see the model."""
        self.source.set_frame(df, formats)
        self.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.proxy.sort(-1)

    def column_names(self) -> list[str]:
        return self.source.column_names()

    def fit_height(self) -> None:
        """As tall as the header and the rows (a table of a handful of rows under a plot)."""
        self.resizeRowsToContents()
        h = self.horizontalHeader().height() + 2 * self.frameWidth() + 2
        hh = self.horizontalHeader()
        if hh.length() > self.viewport().width() and self.viewport().width() > 0:
            h += self.horizontalScrollBar().sizeHint().height()  # the scroll bar must not hide a row
        h += sum(self.rowHeight(r) for r in range(self.proxy.rowCount()))
        self.setFixedHeight(h)

    def stretch_column(self, name: str) -> None:
        """Column ``name`` takes the width the others leave; the others fit their contents."""
        hh = self.horizontalHeader()
        hh.setStretchLastSection(False)
        modes = QHeaderView.ResizeMode
        for i, col in enumerate(self.column_names()):
            hh.setSectionResizeMode(i, modes.Stretch if col == name else modes.ResizeToContents)

    def fit_columns(self, first: str, second: str, first_min: int = 150, second_min: int = 140) -> None:
        """Every column inside the table's width: the others fit their contents, ``first`` (a kernel
        name) gets what they leave as far as its contents need, ``second`` the rest.

        Both are elided in the middle when the width is short (never below ``first_min`` and
        ``second_min`` pixels); applied again whenever the table is resized.
        """
        self._fit = (first, second, first_min, second_min)
        self._apply_fit()

    def _apply_fit(self) -> None:
        if self._fit is None or not self.source.column_names():
            return
        first, second, first_min, second_min = self._fit
        cols = self.column_names()
        if first not in cols or second not in cols:
            return
        hh = self.horizontalHeader()
        hh.setStretchLastSection(False)
        a, b = cols.index(first), cols.index(second)
        for c in (a, b):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.Interactive)
        want_a = max(self.sizeHintForColumn(a), hh.sectionSizeFromContents(a).width())
        want_b = max(self.sizeHintForColumn(b), hh.sectionSizeFromContents(b).width())
        others = sum(hh.sectionSize(c) for c in range(len(cols))
                     if c not in (a, b) and not hh.isSectionHidden(c))
        free = self.viewport().width() - others
        floor_b = min(want_b, second_min)
        width_a = max(first_min, min(want_a, free - floor_b))
        hh.resizeSection(a, width_a)
        hh.resizeSection(b, max(floor_b, free - width_a))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._apply_fit()

    def column(self, name: str) -> list[Any]:
        """The raw values of column ``name`` in on-screen order (tests and copies)."""
        c = self.column_names().index(name)
        return [self.proxy.index(r, c).data(RAW_ROLE) for r in range(self.proxy.rowCount())]

    def rows_text(self) -> list[dict[str, str]]:
        """Every row as shown: column name -> display text."""
        cols = self.column_names()
        return [{c: self.proxy.index(r, i).data() for i, c in enumerate(cols)}
                for r in range(self.proxy.rowCount())]
