"""Opening a report off the GUI thread: the worker, and the loaded report every view shows."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gui.workers.jobs import Worker

if TYPE_CHECKING:
    from engine.analysis.findings.model import Finding
    from engine.analysis.summary_model import Summary
    from engine.reports.base import Trace
    from engine.reports.ncu import NcuReport


@dataclass(eq=False)
class LoadedReport:
    """A report opened in the background: everything the views show.

    The summary is computed on first use (the window starts that in a worker thread as soon as
    the report opens, so a view that needs other tables, like the Timeline, paints without
    waiting for it); :meth:`ensure_summary` is safe to call from any thread.
    """

    path: Path
    trace: Trace
    table_rows: dict[str, int | None] = field(default_factory=dict)
    load_s: float = 0.0
    _summary: Summary | None = field(default=None, repr=False)
    _findings: list[Finding] | None = field(default=None, repr=False)
    #: the step range the user picked (None: the one found by structure)
    range_name: str | None = None
    #: the sentence to show when summarizing failed (set by the window's summary job)
    summary_error: str | None = field(default=None, repr=False)
    #: what the summary's computation is doing now (set by the window's summary job)
    summary_progress: str | None = field(default=None, repr=False)
    #: True when the summary was read from the cache (kept by an earlier open), not computed
    summary_from_cache: bool = field(default=False, repr=False)
    #: compute the summary in a child process (None: when the report has more than
    #: gui.workers.summary.CHILD_EVENTS CUDA events)
    summary_in_child: bool | None = field(default=None, repr=False)
    #: a big nsys report opened for the Timeline: its GPU lanes being read already
    #: (gui.timeline.columnar.prefetch_gpu: the timeline and the future of that stage)
    timeline_prefetch: Any = field(default=None, repr=False)
    #: why the summary's child process failed (the next call says so instead of starting another)
    _failed: str | None = field(default=None, repr=False)
    #: set by :meth:`stop_summary`: a summary's child process is killed whoever started it
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def summary(self) -> Summary:
        """The engine's summary (``kernelscope.summary/2``); computed here if not yet done."""
        return self.ensure_summary()

    @property
    def findings(self) -> list[Finding]:
        """Every finding of the engine, computed with the summary (one source for both views)."""
        self.ensure_summary()
        return self._findings or []

    def set_range(self, range_name: str | None) -> None:
        """Use another step range; the next :meth:`ensure_summary` recomputes summary and findings."""
        with self._lock:
            self.range_name = range_name
            self._failed = None
            self._summary = None
            self._findings = None

    @property
    def summary_ready(self) -> bool:
        """True once the summary has been computed (views show "Summarizing…" until then)."""
        return self._summary is not None

    def ensure_summary(self, progress: Callable[[str], None] | None = None,
                       cancel: threading.Event | None = None) -> Summary:
        """Compute the summary and its findings once (any thread; concurrent callers wait).

        A timeline report's result is kept in the cache (the next open loads it); a big one is
        computed in a child process (:func:`gui.workers.summary.run_child`, whose ``progress``
        and ``cancel`` these are), so its memory is not added to the window's for good.
        """
        summary = self._summary
        if summary is None:
            with self._lock:
                summary = self._summary
                if summary is None:
                    if self.is_ncu:
                        from engine.analysis.summary import summarize

                        found: list[Finding] = []
                        summary = summarize(self.trace)
                    elif self._failed is not None:  # a failed child is not started again
                        from engine.system.errors import KernelscopeError

                        raise KernelscopeError(self._failed)
                    else:
                        summary, found = self._overview(progress, cancel)
                    self._findings = found
                    self._summary = summary
        return summary

    def stop_summary(self) -> None:
        """Kill the summary's child process if one runs (the window closes or drops the report)."""
        self._stop.set()

    def in_child(self) -> bool:
        """True when the summary is computed in a child process (see :attr:`summary_in_child`)."""
        if self.summary_in_child is not None:
            return self.summary_in_child
        from gui.timeline.columnar import is_big
        from gui.workers.summary import CHILD_EVENTS

        return not self.is_ncu and is_big(self.trace, self.table_rows, CHILD_EVENTS)

    def _overview(self, progress: Callable[[str], None] | None,
                  cancel: threading.Event | None) -> tuple[Summary, list[Finding]]:
        from engine.analysis.findings import overview_store

        got = overview_store.load_cached(self.path, self.range_name)
        self.summary_from_cache = got is not None
        if got is not None:
            return got
        if self.in_child():
            from engine.system.errors import KernelscopeError
            from gui.workers.summary import run_child

            try:
                got = run_child(self.path, self.range_name, progress=progress,
                                cancel=_Either(self._stop, cancel))
            except KernelscopeError as exc:
                self._failed = str(exc)
                raise
        else:
            from engine.analysis.findings.overview import overview

            got = overview(self.trace, range_name=self.range_name)
        overview_store.store(self.path, self.range_name, got)
        return got

    @property
    def ncu(self) -> NcuReport | None:
        """The :class:`engine.reports.ncu.NcuReport` of an Nsight Compute report, else None."""
        from engine.reports.ncu.trace import NcuTrace

        return self.trace.ncu if isinstance(self.trace, NcuTrace) else None

    @property
    def is_ncu(self) -> bool:
        """True for an Nsight Compute report (kernels, no timeline)."""
        return self.ncu is not None


class _Either:
    """Set when either event is (run_child's cancel: the caller's, or the report's stop)."""

    def __init__(self, a: threading.Event, b: threading.Event | None) -> None:
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or (self.b is not None and self.b.is_set())


Opener = Callable[..., Any]


def _count_quietly(trace: Any, name: str) -> None:
    """Count a table so that a later ``row_count`` finds it known (an error is the later call's)."""
    try:
        trace.row_count(name)
    except Exception:  # noqa: BLE001 - the caller counts again and reports it
        pass


class LoadWorker(Worker):
    """Open a report with the engine and summarize it, all in the worker thread."""

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
        t0 = time.perf_counter()
        self.sig_progress.emit(f"Opening {self.path.name}…")
        opener = self._opener
        if opener is None:
            import functools

            from engine.reports import open_report

            # The window lists Nsight Compute reports beside timelines (the Kernels view shows them).
            opener = functools.partial(open_report, ncu=True)
        trace = opener(self.path, progress=self._progress, cancel=self.cancel_event)
        try:
            self.check_cancel()
            from engine.reports.base import TABLES
            from gui.timeline.columnar import cached_row_count

            rows: dict[str, int | None] = {}
            # the CUDA API table is counted on a second thread while the GPU tables are (a count
            # walks a big table's leaf pages: their page faults overlap; the store keeps the count)
            api_count = None
            make_store = getattr(trace, "column_store", None)  # nsys SQLite only
            if make_store is not None and trace.has("api") and cached_row_count(trace, "api") is None:
                make_store()  # (made here: two threads must not each make one)
                api_count = threading.Thread(target=_count_quietly, args=(trace, "api"),
                                             name="ks-count-api", daemon=True)
                api_count.start()
            for name in TABLES:  # counted, not read: the views read the columns they draw
                if name == "api" and api_count is not None:
                    api_count.join()
                # a big nsys table opened before: the length of its cached column (no SQL count)
                rows[name] = cached_row_count(trace, name) if trace.has(name) else None
                if rows[name] is None:
                    rows[name] = trace.row_count(name)
        except BaseException:
            trace.close()
            raise
        loaded = LoadedReport(self.path, trace, rows, time.perf_counter() - t0)
        if self.prefetch_timeline:
            from gui.timeline import columnar

            if columnar.is_big(trace, rows):
                loaded.timeline_prefetch = columnar.prefetch_gpu(trace)
        return loaded
