"""The main window: open reports (dialog, recent, sample, drag & drop), switch views, see the log.

Only PySide6 is imported here; the views (and with them pyqtgraph and pandas) are built when the
first report arrives, so the window appears fast.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QLayout,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QStackedWidget,
    QTabWidget,
    QWidget,
)

from gui import settings as gsettings
from gui.documents import OpenReports
from gui.log_panel import LogPanel
from gui.views.base import ReportView
from gui.views.registry import VIEW_SPECS, ViewSpec
from gui.views.registry import spec as view_spec
from gui.views.welcome_view import WelcomeView
from gui.workers import Job, LoadedReport, LoadWorker, Opener

if TYPE_CHECKING:
    from engine.analysis.summary_model import Summary

APP_NAME = "Kernelscope"
#: view key -> tab title, in tab and shortcut order (Ctrl+1, Ctrl+2, ...)
VIEWS = {s.key: s.title for s in VIEW_SPECS}
OPEN_FILTER = (
    "Reports (*.nsys-rep *.sqlite *.json *.json.gz *.gz *.ncu-rep);;Nsight Systems (*.nsys-rep *.sqlite);;"
    "Nsight Compute (*.ncu-rep *.csv);;PyTorch profiler traces (*.json *.json.gz);;All files (*)"
)


#: views that show the summary (it starts at once there); elsewhere it waits for the view's first work
SUMMARY_VIEWS = tuple(s.key for s in VIEW_SPECS if s.needs_summary)
#: at most this long (a big report's timeline stages on a cold cache: ~40 s at 10M kernels here)
SUMMARY_MAX_DELAY_S = 60.0
SUMMARY_POLL_MS = 100


class _Views(dict[str, ReportView]):
    """The window's views by key; once the tabs are up (``started``), asking for a view not built
    yet builds it (``MainWindow._build_view``). Iterating gives the views built so far."""

    def __init__(self, build: Callable[[str], ReportView]) -> None:
        super().__init__()
        self._build = build
        self.started = False

    def __missing__(self, key: str) -> ReportView:
        if not self.started or key not in VIEWS:
            raise KeyError(key)
        return self._build(key)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key) or (self.started and key in VIEWS)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default


class MainWindow(QMainWindow):
    """Kernelscope's window. Several reports can be open; the Reports dock picks the current one."""

    sig_report_opened = Signal(object)  # LoadedReport
    sig_load_failed = Signal(str, str)  # path, sentence
    sig_load_cancelled = Signal(str)  # path
    sig_idle = Signal()  # no load is running any more

    def __init__(
        self,
        settings: QSettings | None = None,
        *,
        error_dialogs: bool = True,
        restore_geometry: bool = True,
        opener: Opener | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        from gui import gc_guard

        gc_guard.install()  # garbage is collected on this thread only (see gui/gc_guard.py)
        self.settings = settings if settings is not None else gsettings.make_settings()
        self.error_dialogs = error_dialogs
        self._opener = opener
        self.reports = OpenReports(self)
        self._jobs: dict[str, Job] = {}
        self._summary_jobs: dict[int, Job] = {}
        self._interactive: dict[str, bool] = {}
        #: folders being opened: their reports' paths in rank order (listed and selected in that order)
        self._groups: list[list[str]] = []
        self._report_keys: dict[int, str] = {}  # an opened report -> the path it was opened as
        #: the views by key: the one shown is built first, each other one when asked for
        #: (``self.views[key]`` builds a view not built yet; see :meth:`_ensure_views`)
        self.views: _Views = _Views(self._build_view)
        self._pending: dict[str, QWidget] = {}  # tab placeholders of the views not built yet
        self.setWindowTitle(APP_NAME)
        self.setAcceptDrops(True)
        # A fixed minimum instead of one that follows the contents: the window's minimum size
        # then never changes while it is shown (status bar widgets come and go during loads).
        lay = self.layout()
        if lay is not None:
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.setMinimumSize(900, 600)
        self.resize(1400, 900)

        self.welcome = WelcomeView()
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.center = QStackedWidget()
        self.center.addWidget(self.welcome)
        self.center.addWidget(self.tabs)
        self.setCentralWidget(self.center)

        self._build_docks()
        self._build_status_bar()
        self._build_actions()
        self._build_menus()

        self.welcome.sig_open_requested.connect(self.open_dialog)
        self.welcome.sig_sample_requested.connect(self.open_sample)
        self.welcome.sig_path_requested.connect(lambda p: self.open_path(p, interactive=True))
        self.welcome.set_recent(gsettings.recent_files(self.settings))
        self.reports.sig_added.connect(self._on_report_added)
        self.reports.sig_removed.connect(self._on_report_removed)
        self.reports.sig_current_changed.connect(self._on_current_changed)
        self.tabs.currentChanged.connect(self._on_tab_changed)

        if restore_geometry:
            geo = self.settings.value("window/geometry")
            state = self.settings.value("window/state")
            if geo is not None:
                self.restoreGeometry(geo)
            if state is not None:
                self.restoreState(state)

    # -- construction ----------------------------------------------------------------------------
    def _build_docks(self) -> None:
        self.report_list = QListWidget()
        self.report_list.setObjectName("reportList")
        self.report_list.currentItemChanged.connect(self._on_list_selection)
        self.reports_dock = QDockWidget("Reports", self)
        self.reports_dock.setObjectName("ReportsDock")
        self.reports_dock.setWidget(self.report_list)
        self.reports_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetClosable
                                      | QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.reports_dock)
        self.resizeDocks([self.reports_dock], [230], Qt.Orientation.Horizontal)

        self.log = LogPanel()
        self.log_dock = QDockWidget("Log", self)
        self.log_dock.setObjectName("LogDock")
        self.log_dock.setWidget(self.log)
        self.log_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetClosable
                                  | QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log_dock)
        self.resizeDocks([self.log_dock], [120], Qt.Orientation.Vertical)

    def _build_status_bar(self) -> None:
        sb = self.statusBar()
        self.progress_label = QLabel()
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # busy indicator: the engine rarely knows a fraction
        self.progress.setFixedWidth(160)
        self.progress.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop loading")
        self.cancel_button.clicked.connect(self.cancel_loads)
        for w in (self.progress_label, self.progress, self.cancel_button):
            sb.addPermanentWidget(w)
            w.hide()

    def _build_actions(self) -> None:
        self.act_open = _action("&Open…", self, self.open_dialog,
                                QKeySequence(QKeySequence.StandardKey.Open))
        self.act_close = _action("&Close report", self, self.close_current, QKeySequence("Ctrl+W"))
        self.act_quit = _action("&Quit", self, self.close, QKeySequence("Ctrl+Q"))
        self.act_quit.setMenuRole(QAction.MenuRole.QuitRole)
        self.act_about = _action("&About Kernelscope", self, self.about)
        self.view_group = QActionGroup(self)
        self.view_actions: dict[str, QAction] = {}
        for i, (key, title) in enumerate(VIEWS.items(), start=1):
            act = QAction(title, self, checkable=True)
            if i <= 9:
                act.setShortcut(QKeySequence(f"Ctrl+{i}"))
            act.triggered.connect(lambda _=False, k=key: self.set_view(k))
            self.view_group.addAction(act)
            self.view_actions[key] = act
        self.view_actions["summary"].setChecked(True)
        self._update_actions()

    def _build_menus(self) -> None:
        mb = self.menuBar()
        m = mb.addMenu("&File")
        m.addAction(self.act_open)
        self.recent_menu = m.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        self._fill_recent_menu()
        self.sample_menu = m.addMenu("Open &Sample")
        for p in gsettings.sample_reports():
            self.sample_menu.addAction(p.name, functools.partial(self.open_path, p, interactive=True))
        m.addSeparator()
        m.addAction(self.act_close)
        m.addSeparator()
        m.addAction(self.act_quit)
        v = mb.addMenu("&View")
        for act in self.view_actions.values():
            v.addAction(act)
        v.addSeparator()
        v.addAction(self.reports_dock.toggleViewAction())
        v.addAction(self.log_dock.toggleViewAction())
        h = mb.addMenu("&Help")
        h.addAction(self.act_about)

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = gsettings.recent_files(self.settings)
        for p in recent:
            act = self.recent_menu.addAction(Path(p).name,
                                             functools.partial(self.open_path, p, interactive=True))
            act.setToolTip(p)
            act.setStatusTip(p)
        if not recent:
            self.recent_menu.addAction("No recent reports").setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear recent", self._clear_recent)

    def _clear_recent(self) -> None:
        gsettings.clear_recent(self.settings)
        self.welcome.set_recent([])

    def _ensure_views(self) -> None:
        """Put the views' tabs up, building only the view shown; each other one is built when
        first asked for (its tab clicked, a link or shortcut to it: ``self.views[key]``).

        Building them all first (importing pyqtgraph and pandas, ~0.3 s) held the window's thread
        and a core while the shown view's data was being read: the Timeline of a big report then
        painted that much later. Building them later, in the background of an open window, made
        the frames drawn meanwhile wait up to 160 ms (a view that imports pyqtgraph); a hidden
        view does no work until shown anyway.
        """
        if self.views.started:
            return
        self.views.started = True
        keep = self.current_view()
        # addTab on an empty QTabWidget selects the first tab and would move the checked view
        # (the one asked for with --view) back to Summary.
        self.tabs.blockSignals(True)
        for vs in VIEW_SPECS:
            holder = QWidget()
            self._pending[vs.key] = holder
            self.tabs.addTab(holder, vs.title)
        self.tabs.blockSignals(False)
        self.tabs.setCurrentWidget(self.views[keep])

    def _build_view(self, key: str) -> ReportView:
        """Build view ``key`` into its tab (the placeholder's place; still the current tab if it was)."""
        import importlib

        vs = view_spec(key)
        cls = getattr(importlib.import_module(vs.module), vs.cls)
        holder = self._pending.get(key)
        # built inside the tabs' stack: a hidden tab then waits until shown for its first work
        view: ReportView = cls(self.reports, holder.parentWidget() if holder is not None else None)
        dict.__setitem__(self.views, key, view)
        view.sig_message.connect(self.log.add)
        view.sig_link.connect(lambda k, payload, src=vs: self._follow_link(src, k, payload))
        # The Run view's finished session (or a past one) opens its report here.
        opener = getattr(view, "sig_open_report", None)
        if opener is not None:
            opener.connect(lambda p: self.open_path(p, interactive=True))
        self._pending.pop(key, None)
        if holder is not None:
            index = self.tabs.indexOf(holder)
            current = self.tabs.currentIndex() == index
            self.tabs.blockSignals(True)
            # in before the placeholder goes: removing the current tab first would show another
            # view for a moment (and start its work)
            self.tabs.insertTab(index, view, vs.title)
            if current:
                self.tabs.setCurrentIndex(index)
            self.tabs.removeTab(index + 1)
            self.tabs.blockSignals(False)
            holder.deleteLater()
        return view

    def _follow_link(self, source: ViewSpec, key: str, payload: object) -> None:
        """A view sent the user to another (a Timeline kernel's "Show in Kernels view", say)."""
        target = self.views.get(key)
        if key not in source.links or target is None:
            self.log.add(f"The {source.title} view cannot link to {key!r}.", "warning")
            return
        self.set_view(key)
        target.show_link(payload)

    # -- public API --------------------------------------------------------------------------------
    def open_dialog(self) -> None:
        start = ""
        recent = gsettings.recent_files(self.settings)
        if recent:
            start = str(Path(recent[0]).parent)
        paths, _ = QFileDialog.getOpenFileNames(self, "Open report", start, OPEN_FILTER)
        self.open_paths(paths, interactive=True)

    def open_sample(self) -> None:
        self.open_path(gsettings.default_sample(), interactive=True)

    def open_paths(self, paths: list[str] | list[Path], interactive: bool = False) -> None:
        for p in paths:
            self.open_path(p, interactive=interactive)

    def open_path(self, path: str | Path, interactive: bool = False) -> None:
        """Start loading ``path`` in a worker thread (or switch to it if it is already open)."""
        path = Path(path).expanduser()
        try:
            path = path.absolute()
        except OSError:
            pass
        existing = self.reports.find(path)
        if existing is not None:
            self.reports.set_current(existing)
            self.log.add(f"{path.name} is already open.")
            return
        if path.is_dir():  # a folder of reports (the ranks of a job): open each; none: the loader says so
            from engine.sessions.batch import reports_in

            inside = reports_in(path)
            if inside:
                self.log.add(f"Opening the {len(inside)} report(s) in {path} …")
                self._groups.append([str(Path(p).absolute()) for p in inside])
                self.open_paths(inside, interactive=interactive)
                return
        key = str(path)
        if key in self._jobs:
            return
        job = Job(LoadWorker(path, self._opener, prefetch_timeline=self.current_view() == "timeline"), self)
        self._jobs[key] = job
        self._interactive[key] = interactive
        job.sig_progress.connect(self._on_load_progress)
        job.sig_finished.connect(lambda rep, k=key: self._on_load_finished(k, rep))
        job.sig_errored.connect(lambda msg, k=key: self._on_load_errored(k, msg))
        job.sig_cancelled.connect(lambda k=key: self._on_load_cancelled(k))
        job.sig_done.connect(lambda k=key: self._on_load_done(k))
        self.log.add(f"Opening {path} …")
        self._show_busy(f"Opening {path.name}…")
        job.start()

    def is_loading(self) -> bool:
        return bool(self._jobs)

    def is_summarizing(self) -> bool:
        """True while an opened report's summary is still being computed in the background."""
        return bool(self._summary_jobs)

    @Slot()
    def cancel_loads(self) -> None:
        for job in self._jobs.values():
            job.cancel()
        if self._jobs:
            self.progress_label.setText("Cancelling…")

    def close_current(self) -> None:
        rep = self.reports.current
        if rep is not None:
            self.reports.remove(rep)
            self.log.add(f"Closed {rep.name}.")

    def set_view(self, key: str) -> None:
        vs = view_spec(key)  # KeyError naming the choices
        self.view_actions[key].setChecked(True)
        if not vs.needs_report:
            # Telemetry and Run work without a report: show the tabs even on the welcome page.
            self._ensure_views()
            self.center.setCurrentWidget(self.tabs)
        if self.views:
            self.tabs.setCurrentWidget(self.views[key])

    def current_view(self) -> str:
        return next((k for k, a in self.view_actions.items() if a.isChecked()), "summary")

    def about(self) -> None:
        try:
            from importlib.metadata import version

            ver = version("kernelscope")
        except Exception:  # noqa: BLE001
            ver = "development"
        box = QMessageBox(QMessageBox.Icon.Information, "About Kernelscope",
                          f"<b>Kernelscope {ver}</b><br>A GPU profiling workbench: Nsight Systems, "
                          "Nsight Compute and PyTorch traces in one view.",
                          QMessageBox.StandardButton.Ok, self)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    def shutdown(self) -> None:
        """Stop every background thread (cancel, quit, wait)."""
        for report in self.reports.reports:
            report.stop_summary()  # a summary's child process, whichever view's thread waits on it
        for job in [*self._jobs.values(), *self._summary_jobs.values()]:
            if not job.stop():
                # A summary cannot be cancelled midway (a 400k-kernel one takes ~30 s here): wait for
                # it, since destroying a running QThread aborts the process.
                job.join()
        self._jobs.clear()
        self._summary_jobs.clear()
        for view in self.views.values():
            view.shutdown()

    # -- load results --------------------------------------------------------------------------------
    def _on_load_progress(self, msg: str) -> None:
        self.progress_label.setText(msg)

    def _on_load_finished(self, key: str, report: LoadedReport) -> None:
        self._ensure_views()
        if report.ncu is not None:
            n = len(report.ncu.kernels)
            self.log.add(f"Opened {report.path} in {report.load_s:.2f} s: Nsight Compute report, "
                         f"{n} profiled kernel{'s' if n != 1 else ''} (see the Kernels view).")
        else:
            self.log.add(f"Opened {report.path} in {report.load_s:.2f} s.")
        # Summarize in the background: the Timeline and other views need not wait for it.
        self._start_summary(report)
        self._report_keys[id(report)] = key
        self.reports.add(report, select=self._group_of(key) is None)
        if report.trace.info.kind == "snapshot":  # memory only: its page is the one to see
            self.set_view("pytorch")
        recent = gsettings.add_recent(self.settings, report.path)
        self.welcome.set_recent(recent)
        self.statusBar().showMessage(f"Opened {report.name}", 5000)
        self.sig_report_opened.emit(report)

    def _start_summary(self, report: LoadedReport) -> None:
        from gui.workers.summary import SummaryWorker

        job = Job(SummaryWorker(report), self)
        self._summary_jobs[id(report)] = job
        t0 = time.perf_counter()

        def finished(s: Summary) -> None:
            if report.trace.info.kind == "snapshot":
                self.log.add(f"{report.name} is a PyTorch memory snapshot: see the PyTorch view's "
                             "Memory page.")
            elif not report.is_ncu:
                kept = " (kept by an earlier open)" if report.summary_from_cache else ""
                self.log.add(f"Summarized {report.name}{kept} in {time.perf_counter() - t0:.2f} s: "
                             f"{_fmt_ms(s.wall.span_ns)} capture, {len(report.findings)} findings.")
            self.reports.sig_summary_ready.emit(report)

        def errored(msg: str) -> None:
            if report not in self.reports.reports:
                return  # closed while it was being summarized
            report.summary_error = msg
            self.log.add(f"Could not summarize {report.name}: {msg}", "error")
            self.reports.sig_summary_ready.emit(report)

        def progress(text: str) -> None:
            report.summary_progress = text
            self.reports.sig_summary_progress.emit(report)

        job.sig_finished.connect(finished)
        job.sig_errored.connect(errored)
        job.sig_progress.connect(progress)
        def done(k: int = id(report)) -> None:
            j = self._summary_jobs.pop(k, None)
            if j is not None:
                j.deleteLater()

        job.sig_done.connect(done)
        # Let the view on screen do its first work (the Timeline's build, say) before the summary
        # competes with it for the CPU; views that show the summary get it at once.
        deadline = time.perf_counter() + SUMMARY_MAX_DELAY_S

        def start_when_free(k: int = id(report)) -> None:
            if self._summary_jobs.get(k) is not job:
                return  # the window shut down
            key = self.current_view()
            view = self.views.get(key)
            busy = key not in SUMMARY_VIEWS and view is not None and view.is_busy()
            if busy and time.perf_counter() < deadline:
                QTimer.singleShot(SUMMARY_POLL_MS, self, start_when_free)
                return
            job.start()

        QTimer.singleShot(0, self, start_when_free)  # after reports.add has started the view's work

    def _on_load_errored(self, key: str, msg: str) -> None:
        self.log.add(msg, "error")
        self.statusBar().showMessage(msg, 15000)
        if self._interactive.get(key) and self.error_dialogs:
            box = QMessageBox(QMessageBox.Icon.Warning, "Could not open the report", msg,
                              QMessageBox.StandardButton.Ok, self)
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            box.open()  # window-modal, does not block the event loop
        self.sig_load_failed.emit(key, msg)

    def _on_load_cancelled(self, key: str) -> None:
        self.log.add(f"Cancelled opening {Path(key).name}.", "warning")
        self.statusBar().showMessage(f"Cancelled opening {Path(key).name}.", 5000)
        self.sig_load_cancelled.emit(key)

    def _group_of(self, key: str) -> list[str] | None:
        return next((g for g in self._groups if key in g), None)

    def _finish_group(self, key: str) -> None:
        """A folder's last report loaded: list its reports in rank order and select the first."""
        group = self._group_of(key)
        if group is None or any(k in self._jobs for k in group):
            return
        self._groups.remove(group)
        rank = {k: i for i, k in enumerate(group)}

        def key_of(it: QListWidgetItem) -> str:
            return self._report_keys.get(id(it.data(Qt.ItemDataRole.UserRole)), "")

        items = [self.report_list.takeItem(i) for i in range(self.report_list.count() - 1, -1, -1)]
        items.reverse()
        ours = sorted((it for it in items if key_of(it) in rank), key=lambda it: rank[key_of(it)])
        others = iter([it for it in items if key_of(it) not in rank])
        ours_iter = iter(ours)
        for it in items:  # the group's slots, in rank order; the other reports stay where they were
            self.report_list.addItem(next(ours_iter) if key_of(it) in rank else next(others))
        self.reports.reorder([self.report_list.item(i).data(Qt.ItemDataRole.UserRole)
                              for i in range(self.report_list.count())])
        if ours:
            self.reports.set_current(ours[0].data(Qt.ItemDataRole.UserRole))

    def _on_load_done(self, key: str) -> None:
        job = self._jobs.pop(key, None)
        self._interactive.pop(key, None)
        if job is not None:
            job.deleteLater()
        self._finish_group(key)
        if not self._jobs:
            self._hide_busy()
            self.sig_idle.emit()

    def _show_busy(self, msg: str) -> None:
        self.progress_label.setText(msg)
        for w in (self.progress_label, self.progress, self.cancel_button):
            w.show()

    def _hide_busy(self) -> None:
        for w in (self.progress_label, self.progress, self.cancel_button):
            w.hide()

    # -- the open-reports model ------------------------------------------------------------------------
    def _on_report_added(self, report: LoadedReport) -> None:
        item = QListWidgetItem(report.name)
        item.setToolTip(str(report.path))
        item.setData(Qt.ItemDataRole.UserRole, report)
        self.report_list.addItem(item)

    def _on_report_removed(self, report: LoadedReport) -> None:
        self._report_keys.pop(id(report), None)
        for i in range(self.report_list.count()):
            if self.report_list.item(i).data(Qt.ItemDataRole.UserRole) is report:
                self.report_list.takeItem(i)
                break

    def _on_current_changed(self, report: LoadedReport | None) -> None:
        for i in range(self.report_list.count()):
            item = self.report_list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) is report:
                if self.report_list.currentItem() is not item:
                    self.report_list.setCurrentItem(item)
                break
        if report is None:
            self.setWindowTitle(APP_NAME)
            self.center.setCurrentWidget(self.welcome)
        else:
            self.setWindowTitle(f"{APP_NAME} — {report.name}")
            self.center.setCurrentWidget(self.tabs)
            self.set_view(self.current_view())
        self._update_actions()

    def _on_list_selection(self, item: QListWidgetItem | None, _prev: Any = None) -> None:
        if item is not None:
            self.reports.set_current(item.data(Qt.ItemDataRole.UserRole))

    def _on_tab_changed(self, index: int) -> None:
        if 0 <= index < len(VIEWS):
            key = list(VIEWS)[index]
            if key in self._pending:  # a tab clicked before its view was built: build it now
                self._build_view(key)
            self.view_actions[key].setChecked(True)

    def _update_actions(self) -> None:
        has = self.reports.current is not None
        self.act_close.setEnabled(has)

    # -- Qt events ---------------------------------------------------------------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        md = event.mimeData()
        if md.hasUrls() and any(u.isLocalFile() for u in md.urls()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.open_paths(paths, interactive=True)
        else:
            event.ignore()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.sync()
        self.shutdown()
        for rep in list(self.reports.reports):
            try:
                rep.trace.close()
            except Exception:  # noqa: BLE001
                pass
        super().closeEvent(event)


def _action(text: str, parent: QWidget, slot: Callable[[], object],
            shortcut: QKeySequence | None = None) -> QAction:
    act = QAction(text, parent)
    if shortcut is not None:
        act.setShortcut(shortcut)
    act.triggered.connect(slot)
    return act


def _fmt_ms(ns: int) -> str:
    from gui.format import duration

    return duration(ns)


__all__ = ["MainWindow", "VIEWS"]
