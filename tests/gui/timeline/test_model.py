"""The timeline's data model (no widgets): lanes, lookups, coverage and metric envelopes on real
fixtures, checked against plain pandas / brute-force calculations."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gui.timeline import model as tm
from gui.widgets.timeline_paint import nice_step, pixel_runs, tick_label
from tests.conftest import NSYS_DIR

FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"
GPUMETRICS = NSYS_DIR / "host_overhead_gpumetrics.sqlite"


@pytest.fixture(scope="module")
def fixed():
    from engine.reports import open_report

    trace = open_report(FIXED)
    yield trace, tm.build_model(trace)
    trace.close()


def test_event_lookup_returns_the_table_row(fixed):
    trace, model = fixed
    lane = model.lane("gpu:0:13")
    k = trace.table("kernels").sort_values("start")
    first = k.iloc[0]
    i = lane.event_at((first["start"] + first["end"]) / 2, tol=0)
    rec = model.event(lane, i)
    assert rec["kind"] == "kernel" and rec["row"] == first.name
    assert (rec["start"], rec["end"], rec["gridX"], rec["blockX"]) == (
        first["start"], first["end"], first["gridX"], first["blockX"])
    # between two events: nothing; within the tolerance of one: that one
    gap_t = first["end"] + 1
    nxt = lane.starts[i + 1]
    assert lane.event_at((gap_t + nxt) / 2, tol=0) is None
    assert lane.event_at(first["end"] + 5, tol=10) == i


def test_api_lane_names_and_launch_order(fixed):
    trace, model = fixed
    api = trace.table("api")
    lane = model.lane("api:2102:2102")
    names = model.names[lane.names]
    assert sorted(names.tolist()) == sorted(api["name"].tolist())
    # launch index among same-named kernels, in start order (what the ncu link matches on)
    k = trace.table("kernels").sort_values("start")
    order = [int(model.ncu_order[r]) for r in k.index]
    assert order == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_build_stops_when_cancelled(fixed):
    from engine.system.errors import Cancelled  # the one Cancelled (gui.workers re-exports it)

    trace, _model = fixed
    ev = threading.Event()
    ev.set()
    with pytest.raises(Cancelled):
        tm.build_model(trace, ev)


def test_union_and_coverage_against_brute_force(fixed):
    _trace, model = fixed
    lane = model.lane("api:2102:2102")
    t0 = int(lane.starts[0])
    n_bins, per = 400, 700_000
    got = tm.coverage(lane.union[tm.KIND_API], t0, t0 + n_bins * per, n_bins)
    mask = np.zeros(n_bins * per, dtype=bool)
    for s, e in zip(lane.starts, lane.ends, strict=True):
        mask[max(s - t0, 0):max(min(e - t0, len(mask)), 0)] = True
    np.testing.assert_allclose(got, mask.reshape(n_bins, per).mean(axis=1), atol=1e-12)


def test_metric_envelope_is_the_max_of_the_step_function():
    from engine.reports import open_report

    with open_report(GPUMETRICS) as trace:
        model = tm.build_model(trace)
    lane = model.lane("metric:0:SMs Active [Throughput %]")
    # a window around the kernels: columns narrower and wider than the 100 µs sampling period
    for n_bins, span in ((300, 12_000_000), (500, 40_000)):
        t0 = float(model.activity_max - 10_000_000)
        env = tm.metric_envelope(lane, t0, t0 + span, n_bins)
        edges = np.linspace(t0, t0 + span, n_bins + 1)
        want = []
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            at = np.searchsorted(lane.starts, np.floor(a), side="right") - 1
            vals = [lane.values[at]] if at >= 0 else []
            inside = (lane.starts >= a) & (lane.starts < b)
            vals += lane.values[inside].tolist()
            want.append(max(vals) if vals else np.nan)
        np.testing.assert_array_equal(env, np.array(want))
        assert np.nanmax(env) > 0
    # after the last sample's period there is no value (the capture may go on without metrics)
    end = float(lane.ends[-1])
    env = tm.metric_envelope(lane, end - 1_000, end + 99_000, 100)
    assert not np.isnan(env[0]) and np.isnan(env[1:]).all()


def test_pixel_runs_merge_touching_spans():
    a, b = pixel_runs(np.array([0.2, 0.5, 3.0, 3.9, 10.0]), np.array([0.3, 1.5, 3.1, 5.0, 10.0]))
    assert a.tolist() == [0, 3, 10] and b.tolist() == [2, 5, 11]


def test_axis_ticks():
    assert nice_step(2.1e9, 8) == 5e8
    assert nice_step(64e6, 6) == 2e7
    assert tick_label(1.5e9, 5e8) == "1.5 s"
    assert tick_label(20e6, 1e7) == "20 ms"
    assert tick_label(621_250_000, 250_000) == "621.25 ms"
    assert tick_label(35_000, 5_000) == "35 µs"
    assert tick_label(1234, 20) == "1,234 ns"


def test_kernel_base_names_match_ncu_names():
    from engine.analysis.ncu_match import base_name

    nsys = "void sgemm_tiled<(int)16>(int, const float *, const float *, float *)"
    ncu = "void sgemm_tiled<16>(int, const float *, const float *, float *)"
    assert base_name(nsys) == base_name(ncu) == "sgemm_tiled"
    assert base_name("saxpy(int, float, const float *, float *)") == "saxpy"
    assert base_name("void at::native::vectorized_elementwise_kernel<4, float>(int)") == (
        "vectorized_elementwise_kernel")
