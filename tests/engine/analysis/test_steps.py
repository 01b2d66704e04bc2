"""find_steps(): the step range chosen by structure, checked against SQL on the fixtures."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest

from engine.analysis.steps import (
    find_steps,
    is_library_range,
    normalise_range,
    range_candidates,
    range_names,
    steps_per_process,
)
from engine.reports import open_report
from engine.reports.base import TABLES, ReportInfo, Trace
from tests.conftest import FIXTURES, NSYS_DIR

NAIVE = NSYS_DIR / "host_overhead_naive.sqlite"
FIXED = NSYS_DIR / "host_overhead_fixed.sqlite"


def _sql_ranges(path, text):
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL AND coalesce(s.value, n.text) = ? "
        "ORDER BY n.start", (text,)).fetchall()
    gpu = con.execute(
        "SELECT sum(k.end - k.start) FROM (SELECT start, end, correlationId, globalPid FROM "
        "CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT start, end, correlationId, globalPid FROM "
        "CUPTI_ACTIVITY_KIND_MEMSET UNION ALL SELECT start, end, correlationId, globalPid FROM "
        "CUPTI_ACTIVITY_KIND_MEMCPY) k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = "
        "k.correlationId AND (r.globalTid / 16777216) = (k.globalPid / 16777216) JOIN NVTX_EVENTS n "
        "ON r.start >= n.start AND r.start < n.end LEFT JOIN StringIds s ON s.id = n.textId WHERE "
        "n.eventType IN (59, 60) AND coalesce(s.value, n.text) = ?", (text,)).fetchone()[0]
    con.close()
    return rows, int(gpu)


# on the GPU the naive loop's first iteration is 1.42x the others (not warm-up); on the host it was 1.56x
@pytest.mark.parametrize(("path", "text", "warmup"), [(NAIVE, "iteration(naive)", 0),
                                                       (FIXED, "iteration(fixed)", 0)])
def test_step_range_and_gpu_coverage_match_sql(path, text, warmup) -> None:
    st = find_steps(open_report(path))
    assert st is not None
    rows, gpu = _sql_ranges(path, text)
    assert st.range_name == text and st.source == "nvtx" and st.chosen_by == "structure"
    # found from the GPU's repeating work; the NVTX range places the boundaries: each step starts on
    # the GPU inside its instance (the loop synchronizes), and the steps tile the GPU's time
    assert st.method == "gpu+nvtx" and st.count == len(rows) and st.confidence > 0.8
    assert all(p[0] <= s.start_ns <= b
               for s, p, (_a, b) in zip(st.steps, [rows[0], *rows], rows, strict=False))
    assert all(x.end_ns == y.start_ns for x, y in zip(st.steps, st.steps[1:], strict=False))
    assert st.warmup_count == warmup
    host = float(np.median([b - a for a, b in rows][warmup:]))
    assert st.steady_median_ns == pytest.approx(host, rel=0.02)
    assert st.host_steady_median_ns == pytest.approx(host, rel=0.02)
    assert st.gpu_ns <= gpu * 1.01 or gpu == 0


def test_user_range_and_unknown_range() -> None:
    t = open_report(NAIVE)
    st = find_steps(t, range_name="upload")
    assert st is not None and st.range_name == "upload" and st.chosen_by == "user" and st.count == 5
    assert find_steps(t, range_name="no such range") is None
    assert range_names(t)[0] == "iteration(naive)"


def test_no_repeating_range() -> None:
    from engine.analysis.stepfind import no_steps_reason

    t = open_report(NSYS_DIR / "torch_sdpa_gemm.sqlite")
    assert find_steps(t) is None  # 20 identical kernels with nothing that marks a loop iteration
    assert "nothing in a repeat marks a loop iteration" in no_steps_reason(t)
    # the Kineto trace's benchmark loop copies its result to the host and waits, 5 times: steps
    k = find_steps(open_report(FIXTURES / "torch" / "torch_sdpa_trace.json"))
    assert k is not None and k.method == "gpu" and k.count >= 4


@pytest.mark.parametrize(("raw", "norm"), [
    ("train_step 12", "train_step N"), ("ProfilerStep#3", "ProfilerStep#N"), ("sdpa iter 0", "sdpa iter N"),
    ("iteration(naive)", "iteration(naive)"), ("42", "42")])
def test_normalise(raw, norm) -> None:
    assert normalise_range(raw) == norm


def test_library_ranges() -> None:
    assert is_library_range("NCCL:ncclAllReduce")
    assert is_library_range("aten::to, op_id = N")
    assert is_library_range("cuBLAS:cublasCreate_v2")
    assert not is_library_range("train_step N")
    assert not is_library_range("ProfilerStep#N")


class _Tables(Trace):
    """A hand-made trace for the edge cases the recordings cannot pin down."""

    def __init__(self, tables: dict[str, pd.DataFrame]) -> None:
        super().__init__(ReportInfo(path=__import__("pathlib").Path("hand-made"), kind="nsys-sqlite"))
        self._tables = tables

    def _load(self, name, columns):
        df = self._tables.get(name)
        if df is None:
            return None
        return df.reindex(columns=list(TABLES[name][0]))


def _nvtx(rows):
    return pd.DataFrame([{"start": a, "end": b, "eventType": 59, "text": t, "domain": d, "pid": p, "tid": p}
                         for a, b, t, d, p in rows])


def _kernels(rows):
    return pd.DataFrame([{"start": a, "end": b, "deviceId": 0, "streamId": 7, "correlationId": c, "pid": p}
                         for a, b, c, p in rows])


def _api(rows):
    return pd.DataFrame([{"start": a, "end": a + 5, "correlationId": c, "pid": p,
                          "name": "cudaLaunchKernel", "baseName": "cudaLaunchKernel"} for a, c, p in rows])


def test_numbered_steps_beat_library_ranges_and_the_outer_epoch() -> None:
    nv = [(0, 1000, "epoch 0", "", 1)]
    k, a = [], []
    for i in range(10):
        s = 10 + i * 95
        nv.append((s, s + 90, f"train_step {i}", "", 1))
        for j in range(3):  # NCCL ranges repeat 30 times, with a little GPU work each
            nv.append((s + 10 + j * 20, s + 15 + j * 20, "ncclAllReduce", "NCCL", 1))
            a.append((s + 11 + j * 20, 100 * i + j, 1))
            k.append((s + 12 + j * 20, s + 14 + j * 20, 100 * i + j, 1))
        a.append((s + 80, 100 * i + 50, 1))
        k.append((s + 81, s + 89, 100 * i + 50, 1))
    nv.append((1000, 1500, "epoch 1", "", 1))
    t = _Tables({"nvtx": _nvtx(nv), "kernels": _kernels(k), "api": _api(a)})
    st = find_steps(t)
    assert st is not None and st.range_name == "train_step N" and st.count == 10
    names = {c.name: c for c in range_candidates(t)}
    assert names["NCCL:ncclAllReduce"].library and names["NCCL:ncclAllReduce"].count == 30
    # Library ranges are used when nothing else repeats.
    only_nccl = _Tables({"nvtx": _nvtx([r for r in nv if r[3] == "NCCL"]), "kernels": _kernels(k),
                         "api": _api(a)})
    st2 = find_steps(only_nccl)
    # library ranges never become steps (NCCL, aten:: per-op ranges)
    assert st2 is None or st2.source != "library"


def test_warmup_and_one_set_per_process_with_mixed_pid_types() -> None:
    nv, k, a = [], [], []
    for p, pid in enumerate((11, "22")):  # Kineto traces mix int and str pids
        for i in range(6):
            s = 1000 * i + p
            d = 900 if i == 0 else 100
            nv.append((s, s + d, f"ProfilerStep#{i}", "", pid))
            a.append((s + 1, i, pid))
            k.append((s + 2, s + 50, i, str(pid)))
    t = _Tables({"nvtx": _nvtx(nv), "kernels": _kernels(k), "api": _api(a)})
    every = steps_per_process(t)
    assert sorted(s.pid for s in every) == ["11", "22"]
    for s in every:
        # timed on the GPU: a step every 1000 ns (the job's pace), whatever the host range's length
        assert s.source == "profiler" and s.count == 6 and s.method == "nvtx"
        assert s.steady_median_ns == 1000 and s.host_steady_median_ns == 1000 and s.gpu_ns == 6 * 48
    assert find_steps(t, pid=22) is not None and find_steps(t, pid=22).pid == "22"


def _launch_trace(busy_stream: bool) -> _Tables:
    """100 steps of 3 tiny kernels (2 µs) launched by 10 µs calls; optionally a long kernel on
    another stream keeps the GPU busy the whole time (the launch overhead is then hidden)."""
    nv, k, a = [], [], []
    for i in range(100):
        s = 1000 + i * 100
        nv.append((s, s + 100, f"step {i}", "", 1))
        for j in range(3):
            c = i * 10 + j
            a.append((s + j * 30, c, 1))
            k.append((s + j * 30 + 12, s + j * 30 + 14, c, 1))
    kern = _kernels(k)
    if busy_stream:
        kern = pd.concat([kern, pd.DataFrame([{"start": 900, "end": 11_200, "deviceId": 0, "streamId": 9,
                                               "correlationId": 99_999, "pid": 1}])], ignore_index=True)
        a.append((899, 99_999, 1))
    api = _api(a).assign(end=lambda d: d["start"] + 10)
    return _Tables({"nvtx": _nvtx(nv), "kernels": kern, "api": api})


def test_launch_bound_only_while_the_gpu_has_idle_time_and_never_more_than_it() -> None:
    from engine.analysis.findings.overview import overview

    s, found = overview(_launch_trace(busy_stream=False))
    lb = next(f for f in found if f.id == "nsys.launch-bound")
    it = s.iterations
    busy, idle = it.gpu_busy_per_step_ns, it.steady_median_ns - it.gpu_busy_per_step_ns
    # the host only launches (calls 20 ns apart): all of the GPU's idle time is launch pacing, which
    # a CUDA graph removes; at least the launch calls' excess over their kernels (3 × (10 − 2) ns)
    assert lb.gain.per_step_ns == pytest.approx(idle, rel=0.02)
    assert lb.gain.per_step_ns >= 3 * (10 - 2)
    assert lb.gain.per_step_ns <= idle and busy == pytest.approx(6)
    # The same launches while another stream keeps the GPU 100 % busy: nothing to gain.
    s2, found2 = overview(_launch_trace(busy_stream=True))
    assert s2.gpu.busy_pct_of_wall > 99
    assert not any(f.id in ("nsys.launch-bound", "nsys.gpu-idle") for f in found2)
