"""Kernels view "Compare with:": two Nsight Compute reports side by side, the engine's comparison."""

from __future__ import annotations

import lzma
import shutil

import pytest
from PySide6.QtCore import QPoint, Qt

from gui import format as fmt
from tests.conftest import FIXTURES, NSYS_DIR, REPO
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

NCU = FIXTURES / "ncu"
DATA = REPO / "tests" / "data" / "ncu"


@pytest.fixture(scope="module")
def torch18(tmp_path_factory):
    """The two H200 recordings of the same 18-kernel program (full set, then SpeedOfLight only)."""
    out = tmp_path_factory.mktemp("torch18")
    paths = []
    for stem in ("torch18_full", "torch18_sol"):
        dst = out / f"{stem}.ncu-rep"
        with lzma.open(DATA / f"{stem}.ncu-rep.xz") as src, dst.open("wb") as f:
            shutil.copyfileobj(src, f, 1 << 20)
        paths.append(dst)
    return paths


def _kernels(qtbot, window):
    window.set_view("kernels")
    view = window.views["kernels"]
    qtbot.waitUntil(lambda: view.data is not None, timeout=LOAD_TIMEOUT_MS)
    return view


def _compare(qtbot, view, other):
    view.compare_to(other)
    qtbot.waitUntil(lambda: view.comparison is not None and not view.is_busy(), timeout=LOAD_TIMEOUT_MS)


def _combo_items(view):
    return [view.compare_combo.itemText(i) for i in range(view.compare_combo.count())]


def _nan_none(values):
    return [None if v != v else pytest.approx(v) for v in values]


def _ratio(before: float, after: float) -> str:
    z = before / after
    word = "faster" if z >= 1 else "slower"
    z = max(z, 1 / z)
    return f"{z:.3f}× {word}" if z < 10 else f"{z:.1f}× {word}"


def test_before_after_of_the_same_program(qtbot, window, torch18):
    from engine.analysis.ncu.compare import compare_reports
    from engine.analysis.ncu.sections import kernel_table

    full = open_and_wait(qtbot, window, torch18[0])
    sol = open_and_wait(qtbot, window, torch18[1])
    view = _kernels(qtbot, window)
    assert window.reports.current is sol
    assert _combo_items(view) == ["—", "torch18_full.ncu-rep"]
    assert view.stack.currentWidget() is view._body

    _compare(qtbot, view, full)  # the chosen report is the baseline, the current one the change
    assert view.stack.currentWidget() is view.compare_page
    assert view.compare_combo.currentText() == "torch18_full.ncu-rep"
    exp = compare_reports(full.ncu, sol.ncu)
    assert len(exp) == 18 and set(exp["status"]) == {"matched"}
    p = view.compare_proxy
    assert view.column("Status", p) == list(exp["status"])
    assert view.column("Launch", p) == [float(o + 1) for o in exp["occurrence"]]
    assert view.column("ID before", p) == [float(i) for i in exp["id_before"]]
    assert view.column("ID after", p) == [float(i) for i in exp["id_after"]]
    assert view.column("Before (µs)", p) == pytest.approx(list(exp["duration_ns_before"] / 1e3))
    assert view.column("After (µs)", p) == pytest.approx(list(exp["duration_ns_after"] / 1e3))
    assert view.column("Speedup ×", p) == pytest.approx(list(exp["speedup"]))
    assert view.column("Δ SM %", p) == pytest.approx(list(exp["sm_throughput_pct_delta"]))
    assert view.column("Δ Memory %", p) == pytest.approx(list(exp["memory_throughput_pct_delta"]))
    # The SpeedOfLight-only recording has no occupancy: blank deltas, not zeros.
    assert view.column("Δ Achieved occupancy %", p) == _nan_none(exp["achieved_occupancy_pct_delta"])
    assert all(v is None for v in view.column("Δ Achieved occupancy %", p))
    # Short names shown, the full demangled name in the tooltip.
    kt = kernel_table(sol.ncu)
    short = dict(zip(kt["id"], kt["short_name"], strict=True))
    assert view.column("Kernel", p) == [short[i] for i in exp["id_after"]]
    kcol = view.compare_model.column_names().index("Kernel")
    tips = [p.index(r, kcol).data(Qt.ItemDataRole.ToolTipRole) for r in range(p.rowCount())]
    assert tips == list(exp["name"])
    # The fastest-improving launch reads as a speedup.
    best = int(exp["speedup"].idxmax())
    scol = view.compare_model.column_names().index("Speedup ×")
    assert p.index(best, scol).data() == f"{exp['speedup'][best]:.3f}×"
    pct = exp["duration_delta_pct"][best]
    assert p.index(best, scol).data(Qt.ItemDataRole.ToolTipRole).startswith(f"duration {pct:+.1f} %")

    # Headline: the engine's sums, which are the two reports' total kernel times.
    before_ns, after_ns = float(exp["duration_ns_before"].sum()), float(exp["duration_ns_after"].sum())
    assert before_ns == pytest.approx(float(kernel_table(full.ncu)["duration_ns"].sum()))
    assert after_ns == pytest.approx(float(kt["duration_ns"].sum()))
    text = view.compare_headline.text()
    assert (f"<b>18</b> kernels matched; total kernel time <b>{fmt.duration(before_ns)} → "
            f"{fmt.duration(after_ns)}</b> (<b>{_ratio(before_ns, after_ns)}</b>)") in text
    assert "only before" not in text and "only after" not in text
    assert "torch18_sol.ncu-rep has no occupancy metrics" in text
    assert "torch18_full.ncu-rep has no" not in text
    # Every column visible at 1600 px wide; the kernel name gives way, the numbers do not.
    hh = view.compare_table.horizontalHeader()
    cols = view.compare_model.column_names()
    assert cols[-1] == "Bottleneck after"
    assert hh.sectionViewportPosition(len(cols) - 1) + hh.sectionSize(len(cols) - 1) \
        <= view.compare_table.viewport().width()
    for i, name in enumerate(cols):
        if name != "Kernel":
            assert hh.sectionSize(i) >= hh.sectionSizeHint(i), name
    assert hh.sectionSize(cols.index("Kernel")) >= 200  # short names mostly readable
    assert not view.headline.isVisible()
    screenshot(window, "kernels_compare")

    # Sortable: a click on the speedup header orders the rows by it.
    header = view.compare_table.horizontalHeader()
    x = header.sectionViewportPosition(scol) + header.sectionSize(scol) // 2
    qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, header.height() // 2))
    s = view.column("Speedup ×", p)
    assert s != list(exp["speedup"]) and (s == sorted(s) or s == sorted(s, reverse=True))

    # Swap: the current report becomes the baseline; speedups invert.
    view.swap_button.click()
    qtbot.waitUntil(lambda: view.comparison is not None and not view.is_busy()
                    and view._cmp_key == (id(sol), id(full)), timeout=LOAD_TIMEOUT_MS)
    rev = compare_reports(sol.ncu, full.ncu)
    view.compare_proxy.sort(-1)
    assert view.column("Speedup ×", p) == pytest.approx(list(rev["speedup"]))
    assert f"{fmt.duration(after_ns)} → {fmt.duration(before_ns)}" in view.compare_headline.text()

    # "—" clears the comparison and shows the report's own kernels again.
    view.compare_combo.setCurrentIndex(0)
    assert view.comparison is None and view.compare_model.rowCount() == 0
    assert view.stack.currentWidget() is view._body
    assert view.headline.isVisible() and "profiled kernels" in view.headline.text()
    assert window.log.errors() == []


def test_unrelated_reports_and_the_list_follows_open_reports(qtbot, window):
    from engine.analysis.ncu.compare import compare_reports

    before = open_and_wait(qtbot, window, NCU / "host_overhead_fixed.ncu-rep")
    view = _kernels(qtbot, window)
    assert _combo_items(view) == ["—"] and not view.compare_combo.isEnabled()
    nsys = open_and_wait(qtbot, window, NSYS_DIR / "host_overhead_fixed.sqlite")
    after = open_and_wait(qtbot, window, NCU / "torch_sdpa.ncu-rep")
    view = _kernels(qtbot, window)
    assert _combo_items(view) == ["—", "host_overhead_fixed.ncu-rep"]  # the nsys report is not listed

    _compare(qtbot, view, before)
    exp = compare_reports(before.ncu, after.ncu)
    p = view.compare_proxy
    assert view.column("Status", p) == list(exp["status"])
    assert view.column("Status", p).count("only after") == 4
    assert view.column("Status", p).count("only before") == 2
    assert view.column("Before (µs)", p) == _nan_none(exp["duration_ns_before"] / 1e3)
    assert view.column("After (µs)", p) == _nan_none(exp["duration_ns_after"] / 1e3)
    text = view.compare_headline.text()
    before_ns, after_ns = float(exp["duration_ns_before"].sum()), float(exp["duration_ns_after"].sum())
    assert (f"<b>0</b> kernels matched; total kernel time <b>{fmt.duration(before_ns)} → "
            f"{fmt.duration(after_ns)}</b> (<b>{_ratio(before_ns, after_ns)}</b>)") in text
    assert "2 launches only before; 4 launches only after" in text
    assert "no kernel name is in both reports; are they recordings of the same program?<br>" in text
    screenshot(window, "kernels_compare_unmatched")

    # The nsys report as current: no comparison bar; back to the ncu report: the choice is kept.
    window.reports.set_current(nsys)
    assert not view.compare_bar.isVisible()
    window.reports.set_current(after)
    qtbot.waitUntil(lambda: view.comparison is not None and not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert view.compare_bar.isVisible() and view.compare_combo.currentText() == "host_overhead_fixed.ncu-rep"

    # Closing the other report ends the comparison and empties the list.
    window.reports.remove(before)
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert _combo_items(view) == ["—"] and view.comparison is None
    assert view.stack.currentWidget() is view._body
    assert window.log.errors() == []
