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
    screenshot(window, "ddp_torchrun_summary")
