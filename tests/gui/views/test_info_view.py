"""Info view: for an Nsight Compute report, two table rows and one sentence (not a grey row per
timeline table), who wrote it as far as the file says, and the GPU's memory from the report."""

from __future__ import annotations

from gui import format as fmt
from tests.conftest import FIXTURES
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

NCU = FIXTURES / "ncu" / "torch_sdpa.ncu-rep"


def test_ncu_report_info(qtbot, window):
    from engine.reports.ncu import NOT_A_TIMELINE, report_format_version

    report = open_and_wait(qtbot, window, NCU)
    window.set_view("info")
    view = window.views["info"]
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    rows = view.table_rows()
    assert rows == {"profiled kernels": fmt.count(len(report.ncu.kernels)), "gpus": "1"}
    texts = [view.tables.item(r, 2).text() for r in range(view.tables.rowCount())]
    assert not any(NOT_A_TIMELINE[:40].lower() in t.lower() for t in texts)
    assert view.missing.text().count("•") == 1 and "No timeline" in view.missing.text()
    fmt_version = report_format_version(NCU)
    assert fmt_version is not None
    producer = view.fields["producer"].text()
    assert producer.startswith(f"Nsight Compute (report format {fmt_version}), read with ncu-report ")
    # the GPU's memory from device__attribute_total_memory (the H200's 141 GiB = 150.1 GB), read in
    # the background once Info is shown (it decodes the whole report)
    from gui.views.info_view import ncu_total_memory

    assert ncu_total_memory(report.ncu) == 150_109_880_320
    want = f"NVIDIA H200 (132 SMs, {fmt.nbytes(150_109_880_320)})"
    qtbot.waitUntil(lambda: view.fields["gpus"].text() == want, timeout=LOAD_TIMEOUT_MS)
    screenshot(window, "torch_sdpa_ncu_info")


def test_gpu_text_leaves_out_what_is_not_recorded():
    from gui.views.info_view import gpu_text

    assert gpu_text({"name": "NVIDIA H200", "smCount": 132, "totalMemory": None}) == "NVIDIA H200 (132 SMs)"
    assert gpu_text({"name": None, "smCount": None}) == "unnamed GPU"


def test_identical_gpus_are_listed_once_with_a_count(qtbot, window, tmp_path):
    """A Kineto trace that lists the same GPU for each device (train_bad_kineto: two H100s): the
    GPUs row names the model once with its count."""
    import lzma

    from tests.conftest import REPO

    path = tmp_path / "train_bad_kineto.json"
    path.write_bytes(lzma.decompress((REPO / "tests/data/recordings/nsys/single/train_bad_kineto.json.xz")
                                     .read_bytes()))
    report = open_and_wait(qtbot, window, path)
    window.set_view("info")
    view = window.views["info"]
    qtbot.waitUntil(lambda: view.fields["gpus"].text() not in ("", "…"), timeout=LOAD_TIMEOUT_MS)
    gpus = [g.to_json() for g in report.summary.report.gpus]
    assert len(gpus) == 2 and gpus[0]["name"] == gpus[1]["name"] == "NVIDIA H100 80GB HBM3"
    assert view.fields["gpus"].text() == "2 × NVIDIA H100 80GB HBM3 (132 SMs, 85.02 GB)"
    assert fmt.distinct(["a", "b", "a", "a"]) == ["3 × a", "b"]
