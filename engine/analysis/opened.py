"""An opened report: what the command line and the window both ask of a report, decided in one place.

:class:`OpenedReport` holds a report's trace and answers, for any front end:

- its tables' row counts (:meth:`OpenedReport.open` counts them; a big nsys table's count is the
  length of its cached column, not an SQL count; a window counts the tables no view's first work
  needs after its first paint: :data:`COUNTED_LATER`, :meth:`OpenedReport.count_rows_left`);
- its overview, the summary and findings (:meth:`OpenedReport.overview`): from the cache when an
  earlier run kept it (``engine.analysis.findings.overview_store``, keyed by the file, the engine's
  code, the step range, the step switch and the stored calibrations), else computed, in a child
  process for a big report in a program that keeps the report open (the window: the summary's
  peak memory then goes back to the OS), else in this process, and kept in the cache;
- the ncu result of one of its kernel launches in an Nsight Compute report (:meth:`ncu_result`).

The command line makes one with ``OpenedReport(path, resident=False)`` and asks for the overview
(the trace is opened only when the cache has no entry); the window opens one per report
(``gui.workers.load``) and draws what it returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from engine.analysis.findings.model import Finding
    from engine.analysis.summary_model import Summary
    from engine.reports.base import Trace
    from engine.reports.ncu import NcuReport
    from engine.system.child import CancelFlag

Overview = tuple["Summary", list["Finding"]]
#: (message, fraction done or None), from the report's reader while it opens
OpenProgress = Callable[[str, "float | None"], None]

#: CUDA events (kernels, copies, memsets, API calls) above which a resident program's overview is
#: computed in a child process
CHILD_EVENTS = 2_000_000
#: one overview child at a time (two at 10M kernels would need twice the memory)
_CHILD_LOCK = threading.Lock()
#: what a failed child's sentence ends with (the window's other views do not need it)
CHILD_HINT = "the other views still work, reopen the report to try again."
#: tables no view's first work needs (the Timeline's first paint reads the GPU tables, and a report is
#: big by its CUDA events): an nsys report's count of these that the cache does not know (a count walks
#: the table's leaf pages: 0.75 s for big10m's 5M syncs out of the page cache) can wait for
#: :meth:`OpenedReport.count_rows_left`
COUNTED_LATER = ("sync", "nvtx")


def cache_variant(range_name: str | None) -> str | None:
    """The overview cache key's range part, with what else changes the result.

    That is the step detection switch (``KERNELSCOPE_STEPS``) and the stored calibrations (a new
    ``kernelscope calibrate`` changes the copy findings' ceilings); with neither, the range itself.
    """
    import os

    from engine.system.calibration import data_dir

    extra = []
    if os.environ.get("KERNELSCOPE_STEPS"):
        extra.append(f"steps={os.environ['KERNELSCOPE_STEPS']}")
    try:
        cals = sorted((p.name, p.stat().st_mtime_ns) for p in (data_dir() / "calibration").glob("*.json"))
    except OSError:
        cals = []
    if cals:
        extra.append(repr(cals))
    if not extra:
        return range_name
    return "|".join([range_name or "", *extra])


def count_rows(trace: Trace, *, later: bool = False) -> dict[str, int | None]:
    """Rows of each standard table of ``trace`` (None: not captured), without reading the tables.

    A big nsys table opened before is counted by the length of its cached column (no SQL count);
    the CUDA API table is counted on a second thread while the GPU tables are (a count walks a big
    table's leaf pages: their page faults overlap). With ``later``, an nsys report's table of
    :data:`COUNTED_LATER` that would need such a count is left out of the result (counted later).
    """
    from engine.reports.base import TABLES
    from engine.reports.nsys.timeline_reads import cached_row_count

    rows: dict[str, int | None] = {}
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
        rows[name] = cached_row_count(trace, name) if trace.has(name) else None
        if rows[name] is None:
            if later and name in COUNTED_LATER and make_store is not None and trace.has(name):
                del rows[name]
                continue
            rows[name] = trace.row_count(name)
    return rows


def _count_quietly(trace: Trace, name: str) -> None:
    """Count a table so that a later ``row_count`` finds it known (an error is the later call's)."""
    try:
        trace.row_count(name)
    except Exception:  # noqa: BLE001 - the caller counts again and reports it
        pass


class _Either:
    """Set when either flag is (the child's cancel: the caller's, or the report's stop)."""

    def __init__(self, a: threading.Event, b: CancelFlag | None) -> None:
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or (self.b is not None and self.b.is_set())


class OpenedReport:
    """A report and what the engine answers about it (see the module docstring).

    Args:
        path: the report file.
        trace: its opened trace; None: opened on first use (:attr:`trace`).
        table_rows: its tables' row counts (:func:`count_rows`).
        load_s: seconds its opening took.
        range_name: the step range to summarize (None: the one found by structure).
        summary_in_child: compute the overview in a child process (None: decided here, see
            :meth:`in_child`).
        resident: the program keeps the report open after the overview (a window), so a big
            report's overview is computed in a child; False for a program that exits (the CLI).

    """

    def __init__(self, path: Path | str, trace: Trace | None = None,
                 table_rows: dict[str, int | None] | None = None, load_s: float = 0.0, *,
                 range_name: str | None = None, summary_in_child: bool | None = None,
                 resident: bool = True) -> None:
        self.path = Path(path)
        self._trace = trace
        self.table_rows: dict[str, int | None] = dict(table_rows or {})
        self.load_s = load_s
        #: the step range the user picked (None: the one found by structure)
        self.range_name = range_name
        self.summary_in_child = summary_in_child
        self.resident = resident
        #: True when the overview was read from the cache (kept by an earlier run), not computed
        self.summary_from_cache = False
        self._summary: Summary | None = None
        self._findings: list[Finding] | None = None
        #: why the overview's child process failed (the next call says so instead of starting another)
        self._failed: str | None = None
        #: the tables :meth:`open` left uncounted (``rows_later``), in :meth:`count_rows_left`'s care
        self.rows_left: tuple[str, ...] = ()
        #: set by :meth:`stop_summary`: an overview's child process is killed whoever started it
        self._stop = threading.Event()
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path | str, *, progress: OpenProgress | None = None,
             cancel: threading.Event | None = None, opener: Callable[..., Any] | None = None,
             rows_later: bool = False, **kwargs: Any) -> Self:
        """Open ``path`` (Nsight Compute reports too) and count its tables' rows.

        Args:
            path: the report file.
            progress: the reader's progress (message, fraction done or None).
            cancel: set to stop opening (the reader raises ``Cancelled``).
            opener: what opens the file (default ``engine.reports.open_report`` with ``ncu=True``).
            rows_later: leave the counts of :data:`COUNTED_LATER` that the cache does not know to
                :meth:`count_rows_left` (:attr:`rows_left` names them; a window: after its first paint).
            **kwargs: the constructor's keyword arguments.

        """
        t0 = time.perf_counter()
        if opener is None:
            import functools

            from engine.reports import open_report

            opener = functools.partial(open_report, ncu=True)
        trace = opener(Path(path), progress=progress, cancel=cancel)
        try:
            if cancel is not None and cancel.is_set():
                from engine.system.errors import Cancelled

                raise Cancelled
            rows = count_rows(trace, later=rows_later)
        except BaseException:
            trace.close()
            raise
        opened = cls(path, trace, rows, time.perf_counter() - t0, **kwargs)
        opened.rows_left = tuple(n for n in COUNTED_LATER if n not in rows)
        return opened

    def count_rows_left(self) -> None:
        """Count the tables :meth:`open` left uncounted (:attr:`rows_left`) into :attr:`table_rows`.

        A count the timeline made meanwhile (it keeps the counts for the next open) is not made again.
        """
        for name in self.rows_left:
            self.table_rows[name] = self.trace.row_count(name)
        self.rows_left = ()

    # -- the trace -----------------------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        """The report's trace (opened here on first use when none was given)."""
        if self._trace is None:
            from engine.reports import open_report

            self._trace = open_report(self.path, cancel=threading.Event())
        return self._trace

    @property
    def name(self) -> str:
        """The report file's name."""
        return self.path.name

    @property
    def ncu(self) -> NcuReport | None:
        """The :class:`engine.reports.ncu.NcuReport` of an Nsight Compute report, else None."""
        from engine.reports.ncu import NcuReport

        held = getattr(self.trace, "ncu", None)  # an ncu report's Trace holds its NcuReport there
        return held if isinstance(held, NcuReport) else None

    @property
    def is_ncu(self) -> bool:
        """True for an Nsight Compute report (kernels, no timeline)."""
        return self.ncu is not None

    def close(self) -> None:
        """Close the trace (when one was opened) and stop an overview's child."""
        self.stop_summary()
        if self._trace is not None:
            self._trace.close()

    # -- the overview ----------------------------------------------------------------------------------
    @property
    def summary(self) -> Summary:
        """The engine's summary (``kernelscope.summary/2``); computed here if not yet done."""
        return self.ensure_summary()

    @property
    def findings(self) -> list[Finding]:
        """Every finding of the engine, computed with the summary (one source for both)."""
        self.ensure_summary()
        return self._findings or []

    @property
    def summary_ready(self) -> bool:
        """True once the summary has been computed or loaded."""
        return self._summary is not None

    def set_range(self, range_name: str | None) -> None:
        """Use another step range; the next :meth:`ensure_summary` recomputes summary and findings."""
        with self._lock:
            self.range_name = range_name
            self._failed = None
            self._summary = None
            self._findings = None

    def stop_summary(self) -> None:
        """Kill the overview's child process if one runs (the report is closed or dropped)."""
        self._stop.set()

    def in_child(self) -> bool:
        """True when the overview is computed in a child process.

        That is :attr:`summary_in_child` when set, else: a resident program's nsys SQLite report
        of more than :data:`CHILD_EVENTS` CUDA events.
        """
        if self.summary_in_child is not None:
            return self.summary_in_child
        from engine.reports.nsys.timeline_reads import cuda_events_over

        return self.resident and not self.is_ncu and cuda_events_over(self.trace, self.table_rows,
                                                                        CHILD_EVENTS)

    def ensure_summary(self, progress: Callable[[str], None] | None = None,
                       cancel: CancelFlag | None = None) -> Summary:
        """Compute (or load) the summary and its findings once; any thread, concurrent callers wait.

        ``progress`` and ``cancel`` are the child process's, when one computes it
        (:func:`engine.system.child.run_child`).
        """
        summary = self._summary
        if summary is None:
            with self._lock:
                summary = self._summary
                if summary is None:
                    if self._trace is not None and self.is_ncu:  # (the CLI opens no trace for its cache)
                        from engine.analysis.summary import summarize

                        found: list[Finding] = []
                        summary = summarize(self.trace)
                    elif self._failed is not None:  # a failed child is not started again
                        from engine.system.errors import KernelscopeError

                        raise KernelscopeError(self._failed)
                    else:
                        summary, found = self._compute(progress, cancel)
                    self._findings = found
                    self._summary = summary
        return summary

    def overview(self, reference: Trace | None = None, progress: Callable[[str], None] | None = None,
                 cancel: CancelFlag | None = None) -> Overview:
        """The summary and findings, as :meth:`ensure_summary` gives them.

        A pinned-ceiling ``reference`` changes the findings: they are then computed in this process,
        neither cached nor served from the cache.
        """
        if reference is not None:
            from engine.analysis.calls import prefetch_api_calls
            from engine.analysis.findings.overview import overview

            if not self.resident:  # nothing else reads the trace: the calls' columns meanwhile
                prefetch_api_calls(self.trace)
            return overview(self.trace, range_name=self.range_name, reference=reference)
        summary = self.ensure_summary(progress, cancel)
        return summary, self._findings or []

    def _compute(self, progress: Callable[[str], None] | None,
                 cancel: CancelFlag | None) -> Overview:
        from engine.analysis.findings import overview_store

        key = cache_variant(self.range_name)
        got = overview_store.load_cached(self.path, key)
        self.summary_from_cache = got is not None
        if got is not None:
            s, found = got
            return replace(s, report=replace(s.report, path=str(self.path))), found
        if self.in_child():
            from engine.system.errors import KernelscopeError

            try:
                with _CHILD_LOCK:
                    got = overview_store.compute_in_child(self.path, self.range_name, hint=CHILD_HINT,
                                                          progress=progress,
                                                          cancel=_Either(self._stop, cancel),
                                                          background=self.resident)
            except KernelscopeError as exc:
                self._failed = str(exc)
                raise
        else:
            from engine.analysis.calls import prefetch_api_calls
            from engine.analysis.findings.overview import overview

            if not self.resident:  # nothing else reads the trace: the calls' columns meanwhile
                prefetch_api_calls(self.trace)
            got = overview(self.trace, range_name=self.range_name)
        overview_store.store(self.path, key, got)
        return got

    # -- Nsight Compute --------------------------------------------------------------------------------
    def ncu_result(self, name: str, short_name: str | None, launch_index: int) -> dict[str, Any] | None:
        """This Nsight Compute report's result of the ``launch_index``-th launch of kernel ``name``.

        None when this is not an ncu report or that launch was not profiled
        (:func:`engine.analysis.ncu_match.ncu_result`: by base name and launch order).
        """
        ncu = self.ncu
        if ncu is None:
            return None
        from engine.analysis.ncu_match import ncu_result

        return ncu_result(ncu.kernels, name, short_name, launch_index)
