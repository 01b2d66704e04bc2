"""Roofline view on the real Nsight Compute fixtures: points and ceilings are the engine's."""

from __future__ import annotations

import math

import pytest

from tests.conftest import FIXTURES, NSYS_DIR
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

NCU = FIXTURES / "ncu"


def _show(qtbot, window):
    window.set_view("roofline")
    view = window.views["roofline"]
    qtbot.waitUntil(lambda: view.result is not None, timeout=LOAD_TIMEOUT_MS)
    return view


def _expected(rf, key, level=""):
    p = rf.points
    keyed = p["precision"].astype(str).str.cat(p["path"].fillna("").astype(str), sep=" ").str.strip()
    p = p[(keyed == key) & (p["flops_per_s"] > 0) & (p["bytes_per_s"] > 0)]
    if level:
        p = p[p["level"] == level]
    return sorted((round(math.log10(a), 9), round(math.log10(f), 9), int(i), str(lv))
                  for a, f, i, lv in zip(p["intensity_flop_per_byte"], p["flops_per_s"], p["id"], p["level"],
                                         strict=True))


def _drawn(view):
    return sorted((round(x, 9), round(y, 9), i, lv) for x, y, i, lv in view.drawn_points)


def test_sdpa_tensor_points_and_ceilings(qtbot, window):
    from engine.analysis.ncu.roofline import roofline

    report = open_and_wait(qtbot, window, NCU / "torch_sdpa.ncu-rep")
    view = _show(qtbot, window)
    rf = roofline(report.ncu)
    # The flash-attention kernel's work is on the tensor cores: that precision comes first.
    assert view.precision.currentData() == "Tensor FP16"
    assert _drawn(view) == _expected(rf, "Tensor FP16")
    assert len(view.drawn_points) == 12  # 4 kernels x DRAM/L2/L1
    ceil = {r["name"]: r["value"] for r in rf.ceilings.to_dict("records") if r["source"] == "report"}
    want = {lv: ceil[lv] for lv in ("DRAM", "L2", "L1")}
    assert view.drawn_ceilings == want | {"Tensor FP16": ceil["Tensor FP16"]}
    assert view.shown_legend() == ["DRAM", "L2", "L1"]  # the levels drawn, and only those
    view.level.setCurrentIndex(view.level.findData("L2"))
    assert view.shown_legend() == ["L2"]
    view.level.setCurrentIndex(0)
    # Hover text: kernel name and its numbers.
    import pyqtgraph as pg

    scatters = [it for it in view.plot.getPlotItem().items if isinstance(it, pg.ScatterPlotItem)]
    tips = [t for s in scatters for t in s.data["data"]]
    assert len(tips) == 12
    assert all("cudnn_generated_fort_native_sdpa" in t and "FLOP/s" in t and "% of the roof" in t
               for t in tips)
    screenshot(window, "torch_sdpa_roofline")


def test_precision_and_level_selectors(qtbot, window):
    from engine.analysis.ncu.roofline import roofline

    report = open_and_wait(qtbot, window, NCU / "host_overhead_fixed.ncu-rep")
    view = _show(qtbot, window)
    rf = roofline(report.ncu)
    assert view.precision.currentData() == "FP32"  # sgemm and saxpy are FP32 work
    assert _drawn(view) == _expected(rf, "FP32")
    view.level.setCurrentIndex(view.level.findData("DRAM"))
    assert _drawn(view) == _expected(rf, "FP32", "DRAM")
    assert set(view.drawn_ceilings) == {"DRAM", "FP32"}
    view.select_precision("FP16")
    view.level.setCurrentIndex(view.level.findData(""))
    assert _drawn(view) == _expected(rf, "FP16")
    # saxpy did no FP16 work: it is left off the log chart, and the notes say so.
    assert {i for _, _, i, _ in view.drawn_points} == {0}
    assert "No FP16 work in 1 kernel" in view.notes.text()
    view.select_precision("FP32")
    screenshot(window, "host_overhead_fixed_roofline")


def test_nsys_report_says_a_roofline_needs_ncu(qtbot, window):
    open_and_wait(qtbot, window, NSYS_DIR / "host_overhead_naive.sqlite")
    window.set_view("roofline")
    view = window.views["roofline"]
    assert view.stack.showing_placeholder()
    assert "not an Nsight Compute report" in view.stack.placeholder_text()
    with pytest.raises(KeyError):
        view.select_precision("FP32")


def test_peak_is_solid_and_top_kernels_are_named(qtbot, window):
    from PySide6.QtCore import Qt

    from gui.views.roofline_view import TOP_LABELS, short_kernel

    open_and_wait(qtbot, window, NCU / "torch_sdpa.ncu-rep")
    view = _show(qtbot, window)
    # the report's peak: solid (dashed is kept for calibrated ceilings, as the caption says)
    assert view.peak_style == Qt.PenStyle.SolidLine
    assert "solid: the report's peaks, dashed: calibration" in view.points_text.text()
    # the four launches of the one SDPA kernel sit on one point: one label, "×4"
    names = {short_kernel(str(k)) for k in view.result.points["kernel"]}
    assert len(names) == 1 and set(view.labels.values()) == {f"{next(iter(names))} ×4"}
    assert len(set(view.labels.values())) <= TOP_LABELS
    assert short_kernel("void at::native::elementwise_kernel<128, 4, at::Foo<float>>(int, T3)") == \
        "at::native::elementwise_kernel"


def test_missing_metrics_is_a_short_sentence(qtbot, window, tmp_path):
    """A public report profiled without roofline sections: one short sentence, no stale
    "Computing…", the kernel list only in the tooltip."""
    import subprocess

    from gui.views.roofline_view import MISSING_METRICS

    subprocess.run(["tar", "xJf", str(FIXTURES / "ncu_public.tar.xz"), "-C", str(tmp_path),
                    "ncu_public/Lashi0812__profiling_profiles_torchLinear.ncu-rep"], check=True, timeout=120)
    name = "Lashi0812__profiling_profiles_torchLinear.ncu-rep"
    open_and_wait(qtbot, window, tmp_path / "ncu_public" / name)
    view = _show(qtbot, window)
    assert view.stack.showing_placeholder() and view.stack.placeholder_text() == MISSING_METRICS
    assert view.notes.text() == "" and not view.precision.isEnabled()
    assert "were not collected for" in view.stack.placeholder.toolTip()
    assert view.shown_legend() == []  # no DRAM/L2/L1 entries above an empty roofline
    assert not any(e.isVisible() for e in view.legend.values())
    screenshot(window, "roofline_missing_metrics")
