"""The Run view's form: target, what to run, working directory, tool and its options, output; Start,
Cancel and Doctor. :meth:`RunFormPanel.form_values` reads it as a Qt-free
:class:`~gui.views.run_form.FormValues`; the session spec is built from those by
:func:`~gui.views.run_form.spec_from_form`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gui.views.run_form import (
    NCU_SETS,
    NSYS_TRACE_CHOICES,
    TOOL_LABELS,
    FormDefaults,
    FormValues,
    default_out_dir,
    last_cwd,
    quote_command,
)
from gui.widgets.labels import WrapLabel, heading

CWD_KEY = "run/cwd"  # QSettings: the working directory last used


class RunFormPanel(QWidget):
    """The session form (put it in a scroll area: it scrolls vertically and fits its column)."""

    sig_start = Signal()
    sig_cancel = Signal()
    sig_doctor = Signal()

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._settings = settings
        self._param_widgets: dict[str, QWidget] = {}
        self.defaults: FormDefaults | None = None
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 8, 0)
        v.addWidget(heading("New session"))

        v.addWidget(self._target_box())
        v.addWidget(self._what_box())
        v.addWidget(self._tool_box())
        v.addWidget(self._output_box())
        self.defaults_note = WrapLabel("", muted=True)
        self.defaults_note.setObjectName("runDefaultsNote")
        v.addWidget(self.defaults_note)

        self.error_label = WrapLabel("")
        self.error_label.setObjectName("runFormError")
        self.error_label.setStyleSheet("color: #b03a2e; font-weight: 600;")
        self.error_label.hide()
        v.addWidget(self.error_label)

        self.button_bar = self._button_bar()
        v.addStretch(1)

        self._on_target_changed()
        self._on_workload_changed()

    def _target_box(self) -> QGroupBox:
        """Where to run: this machine or an SSH host (its address, keys and folders)."""
        g = QGroupBox("Target")
        f = QFormLayout(g)
        self.target_combo = _combo()
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
        self.remote_cwd_edit = QLineEdit()
        self.remote_cwd_edit.setPlaceholderText("~ (the remote home)")
        self.remote_cwd_edit.setToolTip("The folder the program runs in on the host (relative paths are "
                                        "under the remote home)")
        sf.addRow("Working dir", self.remote_cwd_edit)
        f.addRow(self.ssh_box)
        self.target_combo.currentIndexChanged.connect(self._on_target_changed)
        return g

    def _what_box(self) -> QGroupBox:
        """What to run: a workload of kernels/ with its parameters, or a command line; its folder."""
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
        self.workload_combo = _combo()
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
        ranks_row = QHBoxLayout()
        self.per_rank_check = QCheckBox("One report per rank")
        self.per_rank_check.setObjectName("runPerRank")
        self.per_rank_check.setToolTip("The command starts torchrun, srun or mpirun: nsys/ncu runs inside "
                                       "every rank (NAME_rank<N>); the Ranks view lines the reports up")
        self.profile_ranks_edit = QLineEdit()
        self.profile_ranks_edit.setPlaceholderText("ranks: all, or 0,3")
        self.profile_ranks_edit.setToolTip("Profile only these ranks (the others run unprofiled)")
        self.profile_ranks_edit.setEnabled(False)
        self.per_rank_check.toggled.connect(self.profile_ranks_edit.setEnabled)
        ranks_row.addWidget(self.per_rank_check)
        ranks_row.addWidget(self.profile_ranks_edit, 1)
        clv.addLayout(ranks_row)
        self.what_stack.addWidget(cl)
        wv.addWidget(self.what_stack)
        self.cwd_row = QWidget()
        cwd_form = QFormLayout(self.cwd_row)
        cwd_form.setContentsMargins(0, 0, 0, 0)
        self.cwd_edit = QLineEdit(last_cwd(self._setting(CWD_KEY), os.getcwd()))
        self.cwd_edit.setObjectName("runCwd")
        self.cwd_edit.setToolTip("The program runs in this folder, as it would in a shell there (relative "
                                 "paths such as train.py are found in it); the last one used is remembered")
        cwd_form.addRow("Working dir", _with_button(self.cwd_edit, "…", self._browse_cwd))
        wv.addWidget(self.cwd_row)
        self.radio_workload.toggled.connect(lambda on: _show_page(self.what_stack, 0 if on else 1))
        self._fill_workloads()
        self.workload_combo.currentIndexChanged.connect(self._on_workload_changed)
        _show_page(self.what_stack, 0)
        return g

    def _tool_box(self) -> QGroupBox:
        """The tool (none, nsys, ncu) and its options, one page per tool."""
        g = QGroupBox("Tool")
        tv = QVBoxLayout(g)
        self.tool_combo = _combo()
        for key, label in TOOL_LABELS.items():
            self.tool_combo.addItem(label, key)
        tv.addWidget(self.tool_combo)
        self.tool_stack = _Pages()
        self.tool_stack.addWidget(WrapLabel("Runs the program as is, timed, with its output kept.",
                                            muted=True))
        self.tool_stack.addWidget(self._nsys_options())
        self.tool_stack.addWidget(self._ncu_options())
        tv.addWidget(self.tool_stack)
        self.tool_combo.currentIndexChanged.connect(lambda i: _show_page(self.tool_stack, i))
        _show_page(self.tool_stack, 0)
        return g

    def _nsys_options(self) -> QWidget:
        """nsys' options: what to trace, CUDA memory usage, GPU metrics."""
        nw = QWidget()
        nf = QFormLayout(nw)
        nf.setContentsMargins(0, 0, 0, 0)
        trace_row = QWidget()
        tr = QGridLayout(trace_row)  # three a row: six in one row would widen the form's column
        tr.setContentsMargins(0, 0, 0, 0)
        self.trace_checks: dict[str, QCheckBox] = {}
        for i, t in enumerate(NSYS_TRACE_CHOICES):
            cb = QCheckBox(t)
            cb.setChecked(t in ("cuda", "nvtx", "osrt"))
            self.trace_checks[t] = cb
            tr.addWidget(cb, i // 3, i % 3)
        tr.setColumnStretch(3, 1)
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
        return nw

    def _ncu_options(self) -> QWidget:
        """ncu's options: section set, kernel filter, launch count, clock control."""
        cw = QWidget()
        cf = QFormLayout(cw)
        cf.setContentsMargins(0, 0, 0, 0)
        self.ncu_set_combo = _combo()
        self.ncu_set_combo.addItems(list(NCU_SETS))
        cf.addRow("Section set", self.ncu_set_combo)
        self.ncu_kernel_edit = QLineEdit()
        self.ncu_kernel_edit.setPlaceholderText("all kernels (or a name, regex:…)")
        cf.addRow("Kernel filter", self.ncu_kernel_edit)
        self.ncu_count_spin = QSpinBox()
        self.ncu_count_spin.setRange(0, 1_000_000)
        self.ncu_count_spin.setSpecialValueText("all launches")
        cf.addRow("Launch count", self.ncu_count_spin)
        self.ncu_clock_combo = _combo()
        self.ncu_clock_combo.addItem("none (real-run clocks)", "none")
        self.ncu_clock_combo.addItem("base (locked)", "base")
        self.ncu_clock_combo.setToolTip("none: the GPU clocks as in real runs; base: lock them to base "
                                        "clocks (ncu --clock-control)")
        cf.addRow("Clock control", self.ncu_clock_combo)
        return cw

    def _output_box(self) -> QGroupBox:
        """Where the session's files go, its timeout, and GPU telemetry."""
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
        self.telemetry_check = QCheckBox("Record GPU telemetry")
        self.telemetry_check.setToolTip("NVML readings every 0.1 s to telemetry.csv in the session folder, "
                                        "on the same clock as the report")
        self.telemetry_check.setChecked(False)  # until the doctor has found a GPU
        of.addRow("", self.telemetry_check)
        return g

    def _button_bar(self) -> QWidget:
        """Start, Cancel and Doctor in a bar of their own (the Run view keeps it below the
        scrolling form: visible on small screens however long the form gets)."""
        buttons = QHBoxLayout()
        self.start_button = QPushButton("Start")
        self.start_button.setToolTip("Start the session (Ctrl+Enter)")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.sig_start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the session and its processes (Esc)")
        self.cancel_button.clicked.connect(self.sig_cancel)
        self.doctor_button = QPushButton("Doctor")
        self.doctor_button.setToolTip("Check which profilers, compilers and GPUs the target has")
        self.doctor_button.clicked.connect(self.sig_doctor)
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        buttons.addWidget(self.doctor_button)
        bar = QWidget()
        bar.setLayout(buttons)
        return bar


    def _fill_workloads(self) -> None:
        from kernels.registry import list_workloads

        self._workloads = {w.name: w for w in list_workloads()}
        for w in self._workloads.values():
            self.workload_combo.addItem(w.name, w.name)
            self.workload_combo.setItemData(self.workload_combo.count() - 1, w.description,
                                            Qt.ItemDataRole.ToolTipRole)

    def _on_target_changed(self) -> None:
        ssh = self.target_combo.currentData() == "ssh"
        self.ssh_box.setVisible(ssh)
        self.cwd_row.setVisible(not ssh)  # the host's working directory is in the SSH box

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
                combo = _combo()
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
        self._set_device_param()

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
            params[k] = wdg.currentText() if isinstance(wdg, QComboBox) else \
                wdg.text() if isinstance(wdg, QLineEdit) else ""
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
            telemetry=self.telemetry_check.isChecked(), cwd=self.cwd_edit.text(),
            remote_cwd=self.remote_cwd_edit.text(),
            per_rank=self.per_rank_check.isChecked(), profile_ranks=self.profile_ranks_edit.text(),
        )

    def _browse_out(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Output folder", self.out_edit.text())
        if d:
            self.out_edit.setText(d)

    def _browse_cwd(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Working directory", self.cwd_edit.text())
        if d:
            self.cwd_edit.setText(d)

    def _setting(self, key: str) -> str | None:
        if self._settings is None:
            from gui import settings as gsettings

            self._settings = gsettings.make_settings()
        v = self._settings.value(key)
        return str(v) if v else None

    def apply_defaults(self, d: FormDefaults) -> None:
        """Use the doctor's defaults: the workloads' ``device`` parameter and the telemetry checkbox."""
        self.defaults = d
        self.telemetry_check.setChecked(d.telemetry)
        self.defaults_note.setText(d.note)
        self._set_device_param()

    def _set_device_param(self) -> None:
        wdg = self._param_widgets.get("device")
        if self.defaults is None or wdg is None:
            return
        if isinstance(wdg, QComboBox) and wdg.findText(self.defaults.device) >= 0:
            wdg.setCurrentText(self.defaults.device)
        elif isinstance(wdg, QLineEdit):
            wdg.setText(self.defaults.device)

    def _browse_identity(self) -> None:
        f, _ = QFileDialog.getOpenFileName(self, "SSH identity file", str(Path.home() / ".ssh"))
        if f:
            self.ident_edit.setText(f)

    def show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    def remember_cwd(self, cwd: str) -> None:
        """Offer ``cwd`` again next time (QSettings)."""
        if self._settings is not None:
            self._settings.setValue(CWD_KEY, cwd)

    def set_running(self, running: bool) -> None:
        self.start_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)


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


def _combo() -> QComboBox:
    """A combo box that shrinks with the form's column instead of widening it to its longest item."""
    c = QComboBox()
    c.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    c.setMinimumContentsLength(8)
    c.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
    return c
