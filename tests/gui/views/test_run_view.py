"""Run view: real sessions of harmless local commands, cancel, crash, an nsys session with the fake
tools whose report opens in the window, validation, the sessions browser, the doctor, --screenshot."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from tests.conftest import FIXTURES, REPO, alive
from tests.engine import fake_tools
from tests.engine.sshd_fixture import Sshd, sshd  # noqa: F401  (fixture)
from tests.gui.conftest import SCREENSHOTS, screenshot

PY = sys.executable
RUN_TIMEOUT_MS = 60_000


@pytest.fixture(autouse=True)
def _data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private session store for every test."""
    data = tmp_path / "data"
    monkeypatch.setenv("KERNELSCOPE_DATA", str(data))
    return data


@pytest.fixture
def view(qtbot, tmp_path: Path):
    from gui.documents import OpenReports
    from gui.views.run_view import RunView

    v = RunView(OpenReports())
    qtbot.addWidget(v)
    v.resize(1400, 900)
    v.show()
    qtbot.waitUntil(lambda: not v.is_busy(), timeout=10_000)
    v.form.out_edit.setText(str(tmp_path / "out"))
    return v


def _run(qtbot, view, timeout_ms: int = RUN_TIMEOUT_MS):
    with qtbot.waitSignal(view.sig_session_finished, timeout=timeout_ms) as blocker:
        assert view.start()
    qtbot.waitUntil(lambda: not view.is_running() and not view.is_busy(), timeout=10_000)
    return blocker.args[0]


def _table(view) -> list[list[str]]:
    t = view.sessions_panel.table
    return [[t.item(r, c).text() for c in range(t.columnCount())] for r in range(t.rowCount())]


# -- real sessions ----------------------------------------------------------------------------------------
def test_local_command_streams_succeeds_and_is_listed(qtbot, view, tmp_path: Path) -> None:
    from engine.sessions.store import SessionStore

    assert _table(view) == [] and view.sessions_panel.note.text() == "No sessions yet."
    code = ("import sys\nfor i in range(3):\n    print(f'hello {i}', flush=True)\n"
            "print('to stderr', file=sys.stderr)")
    view.set_command([PY, "-c", code])
    view.set_tool("bench")
    opened: list[str] = []
    view.sig_open_report.connect(opened.append)
    # Ctrl+Enter starts it
    view.form.command_edit.setFocus()
    with qtbot.waitSignal(view.sig_session_finished, timeout=RUN_TIMEOUT_MS) as blocker:
        qtbot.keyClick(view.form.command_edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not view.is_running() and not view.is_busy(), timeout=10_000)
    outcome = blocker.args[0]
    assert outcome.ok and outcome.returncode == 0
    log = view.log.toPlainText().splitlines()
    assert [ln for ln in log if ln.startswith("hello")] == ["hello 0", "hello 1", "hello 2"]
    assert "to stderr" in log and log[-1].startswith("[kernelscope] success")
    assert view.outcome_kind == "success" and view.outcome_label.text() == "The session finished."
    assert "#1e7b34" in view.outcome_label.styleSheet()
    assert view.progress.value() == view.progress.maximum() == 1000
    assert opened == []  # a benchmark keeps no report
    # the store has it and the browser shows it
    rec = SessionStore().list()[0]
    assert rec.id == outcome.session_id and rec.kind == "success"
    row = _table(view)[0]
    assert row[1:4] == ["bench", "local", "success"] and row[5] == "—"
    assert row[0] == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.created))
    from gui import format as fmt

    assert rec.duration_s is not None and row[4] == fmt.duration(rec.duration_s * 1e9)
    # Show log: the session.log of the selected session
    view.sessions_panel.table.selectRow(0)
    assert view.sessions_panel.showlog_button.isEnabled() and not view.sessions_panel.open_button.isEnabled()
    view.log.clear()
    qtbot.mouseClick(view.sessions_panel.showlog_button, Qt.MouseButton.LeftButton)
    shown = view.log.toPlainText()
    assert outcome.log_path.read_text() in shown and str(outcome.log_path) in shown
    screenshot(view, "run_view_success")


def test_cancel_kills_the_program_within_seconds(qtbot, view) -> None:
    view.set_command([PY, "-c", "import os, time; print('pid', os.getpid(), flush=True); time.sleep(60)"])
    with qtbot.waitSignal(view.sig_session_finished, timeout=RUN_TIMEOUT_MS) as blocker:
        assert view.start()
        assert view.is_running() and view.form.cancel_button.isEnabled()
        assert not view.form.start_button.isEnabled()
        qtbot.waitUntil(lambda: "pid " in view.log.toPlainText(), timeout=20_000)
        pid = int(next(ln for ln in view.log.toPlainText().splitlines() if ln.startswith("pid ")).split()[1])
        assert alive(pid)
        t0 = time.monotonic()
        view.log.setFocus()
        qtbot.keyClick(view.log, Qt.Key.Key_Escape)  # Esc cancels
    took = time.monotonic() - t0
    outcome = blocker.args[0]
    assert outcome.kind.value == "cancelled" and took < 8, took
    assert not alive(pid)
    assert view.outcome_kind == "cancelled" and "cancelled" in view.outcome_label.text()
    qtbot.waitUntil(lambda: not view.is_running() and not view.is_busy(), timeout=10_000)
    assert _table(view)[0][3] == "cancelled"
    assert view.form.start_button.isEnabled() and not view.form.cancel_button.isEnabled()


def test_quiet_program_still_moves_the_progress_bar_on_its_second_run(qtbot, view) -> None:
    # The runner knows how long the same command took last time and reports elapsed / expected
    # every ~0.5 s even when the program prints nothing.
    view.set_command([PY, "-c", "import time; time.sleep(2.5)"])
    view.set_tool("bench")
    assert _run(qtbot, view).ok
    seen: list[int] = []
    with qtbot.waitSignal(view.sig_session_finished, timeout=RUN_TIMEOUT_MS):
        assert view.start()
        qtbot.waitUntil(lambda: (seen.append(view.progress.value()) or False)
                        or (view.progress.maximum() == 1000 and 0 < view.progress.value() < 1000),
                        timeout=20_000)
    moving = [v for v in seen if 0 < v < 1000]
    assert moving, seen
    # no program output reached the log: the bar moved on the runner's periodic progress alone
    assert not [ln for ln in view.log.toPlainText().splitlines() if not ln.startswith("[kernelscope]")]
    qtbot.waitUntil(lambda: not view.is_running() and not view.is_busy(), timeout=10_000)


def test_failing_command_shows_the_crash_sentence(qtbot, view) -> None:
    view.set_command([PY, "-c", "import sys; print('bad input'); sys.exit(3)"])
    outcome = _run(qtbot, view)
    assert outcome.kind.value == "crashed"
    name = Path(PY).name
    assert view.outcome_label.text() == f"{name} exited with status 3; see session.log for its output."
    assert "#b03a2e" in view.outcome_label.styleSheet()
    assert "bad input" in view.log.toPlainText()
    assert _table(view)[0][3] == "crashed"
    screenshot(view, "run_view_crashed")


def test_validation_error_for_an_empty_command(qtbot, view) -> None:
    view.set_command("")
    assert view.start() is False
    assert not view.is_running()
    assert view.form.error_label.isVisible()
    assert view.form.error_label.text() == ("Enter a command line to run (for example: python3 train.py "
                                       "--steps 10).")
    view.set_workload("gemm", dtype="fp16", M="")
    assert view.start() is False
    assert view.form.error_label.text().startswith("Parameter M of gemm is empty")
    screenshot(view, "run_view_validation")
    # a valid form clears the message
    view.set_command([PY, "-c", "pass"])
    _run(qtbot, view)
    assert not view.form.error_label.isVisible()


def test_workload_parameters_are_editable_fields_with_defaults(view) -> None:
    from PySide6.QtWidgets import QComboBox, QLineEdit

    from kernels.registry import get_workload

    view.set_workload("sdpa")
    w = get_workload("sdpa")
    assert list(view.form._param_widgets) == list(w.params)
    for k, default in w.params.items():
        wdg = view.form._param_widgets[k]
        # device follows the doctor (cuda only where a GPU was found); the others keep their defaults
        want = view.form.defaults.device if k == "device" else default
        assert (wdg.currentText() if isinstance(wdg, QComboBox) else wdg.text()) == want
        assert isinstance(wdg, QComboBox) == bool(w.choices.get(k))
        assert isinstance(wdg, (QComboBox, QLineEdit))
    view.set_workload("sdpa", S="2048", device="cpu")
    from gui.views.run_form import spec_from_form

    spec = spec_from_form(view.form_values())
    assert spec.workload == "sdpa" and spec.params == {"S": "2048", "device": "cpu"}


def test_workload_runs_with_the_fields_values(qtbot, view) -> None:
    """A real kernels/ workload (gemm on the CPU at a tiny size) run from the form's fields."""
    pytest.importorskip("torch")
    view.set_workload("gemm", M="64", N="48", K="32", dtype="fp32", device="cpu", iters="3", warmup="1")
    outcome = _run(qtbot, view, timeout_ms=180_000)
    assert outcome.ok, outcome.message
    line = next(ln for ln in view.log.toPlainText().splitlines() if ln.startswith("gemm "))
    assert line.startswith("gemm M=64 N=48 K=32 dtype=fp32 device=cpu iters=3 warmup=1 rotate=1: median ")
    assert "over 3 iterations" in line


def test_chatty_program_is_batched(qtbot, view) -> None:
    """20,000 lines as fast as Python prints them: all arrive, in few appends, the GUI keeps ticking."""
    from PySide6.QtCore import QTimer

    n = 20_000
    view.set_command([PY, "-c", f"for i in range({n}): print('line', i)"])
    appends: list[int] = []
    orig = view.log.appendPlainText
    view.log.appendPlainText = lambda text: (appends.append(text.count("\n") + 1), orig(text))  # type: ignore[method-assign]
    ticks: list[float] = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start(10)
    try:
        _run(qtbot, view)
    finally:
        timer.stop()
    text = view.log.toPlainText()
    assert f"line {n - 1}" in text
    shown = [ln for ln in text.splitlines() if ln.startswith("line ")]
    skipped = sum(int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("… "))
    # a skipped batch may also hold some of Kernelscope's own lines (running…, telemetry…)
    ours_shown = sum(1 for ln in text.splitlines() if ln.startswith("[kernelscope]"))
    ours_total = sum(1 for ln in view.last_outcome.log_path.read_text().splitlines()
                     if ln.startswith("[kernelscope]"))
    assert len(shown) + skipped == n + (ours_total - ours_shown)
    assert len(appends) < n / 50, len(appends)  # batched, not one append per line
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    print(f"chatty: {n} lines in {len(appends)} appends; longest GUI stall {max(gaps) * 1000:.0f} ms")
    assert max(gaps) < 1.0


def test_doctor_runs_off_the_gui_thread_and_shows_its_table(qtbot, view) -> None:
    qtbot.mouseClick(view.form.doctor_button, Qt.MouseButton.LeftButton)
    assert not view.form.doctor_button.isEnabled()
    qtbot.waitUntil(view.form.doctor_button.isEnabled, timeout=60_000)
    text = view.log.toPlainText()
    assert "Doctor (this machine):" in text
    from engine.sessions import doctor

    names = [c.name for c in doctor.run_doctor()]
    body = text.split("Doctor (this machine):", 1)[1]
    for name in names:
        assert name in body


def test_nsys_session_report_opens_in_the_window(qtbot, window, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from engine.analysis.summary import summarize
    from engine.reports import open_report

    fake = fake_tools.install(tmp_path / "root")
    for k, val in fake_tools.env_for(fake).items():
        monkeypatch.setenv(k, val)
    window.set_view("run")
    view = window.views["run"]
    assert window.tabs.currentWidget() is view
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=10_000)
    view.form.out_edit.setText(str(tmp_path / "out"))
    view.set_command([PY, "-c", "print('app ran')"])
    view.set_tool("nsys")
    view.form.cuda_mem_check.setChecked(True)
    with qtbot.waitSignal(window.sig_report_opened, timeout=RUN_TIMEOUT_MS) as opened, \
            qtbot.waitSignal(view.sig_open_report, timeout=RUN_TIMEOUT_MS) as asked:
        assert view.start()
    qtbot.waitUntil(lambda: not window.is_loading() and not view.is_running() and not view.is_busy(),
                    timeout=RUN_TIMEOUT_MS)
    outcome = view.last_outcome
    assert outcome.ok and [p.suffix for p in outcome.reports] == [".nsys-rep", ".sqlite"]
    assert asked.args[0] == str(outcome.reports[1])
    report = opened.args[0]
    assert report.path == outcome.reports[1] and window.reports.current is report
    with open_report(FIXTURES / "nsys" / "host_overhead_fixed.sqlite") as tr:
        expected = summarize(tr)
    assert report.summary.wall.span_ns == expected.wall.span_ns
    assert report.summary.gpu.busy_ns == expected.gpu.busy_ns
    argv = [json.loads(ln) for ln in fake.argv_log.read_text().splitlines()]
    profile = next(a for a in argv if a[:2] == ["nsys", "profile"])
    assert "--trace=cuda,nvtx,osrt" in profile and "--cuda-memory-usage=true" in profile
    assert "app ran" in view.log.toPlainText()
    assert window.windowTitle() == f"Kernelscope — {outcome.reports[1].name}"
    row = _table(view)[0]
    assert row[1:4] == ["nsys", "local", "success"] and row[5] == outcome.reports[1].name
    screenshot(window, "run_view_nsys_window")
    # double-clicking the session opens its report again (already open: the window says so)
    rect = view.sessions_panel.table.visualItemRect(view.sessions_panel.table.item(0, 5))
    qtbot.mouseClick(view.sessions_panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(view.sessions_panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert window.log.entries[-1] == ("info", f"{outcome.reports[1].name} is already open.")


def test_ssh_session_streams_and_is_listed_with_its_host(qtbot, view, sshd: Sshd,  # noqa: F811
                                                         tmp_path: Path) -> None:
    view.form.target_combo.setCurrentIndex(view.form.target_combo.findData("ssh"))
    assert view.form.ssh_box.isVisible()
    view.form.host_edit.setText("127.0.0.1")
    view.form.user_edit.setText(sshd.user)
    view.form.port_spin.setValue(sshd.port)
    view.form.ident_edit.setText(str(sshd.client_key))
    view.form.known_edit.setText(str(sshd.known_hosts))
    view.form.remote_dir_edit.setText(str(tmp_path / "remote"))
    assert not view.form.cwd_row.isVisible()  # the local working directory does not apply there
    view.form.remote_cwd_edit.setText(str(tmp_path))  # the program runs here on the host
    view.set_command(["python3", "-c", "import os; print('remote hi', os.getcwd())"])
    outcome = _run(qtbot, view)
    assert outcome.ok, outcome.message
    assert f"remote hi {tmp_path}" in view.log.toPlainText().splitlines()
    assert _table(view)[0][1:4] == ["bench", f"{sshd.user}@127.0.0.1:{sshd.port}", "success"]
    # the doctor follows the chosen target
    qtbot.mouseClick(view.form.doctor_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(view.form.doctor_button.isEnabled, timeout=60_000)
    assert f"Doctor ({sshd.user}@127.0.0.1:{sshd.port}):" in view.log.toPlainText()
    screenshot(view, "run_view_ssh")


def test_closing_the_window_stops_a_running_session(qtbot, tmp_path: Path) -> None:
    from gui.main_window import MainWindow
    from gui.settings import make_settings

    w = MainWindow(make_settings(), error_dialogs=False, restore_geometry=False)
    qtbot.addWidget(w)
    w.show()
    w.set_view("run")
    view = w.views["run"]
    view.form.out_edit.setText(str(tmp_path / "out"))
    view.set_command([PY, "-c", "import os, time; print('pid', os.getpid(), flush=True); time.sleep(60)"])
    assert view.start()
    qtbot.waitUntil(lambda: "pid " in view.log.toPlainText(), timeout=20_000)
    pid = int(next(ln for ln in view.log.toPlainText().splitlines() if ln.startswith("pid ")).split()[1])
    t0 = time.monotonic()
    w.close()  # shutdown(): the session is cancelled and its thread joined before the window goes
    assert time.monotonic() - t0 < 10 and not alive(pid)
    assert not view.is_running()


def test_screenshot_cli_view_run(tmp_path: Path) -> None:
    out = SCREENSHOTS / "run_view_cli.png"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "data"
    env = {"QT_QPA_PLATFORM": "offscreen", "KERNELSCOPE_CONFIG": str(tmp_path / "cfg"),
           "KERNELSCOPE_CACHE": str(tmp_path / "cache"), "KERNELSCOPE_DATA": str(data),
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    # one real session in the store, so the browser has a row to show
    r = subprocess.run([PY, "-m", "engine.cli", "run", "--out", str(tmp_path / "out"), "--", PY, "-c",
                        "print('hi')"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([PY, "-m", "gui.app", "--screenshot", str(out), "--view", "run"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert (img.width(), img.height()) == (1600, 1000)


def test_telemetry_checkbox_reaches_the_spec(view) -> None:
    from gui.views.run_form import spec_from_form

    view.set_command([PY, "-c", "pass"])
    # The doctor's defaults: telemetry on only where a GPU was found (CI has none).
    from engine.sessions.doctor import check_gpus

    has_gpu = any(c.name.startswith("gpu ") for c in check_gpus())
    assert view.form.telemetry_check.isChecked() is has_gpu
    assert view.form.defaults_note.text().startswith("1 GPU" if has_gpu else "No GPU can be used here")
    view.form.telemetry_check.setChecked(True)
    assert spec_from_form(view.form_values()).telemetry is True
    view.form.telemetry_check.setChecked(False)
    assert spec_from_form(view.form_values()).telemetry is False


def test_form_fits_a_1280x800_window(qtbot, window) -> None:
    """Issue 12: at 1280x800 no combo box, button or checkbox of the form is cut and there is no
    horizontal scrollbar (the form scrolls vertically only)."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QApplication, QCheckBox, QComboBox, QPushButton

    window.resize(1280, 800)
    window.set_view("run")
    view = window.views["run"]
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=10_000)
    for tool in ("bench", "nsys", "ncu"):
        view.set_tool(tool)
        QApplication.processEvents()
        scroll = view.form_scroll
        vp = scroll.viewport()
        assert not scroll.horizontalScrollBar().isVisible()
        # (the vertical scrollbar appears after the first layout; the form then follows the viewport)
        qtbot.waitUntil(lambda vp=vp: view.form.width() <= vp.width(), timeout=5_000)
        shown = [w for cls in (QComboBox, QPushButton, QCheckBox) for w in view.form.findChildren(cls)
                 if w.isVisibleTo(view.form)]
        assert len(shown) >= 8
        for w in shown:
            right = w.mapTo(view.form, QPoint(w.width(), 0)).x()
            assert right <= vp.width(), (type(w).__name__, w.objectName())
            if isinstance(w, QPushButton):  # its text fits (Fusion's 80 px minimum is not a cut)
                need = w.fontMetrics().horizontalAdvance(w.text()) + 8
            else:  # a checkbox's whole label; a combo box's minimum (it elides long items)
                need = (w.sizeHint() if isinstance(w, QCheckBox) else w.minimumSizeHint()).width()
            assert w.width() >= need, (type(w).__name__, w.width(), need)
        screenshot(window, f"run_1280x800_{tool}")


def test_program_runs_in_the_working_directory_which_is_remembered(qtbot, view, tmp_path: Path) -> None:
    """Issue 12: `python3 relative/script.py` runs in the folder the form names (like a shell there),
    and the next Run view offers that folder again."""
    from gui.documents import OpenReports
    from gui.views.run_view import RunView

    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "sub" / "hello.py").write_text("import os\nprint('ran in', os.getcwd())\n")
    view.form.cwd_edit.setText(str(proj))
    view.set_command([PY, "sub/hello.py"])
    outcome = _run(qtbot, view)
    assert outcome.ok, outcome.message
    assert f"ran in {proj}" in view.log.toPlainText().splitlines()
    again = RunView(OpenReports())
    qtbot.addWidget(again)
    qtbot.waitUntil(lambda: not again.is_busy(), timeout=10_000)
    assert again.form.cwd_edit.text() == str(proj)


def test_no_gpu_note_is_shown_whole(qtbot, view) -> None:
    """Issue 25: the doctor's sentence on why there is no GPU (or which GPU there is) sits under the
    form, outside its scroll area, as tall as its wrapped text: never cut by the viewport's edge."""
    note = view.form.defaults_note
    qtbot.waitUntil(lambda: bool(note.text()), timeout=10_000)
    qtbot.wait(50)
    assert note.isVisible() and not view.form_scroll.widget().isAncestorOf(note)
    assert note.height() >= note.heightForWidth(note.width())  # every wrapped line
    # its box lies inside the view, above the Start button
    top_left = note.mapTo(view, note.rect().topLeft())
    bottom = note.mapTo(view, note.rect().bottomLeft()).y()
    assert top_left.y() >= view.form_scroll.mapTo(view, view.form_scroll.rect().bottomLeft()).y()
    assert bottom <= view.form.start_button.mapTo(view, view.form.start_button.rect().topLeft()).y()
