"""The Timeline view on every real fixture: lanes and events match the trace tables and NVIDIA's
``nsys stats`` oracles; zoom, pan, box zoom, hover, click and the ncu link work on real events."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QImage, QMouseEvent, QWheelEvent
from PySide6.QtWidgets import QApplication

from gui import format as fmt
from tests.conftest import FIXTURES, NSYS_DIR, NSYS_SQLITE, ORACLES, REPO
from tests.gui.conftest import KINETO, LOAD_TIMEOUT_MS, SCREENSHOTS, open_and_wait, screenshot

REPORTS = [*NSYS_SQLITE, KINETO]
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
NCU_FIXED = FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep"


def show_timeline(qtbot, window, path: Path):
    report = open_and_wait(qtbot, window, path)
    window.set_view("timeline")
    view = window.views["timeline"]
    qtbot.waitUntil(lambda: not view.is_busy() and view.model is not None, timeout=LOAD_TIMEOUT_MS)
    QApplication.processEvents()
    return report, view


def oracle_sum(path: Path, report: str, column: str) -> int:
    f = ORACLES / f"{path.stem}_{report}.csv"
    if not f.exists() or f.stat().st_size == 0:
        return 0
    with f.open(newline="") as fh:
        return sum(int(r[column]) for r in csv.DictReader(fh))


def _ids(s):
    return [("?" if v != v else str(int(v))) for v in s]  # NaN -> "?"


@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_lanes_and_events_match_the_trace(qtbot, window, path):
    report, view = show_timeline(qtbot, window, path)
    trace = report.trace
    model = view.model
    lanes = {g: [ln for ln in model.lanes if ln.group == g] for g in ("api", "gpu", "nvtx", "metric")}

    api = trace.table("api")
    assert sorted(ln.key for ln in lanes["api"]) == sorted(
        {f"api:{p}:{t}" for p, t in zip(_ids(api["pid"]), _ids(api["tid"]), strict=True)})
    assert sum(len(ln) for ln in lanes["api"]) == len(api)

    streams, n_gpu = set(), 0
    for name in ("kernels", "memcpy", "memset"):
        df = trace.table(name)
        n_gpu += len(df)
        streams |= {f"gpu:{d}:{s}" for d, s in zip(_ids(df["deviceId"]), _ids(df["streamId"]), strict=True)}
    assert sorted(ln.key for ln in lanes["gpu"]) == sorted(streams)
    assert sum(len(ln) for ln in lanes["gpu"]) == n_gpu
    nv = trace.table("nvtx")
    n_ranges = int(nv["eventType"].isin([59, 60, 34]).sum()) if len(nv) else 0
    assert sum(len(ln) for ln in lanes["nvtx"]) == n_ranges
    gm = trace.table("gpu_metrics")
    metric = [ln for ln in lanes["metric"] if not ln.key.startswith("memory:")]
    assert len(metric) == (gm.groupby(["gpu", "metricName"]).ngroups if len(gm) else 0)
    assert sum(len(ln) for ln in metric) == len(gm)
    # GPU memory lanes: the --cuda-memory-usage events, their running total in MiB
    memory = [ln for ln in lanes["metric"] if ln.key.startswith("memory:")]
    if trace.has("memory_usage"):
        mu = trace.table("memory_usage", ["bytes", "memKind", "memoryOperationType"])
        mu = mu[mu["memKind"].isin([2, 5])]
        assert len(memory) == 1 and len(memory[0]) == len(mu)
        sign = np.where(mu["memoryOperationType"] == 1, -1, 1)
        assert memory[0].values[-1] * 2**20 == pytest.approx(float((mu["bytes"] * sign).sum()))
    else:
        assert not memory

    if path.suffix == ".sqlite":  # NVIDIA's own counts for the same file
        kinds = np.concatenate([ln.kinds for ln in lanes["gpu"]]) if lanes["gpu"] else np.zeros(0)
        assert int((kinds == 0).sum()) == oracle_sum(path, "cuda_gpu_kern_sum", "Instances")
        assert int((kinds != 0).sum()) == oracle_sum(path, "cuda_gpu_mem_time_sum", "Count")
        assert sum(len(ln) for ln in lanes["api"]) == oracle_sum(path, "cuda_api_sum", "Num Calls")
        assert sum(len(ln) for ln in lanes["nvtx"]) == oracle_sum(path, "nvtx_sum", "Instances")

    # every lane is sorted by start, and what is missing is said in words
    for ln in model.lanes:
        assert np.all(np.diff(ln.starts) >= 0)
    text = view.status.text()
    assert f"{len(api):,} CUDA API calls" in text
    if "gpu_metrics" in trace.missing:
        assert "No GPU metrics" in text and "--gpu-metrics-devices" in text
    if "kernels" in trace.missing:
        assert "No kernels" in text
    # with steps, the timeline opens on the first steady steps with a step ruler; Show all shows the
    # whole capture's CUDA activity, and every lane was painted
    qtbot.waitUntil(lambda: view.canvas.paint_count > 0)
    qtbot.waitUntil(lambda: report.summary is not None or bool(getattr(report, "summary_error", None)),
                    timeout=60_000)
    it = report.summary.iterations if report.summary is not None else None
    if it is not None:
        qtbot.waitUntil(lambda: view.canvas.steps is not None)
        starts, ends, state = view.canvas.steps
        assert len(starts) == it.count and int((state == 1).sum()) == it.warmup_count
        first = int(np.flatnonzero(state != 1)[0])
        t0, t1 = view.canvas.visible_range()
        assert t0 <= starts[first] < t1 and t1 - t0 < model.activity_max - model.activity_min
        screenshot(window, f"{path.stem}_timeline_steps")
        view.btn_fit.click()
    t0, t1 = view.canvas.visible_range()
    assert t0 <= model.activity_min and t1 >= model.activity_max
    screenshot(window, f"{path.stem}_timeline")


def test_nvtx_nesting_levels_follow_the_ranges(qtbot, window):
    report, view = show_timeline(qtbot, window, FIXED)
    nv = report.trace.table("nvtx")
    outer = view.model.lane("nvtx:2102:2102:0")
    inner = view.model.lane("nvtx:2102:2102:1")
    names = lambda ln: sorted(str(view.model.names[c]) for c in ln.names)  # noqa: E731
    # nvtx_sum: 5 x iteration(fixed) enclose 5 x upload, compute and download
    assert names(outer) == ["iteration(fixed)"] * 5
    assert names(inner) == sorted(["upload", "compute", "download"] * 5)
    assert len(outer) + len(inner) == len(nv)


def _wheel(canvas, x: float, y: float, dy: int, mods=Qt.KeyboardModifier.NoModifier):
    pos = QPointF(x, y)
    ev = QWheelEvent(pos, canvas.mapToGlobal(pos), QPoint(0, 0), QPoint(0, dy), Qt.MouseButton.NoButton,
                     mods, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(canvas, ev)


def _mouse(canvas, kind, x, y, button, buttons):
    pos = QPointF(x, y)
    ev = QMouseEvent(kind, pos, canvas.mapToGlobal(pos), button, buttons, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(canvas, ev)


def test_zoom_by_wheel_range_drag_and_box(qtbot, window):
    _report, view = show_timeline(qtbot, window, FIXED)
    c = view.canvas
    t0, t1 = c.visible_range()
    x = c.x_at(t0 + 0.25 * (t1 - t0))
    at = c.t_at(x)
    _wheel(c, x, 60, 120)  # one notch in: 1.25x around the pointer
    n0, n1 = c.visible_range()
    assert n1 - n0 == pytest.approx((t1 - t0) / 1.25, rel=1e-9)
    assert c.t_at(x) == pytest.approx(at, abs=1e-3 * (t1 - t0))
    _wheel(c, x, 60, -120)  # and out again
    assert c.visible_range() == pytest.approx((t0, t1), rel=1e-9)

    _wheel(c, x, 60, 120, Qt.KeyboardModifier.ShiftModifier)  # shift+wheel pans
    p0, p1 = c.visible_range()
    assert p1 - p0 == pytest.approx(t1 - t0) and p0 < t0

    c.set_range(620_000_000, 621_000_000)
    assert c.visible_range() == (620_000_000.0, 621_000_000.0)
    assert view.range_label.text().startswith(fmt.duration(620_000_000))

    # left-drag pans by the dragged distance
    xa, xb = c.x_at(620_200_000), c.x_at(620_400_000)
    _mouse(c, QEvent.Type.MouseButtonPress, xb, 60, Qt.MouseButton.LeftButton, Qt.MouseButton.LeftButton)
    _mouse(c, QEvent.Type.MouseMove, xa, 60, Qt.MouseButton.NoButton, Qt.MouseButton.LeftButton)
    _mouse(c, QEvent.Type.MouseButtonRelease, xa, 60, Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton)
    assert c.visible_range() == pytest.approx((620_200_000, 621_200_000), abs=1.0)

    # right-drag zooms to the dragged range
    c.set_range(600_000_000, 640_000_000)
    xa, xb = c.x_at(610_000_000), c.x_at(630_000_000)
    _mouse(c, QEvent.Type.MouseButtonPress, xa, 60, Qt.MouseButton.RightButton, Qt.MouseButton.RightButton)
    _mouse(c, QEvent.Type.MouseMove, xb, 60, Qt.MouseButton.NoButton, Qt.MouseButton.RightButton)
    assert c._band is not None
    _mouse(c, QEvent.Type.MouseButtonRelease, xb, 60, Qt.MouseButton.RightButton, Qt.MouseButton.NoButton)
    assert c.visible_range() == pytest.approx((610_000_000, 630_000_000), abs=1.0)

    view.btn_fit.click()
    assert c.visible_range()[0] <= view.model.activity_min
    screenshot(view, "host_overhead_fixed_timeline_zoomed")


def test_keys_and_vertical_scroll(qtbot, window):
    _report, view = show_timeline(qtbot, window, NSYS_DIR / "host_overhead_gpumetrics.sqlite")
    c = view.canvas
    qtbot.waitUntil(lambda: c.steps is not None, timeout=60_000)  # opened on the steady steps
    t0, t1 = c.visible_range()
    qtbot.keyClick(c, Qt.Key.Key_Plus)
    assert c.visible_range()[1] - c.visible_range()[0] == pytest.approx((t1 - t0) / 1.5)
    qtbot.keyClick(c, Qt.Key.Key_Right)
    qtbot.keyClick(c, Qt.Key.Key_Home)  # Home: the whole capture (the view opened on the steady steps)
    assert c.visible_range()[0] <= c.model.activity_min and c.visible_range()[1] >= c.model.activity_max
    t0, t1 = c.visible_range()
    # 4 CUDA/NVTX lanes + 22 metric lanes do not fit: the lanes scroll, the time axis stays
    assert c.vbar.isVisible() and c.vbar.maximum() > 0
    last = c.model.lanes[-1]
    assert c.lane_at(c.lane_tops()[-1] + 5) is None  # below the visible area at first
    _wheel(c, 500, 300, -1200, Qt.KeyboardModifier.ControlModifier)
    assert c.vbar.value() > 0 and c.visible_range() == pytest.approx((t0, t1))
    c.vbar.setValue(c.vbar.maximum())
    y = c.lane_tops()[-1] - c.v_offset + 5
    assert c.model.lanes[c.lane_at(y)] is last
    screenshot(view, "host_overhead_gpumetrics_timeline_scrolled")


def _mask_coverage(intervals, t0: int, n_bins: int, per_bin: int) -> np.ndarray:
    """Busy fraction per bin from a 1-ns boolean raster: independent of the model's arithmetic."""
    mask = np.zeros(n_bins * per_bin, dtype=bool)
    for s, e in intervals:
        a, b = max(int(s) - t0, 0), min(int(e) - t0, len(mask))
        if b > a:
            mask[a:b] = True
    return mask.reshape(n_bins, per_bin).mean(axis=1)


def test_aggregated_coverage_equals_a_raster_of_the_table(qtbot, window):
    report, view = show_timeline(qtbot, window, FIXED)
    c = view.canvas
    qtbot.waitUntil(lambda: c.paint_count > 0)
    n_bins = int(c.plot_width())
    kernels = report.trace.table("kernels").sort_values("start")
    memcpy = report.trace.table("memcpy")
    # a window over the 2nd to 4th iteration, an exact number of ns per pixel column
    t0 = int(kernels["start"].iloc[2]) - 300_000
    per_bin = 12_000_000 // n_bins
    t1 = t0 + per_bin * n_bins
    c.set_range(t0, t1)
    c.repaint()
    assert c.draw_stats["gpu:0:13"][0] == "detail"  # few events: drawn one by one
    c.detail_max = 3  # force the aggregated path on this real lane
    c.repaint()
    mode, n_visible = c.draw_stats["gpu:0:13"]
    assert mode == "coverage"
    lane = view.model.lane("gpu:0:13")
    assert n_visible == int(((lane.ends >= t0) & (lane.starts <= t1)).sum())
    for kind, df in ((0, kernels), (1, memcpy)):
        expected = _mask_coverage(zip(df["start"], df["end"], strict=True), t0, n_bins, per_bin)
        got = c.last_coverage[("gpu:0:13", kind)]
        assert expected.max() == 1.0  # the window really holds busy columns
        np.testing.assert_allclose(got, expected, atol=1e-12)
    screenshot(view, "host_overhead_fixed_timeline_coverage")


def test_coverage_of_nested_api_calls_counts_overlaps_once():
    from gui.timeline.model import coverage, union_intervals

    starts = np.array([0, 10, 20, 100], dtype=np.int64)
    ends = np.array([50, 30, 60, 110], dtype=np.int64)
    cov = coverage(union_intervals(starts, ends), 0, 120, 12)
    assert cov.tolist() == [1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0]


def _center_of(c, lane_key, t):
    lanes = c.model.lanes
    i = next(k for k, ln in enumerate(lanes) if ln.key == lane_key)
    top = c.lane_tops()[i] - c.v_offset
    return QPoint(int(round(c.x_at(t))), int(top + c.lane_height(lanes[i]) / 2))


def test_hover_tooltip_of_a_known_kernel_and_copy(qtbot, window):
    report, view = show_timeline(qtbot, window, FIXED)
    c = view.canvas
    k = report.trace.table("kernels").sort_values("start").iloc[0]
    s, e = int(k["start"]), int(k["end"])
    c.set_range(s - (e - s), e + (e - s))
    qtbot.mouseMove(c, _center_of(c, "gpu:0:13", (s + e) / 2))
    qtbot.waitUntil(lambda: c.hover_text != "")
    lines = c.hover_text.split("\n")
    assert lines[0] == "void sgemm_tiled<(int)16>(int, const float *, const float *, float *)"
    assert lines[1] == f"Duration: {fmt.duration(e - s)}"
    assert lines[2] == f"Grid: {int(k['gridX'])} × {int(k['gridY'])} × {int(k['gridZ'])}"
    assert lines[3] == f"Block: {int(k['blockX'])} × {int(k['blockY'])} × {int(k['blockZ'])}"
    # nsys stats: every sgemm_tiled instance lies between the oracle's min and max
    with (ORACLES / "host_overhead_fixed_cuda_gpu_kern_sum.csv").open() as fh:
        row = next(r for r in csv.DictReader(fh) if r["Name"].startswith("void sgemm_tiled"))
    assert int(row["Min (ns)"]) <= e - s <= int(row["Max (ns)"])

    m = report.trace.table("memcpy").sort_values("start").iloc[0]
    s, e = int(m["start"]), int(m["end"])
    c.set_range(s - (e - s), e + (e - s))
    qtbot.mouseMove(c, _center_of(c, "gpu:0:13", (s + e) / 2))
    qtbot.waitUntil(lambda: c.hover_text.startswith("[CUDA memcpy"))
    lines = c.hover_text.split("\n")
    assert lines[0] == f"[CUDA memcpy {m['operation']}]"
    assert f"Bytes: {fmt.nbytes(m['bytes'])}" in lines
    assert f"Bandwidth: {m['bytes'] / ((e - s) * 1e-9) / 1e9:,.2f} GB/s" in lines
    # empty space: no tooltip
    qtbot.mouseMove(c, QPoint(int(c.x_at(s - 0.9 * (e - s))), _center_of(c, "gpu:0:13", s).y()))
    qtbot.waitUntil(lambda: c.hover_text == "")


def test_click_kernel_shows_details_and_links_ncu(qtbot, window):
    pytest.importorskip("ncu_report")
    nsys, view = show_timeline(qtbot, window, FIXED)
    c = view.canvas
    kernels = nsys.trace.table("kernels").sort_values("start")

    def click_kernel(i):
        k = kernels.iloc[i]
        s, e = int(k["start"]), int(k["end"])
        c.set_range(s - (e - s), e + (e - s))
        with qtbot.waitSignal(c.sig_event_clicked) as blocker:
            qtbot.mouseClick(c, Qt.MouseButton.LeftButton, pos=_center_of(c, "gpu:0:13", (s + e) / 2))
        return k, blocker.args[0]

    k, rec = click_kernel(0)
    assert rec["name"] == k["name"] and rec["end"] - rec["start"] == k["end"] - k["start"]
    shown = view.details.toPlainText()
    assert str(k["name"]) in shown and fmt.duration(int(k["end"] - k["start"])) in shown
    assert f"Start {k['start'] / 1e6:,.3f} ms" in shown.replace("\t", " ").replace("\n", " ")
    assert f"Grid {int(k['gridX'])} × {int(k['gridY'])} × {int(k['gridZ'])}" in shown.replace("\n", " ")
    assert "No Nsight Compute data" in shown and not view.ncu_button.isEnabled()

    ncu = open_and_wait(qtbot, window, NCU_FIXED)  # the real .ncu-rep, opened like a user would
    window.set_view("timeline")
    assert view.stack.showing_placeholder() and view.model is None  # says why the canvas is empty
    why = view.stack.placeholder_text()
    assert "Nsight Compute report" in why and "no timeline" in why
    window.reports.set_current(nsys)
    assert view.model is not None and not view.is_busy()  # the lanes built before were kept
    ncu_k = ncu.trace.ncu.kernels
    # ncu profiled one launch each: sgemm_tiled is result 0, saxpy result 1 (by name and order)
    for i, want in ((0, 0), (1, 1), (2, None), (3, None)):
        k, rec = click_kernel(i)
        hit = view.current_ncu
        if want is None:
            assert hit is None and not view.ncu_button.isEnabled()
            continue
        row = ncu_k[ncu_k["ID"] == want].iloc[0]
        assert hit["ID"] == want and hit["Base Name"] == k["shortName"] == row["Base Name"]
        assert hit["duration_ns"] == row["duration_ns"]
        assert view.ncu_button.isEnabled()
        assert f"result {want} in {NCU_FIXED.name}" in view.details.toPlainText()
        with qtbot.waitSignal(view.sig_link) as blocker:
            view.ncu_button.click()
        assert blocker.args[0] == "kernels"
        assert blocker.args[1]["ID"] == want and blocker.args[1]["ncu_path"] == str(NCU_FIXED)
        window.reports.set_current(nsys)
        window.set_view("timeline")
    screenshot(window, "host_overhead_fixed_timeline_details")


def test_gpu_metric_lane_shows_the_samples(qtbot, window):
    report, view = show_timeline(qtbot, window, NSYS_DIR / "host_overhead_gpumetrics.sqlite")
    c = view.canvas
    gm = report.trace.table("gpu_metrics")
    sm = gm[gm["metricName"] == "SMs Active [Throughput %]"].sort_values("timestamp")
    lane = view.model.lane("metric:0:SMs Active [Throughput %]")
    assert len(lane) == len(sm) and lane.value_max == 100.0
    c.repaint()
    peak = c.last_coverage[(lane.key, -2)]
    t0, t1 = c.visible_range()
    inside = sm[(sm["timestamp"] >= t0) & (sm["timestamp"] <= t1)]
    before = sm[sm["timestamp"] <= t0]["value"].tail(1)  # the value in effect when the view starts
    assert np.nanmax(peak) == max(inside["value"].max(), *before.tolist())
    assert np.nanmax(peak) == 100  # SMs were fully active while the kernels ran
    # hover at a sample's time shows its value
    row = sm.iloc[len(sm) // 2]
    ts = int(row["timestamp"])
    c.set_range(ts - 50_000, ts + 50_000)
    i = next(k for k, ln in enumerate(c.model.lanes) if ln.key == lane.key)
    c.vbar.setValue(max(0, c.lane_tops()[i] - 200))
    qtbot.mouseMove(c, _center_of(c, lane.key, ts + 1))
    qtbot.waitUntil(lambda: c.hover_text.startswith("SMs Active"))
    assert f"Value: {row['value']:,.4g} %" in c.hover_text.split("\n")


def test_switching_reports_keeps_each_timeline(qtbot, window):
    first, view = show_timeline(qtbot, window, FIXED)
    model_first = view.model
    second, _view = show_timeline(qtbot, window, KINETO)
    assert view.model is not model_first and view.title.text() == f"Timeline — {KINETO.name}"
    assert sum(len(ln) for ln in view.model.lanes if ln.group == "api") == len(second.trace.table("api"))
    window.reports.set_current(first)  # built once per report: no new job, same lanes
    assert not view.is_busy() and view.model is model_first
    window.close_current()
    assert view.model is not model_first  # the closed report's lanes are gone with it
    window.close_current()
    assert view.model is None and "Open a report" in view.status.text()


def test_screenshot_cli_renders_the_timeline(tmp_path):
    out = tmp_path / "timeline.png"
    r = subprocess.run([sys.executable, "-m", "gui.app", str(FIXED), "--screenshot", str(out),
                        "--view", "timeline"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1600, 1000)
    # the kernel colour of the GPU lane is on the picture, so the lanes were drawn, not a blank view
    kernel = (0x3A, 0x7B, 0xD5)
    found = any(img.pixelColor(x, y).getRgb()[:3] == kernel
                for x in range(300, 1300, 3) for y in range(100, 400, 3))
    assert found
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    out.replace(SCREENSHOTS / "cli_host_overhead_fixed_timeline.png")


def test_zoomed_out_api_colour_has_its_own_legend_entry():
    """Zoomed out, CUDA API lanes draw coverage in a colour no event kind uses (it was D→H's
    purple, with no legend entry), and the legend names it."""
    from gui.timeline import model as tm
    from gui.timeline.style import API_COVERAGE_COLOR, COPY_COVERAGE_COLOR, KIND_COLORS, PALETTE
    from gui.views.timeline_view import COPY_COVERAGE_LEGEND, COVERAGE_LEGEND, legend_html

    assert KIND_COLORS[tm.KIND_API] == API_COVERAGE_COLOR
    assert KIND_COLORS[tm.KIND_MEMCPY] == COPY_COVERAGE_COLOR
    assert API_COVERAGE_COLOR not in PALETTE and COPY_COVERAGE_COLOR not in PALETTE
    html = legend_html()
    assert f"<span style='color:{API_COVERAGE_COLOR}'>■</span>&nbsp;{COVERAGE_LEGEND}" in html
    assert f"<span style='color:{COPY_COVERAGE_COLOR}'>■</span>&nbsp;{COPY_COVERAGE_LEGEND}" in html


def test_zoomed_out_every_kind_of_a_stream_shows_its_busy_colour(qtbot):
    """Zoomed out, a stream's kinds are stacked, the busiest at the bottom: a stream 4% busy with
    kernels, 4% with copies and 0.003% with memsets shows all three colours in every pixel column
    (drawn over each other at the same height, the memsets' bar hid the kernels' on big10m)."""
    from gui.timeline import model as tm
    from gui.widgets.timeline_canvas import TimelineCanvas

    n, period = 30_000, 1_000_000  # one kernel and one copy per period, a memset every 10th
    base = np.arange(n, dtype=np.int64) * period
    starts = np.concatenate([base, base + 500_000, base[::10] + 900_000])
    ends = np.concatenate([base + 40_000, base + 540_000, base[::10] + 900_300])
    kinds = np.concatenate([np.full(n, tm.KIND_KERNEL), np.full(n, tm.KIND_MEMCPY),
                            np.full(n // 10, tm.KIND_MEMSET)]).astype(np.int8)
    order = np.argsort(starts, kind="stable")
    lane = tm.Lane("gpu:0:7", "GPU 0 · stream 7", "gpu", starts[order], ends[order], kinds[order],
                   np.arange(len(order), dtype=np.int32), np.zeros(len(order), dtype=np.int32))
    model = tm.TimelineModel([lane], np.array(["k"], dtype=object), np.zeros(1, dtype=np.int8), {},
                             int(starts.min()), int(ends.max()), [],
                             activity_min=int(starts.min()), activity_max=int(ends.max()))
    canvas = TimelineCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(1000, 300)
    canvas.show()
    qtbot.waitExposed(canvas)
    canvas.set_model(model)
    canvas.repaint()
    QApplication.processEvents()
    assert canvas.draw_stats[lane.key][0] == "coverage"
    img = canvas.grab().toImage()
    solid = {k: canvas.kind_brushes[k].color().getRgb()[:3]
             for k in (tm.KIND_KERNEL, tm.KIND_MEMCPY, tm.KIND_MEMSET)}
    x = canvas.width() // 2
    column = {img.pixelColor(x, y).getRgb()[:3] for y in range(img.height())}
    assert all(rgb in column for rgb in solid.values()), (solid, column)


def test_the_first_view_is_three_steady_steps_in_a_row_without_an_outlier(qtbot) -> None:
    """A held-out H200 trace opened on a stall: its first steady steps were 23, 23 and 120 ms."""
    from gui.timeline import model as tm
    from gui.widgets.timeline_canvas import TimelineCanvas

    period = 1_000_000
    starts = np.arange(12, dtype=np.int64) * period
    lane = tm.Lane("gpu:0:7", "GPU 0 · stream 7", "gpu", starts, starts + 400_000,
                   np.full(12, tm.KIND_KERNEL, dtype=np.int8), np.arange(12, dtype=np.int32),
                   np.zeros(12, dtype=np.int32))
    end = int(starts[-1] + period)
    model = tm.TimelineModel([lane], np.array(["k"], dtype=object), np.zeros(1, dtype=np.int8), {},
                             0, end, [], activity_min=0, activity_max=end)
    canvas = TimelineCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(1000, 300)
    canvas.set_model(model)
    # step 0 warm-up, step 3 an outlier: steps 4, 5 and 6 are the first three normal ones in a row
    state = np.array([1, 0, 0, 2, 0, 0, 0, 0, 2, 0, 0, 0], dtype=np.int8)
    canvas.set_steps(starts, starts + period, state)
    assert canvas.show_steady_steps(3)
    t0, t1 = canvas.visible_range()
    assert 3.9 * period < t0 < 4 * period and 7 * period < t1 < 7.1 * period
    # no three in a row: the first three steady ones, outliers and all
    canvas.set_steps(starts, starts + period, np.array([1, 0, 2] * 4, dtype=np.int8))
    assert canvas.show_steady_steps(3)
    t0, t1 = canvas.visible_range()
    assert 0.9 * period < t0 < period and 5 * period < t1 < 5.2 * period
