"""The staged timeline of big nsys reports (gui.timeline.columnar) against the pandas model on every
real fixture and H100 recording: the same lanes, events, names, colours, rows and ncu launch order;
and the view paints the GPU lanes first, then the CUDA API lanes, then NVTX and metrics."""

from __future__ import annotations

import lzma
import math
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtWidgets import QApplication

from engine.reports import open_report
from gui.timeline import columnar as tcol
from gui.timeline import model as tm
from tests.conftest import NSYS_DIR, NSYS_SQLITE, REPO
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait

FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
RECORDINGS = sorted((REPO / "tests" / "data" / "recordings" / "nsys").glob("*/*.sqlite.xz"))
SOURCES = [*NSYS_SQLITE, *RECORDINGS]


def _plain(path, tmp_path_factory):
    if path.suffix != ".xz":
        return path
    out = tmp_path_factory.mktemp("rec") / path.name[:-3]
    with lzma.open(path) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _norm(v):
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def assert_same_models(path) -> None:
    """The columnar model of ``path`` equals the pandas model, lane by lane and event by event."""
    t1, t2 = open_report(path), open_report(path)
    try:
        want = tm.build_model(t1)
        got = tcol.build_columnar(t2)
        assert [(ln.key, ln.label, ln.group, len(ln)) for ln in got.lanes] == [
            (ln.key, ln.label, ln.group, len(ln)) for ln in want.lanes]
        assert (got.t_min, got.t_max, got.activity_min, got.activity_max, got.missing) == (
            want.t_min, want.t_max, want.activity_min, want.activity_max, want.missing)
        for a, b in zip(want.lanes, got.lanes, strict=True):
            np.testing.assert_array_equal(b.starts, a.starts)
            np.testing.assert_array_equal(b.ends, a.ends)
            if a.is_metric:
                np.testing.assert_array_equal(b.values, a.values)
                continue
            np.testing.assert_array_equal(b.kinds, a.kinds)
            np.testing.assert_array_equal(np.arange(len(b)) if b.rows is None else b.rows, a.rows)
            assert want.names[a.names].tolist() == got.names[b.names].tolist()
            np.testing.assert_array_equal(got.name_colors[b.names], want.name_colors[a.names])
            assert sorted(b.union) == sorted(a.union)
            for k in a.union:  # the coverage the canvas draws zoomed out
                np.testing.assert_array_equal(tm.coverage(b.union[k], want.t_min, want.t_max, 997),
                                              tm.coverage(a.union[k], want.t_min, want.t_max, 997))
            for i in sorted({0, 1, len(a) // 2, len(a) - 1} & set(range(len(a)))):
                ra = {k: _norm(v) for k, v in want.event(a, i).items()}
                rb = {k: _norm(v) for k, v in got.event(b, i).items()}
                assert rb == ra
                if ra["kind"] == "kernel":
                    assert got.launch_index(rb["row"]) == want.launch_index(ra["row"])
    finally:
        t1.close()
        t2.close()


@pytest.mark.parametrize("path", SOURCES, ids=[p.name.split(".")[0] for p in SOURCES])
def test_same_lanes_events_and_names_as_the_pandas_model(path, tmp_path_factory):
    assert_same_models(_plain(path, tmp_path_factory))


@pytest.mark.parametrize("path", [NSYS_DIR / "host_overhead_naive.sqlite", RECORDINGS[-1]],
                         ids=["naive", RECORDINGS[-1].name.split(".")[0]])
def test_block_totals_of_disjoint_lanes_give_the_same_coverage(path, tmp_path_factory, monkeypatch):
    """Every lane of disjoint intervals takes the block-total form (gui.timeline.sparse, used from
    1M events): the same coverage and events, and the mapped columns read back intact."""
    from gui.timeline import sparse

    monkeypatch.setattr(sparse, "MIN_EVENTS", 0)
    monkeypatch.setattr(sparse, "STRIDE", 4)  # blocks smaller than the lanes
    monkeypatch.setattr(sparse, "CHUNK", 8)  # several chunks, each handed back after its check
    path = _plain(path, tmp_path_factory)
    assert_same_models(path)
    trace = open_report(path)
    try:
        got = tcol.build_columnar(trace)
    finally:
        trace.close()
    blocks = [ln for ln in got.lanes if any(isinstance(u, sparse.SparseUnion) for u in ln.union.values())]
    assert blocks  # the API lane at least
    for ln in blocks:
        for kind, su in ln.union.items():
            if not isinstance(su, sparse.SparseUnion):
                continue
            sel = np.asarray(ln.kinds) == kind  # the kind's own events, as the lane holds them
            np.testing.assert_array_equal(su.starts, ln.starts[sel])
            assert su.total == int((ln.ends[sel] - ln.starts[sel]).sum())
            k = np.arange(len(su))
            np.testing.assert_array_equal(su.busy_before_index(k),
                                          np.concatenate([[0], np.cumsum(su.ends - su.starts)])[k])


def test_rowid_gaps_map_rows_to_the_right_sqlite_rows(tmp_path):
    """Rows deleted from an export leave rowid gaps: events still show their own rows."""
    path = tmp_path / "gaps.sqlite"
    shutil.copy(FIXED, path)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid IN (2, 5)")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid = 1")
    con.commit()
    con.close()
    assert_same_models(path)


def test_a_few_copies_among_many_kernels_are_inserted_like_a_stable_sort():
    """The insert path (few small parts in a big sorted one) orders events exactly as a stable
    sort of the parts in kind order, ties at equal starts included."""
    rng = np.random.default_rng(7)
    k_st = np.sort(rng.integers(0, 5_000, 4_000))
    c_st = np.sort(np.concatenate([rng.integers(0, 5_000, 150), k_st[:40]]))  # ties with kernels
    m_st = np.sort(np.concatenate([rng.integers(0, 5_000, 50), c_st[:5], k_st[-5:]]))
    parts = [tcol._Part(tm.KIND_KERNEL, None, k_st, k_st + 3, np.zeros(len(k_st), dtype=np.int16)),
             tcol._Part(tm.KIND_MEMCPY, None, c_st, c_st + 2, np.ones(len(c_st), dtype=np.int16)),
             tcol._Part(tm.KIND_MEMSET, np.arange(len(m_st)) * 2, m_st, m_st + 1,
                        np.full(len(m_st), 2, dtype=np.int32))]
    _assert_inserted_like_merged(parts)
    # the big part not the first kind: kernels and copies come before the memsets on ties
    parts = [tcol._Part(tm.KIND_KERNEL, None, m_st, m_st + 1, np.zeros(len(m_st), np.int16)),
             tcol._Part(tm.KIND_MEMSET, None, k_st, k_st + 3, np.full(len(k_st), 2, np.int16))]
    _assert_inserted_like_merged(parts)


@pytest.mark.parametrize("chunk", [None, 64])
def test_merge_of_sorted_parts_equals_a_stable_sort_of_their_concatenation(monkeypatch, chunk):
    """_merge of parts each in start order (no sort: positions by searchsorted, a chunk at a
    time) gives what a stable argsort of the parts' concatenation in list order gives, ties
    across parts included."""
    from gui.timeline import sparse

    if chunk is not None:
        monkeypatch.setattr(sparse, "CHUNK", chunk)
    rng = np.random.default_rng(11)
    starts = [np.sort(rng.integers(0, 300, n)) for n in (2_000, 700, 0, 90)]
    kinds = [tm.KIND_KERNEL, tm.KIND_MEMCPY, tm.KIND_MEMSET, tm.KIND_MEMSET]
    parts = [tcol._Part(k, None if i % 2 else rng.permutation(len(s)), s, s + i + 1,
                        np.full(len(s), i, dtype=np.int16 if i < 3 else np.int32))
             for i, (k, s) in enumerate(zip(kinds, starts, strict=True))]
    got = tcol._merge(parts)
    st = np.concatenate([p.starts for p in parts])
    order = np.argsort(st, kind="stable")
    want = (st[order], np.concatenate([p.ends for p in parts])[order],
            np.concatenate([np.full(len(p.starts), p.kind, np.int8) for p in parts])[order],
            np.concatenate([tcol._rows(p) for p in parts])[order],
            np.concatenate([p.codes for p in parts])[order])
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _assert_inserted_like_merged(parts) -> None:
    got = tcol._lane("gpu:0:1", "GPU 0 · stream 1", "gpu", parts)
    want = tcol._merge(parts)
    assert not isinstance(got.starts, np.memmap) and len(got) == sum(len(p.starts) for p in parts)
    for a, b in zip((got.starts, got.ends, got.kinds, got.rows, got.names), want, strict=True):
        np.testing.assert_array_equal(a, b)
    # kinds and rows are read an event at a time (the event under the pointer): each one agrees
    _, _, kinds, rows, _ = want
    for i in [0, 1, len(got) - 1, -1, *range(0, len(got), 7)]:
        assert int(got.kinds[i]) == int(kinds[i]) and int(got.rows[i]) == int(rows[i]), i
    with pytest.raises(IndexError):
        got.kinds[len(got)]



def _assert_lanes_as_pandas(model: tm.TimelineModel, path: Path) -> None:
    """The same lanes and events per lane as the pandas path builds from the report."""
    trace = open_report(path)
    try:
        want = tm.build_model(trace)
    finally:
        trace.close()
    assert [(ln.key, len(ln)) for ln in model.lanes] == [(ln.key, len(ln)) for ln in want.lanes]

def test_view_paints_gpu_lanes_first_then_api_then_the_rest(qtbot, window, tmp_path, monkeypatch):
    from gui.workers import running_threads

    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "cache"))  # a first open: cold cache
    path = NSYS_DIR / "host_overhead_gpumetrics.sqlite"
    open_and_wait(qtbot, window, path)
    view = window.views["timeline"]
    view.overview_min_events = 0  # force the big-report path on a small fixture
    canvas = view.canvas
    seen: list[tuple[str, ...]] = []
    texts: list[str] = []
    kept: list[tuple[float, float]] = []

    def painted(_ms: float) -> None:
        m = canvas.model
        if m is None:
            return
        groups = tuple(sorted({ln.group for ln in m.lanes}))
        if not seen or seen[-1] != groups:
            seen.append(groups)
            texts.append(view.status.text())
            if len(seen) == 1:  # the user zooms while the GPU lanes show: later stages keep it
                span = m.t_max - m.t_min
                canvas.set_range(m.t_min + 0.25 * span, m.t_min + 0.5 * span)
                kept.append(canvas.visible_range())

    progress: list[str] = []
    canvas.sig_painted.connect(painted)
    window.set_view("timeline")
    qtbot.waitUntil(lambda: view._job is not None or view.model is not None, timeout=LOAD_TIMEOUT_MS)
    if view._job is not None:
        view._job.sig_progress.connect(progress.append)
    qtbot.waitUntil(lambda: view.model is not None and not view.model.pending and not view.is_busy(),
                    timeout=LOAD_TIMEOUT_MS)
    canvas.repaint()
    QApplication.processEvents()
    assert seen == [("gpu",), ("api", "gpu"), ("api", "gpu", "metric", "nvtx")]
    # the first paint says the calls are still coming (the stage's own line, or its progress line
    # when the next stage has started by the time the frame is drawn)
    assert "eading the CUDA API calls" in texts[0] and "GPU operations" in texts[0]
    assert "Still" not in texts[-1] and "GPU metrics" in texts[-1]
    assert canvas.visible_range() == pytest.approx(kept[0])
    assert progress and "first open: building this report's column cache" in progress[0]
    assert view._models  # the complete model is kept for this report
    # the same lanes and events as the pandas path (which the small-report test checks)
    _assert_lanes_as_pandas(view.model, path)
    assert not running_threads()


def test_small_report_keeps_the_direct_path(qtbot, window):
    open_and_wait(qtbot, window, FIXED)
    view = window.views["timeline"]
    window.set_view("timeline")
    qtbot.waitUntil(lambda: view.model is not None and not view.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert view.model.row_source is None and view.model.tables["kernels"] is not None


@pytest.mark.parametrize("path", NSYS_SQLITE, ids=[p.stem for p in NSYS_SQLITE])
def test_row_counts_from_the_cached_columns_are_sqlites(path):
    """Opening a report again counts its big tables from the cached columns (no SQL scan): the
    same numbers as count(*); before the columns are cached there is no such count."""
    from engine.reports.nsys.timeline_reads import cached_row_count

    trace = open_report(path)
    try:
        names = [n for n in ("kernels", "memcpy", "memset", "api", "sync", "nvtx") if trace.has(n)]
        assert names
        assert all(cached_row_count(trace, n) is None for n in names)
        tcol.build_columnar(trace)
        for n in {"sync", "nvtx"} & set(names):  # cached by the summary's reads
            trace.columns(n, ["start"])
        assert {n: cached_row_count(trace, n) for n in names} == {n: trace.row_count(n) for n in names}
    finally:
        trace.close()


@pytest.mark.parametrize("path", NSYS_SQLITE[:3], ids=[p.stem for p in NSYS_SQLITE[:3]])
def test_row_counts_kept_by_the_timeline_are_sqlites(path, monkeypatch):
    """A big table counted by SQLite on the first open (no cached column of it: the syncs) is
    counted from what the timeline kept on the next open, without another count."""
    from engine.reports.nsys import columns
    from engine.reports.nsys.timeline_reads import cached_row_count

    trace = open_report(path)
    try:
        names = [n for n in ("sync", "memset", "memcpy") if trace.has(n)]
        want = {n: trace.row_count(n) for n in names}
        tcol.build_columnar(trace)  # keeps the counts after its first stage
    finally:
        trace.close()
    assert names
    monkeypatch.setattr(columns.ColumnStore, "row_count", lambda *_a: pytest.fail("counted again"))
    again = open_report(path)
    try:
        assert {n: cached_row_count(again, n) for n in names} == want
    finally:
        again.close()


def test_opened_for_the_timeline_the_gpu_lanes_are_read_while_the_window_builds(qtbot, window,
                                                                                 monkeypatch):
    """With the Timeline shown, the loader starts reading a big report's cached GPU lanes; the view
    uses that read (no second one) and ends with the pandas model's lanes."""
    monkeypatch.setattr(tcol, "BIG_EVENTS", 0)  # a small fixture counts as big
    path = NSYS_DIR / "host_overhead_gpumetrics.sqlite"
    trace = open_report(path)
    try:
        assert tcol.prefetch_gpu(trace) is None  # not cached yet: no read while the window starts
        tcol.build_columnar(trace)  # opened before: its columns are cached
    finally:
        trace.close()
    window.set_view("timeline")
    report = open_and_wait(qtbot, window, path)
    view = window.views["timeline"]
    qtbot.waitUntil(lambda: view.model is not None and not view.model.pending and not view.is_busy(),
                    timeout=LOAD_TIMEOUT_MS)
    assert view.prefetched_used == 1 and report.timeline_prefetch is None
    _assert_lanes_as_pandas(view.model, path)
    assert view.model.row_source is not None  # the columnar model


@pytest.mark.parametrize("column", [[7] * 10, [7] * 9 + [3], [7] * 5 + [9] + [7] * 6, [5], [2] * 8 + [1, 2],
                                    list(np.random.default_rng(1).integers(0, 50, 33)), [tcol.NULL, 4, 4]])
def test_factor_of_an_id_column_is_numpys_unique(column, monkeypatch):
    """The distinct values and codes of an id column read in several chunks: what numpy's unique gives."""
    from gui.timeline import sparse

    monkeypatch.setattr(sparse, "CHUNK", 4)
    a = np.asarray(column, dtype=np.int64)
    uniq, codes = tcol.factor(a)
    want, inv = np.unique(a, return_inverse=True)
    assert uniq.tolist() == want.tolist() and codes.tolist() == inv.reshape(-1).tolist()

