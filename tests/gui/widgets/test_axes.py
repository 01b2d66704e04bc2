"""The shared log axis: engineering labels on decades (and 2x/5x when few decades show), on the
real roofline and bandwidth charts of the fixtures."""

from __future__ import annotations

import math

import pytest

from gui.widgets.axes import LogAxis, eng, log_ticks
from tests.conftest import FIXTURES, NSYS_DIR
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait


def test_eng_labels() -> None:
    assert [eng(10.0 ** d, "B/s") for d in (8, 9, 10, 11, 12)] == [
        "100 MB/s", "1 GB/s", "10 GB/s", "100 GB/s", "1 TB/s"]
    assert [eng(10.0 ** d, "FLOP/s") for d in (13, 14, 15)] == ["10 TFLOP/s", "100 TFLOP/s", "1 PFLOP/s"]
    assert [eng(10.0 ** d) for d in (-2, -1, 0, 1, 2, 3, 4)] == ["0.01", "0.1", "1", "10", "100", "1k", "10k"]
    assert eng(5e14, "FLOP/s") == "500 TFLOP/s" and eng(2e3) == "2k" and eng(0.05) == "0.05"
    assert eng(10.0 ** math.log10(1000)) == "1k"  # 999.9999999999998 is still 1k


def test_log_ticks_decades_then_2_and_5_then_thinned() -> None:
    # 7 decades on 1100 px, labels 80 px wide: every decade, the mantissas as minor ticks
    lab, minor = log_ticks(-2.0, 4.9, 1100, 80)
    assert [eng(10 ** v) for v in lab] == ["0.01", "0.1", "1", "10", "100", "1k", "10k"]
    assert len(minor) == 8 * 7 - 2  # 2..9 of each decade; 8e4 and 9e4 are past 10^4.9 (79k)
    # under two decades on 550 px: 1, 2, 5 labelled
    lab, _ = log_ticks(13.5, 15.3, 550, 28)
    assert [eng(10 ** v, "FLOP/s") for v in lab] == [
        "50 TFLOP/s", "100 TFLOP/s", "200 TFLOP/s", "500 TFLOP/s", "1 PFLOP/s"]
    # 25 decades on 200 px: every 4th decade, the others unlabelled
    lab, minor = log_ticks(-5.0, 20.0, 200, 28)
    assert [round(v) for v in lab] == [-4, 0, 4, 8, 12, 16, 20]
    assert all(v == round(v) for v in minor) and len(minor) == 26 - 7
    # inside one decade: the mantissas that fit
    lab, _ = log_ticks(math.log10(35), math.log10(89), 500, 28)
    assert [eng(10 ** v) for v in lab] == ["40", "50", "60", "70", "80"]
    assert log_ticks(1.0, 1.0, 100, 20) == ([], [])


def _labels(axis: LogAxis) -> list[str]:
    lo, hi = axis.range
    size = axis.height() if axis.orientation in ("left", "right") else axis.width()
    values = [v for _spacing, vs in axis.tickValues(lo, hi, size) for v in vs]
    return [s for s in axis.tickStrings(values, 1.0, 1.0) if s]


@pytest.mark.skipif(not (FIXTURES / "ncu" / "torch_sdpa.ncu-rep").is_file(), reason="fixtures missing")
def test_roofline_axes_read_in_flops_and_intensity(qtbot, window) -> None:
    open_and_wait(qtbot, window, FIXTURES / "ncu" / "torch_sdpa.ncu-rep")
    window.set_view("roofline")
    view = window.views["roofline"]
    qtbot.waitUntil(lambda: view.result is not None, timeout=LOAD_TIMEOUT_MS)
    qtbot.wait(50)
    item = view.plot.getPlotItem()
    left, bottom = item.getAxis("left"), item.getAxis("bottom")
    assert isinstance(left, LogAxis) and isinstance(bottom, LogAxis)
    ys, xs = _labels(left), _labels(bottom)
    # the Tensor FP16 chart spans ~40 TFLOP/s to ~2 PFLOP/s, and 0.01 to ~80k FLOP/byte
    assert {"100 TFLOP/s", "1 PFLOP/s"} <= set(ys)
    assert {"0.01", "0.1", "1", "10", "100", "1k", "10k"} <= set(xs)
    lo, hi = left.range
    assert all(eng(10.0 ** d, "FLOP/s") in ys for d in range(math.ceil(lo), math.floor(hi) + 1))
    assert not any("·" in s or "10¹" in s for s in ys + xs)
    # labels never pile up: at most one per 20 px on the vertical axis
    assert len(ys) <= left.height() / 20


@pytest.mark.skipif(not (NSYS_DIR / "host_overhead_gpumetrics.sqlite").is_file(), reason="fixtures missing")
def test_bandwidth_axis_reads_in_gb_per_s(qtbot, window) -> None:
    open_and_wait(qtbot, window, NSYS_DIR / "host_overhead_gpumetrics.sqlite")
    window.set_view("bandwidth")
    view = window.views["bandwidth"]
    qtbot.waitUntil(lambda: view.analysis is not None, timeout=LOAD_TIMEOUT_MS)
    qtbot.wait(50)
    axis = view.scatter_plot.getPlotItem().getAxis("left")
    assert isinstance(axis, LogAxis)
    labels = _labels(axis)
    # copies at ~55 GB/s under the 64 GB/s PCIe Gen5 ceiling: less than a decade, labelled by tens
    lo, hi = (10 ** v for v in axis.range)
    expected = [f"{m} GB/s" for m in range(10, 100, 10) if lo <= m <= hi] + (["100 GB/s"] if lo <= 100 <= hi
                                                                                else [])
    assert labels == expected and "50 GB/s" in labels and "60 GB/s" in labels


def test_no_si_scale_on_top_of_our_unit(qtbot) -> None:
    """An axis labelled in ms with values under 1 read "time (ms) (x0.001)": styled axes have no
    automatic SI prefix, the unit in the label is the only one."""
    import pyqtgraph as pg

    from gui.widgets.axes import style_axes

    raw, styled = pg.PlotWidget(), pg.PlotWidget()
    for w in (raw, styled):
        qtbot.addWidget(w)
        w.resize(400, 300)
        w.setLabel("bottom", "time since capture start (ms)")
        w.plot([0.0, 0.4], [0.0, 1.0])
        w.getPlotItem().setXRange(0.0, 0.5, padding=0)
    style_axes(styled.getPlotItem())
    for w in (raw, styled):
        w.show()
        w.getPlotItem().getAxis("bottom").updateAutoSIPrefix()
    assert "(ms) (x0.001)" in raw.getPlotItem().getAxis("bottom").labelString()  # what pyqtgraph does
    label = styled.getPlotItem().getAxis("bottom").labelString()
    assert "(x" not in label and "time since capture start (ms)" in label


def test_plain_axis_never_prints_scientific_notation(qtbot: object) -> None:
    from gui.widgets.axes import PlainAxis

    axis = PlainAxis("bottom")
    assert axis.tickStrings([0.0, 500000.0, 1000000.0, 1500000.0], 1.0, 500000.0) == [
        "0", "500,000", "1,000,000", "1,500,000"]
    assert axis.tickStrings([0.1, 0.2, 0.3], 1.0, 0.1) == ["0.1", "0.2", "0.3"]
