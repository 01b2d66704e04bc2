"""Each real fixture opened in the window: the views show the engine's numbers for that file."""

from __future__ import annotations

import csv

import pytest

from gui import format as fmt
from tests.conftest import NSYS_SQLITE, ORACLES
from tests.gui.conftest import KINETO, open_and_wait, screenshot, wait_stats

REPORTS = [*NSYS_SQLITE, KINETO]


def _engine_summary(path):
    from engine.analysis.findings.overview import overview
    from engine.reports import open_report

    with open_report(path) as trace:
        return overview(trace)[0]


@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_open_fixture_shows_engine_numbers(qtbot, window, path):
    report = open_and_wait(qtbot, window, path)
    expected = _engine_summary(path)

    assert window.windowTitle() == f"Kernelscope — {path.name}"
    assert window.reports.current is report
    assert window.log.errors() == []

    summary = window.views["summary"]
    heads = summary.headline_texts()
    assert heads["span"] == fmt.duration(expected.wall.span_ns)
    assert heads["api"] == fmt.duration(expected.host.union_ns)  # time with a call in flight
    assert heads["busy"] == fmt.duration(expected.gpu.busy_ns)
    assert heads["idle"] == fmt.duration(expected.gpu.idle_ns)
    # The Summary shows the top findings of the one findings engine (the Findings tab's).
    shown = [lab.text() for lab in summary.finding_labels]
    assert [s.lstrip("• ").strip() for s in shown] == (
        [f"[{f.severity}] {f.title}: {f.gain}" for f in expected.findings]
        or ["Nothing stands out in this capture."])
    assert [f.id for f in report.findings[: len(expected.findings)]] == [f.id for f in expected.findings]
    # The chart: one segment per API category, one bar per GPU whose parts and idle add up to the
    # capture (overlapping work is never stacked twice).
    assert [s[0] for s in summary.chart.segments["api"]] == [
        c.label for c in expected.host.categories if c.attributed_ns > 0
    ]
    from gui.views.summary_view import _time_unit

    scale = _time_unit(max(expected.wall.span_ns, 1))[1]
    for key, segs in summary.chart.segments.items():  # every bar ends at or before the capture
        assert sum(w for _, _, w in segs) <= expected.wall.span_ns / scale * (1 + 1e-9), key
    if expected.gpu.device_count == 1:
        gpu_segs = summary.chart.segments["gpu"]
        assert [s[0] for s in gpu_segs][: len(expected.gpu.parts)] == [
            p.part for p in expected.gpu.devices[0].parts if p.attributed_ns > 0]
    assert summary.bandwidth.rowCount() == len(expected.bandwidth)
    for m in expected.missing:
        assert m[1:] in summary.missing_label.text()
    screenshot(window, f"{path.stem}_summary")

    window.set_view("info")
    rows = window.views["info"].table_rows()
    for name, n in report.table_rows.items():
        assert rows[name] == ("–" if n is None else fmt.count(n))
    screenshot(window, f"{path.stem}_info")

    view = wait_stats(qtbot, window)
    if view.stats is not None:
        df = view.stats.run_report(report.trace, view.combo.currentData())
        assert view.model.rowCount() == len(df)
    screenshot(window, f"{path.stem}_stats")


def test_naive_sample_numbers(qtbot, window):
    """The bundled sample: 251.96 ms capture, and sgemm_naive ran 5 times (as nsys itself says)."""
    from gui.settings import default_sample

    open_and_wait(qtbot, window, default_sample())
    assert window.views["summary"].headline_texts()["span"] == "251.96 ms"

    view = wait_stats(qtbot, window, "cuda_gpu_kern_sum")
    if view.stats is None:
        pytest.skip("engine.analysis.nsys.stats is not in this build")
    with open(ORACLES / "host_overhead_naive_cuda_gpu_kern_sum.csv", newline="") as fh:
        oracle = {r["Name"]: r for r in csv.DictReader(fh)}
    cols = view.model.column_names()
    name_col, inst_col = cols.index("Name"), cols.index("Instances")
    table = {view.proxy.index(r, name_col).data(): view.proxy.index(r, inst_col).data()
             for r in range(view.proxy.rowCount())}
    sgemm = next(k for k in table if k.startswith("sgemm_naive"))
    assert table[sgemm] == oracle[sgemm]["Instances"] == "5"
    assert view.table.isVisible()


def test_views_switch_with_shortcuts(qtbot, window):
    from gui.settings import default_sample
    from gui.views.registry import VIEW_SPECS

    open_and_wait(qtbot, window, default_sample())
    keys = [s.key for s in VIEW_SPECS]
    assert [window.tabs.tabText(i) for i in range(window.tabs.count())] == [s.title for s in VIEW_SPECS]
    # every view, in the registry's order, then back to the first
    for i, key in [*enumerate(keys), (0, keys[0])]:
        window.view_actions[key].trigger()
        assert window.tabs.currentIndex() == i
        assert window.current_view() == key
    for i, key in enumerate(keys, start=1):
        want = f"Ctrl+{i}" if i <= 9 else ""
        assert window.view_actions[key].shortcut().toString() == want
    # the shortcut itself (not only the action) switches the tab
    from PySide6.QtCore import Qt

    last = min(len(keys), 9)
    qtbot.keyClick(window, Qt.Key(Qt.Key.Key_0 + last), Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.currentIndex() == last - 1


def test_stats_unavailable_is_explained(qtbot, window, monkeypatch):
    from gui.views import stats_view

    monkeypatch.setattr(stats_view, "load_stats_module", lambda: None)
    from gui.settings import default_sample

    open_and_wait(qtbot, window, default_sample())
    view = window.views["stats"]
    window.set_view("stats")
    assert "not available" in view.stack.placeholder_text()
    assert not view.export_button.isEnabled()
