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
    from engine.analysis.findings.ncu_fixes import first_per_kernel, fix_list
    from engine.analysis.ncu.sections import kernel_table

    report = open_and_wait(qtbot, window, NCU / name)
    view = _show(qtbot, window)
    kt = kernel_table(report.ncu)
    assert view.column("ID") == [float(i) for i in kt["id"]]
    assert view.column("Duration (µs)") == pytest.approx(list(kt["duration_ns"] / 1e3))
    assert view.column("SM %") == pytest.approx(list(kt["sm_throughput_pct"]))
    assert view.column("Achieved occupancy %") == pytest.approx(list(kt["achieved_occupancy_pct"]))
    assert view.column("Bottleneck") == list(kt["verdict"])
    # header, kernel table and "What to fix first" are one list: the engine's fix list
    fixes = fix_list(report.ncu)
    saved = [None if x.gain_ns is None else pytest.approx(x.gain_ns / 1e3) for x in fixes]
    assert view.column("Saved in total (µs)", view.rules_proxy) == saved
    assert view.column("Rank", view.rules_proxy) == [float(i) for i in range(1, len(fixes) + 1)]
    top = fixes[0]
    assert f"Fix first: <b>{top.title}</b>" in view.headline.text()
    assert top.gain_words() in view.headline.text()
    assert view.column("Fix", view.rules_proxy)[0] == top.title
    best = first_per_kernel(fixes)
    assert view.column("Fix first") == [best[str(n)].title for n in kt["short_name"]]
    screenshot(window, f"{NCU.joinpath(name).stem}_kernels")


def test_fix_first_is_rank_one_of_a_table_that_is_not_empty(qtbot, window, tmp_path):
    """The public smemTranspose report has no ncu rule results: the header's "Fix first" (our
    uncoalesced-stores finding, 0.42 ms) is the table's rank 1, not a line above an empty table."""
    name = "ncu_public/Lashi0812__profiling_profiles_smemTranspose.ncu-rep"
    subprocess.run(["tar", "xJf", str(FIXTURES / "ncu_public.tar.xz"), "-C", str(tmp_path), name],
                   check=True, timeout=120)
    open_and_wait(qtbot, window, tmp_path / name)
    view = _show(qtbot, window)
    text = view.headline.text()
    assert ("Fix first: <b>Uncoalesced global stores</b> in <b>naiveGmem</b> (memory-bound): 0.42 ms "
            "(79.8 % of its time), rank 1 of the 2 below") in text
    rows = view.rules.rows_text()
    assert len(rows) == 2
    first = (rows[0]["Rank"], rows[0]["Kernel"], rows[0]["Fix"])
    assert first == ("1", "naiveGmem", "Uncoalesced global stores")
    assert view.column("Saved in total (µs)", view.rules_proxy)[0] == pytest.approx(418.2, abs=0.05)
    # bank conflicts have no estimate: an empty gain, not "0.0"
    assert rows[1]["Fix"] == "Shared-memory bank conflicts" and rows[1]["Saved in total (µs)"] == ""


def test_multi_launch_kernel_is_one_row_per_rule_with_per_launch_gain(qtbot, window):
    """torch_sdpa: 4 launches of one kernel; each rule is one row (4 launches), the gain per launch and
    over the four; the header says both."""
    from engine.analysis.findings.ncu_fixes import fix_list

    report = open_and_wait(qtbot, window, NCU / "torch_sdpa.ncu-rep")
    view = _show(qtbot, window)
    fixes = fix_list(report.ncu)
    assert view.column("Fix", view.rules_proxy) == [x.title for x in fixes]
    assert len(set(view.column("Fix", view.rules_proxy))) == len(fixes)  # no rule repeated per launch
    assert set(view.column("Launches", view.rules_proxy)) == {4.0}
    per, total = view.column("Saved per launch (µs)", view.rules_proxy)[0], \
        view.column("Saved in total (µs)", view.rules_proxy)[0]
    assert total == pytest.approx(4 * per) and total == pytest.approx(fixes[0].gain_ns / 1e3)
    assert "25.2 µs per launch × 4 launches = 0.10 ms (53.8 % of its time)" in view.headline.text()


def test_fix_first_agrees_with_the_bottleneck(qtbot, window):
    """host_overhead_fixed: saxpy is memory-bound; its "Fix first" is the memory-side rule, not ncu's
    HighPipeUtilization (the same capped gain); the capped, off-limiter rules say so in the Note."""
    open_and_wait(qtbot, window, NCU / "host_overhead_fixed.ncu-rep")
    view = _show(qtbot, window)
    assert view.column("Bottleneck") == ["memory-bound", "memory-bound"]
    assert view.column("Fix first")[1] == "MemoryL2Compression"
    rows = view.rules.rows_text()
    hpu = next(r for r in rows if r["Kernel"] == "sgemm_tiled" and r["Fix"] == "HighPipeUtilization")
    assert hpu["Note"] == "capped (ncu: 1.76 ms); not the limiter"
    assert hpu["Severity"] == "warning"


def test_click_a_kernel_shows_its_sections_and_rules(qtbot, window):
    from engine.analysis.ncu.sections import kernel_sections

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
    # metric names are never cut ("Local Memory Spilling Reque…")
    mem = view.details.topLevelItem(1)
    names = [mem.child(j).text(0) for j in range(mem.childCount())]
    assert "Local Memory Spilling Requests" in names
    need = view.details.fontMetrics().horizontalAdvance("Local Memory Spilling Requests")
    assert view.details.header().sectionSize(0) >= need + 2 * view.details.indentation()
    # Only the selected kernel's fixes when asked.
    from engine.analysis.findings.ncu_fixes import fix_list

    fixes = fix_list(report.ncu)
    view.only_selected.setChecked(True)
    kernels = view.column("Kernel", view.rules_proxy)
    assert kernels and set(kernels) == {"saxpy"}
    assert len(kernels) == sum(1 for x in fixes if x.kernel == "saxpy")
    view.only_selected.setChecked(False)
    assert view.rules_proxy.rowCount() == len(fixes)
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
    """Rank, kernel (full name in the tooltip), fix (its text in the tooltip), launches, gains, severity
    and note visible; numbers never cut off; compact rows; long names elided in the middle; the kernel
    table fits the window (no "memory-boun" at its edge)."""
    from engine.analysis.findings.ncu_fixes import fix_list
    from engine.analysis.ncu.sections import kernel_table

    report = open_and_wait(qtbot, window, NCU / "torch_sdpa.ncu-rep")
    view = _show(qtbot, window)
    qtbot.wait(50)
    kt, fixes = kernel_table(report.ncu), fix_list(report.ncu)
    cols = view.rules_model.column_names()
    shown = [c for i, c in enumerate(cols) if not view.rules.isColumnHidden(i)]
    assert shown == ["Rank", "Kernel", "Fix", "Launches", "Saved per launch (µs)", "Saved in total (µs)",
                     "Severity", "Note"]
    full = dict(zip(kt["short_name"], kt["name"], strict=True))
    kc, fc = cols.index("Kernel"), cols.index("Fix")
    top = fixes[0]
    assert view.rules_proxy.index(0, kc).data() == top.kernel
    assert view.rules_proxy.index(0, kc).data(Qt.ItemDataRole.ToolTipRole) == full[top.kernel]
    assert view.rules_proxy.index(0, fc).data(Qt.ItemDataRole.ToolTipRole) == top.finding.summary
    rh = view.rules.horizontalHeader()
    # the 101-character cuDNN name does not fit: the column keeps the rest visible and elides it
    assert view.rules.fontMetrics().horizontalAdvance(top.kernel) > rh.sectionSize(kc)
    for name in ("Rank", "Launches", "Saved per launch (µs)", "Saved in total (µs)", "Severity"):
        c = cols.index(name)
        assert rh.sectionSize(c) >= rh.sectionSizeHint(c), name  # header text not cut off
    for table in (view.rules, view.table):
        hh = table.horizontalHeader()
        right = max(hh.sectionViewportPosition(c) + hh.sectionSize(c) for c in range(hh.count())
                    if not table.isColumnHidden(c))
        assert right <= table.viewport().width()  # the last column ends inside the visible table
    bc = view.model.column_names().index("Bottleneck")
    # "latency-bound" whole
    assert view.table.horizontalHeader().sectionSize(bc) >= view.table.sizeHintForColumn(bc)
    for table in (view.table, view.rules):
        assert table.textElideMode() == Qt.TextElideMode.ElideMiddle
        assert table.rowHeight(0) <= table.fontMetrics().height() + 8
    assert view.model.index(0, view.model.column_names().index("Kernel")).data(
        Qt.ItemDataRole.ToolTipRole) == full[kt["short_name"].iloc[0]]
