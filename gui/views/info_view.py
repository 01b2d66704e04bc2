"""Info view: what the file is, who wrote it, which tables it has and what it lacks."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFormLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui import format as fmt
from gui.documents import OpenReports
from gui.views.common import KIND_LABELS, heading, muted, producer
from gui.workers import LoadedReport


def _selectable(text: str) -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return lab


class InfoView(QWidget):
    """File facts in a form, then one row per table: rows captured or why it is missing."""

    #: the GPUs (from the background summary) are shown
    sig_ready = Signal()

    def __init__(self, reports: OpenReports, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.reports = reports
        lay = QVBoxLayout(self)
        lay.setContentsMargins(20, 14, 20, 14)
        lay.setSpacing(10)
        self.title = heading("", 5)
        lay.addWidget(self.title)
        self.form = QFormLayout()
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        self.form.setHorizontalSpacing(16)
        self.fields: dict[str, QLabel] = {}
        for key, label in (("file", "File"), ("kind", "Kind"), ("producer", "Written by"),
                           ("schema", "Schema"), ("gpus", "GPUs"), ("notes", "Notes"),
                           ("load", "Opened in")):
            self.fields[key] = _selectable("")
            self.form.addRow(muted(label + ":", wrap=False), self.fields[key])
        lay.addLayout(self.form)
        lay.addWidget(heading("Tables", 2))
        self.tables = QTableWidget(0, 3)
        self.tables.setHorizontalHeaderLabels(["Table", "Rows", "Contents"])
        self.tables.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)  # compact rows
        self.tables.verticalHeader().hide()
        self.tables.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.tables.setAlternatingRowColors(True)
        self.tables.setWordWrap(False)
        hh = self.tables.horizontalHeader()
        hh.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        lay.addWidget(self.tables, 1)
        lay.addWidget(heading("Not in this capture", 2))
        self.missing = muted("")
        lay.addWidget(self.missing)
        self._reports = reports
        reports.sig_current_changed.connect(self._on_current_changed)
        reports.sig_summary_ready.connect(self._on_summary_ready)
        self._on_current_changed(reports.current)

    def _show_gpus(self, report: LoadedReport) -> None:
        if report.summary_error or not report.summary_ready:
            self.fields["gpus"].setText(report.summary_error and "–" or "…")
            return
        gpus = report.summary["report"].get("gpus") or []
        self.fields["gpus"].setText(", ".join(
            f"{g.get('name')} ({g.get('smCount')} SMs, {fmt.nbytes(g.get('totalMemory'))})" for g in gpus
        ) or "not recorded")

    def _on_summary_ready(self, report: LoadedReport) -> None:
        if report is self._reports.current:
            self._show_gpus(report)
            self.sig_ready.emit()

    def is_busy(self) -> bool:
        """True while the current report's summary (which names its GPUs) is being computed."""
        rep = self._reports.current
        return rep is not None and not rep.summary_ready and not rep.summary_error

    def _on_current_changed(self, report: LoadedReport | None) -> None:
        if report is None:
            self.title.setText("No report open")
            for f in self.fields.values():
                f.setText("")
            self.tables.setRowCount(0)
            self.missing.setText("")
            return
        from engine.reports.base import TABLES

        info = report.trace.info
        self.title.setText(report.name)
        self.fields["file"].setText(str(info.path))
        self.fields["kind"].setText(KIND_LABELS.get(info.kind, info.kind))
        self.fields["producer"].setText(producer(info.kind, info.product_version))
        self.fields["schema"].setText(info.schema_version or "–")
        self._show_gpus(report)
        self.fields["notes"].setText("\n".join(info.notes) or "–")
        self.fields["load"].setText(f"{report.load_s:.2f} s")

        missing = report.trace.missing
        self.tables.setRowCount(len(TABLES))
        for r, (name, (_, desc)) in enumerate(TABLES.items()):
            rows = report.table_rows.get(name)
            self.tables.setItem(r, 0, QTableWidgetItem(name))
            n = QTableWidgetItem("–" if rows is None else fmt.count(rows))
            n.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.tables.setItem(r, 1, n)
            text = desc if name not in missing else missing[name][:1].upper() + missing[name][1:]
            item = QTableWidgetItem(text)
            if name in missing:
                item.setForeground(Qt.GlobalColor.gray)
            item.setToolTip(text)
            self.tables.setItem(r, 2, item)
        lines = report.trace.missing_report()
        if report.is_ncu:
            lines = [next(iter(missing.values()))]  # one sentence: no timeline tables at all
        self.missing.setText("\n".join(f"• {m[0].upper()}{m[1:]}." for m in lines) if lines
                             else "Everything Kernelscope reads was captured.")

    def table_rows(self) -> dict[str, str]:
        return {self.tables.item(r, 0).text(): self.tables.item(r, 1).text()
                for r in range(self.tables.rowCount())}
