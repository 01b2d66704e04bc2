"""A report's summary and findings off the GUI thread.

What to compute where (the cache, a child process for a big report, this process) is the engine's
decision (:meth:`engine.analysis.opened.OpenedReport.ensure_summary`); this worker runs it in a
thread with the window's progress line and cancel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gui.workers.jobs import Worker

if TYPE_CHECKING:
    from gui.workers.load import LoadedReport


class SummaryWorker(Worker):
    """Compute a report's summary (:meth:`LoadedReport.ensure_summary`) with progress and cancel."""

    def __init__(self, report: LoadedReport) -> None:
        super().__init__()
        self.report = report

    def work(self) -> object:
        self.report.count_rows_left()  # the counts the open left for after the first paint (Info view)
        return self.report.ensure_summary(progress=self.sig_progress.emit, cancel=self.cancel_event)
