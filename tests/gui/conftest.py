"""GUI test fixtures: a main window with private settings, loading helpers, thread-leak check."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

SCREENSHOTS = REPO / "artifacts" / "screenshots"
KINETO = FIXTURES / "torch" / "torch_sdpa_trace.json"
LOAD_TIMEOUT_MS = 30_000


@pytest.fixture(autouse=True)
def no_thread_left_running(qapp):  # noqa: ARG001 - qapp first, so this tears down after qtbot
    """Fail the test if a QThread started by the GUI is still running when the test ends."""
    from gui.workers import running_threads

    yield
    # qtbot's teardown has closed the test's widgets by now (autouse fixtures set up first and
    # tear down last); closing must have quit and joined every worker thread.
    left = running_threads()
    names = [t.objectName() for t in left]
    for t in left:  # do not leak them into the next test either
        t.quit()
        t.wait(5000)
    assert not left, f"QThreads still running at teardown: {names}"


@pytest.fixture
def window(qtbot):
    from gui.main_window import MainWindow
    from gui.settings import make_settings

    w = MainWindow(make_settings(), error_dialogs=False, restore_geometry=False)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    return w


def open_and_wait(qtbot, window, path: Path):
    """Open ``path`` and wait until it is the current report; returns the LoadedReport."""
    with qtbot.waitSignal(window.sig_report_opened, timeout=LOAD_TIMEOUT_MS) as blocker:
        window.open_path(path)
    qtbot.waitUntil(lambda: not window.is_loading(), timeout=LOAD_TIMEOUT_MS)
    # The summary follows in the background (views such as the Timeline do not wait for it).
    qtbot.waitUntil(lambda: not window.is_summarizing(), timeout=LOAD_TIMEOUT_MS)
    return blocker.args[0]


def wait_stats(qtbot, window, name: str | None = None):
    """Show the statistics view (optionally report ``name``) and wait for its table."""
    window.set_view("stats")
    view = window.views["stats"]
    if name is not None and view.combo.currentData() != name:
        view.select_report(name)
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    return view


def screenshot(widget, name: str) -> Path:
    from PySide6.QtWidgets import QApplication

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    QApplication.processEvents()
    path = SCREENSHOTS / f"{name}.png"
    assert widget.grab().save(str(path)), path
    return path
