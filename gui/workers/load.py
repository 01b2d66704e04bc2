"""Opening a report off the GUI thread: the worker, and the loaded report every view shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.analysis.opened import OpenedReport
from gui.workers.jobs import Worker


class LoadedReport(OpenedReport):
    """A report opened in the background, plus what the window shows about it.

    It is the engine's :class:`~engine.analysis.opened.OpenedReport` (row counts, the overview with
    its cache and child process, the ncu link). The summary is computed on first use (the window
    starts that in a worker thread as soon as the report opens, so a view that needs other tables,
    like the Timeline, paints without waiting for it); :meth:`ensure_summary` is safe to call from
    any thread.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: the sentence to show when summarizing failed (set by the window's summary job)
        self.summary_error: str | None = None
        #: what the summary's computation is doing now (set by the window's summary job)
        self.summary_progress: str | None = None
        #: a big nsys report opened for the Timeline: its GPU lanes being read already
        #: (gui.timeline.columnar.prefetch_gpu: the timeline and the future of that stage)
        self.timeline_prefetch: Any = None


Opener = Any  # a callable like engine.reports.open_report: (path, progress=, cancel=) -> Trace


class LoadWorker(Worker):
    """Open a report with the engine and count its tables, all in the worker thread."""

    def __init__(self, path: Path, opener: Opener | None = None, prefetch_timeline: bool = False) -> None:
        super().__init__()
        self.path = Path(path)
        self._opener = opener
        #: a big nsys report's GPU lanes start to be read here (the Timeline is the view shown)
        self.prefetch_timeline = prefetch_timeline

    def _progress(self, msg: str, fraction: float | None) -> None:
        text = msg if fraction is None else f"{msg} ({fraction:.0%})"
        self.sig_progress.emit(text)
        self.check_cancel()

    def work(self) -> LoadedReport:
        self.sig_progress.emit(f"Opening {self.path.name}…")
        # the sync and NVTX counts wait for the first paint (the summary's job counts them)
        loaded = LoadedReport.open(self.path, progress=self._progress, cancel=self.cancel_event,
                                   opener=self._opener, rows_later=True)
        if self.prefetch_timeline:
            from gui.timeline import columnar

            if columnar.is_big(loaded.trace, loaded.table_rows):
                loaded.timeline_prefetch = columnar.prefetch_gpu(loaded.trace)
        return loaded
