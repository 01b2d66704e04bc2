"""Summary view: the step-range combo recomputes steps and findings; several GPUs get a row each."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from gui import format as fmt
from tests.conftest import NSYS_DIR
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
DDP = Path(__file__).resolve().parents[2] / "data" / "recordings" / "nsys" / "ddp" / "ddp_torchrun.sqlite.xz"


def test_range_combo_recomputes_steps_and_findings(qtbot, window):
    report = open_and_wait(qtbot, window, NAIVE)
    view = window.views["summary"]
    combo = view.range_combo
    names = [combo.itemText(i) for i in range(combo.count())]
    assert names[0] == combo.currentText() == "iteration(naive)" and "upload" in names
    assert "iteration(naive)" in view.iter_text.text()
    combo.activated.emit(names.index("upload"))
    qtbot.waitUntil(lambda: view.summary is not None and view.summary.iterations.range == "upload",
                    timeout=LOAD_TIMEOUT_MS)
    assert report.range_name == "upload" and report.summary.iterations.chosen_by == "user"
    assert "<b>upload</b>" in view.iter_text.text() and combo.currentText() == "upload"
    # The findings were recomputed with the new steps (one source for both views).
    assert [lab.text().lstrip("• ") for lab in view.finding_labels][0].startswith(
        f"[{report.findings[0].severity}] {report.findings[0].title}")


@pytest.mark.skipif(not DDP.exists(), reason="the H100 recordings are not in tests/data/recordings")
def test_two_gpu_report_has_a_bar_per_gpu_and_rows_per_gpu_and_process(qtbot, window, tmp_path):
    path = tmp_path / "ddp_torchrun.sqlite"
    path.write_bytes(lzma.decompress(DDP.read_bytes()))
    report = open_and_wait(qtbot, window, path)
    view = window.views["summary"]
    s = report.summary
    assert sorted(k for k in view.chart.segments if k.startswith("gpu ")) == ["gpu 0", "gpu 1"]
    text = view.devices_label.text()
    assert "2 GPUs" in text and f"{fmt.duration(s.gpu.busy_sum_ns)} (a sum" in text
    assert "2 processes" in text or "3 processes" in text
    assert view.headline_texts()["busy"] == fmt.duration(s.gpu.busy_ns)
    top = view.finding_labels[0].text()
    assert top.startswith("•  [critical] The GPU sits idle between operations [pid ")
    # copy bandwidth: the time is a sum (not the union of the activity table), each rate in its unit
    bw = view.bandwidth
    heads = [bw.horizontalHeaderItem(c).text() for c in range(bw.columnCount())]
    assert heads[4:] == ["Time (sum)", "Rate"]
    rows = {(bw.item(r, 0).text(), bw.item(r, 1).text()): [bw.item(r, c).text() for c in range(2, 6)]
            for r in range(bw.rowCount())}
    assert rows[("Device-to-Host", "Pinned")] == ["4", "32 B", "10.4 µs", "3.1 MB/s"]  # not "0.00"
    assert rows[("Device-to-Device", "Device")][3] == "1,262.78 GB/s"  # as the CLI prints it: one formatter
    screenshot(window, "ddp_torchrun_summary")


def test_identical_gpus_once_with_a_count_and_axis_in_the_header_unit(qtbot, window, tmp_path):
    """train_fixed.sqlite: the report lists two H100s (one used) and spans 5.14 s. The subtitle names
    the model once ('2 × …'); the time axis is in s like the '5.14 s' card, with no pyqtgraph scale
    ('(x0.001)') on top of the unit."""
    src = Path(__file__).resolve().parents[3] / "tests/data/recordings/nsys/single/train_fixed.sqlite.xz"
    path = tmp_path / "train_fixed.sqlite"
    path.write_bytes(lzma.decompress(src.read_bytes()))
    report = open_and_wait(qtbot, window, path)
    view = window.views["summary"]
    names = [g.name for g in report.summary.report.gpus]
    assert names == ["NVIDIA H100 80GB HBM3"] * 2
    sub = view.subtitle.text()
    assert "2 × NVIDIA H100 80GB HBM3 (132 SMs)" in sub and sub.count("NVIDIA H100") == 1
    span = report.summary.wall.span_ns
    assert 1e9 < span < 10e9 and fmt.duration(span) == "5.14 s"
    axis = view.chart.plot.getPlotItem().getAxis("bottom")
    assert axis.labelText == "time (s)" and axis.labelUnits == ""
    assert "(x" not in axis.labelString()
    assert not axis.autoSIPrefix
    lo, hi = view.chart.plot.getPlotItem().viewRange()[0]
    assert hi == pytest.approx(span / 1e9 * 1.02)  # 0 … 5.2 s, not 0 … 5,243 ms


def test_durations_past_a_minute_stay_in_seconds():
    """The '2 min 35.3 s' header above ticks in s: one unit for both."""
    assert fmt.duration(155.3e9) == "155.30 s"
    assert fmt.duration(59.99e9) == "59.99 s" and fmt.duration(8e9) == "8.00 s"
