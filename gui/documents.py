"""The model the views watch: the reports open in this window and which one is current."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from gui.workers import LoadedReport


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


class OpenReports(QObject):
    """An ordered list of loaded reports plus the current one.

    Views take this object in their constructor and follow ``sig_current_changed`` (None when the
    last report is closed).
    """

    sig_added = Signal(object)
    sig_removed = Signal(object)
    sig_current_changed = Signal(object)
    #: a report's summary was computed (or failed: ``report.summary_error``) in the background
    sig_summary_ready = Signal(object)
    #: a report's summary is still being computed: ``report.summary_progress`` says how far
    sig_summary_progress = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.reports: list[LoadedReport] = []
        self.current: LoadedReport | None = None

    def __len__(self) -> int:
        return len(self.reports)

    def find(self, path: Path) -> LoadedReport | None:
        return next((r for r in self.reports if same_file(r.path, Path(path))), None)

    def add(self, report: LoadedReport, *, select: bool = True) -> None:
        """Add an opened report (and make it the current one unless ``select`` is False)."""
        self.reports.append(report)
        self.sig_added.emit(report)
        if select:
            self.set_current(report)

    def reorder(self, reports: list[LoadedReport]) -> None:
        """Put the open reports in this order (the same reports)."""
        if sorted(map(id, reports)) == sorted(map(id, self.reports)):
            self.reports = list(reports)

    def remove(self, report: LoadedReport) -> None:
        if report not in self.reports:
            return
        i = self.reports.index(report)
        self.reports.remove(report)
        self.sig_removed.emit(report)
        if self.current is report:
            nxt = self.reports[min(i, len(self.reports) - 1)] if self.reports else None
            self.set_current(nxt)
        report.stop_summary()
        try:
            report.trace.close()
        except Exception:  # noqa: BLE001 - closing must never take the window down
            pass

    def set_current(self, report: LoadedReport | None) -> None:
        if report is self.current:
            return
        self.current = report
        self.sig_current_changed.emit(report)
