"""The GPU lanes' layout kept beside a big report's cached columns (gui.timeline.gpu_layout): a second
open's first stage reads it instead of scanning the columns, and gives the same lanes as the first
open's and, once every stage is loaded, the pandas model's."""

from __future__ import annotations

import numpy as np
import pytest

from engine.reports import open_report
from gui.timeline import coarse, gpu_layout, sparse
from gui.timeline import columnar as tcol
from gui.timeline import model as tm
from tests.gui.timeline.test_coarse import MIXED
from tests.gui.timeline.test_columnar import FIXED, RECORDINGS, _plain, assert_same_models

PATHS = [*MIXED, FIXED, RECORDINGS[0]]
IDS = [*[p.name.split(".")[0] for p in MIXED], "fixed", RECORDINGS[0].name.split(".")[0]]


def _first_stage(path) -> tuple[tm.TimelineModel, tcol.ColumnarTimeline]:
    trace = open_report(path)
    tl = tcol.ColumnarTimeline(trace)
    tl.load_gpu()
    return tl.model("reading the CUDA API calls…"), tl


def _no_scans(monkeypatch) -> None:
    """Make every read of the GPU columns that the kept layout replaces fail the test."""
    def fail(*_a, **_k):
        raise AssertionError("a GPU column was scanned although its layout was kept")

    monkeypatch.setattr(tcol.ColumnarTimeline, "_groups", staticmethod(fail))  # (device, stream) groups
    monkeypatch.setattr(tcol, "_sorted", fail)  # each part's order
    monkeypatch.setattr(sparse, "scan", fail)  # block totals
    monkeypatch.setattr(tm, "union_intervals", fail)  # dense unions


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_second_open_reads_the_kept_layout_and_draws_the_same_lanes(path, tmp_path_factory, monkeypatch):
    monkeypatch.setattr(coarse, "COARSE_MIN_EVENTS", 0)  # every several-kind lane drawn coarse first
    monkeypatch.setattr(sparse, "MIN_EVENTS", 0)  # every part's union kept
    monkeypatch.setattr(sparse, "STRIDE", 4)
    monkeypatch.setattr(sparse, "CHUNK", 8)
    path = _plain(path, tmp_path_factory)
    first, tl = _first_stage(path)
    assert tl.reads.kept(gpu_layout.NAME) is None  # kept by the next stage, after the first paint
    tl.load_api()
    kept = tl.reads.kept(gpu_layout.NAME)
    assert kept is not None and len(kept["parts"])
    tl.trace.close()

    with monkeypatch.context() as m:
        _no_scans(m)
        again, tl2 = _first_stage(path)
    assert [(ln.key, ln.label, len(ln), ln.coarse, sorted(ln.union)) for ln in again.lanes] == [
        (ln.key, ln.label, len(ln), ln.coarse, sorted(ln.union)) for ln in first.lanes]
    assert tm.spans(again.lanes) == tm.spans(first.lanes)
    # a stream's rows of a table shared by several streams are not gathered before the merge
    shared = [p for ln in again.lanes if ln.coarse for p in ln.parts if p.rows is not None]
    assert all(p.starts_if_read is None for p in shared)
    assert shared or "multistream" not in path.name
    for a, b in zip(first.lanes, again.lanes, strict=True):
        np.testing.assert_array_equal(b.run_max_end, a.run_max_end)
        for k in a.union:
            for t0, t1, bins in [(first.t_min, first.t_max, 997), (first.t_min, first.t_max, 31)]:
                np.testing.assert_array_equal(tm.coverage(b.union[k], t0, t1, bins),
                                              tm.coverage(a.union[k], t0, t1, bins))
    tl2.load_api()  # the kept layout's lanes merge into the pandas model's (checked next, from it again)
    tl2.trace.close()
    assert_same_models(path)


def test_a_layout_kept_for_other_row_counts_is_not_used(tmp_path_factory):
    path = _plain(MIXED[0], tmp_path_factory)
    _model, tl = _first_stage(path)
    tl.load_api()
    kept = tl.reads.kept(gpu_layout.NAME)
    tl.trace.close()
    assert kept is not None
    rows = {int(k): int(n) for k, n, _ in np.asarray(kept["kinds"]).tolist()}
    columns = {k: {"start": np.zeros(n, dtype=np.int64)} for k, n in rows.items()}
    assert gpu_layout.GpuLayout.from_arrays(kept, columns) is not None
    k = next(iter(rows))
    columns[k] = {"start": np.zeros(rows[k] + 1, dtype=np.int64)}  # the table has another row now
    assert gpu_layout.GpuLayout.from_arrays(kept, columns) is None
    stride = dict(kept, stride=np.array([sparse.STRIDE * 2]))  # block totals of another size
    same_rows = {k: {"start": np.zeros(n)} for k, n in rows.items()}
    assert gpu_layout.GpuLayout.from_arrays(stride, same_rows) is None
