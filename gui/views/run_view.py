"""Run view: launch a benchmark / nsys / ncu session here or on an SSH host, watch it, open its report.

The form becomes a :class:`engine.sessions.spec.SessionSpec` through
:func:`gui.views.run_form.spec_from_form`, a pure function of a :class:`~gui.views.run_form.FormValues`
(no Qt; tested without widgets). Start runs :func:`engine.sessions.runner.run_session` in a
:class:`~gui.workers.run.RunWorker` on a QThread. The runner calls ``on_line`` on that thread for every
output line; the worker only appends it to a locked buffer and emits ``sig_lines`` when the buffer goes
from empty to non-empty, and the view drains the whole buffer at most every :data:`DRAIN_MS` (one
``appendPlainText`` per batch, at most :data:`MAX_LINES_PER_DRAIN` lines shown per batch), so a program
printing thousands of lines a second cannot flood the event loop. Cancel sets the session's cancel
Event: the runner kills the program's process group and returns a ``cancelled`` outcome, which arrives
like any other outcome.

The defaults come from the doctor's GPU checks (device=cuda and telemetry only where there is a GPU),
read in a worker thread when the view is built; the working directory starts at the last one used.
Below the log, :class:`~gui.views.run_sessions.SessionsPanel` lists past sessions.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QPlainTextEdit,
    QProgressBar,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.system.errors import KernelscopeError
from gui.documents import OpenReports
from gui.format import seconds_text
from gui.views.base import ReportView
from gui.views.run_form import (
    FormValues,
    defaults_from_doctor,
    quote_command,
    reports_to_open,
    spec_from_form,
)
from gui.views.run_form_panel import RunFormPanel
from gui.views.run_sessions import ERROR_STYLE, OUTCOME_STYLE, SessionsPanel
from gui.widgets.labels import WrapLabel
from gui.workers.jobs import CallWorker, Job
from gui.workers.run import RunWorker, doctor_text, gpu_checks

if TYPE_CHECKING:
    from engine.sessions.outcome import Outcome

DRAIN_MS = 50  # the log is appended at most 20 times a second
MAX_LINES_PER_DRAIN = 2000  # a burst beyond this shows its last lines (session.log has them all)
LOG_MAX_BLOCKS = 20_000



class RunView(ReportView):
    """The Run tab: session form, live log with progress, outcome, and the sessions browser.

    ``sig_ready``: the sessions list is loaded (used by --screenshot).
    """

    key = "run"
    sig_open_report = Signal(str)
    sig_session_finished = Signal(object)  # Outcome

    def __init__(self, reports: OpenReports | None = None, parent: QWidget | None = None,
                 settings: QSettings | None = None) -> None:
        super().__init__(reports, parent, title_size=None, margins=(8, 8, 8, 8))
        self._job: Job | None = None
        self._worker: RunWorker | None = None
        self._aux: list[Job] = []
        self._defaults_job: Job | None = None
        self._closed = False  # after shutdown() nothing new is started
        self._t0 = 0.0
        self.last_outcome: Outcome | None = None
        self.outcome_kind = ""

        if settings is None:
            from gui import settings as gsettings

            settings = gsettings.make_settings()
        self.form = RunFormPanel(settings)
        self.form.sig_start.connect(self.start)
        self.form.sig_cancel.connect(self.cancel)
        self.form.sig_doctor.connect(self.run_doctor)
        self.form_scroll = QScrollArea()
        self.form_scroll.setWidgetResizable(True)
        self.form_scroll.setFrameShape(QFrame.Shape.NoFrame)
        # The form fits its column (combo boxes shrink, long texts wrap): it scrolls only vertically.
        self.form_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.form_scroll.setWidget(self.form)
        self.form_scroll.setMinimumWidth(380)
        self._build_right()
        self.split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(self.form_scroll, 1)
        # why there is no GPU (device=cpu, no telemetry) stays in view under the form, whole: at the
        # end of the scrolled form it was cut off by the viewport's edge
        lv.addWidget(self.form.defaults_note)
        lv.addWidget(self.form.button_bar)
        self.split.addWidget(left)
        self.split.addWidget(self.right)
        self.split.setStretchFactor(0, 0)
        self.split.setStretchFactor(1, 1)
        self.split.setCollapsible(0, False)
        self.split.setSizes([440, 1000])
        lay = self.vbox
        # The form's pages change height; the view's own minimum size must not follow them (a
        # top-level view would then resize its window, which offscreen Qt warns about).
        lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        lay.addWidget(self.split)

        self.drain_timer = QTimer(self)
        self.drain_timer.setSingleShot(True)
        self.drain_timer.setInterval(DRAIN_MS)
        self.drain_timer.timeout.connect(self._drain)
        self.clock = QTimer(self)
        self.clock.setInterval(250)
        self.clock.timeout.connect(self._tick)

        for seq in ("Ctrl+Return", "Ctrl+Enter"):
            sc = QShortcut(QKeySequence(seq), self)
            sc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            sc.activated.connect(self.start)
        esc = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        esc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        esc.activated.connect(self.cancel)
        self._set_running(False)
        self.refresh_sessions()
        self._read_defaults()

    # -- construction ------------------------------------------------------------------------------
    def _build_right(self) -> None:
        self.right = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        tv = QVBoxLayout(top)
        tv.setContentsMargins(8, 0, 0, 0)
        head = QHBoxLayout()
        self.outcome_icon = QLabel()
        self.outcome_icon.setFixedSize(22, 22)
        self.outcome_label = WrapLabel("No session started yet. Fill in the form and press Start "
                                       "(Ctrl+Enter).")
        self.outcome_label.setObjectName("runOutcome")
        head.addWidget(self.outcome_icon, 0, Qt.AlignmentFlag.AlignTop)
        head.addWidget(self.outcome_label, 1)
        tv.addLayout(head)
        prow = QHBoxLayout()
        self.phase_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)
        self.progress.hide()  # an empty bar before the first session reads as something stuck
        self.elapsed_label = QLabel("")
        self.elapsed_label.setMinimumWidth(80)
        self.elapsed_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        prow.addWidget(self.phase_label)
        prow.addWidget(self.progress, 1)
        prow.addWidget(self.elapsed_label)
        tv.addLayout(prow)
        self.log = QPlainTextEdit()
        self.log.setObjectName("runLog")
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(LOG_MAX_BLOCKS)
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        font = self.log.font()
        font.setFamily("DejaVu Sans Mono")
        self.log.setFont(font)
        self.log.setPlaceholderText("The session's output appears here as it runs.")
        tv.addWidget(self.log, 1)
        self.right.addWidget(top)

        self.sessions_panel = SessionsPanel()
        self.sessions_panel.sig_open_report.connect(self.sig_open_report)
        self.sessions_panel.sig_message.connect(self.sig_message)
        self.sessions_panel.sig_show_log.connect(self.log.setPlainText)
        self.sessions_panel.sig_loaded.connect(self.sig_ready)
        self.right.addWidget(self.sessions_panel)
        self.right.setSizes([560, 340])

    # -- form ------------------------------------------------------------------------------------
    def set_workload(self, name: str, **params: str) -> None:
        """Choose a workload and set some of its parameters (for scripts and tests)."""
        self.form.set_workload(name, **params)

    def set_command(self, argv: list[str] | str) -> None:
        """Choose 'Command line' and fill it (a list is quoted for the shell-like split)."""
        self.form.set_command(argv)

    def set_tool(self, tool: str) -> None:
        self.form.set_tool(tool)

    def form_values(self) -> FormValues:
        return self.form.form_values()

    def show_error(self, text: str) -> None:
        self.form.show_error(text)

    # -- defaults from the doctor ------------------------------------------------------------------
    def _read_defaults(self) -> None:
        job = Job(CallWorker(gpu_checks), self)
        self._defaults_job = job
        job.sig_finished.connect(lambda checks: self.form.apply_defaults(defaults_from_doctor(checks)))
        job.sig_done.connect(self._on_defaults_done)
        job.start()

    def _on_defaults_done(self) -> None:
        job, self._defaults_job = self._defaults_job, None
        if job is not None:
            job.deleteLater()

    # -- running -----------------------------------------------------------------------------------
    def is_running(self) -> bool:
        return self._job is not None

    def is_busy(self) -> bool:
        """True while the sessions list or the doctor's defaults are being read."""
        return self.sessions_panel.is_busy() or self._defaults_job is not None

    @Slot()
    def start(self) -> bool:
        """Validate the form and start the session; False (with the reason shown) if it cannot."""
        if self._job is not None or self._closed:
            return False
        try:
            spec = spec_from_form(self.form_values())
        except KernelscopeError as exc:
            self.show_error(str(exc))
            return False
        self.show_error("")
        if spec.cwd:
            self.form.remember_cwd(spec.cwd)  # the next start offers it again
        self.log.clear()
        self.last_outcome = None
        worker = RunWorker(spec)
        job = Job(worker, self)
        self._job, self._worker = job, worker
        worker.sig_lines.connect(self._on_lines)
        job.sig_finished.connect(self._on_finished)
        job.sig_errored.connect(self._on_errored)
        job.sig_done.connect(self._on_done)
        what = spec.workload or quote_command(list(spec.command))
        where = "this machine" if spec.target.is_local else spec.target.host
        self._set_outcome("running", f"Running {what} ({spec.tool}) on {where}…")
        self.sig_message.emit(f"Run: started {what} ({spec.tool}) on {where}.")
        self._t0 = time.monotonic()
        self.progress.setRange(0, 0)
        self.progress.setTextVisible(True)
        self.phase_label.setText("starting")
        self._set_running(True)
        self.progress.show()
        self.clock.start()
        job.start()
        return True

    @Slot()
    def cancel(self) -> None:
        if self._job is not None:
            self._job.cancel()
            self.phase_label.setText("cancelling…")

    def _set_running(self, running: bool) -> None:
        self.form.set_running(running)

    @Slot()
    def _on_lines(self) -> None:
        if not self.drain_timer.isActive():
            self.drain_timer.start()

    @Slot()
    def _drain(self) -> None:
        if self._worker is None:
            return
        lines = self._worker.take_lines()
        if not lines:
            return
        shown = lines[-MAX_LINES_PER_DRAIN:]
        skipped = len(lines) - len(shown)
        text = [f"… {skipped} lines not shown here (all are in session.log) …"] if skipped else []
        text += [_line_text(ln) for ln in shown]
        self.log.appendPlainText("\n".join(text))
        self._show_progress(lines[-1].progress)

    def _show_progress(self, prog: Any) -> None:
        self.phase_label.setText(prog.phase)
        if prog.fraction is None:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(min(prog.fraction, 1.0) * 1000))

    @Slot()
    def _tick(self) -> None:
        if self._job is not None:
            self.elapsed_label.setText(seconds_text(time.monotonic() - self._t0))
            # A quiet program: the runner still reports elapsed / expected every ~0.5 s.
            prog = getattr(self._worker, "last_progress", None)
            if prog is not None:
                self._show_progress(prog)

    @Slot(object)
    def _on_finished(self, outcome: Any) -> None:
        self._drain()
        self.last_outcome = outcome
        text = outcome.message
        if outcome.notes:
            text += " " + " ".join(outcome.notes)
        self._set_outcome(outcome.kind.value, text)
        self.elapsed_label.setText(seconds_text(outcome.duration_s))
        self.progress.setRange(0, 1000)
        self.progress.setValue(1000 if outcome.ok else self.progress.value())
        self.phase_label.setText(outcome.kind.value.replace("_", " "))
        self.sig_message.emit(f"Run: {outcome.message}")
        self.sig_session_finished.emit(outcome)
        for rep in reports_to_open(outcome.reports):  # every rank's report of a per-rank job
            self.sig_open_report.emit(str(rep))

    @Slot(str)
    def _on_errored(self, msg: str) -> None:
        self._drain()
        self._set_outcome("error", msg)
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.phase_label.setText("not started")
        self.sig_message.emit(f"Run: {msg}")

    @Slot()
    def _on_done(self) -> None:
        job = self._job
        self._job, self._worker = None, None
        self.clock.stop()
        self.drain_timer.stop()
        self._set_running(False)
        if job is not None:
            job.deleteLater()
        self.refresh_sessions()

    def _set_outcome(self, kind: str, text: str) -> None:
        color, icon = OUTCOME_STYLE.get(kind, ERROR_STYLE)
        self.outcome_kind = kind
        self.outcome_label.setText(text)
        self.outcome_label.setStyleSheet(f"color: {color}; font-weight: 600;")
        self.outcome_icon.setPixmap(self.style().standardIcon(icon).pixmap(20, 20))

    # -- doctor ------------------------------------------------------------------------------------
    @Slot()
    def run_doctor(self) -> None:
        """Run the doctor for the chosen target in a worker thread; its table goes to the log."""
        if self._closed:
            return
        target = None
        if self.form.target_combo.currentData() == "ssh":
            try:
                target = spec_from_form(self.form_values()).target.ssh_target()
            except KernelscopeError as exc:
                self.show_error(str(exc))
                return
        self.form.doctor_button.setEnabled(False)
        self.log.appendPlainText("[kernelscope] running the doctor…")
        job = Job(CallWorker(doctor_text, target), self)
        job.sig_finished.connect(self._on_doctor_result)
        job.sig_errored.connect(self._on_doctor_result)
        job.sig_done.connect(lambda j=job: self._aux_done(j))
        self._aux.append(job)
        job.start()

    @Slot(object)
    def _on_doctor_result(self, text: object) -> None:
        self.log.appendPlainText(str(text))

    def _aux_done(self, job: Job) -> None:
        if job in self._aux:
            self._aux.remove(job)
        job.deleteLater()
        self.form.doctor_button.setEnabled(True)

    # -- sessions browser --------------------------------------------------------------------------
    @Slot()
    def refresh_sessions(self) -> None:
        """Re-read the session store in a worker thread."""
        if not self._closed:
            self.sessions_panel.refresh()

    # -- teardown ----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Cancel a running session (its process group is killed) and join every thread."""
        self._closed = True
        self.clock.stop()
        self.drain_timer.stop()
        for job in [self._job, self._defaults_job, *self._aux]:
            if job is not None:
                job.stop(30_000)
        self._job = self._worker = self._defaults_job = None
        self._aux = []
        self.sessions_panel.stop()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)


def _line_text(ln: Any) -> str:
    if ln.stream == "kernelscope":
        return f"[kernelscope] {ln.text}"
    return str(ln.text)


__all__ = ["RunView"]
