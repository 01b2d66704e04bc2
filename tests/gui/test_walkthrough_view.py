"""Findings & walkthrough view on the real recordings: it lists the engine's findings and verifies
naive -> fixed with the engine's statistics."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.conftest import FIXTURES, NSYS_DIR
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"


def _show(qtbot, window):
    window.set_view("findings")
    view = window.views["findings"]
    qtbot.waitUntil(lambda: view.result is not None, timeout=LOAD_TIMEOUT_MS)
    return view


def test_lists_the_engine_findings_and_verifies_naive_to_fixed(qtbot, window):
    from engine.analysis.rules import findings_for

    open_and_wait(qtbot, window, FIXED)
    open_and_wait(qtbot, window, NAIVE)  # current: the baseline
    view = _show(qtbot, window)
    want = findings_for(NAIVE)
    assert view.table.rowCount() == len(want)
    assert [view.table.item(i, 1).text() for i in range(len(want))] == [f.title for f in want]
    assert view.table.item(0, 0).text() == want[0].severity == "critical"
    assert "cudaMallocHost" in view.detail.toPlainText() or "pinned" in view.detail.toPlainText().lower()
    ids = [view.items.item(i).data(Qt.ItemDataRole.UserRole) for i in range(view.items.count())]
    assert {"host.allocate-once", "host.async-copies", "copies.pinned"} <= set(ids)
    for i in range(view.items.count()):
        if view.items.item(i).data(Qt.ItemDataRole.UserRole) in ("host.allocate-once", "copies.pinned"):
            view.items.item(i).setCheckState(Qt.CheckState.Checked)
    assert view.after.currentText() == FIXED.name
    view.verify_button.click()
    qtbot.waitUntil(lambda: view.verdict is not None, timeout=LOAD_TIMEOUT_MS)
    v = view.verdict
    assert v["verdict"] == "verified" and v["stats"]["p_value"] == pytest.approx(2 / 70)
    assert set(v["findings_counted"]) == {"nsys.per-iteration-alloc", "nsys.pageable-copies"}
    assert "VERIFIED" in view.verdict_label.text() and "speedup 4.57x" in view.verdict_label.text()
    screenshot(window, "host_overhead_naive_findings")


def test_ncu_report_findings(qtbot, window):
    open_and_wait(qtbot, window, FIXTURES / "ncu" / "torch_sdpa.ncu-rep")
    view = _show(qtbot, window)
    titles = [view.table.item(i, 1).text() for i in range(view.table.rowCount())]
    assert "Tensor pipes mostly idle in a matmul-like kernel" in titles and "Low occupancy" in titles
    assert not view.verify_button.isEnabled()  # nothing to compare with
    screenshot(window, "torch_sdpa_findings")
