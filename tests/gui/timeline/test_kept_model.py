"""A Kineto trace's timeline lanes kept on disk (gui.timeline.kept_model): the second open loads the
same lanes, and a clicked event reads the same row, as the first open built."""

from __future__ import annotations

import lzma
from pathlib import Path

import numpy as np
import pytest

from gui.timeline import model as tm
from gui.timeline.kept_model import timeline_model
from tests.conftest import REPO

TRAIN = REPO / "tests" / "data" / "recordings" / "torch" / "torch_train.json.xz"


@pytest.fixture(scope="module")
def train(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kept_model") / "torch_train.json"
    out.write_bytes(lzma.decompress(TRAIN.read_bytes()))
    return out


def test_second_open_loads_the_lanes_the_first_built(train: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.analysis.pytorch.pickle_store import cached_file
    from engine.reports import open_report

    first_trace = open_report(train)
    first = timeline_model(first_trace)
    full = tm.build_model(first_trace, None)  # with its tables, as the other reports' models
    assert full.tables["kernels"] is not None and first.tables == {}
    kept = list(cached_file(train, "x").parent.glob("pytorch-v*-timeline-*.pickle"))
    assert len(kept) == 1 and kept[0].stat().st_size > 0

    def no_build(*_a: object) -> tm.TimelineModel:
        raise AssertionError("the second open built the lanes again")

    monkeypatch.setattr(tm, "build_model", no_build)
    second = timeline_model(open_report(train))  # a new trace object: nothing kept in memory
    assert [ln.key for ln in second.lanes] == [ln.key for ln in first.lanes]
    assert len(second.lanes) >= 4 and second.counts() == first.counts() and second.counts()["gpu"] > 1000
    for a, b in zip(first.lanes, second.lanes, strict=True):
        for field in ("starts", "ends", "kinds", "names", "run_max_end"):
            assert np.array_equal(getattr(a, field), getattr(b, field)), (a.key, field)
        assert set(a.union) == set(b.union)
    assert list(second.names) == list(first.names)
    assert (second.t_min, second.t_max, second.activity_min, second.activity_max) == (
        first.t_min, first.t_max, first.activity_min, first.activity_max)
    assert np.array_equal(second.ncu_order, first.ncu_order)
    assert second.tables == {} and second.row_source is not None
    for lane in (ln for ln in full.lanes if ln.group in ("gpu", "api")):
        for i in (0, len(lane) // 2, len(lane) - 1):
            want = full.event(lane, i)
            got = second.event(second.lane(lane.key), i)
            assert got == want and got["name"]  # the same table row, read from the trace
    first_trace.close()
