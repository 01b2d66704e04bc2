"""GPU stream lanes drawn from their kinds' unions before the merge (gui.timeline.coarse): at the
zoomed-out scale the first paint draws what the merged lane draws, and the later stage's merge
gives the pandas model's lanes."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtWidgets import QApplication

from engine.reports import open_report
from gui.timeline import coarse
from gui.timeline import columnar as tcol
from gui.timeline import model as tm
from tests.gui.timeline.test_columnar import FIXED, RECORDINGS, SOURCES, _plain, assert_same_models

#: fixtures with several-kind streams, one of them of several streams (rows of the tables)
MIXED = [p for p in SOURCES if p.name.split(".")[0] in ("host_overhead_naive", "multistream", "train_bad")]


def _stages(path):
    """(model after the GPU stage, model after every stage, the pandas model) of ``path``."""
    t1, t2 = open_report(path), open_report(path)
    try:
        tl = tcol.ColumnarTimeline(t1)
        tl.load_gpu()
        first = tl.model("reading the CUDA API calls…")
        tl.load_api()
        tl.load_rest()
        return first, tl.model(), tm.build_model(t2)
    finally:
        t1.close()
        t2.close()


@pytest.mark.parametrize("path", MIXED, ids=[p.name.split(".")[0] for p in MIXED])
def test_coarse_lanes_cover_what_the_merged_lanes_cover(path, tmp_path_factory, monkeypatch):
    monkeypatch.setattr(coarse, "COARSE_MIN_EVENTS", 0)  # every several-kind lane merged later
    first, done, want = _stages(_plain(path, tmp_path_factory))
    rough = [ln for ln in first.lanes if ln.coarse]
    assert rough  # the fixture has a stream of several kinds
    assert not any(ln.coarse for ln in done.lanes)  # merged by the CUDA API stage
    # names are worked out for the lanes drawn event by event only: a coarse lane's kinds wait
    shown = {int(k) for ln in first.lanes if not ln.coarse for k in np.unique(np.asarray(ln.kinds))}
    named = {str(v) for ln in want.lanes if ln.group == "gpu"
             for v in want.names[np.asarray(ln.names)[np.isin(np.asarray(ln.kinds), list(shown))]]}
    assert {str(v) for v in first.names} == named
    assert tm.spans(first.lanes) == tm.spans([ln for ln in want.lanes if ln.group == "gpu"])  # "show all"
    exact = {ln.key: ln for ln in want.lanes}
    spans = [(want.t_min, want.t_max, 997), (want.activity_min, want.activity_max, 1600)]
    for ln in rough:
        ref = exact[ln.key]
        assert (len(ln), ln.label, sorted(ln.union)) == (len(ref), ref.label, sorted(ref.union))
        assert (int(ln.starts[0]), int(ln.run_max_end[-1])) == (int(ref.starts[0]), int(ref.run_max_end[-1]))
        assert ln.visible_slice(want.t_min, want.t_max) == (0, len(ref))
        mid = int(ref.starts[len(ref) // 2])
        assert ln.event_at(mid, 1.0) is None and ref.event_at(mid, 1.0) is not None
        for t0, t1, bins in [*spans, (mid - 50_000, mid + 50_000, 400)]:
            for k in ref.union:
                np.testing.assert_array_equal(tm.coverage(ln.union[k], t0, t1, bins),
                                              tm.coverage(ref.union[k], t0, t1, bins))


@pytest.mark.parametrize("path", [*MIXED, FIXED, RECORDINGS[0]], ids=[
    *[p.name.split(".")[0] for p in MIXED], "fixed", RECORDINGS[0].name.split(".")[0]])
def test_merged_after_the_first_paint_the_lanes_are_the_pandas_models(path, tmp_path_factory, monkeypatch):
    monkeypatch.setattr(coarse, "COARSE_MIN_EVENTS", 0)
    assert_same_models(_plain(path, tmp_path_factory))


def test_first_paint_of_a_coarse_lane_equals_the_merged_lane_zoomed_out(qtbot, tmp_path_factory, monkeypatch):
    """The canvas zoomed out: the GPU lanes before the merge paint the same pixels as after it."""
    from gui.widgets.timeline_canvas import TimelineCanvas

    # lanes of more events than the canvas draws one by one (as 2M against its limit in the app)
    monkeypatch.setattr(coarse, "COARSE_MIN_EVENTS", 51)
    path = _plain(next(p for p in SOURCES if p.name.startswith("multistream")), tmp_path_factory)
    trace = open_report(path)
    try:
        tl = tcol.ColumnarTimeline(trace)
        tl.load_gpu()
        first = tl.model("reading the CUDA API calls…")
        tl.lanes["gpu"] = [tcol.exact(ln) for ln in first.lanes]  # (their names join the model's)
        merged = tl.model("reading the CUDA API calls…")
    finally:
        trace.close()
    # every GPU stream of so many events (4 of several kinds, 1 of one) is drawn from its unions
    assert sum(ln.coarse for ln in first.lanes) == sum(len(ln) >= 51 for ln in first.lanes) == 5
    assert not any(ln.coarse for ln in merged.lanes)
    canvas = TimelineCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(1600, 400)
    canvas.show()
    qtbot.waitExposed(canvas)
    canvas.detail_max = 50  # zoomed out: more events in view than drawn one by one, as at 35M
    shots, covers, stats = [], [], []
    for model in (first, merged):
        canvas.set_model(model)
        canvas.repaint()
        QApplication.processEvents()
        shots.append(canvas.grab().toImage())
        covers.append({k: v.copy() for k, v in canvas.last_coverage.items()})
        stats.append(dict(canvas.draw_stats))
    assert {k for k, (mode, _n) in stats[1].items() if mode == "coverage"} >= {
        ln.key for ln in first.lanes if ln.coarse}
    assert stats[0] == stats[1]  # the same modes and events in view
    assert covers[0].keys() == covers[1].keys()
    for key, cov in covers[1].items():
        np.testing.assert_array_equal(covers[0][key], cov)
        assert cov.max() > 0 or key[0] not in {ln.key for ln in first.lanes if ln.coarse}
    assert shots[0] == shots[1]
    # zoomed in to a few events, the coarse lane still draws coverage (no events one by one)
    mid = first.lanes[-1]
    t = int(np.asarray(mid.parts[0].starts)[len(mid.parts[0].starts) // 2])
    canvas.set_model(first)
    canvas.set_range(t - 20_000, t + 20_000)
    canvas.repaint()
    QApplication.processEvents()
    assert canvas.draw_stats[mid.key][0] == "coverage"


@pytest.mark.parametrize("path", MIXED, ids=[p.name.split(".")[0] for p in MIXED])
def test_events_in_view_of_a_coarse_lane_are_counted_on_its_blocks(path, tmp_path_factory, monkeypatch):
    """A coarse lane of block totals counts the events in view on each kind's block starts (no page
    of its columns read): never fewer than the events' own count, at most a block more at each
    side of each kind, and exact over the whole lane (a kind of overlapping events: exact)."""
    from gui.timeline import sparse

    monkeypatch.setattr(coarse, "COARSE_MIN_EVENTS", 0)
    monkeypatch.setattr(sparse, "MIN_EVENTS", 0)
    monkeypatch.setattr(sparse, "STRIDE", 4)
    first, _done, _want = _stages(_plain(path, tmp_path_factory))
    rough = [ln for ln in first.lanes if ln.coarse]
    assert rough
    for ln in rough:
        blocks = sum(isinstance(ln.union[p.kind], sparse.SparseUnion) for p in ln.parts)
        a, b = int(ln.starts[0]), int(ln.run_max_end[-1])
        assert ln.visible_slice(a, b) == (0, len(ln))
        for f0, f1 in [(0.1, 0.2), (0.45, 0.55), (0.0, 0.01), (0.9, 1.0), (0.3, 0.3)]:
            t0, t1 = a + f0 * (b - a), a + f1 * (b - a)
            exact = 0
            for p in ln.parts:
                lo = max(int(np.searchsorted(p.starts, np.ceil(t0), side="left")) - 1, 0)
                exact += max(int(np.searchsorted(p.starts, np.floor(t1), side="right")) - lo, 0)
            lo, n = ln.visible_slice(t0, t1)
            assert lo == 0 and exact <= n <= exact + 2 * sparse.STRIDE * blocks
