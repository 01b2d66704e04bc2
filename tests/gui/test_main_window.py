"""The window itself: bad files, cancel, several reports, recent files, drag and drop."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from engine.system.errors import ReportError
from gui import settings as gsettings
from tests.conftest import NSYS_DIR
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"


def _engine_error(path) -> str:
    from engine.reports import open_report

    with pytest.raises(ReportError) as info:
        open_report(path)
    return str(info.value)


def _bad_files(tmp_path):
    empty = tmp_path / "empty.nsys-rep"
    empty.write_bytes(b"")
    folder = tmp_path / "a_folder.sqlite"
    folder.mkdir()
    text = tmp_path / "notes.json.txt"
    text.write_text("this is not a report\n")
    return {"empty": empty, "directory": folder, "not_a_report": text}


@pytest.mark.parametrize("kind", ["empty", "directory", "not_a_report"])
def test_bad_file_logs_one_sentence_and_window_stays_usable(qtbot, window, tmp_path, kind):
    path = _bad_files(tmp_path)[kind]
    expected = _engine_error(path)
    with qtbot.waitSignal(window.sig_load_failed, timeout=LOAD_TIMEOUT_MS) as blocker:
        window.open_path(path)
    qtbot.waitUntil(lambda: not window.is_loading())
    assert blocker.args == [str(path), expected]
    assert window.log.errors() == [expected]
    assert "\n" not in expected and expected.endswith(".")
    assert window.statusBar().currentMessage() == expected
    assert window.reports.current is None
    assert window.center.currentWidget() is window.welcome
    assert not window.progress.isVisible()
    screenshot(window, f"error_{kind}")
    # still usable: a good file opens afterwards
    open_and_wait(qtbot, window, NAIVE)
    assert window.windowTitle() == "Kernelscope — host_overhead_naive.sqlite"


def _blocking_opener(started: threading.Event):
    """Stands in for a long .nsys-rep export: reports progress, then waits for cancel."""

    def opener(path, progress=None, cancel=None):
        progress("Exporting with nsys", None)
        started.set()
        if not cancel.wait(20):
            raise AssertionError("cancel never arrived")
        raise ReportError(f"Exporting {path.name} was cancelled.")

    return opener


def test_cancel_during_load(qtbot, tmp_path):
    from gui.main_window import MainWindow

    started = threading.Event()
    w = MainWindow(gsettings.make_settings(), error_dialogs=False, restore_geometry=False,
                   opener=_blocking_opener(started))
    qtbot.addWidget(w)
    w.show()
    w.open_path(NAIVE)
    qtbot.waitUntil(started.is_set, timeout=10_000)
    qtbot.waitUntil(lambda: "Exporting" in w.progress_label.text(), timeout=10_000)
    assert w.progress.isVisible() and w.cancel_button.isVisible()
    screenshot(w, "loading_with_cancel")
    with qtbot.waitSignal(w.sig_load_cancelled, timeout=10_000):
        qtbot.mouseClick(w.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not w.is_loading())
    assert w.reports.current is None
    assert w.log.errors() == []
    assert any("Cancelled opening" in m for _, m in w.log.entries)
    assert not w.cancel_button.isVisible()


def test_close_while_loading_stops_the_thread(qtbot):
    from gui.main_window import MainWindow
    from gui.workers import running_threads

    started = threading.Event()
    w = MainWindow(gsettings.make_settings(), error_dialogs=False, restore_geometry=False,
                   opener=_blocking_opener(started))
    qtbot.addWidget(w)
    w.show()
    w.open_path(NAIVE)
    qtbot.waitUntil(started.is_set, timeout=10_000)
    w.close()
    assert running_threads() == []


def test_several_reports_and_close(qtbot, window):
    open_and_wait(qtbot, window, NAIVE)
    open_and_wait(qtbot, window, FIXED)
    assert window.report_list.count() == 2
    assert window.windowTitle().endswith("host_overhead_fixed.sqlite")
    window.report_list.setCurrentRow(0)
    assert window.reports.current.path.name == "host_overhead_naive.sqlite"
    assert window.windowTitle().endswith("host_overhead_naive.sqlite")
    assert window.views["summary"].title.text() == "host_overhead_naive.sqlite"
    screenshot(window, "two_reports")
    # opening an open file again just selects it
    window.report_list.setCurrentRow(1)
    window.open_path(NAIVE)
    assert not window.is_loading()
    assert window.reports.current.path.name == "host_overhead_naive.sqlite"
    window.act_close.trigger()  # Ctrl+W
    assert window.report_list.count() == 1
    assert window.windowTitle().endswith("host_overhead_fixed.sqlite")
    window.act_close.trigger()
    assert window.report_list.count() == 0
    assert window.windowTitle() == "Kernelscope"
    assert window.center.currentWidget() is window.welcome
    assert not window.act_close.isEnabled()
    screenshot(window, "welcome")


def test_recent_files_persist(qtbot, window):
    open_and_wait(qtbot, window, NAIVE)
    open_and_wait(qtbot, window, FIXED)
    again = gsettings.make_settings()  # a fresh object reads what was saved
    assert gsettings.recent_files(again)[:2] == [str(FIXED.resolve()), str(NAIVE.resolve())]
    from gui.main_window import MainWindow

    w2 = MainWindow(again, error_dialogs=False, restore_geometry=False)
    qtbot.addWidget(w2)
    w2._fill_recent_menu()
    titles = [a.text() for a in w2.recent_menu.actions()]
    assert titles[:2] == ["host_overhead_fixed.sqlite", "host_overhead_naive.sqlite"]
    assert w2.welcome.recent.count() >= 2


def test_geometry_saved_on_close(qtbot, window):
    window.resize(1234, 777)
    window.close()
    assert gsettings.make_settings().value("window/geometry") is not None


def test_drag_and_drop_opens_file(qtbot, window):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(NAIVE))])
    pos = QPointF(200, 200)
    enter = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted()
    drop = QDropEvent(pos, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(window.sig_report_opened, timeout=LOAD_TIMEOUT_MS):
        QApplication.sendEvent(window, drop)
    assert window.reports.current.path.name == NAIVE.name


def test_drag_of_non_file_is_refused(qtbot, window):
    mime = QMimeData()
    mime.setText("hello")
    enter = QDragEnterEvent(QPointF(10, 10).toPoint(), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, enter)
    assert not enter.isAccepted()


def test_menus(window):
    menus = {a.text().replace("&", ""): a.menu() for a in window.menuBar().actions()}
    assert list(menus) == ["File", "View", "Help"]
    file_items = [a.text().replace("&", "") for a in menus["File"].actions() if a.text()]
    assert file_items == ["Open…", "Open Recent", "Open Sample", "Close report", "Quit"]
    assert window.act_open.shortcut().toString() == "Ctrl+O"
    assert window.act_quit.shortcut().toString() == "Ctrl+Q"
    samples = [a.text() for a in window.sample_menu.actions()]
    assert "host_overhead_naive.sqlite" in samples


# A QMessageBox sizes itself; the offscreen test platform warns that it cannot pass size hints on.
@pytest.mark.qt_log_ignore("propagateSizeHints")
def test_interactive_open_error_shows_a_non_blocking_dialog(qtbot, tmp_path):
    from PySide6.QtWidgets import QMessageBox

    from gui.main_window import MainWindow

    w = MainWindow(gsettings.make_settings(), error_dialogs=True, restore_geometry=False)
    qtbot.addWidget(w)
    w.show()
    bad = _bad_files(tmp_path)["empty"]
    with qtbot.waitSignal(w.sig_load_failed, timeout=LOAD_TIMEOUT_MS):
        w.open_path(bad, interactive=True)
    box = w.findChild(QMessageBox)
    assert box is not None and box.isVisible()
    assert box.text() == _engine_error(bad)
    box.accept()
    # a non-interactive open (command line, recent at start) never pops a dialog
    qtbot.waitUntil(lambda: w.findChild(QMessageBox) is None or not w.findChild(QMessageBox).isVisible())
    with qtbot.waitSignal(w.sig_load_failed, timeout=LOAD_TIMEOUT_MS):
        w.open_path(bad)
    assert not any(b.isVisible() for b in w.findChildren(QMessageBox))


def test_view_chosen_before_the_first_report_is_kept(qtbot, window):
    # `kernelscope-gui REPORT --view timeline`: the view is set before the views exist.
    window.set_view("timeline")
    open_and_wait(qtbot, window, NAIVE)
    assert window.current_view() == "timeline"
    assert window.tabs.currentWidget() is window.views["timeline"]


def test_loaded_report_counts_rows_like_the_tables(qtbot, window):
    report = open_and_wait(qtbot, window, NAIVE)
    from engine.reports import open_report

    with open_report(NAIVE) as trace:
        expected = {n: (len(trace.table(n)) if trace.has(n) else None) for n in report.table_rows}
    assert report.table_rows == expected
    assert report.table_rows["kernels"] == 10 and report.table_rows["memory_usage"] is not None


def test_sync_and_nvtx_counts_come_after_the_open_and_the_info_view_shows_them(qtbot, window, tmp_path):
    # Counting them (5M syncs: 0.75 s) waits for the first paint; the summary's job counts them.
    import shutil

    from gui import format as fmt

    copy = tmp_path / "host_overhead_gpumetrics.sqlite"
    shutil.copy(NSYS_DIR / copy.name, copy)
    window.set_view("info")
    report = open_and_wait(qtbot, window, copy)
    qtbot.waitUntil(lambda: report.summary_ready, timeout=LOAD_TIMEOUT_MS)
    assert report.rows_left == ()
    assert report.table_rows["sync"] == 5 and report.table_rows["nvtx"] == 20
    qtbot.waitUntil(lambda: window.views["info"].table_rows()["sync"] == fmt.count(5))
    rows = window.views["info"].table_rows()
    assert rows["sync"] == "5" and rows["nvtx"] == fmt.count(20)


def test_only_the_shown_view_is_built_and_the_others_when_asked_for(qtbot, window):
    """Opening a report builds the view on screen only; the other tabs are placeholders until
    asked for: a view asked for by key is built into its own tab and does no work while hidden."""
    from gui.views.registry import VIEW_SPECS

    window.set_view("timeline")
    built_at_open: list[str] = []
    window.sig_report_opened.connect(lambda _r: built_at_open.extend(dict(window.views)))
    open_and_wait(qtbot, window, NAIVE)
    timeline = window.views["timeline"]
    qtbot.waitUntil(lambda: timeline.model is not None and not timeline.is_busy(),
                    timeout=LOAD_TIMEOUT_MS)
    assert built_at_open == ["timeline"] and list(dict(window.views)) == ["timeline"]
    assert [window.tabs.tabText(i) for i in range(window.tabs.count())] == [v.title for v in VIEW_SPECS]
    assert window.tabs.currentWidget() is timeline
    stats = window.views["stats"]
    assert window.tabs.indexOf(stats) == [v.key for v in VIEW_SPECS].index("stats")
    assert window.tabs.currentWidget() is timeline  # building it did not move the tab
    assert not stats.is_busy() and stats.model.rowCount() == 0  # hidden: waits for its tab
    assert "findings" in window.views and "nope" not in window.views
    with pytest.raises(KeyError):
        window.views["nope"]
    window.set_view("stats")
    qtbot.waitUntil(lambda: not stats.is_busy() and stats.model.rowCount() > 0, timeout=LOAD_TIMEOUT_MS)


def test_a_tab_clicked_before_its_view_is_built_shows_that_view(qtbot, window):
    from gui import main_window as mw

    open_and_wait(qtbot, window, NAIVE)
    assert "stats" in window._pending
    index = list(mw.VIEWS).index("stats")
    window.tabs.setCurrentIndex(index)  # what a click on the tab does
    view = dict(window.views).get("stats")
    assert view is not None and window.tabs.currentWidget() is view
    assert window.current_view() == "stats" and "stats" not in window._pending
    qtbot.waitUntil(lambda: not view.is_busy() and view.model.rowCount() > 0, timeout=LOAD_TIMEOUT_MS)


def test_a_folder_of_ranks_opens_in_rank_order(qtbot, window, tmp_path):
    """NAME_rank<N> reports are listed by N and rank 0 is selected, whichever finished loading last."""
    import lzma

    from tests.conftest import REPO
    from tests.gui.conftest import LOAD_TIMEOUT_MS

    src = REPO / "tests/data/recordings/zoo/ddp4"
    folder = tmp_path / "job"
    folder.mkdir()
    for r in (3, 1, 2, 0):
        (folder / f"ddp4_base_rank{r}.sqlite").write_bytes(
            lzma.decompress((src / f"ddp4_base_rank{r}.sqlite.xz").read_bytes()))
    window.open_path(folder)
    qtbot.waitUntil(lambda: not window.is_loading() and len(window.reports) == 4, timeout=LOAD_TIMEOUT_MS)
    names = [window.report_list.item(i).text() for i in range(window.report_list.count())]
    assert names == [f"ddp4_base_rank{r}.sqlite" for r in range(4)]
    assert [r.name for r in window.reports.reports] == names
    assert window.reports.current.name == "ddp4_base_rank0.sqlite"
