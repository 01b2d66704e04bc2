"""The Run view's sessions browser: past sessions from the :class:`~engine.sessions.store.SessionStore`
(read in a worker thread), their reports and logs. Double-click opens a session's report."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import Signal, Slot
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from gui.format import seconds_text
from gui.views.run_form import report_to_open
from gui.widgets.labels import heading
from gui.workers.jobs import CallWorker, Job
from gui.workers.run import list_sessions

if TYPE_CHECKING:
    from engine.sessions.store import SessionRecord

SESSIONS_SHOWN = 200
#: outcome kind -> (colour, QStyle standard icon)
OUTCOME_STYLE: dict[str, tuple[str, QStyle.StandardPixmap]] = {
    "success": ("#1e7b34", QStyle.StandardPixmap.SP_DialogApplyButton),
    "cancelled": ("#8a6d00", QStyle.StandardPixmap.SP_MessageBoxWarning),
    "timeout": ("#a35c00", QStyle.StandardPixmap.SP_MessageBoxWarning),
    "running": ("#1f5fa8", QStyle.StandardPixmap.SP_BrowserReload),
}
ERROR_STYLE = ("#b03a2e", QStyle.StandardPixmap.SP_MessageBoxCritical)


class SessionsPanel(QWidget):
    """The table of past sessions with Open report / Show log / Refresh."""

    sig_open_report = Signal(str)
    sig_message = Signal(str)
    #: a past session's log text, for the Run view's log pane
    sig_show_log = Signal(str)
    #: the list was (re)loaded
    sig_loaded = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.records: list[SessionRecord] = []
        self._list_job: Job | None = None
        self._list_again = False
        self.closed = False
        bv = QVBoxLayout(self)
        bv.setContentsMargins(8, 4, 0, 0)
        brow = QHBoxLayout()
        brow.addWidget(heading("Sessions", 1))
        brow.addStretch(1)
        self.open_button = QPushButton("Open report")
        self.open_button.clicked.connect(self.open_selected)
        self.showlog_button = QPushButton("Show log")
        self.showlog_button.clicked.connect(self.show_selected_log)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        for b in (self.open_button, self.showlog_button, self.refresh_button):
            brow.addWidget(b)
        bv.addLayout(brow)
        self.table = QTableWidget(0, 6)
        self.table.setObjectName("sessionsTable")
        self.table.setHorizontalHeaderLabels(["Date", "Tool", "Target", "Outcome", "Duration", "Report"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)  # compact rows
        self.table.verticalHeader().hide()
        hh = self.table.horizontalHeader()
        for c in range(5):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(5, QHeaderView.ResizeMode.Stretch)
        self.table.cellDoubleClicked.connect(lambda r, _c: self.open_row(r))
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.note = QLabel("")
        bv.addWidget(self.table, 1)
        bv.addWidget(self.note)
        self._update_buttons()

    def is_busy(self) -> bool:
        return self._list_job is not None

    @Slot()
    def refresh(self) -> None:
        """Re-read the session store in a worker thread."""
        if self.closed:
            return
        if self._list_job is not None:
            self._list_again = True
            return
        job = Job(CallWorker(list_sessions, SESSIONS_SHOWN), self)
        self._list_job = job
        job.sig_finished.connect(self._on_sessions)
        job.sig_errored.connect(self.note.setText)
        job.sig_done.connect(self._on_list_done)
        job.start()

    def stop(self) -> None:
        self.closed = True
        if self._list_job is not None:
            self._list_job.stop(30_000)
            self._list_job = None

    @Slot(object)
    def _on_sessions(self, records: object) -> None:
        assert isinstance(records, list)
        self.records = records
        t = self.table
        t.setSortingEnabled(False)
        t.setRowCount(len(records))
        for r, rec in enumerate(records):
            rep = report_to_open(rec.reports)
            kind = rec.kind or rec.state
            cells = [
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.created)), rec.tool, rec.target,
                kind.replace("_", " "), seconds_text(rec.duration_s) if rec.duration_s is not None else "",
                rep.name if rep is not None else "—",
            ]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 3:
                    item.setForeground(QColor(OUTCOME_STYLE.get(kind, ERROR_STYLE)[0]))
                    item.setToolTip(rec.message or "")
                elif c == 5 and rep is not None:
                    item.setToolTip(str(rep))
                else:
                    item.setToolTip(" ".join(rec.command))
                t.setItem(r, c, item)
        self.note.setText(
            "No sessions yet." if not records else
            f"{len(records)} session{'s' if len(records) != 1 else ''} (newest first); double-click one to "
            "open its report.")
        self._update_buttons()

    @Slot()
    def _on_list_done(self) -> None:
        job = self._list_job
        self._list_job = None
        if job is not None:
            job.deleteLater()
        if self._list_again:
            self._list_again = False
            self.refresh()
        else:
            self.sig_loaded.emit()

    def selected_row(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].row() if rows else None

    def _update_buttons(self) -> None:
        r = self.selected_row()
        rec = self.records[r] if r is not None and r < len(self.records) else None
        self.open_button.setEnabled(rec is not None and report_to_open(rec.reports) is not None)
        self.showlog_button.setEnabled(rec is not None)

    def open_row(self, row: int) -> None:
        """Open the report of the session in ``row`` (its SQLite export when it has one)."""
        if not 0 <= row < len(self.records):
            return
        rec = self.records[row]
        rep = report_to_open(rec.reports)
        if rep is None:
            self.sig_message.emit(f"Session {rec.id} kept no report ({rec.message or rec.state}).")
            return
        if not rep.exists():
            self.sig_message.emit(f"The report {rep} no longer exists; it was moved or deleted.")
            return
        self.sig_open_report.emit(str(rep))

    def open_selected(self) -> None:
        r = self.selected_row()
        if r is not None:
            self.open_row(r)

    def show_selected_log(self) -> None:
        r = self.selected_row()
        if r is not None:
            self.sig_show_log.emit(self.log_text(r))

    def log_text(self, row: int, max_bytes: int = 2_000_000) -> str:
        """A past session's ``session.log`` (its last ``max_bytes``), headed by the session's outcome."""
        rec = self.records[row]
        path = rec.log_path
        try:
            with path.open("rb") as fh:
                size = path.stat().st_size
                fh.seek(max(0, size - max_bytes))
                text = fh.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"The log {path} cannot be read ({exc.strerror})."
        head = f"[kernelscope] session {rec.id}: {rec.message or rec.state}\n[kernelscope] log: {path}\n"
        if size > max_bytes:
            head += f"[kernelscope] (only the last {max_bytes // 1_000_000} MB are shown)\n"
        return head + text
