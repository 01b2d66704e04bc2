"""The Kernels view's section tree: one kernel's Nsight Compute sections as metric / value rows, the
values in units a person reads (GHz, GB/s, µs, MB) with ncu's base value on hover and in copies."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

from gui import format as fmt

#: metric names up to this long always fit their column (longer ones, file paths of the hottest
#: source lines, are elided; the tooltip has them whole)
METRIC_CHARS = 40
#: a value row's text in ncu's base unit ("1,781,904,156.70 hz"), shown as "1.78 GHz"
BASE_ROLE = Qt.ItemDataRole.UserRole


def value_text(value: Any, unit: Any) -> str:
    """A metric as ncu would print it when the engine gave no text ("not collected" when absent)."""
    if value is None or (isinstance(value, float) and value != value):
        return "not collected"
    u = f" {unit}" if unit else ""
    if isinstance(value, float):
        return f"{value:,.2f}{u}"
    return f"{value}{u}"


class SectionsTree(QTreeWidget):
    """Sections (bold, expanded) with their metrics; Ctrl+C copies the selected rows' base values."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(2)
        self.setHeaderLabels(["Metric", "Value"])
        self.setAlternatingRowColors(True)
        self.setSelectionMode(QTreeWidget.SelectionMode.ExtendedSelection)
        self.setToolTip("Values in readable units; hover one for ncu's base value, Ctrl+C copies the "
                        "selected rows with base values")
        self.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.header().resizeSection(0, 250)
        copy_sc = QShortcut(QKeySequence(QKeySequence.StandardKey.Copy), self)
        copy_sc.setContext(Qt.ShortcutContext.WidgetShortcut)
        copy_sc.activated.connect(self.copy_selection)

    def show_message(self, text: str) -> None:
        self.clear()
        self.addTopLevelItem(QTreeWidgetItem([text, ""]))

    def show_sections(self, sections: dict[str, Any]) -> None:
        """``sections``: section title -> DataFrame of metric, value, unit, text, note, name."""
        self.clear()
        for section, df in sections.items():
            top = QTreeWidgetItem([section, ""])
            f = top.font(0)
            f.setBold(True)
            top.setFont(0, f)
            for rec in df.to_dict("records"):
                base = rec.get("text") or value_text(rec.get("value"), rec.get("unit"))
                text = fmt.human_value(rec.get("value"), rec.get("unit")) or base
                note = rec.get("note") or ""
                child = QTreeWidgetItem([str(rec["metric"]), f"{text}  {note}".strip()])
                child.setToolTip(0, str(rec.get("name") or rec["metric"]))
                child.setToolTip(1, base if not note else f"{base}\n{note}")
                child.setData(1, BASE_ROLE, base)
                top.addChild(child)
            self.addTopLevelItem(top)
            top.setExpanded(True)
        self.fit_metric_column()

    def fit_metric_column(self) -> None:
        """The metric names never cut off ("Local Memory Spilling Requests"): column 0 fits them.

        The values take the rest (their notes are elided; the tooltip has them whole).
        """
        names = [kid.text(0) for i in range(self.topLevelItemCount())
                 if (top := self.topLevelItem(i)) is not None
                 for j in range(top.childCount()) if (kid := top.child(j)) is not None]
        width = max((self.fontMetrics().horizontalAdvance(n) for n in names if len(n) <= METRIC_CHARS),
                    default=0)
        self.header().resizeSection(0, max(width + 2 * self.indentation() + 8, 250))
    def copy_selection(self) -> str:
        """Copy the selected rows as 'metric<TAB>value in ncu's base unit' lines."""
        lines = [f"{item.text(0)}\t{base}" for item in self.selectedItems()
                 if (base := item.data(1, BASE_ROLE)) is not None]
        text = "\n".join(lines)
        if text:
            QGuiApplication.clipboard().setText(text)
        return text

    def texts(self) -> dict[str, dict[str, str]]:
        """Section -> metric -> the value as shown (tests)."""
        out: dict[str, dict[str, str]] = {}
        for i in range(self.topLevelItemCount()):
            top = self.topLevelItem(i)
            if top is None:
                continue
            kids = [top.child(j) for j in range(top.childCount())]
            out[top.text(0)] = {c.text(0): c.text(1) for c in kids if c is not None}
        return out
