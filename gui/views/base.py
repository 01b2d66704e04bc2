"""What every view is: the lifecycle hooks the window calls (a typed Protocol) and :class:`ReportView`,
the base the report views build on (what each view needs, its :class:`~gui.views.registry.ViewSpec`,
is declared in :mod:`gui.views.registry`).

The window builds each view as ``cls(reports)`` with its :class:`~gui.documents.OpenReports` and
then only talks to it through :class:`ViewHooks`:

- ``sig_ready``: the view's content is on screen (``--screenshot`` waits for it while ``is_busy()``);
- ``sig_message(str)``: a line for the log panel;
- ``sig_link(key, payload)``: take the user to view ``key`` (one of the spec's ``links``), which
  shows ``payload`` through its ``show_link``;
- ``is_busy()``, ``shutdown()`` (stop background work before the window closes), ``show_link()``.

This module imports PySide6 and the registry (which imports nothing: the entry point reads it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QStackedWidget, QVBoxLayout, QWidget

from gui.views.registry import ViewSpec, spec

if TYPE_CHECKING:
    from PySide6.QtCore import SignalInstance

    from gui.documents import OpenReports
    from gui.widgets.placeholder import PlaceholderStack
    from gui.workers.latest import LatestCall
    from gui.workers.load import LoadedReport


class ViewHooks(Protocol):
    """The hooks the window and ``--screenshot`` use on every view."""

    @property
    def sig_ready(self) -> SignalInstance: ...

    @property
    def sig_message(self) -> SignalInstance: ...

    @property
    def sig_link(self) -> SignalInstance: ...

    def is_busy(self) -> bool: ...

    def shutdown(self) -> None: ...

    def show_link(self, payload: object) -> None: ...


class _CurrentFollower(QObject):
    """Forwards the current report to a view's slot, deferring it while the view is a hidden tab."""

    def __init__(self, view: QWidget, reports: OpenReports,
                 slot: Callable[[LoadedReport | None], None]) -> None:
        super().__init__(view)
        self._view = view
        self._slot = slot
        self._report: LoadedReport | None = None
        self._pending = False
        self._stack: QStackedWidget | None = None
        reports.sig_current_changed.connect(self._on_current)

    def _on_current(self, report: LoadedReport | None) -> None:
        self._report = report
        parent = self._view.parentWidget()
        stack = parent if isinstance(parent, QStackedWidget) else None
        if report is None or stack is None or stack.currentWidget() is self._view:
            self._pending = False
            self._slot(report)
            return
        self._pending = True
        if stack is not self._stack:
            self._stack = stack
            stack.currentChanged.connect(self._on_tab)

    def _on_tab(self, _index: int) -> None:
        if self._pending and self._stack is not None and self._stack.currentWidget() is self._view:
            self._pending = False
            self._slot(self._report)


def follow_current(view: QWidget, reports: OpenReports, slot: Callable[[LoadedReport | None], None]) -> None:
    """Call ``slot(report)`` when the current report changes, but only while ``view`` is shown.

    A view that is a hidden tab of the main window gets the latest report when its tab is
    selected, so opening a big report starts only the work of the view the user is looking at
    (the others would compete for the CPU and the GIL). A view outside a tab widget (tests,
    dialogs) and a change to "no report" are forwarded at once.
    """
    _CurrentFollower(view, reports, slot)


class ReportView(QWidget):
    """The base of the views: the hooks with their defaults, a vertical layout with a title, a
    placeholder stack, background calls whose results are keyed by report, and following the
    current report.

    A subclass sets ``key`` (its :class:`ViewSpec`), builds its widgets after ``super().__init__``,
    implements :meth:`on_report` and calls :meth:`start_following` last. ``layout=False`` leaves the
    widget without a layout (and ``vbox`` unattached) for a view that lays itself out.
    """

    key: ClassVar[str] = ""
    #: the view draws what the report's summary adds once it comes (the Timeline's step ruler and
    #: first zoom): ``--screenshot`` then waits for the summary too
    shows_summary_later: ClassVar[bool] = False
    sig_ready = Signal()
    sig_message = Signal(str)
    sig_link = Signal(str, object)  # view key, what to show there

    def __init__(self, reports: OpenReports | None, parent: QWidget | None = None, *,
                 title_size: int | None = 4, margins: tuple[int, int, int, int] = (14, 10, 14, 8),
                 spacing: int = 6, layout: bool = True) -> None:
        super().__init__(parent)
        from gui import gc_guard
        from gui.documents import OpenReports
        from gui.widgets.labels import heading
        from gui.widgets.placeholder import PlaceholderStack

        # Views start worker threads: garbage must be collected on this thread only, with or without
        # the main window (tests build views alone; see gui/gc_guard.py).
        gc_guard.install()

        # Telemetry and Run work without reports; every view still has the (maybe empty) model.
        self.reports: OpenReports = reports if reports is not None else OpenReports(self)
        self.spec: ViewSpec | None = spec(self.key) if self.key else None
        self._latest: list[LatestCall] = []
        self.vbox = QVBoxLayout(self) if layout else QVBoxLayout()
        self.vbox.setContentsMargins(*margins)
        self.vbox.setSpacing(spacing)
        self.title = heading("", title_size or 0)
        if title_size is not None and layout:
            self.vbox.addWidget(self.title)
        else:
            self.title.hide()
        self.stack: PlaceholderStack = PlaceholderStack()

    # -- hooks ------------------------------------------------------------------------------------
    def is_busy(self) -> bool:
        """True while background work for the shown report runs."""
        return any(c.busy() for c in self._latest)

    def shutdown(self) -> None:
        """Stop background work (the window is closing)."""
        for c in self._latest:
            c.stop()

    def show_link(self, payload: object) -> None:
        """Show what another view linked to (see :attr:`ViewSpec.links`); nothing by default."""

    # -- for subclasses -----------------------------------------------------------------------------
    def on_report(self, report: LoadedReport | None) -> None:
        """The current report changed (deferred while the view is a hidden tab)."""

    def on_removed(self, report: LoadedReport) -> None:
        """A report was closed: forget what was computed for it."""
        for c in self._latest:
            for key in [k for k in c.cache if k == id(report) or (isinstance(k, tuple) and id(report) in k)]:
                c.forget(key)

    def latest_call(self, on_result: Callable[[Any, Any], None],
                    on_error: Callable[[Any, str], None]) -> LatestCall:
        """A background call whose results are cached per key and where the latest request wins;
        :meth:`is_busy`, :meth:`shutdown` and :meth:`on_removed` cover it."""
        from gui.workers.latest import LatestCall

        call = LatestCall(self)
        call.sig_result.connect(on_result)
        call.sig_error.connect(on_error)
        self._latest.append(call)
        return call

    def start_following(self) -> None:
        """Follow the current report from now on and show the current one."""
        follower = _CurrentFollower(self, self.reports, self.on_report)
        self.reports.sig_removed.connect(self.on_removed)
        # (a view built into a hidden tab of the window, after a report opened, waits for its tab)
        follower._on_current(self.reports.current)

    def set_title(self, what: str, report: LoadedReport | None) -> None:
        """'What — report.name', or 'No report open'."""
        self.title.setText(f"{what} — {report.name}" if report is not None else "No report open")

    def show_placeholder(self, text: str) -> None:
        self.stack.show_placeholder(text)

    def wrong_kind(self, report: LoadedReport) -> bool:
        """True when ``report`` is not the kind this view shows (an nsys report in an ncu view)."""
        return self.spec is not None and self.spec.needs_ncu and not report.is_ncu

    def current_is(self, key: Any) -> bool:
        """True when ``key`` (a report id) is the current report's: a late result for another is dropped."""
        cur = self.reports.current
        return cur is not None and id(cur) == key
