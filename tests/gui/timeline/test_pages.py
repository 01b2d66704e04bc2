"""A big lane's memory (gui.timeline.sparse): coverage from block totals without reading the
mapped columns, exact or within its stated tolerance; arrays moved to file mappings keep their
values; the canvas hands back the mapped pages a frame read (measured in /proc/self/smaps)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gui.timeline import model as tm
from gui.timeline import sparse
from tests.conftest import resident_kb


def _disjoint(n: int, seed: int = 3, long_calls: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint intervals with irregular gaps and lengths (a CPU thread's CUDA calls)."""
    rng = np.random.default_rng(seed)
    gaps = rng.integers(1, 400, n)
    lens = rng.integers(1, 300, n)
    if long_calls:
        lens[rng.random(n) < 0.01] *= 1000  # a few long calls (synchronisations)
    starts = np.cumsum(gaps + np.r_[0, lens[:-1]])
    return starts.astype(np.int64), (starts + lens).astype(np.int64)


def _mapped(tmp_path: Path, name: str, arr: np.ndarray) -> np.ndarray:
    f = tmp_path / f"{name}.npy"
    np.save(f, arr)
    out: np.ndarray = np.load(f, mmap_mode="r")
    return out


def test_block_totals_give_the_dense_coverage_exactly_and_within_tol():
    starts, ends = _disjoint(50_000)
    su = sparse.scan(starts, ends)
    assert su is not None
    np.testing.assert_array_equal(su.block_first, starts[::sparse.STRIDE])
    np.testing.assert_array_equal(su.block_last, np.r_[ends[sparse.STRIDE - 1::sparse.STRIDE], ends[-1]])
    dense = tm.union_intervals(starts, ends)
    a, b = int(starts[0]) - 1000, int(ends[-1]) + 1000
    views = ((a, b, 1600), (a, a + (b - a) // 50, 1600), (int(starts[777]), int(starts[800]), 97))
    for lo, hi, bins in views:
        exact = tm.coverage(dense, lo, hi, bins)
        np.testing.assert_allclose(tm.coverage(su, lo, hi, bins), exact, atol=1e-9)
        for tol in (1 / 64, 1 / 8):
            got = tm.coverage(su, lo, hi, bins, tol)
            assert np.abs(got - exact).max() < 2 * tol


def test_overview_from_block_totals_reads_no_mapped_page(tmp_path):
    starts, ends = _disjoint(400_000, long_calls=False)
    ms, me = _mapped(tmp_path, "s", starts), _mapped(tmp_path, "e", ends)
    su = sparse.scan(ms, me)
    assert su is not None
    assert resident_kb(tmp_path / "s.npy") == 0 and resident_kb(tmp_path / "e.npy") == 0
    # 50 columns of 8,000 calls: every block of 64 is narrower than 1/64 of a column
    lo, hi, bins = int(starts[0]), int(ends[-1]), 50
    assert float((su.block_last - su.block_first).max()) < (hi - lo) / bins / 64
    got = tm.coverage(su, lo, hi, bins, 1 / 64)
    assert np.abs(got - tm.coverage(tm.union_intervals(starts, ends), lo, hi, bins)).max() < 2 / 64
    assert resident_kb(tmp_path / "s.npy") == 0 and resident_kb(tmp_path / "e.npy") == 0
    # zoomed in, the blocks at the column edges are read, then handed back
    tm.coverage(su, int(starts[1000]), int(starts[1300]), 1600, 1 / 64)
    assert 0 < resident_kb(tmp_path / "s.npy") < starts.nbytes // 1024 // 4
    sparse.release_outside(ms, 0, 0)
    assert resident_kb(tmp_path / "s.npy") == 0


def test_spill_keeps_values_and_maps_a_file(tmp_path):
    a = np.arange(3_000_000, dtype=np.int64) * 7
    out = sparse.spill(a, tmp_path, min_bytes=1)
    assert sparse.file_mapping(out) is not None and not out.flags.writeable
    np.testing.assert_array_equal(out, a)
    assert list(tmp_path.iterdir()) == []  # unlinked at once: nothing left in the directory
    small = np.arange(10)
    assert sparse.spill(small, tmp_path) is small  # under SPILL_MIN_BYTES: kept
    assert sparse.spill(out, tmp_path, min_bytes=1) is out  # mapped already
    broadcast = np.broadcast_to(np.int8(1), (5_000_000,))
    assert sparse.spill(broadcast, tmp_path, min_bytes=1) is broadcast
    assert sparse.spill(a, tmp_path / "missing", min_bytes=1) is a  # cannot write there: kept


def test_canvas_hands_back_the_pages_a_frame_read(qtbot, tmp_path, monkeypatch):
    from gui.widgets.timeline_canvas import TimelineCanvas

    monkeypatch.setattr(sparse, "MIN_EVENTS", 100_000)
    starts, ends = _disjoint(600_000)
    ms, me = _mapped(tmp_path, "s", starts), _mapped(tmp_path, "e", ends)
    names = _mapped(tmp_path, "n", np.zeros(len(starts), dtype=np.int16))
    kinds = np.broadcast_to(np.int8(tm.KIND_API), (len(starts),))
    lane = tm.Lane("api:1:1", "Thread 1 · CUDA API", "api", ms, me, kinds, None, names)
    assert isinstance(lane.union[tm.KIND_API], sparse.SparseUnion)
    model = tm.TimelineModel([lane], np.array(["cudaLaunchKernel"], dtype=object), np.zeros(1, np.int8),
                             {}, int(starts[0]), int(ends[-1]), [], activity_min=int(starts[0]),
                             activity_max=int(ends[-1]))
    canvas = TimelineCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(1600, 300)
    canvas.show()
    qtbot.waitExposed(canvas)
    canvas.set_model(model)
    files = [tmp_path / f for f in ("s.npy", "e.npy", "n.npy")]
    for frame in range(3):
        if frame == 1:  # zoomed in to a few hundred events: drawn one by one
            canvas.set_range(float(starts[300_000]), float(starts[300_300]))
        if frame == 2:  # between: coverage that reads the blocks at the column edges
            canvas.set_range(float(starts[100_000]), float(starts[300_000]))
        painted = canvas.paint_count
        canvas.update()
        qtbot.waitUntil(lambda n=painted: canvas.paint_count > n)
        mode = canvas.draw_stats[lane.key][0]
        assert mode == ("detail" if frame == 1 else "coverage")
        kept = sum(resident_kb(f) for f in files)
        # at most the events drawn one by one (and the pages around them) stay resident
        assert kept <= (64 if frame == 1 else 0), (frame, kept)
    assert canvas.last_coverage[(lane.key, tm.KIND_API)].max() > 0


@pytest.mark.parametrize("spill_min", [0, sparse.SPILL_MIN_BYTES])
def test_columnar_lanes_moved_to_files_are_the_pandas_models(spill_min, tmp_path_factory, monkeypatch):
    """Every lane of the staged model moved to file mappings (MIN_EVENTS and SPILL_MIN_BYTES at 0):
    the same lanes, events, names and coverage as the pandas model."""
    from tests.gui.timeline.test_columnar import FIXED, _plain, assert_same_models

    monkeypatch.setattr(sparse, "MIN_EVENTS", 0)
    monkeypatch.setattr(sparse, "SPILL_MIN_BYTES", spill_min)
    assert_same_models(_plain(FIXED, tmp_path_factory))
