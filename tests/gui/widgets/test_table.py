"""The shared read-only table: numbers sort as numbers (blanks last), nothing is editable, the
height can fit its rows, one column can take the spare width."""

from __future__ import annotations

import math

import pandas as pd
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView


def test_read_only_table_sorts_numbers_as_numbers(qtbot):
    from gui.widgets.table import ReadOnlyTable

    t = ReadOnlyTable()
    qtbot.addWidget(t)
    t.set_frame(pd.DataFrame({"Kernel": ["b", "a", "c", "d"], "Time (µs)": [9.0, 10.0, math.nan, 100.5]}))
    assert t.editTriggers() == QAbstractItemView.EditTrigger.NoEditTriggers
    assert t.selectionBehavior() == QAbstractItemView.SelectionBehavior.SelectRows
    assert t.column("Time (µs)")[:2] == [9.0, 10.0]  # the model's order until a header is clicked
    t.sortByColumn(1, Qt.SortOrder.AscendingOrder)
    assert t.column("Time (µs)") == [9.0, 10.0, 100.5, None]  # not "10" < "100.5" < "9"; blank last
    assert t.column("Kernel") == ["b", "a", "d", "c"]
    assert t.rows_text()[2] == {"Kernel": "d", "Time (µs)": "100.5"}
    t.sortByColumn(0, Qt.SortOrder.DescendingOrder)
    assert t.column("Kernel") == ["d", "c", "b", "a"]
    t.fit_height()
    assert t.height() == t.minimumHeight() == t.maximumHeight()
    assert t.height() >= t.horizontalHeader().height() + 4 * t.rowHeight(0)
    t.stretch_column("Kernel")
    assert t.horizontalHeader().sectionResizeMode(0) == QHeaderView.ResizeMode.Stretch
    assert t.horizontalHeader().sectionResizeMode(1) == QHeaderView.ResizeMode.ResizeToContents


def test_cell_selection_mode_for_copies(qtbot):
    from gui.widgets.table import ReadOnlyTable

    t = ReadOnlyTable(rows=False)
    qtbot.addWidget(t)
    assert t.selectionBehavior() == QAbstractItemView.SelectionBehavior.SelectItems
    assert t.selectionMode() == QAbstractItemView.SelectionMode.ExtendedSelection


def test_placeholder_stack(qtbot):
    from PySide6.QtWidgets import QLabel

    from gui.widgets.placeholder import PlaceholderStack

    s = PlaceholderStack()
    qtbot.addWidget(s)
    page = s.add_page(QLabel("content"))
    s.show_placeholder("No report open")
    assert s.showing_placeholder() and s.placeholder_text() == "No report open"
    s.show_page(page)
    assert not s.showing_placeholder() and s.currentWidget() is page


def test_cells_in_their_own_unit_and_never_scientific(qtbot):
    """One formatter per quantity: the bandwidth table's bytes, times and rates each in the unit that
    suits the cell ("32 B" beside "14.10 GB"), sorted by the raw value; a bare tiny float stays positional."""
    from gui import format as fmt
    from gui.widgets.table import ReadOnlyTable

    t = ReadOnlyTable()
    qtbot.addWidget(t)
    df = pd.DataFrame({"Bytes": [14_097_334_304, 32, 488], "Time": [11_163_749.0, 10_368.0, 15_809.0],
                       "Rate": [1.2628e12, 3.086e6, 3.087e7], "Share": [75.4, 4.88e-07, 0.0482]})
    t.set_frame(df, {"Bytes": fmt.nbytes, "Time": fmt.duration, "Rate": fmt.rate})
    rows = t.rows_text()
    assert [r["Bytes"] for r in rows] == ["14.10 GB", "32 B", "488 B"]
    assert [r["Time"] for r in rows] == ["11.16 ms", "10.4 µs", "15.8 µs"]
    assert [r["Rate"] for r in rows] == ["1,262.80 GB/s", "3.1 MB/s", "30.9 MB/s"]
    assert [r["Share"] for r in rows] == ["75.4", "0.000000488", "0.0482"]  # not "4.88e-07"
    t.sortByColumn(0, Qt.SortOrder.AscendingOrder)
    assert t.column("Bytes") == [32.0, 488.0, 14_097_334_304.0]
    assert fmt.cell(1.8e-08, 3) == "0.0000000180" and "e" not in fmt.decimal(-2.5e-9, 1)
