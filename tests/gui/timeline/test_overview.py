"""The coarse timeline overview (gui.timeline.overview) on every real nsys fixture: its lanes are the
full model's, its busy time is what SQLite says, and the view paints it first and then swaps in the
full lanes keeping the visible range."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtWidgets import QApplication

from engine.reports import open_report
from gui.timeline import model as tm
from gui.timeline.overview import build_overview, busy_histogram
from tests.conftest import NSYS_DIR, NSYS_SQLITE
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait

FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
TABLES = {tm.KIND_KERNEL: "CUPTI_ACTIVITY_KIND_KERNEL", tm.KIND_MEMCPY: "CUPTI_ACTIVITY_KIND_MEMCPY",
          tm.KIND_MEMSET: "CUPTI_ACTIVITY_KIND_MEMSET", tm.KIND_API: "CUPTI_ACTIVITY_KIND_RUNTIME"}


@pytest.fixture(scope="module", params=NSYS_SQLITE, ids=[p.stem for p in NSYS_SQLITE])
def both(request):
    """(path, overview, full model) of one fixture."""
    path = request.param
    trace = open_report(path)
    try:
        model = tm.build_model(trace)
    finally:
        trace.close()
    return path, build_overview(path), model


def test_lanes_are_the_full_models(both):
    _path, ov, model = both
    full = [(ln.key, ln.label, ln.group, len(ln)) for ln in model.lanes if ln.group in ("api", "gpu")]
    assert [(ln.key, ln.label, ln.group, ln.n_events) for ln in ov.lanes] == full
    assert full  # every fixture has CUDA lanes
    for ln in ov.lanes:  # the same kinds per lane (so the same colours)
        assert sorted(ln.hist) == sorted(model.lane(ln.key).union)


def _sql_busy(path) -> dict[tuple[str, int], int]:
    """Sum of durations per (lane key, kind), straight from SQLite."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out: dict[tuple[str, int], int] = {}
    try:
        have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for kind, t in TABLES.items():
            if t not in have:
                continue
            if kind == tm.KIND_API:
                sql = (f'SELECT "globalTid" / 16777216 % 16777216, "globalTid" % 16777216, '
                       f'sum("end" - "start") FROM {t} GROUP BY 1, 2')
                fmt = "api:{}:{}"
            else:
                sql = f'SELECT "deviceId", "streamId", sum("end" - "start") FROM {t} GROUP BY 1, 2'
                fmt = "gpu:{}:{}"
            for a, b, busy in con.execute(sql):
                out[(fmt.format(a, b), kind)] = int(busy)
    finally:
        con.close()
    return out


def test_busy_time_per_lane_and_kind_is_the_sum_of_durations(both):
    path, ov, _model = both
    want = _sql_busy(path)
    got = {(ln.key, k): float(h.sum()) for ln in ov.lanes for k, h in ln.hist.items()}
    assert set(got) == set(want)
    for key, busy in want.items():
        assert got[key] == pytest.approx(busy, rel=1e-9, abs=1.0), key


def test_buckets_match_the_full_models_exact_coverage(both):
    """Where a lane's events of a kind do not overlap, each bucket holds exactly the busy time that
    the full model's interval union gives for it (events clipped at bucket edges)."""
    _path, ov, model = both
    width = (ov.t_max - ov.t_min) / ov.n_buckets
    checked = 0
    for ln in ov.lanes:
        full = model.lane(ln.key)
        for k, hist in ln.hist.items():
            union = full.union[k]
            sel = full.kinds == k
            if int(union[2][-1]) != int((full.ends[sel] - full.starts[sel]).sum()):
                continue  # overlapping events: the overview sums them, the union does not
            exact = tm.coverage(union, ov.t_min, ov.t_max, ov.n_buckets) * width
            np.testing.assert_allclose(hist, exact, rtol=1e-6, atol=2e-3 * width)
            checked += 1
    assert checked


def test_histogram_clips_events_at_bucket_edges():
    # buckets of 10 ns over [0, 40]: one event inside bucket 0, one from 5 to 35 spanning four buckets
    starts = np.array([1, 5], dtype=np.int64)
    ends = np.array([3, 35], dtype=np.int64)
    h = busy_histogram(starts, ends, np.zeros(2, dtype=np.int64), 1, 0, 40, 4)
    assert h.tolist() == [[2 + 5, 10, 10, 5]]


def test_view_paints_the_overview_first_then_swaps_in_the_full_lanes(qtbot, window):
    from gui.timeline.canvas import GUTTER, LOADING_TEXT
    from gui.workers import running_threads

    open_and_wait(qtbot, window, FIXED)
    view = window.views["timeline"]
    view.overview_min_events = 0  # force the big-report path on a small fixture
    canvas = view.canvas
    seen: list[str] = []
    kept: list[tuple[float, float]] = []
    hover: list[str] = []

    def painted(_ms: float) -> None:
        if canvas.overview is not None:
            if not seen or seen[-1] != "overview":
                seen.append("overview")
                # zoom while the overview shows: the full lanes must keep this range
                ov = canvas.overview
                span = ov.t_max - ov.t_min
                canvas.set_range(ov.t_min + 0.25 * span, ov.t_min + 0.5 * span)
                kept.append(canvas.visible_range())
                top = canvas.lane_tops()[0] - canvas.v_offset + 5
                canvas._update_hover(QPointF(GUTTER + 40, top))
                hover.append(canvas.hover_text)
                assert canvas.event_at(GUTTER + 40, top) is None
                assert canvas.draw_stats and all(v[0] == "overview" for v in canvas.draw_stats.values())
        elif canvas.model is not None and (not seen or seen[-1] != "model"):
            seen.append("model")

    canvas.sig_painted.connect(painted)
    window.set_view("timeline")
    qtbot.waitUntil(lambda: view.model is not None and not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    canvas.repaint()
    QApplication.processEvents()
    assert seen == ["overview", "model"]
    assert hover == [LOADING_TEXT]
    assert canvas.overview is None
    assert canvas.visible_range() == pytest.approx(kept[0])
    assert {ln.key for ln in view.model.lanes} >= {k for k, (_m, _n) in canvas.draw_stats.items()
                                                   if k.startswith(("api:", "gpu:"))}
    assert "overview" not in {v[0] for v in canvas.draw_stats.values()}
    assert not running_threads()


def test_small_report_keeps_the_direct_path(qtbot, window):
    open_and_wait(qtbot, window, FIXED)
    view = window.views["timeline"]
    overviews: list[bool] = []
    view.canvas.sig_painted.connect(lambda _ms: overviews.append(view.canvas.overview is not None))
    window.set_view("timeline")
    qtbot.waitUntil(lambda: view.model is not None and not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert not any(overviews)
