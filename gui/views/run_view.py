"""Run view: launch a benchmark / nsys / ncu session here or on an SSH host, watch it, open its report.

The form becomes a :class:`engine.sessions.spec.SessionSpec` through :func:`spec_from_form`, a pure
function of a :class:`FormValues` (tested without widgets). Start runs
:func:`engine.sessions.runner.run_session` in a :class:`RunWorker` on a QThread. The runner calls
``on_line`` on that thread for every output line; the worker only appends it to a locked buffer and
emits ``sig_lines`` when the buffer goes from empty to non-empty, and the view drains the whole
buffer at most every :data:`DRAIN_MS` (one ``appendPlainText`` per batch, at most
:data:`MAX_LINES_PER_DRAIN` lines shown per batch), so a program printing thousands of lines a
second cannot flood the event loop. Cancel sets the session's cancel Event: the runner kills the
program's process group and returns a ``cancelled`` outcome, which arrives like any other outcome.

Below the log, the sessions browser lists the :class:`~engine.sessions.store.SessionStore` (read in
a worker thread); double-click opens a session's report, "Show log" shows its ``session.log``.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QCloseEvent, QColor, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLayout,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.system.errors import KernelscopeError
from gui.documents import OpenReports
from gui.views.common import WrapLabel, heading
from gui.workers import CallWorker, Job, Worker

DRAIN_MS = 50  # the log is appended at most 20 times a second
MAX_LINES_PER_DRAIN = 2000  # a burst beyond this shows its last lines (session.log has them all)
LOG_MAX_BLOCKS = 20_000
SESSIONS_SHOWN = 200
NSYS_TRACE_CHOICES = ("cuda", "nvtx", "osrt", "cublas", "cudnn", "cusparse")
NCU_SETS = ("full", "detailed", "basic", "roofline", "(ncu default)")
TOOL_LABELS = {"bench": "Benchmark only (no profiler)", "nsys": "Nsight Systems (nsys)",
               "ncu": "Nsight Compute (ncu)"}
#: outcome kind -> (colour, QStyle standard icon)
OUTCOME_STYLE: dict[str, tuple[str, QStyle.StandardPixmap]] = {
    "success": ("#1e7b34", QStyle.StandardPixmap.SP_DialogApplyButton),
    "cancelled": ("#8a6d00", QStyle.StandardPixmap.SP_MessageBoxWarning),
    "timeout": ("#a35c00", QStyle.StandardPixmap.SP_MessageBoxWarning),
    "running": ("#1f5fa8", QStyle.StandardPixmap.SP_BrowserReload),
}
ERROR_STYLE = ("#b03a2e", QStyle.StandardPixmap.SP_MessageBoxCritical)


class RunFormError(KernelscopeError):
    """The Run form has a value that cannot become a session."""


@dataclass(frozen=True)
class FormValues:
    """What the Run form holds, as plain values (strings where the user types text)."""

    target: str = "local"  # local | ssh
    host: str = ""
    user: str = ""
    port: int = 0  # 0: ssh's default
    identity_file: str = ""
    known_hosts: str = ""  # empty: ssh's own (~/.ssh/known_hosts)
    remote_dir: str = ""  # empty: ~/.kernelscope/sessions on the host
    what: str = "workload"  # workload | command
    workload: str = ""
    params: dict[str, str] = field(default_factory=dict)
    command: str = ""
    tool: str = "bench"
    nsys_trace: tuple[str, ...] = ("cuda", "nvtx", "osrt")
    nsys_cuda_memory: bool = False
    nsys_gpu_metrics: bool = False
    nsys_gpu_metrics_devices: str = "all"
    ncu_set: str = "full"
    ncu_kernel: str = ""
    ncu_launch_count: int = 0  # 0: every launch
    ncu_clock_control: str = "none"
    out_dir: str = ""
    timeout_s: float = 3600.0  # 0: none
    telemetry: bool = True  # record GPU telemetry beside the reports (said in the log when unavailable)


def spec_from_form(v: FormValues) -> Any:
    """The :class:`~engine.sessions.spec.SessionSpec` for the form's values (pure).

    The command line is split like a POSIX shell would split it (``shlex``) but never run by a
    shell. Workload parameters equal to their defaults are left out of the spec.

    Raises:
        KernelscopeError: one sentence naming the field to fix.
    """
    from engine.sessions.spec import NcuOptions, NsysOptions, SessionSpec, TargetSpec

    if v.target == "ssh":
        host = v.host.strip()
        if not host:
            raise RunFormError("Enter the SSH host name (or choose This machine).")
        if any(c.isspace() for c in host) or host.startswith("-"):
            raise RunFormError(f"The SSH host {host!r} is not a valid host name.")
        ident = v.identity_file.strip()
        if ident and not Path(ident).expanduser().is_file():
            raise RunFormError(f"The identity file {ident} does not exist; choose an existing key file or "
                               "leave it empty.")
        known = v.known_hosts.strip()
        if known and not Path(known).expanduser().is_file():
            raise RunFormError(f"The known-hosts file {known} does not exist; choose an existing file or "
                               "leave it empty.")
        target = TargetSpec(host=host, user=v.user.strip() or None, port=v.port or None,
                            identity_file=ident or None, known_hosts=known or None,
                            remote_dir=v.remote_dir.strip() or TargetSpec.remote_dir)
    else:
        target = TargetSpec()
    command: tuple[str, ...] = ()
    workload: str | None = None
    params: dict[str, str] = {}
    if v.what == "command":
        try:
            command = tuple(shlex.split(v.command))
        except ValueError as exc:
            raise RunFormError(f"The command line cannot be split into words ({exc}); check its quotes.") \
                from exc
        if not command:
            raise RunFormError("Enter a command line to run (for example: python3 train.py --steps 10).")
    else:
        from kernels.registry import get_workload

        if not v.workload:
            raise RunFormError("Choose a workload to run.")
        w = get_workload(v.workload)
        for k, val in v.params.items():
            val = val.strip()
            if not val:
                raise RunFormError(f"Parameter {k} of {w.name} is empty; enter a value (default "
                                   f"{w.params.get(k, '?')}).")
            if val != w.params.get(k):
                params[k] = val
        w.resolve(params)  # unknown names, values outside their choices: one sentence
        workload = w.name
    out_dir = v.out_dir.strip()
    if not out_dir:
        raise RunFormError("Choose an output folder for the session's log and reports.")
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise RunFormError(f"The output folder {out} is a file; choose a folder.")
    if v.timeout_s < 0:
        raise RunFormError("The timeout must be zero (none) or a positive number of seconds.")
    metrics = v.nsys_gpu_metrics_devices.strip() if v.nsys_gpu_metrics else None
    if v.nsys_gpu_metrics and not metrics:
        raise RunFormError("Enter the GPUs to sample metrics on (all, or indices like 0,1).")
    if v.tool == "nsys" and not v.nsys_trace:
        raise RunFormError("Choose at least one API to trace with nsys.")
    ncu_set = None if v.ncu_set.startswith("(") else v.ncu_set
    spec = SessionSpec(
        tool=v.tool, command=command, workload=workload, params=params, out_dir=str(out),
        timeout_s=v.timeout_s or None, target=target, telemetry=v.telemetry,
        nsys=NsysOptions(trace=tuple(v.nsys_trace), cuda_memory_usage=v.nsys_cuda_memory,
                         gpu_metrics_devices=metrics),
        ncu=NcuOptions(set=ncu_set, kernel_name=v.ncu_kernel.strip() or None,
                       launch_count=v.ncu_launch_count or None, clock_control=v.ncu_clock_control),
    )
    return spec.validate()


def report_to_open(reports: tuple[Path, ...] | list[Path]) -> Path | None:
    """Which of a session's reports to open: the SQLite export (opens without nsys), else the first
    report that is not a raw ``.qdstrm`` stream."""
    usable = [Path(p) for p in reports if not str(p).endswith(".qdstrm")]
    sqlite = [p for p in usable if p.suffix == ".sqlite"]
    return (sqlite or usable)[0] if usable else None


def default_out_dir() -> Path:
    """Sessions go under Kernelscope's data dir unless the user picks another folder."""
    from engine.sessions.store import data_root

    return data_root() / "sessions"


class RunWorker(Worker):
    """Runs one session; output lines are buffered for the GUI thread to drain."""

    sig_lines = Signal()  # the buffer went from empty to non-empty

    def __init__(self, spec: Any) -> None:
        super().__init__()
        self.spec = spec
        self.session_cancel = threading.Event()
        self._lock = threading.Lock()
        self._buf: deque[Any] = deque()
        self.dropped = 0
        #: the runner's latest progress estimate (also sent while the program prints nothing)
        self.last_progress: Any = None

    def cancel(self) -> None:
        # Not the worker's own cancel flag: the runner must return its 'cancelled' outcome,
        # which then reaches the view through sig_finished like any other outcome.
        self.session_cancel.set()

    def _on_line(self, line: Any) -> None:
        with self._lock:
            was_empty = not self._buf
            self._buf.append(line)
        if was_empty:
            self.sig_lines.emit()

    def take_lines(self) -> list[Any]:
        """Everything buffered so far (called from the GUI thread)."""
        with self._lock:
            out = list(self._buf)
            self._buf.clear()
        return out

    def work(self) -> Any:
        from engine.sessions.runner import run_session

        return run_session(self.spec, on_line=self._on_line, cancel=self.session_cancel,
                           on_progress=self._on_progress)

    def _on_progress(self, progress: Any) -> None:
        self.last_progress = progress  # read by the view's 1 s tick; a reference swap needs no lock


def _list_sessions(limit: int) -> list[Any]:
    from engine.sessions.store import SessionStore, data_root

    if not (data_root() / "sessions.sqlite").exists():
        return []  # looking must not create the store; the first session does
    return SessionStore().list(limit=limit)


def _doctor(target: Any) -> str:
    from engine.sessions import doctor

    if target is None:
        return "Doctor (this machine):\n" + doctor.format_checks(doctor.run_doctor())
    return f"Doctor ({target.display}):\n" + doctor.format_checks(doctor.run_remote_doctor(target))


class RunView(QWidget):
    """The Run tab: session form, live log with progress, outcome, and the sessions browser."""

    sig_open_report = Signal(str)
    sig_message = Signal(str)
    sig_session_finished = Signal(object)  # Outcome
    sig_ready = Signal()  # the sessions list is loaded (used by --screenshot)

    def __init__(self, reports: OpenReports | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.reports = reports
        self._job: Job | None = None
        self._worker: RunWorker | None = None
        self._aux: list[Job] = []
        self._list_job: Job | None = None
        self._list_again = False
        self._closed = False  # after shutdown() nothing new is started
        self._t0 = 0.0
        self.last_outcome: Any = None
        self.records: list[Any] = []
        self._param_widgets: dict[str, QWidget] = {}

        self._build_form()
        self._build_right()
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.form_scroll)
        split.addWidget(self.right)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([470, 1000])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        # The form's pages change height; the view's own minimum size must not follow them (a
        # top-level view would then resize its window, which offscreen Qt warns about).
        lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        lay.addWidget(split)

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

    # -- construction ------------------------------------------------------------------------------
    def _build_form(self) -> None:
        form = QWidget()
        v = QVBoxLayout(form)
        v.setContentsMargins(0, 0, 8, 0)
        v.addWidget(heading("New session"))

        # where
        g = QGroupBox("Target")
        f = QFormLayout(g)
        self.target_combo = QComboBox()
        self.target_combo.addItem("This machine", "local")
        self.target_combo.addItem("SSH host", "ssh")
        f.addRow("Run on", self.target_combo)
        self.host_edit = QLineEdit()
        self.host_edit.setPlaceholderText("gpu-box.example.org")
        self.user_edit = QLineEdit()
        self.user_edit.setPlaceholderText("(your login name)")
        self.port_spin = QSpinBox()
        self.port_spin.setRange(0, 65535)
        self.port_spin.setSpecialValueText("default (22)")
        self.ident_edit = QLineEdit()
        self.ident_edit.setPlaceholderText("(ssh's default keys)")
        ident_row = _with_button(self.ident_edit, "…", self._browse_identity)
        self.known_edit = QLineEdit()
        self.known_edit.setPlaceholderText("(ssh's default)")
        self.remote_dir_edit = QLineEdit()
        self.remote_dir_edit.setPlaceholderText("~/.kernelscope/sessions")
        self.ssh_box = QWidget()
        sf = QFormLayout(self.ssh_box)
        sf.setContentsMargins(0, 0, 0, 0)
        sf.addRow("Host", self.host_edit)
        sf.addRow("User", self.user_edit)
        sf.addRow("Port", self.port_spin)
        sf.addRow("Identity file", ident_row)
        sf.addRow("Known hosts", self.known_edit)
        sf.addRow("Remote folder", self.remote_dir_edit)
        f.addRow(self.ssh_box)
        self.target_combo.currentIndexChanged.connect(self._on_target_changed)
        v.addWidget(g)

        # what
        g = QGroupBox("What to run")
        wv = QVBoxLayout(g)
        row = QHBoxLayout()
        self.radio_workload = QRadioButton("kernels/ workload")
        self.radio_command = QRadioButton("Command line")
        self.what_group = QButtonGroup(self)
        self.what_group.addButton(self.radio_workload)
        self.what_group.addButton(self.radio_command)
        self.radio_workload.setChecked(True)
        row.addWidget(self.radio_workload)
        row.addWidget(self.radio_command)
        row.addStretch(1)
        wv.addLayout(row)
        self.what_stack = _Pages()
        wl = QWidget()
        wlv = QVBoxLayout(wl)
        wlv.setContentsMargins(0, 0, 0, 0)
        self.workload_combo = QComboBox()
        self.workload_desc = WrapLabel("", muted=True)
        self.params_box = QWidget()
        self.params_form = QFormLayout(self.params_box)
        self.params_form.setContentsMargins(0, 0, 0, 0)
        wlv.addWidget(self.workload_combo)
        wlv.addWidget(self.workload_desc)
        wlv.addWidget(self.params_box)
        self.what_stack.addWidget(wl)
        cl = QWidget()
        clv = QVBoxLayout(cl)
        clv.setContentsMargins(0, 0, 0, 0)
        self.command_edit = QLineEdit()
        self.command_edit.setPlaceholderText("python3 train.py --steps 10")
        clv.addWidget(self.command_edit)
        clv.addWidget(WrapLabel("Split into words like a shell would (quotes work), but run without a shell.",
                                muted=True))
        self.what_stack.addWidget(cl)
        wv.addWidget(self.what_stack)
        self.radio_workload.toggled.connect(lambda on: _show_page(self.what_stack, 0 if on else 1))
        self._fill_workloads()
        self.workload_combo.currentIndexChanged.connect(self._on_workload_changed)
        v.addWidget(g)

        # tool
        g = QGroupBox("Tool")
        tv = QVBoxLayout(g)
        self.tool_combo = QComboBox()
        for key, label in TOOL_LABELS.items():
            self.tool_combo.addItem(label, key)
        tv.addWidget(self.tool_combo)
        self.tool_stack = _Pages()
        self.tool_stack.addWidget(WrapLabel("Runs the program as is, timed, with its output kept.",
                                            muted=True))
        nw = QWidget()
        nf = QFormLayout(nw)
        nf.setContentsMargins(0, 0, 0, 0)
        trace_row = QWidget()
        tr = QHBoxLayout(trace_row)
        tr.setContentsMargins(0, 0, 0, 0)
        self.trace_checks: dict[str, QCheckBox] = {}
        for t in NSYS_TRACE_CHOICES:
            cb = QCheckBox(t)
            cb.setChecked(t in ("cuda", "nvtx", "osrt"))
            self.trace_checks[t] = cb
            tr.addWidget(cb)
        tr.addStretch(1)
        nf.addRow("Trace", trace_row)
        self.cuda_mem_check = QCheckBox("CUDA memory usage")
        nf.addRow("", self.cuda_mem_check)
        self.gpu_metrics_check = QCheckBox("GPU metrics on")
        self.gpu_metrics_edit = QLineEdit("all")
        self.gpu_metrics_edit.setMaximumWidth(90)
        gm = QWidget()
        gml = QHBoxLayout(gm)
        gml.setContentsMargins(0, 0, 0, 0)
        gml.addWidget(self.gpu_metrics_check)
        gml.addWidget(self.gpu_metrics_edit)
        gml.addStretch(1)
        nf.addRow("", gm)
        self.tool_stack.addWidget(nw)
        cw = QWidget()
        cf = QFormLayout(cw)
        cf.setContentsMargins(0, 0, 0, 0)
        self.ncu_set_combo = QComboBox()
        self.ncu_set_combo.addItems(list(NCU_SETS))
        cf.addRow("Section set", self.ncu_set_combo)
        self.ncu_kernel_edit = QLineEdit()
        self.ncu_kernel_edit.setPlaceholderText("all kernels (or a name, regex:…)")
        cf.addRow("Kernel filter", self.ncu_kernel_edit)
        self.ncu_count_spin = QSpinBox()
        self.ncu_count_spin.setRange(0, 1_000_000)
        self.ncu_count_spin.setSpecialValueText("all launches")
        cf.addRow("Launch count", self.ncu_count_spin)
        self.ncu_clock_combo = QComboBox()
        self.ncu_clock_combo.addItem("none (GPU clocks as in real runs)", "none")
        self.ncu_clock_combo.addItem("base (lock to base clocks)", "base")
        cf.addRow("Clock control", self.ncu_clock_combo)
        self.tool_stack.addWidget(cw)
        tv.addWidget(self.tool_stack)
        self.tool_combo.currentIndexChanged.connect(lambda i: _show_page(self.tool_stack, i))
        _show_page(self.tool_stack, 0)
        _show_page(self.what_stack, 0)
        v.addWidget(g)

        # output
        g = QGroupBox("Output")
        of = QFormLayout(g)
        self.out_edit = QLineEdit(str(default_out_dir()))
        of.addRow("Folder", _with_button(self.out_edit, "…", self._browse_out))
        self.timeout_spin = QDoubleSpinBox()
        self.timeout_spin.setRange(0, 7 * 24 * 3600)
        self.timeout_spin.setDecimals(0)
        self.timeout_spin.setSuffix(" s")
        self.timeout_spin.setSpecialValueText("none")
        self.timeout_spin.setValue(3600)
        of.addRow("Timeout", self.timeout_spin)
        self.telemetry_check = QCheckBox("Record GPU telemetry (telemetry.csv, lines up with the report)")
        self.telemetry_check.setChecked(True)
        of.addRow("", self.telemetry_check)
        v.addWidget(g)

        self.error_label = WrapLabel("")
        self.error_label.setObjectName("runFormError")
        self.error_label.setStyleSheet("color: #b03a2e; font-weight: 600;")
        self.error_label.hide()
        v.addWidget(self.error_label)

        buttons = QHBoxLayout()
        self.start_button = QPushButton("Start")
        self.start_button.setToolTip("Start the session (Ctrl+Enter)")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the session and its processes (Esc)")
        self.cancel_button.clicked.connect(self.cancel)
        self.doctor_button = QPushButton("Doctor")
        self.doctor_button.setToolTip("Check which profilers, compilers and GPUs the target has")
        self.doctor_button.clicked.connect(self.run_doctor)
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        buttons.addWidget(self.doctor_button)
        v.addLayout(buttons)
        v.addStretch(1)

        self.form_scroll = QScrollArea()
        self.form_scroll.setWidgetResizable(True)
        self.form_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.form_scroll.setWidget(form)
        self.form_scroll.setMinimumWidth(420)
        self._on_target_changed()
        self._on_workload_changed()

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

        bottom = QWidget()
        bv = QVBoxLayout(bottom)
        bv.setContentsMargins(8, 4, 0, 0)
        brow = QHBoxLayout()
        brow.addWidget(heading("Sessions", 1))
        brow.addStretch(1)
        self.open_button = QPushButton("Open report")
        self.open_button.clicked.connect(self.open_selected)
        self.showlog_button = QPushButton("Show log")
        self.showlog_button.clicked.connect(self.show_selected_log)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh_sessions)
        for b in (self.open_button, self.showlog_button, self.refresh_button):
            brow.addWidget(b)
        bv.addLayout(brow)
        self.sessions = QTableWidget(0, 6)
        self.sessions.setObjectName("sessionsTable")
        self.sessions.setHorizontalHeaderLabels(["Date", "Tool", "Target", "Outcome", "Duration", "Report"])
        self.sessions.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.sessions.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.sessions.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.sessions.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)  # compact rows
        self.sessions.verticalHeader().hide()
        hh = self.sessions.horizontalHeader()
        for c in range(5):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(5, QHeaderView.ResizeMode.Stretch)
        self.sessions.cellDoubleClicked.connect(lambda r, _c: self.open_row(r))
        self.sessions.itemSelectionChanged.connect(self._update_session_buttons)
        self.sessions_note = QLabel("")
        bv.addWidget(self.sessions, 1)
        bv.addWidget(self.sessions_note)
        self.right.addWidget(bottom)
        self.right.setSizes([560, 340])
        self._update_session_buttons()

    def _fill_workloads(self) -> None:
        from kernels.registry import list_workloads

        self._workloads = {w.name: w for w in list_workloads()}
        for w in self._workloads.values():
            self.workload_combo.addItem(w.name, w.name)
            self.workload_combo.setItemData(self.workload_combo.count() - 1, w.description,
                                            Qt.ItemDataRole.ToolTipRole)

    # -- form ------------------------------------------------------------------------------------
    def _on_target_changed(self) -> None:
        self.ssh_box.setVisible(self.target_combo.currentData() == "ssh")

    def _on_workload_changed(self) -> None:
        while self.params_form.rowCount():
            self.params_form.removeRow(0)
        self._param_widgets = {}
        w = self._workloads.get(self.workload_combo.currentData() or "")
        if w is None:
            self.workload_desc.setText("")
            return
        self.workload_desc.setText(w.description)
        for k, default in w.params.items():
            editor: QWidget
            choices = w.choices.get(k)
            if choices:
                combo = QComboBox()
                combo.addItems(list(choices))
                combo.setCurrentText(default)
                editor = combo
            else:
                edit = QLineEdit(default)
                edit.setPlaceholderText(default)
                editor = edit
            editor.setToolTip(w.param_help.get(k, ""))
            editor.setObjectName(f"param_{k}")
            self._param_widgets[k] = editor
            self.params_form.addRow(k, editor)

    def set_workload(self, name: str, **params: str) -> None:
        """Choose a workload and set some of its parameters (for scripts and tests)."""
        self.radio_workload.setChecked(True)
        self.workload_combo.setCurrentIndex(self.workload_combo.findData(name))
        for k, val in params.items():
            wdg = self._param_widgets[k]
            if isinstance(wdg, QComboBox):
                wdg.setCurrentText(val)
            elif isinstance(wdg, QLineEdit):
                wdg.setText(val)

    def set_command(self, argv: list[str] | str) -> None:
        """Choose 'Command line' and fill it (a list is quoted for the shell-like split)."""
        self.radio_command.setChecked(True)
        self.command_edit.setText(argv if isinstance(argv, str) else quote_command(argv))

    def set_tool(self, tool: str) -> None:
        self.tool_combo.setCurrentIndex(self.tool_combo.findData(tool))

    def form_values(self) -> FormValues:
        params: dict[str, str] = {}
        for k, wdg in self._param_widgets.items():
            params[k] = wdg.currentText() if isinstance(wdg, QComboBox) else wdg.text()  # type: ignore[attr-defined]
        return FormValues(
            target=self.target_combo.currentData(), host=self.host_edit.text(), user=self.user_edit.text(),
            port=self.port_spin.value(), identity_file=self.ident_edit.text(),
            known_hosts=self.known_edit.text(), remote_dir=self.remote_dir_edit.text(),
            what="workload" if self.radio_workload.isChecked() else "command",
            workload=self.workload_combo.currentData() or "", params=params,
            command=self.command_edit.text(), tool=self.tool_combo.currentData(),
            nsys_trace=tuple(t for t, cb in self.trace_checks.items() if cb.isChecked()),
            nsys_cuda_memory=self.cuda_mem_check.isChecked(),
            nsys_gpu_metrics=self.gpu_metrics_check.isChecked(),
            nsys_gpu_metrics_devices=self.gpu_metrics_edit.text(),
            ncu_set=self.ncu_set_combo.currentText(), ncu_kernel=self.ncu_kernel_edit.text(),
            ncu_launch_count=self.ncu_count_spin.value(),
            ncu_clock_control=self.ncu_clock_combo.currentData(),
            out_dir=self.out_edit.text(), timeout_s=self.timeout_spin.value(),
            telemetry=self.telemetry_check.isChecked(),
        )

    def _browse_out(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Output folder", self.out_edit.text())
        if d:
            self.out_edit.setText(d)

    def _browse_identity(self) -> None:
        f, _ = QFileDialog.getOpenFileName(self, "SSH identity file", str(Path.home() / ".ssh"))
        if f:
            self.ident_edit.setText(f)

    def show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    # -- running -----------------------------------------------------------------------------------
    def is_running(self) -> bool:
        return self._job is not None

    def is_busy(self) -> bool:
        """True while the sessions list is being read (the screenshot waits for it)."""
        return self._list_job is not None

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
        self.clock.start()
        job.start()
        return True

    @Slot()
    def cancel(self) -> None:
        if self._job is not None:
            self._job.cancel()
            self.phase_label.setText("cancelling…")

    def _set_running(self, running: bool) -> None:
        self.start_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)

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
            self.elapsed_label.setText(_fmt_s(time.monotonic() - self._t0))
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
        self.elapsed_label.setText(_fmt_s(outcome.duration_s))
        self.progress.setRange(0, 1000)
        self.progress.setValue(1000 if outcome.ok else self.progress.value())
        self.phase_label.setText(outcome.kind.value.replace("_", " "))
        self.sig_message.emit(f"Run: {outcome.message}")
        self.sig_session_finished.emit(outcome)
        rep = report_to_open(outcome.reports)
        if rep is not None:
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
        if self.target_combo.currentData() == "ssh":
            try:
                target = spec_from_form(self.form_values()).target.ssh_target()
            except KernelscopeError as exc:
                self.show_error(str(exc))
                return
        self.doctor_button.setEnabled(False)
        self.log.appendPlainText("[kernelscope] running the doctor…")
        job = Job(CallWorker(_doctor, target), self)
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
        self.doctor_button.setEnabled(True)

    # -- sessions browser --------------------------------------------------------------------------
    @Slot()
    def refresh_sessions(self) -> None:
        """Re-read the session store in a worker thread."""
        if self._closed:
            return
        if self._list_job is not None:
            self._list_again = True
            return
        job = Job(CallWorker(_list_sessions, SESSIONS_SHOWN), self)
        self._list_job = job
        job.sig_finished.connect(self._on_sessions)
        job.sig_errored.connect(self._on_sessions_error)
        job.sig_done.connect(self._on_list_done)
        job.start()

    @Slot(object)
    def _on_sessions(self, records: object) -> None:
        assert isinstance(records, list)
        self.records = records
        t = self.sessions
        t.setSortingEnabled(False)
        t.setRowCount(len(records))
        for r, rec in enumerate(records):
            rep = report_to_open(rec.reports)
            kind = rec.kind or rec.state
            cells = [
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.created)), rec.tool, rec.target,
                kind.replace("_", " "), _fmt_s(rec.duration_s) if rec.duration_s is not None else "",
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
        self.sessions_note.setText(
            "No sessions yet." if not records else
            f"{len(records)} session{'s' if len(records) != 1 else ''} (newest first); double-click one to "
            "open its report.")
        self._update_session_buttons()

    @Slot(str)
    def _on_sessions_error(self, msg: str) -> None:
        self.sessions_note.setText(msg)

    @Slot()
    def _on_list_done(self) -> None:
        job = self._list_job
        self._list_job = None
        if job is not None:
            job.deleteLater()
        if self._list_again:
            self._list_again = False
            self.refresh_sessions()
        else:
            self.sig_ready.emit()

    def _selected_row(self) -> int | None:
        rows = self.sessions.selectionModel().selectedRows()
        return rows[0].row() if rows else None

    def _update_session_buttons(self) -> None:
        r = self._selected_row()
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
        r = self._selected_row()
        if r is not None:
            self.open_row(r)

    def show_selected_log(self) -> None:
        r = self._selected_row()
        if r is not None:
            self.show_log(r)

    def show_log(self, row: int, max_bytes: int = 2_000_000) -> None:
        """Show a past session's ``session.log`` in the log pane (its last ``max_bytes``)."""
        rec = self.records[row]
        path = rec.log_path
        try:
            with path.open("rb") as fh:
                size = path.stat().st_size
                fh.seek(max(0, size - max_bytes))
                text = fh.read().decode("utf-8", "replace")
        except OSError as exc:
            self.log.setPlainText(f"The log {path} cannot be read ({exc.strerror}).")
            return
        head = f"[kernelscope] session {rec.id}: {rec.message or rec.state}\n[kernelscope] log: {path}\n"
        if size > max_bytes:
            head += f"[kernelscope] (only the last {max_bytes // 1_000_000} MB are shown)\n"
        self.log.setPlainText(head + text)

    # -- teardown ----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Cancel a running session (its process group is killed) and join every thread."""
        self._closed = True
        self.clock.stop()
        self.drain_timer.stop()
        for job in [self._job, self._list_job, *self._aux]:
            if job is not None:
                job.stop(30_000)
        self._job = self._worker = self._list_job = None
        self._aux = []

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)


def _line_text(ln: Any) -> str:
    if ln.stream == "kernelscope":
        return f"[kernelscope] {ln.text}"
    return str(ln.text)


def _fmt_s(s: float) -> str:
    if s < 60:
        from gui.format import duration

        return str(duration(s * 1e9))
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


class _Pages(QWidget):
    """Like QStackedWidget, but as tall as the page shown (hidden pages take no space)."""

    def __init__(self) -> None:
        super().__init__()
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        self._pages: list[QWidget] = []
        self._index = 0

    def addWidget(self, page: QWidget) -> None:  # noqa: N802 - QStackedWidget's name
        self._pages.append(page)
        self._lay.addWidget(page)
        page.setVisible(len(self._pages) - 1 == self._index)

    def setCurrentIndex(self, index: int) -> None:  # noqa: N802
        self._index = index
        for i, page in enumerate(self._pages):
            page.setVisible(i == index)

    def currentIndex(self) -> int:  # noqa: N802
        return self._index

    def currentWidget(self) -> QWidget:  # noqa: N802
        return self._pages[self._index]


def _show_page(stack: _Pages, index: int) -> None:
    stack.setCurrentIndex(index)


def quote_command(argv: list[str]) -> str:
    """A command line that ``shlex.split`` turns back into ``argv``, readable when an argument holds
    single quotes (``-c "print('hi')"`` rather than shlex.join's ``'print('"'"'hi'"'"')'``)."""
    out = []
    for a in argv:
        if a and shlex.quote(a) == a:
            out.append(a)
        elif not any(c in a for c in '"\\$`!'):
            out.append(f'"{a}"')
        else:
            out.append(shlex.quote(a))
    return " ".join(out)


def _with_button(edit: QLineEdit, text: str, slot: Any) -> QWidget:
    w = QWidget()
    h = QHBoxLayout(w)
    h.setContentsMargins(0, 0, 0, 0)
    h.addWidget(edit, 1)
    b = QPushButton(text)
    b.setFixedWidth(32)
    b.clicked.connect(slot)
    h.addWidget(b)
    return w


__all__ = ["FormValues", "RunView", "RunWorker", "quote_command", "report_to_open", "spec_from_form"]
