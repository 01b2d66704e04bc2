"""Bandwidth view on the real fixtures: what it draws and lists is the engine's analysis."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PySide6.QtCore import Qt

from gui import format as fmt
from tests.conftest import FIXTURES, NSYS_DIR
from tests.gui.conftest import KINETO, LOAD_TIMEOUT_MS, open_and_wait, screenshot

REPORTS = [NSYS_DIR / "host_overhead_naive.sqlite", NSYS_DIR / "host_overhead_fixed.sqlite",
           NSYS_DIR / "torch_sdpa_gemm.sqlite", NSYS_DIR / "legacy2022_partial_naive.sqlite", KINETO]


def _show(qtbot, window):
    window.set_view("bandwidth")
    view = window.views["bandwidth"]
    qtbot.waitUntil(lambda: view.analysis is not None or view.stack.showing_placeholder()
                    and not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    return view


@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_view_shows_the_engine_analysis(qtbot, window, path):
    from engine.analysis.bandwidth import analyze
    from gui.views.bandwidth_view import rating_text

    report = open_and_wait(qtbot, window, path)
    view = _show(qtbot, window)
    expected = analyze(report.trace)
    a = view.analysis
    assert a is not None
    # Every copy is a point at its own rate, grouped by direction x memory kind.
    assert sum(len(x) for x, _ in view.drawn.values()) == len(expected.transfers)
    for kind, (_x, y) in view.drawn.items():
        want = expected.transfers.loc[expected.transfers["kind"] == kind, "gb_per_s"].to_numpy()
        np.testing.assert_allclose(y, want, rtol=1e-12)
    # The histogram counts every copy once.
    assert {k: int(c.sum()) for k, c in view.hist_counts.items()} == \
        expected.transfers["kind"].value_counts().to_dict()
    # The table: one row per kind, the engine's numbers as the table formats them.
    rows = view.table_rows()
    assert len(rows) == len(expected.stats)
    for row, (_, s) in zip(rows, expected.stats.iterrows(), strict=True):
        assert (row["Direction"], row["Memory"]) == (s["direction"], s["memory"])
        assert row["Copies"] == fmt.count(s["count"])
        assert row["Bytes"] == fmt.nbytes(s["bytes"]) and row["Time (sum)"] == fmt.duration(s["total_ns"])
        assert row["Time (union)"] == fmt.duration(s["union_ns"])
        assert row["Achieved"] == fmt.rate(float(s["gb_per_s"]) * 1e9)
        assert row["Ceiling"] == fmt.rate(float(s["ceiling_gb_per_s"]) * 1e9)
        assert row["Ceiling from"] == "spec"
        assert row["Rating"] == rating_text(s.to_dict())
        assert not re.search(r"\de[-+]?\d", " ".join(row.values()))  # never scientific notation
    # Ceilings: the H200's PCIe Gen5 x16 per direction, from the spec (no calibration here).
    assert set(view.ceiling_lines.values()) == {64.0}
    assert "PCIe Gen5 x16 (spec)" in view.ceiling_text.text()
    assert "run `kernelscope calibrate`" in view.notes.text()
    screenshot(window, f"{path.stem}_bandwidth")


def test_pinned_and_pageable_are_told_apart(qtbot, window):
    open_and_wait(qtbot, window, NSYS_DIR / "torch_sdpa_gemm.sqlite")
    view = _show(qtbot, window)
    assert set(view.drawn) == {"Host-to-Device · Pageable", "Host-to-Device · Pinned",
                               "Device-to-Host · Pageable", "Device-to-Host · Pinned"}
    pinned = np.median(view.drawn["Host-to-Device · Pinned"][1])
    pageable = np.median(view.drawn["Host-to-Device · Pageable"][1])
    assert pinned > 5 * pageable  # 55.5 vs 6.7 GB/s on the H200


def test_sort_by_achieved_rate(qtbot, window):
    open_and_wait(qtbot, window, NSYS_DIR / "torch_sdpa_gemm.sqlite")
    view = _show(qtbot, window)
    col = view.model.column_names().index("Achieved")
    header = view.table.horizontalHeader()
    x = header.sectionViewportPosition(col) + header.sectionSize(col) // 2
    from PySide6.QtCore import QPoint

    qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, header.height() // 2))
    shown = view.table.column("Achieved")  # raw bytes/s: sorted as numbers, not as "55.3 GB/s" text
    assert shown == sorted(shown) or shown == sorted(shown, reverse=True)
    assert len(set(shown)) == 4


def test_ncu_report_says_it_has_no_copies(qtbot, window):
    open_and_wait(qtbot, window, FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep")
    window.set_view("bandwidth")
    view = window.views["bandwidth"]
    assert view.stack.showing_placeholder()
    assert "Nsight Compute report" in view.stack.placeholder_text()
    assert "Kernels" in view.stack.placeholder_text()


def test_one_tiny_copy_reads_sanely(qtbot, window, tmp_path):
    """A report with a single 4-byte copy (the sample with every other copy deleted): the time axis
    counts from the capture start to the copy, the histogram bar is visible, the table says 4 B and
    calls the copy latency-bound with its 1.6 µs instead of a share of 64 GB/s."""
    import shutil
    import sqlite3

    from gui.settings import default_sample

    path = tmp_path / "one_tiny_copy.sqlite"
    shutil.copy(default_sample(), path)
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE rowid != "
                   "(SELECT MIN(rowid) FROM CUPTI_ACTIVITY_KIND_MEMCPY)")
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 4, [end] = start + 1600")
        (start,), = db.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchall()
    open_and_wait(qtbot, window, path)
    view = _show(qtbot, window)
    assert len(view.analysis.transfers) == 1
    end_ns = start + 1600
    unit, scale = next((u, s) for s, u in ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")) if end_ns >= s)
    assert view.time_unit == unit
    assert view.scatter_plot.getPlotItem().getAxis("bottom").labelText == f"time since capture start ({unit})"
    lo, hi = view.scatter_plot.getPlotItem().viewRange()[0]
    assert lo < 0 < start / scale < end_ns / scale <= hi <= 1.03 * end_ns / scale
    assert {k: int(c.sum()) for k, c in view.hist_counts.items()} == {"Host-to-Device · Pageable": 1}
    bars = [i for i in view.hist_plot.getPlotItem().items if type(i).__name__ == "BarGraphItem"]
    assert bars and bars[0].boundingRect().height() >= 0.05  # decades: visible, not 0.0015
    row = view.table_rows()[0]
    assert row["Bytes"] == "4 B" and row["Time (sum)"] == "1.6 µs" and row["Achieved"] == "2.5 MB/s"
    assert row["% of ceiling"] == "" and row["Rating"] == "latency-bound, 1.6 µs per copy"
    note = "Host-to-Device · Pageable</b>: latency-bound: 4 B per copy, 1.6 µs per copy"
    assert note in view.rating_text.text()
    screenshot(window, "bandwidth_one_tiny_copy")


def test_multi_gpu_copies_explained_on_the_capture_clock(qtbot, window, tmp_path_factory):
    """ddp_torchrun (2 GPUs): the axis counts from the capture start (as the Timeline), 8-byte
    loss.item() copies are latency-bound with their latency, device copies in L2 are counted."""
    from tests.engine.analysis import ddp_recordings as D

    if not D.available():
        pytest.skip("the DDP recordings are not in this checkout")
    path = D.unpack(tmp_path_factory.mktemp("ddp"), D.TORCHRUN)[0]
    report = open_and_wait(qtbot, window, path)
    view = _show(qtbot, window)
    x = view.analysis.transfers
    assert view.time_unit == "s"
    # seconds since capture start, not since the first copy
    np.testing.assert_allclose(np.concatenate([v[0] for v in view.drawn.values()]).min(),
                               x["start"].min() / 1e9)
    assert x["start"].min() > 5e9  # the first copy comes 7 s into the capture
    rows = {(r["Direction"], r["Memory"]): r for r in view.table_rows()}
    pinned = rows[("Device-to-Host", "Pinned")]
    assert pinned["Bytes"] == "32 B" and pinned["% of ceiling"] == ""
    assert pinned["Rating"] == "latency-bound, 2.6 µs per copy"
    assert rows[("Device-to-Device", "Device")]["Rating"] == "mixed: 168 in L2, 340 latency-bound"
    assert report.trace is not None
    screenshot(window, "bandwidth_ddp_torchrun")
