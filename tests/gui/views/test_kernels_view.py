"""Kernels view on the real Nsight Compute fixtures: the table, sections and rules are the engine's."""

from __future__ import annotations

import subprocess
import sys

import pytest
from PySide6.QtCore import QPoint, Qt

from gui import format as fmt
from tests.conftest import FIXTURES, NSYS_DIR, REPO
from tests.gui.conftest import LOAD_TIMEOUT_MS, SCREENSHOTS, open_and_wait, screenshot

NCU = FIXTURES / "ncu"


def _show(qtbot, window):
    window.set_view("kernels")
    view = window.views["kernels"]
    qtbot.waitUntil(lambda: view.data is not None, timeout=LOAD_TIMEOUT_MS)
    return view


def _click_row(qtbot, table, row):
    rect = table.visualRect(table.model().index(row, 1))
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


@pytest.mark.parametrize("name", ["host_overhead_fixed.ncu-rep", "torch_sdpa.ncu-rep"])
def test_kernel_table_is_the_engines(qtbot, window, name):
    from engine.analysis.ncu.sections import kernel_table, rules_table

    report = open_and_wait(qtbot, window, NCU / name)
    view = _show(qtbot, window)
    kt = kernel_table(report.ncu)
    assert view.column("ID") == [float(i) for i in kt["id"]]
    assert view.column("Duration (µs)") == pytest.approx(list(kt["duration_ns"] / 1e3))
    assert view.column("SM %") == pytest.approx(list(kt["sm_throughput_pct"]))
    assert view.column("Achieved occupancy %") == pytest.approx(list(kt["achieved_occupancy_pct"]))
    assert view.column("Bottleneck") == list(kt["verdict"])
    rt = rules_table(report.ncu)
    saved = [None if v != v else pytest.approx(v) for v in rt["weighted_ns"] / 1e3]  # NaN: no estimate
    assert view.column("Est. time saved (µs)", view.rules_proxy) == saved
    assert view.column("Rank", view.rules_proxy)[0] == 1.0
    # "Fix first" is the findings engine's top gain (capped), not ncu's raw top estimate
    from engine.analysis.findings.model import sort_findings
    from engine.analysis.findings.ncu import ncu_findings
    from engine.analysis.findings.overview import gain_text

    top = next(f for f in sort_findings(ncu_findings(report.ncu)) if f.gain is not None)
    assert f"Fix first: <b>{top.title}</b>" in view.headline.text()
    assert gain_text(top) in view.headline.text()
    screenshot(window, f"{NCU.joinpath(name).stem}_kernels")


def test_click_a_kernel_shows_its_sections_and_rules(qtbot, window):
    from engine.analysis.ncu.sections import kernel_sections, rules_table

    report = open_and_wait(qtbot, window, NCU / "host_overhead_fixed.ncu-rep")
    view = _show(qtbot, window)
    assert view.selected_id == 0  # the first kernel is shown at once
    with qtbot.waitSignal(view.sig_kernel_selected) as blocker:
        _click_row(qtbot, view.table, 1)
    assert blocker.args == [1]
    assert "saxpy" in view.details_title.text()
    expected = kernel_sections(report.ncu, 1)
    shown = view.detail_texts()
    assert list(shown) == list(expected)
    sol = expected["GPU Speed Of Light"]
    dur = sol[sol["metric"] == "Duration"].iloc[0]
    # human units on screen, ncu's base value on hover and in copies
    assert shown["GPU Speed Of Light"]["Duration"] == fmt.duration(dur["value"])
    top = view.details.topLevelItem(0)
    items = {top.child(j).text(0): top.child(j) for j in range(top.childCount())}
    assert items["Duration"].toolTip(1) == dur["text"]
    freq = sol[sol["metric"] == "SM Frequency"].iloc[0]
    assert freq["unit"] == "hz" and items["SM Frequency"].text(1) == f"{freq['value'] / 1e9:,.2f} GHz"
    assert items["SM Frequency"].toolTip(1) == freq["text"]  # "1,…,….. hz"
    view.details.clearSelection()
    items["SM Frequency"].setSelected(True)
    assert view.copy_details() == f"SM Frequency\t{freq['text']}"
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == f"SM Frequency\t{freq['text']}"
    # Only the selected kernel's rule results when asked.
    view.only_selected.setChecked(True)
    ids = view.column("ID", view.rules_proxy)
    assert ids and set(ids) == {1.0}
    assert len(ids) == int((rules_table(report.ncu)["id"] == 1).sum())
    view.only_selected.setChecked(False)
    assert view.rules_proxy.rowCount() == len(rules_table(report.ncu))
    screenshot(window, "host_overhead_fixed_kernels_saxpy")


def test_sort_by_duration(qtbot, window):
    open_and_wait(qtbot, window, NCU / "torch_sdpa.ncu-rep")
    view = _show(qtbot, window)
    col = view.model.column_names().index("Duration (µs)")
    header = view.table.horizontalHeader()
    x = header.sectionViewportPosition(col) + header.sectionSize(col) // 2
    qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, header.height() // 2))
    d = view.column("Duration (µs)")
    assert d == sorted(d) or d == sorted(d, reverse=True)
    assert d != view.model.df["Duration (µs)"].tolist()  # the launches were not in duration order


def test_nsys_report_says_what_to_record(qtbot, window):
    open_and_wait(qtbot, window, NSYS_DIR / "host_overhead_fixed.sqlite")
    window.set_view("kernels")
    view = window.views["kernels"]
    assert view.stack.showing_placeholder()
    assert "not an Nsight Compute report" in view.stack.placeholder_text()
    assert "ncu --set full" in view.stack.placeholder_text()


def test_ncu_report_in_summary_and_stats(qtbot, window):
    open_and_wait(qtbot, window, NCU / "host_overhead_fixed.ncu-rep")
    summary = window.views["summary"]
    assert summary.ncu_notice.isVisibleTo(window) and not summary._scroll.isVisibleTo(window)
    assert "Nsight Compute report" in summary.ncu_notice.text()
    window.set_view("stats")
    stats = window.views["stats"]
    assert "Nsight Compute report" in stats.stack.placeholder_text()
    assert window.log.errors() == []


@pytest.mark.parametrize("view", ["kernels", "roofline"])
def test_screenshot_command(tmp_path, view):
    out = SCREENSHOTS / f"cli_torch_sdpa_{view}.png"
    proc = subprocess.run(
        [sys.executable, "-m", "gui.app", str(NCU / "torch_sdpa.ncu-rep"), "--screenshot", str(out),
         "--view", view],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen", "KERNELSCOPE_CONFIG": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert (img.width(), img.height()) == (1600, 1000)


def test_timeline_link_opens_the_ncu_result(qtbot, window):
    """The Timeline's "Show in Kernels view" hit (ncu_path + ID) selects that result here."""
    ncu = open_and_wait(qtbot, window, NCU / "host_overhead_fixed.ncu-rep")
    open_and_wait(qtbot, window, NSYS_DIR / "host_overhead_fixed.sqlite")
    assert window.reports.current is not ncu
    view = window.views["kernels"]
    window.views["timeline"].sig_link.emit("kernels", {"ncu_path": str(ncu.path), "ID": 1,
                                                       "Kernel Name": "saxpy"})
    qtbot.waitUntil(lambda: view.selected_id == 1, timeout=LOAD_TIMEOUT_MS)
    assert window.reports.current is ncu
    assert window.current_view() == "kernels"
    assert "saxpy" in view.details_title.text()


def test_rules_table_reads_at_a_glance(qtbot, window):
    """Rank, ID, short kernel name (full name in the tooltip), rule (message in the tooltip),
    speedup and time saved all visible and never cut off; compact rows; long names elided in the middle."""
    from engine.analysis.ncu.sections import kernel_table, rules_table

    report = open_and_wait(qtbot, window, NCU / "torch_sdpa.ncu-rep")
    view = _show(qtbot, window)
    qtbot.wait(50)
    kt, rt = kernel_table(report.ncu), rules_table(report.ncu)
    cols = view.rules_model.column_names()
    shown = [c for i, c in enumerate(cols) if not view.rules.isColumnHidden(i)]
    assert shown == ["Rank", "ID", "Kernel", "Rule", "Est. speedup %", "Est. time saved (µs)"]
    short = dict(zip(kt["id"], kt["short_name"], strict=True))
    full = dict(zip(kt["id"], kt["name"], strict=True))
    kc, rc = cols.index("Kernel"), cols.index("Rule")
    top = rt.iloc[0]
    assert view.rules_proxy.index(0, kc).data() == short[top["id"]]
    assert view.rules_proxy.index(0, kc).data(Qt.ItemDataRole.ToolTipRole) == full[top["id"]]
    message = str(top["message"]).replace("\n", " ")
    assert view.rules_proxy.index(0, rc).data(Qt.ItemDataRole.ToolTipRole) == message
    rh = view.rules.horizontalHeader()
    # the 101-character cuDNN name does not fit: the column keeps the rest visible and elides it
    assert view.rules.fontMetrics().horizontalAdvance(short[top["id"]]) > rh.sectionSize(kc)
    for name in ("Rank", "ID", "Est. speedup %", "Est. time saved (µs)"):
        c = cols.index(name)
        assert rh.sectionSize(c) >= rh.sectionSizeHint(c), name  # header text not cut off
    right = max(rh.sectionViewportPosition(c) + rh.sectionSize(c) for c in range(len(cols))
                if not view.rules.isColumnHidden(c))
    assert right <= view.rules.viewport().width()  # the last column ends inside the visible table
    for table in (view.table, view.rules):
        assert table.textElideMode() == Qt.TextElideMode.ElideMiddle
        assert table.rowHeight(0) <= table.fontMetrics().height() + 8
    assert view.model.index(0, view.model.column_names().index("Kernel")).data(
        Qt.ItemDataRole.ToolTipRole) == full[kt["id"].iloc[0]]
