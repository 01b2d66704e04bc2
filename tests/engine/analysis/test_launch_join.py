"""engine.analysis.ops: each GPU operation's launch (its API call's start) by the chunked join.

On every nsys fixture, the chunked search (small chunks: every boundary case) gives what the
join on all the keys sorted gives, and what the general join (``call_row``) gives.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.analysis import ops
from engine.analysis.calls import api_calls
from engine.reports import open_report
from tests.conftest import NSYS_DIR

EXPORTS = sorted(NSYS_DIR.glob("*.sqlite"))


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.stem)
def test_chunked_launch_equals_the_sorted_and_the_general_join(path, monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path))
    monkeypatch.setattr(ops, "_CHUNK", 7)
    trace = open_report(path)
    try:
        o = ops.gpu_op_columns(trace)
        calls = api_calls(trace)
        lut = np.array([calls.pid_code(p) for p in o.pids], dtype=np.int64)
        assert (lut >= 0).all() and calls.n > 0
        assert ops._keys_rise(calls.pid, calls.corr)  # CUPTI's order: the chunked path is taken
        chunked = o._launch_in_chunks(lut, calls.pid, calls.corr, calls.start)
        by_sorting = o._launch_by_sorting(lut, calls.pid, calls.corr, calls.start)
        assert by_sorting is not None
        general = o.start.copy()
        got = o.call_row >= 0
        general[got] = calls.start[o.call_row[got]]
        assert chunked.tolist() == by_sorting.tolist() == general.tolist() == o.launch.tolist()
        assert int(got.sum()) > 0 and (chunked != o.start).any()
    finally:
        trace.close()


def test_keys_that_do_not_rise_go_to_the_sort():
    pid = np.array([0, 0, 1, 1], dtype=np.int16)
    assert ops._keys_rise(pid, np.array([1, 2, 1, 5]))
    assert not ops._keys_rise(pid, np.array([1, 1, 1, 5]))  # a key twice
    assert not ops._keys_rise(pid, np.array([2, 1, 1, 5]))  # not in order
    assert not ops._keys_rise(pid, np.array([-1, 1, 1, 5]))  # a missing id
    assert not ops._keys_rise(np.array([1, 0], dtype=np.int16), np.array([1, 2]))  # codes fall


def test_two_processes_missing_ids_and_ids_without_a_call(monkeypatch):
    from engine.reports.base import NULL

    monkeypatch.setattr(ops, "_CHUNK", 3)
    rng = np.random.default_rng(7)
    # calls: process 0 then process 1 (codes rise), ids rising within each, some ids skipped
    cpid = np.array([0] * 40 + [1] * 30, dtype=np.int16)
    ccorr = np.concatenate([np.sort(rng.choice(200, 40, replace=False)),
                            np.sort(rng.choice(200, 30, replace=False))]).astype(np.int64)
    cstart = rng.integers(0, 10**9, 70)
    o = object.__new__(ops.GpuOps)
    n = 50
    o.start = rng.integers(0, 10**9, n)
    o.pid = rng.integers(0, 3, n).astype(np.int32)  # op codes: 0, 1, 2 -> process codes 1, 0, 0
    corr = rng.integers(0, 220, n)
    corr[[4, 9]] = NULL
    o._corr_parts = [corr[:20], corr[20:]]
    lut = np.array([1, 0, 0], dtype=np.int64)
    assert ops._keys_rise(cpid, ccorr)
    want = o._launch_by_sorting(lut, cpid, ccorr, cstart)
    got = o._launch_in_chunks(lut, cpid, ccorr, cstart)
    assert want is not None and got.tolist() == want.tolist()
    assert 5 < int((got != o.start).sum()) < n  # some found, some not
